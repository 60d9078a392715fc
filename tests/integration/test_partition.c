/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Network partitions with iptables: the packets to and from 1, 2 or 3 of 5
 * servers' ports are DROPped both ways (nothing is refused, nothing answers:
 * TCP retransmits into the void, as across a real partition) while a
 * RedLock is held with the watchdog and another client waits for it. Then
 * the partition heals.
 *
 * - a minority cut off: the holder keeps the lock (renewed on the rest), the
 *   waiter does not get it, and after the heal and the holder's unlock the
 *   waiter gets it promptly (the connections that owed replies across the
 *   partition do not keep the healed nodes refused);
 * - a majority cut off: the holder learns it lost the lock, no later than the
 *   keys could expire, and before anyone else holds it; the waiter gets it
 *   after the heal, within its wait (transient "no quorum" is retried).
 *
 * iptables needs CAP_NET_ADMIN and a kernel with netfilter: where either is
 * missing the tests are skipped and say why (a skip, never a pass). Rules
 * carry the comment "dlock-test" and name this test's ports only; a
 * report hook removes any left behind by a test that crashed.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

#define N 5
#define CMD_TIMEOUT_MS 200
#define WATCHDOG_MS 1500
#define CUT_MS 4000               /* longer than the watchdog timeout */
#define MARGIN_MS 300             /* scheduling slack on a loaded two-core machine */
#define WAITER "partition-waiter" /* the waiting thread's owner, released from the test */

/* ---- iptables ------------------------------------------------------------ */

static int iptables(const char *op, int port, const char *dir)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd,
			"iptables -w 5 %s INPUT -p tcp --%s %d -m comment --comment dlock-test -j DROP"
			" >/dev/null 2>&1",
			op, dir, port);
	return system(cmd) == 0 ? 0 : -1;
}

static void cut(int port)
{
	cr_assert_eq(iptables("-I", port, "dport"), 0, "iptables: cannot drop port %d", port);
	cr_assert_eq(iptables("-I", port, "sport"), 0, "iptables: cannot drop port %d", port);
}

static void heal(int port)
{
	while (iptables("-D", port, "dport") == 0) {
	}
	while (iptables("-D", port, "sport") == 0) {
	}
}

/* Skip (saying why) where iptables cannot filter here. */
static void require_iptables(void)
{
	if (system("command -v iptables >/dev/null 2>&1") != 0)
		cr_skip_test("iptables is not installed (Debian: apt-get install iptables)");
	if (iptables("-I", 1, "dport") != 0)
		cr_skip_test("iptables cannot add a rule here (no CAP_NET_ADMIN or no netfilter)");
	heal(1);
}

/* After every test, remove whatever rule a crashed test left behind. */
ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	(void)stats;
	if (system("command -v iptables >/dev/null 2>&1") == 0 &&
			system("iptables-save 2>/dev/null | grep -q dlock-test") == 0) {
		int rc = system("iptables-save | grep -v dlock-test | iptables-restore");
		(void)rc;
	}
}

/* ---- fixture --------------------------------------------------------------- */

typedef struct fixture {
	rh_server *s[N];
	const char *uris[N];
	int cut[N];
	dlock_redlock *holder, *waiter;
} fixture;

typedef struct lost_rec {
	pthread_mutex_t mu;
	int64_t at_ms;
	int fired, reason;
} lost_rec;

static lost_rec g_lost = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0 };

static void on_lost(const dlock_lost_event *ev, void *ud)
{
	(void)ud;
	pthread_mutex_lock(&g_lost.mu);
	if (g_lost.fired++ == 0) {
		g_lost.at_ms = rh_now_ms();
		g_lost.reason = (int)ev->reason;
	}
	pthread_mutex_unlock(&g_lost.mu);
}

static dlock_redlock *open_redlock(fixture *f)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	dlock_redlock *r = NULL;

	co.connect_timeout_ms = CMD_TIMEOUT_MS;
	co.command_timeout_ms = CMD_TIMEOUT_MS;
	co.watchdog_timeout_ms = WATCHDOG_MS;
	ro.restart_guard_ms = 0; /* fresh servers; these tests are not about the guard */
	cr_assert_eq(dlock_redlock_new_from_uris(&r, f->uris, N, "partition:lock", &co, &ro), 0,
			"%s", dlock_errmsg_last());
	return r;
}

static void setup(fixture *f)
{
	memset(f, 0, sizeof *f);
	require_iptables();
	cr_assert_eq(rh_servers_start(f->s, N, NULL), 0);
	for (int i = 0; i < N; i++)
		f->uris[i] = rh_server_uri(f->s[i]);
	f->holder = open_redlock(f);
	f->waiter = open_redlock(f);
	cr_assert_eq(dlock_redlock_set_lost_cb(f->holder, on_lost, NULL), 0);
}

