/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RLock under concurrency against a real redis-server: mutual exclusion
 * between threads sharing a client and a handle, or each with its own;
 * try-with-wait; reentrancy; many names at once; and a wait that no unlock
 * message ends (only the holder's TTL).
 *
 * Worker threads never call cr_assert (Criterion's assertions belong to the
 * test's main thread): they record failures, and the main thread asserts.
 */
#include <criterion/criterion.h>

#include <errno.h>
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

#define CHANNEL_PREFIX "redisson_lock__channel"

/* ---- helpers ------------------------------------------------------------ */

static dlock_client *open_client(rh_server *s, int watchdog_ms, int pool_size)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;

	if (watchdog_ms > 0)
		o.watchdog_timeout_ms = watchdog_ms;
	if (pool_size > 0)
		o.pool_size = pool_size;
	int rc = dlock_client_new(&c, rh_server_uri(s), &o);
	cr_assert_eq(rc, 0, "client_open: %s (%s)", dlock_strerror(rc), dlock_errmsg_last());
	return c;
}

/*
 * The guarded section: a read, a pause, then a write of the value + 1 (a
 * non-atomic increment; relaxed atomics only keep TSan quiet), plus a check
 * that nobody else is inside.
 */
typedef struct section {
	atomic_int counter;
	atomic_int inside;
	atomic_int overlaps;
} section;

static void critical_section(section *sec, int i)
{
	if (atomic_fetch_add(&sec->inside, 1) != 0)
		atomic_fetch_add(&sec->overlaps, 1);
	int v = atomic_load_explicit(&sec->counter, memory_order_relaxed);
	if (i % 4 == 0)
		sched_yield();
	atomic_store_explicit(&sec->counter, v + 1, memory_order_relaxed);
	atomic_fetch_sub(&sec->inside, 1);
}

static void section_init(section *sec)
{
	atomic_init(&sec->counter, 0);
	atomic_init(&sec->inside, 0);
	atomic_init(&sec->overlaps, 0);
}

/* No worker failed, nobody found another inside, and no increment was lost. */
static void assert_excluded(section *sec, dl_failures *fail, int want)
{
	dl_failures_assert_none(fail);
	cr_assert_eq(atomic_load(&sec->overlaps), 0, "%d entries found another thread inside",
			atomic_load(&sec->overlaps));
	cr_assert_eq(atomic_load(&sec->counter), want, "counter %d, expected %d",
			atomic_load(&sec->counter), want);
}

/* Poll PUBSUB CHANNELS * until none of dlock's channels is left (2 s at most);
 * returns the number left, with one of them in `left`. */
static int wait_no_lock_channels(rh_server *s, char *left, size_t len)
{
	int64_t end = rh_now_ms() + 2000;
	for (;;) {
		redisReply *r = rh_command(s, "PUBSUB CHANNELS *");
		cr_assert_not_null(r, "PUBSUB CHANNELS failed");
		cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
		int n = 0;
		left[0] = '\0';
		for (size_t i = 0; i < r->elements; i++)
			if (strncmp(r->element[i]->str, CHANNEL_PREFIX, strlen(CHANNEL_PREFIX)) ==
					0) {
				if (n++ == 0)
					snprintf(left, len, "%s", r->element[i]->str);
			}
		freeReplyObject(r);
		if (n == 0 || rh_now_ms() > end)
			return n;
		dl_sleep_ms(20);
	}
}

/* ---- 1. eight threads, lock / increment / unlock ------------------------- */

#define T1_THREADS 8
#define T1_ITERS 200

/* One worker of tests 1 and 2: `iters` sections, each entered with lock()
 * (test 1) or try(5000, 2000) (test 2). */
typedef struct t1_arg {
	dlock_lock *lock;
	section *sec;
	dl_failures *fail;
	int id;
	int iters;
	int with_try;
} t1_arg;

static void *t1_worker(void *p)
{
	t1_arg *a = p;
	for (int i = 0; i < a->iters; i++) {
		int rc = a->with_try ? dlock_lock_acquire(a->lock, NULL, 5000, 2000)
				     : dlock_lock_acquire(a->lock, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG);
		if (rc != 0) {
			dl_failures_record(a->fail, "thread %d iter %d: %s: %s (%s)", a->id, i,
					a->with_try ? "try(5000, 2000)" : "lock",
					dlock_strerror(rc), dlock_lock_errmsg(a->lock));
			return NULL;
		}
		critical_section(a->sec, i);
		rc = dlock_lock_release(a->lock, NULL);
		if (rc != 0) {
			dl_failures_record(a->fail, "thread %d iter %d: unlock: %s (%s)", a->id, i,
					dlock_strerror(rc), dlock_lock_errmsg(a->lock));
			return NULL;
		}
	}
	return NULL;
}

static void run_t1(rh_server *s, dlock_lock **locks, const char *name)
{
	pthread_t th[T1_THREADS];
	t1_arg args[T1_THREADS];
	section sec;
	dl_failures fail;

	section_init(&sec);
	dl_failures_init(&fail);
	int64_t t0 = rh_now_ms();
	for (int i = 0; i < T1_THREADS; i++) {
		args[i] = (t1_arg){ locks[i], &sec, &fail, i, T1_ITERS, 0 };
		cr_assert_eq(pthread_create(&th[i], NULL, t1_worker, &args[i]), 0);
	}
	for (int i = 0; i < T1_THREADS; i++)
		pthread_join(th[i], NULL);
	int64_t took = rh_now_ms() - t0;

	assert_excluded(&sec, &fail, T1_THREADS * T1_ITERS);
	cr_log_info("%d lock/unlock pairs by %d threads took %lld ms", T1_THREADS * T1_ITERS,
			T1_THREADS, (long long)took);

	/* The waiters' subscriptions are all dropped (UNSUBSCRIBE is asynchronous). */
	char left[256];
	int n = wait_no_lock_channels(s, left, sizeof left);
	cr_assert_eq(n, 0,
			"%d lock channel(s) still subscribed 2 s after the last waiter left, e.g. %s",
			n, left);
	cr_assert_eq(rh_command_int(s, "EXISTS %s", name), 0, "the lock key is left behind");
}

/* Each test gets a fresh server (Criterion runs init/fini in its process). */
TestSuite(rlock_concurrency, .init = dl_server_start, .fini = dl_server_stop);

Test(rlock_concurrency, eight_threads_share_one_client_and_handle, .timeout = 60)
{
	rh_server *s = dl_srv;
	dlock_client *c = open_client(s, 0, 4); /* pool of 4 for 8 threads: pool waits */
	dlock_lock *l = dl_lock(c, "conc:shared");
	dlock_lock *locks[T1_THREADS];
	for (int i = 0; i < T1_THREADS; i++)
		locks[i] = l;

	run_t1(s, locks, "conc:shared");

	dlock_lock_free(l);
	dlock_client_free(c);
}

Test(rlock_concurrency, eight_threads_each_own_client, .timeout = 60)
{
	rh_server *s = dl_srv;
	dlock_client *cs[T1_THREADS];
	dlock_lock *locks[T1_THREADS];
	for (int i = 0; i < T1_THREADS; i++) {
		cs[i] = open_client(s, 0, 0);
		locks[i] = dl_lock(cs[i], "conc:own");
	}

	run_t1(s, locks, "conc:own");

	for (int i = 0; i < T1_THREADS; i++) {
		dlock_lock_free(locks[i]);
		dlock_client_free(cs[i]);
	}
}

/* ---- 2. try with a wait and a lease -------------------------------------- */

#define T2_THREADS 6
#define T2_ITERS 100

Test(rlock_concurrency, try_with_wait_and_lease_excludes, .timeout = 60)
{
	rh_server *s = dl_srv;
	/* Half the threads share a client and a handle, the others have their own. */
	dlock_client *shared = open_client(s, 0, 0);
	dlock_lock *shared_lock = dl_lock(shared, "conc:try");
	dlock_client *own[T2_THREADS / 2];
	pthread_t th[T2_THREADS];
	t1_arg args[T2_THREADS];
	section sec;
	dl_failures fail;

	section_init(&sec);
	dl_failures_init(&fail);
	for (int i = 0; i < T2_THREADS; i++) {
		dlock_lock *l = shared_lock;
		if (i >= T2_THREADS / 2) {
			own[i - T2_THREADS / 2] = open_client(s, 0, 0);
			l = dl_lock(own[i - T2_THREADS / 2], "conc:try");
		}
		args[i] = (t1_arg){ l, &sec, &fail, i, T2_ITERS, 1 };
	}
	for (int i = 0; i < T2_THREADS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, t1_worker, &args[i]), 0);
	for (int i = 0; i < T2_THREADS; i++)
		pthread_join(th[i], NULL);

	assert_excluded(&sec, &fail, T2_THREADS * T2_ITERS);
	cr_assert_eq(rh_command_int(s, "EXISTS %s", "conc:try"), 0);

	for (int i = T2_THREADS / 2; i < T2_THREADS; i++) {
		dlock_lock_free(args[i].lock);
		dlock_client_free(own[i - T2_THREADS / 2]);
	}
	dlock_lock_free(shared_lock);
	dlock_client_free(shared);
}

