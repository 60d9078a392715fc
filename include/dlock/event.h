/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/event.h - dlock's loop driven by a libevent 2 event_base. Header
 * only: it needs <event2/event.h> and the dlock headers; libdlock itself
 * does not link libevent.
 *
 *	dlock_event *de;
 *	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
 *	struct event_base *base = event_base_new();
 *
 *	dlock_event_new(&de, base);
 *	o.loop = dlock_event_loop(de);       // no dlock thread: all of it runs here
 *	dlock_client_new(&c, "redis://127.0.0.1:6379", &o);
 *	dlock_lock_new(&l, c, "job:42", NULL);
 *	dlock_lock_acquire_async(NULL, l, owner, 0, DLOCK_LEASE_WATCHDOG, on_acquired, NULL);
 *	event_base_dispatch(base);           // renews while you hold it
 *	// later, from any callback (a libevent one or a dlock one):
 *	dlock_lock_free(l); dlock_client_free(c); dlock_event_free(de);
 *
 * Each descriptor dlock watches gets a persistent event, deleted the
 * moment dlock stops watching it; dlock's one timer is an evtimer.
 *
 * Lifetime: the adapter's events keep event_base_dispatch() going for as
 * long as it exists. dlock watches the descriptor through which operations
 * start from dlock_event_new() to dlock_event_free(), and a watchdog hold
 * must be renewed for as long as it is held. dlock_event_free() deletes
 * them; the dispatch returns once nothing of yours is pending either. All
 * of it on the thread that runs the event_base (dlock/loop.h).
 */
#ifndef DLOCK_EVENT_H
#define DLOCK_EVENT_H

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "errors.h"
#include "loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The adapter: a dlock loop and the events that drive it. */
typedef struct dlock_event {
	dlock_loop *loop;
	struct event_base *base;
	struct event *timer;
	struct event **watches; /* by descriptor */
	int nwatches;
	int error; /* DLOCK_ENOMEM or DLOCK_ESYS: a descriptor could not be watched */
} dlock_event;

static inline void dlock_event__on_fd(evutil_socket_t fd, short events, void *arg)
{
	dlock_event *de = (dlock_event *)arg;

	/* libevent reports an error or hang-up as both. */
	dlock_loop_fd_ready(de->loop, (int)fd,
			((events & EV_READ) ? DLOCK_POLL_IN : 0) |
					((events & EV_WRITE) ? DLOCK_POLL_OUT : 0));
}

/* Room for descriptor fd in the table; 0, or -1 when out of memory. */
static inline int dlock_event__room(dlock_event *de, int fd)
{
	int n = de->nwatches ? de->nwatches : 64;
	struct event **p;

	if (fd < de->nwatches)
		return 0;
	while (n <= fd)
		n *= 2;
	p = (struct event **)realloc(de->watches, (size_t)n * sizeof(*p));
	if (p == NULL)
		return -1;
	memset(p + de->nwatches, 0, (size_t)(n - de->nwatches) * sizeof(*p));
	de->watches = p;
	de->nwatches = n;
	return 0;
}

/* dlock_loop_options.watch_fd. event_free() takes the descriptor out of the
 * backend at once, so it may be closed when this returns; an event may be
 * freed from within its own callback. A descriptor that cannot be watched
 * (out of memory) leaves what waits on it to end at its deadline. */
static inline void dlock_event__watch_fd(void *data, int fd, int what)
{
	dlock_event *de = (dlock_event *)data;
	short events = (short)(EV_PERSIST | ((what & DLOCK_POLL_IN) ? EV_READ : 0) |
			       ((what & DLOCK_POLL_OUT) ? EV_WRITE : 0));
	struct event *ev;

	if (fd < de->nwatches && de->watches[fd] != NULL) {
		ev = de->watches[fd];
		if (what != 0 && event_get_events(ev) == events)
			return;
		event_free(ev); /* a new mask needs a new event */
		de->watches[fd] = NULL;
	}
	if (what == 0)
		return;
	ev = NULL;
	if (dlock_event__room(de, fd) == 0)
		ev = event_new(de->base, fd, events, dlock_event__on_fd, de);
	if (ev == NULL || event_add(ev, NULL) < 0) {
		if (de->error == 0)
			de->error = ev == NULL ? DLOCK_ENOMEM : DLOCK_ESYS;
		if (ev != NULL)
			event_free(ev);
		return;
	}
	de->watches[fd] = ev;
}

