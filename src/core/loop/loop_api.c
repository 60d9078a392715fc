/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The caller's loop (dlock/loop.h): the hooks and epoll backends, and the
 * calls that drive them.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
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
	/* A version-1 caller's struct ends before `closed`. */
	memset(opts, 0, version == 1 ? offsetof(dlock_loop_options, closed) : sizeof(*opts));
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

	memcpy(&l->hooks, o, o->version == 1 ? offsetof(dlock_loop_options, closed) : sizeof(*o));
	l->backend = DLOCK__HOOKS;
	for (i = 0; i < l->nios; i++)
		o->watch_fd(o->userdata, l->ios[i]->fd, DLOCK_POLL_IN);
	dlock__loop_index(l);
}

/* Keep a failure's message on the loop (dlock_loop_errmsg); returns rc. The
 * loop's memory is the caller's even where the call takes it const: only the
 * message buffer, behind its own mutex, is written. */
static int loop_failed(const dlock__loop *l, int rc)
{
	return dlock__errbuf_record((dlock__errbuf *)&l->err, rc);
}

const char *dlock_loop_errmsg(const dlock_loop *l)
{
	return l ? dlock__errbuf_read(&l->err) : "";
}

size_t dlock_loop_errmsg_r(char *buf, size_t len, const dlock_loop *l)
{
	return l ? dlock__errbuf_read_r(buf, len, &l->err) : dlock__copy_msg(buf, len, "");
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

/* Freed, its last client gone and no call of its own under way (a free
 * from a callback): the loop goes, and tells its driver. */
static void maybe_go(dlock__loop *l)
{
	dlock_loop_options hooks = l->hooks;

	if (!l->freed || l->clients > 0 || l->in_api > 0 || l->in_run > 0)
		return;
	dlock__loop_destroy(l);
	dlock__free(l);
	if (hooks.version >= 2 && hooks.closed != NULL)
		hooks.closed(hooks.userdata);
}

void dlock_loop_free(dlock_loop *l)
{
	if (l == NULL)
		return;
	l->freed = 1;
	maybe_go(l);
}

void dlock__loop_client_gone(dlock__loop *l)
{
	l->clients--;
	maybe_go(l);
}

/* A public call that drives the loop: entered, and left (the loop may go
 * then, freed from one of its callbacks). */
static void enter(dlock__loop *l)
{
	atomic_store(&l->driver, dlock_thread_id());
	l->in_api++;
}

static int leave(dlock__loop *l, int rc)
{
	l->in_api--;
	maybe_go(l);
	return rc;
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
	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_loop_fd_ready: NULL loop");
	if (fd < 0)
		return loop_failed(l, dlock__seterr(DLOCK_EINVAL, "dlock_loop_fd_ready: bad descriptor %d",
				fd));
	enter(l);
	(void)fd_ready(l, fd, events_of(what));
	dlock__loop_dispatch_due(l);
	return leave(l, 0);
}

int dlock_loop_timeout(dlock_loop *l)
{
	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_loop_timeout: NULL loop");
	enter(l);
	l->timer_asked = DLOCK__NEVER; /* the caller's timer is spent */
	dlock__loop_dispatch_due(l);
	return leave(l, 0);
}

int dlock_loop_fd(const dlock_loop *l)
{
	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_loop_fd: NULL loop");
	if (l->backend != DLOCK__EPOLL)
		return loop_failed(l, dlock__seterr(DLOCK_EINVAL,
				"dlock_loop_fd: not a loop made without callbacks"));
	return l->epfd;
}

int dlock_loop_pending(size_t *out, const dlock_loop *l)
{
	if (out == NULL || l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_loop_pending: NULL %s",
				out == NULL ? "out" : "loop");
	*out = (size_t)atomic_load(&l->pending);
	return 0;
}

/* The wait is the seam's poll on the epoll descriptor (the one descriptor
 * wait of the library: dlock__loop_wait); epoll_wait then only collects,
 * never waits. */
static int wait_epoll(dlock_loop *l, struct epoll_event *ev, int max, int wait)
{
	struct pollfd p = { .fd = l->epfd, .events = POLLIN };

	if (wait != 0) {
		int n = dlock__loop_wait(&p, 1, wait);

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

	if (l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_loop_run: NULL loop");
	if (l->backend != DLOCK__EPOLL)
		return loop_failed(l, dlock__seterr(DLOCK_EINVAL,
				"dlock_loop_run: not a loop made without callbacks (drive it through "
				"dlock_loop_fd_ready and dlock_loop_timeout)"));
	enter(l);
	due = dlock__loop_next_due(l);
	wait = timeout_ms < 0 ? -1 : (int)(timeout_ms > INT32_MAX ? INT32_MAX : timeout_ms);
	if (due != DLOCK__NEVER && (wait < 0 || dlock__ms_until(due) < wait))
		wait = dlock__ms_until(due);
	n = wait_epoll(l, ev, 64, wait);
	if (n < 0 && errno != EINTR)
		return leave(l, loop_failed(l, dlock__seterr(DLOCK_ESYS, "loop: epoll_wait: %s",
				strerror(errno))));
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
	return leave(l, l->pending > 0);
}
