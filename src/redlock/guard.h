/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: RedLock's restart guard.
 *
 * Kleppmann's scenario: A holds nodes 1 and 2 of 3; node 2 restarts empty
 * and node 3 (down while A acquired) comes back empty; B now finds 2 and 3
 * free and takes a quorum while A still holds the lock. The trace it leaves:
 * B's "free" votes come from nodes younger than any lease, while another
 * node still shows the lock held. The guard does not count such votes.
 */
#ifndef DLOCK_REDLOCK_GUARD_H
#define DLOCK_REDLOCK_GUARD_H

#include <stdint.h>

#include "multilock/engine.h"

typedef struct dlock__guard {
	int64_t window_ms; /* -1: the longer of the watchdog timeout and the lease; 0: off */
	int strict;        /* ignore young nodes' votes even without a visible holder */
} dlock__guard;

/* The engine's vote filter (arg: a dlock__guard). */
void dlock__guard_filter(void *arg, dlock_lock *const *members, dlock__member_try *tries, size_t n,
		int64_t lease_ms);

/* The engine's vouch (arg: a dlock__guard): 1 when the guard would count
 * this member's vote whatever the others show. */
int dlock__guard_vouch(void *arg, dlock_lock *member, int64_t lease_ms, int64_t started_ms);

#endif
