/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MultiLock and RedLock operations on a loop the test drives (dlock/async.h):
 * a quorum taken and given back with no thread of dlock's, each member's
 * vote in the result, a member paused, a wait woken by the holder's
 * release, fenced tokens, and cancellations at random moments - before the
 * send, mid-quorum, while a member waits, with a server paused part of the
 * time - leaving nothing held on any server.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

#define N 3

static rh_server *srv[N];

static void start(void)
{
	cr_assert_eq(rh_servers_start(srv, N, NULL), 0, "could not start %d servers", N);
}

static void stop(void)
{
	for (int i = 0; i < N; i++)
		rh_server_free(srv[i]);
}

TestSuite(async_quorum, .init = start, .fini = stop, .timeout = 120);

typedef struct outcome {
	int calls; /* callbacks so far: must end at exactly 1 */
	int code;
	int64_t validity, token;
	size_t nmembers;
	dlock_vote votes[N];
	int starting; /* set while the starting call runs: a callback then is a bug */
	int inside;
} outcome;

static void note(dlock_op *op, const dlock_result *r, void *ud)
{
	outcome *o = ud;

	(void)op;
	o->calls++;
	o->code = r->code;
	o->validity = r->validity_ms;
	o->token = r->token;
	o->inside |= o->starting;
	o->nmembers = r->nmembers;
	for (size_t i = 0; i < r->nmembers && i < N; i++)
		o->votes[i] = r->members[i].vote;
	if (r->code < 0)
		cr_assert(r->message != NULL && r->message[0] != '\0', "code %d without a message",
				r->code);
}

/* A RedLock on `name` over the N servers, its clients on `loop`. */
static dlock_redlock *redlock_on(dlock_loop *loop, const char *name, int fenced)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	const char *uris[N];
	dlock_redlock *r = NULL;

	for (int i = 0; i < N; i++)
		uris[i] = rh_server_uri(srv[i]);
	co.loop = loop;
	co.command_timeout_ms = 500;
	ro.fenced = fenced;
	cr_assert_eq(dlock_redlock_new_from_uris(&r, uris, N, name, &co, &ro), 0, "%s",
			dlock_errmsg_last());
	return r;
}

static void run_until_done(dlock_loop *loop, outcome *o, size_t n, int64_t within_ms)
{
	int64_t until = rh_now_ms() + within_ms;
	size_t i, done = 0;

	while (rh_now_ms() < until) {
		cr_assert(dlock_loop_run(loop, 20) >= 0, "%s", dlock_errmsg_last());
		for (i = 0, done = 0; i < n; i++)
			done += o[i].calls > 0;
		if (done == n)
			return;
	}
	cr_assert_fail("%zu of %zu operations had their callback within %lld ms", done, n,
			(long long)within_ms);
}

static void acquire(dlock_redlock *r, const char *owner, int64_t wait, int64_t lease,
		dlock_op **op, outcome *o)
{
	o->starting = 1;
	cr_assert_eq(dlock_redlock_acquire_async(op, r, owner, wait, lease, note, o), 0, "%s",
			dlock_errmsg_last());
	o->starting = 0;
}

static void release(dlock_loop *loop, dlock_redlock *r, const char *owner)
{
	outcome o = { 0 };

	o.starting = 1;
	cr_assert_eq(dlock_redlock_release_async(NULL, r, owner, note, &o), 0);
	o.starting = 0;
	run_until_done(loop, &o, 1, 5000);
	cr_assert_eq(o.code, 0, "release of %s: %d", owner, o.code);
	cr_assert(!o.inside);
}

/* Servers on which `key` exists. */
static int held_on(const char *key)
{
	int n = 0;

	for (int i = 0; i < N; i++)
		n += rh_command_int(srv[i], "EXISTS %s", key) == 1;
	return n;
}

/* A release called back once a quorum let go (at most N - (N/2+1) servers
 * still hold `key`); the rest let go on the loop, within limit_ms. */
