/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RLock against the real Redisson (Java), each case both ways: Redisson holds
 * and dlock waits, dlock holds and Redisson waits. Wake-ups are timed from
 * the unlock's return on one side to the lock's return on the other and
 * printed ("interop ...: X ms"); every hold a waiter wakes from has a 20 s
 * lease, so a wake-up in milliseconds is the pub/sub message at work.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <string.h>

#include "interop.h"
#include "redis_harness.h"
#include "support.h"

#define WATCHDOG_MS 2000 /* both sides: "past 3x the watchdog" stays quick */

static java_peer *peer;
static dlock_client *cli;

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

TestSuite(redisson_rlock, .init = setup, .fini = teardown, .timeout = 180);

/* ---- the C side's waiters --------------------------------------------- */

static int lock_long(void *l)
{
	return dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, IO_LONG_LEASE_MS);
}

/* Start a C waiter on l and check that it really waits. */
static void c_waits(io_call *w, dlock_lock *l)
{
	io_call_start(w, lock_long, l);
	cr_assert_not(io_call_poll(w, IO_SETTLE_MS), "dlock got a lock Redisson holds (rc %d)",
			w->rc);
}

/* Send a Java lock request on worker and check that it really waits. */
static long java_waits(const char *worker, const char *kind, const char *name)
{
	long seq = jp_send(peer, worker, "lock %s %s -1", kind, name);
	jp_reply r;
	cr_assert_not(jp_poll(peer, seq, IO_SETTLE_MS, &r), "Redisson got a lock dlock holds (%s)",
			r.value);
	return seq;
}

/* Unlock; returns when the call started, where a wake-up is timed from. */
static int64_t c_unlock_timed(dlock_lock *l)
{
	int64_t start = jp_now_ns();
	dl_pass(dlock_lock_release(l, NULL));
	return start;
}

static void assert_absent(const char *key)
{
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS %s", key), 0, "%s still exists", key);
}

/* ---- exclusion and the unlock wake-up ----------------------------------- */

/* Redisson holds, dlock waits, Redisson's unlock wakes dlock. */
static void java_unlock_wakes_c(const char *name, const char *what)
{
	jp_reply r;
	dlock_lock *l = dl_lock(cli, name);
	jp_ok(peer, &r, "w1", "lock rlock %s %d", name, IO_LONG_LEASE_MS);
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 1000), DLOCK_ENOTACQUIRED,
			"dlock took \"%s\" from Redisson", name);
	io_call w;
	c_waits(&w, l);
	jp_ok(peer, &r, "w1", "unlock rlock %s", name);
	cr_assert_eq(io_call_join(&w), 0, "%s", dlock_lock_errmsg(l));
	io_wake(peer, what, r.t_start_ns, w.t_end_ns);
	io_call_unlock(&w, cli, l);
	assert_absent(name);
	dlock_lock_free(l);
}

/* dlock holds, Redisson waits, dlock's unlock wakes Redisson. */
static void c_unlock_wakes_java(const char *name, const char *what)
{
	jp_reply r;
	dlock_lock *l = dl_lock(cli, name);
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, IO_LONG_LEASE_MS));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "try rlock %s 0 -1", name), "false");
	long seq = java_waits("w1", "rlock", name);
	int64_t unlocked = c_unlock_timed(l);
	jp_wait(peer, seq, &r);
	cr_assert(r.ok, "Redisson's lock failed: %s", r.value);
	io_wake(peer, what, unlocked, r.t_end_ns);
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "held rlock %s", name), "true");
	jp_ok(peer, &r, "w1", "unlock rlock %s", name);
	assert_absent(name);
	dlock_lock_free(l);
}

Test(redisson_rlock, java_unlock_wakes_a_dlock_waiter)
{
	java_unlock_wakes_c("orders", "RLock unlock wake-up, Redisson -> dlock");
}

Test(redisson_rlock, dlock_unlock_wakes_a_redisson_waiter)
{
	c_unlock_wakes_java("orders", "RLock unlock wake-up, dlock -> Redisson");
}

/* The same hand-off within each language, for reference: what part of a
 * cross-language wake-up is the waking side's own. */
