/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The loop: a table of watched descriptors, a heap of timers, a queue of
 * posted tasks, and three ways of waiting for them (core/loop/loop.h).
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "dlock/client.h"
#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"
#include "core/base/fd_kept.h"
#include "core/base/ids.h"
#include "core/base/sys.h"
#include "core/loop/loop.h"
#include "core/base/time.h"

#define NOWHERE ((size_t)-1)

/* Room for `need` pointers in *arr (its first `small` slots are `inline_`,
 * the loop's own: a blocking call's loop never allocates). */
static int grow(void *arr, size_t *cap, size_t need, void *inline_)
{
	void ***a = arr;
	size_t n = *cap * 2;
	void **p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = *a == inline_ ? dlock__malloc(n * sizeof(void *))
			  : dlock__realloc(*a, n * sizeof(void *));
	if (p == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "loop: out of memory");
	if (*a == inline_)
		memcpy(p, inline_, *cap * sizeof(void *));
	*a = p;
	*cap = n;
	return 0;
}

/* The epoll set's events for poll's. */
static uint32_t epoll_events(short events)
{
	return ((events & POLLIN) ? EPOLLIN : 0) | ((events & POLLOUT) ? EPOLLOUT : 0);
}

/* What the caller's loop (or the epoll set) is told about a descriptor. The
 * set may hold it already, or no longer (a kept descriptor: fd_kept.h). */
static void tell_fd(dlock__loop *l, int fd, short events, int op)
{
	int what = ((events & POLLIN) ? DLOCK_POLL_IN : 0) | ((events & POLLOUT) ? DLOCK_POLL_OUT : 0);

	if (l->backend == DLOCK__HOOKS) {
		l->hooks.watch_fd(l->hooks.userdata, fd, op == EPOLL_CTL_DEL ? 0 : what);
	} else if (l->backend == DLOCK__EPOLL) {
		struct epoll_event ev;

		memset(&ev, 0, sizeof(ev));
		ev.events = epoll_events(events);
		ev.data.fd = fd;
		if (epoll_ctl(l->epfd, op, fd, &ev) == 0 || op == EPOLL_CTL_DEL)
			return;
		if (errno == EEXIST)
			epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev);
		else if (errno == ENOENT)
			epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev);
	}
}

/* Tell the backend when the earliest timer is due, if that changed. */
static void tell_timer(dlock__loop *l)
{
	int64_t due = dlock__loop_next_due(l);

	if (due == l->timer_asked || l->backend == DLOCK__POLL)
		return;
	l->timer_asked = due;
	if (l->backend == DLOCK__HOOKS) {
		l->hooks.set_timer(l->hooks.userdata, due == DLOCK__NEVER ? -1 : dlock__ms_until(due));
	} else {
		struct itimerspec its;
		int64_t ms = due == DLOCK__NEVER ? 0 : dlock__ms_until(due);

		memset(&its, 0, sizeof(its));
		if (due != DLOCK__NEVER) {
			/* 0 would disarm: at once is the next nanosecond. */
			its.it_value.tv_sec = ms / 1000;
			its.it_value.tv_nsec = ms % 1000 * 1000000 + (ms == 0);
		}
		timerfd_settime(l->timerfd, 0, &its, NULL);
	}
}

/* Note fd's io in the index of a caller's loop (a blocking call's loop,
 * with a few descriptors, walks its table: it never allocates). */
static void index_fd(dlock__loop *l, dlock__io *io)
{
	size_t fd = (size_t)io->fd, cap = l->by_fd_cap ? l->by_fd_cap : 64;
	dlock__io **p;

	if (l->backend == DLOCK__POLL || l->by_fd_off)
		return;
	while (cap <= fd)
		cap *= 2;
	if (cap != l->by_fd_cap) {
		p = dlock__realloc(l->by_fd, cap * sizeof(*p));
		if (p == NULL) {
			l->by_fd_off = 1;
			return;
		}
		memset(p + l->by_fd_cap, 0, (cap - l->by_fd_cap) * sizeof(*p));
		l->by_fd = p;
		l->by_fd_cap = cap;
	}
	if (l->by_fd[fd] != NULL)
		l->by_fd_off = 1;
	l->by_fd[fd] = io;
}

