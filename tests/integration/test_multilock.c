/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MultiLock against real redis-server processes: three member locks of one
 * name on three servers, held all-or-nothing. Acquire/release on every
 * server, one winner among concurrent contenders with nothing left behind by
 * the losers, a waiter woken by the release, a member held by a foreign
 * owner, leases and watchdog renewal, a member lost while held, and mutual
 * exclusion between threads sharing one handle.
 *
 * Worker threads never call cr_assert (Criterion's assertions belong to the
 * test's main thread): they record what happened, and the main thread waits
 * for them with a deadline and asserts.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

#define NSRV 3

/* ---- helpers ------------------------------------------------------------ */

static dlock_client *open_client(rh_server *s, int watchdog_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;

	o.command_timeout_ms = 500;
	o.connect_timeout_ms = 500;
	if (watchdog_ms > 0)
		o.watchdog_timeout_ms = watchdog_ms;
	int rc = dlock_client_new(&c, rh_server_uri(s), &o);
	cr_assert_eq(rc, 0, "client_open %s: %s (%s)", rh_server_uri(s), dlock_strerror(rc),
			dlock_errmsg_last());
	return c;
}

/* Three servers, a client on each, a member lock of `name` on each, and the MultiLock. */
typedef struct ml_fixture {
	rh_server *s[NSRV];
	dlock_client *c[NSRV];
	dlock_lock *l[NSRV];
	dlock_multilock *m;
	const char *name;
} ml_fixture;

static void fixture_up(ml_fixture *f, const char *name, int watchdog_ms);

/* Three servers, a client and a member each, and the MultiLock over them. */
static ml_fixture fixture(const char *name, int watchdog_ms)
{
	ml_fixture f;
	fixture_up(&f, name, watchdog_ms);
	return f;
}

static void fixture_up(ml_fixture *f, const char *name, int watchdog_ms)
{
	memset(f, 0, sizeof *f);
	f->name = name;
	cr_assert_eq(rh_servers_start(f->s, NSRV, NULL), 0, "could not start %d servers", NSRV);
	for (int i = 0; i < NSRV; i++) {
		f->c[i] = open_client(f->s[i], watchdog_ms);
		f->l[i] = dl_lock(f->c[i], name);
	}
	int rc = dlock_multilock_new(&f->m, f->l, NSRV, NULL);
	cr_assert_eq(rc, 0, "multilock_new: %s", dlock_strerror(rc));
	cr_assert_eq(dlock_multilock_size(f->m), NSRV);
	for (int i = 0; i < NSRV; i++)
		cr_assert_eq(dlock_multilock_member(f->m, (size_t)i), f->l[i], "member %d", i);
	cr_assert_null(dlock_multilock_member(f->m, NSRV));
	cr_assert_null(dlock_multilock_member(NULL, 0));
}

static void fixture_down(ml_fixture *f)
{
	dlock_multilock_free(f->m);
	for (int i = 0; i < NSRV; i++) {
		dlock_lock_free(f->l[i]);
		dlock_client_free(f->c[i]);
		rh_server_free(f->s[i]);
	}
}

/* The owner field `<uuid of client c>:<tid>`. */
static void owner_of(dlock_client *c, uint64_t tid, char *buf, size_t len)
{
	cr_assert_geq(len, DLOCK_OWNER_SIZE);
	cr_assert_eq(dlock_client_owner(buf, c, tid), 0);
}

/* This thread's owner string on each member's client. */
static void own_owners(ml_fixture *f, char (*own)[64])
{
	for (int i = 0; i < NSRV; i++)
		owner_of(f->c[i], dlock_thread_id(), own[i], sizeof own[i]);
}

/* try(0, 10000) must take every member. */
static void take_for_10s(ml_fixture *f)
{
	int rc = dlock_multilock_acquire(f->m, NULL, 0, 10000);
	cr_assert_eq(rc, 0, "try(0, 10000): %s (%s)", dlock_strerror(rc),
			dlock_multilock_errmsg(f->m));
}

static int64_t exists(rh_server *s, const char *key)
{
	int64_t e = rh_command_int(s, "EXISTS %s", key);
	cr_assert_neq(e, INT64_MIN, "EXISTS on port %d failed", rh_server_port(s));
	return e;
}

static int64_t pttl(rh_server *s, const char *key)
{
	int64_t t = rh_command_int(s, "PTTL %s", key);
	cr_assert_neq(t, INT64_MIN, "PTTL on port %d failed", rh_server_port(s));
	return t;
}

/* Assert that the hash `key` on s is exactly { field: count }. */
static void assert_only_field(rh_server *s, const char *key, const char *field, const char *count)
{
	int64_t n = rh_command_int(s, "HLEN %s", key);
	cr_assert_eq(n, 1, "port %d: HLEN %s = %" PRId64 ", expected exactly the holder's field",
			rh_server_port(s), key, n);
	redisReply *r = rh_command(s, "HGET %s %s", key, field);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STRING, "port %d: field %s of %s is missing",
			rh_server_port(s), field, key);
	cr_assert_str_eq(r->str, count, "port %d: %s[%s] = %s, expected %s", rh_server_port(s), key,
			field, r->str, count);
	freeReplyObject(r);
}