static void teardown(fixture *f)
{
	for (int i = 0; i < N; i++)
		if (f->cut[i])
			heal(rh_server_port(f->s[i]));
	dlock_redlock_free(f->holder);
	dlock_redlock_free(f->waiter);
	for (int i = 0; i < N; i++)
		rh_server_free(f->s[i]);
}

static void cut_servers(fixture *f, int k)
{
	for (int i = 0; i < k; i++) {
		cut(rh_server_port(f->s[i]));
		f->cut[i] = 1;
	}
}

static void heal_servers(fixture *f)
{
	for (int i = 0; i < N; i++)
		if (f->cut[i]) {
			heal(rh_server_port(f->s[i]));
			f->cut[i] = 0;
		}
}

/* A waiter in its own thread: try(wait) and when it returned. */
typedef struct waiter_run {
	dlock_redlock *r;
	int64_t wait_ms;
	int rc;
	int64_t done_at;
	pthread_t th;
} waiter_run;

static void *waiter_main(void *arg)
{
	waiter_run *w = arg;
	w->rc = dlock_redlock_acquire(w->r, WAITER, w->wait_ms, DLOCK_LEASE_WATCHDOG);
	w->done_at = rh_now_ms();
	return NULL;
}

static void waiter_start(waiter_run *w, dlock_redlock *r, int64_t wait_ms)
{
	w->r = r;
	w->wait_ms = wait_ms;
	w->rc = 1;
	cr_assert_eq(pthread_create(&w->th, NULL, waiter_main, w), 0);
}

/* ---- a minority cut off ------------------------------------------------------ */

