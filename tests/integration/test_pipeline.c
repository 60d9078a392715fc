/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pipelining: the operations of one client on one loop share a connection
 * while earlier replies are still due. Fifty acquisitions started while the
 * server is stopped all reach it in one write on the one connection of a
 * pool of one (the server reads them in a few read events, not one per
 * operation), and all are answered once it resumes. An operation given up
 * in the middle of those in flight (its wait ends, or it is canceled) does
 * not disturb the ones before and after it, and the hold it may have taken
 * is taken back. A connection killed with twenty in flight ends each
 * operation exactly once, held when it says so and not held when it fails.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

TestSuite(pipeline, .init = dl_server_start, .fini = dl_server_stop, .timeout = 90);

enum { MANY = 50, KILLED = 20 };

static dlock_client *the_client; /* the test's one client (owner names) */

/* A client on the caller's loop (no thread of dlock's) with one pooled connection. */
static dlock_client *client_on(dlock_loop *loop)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.loop = loop;
	o.pool_size = 1;
	o.command_timeout_ms = 10000; /* a busy machine: nothing here meets it */
	the_client = dl_client_opts(rh_server_uri(dl_srv), &o);
	return the_client;
}

/* Drive the loop for ms (the operations' commands go out meanwhile). */
static void run_for(dlock_loop *loop, int64_t ms)
{
	int64_t end = rh_now_ms() + ms;

	while (rh_now_ms() < end)
		cr_assert(dlock_loop_run(loop, 10) >= 0, "%s", dlock_errmsg_last());
}

/* A field of the server's INFO (its value as a number; -1 when absent). */
static long long info_field(const char *section, const char *field)
{
	redisReply *r = rh_command(dl_srv, "INFO %s", section);
	long long v = -1;
	char key[64];
	const char *p;

	cr_assert(r != NULL && r->type == REDIS_REPLY_STRING, "INFO %s", section);
	snprintf(key, sizeof(key), "\n%s:", field);
	if ((p = strstr(r->str, key)) != NULL)
		v = atoll(p + strlen(key));
	freeReplyObject(r);
	return v;
}

/* Owner i: named after the client (dlock_client_owner), so the client's
 * record of its holds is the truth, and an acquisition given up has an
 * undo (an owner of no client's has none: its late hold expires). */
static const char *owner(int i, char buf[DLOCK_OWNER_SIZE])
{
	cr_assert_eq(dlock_client_owner(buf, the_client, (uint64_t)i + 1), 0);
	return buf;
}

/* The lock (a hash, owner field) prefix:i is held by owner i. */
static int held(const char *prefix, int i)
{
	char buf[DLOCK_OWNER_SIZE];

	return (int)rh_command_int(dl_srv, "HEXISTS %s:%d %s", prefix, i, owner(i, buf));
}

static void start_acquire(dlock_lock *l, int i, int64_t wait_ms, dlock_op **op, dl_outcome *o)
{
	char buf[DLOCK_OWNER_SIZE];

	dl_pass(dlock_lock_acquire_async(op, l, owner(i, buf), wait_ms, 60000, dl_note, o));
}

/* The lock handles prefix:0..n-1 on c. */
static void locks(dlock_client *c, const char *prefix, dlock_lock **l, int n)
{
	char name[64];

	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s:%d", prefix, i);
		l[i] = dl_lock(c, name);
	}
}

/* One acquisition and its release first: the connection is open and pooled. */
static void warm_up(dlock_loop *loop, dlock_client *c)
{
	dlock_lock *l = dl_lock(c, "pipe:warm");
	dl_outcome a = { 0 }, r = { 0 };

	char buf[DLOCK_OWNER_SIZE];

	dl_pass(dlock_lock_acquire_async(NULL, l, owner(1000, buf), 0, 60000, dl_note, &a));
	dl_drive_until(loop, &a, 1, 1, 10000);
	cr_assert_eq(a.code, 0, "warm-up acquire: %s", a.message);
	dl_pass(dlock_lock_release_async(NULL, l, owner(1000, buf), dl_note, &r));
	dl_drive_until(loop, &r, 1, 1, 10000);
	cr_assert_eq(r.code, 0, "warm-up release: %s", r.message);
	dlock_lock_free(l);
}

