/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The multiplexer driven step by step, as an event loop drives it: begin,
 * then the caller's own poll over dlock__mux_poll_set(), dlock__mux_advance()
 * with what it saw, and dlock__mux_end() - at the end, or in the middle.
 */
#include <criterion/criterion.h>

#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <dlock.h>

#include "core/drive/client.h"
#include "core/mux/mux.h"
#include "core/net/script.h"
#include "core/base/time.h"
#include "redis_harness.h"
#include "support.h"

#define CMD_TIMEOUT_MS 1000

/* Counts its runs: a reply tells which run of the script it answers. */
static dlock__script incr_script = DLOCK__SCRIPT("mux_steps_incr",
		"return redis.call('INCR', KEYS[1])");

static const char KEY[] = "mux:steps";

/* Says how long its argument was: a big command arrived whole. */
static dlock__script len_script = DLOCK__SCRIPT("mux_steps_len",
		"return string.len(ARGV[1])");

/* More than a socket takes while its server reads nothing (send and
 * receive buffers of a few MiB at most). */
#define BIG_LEN ((size_t)16 << 20)

static void len_call(dlock__call *call, const char *arg, size_t len)
{
	memset(call, 0, sizeof(*call));
	call->script = &len_script;
	dlock__call_push(call, KEY, sizeof(KEY) - 1);
	dlock__call_keys_done(call);
	dlock__call_push(call, arg, len);
}

static void incr_call(dlock__call *call)
{
	memset(call, 0, sizeof(*call));
	call->script = &incr_script;
	dlock__call_push(call, KEY, sizeof(KEY) - 1);
	dlock__call_keys_done(call);
}

static void op_on(dlock__mux_op *op, dlock_client *c, const dlock__call *call)
{
	memset(op, 0, sizeof(*op));
	op->client = c;
	op->call = call;
}

/* The caller's loop: poll what the run asks for until it is over or
 * limit_ms passed. Returns the steps taken, or -1 if not over by then. */
static int drive(dlock__mux *m, int64_t limit_ms)
{
	int64_t end = rh_now_ms() + limit_ms;
	int steps = 0;

	while (rh_now_ms() < end) {
		struct pollfd pfd[8];
		int64_t wake_at = end;
		size_t k = dlock__mux_poll_set(m, pfd, 8, &wake_at);

		cr_assert_geq(poll(pfd, (nfds_t)k, dlock__ms_until(wake_at)), 0);
		steps++;
		if (dlock__mux_advance(m, pfd, k))
			return steps;
	}
	return -1;
}

static void assert_count(const dlock__mux_op *op, long long want, const char *who)
{
	cr_assert_eq(op->rc, 0, "%s: %s", who, op->errmsg);
	cr_assert_not_null(op->reply, "%s: no reply", who);
	cr_assert_eq(op->reply->type, REDIS_REPLY_INTEGER, "%s: reply type %d", who,
			op->reply->type);
	cr_assert_eq(op->reply->integer, want, "%s: INCR said %lld, expected %lld", who,
			op->reply->integer, want);
}

TestSuite(mux_steps);

/* Two servers, three ops (two pipelined on one connection): the caller's
 * own poll loop gets every one of them answered, in order. */
Test(mux_steps, own_poll_loop_answers_every_op, .timeout = 30)
{
	rh_server *s[2];
	dlock_client *c[2];
	dlock__call call;
	dlock__mux_op ops[3];
	dlock__mux m;
	int steps;

	cr_assert_eq(rh_servers_start(s, 2, NULL), 0);
	c[0] = dl_client(rh_server_uri(s[0]), CMD_TIMEOUT_MS * 5, 0);
	c[1] = dl_client(rh_server_uri(s[1]), CMD_TIMEOUT_MS * 5, 0);
	incr_call(&call);
	op_on(&ops[0], c[0], &call);
	op_on(&ops[1], c[1], &call);
	op_on(&ops[2], c[0], &call);

	dl_pass(dlock__mux_begin(&m, ops, 3, NULL, NULL));
	steps = drive(&m, 5000);
	cr_assert_gt(steps, 0, "the run was not over within 5 s");
	dlock__mux_end(&m);

	assert_count(&ops[0], 1, "server 0, first op");
	assert_count(&ops[1], 1, "server 1");
	assert_count(&ops[2], 2, "server 0, second op");
	cr_assert_eq(rh_command_int(s[0], "INCRBY %s 0", KEY), 2);
	cr_assert_eq(rh_command_int(s[1], "INCRBY %s 0", KEY), 1);
	dlock__mux_clear(ops, 3);
	dlock_client_free(c[0]);
	dlock_client_free(c[1]);
	rh_server_free(s[0]);
	rh_server_free(s[1]);
}

