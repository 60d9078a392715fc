/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RLock on a real redis-server: the exact Redisson data layout (hash field,
 * count, PTTL, unlock channel and payload), ownership, leases, waiting and
 * wake-up by pub/sub, force unlock and the watchdog's loss detection, and
 * interoperation with Redisson's own Lua scripts (run here with hiredis, no
 * Java), plus argument validation that must leave Redis untouched.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "redis_harness.h"
#include "support.h"

/* Redisson's own scripts (the oracle) are in tests/support/redisson_scripts.c. */

/* ---- fixture: one server per test ---------------------------------------- */

#define srv dl_srv

TestSuite(rlock_wire, .init = dl_server_start, .fini = dl_server_stop);

/* ---- helpers ------------------------------------------------------------- */

static dlock_client *open_client(int watchdog_ms)
{
	dlock_client_options o;
	dlock_client *c = NULL;

	cr_assert_eq(dlock_client_options_init(&o, DLOCK_CLIENT_OPTIONS_VERSION), 0);
	o.watchdog_timeout_ms = watchdog_ms;
	int rc = dlock_client_new(&c, rh_server_uri(srv), &o);
	cr_assert_eq(rc, 0, "dlock_client_new: %d %s", rc, dlock_errmsg_last());
	cr_assert_not_null(c);
	return c;
}

static void node_label(char *buf, size_t len)
{
	snprintf(buf, len, "127.0.0.1:%d", rh_server_port(srv));
}

/* HGETALL name must be exactly {field: value}. */
static void assert_hash_is(const char *name, const char *field, const char *value)
{
	redisReply *r = rh_command(srv, "HGETALL %s", name);

	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	cr_assert_eq(r->elements, 2, "HGETALL %s: %zu elements, want one field", name,
			(size_t)r->elements);
	cr_assert_str_eq(r->element[0]->str, field);
	cr_assert_str_eq(r->element[1]->str, value, "count of %s", field);
	freeReplyObject(r);
}

/* The same, for this thread's owner on c. */
static void assert_mine(dlock_client *c, const char *name, const char *count)
{
	char owner[64];

	dl_owner(c, owner, sizeof owner);
	assert_hash_is(name, owner, count);
}

static void assert_key_absent(const char *name)
{
	cr_assert_eq(rh_command_int(srv, "EXISTS %s", name), 0, "key %s still exists", name);
}

/* PTTL of name in (lo, hi]: a lease just set or renewed, less what the round trips took. */
static void assert_pttl(const char *name, int64_t lo, int64_t hi, const char *when)
{
	int64_t t = rh_command_int(srv, "PTTL %s", name);

	cr_assert(t > lo && t <= hi, "PTTL of %s %s: %" PRId64 ", want (%" PRId64 ", %" PRId64 "]",
			name, when, t, lo, hi);
}

/* The end of most tests: the lock freed, its client closed. */
static void close_lock(dlock_lock *l, dlock_client *c)
{
	dlock_lock_free(l);
	dlock_client_free(c);
}

/* The last unlock of a hold: it succeeds and the key is gone. */
static void unlock_last(dlock_lock *l, const char *name)
{
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	assert_key_absent(name);
}

/* The HGETALL reply as one string "f1=v1,f2=v2," (for before/after comparison). */
static void hash_snapshot(const char *name, char *buf, size_t len)
{
	redisReply *r = rh_command(srv, "HGETALL %s", name);
	size_t n = 0;

	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	buf[0] = '\0';
	for (size_t i = 0; i + 1 < r->elements; i += 2)
		n += (size_t)snprintf(buf + n, len - n, "%s=%s,", r->element[i]->str,
				r->element[i + 1]->str);
	freeReplyObject(r);
}

static void expect_no_message(redisContext *c, int timeout_ms)
{
	redisReply *r = dl_next_reply(c, timeout_ms);

	if (r != NULL) {
		char what[256];
		snprintf(what, sizeof what, "%s %s %s", r->elements > 0 ? r->element[0]->str : "?",
				r->elements > 1 ? r->element[1]->str : "?",
				r->elements > 2 && r->element[2]->str ? r->element[2]->str : "?");
		freeReplyObject(r);
		cr_assert_fail("unexpected message: %s", what);
	}
}

/* Number of subscribers of `channel` on the server. */
/* Wait (bounded) until `channel` has `want` subscribers. */
static void sleep_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

/* ---- a waiter thread: dlock_lock_acquire, then report and release ---------- */

typedef struct waiter {
	dlock_client *client;
	dlock_lock *lock;
	int64_t lease;
	int rc;              /* of dlock_lock_acquire */
	int64_t acquired_at; /* rh_now_ms() when it returned */
	char owner[64];
	int64_t count_after; /* hold count seen right after acquiring */
	int unlock_rc;
	int release; /* unlock before returning */
} waiter;

