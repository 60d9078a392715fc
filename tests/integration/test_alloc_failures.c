/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allocation failures: every allocation the library makes on the calling
 * thread during an operation is made to fail in turn (k = 1, 2, ... until
 * the operation runs without reaching its k-th allocation), through the
 * allocator hook (dlock_set_allocator). For every k the operation must
 * return 0 or DLOCK_ENOMEM (nothing else, no crash); after DLOCK_ENOMEM no
 * lock of ours may be left in Redis, and after freeing everything the
 * library's live allocations and this process's open descriptors must be
 * back where they were before the objects were made (no leak); after 0 the
 * operation must really have done its job.
 *
 * One counting allocator stays installed for the whole test (each Criterion
 * test runs in its own process, so the hook is per test); only the "fail at
 * k" variable is toggled around the operation. Allocations made by the
 * clients' background threads (the reactor: pub/sub, watchdog) are counted
 * as live but never failed, so the k-th allocation is deterministic.
 * Redis state is checked over raw hiredis connections (hiredis allocates
 * with its own allocator, not the hook).
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "redis_harness.h"

#define NSRV 3
#define KMAX 500 /* far more allocations than any operation makes */

/* ---- the counting, failing allocator ------------------------------------ */

static pthread_t test_thread;
static atomic_long live;      /* blocks allocated and not freed, every thread */
static atomic_long counted;   /* allocations by the test thread since arm() */
static atomic_long fail_at;   /* 0: fail nothing; k: fail the k-th counted one */
static atomic_int injected;   /* the k-th allocation was reached (and failed) */

static int fail_now(void)
{
	long n, k;

	if (!pthread_equal(pthread_self(), test_thread))
		return 0;
	n = atomic_fetch_add(&counted, 1) + 1;
	k = atomic_load(&fail_at);
	if (k > 0 && n == k) {
		atomic_store(&injected, 1);
		return 1;
	}
	return 0;
}

static void *count_malloc(size_t size)
{
	void *p;

	if (fail_now())
		return NULL;
	p = malloc(size);
	if (p != NULL)
		atomic_fetch_add(&live, 1);
	return p;
}

static void *count_realloc(void *ptr, size_t size)
{
	void *p;

	if (fail_now())
		return NULL; /* ptr stays valid, as with a real failure */
	p = realloc(ptr, size);
	if (p != NULL && ptr == NULL)
		atomic_fetch_add(&live, 1);
	return p;
}

static void count_free(void *ptr)
{
	if (ptr != NULL)
		atomic_fetch_sub(&live, 1);
	free(ptr);
}

static const dlock_allocator counting = { DLOCK_ALLOCATOR_VERSION, count_malloc, count_realloc, count_free };

/* Before any dlock object exists; the hook then stays for the whole test. */
static void install_allocator(void)
{
	test_thread = pthread_self();
	cr_assert_eq(dlock_set_allocator(&counting), 0);
}

static void arm(long k)
{
	atomic_store(&injected, 0);
	atomic_store(&counted, 0);
	atomic_store(&fail_at, k);
}

/* Stop failing; returns 1 when a failure was injected since arm(). */
static int disarm(void)
{
	atomic_store(&fail_at, 0);
	return atomic_load(&injected);
}

/* ---- helpers ------------------------------------------------------------ */

static rh_server *srv[NSRV];
static const char *uris[NSRV];

static void start_servers(int n)
{
	cr_assert_eq(rh_servers_start(srv, n, NULL), 0, "could not start %d servers", n);
	for (int i = 0; i < n; i++) {
		uris[i] = rh_server_uri(srv[i]);
		/* Open the harness's cached connection now, before any baseline. */
		cr_assert_eq(rh_command_int(srv[i], "EXISTS nothing"), 0);
	}
}

static void stop_servers(int n)
{
	for (int i = 0; i < n; i++)
		rh_server_free(srv[i]);
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own descriptor */
}

static int64_t exists(int i, const char *key)
{
	int64_t v = rh_command_int(srv[i], "EXISTS %s", key);

	cr_assert_neq(v, INT64_MIN, "EXISTS on server %d failed", i);
	return v;
}

/* The hold count of `field` in hash `key` on server i; -1 when absent. */
static int64_t hget(int i, const char *key, const char *field)
{
	redisReply *r = rh_command(srv[i], "HGET %s %s", key, field);
	int64_t v;

	cr_assert_not_null(r);
	cr_assert(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL,
		  "HGET: reply type %d", r->type);
	v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
	freeReplyObject(r);
	return v;
}

/*
 * Whether server i holds `key` as a lock of the calling thread of any dlock
 * client: one field "<uuid>:<tid>" with count 1 (RedLock members have one
 * client each, whose uuids the test does not know).
 */
