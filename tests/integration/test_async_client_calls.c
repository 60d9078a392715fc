/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The asynchronous twins of a client's own calls (dlock/async.h) on a loop
 * the test drives: PING, the server's uptime, a registered owner's holder -
 * each answers what its blocking call answers, with one callback, never
 * from inside the call; each can be canceled.
 */
#include <criterion/criterion.h>

#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

TestSuite(async_client_calls, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

typedef struct outcome {
	int calls, code, has_holder;
	int64_t value;
	dlock_holder holder;
	char message[256];
} outcome;

static void note(dlock_op *op, const dlock_result *r, void *ud)
{
	outcome *o = ud;

	(void)op;
	o->calls++;
	o->code = r->code;
	o->value = r->value;
	o->has_holder = r->holder != NULL;
	if (r->holder != NULL)
		o->holder = *r->holder; /* valid during the callback only */
	snprintf(o->message, sizeof(o->message), "%s", r->message);
}

static dlock_client *client_on(dlock_loop *loop, const char *label)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.loop = loop;
	o.label = label;
	return dl_client_opts(rh_server_uri(dl_srv), &o);
}

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

Test(async_client_calls, ping_and_uptime_answer_as_the_blocking_calls)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_op *op = NULL;
	outcome ping = { 0 }, up = { 0 }, canceled = { 0 };
	int64_t before = -1, after = -1;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop, NULL);
	dl_pass(dlock_client_ping(c));
	wait_one(loop, dlock_client_ping_async(NULL, c, note, &ping), &ping);
	cr_expect_eq(ping.code, 0, "%s", ping.message);
	no_second(loop, &ping);

	dl_pass(dlock_client_uptime(&before, c));
	wait_one(loop, dlock_client_uptime_async(NULL, c, note, &up), &up);
	dl_pass(dlock_client_uptime(&after, c));
	cr_expect_eq(up.code, 0, "%s", up.message);
	cr_expect(up.value >= before && up.value <= after, "uptime %lld, blocking %lld then %lld",
			(long long)up.value, (long long)before, (long long)after);

	dl_pass(dlock_client_uptime_async(&op, c, note, &canceled));
	dl_pass(dlock_op_cancel(op));
	wait_one(loop, 0, &canceled);
	cr_expect_eq(canceled.code, DLOCK_ECANCELED, "%d (%s)", canceled.code, canceled.message);
	no_second(loop, &canceled);

	cr_expect_eq(dlock_client_ping_async(NULL, NULL, note, &ping), DLOCK_EINVAL);
	cr_expect_eq(dlock_client_uptime_async(NULL, c, NULL, NULL), DLOCK_EINVAL);
	dl_pass(dlock_client_close(c));
	dl_pass(dlock_loop_free(loop));
}

/* (The async call goes first: on an epoll loop, a refused connect after
 * another refused connect is noticed only at the connect timeout - an
 * issue of the loop's, not of these calls.) */
Test(async_client_calls, ping_async_fails_as_the_blocking_call_when_the_server_is_gone)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	outcome ping = { 0 };
	int brc;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop, NULL);
	dl_pass(dlock_client_ping(c));
	cr_assert_eq(rh_server_kill(dl_srv), 0);
	wait_one(loop, dlock_client_ping_async(NULL, c, note, &ping), &ping);
	brc = dlock_client_ping(c);
	cr_expect_eq(brc, DLOCK_ECONN, "blocking ping of a stopped server: %d (%s)", brc,
			dlock_errmsg_last());
	cr_expect_eq(ping.code, brc, "async %d (%s), blocking %d", ping.code, ping.message, brc);
	cr_expect(strstr(ping.message, "refused") != NULL, "%s", ping.message);
	dl_pass(dlock_client_close(c));
	dl_pass(dlock_loop_free(loop));
}

Test(async_client_calls, holder_async_finds_a_registration_as_the_blocking_call)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dlock_op *op = NULL;
	char owner[64];
	outcome found = { 0 }, none = { 0 }, foreign = { 0 }, canceled = { 0 };
	dlock_holder h;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop, "async-holder");
	l = dl_lock(c, "acc:held");
	dlock_client_owner(owner, sizeof(owner), c, 7);
	dl_pass(dlock_lock_try_as(l, owner, 0, 30000));

	memset(&h, 0, sizeof(h));
	cr_assert_eq(dlock_client_holder(&h, c, owner), 1, "%s", dlock_errmsg_last());
	wait_one(loop, dlock_client_holder_async(NULL, c, owner, note, &found), &found);
	cr_expect(found.code == 0 && found.value == 1 && found.has_holder, "%d %lld (%s)",
			found.code, (long long)found.value, found.message);
	cr_expect_str_eq(found.holder.label, "async-holder");
	cr_expect_str_eq(found.holder.label, h.label);
	cr_expect_eq(found.holder.pid, h.pid);
	cr_expect_eq(found.holder.since_ms, h.since_ms);

	wait_one(loop, dlock_client_holder_async(NULL, c,
				"aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee:1", note, &none), &none);
	cr_expect(none.code == 0 && none.value == 0 && !none.has_holder, "%d %lld", none.code,
			(long long)none.value);
	cr_expect_eq(dlock_client_holder(&h, c, "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee:1"), 0);
	wait_one(loop, dlock_client_holder_async(NULL, c, "a-redisson-owner", note, &foreign),
			&foreign);
	cr_expect(foreign.code == 0 && foreign.value == 0, "%d", foreign.code);
	cr_expect_eq(dlock_client_holder(&h, c, "a-redisson-owner"), 0);

	dl_pass(dlock_client_holder_async(&op, c, owner, note, &canceled));
	dl_pass(dlock_op_cancel(op));
	wait_one(loop, 0, &canceled);
	cr_expect_eq(canceled.code, DLOCK_ECANCELED);
	cr_expect_eq(dlock_client_holder_async(NULL, c, NULL, note, &canceled), DLOCK_EINVAL);

	dl_pass(dlock_lock_unlock_as(l, owner));
	dlock_lock_free(l);
	dl_pass(dlock_client_close(c));
	dl_pass(dlock_loop_free(loop));
}
