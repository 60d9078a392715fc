/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RedissonMultiLock and RedissonRedLock against dlock's MultiLock and RedLock
 * over 3 servers (the same name on each, one client per server), both ways:
 * exclusion and the unlock wake-up, and a RedLock that keeps working with one
 * of the three servers killed.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "interop.h"
#include "redis_harness.h"
#include "support.h"

#define N 3
#define NAME "shared"

static rh_server *srv[N];
static dlock_client *cli[N];
static dlock_lock *member[N];
static java_peer *peer;

static void setup(void)
{
	cr_assert_eq(rh_servers_start(srv, N, NULL), 0, "could not start %d redis-servers", N);
	char uris[3 * 64] = "";
	for (int i = 0; i < N; i++) {
		cli[i] = dl_client(rh_server_uri(srv[i]), 2000, 30000);
		member[i] = dl_lock(cli[i], NAME);
		strcat(uris, i ? "," : "");
		strcat(uris, rh_server_uri(srv[i]));
	}
	peer = jp_start(uris, 30000);
}

static void teardown(void)
{
	jp_stop(peer);
	for (int i = 0; i < N; i++) {
		dlock_lock_free(member[i]);
		dlock_client_free(cli[i]);
		rh_server_free(srv[i]);
	}
}

TestSuite(redisson_quorum, .init = setup, .fini = teardown, .timeout = 180);

/* The two dlock kinds behind one set of calls, so each case is written once. */
typedef struct quorum_lock {
	const char *java_kind; /* "multi" or "red" */
	dlock_multilock *multi;
	dlock_redlock *red;
	const char *owner; /* for a waiter thread: its hold outlives the thread */
} quorum_lock;

static quorum_lock quorum_new(const char *java_kind)
{
	quorum_lock q = { .java_kind = java_kind };
	if (strcmp(java_kind, "multi") == 0)
		dl_pass(dlock_multilock_new(&q.multi, member, N, NULL));
	else
		dl_pass(dlock_redlock_new(&q.red, member, N, NULL));
	return q;
}

static void quorum_free(quorum_lock *q)
{
	dlock_multilock_free(q->multi);
	dlock_redlock_free(q->red);
}

static const char *quorum_errmsg(const quorum_lock *q)
{
	return q->multi ? dlock_multilock_errmsg(q->multi) : dlock_redlock_errmsg(q->red);
}

static int quorum_try(quorum_lock *q, int64_t wait_ms)
{
	if (q->multi)
		return dlock_multilock_acquire(q->multi, q->owner, wait_ms, IO_LONG_LEASE_MS);
	return dlock_redlock_acquire(q->red, q->owner, wait_ms, IO_LONG_LEASE_MS);
}

static int quorum_lock_long(void *q)
{
	return quorum_try(q, 30000);
}

static int quorum_unlock(quorum_lock *q)
{
	if (q->multi)
		return q->owner ? dlock_multilock_release(q->multi, q->owner)
				: dlock_multilock_release(q->multi, NULL);
	return q->owner ? dlock_redlock_release(q->red, q->owner) : dlock_redlock_release(q->red, NULL);
}

/* How many servers still have the key. */
static int servers_holding(void)
{
	int n = 0;
	for (int i = 0; i < N; i++)
		if (rh_server_pid(srv[i]) && rh_command_int(srv[i], "EXISTS " NAME) == 1)
			n++;
	return n;
}

/* Redisson holds, dlock is kept out, waits, and Redisson's unlock wakes it. */
static void java_unlock_wakes_c(const char *java_kind, const char *what)
{
	jp_reply r;
	quorum_lock q = quorum_new(java_kind);
	jp_ok(peer, &r, "w1", "lock %s " NAME " %d", java_kind, IO_LONG_LEASE_MS);
	int rc = quorum_try(&q, 0);
	cr_assert_eq(rc, DLOCK_ENOTACQUIRED, "dlock took what Redisson holds: rc %d (%s)", rc,
			quorum_errmsg(&q));
	io_call w;
	q.owner = "dlock-waiter:1";
	io_call_start(&w, quorum_lock_long, &q);
	cr_assert_not(io_call_poll(&w, IO_SETTLE_MS), "dlock got in while Redisson holds");
	jp_ok(peer, &r, "w1", "unlock %s " NAME, java_kind);
	cr_assert_eq(io_call_join(&w), 0, "%s", quorum_errmsg(&q));
	io_wake(peer, what, r.t_start_ns, w.t_end_ns);

	dl_pass(quorum_unlock(&q));
	cr_assert_eq(servers_holding(), 0);
	quorum_free(&q);
}