static int held_by_me(int i, const char *key)
{
	char suffix[32];
	redisReply *r = rh_command(srv[i], "HGETALL %s", key);
	int held = 0;

	cr_assert_not_null(r);
	snprintf(suffix, sizeof suffix, ":%" PRIu64, dlock_thread_id());
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
		const char *f = r->element[0]->str;
		size_t fl = r->element[0]->len, sl = strlen(suffix);

		held = fl > sl && strcmp(f + fl - sl, suffix) == 0 &&
			strcmp(r->element[1]->str, "1") == 0;
	}
	freeReplyObject(r);
	return held;
}

static void assert_absent_everywhere(int n, const char *key, const char *op, long k)
{
	for (int i = 0; i < n; i++)
		cr_assert_eq(exists(i, key), 0, "%s, k=%ld: %s left on server %d", op, k, key, i);
}

static void assert_rc(int rc, int inj, const char *op, long k, const char *msg)
{
	cr_assert(rc == 0 || rc == DLOCK_ENOMEM,
		  "%s, k=%ld: returned %d (%s), expected 0 or DLOCK_ENOMEM: %s",
		  op, k, rc, dlock_strerror(rc), msg);
	if (rc == DLOCK_ENOMEM)
		cr_assert(inj, "%s, k=%ld: DLOCK_ENOMEM without an injected failure", op, k);
}

static void report(const char *op, long k, long allocations)
{
	fprintf(stderr, "alloc_failures: %-34s failed k = 1..%ld (%ld allocations on the calling thread)\n",
		op, k - 1, allocations);
}

static dlock_client *open_client(int i, int watchdog_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;
	int rc;

	o.connect_timeout_ms = 1000;
	o.command_timeout_ms = 1000;
	if (watchdog_ms > 0)
		o.watchdog_timeout_ms = watchdog_ms;
	rc = dlock_client_open(&c, uris[i], &o);
	cr_assert_eq(rc, 0, "client_open %s: %s (%s)", uris[i], dlock_strerror(rc),
		     dlock_errmsg_last());
	return c;
}

static dlock_lock *new_lock(dlock_client *c, const char *name)
{
	dlock_lock *l = NULL;
	int rc = dlock_lock_new(&l, c, name);

	cr_assert_eq(rc, 0, "lock_new: %s (%s)", dlock_strerror(rc), dlock_errmsg_last());
	return l;
}

static void my_owner(dlock_client *c, char *buf, size_t len)
{
	cr_assert_gt(dlock_client_owner(buf, len, c, dlock_thread_id()), 0);
}

/* The baseline every iteration returns to: live blocks and open descriptors. */
typedef struct baseline {
	long live;
	int fds;
} baseline;

static baseline take_baseline(void)
{
	baseline b = { atomic_load(&live), count_fds() };

	return b;
}

static void assert_baseline(baseline b, const char *op, long k)
{
	long now = atomic_load(&live);

	cr_assert_eq(now, b.live, "%s, k=%ld: %ld allocation(s) leaked", op, k, now - b.live);
	cr_assert_eq(count_fds(), b.fds, "%s, k=%ld: descriptors leaked", op, k);
}

/* ---- client ------------------------------------------------------------- */

Test(alloc_failures, client_open_close, .timeout = 120)
{
	long k, allocs = 0;

	install_allocator();
	start_servers(1);
	for (k = 1; k <= KMAX; k++) {
		baseline b = take_baseline();
		dlock_client *c = NULL;
		int rc, inj;

		arm(k);
		rc = dlock_client_open(&c, uris[0], NULL); /* eager: connects and PINGs */
		if (rc == 0)
			dlock_client_close(c);
		allocs = atomic_load(&counted);
		inj = disarm();
		assert_rc(rc, inj, "client_open", k, dlock_errmsg_last());
		if (rc < 0)
			cr_assert_null(c);
		assert_baseline(b, "client_open", k);
		if (!inj)
			break;
	}
	cr_assert_leq(k, KMAX);
	report("client_open + close", k, allocs);

	/* Lazy too: no connection in open, the first command connects. */
	for (k = 1; k <= KMAX; k++) {
		dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
		baseline b = take_baseline();
		dlock_client *c = NULL;
		int rc, inj;

		o.lazy_connect = 1;
		arm(k);
		rc = dlock_client_open(&c, uris[0], &o);
		if (rc == 0)
			rc = dlock_client_ping(c);
		allocs = atomic_load(&counted);
		inj = disarm();
		assert_rc(rc, inj, "client_open lazy + ping", k, dlock_errmsg_last());
		if (rc == 0)
			cr_assert_eq(dlock_client_ping(c), 0);
		dlock_client_close(c);
		assert_baseline(b, "client_open lazy + ping", k);
		if (!inj)
			break;
	}
	cr_assert_leq(k, KMAX);
	report("client_open lazy + ping + close", k, allocs);
	stop_servers(1);
}

