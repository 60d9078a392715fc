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
 * The loop, the counting allocator and the leak checks are the torture
 * runner of tests/support (dl_torture_run); each test here gives it the
 * operation and what its result must mean. Redis state is checked over raw
 * hiredis connections (hiredis allocates with its own allocator, not the
 * hook).
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "redis_harness.h"
#include "support.h"

#define NSRV 3
/* The watchdog timeout of the tests that hold under it: renewals every second. */
#define WATCHDOG_MS 3000

/* ---- servers and raw checks ---------------------------------------------- */

static rh_server *srv[NSRV];
static const char *uris[NSRV];

static void start_servers(int n)
{
	dl_torture_install();
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

/*
 * The watchdog renewed key on server i: its TTL went up between two looks
 * (10 ms apart), within timeout_ms. Awaited rather than slept for: on a
 * busy machine a renewal may come late, but within the TTL it still counts.
 */
static int renewed(int i, const char *key, int64_t timeout_ms)
{
	int64_t end = rh_now_ms() + timeout_ms, prev = rh_command_int(srv[i], "PTTL %s", key);

	while (prev > 0 && rh_now_ms() < end) {
		int64_t now;

		dl_sleep_ms(10);
		now = rh_command_int(srv[i], "PTTL %s", key);
		if (now > prev)
			return 1;
		prev = now;
	}
	return 0;
}

static void assert_absent_everywhere(int n, const char *key, const char *op, long k)
{
	for (int i = 0; i < n; i++)
		cr_assert_eq(exists(i, key), 0, "%s, k=%ld: %s left on server %d", op, k, key, i);
}

/* ---- client ------------------------------------------------------------- */

typedef struct client_ctx {
	dlock_client *c;
	int lazy;
	const char *label; /* a registration to copy */
} client_ctx;

static int client_open_run(void *arg)
{
	client_ctx *x = arg;
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	int rc;

	x->c = NULL;
	o.lazy_connect = x->lazy; /* lazy: no connection in open, the first command connects */
	o.label = x->label;
	rc = dlock_client_new(&x->c, uris[0], &o);
	if (rc == 0 && x->lazy)
		rc = dlock_client_ping(x->c);
	else if (rc == 0) {
		dlock_client_free(x->c); /* eager: new connected and PINGed */
		x->c = NULL;
	}
	return rc;
}

static void client_open_check(void *arg, int rc, long k)
{
	client_ctx *x = arg;

	if (x->lazy && rc == 0)
		cr_assert_eq(dlock_client_ping(x->c), 0, "k=%ld", k);
	if (!x->lazy && rc < 0)
		cr_assert_null(x->c, "k=%ld: *out set on failure", k);
}

static void client_close(void *arg)
{
	client_ctx *x = arg;

	dlock_client_free(x->c);
	x->c = NULL;
}

Test(alloc_failures, client_open_close, .timeout = 120)
{
	client_ctx x = { NULL, 0, NULL };
	dl_torture t = { "client_open + close", NULL, client_open_run, client_open_check,
		client_close, NULL };

	start_servers(1);
	dl_torture_run(&t, &x);
	x.lazy = 1;
	t.op = "client_open lazy + ping + close";
	dl_torture_run(&t, &x);
	x.lazy = 0;
	x.label = "torture";
	t.op = "client_open labelled + close";
	dl_torture_run(&t, &x);
	stop_servers(1);
}

/* ---- RLock -------------------------------------------------------------- */

/* One client and one handle on server 0 (lock_new's test makes its own). */
typedef struct lock_ctx {
	const char *name;
	dlock_lock_kind kind;
	int64_t wait, lease; /* the acquire's */
	int reentrant;       /* unlock: taken twice first */
	const char *label;   /* the client's (a registration rides along) */
	int watch;           /* the client's watch_force_unlock: holds listen on their channel */
	int64_t token, last_token;
	int64_t t0, t1; /* the waiting try's start and end */
	dlock_client *c;
	dlock_lock *l;
	char owner[64];
	pthread_t th;
} lock_ctx;

static dlock_lock *make_lock(lock_ctx *x)
{
	dlock_lock *l = NULL;
	int rc = dlock_lock_new(&l, x->c, x->name, dl_kind(x->kind));

	return rc == 0 ? l : NULL;
}

/* A short watchdog (3 s, renewed every second) so renewals run meanwhile. */
static void lock_setup(void *arg)
{
	lock_ctx *x = arg;

	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.connect_timeout_ms = o.command_timeout_ms = 1000;
	o.watchdog_timeout_ms = WATCHDOG_MS;
	o.label = x->label;
	o.watch_force_unlock = x->watch;
	x->c = dl_client_opts(uris[0], &o);
	x->l = make_lock(x);
	cr_assert_not_null(x->l, "%s", dlock_errmsg_last());
	dl_owner(x->c, x->owner, sizeof x->owner);
}

static void lock_teardown(void *arg)
{
	lock_ctx *x = arg;

	dlock_lock_free(x->l);
	dlock_client_free(x->c);
	x->l = NULL;
	x->c = NULL;
}

static const char *lock_errmsg(void *arg)
{
	return dlock_lock_errmsg(((lock_ctx *)arg)->l);
}

static void new_setup(void *arg)
{
	lock_ctx *x = arg;

	x->c = dl_client(uris[0], 1000, 0);
	x->l = NULL;
}

static int new_run(void *arg)
{
	lock_ctx *x = arg;
	dlock_lock *l = NULL;
	int rc = dlock_lock_new(&l, x->c, x->name, dl_kind(x->kind));

	if (rc == 0)
		dlock_lock_free(l);
	else
		x->l = l; /* must be NULL */
	return rc;
}

/* After a failed lock_new the client still works: a new handle takes and releases. */
static void new_check(void *arg, int rc, long k)
{
	lock_ctx *x = arg;
	dlock_lock *l;

	cr_assert_null(x->l, "k=%ld: *out set on failure", k);
	if (x->kind != DLOCK_LOCK_PLAIN)
		return;
	(void)rc;
	l = dl_lock(x->c, x->name);
	dl_owner(x->c, x->owner, sizeof x->owner);
	dl_pass(dlock_lock_acquire(l, NULL, 0, 10000));
	cr_assert_eq(hget(0, x->name, x->owner), 1);
	dl_pass(dlock_lock_release(l, NULL));
	cr_assert_eq(exists(0, x->name), 0);
	dlock_lock_free(l);
}

Test(alloc_failures, lock_new_free, .timeout = 120)
{
	lock_ctx x = { .name = "af:new" };
	dl_torture t = { "lock_new + free", new_setup, new_run, new_check, lock_teardown, NULL };

	start_servers(1);
	dl_torture_run(&t, &x);
	/* The fenced and fair kinds make more names. */
	x.kind = DLOCK_LOCK_FENCED;
	t.op = "lock_new (fenced) + free";
	dl_torture_run(&t, &x);
	x.kind = DLOCK_LOCK_FAIR;
	t.op = "lock_new (fair) + free";
	dl_torture_run(&t, &x);
	stop_servers(1);
}

static int acquire_run(void *arg)
{
	lock_ctx *x = arg;

	return x->wait < 0 ? dlock_lock_acquire(x->l, NULL, DLOCK_WAIT_FOREVER, x->lease)
			   : dlock_lock_acquire(x->l, NULL, x->wait, x->lease);
}

static void acquire_check(void *arg, int rc, long k)
{
	lock_ctx *x = arg;

	if (rc == 0) {
		cr_assert_eq(hget(0, x->name, x->owner), 1, "k=%ld: not held after 0", k);
		cr_assert_eq(dlock_lock_check(x->l, NULL), 0, "k=%ld: not recorded", k);
		if (x->lease < 0)
			cr_assert(renewed(0, x->name, WATCHDOG_MS - 500),
					"k=%ld: the watchdog did not renew", k);
		dl_pass(dlock_lock_release(x->l, NULL));
	} else {
		cr_assert_eq(dlock_lock_check(x->l, NULL), DLOCK_ENOTOWNER,
				"k=%ld: a record survived ENOMEM", k);
	}
	cr_assert_eq(exists(0, x->name), 0, "k=%ld: lock left behind", k);
}

Test(alloc_failures, lock_try_and_lock, .timeout = 120)
{
	static const struct {
		const char *op;
		int64_t wait, lease;
	} ops[] = {
		{ "lock_try(0, lease)", 0, 10000 },
		{ "lock_try(0, watchdog)", 0, DLOCK_LEASE_WATCHDOG },
		{ "lock_lock(lease)", DLOCK_WAIT_FOREVER, 10000 },
		{ "lock_lock(watchdog)", DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG },
		{ "lock_try(0, watchdog) labelled", 0, DLOCK_LEASE_WATCHDOG },
		/* Every hold listens for a force unlock, a leased one too. */
		{ "lock_try(0, lease) watching", 0, 10000 },
		{ "lock_try(0, watchdog) watching", 0, DLOCK_LEASE_WATCHDOG },
	};
	dl_torture t = { NULL, lock_setup, acquire_run, acquire_check, lock_teardown, lock_errmsg };

	start_servers(1);
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
		lock_ctx x = { .name = "af:acquire", .wait = ops[i].wait, .lease = ops[i].lease,
			.label = strstr(ops[i].op, "labelled") != NULL ? "torture" : NULL,
			.watch = strstr(ops[i].op, "watching") != NULL };

		t.op = ops[i].op;
		dl_torture_run(&t, &x);
	}
	stop_servers(1);
}

