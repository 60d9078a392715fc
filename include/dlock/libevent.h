/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/libevent.h - dlock's loop driven by a libevent 2 event_base. The
 * adapter is the static library libdlock-libevent.a (CMake:
 * dlock::libevent; pkg-config: dlock-libevent), built when libevent is
 * found; libdlock itself does not link libevent.
 *
 *	dlock_libevent *de;
 *	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
 *	struct event_base *base = event_base_new();
 *
 *	dlock_libevent_new(&de, base, NULL);
 *	o.loop = dlock_libevent_loop(de);    // no dlock thread: all of it runs here
 *	dlock_client_new(&c, "redis://127.0.0.1:6379", &o);
 *	dlock_lock_new(&l, c, "job:42", NULL);
 *	dlock_lock_acquire_async(NULL, l, owner, 0, DLOCK_LEASE_WATCHDOG, on_acquired, NULL);
 *	event_base_dispatch(base);           // renews while you hold it
 *	// later, from any callback (a libevent one or a dlock one):
 *	dlock_lock_free(l); dlock_client_free(c); dlock_libevent_free(de);
 *
 * Each descriptor dlock watches gets a persistent event, deleted the
 * moment dlock stops watching it; dlock's one timer is an evtimer.
 *
 * Lifetime: the adapter's events keep event_base_dispatch() going for as
 * long as it exists. dlock watches the descriptor through which operations
 * start from dlock_libevent_new() to dlock_libevent_free(), and a watchdog
 * hold must be renewed for as long as it is held. dlock_libevent_free()
 * deletes them; the dispatch returns once nothing of yours is pending
 * either. All of it on the thread that runs the event_base (dlock/loop.h).
 */
#ifndef DLOCK_LIBEVENT_H
#define DLOCK_LIBEVENT_H

#include <event2/event.h>

#include "loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The adapter: a dlock loop and the events that drive it. */
typedef struct dlock_libevent dlock_libevent;

#define DLOCK_LIBEVENT_OPTIONS_VERSION 1

/** The adapter's options: none yet beyond the version (room to grow). */
typedef struct dlock_libevent_options {
	unsigned int version;
} dlock_libevent_options;

#define DLOCK_LIBEVENT_OPTIONS_INIT { DLOCK_LIBEVENT_OPTIONS_VERSION }

/** Fill `opts` with the defaults of `version`. 0, or DLOCK_EINVAL. */
DLOCK_EXTERN int dlock_libevent_options_init(dlock_libevent_options *opts, unsigned int version);

/**
 * Make a dlock loop driven by `base`: open clients on
 * dlock_libevent_loop(*out). `opts` NULL: the defaults. 0, DLOCK_EINVAL
 * (NULL out or base, an unknown options version), DLOCK_ENOMEM, DLOCK_ESYS
 * (libevent could not watch dlock's descriptor), or dlock_loop_new()'s
 * errors.
 */
DLOCK_EXTERN int dlock_libevent_new(dlock_libevent **out, struct event_base *base,
		const dlock_libevent_options *opts);

/** The dlock loop to open clients on (dlock_client_options.loop). */
DLOCK_EXTERN dlock_loop *dlock_libevent_loop(const dlock_libevent *de);

/**
 * Free the adapter and its dlock loop, from anywhere on the loop's thread:
 * a libevent callback, outside the dispatch, or a dlock callback (an
 * operation's, a lost callback). The loop and the events go once the
 * clients opened on it are freed too (before or after), and the dlock call
 * that ran the callback returned; until then they keep driving those
 * clients. Accepts NULL.
 */
DLOCK_EXTERN void dlock_libevent_free(dlock_libevent *de);

#ifdef __cplusplus
}
#endif

#endif