/* ---- RLock -------------------------------------------------------------- */

Test(alloc_failures, lock_new_free, .timeout = 120)
{
	const char *name = "af:new";
	char owner[64];
	long k, allocs = 0;

	install_allocator();
	start_servers(1);
	for (k = 1; k <= KMAX; k++) {
		baseline b = take_baseline();
		dlock_client *c = open_client(0, 0);
		dlock_lock *l = NULL;
		int rc, inj;

		arm(k);
		rc = dlock_lock_new(&l, c, name);
		if (rc == 0)
			dlock_lock_free(l);
		allocs = atomic_load(&counted);
		inj = disarm();
		assert_rc(rc, inj, "lock_new", k, dlock_errmsg_last());
		if (rc < 0)
			cr_assert_null(l);
		/* The client still works: a handle made now takes and releases. */
		l = new_lock(c, name);
		my_owner(c, owner, sizeof owner);
		cr_assert_eq(dlock_lock_try(l, 0, 10000), 0, "%s", dlock_lock_errmsg(l));
		cr_assert_eq(hget(0, name, owner), 1);
		cr_assert_eq(dlock_lock_unlock(l), 0, "%s", dlock_lock_errmsg(l));
		cr_assert_eq(exists(0, name), 0);
		dlock_lock_free(l);
		dlock_client_close(c);
		assert_baseline(b, "lock_new", k);
		if (!inj)
			break;
	}
	cr_assert_leq(k, KMAX);
	report("lock_new + free", k, allocs);

	/* The fenced and fair kinds make more names. */
	for (int kind = 0; kind < 2; kind++) {
		const char *op = kind == 0 ? "fencedlock_new + free" : "fairlock_new + free";

		for (k = 1; k <= KMAX; k++) {
			baseline b = take_baseline();
			dlock_client *c = open_client(0, 0);
			dlock_lock *l = NULL;
			int rc, inj;

			arm(k);
			rc = kind == 0 ? dlock_fencedlock_new(&l, c, name) :
				dlock_fairlock_new(&l, c, name, 0);
			if (rc == 0)
				dlock_lock_free(l);
			allocs = atomic_load(&counted);
			inj = disarm();
			assert_rc(rc, inj, op, k, dlock_errmsg_last());
			dlock_client_close(c);
			assert_baseline(b, op, k);
			if (!inj)
				break;
		}
		cr_assert_leq(k, KMAX);
		report(op, k, allocs);
	}
	stop_servers(1);
}

enum acquire_kind { TRY_LEASE, TRY_WATCHDOG, LOCK_LEASE, LOCK_WATCHDOG };

static void acquire_op(enum acquire_kind kind, const char *op)
{
	const char *name = "af:acquire";
	char owner[64];
	long k, allocs = 0;

	for (k = 1; k <= KMAX; k++) {
		baseline b = take_baseline();
		/* A short watchdog (renewed every 200 ms) so renewals run meanwhile. */
		dlock_client *c = open_client(0, 600);
		dlock_lock *l = new_lock(c, name);
		int rc, inj;

		my_owner(c, owner, sizeof owner);
		arm(k);
		switch (kind) {
		case TRY_LEASE: rc = dlock_lock_try(l, 0, 10000); break;
		case TRY_WATCHDOG: rc = dlock_lock_try(l, 0, DLOCK_LEASE_WATCHDOG); break;
		case LOCK_LEASE: rc = dlock_lock_lock(l, 10000); break;
		default: rc = dlock_lock_lock(l, DLOCK_LEASE_WATCHDOG); break;
		}
		allocs = atomic_load(&counted);
		inj = disarm();
		assert_rc(rc, inj, op, k, dlock_lock_errmsg(l));
		if (rc == 0) {
			cr_assert_eq(hget(0, name, owner), 1, "%s, k=%ld: not held after 0", op, k);
			cr_assert_eq(dlock_lock_check(l, NULL), 0, "%s, k=%ld: not recorded", op, k);
			if (kind == TRY_WATCHDOG || kind == LOCK_WATCHDOG) {
				/* Past the 600 ms TTL: only renewals keep it. */
				sleep_ms(900);
				cr_assert_eq(hget(0, name, owner), 1,
					     "%s, k=%ld: the watchdog did not renew", op, k);
			}
			cr_assert_eq(dlock_lock_unlock(l), 0, "%s", dlock_lock_errmsg(l));
		} else {
			cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ENOTOWNER,
				     "%s, k=%ld: a record survived ENOMEM", op, k);
		}
		cr_assert_eq(exists(0, name), 0, "%s, k=%ld: lock left behind", op, k);
		dlock_lock_free(l);
		dlock_client_close(c);
		assert_baseline(b, op, k);
		if (!inj)
			break;
	}
	cr_assert_leq(k, KMAX);
	report(op, k, allocs);
}