static void unlock_setup(void *arg)
{
	lock_ctx *x = arg;

	lock_setup(x);
	dl_pass(dlock_lock_acquire(x->l, NULL, 0, x->lease));
	if (x->reentrant)
		dl_pass(dlock_lock_acquire(x->l, NULL, 0, x->lease));
}

static int unlock_run(void *arg)
{
	return dlock_lock_release(((lock_ctx *)arg)->l, NULL);
}

static void unlock_check(void *arg, int rc, long k)
{
	lock_ctx *x = arg;

	if (rc == 0) {
		if (x->reentrant) {
			cr_assert_eq(hget(0, x->name, x->owner), 1, "k=%ld", k);
			cr_assert_eq(dlock_lock_check(x->l, NULL), 0);
			dl_pass(dlock_lock_release(x->l, NULL));
		}
		cr_assert_eq(exists(0, x->name), 0, "k=%ld: still held after 0", k);
		cr_assert_eq(dlock_lock_check(x->l, NULL), DLOCK_ENOTOWNER);
		return;
	}
	/* Nothing changed: still held, and it can still be released. */
	cr_assert_eq(hget(0, x->name, x->owner), x->reentrant ? 2 : 1,
			"k=%ld: ENOMEM but the count changed", k);
	cr_assert_eq(dlock_lock_check(x->l, NULL), 0);
	dl_pass(dlock_lock_release(x->l, NULL));
	if (x->reentrant)
		dl_pass(dlock_lock_release(x->l, NULL));
	cr_assert_eq(exists(0, x->name), 0);
}