/* dlock holds, Redisson is kept out, waits, and dlock's unlock wakes it. */
static void c_unlock_wakes_java(const char *java_kind, const char *what)
{
	jp_reply r;
	quorum_lock q = quorum_new(java_kind);
	cr_assert_eq(quorum_try(&q, 0), 0, "%s", quorum_errmsg(&q));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "try %s " NAME " 0 %d", java_kind, IO_LONG_LEASE_MS),
			"false", "Redisson took what dlock holds");
	long seq = jp_send(peer, "w1", "lock %s " NAME " %d", java_kind, IO_LONG_LEASE_MS);
	cr_assert_not(jp_poll(peer, seq, IO_SETTLE_MS, &r), "Redisson got in while dlock holds");
	int64_t unlocked = jp_now_ns();
	dl_pass(quorum_unlock(&q));
	jp_wait(peer, seq, &r);
	cr_assert(r.ok, "Redisson: %s", r.value);
	io_wake(peer, what, unlocked, r.t_end_ns);
	jp_ok(peer, &r, "w1", "unlock %s " NAME, java_kind);
	cr_assert_eq(servers_holding(), 0);
	quorum_free(&q);
}

Test(redisson_quorum, redisson_multilock_against_dlock_multilock)
{
	java_unlock_wakes_c("multi", "MultiLock unlock wake-up, Redisson -> dlock");
	c_unlock_wakes_java("multi", "MultiLock unlock wake-up, dlock -> Redisson");
}

Test(redisson_quorum, redisson_redlock_against_dlock_redlock)
{
	java_unlock_wakes_c("red", "RedLock unlock wake-up, Redisson -> dlock");
	c_unlock_wakes_java("red", "RedLock unlock wake-up, dlock -> Redisson");
}

/* The same hand-off within Redisson, for reference: the part of a
 * cross-language wake-up that is Redisson's own. */
Test(redisson_quorum, baseline_wake_ups_within_redisson)
{
	static const char *const kinds[] = { "multi", "red" };
	for (size_t i = 0; i < 2; i++) {
		jp_reply r;
		jp_ok(peer, &r, "w1", "lock %s " NAME " %d", kinds[i], IO_LONG_LEASE_MS);
		long seq = jp_send(peer, "w2", "lock %s " NAME " %d", kinds[i], IO_LONG_LEASE_MS);
		cr_assert_not(jp_poll(peer, seq, IO_SETTLE_MS, &r), "Redisson got in twice");
		jp_ok(peer, &r, "w1", "unlock %s " NAME, kinds[i]);
		int64_t unlocked = r.t_start_ns;
		jp_wait(peer, seq, &r);
		cr_assert(r.ok, "Redisson: %s", r.value);
		char what[64];
		snprintf(what, sizeof what, "%s unlock wake-up, Redisson -> Redisson",
				i ? "RedLock" : "MultiLock");
		io_wake(peer, what, unlocked, r.t_end_ns);
		jp_ok(peer, &r, "w2", "unlock %s " NAME, kinds[i]);
	}
}

/* One of three servers is gone: both RedLocks still take the lock on the
 * other two (a quorum) and still exclude each other there. */
Test(redisson_quorum, redlocks_keep_excluding_each_other_with_a_server_down)
{
	jp_reply r;
	rh_server_kill(srv[N - 1]);
	quorum_lock q = quorum_new("red");
	jp_ok(peer, &r, "w1", "lock red " NAME " %d", IO_LONG_LEASE_MS);
	fprintf(stderr, "interop RedLock with 1 of 3 down: Redisson acquired in %.1f ms\n",
			(double)(r.t_end_ns - r.t_start_ns) / 1e6);
	cr_assert_eq(servers_holding(), 2, "Redisson holds on %d servers", servers_holding());
	int rc = quorum_try(&q, 0);
	cr_assert_eq(rc, DLOCK_ENOTACQUIRED,
			"dlock took a RedLock Redisson holds on 2 of 3: rc %d (%s)", rc,
			quorum_errmsg(&q));
	jp_ok(peer, &r, "w1", "unlock red " NAME);

	int64_t t0 = jp_now_ns();
	cr_assert_eq(quorum_try(&q, 5000), 0, "%s", quorum_errmsg(&q));
	fprintf(stderr, "interop RedLock with 1 of 3 down: dlock acquired in %.1f ms\n",
			(double)(jp_now_ns() - t0) / 1e6);
	cr_assert_str_eq(jp_ok(peer, &r, "w2", "try red " NAME " 0 %d", IO_LONG_LEASE_MS), "false",
			"Redisson took a RedLock dlock holds on 2 of 3");
	dl_pass(quorum_unlock(&q));
	cr_assert_eq(servers_holding(), 0);
	quorum_free(&q);
}
