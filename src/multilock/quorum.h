/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: the quorum engine's decisions, as pure functions of what the
 * members answered - no server, no clock, no randomness of their own - so
 * unit tests can call them directly (tests/unit/test_quorum.c).
 */
#ifndef DLOCK_MULTILOCK_QUORUM_H
#define DLOCK_MULTILOCK_QUORUM_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/multilock.h"

/* Members whose vote is `vote`. */
size_t dlock__votes_count(const dlock_member_status *st, size_t n, dlock_vote vote);

/* Members that failed with `error`. */
size_t dlock__votes_with_error(const dlock_member_status *st, size_t n, int error);

/*
 * Members whose failure no wait changes: a key that is not a lock, refused
 * credentials, and `gone` more that the caller knows of (a TLS refusal, a
 * server that never answered within its first-contact period). More than
 * n - quorum of them and waiting is pointless.
 */
int dlock__quorum_hopeless(const dlock_member_status *st, size_t n, size_t quorum, size_t gone);

/*
 * Redlock's validity: the shortest TTL set, less the time since the first
 * command that set it went out, less the clock drift allowance
 * (drift_factor of the TTL, plus 2 ms).
 */
int64_t dlock__quorum_validity(int64_t ttl_ms, int64_t elapsed_ms, double drift_factor);

/*
 * Why an acquisition failed, from every member's latest answer: expired
 * (the validity ran out) -> DLOCK_EEXPIRED; too few members answering ->
 * DLOCK_ENOQUORUM (DLOCK_EWRONGTYPE when a member's key is not a lock);
 * otherwise contention, DLOCK_ENOTACQUIRED. A member that failed for lack
 * of memory failed in this process: unless another owner was seen holding
 * the lock, DLOCK_ENOMEM.
 */
int dlock__quorum_failure(const dlock_member_status *st, size_t n, size_t quorum, int expired);

/*
 * Every member's part in a failed acquisition, for its message: "Q of N
 * needed, A took it, H held by others, F failed", then ", U not yet
 * answered" for members decided without (asked, their answer not awaited)
 * or never reached: the parts always add up to N. snprintf's return.
 */
int dlock__quorum_tally_text(char *buf, size_t len, const dlock_member_status *st, size_t n,
		size_t quorum);

/*
 * The pause before the next round: after contention (a member held or
 * young) a jitter below jitter_ms, and the backoff resets; after a round
 * that failed on errors alone, a backoff doubling from min_ms to max_ms
 * (half of it fixed, half random). Never past `left`. `random` is any
 * uniformly random number.
 */
typedef struct dlock__backoff {
	int64_t jitter_ms;
	int64_t min_ms;
	int64_t max_ms;
	int64_t current; /* 0 after contention */
} dlock__backoff;

int64_t dlock__backoff_next(dlock__backoff *b, int contention, int64_t left, uint64_t random);

/*
 * The parallel attempt's stopping rule, given the tally of answers so far.
 * Decide (1) as soon as a quorum is impossible. Once a quorum said yes,
 * give the others a short grace (as long again as the quorum took, at least
 * 2 ms): on healthy servers their answers are already on the way, and every
 * extra member held makes the lock survive more failures; a hung server
 * costs only the grace. Members still pending that timed out recently are
 * not waited for at all. With hear_all, a quorum is never decided while a
 * member may still answer within its command timeout: its answer may be the
 * holder that makes the other votes doubtful.
 */
typedef struct dlock__tally {
	size_t n;            /* members asked */
	size_t ok;           /* took it */
	size_t failed;       /* refused or failed */
	size_t held;         /* of the failed: held by another owner */
	size_t pending_live; /* no answer yet, from servers not known to be slow */
} dlock__tally;

typedef struct dlock__parallel {
	size_t quorum;
	int hear_all;         /* a vote filter judges the votes together (RedLock's restart
	                         guard doubts young nodes only when another shows a
	                         holder): decide on every answer, never at a bare quorum */
	int wait_all;         /* watchdog mode: hold every member that answers in time */
	int64_t started;      /* when the commands went out */
	int64_t quorum_at;    /* when a quorum had answered yes (0: not yet) */
	int64_t deadline;     /* decide by then whatever is still pending (0: none) */
} dlock__parallel;

int dlock__parallel_decided(
		dlock__parallel *p, const dlock__tally *t, int64_t now, int64_t *wake_at);

#endif