Test(alloc_failures, lock_unlock, .timeout = 120)
{
	static const struct {
		const char *op;
		int64_t lease;
		int reentrant;
	} ops[] = {
		{ "lock_unlock (lease)", 10000, 0 },
		{ "lock_unlock (watchdog)", DLOCK_LEASE_WATCHDOG, 0 },
		{ "lock_unlock (re-entered)", 10000, 1 },
	};
	dl_torture t = { NULL, unlock_setup, unlock_run, unlock_check, lock_teardown, lock_errmsg };

	start_servers(1);
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
		lock_ctx x = {
			.name = "af:unlock", .lease = ops[i].lease, .reentrant = ops[i].reentrant
		};

		t.op = ops[i].op;
		dl_torture_run(&t, &x);
	}
	stop_servers(1);
}

/* A foreign holder that lets go after 300 ms: DEL, then the unlock message. */
static void *foreign_release(void *arg)
{
	lock_ctx *x = arg;
	char channel[128];
	redisContext *ctx;
	redisReply *r;
	intptr_t ok;

	dl_sleep_ms(300);
	snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", x->name);
	ctx = redisConnect("127.0.0.1", rh_server_port(srv[0]));
	if (ctx == NULL || ctx->err) {
		if (ctx)
			redisFree(ctx);
		return NULL;
	}
	r = redisCommand(ctx, "DEL %s", x->name);
	ok = r != NULL && r->type == REDIS_REPLY_INTEGER;
	freeReplyObject(r);
	r = redisCommand(ctx, "PUBLISH %s 0", channel);
	ok &= r != NULL && r->type == REDIS_REPLY_INTEGER;
	freeReplyObject(r);
	redisFree(ctx);
	return (void *)ok;
}