static void *waiter_main(void *arg)
{
	waiter *w = arg;

	dlock_client_owner(w->owner, w->client, dlock_thread_id());
	w->rc = dlock_lock_acquire(w->lock, NULL, DLOCK_WAIT_FOREVER, w->lease);
	w->acquired_at = rh_now_ms();
	w->count_after = -1;
	w->unlock_rc = 1;
	if (w->rc == 0) {
		dlock_lock_hold_count(&w->count_after, w->lock, NULL);
		if (w->release)
			w->unlock_rc = dlock_lock_release(w->lock, NULL);
	}
	return NULL;
}

/*
 * Start w and return once it waits on `channel` and 300 ms have passed, so
 * that a wake-up measured next is the message's, not the first attempt's.
 */
static void start_waiter(waiter *w, pthread_t *th, const char *channel)
{
	int64_t started = rh_now_ms();

	cr_assert_eq(pthread_create(th, NULL, waiter_main, w), 0);
	dl_await_numsub(srv, channel, 1, 3000);
	int64_t since = rh_now_ms() - started;
	if (since < 300)
		sleep_ms((int)(300 - since));
}

/* The waiter acquired after `before` and within `within_ms` of the release at released_at. */
static void assert_woke(const waiter *w, int64_t before, int64_t released_at, int64_t within_ms,
		const char *release)
{
	cr_assert_eq(w->rc, 0, "waiter: %d", w->rc);
	cr_assert_geq(w->acquired_at, before, "the waiter got in before the %s", release);
	cr_assert_lt(w->acquired_at - released_at, within_ms,
			"waiter acquired %" PRId64 " ms after the %s", w->acquired_at - released_at,
			release);
}

/* Nothing is left on the server: a release writes no key of its own (no
 * unlock latch: it is safe to repeat by the believed count). */
static void assert_no_keys_left(void)
{
	redisReply *r = rh_command(srv, "KEYS *");

	cr_assert_not_null(r);
	cr_assert_eq(r->elements, 0, "%zu keys left after the last unlock, the first %s",
			r->elements, r->elements > 0 ? r->element[0]->str : "");
	freeReplyObject(r);
}

/* ---- 1. wire layout ------------------------------------------------------ */

Test(rlock_wire, watchdog_hold_is_one_field_with_count_and_ttl, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "wire-lock");
	char owner[64];
	dl_owner(c, owner, sizeof owner);

	/* The field is <client-uuid>:<tid>. */
	char want[64];
	snprintf(want, sizeof want, "%s:%" PRIu64, dlock_client_id(c), dlock_thread_id());
	cr_assert_str_eq(owner, want);
	cr_assert_eq(strlen(dlock_client_id(c)), 36);

	redisContext *sub = dl_subscribe(rh_server_port(srv), "redisson_lock__channel:{wire-lock}");

	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s", dlock_lock_errmsg(l));
	assert_hash_is("wire-lock", owner, "1");
	assert_pttl("wire-lock", 29000, 30000, "while held");
	cr_assert_eq(rh_command_int(srv, "DBSIZE"), 1, "only the lock key exists while held");

	/* Re-entry: same field, count 2, TTL reset to the watchdog timeout. */
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s", dlock_lock_errmsg(l));
	assert_hash_is("wire-lock", owner, "2");
	assert_pttl("wire-lock", 29000, 30000, "after re-entry");
	int64_t n = -1;
	cr_assert_eq(dlock_lock_hold_count(&n, l, NULL), 0);
	cr_assert_eq(n, 2);

	/* First unlock: count 1, still held, no message. */
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	assert_hash_is("wire-lock", owner, "1");
	assert_pttl("wire-lock", 29000, 30000, "after partial unlock");
	expect_no_message(sub, 200);

	/* Second unlock: key gone, exactly one "0". */
	unlock_last(l, "wire-lock");
	dl_expect_message(sub, "redisson_lock__channel:{wire-lock}", "0", 2000);
	expect_no_message(sub, 300);

	/* Nothing remains: no unlock latch either. */
	assert_no_keys_left();

	redisFree(sub);
	close_lock(l, c);
}

Test(rlock_wire, leased_hold_ttl_and_partial_release_keeps_lease, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "lease-lock");

	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000), 0, "%s", dlock_lock_errmsg(l));
	assert_mine(c, "lease-lock", "1");
	assert_pttl("lease-lock", 9000, 10000, "while held");

	/* Redisson's testRemainTimeToLive2: a partial release keeps the lease. */
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000), 0);
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000), 0);
	assert_mine(c, "lease-lock", "3");
	cr_assert_eq(dlock_lock_release(l, NULL), 0);
	cr_assert_eq(dlock_lock_release(l, NULL), 0);
	assert_mine(c, "lease-lock", "1");
	assert_pttl("lease-lock", 9000, 10000, "after partial release");
	int64_t ttl = 0;
	cr_assert_eq(dlock_lock_remaining_ttl_ms(&ttl, l), 0);
	cr_assert(ttl > 9000 && ttl <= 10000, "remaining_ttl %" PRId64, ttl);

	cr_assert_eq(dlock_lock_release(l, NULL), 0);
	assert_key_absent("lease-lock");
	cr_assert_eq(dlock_lock_remaining_ttl_ms(&ttl, l), 0);
	cr_assert_eq(ttl, -2);

	close_lock(l, c);
}

