/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/loop.h - dlock's engine, driven by your event loop.
 *
 * Everything dlock does in the background (renewing watchdog holds, pub/sub
 * wake-ups of waiters, the Sentinel watch, cluster redirects, deadlines) and
 * every asynchronous operation (dlock/async.h) runs on a loop. By default a
 * client makes its own, driven by one library thread. A program that has an
 * event loop of its own (libuv, libevent, epoll, asio) makes a dlock_loop
 * instead and opens its clients on it (dlock_client_options.loop): then dlock
 * starts no thread, and the program calls the library when a descriptor it
 * was told to watch is ready or the timer it was told to set fires, as with
 * libcurl's curl_multi_socket_action(). Two ways to be told:
 *
 *  - callbacks (dlock_loop_options.watch_fd and .set_timer): dlock asks for
 *    each descriptor and the one timer as they change; the adapters in
 *    dlock/uv.h and dlock/libevent.h wire them to libuv and libevent;
 *  - one descriptor (Linux, no callbacks given): dlock_loop_fd() is an
 *    epoll descriptor that becomes readable whenever dlock has work; watch
 *    it for reading in any loop and call dlock_loop_run(loop, 0) then.
 *
 * Threading: a loop and every client opened on it belong to one thread, the
 * one driving the loop; call nothing of theirs from another.
 */
#ifndef DLOCK_LOOP_H
#define DLOCK_LOOP_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_loop dlock_loop;

/** What a descriptor is to be watched for (or was found ready for). */
#define DLOCK_POLL_IN 1
#define DLOCK_POLL_OUT 2

#define DLOCK_LOOP_OPTIONS_VERSION 2

typedef struct dlock_loop_options {
	unsigned int version;
	/** Watch `fd` for `what` (DLOCK_POLL_IN and/or DLOCK_POLL_OUT) from now
	 *  on, replacing what was asked for it before; `what` 0: stop watching
	 *  it (it may be closed right after). When it is ready, call
	 *  dlock_loop_fd_ready(). NULL (with set_timer NULL): use dlock_loop_fd(). */
	void (*watch_fd)(void *userdata, int fd, int what);
	/** Call dlock_loop_timeout() once `ms` milliseconds have passed (0: as
	 *  soon as you can, from your loop, not from within this callback),
	 *  replacing any timer set before; -1: no timer is needed. */
	void (*set_timer)(void *userdata, int64_t ms);
	/** Passed to the callbacks. */
	void *userdata;
	/* Version 2: */
	/** The loop is gone (dlock_loop_free() was called and its last client
	 *  freed): nothing calls watch_fd or set_timer any more, and an adapter
	 *  may release what they used. Called once, from within the dlock call
	 *  that freed the last of them. May be NULL. */
	void (*closed)(void *userdata);
} dlock_loop_options;

#define DLOCK_LOOP_OPTIONS_INIT { DLOCK_LOOP_OPTIONS_VERSION, NULL, NULL, NULL, NULL }

/** Fill `opts` with the defaults of `version`. 0, or DLOCK_EINVAL. */
DLOCK_EXTERN int dlock_loop_options_init(dlock_loop_options *opts, unsigned int version);

/**
 * Make a loop. `opts` NULL (or both callbacks NULL): driven through
 * dlock_loop_fd() and dlock_loop_run(). Both callbacks or neither. The
 * callbacks may be called from within any dlock call made on the loop's
 * thread, this one included. *out is freed with dlock_loop_free().
 * Errors: DLOCK_EINVAL, DLOCK_ENOMEM, DLOCK_ESYS.
 */
DLOCK_EXTERN int dlock_loop_new(dlock_loop **out, const dlock_loop_options *opts);

/**
 * Drop the caller's reference to a loop; it goes once every client opened
 * on it is freed too (each holds a reference), in either order, and
 * options.closed is called then. Safe from any callback of dlock's on the
 * loop (an operation's, a lost or event callback): the loop goes when the
 * dlock call that ran the callback returns. A loop with callbacks goes on
 * being driven through them until then (the adapters do that); a loop you
 * drive yourself (dlock_loop_run) is not to be called once you freed it, so
 * free its clients first, or from one of its callbacks. Accepts NULL.
 * (Before 1.0 it returned DLOCK_EBUSY while clients were open; it cannot
 * fail now.)
 */
DLOCK_EXTERN void dlock_loop_free(dlock_loop *loop);

/** `fd`, asked for by watch_fd, is ready for `what` (DLOCK_POLL_*; error
 *  and hang-up count as both). Runs what was waiting on it. 0, or DLOCK_EINVAL. */
DLOCK_EXTERN int dlock_loop_fd_ready(dlock_loop *loop, int fd, int what);

/** The timer asked for by set_timer fired. 0, or DLOCK_EINVAL. */
DLOCK_EXTERN int dlock_loop_timeout(dlock_loop *loop);

/** Linux, a loop made without callbacks: the epoll descriptor to watch for
 *  reading. DLOCK_EINVAL for a loop made with callbacks. */
DLOCK_EXTERN int dlock_loop_fd(const dlock_loop *loop);

/**
 * Run what is ready, waiting up to `timeout_ms` for something to be
 * (0: do not wait; -1: until something ran). For a loop made without
 * callbacks; a program with no loop of its own may simply call it
 * repeatedly. Returns 1 while asynchronous operations started on the loop's
 * clients have not had their callback, 0 when none is pending (holds may
 * still be renewed: keep driving the loop while you hold locks), or
 * DLOCK_EINVAL/DLOCK_ESYS.
 */
DLOCK_EXTERN int dlock_loop_run(dlock_loop *loop, int64_t timeout_ms);

/**
 * The one-line message of the most recent failure of a dlock_loop_* call on
 * this loop, from any thread ("" if none); a copy owned by the calling
 * thread, valid until its next dlock call.
 */
DLOCK_EXTERN const char *dlock_loop_errmsg(const dlock_loop *loop);

/** dlock_loop_errmsg() copied into buf; returns the full length (see dlock_errmsg_last_r). */
DLOCK_EXTERN size_t dlock_loop_errmsg_r(char *buf, size_t len, const dlock_loop *loop);

/**
 * How many asynchronous operations started on the loop's clients have not
 * had their callback yet (an operation stops counting as its callback
 * begins: in the callback of the last, 0). For any loop, made with
 * callbacks or not: a libuv or libevent program's "is dlock still busy".
 * 0, or DLOCK_EINVAL for a NULL out or loop.
 */
DLOCK_EXTERN int dlock_loop_pending(size_t *out, const dlock_loop *loop);

#ifdef __cplusplus
}
#endif

#endif
