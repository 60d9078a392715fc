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

typedef struct outcome {
	int calls, code;
	int64_t value;
	dlock_semaphore_info *info;
	char message[256];
} outcome;

static void note(dlock_op *op, const dlock_result *r, void *ud)
{
	outcome *o = ud;

	(void)op;
	o->calls++;
	o->code = r->code;
	o->value = r->value;
	o->info = r->semaphore_info; /* ours now */
	snprintf(o->message, sizeof(o->message), "%s", r->message);
}

static dlock_client *client_on(dlock_loop *loop)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.loop = loop;
	return dl_client_opts(rh_server_uri(dl_srv), &o);
}

static dlock_semaphore *sem_of(dlock_client *c, const char *name, dlock_semaphore_kind kind)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s = NULL;

	o.kind = kind;
	dl_pass(dlock_semaphore_new(&s, c, name, &o));
	return s;
}

/* The op was started (rc 0, no callback yet); drive the loop to its one callback. */
static void wait_one(dlock_loop *loop, int rc, const outcome *o)
{
	int64_t until = rh_now_ms() + 10000;

	cr_assert_eq(rc, 0, "start: %d (%s)", rc, dlock_errmsg_last());
	cr_assert_eq(o->calls, 0, "a callback from inside the call");
	while (o->calls == 0 && rh_now_ms() < until)
		cr_assert(dlock_loop_run(loop, 20) >= 0, "%s", dlock_errmsg_last());
	cr_assert_eq(o->calls, 1, "no callback within 10 s");
}

static void no_second(dlock_loop *loop, const outcome *o)
{
	int64_t until = rh_now_ms() + 200;

	while (rh_now_ms() < until)
		cr_assert(dlock_loop_run(loop, 20) >= 0);
	cr_assert_eq(o->calls, 1, "%d callbacks", o->calls);
}

/* available_async's answer, checked against the blocking call's. */
static int64_t available_both(dlock_loop *loop, dlock_semaphore *s)
{
	outcome o = { 0 };
	int64_t b = -1;

	wait_one(loop, dlock_semaphore_available_async(NULL, s, note, &o), &o);
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
	outcome set = { 0 }, again = { 0 }, add = { 0 }, to = { 0 }, rel = { 0 };
	int was_set = -1;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	s = sem_of(c, "aqs:plain", DLOCK_SEMAPHORE_PLAIN);
	cr_expect_eq(available_both(loop, s), 0, "never set");

	wait_one(loop, dlock_semaphore_try_set_permits_async(NULL, s, 3, note, &set), &set);
	cr_expect(set.code == 0 && set.value == 1, "%d %lld", set.code, (long long)set.value);
	dl_pass(dlock_semaphore_try_set_permits(&was_set, s, 7));
	cr_expect_eq(was_set, 0, "blocking: set already");
	wait_one(loop, dlock_semaphore_try_set_permits_async(NULL, s, 7, note, &again), &again);
	cr_expect(again.code == 0 && again.value == 0, "%d %lld", again.code,
			(long long)again.value);
	cr_expect_eq(available_both(loop, s), 3);

	wait_one(loop, dlock_semaphore_add_permits_async(NULL, s, 2, note, &add), &add);
	cr_expect_eq(add.code, 0, "%s", add.message);
	cr_expect_eq(available_both(loop, s), 5);

	wait_one(loop, dlock_semaphore_set_permits_async(NULL, s, 1, note, &to), &to);
	cr_expect_eq(to.code, 0, "%s", to.message);
	cr_expect_eq(available_both(loop, s), 1);

	wait_one(loop, dlock_semaphore_release_async(NULL, s, 2, NULL, note, &rel), &rel);
	cr_expect_eq(rel.code, 0, "%s", rel.message);
	dl_pass(dlock_semaphore_release(s, 1));
	cr_expect_eq(available_both(loop, s), 4, "released 2 async, 1 blocking");

	cr_expect_eq(dlock_semaphore_try_set_permits_async(NULL, s, -1, note, &set), DLOCK_EINVAL);
	cr_expect_eq(dlock_semaphore_force_release_async(NULL, s, note, &set), DLOCK_EINVAL,
			"a plain semaphore has no force release");
	cr_expect_eq(dlock_semaphore_release_permit_async(NULL, s, "00", note, &set), DLOCK_EINVAL);
	cr_expect_eq(set.calls, 1, "no callback for a refused call");
	rh_command_int(dl_srv, "DEL aqs:plain");
	dlock_semaphore_free(s);
	dl_pass(dlock_client_close(c));
	dl_pass(dlock_loop_free(loop));
}