static inline void dlock_event__on_timer(evutil_socket_t fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	dlock_loop_timeout(((dlock_event *)arg)->loop);
}

/* dlock_loop_options.set_timer: one shot; 0 fires on the base's next turn.
 * Armed from a callback it counts from libevent's cached time, so it may
 * fire a little early: dlock then asks again for the rest. */
static inline void dlock_event__set_timer(void *data, int64_t ms)
{
	dlock_event *de = (dlock_event *)data;
	struct timeval tv;

	if (ms < 0) {
		evtimer_del(de->timer);
		return;
	}
	tv.tv_sec = ms / 1000;
	tv.tv_usec = ms % 1000 * 1000;
	evtimer_add(de->timer, &tv);
}

static inline void dlock_event__drop(dlock_event *de)
{
	for (int fd = 0; fd < de->nwatches; fd++)
		if (de->watches[fd] != NULL)
			event_free(de->watches[fd]);
	free(de->watches);
	if (de->timer != NULL)
		event_free(de->timer);
	free(de);
}

/* dlock_loop_options.closed: the dlock loop is gone (freed with its last
 * client): the events go too. */
static inline void dlock_event__closed(void *data)
{
	dlock_event__drop((dlock_event *)data);
}

/**
 * Make a dlock loop driven by `base`: open clients on dlock_event_loop(*out).
 * 0, DLOCK_ENOMEM, DLOCK_ESYS (libevent could not watch dlock's
 * descriptor), or dlock_loop_new()'s errors.
 */
static inline int dlock_event_new(dlock_event **out, struct event_base *base)
{
	dlock_loop_options o = DLOCK_LOOP_OPTIONS_INIT;
	dlock_event *de;
	int rc;

	if (out == NULL || base == NULL)
		return DLOCK_EINVAL;
	*out = NULL;
	de = (dlock_event *)calloc(1, sizeof(*de));
	if (de == NULL)
		return DLOCK_ENOMEM;
	de->base = base;
	de->timer = evtimer_new(base, dlock_event__on_timer, de);
	if (de->timer == NULL) {
		free(de);
		return DLOCK_ENOMEM;
	}
	o.watch_fd = dlock_event__watch_fd;
	o.set_timer = dlock_event__set_timer;
	o.userdata = de;
	o.closed = dlock_event__closed;
	rc = dlock_loop_new(&de->loop, &o); /* watches its wake-up descriptor */
	if (rc == 0 && de->error != 0) {
		rc = de->error;
		dlock_loop_free(de->loop); /* closed: drops de */
		return rc;
	}
	if (rc < 0) {
		dlock_event__drop(de);
		return rc;
	}
	*out = de;
	return 0;
}

/** The dlock loop to open clients on (dlock_client_options.loop). */
static inline dlock_loop *dlock_event_loop(const dlock_event *de)
{
	return de->loop;
}

/**
 * Free the adapter and its dlock loop, from anywhere on the loop's thread:
 * a libevent callback, outside the dispatch, or a dlock callback (an
 * operation's, a lost callback). The loop and the events go once the
 * clients opened on it are freed too (before or after), and the dlock call
 * that ran the callback returned; until then they keep driving those
 * clients. Accepts NULL.
 */
static inline void dlock_event_free(dlock_event *de)
{
	if (de != NULL)
		dlock_loop_free(de->loop); /* then options.closed drops de */
}

#ifdef __cplusplus
}
#endif

#endif
