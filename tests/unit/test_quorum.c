/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The quorum engine's decisions (src/multilock/quorum.c), without a server:
 * the validity formula, the failure class from every member's answer, the
 * pause between rounds, and when a parallel attempt is decided.
 */
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "dlock/errors.h"
#include "multilock/quorum.h"

/* Members with the given votes; errors[i] is used where votes[i] is ERROR. */
static void members(dlock_member_status *st, size_t n, const dlock_vote *votes, const int *errors)
{
	size_t i;

	memset(st, 0, n * sizeof(*st));
	for (i = 0; i < n; i++) {
		st[i].vote = votes[i];
		st[i].error = votes[i] == DLOCK_VOTE_ERROR ? errors[i] : 0;
	}
}

Test(quorum, validity_takes_off_elapsed_time_drift_and_two_ms)
{
	cr_assert_eq(dlock__quorum_validity(10000, 0, 0.01), 10000 - 100 - 2);
	cr_assert_eq(dlock__quorum_validity(10000, 250, 0.01), 10000 - 250 - 100 - 2);
	cr_assert_eq(dlock__quorum_validity(30000, 0, 0), 30000 - 2);
	cr_assert_lt(dlock__quorum_validity(100, 99, 0.01), 0,
			"a round slower than the TTL is invalid");
}

Test(quorum, failure_is_contention_when_enough_members_answered)
{
	dlock_vote v[5] = { DLOCK_VOTE_ACQUIRED, DLOCK_VOTE_HELD, DLOCK_VOTE_HELD, DLOCK_VOTE_ERROR,
		DLOCK_VOTE_ACQUIRED };
	int err[5] = { 0, 0, 0, DLOCK_ECONN, 0 };
	dlock_member_status st[5];

	members(st, 5, v, err);
	cr_assert_eq(dlock__quorum_failure(st, 5, 3, 0), DLOCK_ENOTACQUIRED);
	cr_assert_eq(dlock__quorum_failure(st, 5, 3, 1), DLOCK_EEXPIRED,
			"a quorum whose validity ran out is EEXPIRED");
}

Test(quorum, failure_is_no_quorum_when_too_few_answered)
{
	dlock_vote v[3] = { DLOCK_VOTE_ACQUIRED, DLOCK_VOTE_ERROR, DLOCK_VOTE_ERROR };
	int err[3] = { 0, DLOCK_ECONN, DLOCK_ETIMEDOUT };
	dlock_member_status st[3];

	members(st, 3, v, err);
	cr_assert_eq(dlock__quorum_failure(st, 3, 2, 0), DLOCK_ENOQUORUM);
	err[2] = DLOCK_EWRONGTYPE;
	members(st, 3, v, err);
	cr_assert_eq(dlock__quorum_failure(st, 3, 2, 0), DLOCK_EWRONGTYPE,
			"a key that is not a lock is named instead of ENOQUORUM");
}

Test(quorum, out_of_memory_is_the_cause_unless_a_holder_was_seen)
{
	dlock_vote v[3] = { DLOCK_VOTE_ACQUIRED, DLOCK_VOTE_ERROR, DLOCK_VOTE_NONE };
	int err[3] = { 0, DLOCK_ENOMEM, 0 };
	dlock_member_status st[3];

	members(st, 3, v, err);
	cr_assert_eq(dlock__quorum_failure(st, 3, 2, 0), DLOCK_ENOMEM);
	v[2] = DLOCK_VOTE_HELD;
	members(st, 3, v, err);
	cr_assert_eq(dlock__quorum_failure(st, 3, 2, 0), DLOCK_ENOTACQUIRED);
}

/* A RedLock refused right after a server kill: one holder, one dead node,
 * and the third decided without (its answer not awaited). */
Test(quorum, the_refusal_counts_every_member_even_one_not_yet_answered)
{
	dlock_vote v[3] = { DLOCK_VOTE_HELD, DLOCK_VOTE_ERROR, DLOCK_VOTE_NONE };
	int err[3] = { 0, DLOCK_ECONN, 0 };
	dlock_member_status st[3];
	char text[200];

	members(st, 3, v, err);
	int k = dlock__quorum_tally_text(text, sizeof text, st, 3, 2);
	cr_assert_str_eq(text,
			"2 of 3 needed, 0 took it, 1 held by others, 1 failed, 1 not yet answered");
	cr_assert_eq(k, (int)strlen(text));

	/* Every member answered: nothing to add. */
	v[2] = DLOCK_VOTE_ACQUIRED;
	members(st, 3, v, err);
	dlock__quorum_tally_text(text, sizeof text, st, 3, 2);
	cr_assert_str_eq(text, "2 of 3 needed, 1 took it, 1 held by others, 1 failed");

	/* Cut short: the return says how long the whole text is. */
	v[2] = DLOCK_VOTE_NONE;
	members(st, 3, v, err);
	k = dlock__quorum_tally_text(text, 20, st, 3, 2);
	cr_assert_eq(strlen(text), 19);
	cr_assert_eq(k, (int)strlen("2 of 3 needed, 0 took it, 1 held by others, 1 failed, "
				     "1 not yet answered"));
}