static void waiting_setup(void *arg)
{
	lock_ctx *x = arg;

	lock_setup(x);
	cr_assert_eq(rh_command_int(srv[0], "HSET %s foreign:1 1", x->name), 1);
	/* A safety net: a missed message still ends the wait at the TTL. */
	cr_assert_eq(rh_command_int(srv[0], "PEXPIRE %s 1000", x->name), 1);
	cr_assert_eq(pthread_create(&x->th, NULL, foreign_release, x), 0);
	x->t0 = rh_now_ms();
}

static int waiting_run(void *arg)
{
	lock_ctx *x = arg;
	int rc = dlock_lock_acquire(x->l, NULL, 2000, 10000);

	x->t1 = rh_now_ms();
	return rc;
}

static void waiting_check(void *arg, int rc, long k)
{
	lock_ctx *x = arg;
	void *ok = NULL;

	pthread_join(x->th, &ok);
	cr_assert(ok != NULL, "the foreign release failed");
	if (rc == 0) {
		cr_assert_geq(x->t1 - x->t0, 250, "acquired after %" PRId64 " ms while held",
				x->t1 - x->t0);
		cr_assert_eq(hget(0, x->name, x->owner), 1, "k=%ld: not held after 0", k);
		dl_pass(dlock_lock_release(x->l, NULL));
	} else {
		cr_assert_eq(hget(0, x->name, x->owner), -1, "k=%ld: our hold left behind", k);
		cr_assert_eq(dlock_lock_check(x->l, NULL), DLOCK_ENOTOWNER);
	}
	cr_assert_eq(exists(0, x->name), 0, "k=%ld: lock left behind", k);
}

Test(alloc_failures, waiting_try_joins_pubsub, .timeout = 180)
{
	lock_ctx x = { .name = "af:wait" };
	dl_torture t = { "lock_try(2000) waiting (pub/sub)", waiting_setup, waiting_run,
		waiting_check, lock_teardown, lock_errmsg };

	start_servers(1);
	dl_torture_run(&t, &x);
	stop_servers(1);
}

/* The fenced and fair kinds: acquire (with the token / the queue) and release. */
static int kind_run(void *arg)
{
	lock_ctx *x = arg;
	int rc = x->kind == DLOCK_LOCK_FAIR ? dlock_lock_acquire(x->l, NULL, 0, 10000)
				 : dlock_lock_acquire_fenced(&x->token, x->l, NULL, 0, 10000);

	return rc == 0 ? dlock_lock_release(x->l, NULL) : rc;
}

static void kind_check(void *arg, int rc, long k)
{
	lock_ctx *x = arg;

	if (rc == 0 && x->kind == DLOCK_LOCK_FENCED) {
		cr_assert_gt(x->token, x->last_token, "k=%ld: token %" PRId64 " after %" PRId64, k,
				x->token, x->last_token);
		x->last_token = x->token;
	}
	if (rc < 0 && hget(0, x->name, x->owner) == 1) {
		/* The acquire went through and the release ran out of memory:
		 * nothing changed by it, so it can be released now. */
		cr_assert_eq(dlock_lock_check(x->l, NULL), 0);
		dl_pass(dlock_lock_release(x->l, NULL));
	}
	cr_assert_eq(dlock_lock_check(x->l, NULL), DLOCK_ENOTOWNER, "k=%ld", k);
	cr_assert_eq(exists(0, x->name), 0, "k=%ld: lock left behind", k);
	if (x->kind == DLOCK_LOCK_FAIR)
		cr_assert_eq(rh_command_int(srv[0], "LLEN redisson_lock_queue:{%s}", x->name), 0,
				"k=%ld: left in the queue", k);
}

Test(alloc_failures, fenced_and_fair_locks, .timeout = 120)
{
	lock_ctx fenced = { .name = "af:fenced", .kind = DLOCK_LOCK_FENCED };
	lock_ctx fair = { .name = "af:fair", .kind = DLOCK_LOCK_FAIR };
	dl_torture t = { "fencedlock try_fenced + unlock", lock_setup, kind_run, kind_check,
		lock_teardown, lock_errmsg };

	start_servers(1);
	dl_torture_run(&t, &fenced);
	t.op = "fairlock try + unlock";
	dl_torture_run(&t, &fair);
	stop_servers(1);
}