/* One server of two is paused: the run waits for it no longer than its
 * deadline, which poll_set names, and an advance() past it with nothing
 * ready fails that op and ends the run. */
Test(mux_steps, advance_past_deadline_times_out_paused_server, .timeout = 30)
{
	rh_server *s[2];
	dlock_client *c[2];
	dlock__call call;
	dlock__mux_op ops[2];
	dlock__mux m;
	struct pollfd pfd[2];
	int64_t begun, wake_at = DLOCK__NEVER;
	char port[16];

	cr_assert_eq(rh_servers_start(s, 2, NULL), 0);
	c[0] = dl_client(rh_server_uri(s[0]), CMD_TIMEOUT_MS, 0);
	c[1] = dl_client(rh_server_uri(s[1]), CMD_TIMEOUT_MS, 0);
	incr_call(&call);
	op_on(&ops[0], c[0], &call);
	op_on(&ops[1], c[1], &call);
	cr_assert_eq(rh_server_pause(s[1]), 0);

	dl_pass(dlock__mux_begin(&m, ops, 2, NULL, NULL));
	begun = rh_now_ms();
	/* Serve the live server until it answered; the paused one stays due. */
	while (ops[0].reply == NULL && ops[0].rc == 0 && rh_now_ms() < begun + CMD_TIMEOUT_MS / 2) {
		size_t k = dlock__mux_poll_set(&m, pfd, 2, &wake_at);

		cr_assert_geq(poll(pfd, (nfds_t)k, 10), 0);
		cr_assert_eq(dlock__mux_advance(&m, pfd, k), 0,
				"over before the paused server's deadline");
	}
	assert_count(&ops[0], 1, "the live server");

	wake_at = DLOCK__NEVER;
	cr_assert_eq(dlock__mux_poll_set(&m, pfd, 2, &wake_at), 1, "the paused server is polled");
	cr_assert_leq(wake_at, rh_now_ms() + CMD_TIMEOUT_MS,
			"wake_at %lld ms from now, beyond the %d ms command timeout",
			(long long)(wake_at - rh_now_ms()), CMD_TIMEOUT_MS);
	cr_assert_eq(dlock__mux_advance(&m, NULL, 0), 0, "over before the deadline");

	dl_sleep_ms(dlock__ms_until(wake_at) + 5);
	cr_assert_eq(dlock__mux_advance(&m, NULL, 0), 1, "not over %lld ms after begin",
			(long long)(rh_now_ms() - begun));
	cr_assert_eq(ops[1].rc, DLOCK_ETIMEDOUT, "paused server: rc %d (%s)", ops[1].rc,
			ops[1].errmsg);
	snprintf(port, sizeof(port), ":%d", rh_server_port(s[1]));
	cr_assert(strstr(ops[1].errmsg, port) != NULL, "the message names the node: %s",
			ops[1].errmsg);
	wake_at = DLOCK__NEVER;
	cr_assert_eq(dlock__mux_poll_set(&m, pfd, 2, &wake_at), 0);
	cr_assert_eq(wake_at, 0, "an over run asks to be advanced at once");
	dlock__mux_end(&m);
	dlock__mux_end(&m); /* a second end does nothing */

	cr_assert_eq(rh_server_resume(s[1]), 0);
	dlock__mux_clear(ops, 2);
	dlock_client_free(c[0]);
	dlock_client_free(c[1]);
	rh_server_free(s[0]);
	rh_server_free(s[1]);
}

/* Ended mid-run (a cancel) while its server is paused: the op is
 * abandoned undecided, the connection goes back owing the reply, and once
 * the server is back the next command on it gets its own reply, not the
 * owed one. */