void dlock__loop_index(dlock__loop *l)
{
	size_t i;

	for (i = 0; i < l->nios; i++)
		index_fd(l, l->ios[i]);
}

static int io_add(dlock__loop *l, dlock__io *io, int fd, short events,
		void (*ready)(dlock__io *io, short revents), int kept)
{
	int was;

	if (grow(&l->ios, &l->ios_cap, l->nios + 1, l->ios_inline) < 0)
		return DLOCK_ENOMEM;
	io->fd = fd;
	io->events = events;
	io->ready = ready;
	io->kept = kept;
	io->slot = l->nios;
	l->ios[l->nios++] = io;
	index_fd(l, io);
	if (l->backend != DLOCK__EPOLL || !dlock__fd_unkeep(fd, l->epfd, &was))
		tell_fd(l, fd, events, EPOLL_CTL_ADD);
	else if (was != (events & (POLLIN | POLLOUT)))
		tell_fd(l, fd, events, EPOLL_CTL_MOD);
	return 0;
}

int dlock__io_start(dlock__loop *l, dlock__io *io, int fd, short events,
		void (*ready)(dlock__io *io, short revents))
{
	return io_add(l, io, fd, events, ready, 0);
}

int dlock__io_start_kept(dlock__loop *l, dlock__io *io, int fd, short events,
		void (*ready)(dlock__io *io, short revents))
{
	return io_add(l, io, fd, events, ready, 1);
}

void dlock__io_set(dlock__loop *l, dlock__io *io, short events)
{
	if (io->slot == NOWHERE || io->events == events)
		return;
	io->events = events;
	tell_fd(l, io->fd, events, EPOLL_CTL_MOD);
}

void dlock__io_stop(dlock__loop *l, dlock__io *io)
{
	size_t i = io->slot;

	if (i == NOWHERE || i >= l->nios || l->ios[i] != io)
		return;
	if (!io->kept || l->backend != DLOCK__EPOLL ||
			dlock__fd_keep(io->fd, l->epfd, io->events & (POLLIN | POLLOUT)) < 0)
		tell_fd(l, io->fd, 0, EPOLL_CTL_DEL);
	if (io->fd >= 0 && (size_t)io->fd < l->by_fd_cap && l->by_fd[io->fd] == io)
		l->by_fd[io->fd] = NULL;
	l->ios[i] = l->ios[--l->nios];
	l->ios[i]->slot = i;
	io->slot = NOWHERE;
}

int dlock__io_active(const dlock__io *io)
{
	return io->slot != NOWHERE;
}

dlock__io *dlock__loop_io_of(const dlock__loop *l, int fd)
{
	size_t i;

	if (l->backend != DLOCK__POLL && !l->by_fd_off)
		return fd >= 0 && (size_t)fd < l->by_fd_cap ? l->by_fd[fd] : NULL;
	for (i = 0; i < l->nios; i++)
		if (l->ios[i]->fd == fd)
			return l->ios[i];
	return NULL;
}

