/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock_countdown_subscribers_async (dlock/countdown.h): the latch's waiters
 * as an operation on a loop the test drives - the blocking call's answer
 * in the result's `value`, one callback, never from inside the call -
 * with nobody listening, with an await listening from another client, and
 * for a handle freed while its operation runs.
 */
#include <criterion/criterion.h>


#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

TestSuite(async_latch_waiters, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

static dl_outcome waiters_async(dlock_loop *loop, dlock_countdown *c)
{
	dl_outcome o = { 0 };

	o.starting = 1;
	dl_pass(dlock_countdown_subscribers_async(NULL, c, dl_note, &o));
	o.starting = 0;
	dl_await_one(loop, &o, 10000);
	return o;
}

static void agrees(dlock_loop *loop, dlock_countdown *c, int64_t want)
{
	int64_t b = -1;
	dl_outcome o;

	dl_pass(dlock_countdown_subscribers(&b, c));
	o = waiters_async(loop, c);
	cr_expect_eq(o.code, 0, "%s", o.message);
	cr_expect(o.value == want && b == want, "async %lld, blocking %lld, want %lld",
			(long long)o.value, (long long)b, (long long)want);
}

Test(async_latch_waiters, answers_as_the_blocking_call)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_client *c, *other;
	dlock_countdown *latch, *theirs;
	dlock_op *await = NULL;
	dl_outcome w = { 0 };
	int64_t n = 0, until;
	int set = 0;

	dl_pass(dlock_loop_new(&loop, NULL));
	co.loop = loop;
	c = dl_client_opts(rh_server_uri(dl_srv), &co);
	other = dl_client(rh_server_uri(dl_srv), 2000, 30000);
	dl_pass(dlock_countdown_new(&latch, c, "alw:latch", NULL));
	dl_pass(dlock_countdown_new(&theirs, other, "alw:latch", NULL));
	agrees(loop, latch, 0);
	dl_pass(dlock_countdown_try_set_count(&set, latch, 1));
	/* Another client's await listens on the latch's channel. */
	dl_pass(dlock_countdown_await_async(&await, theirs, 20000, dl_note, &w));
	for (until = rh_now_ms() + 10000; n != 1 && rh_now_ms() < until;) {
		dlock_loop_run(loop, 20);
		dl_pass(dlock_countdown_subscribers(&n, latch));
	}
	cr_assert_eq(n, 1, "the await never listened");
	agrees(loop, latch, 1);
	dl_pass(dlock_op_cancel(await));
	dlock_op_free(await);
	dl_drive(loop, &w);
	dlock_countdown_free(theirs);
	dlock_countdown_free(latch);
	/* The canceled await ended on other's own thread, where its op lets go
	 * of `theirs` just after the callback: other goes then, if not yet. */
	dlock_client_free(other);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

/* The handle freed while the op runs: the op keeps it until its end. */
Test(async_latch_waiters, a_handle_freed_meanwhile_stays_until_the_end)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_countdown *latch;
	dlock_client *c;
	dl_outcome o = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	co.loop = loop;
	c = dl_client_opts(rh_server_uri(dl_srv), &co);
	dl_pass(dlock_countdown_new(&latch, c, "alw:freed", NULL));
	dl_pass(dlock_countdown_subscribers_async(NULL, latch, dl_note, &o));
	dlock_countdown_free(latch);
	dl_drive(loop, &o);
	cr_expect_eq(o.code, 0, "%s", o.message);
	cr_expect_eq(o.value, 0);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_latch_waiters, null_arguments_are_refused_without_a_callback)
{
	dl_outcome o = { 0 };
	dlock_op *op = (dlock_op *)&o;

	cr_assert_eq(dlock_countdown_subscribers_async(&op, NULL, dl_note, &o), DLOCK_EINVAL);
	cr_assert_null(op);
	cr_assert_eq(o.calls, 0);
}