Test(mux_steps, end_mid_run_abandons_and_owed_reply_is_skipped, .timeout = 30)
{
	rh_server *s;
	dlock_client *c;
	dlock__call call;
	dlock__mux_op op;
	dlock__mux m;
	struct pollfd pfd[1];
	int64_t wake_at = DLOCK__NEVER;
	size_t k;

	s = rh_server_start(NULL);
	cr_assert_not_null(s);
	c = dl_client(rh_server_uri(s), CMD_TIMEOUT_MS * 5, 0);
	incr_call(&call);
	op_on(&op, c, &call);
	dl_pass(dlock__mux_run(&op, 1, NULL, NULL)); /* a pooled connection, the script known */
	assert_count(&op, 1, "warm-up");
	dlock__mux_clear(&op, 1);

	cr_assert_eq(rh_server_pause(s), 0);
	op_on(&op, c, &call);
	dl_pass(dlock__mux_begin(&m, &op, 1, NULL, NULL));
	k = dlock__mux_poll_set(&m, pfd, 1, &wake_at);
	cr_assert_eq(k, 1);
	cr_assert_geq(poll(pfd, (nfds_t)k, 50), 0);
	cr_assert_eq(dlock__mux_advance(&m, pfd, k), 0, "over while the server is paused");
	dlock__mux_end(&m);

	cr_assert_eq(op.rc, DLOCK_ETIMEDOUT, "rc %d (%s)", op.rc, op.errmsg);
	cr_assert(op.undecided && op.abandoned, "undecided %d, abandoned %d", op.undecided,
			op.abandoned);
	cr_assert_eq(atomic_load(&c->node.owed), 1, "the connection went back owing the reply");

	cr_assert_eq(rh_server_resume(s), 0);
	op_on(&op, c, &call);
	dl_pass(dlock__mux_run(&op, 1, NULL, NULL));
	/* 2 ran when the server came back (its reply skipped); this is the 3rd. */
	assert_count(&op, 3, "after resume");
	cr_assert_eq(atomic_load(&c->node.owed), 0, "the owed reply was settled");
	dlock__mux_clear(&op, 1);
	dlock_client_free(c);
	rh_server_free(s);
}

/* A command bigger than the socket takes: begin does not wait for it to
 * go out - the rest goes on POLLOUT in later steps. A paused server then
 * costs its deadline in advance(), not a blocked begin; a live one gets the
 * command whole. */
Test(mux_steps, big_command_goes_out_in_steps, .timeout = 60)
{
	rh_server *s[2];
	dlock_client *c[2];
	dlock__call call, small;
	dlock__mux_op ops[2], op;
	dlock__mux m;
	struct pollfd pfd[2];
	int64_t t0, took, wake_at = DLOCK__NEVER;
	char *big = malloc(BIG_LEN);
	size_t k;
	int steps;

	cr_assert_not_null(big);
	memset(big, 'x', BIG_LEN);
	cr_assert_eq(rh_servers_start(s, 2, NULL), 0);
	c[0] = dl_client(rh_server_uri(s[0]), CMD_TIMEOUT_MS * 5, 0);
	c[1] = dl_client(rh_server_uri(s[1]), CMD_TIMEOUT_MS, 0);
	len_call(&call, big, BIG_LEN);
	op_on(&ops[0], c[0], &call);
	op_on(&ops[1], c[1], &call);
	cr_assert_eq(rh_server_pause(s[1]), 0);

	t0 = rh_now_ms();
	dl_pass(dlock__mux_begin(&m, ops, 2, NULL, NULL));
	took = rh_now_ms() - t0;
	cr_assert_lt(took, CMD_TIMEOUT_MS, "begin took %lld ms: it waited on the paused server",
			(long long)took);
	k = dlock__mux_poll_set(&m, pfd, 2, &wake_at);
	cr_assert_eq(k, 2);
	cr_assert(pfd[1].events & POLLOUT, "the paused server's socket is polled for writing");

	steps = drive(&m, CMD_TIMEOUT_MS * 5);
	cr_assert_gt(steps, 0, "the run was not over within %d ms", CMD_TIMEOUT_MS * 5);
	dlock__mux_end(&m);
	assert_count(&ops[0], (long long)BIG_LEN, "the live server");
	cr_assert_eq(ops[1].rc, DLOCK_ETIMEDOUT, "paused server: rc %d (%s)", ops[1].rc,
			ops[1].errmsg);
	dlock__mux_clear(ops, 2);

	/* The half-sent connection was closed, not pooled: a new one works. */
	cr_assert_eq(rh_server_resume(s[1]), 0);
	incr_call(&small);
	op_on(&op, c[1], &small);
	dl_pass(dlock__mux_run(&op, 1, NULL, NULL));
	assert_count(&op, 1, "after resume");
	dlock__mux_clear(&op, 1);
	free(big);
	dlock_client_free(c[0]);
	dlock_client_free(c[1]);
	rh_server_free(s[0]);
	rh_server_free(s[1]);
}
