/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Read-write lock against the real Redisson (Java): getReadWriteLock(name)
 * and dlock's DLOCK_LOCK_READ / DLOCK_LOCK_WRITE handles are one lock.
 * A Java writer's unlock wakes a dlock reader and a dlock writer's unlock a
 * Java reader; the last reader's unlock wakes a writer of the other
 * language; readers of both languages hold together and keep writers out;
 * and each side's watchdog renews its own read hold without disturbing the
 * other's. Every hold a waiter wakes from has a 20 s lease, so a wake-up in
 * milliseconds is the pub/sub message at work.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
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

TestSuite(redisson_rwlock, .init = setup, .fini = teardown, .timeout = 180);

static dlock_lock *half(const char *name, dlock_lock_kind kind)
{
	dlock_lock *l = NULL;

	dl_pass(dlock_lock_new(&l, cli, name, dl_kind(kind)));
	return l;
}

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

static void assert_absent(const char *key)
{
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS %s", key), 0, "%s still exists", key);
}

static int64_t timeout_pttl(const char *name, const char *owner, int k)
{
	return rh_command_int(dl_srv, "PTTL {%s}:%s:rwlock_timeout:%d", name, owner, k);
}

/* Redisson (kind jkind) holds, a dlock waiter (ckind) is woken by its unlock. */
static void java_unlock_wakes_c(const char *name, const char *jkind, dlock_lock_kind ckind,
		const char *what)
{
	dlock_lock *l = half(name, ckind);
	jp_reply r;
	io_call w;

	jp_ok(peer, &r, "w1", "lock %s %s %d", jkind, name, IO_LONG_LEASE_MS);
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 1000), DLOCK_ENOTACQUIRED,
			"dlock took \"%s\" from a Redisson %s lock", name, jkind);
	c_waits(&w, l);
	jp_ok(peer, &r, "w1", "unlock %s %s", jkind, name);
	cr_assert_eq(io_call_join(&w), 0, "%s", dlock_lock_errmsg(l));
	io_wake(peer, what, r.t_start_ns, w.t_end_ns);
	io_call_unlock(&w, cli, l);
	assert_absent(name);
	dlock_lock_free(l);
}

/* dlock (ckind) holds, a Redisson waiter (jkind) is woken by its unlock. */
static void c_unlock_wakes_java(const char *name, dlock_lock_kind ckind, const char *jkind,
		const char *what)
{
	dlock_lock *l = half(name, ckind);
	jp_reply r;
	int64_t unlocked;
	long seq;

	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, IO_LONG_LEASE_MS));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "try %s %s 0 -1", jkind, name), "false");
	seq = java_waits("w1", jkind, name);
	unlocked = jp_now_ns();
	dl_pass(dlock_lock_release(l, NULL));
	jp_wait(peer, seq, &r);
	cr_assert(r.ok, "Redisson's lock failed: %s", r.value);
	io_wake(peer, what, unlocked, r.t_end_ns);
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "held %s %s", jkind, name), "true");
	jp_ok(peer, &r, "w1", "unlock %s %s", jkind, name);
	assert_absent(name);
	dlock_lock_free(l);
}

Test(redisson_rwlock, java_write_unlock_wakes_a_dlock_reader)
{
	java_unlock_wakes_c("rw-a", "write", DLOCK_LOCK_READ,
			"RReadWriteLock write unlock wake-up, Redisson writer -> dlock reader");
}

Test(redisson_rwlock, dlock_write_unlock_wakes_a_java_reader)
{
	c_unlock_wakes_java("rw-b", DLOCK_LOCK_WRITE, "read",
			"RReadWriteLock write unlock wake-up, dlock writer -> Redisson reader");
}

Test(redisson_rwlock, java_read_unlock_wakes_a_dlock_writer)
{
	java_unlock_wakes_c("rw-c", "read", DLOCK_LOCK_WRITE,
			"RReadWriteLock read unlock wake-up, Redisson reader -> dlock writer");
}

Test(redisson_rwlock, dlock_read_unlock_wakes_a_java_writer)
{
	c_unlock_wakes_java("rw-d", DLOCK_LOCK_READ, "write",
			"RReadWriteLock read unlock wake-up, dlock reader -> Redisson writer");
}

