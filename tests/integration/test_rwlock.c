/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Read-write lock (Redisson's RReadWriteLock: DLOCK_LOCK_READ and
 * DLOCK_LOCK_WRITE handles) on a real redis-server: readers share, a writer
 * excludes everyone else but may read itself, an upgrade is refused at
 * once, re-entry counts, every read hold has its timeout key which the
 * watchdog renews, the last reader's unlock wakes a waiting writer and a
 * writer's unlock wakes every waiting reader, leases expire, async
 * acquisitions and their cancels leave nothing behind, both halves
 * work as MultiLock and RedLock members, and on a Redis Cluster.
 *
 * Data (Redisson's): HASH <name> with mode = read|write, `<owner>:write` ->
 * count for the writer, `<owner>` -> count for a reader, and per read hold k
 * the STRING {<name>}:<owner>:rwlock_timeout:<k>; channel redisson_rwlock:{<name>}.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "redis_harness.h"
#include "rh_cluster.h"
#include "support.h"

#define srv dl_srv

TestSuite(rwlock, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

/* ---- helpers ------------------------------------------------------------- */

static dlock_lock *half(dlock_client *c, const char *name, dlock_lock_kind kind)
{
	dlock_lock *l = NULL;

	dl_pass(dlock_lock_new(&l, c, name, dl_kind(kind)));
	return l;
}

/* The key of read hold k of owner on name. */
static void timeout_key(char *buf, size_t len, const char *name, const char *owner, int k)
{
	snprintf(buf, len, "{%s}:%s:rwlock_timeout:%d", name, owner, k);
}

static int64_t timeout_pttl(const char *name, const char *owner, int k)
{
	char key[256];

	timeout_key(key, sizeof key, name, owner, k);
	return rh_command_int(srv, "PTTL %s", key);
}

/* The hash's field as a string into buf ("" when absent). */
static const char *hget(char *buf, size_t len, const char *name, const char *field)
{
	redisReply *r = rh_command(srv, "HGET %s %s", name, field);

	cr_assert_not_null(r);
	snprintf(buf, len, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
	freeReplyObject(r);
	return buf;
}

static void assert_mode(const char *name, const char *want)
{
	char m[16];

	cr_assert_str_eq(hget(m, sizeof m, name, "mode"), want, "mode of %s is '%s', not '%s'",
			name, m, want);
}

static int locked(dlock_lock *l)
{
	int yes = -1;

	dl_pass(dlock_lock_is_locked(&yes, l));
	return yes;
}

/* ---- sharing and exclusion ----------------------------------------------- */

Test(rwlock, many_readers_hold_together_each_with_a_timeout_key)
{
	dlock_client *c = dl_client(rh_server_uri(srv), 0, 0);
	dlock_lock *r = half(c, "rw:share", DLOCK_LOCK_READ), *w = half(c, "rw:share", DLOCK_LOCK_WRITE);
	const char *owners[] = { "reader:1", "reader:2", "reader:3" };
	int i;

	for (i = 0; i < 3; i++)
		dl_pass(dlock_lock_acquire(r, owners[i], 0, 10000));
	assert_mode("rw:share", "read");
	for (i = 0; i < 3; i++) {
		int64_t n = 0, ttl = timeout_pttl("rw:share", owners[i], 1);

		dl_pass(dlock_lock_hold_count(&n, r, owners[i]));
		cr_assert_eq(n, 1, "%s counts %lld holds", owners[i], (long long)n);
		cr_assert(ttl > 8000 && ttl <= 10000, "%s's timeout key has PTTL %lld", owners[i],
				(long long)ttl);
	}
	cr_assert(rh_command_int(srv, "PTTL rw:share") > 8000);
	cr_assert_eq(locked(r), 1, "readLock().isLocked() while read");
	cr_assert_eq(locked(w), 0, "writeLock().isLocked() while read");
	dl_assert_try(w, 0, 10000, DLOCK_ENOTACQUIRED, 0, 1000);
	for (i = 0; i < 3; i++)
		dl_pass(dlock_lock_release(r, owners[i]));
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:share"), 0, "the last reader takes the key");
	cr_assert_eq(timeout_pttl("rw:share", owners[0], 1), -2, "and the timeout keys go");
	dl_free_locks(r, w);
	dl_close_clients(c);
}

Test(rwlock, a_writer_excludes_readers_and_other_writers)
{
	dlock_client *a = dl_client(rh_server_uri(srv), 0, 0), *b = dl_client(rh_server_uri(srv), 0, 0);
	dlock_lock *w = half(a, "rw:excl", DLOCK_LOCK_WRITE), *r2 = half(b, "rw:excl", DLOCK_LOCK_READ),
		   *w2 = half(b, "rw:excl", DLOCK_LOCK_WRITE);
	char owner[128], field[160], v[16];

	dl_owner(a, owner, sizeof owner);
	dl_pass(dlock_lock_acquire(w, NULL, DLOCK_WAIT_FOREVER, 10000));
	assert_mode("rw:excl", "write");
	snprintf(field, sizeof field, "%s:write", owner);
	cr_assert_str_eq(hget(v, sizeof v, "rw:excl", field), "1", "the writer's field %s", field);
	cr_assert_eq(locked(w2), 1);
	cr_assert_eq(locked(r2), 0, "readLock().isLocked() with only a writer");
	dl_assert_try(r2, 0, 10000, DLOCK_ENOTACQUIRED, 0, 1000);
	dl_assert_try(w2, 300, 10000, DLOCK_ENOTACQUIRED, 250, 1500);
	redisContext *sub = dl_subscribe(rh_server_port(srv), "redisson_rwlock:{rw:excl}");
	dl_pass(dlock_lock_release(w, NULL));
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:excl"), 0);
	/* "1" wakes every parked waiter; "0" a Redisson reader not parked yet. */
	dl_expect_message(sub, "redisson_rwlock:{rw:excl}", "1", 2000);
	dl_expect_message(sub, "redisson_rwlock:{rw:excl}", "0", 2000);
	redisFree(sub);
	dl_assert_try(r2, 0, 10000, 0, 0, 1000);
	dl_pass(dlock_lock_release(r2, NULL));
	dl_free_locks(w, r2, w2);
	dl_close_clients(a, b);
}

Test(rwlock, a_writer_may_take_the_read_lock_and_keeps_it_after_the_write_unlock)
{
	dlock_client *c = dl_client(rh_server_uri(srv), 0, 0);
	dlock_lock *w = half(c, "rw:down", DLOCK_LOCK_WRITE), *r = half(c, "rw:down", DLOCK_LOCK_READ);
	dlock_client *o = dl_client(rh_server_uri(srv), 0, 0);
	dlock_lock *other = half(o, "rw:down", DLOCK_LOCK_READ);
	dlock_lock_info *info = NULL;
	char owner[128], wfield[160];
	int held = 0;

	dl_owner(c, owner, sizeof owner);
	snprintf(wfield, sizeof wfield, "%s:write", owner);

	dl_pass(dlock_lock_acquire(w, NULL, DLOCK_WAIT_FOREVER, 10000));
	dl_pass(dlock_lock_acquire(r, NULL, DLOCK_WAIT_FOREVER, 20000));
	cr_assert_eq(rh_command_int(srv, "HLEN rw:down"), 3, "mode, the write and the read field");
	dl_pass(dlock_lock_query(&info, r));
	cr_assert_eq(dlock_lock_info_holders(info), 2, "the query shows two holds, not the mode");
	for (size_t i = 0; i < 2; i++) {
		const char *who = dlock_lock_info_holder_owner(info, i);

		cr_assert(strcmp(who, owner) == 0 || strcmp(who, wfield) == 0, "holder %s", who);
		cr_assert_eq(dlock_lock_info_holder_count(info, i), 1);
	}
	dlock_lock_info_free(info);
	cr_assert_eq(locked(r), 1, "readLock().isLocked(): a writer that reads");
	dl_assert_try(other, 0, 10000, DLOCK_ENOTACQUIRED, 0, 1000);
	dl_pass(dlock_lock_release(w, NULL));
	assert_mode("rw:down", "read");
	dl_pass(dlock_lock_is_held(&held, r, NULL));
	cr_assert_eq(held, 1, "the read hold survives the write unlock");
	cr_assert(rh_command_int(srv, "PTTL rw:down") > 15000,
			"the hash lives as long as the read hold (20 s), not the write lease");
	dl_assert_try(other, 0, 10000, 0, 0, 1000); /* read mode now: others read too */
	dl_pass(dlock_lock_release(other, NULL));
	dl_pass(dlock_lock_release(r, NULL));
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:down"), 0);
	dl_free_locks(w, r, other);
	dl_close_clients(c, o);
}

Test(rwlock, a_short_read_hold_of_the_writer_never_cuts_its_write_lease)
{
	dlock_client *c = dl_client(rh_server_uri(srv), 0, 0);
	dlock_lock *w = half(c, "rw:cut", DLOCK_LOCK_WRITE), *r = half(c, "rw:cut", DLOCK_LOCK_READ);
	int64_t ttl;

	dl_pass(dlock_lock_acquire(w, NULL, DLOCK_WAIT_FOREVER, 20000));
	dl_pass(dlock_lock_acquire(r, NULL, DLOCK_WAIT_FOREVER, 1000));
	dl_pass(dlock_lock_acquire(r, NULL, DLOCK_WAIT_FOREVER, 1000));
	dl_pass(dlock_lock_release(r, NULL));
	ttl = rh_command_int(srv, "PTTL rw:cut");
	cr_assert(ttl > 15000, "a read release cut the write lease (20 s) to PTTL %lld", (long long)ttl);
	dl_pass(dlock_lock_release(r, NULL));
	dl_pass(dlock_lock_release(w, NULL));
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:cut"), 0);
	dl_free_locks(w, r);
	dl_close_clients(c);
}

Test(rwlock, an_upgrade_from_read_to_write_is_refused_at_once)
{
	dlock_client *c = dl_client(rh_server_uri(srv), 0, 0);
	dlock_lock *r = half(c, "rw:up", DLOCK_LOCK_READ), *w = half(c, "rw:up", DLOCK_LOCK_WRITE);
	int64_t t0;
	int rc;

	dl_pass(dlock_lock_acquire(r, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	t0 = rh_now_ms();
	rc = dlock_lock_acquire(w, NULL, 5000, 10000);
	cr_assert_eq(rc, DLOCK_EINVAL, "an upgrade answered %s", dlock_strerror(rc));
	cr_assert(rh_now_ms() - t0 < 1000, "refused after %lld ms of a 5 s wait",
			(long long)(rh_now_ms() - t0));
	cr_assert(strstr(dlock_lock_errmsg(w), "upgrade from read to write is not supported") != NULL,
			"message: %s", dlock_lock_errmsg(w));
	t0 = rh_now_ms();
	cr_assert_eq(dlock_lock_acquire(w, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), DLOCK_EINVAL, "lock() waits forever otherwise");
	cr_assert(rh_now_ms() - t0 < 1000);
	assert_mode("rw:up", "read");
	cr_assert_eq(rh_command_int(srv, "HLEN rw:up"), 2, "nothing written by the refusal");
	dl_pass(dlock_lock_release(r, NULL));
	dl_assert_try(w, 0, 10000, 0, 0, 1000); /* released: now it may write */
	dl_pass(dlock_lock_release(w, NULL));
	dl_free_locks(r, w);
	dl_close_clients(c);
}

Test(rwlock, reentry_counts_on_both_halves)
{
	dlock_client *c = dl_client(rh_server_uri(srv), 0, 0);
	dlock_lock *r = half(c, "rw:re", DLOCK_LOCK_READ), *w = half(c, "rw:re2", DLOCK_LOCK_WRITE);
	char owner[128];
	int64_t n = 0, ttl;
	int k;

	dl_owner(c, owner, sizeof owner);
	for (k = 1; k <= 3; k++)
		dl_pass(dlock_lock_acquire(r, NULL, DLOCK_WAIT_FOREVER, 10000));
	dl_pass(dlock_lock_hold_count(&n, r, NULL));
	cr_assert_eq(n, 3);
	for (k = 1; k <= 3; k++)
		cr_assert_gt(timeout_pttl("rw:re", owner, k), 0, "timeout key %d", k);
	dl_pass(dlock_lock_release(r, NULL));
	dl_pass(dlock_lock_hold_count(&n, r, NULL));
	cr_assert_eq(n, 2);
	cr_assert_eq(timeout_pttl("rw:re", owner, 3), -2, "the newest hold's key goes first");
	cr_assert_gt(timeout_pttl("rw:re", owner, 2), 0);
	dl_pass(dlock_lock_release(r, NULL));
	dl_pass(dlock_lock_release(r, NULL));
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:re"), 0);
	cr_assert_eq(dlock_lock_release(r, NULL), DLOCK_ENOTOWNER);

	dl_pass(dlock_lock_acquire(w, NULL, DLOCK_WAIT_FOREVER, 10000));
	dl_pass(dlock_lock_acquire(w, NULL, DLOCK_WAIT_FOREVER, 10000));
	dl_pass(dlock_lock_hold_count(&n, w, NULL));
	cr_assert_eq(n, 2);
	ttl = rh_command_int(srv, "PTTL rw:re2");
	cr_assert(ttl > 15000, "a write re-entry adds its lease (Redisson): PTTL %lld", (long long)ttl);
	dl_pass(dlock_lock_release(w, NULL));
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:re2"), 1);
	dl_pass(dlock_lock_release(w, NULL));
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:re2"), 0);
	dl_free_locks(r, w);
	dl_close_clients(c);
}

/* ---- the watchdog and leases --------------------------------------------- */

Test(rwlock, the_watchdog_renews_every_timeout_key_of_a_read_hold)
{
	dlock_client *c = dl_client(rh_server_uri(srv), 0, 1500);
	dlock_lock *r = half(c, "rw:dog", DLOCK_LOCK_READ);
	char owner[128];
	int64_t t0 = rh_now_ms(), k1, k2, h;

	dl_owner(c, owner, sizeof owner);
	dl_pass(dlock_lock_acquire(r, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_pass(dlock_lock_acquire(r, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_sleep_ms(3500); /* more than twice the watchdog timeout */
	k1 = timeout_pttl("rw:dog", owner, 1);
	k2 = timeout_pttl("rw:dog", owner, 2);
	h = rh_command_int(srv, "PTTL rw:dog");
	cr_assert(k1 > 500 && k2 > 500 && h > 500,
			"after %lld ms with a 1500 ms watchdog: PTTL key1 %lld, key2 %lld, hash %lld",
			(long long)(rh_now_ms() - t0), (long long)k1, (long long)k2, (long long)h);
	cr_assert_eq(dlock_lock_check(r, NULL), 0);
	dl_pass(dlock_lock_release(r, NULL));
	dl_pass(dlock_lock_release(r, NULL));
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:dog"), 0);
	dl_free_locks(r);
	dl_close_clients(c);
}

Test(rwlock, a_read_hold_found_gone_by_its_renewal_is_lost)
{
	dlock_client *c = dl_client(rh_server_uri(srv), 0, 900);
	dlock_lock *r = half(c, "rw:lost", DLOCK_LOCK_READ);
	dl_lost lost;

	dl_lost_init(&lost);
	dl_pass(dlock_lock_set_lost_cb(r, dl_on_lost, &lost));
	dl_pass(dlock_lock_acquire(r, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	cr_assert_eq(rh_command_int(srv, "DEL rw:lost"), 1);
	cr_assert_eq(dl_lost_wait(&lost, rh_now_ms() + 3000), 1, "no lost callback");
	cr_assert_eq(lost.reason, DLOCK_LOST_GONE);
	cr_assert_eq(dlock_lock_check(r, NULL), DLOCK_ELOST);
	cr_assert_eq(dlock_lock_release(r, NULL), DLOCK_ELOST);
	dl_lost_destroy(&lost);
	dl_free_locks(r);
	dl_close_clients(c);
}

Test(rwlock, a_lease_ends_a_read_or_write_hold)
{
	dlock_client *c = dl_client(rh_server_uri(srv), 0, 0);
	dlock_lock *r = half(c, "rw:lease", DLOCK_LOCK_READ), *w = half(c, "rw:lease", DLOCK_LOCK_WRITE);

	dl_pass(dlock_lock_acquire(r, "reader", 0, 300));
	dl_assert_try(w, 2000, 10000, 0, 150, 1500); /* the read lease frees it */
	cr_assert_eq(dlock_lock_acquire(r, "other", 0, 10000), DLOCK_ENOTACQUIRED);
	dl_pass(dlock_lock_release(w, NULL));
	dl_pass(dlock_lock_acquire(w, "writer", 0, 300));
	dl_assert_try(r, 2000, 10000, 0, 150, 1500); /* and the write lease */
	dl_pass(dlock_lock_release(r, NULL));
	dl_free_locks(r, w);
	dl_close_clients(c);
}

/* ---- waking --------------------------------------------------------------- */

Test(rwlock, the_last_readers_unlock_wakes_a_waiting_writer)
{
	dlock_client *c = dl_client(rh_server_uri(srv), 0, 0), *d = dl_client(rh_server_uri(srv), 0, 0);
	dlock_lock *r = half(c, "rw:wake", DLOCK_LOCK_READ), *w = half(d, "rw:wake", DLOCK_LOCK_WRITE);
	dl_waiter wt;
	int64_t unlocked;

	dl_pass(dlock_lock_acquire(r, "reader:1", 0, 20000));
	dl_pass(dlock_lock_acquire(r, "reader:2", 0, 20000));
	dl_waiter_start(&wt, d, w, 15000);
	dl_sleep_ms(300); /* the writer tried and listens */
	dl_pass(dlock_lock_release(r, "reader:1"));
	dl_sleep_ms(200);
	cr_assert_eq(wt.returned, 0, "the writer got in beside a reader");
	unlocked = rh_now_ms();
	dl_pass(dlock_lock_release(r, "reader:2"));
	dl_waiter_join(&wt);
	cr_assert_eq(wt.rc, 0, "the writer: %s", dlock_lock_errmsg(w));
	cr_assert(wt.returned - unlocked < 1000,
			"the writer woke %lld ms after the last reader left (leases 20 s)",
			(long long)(wt.returned - unlocked));
	dl_pass(dlock_lock_release(w, wt.owner));
	dl_free_locks(r, w);
	dl_close_clients(c, d);
}

Test(rwlock, a_writers_unlock_wakes_every_waiting_reader)
{
	dlock_client *c = dl_client(rh_server_uri(srv), 0, 0), *d[3];
	dlock_lock *w = half(c, "rw:all", DLOCK_LOCK_WRITE), *r[3];
	dl_waiter wt[3];
	int64_t unlocked;
	int i;

	dl_pass(dlock_lock_acquire(w, "writer", 0, 20000));
	for (i = 0; i < 3; i++) { /* three clients: three owners */
		d[i] = dl_client(rh_server_uri(srv), 0, 0);
		r[i] = half(d[i], "rw:all", DLOCK_LOCK_READ);
		dl_waiter_start(&wt[i], d[i], r[i], 15000);
	}
	dl_sleep_ms(400);
	unlocked = rh_now_ms();
	dl_pass(dlock_lock_release(w, "writer"));
	for (i = 0; i < 3; i++) {
		dl_waiter_join(&wt[i]);
		cr_assert_eq(wt[i].rc, 0, "reader %d: %s", i, dlock_lock_errmsg(r[i]));
		cr_assert(wt[i].returned - unlocked < 1000, "reader %d woke %lld ms after the unlock",
				i, (long long)(wt[i].returned - unlocked));
	}
	cr_assert_eq(rh_command_int(srv, "HLEN rw:all"), 4, "mode and three readers");
	for (i = 0; i < 3; i++)
		dl_pass(dlock_lock_release(r[i], wt[i].owner));
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:all"), 0);
	dl_free_locks(w, r[0], r[1], r[2]);
	dl_close_clients(c, d[0], d[1], d[2]);
}

/* ---- force unlock --------------------------------------------------------- */

Test(rwlock, a_force_unlock_takes_only_its_own_mode)
{
	dlock_client *c = dl_client(rh_server_uri(srv), 0, 0);
	dlock_lock *r = half(c, "rw:force", DLOCK_LOCK_READ), *w = half(c, "rw:force", DLOCK_LOCK_WRITE);
	redisContext *sub = dl_subscribe(rh_server_port(srv), "redisson_rwlock:{rw:force}");
	int deleted = -1;

	dl_pass(dlock_lock_acquire(w, "writer", 0, 10000));
	dl_pass(dlock_lock_force_release(&deleted, r));
	cr_assert_eq(deleted, 0, "the read half leaves a write lock alone");
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:force"), 1);
	dl_pass(dlock_lock_force_release(&deleted, w));
	cr_assert_eq(deleted, 1);
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:force"), 0);
	dl_expect_message(sub, "redisson_rwlock:{rw:force}", "1", 2000);
	/* Redisson's "1" frees only parked threads; "0" leaves a late one a permit. */
	dl_expect_message(sub, "redisson_rwlock:{rw:force}", "0", 2000);
	redisFree(sub);
	dl_free_locks(r, w);
	dl_close_clients(c);
}

/* ---- async ---------------------------------------------------------------- */

Test(rwlock, async_acquire_release_and_cancel_leave_nothing_held)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_client *c, *other = dl_client(rh_server_uri(srv), 0, 0);
	dlock_lock *r, *w, *blocker_w = half(other, "rw:async", DLOCK_LOCK_WRITE),
		       *blocker_r = half(other, "rw:async", DLOCK_LOCK_READ);
	dl_outcome a = { 0 }, b = { 0 }, x = { 0 }, y = { 0 };
	dlock_op *op = NULL;
	int i;

	dl_pass(dlock_loop_new(&loop, NULL));
	co.loop = loop;
	c = dl_client_opts(rh_server_uri(srv), &co);
	r = half(c, "rw:async", DLOCK_LOCK_READ);
	w = half(c, "rw:async", DLOCK_LOCK_WRITE);

	/* A read and a release, on the caller's loop. */
	dl_pass(dlock_lock_acquire_async(NULL, r, "me:1", 0, DLOCK_LEASE_WATCHDOG, dl_note, &a));
	dl_drive_until(loop, &a, 1, 1, 5000);
	cr_assert_eq(a.code, 0);
	cr_assert_gt(timeout_pttl("rw:async", "me:1", 1), 0);
	dl_pass(dlock_lock_release_async(NULL, r, "me:1", dl_note, &b));
	dl_drive_until(loop, &b, 1, 1, 5000);
	cr_assert_eq(b.code, 0);
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:async"), 0);

	/* A read waiting behind a writer, canceled. */
	dl_pass(dlock_lock_acquire(blocker_w, "blocker", 0, 20000));
	dl_pass(dlock_lock_acquire_async(&op, r, "me:2", 10000, DLOCK_LEASE_WATCHDOG, dl_note, &x));
	for (i = 0; i < 10; i++)
		dlock_loop_run(loop, 20);
	cr_assert_eq(x.calls, 0, "the read did not wait");
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	dl_drive_until(loop, &x, 1, 1, 5000);
	cr_assert_eq(x.code, DLOCK_ECANCELED);
	dl_pass(dlock_lock_release(blocker_w, "blocker"));
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:async"), 0, "the canceled read took nothing");
	cr_assert_eq(timeout_pttl("rw:async", "me:2", 1), -2);

	/* A write waiting behind a reader, canceled. */
	dl_pass(dlock_lock_acquire(blocker_r, "blocker", 0, 20000));
	dl_pass(dlock_lock_acquire_async(&op, w, "me:3", 10000, DLOCK_LEASE_WATCHDOG, dl_note, &y));
	for (i = 0; i < 10; i++)
		dlock_loop_run(loop, 20);
	cr_assert_eq(y.calls, 0, "the write did not wait");
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	dl_drive_until(loop, &y, 1, 1, 5000);
	cr_assert_eq(y.code, DLOCK_ECANCELED);
	cr_assert_eq(rh_command_int(srv, "HEXISTS rw:async me:3:write"), 0);
	dl_pass(dlock_lock_release(blocker_r, "blocker"));
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:async"), 0, "the canceled write took nothing");

	dl_free_locks(r, w, blocker_w, blocker_r);
	dl_close_clients(c, other);
	dlock_loop_free(loop);
}

/* ---- MultiLock and RedLock members ---------------------------------------- */

Test(rwlock, a_read_and_a_write_lock_as_multilock_members)
{
	dlock_client *c = dl_client(rh_server_uri(srv), 0, 0), *o = dl_client(rh_server_uri(srv), 0, 0);
	dlock_lock *m[2] = { half(c, "rw:ml:a", DLOCK_LOCK_READ), half(c, "rw:ml:b", DLOCK_LOCK_WRITE) };
	dlock_lock *ow = half(o, "rw:ml:a", DLOCK_LOCK_WRITE), *orr = half(o, "rw:ml:a", DLOCK_LOCK_READ),
		   *ob = half(o, "rw:ml:b", DLOCK_LOCK_READ);
	dlock_multilock *ml = NULL;
	char owner[128];
	int64_t ttl;

	dl_owner(c, owner, sizeof owner);
	dl_pass(dlock_multilock_new(&ml, m, 2, NULL));
	dl_pass(dlock_multilock_acquire(ml, NULL, 2000, 5000));
	assert_mode("rw:ml:a", "read");
	assert_mode("rw:ml:b", "write");
	/* Finalized to the real lease: the read hold's timeout key too. */
	ttl = timeout_pttl("rw:ml:a", owner, 1);
	cr_assert(ttl > 3000 && ttl <= 5000, "the read member's timeout key has PTTL %lld", (long long)ttl);
	dl_assert_try(ow, 0, 10000, DLOCK_ENOTACQUIRED, 0, 1000);
	dl_assert_try(orr, 0, 10000, 0, 0, 1000); /* readers still share the read member */
	dl_pass(dlock_lock_release(orr, NULL));
	dl_pass(dlock_multilock_release(ml, NULL));
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:ml:a"), 0);
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:ml:b"), 0);

	/* With the watchdog, and the write member busy: nothing is left taken. */
	dl_pass(dlock_lock_acquire(ob, "blocker", 0, 20000));
	cr_assert_eq(dlock_multilock_acquire(ml, NULL, 300, DLOCK_LEASE_WATCHDOG), DLOCK_ENOTACQUIRED);
	cr_assert_eq(rh_command_int(srv, "EXISTS rw:ml:a"), 0, "the read member was rolled back");
	cr_assert_eq(timeout_pttl("rw:ml:a", owner, 1), -2);
	dl_pass(dlock_lock_release(ob, "blocker"));
	dlock_multilock_free(ml);
	dl_free_locks(m[0], m[1], ow, orr, ob);
	dl_close_clients(c, o);
}

Test(rwlock, read_locks_as_redlock_members)
{
	rh_server *s[3];
	dlock_client *c[3], *d[3];
	dlock_lock *r[3], *w[3];
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	dlock_redlock *a = NULL, *x = NULL;
	int64_t validity = 0;
	int i;

	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);
	ro.restart_guard_ms = 0;
	for (i = 0; i < 3; i++) {
		c[i] = dl_client(rh_server_uri(s[i]), 0, 0);
		d[i] = dl_client(rh_server_uri(s[i]), 0, 0);
		r[i] = half(c[i], "rw:red", DLOCK_LOCK_READ);
		w[i] = half(d[i], "rw:red", DLOCK_LOCK_WRITE);
	}
	dl_pass(dlock_redlock_new(&a, r, 3, &ro));
	dl_pass(dlock_redlock_new(&x, w, 3, &ro));
	dl_pass(dl_redlock_acquire_v(&validity, a, "reader:a", 1000, 5000));
	dl_pass(dl_redlock_acquire_v(&validity, a, "reader:b", 1000, 5000)); /* readers share */
	cr_assert_eq(dl_redlock_acquire_v(&validity, x, "writer", 200, 5000), DLOCK_ENOTACQUIRED);
	dl_pass(dlock_redlock_release(a, "reader:a"));
	dl_pass(dlock_redlock_release(a, "reader:b"));
	dl_pass(dl_redlock_acquire_v(&validity, x, "writer", 1000, 5000));
	for (i = 0; i < 3; i++)
		cr_assert_eq(rh_command_int(s[i], "HEXISTS rw:red writer:write"), 1);
	dl_pass(dlock_redlock_release(x, "writer"));
	dlock_redlock_free(a);
	dlock_redlock_free(x);
	for (i = 0; i < 3; i++) {
		dl_free_locks(r[i], w[i]);
		dl_close_clients(c[i], d[i]);
		rh_server_free(s[i]);
	}
}

/* ---- a Redis Cluster ------------------------------------------------------ */

/*
 * On a cluster the timeout keys share the name's slot ({name}), Redisson's
 * sharded pub/sub carries the wake-ups (Redis 7+), and the watchdog's
 * batches renew the read holds there too.
 */
Test(rwlock, on_a_cluster_readers_share_a_writer_is_woken_and_reads_are_renewed, .timeout = 120)
{
	rh_cluster *cl = rh_cluster_start(3, 0, NULL);
	dlock_client *c, *d;
	dlock_lock *r, *w;
	rh_server *home;
	dl_waiter wt;
	char owner[128];
	int64_t unlocked, k;

	cr_assert_not_null(cl, "no cluster");
	c = dl_client(rh_cluster_seed_uri(cl), 0, 1500);
	d = dl_client(rh_cluster_seed_uri(cl), 0, 1500);
	r = half(c, "rw:cl", DLOCK_LOCK_READ);
	w = half(d, "rw:cl", DLOCK_LOCK_WRITE);
	home = dl_slot_owner(cl, "rw:cl");
	dl_owner(c, owner, sizeof owner);

	dl_pass(dlock_lock_acquire(r, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG));
	dl_pass(dlock_lock_acquire(r, "reader:2", 0, 20000));
	dl_sleep_ms(3500); /* past twice the watchdog timeout */
	k = rh_command_int(home, "PTTL {rw:cl}:%s:rwlock_timeout:1", owner);
	cr_assert(k > 500, "the renewed read hold's timeout key has PTTL %lld", (long long)k);

	dl_waiter_start(&wt, d, w, 15000);
	dl_sleep_ms(300);
	dl_pass(dlock_lock_release(r, NULL));
	dl_sleep_ms(200);
	cr_assert_eq(wt.returned, 0, "the writer got in beside a reader");
	unlocked = rh_now_ms();
	dl_pass(dlock_lock_release(r, "reader:2"));
	dl_waiter_join(&wt);
	cr_assert_eq(wt.rc, 0, "the writer: %s", dlock_lock_errmsg(w));
	cr_assert(wt.returned - unlocked < 1000, "the writer woke %lld ms after the last reader left",
			(long long)(wt.returned - unlocked));
	cr_assert_eq(rh_command_int(home, "HEXISTS rw:cl %s:write", wt.owner), 1);
	dl_pass(dlock_lock_release(w, wt.owner));
	cr_assert_eq(rh_command_int(home, "EXISTS rw:cl"), 0);
	dl_free_locks(r, w);
	dl_close_clients(c, d);
	rh_cluster_free(cl);
}
