/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal to multilock/: the quorum engine's parts, one file each.
 *
 *   quorum.c    the decisions (pure: validity, failure class, backoff, when
 *               a parallel attempt is decided)
 *   engine_op.c an acquisition or release as an op on a loop (engine_op.h)
 *   parallel.c  the parallel attempt: the acquire to many members at once
 *   attempt.c   its state's lifetime, which a RedLock's may stretch past the
 *               op, and the late answers settled (attempt.h)
 *   ordered.c   Redisson's ordered round: one member at a time
 *   batch.c     rollback (highest counts first), finalize (the real TTL),
 *               fence and uptimes, in batches of calls to many members
 *   loss.c      hearing of member losses and reporting the lock's; the
 *               check (a quorum still held)
 *   engine_life.c  the engine made (its members checked) and destroyed
 *   engine.c    the owner field on each member, a member slow, the tries,
 *               the status
 *   engine_acquire.c  an acquisition's start: releases due awaited, then
 *               the parallel attempt or the ordered rounds; the calls
 *   engine_rounds.c   its steps: the parallel attempt's end, the ordered
 *               rounds, the grant (finalize, fence), the end
 *   release.c   the release: its run, decided at a quorum
 *   releasing.c its state, which may outlive the op: each member's command
 *               and outcome, the verdict (releasing.h)
 *   servers.c   one server listed twice (by address, by run_id)
 */
#ifndef DLOCK_MULTILOCK_PARTS_H
#define DLOCK_MULTILOCK_PARTS_H

#include "multilock/engine.h"
#include "multilock/quorum.h"
#include "multilock/engine_op.h"

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

/* Member i has releases due (engine.h's release_due) and o's acquire can
 * go right behind them, on their connection (core/mux/mux.h's `behind`):
 * an asynchronous op on their loop, all of them due on one connection. */
int dlock__due_behind(const dlock__engine_op *o, size_t i);

/*
 * Send the acquire to every member (ask[i] set; ask NULL: all) at once and
 * with this lease and record each answer in o->t; p (kept by the caller
 * until `then`) says when to stop waiting; *t0 when the commands went out.
 * o->step_rc: 0, or an error that ends the acquisition.
 */
void dlock__parallel_attempt(dlock__engine_op *o, int64_t lease_ms, const int *ask,
		dlock__parallel *p, int64_t *t0, dlock__then then);

/* The acquisition's outcome (rc) is known: a parallel attempt that went on
 * at a quorum settles its late answers by it - grants join a held lock, or
 * are given back. Nothing when none went on early. */
void dlock__parallel_settle(dlock__engine_op *o, int rc);

/* One round of Redisson's ordered loop: o->step_rc 1 when a quorum is
 * held, else 0 (everything given back). */
void dlock__ordered_round(dlock__engine_op *o, int64_t round_ms, dlock__then then);

/* Give back what the round may have taken (only[i] set; only NULL: all),
 * the highest counts first: safe for two members that are one server. */
void dlock__rollback_some(dlock__engine_op *o, const int *only, dlock__then then);

/* Set every taken member to its real TTL; o->validity: the validity, or -1. */
void dlock__finalize(dlock__engine_op *o, dlock__then then);

/* Raise the fenced members' counters to the quorum's token (o->token);
 * o->step_rc: 0 or the failure. */
void dlock__fence(dlock__engine_op *o, dlock__then then);

/* Ask the uptimes a vote filter needs that are not known yet (the servers
 * of the members taken), so that it judges without a round trip. */
void dlock__ask_uptimes(dlock__engine_op *o, dlock__then then);

/* The acquisition held: report its loss once fewer than a quorum is held. */
void dlock__loss_arm(dlock__engine *e, const dlock__member_try *t);

/* The owner released the lock: no loss to report any more. */
void dlock__loss_disarm(dlock__engine *e, const char *member_owner);

/*
 * The engine as seen by work that may outlive it (a late grant's join):
 * made with the engine, cut off when it is destroyed. A joined member hold
 * is watched for loss like the others - while the engine lives.
 */
struct dlock__engine_link *dlock__link_new(dlock__engine *e);
struct dlock__engine_link *dlock__link_ref(struct dlock__engine_link *l);
void dlock__link_unref(struct dlock__engine_link *l);
void dlock__link_cut(struct dlock__engine_link *l);
void dlock__loss_join(struct dlock__engine_link *l, dlock_lock *member, const char *owner);
/* A release to member i answered (its server has the script now); one
 * still on its way there after its op ended: due +1, then -1 (engine.h). */
void dlock__link_release_ran(struct dlock__engine_link *l, size_t i);
void dlock__link_release_due(struct dlock__engine_link *l, size_t i, int delta);
/* The engine's release_gen (*gen); -1 once the engine is gone. */
int dlock__link_release_gen(struct dlock__engine_link *l, unsigned *gen);

/* Members the owner still holds (0), lost (DLOCK_ELOST) or never held. */
void dlock__holds_tally(const dlock__engine *e, const char *owner, size_t *alive, size_t *lost);

/* An acquisition's steps (engine_rounds.c), as engine_acquire.c starts
 * them: the parallel attempt ended (its `then`); Redisson's ordered rounds
 * until a quorum, the deadline, a cancel or a hopeless failure; the end of
 * one canceled. */
void dlock__engine_parallel_over(dlock__engine_op *o);
void dlock__engine_rounds(dlock__engine_op *o);
void dlock__engine_canceled(dlock__engine_op *o);

/* The lock's own events and figures (events.c): an acquisition's end,
 * a release, a loss - on the first member's client. */
void dlock__engine_stat_acquire(dlock__engine_op *o, int rc);
void dlock__engine_stat_released(dlock__engine *e, const char *owner);
void dlock__engine_stat_lost(dlock__engine *e, const char *owner, int reason);

#endif