/* ---- RedLock ------------------------------------------------------------ */

static dlock_redlock *open_redlock(const char *name, int fenced, int watchdog_ms)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	dlock_redlock *r = NULL;

	if (watchdog_ms > 0)
		co.watchdog_timeout_ms = watchdog_ms;
	ro.fenced = fenced;
	dl_pass(dlock_redlock_new_from_uris(&r, uris, NSRV, name, &co, &ro));
	return r;
}

static int held_count(const char *name)
{
	int n = 0;

	for (int i = 0; i < NSRV; i++)
		n += held_by_me(i, name);
	return n;
}

typedef struct rl_ctx {
	const char *name;
	int fenced;
	int64_t lease;
	int64_t validity, token, last_token;
	dlock_redlock *r, *r2;
} rl_ctx;

static const char *rl_errmsg(void *arg)
{
	rl_ctx *x = arg;

	return dlock_redlock_errmsg(x->r2 ? x->r2 : x->r);
}

static void rl_teardown(void *arg)
{
	rl_ctx *x = arg;

	dlock_redlock_free(x->r2);
	dlock_redlock_free(x->r);
	x->r = x->r2 = NULL;
}

static int rl_open_run(void *arg)
{
	rl_ctx *x = arg;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	int rc;

	ro.fenced = x->fenced;
	rc = dlock_redlock_new_from_uris(&x->r, uris, NSRV, x->name, NULL, &ro);
	if (rc == 0) {
		dlock_redlock_free(x->r);
		x->r = NULL;
	}
	return rc;
}

static void rl_open_check(void *arg, int rc, long k)
{
	(void)rc;
	cr_assert_null(((rl_ctx *)arg)->r, "k=%ld: *out set on failure", k);
}

Test(alloc_failures, redlock_open_free, .timeout = 120)
{
	rl_ctx x = { .name = "af:rl-open" };
	dl_torture t = { "redlock_open + free", NULL, rl_open_run, rl_open_check, rl_teardown,
		NULL };
	long live;
	int fds;

	start_servers(NSRV);
	dl_torture_run(&t, &x);
	x.fenced = 1;
	t.op = "redlock_open (fenced) + free";
	dl_torture_run(&t, &x);
	/* What open made works, and leaves nothing behind. */
	live = dl_torture_live();
	fds = dl_count_fds();
	x.r = open_redlock(x.name, 0, 0);
	dl_pass(dl_redlock_acquire_v(&x.validity, x.r, NULL, 0, 10000));
	cr_assert_eq(held_count(x.name), NSRV);
	dl_pass(dlock_redlock_release(x.r, NULL));
	assert_absent_everywhere(NSRV, x.name, "redlock_open check", 0);
	rl_teardown(&x);
	cr_assert_eq(dl_torture_live(), live, "redlock_open check: leaked");
	cr_assert_eq(dl_count_fds(), fds, "redlock_open check: descriptors leaked");
	stop_servers(NSRV);
}

static void rl_setup(void *arg)
{
	rl_ctx *x = arg;

	x->r = open_redlock(x->name, x->fenced, WATCHDOG_MS);
}

static int rl_acquire_run(void *arg)
{
	rl_ctx *x = arg;

	return x->fenced ? dlock_redlock_acquire_fenced(&x->token, x->r, NULL, 0, x->lease)
			 : dlock_redlock_acquire(x->r, NULL, 0, x->lease);
}

static void rl_acquire_check(void *arg, int rc, long k)
{
	rl_ctx *x = arg;

	if (rc == 0) {
		int n = held_count(x->name);

		cr_assert_geq(n, NSRV / 2 + 1, "k=%ld: 0 but held on %d servers", k, n);
		dl_pass(dlock_redlock_validity_ms(&x->validity, x->r, NULL));
		cr_assert_gt(x->validity, 0);
		cr_assert_eq(dlock_redlock_check(x->r, NULL), 0, "k=%ld: check", k);
		if (x->fenced) {
			cr_assert_gt(x->token, x->last_token,
					"k=%ld: token %" PRId64 " after %" PRId64, k, x->token,
					x->last_token);
			x->last_token = x->token;
		}
		if (x->lease < 0) {
			int r = 0;

			for (int i = 0; i < NSRV; i++)
				r += held_by_me(i, x->name) &&
						renewed(i, x->name, WATCHDOG_MS - 500);
			cr_assert_geq(r, NSRV / 2 + 1, "k=%ld: renewed on %d servers", k, r);
		}
		dl_pass(dlock_redlock_release(x->r, NULL));
	} else {
		cr_assert_neq(dlock_redlock_check(x->r, NULL), 0);
	}
	assert_absent_everywhere(NSRV, x->name, "redlock acquire", k);
	if (x->lease < 0) {
		/* Nothing renews a member that is gone for good. */
		dl_sleep_ms(700);
		assert_absent_everywhere(NSRV, x->name, "redlock acquire", k);
	}
}

