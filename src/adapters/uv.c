/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The libuv adapter (dlock/uv.h): dlock_loop_options' callbacks wired to
 * a uv_poll_t per watched descriptor and one uv_timer_t. A user of the
 * library like any other: it includes only the public headers, and is
 * built into libdlock-uv.a, never into libdlock.
 */
#include <stdlib.h>
#include <string.h>

#include <dlock/errors.h>
#include <dlock/uv.h>

/* One watched descriptor. */
typedef struct watch {
	uv_poll_t poll; /* first: the handle is the watch */
	struct dlock_uv *du;
	int fd, what;
} watch;

struct dlock_uv {
	dlock_loop *loop;
	uv_loop_t *uv;
	uv_timer_t timer;
	watch **watches; /* by descriptor */
	int nwatches;
	int open_handles; /* whose close callback has not come yet */
	int freed; /* its handles are closing: the last close callback frees it */
	int error; /* libuv's error for the first descriptor that could not be watched */
};

static void closed(uv_handle_t *h)
{
	dlock_uv *du;

	if (h->type == UV_POLL) {
		du = ((watch *)h)->du;
		free(h);
	} else {
		du = (dlock_uv *)h->data;
	}
	/* The last handle closed after dlock_uv_free(): nothing refers to it. */
	if (--du->open_handles == 0 && du->freed)
		free(du);
}

static int poll_events(int what)
{
	return (what & DLOCK_POLL_IN ? UV_READABLE : 0) | (what & DLOCK_POLL_OUT ? UV_WRITABLE : 0);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	watch *w = (watch *)h;
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
		uv_poll_start(h, poll_events(w->what), on_poll);
}

/* Stop at once (the descriptor may be closed when we return); the handle
 * itself goes when libuv has closed it. */
static void unwatch(dlock_uv *du, int fd)
{
	watch *w = du->watches[fd];

	du->watches[fd] = NULL;
	uv_poll_stop(&w->poll);
	uv_close((uv_handle_t *)&w->poll, closed);
}

/* Room for descriptor fd in the table; 0, or UV_ENOMEM. */
static int room(dlock_uv *du, int fd)
{
	int n = du->nwatches ? du->nwatches : 64;
	watch **p;

	if (fd < du->nwatches)
		return 0;
	while (n <= fd)
		n *= 2;
	p = realloc(du->watches, (size_t)n * sizeof(*p));
	if (p == NULL)
		return UV_ENOMEM;
	memset(p + du->nwatches, 0, (size_t)(n - du->nwatches) * sizeof(*p));
	du->watches = p;
	du->nwatches = n;
	return 0;
}

/* The descriptor's watch, made on first use; NULL (du->error set) when it
 * cannot be. */
static watch *watch_of(dlock_uv *du, int fd)
{
	watch *w = NULL;
	int rc;

	if ((rc = room(du, fd)) == 0 && du->watches[fd] != NULL)
		return du->watches[fd];
	if (rc == 0)
		rc = (w = calloc(1, sizeof(*w))) == NULL ? UV_ENOMEM : uv_poll_init(du->uv, &w->poll, fd);
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
static void watch_fd(void *userdata, int fd, int what)
{
	dlock_uv *du = userdata;
	watch *w;
	int rc;

	if (what == 0) {
		if (fd < du->nwatches && du->watches[fd] != NULL)
			unwatch(du, fd);
		return;
	}
	if ((w = watch_of(du, fd)) == NULL)
		return;
	w->what = what;
	rc = uv_poll_start(&w->poll, poll_events(what), on_poll);
	if (rc < 0 && du->error == 0)
		du->error = rc;
}

static void on_timer(uv_timer_t *t)
{
	dlock_loop_timeout(((dlock_uv *)t->data)->loop);
}

/* dlock_loop_options.set_timer: one shot; 0 fires on the loop's next turn.
 * Armed from a callback it counts from libuv's cached time, so it may fire
 * a little early: dlock then asks again for the rest. */
static void set_timer(void *userdata, int64_t ms)
{
	dlock_uv *du = userdata;

	if (ms < 0)
		uv_timer_stop(&du->timer);
	else
		uv_timer_start(&du->timer, on_timer, (uint64_t)ms, 0);
}

/* Close every handle; the last close callback frees du. */
static void close_all(dlock_uv *du)
{
	for (int fd = 0; fd < du->nwatches; fd++)
		if (du->watches[fd] != NULL)
			unwatch(du, fd);
	free(du->watches);
	du->watches = NULL;
	du->nwatches = 0;
	du->freed = 1;
	uv_close((uv_handle_t *)&du->timer, closed);
}

/* dlock_loop_options.closed: the dlock loop is gone (freed with its last
 * client): close the handles; the last close callback frees du. */
static void loop_closed(void *userdata)
{
	dlock_uv *du = userdata;

	du->loop = NULL;
	close_all(du);
}

int dlock_uv_options_init(dlock_uv_options *opts, unsigned int version)
{
	if (opts == NULL || version == 0 || version > DLOCK_UV_OPTIONS_VERSION)
		return DLOCK_EINVAL;
	memset(opts, 0, sizeof(*opts));
	opts->version = version;
	return 0;
}

int dlock_uv_new(dlock_uv **out, uv_loop_t *uv, const dlock_uv_options *opts)
{
	dlock_loop_options o = DLOCK_LOOP_OPTIONS_INIT;
	dlock_uv *du;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (out == NULL || uv == NULL ||
			(opts != NULL && (opts->version == 0 || opts->version > DLOCK_UV_OPTIONS_VERSION)))
		return DLOCK_EINVAL;
	if ((du = calloc(1, sizeof(*du))) == NULL)
		return DLOCK_ENOMEM;
	du->uv = uv;
	uv_timer_init(uv, &du->timer);
	du->timer.data = du;
	du->open_handles = 1;
	o.watch_fd = watch_fd;
	o.set_timer = set_timer;
	o.userdata = du;
	o.closed = loop_closed;
	rc = dlock_loop_new(&du->loop, &o); /* watches its wake-up descriptor */
	if (rc == 0 && du->error != 0) {
		rc = du->error == UV_ENOMEM ? DLOCK_ENOMEM : DLOCK_ESYS;
		dlock_loop_free(du->loop); /* closed: closes the handles */
		return rc;
	}
	if (rc < 0) {
		close_all(du);
		return rc;
	}
	*out = du;
	return 0;
}

dlock_loop *dlock_uv_loop(const dlock_uv *du)
{
	return du != NULL ? du->loop : NULL;
}

void dlock_uv_free(dlock_uv *du)
{
	if (du != NULL)
		dlock_loop_free(du->loop); /* then options.closed closes the handles */
}