void dlock__loop_unwatched(dlock__loop *l, int fd)
{
	int was;

	if (l->backend != DLOCK__EPOLL)
		return;
	(void)dlock__fd_unkeep(fd, l->epfd, &was);
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* The timer heap, ordered by due. */
static int earlier(const dlock__loop *l, size_t a, size_t b)
{
	return l->heap[a]->due < l->heap[b]->due;
}

static void swap_at(dlock__loop *l, size_t a, size_t b)
{
	dlock__timer *t = l->heap[a];

	l->heap[a] = l->heap[b];
	l->heap[b] = t;
	l->heap[a]->slot = a;
	l->heap[b]->slot = b;
}

static void sift(dlock__loop *l, size_t i)
{
	while (i > 0 && earlier(l, i, (i - 1) / 2)) {
		swap_at(l, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	for (;;) {
		size_t c = 2 * i + 1, m = i;

		if (c < l->nheap && earlier(l, c, m))
			m = c;
		if (c + 1 < l->nheap && earlier(l, c + 1, m))
			m = c + 1;
		if (m == i)
			return;
		swap_at(l, i, m);
		i = m;
	}
}

static void heap_remove(dlock__loop *l, dlock__timer *t)
{
	size_t i = t->slot;

	t->slot = NOWHERE;
	if (i == l->nheap - 1) {
		l->nheap--;
		return;
	}
	l->heap[i] = l->heap[--l->nheap];
	l->heap[i]->slot = i;
	sift(l, i);
}

void dlock__timer_init(dlock__timer *t, void (*fire)(dlock__timer *t))
{
	t->due = DLOCK__NEVER;
	t->fire = fire;
	t->slot = NOWHERE;
}

int dlock__timer_set(dlock__loop *l, dlock__timer *t, int64_t due)
{
	if (due == DLOCK__NEVER) {
		dlock__timer_stop(l, t);
		return 0;
	}
	t->due = due;
	if (t->slot == NOWHERE) {
		if (grow(&l->heap, &l->heap_cap, l->nheap + 1, l->heap_inline) < 0)
			return DLOCK_ENOMEM;
		t->slot = l->nheap;
		l->heap[l->nheap++] = t;
	}
	sift(l, t->slot);
	tell_timer(l);
	return 0;
}

void dlock__timer_stop(dlock__loop *l, dlock__timer *t)
{
	if (t->slot == NOWHERE)
		return;
	heap_remove(l, t);
	t->due = DLOCK__NEVER;
	tell_timer(l);
}

int64_t dlock__loop_next_due(const dlock__loop *l)
{
	return l->nheap > 0 ? l->heap[0]->due : DLOCK__NEVER;
}

void dlock__task_init(dlock__task *t, void (*run)(dlock__task *t))
{
	memset(t, 0, sizeof(*t));
	t->run = run;
}

/* Wake the thread that waits on the loop (its wake-up descriptor). */
static void wake(dlock__loop *l)
{
	uint64_t one = 1;
	ssize_t n;

	do {
		n = write(l->wake_fd, &one, sizeof(one));
	} while (n < 0 && errno == EINTR);
}

void dlock__loop_post(dlock__loop *l, dlock__task *t)
{
	dlock__mutex_lock(&l->post_mu);
	if (!t->queued) {
		t->queued = 1;
		t->next = NULL;
		if (l->posted_tail != NULL)
			l->posted_tail->next = t;
		else
			l->posted = t;
		l->posted_tail = t;
	}
	dlock__mutex_unlock(&l->post_mu);
	/* The thread that polls it posting to itself: it looks at the queue
	 * before it polls again; no need to wake it. (A loop with no wake-up
	 * descriptor is only ever posted to by its own thread.) */
	if (l->wake_fd < 0 ||
			(l->backend == DLOCK__POLL && atomic_load(&l->driver) == dlock_thread_id()))
		return;
	/* Posted from inside its own dispatch (a callback starting the next
	 * operation, an op's end): one wake-up when the dispatch is over, if
	 * anything is still queued then, instead of one per post. */
	/* (Driver first: in_run is the driving thread's alone to read.) */
	if (atomic_load(&l->driver) == dlock_thread_id() && l->in_run > 0) {
		l->wake_owed = 1;
		return;
	}
	wake(l);
}

int dlock__loop_unpost(dlock__loop *l, dlock__task *t)
{
	dlock__task **p, *x;
	int found = 0;

	dlock__mutex_lock(&l->post_mu);
	/* Most tasks unposted are not queued (every op unposts its cancel):
	 * no walk of a queue that may hold thousands of starts. */
	if (!t->queued) {
		dlock__mutex_unlock(&l->post_mu);
		return 0;
	}
	for (p = &l->posted; *p != NULL; p = &(*p)->next) {
		if (*p != t)
			continue;
		*p = t->next;
		l->posted_tail = NULL;
		for (x = l->posted; x != NULL; x = x->next)
			l->posted_tail = x;
		t->queued = 0;
		found = 1;
		break;
	}
	dlock__mutex_unlock(&l->post_mu);
	return found;
}

/* Run the tasks posted so far (not those they post: next turn). Each is
 * unlinked under the lock before it runs: another thread may post it again
 * at once, relinking it. */
static void run_posted(dlock__loop *l)
{
	size_t n = 0, i;
	dlock__task *t;

	dlock__mutex_lock(&l->post_mu);
	for (t = l->posted; t != NULL; t = t->next)
		n++;
	dlock__mutex_unlock(&l->post_mu);
	for (i = 0; i < n; i++) {
		dlock__mutex_lock(&l->post_mu);
		t = l->posted;
		if (t != NULL) {
			l->posted = t->next;
			if (l->posted == NULL)
				l->posted_tail = NULL;
			t->queued = 0;
		}
		dlock__mutex_unlock(&l->post_mu);
		if (t == NULL)
			break;
		t->run(t); /* may free t */
	}
}

static void wake_ready(dlock__io *io, short revents)
{
	uint64_t v;

	(void)revents;
	while (read(io->fd, &v, sizeof(v)) > 0)
		;
}

void dlock__loop_defer(dlock__loop *l, dlock__task *t)
{
	/* Another thread's loop: its counts are not ours to read. */
	if (atomic_load(&l->driver) != dlock_thread_id() ||
			(l->in_run == 0 && l->in_api == 0)) {
		t->run(t);
		return;
	}
	t->next = l->deferred;
	l->deferred = t;
}

/* What callbacks deferred (dlock__loop_defer): the dispatch is over. */
static void run_deferred(dlock__loop *l)
{
	dlock__task *t;

	while ((t = l->deferred) != NULL) {
		l->deferred = t->next;
		t->run(t);
	}
}

void dlock__loop_dispatch_due(dlock__loop *l)
{
	int64_t now = dlock__now_ms();

	l->in_run++;
	run_posted(l);
	while (l->nheap > 0 && l->heap[0]->due <= now) {
		dlock__timer *t = l->heap[0];

		heap_remove(l, t);
		t->due = DLOCK__NEVER;
		t->fire(t);
	}
	l->in_run--;
	if (l->in_run == 0)
		run_deferred(l);
	if (l->in_run == 0 && l->wake_owed) {
		int pending;

		l->wake_owed = 0;
		dlock__mutex_lock(&l->post_mu);
		pending = l->posted != NULL;
		dlock__mutex_unlock(&l->post_mu);
		if (pending)
			wake(l);
	}
	tell_timer(l);
}

/* A loop without its wake-up descriptor yet (dlock__loop_wakeable). */
void dlock__loop_init_quiet(dlock__loop *l)
{
	memset(l, 0, sizeof(*l));
	l->backend = DLOCK__POLL;
	l->epfd = l->timerfd = l->wake_fd = -1;
	l->timer_asked = DLOCK__NEVER;
	l->ios = l->ios_inline;
	l->ios_cap = DLOCK__LOOP_INLINE;
	l->heap = l->heap_inline;
	l->heap_cap = DLOCK__LOOP_INLINE;
	l->wake_io.slot = NOWHERE;
	pthread_mutex_init(&l->post_mu, NULL);
	(void)dlock__errbuf_init(&l->err);
}

int dlock__loop_wakeable(dlock__loop *l)
{
	if (l->wake_fd >= 0)
		return 0;
	l->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->wake_fd < 0)
		return dlock__seterr(DLOCK_ESYS, "loop: eventfd: %s", strerror(errno));
	if (dlock__io_start(l, &l->wake_io, l->wake_fd, POLLIN, wake_ready) < 0) {
		close(l->wake_fd);
		l->wake_fd = -1;
		return DLOCK_ENOMEM;
	}
	return 0;
}

void dlock__loop_quiet(dlock__loop *l)
{
	if (l->wake_fd < 0)
		return;
	dlock__io_stop(l, &l->wake_io);
	close(l->wake_fd);
	l->wake_fd = -1;
}

int dlock__loop_init(dlock__loop *l)
{
	int rc;

	dlock__loop_init_quiet(l);
	if ((rc = dlock__loop_wakeable(l)) < 0) {
		pthread_mutex_destroy(&l->post_mu);
		dlock__errbuf_destroy(&l->err);
	}
	return rc;
}

void dlock__loop_destroy(dlock__loop *l)
{
	dlock__loop_quiet(l);
	if (l->timerfd >= 0)
		close(l->timerfd);
	if (l->epfd >= 0) {
		dlock__fd_forget_set(l->epfd);
		close(l->epfd);
	}
	pthread_mutex_destroy(&l->post_mu);
	dlock__errbuf_destroy(&l->err);
	if (l->ios != l->ios_inline)
		dlock__free(l->ios);
	if (l->heap != l->heap_inline)
		dlock__free(l->heap);
	dlock__free(l->by_fd);
}

int dlock__loop_wait(struct pollfd *pfd, nfds_t n, int timeout_ms)
{
	return dlock__sys_get()->poll(pfd, n, timeout_ms);
}

/* Hand each ready descriptor to its io, looked up again by fd: an earlier
 * callback may have stopped (and freed) the one that was polled. */
static void dispatch_ready(dlock__loop *l, const struct pollfd *pfd, size_t n)
{
	size_t i;

	l->in_run++;
	for (i = 0; i < n; i++) {
		dlock__io *io;

		if (pfd[i].revents == 0 || (io = dlock__loop_io_of(l, pfd[i].fd)) == NULL)
			continue;
		io->ready(io, pfd[i].revents);
	}
	l->in_run--;
}

int dlock__loop_run_once(dlock__loop *l, int64_t until)
{
	struct pollfd small[16], *pfd = small;
	size_t i, n = 0;
	int64_t due = dlock__loop_next_due(l);
	int got, posted;

	atomic_store(&l->driver, dlock_thread_id());
	dlock__mutex_lock(&l->post_mu);
	posted = l->posted != NULL;
	dlock__mutex_unlock(&l->post_mu);
	if (posted)
		until = 0; /* posted by this thread, unannounced: run it now */

	if (l->nios > sizeof(small) / sizeof(*small)) {
		pfd = dlock__malloc(l->nios * sizeof(*pfd));
		if (pfd == NULL)
			return dlock__seterr(DLOCK_ENOMEM, "loop: out of memory");
	}
	for (i = 0; i < l->nios; i++) {
		if (l->ios[i]->events == 0)
			continue;
		pfd[n].fd = l->ios[i]->fd;
		pfd[n].events = l->ios[i]->events;
		pfd[n++].revents = 0;
	}
	got = dlock__loop_wait(pfd, (nfds_t)n, dlock__ms_until(due < until ? due : until));
	if (got < 0 && errno != EINTR) {
		got = dlock__seterr(DLOCK_ESYS, "poll: %s", strerror(errno));
	} else {
		if (got > 0)
			dispatch_ready(l, pfd, n);
		dlock__loop_dispatch_due(l);
		got = 0;
	}
	if (pfd != small)
		dlock__free(pfd);
	return got;
}

/* A thread's loop lives in its thread-local storage (no allocation); the
 * key's destructor closes its descriptors when the thread exits. */
static pthread_key_t thread_loop_key;
static pthread_once_t thread_loop_once = PTHREAD_ONCE_INIT;
static _Thread_local dlock__loop thread_loop;
static _Thread_local int thread_loop_made;

static void thread_loop_free(void *p)
{
	dlock__loop_destroy(p);
}

static void thread_loop_key_make(void)
{
	(void)pthread_key_create(&thread_loop_key, thread_loop_free);
}

dlock__loop *dlock__thread_loop(void)
{
	dlock__loop *l = &thread_loop;

	if (thread_loop_made)
		return l->busy ? NULL : l;
	pthread_once(&thread_loop_once, thread_loop_key_make);
	dlock__loop_init_quiet(l); /* a descriptor only while it waits (dlock__loop_wakeable) */
	if (pthread_setspecific(thread_loop_key, l) != 0) {
		dlock__loop_destroy(l);
		return NULL;
	}
	atomic_store(&l->driver, dlock_thread_id());
	thread_loop_made = 1;
	return l;
}
