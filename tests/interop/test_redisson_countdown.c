/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RCountDownLatch against the real Redisson (Java), both ways, on one
 * server and on a Redis Cluster (sharded pub/sub on both sides): Redisson
 * awaits and dlock counts down to zero, dlock awaits and Redisson counts
 * down, and the count one side sets is the count the other reads. Each
 * await has a wait of IO_LONG_LEASE_MS, so a wake-up in milliseconds is the
 * zero message ("0" on redisson_countdownlatch__channel__{name}) at work;
 * the delay from the last count down's start to the await's return is
 * printed ("interop ...: X ms").
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "interop.h"
#include "redis_harness.h"
#include "rh_cluster.h"
#include "support.h"

#define WATCHDOG_MS 30000

static java_peer *peer;
static dlock_client *cli;
static rh_cluster *cl;

static void setup(void)
{
	dl_server_start();
	peer = jp_start(rh_server_uri(dl_srv), WATCHDOG_MS);
	cli = dl_client(rh_server_uri(dl_srv), 5000, WATCHDOG_MS);
}

static void teardown(void)
{
	jp_stop(peer);
	dlock_client_free(cli);
	dl_server_stop();
}

static void cluster_setup(void)
{
	cl = rh_cluster_start(3, 0, NULL);
	cr_assert_not_null(cl, "could not start a Redis Cluster (redis-server 7 and redis-cli)");
	peer = jp_start(rh_cluster_seed_uri(cl), WATCHDOG_MS);
	cli = dl_client(rh_cluster_seed_uri(cl), 5000, WATCHDOG_MS);
}

static void cluster_teardown(void)
{
	jp_stop(peer);
	dlock_client_free(cli);
	rh_cluster_free(cl);
	cl = NULL;
}

TestSuite(redisson_countdown, .init = setup, .fini = teardown, .timeout = 180);
TestSuite(redisson_countdown_cluster, .init = cluster_setup, .fini = cluster_teardown,
		.timeout = 240);

static dlock_countdown *latch_of(const char *name)
{
	dlock_countdown *l = NULL;
	dl_pass(dlock_countdown_new(&l, cli, name, NULL));
	return l;
}

static int await_long(void *l)
{
	return dlock_countdown_await(l, IO_LONG_LEASE_MS);
}

/* Send a Java await on worker and check that it really waits. */
static long java_awaits(const char *worker, const char *name)
{
	long seq = jp_send(peer, worker, "latch await %s %d", name, IO_LONG_LEASE_MS);
	jp_reply r;
	cr_assert_not(jp_poll(peer, seq, IO_SETTLE_MS, &r),
			"Redisson's await on %s returned (%s) with the count above zero", name,
			r.value);
	return seq;
}

static int64_t c_count(dlock_countdown *l)
{
	int64_t n = -1;
	dl_pass(dlock_countdown_count(&n, l));
	return n;
}

/* dlock sets the count, two Redisson threads await, dlock counts down to
 * zero: both wake. Returns the slower wake-up, ms. */
static double c_counts_down_java_wakes(const char *name, const char *what, int print)
{
	jp_reply r;
	int set = -1;
	int64_t left = -1;
	dlock_countdown *l = latch_of(name);

	dl_pass(dlock_countdown_try_set_count(&set, l, 2));
	cr_assert_eq(set, 1);
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "latch count %s", name), "2",
			"Redisson reads dlock's count as %s", r.value);
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "latch set %s 5", name), "false",
			"Redisson set a latch dlock had set");
	long s1 = java_awaits("w1", name), s2 = java_awaits("w2", name);

	dl_pass(dlock_countdown_count_down(&left, l));
	cr_assert_eq(left, 1);
	cr_assert_not(jp_poll(peer, s1, IO_SETTLE_MS, &r), "Redisson's await returned at count 1");
	int64_t from = jp_now_ns();
	dl_pass(dlock_countdown_count_down(&left, l));
	cr_assert_eq(left, 0);

	double worst = 0;
	long seqs[2] = { s1, s2 };
	for (int i = 0; i < 2; i++) {
		jp_wait(peer, seqs[i], &r);
		cr_assert(r.ok, "Redisson's await failed: %s", r.value);
		cr_assert_str_eq(r.value, "true", "Redisson's await ran out");
		double ms = (double)(r.t_end_ns - from) / 1e6;
		if (ms > worst)
			worst = ms;
	}
	if (print)
		io_wake(peer, what, from, from + (int64_t)(worst * 1e6));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "latch count %s", name), "0");
	dlock_countdown_free(l);
	return worst;
}