Test(alloc_failures, redlock_try, .timeout = 180)
{
	rl_ctx lease = { .name = "af:rl-try", .lease = 10000 };
	rl_ctx watchdog = { .name = "af:rl-try", .lease = DLOCK_LEASE_WATCHDOG };
	dl_torture t = { "redlock_try(0, lease)", rl_setup, rl_acquire_run, rl_acquire_check,
		rl_teardown, rl_errmsg };

	start_servers(NSRV);
	dl_torture_run(&t, &lease);
	t.op = "redlock_try(0, watchdog)";
	dl_torture_run(&t, &watchdog);
	stop_servers(NSRV);
}

Test(alloc_failures, redlock_try_fenced, .timeout = 180)
{
	rl_ctx x = { .name = "af:rl-fenced", .fenced = 1, .lease = 10000 };
	dl_torture t = { "redlock_try_fenced(0, lease)", rl_setup, rl_acquire_run, rl_acquire_check,
		rl_teardown, rl_errmsg };

	start_servers(NSRV);
	dl_torture_run(&t, &x);
	stop_servers(NSRV);
}

static void rl_unlock_setup(void *arg)
{
	rl_ctx *x = arg;

	rl_setup(x);
	dl_pass(dl_redlock_acquire_v(&x->validity, x->r, NULL, 0, x->lease));
	cr_assert_eq(held_count(x->name), NSRV);
}

static int rl_unlock_run(void *arg)
{
	return dlock_redlock_release(((rl_ctx *)arg)->r, NULL);
}

static void rl_unlock_check(void *arg, int rc, long k)
{
	rl_ctx *x = arg;

	if (rc == 0)
		cr_assert_eq(dlock_redlock_check(x->r, NULL), DLOCK_ENOTOWNER,
				"k=%ld: a member record survived", k);
	else /* whatever is still held is released by a second unlock */
		cr_assert_eq(dlock_redlock_release(x->r, NULL), 0, "k=%ld: second unlock: %s", k,
				dlock_redlock_errmsg(x->r));
	assert_absent_everywhere(NSRV, x->name, "redlock_unlock", k);
	if (x->lease < 0) {
		dl_sleep_ms(700);
		assert_absent_everywhere(NSRV, x->name, "redlock_unlock", k);
	}
}

/*
 * Release through a fresh handle (explicit owner): its clients' pools are
 * empty, so the release opens its connections as it goes, and that can fail
 * for one member while the others are released.
 */
#define FRESH_OWNER "af-explicit-owner"

static void rl_fresh_setup(void *arg)
{
	rl_ctx *x = arg;

	x->r = open_redlock(x->name, 0, 0);
	dl_pass(dl_redlock_acquire_v(&x->validity, x->r, FRESH_OWNER, 0, 10000));
	/* A member slower than the quorum's grace gets its hold a moment later. */
	for (int i = 0; i < NSRV; i++) {
		int64_t until = rh_now_ms() + 2000;

		while (hget(i, x->name, FRESH_OWNER) != 1 && rh_now_ms() < until)
			dl_sleep_ms(5);
		cr_assert_eq(hget(i, x->name, FRESH_OWNER), 1, "server %d does not hold it", i);
	}
	x->r2 = open_redlock(x->name, 0, 0);
}

static int rl_fresh_run(void *arg)
{
	return dlock_redlock_release(((rl_ctx *)arg)->r2, FRESH_OWNER);
}

