/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A release writes no key of its own (there is no unlock latch: it is made
 * safe to repeat by the count the client believes it holds), and one that
 * runs twice on the server - its first answer lost with its connection -
 * still takes one hold and publishes once. Also: a key the client deletes
 * after use (a semaphore's receipt) goes even when every pooled connection
 * is busy at that moment.
 *
 * Reaches inside (tests/CMakeLists.txt lists it): the busy pool is made
 * deterministic by borrowing the pool's only connection, and the release
 * script is run by hand to repeat it.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <dlock.h>

#include "core/drive/client.h"
#include "core/mux/mux.h"
#include "core/base/error.h"
#include "core/base/time.h"
#include "single/acquire.h"
#include "single/scripts.h"
#include "redis_harness.h"
#include "support.h"

TestSuite(latch, .init = dl_server_start, .fini = dl_server_stop);

/* How long a deleted-by-design key may stay: the DEL's short ride-along delay, on a busy machine. */
#define GONE_WITHIN_MS 1000

static dlock_client *pool_of(int size)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	o.pool_size = size;
	return dl_client_opts(rh_server_uri(dl_srv), &o);
}

/* The keys left under `pattern`, after waiting up to GONE_WITHIN_MS for them to go. */
static int64_t keys_left(const char *pattern, int64_t *waited_ms)
{
	int64_t t0 = rh_now_ms(), n;
	for (;;) {
		redisReply *r = rh_command(dl_srv, "KEYS %s", pattern);
		cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
		n = (int64_t)r->elements;
		freeReplyObject(r);
		if (n == 0 || rh_now_ms() - t0 >= GONE_WITHIN_MS)
			break;
		dl_sleep_ms(10);
	}
	*waited_ms = rh_now_ms() - t0;
	return n;
}

Test(latch, a_delete_asked_while_the_only_connection_is_busy_still_runs, .timeout = 20)
{
	dlock_client *c = pool_of(1);
	static const char key[] = "{busy}:receipt:00000000000000000000000000000001";
	dlock__conn *busy = NULL;
	int64_t waited;

	cr_assert_eq(rh_command_int(dl_srv, "EXISTS %s", key), 0);
	redisReply *set = rh_command(dl_srv, "SET %s 1 PX 20000", key);
	cr_assert(set != NULL && set->type == REDIS_REPLY_STATUS);
	freeReplyObject(set);

	/* Another thread's command holds the pool's only connection when the
	 * key's deletion is asked for. */
	dl_pass(dlock__client_conn_get(c, &busy, dlock__deadline_in(5000)));
	dlock__client_forget(c, key, strlen(key));
	dlock__client_conn_put(c, busy);

	int64_t left = keys_left("{busy}:receipt:*", &waited);
	cr_assert_eq(left, 0, "the key is still there %lld ms after its connection came back (PTTL %lld ms)",
			(long long)waited, (long long)rh_command_int(dl_srv, "PTTL %s", key));
	dlock_client_free(c);
}

#define THREADS 4
#define ROUNDS 200

typedef struct worker {
	dlock_client *c;
	int id;
	dl_failures *fail;
} worker;

/* Lock and unlock names of its own, re-entrant every other round. */
static void *churn(void *arg)
{
	worker *w = arg;
	char name[32];

	for (int i = 0; i < ROUNDS; i++) {
		snprintf(name, sizeof name, "churn:%d:%d", w->id, i % 8);
		dlock_lock *l = NULL;
		int rc = dlock_lock_new(&l, w->c, name, NULL);
		if (rc == 0)
			rc = dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG);
		if (rc == 0 && i % 2 == 1 && (rc = dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG)) == 0)
			rc = dlock_lock_release(l, NULL);
		if (rc == 0)
			rc = dlock_lock_release(l, NULL);
		if (rc != 0)
			dl_failures_record(w->fail, "%s round %d: %s (%s)", name, i, dlock_strerror(rc),
					l ? dlock_lock_errmsg(l) : dlock_errmsg_last());
		dlock_lock_free(l);
		if (rc != 0)
			break;
	}
	return NULL;
}

/* calls=N of `cmd` in INFO commandstats (0 when never called). */
static int64_t calls_of(const char *cmd)
{
	redisReply *r = rh_command(dl_srv, "INFO commandstats");
	char want[64];
	const char *p;
	long long n = 0;

	cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
	snprintf(want, sizeof want, "cmdstat_%s:calls=", cmd);
	p = strstr(r->str, want);
	if (p != NULL)
		n = strtoll(p + strlen(want), NULL, 10);
	freeReplyObject(r);
	return n;
}