/* ---- 3. reentrancy in one thread ---------------------------------------- */

Test(rlock_concurrency, reentrant_in_one_thread, .timeout = 30)
{
	rh_server *s = dl_srv;
	dlock_client *c = open_client(s, 0, 0);
	dlock_lock *l = dl_lock(c, "conc:reentrant");
	char owner[64];
	cr_assert_eq(dlock_client_owner(owner, c, dlock_thread_id()), 0);
	int64_t count = -1;

	for (int i = 1; i <= 3; i++) {
		cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "lock #%d: %s", i,
				dlock_lock_errmsg(l));
		cr_assert_eq(dlock_lock_hold_count(&count, l, NULL), 0);
		cr_assert_eq(count, i);
	}
	cr_assert_eq(rh_command_int(s, "HLEN %s", "conc:reentrant"), 1);
	redisReply *r = rh_command(s, "HGET %s %s", "conc:reentrant", owner);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STRING);
	cr_assert_str_eq(r->str, "3");
	freeReplyObject(r);

	for (int i = 2; i >= 0; i--) {
		cr_assert_eq(dlock_lock_release(l, NULL), 0, "unlock to %d: %s", i, dlock_lock_errmsg(l));
		cr_assert_eq(dlock_lock_hold_count(&count, l, NULL), 0);
		cr_assert_eq(count, i);
		cr_assert_eq(rh_command_int(s, "EXISTS %s", "conc:reentrant"), i > 0 ? 1 : 0);
	}
	cr_assert_eq(dlock_lock_release(l, NULL), DLOCK_ENOTOWNER);
	cr_assert_eq(rh_command_int(s, "EXISTS %s", "conc:reentrant"), 0);
	cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ENOTOWNER);

	dlock_lock_free(l);
	dlock_client_free(c);
}