/* A counter threads bump and the main thread waits on, with a deadline. */
/* ---- 1. all three members held, then none ------------------------------- */

Test(multilock, holds_every_member_and_releases_all, .timeout = 30)
{
	ml_fixture f = fixture("ml:basic", 0);
	char owner[NSRV][64];
	own_owners(&f, owner);

	cr_assert_eq(dlock_multilock_check(f.m, NULL), DLOCK_ENOTOWNER);
	take_for_10s(&f);

	for (int i = 0; i < NSRV; i++) {
		assert_only_field(f.s[i], f.name, owner[i], "1");
		int64_t t = pttl(f.s[i], f.name);
		cr_assert(t > 9000 && t <= 10000,
				"server %d: PTTL %" PRId64 ", expected the 10 s lease", i, t);
		dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
		cr_assert_eq(dlock_multilock_member_status(&st, f.m, i), 0);
		cr_assert_eq(st.vote, DLOCK_VOTE_ACQUIRED, "member %d vote %d", i, st.vote);
	}
	cr_assert_eq(dlock_multilock_check(f.m, NULL), 0);

	int rc = dlock_multilock_release(f.m, NULL);
	cr_assert_eq(rc, 0, "unlock: %s (%s)", dlock_strerror(rc), dlock_multilock_errmsg(f.m));
	for (int i = 0; i < NSRV; i++)
		cr_assert_eq(exists(f.s[i], f.name), 0, "server %d still has %s after unlock", i,
				f.name);
	cr_assert_eq(dlock_multilock_check(f.m, NULL), DLOCK_ENOTOWNER);
	/* Nothing left to release. */
	cr_assert_eq(dlock_multilock_release(f.m, NULL), DLOCK_ENOTOWNER);

	fixture_down(&f);
}

/* ---- 2. ten concurrent single attempts: exactly one winner --------------- */

#define T2_THREADS 10

typedef struct t2_shared {
	dlock_multilock *m;
	pthread_barrier_t start;
	dl_gate tried;   /* threads that have their answer */
	dl_gate release; /* set by main: the winner may unlock */
	dl_gate finished;
} t2_shared;

typedef struct t2_arg {
	t2_shared *sh;
	int rc;
	int unlock_rc;
	int64_t elapsed_ms;
	uint64_t tid;
} t2_arg;

static void *t2_worker(void *p)
{
	t2_arg *a = p;
	a->tid = dlock_thread_id();
	pthread_barrier_wait(&a->sh->start);
	int64_t t0 = rh_now_ms();
	a->rc = dlock_multilock_acquire(a->sh->m, NULL, 0, 10000);
	a->elapsed_ms = rh_now_ms() - t0;
	dl_gate_add(&a->sh->tried, 1);
	if (a->rc == 0) {
		dl_gate_wait(&a->sh->release, 1, rh_now_ms() + 20000);
		a->unlock_rc = dlock_multilock_release(a->sh->m, NULL);
	}
	dl_gate_add(&a->sh->finished, 1);
	return NULL;
}

/* The race's gates, and its threads started (they meet at sh->start). */
static void t2_start(t2_shared *sh, t2_arg *args, pthread_t *th)
{
	pthread_barrier_init(&sh->start, NULL, T2_THREADS);
	dl_gate_init(&sh->tried);
	dl_gate_init(&sh->release);
	dl_gate_init(&sh->finished);
	memset(args, 0, T2_THREADS * sizeof *args);
	for (int i = 0; i < T2_THREADS; i++) {
		args[i].sh = sh;
		args[i].unlock_rc = 1;
		cr_assert_eq(pthread_create(&th[i], NULL, t2_worker, &args[i]), 0);
	}
}