Test(latch, unlocks_write_no_key_of_their_own, .timeout = 60)
{
	dlock_client *c = pool_of(1);
	pthread_t th[THREADS];
	worker w[THREADS];
	dl_failures fail;

	redisReply *r = rh_command(dl_srv, "CONFIG RESETSTAT");
	cr_assert(r != NULL && r->type != REDIS_REPLY_ERROR);
	freeReplyObject(r);
	dl_failures_init(&fail);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (worker){ c, i, &fail };
		cr_assert_eq(pthread_create(&th[i], NULL, churn, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	dl_failures_assert_none(&fail);

	/* Nothing but the locks was ever written: no SET, no DEL after the
	 * fact, and nothing is left to expire once they are released. */
	cr_assert_eq(calls_of("set"), 0, "%lld SETs for %d lock+unlock pairs",
			(long long)calls_of("set"), THREADS * ROUNDS);
	cr_assert_eq(calls_of("del"), THREADS * ROUNDS,
			"%lld DELs for %d releases of a last hold (one each, in the script)",
			(long long)calls_of("del"), THREADS * ROUNDS);
	cr_assert_eq(rh_command_int(dl_srv, "DBSIZE"), 0, "keys left right after the last unlock");
	dlock_client_free(c);
}

/* owner's count on `name` as the server has it (-1: no field). */
static long long count_of(const char *name, const char *owner)
{
	redisReply *r = rh_command(dl_srv, "HGET %s %s", name, owner);
	long long n = -1;

	cr_assert(r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL));
	if (r->type == REDIS_REPLY_STRING)
		n = strtoll(r->str, NULL, 10);
	freeReplyObject(r);
	return n;
}

/* The reply's integer (-100 for nil). */
static long long int_of(redisReply *r)
{
	cr_assert(r != NULL && (r->type == REDIS_REPLY_INTEGER || r->type == REDIS_REPLY_NIL),
			"reply type %d %s", r ? r->type : -1,
			r && r->type == REDIS_REPLY_ERROR ? r->str : "");
	return r->type == REDIS_REPLY_NIL ? -100 : r->integer;
}

/* Send a script call once, as a run of the one driver (core/mux/mux.h),
 * and take its reply. */
static int send_call(dlock_client *c, const dlock__call *call, redisReply **out)
{
	dlock__mux_op op = { .client = c, .call = call, .no_retry = 1 };
	int rc = dlock__mux_run(&op, 1, NULL, NULL);

	if (rc == 0 && op.rc < 0)
		rc = dlock__seterr(op.rc, "%s", op.errmsg);
	*out = op.reply;
	op.reply = NULL;
	dlock__mux_clear(&op, 1);
	return rc;
}

/*
 * What a connection dropped between the server's run of an unlock and its
 * reply makes the client do: send the same unlock again, marked as a
 * repeat (core/mux/mux_group.c). Here both sends are made by hand, the
 * first one's answer ignored: the hold is taken once, the repeat gets the
 * first answer, and the client's record ends right.
 */
Test(latch, an_unlock_sent_twice_takes_one_hold, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_lock *l = dl_lock(c, "twice");
	dlock__release rel;
	redisReply *first = NULL, *again = NULL;
	char owner[64];

	dl_owner(c, owner, sizeof owner);
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 30000));
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 30000));
	dl_pass(dlock__release_prepare(l, NULL, &rel));
	cr_assert(rel.retry_safe, "a hold this client counted must be safe to repeat");
	dl_pass(send_call(c, &rel.call, &first)); /* its answer "lost" */
	rel.repeat[0] = '1';
	dl_pass(send_call(c, &rel.call, &again));
	cr_assert_eq(int_of(first), 1);
	cr_assert_eq(int_of(again), 1, "the repeat answers as the first send did");
	dl_pass(dlock__release_finish(l, &rel, again));
	dlock__release_clear(l, &rel);
	freeReplyObject(first);
	freeReplyObject(again);
	cr_assert_eq(count_of("twice", owner), 1, "holds left after one unlock sent twice");
	cr_assert_eq(rh_command_int(dl_srv, "DBSIZE"), 1, "only the lock: no latch key");

	/* The last hold, sent twice too: one release, one message. */
	redisContext *sub = dl_subscribe(rh_server_port(dl_srv), "redisson_lock__channel:{twice}");
	dl_pass(dlock__release_prepare(l, NULL, &rel));
	dl_pass(send_call(c, &rel.call, &first));
	rel.repeat[0] = '1';
	dl_pass(send_call(c, &rel.call, &again));
	cr_assert_eq(int_of(first), 0);
	cr_assert_eq(int_of(again), 0, "the repeat of the last hold's release: released");
	dl_pass(dlock__release_finish(l, &rel, again));
	dlock__release_clear(l, &rel);
	freeReplyObject(first);
	freeReplyObject(again);
	cr_assert_eq(rh_command_int(dl_srv, "DBSIZE"), 0, "the lock is gone, no latch key");
	dl_expect_message(sub, "redisson_lock__channel:{twice}", "0", 2000);
	redisReply *m = dl_next_reply(sub, 300);
	cr_assert_null(m, "a second unlock message: the repeat published again");
	int held = 1;
	dl_pass(dlock_lock_is_held(&held, l, NULL));
	cr_assert_eq(held, 0);
	redisFree(sub);
	dlock_lock_free(l);
	dlock_client_free(c);
}

