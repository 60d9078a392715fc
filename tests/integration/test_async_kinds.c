/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Asynchronous operations on the fair and the fenced lock (dlock/async.h),
 * on a loop the test drives: a fenced acquisition's callback carries a
 * token that grows from one holder to the next, and fair waiters started
 * one after the other are served in that order.
 */
#include <criterion/criterion.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

TestSuite(async_kinds, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

typedef struct outcome {
	int calls, code, order;
	int64_t token;
} outcome;

static int served; /* callbacks so far, to number them */

static void note(dlock_op *op, const dlock_result *r, void *ud)
{
	outcome *o = ud;

	(void)op;
	o->calls++;
	o->code = r->code;
	o->token = r->token;
	o->order = ++served;
}

static dlock_lock *lock_of(dlock_client *c, const char *name, dlock_lock_kind kind)
{
	dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
	dlock_lock *l = NULL;

	lo.kind = kind;
	dl_pass(dlock_lock_new(&l, c, name, &lo));
	return l;
}

static dlock_client *client_on(dlock_loop *loop)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.loop = loop;
	return dl_client_opts(rh_server_uri(dl_srv), &o);
}

static void run_until(dlock_loop *loop, const outcome *o)
{
	int64_t until = rh_now_ms() + 10000;

	while (o->calls == 0 && rh_now_ms() < until)
		cr_assert(dlock_loop_run(loop, 20) >= 0, "%s", dlock_errmsg_last());
	cr_assert_eq(o->calls, 1, "no callback within 10 s");
}

Test(async_kinds, a_fenced_acquisition_carries_a_growing_token)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	char owner[64];
	outcome a = { 0 }, r = { 0 }, b = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	l = lock_of(c, "ak:fenced", DLOCK_LOCK_FENCED);
	dlock_client_owner(owner, c, 1);
	dl_pass(dlock_lock_acquire_async(NULL, l, owner, 0, 10000, note, &a));
	run_until(loop, &a);
	cr_assert_eq(a.code, 0, "acquire: %d", a.code);
	dl_pass(dlock_lock_release_async(NULL, l, owner, note, &r));
	run_until(loop, &r);
	cr_assert_eq(r.code, 0);
	dl_pass(dlock_lock_acquire_async(NULL, l, owner, 0, 10000, note, &b));
	run_until(loop, &b);
	cr_assert_eq(b.code, 0);
	cr_expect(a.token > 0 && b.token > a.token, "tokens %lld then %lld", (long long)a.token,
			(long long)b.token);
	dl_pass(dlock_lock_release(l, owner));
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_kinds, fair_waiters_are_served_in_the_order_they_asked)
{
	dlock_client *other = dl_client(rh_server_uri(dl_srv), 1000, 30000);
	dlock_lock *held = lock_of(other, "ak:fair", DLOCK_LOCK_FAIR), *l;
	dlock_loop *loop = NULL;
	dlock_client *c;
	char first[64], second[64];
	outcome a = { 0 }, b = { 0 };
	int64_t until;

	dl_pass(dlock_lock_acquire(held, NULL, 0, 20000));
	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	l = lock_of(c, "ak:fair", DLOCK_LOCK_FAIR);
	dlock_client_owner(first, c, 1);
	dlock_client_owner(second, c, 2);
	served = 0;
	/* The first waiter is queued before the second one asks. */
	dl_pass(dlock_lock_acquire_async(NULL, l, first, 10000, 10000, note, &a));
	for (until = rh_now_ms() + 5000;
			rh_command_int(dl_srv, "ZCARD redisson_lock_timeout:{ak:fair}") < 1 &&
			rh_now_ms() < until;)
		cr_assert(dlock_loop_run(loop, 10) >= 0);
	dl_pass(dlock_lock_acquire_async(NULL, l, second, 10000, 10000, note, &b));
	for (until = rh_now_ms() + 5000;
			rh_command_int(dl_srv, "ZCARD redisson_lock_timeout:{ak:fair}") < 2 &&
			rh_now_ms() < until;)
		cr_assert(dlock_loop_run(loop, 10) >= 0);
	cr_assert_eq(rh_command_int(dl_srv, "LLEN redisson_lock_queue:{ak:fair}"), 2,
			"both waiters queued");
	dl_pass(dlock_lock_release(held, NULL));
	run_until(loop, &a);
	cr_assert_eq(a.code, 0, "first: %d", a.code);
	cr_expect_eq(b.calls, 0, "the second waiter got in while the first held it");
	dl_pass(dlock_lock_release(l, first));
	run_until(loop, &b);
	cr_assert_eq(b.code, 0, "second: %d", b.code);
	cr_expect(a.order < b.order, "served in the order asked");
	dl_pass(dlock_lock_release(l, second));
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS ak:fair"), 0);
	dlock_lock_free(l);
	dlock_lock_free(held);
	dlock_client_free(c);
	dlock_loop_free(loop);
	dlock_client_free(other);
}
