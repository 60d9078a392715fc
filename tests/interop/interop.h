/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the interoperability tests share on the C side: a dlock call run on
 * its own thread (a waiter, timed on the peer's clock) and the wake-up
 * report the closing figures come from.
 */
#ifndef DLOCK_TEST_INTEROP_H
#define DLOCK_TEST_INTEROP_H

#include <pthread.h>
#include <stdint.h>

#include <dlock.h>

#include "peer.h"

/* A wake-up later than this was not a pub/sub message: every hold the tests
 * wake from has a lease of IO_LONG_LEASE_MS, which a waiter would otherwise
 * sit out. Generous, so a busy host does not fail it. */
#define IO_WAKE_MAX_MS 1500
#define IO_LONG_LEASE_MS 20000

/* A waiter blocked long enough to be subscribed and queued. */
#define IO_SETTLE_MS 400

/* A call on its own thread, e.g. dlock_lock_acquire(). */
typedef struct io_call {
	int (*fn)(void *arg);
	void *arg;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
	int rc;
	int64_t t_end_ns;   /* jp_now_ns() when fn returned */
	uint64_t thread_id; /* dlock_thread_id() of the call's thread: its owner */
} io_call;

void io_call_start(io_call *c, int (*fn)(void *), void *arg);
/* 1 once fn returned (rc, t_end_ns set), 0 after timeout_ms. */
int io_call_poll(io_call *c, int64_t timeout_ms);
/* Wait up to 30 s (else fail the test) and reap the thread; returns rc. */
int io_call_join(io_call *c);

/* Unlock l for the owner that c's thread was (the lock it took there). */
void io_call_unlock(io_call *c, dlock_client *client, dlock_lock *l);

/* Print "interop WHAT: X ms (Redisson V)" to stderr and fail the test when a
 * wake-up took over IO_WAKE_MAX_MS. from_ns is when the unlock call started
 * (its reply can reach the unlocking side after the waiter already woke),
 * to_ns when the waiter's lock call returned. Returns the delay in ms. */
double io_wake(const java_peer *p, const char *what, int64_t from_ns, int64_t to_ns);

#endif
