/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The asynchronous twins of a client's own calls (dlock/client.h) on a loop
 * the test drives: connect, PING, the server's uptime, a registered owner's holder -
 * each answers what its blocking call answers, with one callback, never
 * from inside the call; each can be canceled.
 */
#include <criterion/criterion.h>

#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

TestSuite(async_client_calls, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

Test(async_client_calls, ping_and_uptime_answer_as_the_blocking_calls)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_op *op = NULL;
	dl_outcome ping = { 0 }, up = { 0 }, canceled = { 0 };
	int64_t before = -1, after = -1;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, NULL);
	dl_pass(dlock_client_ping(c));
	dl_wait_one(loop, dlock_client_ping_async(NULL, c, dl_note, &ping), &ping);
	cr_expect_eq(ping.code, 0, "%s", ping.message);
	dl_no_second(loop, &ping);

	dl_pass(dlock_client_uptime_s(&before, c));
	dl_wait_one(loop, dlock_client_uptime_s_async(NULL, c, dl_note, &up), &up);
	dl_pass(dlock_client_uptime_s(&after, c));
	cr_expect_eq(up.code, 0, "%s", up.message);
	cr_expect(up.value >= before && up.value <= after, "uptime %lld, blocking %lld then %lld",
			(long long)up.value, (long long)before, (long long)after);

	dl_pass(dlock_client_uptime_s_async(&op, c, dl_note, &canceled));
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	dl_wait_one(loop, 0, &canceled);
	cr_expect_eq(canceled.code, DLOCK_ECANCELED, "%d (%s)", canceled.code, canceled.message);
	dl_no_second(loop, &canceled);

	cr_expect_eq(dlock_client_ping_async(NULL, NULL, dl_note, &ping), DLOCK_EINVAL);
	cr_expect_eq(dlock_client_uptime_s_async(NULL, c, NULL, NULL), DLOCK_EINVAL);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

/* (The async call goes first: on an epoll loop, a refused connect after
 * another refused connect is noticed only at the connect timeout - an
 * issue of the loop's, not of these calls.) */
Test(async_client_calls, ping_async_fails_as_the_blocking_call_when_the_server_is_gone)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dl_outcome ping = { 0 };
	int brc;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, NULL);
	dl_pass(dlock_client_ping(c));
	cr_assert_eq(rh_server_kill(dl_srv), 0);
	dl_wait_one(loop, dlock_client_ping_async(NULL, c, dl_note, &ping), &ping);
	brc = dlock_client_ping(c);
	cr_expect_eq(brc, DLOCK_ECONN, "blocking ping of a stopped server: %d (%s)", brc,
			dlock_errmsg_last());
	cr_expect_eq(ping.code, brc, "async %d (%s), blocking %d", ping.code, ping.message, brc);
	cr_expect(strstr(ping.message, "refused") != NULL, "%s", ping.message);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async_client_calls, holder_async_finds_a_registration_as_the_blocking_call)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dlock_op *op = NULL;
	char owner[64];
	dl_outcome found = { 0 }, none = { 0 }, foreign = { 0 }, canceled = { 0 };
	dlock_holder h = DLOCK_HOLDER_INIT;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = dl_client_on(loop, "async-holder");
	l = dl_lock(c, "acc:held");
	dlock_client_owner(owner, c, 7);
	dl_pass(dlock_lock_acquire(l, owner, 0, 30000));

	dl_pass(dlock_client_holder(&h, c, owner));
	cr_assert_eq(h.registered, 1);
	dl_wait_one(loop, dlock_client_holder_async(NULL, c, owner, dl_note, &found), &found);
	cr_expect(found.code == 0 && found.value == 1 && found.has_holder, "%d %lld (%s)",
			found.code, (long long)found.value, found.message);
	cr_expect_str_eq(found.holder.label, "async-holder");
	cr_expect_eq(found.holder.registered, 1);
	cr_expect_eq(found.holder.version, DLOCK_HOLDER_VERSION);
	cr_expect_str_eq(found.holder.label, h.label);
	cr_expect_eq(found.holder.pid, h.pid);
	cr_expect_eq(found.holder.since_ms, h.since_ms);

	dl_wait_one(loop, dlock_client_holder_async(NULL, c,
				"aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee:1", dl_note, &none), &none);
	cr_expect(none.code == 0 && none.value == 0 && !none.has_holder, "%d %lld", none.code,
			(long long)none.value);
	cr_expect_eq(dlock_client_holder(&h, c, "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee:1"), 0);
	cr_expect_eq(h.registered, 0);
	dl_wait_one(loop, dlock_client_holder_async(NULL, c, "a-redisson-owner", dl_note, &foreign),
			&foreign);
	cr_expect(foreign.code == 0 && foreign.value == 0, "%d", foreign.code);
	cr_expect_eq(dlock_client_holder(&h, c, "a-redisson-owner"), 0);
	cr_expect_eq(h.registered, 0);

	dl_pass(dlock_client_holder_async(&op, c, owner, dl_note, &canceled));
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	dl_wait_one(loop, 0, &canceled);
	cr_expect_eq(canceled.code, DLOCK_ECANCELED);
	cr_expect_eq(dlock_client_holder_async(NULL, c, NULL, dl_note, &canceled), DLOCK_EINVAL);

	dl_pass(dlock_lock_release(l, owner));
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

/* A lazy client touches no server until dlock_client_connect() or its twin
 * (the async call first, as above); both answer as the blocking call. */
Test(async_client_calls, connect_and_its_twin_connect_a_lazy_client_now)
{
	dlock_loop *loop = NULL;
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL, *gone = NULL;
	dl_outcome up = { 0 }, down = { 0 };
	int brc;

	dl_pass(dlock_loop_new(&loop, NULL));
	o.loop = loop;
	o.lazy_connect = 1;
	c = dl_client_opts(rh_server_uri(dl_srv), &o);
	dl_wait_one(loop, dlock_client_connect_async(NULL, c, dl_note, &up), &up);
	cr_expect_eq(up.code, 0, "%s", up.message);
	dl_no_second(loop, &up);
	dl_pass(dlock_client_connect(c));

	cr_assert_eq(rh_server_kill(dl_srv), 0);
	/* Nothing listens now: a lazy client is still made, its connect fails. */
	dl_pass(dlock_client_new(&gone, rh_server_uri(dl_srv), &o));
	dl_wait_one(loop, dlock_client_connect_async(NULL, gone, dl_note, &down), &down);
	brc = dlock_client_connect(gone);
	cr_expect_eq(brc, DLOCK_ECONN, "blocking connect to a stopped server: %d (%s)", brc,
			dlock_client_errmsg(gone));
	cr_expect_eq(down.code, brc, "async %d (%s), blocking %d", down.code, down.message, brc);
	cr_expect_eq(dlock_client_connect(NULL), DLOCK_EINVAL);
	cr_expect_eq(dlock_client_connect_async(NULL, NULL, dl_note, &down), DLOCK_EINVAL);
	dlock_client_free(gone);
	dlock_client_free(c);
	dlock_loop_free(loop);
}