Test(rlock_wire, braced_name_uses_channel_without_added_braces, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "a{b}c");

	redisContext *sub = dl_subscribe(rh_server_port(srv), "redisson_lock__channel:a{b}c");
	redisContext *wrong = dl_subscribe(rh_server_port(srv), "redisson_lock__channel:{a{b}c}");

	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s", dlock_lock_errmsg(l));
	assert_mine(c, "a{b}c", "1");
	unlock_last(l, "a{b}c");
	dl_expect_message(sub, "redisson_lock__channel:a{b}c", "0", 2000);
	expect_no_message(sub, 200);
	expect_no_message(wrong, 100);

	assert_no_keys_left();

	redisFree(sub);
	redisFree(wrong);
	close_lock(l, c);
}

/* ---- 2. unlock by a non-owner ------------------------------------------- */

typedef struct unlock_try {
	dlock_lock *lock;
	int rc;
	char msg[512];
} unlock_try;

static void *unlock_thread(void *arg)
{
	unlock_try *u = arg;

	u->rc = dlock_lock_release(u->lock, NULL);
	snprintf(u->msg, sizeof u->msg, "%s", dlock_lock_errmsg(u->lock));
	return NULL;
}

Test(rlock_wire, unlock_by_non_owner_is_refused_and_changes_nothing, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "owned");
	char node[64], before[512], after[512];
	node_label(node, sizeof node);

	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 20000), 0);
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 20000), 0);
	hash_snapshot("owned", before, sizeof before);

	/* Another thread (another owner on the same client). */
	unlock_try u = { .lock = l, .rc = 1 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, unlock_thread, &u), 0);
	cr_assert_eq(pthread_join(th, NULL), 0);
	cr_assert_eq(u.rc, DLOCK_ENOTOWNER, "rc %d (%s)", u.rc, dlock_strerror(u.rc));
	cr_assert_not_null(strstr(u.msg, node), "message \"%s\" should name %s", u.msg, node);
	hash_snapshot("owned", after, sizeof after);
	cr_assert_str_eq(after, before);

	/* An explicit other owner. */
	int rc = dlock_lock_release(l, "someone-else:1");
	cr_assert_eq(rc, DLOCK_ENOTOWNER, "rc %d", rc);
	cr_assert_not_null(strstr(dlock_lock_errmsg(l), node), "message \"%s\" should name %s",
			dlock_lock_errmsg(l), node);
	hash_snapshot("owned", after, sizeof after);
	cr_assert_str_eq(after, before);
	assert_pttl("owned", 15000, 20000, "after a refused unlock");

	/* The owner itself still holds twice. */
	int64_t n = 0;
	cr_assert_eq(dlock_lock_hold_count(&n, l, NULL), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(dlock_lock_release(l, NULL), 0);
	unlock_last(l, "owned");

	close_lock(l, c);
}

/* ---- 3. lease expiry lets the next owner in ------------------------------ */

Test(rlock_wire, leased_lock_is_taken_by_waiter_after_lease, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "leased");

	int64_t t0 = rh_now_ms();
	cr_assert_eq(dlock_lock_acquire(l, "owner-A:1", 0, 2000), 0, "%s", dlock_lock_errmsg(l));
	assert_hash_is("leased", "owner-A:1", "1");

	int rc = dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 5000);
	int64_t elapsed = rh_now_ms() - t0;
	cr_assert_eq(rc, 0, "%s", dlock_lock_errmsg(l));
	cr_assert(elapsed >= 1800 && elapsed <= 2600, "acquired after %" PRId64 " ms, want ~2000",
			elapsed);
	assert_mine(c, "leased", "1");
	assert_pttl("leased", 4000, 5000, "of the new hold");

	unlock_last(l, "leased");
	close_lock(l, c);
}

/* ---- 4. try_lock against a held lock ------------------------------------- */

Test(rlock_wire, try_lock_gives_up_after_wait, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "held");

	/* A Redisson-style holder that never releases. */
	cr_assert_eq(rh_command_int(srv, "HSET held %s 1", "otheruuid:1"), 1);
	cr_assert_eq(rh_command_int(srv, "PEXPIRE held 30000"), 1);

	/* Gives up after its wait (~1000 ms); a single attempt (under 200 ms) at once. */
	dl_assert_try(l, 1000, 10000, DLOCK_ENOTACQUIRED, 950, 1400);
	dl_assert_try(l, 0, 10000, DLOCK_ENOTACQUIRED, 0, 199);

	/* Same with the watchdog lease. */
	int rc = dlock_lock_acquire(l, NULL, 0, DLOCK_LEASE_WATCHDOG);
	cr_assert_eq(rc, DLOCK_ENOTACQUIRED, "rc %d", rc);

	/* The holder is untouched; the waiter's subscription is gone. */
	assert_hash_is("held", "otheruuid:1", "1");
	assert_pttl("held", 25000, 30000, "of the untouched holder");
	dl_await_numsub(srv, "redisson_lock__channel:{held}", 0, 2000);

	close_lock(l, c);
}

