/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: where the layers report what dlock/stats.h counts. Each helper
 * adds to the client's counters (relaxed atomics) and, only when the
 * client has an on_event hook, builds the event on the stack and calls it.
 * Strings may be NULL; they need only live for the call.
 */
#ifndef DLOCK_CORE_DRIVE_STATS_H
#define DLOCK_CORE_DRIVE_STATS_H

#include <stdint.h>

#include "dlock/client.h"
#include <hiredis/hiredis.h>

/* A command on c's node ended: rc 0 with a reply (an error reply counts
 * as an error, the node answering), or a failure. rtt_us: from its send
 * to its reply. A connection failure or timeout after an answer is the
 * node going down; an answer after that, its coming back. */
void dlock__stat_command(dlock_client *c, int rc, const redisReply *reply, int64_t rtt_us);

/* An acquisition ended after wait_us: rc 0 acquired, else why not. */
void dlock__stat_acquire(dlock_client *c, int rc, const char *name, const char *owner,
		int64_t wait_us, int attempts, int votes, int members);

/* A hold began (the gauge) or ended: released (reason 0) or lost. */
void dlock__stat_held(dlock_client *c);
void dlock__stat_released(dlock_client *c, const char *name, const char *owner, int64_t hold_ms);
void dlock__stat_lost(dlock_client *c, const char *name, const char *owner, int reason,
		int64_t hold_ms);

/* Renewals: n holds kept; a renewal that did not get through (node). */
void dlock__stat_renewed(dlock_client *c, uint64_t n);
void dlock__stat_renewal_failed(dlock_client *c, const char *node, int code);

/* The lock was found held by another owner while ours was believed held. */
void dlock__stat_brain_split(dlock_client *c, const char *name, const char *node,
		const char *owner);

#endif