/* Redisson sets the count, dlock awaits, Redisson counts down to zero. */
static void java_counts_down_c_wakes(const char *name, const char *what)
{
	jp_reply r;
	int set = -1;
	dlock_countdown *l = latch_of(name);

	cr_assert_str_eq(jp_ok(peer, &r, "w1", "latch set %s 2", name), "true");
	dl_pass(dlock_countdown_try_set_count(&set, l, 5));
	cr_assert_eq(set, 0, "dlock set a latch Redisson had set");
	cr_assert_eq(c_count(l), 2, "dlock reads Redisson's count as %lld", (long long)c_count(l));

	io_call w;
	io_call_start(&w, await_long, l);
	cr_assert_not(io_call_poll(&w, IO_SETTLE_MS), "dlock's await returned (%d) at count 2",
			w.rc);
	jp_ok(peer, &r, "w1", "latch down %s", name);
	cr_assert_not(io_call_poll(&w, IO_SETTLE_MS), "dlock's await returned (%d) at count 1",
			w.rc);
	jp_ok(peer, &r, "w1", "latch down %s", name);
	cr_assert_eq(io_call_join(&w), 0, "%s", dlock_countdown_errmsg(l));
	io_wake(peer, what, r.t_start_ns, w.t_end_ns);
	cr_assert_eq(c_count(l), 0);
	dlock_countdown_free(l);
}

Test(redisson_countdown, dlock_counting_down_to_zero_wakes_redisson_waiters)
{
	/* A first round untimed: Redisson's latch classes loaded and compiled. */
	c_counts_down_java_wakes("warm", "", 0);
	c_counts_down_java_wakes("start", "CountDownLatch zero wake-up, dlock -> Redisson", 1);
}

Test(redisson_countdown, redisson_counting_down_to_zero_wakes_a_dlock_waiter)
{
	java_counts_down_c_wakes("start", "CountDownLatch zero wake-up, Redisson -> dlock");
}

Test(redisson_countdown, both_sides_count_one_latch_and_set_it_again_after_zero)
{
	jp_reply r;
	int set = -1, deleted = -1;
	int64_t left = -1;
	dlock_countdown *l = latch_of("shared");

	cr_assert_str_eq(jp_ok(peer, &r, "w1", "latch set shared 3"), "true");
	dl_pass(dlock_countdown_count_down(&left, l));
	cr_assert_eq(left, 2);
	jp_ok(peer, &r, "w1", "latch down shared");
	cr_assert_eq(c_count(l), 1);
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "latch count shared"), "1");
	dl_pass(dlock_countdown_count_down(&left, l));
	cr_assert_eq(left, 0);
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "latch count shared"), "0");
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "latch await shared 0"), "true",
			"Redisson does not see dlock's zero");

	/* At zero the key is gone: either side may set it again. */
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "latch set shared 4"), "true");
	cr_assert_eq(c_count(l), 4);
	dl_pass(dlock_countdown_delete(&deleted, l));
	cr_assert_eq(deleted, 1);
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "latch count shared"), "0");
	dl_pass(dlock_countdown_try_set_count(&set, l, 6));
	cr_assert_eq(set, 1);
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "latch count shared"), "6");
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "latch delete shared"), "true");
	cr_assert_eq(c_count(l), 0);
	dlock_countdown_free(l);
}

/* ---- on a cluster: SPUBLISH and SSUBSCRIBE on both sides ------------------- */

Test(redisson_countdown_cluster, wake_ups_both_ways_on_a_cluster)
{
	c_counts_down_java_wakes("warm", "", 0);
	c_counts_down_java_wakes(
			"gate-a", "cluster CountDownLatch zero wake-up, dlock -> Redisson", 1);
	java_counts_down_c_wakes(
			"gate-b", "cluster CountDownLatch zero wake-up, Redisson -> dlock");
}