static void rl_fresh_check(void *arg, int rc, long k)
{
	rl_ctx *x = arg;

	if (rc < 0)
		cr_assert_eq(dlock_redlock_release(x->r2, FRESH_OWNER), 0,
				"k=%ld: second unlock: %s", k, dlock_redlock_errmsg(x->r2));
	assert_absent_everywhere(NSRV, x->name, "redlock_unlock_as (fresh handle)", k);
}

Test(alloc_failures, redlock_unlock, .timeout = 180)
{
	rl_ctx lease = { .name = "af:rl-unlock", .lease = 10000 };
	rl_ctx watchdog = { .name = "af:rl-unlock", .lease = DLOCK_LEASE_WATCHDOG };
	rl_ctx fresh = { .name = "af:rl-fresh" };
	dl_torture t = { "redlock_unlock (lease)", rl_unlock_setup, rl_unlock_run, rl_unlock_check,
		rl_teardown, rl_errmsg };
	dl_torture f = { "redlock_unlock_as (fresh handle)", rl_fresh_setup, rl_fresh_run,
		rl_fresh_check, rl_teardown, rl_errmsg };

	start_servers(NSRV);
	dl_torture_run(&t, &lease);
	t.op = "redlock_unlock (watchdog)";
	dl_torture_run(&t, &watchdog);
	dl_torture_run(&f, &fresh);
	stop_servers(NSRV);
}

/* ---- MultiLock ---------------------------------------------------------- */

typedef struct ml_ctx {
	const char *name;
	int64_t wait, lease;
	int make;   /* ml_setup makes the MultiLock */
	int locked; /* ml_setup takes it too */
	dlock_client *c[NSRV];
	dlock_lock *l[NSRV];
	dlock_multilock *m;
	char owner[NSRV][64];
} ml_ctx;

static int ml_held(ml_ctx *x)
{
	int n = 0;

	for (int i = 0; i < NSRV; i++)
		n += hget(i, x->name, x->owner[i]) == 1;
	return n;
}

static void ml_setup(void *arg)
{
	ml_ctx *x = arg;

	for (int i = 0; i < NSRV; i++) {
		x->c[i] = dl_client(uris[i], 1000, WATCHDOG_MS);
		x->l[i] = dl_lock(x->c[i], x->name);
		dl_owner(x->c[i], x->owner[i], sizeof x->owner[i]);
	}
	x->m = NULL;
	if (x->make)
		dl_pass(dlock_multilock_new(&x->m, x->l, NSRV, NULL));
	if (x->locked) {
		dl_pass(dlock_multilock_acquire(x->m, NULL, 0, 10000));
		cr_assert_eq(ml_held(x), NSRV);
	}
}

static void ml_teardown(void *arg)
{
	ml_ctx *x = arg;

	dlock_multilock_free(x->m);
	x->m = NULL;
	for (int i = 0; i < NSRV; i++) {
		dlock_lock_free(x->l[i]);
		dlock_client_free(x->c[i]);
	}
}

static const char *ml_errmsg(void *arg)
{
	ml_ctx *x = arg;

	return x->m ? dlock_multilock_errmsg(x->m) : dlock_errmsg_last();
}

static int ml_new_run(void *arg)
{
	ml_ctx *x = arg;
	int rc = dlock_multilock_new(&x->m, x->l, NSRV, NULL);

	if (rc == 0) {
		dlock_multilock_free(x->m);
		x->m = NULL;
	}
	return rc;
}

static void ml_new_check(void *arg, int rc, long k)
{
	(void)rc;
	cr_assert_null(((ml_ctx *)arg)->m, "k=%ld: *out set on failure", k);
}

Test(alloc_failures, multilock_new_free, .timeout = 120)
{
	ml_ctx x = { .name = "af:ml-new" };
	dl_torture t = { "multilock_new + free", ml_setup, ml_new_run, ml_new_check, ml_teardown,
		NULL };

	start_servers(NSRV);
	dl_torture_run(&t, &x);
	stop_servers(NSRV);
}

static int ml_try_run(void *arg)
{
	ml_ctx *x = arg;

	return dlock_multilock_acquire(x->m, NULL, x->wait, x->lease);
}

