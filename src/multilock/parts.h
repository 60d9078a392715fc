/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal to multilock/: the quorum engine's parts, one file each.
 *
 *   quorum.c    the decisions (pure: validity, failure class, backoff, when
 *               a parallel attempt is decided)
 *   parallel.c  the parallel attempt: the acquire to many members at once
 *   ordered.c   Redisson's ordered round: one member at a time
 *   batch.c     rollback (highest counts first), finalize (the real TTL)
 *               and fence, in batches of calls to many members at once
 *   loss.c      hearing of member losses and reporting the lock's
 *   engine.c    the acquisition driver, check and status
 *   release.c   the release
 *   servers.c   one server listed twice (by address, by run_id)
 */
#ifndef DLOCK_MULTILOCK_PARTS_H
#define DLOCK_MULTILOCK_PARTS_H

#include "multilock/engine.h"
#include "multilock/quorum.h"

/* DLOCK_EDUPLICATE (with a message naming both members) when two members
 * are one lock on one server by address (resolved; made before any
 * connection), else 0. */
int dlock__members_distinct(dlock_lock *const *members, size_t n, const dlock__rules *rules);

/* The owner field on member i: the explicit owner, or the calling thread there. */
const char *dlock__member_owner(const dlock__engine *e, size_t i, const char *owner, char buf[64]);

/* Every member unasked, with its node and its owner field. */
void dlock__tries_reset(const dlock__engine *e, dlock__member_try *t, const char *owner);

/* The member failed with rc. */
void dlock__try_fail(dlock__member_try *t, int rc, const char *msg);

/* Members whose vote in this round is `vote`. */
size_t dlock__tries_count(const dlock__member_try *t, size_t n, dlock_vote vote);

/* A member whose server timed out a moment ago: not waited for. */
int dlock__member_is_slow(const dlock__engine *e, size_t i);

/*
 * Send the acquire to every member (ask[i] set; ask NULL: all) at once and
 * record each answer in t; p says when to stop waiting. *t0: when the
 * commands went out.
 */
int dlock__parallel_attempt(dlock__engine *e, dlock__member_try *t, const char *owner,
		int64_t lease_ms, const int *ask, dlock__parallel *p, int64_t *t0);

/* Once a quorum is held, also ask every member not taken yet, by deadline. */
void dlock__take_the_rest(dlock__engine *e, dlock__member_try *t, const char *owner,
		int64_t lease_ms, int64_t deadline);

/* One round of Redisson's ordered loop: 1 when a quorum is held, else 0
 * (everything given back). */
int dlock__ordered_round(dlock__engine *e, dlock__member_try *t, const char *owner,
		int64_t round_ms, int64_t lease_ms, int single_attempts, const uint64_t *cancels);

/* Give back what the round may have taken (only[i] set; only NULL: all),
 * the highest counts first: safe for two members that are one server. */
void dlock__rollback_some(dlock__engine *e, dlock__member_try *t, const int *only);

/* Set every taken member to its real TTL; returns the validity, or -1. */
int64_t dlock__finalize(dlock__engine *e, dlock__member_try *t, int64_t lease_ms);

/* Raise the fenced members' counters to the quorum's token (*token). */
int dlock__fence(dlock__engine *e, dlock__member_try *t, int64_t *token);

/* The acquisition held: report its loss once fewer than a quorum is held. */
void dlock__loss_arm(dlock__engine *e, const dlock__member_try *t);

/* The owner released the lock: no loss to report any more. */
void dlock__loss_disarm(dlock__engine *e, const char *member_owner);

/* Members the owner still holds (0), lost (DLOCK_ELOST) or never held. */
void dlock__holds_tally(const dlock__engine *e, const char *owner, size_t *alive, size_t *lost);

#endif