Test(alloc_failures, lock_try_and_lock, .timeout = 120)
{
	install_allocator();
	start_servers(1);
	acquire_op(TRY_LEASE, "lock_try(0, lease)");
	acquire_op(TRY_WATCHDOG, "lock_try(0, watchdog)");
	acquire_op(LOCK_LEASE, "lock_lock(lease)");
	acquire_op(LOCK_WATCHDOG, "lock_lock(watchdog)");
	stop_servers(1);
}

static void unlock_op(int64_t lease, int reentrant, const char *op)
{
	const char *name = "af:unlock";
	char owner[64];
	long k, allocs = 0;

	for (k = 1; k <= KMAX; k++) {
		baseline b = take_baseline();
		dlock_client *c = open_client(0, 600);
		dlock_lock *l = new_lock(c, name);
		int rc, inj;

		my_owner(c, owner, sizeof owner);
		cr_assert_eq(dlock_lock_try(l, 0, lease), 0, "%s", dlock_lock_errmsg(l));
		if (reentrant)
			cr_assert_eq(dlock_lock_try(l, 0, lease), 0, "%s", dlock_lock_errmsg(l));
		arm(k);
		rc = dlock_lock_unlock(l);
		allocs = atomic_load(&counted);
		inj = disarm();
		assert_rc(rc, inj, op, k, dlock_lock_errmsg(l));
		if (rc == 0) {
			if (reentrant) {
				cr_assert_eq(hget(0, name, owner), 1, "%s, k=%ld", op, k);
				cr_assert_eq(dlock_lock_check(l, NULL), 0);
				cr_assert_eq(dlock_lock_unlock(l), 0, "%s", dlock_lock_errmsg(l));
			}
			cr_assert_eq(exists(0, name), 0, "%s, k=%ld: still held after 0", op, k);
			cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ENOTOWNER);
		} else {
			/* Nothing changed: still held, and it can still be released. */
			cr_assert_eq(hget(0, name, owner), reentrant ? 2 : 1,
				     "%s, k=%ld: ENOMEM but the count changed", op, k);
			cr_assert_eq(dlock_lock_check(l, NULL), 0);
			cr_assert_eq(dlock_lock_unlock(l), 0, "%s", dlock_lock_errmsg(l));
			if (reentrant)
				cr_assert_eq(dlock_lock_unlock(l), 0, "%s", dlock_lock_errmsg(l));
			cr_assert_eq(exists(0, name), 0);
		}
		dlock_lock_free(l);
		dlock_client_close(c);
		assert_baseline(b, op, k);
		if (!inj)
			break;
	}
	cr_assert_leq(k, KMAX);
	report(op, k, allocs);
}

Test(alloc_failures, lock_unlock, .timeout = 120)
{
	install_allocator();
	start_servers(1);
	unlock_op(10000, 0, "lock_unlock (lease)");
	unlock_op(DLOCK_LEASE_WATCHDOG, 0, "lock_unlock (watchdog)");
	unlock_op(10000, 1, "lock_unlock (re-entered)");
	stop_servers(1);
}

/* A foreign holder that lets go after 300 ms: DEL, then the unlock message. */
typedef struct foreign {
	int port;
	const char *name;
	char channel[128];
	int ok;
} foreign;

static void *foreign_release(void *arg)
{
	foreign *f = arg;
	redisContext *ctx;
	redisReply *r;

	sleep_ms(300);
	ctx = redisConnect("127.0.0.1", f->port);
	if (ctx == NULL || ctx->err) {
		if (ctx)
			redisFree(ctx);
		return NULL;
	}
	r = redisCommand(ctx, "DEL %s", f->name);
	f->ok = r != NULL && r->type == REDIS_REPLY_INTEGER;
	freeReplyObject(r);
	r = redisCommand(ctx, "PUBLISH %s 0", f->channel);
	f->ok &= r != NULL && r->type == REDIS_REPLY_INTEGER;
	freeReplyObject(r);
	redisFree(ctx);
	return NULL;
}