Test(redisson_rlock, baseline_wake_ups_within_each_language)
{
	jp_reply r;
	jp_ok(peer, &r, "w1", "lock rlock base %d", IO_LONG_LEASE_MS);
	long seq = java_waits("w2", "rlock", "base");
	jp_ok(peer, &r, "w1", "unlock rlock base");
	int64_t unlocked = r.t_start_ns;
	jp_wait(peer, seq, &r);
	io_wake(peer, "RLock unlock wake-up, Redisson -> Redisson", unlocked, r.t_end_ns);
	jp_ok(peer, &r, "w2", "unlock rlock base");

	dlock_lock *l = dl_lock(cli, "base");
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, IO_LONG_LEASE_MS));
	io_call w;
	c_waits(&w, l);
	unlocked = c_unlock_timed(l);
	cr_assert_eq(io_call_join(&w), 0, "%s", dlock_lock_errmsg(l));
	io_wake(peer, "RLock unlock wake-up, dlock -> dlock", unlocked, w.t_end_ns);
	io_call_unlock(&w, cli, l);
	dlock_lock_free(l);
}

/* Braces decide the channel and latch names (hash tags); both sides must
 * derive the same ones. */
Test(redisson_rlock, names_with_braces_wake_both_ways)
{
	static const char *const names[] = { "{orders}:7", "a{b}c", "x}{y", "{}" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		char what[96];
		snprintf(what, sizeof what, "RLock \"%s\" wake-up, Redisson -> dlock", names[i]);
		java_unlock_wakes_c(names[i], what);
		snprintf(what, sizeof what, "RLock \"%s\" wake-up, dlock -> Redisson", names[i]);
		c_unlock_wakes_java(names[i], what);
	}
}

/* ---- reentrancy ---------------------------------------------------------- */

Test(redisson_rlock, redisson_reentry_counts_are_dlocks_counts)
{
	jp_reply r;
	char owner[256];
	dlock_lock *l = dl_lock(cli, "reentrant");
	jp_ok(peer, &r, "w1", "lock rlock reentrant -1");
	jp_ok(peer, &r, "w1", "lock rlock reentrant -1");
	snprintf(owner, sizeof owner, "%s", jp_ok(peer, &r, "w1", "owner"));

	int64_t n = 0;
	dl_pass(dlock_lock_hold_count(&n, l, owner));
	cr_assert_eq(n, 2, "dlock reads Redisson's hold count as %" PRId64, n);
	/* dlock re-entering as Redisson's owner adds to the same count. */
	dl_pass(dlock_lock_acquire(l, owner, 0, -1));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "count rlock reentrant"), "3");

	jp_ok(peer, &r, "w1", "unlock rlock reentrant");
	dl_pass(dlock_lock_hold_count(&n, l, owner));
	cr_assert_eq(n, 2);
	jp_ok(peer, &r, "w1", "unlock rlock reentrant");
	jp_ok(peer, &r, "w1", "unlock rlock reentrant");
	int locked = 1;
	dl_pass(dlock_lock_is_locked(&locked, l));
	cr_assert_eq(locked, 0);
	assert_absent("reentrant");
	dlock_lock_free(l);
}

Test(redisson_rlock, dlock_reentry_holds_until_the_last_unlock)
{
	jp_reply r;
	dlock_lock *l = dl_lock(cli, "reentrant");
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, -1));
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, -1));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "locked rlock reentrant"), "true");
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "held rlock reentrant"), "false");
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "count rlock reentrant"), "0");

	dl_pass(dlock_lock_release(l, NULL));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "try rlock reentrant 0 -1"), "false",
			"Redisson got in after the first of two dlock unlocks");
	dl_pass(dlock_lock_release(l, NULL));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "try rlock reentrant 0 -1"), "true");
	jp_ok(peer, &r, "w1", "unlock rlock reentrant");
	dlock_lock_free(l);
}

/* ---- forceUnlock ------------------------------------------------------------ */

/* Redisson's forceUnlock wakes a dlock waiter, and the dlock holder's
 * watchdog learns that its hold is gone. */