/* ---- 5. wake-up by the unlock message ------------------------------------ */

Test(rlock_wire, unlock_wakes_waiter_promptly, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "wake");
	const char *holder = "holder-uuid:5";

	cr_assert_eq(dlock_lock_acquire(l, holder, 0, DLOCK_LEASE_WATCHDOG), 0, "%s",
			dlock_lock_errmsg(l));

	waiter w = { .client = c, .lock = l, .lease = 30000, .release = 1 };
	pthread_t th;
	start_waiter(&w, &th, "redisson_lock__channel:{wake}");

	int64_t before_unlock = rh_now_ms();
	int rc = dlock_lock_release(l, holder);
	int64_t unlocked_at = rh_now_ms();
	cr_assert_eq(rc, 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(pthread_join(th, NULL), 0);

	assert_woke(&w, before_unlock, unlocked_at, 150, "unlock");
	cr_assert_eq(w.count_after, 1);
	cr_assert_eq(w.unlock_rc, 0);
	assert_key_absent("wake");
	dl_await_numsub(srv, "redisson_lock__channel:{wake}", 0, 2000);

	close_lock(l, c);
}

/* ---- 6. force unlock wakes waiters and the watchdog learns the loss ------ */

/* The lost callback records into a dl_lost (tests/support). */
/* holder takes l with the watchdog lease; lost records l's lost callbacks. */
static void hold_watched(dlock_lock *l, const char *holder, dl_lost *lost)
{
	dl_lost_init(lost);
	cr_assert_eq(dlock_lock_set_lost_cb(l, dl_on_lost, lost), 0);
	cr_assert_eq(dlock_lock_acquire(l, holder, 0, DLOCK_LEASE_WATCHDOG), 0, "%s",
			dlock_lock_errmsg(l));
}

/* The lost callback ran exactly once, for `lock` and `owner`. */
static void assert_lost_once(dl_lost *lost, const dlock_lock *lock, const char *owner)
{
	pthread_mutex_lock(&lost->mu);
	cr_assert_eq(lost->fired, 1, "lost callback ran %d times", lost->fired);
	cr_assert_str_eq(lost->name, dlock_lock_name(lock));
	cr_assert_str_eq(lost->owner, owner);
	pthread_mutex_unlock(&lost->mu);
}

Test(rlock_wire, force_unlock_from_other_client_wakes_waiter_and_watchdog_sees_loss, .timeout = 30)
{
	dl_lost lost; /* what the holder's lost callback saw */
	dlock_client *a = open_client(900);
	dlock_client *b = open_client(30000);
	dlock_lock *la = dl_lock(a, "forced");
	dlock_lock *lb = dl_lock(b, "forced");
	const char *holder = "holder-uuid:6";

	hold_watched(la, holder, &lost);
	assert_pttl("forced", 800, 900, "with a 900 ms watchdog");
	cr_assert_eq(dlock_lock_check(la, holder), 0);

	/* A waiter on the holder's client. */
	waiter w = { .client = a, .lock = la, .lease = 30000, .release = 0 };
	pthread_t th;
	start_waiter(&w, &th, "redisson_lock__channel:{forced}");
	/* The watchdog has kept the key alive past several renewals. */
	cr_assert_eq(dlock_lock_check(la, holder), 0);

	int deleted = -1;
	int64_t before = rh_now_ms();
	int rc = dlock_lock_force_release(&deleted, lb);
	int64_t forced_at = rh_now_ms();
	cr_assert_eq(rc, 0, "%s", dlock_lock_errmsg(lb));
	cr_assert_eq(deleted, 1);
	cr_assert_eq(pthread_join(th, NULL), 0);
	assert_woke(&w, before, forced_at, 150, "force unlock");

	/* The holder's client finds out at its next renewal (every 300 ms). */
	int64_t deadline = forced_at + 1000;
	while ((rc = dlock_lock_check(la, holder)) == 0 && rh_now_ms() < deadline)
		sleep_ms(10);
	cr_assert_eq(rc, DLOCK_ELOST, "check %d %" PRId64 " ms after the force unlock", rc,
			rh_now_ms() - forced_at);
	/* The callback runs on the background thread; wait for it (bounded). */
	dl_lost_wait(&lost, deadline + 500);
	assert_lost_once(&lost, la, holder);

	/* The waiter's hold is intact; the lost holder cannot release it. */
	assert_hash_is("forced", w.owner, "1");
	rc = dlock_lock_release(la, holder);
	cr_assert_eq(rc, DLOCK_ELOST, "unlock of a lost hold: %d", rc);
	assert_hash_is("forced", w.owner, "1");

	/* Clean up the waiter's hold. */
	cr_assert_eq(dlock_lock_release(la, w.owner), 0);
	assert_key_absent("forced");

	dl_free_locks(la, lb);
	dl_close_clients(a, b);
	dl_lost_destroy(&lost);
}