Test(alloc_failures, waiting_try_joins_pubsub, .timeout = 180)
{
	const char *name = "af:wait";
	char owner[64];
	long k, allocs = 0;

	install_allocator();
	start_servers(1);
	for (k = 1; k <= KMAX; k++) {
		baseline b = take_baseline();
		dlock_client *c = open_client(0, 0);
		dlock_lock *l = new_lock(c, name);
		foreign f = { rh_server_port(srv[0]), name, "", 0 };
		pthread_t th;
		int64_t t0, elapsed;
		int rc, inj;

		snprintf(f.channel, sizeof f.channel, "redisson_lock__channel:{%s}", name);
		my_owner(c, owner, sizeof owner);
		cr_assert_eq(rh_command_int(srv[0], "HSET %s foreign:1 1", name), 1);
		/* A safety net: a missed message still ends the wait at the TTL. */
		cr_assert_eq(rh_command_int(srv[0], "PEXPIRE %s 1000", name), 1);
		cr_assert_eq(pthread_create(&th, NULL, foreign_release, &f), 0);
		t0 = rh_now_ms();
		arm(k);
		rc = dlock_lock_try(l, 2000, 10000);
		allocs = atomic_load(&counted);
		inj = disarm();
		elapsed = rh_now_ms() - t0;
		pthread_join(th, NULL);
		cr_assert(f.ok, "the foreign release failed");
		assert_rc(rc, inj, "waiting lock_try", k, dlock_lock_errmsg(l));
		if (rc == 0) {
			cr_assert_geq(elapsed, 250, "acquired after %" PRId64 " ms while held", elapsed);
			cr_assert_eq(hget(0, name, owner), 1, "k=%ld: not held after 0", k);
			cr_assert_eq(dlock_lock_unlock(l), 0, "%s", dlock_lock_errmsg(l));
		} else {
			cr_assert_eq(hget(0, name, owner), -1, "k=%ld: our hold left behind", k);
			cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ENOTOWNER);
		}
		cr_assert_eq(exists(0, name), 0, "k=%ld: lock left behind", k);
		dlock_lock_free(l);
		dlock_client_close(c);
		assert_baseline(b, "waiting lock_try", k);
		if (!inj)
			break;
	}
	cr_assert_leq(k, KMAX);
	report("lock_try(2000) waiting (pub/sub)", k, allocs);
	stop_servers(1);
}

/* The fenced and fair kinds: acquire (with the token / the queue) and release. */
static void kind_op(int fair, const char *op)
{
	const char *name = fair ? "af:fair" : "af:fenced";
	char owner[64];
	long k, allocs = 0;
	int64_t last_token = 0;

	for (k = 1; k <= KMAX; k++) {
		baseline b = take_baseline();
		dlock_client *c = open_client(0, 0);
		dlock_lock *l = NULL;
		int64_t token = 0;
		int rc, inj;

		cr_assert_eq(fair ? dlock_fairlock_new(&l, c, name, 0) : dlock_fencedlock_new(&l, c, name),
			     0);
		my_owner(c, owner, sizeof owner);
		arm(k);
		rc = fair ? dlock_lock_try(l, 0, 10000) : dlock_lock_try_fenced(&token, l, NULL, 0, 10000);
		if (rc == 0)
			rc = dlock_lock_unlock(l);
		allocs = atomic_load(&counted);
		inj = disarm();
		assert_rc(rc, inj, op, k, dlock_lock_errmsg(l));
		if (rc == 0 && !fair) {
			cr_assert_gt(token, last_token, "%s, k=%ld: token %" PRId64 " after %" PRId64,
				     op, k, token, last_token);
			last_token = token;
		}
		if (rc < 0 && hget(0, name, owner) == 1) {
			/* The acquire went through and the release ran out of memory:
			 * nothing changed by it, so it can be released now. */
			cr_assert_eq(dlock_lock_check(l, NULL), 0);
			cr_assert_eq(dlock_lock_unlock(l), 0, "%s", dlock_lock_errmsg(l));
		}
		cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ENOTOWNER, "%s, k=%ld", op, k);
		cr_assert_eq(exists(0, name), 0, "%s, k=%ld: lock left behind", op, k);
		if (fair) {
			cr_assert_eq(rh_command_int(srv[0], "LLEN redisson_lock_queue:{%s}", name), 0,
				     "%s, k=%ld: left in the queue", op, k);
		}
		dlock_lock_free(l);
		dlock_client_close(c);
		assert_baseline(b, op, k);
		if (!inj)
			break;
	}
	cr_assert_leq(k, KMAX);
	report(op, k, allocs);
}

Test(alloc_failures, fenced_and_fair_locks, .timeout = 120)
{
	install_allocator();
	start_servers(1);
	kind_op(0, "fencedlock try_fenced + unlock");
	kind_op(1, "fairlock try + unlock");
	stop_servers(1);
}

/* ---- RedLock ------------------------------------------------------------ */

static dlock_redlock *open_redlock(const char *name, int fenced, int watchdog_ms)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	dlock_redlock *r = NULL;
	int rc;

	if (watchdog_ms > 0)
		co.watchdog_timeout_ms = watchdog_ms;
	ro.fenced = fenced;
	rc = dlock_redlock_new_from_uris(&r, uris, NSRV, name, &co, &ro);
	cr_assert_eq(rc, 0, "redlock_open: %s (%s)", dlock_strerror(rc), dlock_errmsg_last());
	return r;
}

static int held_count(const char *name)
{
	int n = 0;

	for (int i = 0; i < NSRV; i++)
		n += held_by_me(i, name);
	return n;
}

