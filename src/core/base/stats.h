/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: the figures behind dlock/stats.h - fixed-bucket histograms and
 * counters, each a relaxed atomic, so that keeping them costs an add or
 * two and no lock. Read by a snapshot from any thread: a figure read while
 * it changes is off by the changes in flight, never torn.
 */
#ifndef DLOCK_CORE_STATS_H
#define DLOCK_CORE_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "dlock/stats.h"

/* No count of its own: the buckets' sum is it (one atomic add fewer per value). */
typedef struct dlock__hist {
	_Atomic uint64_t sum_us;
	_Atomic uint64_t counts[DLOCK_STAT_BUCKETS];
} dlock__hist;

/* Node states (dlock__stats.state): never answered, answering, down. */
enum { DLOCK__NODE_NEW = 0, DLOCK__NODE_UP = 1, DLOCK__NODE_DOWN = 2 };

/* A client's figures: the lock events it reported, and its node's. */
typedef struct dlock__stats {
	_Atomic uint64_t acquired, not_acquired, failed, released, lost;
	_Atomic uint64_t renewals, renewal_failures, brain_splits;
	_Atomic int64_t held;
	dlock__hist wait, hold;
	/* The node (a cluster root's are its members'); its commands answered
	 * are rtt's count. */
	_Atomic uint64_t errors, downs;
	_Atomic int state;
	dlock__hist rtt;
} dlock__stats;

/* The bucket of a value (us): a handful of comparisons. */
int dlock__stat_bucket(int64_t us);

/* Count one value (us; a negative one counts as 0). */
void dlock__hist_add(dlock__hist *h, int64_t us);

/* A copy of h as it is now. */
void dlock__hist_read(const dlock__hist *h, dlock_stat_histogram *out);

/* x += n, relaxed: a counter nobody orders anything by. */
static inline void dlock__stat_add(_Atomic uint64_t *x, uint64_t n)
{
	atomic_fetch_add_explicit(x, n, memory_order_relaxed);
}

#endif
