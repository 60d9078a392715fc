/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: the loop every background job and asynchronous operation runs on.
 *
 * A loop knows descriptors to watch (dlock__io), deadlines (dlock__timer)
 * and tasks posted from other threads (dlock__task), and runs their
 * callbacks when they are due. How it waits is its backend's business:
 *  - poll:  dlock__loop_run_once() polls the descriptors itself (a client's
 *           background thread; a blocking call driving its own operation);
 *  - hooks: the caller's event loop is told what to watch and when to call
 *           back (dlock_loop_options' watch_fd/set_timer);
 *  - epoll: the same, told to an epoll descriptor of the loop's own
 *           (dlock_loop_fd()).
 * Callbacks run on the thread that drives the loop; only dlock__loop_post()
 * may be called from others.
 */
#ifndef DLOCK_CORE_LOOP_H
#define DLOCK_CORE_LOOP_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/loop.h"
#include "core/base/error.h"

typedef struct dlock_loop dlock__loop;

/* A descriptor watched for POLLIN/POLLOUT. */
typedef struct dlock__io {
	int fd;
	short events;
	void (*ready)(struct dlock__io *io, short revents);
	size_t slot; /* private: index in the loop's table, or (size_t)-1 */
	int kept;    /* private: started by dlock__io_start_kept() */
} dlock__io;

/* A deadline (monotonic ms). */
typedef struct dlock__timer {
	int64_t due;
	void (*fire)(struct dlock__timer *t);
	size_t slot; /* private: index in the loop's heap, or (size_t)-1 */
} dlock__timer;

/* Work handed to the loop's thread. */
typedef struct dlock__task {
	void (*run)(struct dlock__task *t);
	struct dlock__task *next; /* private */
	int queued;               /* private */
} dlock__task;

/* Descriptors and timers a loop holds before it allocates. */
#define DLOCK__LOOP_INLINE 8

enum dlock__backend { DLOCK__POLL, DLOCK__HOOKS, DLOCK__EPOLL };

struct dlock_loop {
	enum dlock__backend backend;
	dlock_loop_options hooks;
	int epfd;    /* DLOCK__EPOLL: the descriptor given out */
	int timerfd; /* DLOCK__EPOLL: the timer, inside epfd */
	int wake_fd; /* eventfd: posts from other threads */
	dlock__io wake_io;
	dlock__io **ios;
	size_t nios, ios_cap;
	/* A caller's loop (thousands of descriptors): the io of each fd, so an
	 * event finds its io without a walk of the table. by_fd_off: not kept
	 * (no memory for it, or two ios on one fd): walked instead. */
	dlock__io **by_fd;
	size_t by_fd_cap;
	int by_fd_off;
	dlock__timer **heap;
	size_t nheap, heap_cap;
	dlock__io *ios_inline[DLOCK__LOOP_INLINE]; /* what a blocking call needs, */
	dlock__timer *heap_inline[DLOCK__LOOP_INLINE]; /* without allocating */
	int64_t timer_asked; /* what the hooks were told last (DLOCK__NEVER: none) */
	pthread_mutex_t post_mu;
	dlock__task *posted, *posted_tail;
	int clients; /* clients opened on it: each keeps it after dlock_loop_free */
	_Atomic int pending; /* operations and other work that keep dlock_loop_run's answer 1 */
	int public_; /* made by dlock_loop_new (a caller's), not a client's own */
	dlock__errbuf err; /* the last failure of a dlock_loop_* call on it (dlock_loop_errmsg) */
	int in_run;  /* inside a dispatch: hooks may not ask for a zero timer from it */
	_Atomic uint64_t driver; /* the thread that drives it (dlock_thread_id) */
	int wake_owed;           /* posted from inside its dispatch: wake once it is over */
	int busy;                /* a thread's loop: a blocking call is driving it */
	dlock__task *deferred;   /* to run once the current dispatch is over */
	int in_api;  /* inside a public call driving it (dlock_loop_run, ...) */
	int freed;   /* dlock_loop_free() was called: it goes with its last client */
};

/* The library's one wait for descriptors (the seam's poll): every loop,
 * whichever its backend, waits here and nowhere else. */
int dlock__loop_wait(struct pollfd *pfd, nfds_t n, int timeout_ms);

/* Set up l with the poll backend (a client's thread, a blocking call). 0, or DLOCK_ESYS. */
int dlock__loop_init(dlock__loop *l);
/* The same without a wake-up descriptor (nothing to fail): only this thread
 * can post to it until dlock__loop_wakeable(). */
void dlock__loop_init_quiet(dlock__loop *l);
void dlock__loop_destroy(dlock__loop *l);

/* The io watching fd, or NULL (it was stopped by an earlier callback). */
dlock__io *dlock__loop_io_of(const dlock__loop *l, int fd);
/* A loop given a caller's backend: index the descriptors it watched before. */
void dlock__loop_index(dlock__loop *l);

/* Watch io->fd for `events` (POLLIN/POLLOUT) and call `ready` when it is. */
int dlock__io_start(dlock__loop *l, dlock__io *io, int fd, short events,
		void (*ready)(dlock__io *io, short revents));
/* The same for a connection's descriptor, closed only by dlock__fd_close():
 * when stopped, an epoll loop leaves it in its set for the next watch
 * (core/base/fd_kept.h). */
int dlock__io_start_kept(dlock__loop *l, dlock__io *io, int fd, short events,
		void (*ready)(dlock__io *io, short revents));
/* Watch for other events (0 keeps it registered, silent). */
void dlock__io_set(dlock__loop *l, dlock__io *io, short events);
/* Stop watching (before closing the descriptor). Idempotent. */
void dlock__io_stop(dlock__loop *l, dlock__io *io);
int dlock__io_active(const dlock__io *io);

void dlock__timer_init(dlock__timer *t, void (*fire)(dlock__timer *t));
/* (Re)arm at `due` (monotonic ms); DLOCK__NEVER disarms. 0, or DLOCK_ENOMEM. */
int dlock__timer_set(dlock__loop *l, dlock__timer *t, int64_t due);
void dlock__timer_stop(dlock__loop *l, dlock__timer *t);

void dlock__task_init(dlock__task *t, void (*run)(dlock__task *t));
/* Run t on the loop's thread soon (once, however often it is posted
 * before it runs). Safe from any thread. */
void dlock__loop_post(dlock__loop *l, dlock__task *t);
/* Drop t if it is queued and not yet run; 1 when it was. */
int dlock__loop_unpost(dlock__loop *l, dlock__task *t);
/* Run t now, or - called from inside the loop's dispatch, on its thread (a
 * callback of dlock's freeing what it runs on) - once that dispatch is
 * over, before the loop's call returns. */
void dlock__loop_defer(dlock__loop *l, dlock__task *t);
/* A client opened on the caller's loop is gone: the loop goes too if it
 * was freed and this was its last. */
void dlock__loop_client_gone(dlock__loop *l);

/*
 * The calling thread's own loop (poll backend), made on first use and
 * freed when the thread exits: blocking calls drive their operations on
 * it. NULL when it cannot be made, or when an outer call on this thread is
 * driving it (then use a loop of your own).
 */
dlock__loop *dlock__thread_loop(void);

/*
 * The loop a blocking call drives its work on: the calling thread's, or
 * `spare` (set up here, quiet) when an outer call on this thread is driving
 * that one. Marked busy until dlock__loop_give_back(), which closes what
 * the call opened (a wake-up descriptor, `spare` itself).
 */
dlock__loop *dlock__loop_borrow(dlock__loop *spare);
void dlock__loop_give_back(dlock__loop *l, dlock__loop *spare);

/* Other threads may post to it from now on: make its wake-up descriptor
 * (a thread's loop has none until it waits). 0, DLOCK_ESYS, DLOCK_ENOMEM. */
int dlock__loop_wakeable(dlock__loop *l);
/* None may any more: close that descriptor again. */
void dlock__loop_quiet(dlock__loop *l);

/* Poll backend: wait for a descriptor, a timer or a post until `until`
 * (monotonic ms; 0: do not wait), and run what is due. 0, or DLOCK_ESYS. */
int dlock__loop_run_once(dlock__loop *l, int64_t until);

/* An epoll loop's event for fd, which no io watches now: a kept descriptor
 * (a pooled connection the server wrote to or closed). Out of the set. */
void dlock__loop_unwatched(dlock__loop *l, int fd);

/* Run expired timers and queued posts (every backend calls it). */
void dlock__loop_dispatch_due(dlock__loop *l);

/* The time of the earliest timer (DLOCK__NEVER: none). */
int64_t dlock__loop_next_due(const dlock__loop *l);

#endif