Test(alloc_failures, redlock_open_free, .timeout = 120)
{
	const char *name = "af:rl-open";
	long k, allocs = 0;

	install_allocator();
	start_servers(NSRV);
	for (int fenced = 0; fenced < 2; fenced++) {
		const char *op = fenced ? "redlock_open (fenced) + free" : "redlock_open + free";

		for (k = 1; k <= KMAX; k++) {
			dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
			baseline b = take_baseline();
			dlock_redlock *r = NULL;
			int rc, inj;

			ro.fenced = fenced;
			arm(k);
			rc = dlock_redlock_new_from_uris(&r, uris, NSRV, name, NULL, &ro);
			if (rc == 0)
				dlock_redlock_free(r);
			allocs = atomic_load(&counted);
			inj = disarm();
			assert_rc(rc, inj, op, k, dlock_errmsg_last());
			if (rc < 0)
				cr_assert_null(r);
			assert_baseline(b, op, k);
			if (!inj)
				break;
		}
		cr_assert_leq(k, KMAX);
		report(op, k, allocs);
	}
	/* What open made works. */
	{
		baseline b = take_baseline();
		dlock_redlock *r = open_redlock(name, 0, 0);
		int64_t validity = 0;

		cr_assert_eq(dlock_redlock_try(&validity, r, 0, 10000), 0, "%s",
			     dlock_redlock_errmsg(r));
		cr_assert_eq(held_count(name), NSRV);
		cr_assert_eq(dlock_redlock_unlock(r), 0, "%s", dlock_redlock_errmsg(r));
		assert_absent_everywhere(NSRV, name, "redlock_open check", 0);
		dlock_redlock_free(r);
		assert_baseline(b, "redlock_open check", 0);
	}
	stop_servers(NSRV);
}

/* dlock_redlock_try / try_fenced with failures. */
static void redlock_acquire_op(int fenced, int64_t lease, const char *op)
{
	const char *name = fenced ? "af:rl-fenced" : "af:rl-try";
	long k, allocs = 0;
	int64_t last_token = 0;

	for (k = 1; k <= KMAX; k++) {
		baseline b = take_baseline();
		dlock_redlock *r = open_redlock(name, fenced, 600);
		int64_t validity = 0, token = 0;
		int rc, inj;

		arm(k);
		if (fenced)
			rc = dlock_redlock_try_fenced(&validity, &token, r, NULL, 0, lease);
		else
			rc = dlock_redlock_try(&validity, r, 0, lease);
		allocs = atomic_load(&counted);
		inj = disarm();
		assert_rc(rc, inj, op, k, dlock_redlock_errmsg(r));
		if (rc == 0) {
			int n = held_count(name);

			cr_assert_geq(n, NSRV / 2 + 1, "%s, k=%ld: 0 but held on %d servers", op, k, n);
			cr_assert_gt(validity, 0);
			cr_assert_eq(dlock_redlock_check(r, NULL), 0, "%s, k=%ld: check", op, k);
			if (fenced) {
				cr_assert_gt(token, last_token, "%s, k=%ld: token %" PRId64
					     " after %" PRId64, op, k, token, last_token);
				last_token = token;
			}
			if (lease < 0) {
				sleep_ms(900);
				cr_assert_geq(held_count(name), NSRV / 2 + 1,
					      "%s, k=%ld: not renewed", op, k);
			}
			cr_assert_eq(dlock_redlock_unlock(r), 0, "%s", dlock_redlock_errmsg(r));
		} else {
			cr_assert_neq(dlock_redlock_check(r, NULL), 0);
		}
		assert_absent_everywhere(NSRV, name, op, k);
		if (lease < 0) {
			/* Nothing renews a member that is gone for good. */
			sleep_ms(700);
			assert_absent_everywhere(NSRV, name, op, k);
		}
		dlock_redlock_free(r);
		assert_baseline(b, op, k);
		if (!inj)
			break;
	}
	cr_assert_leq(k, KMAX);
	report(op, k, allocs);
}

Test(alloc_failures, redlock_try, .timeout = 180)
{
	install_allocator();
	start_servers(NSRV);
	redlock_acquire_op(0, 10000, "redlock_try(0, lease)");
	redlock_acquire_op(0, DLOCK_LEASE_WATCHDOG, "redlock_try(0, watchdog)");
	stop_servers(NSRV);
}

Test(alloc_failures, redlock_try_fenced, .timeout = 180)
{
	install_allocator();
	start_servers(NSRV);
	redlock_acquire_op(1, 10000, "redlock_try_fenced(0, lease)");
	stop_servers(NSRV);
}