static void released_everywhere(dlock_loop *loop, const char *key, int64_t limit_ms)
{
	int64_t until = rh_now_ms() + limit_ms;

	cr_assert_leq(held_on(key), N - (N / 2 + 1), "fewer than a quorum let go of %s", key);
	while (held_on(key) > 0 && rh_now_ms() < until)
		cr_assert(dlock_loop_run(loop, 10) >= 0, "%s", dlock_errmsg_last());
	cr_assert_eq(held_on(key), 0, "%s still held on %d servers", key, held_on(key));
}

Test(async_quorum, a_redlock_on_the_callers_loop_with_no_thread_of_dlocks)
{
	int before = dl_count_threads();
	dlock_loop *loop = NULL;
	dlock_redlock *r;
	outcome a = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	r = redlock_on(loop, "aq:one", 0);
	acquire(r, "me:1", 0, DLOCK_LEASE_WATCHDOG, NULL, &a);
	cr_assert_eq(a.calls, 0, "the callback ran inside the call that started it");
	run_until_done(loop, &a, 1, 5000);
	cr_assert_eq(a.code, 0, "acquire: %d", a.code);
	cr_assert(a.validity > 20000, "validity %lld ms with the watchdog", (long long)a.validity);
	cr_assert_eq(a.nmembers, N);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(a.votes[i], DLOCK_VOTE_ACQUIRED, "member %d voted %d", i, a.votes[i]);
		cr_assert_eq(rh_command_int(srv[i], "HEXISTS aq:one me:1"), 1, "server %d", i);
	}
	cr_assert_eq(dl_count_threads(), before, "a client on the caller's loop started a thread");
	release(loop, r, "me:1");
	released_everywhere(loop, "aq:one", 3000);
	cr_assert_eq(a.calls, 1);
	dlock_redlock_free(r);
	dlock_loop_free(loop);
}

Test(async_quorum, a_paused_member_is_a_vote_short_not_a_failure)
{
	dlock_loop *loop = NULL;
	dlock_redlock *r;
	outcome a = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	r = redlock_on(loop, "aq:paused", 0);
	cr_assert_eq(rh_server_pause(srv[2]), 0);
	acquire(r, "me:2", 2000, 10000, NULL, &a);
	run_until_done(loop, &a, 1, 10000);
	cr_assert_eq(rh_server_resume(srv[2]), 0);
	cr_assert_eq(a.code, 0, "acquire with one of three paused: %d", a.code);
	cr_assert(a.votes[0] == DLOCK_VOTE_ACQUIRED && a.votes[1] == DLOCK_VOTE_ACQUIRED);
	cr_assert_neq(a.votes[2], DLOCK_VOTE_ACQUIRED, "the paused member voted yes");
	release(loop, r, "me:2");
	/* The paused member's acquire may run late: the release gave it back too. */
	for (int k = 0; k < 50 && held_on("aq:paused") > 0; k++)
		dlock_loop_run(loop, 20);
	cr_assert_eq(held_on("aq:paused"), 0);
	dlock_redlock_free(r);
	dlock_loop_free(loop);
}

Test(async_quorum, a_waiter_gets_the_quorum_once_the_holder_releases)
{
	dlock_loop *loop = NULL;
	dlock_redlock *r;
	outcome h = { 0 }, w = { 0 };
	int64_t until;

	dl_pass(dlock_loop_new(&loop, NULL));
	r = redlock_on(loop, "aq:wait", 0);
	acquire(r, "holder:1", 0, 30000, NULL, &h);
	run_until_done(loop, &h, 1, 5000);
	cr_assert_eq(h.code, 0);
	acquire(r, "waiter:1", 10000, 30000, NULL, &w);
	for (until = rh_now_ms() + 500; rh_now_ms() < until;)
		dlock_loop_run(loop, 20);
	cr_assert_eq(w.calls, 0, "the waiter ended while the lock was held (code %d)", w.code);
	release(loop, r, "holder:1");
	run_until_done(loop, &w, 1, 10000);
	cr_assert_eq(w.code, 0, "the waiter: %d", w.code);
	/* A quorum at least: the holder's release called back at its quorum,
	 * and a member whose release was still on its way is asked late. */
	int holding = 0;
	for (int i = 0; i < N; i++)
		holding += rh_command_int(srv[i], "HEXISTS aq:wait waiter:1") == 1;
	cr_assert_geq(holding, N / 2 + 1, "the waiter holds %d of %d servers", holding, N);
	release(loop, r, "waiter:1");
	released_everywhere(loop, "aq:wait", 3000);
	dlock_redlock_free(r);
	dlock_loop_free(loop);
}