static void ml_try_check(void *arg, int rc, long k)
{
	ml_ctx *x = arg;

	if (rc == 0) {
		cr_assert_eq(ml_held(x), NSRV, "k=%ld: 0 but not held everywhere", k);
		cr_assert_eq(dlock_multilock_check(x->m, NULL), 0);
		if (x->lease < 0) {
			for (int i = 0; i < NSRV; i++)
				cr_assert(renewed(i, x->name, WATCHDOG_MS - 500),
						"k=%ld: member %d not renewed", k, i);
			cr_assert_eq(ml_held(x), NSRV, "k=%ld: not held everywhere", k);
		}
		dl_pass(dlock_multilock_release(x->m, NULL));
	} else {
		cr_assert_eq(dlock_multilock_check(x->m, NULL), DLOCK_ENOTOWNER,
				"k=%ld: a member record survived ENOMEM", k);
	}
	assert_absent_everywhere(NSRV, x->name, "multilock_try", k);
	if (x->lease < 0) {
		dl_sleep_ms(700);
		assert_absent_everywhere(NSRV, x->name, "multilock_try", k);
	}
}

Test(alloc_failures, multilock_try, .timeout = 240)
{
	/* wait 0: Redisson's ordered single attempts; wait > 0: the parallel attempt. */
	static const struct {
		const char *op;
		int64_t wait, lease;
	} ops[] = {
		{ "multilock_try(0, lease)", 0, 10000 },
		{ "multilock_try(1000, lease)", 1000, 10000 },
		{ "multilock_try(1000, watchdog)", 1000, DLOCK_LEASE_WATCHDOG },
	};
	dl_torture t = { NULL, ml_setup, ml_try_run, ml_try_check, ml_teardown, ml_errmsg };

	start_servers(NSRV);
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
		ml_ctx x = {
			.name = "af:ml-try", .wait = ops[i].wait, .lease = ops[i].lease, .make = 1
		};

		t.op = ops[i].op;
		dl_torture_run(&t, &x);
	}
	stop_servers(NSRV);
}

static int ml_unlock_run(void *arg)
{
	return dlock_multilock_release(((ml_ctx *)arg)->m, NULL);
}

static void ml_unlock_check(void *arg, int rc, long k)
{
	ml_ctx *x = arg;

	if (rc == 0)
		cr_assert_eq(dlock_multilock_check(x->m, NULL), DLOCK_ENOTOWNER);
	else
		cr_assert_eq(dlock_multilock_release(x->m, NULL), 0, "k=%ld: second unlock: %s", k,
				dlock_multilock_errmsg(x->m));
	assert_absent_everywhere(NSRV, x->name, "multilock_unlock", k);
}

Test(alloc_failures, multilock_unlock, .timeout = 120)
{
	ml_ctx x = { .name = "af:ml-unlock", .make = 1, .locked = 1 };
	dl_torture t = { "multilock_unlock", ml_setup, ml_unlock_run, ml_unlock_check, ml_teardown,
		ml_errmsg };

	start_servers(NSRV);
	dl_torture_run(&t, &x);
	stop_servers(NSRV);
}

/* The quorum queries on a MultiLock held by this thread: both answer 1. */
static int ml_answers[2];

static int ml_query_run(void *arg)
{
	ml_ctx *x = arg;
	int rc;

	ml_answers[0] = ml_answers[1] = -1;
	rc = dlock_multilock_is_locked(&ml_answers[0], x->m);
	return rc < 0 ? rc : dlock_multilock_is_held(&ml_answers[1], x->m, NULL);
}

static void ml_query_check(void *arg, int rc, long k)
{
	ml_ctx *x = arg;

	if (rc == 0)
		cr_assert(ml_answers[0] == 1 && ml_answers[1] == 1, "k=%ld: answers %d, %d", k,
				ml_answers[0], ml_answers[1]);
	cr_assert_eq(ml_held(x), NSRV, "k=%ld: a query changed the lock", k);
	dl_pass(dlock_multilock_release(x->m, NULL));
	assert_absent_everywhere(NSRV, x->name, "multilock queries", k);
}

Test(alloc_failures, multilock_queries, .timeout = 120)
{
	ml_ctx x = { .name = "af:ml-query", .make = 1, .locked = 1 };
	dl_torture t = { "multilock is_locked + is_held_as", ml_setup, ml_query_run,
		ml_query_check, ml_teardown, ml_errmsg };

	start_servers(NSRV);
	dl_torture_run(&t, &x);
	stop_servers(NSRV);
}