/* ---- 4. many names at once on one client --------------------------------- */

#define T4_THREADS 4
#define T4_NAMES 500
#define T4_WATCHDOG_MS 1500

typedef struct t4_arg {
	dlock_client *client;
	pthread_barrier_t *held;    /* all names taken */
	pthread_barrier_t *release; /* the main thread has looked */
	dl_failures *fail;
	int id;
} t4_arg;

static void *t4_worker(void *p)
{
	t4_arg *a = p;
	dlock_lock **locks = calloc(T4_NAMES, sizeof *locks);
	int taken = 0;

	if (locks == NULL)
		dl_failures_record(a->fail, "thread %d: out of memory", a->id);
	for (int i = 0; locks != NULL && i < T4_NAMES; i++) {
		char name[32];
		snprintf(name, sizeof name, "n:%d:%d", a->id, i);
		int rc = dlock_lock_new(&locks[i], a->client, name, NULL);
		if (rc == 0)
			rc = dlock_lock_acquire(locks[i], NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG);
		if (rc != 0) {
			dl_failures_record(a->fail, "thread %d: lock %s: %s (%s)", a->id, name,
					dlock_strerror(rc),
					locks[i] ? dlock_lock_errmsg(locks[i]) : "");
			break;
		}
		taken++;
	}
	pthread_barrier_wait(a->held);
	pthread_barrier_wait(a->release);
	for (int i = 0; i < taken; i++) {
		int rc = dlock_lock_check(locks[i], NULL);
		if (rc != 0)
			dl_failures_record(a->fail, "thread %d: check %s: %s", a->id,
					dlock_lock_name(locks[i]), dlock_strerror(rc));
		rc = dlock_lock_release(locks[i], NULL);
		if (rc != 0)
			dl_failures_record(a->fail, "thread %d: unlock %s: %s (%s)", a->id,
					dlock_lock_name(locks[i]), dlock_strerror(rc),
					dlock_lock_errmsg(locks[i]));
	}
	if (locks != NULL)
		for (int i = 0; i < T4_NAMES; i++)
			dlock_lock_free(locks[i]);
	free(locks);
	return NULL;
}