static void redlock_unlock_op(int64_t lease, const char *op)
{
	const char *name = "af:rl-unlock";
	long k, allocs = 0;

	for (k = 1; k <= KMAX; k++) {
		baseline b = take_baseline();
		dlock_redlock *r = open_redlock(name, 0, 600);
		int64_t validity = 0;
		int rc, inj;

		cr_assert_eq(dlock_redlock_try(&validity, r, 0, lease), 0, "%s",
			     dlock_redlock_errmsg(r));
		cr_assert_eq(held_count(name), NSRV);
		arm(k);
		rc = dlock_redlock_unlock(r);
		allocs = atomic_load(&counted);
		inj = disarm();
		assert_rc(rc, inj, op, k, dlock_redlock_errmsg(r));
		if (rc == 0) {
			assert_absent_everywhere(NSRV, name, op, k);
			cr_assert_eq(dlock_redlock_check(r, NULL), DLOCK_ENOTOWNER,
				     "%s, k=%ld: a member record survived", op, k);
		} else {
			/* Whatever is still held is released by a second unlock. */
			cr_assert_eq(dlock_redlock_unlock(r), 0, "%s, k=%ld: second unlock: %s",
				     op, k, dlock_redlock_errmsg(r));
			assert_absent_everywhere(NSRV, name, op, k);
		}
		if (lease < 0) {
			sleep_ms(700);
			assert_absent_everywhere(NSRV, name, op, k);
		}
		dlock_redlock_free(r);
		assert_baseline(b, op, k);
		if (!inj)
			break;
	}
	cr_assert_leq(k, KMAX);
	report(op, k, allocs);
}

/*
 * Release through a fresh handle (explicit owner): its clients' pools are
 * empty, so the release opens its connections as it goes, and that can fail
 * for one member while the others are released.
 */
static void redlock_unlock_fresh_op(void)
{
	const char *name = "af:rl-fresh", *owner = "af-explicit-owner";
	const char *op = "redlock_unlock_as (fresh handle)";
	long k, allocs = 0;

	for (k = 1; k <= KMAX; k++) {
		baseline b = take_baseline();
		dlock_redlock *r1 = open_redlock(name, 0, 0), *r2;
		int64_t validity = 0;
		int rc, inj;

		cr_assert_eq(dlock_redlock_try_as(&validity, r1, owner, 0, 10000), 0, "%s",
			     dlock_redlock_errmsg(r1));
		/* A member slower than the quorum's grace gets its hold a moment later. */
		for (int i = 0; i < NSRV; i++) {
			int64_t until = rh_now_ms() + 2000;

			while (hget(i, name, owner) != 1 && rh_now_ms() < until)
				sleep_ms(5);
			cr_assert_eq(hget(i, name, owner), 1, "%s, k=%ld: server %d does not hold it",
				     op, k, i);
		}
		r2 = open_redlock(name, 0, 0);
		arm(k);
		rc = dlock_redlock_unlock_as(r2, owner);
		allocs = atomic_load(&counted);
		inj = disarm();
		assert_rc(rc, inj, op, k, dlock_redlock_errmsg(r2));
		if (rc < 0)
			cr_assert_eq(dlock_redlock_unlock_as(r2, owner), 0, "%s, k=%ld: second unlock: %s",
				     op, k, dlock_redlock_errmsg(r2));
		assert_absent_everywhere(NSRV, name, op, k);
		dlock_redlock_free(r2);
		dlock_redlock_free(r1);
		assert_baseline(b, op, k);
		if (!inj)
			break;
	}
	cr_assert_leq(k, KMAX);
	report(op, k, allocs);
}

Test(alloc_failures, redlock_unlock, .timeout = 180)
{
	install_allocator();
	start_servers(NSRV);
	redlock_unlock_op(10000, "redlock_unlock (lease)");
	redlock_unlock_op(DLOCK_LEASE_WATCHDOG, "redlock_unlock (watchdog)");
	redlock_unlock_fresh_op();
	stop_servers(NSRV);
}

/* ---- MultiLock ---------------------------------------------------------- */

typedef struct ml {
	dlock_client *c[NSRV];
	dlock_lock *l[NSRV];
	dlock_multilock *m;
	char owner[NSRV][64];
} ml;

static void ml_up(ml *f, const char *name, int make)
{
	memset(f, 0, sizeof *f);
	for (int i = 0; i < NSRV; i++) {
		f->c[i] = open_client(i, 600);
		f->l[i] = new_lock(f->c[i], name);
		my_owner(f->c[i], f->owner[i], sizeof f->owner[i]);
	}
	if (make)
		cr_assert_eq(dlock_multilock_new(&f->m, f->l, NSRV), 0);
}

static void ml_down(ml *f)
{
	dlock_multilock_free(f->m);
	for (int i = 0; i < NSRV; i++) {
		dlock_lock_free(f->l[i]);
		dlock_client_close(f->c[i]);
	}
}