Test(redisson_rlock, redisson_force_unlock_wakes_dlock_and_the_holder_learns)
{
	jp_reply r;
	dl_lost lost;
	dl_lost_init(&lost);
	dlock_lock *holder = dl_lock(cli, "forced");
	dl_pass(dlock_lock_set_lost_cb(holder, dl_on_lost, &lost));
	dl_pass(dlock_lock_acquire(holder, NULL, DLOCK_WAIT_FOREVER, -1));

	dlock_client *other = dl_client(rh_server_uri(dl_srv), 5000, WATCHDOG_MS);
	dlock_lock *waiter = dl_lock(other, "forced");
	io_call w;
	c_waits(&w, waiter);
	cr_assert_str_eq(jp_ok(peer, &r, "w9", "force rlock forced"), "true");
	cr_assert_eq(io_call_join(&w), 0, "%s", dlock_lock_errmsg(waiter));
	io_wake(peer, "RLock forceUnlock wake-up, Redisson -> dlock", r.t_start_ns, w.t_end_ns);

	/* The watchdog renews every WATCHDOG_MS/3: it must notice within a
	 * watchdog period (plus a busy host's slack). */
	cr_assert(dl_lost_wait(&lost, rh_now_ms() + 3 * WATCHDOG_MS),
			"the dlock holder was not told it lost a force-unlocked lock");
	cr_assert_neq(dlock_lock_check(holder, NULL), 0, "check() still says held");
	fprintf(stderr, "interop RLock forceUnlock: dlock holder told after %.0f ms\n",
			(double)(lost.at_ms * 1000000 - r.t_end_ns) / 1e6);

	io_call_unlock(&w, other, waiter);
	dlock_lock_free(waiter);
	dlock_lock_free(holder);
	dlock_client_free(other);
	dl_lost_destroy(&lost);
}

/* dlock's force unlock wakes a Redisson waiter; the Redisson holder finds
 * itself no longer holding, and its unlock fails as Redisson's does. */
Test(redisson_rlock, dlock_force_unlock_wakes_redisson_and_the_holder_learns)
{
	jp_reply r;
	jp_ok(peer, &r, "w1", "lock rlock forced -1");
	long seq = java_waits("w2", "rlock", "forced");
	dlock_lock *l = dl_lock(cli, "forced");
	int deleted = 0;
	int64_t forced = jp_now_ns();
	dl_pass(dlock_lock_force_release(&deleted, l));
	cr_assert_eq(deleted, 1);
	jp_wait(peer, seq, &r);
	cr_assert(r.ok, "Redisson's waiter failed: %s", r.value);
	io_wake(peer, "RLock forceUnlock wake-up, dlock -> Redisson", forced, r.t_end_ns);

	cr_assert_str_eq(jp_ok(peer, &r, "w1", "held rlock forced"), "false");
	jp_wait(peer, jp_send(peer, "w1", "unlock rlock forced"), &r);
	cr_assert_not(r.ok, "the force-unlocked Redisson holder could still unlock");
	cr_assert(strstr(r.value, "IllegalMonitorStateException"), "%s", r.value);
	jp_ok(peer, &r, "w2", "unlock rlock forced");
	dlock_lock_free(l);
}

/* ---- lease expiry ------------------------------------------------------------ */

/* The waiter gets in once the lease ran out, not before; Redisson's call
 * returned within [t_start, t_end], so the expiry lies between those plus the
 * lease. */
static void assert_after_lease(
		int64_t t_start, int64_t t_end, int64_t acquired, int lease_ms, const char *what)
{
	double early = (double)(acquired - t_start) / 1e6;
	double late = (double)(acquired - t_end) / 1e6;
	fprintf(stderr, "interop %s: in %.1f ms after a %d ms lease\n", what, late, lease_ms);
	cr_assert(early >= lease_ms - 5, "%s: in %.1f ms into a %d ms lease", what, early,
			lease_ms);
	cr_assert(late <= lease_ms + IO_WAKE_MAX_MS, "%s: in only %.1f ms after a %d ms lease",
			what, late, lease_ms);
}

Test(redisson_rlock, a_redisson_lease_expires_for_dlock)
{
	jp_reply r;
	dlock_lock *l = dl_lock(cli, "leased");
	jp_ok(peer, &r, "w1", "lock rlock leased 1000");
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, IO_LONG_LEASE_MS));
	assert_after_lease(r.t_start_ns, r.t_end_ns, jp_now_ns(), 1000,
			"RLock lease expiry, Redisson -> dlock");
	dl_pass(dlock_lock_release(l, NULL));
	dlock_lock_free(l);
}