Test(rlock_concurrency, many_names_held_renewed_and_released, .timeout = 60)
{
	rh_server *s = dl_srv;
	dlock_client *c = open_client(s, T4_WATCHDOG_MS, 0);
	pthread_barrier_t held, release;
	pthread_t th[T4_THREADS];
	t4_arg args[T4_THREADS];
	dl_failures fail;

	dl_failures_init(&fail);
	cr_assert_eq(pthread_barrier_init(&held, NULL, T4_THREADS + 1), 0);
	cr_assert_eq(pthread_barrier_init(&release, NULL, T4_THREADS + 1), 0);
	for (int i = 0; i < T4_THREADS; i++) {
		args[i] = (t4_arg){ c, &held, &release, &fail, i };
		cr_assert_eq(pthread_create(&th[i], NULL, t4_worker, &args[i]), 0);
	}
	pthread_barrier_wait(&held);

	/* All 2000 holds stay through two TTLs: the watchdog renews them in batches. */
	int64_t dbsize_held = rh_command_int(s, "DBSIZE");
	dl_sleep_ms(2 * T4_WATCHDOG_MS);
	int64_t dbsize_later = rh_command_int(s, "DBSIZE");
	int64_t pttl_first = rh_command_int(s, "PTTL %s", "n:0:0");
	int64_t pttl_last = rh_command_int(s, "PTTL %s", "n:3:499");

	pthread_barrier_wait(&release);
	for (int i = 0; i < T4_THREADS; i++)
		pthread_join(th[i], NULL);

	dl_failures_assert_none(&fail);
	cr_assert_eq(dbsize_held, T4_THREADS * T4_NAMES);
	cr_assert_eq(dbsize_later, T4_THREADS * T4_NAMES, "%lld of %d holds left after two TTLs",
			(long long)dbsize_later, T4_THREADS * T4_NAMES);
	cr_assert(pttl_first > 0 && pttl_first <= T4_WATCHDOG_MS, "PTTL n:0:0 %lld",
			(long long)pttl_first);
	cr_assert(pttl_last > 0 && pttl_last <= T4_WATCHDOG_MS, "PTTL n:3:499 %lld",
			(long long)pttl_last);

	/* Nothing is left in Redis once every hold is released. */
	int64_t end = rh_now_ms() + 1000, dbsize;
	while ((dbsize = rh_command_int(s, "DBSIZE")) != 0 && rh_now_ms() < end)
		dl_sleep_ms(20);
	char sample[256] = "";
	int64_t sample_pttl = 0;
	if (dbsize != 0) {
		redisReply *r = rh_command(s, "RANDOMKEY");
		if (r && r->type == REDIS_REPLY_STRING) {
			snprintf(sample, sizeof sample, "%s", r->str);
			sample_pttl = rh_command_int(s, "PTTL %s", r->str);
		}
		if (r)
			freeReplyObject(r);
	}
	cr_assert_eq(dbsize, 0,
			"DBSIZE %lld 1 s after releasing every lock; e.g. %s (PTTL %lld ms)",
			(long long)dbsize, sample, (long long)sample_pttl);

	pthread_barrier_destroy(&held);
	pthread_barrier_destroy(&release);
	dlock_client_free(c);
}

/* ---- 5. no unlock message: the wait ends with the holder's TTL ----------- */

Test(rlock_concurrency, waiter_without_unlock_message_acquires_at_ttl, .timeout = 30)
{
	rh_server *s = dl_srv;
	dlock_client *c = open_client(s, 0, 0);
	dlock_lock *l = dl_lock(c, "conc:raw");

	/* A holder that will never publish: a bare Redisson-format hash. */
	cr_assert_eq(rh_command_int(s, "HSET %s %s %s", "conc:raw", "raw-holder-uuid:1", "1"), 1);
	cr_assert_eq(rh_command_int(s, "PEXPIRE %s %d", "conc:raw", 1500), 1);
	int64_t t0 = rh_now_ms();

	int rc = dlock_lock_acquire(l, NULL, 5000, DLOCK_LEASE_WATCHDOG);
	int64_t elapsed = rh_now_ms() - t0;
	cr_assert_eq(rc, 0, "try(5000): %s (%s)", dlock_strerror(rc), dlock_lock_errmsg(l));
	cr_assert(elapsed >= 1300 && elapsed <= 2200,
			"acquired after %lld ms; the holder's TTL was 1500 ms", (long long)elapsed);
	cr_assert_eq(rh_command_int(s, "HEXISTS %s %s", "conc:raw", "raw-holder-uuid:1"), 0);
	dl_assert_held_once_then_release(s, l);
	dlock_lock_free(l);
	dlock_client_free(c);
}