Test(rlock_wire, force_unlock_through_same_client_marks_loss_at_once, .timeout = 30)
{
	dl_lost lost; /* what l1's lost callback saw */
	dlock_client *a = open_client(30000);
	dlock_lock *l1 = dl_lock(a, "forced-same");
	dlock_lock *l2 = dl_lock(a, "forced-same");
	const char *holder = "holder-uuid:7";

	hold_watched(l1, holder, &lost);
	int deleted = -1;
	cr_assert_eq(dlock_lock_force_release(&deleted, l2), 0);
	cr_assert_eq(deleted, 1);
	cr_assert_eq(dlock_lock_check(l1, holder), DLOCK_ELOST);
	pthread_mutex_lock(&lost.mu);
	cr_assert_eq(lost.fired, 1);
	cr_assert_str_eq(lost.owner, holder);
	pthread_mutex_unlock(&lost.mu);
	assert_key_absent("forced-same");

	/* Nothing left to delete. */
	deleted = -1;
	cr_assert_eq(dlock_lock_force_release(&deleted, l2), 0);
	cr_assert_eq(deleted, 0);

	dl_free_locks(l1, l2);
	dlock_client_free(a);
	dl_lost_destroy(&lost);
}

/* ---- 7. interoperation with Redisson's scripts ---------------------------- */

/* A Redisson script's reply (`what` runs it): NULL -> -3, else the integer. */
static int64_t script_reply(redisReply *r, const char *what)
{
	cr_assert_not_null(r);
	cr_assert(r->type == REDIS_REPLY_NIL || r->type == REDIS_REPLY_INTEGER,
			"Redisson %s: reply type %d %s", what, r->type,
			r->type == REDIS_REPLY_ERROR ? r->str : "");
	int64_t v = r->type == REDIS_REPLY_NIL ? -3 : r->integer;
	freeReplyObject(r);
	return v;
}

/* Redisson's acquire for `owner`: NULL reply (acquired) -> -3, else the PTTL. */
static int64_t redisson_acquire(const char *name, const char *owner, int64_t lease)
{
	return script_reply(rh_command(srv, "EVAL %s 1 %s %lld %s", dl_redisson_acquire, name,
					    (long long)lease, owner),
			"acquire");
}

/* Redisson's unlock for `owner`: NULL reply -> -3, else 0 or 1. */
static int64_t redisson_unlock(const char *name, const char *owner, const char *request_id)
{
	char channel[256], latch[256];

	snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
	snprintf(latch, sizeof latch, "redisson_unlock_latch:{%s}:%s", name, request_id);
	return script_reply(rh_command(srv, "EVAL %s 3 %s %s %s 0 30000 %s publish 16000",
					    dl_redisson_unlock, name, channel, latch, owner),
			"unlock");
}

Test(rlock_wire, redisson_holder_excludes_dlock, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "interop-a");

	cr_assert_eq(redisson_acquire("interop-a", DL_REDISSON_OWNER, 30000), -3);
	int rc = dlock_lock_acquire(l, NULL, 0, DLOCK_LEASE_WATCHDOG);
	cr_assert_eq(rc, DLOCK_ENOTACQUIRED, "rc %d", rc);
	rc = dlock_lock_acquire(l, NULL, 0, 10000);
	cr_assert_eq(rc, DLOCK_ENOTACQUIRED, "rc %d", rc);
	assert_hash_is("interop-a", DL_REDISSON_OWNER, "1");
	int is_locked = 0, held = 1;
	cr_assert_eq(dlock_lock_is_locked(&is_locked, l), 0);
	cr_assert_eq(is_locked, 1);
	cr_assert_eq(dlock_lock_is_held(&held, l, NULL), 0);
	cr_assert_eq(held, 0);
	cr_assert_eq(dlock_lock_is_held(&held, l, DL_REDISSON_OWNER), 0);
	cr_assert_eq(held, 1);

	/* And the reverse: a dlock holder excludes Redisson (reply = PTTL). */
	cr_assert_eq(redisson_unlock("interop-a", DL_REDISSON_OWNER,
				     "aaaa0000aaaa0000aaaa0000aaaa0000"),
			1);
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), 0);
	int64_t t = redisson_acquire("interop-a", DL_REDISSON_OWNER, 30000);
	cr_assert(t > 9000 && t <= 10000, "Redisson acquire against dlock holder: %" PRId64, t);
	cr_assert_eq(dlock_lock_release(l, NULL), 0);

	close_lock(l, c);
}