Test(async_sem_calls, a_key_of_another_kind_is_ewrongtype_both_ways)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_semaphore *s;
	outcome av = { 0 }, ts = { 0 }, q = { 0 };
	dlock_semaphore_info *info = NULL;
	int64_t n = 0;
	int set = 0;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	s = sem_of(c, "aqs:wrong", DLOCK_SEMAPHORE_PLAIN);
	rh_command_int(dl_srv, "HSET aqs:wrong f 1");
	cr_expect_eq(dlock_semaphore_available(&n, s), DLOCK_EWRONGTYPE);
	wait_one(loop, dlock_semaphore_available_async(NULL, s, note, &av), &av);
	cr_expect_eq(av.code, DLOCK_EWRONGTYPE, "%d (%s)", av.code, av.message);
	cr_expect_eq(dlock_semaphore_try_set_permits(&set, s, 1), DLOCK_EWRONGTYPE);
	wait_one(loop, dlock_semaphore_try_set_permits_async(NULL, s, 1, note, &ts), &ts);
	cr_expect_eq(ts.code, DLOCK_EWRONGTYPE, "%d (%s)", ts.code, ts.message);
	cr_expect_eq(dlock_semaphore_query(&info, s), DLOCK_EWRONGTYPE);
	wait_one(loop, dlock_semaphore_query_async(NULL, s, note, &q), &q);
	cr_expect_eq(q.code, DLOCK_EWRONGTYPE, "%d (%s)", q.code, q.message);
	cr_expect_null(q.info);
	cr_expect(strstr(av.message, "aqs:wrong") != NULL || strstr(av.message, "WRONGTYPE"),
			"%s", av.message);
	rh_command_int(dl_srv, "DEL aqs:wrong");
	dlock_semaphore_free(s);
	dl_pass(dlock_client_close(c));
	dl_pass(dlock_loop_free(loop));
}

Test(async_sem_calls, an_expirable_ones_query_force_release_and_permit_release)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_semaphore *s;
	char id[DLOCK_PERMIT_ID_SIZE], id2[DLOCK_PERMIT_ID_SIZE];
	outcome q = { 0 }, force = { 0 }, gone = { 0 }, rel = { 0 }, unknown = { 0 };
	dlock_semaphore_info *info = NULL;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	s = sem_of(c, "aqs:exp", DLOCK_SEMAPHORE_EXPIRABLE);
	dl_pass(dlock_semaphore_try_set_permits(NULL, s, 2));
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, 30000));
	cr_expect_eq(available_both(loop, s), 1);

	wait_one(loop, dlock_semaphore_query_async(NULL, s, note, &q), &q);
	dl_pass(dlock_semaphore_query(&info, s));
	cr_assert_eq(q.code, 0, "%s", q.message);
	cr_assert_not_null(q.info);
	cr_expect_eq(dlock_semaphore_info_permits(q.info), 1);
	cr_expect_eq(dlock_semaphore_info_permits(info), 1);
	cr_expect_str_eq(dlock_semaphore_info_permit_id(q.info, 0), id);
	cr_expect_eq(dlock_semaphore_info_available(q.info), dlock_semaphore_info_available(info));
	dlock_semaphore_info_free(q.info);
	dlock_semaphore_info_free(info);

	wait_one(loop, dlock_semaphore_force_release_async(NULL, s, note, &force), &force);
	cr_expect(force.code == 0 && force.value == 1, "%d %lld (%s)", force.code,
			(long long)force.value, force.message);
	cr_expect_eq(available_both(loop, s), 2);
	/* Its permit is gone from the server: as the blocking call says, lost. */
	wait_one(loop, dlock_semaphore_release_permit_async(NULL, s, id, note, &gone), &gone);
	cr_expect_eq(gone.code, DLOCK_ELOST, "%d (%s)", gone.code, gone.message);

	dl_pass(dlock_semaphore_acquire_permit(id2, s, 0, 30000));
	wait_one(loop, dlock_semaphore_release_permit_async(NULL, s, id2, note, &rel), &rel);
	cr_expect_eq(rel.code, 0, "%s", rel.message);
	no_second(loop, &rel);
	cr_expect_eq(dlock_semaphore_release_permit(s, id2), DLOCK_ENOTOWNER, "blocking: released");
	wait_one(loop, dlock_semaphore_release_permit_async(NULL, s, id2, note, &unknown), &unknown);
	cr_expect_eq(unknown.code, DLOCK_ENOTOWNER, "%d (%s)", unknown.code, unknown.message);
	cr_expect_eq(available_both(loop, s), 2);
	rh_command_int(dl_srv, "DEL aqs:exp");
	dlock_semaphore_free(s);
	dl_pass(dlock_client_close(c));
	dl_pass(dlock_loop_free(loop));
}

Test(async_sem_calls, a_read_is_canceled_a_change_finishes)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_semaphore *s;
	dlock_op *op = NULL;
	outcome av = { 0 }, q = { 0 }, set = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	s = sem_of(c, "aqs:cancel", DLOCK_SEMAPHORE_PLAIN);

	dl_pass(dlock_semaphore_available_async(&op, s, note, &av));
	dl_pass(dlock_op_cancel(op));
	wait_one(loop, 0, &av);
	cr_expect_eq(av.code, DLOCK_ECANCELED, "%d (%s)", av.code, av.message);
	no_second(loop, &av);

	dl_pass(dlock_semaphore_query_async(&op, s, note, &q));
	dl_pass(dlock_op_cancel(op));
	wait_one(loop, 0, &q);
	cr_expect_eq(q.code, DLOCK_ECANCELED);
	cr_expect_null(q.info);

	dl_pass(dlock_semaphore_set_permits_async(&op, s, 4, note, &set));
	dl_pass(dlock_op_cancel(op));
	wait_one(loop, 0, &set);
	cr_expect_eq(set.code, 0, "%d (%s)", set.code, set.message);
	no_second(loop, &set);
	cr_expect_eq(available_both(loop, s), 4, "the set was made");
	rh_command_int(dl_srv, "DEL aqs:cancel");
	dlock_semaphore_free(s);
	dl_pass(dlock_client_close(c));
	dl_pass(dlock_loop_free(loop));
}