Test(quorum, hopeless_once_final_errors_exceed_the_failure_limit)
{
	dlock_vote v[5] = { DLOCK_VOTE_ERROR, DLOCK_VOTE_ERROR, DLOCK_VOTE_HELD, DLOCK_VOTE_HELD,
		DLOCK_VOTE_HELD };
	int err[5] = { DLOCK_EWRONGTYPE, DLOCK_EAUTH, 0, 0, 0 };
	dlock_member_status st[5];

	members(st, 5, v, err);
	cr_assert_not(dlock__quorum_hopeless(st, 5, 3, 0),
			"2 final failures of 5 leave a quorum of 3");
	v[2] = DLOCK_VOTE_ERROR;
	err[2] = DLOCK_EAUTH;
	members(st, 5, v, err);
	cr_assert(dlock__quorum_hopeless(st, 5, 3, 0));
	err[2] = DLOCK_ECONN; /* a connection can come back */
	members(st, 5, v, err);
	cr_assert_not(dlock__quorum_hopeless(st, 5, 3, 0));
	/* ... unless it never answered and its first-contact period is over */
	cr_assert(dlock__quorum_hopeless(st, 5, 3, 1));
}

Test(quorum, backoff_doubles_after_errors_and_resets_after_contention)
{
	dlock__backoff b = { 50, 50, 1000, 0 };
	int64_t want[] = { 50, 100, 200, 400, 800, 1000, 1000 };
	size_t i;
	uint64_t r;

	for (i = 0; i < sizeof(want) / sizeof(*want); i++) {
		int64_t p = dlock__backoff_next(&b, 0, INT64_MAX, 12345 + i);

		cr_assert_eq(b.current, want[i]);
		cr_assert(p >= want[i] / 2 && p <= want[i], "pause %lld outside [%lld, %lld]",
				(long long)p, (long long)want[i] / 2, (long long)want[i]);
	}
	for (r = 0; r < 200; r += 7)
		cr_assert_lt(dlock__backoff_next(&b, 1, INT64_MAX, r), 50);
	cr_assert_eq(b.current, 0, "contention resets the backoff");
	cr_assert_eq(dlock__backoff_next(&b, 0, 3, 999), 3, "never past the time left");
}

Test(quorum, parallel_decides_when_a_quorum_is_impossible)
{
	dlock__parallel p = { 3, 0, 0, 1000, 0, 0 };
	dlock__tally t = { 5, 1, 3, 3, 1 };
	int64_t wake = 0;

	cr_assert(dlock__parallel_decided(&p, &t, 1001, &wake), "2 left cannot make 3");
}

Test(quorum, parallel_grants_others_a_grace_after_the_quorum)
{
	dlock__parallel p = { 3, 0, 0, 1000, 0, 0 };
	dlock__tally t = { 5, 3, 0, 0, 2 };
	int64_t wake = 0;

	cr_assert_not(dlock__parallel_decided(&p, &t, 1010, &wake));
	cr_assert_eq(p.quorum_at, 1010);
	cr_assert_eq(wake, 1020, "the grace is as long again as the quorum took");
	cr_assert(dlock__parallel_decided(&p, &t, 1020, &wake));
	t.pending_live = 0;
	p.quorum_at = 0;
	cr_assert(dlock__parallel_decided(&p, &t, 1011, &wake),
			"members known to be slow are not waited for");
}

Test(quorum, parallel_watchdog_mode_and_a_vote_filter_wait_for_every_answer)
{
	dlock__parallel all = { 2, 0, 1, 1000, 0, 0 };
	dlock__parallel filtered = { 2, 1, 0, 1000, 0, 0 };
	dlock__tally t = { 3, 2, 0, 0, 1 };
	dlock__tally answered = { 3, 2, 1, 1, 0 };
	dlock__tally hopeless = { 3, 0, 2, 2, 1 };
	int64_t wake = 0;

	cr_assert_not(dlock__parallel_decided(&all, &t, 5000, &wake));
	/* Kleppmann's scenario: two restarted nodes said yes at once; the
	 * third, which still shows the first holder, answers later. Deciding
	 * at the quorum would hide the holder from the restart guard. */
	cr_assert_not(dlock__parallel_decided(&filtered, &t, 5000, &wake),
			"a vote filter decided before every member answered");
	cr_assert(dlock__parallel_decided(&filtered, &answered, 5000, &wake),
			"every member answered");
	cr_assert(dlock__parallel_decided(&filtered, &hopeless, 1001, &wake),
			"no quorum is possible whatever is still to come");
	filtered.deadline = 4000;
	cr_assert(dlock__parallel_decided(&filtered, &t, 5000, &wake), "the deadline decides");
}