static int ml_held(ml *f, const char *name)
{
	int n = 0;

	for (int i = 0; i < NSRV; i++)
		n += hget(i, name, f->owner[i]) == 1;
	return n;
}

Test(alloc_failures, multilock_new_free, .timeout = 120)
{
	const char *name = "af:ml-new";
	long k, allocs = 0;

	install_allocator();
	start_servers(NSRV);
	for (k = 1; k <= KMAX; k++) {
		baseline b = take_baseline();
		ml f;
		int rc, inj;

		ml_up(&f, name, 0);
		arm(k);
		rc = dlock_multilock_new(&f.m, f.l, NSRV);
		if (rc == 0) {
			dlock_multilock_free(f.m);
			f.m = NULL;
		}
		allocs = atomic_load(&counted);
		inj = disarm();
		assert_rc(rc, inj, "multilock_new", k, dlock_errmsg_last());
		if (rc < 0)
			cr_assert_null(f.m);
		ml_down(&f);
		assert_baseline(b, "multilock_new", k);
		if (!inj)
			break;
	}
	cr_assert_leq(k, KMAX);
	report("multilock_new + free", k, allocs);
	stop_servers(NSRV);
}

static void multilock_try_op(int64_t wait, int64_t lease, const char *op)
{
	const char *name = "af:ml-try";
	long k, allocs = 0;

	for (k = 1; k <= KMAX; k++) {
		baseline b = take_baseline();
		ml f;
		int rc, inj;

		ml_up(&f, name, 1);
		arm(k);
		rc = dlock_multilock_try(f.m, wait, lease);
		allocs = atomic_load(&counted);
		inj = disarm();
		assert_rc(rc, inj, op, k, dlock_multilock_errmsg(f.m));
		if (rc == 0) {
			cr_assert_eq(ml_held(&f, name), NSRV, "%s, k=%ld: 0 but not held everywhere",
				     op, k);
			cr_assert_eq(dlock_multilock_check(f.m, NULL), 0);
			if (lease < 0) {
				sleep_ms(900);
				cr_assert_eq(ml_held(&f, name), NSRV, "%s, k=%ld: not renewed", op, k);
			}
			cr_assert_eq(dlock_multilock_unlock(f.m), 0, "%s",
				     dlock_multilock_errmsg(f.m));
		} else {
			cr_assert_eq(dlock_multilock_check(f.m, NULL), DLOCK_ENOTOWNER,
				     "%s, k=%ld: a member record survived ENOMEM", op, k);
		}
		assert_absent_everywhere(NSRV, name, op, k);
		if (lease < 0) {
			sleep_ms(700);
			assert_absent_everywhere(NSRV, name, op, k);
		}
		ml_down(&f);
		assert_baseline(b, op, k);
		if (!inj)
			break;
	}
	cr_assert_leq(k, KMAX);
	report(op, k, allocs);
}

Test(alloc_failures, multilock_try, .timeout = 240)
{
	install_allocator();
	start_servers(NSRV);
	/* wait 0: Redisson's ordered single attempts; wait > 0: the parallel attempt. */
	multilock_try_op(0, 10000, "multilock_try(0, lease)");
	multilock_try_op(1000, 10000, "multilock_try(1000, lease)");
	multilock_try_op(1000, DLOCK_LEASE_WATCHDOG, "multilock_try(1000, watchdog)");
	stop_servers(NSRV);
}

Test(alloc_failures, multilock_unlock, .timeout = 120)
{
	const char *name = "af:ml-unlock";
	const char *op = "multilock_unlock";
	long k, allocs = 0;

	install_allocator();
	start_servers(NSRV);
	for (k = 1; k <= KMAX; k++) {
		baseline b = take_baseline();
		ml f;
		int rc, inj;

		ml_up(&f, name, 1);
		cr_assert_eq(dlock_multilock_try(f.m, 0, 10000), 0, "%s",
			     dlock_multilock_errmsg(f.m));
		cr_assert_eq(ml_held(&f, name), NSRV);
		arm(k);
		rc = dlock_multilock_unlock(f.m);
		allocs = atomic_load(&counted);
		inj = disarm();
		assert_rc(rc, inj, op, k, dlock_multilock_errmsg(f.m));
		if (rc == 0) {
			assert_absent_everywhere(NSRV, name, op, k);
			cr_assert_eq(dlock_multilock_check(f.m, NULL), DLOCK_ENOTOWNER);
		} else {
			cr_assert_eq(dlock_multilock_unlock(f.m), 0, "%s, k=%ld: second unlock: %s",
				     op, k, dlock_multilock_errmsg(f.m));
			assert_absent_everywhere(NSRV, name, op, k);
		}
		ml_down(&f);
		assert_baseline(b, op, k);
		if (!inj)
			break;
	}
	cr_assert_leq(k, KMAX);
	report(op, k, allocs);
	stop_servers(NSRV);
}