Test(pipeline, fifty_acquisitions_are_in_flight_at_once_on_one_connection)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l[MANY];
	dl_outcome o[MANY] = { { 0 } };
	long long reads;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	warm_up(loop, c);
	locks(c, "pipe:many", l, MANY);
	reads = info_field("stats", "total_reads_processed");
	cr_assert_geq(reads, 0, "INFO stats has no total_reads_processed (Redis 6 or later)");

	cr_assert_eq(rh_server_pause(dl_srv), 0);
	for (int i = 0; i < MANY; i++)
		start_acquire(l[i], i, 0, NULL, &o[i]);
	run_for(loop, 300); /* sent, the server stopped */
	cr_assert_eq(dl_ended(o, MANY), 0, "%d ended while the server was stopped",
			dl_ended(o, MANY));
	cr_assert_eq(rh_server_resume(dl_srv), 0);
	dl_drive_until(loop, o, MANY, MANY, 20000);

	for (int i = 0; i < MANY; i++) {
		cr_assert_eq(o[i].calls, 1, "op %d: %d callbacks", i, o[i].calls);
		cr_assert_eq(o[i].code, 0, "op %d: %d (%s)", i, o[i].code, o[i].message);
		cr_assert_eq(held("pipe:many", i), 1, "lock %d not held", i);
	}
	/* The server read them together: one operation at a time (the pool
	 * of one lent until each reply) would be a read event each. INFO's
	 * own connection and the HEXISTS above add one read each. */
	reads = info_field("stats", "total_reads_processed") - reads - 1 - MANY;
	cr_assert_leq(reads, 10, "the server took %lld reads for %d acquisitions: not pipelined",
			reads, MANY);
	/* One connection of dlock's, and the one asking now. */
	cr_assert_leq(info_field("clients", "connected_clients"), 2,
			"more connections than the pool's one");
	for (int i = 0; i < MANY; i++)
		dlock_lock_free(l[i]);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(pipeline, ops_given_up_in_the_middle_leave_the_others_alone)
{
	enum { N = 21, MID = 10, LATER = 15 };
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l[N];
	dlock_op *ops[N] = { NULL };
	dl_outcome o[N] = { { 0 } };

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	warm_up(loop, c);
	locks(c, "pipe:mid", l, N);

	cr_assert_eq(rh_server_pause(dl_srv), 0);
	for (int i = 0; i < N; i++)
		start_acquire(l[i], i, 0, &ops[i], &o[i]);
	run_for(loop, 100); /* all sent, behind one another */
	/* Two in the middle are given up while their replies are due (their
	 * run ends, as at a deadline): their replies are skipped where they
	 * stand, and their undos go behind. */
	dl_pass(dlock_op_cancel(ops[MID]));
	dl_pass(dlock_op_cancel(ops[LATER]));
	dl_drive_until(loop, o, N, 2, 5000);
	for (int i = 0; i < N; i++)
		cr_assert_eq(o[i].calls, i == MID || i == LATER, "op %d: %d callbacks (%d, %s)", i,
				o[i].calls, o[i].code, o[i].message);
	cr_assert_eq(o[MID].code, DLOCK_ECANCELED, "canceled: %d (%s)", o[MID].code,
			o[MID].message);
	cr_assert_eq(o[LATER].code, DLOCK_ECANCELED, "canceled: %d (%s)", o[LATER].code,
			o[LATER].message);

	cr_assert_eq(rh_server_resume(dl_srv), 0);
	dl_drive_until(loop, o, N, N, 20000);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(o[i].calls, 1, "op %d: %d callbacks", i, o[i].calls);
		if (i == MID || i == LATER)
			continue;
		cr_assert_eq(o[i].code, 0, "op %d: %d (%s)", i, o[i].code, o[i].message);
		cr_assert_eq(held("pipe:mid", i), 1, "lock %d not held", i);
	}
	/* What the given-up ones took is taken back right behind them (the
	 * server ran both once it resumed; the next command waits for both). */
	cr_assert_eq(held("pipe:mid", MID), 0, "the canceled op still holds its lock");
	cr_assert_eq(held("pipe:mid", LATER), 0, "the canceled op still holds its lock");
	/* The connection still serves: one more acquisition on it. */
	{
		dl_outcome more = { 0 };
		char buf[DLOCK_OWNER_SIZE];

		dl_pass(dlock_lock_acquire_async(NULL, l[MID], owner(MID, buf), 0, 60000, dl_note,
				&more));
		dl_drive_until(loop, &more, 1, 1, 10000);
		cr_assert_eq(more.code, 0, "after the skipped replies: %d (%s)", more.code,
				more.message);
	}
	for (int i = 0; i < N; i++) {
		dlock_op_free(ops[i]);
		dlock_lock_free(l[i]);
	}
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(pipeline, a_connection_killed_with_twenty_in_flight_ends_each_once)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l[KILLED];
	dl_outcome o[KILLED] = { { 0 } };
	redisReply *r;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	warm_up(loop, c);
	locks(c, "pipe:kill", l, KILLED);

	/* Scripts wait in the server (a write pause); CLIENT KILL still runs. */
	r = rh_command(dl_srv, "CLIENT PAUSE 20000 WRITE");
	cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "CLIENT PAUSE WRITE");
	freeReplyObject(r);
	for (int i = 0; i < KILLED; i++)
		start_acquire(l[i], i, 0, NULL, &o[i]);
	run_for(loop, 300);
	cr_assert_eq(dl_ended(o, KILLED), 0, "%d ended before the kill", dl_ended(o, KILLED));
	cr_assert_geq(rh_command_int(dl_srv, "CLIENT KILL TYPE normal SKIPME yes"), 1,
			"no connection of dlock's to kill");
	r = rh_command(dl_srv, "CLIENT UNPAUSE");
	freeReplyObject(r);
	dl_drive_until(loop, o, KILLED, KILLED, 20000);
	run_for(loop, 200); /* a second callback would come now */

	for (int i = 0; i < KILLED; i++) {
		cr_assert_eq(o[i].calls, 1, "op %d: %d callbacks", i, o[i].calls);
		cr_assert(o[i].code == 0 || o[i].code == DLOCK_ECONN, "op %d: %d (%s)", i, o[i].code,
				o[i].message);
		cr_assert_eq(held("pipe:kill", i), o[i].code == 0,
				"op %d ended with %d (%s) but the lock is%s held", i, o[i].code, o[i].message,
				o[i].code == 0 ? " not" : "");
	}
	for (int i = 0; i < KILLED; i++)
		dlock_lock_free(l[i]);
	dlock_client_free(c);
	dlock_loop_free(loop);
}