Test(redisson_rwlock, java_and_dlock_readers_hold_together_and_keep_writers_out)
{
	dlock_lock *r = half("rw-share", DLOCK_LOCK_READ), *w = half("rw-share", DLOCK_LOCK_WRITE);
	char java_owner[160];
	jp_reply rep;
	int64_t n = 0;

	snprintf(java_owner, sizeof java_owner, "%s", jp_ok(peer, &rep, "w1", "owner"));
	jp_ok(peer, &rep, "w1", "lock read rw-share %d", IO_LONG_LEASE_MS);
	dl_pass(dlock_lock_acquire(r, NULL, DLOCK_WAIT_FOREVER, IO_LONG_LEASE_MS));
	cr_assert_eq(rh_command_int(dl_srv, "HLEN rw-share"), 3, "mode and two readers");
	cr_assert_str_eq(jp_ok(peer, &rep, "w1", "count read rw-share"), "1");
	dl_pass(dlock_lock_hold_count(&n, r, NULL));
	cr_assert_eq(n, 1);
	cr_assert_gt(timeout_pttl("rw-share", java_owner, 1), 0, "Redisson's timeout key");
	/* Writers of either language are kept out; a Java thread that reads
	 * only would wait for itself in Redisson, so another worker asks. */
	cr_assert_str_eq(jp_ok(peer, &rep, "w2", "try write rw-share 0 -1"), "false");
	cr_assert_str_eq(jp_ok(peer, &rep, "w2", "locked read rw-share"), "true");
	cr_assert_eq(dlock_lock_acquire(w, "another", 0, 1000), DLOCK_ENOTACQUIRED);
	/* Redisson's unlock leaves dlock's hold, and the reverse. */
	jp_ok(peer, &rep, "w1", "unlock read rw-share");
	cr_assert_eq(rh_command_int(dl_srv, "HEXISTS rw-share %s", java_owner), 0);
	cr_assert_eq(dlock_lock_check(r, NULL), 0);
	cr_assert_gt(rh_command_int(dl_srv, "PTTL rw-share"), 0);
	jp_ok(peer, &rep, "w1", "lock read rw-share %d", IO_LONG_LEASE_MS);
	dl_pass(dlock_lock_release(r, NULL));
	cr_assert_str_eq(jp_ok(peer, &rep, "w1", "held read rw-share"), "true");
	jp_ok(peer, &rep, "w1", "unlock read rw-share");
	assert_absent("rw-share");
	dlock_lock_free(r);
	dlock_lock_free(w);
}

Test(redisson_rwlock, each_sides_watchdog_renews_its_read_hold_without_disturbing_the_other)
{
	dlock_lock *r = half("rw-dog", DLOCK_LOCK_READ), *w = half("rw-dog", DLOCK_LOCK_WRITE);
	char java_owner[160], c_owner[128];
	jp_reply rep;
	int64_t jt, ct, h;

	snprintf(java_owner, sizeof java_owner, "%s", jp_ok(peer, &rep, "w1", "owner"));
	dl_owner(cli, c_owner, sizeof c_owner);
	jp_ok(peer, &rep, "w1", "lock read rw-dog -1"); /* Redisson's watchdog */
	dl_pass(dlock_lock_acquire(r, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_sleep_ms(3 * WATCHDOG_MS + 500);
	jt = timeout_pttl("rw-dog", java_owner, 1);
	ct = timeout_pttl("rw-dog", c_owner, 1);
	h = rh_command_int(dl_srv, "PTTL rw-dog");
	cr_assert(jt > 0 && ct > 0 && h > 0,
			"past 3x the watchdog: PTTL Redisson's key %lld, dlock's %lld, hash %lld",
			(long long)jt, (long long)ct, (long long)h);
	cr_assert_str_eq(jp_ok(peer, &rep, "w1", "held read rw-dog"), "true");
	cr_assert_eq(dlock_lock_check(r, NULL), 0);

	/* Redisson leaves: dlock's hold lives on, renewed by dlock alone. */
	jp_ok(peer, &rep, "w1", "unlock read rw-dog");
	dl_sleep_ms(2 * WATCHDOG_MS);
	cr_assert_gt(timeout_pttl("rw-dog", c_owner, 1), 0);
	cr_assert_eq(dlock_lock_check(r, NULL), 0);
	cr_assert_str_eq(jp_ok(peer, &rep, "w2", "try write rw-dog 0 -1"), "false");

	/* And the reverse: Redisson's hold lives on after dlock leaves. */
	jp_ok(peer, &rep, "w1", "lock read rw-dog -1");
	dl_pass(dlock_lock_release(r, NULL));
	dl_sleep_ms(2 * WATCHDOG_MS);
	cr_assert_gt(timeout_pttl("rw-dog", java_owner, 1), 0);
	cr_assert_str_eq(jp_ok(peer, &rep, "w1", "held read rw-dog"), "true");
	cr_assert_eq(dlock_lock_acquire(w, "x", 0, 1000), DLOCK_ENOTACQUIRED);
	jp_ok(peer, &rep, "w1", "unlock read rw-dog");
	assert_absent("rw-dog");
	dlock_lock_free(r);
	dlock_lock_free(w);
}
