/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The asynchronous twins of a semaphore's calls (dlock/async.h) on a loop
 * the test drives: set, add, read the count, query, force release, give a
 * permit back - each answers what its blocking call answers, with one
 * callback, never from inside the call; a read can be canceled, a change
 * finishes.
 */
#include <criterion/criterion.h>

#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

TestSuite(async_sem_calls, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

static dlock_semaphore *sem_of(dlock_client *c, const char *name, dlock_semaphore_kind kind)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s = NULL;

	o.kind = kind;
	dl_pass(dlock_semaphore_new(&s, c, name, &o));
	return s;
}

/* available_async's answer, checked against the blocking call's. */
static int64_t available_both(dlock_loop *loop, dlock_semaphore *s)
{
	dl_outcome o = { 0 };
	int64_t b = -1;

	dl_wait_one(loop, dlock_semaphore_available_async(NULL, s, dl_note, &o), &o);
	cr_assert_eq(o.code, 0, "%s", o.message);
	dl_pass(dlock_semaphore_available(&b, s));
	cr_expect_eq(o.value, b, "async %lld, blocking %lld", (long long)o.value, (long long)b);
	return o.value;
}

Test(async_sem_calls, the_counts_calls_answer_as_the_blocking_ones)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_semaphore *s;
	dl_outcome set = { 0 }, again = { 0 }, add = { 0 }, to = { 0 }, rel = { 0 };
	int was_set = -1;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, NULL);
	s = sem_of(c, "aqs:plain", DLOCK_SEMAPHORE_PLAIN);
	cr_expect_eq(available_both(loop, s), 0, "never set");

	dl_wait_one(loop, dlock_semaphore_try_set_permits_async(NULL, s, 3, dl_note, &set), &set);
	cr_expect(set.code == 0 && set.value == 1, "%d %lld", set.code, (long long)set.value);
	dl_pass(dlock_semaphore_try_set_permits(&was_set, s, 7));
	cr_expect_eq(was_set, 0, "blocking: set already");
	dl_wait_one(loop, dlock_semaphore_try_set_permits_async(NULL, s, 7, dl_note, &again), &again);
	cr_expect(again.code == 0 && again.value == 0, "%d %lld", again.code,
			(long long)again.value);
	cr_expect_eq(available_both(loop, s), 3);

	dl_wait_one(loop, dlock_semaphore_add_permits_async(NULL, s, 2, dl_note, &add), &add);
	cr_expect_eq(add.code, 0, "%s", add.message);
	cr_expect_eq(available_both(loop, s), 5);

	dl_wait_one(loop, dlock_semaphore_set_permits_async(NULL, s, 1, dl_note, &to), &to);
	cr_expect_eq(to.code, 0, "%s", to.message);
	cr_expect_eq(available_both(loop, s), 1);

	dl_wait_one(loop, dlock_semaphore_release_async(NULL, s, 2, dl_note, &rel), &rel);
	cr_expect_eq(rel.code, 0, "%s", rel.message);
	dl_pass(dlock_semaphore_release(s, 1));
	cr_expect_eq(available_both(loop, s), 4, "released 2 async, 1 blocking");

	cr_expect_eq(dlock_semaphore_try_set_permits_async(NULL, s, -1, dl_note, &set), DLOCK_EINVAL);
	cr_expect_eq(dlock_semaphore_force_release_async(NULL, s, dl_note, &set), DLOCK_EINVAL,
			"a plain semaphore has no force release");
	cr_expect_eq(dlock_semaphore_release_permit_async(NULL, s, "00", dl_note, &set), DLOCK_EINVAL);
	cr_expect_eq(set.calls, 1, "no callback for a refused call");
	rh_command_int(dl_srv, "DEL aqs:plain");
	dlock_semaphore_free(s);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_sem_calls, a_key_of_another_kind_is_ewrongtype_both_ways)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_semaphore *s;
	dl_outcome av = { 0 }, ts = { 0 }, q = { 0 };
	dlock_semaphore_info *info = NULL;
	int64_t n = 0;
	int set = 0;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, NULL);
	s = sem_of(c, "aqs:wrong", DLOCK_SEMAPHORE_PLAIN);
	rh_command_int(dl_srv, "HSET aqs:wrong f 1");
	cr_expect_eq(dlock_semaphore_available(&n, s), DLOCK_EWRONGTYPE);
	dl_wait_one(loop, dlock_semaphore_available_async(NULL, s, dl_note, &av), &av);
	cr_expect_eq(av.code, DLOCK_EWRONGTYPE, "%d (%s)", av.code, av.message);
	cr_expect_eq(dlock_semaphore_try_set_permits(&set, s, 1), DLOCK_EWRONGTYPE);
	dl_wait_one(loop, dlock_semaphore_try_set_permits_async(NULL, s, 1, dl_note, &ts), &ts);
	cr_expect_eq(ts.code, DLOCK_EWRONGTYPE, "%d (%s)", ts.code, ts.message);
	cr_expect_eq(dlock_semaphore_query(&info, s), DLOCK_EWRONGTYPE);
	dl_wait_one(loop, dlock_semaphore_query_async(NULL, s, dl_note, &q), &q);
	cr_expect_eq(q.code, DLOCK_EWRONGTYPE, "%d (%s)", q.code, q.message);
	cr_expect_null(q.semaphore_info);
	cr_expect(strstr(av.message, "aqs:wrong") != NULL || strstr(av.message, "WRONGTYPE"),
			"%s", av.message);
	rh_command_int(dl_srv, "DEL aqs:wrong");
	dlock_semaphore_free(s);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_sem_calls, an_expirable_ones_query_force_release_and_permit_release)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_semaphore *s;
	char id[DLOCK_PERMIT_ID_SIZE], id2[DLOCK_PERMIT_ID_SIZE];
	dl_outcome q = { 0 }, force = { 0 }, gone = { 0 }, rel = { 0 }, unknown = { 0 };
	dlock_semaphore_info *info = NULL;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, NULL);
	s = sem_of(c, "aqs:exp", DLOCK_SEMAPHORE_EXPIRABLE);
	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 2));
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, 30000));
	cr_expect_eq(available_both(loop, s), 1);

	dl_wait_one(loop, dlock_semaphore_query_async(NULL, s, dl_note, &q), &q);
	dl_pass(dlock_semaphore_query(&info, s));
	cr_assert_eq(q.code, 0, "%s", q.message);
	cr_assert_not_null(q.semaphore_info);
	cr_expect_eq(dlock_semaphore_info_permits(q.semaphore_info), 1);
	cr_expect_eq(dlock_semaphore_info_permits(info), 1);
	cr_expect_str_eq(dlock_semaphore_info_permit_id(q.semaphore_info, 0), id);
	cr_expect_eq(dlock_semaphore_info_available(q.semaphore_info), dlock_semaphore_info_available(info));
	dlock_semaphore_info_free(q.semaphore_info);
	dlock_semaphore_info_free(info);

	dl_wait_one(loop, dlock_semaphore_force_release_async(NULL, s, dl_note, &force), &force);
	cr_expect(force.code == 0 && force.value == 1, "%d %lld (%s)", force.code,
			(long long)force.value, force.message);
	cr_expect_eq(available_both(loop, s), 2);
	/* Its permit is gone from the server: as the blocking call says, lost. */
	dl_wait_one(loop, dlock_semaphore_release_permit_async(NULL, s, id, dl_note, &gone), &gone);
	cr_expect_eq(gone.code, DLOCK_ELOST, "%d (%s)", gone.code, gone.message);

	dl_pass(dlock_semaphore_acquire_permit(id2, s, 0, 30000));
	dl_wait_one(loop, dlock_semaphore_release_permit_async(NULL, s, id2, dl_note, &rel), &rel);
	cr_expect_eq(rel.code, 0, "%s", rel.message);
	dl_no_second(loop, &rel);
	cr_expect_eq(dlock_semaphore_release_permit(s, id2), DLOCK_ENOTOWNER, "blocking: released");
	dl_wait_one(loop, dlock_semaphore_release_permit_async(NULL, s, id2, dl_note, &unknown), &unknown);
	cr_expect_eq(unknown.code, DLOCK_ENOTOWNER, "%d (%s)", unknown.code, unknown.message);
	cr_expect_eq(available_both(loop, s), 2);
	rh_command_int(dl_srv, "DEL aqs:exp");
	dlock_semaphore_free(s);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_sem_calls, a_read_is_canceled_a_change_finishes)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_semaphore *s;
	dlock_op *op = NULL;
	dl_outcome av = { 0 }, q = { 0 }, set = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, NULL);
	s = sem_of(c, "aqs:cancel", DLOCK_SEMAPHORE_PLAIN);

	dl_pass(dlock_semaphore_available_async(&op, s, dl_note, &av));
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	dl_wait_one(loop, 0, &av);
	cr_expect_eq(av.code, DLOCK_ECANCELED, "%d (%s)", av.code, av.message);
	dl_no_second(loop, &av);

	dl_pass(dlock_semaphore_query_async(&op, s, dl_note, &q));
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	dl_wait_one(loop, 0, &q);
	cr_expect_eq(q.code, DLOCK_ECANCELED);
	cr_expect_null(q.semaphore_info);

	dl_pass(dlock_semaphore_set_permits_async(&op, s, 4, dl_note, &set));
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	dl_wait_one(loop, 0, &set);
	cr_expect_eq(set.code, 0, "%d (%s)", set.code, set.message);
	dl_no_second(loop, &set);
	cr_expect_eq(available_both(loop, s), 4, "the set was made");
	rh_command_int(dl_srv, "DEL aqs:cancel");
	dlock_semaphore_free(s);
	dlock_client_free(c);
	dlock_loop_free(loop);
}
