/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fair waiters that stop waiting while their server is paused leave the
 * queue once the server is back. Their leaves time out and are given up on
 * their connection, which the client resets once it has owed for too long
 * (core/net/owed.h, rule 5): what the paused server had not taken into its
 * socket (hundreds of leaves are more than it takes; a connection it had
 * not accepted yet, all of it) is discarded, leaves with it. Nothing else
 * would ever take those places out of the queue (nobody acquires the lock
 * again), so the connection hands its leaves back and they go again on
 * another (rule 6). The lock's holder is untouched. The client resets
 * connections while it has something to ask the server: here another fair
 * waiter of it, on another lock, keeps looking.
 */
#include <criterion/criterion.h>

#include <string.h>

#include <hiredis/hiredis.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

TestSuite(fair_leave_outage, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

#define CMD_TIMEOUT_MS 200
#define WAITERS 300
/* Paused long enough for the leaves to time out and their connection to
 * be reset (the owed bound: max(2 x 200 ms, 1 s)), with room on a busy
 * machine. */
#define PAUSE_MS 4500
/* The waits end this long into the pause. */
#define LATE_MS 2000
/* After the resume the leaves run within this (a few round trips). */
#define GONE_WITHIN_MS 5000

/* The owner's place in the fair queue of `name`: 1 there, 0 not. */
static int queued(const char *name, const char *owner)
{
	redisReply *r = rh_command(dl_srv, "ZSCORE redisson_lock_timeout:{%s} %s", name, owner);
	int there;

	cr_assert(r != NULL, "ZSCORE: no reply");
	there = r->type == REDIS_REPLY_STRING;
	freeReplyObject(r);
	return there;
}

static int exists(const char *key)
{
	return (int)rh_command_int(dl_srv, "EXISTS %s", key);
}

/* Run the loop until cond(name, owner) or `within` ms pass; whether it held. */
static int run_until(dlock_loop *loop, int (*cond)(const char *, const char *), const char *name,
		const char *owner, int64_t within)
{
	int64_t end = rh_now_ms() + within;

	while (!cond(name, owner) && rh_now_ms() < end)
		cr_assert(dlock_loop_run(loop, 10) >= 0, "%s", dlock_errmsg_last());
	return cond(name, owner);
}

/* No queue nor deadlines left for `name`. */
static int nobody_queued(const char *name, const char *unused)
{
	char queue[128], timeouts[128];

	(void)unused;
	snprintf(queue, sizeof(queue), "redisson_lock_queue:{%s}", name);
	snprintf(timeouts, sizeof(timeouts), "redisson_lock_timeout:{%s}", name);
	return !exists(queue) && !exists(timeouts);
}

/* Run the loop for ms (the outage lasts this long: nothing to wait for). */
static void run_for(dlock_loop *loop, int64_t ms)
{
	int64_t end = rh_now_ms() + ms;

	while (rh_now_ms() < end)
		cr_assert(dlock_loop_run(loop, 10) >= 0, "%s", dlock_errmsg_last());
}

/* The length of `name`'s fair queue. */
static int64_t queue_len(const char *name)
{
	return rh_command_int(dl_srv, "LLEN redisson_lock_queue:{%s}", name);
}

static int all_queued(const char *name, const char *unused)
{
	(void)unused;
	return queue_len(name) == WAITERS;
}

/*
 * WAITERS waiters queued on `name` (held by another process's owner), on
 * one pooled connection, whose waits end during a pause: canceled LATE_MS
 * into it (cancel), or their wait_ms running out about then. Their leaves
 * are more than the paused server's socket takes in: most wait in this
 * process's socket when the connection is reset. Once the server is back
 * the places go.
 */
static void waiters_end_in_an_outage(const char *name, int cancel, int64_t wait_ms)
{
	dlock_client_options opts = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l = NULL, *other = NULL;
	dlock_op *op[WAITERS] = { 0 }, *bystander = NULL;
	dl_outcome o[WAITERS] = { 0 }, ob = { 0 };
	char owner[64], other_name[64];
	int64_t resumed;
	int i;

	cr_assert_eq(rh_command_int(dl_srv, "HSET %s someone:1 1", name), 1);
	cr_assert_eq(rh_command_int(dl_srv, "PEXPIRE %s 60000", name), 1);
	snprintf(other_name, sizeof(other_name), "%s:other", name);
	cr_assert_eq(rh_command_int(dl_srv, "HSET %s someone:1 1", other_name), 1);
	cr_assert_eq(rh_command_int(dl_srv, "PEXPIRE %s 60000", other_name), 1);
	dl_pass(dlock_loop_new(&loop, NULL));
	opts.loop = loop;
	opts.command_timeout_ms = CMD_TIMEOUT_MS;
	opts.pool_size = 1;
	c = dl_client_opts(rh_server_uri(dl_srv), &opts);
	dl_pass(dlock_lock_new(&l, c, name, dl_kind(DLOCK_LOCK_FAIR)));
	dl_pass(dlock_lock_new(&other, c, other_name, dl_kind(DLOCK_LOCK_FAIR)));
	dlock_client_owner(owner, c, WAITERS);
	dl_pass(dlock_lock_acquire_async(&bystander, other, owner, 60000, 10000, dl_note, &ob));
	cr_assert(run_until(loop, queued, other_name, owner, 5000), "the bystander never queued");
	for (i = 0; i < WAITERS; i++) {
		dlock_client_owner(owner, c, (uint64_t)i);
		dl_pass(dlock_lock_acquire_async(&op[i], l, owner, wait_ms, 10000, dl_note, &o[i]));
	}
	cr_assert(run_until(loop, all_queued, name, NULL, 10000), "%lld of %d waiters queued",
			(long long)queue_len(name), WAITERS);

	cr_assert_eq(rh_server_pause(dl_srv), 0);
	run_for(loop, LATE_MS);
	for (i = 0; cancel && i < WAITERS; i++)
		dl_pass(dlock_op_cancel(op[i]));
	run_for(loop, PAUSE_MS - LATE_MS);
	for (i = 0; i < WAITERS; i++) {
		cr_assert_eq(o[i].calls, 1, "wait %d did not end during the outage", i);
		if (cancel)
			cr_assert_eq(o[i].code, DLOCK_ECANCELED, "wait %d ended with %d (%s)", i,
					o[i].code, dlock_strerror(o[i].code));
		else
			cr_assert(o[i].code == DLOCK_ETIMEDOUT || o[i].code == DLOCK_ENOTACQUIRED,
					"wait %d ended with %d (%s)", i, o[i].code,
					dlock_strerror(o[i].code));
	}
	cr_assert_eq(rh_server_resume(dl_srv), 0);
	resumed = rh_now_ms();

	cr_assert(run_until(loop, nobody_queued, name, NULL, GONE_WITHIN_MS),
			"%lld places still in the queue of %s %lld ms after the server came back",
			(long long)queue_len(name), name, (long long)(rh_now_ms() - resumed));
	/* The holder keeps its lock: only the places were taken back. */
	cr_assert_eq(rh_command_int(dl_srv, "HEXISTS %s someone:1", name), 1);
	cr_assert_gt(rh_command_int(dl_srv, "PTTL %s", name), 0);
	cr_assert_eq(ob.calls, 0, "the bystander's wait ended (%d)", ob.code);
	dl_pass(dlock_op_cancel(bystander));
	cr_assert(run_until(loop, nobody_queued, other_name, NULL, GONE_WITHIN_MS),
			"the bystander's place is still queued");
	dlock_op_free(bystander);
	for (i = 0; i < WAITERS; i++)
		dlock_op_free(op[i]);
	dlock_lock_free(other);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(fair_leave_outage, waiters_canceled_while_the_server_is_paused_leave_once_it_is_back)
{
	waiters_end_in_an_outage("leave:canceled", 1, 60000);
}

Test(fair_leave_outage, waits_that_end_while_the_server_is_paused_leave_once_it_is_back)
{
	waiters_end_in_an_outage("leave:timedout", 0, LATE_MS + 200);
}
