/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: a multiplexed run (core/mux.h) driven by a loop: its sockets
 * and its deadline are watched there, and `done` runs on the loop once the
 * run is over. The blocking dlock__mux_run() drives the same steps with
 * its own poll.
 */
#ifndef DLOCK_CORE_MUX_LOOP_H
#define DLOCK_CORE_MUX_LOOP_H

#include "core/mux/mux_source.h"
#include "core/loop/loop.h"
#include "core/mux/mux.h"

#define DLOCK__MUX_LOOP_IOS 8

struct dlock__mux_loop;

/* One of the run's descriptors, watched on the loop. */
typedef struct dlock__mux_watch {
	dlock__io io; /* first: the loop hands back &io */
	struct dlock__mux_loop *ml;
} dlock__mux_watch;

typedef struct dlock__mux_loop {
	dlock__mux mux;
	dlock__loop *loop;
	void (*done)(struct dlock__mux_loop *ml);
	dlock__timer timer;
	dlock__mux_watch w[DLOCK__MUX_LOOP_IOS]; /* the run's descriptors (more: looked at by timer) */
	size_t nio;
	int running;
	/* Set before begin: first in the queue for a pooled connection (the
	 * watchdog's renewals go ahead of the operations waiting for one: the
	 * next connection given back, a round trip away, rather than a
	 * connection of its own to open under load). */
	int urgent;
	/* Waiting for a pooled connection of `waits_on` (the run begins once
	 * one is given back), with what begin was given. */
	dlock__source *waits_on;
	dlock__pool_waiter waiter;
	dlock__task pool_task;
	dlock__task lookup_task; /* a connection's host name was found, or a
	                            shared connection handed a reply: advance */
	int share; /* its connections may be shared (not a blocking call's run) */
	dlock__mux_op *ops;
	size_t n;
	dlock__mux_enough enough;
	void *arg;
} dlock__mux_loop;

/*
 * Begin the run and watch it on `loop`; `done` runs (on the loop, never
 * from within this call) when it is over, after which the caller reads the
 * ops and calls dlock__mux_loop_end(). A client whose pool is all lent
 * out makes the run wait on the loop for a connection given back, rather
 * than open one more for it (thousands of operations in flight would open
 * thousands). 0, or DLOCK_ENOMEM (nothing began).
 */
int dlock__mux_loop_begin(dlock__mux_loop *ml, dlock__loop *loop, dlock__mux_op *ops, size_t n,
		dlock__mux_enough enough, void *arg, void (*done)(dlock__mux_loop *ml));

/* Stop watching and end the run (ops still in flight are abandoned: see
 * dlock__mux_end). Idempotent; no `done` after it. */
void dlock__mux_loop_end(dlock__mux_loop *ml);

#endif