Test(rlock_wire, redisson_unlock_wakes_dlock_waiter, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "interop-b");

	cr_assert_eq(redisson_acquire("interop-b", DL_REDISSON_OWNER, 30000), -3);
	waiter w = { .client = c, .lock = l, .lease = 30000, .release = 1 };
	pthread_t th;
	start_waiter(&w, &th, "redisson_lock__channel:{interop-b}");

	int64_t before = rh_now_ms();
	cr_assert_eq(redisson_unlock("interop-b", DL_REDISSON_OWNER,
				     "bbbb0000bbbb0000bbbb0000bbbb0000"),
			1);
	int64_t unlocked_at = rh_now_ms();
	cr_assert_eq(pthread_join(th, NULL), 0);
	assert_woke(&w, before, unlocked_at, 200, "Redisson unlock");
	cr_assert_eq(w.count_after, 1);
	cr_assert_eq(w.unlock_rc, 0);
	assert_key_absent("interop-b");

	close_lock(l, c);
}

Test(rlock_wire, dlock_unlock_wakes_redisson_subscriber, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "interop-c");

	redisContext *sub = dl_subscribe(rh_server_port(srv), "redisson_lock__channel:{interop-c}");
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 30000), 0);
	int64_t t = redisson_acquire("interop-c", DL_REDISSON_OWNER, 30000);
	cr_assert(t > 25000 && t <= 30000, "Redisson acquire while dlock holds: %" PRId64, t);

	cr_assert_eq(dlock_lock_release(l, NULL), 0);
	dl_expect_message(sub, "redisson_lock__channel:{interop-c}", "0", 2000);
	cr_assert_eq(redisson_acquire("interop-c", DL_REDISSON_OWNER, 30000), -3);
	assert_hash_is("interop-c", DL_REDISSON_OWNER, "1");
	/* dlock now sees a Redisson holder. */
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), DLOCK_ENOTACQUIRED);

	redisFree(sub);
	close_lock(l, c);
}

Test(rlock_wire, redisson_unlock_reads_dlock_reentrant_hash, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "interop-d");
	char owner[64];
	dl_owner(c, owner, sizeof owner);

	redisContext *sub = dl_subscribe(rh_server_port(srv), "redisson_lock__channel:{interop-d}");
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 20000), 0);
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 20000), 0);
	assert_hash_is("interop-d", owner, "2");

	/* A Redisson unlock for another owner is refused (nil). */
	cr_assert_eq(redisson_unlock("interop-d", DL_REDISSON_OWNER,
				     "dddd0000dddd0000dddd0000dddd0000"),
			-3);
	cr_assert_eq(redisson_unlock("interop-d", owner, "dddd0000dddd0000dddd0000dddd0001"), 0);
	assert_hash_is("interop-d", owner, "1");
	expect_no_message(sub, 100);
	cr_assert_eq(redisson_unlock("interop-d", owner, "dddd0000dddd0000dddd0000dddd0002"), 1);
	assert_key_absent("interop-d");
	dl_expect_message(sub, "redisson_lock__channel:{interop-d}", "0", 2000);

	/* dlock's own unlock now finds nothing to release: the hold it had
	 * recorded is gone, which it reports as a loss (a second unlock, with
	 * no record left, is "not owner"). */
	int rc = dlock_lock_release(l, NULL);
	cr_assert_eq(rc, DLOCK_ELOST, "rc %d", rc);
	cr_assert_eq(dlock_lock_release(l, NULL), DLOCK_ENOTOWNER);
	assert_key_absent("interop-d");

	redisFree(sub);
	close_lock(l, c);
}

/* ---- 8. explicit owner across threads ------------------------------------ */

typedef struct as_op {
	dlock_lock *lock;
	const char *owner;
	int acquire; /* 1: try_as(owner, 0, 10000); 0: unlock_as(owner) */
	int rc;
	int64_t count;
	int count_rc;
} as_op;

static void *as_thread(void *arg)
{
	as_op *op = arg;

	op->rc = op->acquire ? dlock_lock_acquire(op->lock, op->owner, 0, 10000)
			     : dlock_lock_release(op->lock, op->owner);
	op->count_rc = dlock_lock_hold_count(&op->count, op->lock, op->owner);
	return NULL;
}

static void run_as(as_op *op)
{
	pthread_t th;

	cr_assert_eq(pthread_create(&th, NULL, as_thread, op), 0);
	cr_assert_eq(pthread_join(th, NULL), 0);
}

