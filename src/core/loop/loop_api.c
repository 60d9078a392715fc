/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The caller's loop (dlock/loop.h): the hooks and epoll backends, and the
 * calls that drive them.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "dlock/client.h"
#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"
#include "core/base/sys.h"
#include "core/loop/loop.h"
#include "core/base/time.h"

int dlock_loop_options_init(dlock_loop_options *opts, unsigned int version)
{
	if (opts == NULL || version == 0 || version > DLOCK_LOOP_OPTIONS_VERSION)
		return dlock__seterr(DLOCK_EINVAL, "loop options: unknown version %u (this library knows 1..%u)",
				version, DLOCK_LOOP_OPTIONS_VERSION);
	memset(opts, 0, sizeof(*opts));
	opts->version = version;
	return 0;
}

/* The epoll backend: every watched descriptor and a timerfd in one set. */
static int make_epoll(dlock__loop *l)
{
	struct epoll_event ev;
	size_t i;

	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->epfd < 0 || l->timerfd < 0)
		return dlock__seterr(DLOCK_ESYS, "loop: epoll: %s", strerror(errno));
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.fd = l->timerfd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->timerfd, &ev) < 0)
		return dlock__seterr(DLOCK_ESYS, "loop: epoll: %s", strerror(errno));
	l->backend = DLOCK__EPOLL;
	for (i = 0; i < l->nios; i++) { /* the wake descriptor, watched before */
		ev.data.fd = l->ios[i]->fd;
		epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->ios[i]->fd, &ev);
	}
	dlock__loop_index(l);
	return 0;
}

static void use_hooks(dlock__loop *l, const dlock_loop_options *o)
{
	size_t i;

	l->hooks = *o;
	l->backend = DLOCK__HOOKS;
	for (i = 0; i < l->nios; i++)
		o->watch_fd(o->data, l->ios[i]->fd, DLOCK_POLL_IN);
	dlock__loop_index(l);
}

int dlock_loop_new(dlock_loop **out, const dlock_loop_options *opts)
{
	dlock__loop *l;
	int hooks = opts != NULL && (opts->watch_fd != NULL || opts->set_timer != NULL);
	int rc;

	if (out == NULL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_loop_new: NULL out");
	*out = NULL;
	if (opts != NULL && (opts->version == 0 || opts->version > DLOCK_LOOP_OPTIONS_VERSION))
		return dlock__seterr(DLOCK_EINVAL, "loop options: unknown version %u (this library knows 1..%u)",
				opts->version, DLOCK_LOOP_OPTIONS_VERSION);
	if (hooks && (opts->watch_fd == NULL || opts->set_timer == NULL))
		return dlock__seterr(DLOCK_EINVAL, "loop options: give both watch_fd and set_timer, or neither");
	l = dlock__calloc(1, sizeof(*l));
	if (l == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "loop: out of memory");
	rc = dlock__loop_init(l);
	if (rc == 0 && !hooks)
		rc = make_epoll(l);
	if (rc < 0) {
		dlock__loop_destroy(l);
		dlock__free(l);
		return rc;
	}
	if (hooks)
		use_hooks(l, opts);
	l->public_ = 1;
	*out = l;
	return 0;
}

int dlock_loop_free(dlock_loop *l)
{
	if (l == NULL)
		return 0;
	if (l->clients > 0)
		return dlock__seterr(DLOCK_EBUSY, "loop: %d client(s) opened on it are not closed",
				l->clients);
	dlock__loop_destroy(l);
	dlock__free(l);
	return 0;
}

static short events_of(int what)
{
	short ev = 0;

	if (what & DLOCK_POLL_IN)
		ev |= POLLIN;
	if (what & DLOCK_POLL_OUT)
		ev |= POLLOUT;
	return ev ? ev : POLLIN | POLLOUT;
}

/* A descriptor is ready: hand it to its io. 0, or -1 when none watches it. */
static int fd_ready(dlock__loop *l, int fd, short revents)
{
	dlock__io *io = dlock__loop_io_of(l, fd);

	if (io == NULL)
		return -1;
	l->in_run++;
	io->ready(io, revents);
	l->in_run--;
	return 0;
}

int dlock_loop_fd_ready(dlock_loop *l, int fd, int what)
{
	if (l == NULL || fd < 0)
		return dlock__seterr(DLOCK_EINVAL, "dlock_loop_fd_ready: NULL loop or bad descriptor");
	atomic_store(&l->driver, dlock_thread_id());
	(void)fd_ready(l, fd, events_of(what));
	dlock__loop_dispatch_due(l);
	return 0;
}

int dlock_loop_timeout(dlock_loop *l)
{
	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_loop_timeout: NULL loop");
	atomic_store(&l->driver, dlock_thread_id());
	l->timer_asked = DLOCK__NEVER; /* the caller's timer is spent */
	dlock__loop_dispatch_due(l);
	return 0;
}

int dlock_loop_fd(const dlock_loop *l)
{
	if (l == NULL || l->backend != DLOCK__EPOLL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_loop_fd: not a loop made without callbacks");
	return l->epfd;
}

/* The wait is the seam's poll on the epoll descriptor (the one descriptor
 * wait of the library); epoll_wait then only collects, never waits. */
static int wait_epoll(dlock_loop *l, struct epoll_event *ev, int max, int wait)
{
	struct pollfd p = { .fd = l->epfd, .events = POLLIN };

	if (wait != 0) {
		int n = dlock__sys_get()->poll(&p, 1, wait);

		if (n <= 0)
			return n;
	}
	return epoll_wait(l->epfd, ev, max, 0);
}

int dlock_loop_run(dlock_loop *l, int64_t timeout_ms)
{
	struct epoll_event ev[64];
	int n, i, wait;
	int64_t due;

	if (l == NULL || l->backend != DLOCK__EPOLL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_loop_run: not a loop made without callbacks");
	atomic_store(&l->driver, dlock_thread_id());
	due = dlock__loop_next_due(l);
	wait = timeout_ms < 0 ? -1 : (int)(timeout_ms > INT32_MAX ? INT32_MAX : timeout_ms);
	if (due != DLOCK__NEVER && (wait < 0 || dlock__ms_until(due) < wait))
		wait = dlock__ms_until(due);
	n = wait_epoll(l, ev, 64, wait);
	if (n < 0 && errno != EINTR)
		return dlock__seterr(DLOCK_ESYS, "loop: epoll_wait: %s", strerror(errno));
	for (i = 0; i < n; i++) {
		uint64_t v;

		if (ev[i].data.fd == l->timerfd) {
			while (read(l->timerfd, &v, sizeof(v)) > 0)
				;
			l->timer_asked = DLOCK__NEVER;
			continue;
		}
		if (fd_ready(l, ev[i].data.fd,
				(short)(((ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) ? POLLIN : 0) |
						((ev[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) ? POLLOUT : 0))) < 0)
			dlock__loop_unwatched(l, ev[i].data.fd);
	}
	dlock__loop_dispatch_due(l);
	return l->pending > 0;
}
