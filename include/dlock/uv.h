/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/uv.h - dlock's loop driven by a libuv loop. Header only: it needs
 * <uv.h> and the dlock headers; libdlock itself does not link libuv.
 *
 *	dlock_uv *du;
 *	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
 *
 *	dlock_uv_new(&du, uv_default_loop());
 *	o.loop = dlock_uv_loop(du);          // no dlock thread: all of it runs here
 *	dlock_client_new(&c, "redis://127.0.0.1:6379", &o);
 *	dlock_lock_new(&l, c, "job:42", NULL);
 *	dlock_lock_acquire_async(NULL, l, owner, 0, DLOCK_LEASE_WATCHDOG, on_acquired, NULL);
 *	uv_run(uv_default_loop(), UV_RUN_DEFAULT);   // renews while you hold it
 *	// later, from any callback (a libuv one or a dlock one):
 *	dlock_lock_free(l); dlock_client_free(c); dlock_uv_free(du);
 *
 * Each descriptor dlock watches gets a uv_poll_t, made when it is first
 * watched and stopped (then closed) the moment dlock stops watching it;
 * dlock's one timer is a uv_timer_t.
 *
 * Lifetime: as an active handle does, the adapter keeps uv_run() going
 * for as long as it exists. dlock watches the descriptor through which
 * operations start from dlock_uv_new() to dlock_uv_free(), and a watchdog
 * hold must be renewed for as long as it is held, so no handle is unref'd
 * (an unref'd timer would let uv_run() return with a renewal due).
 * dlock_uv_free() closes them; uv_run() returns once they are closed and
 * nothing of yours is active. All of it on the thread that runs the uv
 * loop (dlock/loop.h).
 */
#ifndef DLOCK_UV_H
#define DLOCK_UV_H

#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "errors.h"
#include "loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One watched descriptor. */
typedef struct dlock_uv__watch {
	uv_poll_t poll; /* first: the handle is the watch */
	struct dlock_uv *du;
	int fd, what;
} dlock_uv__watch;

/** The adapter: a dlock loop and the libuv handles that drive it. */
typedef struct dlock_uv {
	dlock_loop *loop;
	uv_loop_t *uv;
	uv_timer_t timer;
	dlock_uv__watch **watches; /* by descriptor */
	int nwatches;
	int open_handles; /* whose close callback has not come yet */
	int freed; /* its handles are closing: the last close callback frees it */
	int error; /* libuv's error for the first descriptor that could not be watched */
} dlock_uv;

static inline void dlock_uv__closed(uv_handle_t *h)
{
	dlock_uv *du;

	if (h->type == UV_POLL) {
		du = ((dlock_uv__watch *)h)->du;
		free(h);
	} else {
		du = (dlock_uv *)h->data;
	}
	/* The last handle closed after dlock_uv_free(): nothing refers to it. */
	if (--du->open_handles == 0 && du->freed)
		free(du);
}

static inline void dlock_uv__on_poll(uv_poll_t *h, int status, int events)
{
	dlock_uv__watch *w = (dlock_uv__watch *)h;
	dlock_uv *du = w->du;
	int fd = w->fd, what = 0;

	/* An error (libuv has stopped the handle): dlock's next read or write
	 * on it finds out which. */
	if (status < 0 || (events & UV_DISCONNECT))
		what = DLOCK_POLL_IN | DLOCK_POLL_OUT;
	if (events & UV_READABLE)
		what |= DLOCK_POLL_IN;
	if (events & UV_WRITABLE)
		what |= DLOCK_POLL_OUT;
	dlock_loop_fd_ready(du->loop, fd, what);
	/* dlock still wants it (it did not say 0 meanwhile): watch it again. */
	if (status < 0 && fd < du->nwatches && du->watches[fd] == w &&
			!uv_is_active((uv_handle_t *)h))
		uv_poll_start(h, (w->what & DLOCK_POLL_IN ? UV_READABLE : 0) |
						(w->what & DLOCK_POLL_OUT ? UV_WRITABLE : 0),
				dlock_uv__on_poll);
}

/* Stop at once (the descriptor may be closed when we return); the handle
 * itself goes when libuv has closed it. */
static inline void dlock_uv__unwatch(dlock_uv *du, int fd)
{
	dlock_uv__watch *w = du->watches[fd];

	du->watches[fd] = NULL;
	uv_poll_stop(&w->poll);
	uv_close((uv_handle_t *)&w->poll, dlock_uv__closed);
}

/* The descriptor's watch, made on first use; NULL (du->error set) when it
 * cannot be. */
static inline dlock_uv__watch *dlock_uv__watch_of(dlock_uv *du, int fd)
{
	dlock_uv__watch *w;
	int rc;

	if (fd >= du->nwatches) {
		int n = du->nwatches ? du->nwatches : 64;
		dlock_uv__watch **p;

		while (n <= fd)
			n *= 2;
		p = (dlock_uv__watch **)realloc(du->watches, (size_t)n * sizeof(*p));
		if (p == NULL) {
			du->error = du->error ? du->error : UV_ENOMEM;
			return NULL;
		}
		memset(p + du->nwatches, 0, (size_t)(n - du->nwatches) * sizeof(*p));
		du->watches = p;
		du->nwatches = n;
	}
	if (du->watches[fd] != NULL)
		return du->watches[fd];
	w = (dlock_uv__watch *)calloc(1, sizeof(*w));
	rc = w == NULL ? UV_ENOMEM : uv_poll_init(du->uv, &w->poll, fd);
	if (rc < 0) {
		du->error = du->error ? du->error : rc;
		free(w);
		return NULL;
	}
	w->du = du;
	w->fd = fd;
	du->open_handles++;
	du->watches[fd] = w;
	return w;
}

/* dlock_loop_options.watch_fd. A descriptor that cannot be watched (out of
 * memory) leaves what waits on it to end at its deadline. */
static inline void dlock_uv__watch_fd(void *data, int fd, int what)
{
	dlock_uv *du = (dlock_uv *)data;
	dlock_uv__watch *w;
	int rc;

	if (what == 0) {
		if (fd < du->nwatches && du->watches[fd] != NULL)
			dlock_uv__unwatch(du, fd);
		return;
	}
	if ((w = dlock_uv__watch_of(du, fd)) == NULL)
		return;
	w->what = what;
	rc = uv_poll_start(&w->poll, (what & DLOCK_POLL_IN ? UV_READABLE : 0) |
					     (what & DLOCK_POLL_OUT ? UV_WRITABLE : 0),
			dlock_uv__on_poll);
	if (rc < 0 && du->error == 0)
		du->error = rc;
}

static inline void dlock_uv__on_timer(uv_timer_t *t)
{
	dlock_loop_timeout(((dlock_uv *)t->data)->loop);
}

/* dlock_loop_options.set_timer: one shot; 0 fires on the loop's next turn.
 * Armed from a callback it counts from libuv's cached time, so it may fire
 * a little early: dlock then asks again for the rest. */
static inline void dlock_uv__set_timer(void *data, int64_t ms)
{
	dlock_uv *du = (dlock_uv *)data;

	if (ms < 0)
		uv_timer_stop(&du->timer);
	else
		uv_timer_start(&du->timer, dlock_uv__on_timer, (uint64_t)ms, 0);
}

/* Close every handle; the last close callback frees du. */
static inline void dlock_uv__close(dlock_uv *du)
{
	for (int fd = 0; fd < du->nwatches; fd++)
		if (du->watches[fd] != NULL)
			dlock_uv__unwatch(du, fd);
	free(du->watches);
	du->watches = NULL;
	du->nwatches = 0;
	du->freed = 1;
	uv_close((uv_handle_t *)&du->timer, dlock_uv__closed);
}

/* dlock_loop_options.closed: the dlock loop is gone (freed with its last
 * client): close the handles; the last close callback frees du. */
static inline void dlock_uv__loop_closed(void *data)
{
	dlock_uv *du = (dlock_uv *)data;

	du->loop = NULL;
	dlock_uv__close(du);
}

/**
 * Make a dlock loop driven by `uv`: open clients on dlock_uv_loop(*out).
 * 0, DLOCK_ENOMEM, DLOCK_ESYS (libuv could not watch dlock's descriptor),
 * or dlock_loop_new()'s errors. On failure run the uv loop on too: the
 * handles made are closed, and their close callbacks free the rest.
 */
static inline int dlock_uv_new(dlock_uv **out, uv_loop_t *uv)
{
	dlock_loop_options o = DLOCK_LOOP_OPTIONS_INIT;
	dlock_uv *du;
	int rc;

	if (out == NULL || uv == NULL)
		return DLOCK_EINVAL;
	*out = NULL;
	du = (dlock_uv *)calloc(1, sizeof(*du));
	if (du == NULL)
		return DLOCK_ENOMEM;
	du->uv = uv;
	uv_timer_init(uv, &du->timer);
	du->timer.data = du;
	du->open_handles = 1;
	o.watch_fd = dlock_uv__watch_fd;
	o.set_timer = dlock_uv__set_timer;
	o.userdata = du;
	o.closed = dlock_uv__loop_closed;
	rc = dlock_loop_new(&du->loop, &o); /* watches its wake-up descriptor */
	if (rc == 0 && du->error != 0) {
		rc = du->error == UV_ENOMEM ? DLOCK_ENOMEM : DLOCK_ESYS;
		dlock_loop_free(du->loop); /* closed: closes the handles */
		return rc;
	}
	if (rc < 0) {
		dlock_uv__close(du);
		return rc;
	}
	*out = du;
	return 0;
}

/** The dlock loop to open clients on (dlock_client_options.loop). */
static inline dlock_loop *dlock_uv_loop(const dlock_uv *du)
{
	return du->loop;
}

/**
 * Free the adapter and its dlock loop, from anywhere on the uv loop's
 * thread: a libuv callback, outside uv_run(), or a dlock callback (an
 * operation's, a lost callback). The dlock loop goes once the clients
 * opened on it are freed too (before or after) and the dlock call that ran
 * the callback returned; until then it keeps driving those clients. Then
 * the handles are closed, and uv_run() returns once their close callbacks
 * (which free the rest) have run and nothing of yours is active - no timer
 * bounce needed. Accepts NULL.
 */
static inline void dlock_uv_free(dlock_uv *du)
{
	if (du != NULL)
		dlock_loop_free(du->loop); /* then options.closed closes the handles */
}

#ifdef __cplusplus
}
#endif

#endif