Test(rlock_wire, explicit_owner_acquire_and_release_in_different_threads, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "pool-lock");
	char owner[64];
	/* An owner built the documented way, for a thread id that is not ours. */
	cr_assert_eq(dlock_client_owner(owner, c, 424242), 0);

	as_op op = { .lock = l, .owner = owner, .acquire = 1 };
	run_as(&op);
	cr_assert_eq(op.rc, 0, "try_as: %d", op.rc);
	cr_assert_eq(op.count_rc, 0);
	cr_assert_eq(op.count, 1);
	assert_hash_is("pool-lock", owner, "1");

	op = (as_op){ .lock = l, .owner = owner, .acquire = 1 };
	run_as(&op);
	cr_assert_eq(op.rc, 0);
	cr_assert_eq(op.count, 2);
	assert_hash_is("pool-lock", owner, "2");

	/* The main thread is not the owner. */
	cr_assert_eq(dlock_lock_release(l, NULL), DLOCK_ENOTOWNER);
	int64_t n = -1;
	cr_assert_eq(dlock_lock_hold_count(&n, l, owner), 0);
	cr_assert_eq(n, 2);

	op = (as_op){ .lock = l, .owner = owner, .acquire = 0 };
	run_as(&op);
	cr_assert_eq(op.rc, 0, "unlock_as: %d", op.rc);
	cr_assert_eq(op.count, 1);
	assert_hash_is("pool-lock", owner, "1");

	op = (as_op){ .lock = l, .owner = owner, .acquire = 0 };
	run_as(&op);
	cr_assert_eq(op.rc, 0, "unlock_as: %d", op.rc);
	cr_assert_eq(op.count_rc, 0);
	cr_assert_eq(op.count, 0);
	assert_key_absent("pool-lock");

	op = (as_op){ .lock = l, .owner = owner, .acquire = 0 };
	run_as(&op);
	cr_assert_eq(op.rc, DLOCK_ENOTOWNER);

	close_lock(l, c);
}

/*
 * An explicit owner may be shared (the header suggests sharing a Redisson
 * client's owner): every acquire by that owner, wherever it comes from, is
 * one more hold, and it takes as many releases.
 */
Test(rlock_wire, explicit_owner_shared_with_redisson_counts_every_acquire, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "shared-owner");

	cr_assert_eq(dlock_lock_acquire(l, DL_REDISSON_OWNER, 0, 10000), 0, "%s",
			dlock_lock_errmsg(l));
	assert_hash_is("shared-owner", DL_REDISSON_OWNER, "1");
	/* The Java side re-enters with the same owner. */
	cr_assert_eq(redisson_acquire("shared-owner", DL_REDISSON_OWNER, 10000), -3);
	assert_hash_is("shared-owner", DL_REDISSON_OWNER, "2");
	/* dlock re-enters once more: three acquires, count 3. */
	cr_assert_eq(dlock_lock_acquire(l, DL_REDISSON_OWNER, 0, 10000), 0, "%s",
			dlock_lock_errmsg(l));
	int64_t n = -1;
	cr_assert_eq(dlock_lock_hold_count(&n, l, DL_REDISSON_OWNER), 0);
	cr_assert_eq(n, 3, "three acquires by one owner left hold count %" PRId64, n);

	close_lock(l, c);
}

/* The same with two dlock clients sharing one explicit owner. */
Test(rlock_wire, explicit_owner_shared_by_two_clients_counts_every_acquire, .timeout = 30)
{
	dlock_client *a = open_client(30000);
	dlock_client *b = open_client(30000);
	dlock_lock *la = dl_lock(a, "shared-owner2");
	dlock_lock *lb = dl_lock(b, "shared-owner2");
	const char *owner = "job-42:1";

	cr_assert_eq(dlock_lock_acquire(la, owner, 0, 10000), 0);
	cr_assert_eq(dlock_lock_acquire(lb, owner, 0, 10000), 0);
	assert_hash_is("shared-owner2", owner, "2");
	cr_assert_eq(dlock_lock_acquire(la, owner, 0, 10000), 0);
	int64_t n = -1;
	cr_assert_eq(dlock_lock_hold_count(&n, la, owner), 0);
	cr_assert_eq(n, 3, "three acquires by one owner left hold count %" PRId64, n);

	/* Three releases free it. */
	cr_assert_eq(dlock_lock_release(lb, owner), 0);
	cr_assert_eq(dlock_lock_release(la, owner), 0);
	cr_assert_eq(dlock_lock_release(la, owner), 0);
	assert_key_absent("shared-owner2");

	dlock_lock_free(la);
	dlock_lock_free(lb);
	dlock_client_free(a);
	dlock_client_free(b);
}

/*
 * The calling thread's own owner is this client's alone, so a surplus on the
 * server can only be acquires of ours whose replies were lost (a paused
 * server ran them late): the next acquire adopts it instead of counting on
 * top, so the unlocks the caller makes free the lock. (An explicit owner may
 * be shared, and counts every acquire: see above.)
 */