Test(async_quorum, fenced_quorums_give_growing_tokens)
{
	dlock_loop *loop = NULL;
	dlock_redlock *r;
	outcome a = { 0 }, b = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	r = redlock_on(loop, "aq:fenced", 1);
	acquire(r, "f:1", 0, 10000, NULL, &a);
	run_until_done(loop, &a, 1, 5000);
	cr_assert_eq(a.code, 0);
	cr_assert_gt(a.token, 0);
	release(loop, r, "f:1");
	acquire(r, "f:2", 0, 10000, NULL, &b);
	run_until_done(loop, &b, 1, 5000);
	cr_assert_eq(b.code, 0);
	cr_assert_gt(b.token, a.token, "token %lld after %lld", (long long)b.token,
			(long long)a.token);
	release(loop, r, "f:2");
	dlock_redlock_free(r);
	dlock_loop_free(loop);
}

Test(async_quorum, a_multilock_takes_every_member)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_client *c[N];
	dlock_lock *l[N];
	dlock_multilock *m = NULL;
	outcome a = { 0 }, rel = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	co.loop = loop;
	for (int i = 0; i < N; i++) {
		char name[16];

		snprintf(name, sizeof(name), "aq:m%d", i);
		c[i] = dl_client_opts(rh_server_uri(srv[i]), &co);
		l[i] = dl_lock(c[i], name);
	}
	dl_pass(dlock_multilock_new(&m, l, N, NULL));
	a.starting = 1;
	dl_pass(dlock_multilock_acquire_async(NULL, m, "mm:1", 1000, 10000, note, &a));
	a.starting = 0;
	run_until_done(loop, &a, 1, 5000);
	cr_assert_eq(a.code, 0, "multilock: %d", a.code);
	for (int i = 0; i < N; i++)
		cr_assert_eq(rh_command_int(srv[i], "HEXISTS aq:m%d mm:1", i), 1, "member %d", i);
	dl_pass(dlock_multilock_release_async(NULL, m, "mm:1", note, &rel));
	run_until_done(loop, &rel, 1, 5000);
	cr_assert_eq(rel.code, 0);
	for (int i = 0; i < N; i++)
		cr_assert_eq(rh_command_int(srv[i], "EXISTS aq:m%d", i), 0, "member %d", i);
	dlock_multilock_free(m);
	for (int i = 0; i < N; i++) {
		dlock_lock_free(l[i]);
		dlock_client_free(c[i]);
	}
	dlock_loop_free(loop);
}

/* Keys of the random test left on any server. */
static size_t keys_left(void)
{
	size_t n = 0;

	for (int i = 0; i < N; i++) {
		redisReply *r = rh_command(srv[i], "KEYS aq:cancel:*");

		cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
		n += r->elements;
		freeReplyObject(r);
	}
	return n;
}

/* Who holds what is left, and how its ops ended. */
static void explain_keys_left(const outcome *o, const outcome *rel)
{
	for (int s = 0; s < N; s++) {
		redisReply *keys = rh_command(srv[s], "KEYS aq:cancel:*");

		for (size_t j = 0; keys != NULL && j < keys->elements; j++) {
			redisReply *h = rh_command(srv[s], "HGETALL %s", keys->element[j]->str);
			int64_t ttl = rh_command_int(srv[s], "PTTL %s", keys->element[j]->str);

			for (size_t f = 0; h != NULL && f + 1 < h->elements; f += 2) {
				int w = -1;

				sscanf(strrchr(h->element[f]->str, ':') + 1, "%d", &w);
				cr_log_error("server %d: %s held by %s (count %s, PTTL %lld): acquire "
					     "%d, release %d",
						s, keys->element[j]->str, h->element[f]->str,
						h->element[f + 1]->str, (long long)ttl,
						w >= 0 ? o[w].code : 0, w >= 0 ? rel[w].code : 0);
			}
			if (h != NULL)
				freeReplyObject(h);
		}
		if (keys != NULL)
			freeReplyObject(keys);
	}
}

