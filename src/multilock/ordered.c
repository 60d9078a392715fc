/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Redisson's ordered loop: members in order, each waiting up to its budget
 * (MultiLock: all the remaining time; RedLock: max(remaining/n, 1) ms),
 * failures counted against the limit n - quorum; when the limit is
 * exceeded, everything taken is given back. Going in order is what
 * guarantees progress: a contender that failed on a member never holds a
 * later one. Members taken hold a provisional lease long enough to survive
 * the round; finalize (batch.c) sets the real TTL.
 */
#include "dlock/errors.h"
#include "core/base/time.h"
#include "multilock/parts.h"
#include "single/acquire.h"
#include "single/holds.h"
#include "single/member.h"

/* What one member's acquire in order says of the round. */
enum step { STEP_NEXT, STEP_QUORUM, STEP_FAILED };

static int64_t member_wait(
		const dlock__engine *e, int64_t round_ms, int64_t left, int single_attempts)
{
	int64_t wait = round_ms;

	if (single_attempts)
		return 0;
	if (e->rules.share_wait) {
		wait = round_ms / (int64_t)e->n;
		if (wait < 1)
			wait = 1;
	}
	if (wait > left)
		wait = left > 0 ? left : 0;
	return wait;
}

/* Take member i within wait; counts what it means against the limit. */
static enum step take_member(dlock__engine *e, size_t i, dlock__member_try *t, const char *owner,
		int64_t wait, int64_t provisional, uint64_t cancels, size_t *acquired,
		size_t *failures_left)
{
	dlock_lock *m = e->members[i];
	int rc;

	t->believed = dlock__holds_count(m, t->owner_ptr, 1);
	if (t->believed < 0 && owner == NULL)
		t->believed = 0;
	/* owner NULL (the thread's own), not its spelled-out string: the
	 * acquire trusts only the former to adopt holds our lost replies left. */
	rc = dlock__lock_record(m,
			dlock__lock_acquire(m, owner, wait, provisional, cancels, 0, &t->token,
					&t->st.ttl_ms));
	if (rc == 0) {
		t->st.vote = DLOCK_VOTE_ACQUIRED;
		t->count = t->taken = dlock__holds_count(m, t->owner_ptr, 1);
		return ++*acquired >= e->rules.quorum ? STEP_QUORUM : STEP_NEXT;
	}
	if (rc == DLOCK_ECANCELED) {
		dlock__try_fail(t, rc, dlock_lock_errmsg(m));
		return STEP_FAILED;
	}
	if (rc == DLOCK_ENOTACQUIRED) {
		t->st.vote = DLOCK_VOTE_HELD;
	} else {
		dlock__try_fail(t, rc, dlock_lock_errmsg(m));
		t->touched = 1; /* it may have reached the server */
	}
	if (*failures_left == 0)
		return STEP_FAILED;
	--*failures_left;
	return STEP_NEXT;
}

int dlock__ordered_round(dlock__engine *e, dlock__member_try *t, const char *owner,
		int64_t round_ms, int64_t lease_ms, int single_attempts, const uint64_t *cancels)
{
	int64_t round_end = dlock__now_ms() + round_ms;
	int64_t provisional = lease_ms > 0 ? (lease_ms > 2 * round_ms ? lease_ms : 2 * round_ms)
					   : DLOCK_LEASE_WATCHDOG;
	size_t i, acquired = 0, failures_left = e->n - e->rules.quorum;

	for (i = 0; i < e->n; i++) {
		int64_t wait = member_wait(
				e, round_ms, round_end - dlock__now_ms(), single_attempts);
		enum step s = take_member(e, i, &t[i], owner, wait, provisional, cancels[i],
				&acquired, &failures_left);

		if (s == STEP_QUORUM) {
			dlock__take_the_rest(e, t, owner, provisional, round_end);
			return 1;
		}
		if (s == STEP_FAILED || (!single_attempts && dlock__now_ms() >= round_end))
			break;
	}
	/* Failed, out of time, or (impossible: the quorum is handled above)
	 * every member tried within the limit: give back what was taken. */
	dlock__rollback_some(e, t, NULL);
	return 0;
}
