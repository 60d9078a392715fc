/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The asynchronous twins of the lock's queries and force unlock
 * (dlock/async.h), on a loop the test drives: each answers what its
 * blocking call answers - free, held by us, held by another, a key of
 * another kind - with one callback, never from inside the call; a query
 * can be canceled, a force unlock finishes.
 */
#include <criterion/criterion.h>

#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

TestSuite(async_queries, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

typedef enum { IS_LOCKED, IS_HELD, HOLD_COUNT, TTL, NQUERIES } query;
static const char *const query_names[] = { "is_locked", "is_held_as", "hold_count_as", "ttl" };

/* The blocking call's code and answer. */
static int blocking(query q, dlock_lock *l, const char *owner, int64_t *v)
{
	int b = 0, rc;

	*v = 0;
	switch (q) {
	case IS_LOCKED:
		rc = dlock_lock_is_locked(&b, l);
		*v = b;
		return rc;
	case IS_HELD:
		rc = dlock_lock_is_held(&b, l, owner);
		*v = b;
		return rc;
	case HOLD_COUNT:
		return dlock_lock_hold_count(v, l, owner);
	default:
		return dlock_lock_remaining_ttl_ms(v, l);
	}
}

/* The twin's dl_outcome, run on the loop. */
static dl_outcome twin(query q, dlock_loop *loop, dlock_lock *l, const char *owner)
{
	dl_outcome o = { 0 };

	switch (q) {
	case IS_LOCKED:
		dl_pass(dlock_lock_is_locked_async(NULL, l, dl_note, &o));
		break;
	case IS_HELD:
		dl_pass(dlock_lock_is_held_async(NULL, l, owner, dl_note, &o));
		break;
	case HOLD_COUNT:
		dl_pass(dlock_lock_hold_count_async(NULL, l, owner, dl_note, &o));
		break;
	default:
		dl_pass(dlock_lock_remaining_ttl_ms_async(NULL, l, dl_note, &o));
		break;
	}
	cr_assert_eq(o.calls, 0, "%s: a callback from inside the call", query_names[q]);
	dl_wait_one(loop, 0, &o);
	return o;
}

/* Every query's twin answers what its blocking call answers; want[q] the
 * expected answer (TTL: -3 means "between 1 and 30000"). */
static void all_agree(dlock_loop *loop, dlock_lock *l, const char *owner, const int64_t *want,
		int want_code, const char *state)
{
	for (int q = 0; q < NQUERIES; q++) {
		int64_t bv;
		int brc = blocking((query)q, l, owner, &bv);
		dl_outcome o = twin((query)q, loop, l, owner);

		cr_expect_eq(o.code, brc, "%s, %s: async %d (%s), blocking %d", state,
				query_names[q], o.code, o.message, brc);
		if (q == TTL && want[q] == -3 && brc == 0)
			cr_expect(bv > 0 && bv <= 30000 && o.value > 0 && o.value <= 30000,
					"%s, ttl: async %lld, blocking %lld", state,
					(long long)o.value, (long long)bv);
		else if (brc == 0)
			cr_expect(o.value == want[q] && bv == want[q],
					"%s, %s: async %lld, blocking %lld, want %lld", state,
					query_names[q], (long long)o.value, (long long)bv,
					(long long)want[q]);
		if (want_code != 0 && q != IS_LOCKED && q != TTL)
			cr_expect_eq(o.code, want_code, "%s, %s: %d (%s)", state, query_names[q],
					o.code, o.message);
	}
}

Test(async_queries, each_query_answers_as_its_blocking_call_in_every_state)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	char me[64], other[64];
	const int64_t free_[] = { 0, 0, 0, -2 }, mine[] = { 1, 1, 2, -3 }, theirs[] = { 1, 0, 0, -3 },
		      wrong[] = { 1, 0, 0, -1 };

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, NULL);
	l = dl_lock(c, "aq:states");
	dlock_client_owner(me, c, 1);
	dlock_client_owner(other, c, 2);

	all_agree(loop, l, me, free_, 0, "free");

	dl_pass(dlock_lock_acquire(l, me, 0, 30000));
	dl_pass(dlock_lock_acquire(l, me, 0, 30000));
	all_agree(loop, l, me, mine, 0, "held by us twice");
	dl_pass(dlock_lock_release(l, me));
	dl_pass(dlock_lock_release(l, me));

	dl_pass(dlock_lock_acquire(l, other, 0, 30000));
	all_agree(loop, l, me, theirs, 0, "held by another");
	dl_pass(dlock_lock_release(l, other));

	rh_command_int(dl_srv, "SET aq:states a-string");
	all_agree(loop, l, me, wrong, DLOCK_EWRONGTYPE, "a string key");
	rh_command_int(dl_srv, "DEL aq:states");

	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_queries, the_calling_threads_owner_is_the_blocking_calls)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dl_outcome held = { 0 }, count = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, NULL);
	l = dl_lock(c, "aq:thread");
	dl_pass(dlock_lock_acquire(l, NULL, 0, 30000));
	dl_pass(dlock_lock_is_held_async(NULL, l, NULL, dl_note, &held));
	dl_pass(dlock_lock_hold_count_async(NULL, l, NULL, dl_note, &count));
	dl_wait_one(loop, 0, &held);
	dl_drive(loop, &count); /* it may have answered while the loop ran for held */
	cr_expect(held.code == 0 && held.value == 1, "is_held: %d, %lld", held.code,
			(long long)held.value);
	cr_expect(count.code == 0 && count.value == 1, "hold_count: %d, %lld", count.code,
			(long long)count.value);
	dl_pass(dlock_lock_release(l, NULL));
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_queries, a_fenced_locks_token_as_the_blocking_call)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l = NULL;
	char me[64];
	dl_outcome o = { 0 };
	int64_t token = 0;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, NULL);
	dl_pass(dlock_lock_new(&l, c, "aq:fenced", dl_kind(DLOCK_LOCK_FENCED)));
	dlock_client_owner(me, c, 1);
	dl_pass(dlock_lock_acquire(l, me, 0, 30000));
	dl_pass(dlock_lock_token(&token, l));
	dl_pass(dlock_lock_token_async(NULL, l, dl_note, &o));
	dl_wait_one(loop, 0, &o);
	cr_expect(o.code == 0 && o.value == token && token > 0, "async %d %lld, blocking %lld",
			o.code, (long long)o.value, (long long)token);
	dl_pass(dlock_lock_release(l, me));
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_queries, query_async_hands_its_answer_to_the_callback)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dlock_lock_info *blocking_info = NULL;
	char me[64];
	dl_outcome o = { 0 }, bad = { 0 }, missing = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, NULL);
	l = dl_lock(c, "aq:info");
	dlock_client_owner(me, c, 1);

	dl_pass(dlock_lock_query_async(NULL, l, dl_note, &missing));
	dl_wait_one(loop, 0, &missing);
	cr_assert_eq(missing.code, 0, "%s", missing.message);
	cr_assert_not_null(missing.lock_info);
	cr_expect_eq(dlock_lock_info_holders(missing.lock_info), 0);
	cr_expect_eq(dlock_lock_info_ttl_ms(missing.lock_info), -2);
	dlock_lock_info_free(missing.lock_info);

	dl_pass(dlock_lock_acquire(l, me, 0, 30000));
	dl_pass(dlock_lock_query_async(NULL, l, dl_note, &o));
	dl_wait_one(loop, 0, &o);
	dl_pass(dlock_lock_query(&blocking_info, l));
	cr_assert_eq(o.code, 0, "%s", o.message);
	cr_assert_not_null(o.lock_info);
	cr_expect_eq(dlock_lock_info_holders(o.lock_info), 1);
	cr_expect_eq(dlock_lock_info_holders(blocking_info), 1);
	cr_expect_str_eq(dlock_lock_info_holder_owner(o.lock_info, 0), me);
	cr_expect_str_eq(dlock_lock_info_holder_owner(blocking_info, 0), me);
	cr_expect_eq(dlock_lock_info_holder_count(o.lock_info, 0), 1);
	cr_expect(dlock_lock_info_ttl_ms(o.lock_info) > 0 && dlock_lock_info_ttl_ms(o.lock_info) <= 30000);
	dlock_lock_info_free(o.lock_info);
	dlock_lock_info_free(blocking_info);
	dl_pass(dlock_lock_release(l, me));

	rh_command_int(dl_srv, "SET aq:info a-string");
	blocking_info = NULL;
	cr_expect_eq(dlock_lock_query(&blocking_info, l), DLOCK_EWRONGTYPE);
	cr_expect_null(blocking_info);
	dl_pass(dlock_lock_query_async(NULL, l, dl_note, &bad));
	dl_wait_one(loop, 0, &bad);
	cr_expect_eq(bad.code, DLOCK_EWRONGTYPE, "%d (%s)", bad.code, bad.message);
	cr_expect_null(bad.lock_info);
	cr_expect(strstr(bad.message, "aq:info") != NULL || strstr(bad.message, "WRONGTYPE"),
			"message: %s", bad.message);
	rh_command_int(dl_srv, "DEL aq:info");

	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_queries, a_canceled_query_calls_back_once_with_ecanceled)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dlock_op *op = NULL;
	dl_outcome o = { 0 }, info = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, NULL);
	l = dl_lock(c, "aq:cancel");
	dl_pass(dlock_lock_is_locked_async(&op, l, dl_note, &o));
	cr_assert_not_null(op);
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	dl_wait_one(loop, 0, &o);
	cr_expect_eq(o.code, DLOCK_ECANCELED, "%d (%s)", o.code, o.message);
	dl_no_second(loop, &o);

	dl_pass(dlock_lock_query_async(&op, l, dl_note, &info));
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	dl_wait_one(loop, 0, &info);
	cr_expect_eq(info.code, DLOCK_ECANCELED);
	cr_expect_null(info.lock_info);
	dl_no_second(loop, &info);

	/* The handle still answers afterwards. */
	memset(&o, 0, sizeof(o));
	dl_pass(dlock_lock_is_locked_async(NULL, l, dl_note, &o));
	dl_wait_one(loop, 0, &o);
	cr_expect(o.code == 0 && o.value == 0);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_queries, force_unlock_async_deletes_once_and_is_not_canceled)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dlock_op *op = NULL;
	char other[64];
	dl_outcome first = { 0 }, again = { 0 }, wrong = { 0 };
	int deleted = -1;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, NULL);
	l = dl_lock(c, "aq:force");
	dlock_client_owner(other, c, 2);
	dl_pass(dlock_lock_acquire(l, other, 0, 30000));
	dl_pass(dlock_lock_force_release_async(&op, l, dl_note, &first));
	dl_pass(dlock_op_cancel(op)); /* a change finishes whatever is asked */
	dlock_op_free(op);
	dl_wait_one(loop, 0, &first);
	cr_expect(first.code == 0 && first.value == 1, "%d %lld (%s)", first.code,
			(long long)first.value, first.message);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS aq:force"), 0);
	dl_no_second(loop, &first);

	dl_pass(dlock_lock_force_release_async(NULL, l, dl_note, &again));
	dl_wait_one(loop, 0, &again);
	cr_expect(again.code == 0 && again.value == 0, "%d %lld", again.code,
			(long long)again.value);
	dl_pass(dlock_lock_force_release(&deleted, l));
	cr_expect_eq(deleted, 0);

	dl_pass(dlock_lock_acquire(l, other, 0, 30000));
	dl_pass(dlock_lock_force_release(&deleted, l));
	cr_expect_eq(deleted, 1, "the blocking call still deletes");

	rh_command_int(dl_srv, "SET aq:force a-string");
	dl_pass(dlock_lock_force_release_async(NULL, l, dl_note, &wrong));
	dl_wait_one(loop, 0, &wrong);
	cr_expect_eq(wrong.code, dlock_lock_force_release(&deleted, l), "%d (%s)", wrong.code,
			wrong.message);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS aq:force"), 1, "another kind's key is kept");
	rh_command_int(dl_srv, "DEL aq:force");

	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_queries, the_twins_refuse_bad_arguments_without_a_callback)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dlock_op *op = (dlock_op *)1;
	dl_outcome o = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, NULL);
	l = dl_lock(c, "aq:args");
	cr_expect_eq(dlock_lock_is_locked_async(&op, NULL, dl_note, &o), DLOCK_EINVAL);
	cr_expect_null(op);
	cr_expect_eq(dlock_lock_query_async(NULL, l, NULL, NULL), DLOCK_EINVAL);
	cr_expect_eq(dlock_lock_force_release_async(NULL, l, NULL, NULL), DLOCK_EINVAL);
	cr_expect_eq(dlock_lock_token_async(NULL, l, dl_note, &o), DLOCK_EINVAL, "not fenced");
	cr_expect_eq(o.calls, 0);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}