static void minority_partition(int k)
{
	fixture f;
	waiter_run w;
	int64_t healed, unlocked;

	setup(&f);
	cr_assert_eq(dlock_redlock_acquire(f.holder, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s",
			dlock_redlock_errmsg(f.holder));
	waiter_start(&w, f.waiter, 30000);
	dl_sleep_ms(300);
	cut_servers(&f, k);
	dl_sleep_ms(CUT_MS);

	cr_assert_eq(dlock_redlock_check(f.holder, NULL), 0,
			"%d of %d cut off: the holder must keep its quorum", k, N);
	cr_assert_eq(g_lost.fired, 0, "no loss with %d of %d cut off", k, N);
	cr_assert_eq(w.rc, 1, "the waiter returned (%d) while the lock was held", w.rc);

	heal_servers(&f);
	healed = rh_now_ms();
	dl_sleep_ms(500);
	cr_assert_eq(dlock_redlock_release(f.holder, NULL), 0, "%s", dlock_redlock_errmsg(f.holder));
	unlocked = rh_now_ms();
	pthread_join(w.th, NULL);
	cr_assert_eq(w.rc, 0, "the waiter did not get the lock after the heal: %s",
			dlock_redlock_errmsg(f.waiter));
	cr_log_info("%d of %d cut for %d ms: waiter held the lock %lld ms after the unlock "
		    "(%lld ms after the heal)",
			k, N, CUT_MS, (long long)(w.done_at - unlocked),
			(long long)(w.done_at - healed));
	cr_assert_leq(w.done_at - unlocked, 2 * CMD_TIMEOUT_MS + MARGIN_MS,
			"the waiter took %lld ms after the unlock: healed nodes stayed refused",
			(long long)(w.done_at - unlocked));
	cr_assert_eq(dlock_redlock_release(f.waiter, WAITER), 0, "%s",
			dlock_redlock_errmsg(f.waiter));
	teardown(&f);
}

Test(partition, one_of_five_cut_holder_keeps_it, .timeout = 60)
{
	minority_partition(1);
}

Test(partition, two_of_five_cut_holder_keeps_it, .timeout = 60)
{
	minority_partition(2);
}

/* ---- a majority cut off ----------------------------------------------------- */

Test(partition, three_of_five_cut_holder_loses_it_first, .timeout = 90)
{
	fixture f;
	waiter_run w;
	int64_t cut_at, healed, lost_at;

	setup(&f);
	cr_assert_eq(dlock_redlock_acquire(f.holder, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s",
			dlock_redlock_errmsg(f.holder));
	waiter_start(&w, f.waiter, 30000);
	dl_sleep_ms(300);
	cut_at = rh_now_ms();
	cut_servers(&f, 3);
	dl_sleep_ms(CUT_MS);

	pthread_mutex_lock(&g_lost.mu);
	lost_at = g_lost.at_ms;
	pthread_mutex_unlock(&g_lost.mu);
	cr_assert(g_lost.fired == 1, "the holder was not told it lost the lock (%d callbacks)",
			g_lost.fired);
	cr_assert_eq(g_lost.reason, DLOCK_LOST_UNREACHABLE);
	cr_assert_eq(dlock_redlock_check(f.holder, NULL), DLOCK_ELOST);
	/* Its last renewal reached the servers at most one period before the cut. */
	cr_assert_leq(lost_at - cut_at, WATCHDOG_MS + MARGIN_MS,
			"loss reported %lld ms after the cut: later than the keys could expire",
			(long long)(lost_at - cut_at));
	cr_assert_eq(w.rc, 1, "the waiter returned (%d: %s) during the partition", w.rc,
			dlock_redlock_errmsg(f.waiter));

	heal_servers(&f);
	healed = rh_now_ms();
	pthread_join(w.th, NULL);
	cr_assert_eq(w.rc, 0, "the waiter did not get the lock after the heal: %s",
			dlock_redlock_errmsg(f.waiter));
	cr_assert_gt(w.done_at, lost_at,
			"the waiter held the lock before the holder knew it lost it");
	cr_log_info("3 of 5 cut for %d ms: loss reported %lld ms after the cut; waiter held the "
		    "lock %lld ms after the heal",
			CUT_MS, (long long)(lost_at - cut_at), (long long)(w.done_at - healed));
	cr_assert_leq(w.done_at - healed, WATCHDOG_MS + 2 * CMD_TIMEOUT_MS + MARGIN_MS,
			"the waiter took %lld ms after the heal", (long long)(w.done_at - healed));
	cr_assert_eq(dlock_redlock_release(f.holder, NULL), DLOCK_ELOST);
	cr_assert_eq(dlock_redlock_release(f.waiter, WAITER), 0, "%s",
			dlock_redlock_errmsg(f.waiter));
	teardown(&f);
}

/*
 * A connection that owes replies across a partition waits on TCP's
 * retransmission backoff: without a bound the node stays refused
 * ("still owes") for seconds after the partition healed. Past the bound
 * (the longer of 2 x the command timeout and 1 s) the connection is reset,
 * and the healed node is asked again at once.
 */
Test(partition, healed_node_is_asked_again_at_once, .timeout = 60)
{
	rh_server *s;
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;
	dlock_lock *a = NULL, *b = NULL;

	require_iptables();
	s = rh_server_start(NULL);
	cr_assert_not_null(s);
	co.command_timeout_ms = CMD_TIMEOUT_MS;
	co.connect_timeout_ms = CMD_TIMEOUT_MS;
	cr_assert_eq(dlock_client_new(&c, rh_server_uri(s), &co), 0);
	cr_assert_eq(dlock_lock_new(&a, c, "partition:owed:a", NULL), 0);
	cr_assert_eq(dlock_lock_new(&b, c, "partition:owed:b", NULL), 0);
	cr_assert_eq(dlock_lock_acquire(a, NULL, 0, 5000), 0, "%s", dlock_lock_errmsg(a));
	cr_assert_eq(dlock_lock_release(a, NULL), 0);

	cut(rh_server_port(s));
	int rc = dlock_lock_acquire(a, NULL, 0, 5000);
	for (int i = 0; i < 6; i++) {
		dl_sleep_ms(1000);
		dlock_lock_acquire(a, NULL, 0, 5000);
	}
	heal(rh_server_port(s));
	int64_t healed = rh_now_ms();
	cr_assert_eq(rc, DLOCK_ETIMEDOUT, "%s", dlock_lock_errmsg(a));
	while ((rc = dlock_lock_acquire(b, NULL, 0, 5000)) != 0 && rh_now_ms() - healed < 15000)
		dl_sleep_ms(20);
	int64_t took = rh_now_ms() - healed;
	cr_log_info("a 7 s partition: the node answered a new acquire %lld ms after the heal",
			(long long)took);
	cr_assert_eq(rc, 0, "%s", dlock_lock_errmsg(b));
	/* A fresh connection and one round trip; on the retransmission's
     * schedule it took 300 ms and more (seconds after longer partitions). */
	cr_assert_leq(took, CMD_TIMEOUT_MS, "the healed node stayed refused for %lld ms",
			(long long)took);
	dlock_lock_release(b, NULL);
	dlock_lock_free(a);
	dlock_lock_free(b);
	dlock_client_free(c);
	rh_server_free(s);
}