/* The random test's seed: DLOCK_TEST_SEED replays a failure's choices
 * (the timings are the machine's), else the clock. */
static unsigned test_seed(void)
{
	const char *env = getenv("DLOCK_TEST_SEED");
	unsigned seed = env != NULL ? (unsigned)strtoul(env, NULL, 10) : (unsigned)rh_now_ms();

	cr_log_info("random cancels: seed %u (DLOCK_TEST_SEED replays it)", seed);
	return seed;
}

/*
 * Many RedLock acquisitions of a few names, each canceled at a random
 * moment, one server paused for a while in the middle: each callback comes
 * once, the ones that report acquired are released, and afterwards no
 * member of any lock is held on any server.
 */
Test(async_quorum, random_cancellations_leave_nothing_held_on_any_server)
{
	enum { OPS = 200, NAMES = 5 };
	dlock_loop *loop = NULL;
	dlock_redlock *r[NAMES];
	dlock_op *op[OPS];
	outcome *o = calloc(OPS, sizeof(*o)), *rel = calloc(OPS, sizeof(*rel));
	int cancel_at[OPS], releasing[OPS] = { 0 }, acquired = 0, canceled = 0;
	int64_t hold_until[OPS] = { 0 };
	int ended_canceled = 0;
	int64_t t0, paused_at = -1;
	unsigned seed = test_seed();
	char owner[64];
	int i, k;

	cr_assert(o != NULL && rel != NULL);
	srand(seed);
	dl_pass(dlock_loop_new(&loop, NULL));
	for (k = 0; k < NAMES; k++) {
		char name[32];

		snprintf(name, sizeof(name), "aq:cancel:%d", k);
		r[k] = redlock_on(loop, name, k % 2);
	}
	for (i = 0; i < OPS; i++) {
		/* Named after the lock's client: a cancel gives back even a late acquire. */
		cr_assert_eq(dlock_redlock_owner(owner, r[i % NAMES], (uint64_t)i), 0);
		acquire(r[i % NAMES], owner, 1000 + rand() % 4000,
				rand() % 2 ? DLOCK_LEASE_WATCHDOG : 5000 + rand() % 5000, &op[i], &o[i]);
		cancel_at[i] = rand() % 3000; /* ms from now; some after the op ended */
		if (rand() % 8 == 0) {
			cr_assert_eq(dlock_op_cancel(op[i]), 0); /* before it was sent */
			cancel_at[i] = -1;
			canceled++;
		}
	}
	t0 = rh_now_ms();
	while (rh_now_ms() - t0 < 30000) {
		int64_t now = rh_now_ms() - t0;
		int pending = 0;

		if (paused_at < 0 && now > 300) {
			cr_assert_eq(rh_server_pause(srv[1]), 0);
			paused_at = now;
		} else if (paused_at >= 0 && paused_at < 1000000 && now > paused_at + 1500) {
			cr_assert_eq(rh_server_resume(srv[1]), 0);
			paused_at = 1000000;
		}
		dlock_loop_run(loop, 10);
		for (i = 0; i < OPS; i++) {
			if (o[i].calls == 0 && cancel_at[i] >= 0 && now >= cancel_at[i]) {
				cr_assert_eq(dlock_op_cancel(op[i]), 0);
				cancel_at[i] = -1;
				canceled++;
			}
			if (o[i].calls == 1 && o[i].code == 0 && hold_until[i] == 0)
				hold_until[i] = now + 20 + rand() % 200; /* contention for the others */
			if (o[i].calls == 1 && o[i].code == 0 && !releasing[i] && now >= hold_until[i]) {
				acquired++;
				releasing[i] = 1;
				dlock_redlock_owner(owner, r[i % NAMES], (uint64_t)i);
				dl_pass(dlock_redlock_release_async(NULL, r[i % NAMES], owner, note,
						&rel[i]));
			}
			cr_assert(o[i].calls <= 1 && rel[i].calls <= 1, "w:%d had %d callbacks", i,
					o[i].calls);
			pending += o[i].calls == 0 || (o[i].code == 0 && rel[i].calls == 0);
		}
		if (pending == 0 && paused_at == 1000000)
			break;
	}
	if (paused_at < 1000000)
		rh_server_resume(srv[1]);
	for (i = 0; i < OPS; i++) {
		cr_assert_eq(o[i].calls, 1, "w:%d had %d callbacks (seed %u)", i, o[i].calls, seed);
		cr_assert(!o[i].inside);
		cr_assert(o[i].code == 0 || o[i].code == DLOCK_ECANCELED ||
						o[i].code == DLOCK_ENOTACQUIRED ||
						o[i].code == DLOCK_ENOQUORUM || o[i].code == DLOCK_EEXPIRED,
				"w:%d ended with %d (seed %u)", i, o[i].code, seed);
		if (releasing[i])
			cr_assert_eq(rel[i].calls, 1, "w:%d's release had no callback", i);
		ended_canceled += o[i].code == DLOCK_ECANCELED;
	}
	/* Rollbacks sent to the paused server run once it answers. */
	for (k = 0; k < 100 && keys_left() > 0; k++)
		dlock_loop_run(loop, 20);
	if (keys_left() > 0)
		explain_keys_left(o, rel);
	cr_assert_eq(keys_left(), 0, "%zu lock keys left (seed %u)", keys_left(), seed);
	cr_log_info("random cancels: %d ops, %d canceled, %d acquired and released, %d ended "
		    "canceled", OPS, canceled, acquired, ended_canceled);
	for (i = 0; i < OPS; i++)
		dlock_op_free(op[i]);
	for (k = 0; k < NAMES; k++)
		dlock_redlock_free(r[k]);
	dlock_loop_free(loop);
	free(o);
	free(rel);
}