/* The real resend: the server closed the pooled connection while it was
 * idle, so the unlock is sent again on a new one, marked as a repeat -
 * and, since the first send never ran, it does the release. */
Test(latch, an_unlock_resent_on_a_new_connection_releases_once, .timeout = 30)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 0, 0);
	dlock_lock *l = dl_lock(c, "killed");
	char owner[64];

	dl_owner(c, owner, sizeof owner);
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 30000));
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 30000));
	cr_assert_geq(rh_command_int(dl_srv, "CLIENT KILL TYPE normal"), 1);
	dl_pass(dlock_lock_release(l, NULL));
	cr_assert_eq(count_of("killed", owner), 1, "one unlock, resent once, took one hold");
	cr_assert_geq(rh_command_int(dl_srv, "CLIENT KILL TYPE normal"), 1);
	dl_pass(dlock_lock_release(l, NULL));
	cr_assert_eq(rh_command_int(dl_srv, "DBSIZE"), 0, "the lock is gone, no latch key");
	dlock_lock_free(l);
	dlock_client_free(c);
}

/* The release script by hand: owner, believed count, repeat flag. */
static redisReply *release(const char *owner, const char *believed, const char *repeat)
{
	return rh_command(dl_srv, "EVAL %s 2 rep redisson_lock__channel:{rep} 0 0 %s %s %s",
			dlock__script_release.body, owner, believed, repeat);
}

static long long release_int(const char *owner, const char *believed, const char *repeat)
{
	redisReply *r = release(owner, believed, repeat);
	long long v = int_of(r);

	freeReplyObject(r);
	return v;
}

Test(latch, a_repeat_answers_as_the_first_send_did, .timeout = 30)
{
	/* Held three times: each release sent twice takes one hold. */
	rh_command_int(dl_srv, "HSET rep me:1 3");
	cr_assert_eq(release_int("me:1", "3", "0"), 2);
	cr_assert_eq(release_int("me:1", "3", "1"), 2, "the repeat answers as the first did");
	cr_assert_eq(count_of("rep", "me:1"), 2);
	/* A repeat whose first send never ran does the release. */
	cr_assert_eq(release_int("me:1", "2", "1"), 1);
	cr_assert_eq(release_int("me:1", "1", "0"), 0);
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS rep"), 0);
	cr_assert_eq(release_int("me:1", "1", "1"), 0, "the last hold's repeat: released");

	/* Taken by another owner since: the repeat still says released; a
	 * first send says others hold it (-2, a brain split); an unknown
	 * belief is never taken for a repeat. */
	rh_command_int(dl_srv, "HSET rep other:1 1");
	cr_assert_eq(release_int("me:1", "1", "1"), 0);
	cr_assert_eq(release_int("me:1", "1", "0"), -2);
	cr_assert_eq(release_int("me:1", "-1", "1"), -2);
	cr_assert_eq(count_of("rep", "other:1"), 1, "others' hold untouched");
	rh_command_int(dl_srv, "DEL rep");
	cr_assert_eq(release_int("me:1", "1", "0"), -100, "gone: not held (nil)");
}
