/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The libevent adapter (dlock/libevent.h): dlock_loop_options' callbacks
 * wired to a persistent event per watched descriptor and one evtimer. A
 * user of the library like any other: it includes only the public
 * headers, and is built into libdlock-libevent.a, never into libdlock.
 */
#include <stdlib.h>
#include <string.h>

#include <dlock/errors.h>
#include <dlock/libevent.h>

struct dlock_libevent {
	dlock_loop *loop;
	struct event_base *base;
	struct event *timer;
	struct event **watches; /* by descriptor */
	int nwatches;
	int error; /* DLOCK_ENOMEM or DLOCK_ESYS: a descriptor could not be watched */
};

static void on_fd(evutil_socket_t fd, short events, void *arg)
{
	dlock_libevent *de = arg;

	/* libevent reports an error or hang-up as both. */
	dlock_loop_fd_ready(de->loop, (int)fd,
			((events & EV_READ) ? DLOCK_POLL_IN : 0) | ((events & EV_WRITE) ? DLOCK_POLL_OUT : 0));
}

/* Room for descriptor fd in the table; 0, or -1 when out of memory. */
static int room(dlock_libevent *de, int fd)
{
	int n = de->nwatches ? de->nwatches : 64;
	struct event **p;

	if (fd < de->nwatches)
		return 0;
	while (n <= fd)
		n *= 2;
	p = realloc(de->watches, (size_t)n * sizeof(*p));
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
static void watch_fd(void *userdata, int fd, int what)
{
	dlock_libevent *de = userdata;
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
	if (room(de, fd) == 0)
		ev = event_new(de->base, fd, events, on_fd, de);
	if (ev == NULL || event_add(ev, NULL) < 0) {
		if (de->error == 0)
			de->error = ev == NULL ? DLOCK_ENOMEM : DLOCK_ESYS;
		if (ev != NULL)
			event_free(ev);
		return;
	}
	de->watches[fd] = ev;
}

static void on_timer(evutil_socket_t fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	dlock_loop_timeout(((dlock_libevent *)arg)->loop);
}

/* dlock_loop_options.set_timer: one shot; 0 fires on the base's next turn.
 * Armed from a callback it counts from libevent's cached time, so it may
 * fire a little early: dlock then asks again for the rest. */
static void set_timer(void *userdata, int64_t ms)
{
	dlock_libevent *de = userdata;
	struct timeval tv;

	if (ms < 0) {
		evtimer_del(de->timer);
		return;
	}
	tv.tv_sec = ms / 1000;
	tv.tv_usec = ms % 1000 * 1000;
	evtimer_add(de->timer, &tv);
}

static void drop(dlock_libevent *de)
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
static void loop_closed(void *userdata)
{
	drop(userdata);
}

int dlock_libevent_options_init(dlock_libevent_options *opts, unsigned int version)
{
	if (opts == NULL || version == 0 || version > DLOCK_LIBEVENT_OPTIONS_VERSION)
		return DLOCK_EINVAL;
	memset(opts, 0, sizeof(*opts));
	opts->version = version;
	return 0;
}

int dlock_libevent_new(dlock_libevent **out, struct event_base *base,
		const dlock_libevent_options *opts)
{
	dlock_loop_options o = DLOCK_LOOP_OPTIONS_INIT;
	dlock_libevent *de;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (out == NULL || base == NULL ||
			(opts != NULL && (opts->version == 0 || opts->version > DLOCK_LIBEVENT_OPTIONS_VERSION)))
		return DLOCK_EINVAL;
	if ((de = calloc(1, sizeof(*de))) == NULL)
		return DLOCK_ENOMEM;
	de->base = base;
	de->timer = evtimer_new(base, on_timer, de);
	if (de->timer == NULL) {
		free(de);
		return DLOCK_ENOMEM;
	}
	o.watch_fd = watch_fd;
	o.set_timer = set_timer;
	o.userdata = de;
	o.closed = loop_closed;
	rc = dlock_loop_new(&de->loop, &o); /* watches its wake-up descriptor */
	if (rc == 0 && de->error != 0) {
		rc = de->error;
		dlock_loop_free(de->loop); /* closed: drops de */
		return rc;
	}
	if (rc < 0) {
		drop(de);
		return rc;
	}
	*out = de;
	return 0;
}

dlock_loop *dlock_libevent_loop(const dlock_libevent *de)
{
	return de != NULL ? de->loop : NULL;
}

void dlock_libevent_free(dlock_libevent *de)
{
	if (de != NULL)
		dlock_loop_free(de->loop); /* then options.closed drops de */
}