/*
 * Renewals run on the caller's loop without blocking it: with one of two
 * servers paused through several renewal rounds, the loop still turns
 * (a blocking round would hold it for a command timeout per batch), and
 * the holds on both servers are still held once it resumes.
 */
Test(async_quorum, renewals_never_block_the_callers_loop)
{
	enum { LOCKS = 300 };
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_client *c[2];
	dlock_lock *l[LOCKS];
	outcome a[LOCKS] = { { 0 } };
	char owner[64];
	int64_t longest;

	dl_pass(dlock_loop_new(&loop, NULL));
	co.loop = loop;
	co.command_timeout_ms = 2000;
	co.watchdog_timeout_ms = 6000; /* a round every 2 s */
	for (int s = 0; s < 2; s++)
		c[s] = dl_client_opts(rh_server_uri(srv[s]), &co);
	dlock_client_owner(owner, c[0], 1);
	for (int i = 0; i < LOCKS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "aq:renew:%d", i);
		l[i] = dl_lock(c[i % 2], name);
		cr_assert_eq(dlock_lock_acquire_async(NULL, l[i], owner, 0, DLOCK_LEASE_WATCHDOG, note,
				       &a[i]),
				0);
	}
	run_until_done(loop, a, LOCKS, 10000);
	for (int i = 0; i < LOCKS; i++)
		cr_assert_eq(a[i].code, 0, "lock %d: %d", i, a[i].code);
	cr_assert_eq(rh_server_pause(srv[1]), 0);
	longest = dl_longest_loop_turn(loop, 4500, 10); /* two rounds meet the paused server */
	cr_assert_eq(rh_server_resume(srv[1]), 0);
	cr_assert_lt(longest, 1000, "the loop was held %lld ms by a paused server's renewals",
			(long long)longest);
	dl_longest_loop_turn(loop, 2500, 10); /* the next round reaches it again */
	for (int i = 0; i < LOCKS; i++)
		cr_assert_eq(dlock_lock_check(l[i], owner), 0, "lock %d no longer held", i);
	cr_assert(rh_command_int(srv[1], "PTTL aq:renew:1") > 2000, "not renewed after the pause");
	cr_log_info("renewals with a server paused: the longest loop turn %lld ms",
			(long long)longest);
	for (int i = 0; i < LOCKS; i++) {
		outcome r = { 0 };

		dl_pass(dlock_lock_release_async(NULL, l[i], owner, note, &r));
		run_until_done(loop, &r, 1, 5000);
		dlock_lock_free(l[i]);
	}
	for (int s = 0; s < 2; s++)
		dlock_client_free(c[s]);
	dlock_loop_free(loop);
}