Test(rlock_wire, own_owner_surplus_from_lost_replies_is_adopted, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = dl_lock(c, "surplus");
	dlock_lock *f = NULL;
	char owner[64];
	int64_t n = -1, token = -1;

	cr_assert_eq(dlock_client_owner(owner, c, dlock_thread_id()), 0);
	cr_assert_eq(rh_command_int(srv, "HSET surplus %s 3", owner), 1);
	cr_assert_eq(rh_command_int(srv, "PEXPIRE surplus 10000"), 1);
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), 0, "%s", dlock_lock_errmsg(l));
	assert_hash_is("surplus", owner, "1");
	cr_assert_eq(dlock_lock_hold_count(&n, l, NULL), 0);
	cr_assert_eq(n, 1, "hold count %" PRId64 " after one acquire", n);
	/* Re-entry still counts. */
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), 0, "%s", dlock_lock_errmsg(l));
	assert_hash_is("surplus", owner, "2");
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	cr_assert_eq(dlock_lock_release(l, NULL), 0, "%s", dlock_lock_errmsg(l));
	assert_key_absent("surplus");
	cr_assert_eq(dlock_lock_check(l, NULL), DLOCK_ENOTOWNER);

	/* Fenced: the adopted hold keeps the token its own acquire drew. */
	cr_assert_eq(dlock_lock_new(&f, c, "surplus-f", dl_kind(DLOCK_LOCK_FENCED)), 0);
	cr_assert_eq(rh_command_int(srv, "HSET surplus-f %s 2", owner), 1);
	cr_assert_eq(rh_command_int(srv, "PEXPIRE surplus-f 10000"), 1);
	redisReply *r = rh_command(srv, "SET %s 5", "redisson_lock_token:{surplus-f}");
	cr_assert_not_null(r);
	freeReplyObject(r);
	cr_assert_eq(dlock_lock_acquire_fenced(&token, f, NULL, 0, 10000), 0, "%s",
			dlock_lock_errmsg(f));
	cr_assert_eq(token, 5, "token %" PRId64 ": an adopted hold draws no new token", token);
	assert_hash_is("surplus-f", owner, "1");
	cr_assert_eq(dlock_lock_release(f, NULL), 0, "%s", dlock_lock_errmsg(f));
	assert_key_absent("surplus-f");

	dlock_lock_free(f);
	close_lock(l, c);
}

/* ---- 9. argument validation ---------------------------------------------- */

Test(rlock_wire, bad_arguments_are_einval_and_write_nothing, .timeout = 30)
{
	dlock_client *c = open_client(30000);
	dlock_lock *l = NULL;

	cr_assert_eq(rh_command_int(srv, "DBSIZE"), 0);
	redisReply *r = rh_command(srv, "CONFIG RESETSTAT");
	cr_assert_not_null(r);
	freeReplyObject(r);

	cr_assert_eq(dlock_lock_new(&l, c, NULL, NULL), DLOCK_EINVAL);
	cr_assert_null(l);
	cr_assert_eq(dlock_lock_new(&l, c, "", NULL), DLOCK_EINVAL);
	cr_assert_null(l);
	cr_assert_str_neq(dlock_errmsg_last(), "");
	cr_assert_eq(dlock_lock_new(&l, NULL, "x", NULL), DLOCK_EINVAL);
	cr_assert_eq(dlock_lock_new(NULL, c, "x", NULL), DLOCK_EINVAL);
	{
		size_t big = 64 * 1024 + 1;
		char *name = malloc(big + 1);
		cr_assert_not_null(name);
		memset(name, 'n', big);
		name[big] = '\0';
		cr_assert_eq(dlock_lock_new(&l, c, name, NULL), DLOCK_EINVAL);
		cr_assert_null(l);
		free(name);
	}

	l = dl_lock(c, "valid");
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 0), DLOCK_EINVAL);
	cr_assert_eq(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, -5), DLOCK_EINVAL);
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 0), DLOCK_EINVAL);
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, -5), DLOCK_EINVAL);
	cr_assert_eq(dlock_lock_acquire(l, NULL, -7, 1000), DLOCK_EINVAL);
	cr_assert_eq(dlock_lock_acquire(l, NULL, -7, DLOCK_LEASE_WATCHDOG), DLOCK_EINVAL);
	cr_assert_str_neq(dlock_lock_errmsg(l), "");
	cr_assert_eq(dlock_lock_acquire(l, "", 0, 1000), DLOCK_EINVAL);
	cr_assert_eq(dlock_lock_release(l, ""), DLOCK_EINVAL);
	int out = 0;
	int64_t n = 0;
	cr_assert_eq(dlock_lock_is_held(&out, l, ""), DLOCK_EINVAL);
	cr_assert_eq(dlock_lock_hold_count(&n, l, ""), DLOCK_EINVAL);
	cr_assert_eq(dlock_lock_acquire(NULL, NULL, DLOCK_WAIT_FOREVER, 1000), DLOCK_EINVAL);
	cr_assert_eq(dlock_lock_acquire(NULL, NULL, 0, 1000), DLOCK_EINVAL);
	cr_assert_eq(dlock_lock_release(NULL, NULL), DLOCK_EINVAL);

	/* Nothing reached Redis: no keys, no script ran. */
	cr_assert_eq(rh_command_int(srv, "DBSIZE"), 0);
	r = rh_command(srv, "INFO commandstats");
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STRING);
	cr_assert_null(strstr(r->str, "cmdstat_eval"), "a script ran:\n%s", r->str);
	cr_assert_null(strstr(r->str, "cmdstat_hset"), "a write ran:\n%s", r->str);
	freeReplyObject(r);

	close_lock(l, c);
}