Test(multilock, concurrent_single_attempts_have_one_winner, .timeout = 40)
{
	ml_fixture f = fixture("ml:race", 0);
	t2_shared sh = { .m = f.m };
	t2_arg args[T2_THREADS];
	pthread_t th[T2_THREADS];

	t2_start(&sh, args, th);
	int n = dl_gate_wait(&sh.tried, T2_THREADS, rh_now_ms() + 10000);
	cr_assert_eq(n, T2_THREADS, "only %d of %d threads returned from try(0, 10000) within 10 s",
			n, T2_THREADS);

	int winner = -1, winners = 0;
	for (int i = 0; i < T2_THREADS; i++) {
		cr_assert_lt(args[i].elapsed_ms, 1000, "thread %d: try(0, ...) took %" PRId64 " ms",
				i, args[i].elapsed_ms);
		if (args[i].rc == 0) {
			winners++;
			winner = i;
		} else {
			cr_assert_eq(args[i].rc, DLOCK_ENOTACQUIRED, "thread %d: %s", i,
					dlock_strerror(args[i].rc));
		}
	}
	cr_assert_eq(winners, 1, "%d threads acquired the MultiLock", winners);

	/* Each server's hash holds the winner's field and nothing of the losers. */
	for (int i = 0; i < NSRV; i++) {
		char owner[64];
		owner_of(f.c[i], args[winner].tid, owner, sizeof owner);
		assert_only_field(f.s[i], f.name, owner, "1");
	}

	dl_gate_add(&sh.release, 1);
	n = dl_gate_wait(&sh.finished, T2_THREADS, rh_now_ms() + 10000);
	cr_assert_eq(n, T2_THREADS, "the winner did not finish its unlock");
	for (int i = 0; i < T2_THREADS; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(args[winner].unlock_rc, 0, "winner's unlock: %s",
			dlock_strerror(args[winner].unlock_rc));
	for (int i = 0; i < NSRV; i++)
		cr_assert_eq(exists(f.s[i], f.name), 0, "server %d still has the key", i);

	pthread_barrier_destroy(&sh.start);
	dl_gate_destroy(&sh.tried);
	dl_gate_destroy(&sh.release);
	dl_gate_destroy(&sh.finished);
	fixture_down(&f);
}

/* ---- 3. a waiter blocks until the holder releases ------------------------ */

typedef struct t3_shared {
	dlock_multilock *m;
	dl_gate a_held, a_release, a_done;
	dl_gate b_started, b_acquired, b_release, b_done;
	int a_rc, a_unlock_rc, b_rc, b_unlock_rc;
	uint64_t a_tid, b_tid;
	int64_t a_unlock_at, b_acquired_at;
} t3_shared;

static void *t3_holder(void *p)
{
	t3_shared *sh = p;
	sh->a_tid = dlock_thread_id();
	sh->a_rc = dlock_multilock_acquire(sh->m, NULL, 0, 30000);
	dl_gate_add(&sh->a_held, 1);
	if (sh->a_rc == 0) {
		dl_gate_wait(&sh->a_release, 1, rh_now_ms() + 20000);
		sh->a_unlock_at = rh_now_ms();
		sh->a_unlock_rc = dlock_multilock_release(sh->m, NULL);
	}
	dl_gate_add(&sh->a_done, 1);
	return NULL;
}

static void *t3_waiter(void *p)
{
	t3_shared *sh = p;
	sh->b_tid = dlock_thread_id();
	dl_gate_add(&sh->b_started, 1);
	sh->b_rc = dlock_multilock_acquire(sh->m, NULL, DLOCK_WAIT_FOREVER, 30000);
	sh->b_acquired_at = rh_now_ms();
	dl_gate_add(&sh->b_acquired, 1);
	if (sh->b_rc == 0) {
		dl_gate_wait(&sh->b_release, 1, rh_now_ms() + 20000);
		sh->b_unlock_rc = dlock_multilock_release(sh->m, NULL);
	}
	dl_gate_add(&sh->b_done, 1);
	return NULL;
}

Test(multilock, waiter_gets_it_when_holder_releases, .timeout = 40)
{
	ml_fixture f = fixture("ml:wait", 0);
	t3_shared sh;
	memset(&sh, 0, sizeof sh);
	sh.m = f.m;
	sh.a_unlock_rc = sh.b_unlock_rc = 1;
	dl_gate *gates[] = { &sh.a_held, &sh.a_release, &sh.a_done, &sh.b_started, &sh.b_acquired,
		&sh.b_release, &sh.b_done };
	for (size_t i = 0; i < sizeof gates / sizeof gates[0]; i++)
		dl_gate_init(gates[i]);

	pthread_t ta, tb;
	cr_assert_eq(pthread_create(&ta, NULL, t3_holder, &sh), 0);
	cr_assert_eq(dl_gate_wait(&sh.a_held, 1, rh_now_ms() + 5000), 1, "holder did not return");
	cr_assert_eq(sh.a_rc, 0, "holder: try(0, 30000): %s", dlock_strerror(sh.a_rc));

	cr_assert_eq(pthread_create(&tb, NULL, t3_waiter, &sh), 0);
	cr_assert_eq(dl_gate_wait(&sh.b_started, 1, rh_now_ms() + 5000), 1);
	dl_sleep_ms(500);
	cr_assert_eq(dl_gate_get(&sh.b_acquired), 0,
			"the waiter returned (%s) while the holder held the lock",
			dlock_strerror(sh.b_rc));
	/* The waiter took nothing meanwhile: each server has only the holder's field. */
	for (int i = 0; i < NSRV; i++) {
		char owner[64];
		owner_of(f.c[i], sh.a_tid, owner, sizeof owner);
		assert_only_field(f.s[i], f.name, owner, "1");
	}

	dl_gate_add(&sh.a_release, 1);
	cr_assert_eq(dl_gate_wait(&sh.a_done, 1, rh_now_ms() + 5000), 1,
			"holder's unlock did not return");
	cr_assert_eq(sh.a_unlock_rc, 0, "holder's unlock: %s", dlock_strerror(sh.a_unlock_rc));
	cr_assert_eq(dl_gate_wait(&sh.b_acquired, 1, rh_now_ms() + 5000), 1,
			"the waiter did not acquire within 5 s of the release");
	cr_assert_eq(sh.b_rc, 0, "waiter: lock(30000): %s", dlock_strerror(sh.b_rc));
	int64_t delay = sh.b_acquired_at - sh.a_unlock_at;
	cr_assert_leq(delay, 300, "the waiter acquired %" PRId64 " ms after the unlock started",
			delay);

	for (int i = 0; i < NSRV; i++) {
		char owner[64];
		owner_of(f.c[i], sh.b_tid, owner, sizeof owner);
		assert_only_field(f.s[i], f.name, owner, "1");
		int64_t t = pttl(f.s[i], f.name);
		cr_assert(t > 25000 && t <= 30000,
				"server %d: PTTL %" PRId64 " after the waiter acquired", i, t);
	}

	dl_gate_add(&sh.b_release, 1);
	cr_assert_eq(dl_gate_wait(&sh.b_done, 1, rh_now_ms() + 5000), 1);
	cr_assert_eq(sh.b_unlock_rc, 0, "waiter's unlock: %s", dlock_strerror(sh.b_unlock_rc));
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	for (int i = 0; i < NSRV; i++)
		cr_assert_eq(exists(f.s[i], f.name), 0);

	for (size_t i = 0; i < sizeof gates / sizeof gates[0]; i++)
		dl_gate_destroy(gates[i]);
	fixture_down(&f);
}

/* ---- 4. a member held by a foreign owner --------------------------------- */

#define FOREIGN "00000000-0000-0000-0000-00000000f00d:77"

static void set_foreign_holder(rh_server *s, const char *key)
{
	cr_assert_eq(rh_command_int(s, "HSET %s %s %s", key, FOREIGN, "1"), 1);
	cr_assert_eq(rh_command_int(s, "PEXPIRE %s %d", key, 30000), 1);
}

static void assert_foreign_intact(rh_server *s, const char *key)
{
	assert_only_field(s, key, FOREIGN, "1");
	int64_t t = pttl(s, key);
	cr_assert(t > 20000 && t <= 30000, "foreign holder's PTTL %" PRId64, t);
}

Test(multilock, member_held_by_other_fails_and_leaves_nothing, .timeout = 30)
{
	ml_fixture f = fixture("ml:foreign", 0);
	set_foreign_holder(f.s[1], f.name);

	/* One attempt. */
	int rc = dlock_multilock_acquire(f.m, NULL, 0, 5000);
	cr_assert_eq(rc, DLOCK_ENOTACQUIRED, "try(0, 5000): %s (%s)", dlock_strerror(rc),
			dlock_multilock_errmsg(f.m));
	cr_assert_eq(exists(f.s[0], f.name), 0, "member 1 kept a hold after the failed try");
	cr_assert_eq(exists(f.s[2], f.name), 0, "member 3 kept a hold after the failed try");
	assert_foreign_intact(f.s[1], f.name);
	dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
	cr_assert_eq(dlock_multilock_member_status(&st, f.m, 1), 0);
	cr_assert_eq(st.vote, DLOCK_VOTE_HELD, "member 2 vote %d, expected HELD", st.vote);
	cr_assert_eq(dlock_multilock_check(f.m, NULL), DLOCK_ENOTOWNER);

	/* With a wait: gives up at the end of it, again leaving nothing. */
	int64_t t0 = rh_now_ms();
	rc = dlock_multilock_acquire(f.m, NULL, 300, 5000);
	int64_t took = rh_now_ms() - t0;
	cr_assert_eq(rc, DLOCK_ENOTACQUIRED, "try(300, 5000): %s (%s)", dlock_strerror(rc),
			dlock_multilock_errmsg(f.m));
	cr_assert(took >= 290 && took < 1500, "try(300, ...) took %" PRId64 " ms", took);
	cr_assert_eq(exists(f.s[0], f.name), 0, "member 1 kept a hold after the failed wait");
	cr_assert_eq(exists(f.s[2], f.name), 0, "member 3 kept a hold after the failed wait");
	assert_foreign_intact(f.s[1], f.name);
	cr_assert_eq(dlock_multilock_member_status(&st, f.m, 1), 0);
	cr_assert_eq(st.vote, DLOCK_VOTE_HELD, "member 2 vote %d after the wait, expected HELD",
			st.vote);
	cr_assert_eq(dlock_multilock_check(f.m, NULL), DLOCK_ENOTOWNER);

	/* Once the foreign holder is gone, it can be had. */
	cr_assert_eq(rh_command_int(f.s[1], "DEL %s", f.name), 1);
	rc = dlock_multilock_acquire(f.m, NULL, 0, 5000);
	cr_assert_eq(rc, 0, "try after the foreign holder left: %s", dlock_strerror(rc));
	cr_assert_eq(dlock_multilock_release(f.m, NULL), 0);

	fixture_down(&f);
}

/*
 * Holds of this thread's own owner that the client never heard of - acquires
 * whose replies were lost, applied late by a paused server - are adopted, not
 * counted again: else the unlock would leave them held (and, with the
 * watchdog, renewed) for good. A MultiLock that may not wait takes its
 * members one by one (Redisson's strict order), the path that must trust the
 * thread's own owner as the parallel first attempt does.
 */
Test(multilock, own_leftover_holds_are_adopted_not_counted_again, .timeout = 30)
{
	ml_fixture f;
	char own[NSRV][64];
	fixture_up(&f, "ml:leftover", 0);
	own_owners(&f, own);
	/* One lost acquire applied on member 1, two on member 3. */
	cr_assert_eq(rh_command_int(f.s[0], "HSET %s %s %s", f.name, own[0], "1"), 1);
	cr_assert_eq(rh_command_int(f.s[0], "PEXPIRE %s %d", f.name, 30000), 1);
	cr_assert_eq(rh_command_int(f.s[2], "HSET %s %s %s", f.name, own[2], "2"), 1);
	cr_assert_eq(rh_command_int(f.s[2], "PEXPIRE %s %d", f.name, 30000), 1);

	take_for_10s(&f);
	for (int i = 0; i < NSRV; i++) {
		assert_only_field(f.s[i], f.name, own[i], "1");
		int64_t t = pttl(f.s[i], f.name);
		cr_assert(t > 0 && t <= 10000,
				"member %d: PTTL %" PRId64 ", expected the 10 s lease", i + 1, t);
	}

	cr_assert_eq(dlock_multilock_release(f.m, NULL), 0, "%s", dlock_multilock_errmsg(f.m));
	for (int i = 0; i < NSRV; i++) {
		cr_assert_eq(exists(f.s[i], f.name), 0, "member %d still held after the unlock",
				i + 1);
		cr_assert_eq(dlock_lock_check(f.l[i], NULL), DLOCK_ENOTOWNER,
				"member %d still recorded as held after the unlock", i + 1);
	}
	fixture_down(&f);
}

/* multilock.h: ttl_ms is "the holder's remaining TTL for DLOCK_VOTE_HELD". */
Test(multilock, held_member_status_reports_holder_ttl, .timeout = 30)
{
	ml_fixture f = fixture("ml:foreign-ttl", 0);
	set_foreign_holder(f.s[1], f.name);

	int rc = dlock_multilock_acquire(f.m, NULL, 0, 5000);
	cr_assert_eq(rc, DLOCK_ENOTACQUIRED, "%s", dlock_strerror(rc));
	dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
	cr_assert_eq(dlock_multilock_member_status(&st, f.m, 1), 0);
	cr_assert_eq(st.vote, DLOCK_VOTE_HELD);
	cr_assert(st.ttl_ms > 20000 && st.ttl_ms <= 30000,
			"try(0, ...): member 2 is HELD but its status ttl_ms is %" PRId64
			" (the foreign holder's PTTL is ~30000)",
			st.ttl_ms);

	rc = dlock_multilock_acquire(f.m, NULL, 200, 5000);
	cr_assert_eq(rc, DLOCK_ENOTACQUIRED, "%s", dlock_strerror(rc));
	cr_assert_eq(dlock_multilock_member_status(&st, f.m, 1), 0);
	cr_assert_eq(st.vote, DLOCK_VOTE_HELD);
	cr_assert(st.ttl_ms > 20000 && st.ttl_ms <= 30000,
			"try(200, ...): member 2 is HELD but its status ttl_ms is %" PRId64,
			st.ttl_ms);

	fixture_down(&f);
}

/* ---- 5. lease, and the watchdog ------------------------------------------ */

Test(multilock, lease_expires_and_watchdog_renews, .timeout = 30)
{
	ml_fixture f = fixture("ml:lease", 1000);

	/* A 1 s lease: every member expires after about 1 s. */
	int64_t t0 = rh_now_ms();
	int rc = dlock_multilock_acquire(f.m, NULL, 0, 1000);
	cr_assert_eq(rc, 0, "try(0, 1000): %s (%s)", dlock_strerror(rc),
			dlock_multilock_errmsg(f.m));
	for (int i = 0; i < NSRV; i++) {
		int64_t t = pttl(f.s[i], f.name);
		cr_assert(t > 500 && t <= 1000,
				"server %d: PTTL %" PRId64 " right after try(0, 1000)", i, t);
	}
	int64_t gone_at = -1;
	while (rh_now_ms() - t0 < 2500) {
		int64_t now = rh_now_ms(), left = 0;
		for (int i = 0; i < NSRV; i++)
			left += exists(f.s[i], f.name);
		if (left == 0) {
			gone_at = now;
			break;
		}
		dl_sleep_ms(10);
	}
	cr_assert_neq(gone_at, -1, "the leased keys were still there 2.5 s after try(0, 1000)");
	cr_assert(gone_at - t0 >= 900 && gone_at - t0 <= 1300,
			"the 1 s lease ran out %" PRId64 " ms after the try started", gone_at - t0);
	/* The hold is gone; releasing it now is refused. */
	rc = dlock_multilock_release(f.m, NULL);
	cr_assert(rc == DLOCK_ENOTOWNER || rc == DLOCK_ELOST,
			"unlock after the lease ran out: %d (%s)", rc, dlock_strerror(rc));

	/* The watchdog (timeout 1000 ms) keeps every member for 3 s and more. */
	t0 = rh_now_ms();
	rc = dlock_multilock_acquire(f.m, NULL, 0, DLOCK_LEASE_WATCHDOG);
	cr_assert_eq(rc, 0, "try(0, watchdog): %s (%s)", dlock_strerror(rc),
			dlock_multilock_errmsg(f.m));
	while (rh_now_ms() - t0 < 3000) {
		for (int i = 0; i < NSRV; i++) {
			int64_t t = pttl(f.s[i], f.name);
			cr_assert(t > 0 && t <= 1000,
					"server %d: PTTL %" PRId64 " %" PRId64
					" ms into a watchdog hold",
					i, t, rh_now_ms() - t0);
		}
		dl_sleep_ms(50);
	}
	cr_assert_eq(dlock_multilock_check(f.m, NULL), 0);
	rc = dlock_multilock_release(f.m, NULL);
	cr_assert_eq(rc, 0, "unlock: %s", dlock_strerror(rc));
	for (int i = 0; i < NSRV; i++)
		cr_assert_eq(exists(f.s[i], f.name), 0);

	fixture_down(&f);
}

/* ---- 6. a member force-unlocked by someone else: the MultiLock is lost ---- */

typedef struct lost_rec {
	pthread_mutex_t mu;
	int calls;
	char name[128];
	char owner[128];
	int has_node;
	int64_t at;
} lost_rec;

static void on_ml_lost(const dlock_lost_event *ev, void *ud)
{
	lost_rec *r = ud;
	pthread_mutex_lock(&r->mu);
	if (r->calls++ == 0) {
		snprintf(r->name, sizeof r->name, "%s", ev->name ? ev->name : "(null)");
		snprintf(r->owner, sizeof r->owner, "%s", ev->owner ? ev->owner : "(null)");
		r->has_node = ev->node != NULL;
		r->at = rh_now_ms();
	}
	pthread_mutex_unlock(&r->mu);
}

static int lost_calls(lost_rec *r)
{
	pthread_mutex_lock(&r->mu);
	int n = r->calls;
	pthread_mutex_unlock(&r->mu);
	return n;
}

Test(multilock, force_unlocked_member_makes_it_lost, .timeout = 30)
{
	ml_fixture f = fixture("ml:lost", 1000);
	lost_rec lost;
	memset(&lost, 0, sizeof lost);
	pthread_mutex_init(&lost.mu, NULL);
	cr_assert_eq(dlock_multilock_set_lost_cb(f.m, on_ml_lost, &lost), 0);

	int rc = dlock_multilock_acquire(f.m, NULL, 0, DLOCK_LEASE_WATCHDOG);
	cr_assert_eq(rc, 0, "try(0, watchdog): %s (%s)", dlock_strerror(rc),
			dlock_multilock_errmsg(f.m));
	cr_assert_eq(dlock_multilock_check(f.m, NULL), 0);
	dl_sleep_ms(400); /* past one renewal (every 333 ms) */
	cr_assert_eq(dlock_multilock_check(f.m, NULL), 0);
	cr_assert_eq(lost_calls(&lost), 0);

	/* Someone else force-unlocks member 2 through their own client. */
	dlock_client *other = open_client(f.s[1], 0);
	dlock_lock *ol = dl_lock(other, f.name);
	int deleted = -1;
	rc = dlock_lock_force_release(&deleted, ol);
	int64_t forced_at = rh_now_ms();
	cr_assert_eq(rc, 0, "force_unlock: %s", dlock_strerror(rc));
	cr_assert_eq(deleted, 1);

	while ((rc = dlock_multilock_check(f.m, NULL)) == 0 && rh_now_ms() - forced_at < 2000)
		dl_sleep_ms(5);
	int64_t seen = rh_now_ms() - forced_at;
	cr_assert_eq(rc, DLOCK_ELOST, "check = %d (%s) %" PRId64 " ms after the force unlock", rc,
			dlock_strerror(rc), seen);
	cr_assert_leq(seen, 1000, "the loss was noticed only after %" PRId64 " ms", seen);
	while (lost_calls(&lost) == 0 && rh_now_ms() - forced_at < 2000)
		dl_sleep_ms(5);
	cr_assert_eq(lost_calls(&lost), 1, "lost callback ran %d times", lost_calls(&lost));
	cr_assert_leq(lost.at - forced_at, 1000);
	cr_assert_str_eq(lost.name, f.name);
	cr_assert_eq(lost.has_node, 0, "a quorum is lost, not one node");
	char owner[64];
	owner_of(f.c[1], dlock_thread_id(), owner, sizeof owner);
	cr_assert_str_eq(lost.owner, owner, "callback owner %s, expected member 2's owner %s",
			lost.owner, owner);

	/* Once only. The other members are no longer renewed: held on, they would
     * only block the next holder until the owner unlocks; within the watchdog
     * timeout (1000 ms) their keys expire and the lock is free. */
	dl_sleep_ms(1200);
	cr_assert_eq(lost_calls(&lost), 1, "lost callback ran %d times", lost_calls(&lost));
	cr_assert_eq(dlock_multilock_check(f.m, NULL), DLOCK_ELOST);
	for (int i = 0; i < NSRV; i++)
		cr_assert_eq(exists(f.s[i], f.name), 0,
				"server %d: still held %lld ms after the loss", i,
				(long long)(rh_now_ms() - lost.at));

	/* Releasing: the loss is reported; nothing is left anywhere. */
	rc = dlock_multilock_release(f.m, NULL);
	cr_assert_eq(rc, DLOCK_ELOST, "unlock of a lost MultiLock: %d (%s)", rc,
			dlock_strerror(rc));
	for (int i = 0; i < NSRV; i++)
		cr_assert_eq(exists(f.s[i], f.name), 0, "server %d still has the key after unlock",
				i);
	cr_assert_eq(lost_calls(&lost), 1);

	dlock_lock_free(ol);
	dlock_client_free(other);
	fixture_down(&f);
	pthread_mutex_destroy(&lost.mu);
}

/* ---- 7. mutual exclusion with waiting ------------------------------------ */

#define T7_THREADS 6
#define T7_ITERS 20

typedef struct t7_shared {
	dlock_multilock *m;
	pthread_barrier_t start;
	atomic_int counter;
	atomic_int inside;
	atomic_int overlaps;
	dl_failures fail;
	dl_gate done;
} t7_shared;

typedef struct t7_arg {
	t7_shared *sh;
	int id;
} t7_arg;

static void *t7_worker(void *p)
{
	t7_arg *a = p;
	t7_shared *sh = a->sh;
	pthread_barrier_wait(&sh->start);
	for (int i = 0; i < T7_ITERS; i++) {
		int rc = dlock_multilock_acquire(sh->m, NULL, 5000, 2000);
		if (rc != 0) {
			dl_failures_record(&sh->fail, "thread %d iter %d: try(5000, 2000): %s (%s)",
					a->id, i, dlock_strerror(rc),
					dlock_multilock_errmsg(sh->m));
			continue;
		}
		if (atomic_fetch_add(&sh->inside, 1) != 0)
			atomic_fetch_add(&sh->overlaps, 1);
		int v = atomic_load_explicit(&sh->counter, memory_order_relaxed);
		if (i % 3 == 0)
			dl_sleep_ms(1);
		else
			sched_yield();
		atomic_store_explicit(&sh->counter, v + 1, memory_order_relaxed);
		atomic_fetch_sub(&sh->inside, 1);
		rc = dlock_multilock_release(sh->m, NULL);
		if (rc != 0)
			dl_failures_record(&sh->fail, "thread %d iter %d: unlock: %s (%s)", a->id,
					i, dlock_strerror(rc), dlock_multilock_errmsg(sh->m));
	}
	dl_gate_add(&sh->done, 1);
	return NULL;
}

/* The shared section's state, zeroed, on the MultiLock m. */
static void t7_init(t7_shared *sh, dlock_multilock *m)
{
	sh->m = m;
	pthread_barrier_init(&sh->start, NULL, T7_THREADS);
	atomic_init(&sh->counter, 0);
	atomic_init(&sh->inside, 0);
	atomic_init(&sh->overlaps, 0);
	dl_failures_init(&sh->fail);
	dl_gate_init(&sh->done);
}

Test(multilock, threads_sharing_a_handle_exclude_each_other, .timeout = 90)
{
	ml_fixture f = fixture("ml:excl", 0);
	t7_shared sh;
	t7_arg args[T7_THREADS];
	pthread_t th[T7_THREADS];

	t7_init(&sh, f.m);
	int64_t t0 = rh_now_ms();
	for (int i = 0; i < T7_THREADS; i++) {
		args[i] = (t7_arg){ &sh, i };
		cr_assert_eq(pthread_create(&th[i], NULL, t7_worker, &args[i]), 0);
	}
	int n = dl_gate_wait(&sh.done, T7_THREADS, t0 + 60000);
	cr_assert_eq(n, T7_THREADS, "only %d of %d threads finished within 60 s", n, T7_THREADS);
	for (int i = 0; i < T7_THREADS; i++)
		pthread_join(th[i], NULL);
	cr_log_info("multilock: %d x %d critical sections in %" PRId64 " ms", T7_THREADS, T7_ITERS,
			rh_now_ms() - t0);

	dl_failures_assert_none(&sh.fail);
	cr_assert_eq(atomic_load(&sh.overlaps), 0, "%d entries found another thread inside",
			atomic_load(&sh.overlaps));
	cr_assert_eq(atomic_load(&sh.counter), T7_THREADS * T7_ITERS, "counter %d, expected %d",
			atomic_load(&sh.counter), T7_THREADS * T7_ITERS);
	for (int i = 0; i < NSRV; i++)
		cr_assert_eq(exists(f.s[i], f.name), 0, "server %d: key left behind", i);

	pthread_barrier_destroy(&sh.start);
	dl_gate_destroy(&sh.done);
	fixture_down(&f);
}

/* ---- 8. several members on one client ------------------------------------ */

/*
 * Members may share a client (Redisson's tests put every member on one).
 * client.h: pool_size is how many connections are kept, and "threads beyond
 * it wait": one thread with one MultiLock must never need more connections
 * at once than the pool has, nor fail for want of them.
 */
Test(multilock, members_sharing_one_client_with_a_small_pool, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	o.command_timeout_ms = 500;
	o.connect_timeout_ms = 500;
	o.pool_size = 2;
	dlock_client *c = NULL;
	int rc = dlock_client_new(&c, rh_server_uri(s), &o);
	cr_assert_eq(rc, 0, "client_open: %s", dlock_strerror(rc));
	const char *names[NSRV] = { "ml:pool:a", "ml:pool:b", "ml:pool:c" };
	dlock_lock *l[NSRV];
	for (int i = 0; i < NSRV; i++)
		l[i] = dl_lock(c, names[i]);
	dlock_multilock *m = NULL;
	cr_assert_eq(dlock_multilock_new(&m, l, NSRV, NULL), 0);

	/* One attempt (members one by one), then release (all at once). */
	rc = dlock_multilock_acquire(m, NULL, 0, 5000);
	cr_assert_eq(rc, 0, "try(0, 5000): %s (%s)", dlock_strerror(rc), dlock_multilock_errmsg(m));
	for (int i = 0; i < NSRV; i++)
		cr_assert_eq(exists(s, names[i]), 1, "%s not held", names[i]);
	rc = dlock_multilock_release(m, NULL);
	cr_assert_eq(rc, 0, "unlock: %s (%s)", dlock_strerror(rc), dlock_multilock_errmsg(m));
	for (int i = 0; i < NSRV; i++)
		cr_assert_eq(exists(s, names[i]), 0, "%s still held after unlock", names[i]);

	/* With a wait (first attempt on all members at once). */
	rc = dlock_multilock_acquire(m, NULL, 200, 5000);
	cr_assert_eq(rc, 0, "try(200, 5000): %s (%s)", dlock_strerror(rc),
			dlock_multilock_errmsg(m));
	rc = dlock_multilock_release(m, NULL);
	cr_assert_eq(rc, 0, "unlock: %s (%s)", dlock_strerror(rc), dlock_multilock_errmsg(m));
	for (int i = 0; i < NSRV; i++)
		cr_assert_eq(exists(s, names[i]), 0, "%s still held after unlock", names[i]);

	dlock_multilock_free(m);
	for (int i = 0; i < NSRV; i++)
		dlock_lock_free(l[i]);
	dlock_client_free(c);
	rh_server_free(s);
}