Test(redisson_rlock, a_dlock_lease_expires_for_redisson)
{
	jp_reply r;
	dlock_lock *l = dl_lock(cli, "leased");
	int64_t t_start = jp_now_ns();
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 1000));
	int64_t t_end = jp_now_ns();
	jp_ok(peer, &r, "w1", "lock rlock leased -1");
	assert_after_lease(
			t_start, t_end, r.t_end_ns, 1000, "RLock lease expiry, dlock -> Redisson");
	jp_ok(peer, &r, "w1", "unlock rlock leased");
	dlock_lock_free(l);
}

/* ---- the watchdog --------------------------------------------------------- */

/* For 3.25 watchdog timeouts, try every 250 ms that the other side is kept
 * out and the key keeps a TTL. */
static void kept_out_past_three_watchdogs(int (*other_gets_in)(void *), void *arg)
{
	int64_t until = rh_now_ms() + 13 * WATCHDOG_MS / 4;
	while (rh_now_ms() < until) {
		cr_assert_not(other_gets_in(arg),
				"the other side got in during the watchdog's hold");
		int64_t ttl = rh_command_int(dl_srv, "PTTL watched");
		cr_assert(ttl > 0 && ttl <= WATCHDOG_MS,
				"PTTL %" PRId64 " under a watchdog of %d ms", ttl, WATCHDOG_MS);
		dl_sleep_ms(250);
	}
}

static int dlock_gets_in(void *l)
{
	int rc = dlock_lock_acquire(l, NULL, 0, 1000);
	cr_assert(rc == 0 || rc == DLOCK_ENOTACQUIRED, "%s", dlock_lock_errmsg(l));
	return rc == 0;
}

static int redisson_gets_in(void *unused)
{
	(void)unused;
	jp_reply r;
	return strcmp(jp_ok(peer, &r, "w2", "try rlock watched 0 1000"), "true") == 0;
}

Test(redisson_rlock, redissons_watchdog_holds_past_three_timeouts)
{
	jp_reply r;
	dlock_lock *l = dl_lock(cli, "watched");
	jp_ok(peer, &r, "w1", "lock rlock watched -1");
	kept_out_past_three_watchdogs(dlock_gets_in, l);
	jp_ok(peer, &r, "w1", "unlock rlock watched");
	cr_assert(dlock_gets_in(l), "Redisson's unlock did not free the lock");
	dl_pass(dlock_lock_release(l, NULL));
	dlock_lock_free(l);
}

Test(redisson_rlock, dlocks_watchdog_holds_past_three_timeouts)
{
	jp_reply r;
	dlock_lock *l = dl_lock(cli, "watched");
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, -1));
	kept_out_past_three_watchdogs(redisson_gets_in, NULL);
	dl_pass(dlock_lock_release(l, NULL));
	cr_assert(redisson_gets_in(NULL), "dlock's unlock did not free the lock");
	jp_ok(peer, &r, "w2", "unlock rlock watched");
	dlock_lock_free(l);
}

/* ---- RReadWriteLock on a name dlock holds as an RLock -------------------- */

/* Not a dlock feature, a hazard docs/redisson.md
 * documents: Redisson's read-write lock keeps a "mode" field in the same hash
 * and takes a hash without one for free, so its read lock co-acquires a name
 * held as an RLock (dlock's or Redisson's own), and its last read unlock
 * deletes the whole hash, the RLock holder's hold with it. This test pins
 * the behaviour docs/redisson.md describes. */
Test(redisson_rlock, redissons_read_lock_co_acquires_and_drops_an_rlock_hold)
{
	jp_reply r;
	dlock_lock *l = dl_lock(cli, "shared-name");
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, IO_LONG_LEASE_MS));
	const char *read = jp_ok(peer, &r, "w1", "try read shared-name 0 5000");
	cr_assert_str_eq(read, "true",
			"Redisson's read lock no longer co-acquires an RLock's name: "
			"update docs/redisson.md");
	int held = 0;
	dl_pass(dlock_lock_is_held(&held, l, NULL));
	cr_assert_eq(held, 1, "dlock's hold is gone beside Redisson's read lock");

	jp_ok(peer, &r, "w1", "unlock read shared-name");
	dl_pass(dlock_lock_is_held(&held, l, NULL));
	cr_assert_eq(held, 0,
			"Redisson's read unlock no longer drops the RLock hold: update "
			"docs/redisson.md");
	cr_assert_eq(dlock_lock_release(l, NULL), DLOCK_ELOST, "%s", dlock_lock_errmsg(l));
	dlock_lock_free(l);
}
