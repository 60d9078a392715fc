/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fair lock (Redisson's RFairLock) on a real redis-server: waiters get the
 * lock in arrival order; a waiter that gives up leaves the queue at once and
 * delays nobody; a crashed waiter's place expires after its wait; a release
 * wakes the head of the queue on its own channel; single attempts never
 * queue; an attempt that runs late, after its waiter left, queues nobody;
 * and dlock and Redisson's own fair scripts (run here with hiredis, no
 * Java) share one queue in both directions.
 *
 * Keys (reference/redisson-wire.md §3): the lock HASH <name>, the queue LIST
 * redisson_lock_queue:{name}, the deadlines ZSET redisson_lock_timeout:{name}
 * (epoch ms), per-waiter channels redisson_lock__channel:{name}:<owner>.
 *
 * Worker threads never call cr_assert: they record what happened and the
 * test's main thread asserts.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "redis_harness.h"
#include "support.h"

/* Redisson's own scripts (the oracle) are in tests/support/redisson_scripts.c. */

/* ---- fixture: one server per test ---------------------------------------- */

#define srv dl_srv

TestSuite(fairlock, .init = dl_server_start, .fini = dl_server_stop);

/* ---- helpers ------------------------------------------------------------- */

/* Epoch milliseconds: the clock fair-lock deadlines are written in. */
static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static dlock_client *open_client(int pool_size)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;

	if (pool_size > 0)
		o.pool_size = pool_size;
	int rc = dlock_client_new(&c, rh_server_uri(srv), &o);
	cr_assert_eq(rc, 0, "dlock_client_new: %s (%s)", dlock_strerror(rc), dlock_errmsg_last());
	return c;
}

static dlock_lock *new_fair(dlock_client *c, const char *name)
{
	dlock_lock *l = NULL;

	dl_pass(dlock_lock_new(&l, c, name, dl_kind(DLOCK_LOCK_FAIR)));
	cr_assert_not_null(l);
	return l;
}

/* An owner string of this client for a made-up thread id (a "holder" that is
 * no thread of this process: taken and released with the _as variants). */
static void owner_of(dlock_client *c, uint64_t tid, char *buf, size_t len)
{
	cr_assert_geq(len, DLOCK_OWNER_SIZE);
	cr_assert_eq(dlock_client_owner(buf, c, tid), 0);
}

static void qkey(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "redisson_lock_queue:{%s}", name);
}

static void tkey(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "redisson_lock_timeout:{%s}", name);
}

#define MAXQ 16

/* The members of key as strings, by `range` (LRANGE or ZRANGE); returns how many. */
static int members(const char *range, const char *key, char out[MAXQ][80])
{
	redisReply *r = rh_command(srv, "%s %s 0 -1", range, key);
	cr_assert_not_null(r, "%s %s failed", range, key);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	cr_assert_leq(r->elements, MAXQ, "%s has %zu entries", key, (size_t)r->elements);
	int n = (int)r->elements;
	for (int i = 0; i < n; i++)
		snprintf(out[i], 80, "%s", r->element[i]->str);
	freeReplyObject(r);
	return n;
}

/* The queue LIST as strings; returns its length. */
static int queue_list(const char *name, char out[MAXQ][80])
{
	char q[256];

	qkey(name, q, sizeof q);
	return members("LRANGE", q, out);
}

/* The deadlines ZSET's members, in score order; returns how many. */
static int zset_list(const char *name, char out[MAXQ][80])
{
	char t[256];

	tkey(name, t, sizeof t);
	return members("ZRANGE", t, out);
}

/* Position of owner in the queue, or -1. */
static int queue_pos(const char *name, const char *owner)
{
	char q[MAXQ][80];
	int n = queue_list(name, q);

	for (int i = 0; i < n; i++)
		if (strcmp(q[i], owner) == 0)
			return i;
	return -1;
}

static int zset_has(const char *name, const char *owner)
{
	char z[MAXQ][80];
	int n = zset_list(name, z);

	for (int i = 0; i < n; i++)
		if (strcmp(z[i], owner) == 0)
			return 1;
	return 0;
}

/* The deadline (ZSCORE) of owner, or -1 when it has none. */
static int64_t deadline_of(const char *name, const char *owner)
{
	char t[256];

	tkey(name, t, sizeof t);
	redisReply *r = rh_command(srv, "ZSCORE %s %s", t, owner);
	cr_assert_not_null(r);
	int64_t v = -1;
	if (r->type == REDIS_REPLY_STRING)
		v = strtoll(r->str, NULL, 10);
	else
		cr_assert_eq(r->type, REDIS_REPLY_NIL, "ZSCORE: reply type %d", r->type);
	freeReplyObject(r);
	return v;
}

/* Wait (bounded) until owner is at position pos of the queue. */
static void await_queue_pos(const char *name, const char *owner, int pos, int timeout_ms)
{
	int64_t end = rh_now_ms() + timeout_ms;
	int p;

	while ((p = queue_pos(name, owner)) != pos && rh_now_ms() < end)
		dl_sleep_ms(2);
	cr_assert_eq(p, pos, "%s is at queue position %d of %s, want %d", owner, p, name, pos);
}

/* Neither the queue LIST nor the deadlines ZSET exists. */
static void assert_no_queue(const char *name)
{
	char q[256], t[256];

	qkey(name, q, sizeof q);
	tkey(name, t, sizeof t);
	cr_assert_eq(rh_command_int(srv, "EXISTS %s", q), 0, "%s exists", q);
	cr_assert_eq(rh_command_int(srv, "EXISTS %s", t), 0, "%s exists", t);
}

static int64_t exists(const char *key)
{
	return rh_command_int(srv, "EXISTS %s", key);
}

/* Redisson's fair acquire (EVAL_LONG) for owner: *acquired = 1 on nil, else
 * the returned number in *ret. */
static void redisson_acquire(const char *name, const char *owner, int64_t lease, int64_t wait,
		int64_t now, int *acquired, int64_t *ret)
{
	char q[256], t[256], lease_s[24], wait_s[24], now_s[24];

	qkey(name, q, sizeof q);
	tkey(name, t, sizeof t);
	snprintf(lease_s, sizeof lease_s, "%" PRId64, lease);
	snprintf(wait_s, sizeof wait_s, "%" PRId64, wait);
	snprintf(now_s, sizeof now_s, "%" PRId64, now);
	redisReply *r = rh_command(srv, "EVAL %s 3 %s %s %s %s %s %s %s", dl_redisson_fair_acquire,
			name, q, t, lease_s, owner, wait_s, now_s);
	cr_assert_not_null(r, "EVAL (Redisson fair acquire) failed");
	cr_assert(r->type == REDIS_REPLY_NIL || r->type == REDIS_REPLY_INTEGER,
			"Redisson fair acquire: reply type %d (%s)", r->type,
			r->type == REDIS_REPLY_ERROR ? r->str : "");
	*acquired = r->type == REDIS_REPLY_NIL;
	*ret = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
	freeReplyObject(r);
}

/* Redisson's fair unlock for owner; returns the reply (-1 for nil). */
static int64_t redisson_unlock(const char *name, const char *owner)
{
	static int seq;
	char q[256], t[256], ch[256], latch[300], now_s[24];

	qkey(name, q, sizeof q);
	tkey(name, t, sizeof t);
	snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", name);
	snprintf(latch, sizeof latch, "redisson_unlock_latch:{%s}:%032x", name, ++seq);
	snprintf(now_s, sizeof now_s, "%" PRId64, wall_ms());
	redisReply *r = rh_command(srv, "EVAL %s 5 %s %s %s %s %s 0 30000 %s %s publish 16000",
			dl_redisson_fair_unlock, name, q, t, ch, latch, owner, now_s);
	cr_assert_not_null(r, "EVAL (Redisson fair unlock) failed");
	cr_assert(r->type == REDIS_REPLY_NIL || r->type == REDIS_REPLY_INTEGER,
			"Redisson fair unlock: reply type %d (%s)", r->type,
			r->type == REDIS_REPLY_ERROR ? r->str : "");
	int64_t v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
	freeReplyObject(r);
	return v;
}

/* ---- raw pub/sub (hiredis) ----------------------------------------------- */

/* A client, a fair lock of `name` and its holder: owner `tid` of the client,
 * holding it for lease_ms. */
typedef struct fair_holder {
	dlock_client *c;
	dlock_lock *l;
	char holder[80];
} fair_holder;

static fair_holder fair_holder_up(const char *name, uint64_t tid, int64_t lease_ms)
{
	fair_holder f;

	f.c = open_client(0);
	f.l = new_fair(f.c, name);
	owner_of(f.c, tid, f.holder, sizeof f.holder);
	dl_pass(dlock_lock_acquire(f.l, f.holder, 0, lease_ms));
	return f;
}

/* The holder unlocks; returns when (rh_now_ms()). */
static int64_t fair_holder_release(fair_holder *f)
{
	int rc = dlock_lock_release(f->l, f->holder);
	int64_t at = rh_now_ms();

	cr_assert_eq(rc, 0, "holder unlock: %s (%s)", dlock_strerror(rc), dlock_lock_errmsg(f->l));
	return at;
}

/* Free what fair_holder_up made. */
static void fair_holder_free(fair_holder *f)
{
	dlock_lock_free(f->l);
	dlock_client_free(f->c);
}

/* The queue and the lock are gone; free what fair_holder_up made. */
static void fair_holder_down(fair_holder *f, const char *name)
{
	assert_no_queue(name);
	cr_assert_eq(exists(name), 0);
	fair_holder_free(f);
}

/* ---- a waiter thread ----------------------------------------------------- */

typedef struct fifo_log {
	pthread_mutex_t mu;
	int next;
	int order[MAXQ];     /* order[k] = index of the k-th thread to acquire */
	int64_t at_ms[MAXQ]; /* monotonic time of the k-th acquisition */
} fifo_log;

typedef struct fwaiter {
	dlock_client *client;
	dlock_lock *lock;
	int64_t wait_ms, lease_ms;
	int64_t hold_ms; /* < 0: never unlock; else hold this long, then unlock */
	int index;
	fifo_log *log; /* may be NULL */
	pthread_t th;
	/* written by the thread */
	char owner[80];
	atomic_int owner_ready;
	atomic_int done;      /* the try returned */
	atomic_int releasing; /* set just before its unlock */
	atomic_int finished;  /* the thread is about to return */
	int rc;
	int64_t started_ms, returned_ms, returned_wall;
	int unlock_rc;
} fwaiter;

static void *fwaiter_main(void *arg)
{
	fwaiter *w = arg;

	dlock_client_owner(w->owner, w->client, dlock_thread_id());
	atomic_store(&w->owner_ready, 1);
	w->started_ms = rh_now_ms();
	w->rc = dlock_lock_acquire(w->lock, NULL, w->wait_ms, w->lease_ms);
	w->returned_ms = rh_now_ms();
	w->returned_wall = wall_ms();
	if (w->rc == 0 && w->log != NULL) {
		pthread_mutex_lock(&w->log->mu);
		w->log->order[w->log->next] = w->index;
		w->log->at_ms[w->log->next] = w->returned_ms;
		w->log->next++;
		pthread_mutex_unlock(&w->log->mu);
	}
	atomic_store(&w->done, 1);
	w->unlock_rc = 1;
	if (w->rc == 0 && w->hold_ms >= 0) {
		dl_sleep_ms(w->hold_ms);
		atomic_store(&w->releasing, 1);
		w->unlock_rc = dlock_lock_release(w->lock, NULL);
	}
	atomic_store(&w->finished, 1);
	return NULL;
}

static void fwaiter_init(fwaiter *w, dlock_client *c, dlock_lock *l, int64_t wait_ms,
		int64_t lease_ms, int64_t hold_ms)
{
	memset(w, 0, sizeof *w);
	w->client = c;
	w->lock = l;
	w->wait_ms = wait_ms;
	w->lease_ms = lease_ms;
	w->hold_ms = hold_ms;
}

/* Start the thread and wait until it has named its owner. */
static void fwaiter_run(fwaiter *w)
{
	cr_assert_eq(pthread_create(&w->th, NULL, fwaiter_main, w), 0);
	int64_t end = rh_now_ms() + 2000;
	while (!atomic_load(&w->owner_ready) && rh_now_ms() < end)
		dl_sleep_ms(1);
	cr_assert(atomic_load(&w->owner_ready), "waiter thread did not start");
}

static void fwaiter_start(fwaiter *w, dlock_client *c, dlock_lock *l, int64_t wait_ms,
		int64_t lease_ms, int64_t hold_ms)
{
	fwaiter_init(w, c, l, wait_ms, lease_ms, hold_ms);
	fwaiter_run(w);
}

/* Wait (bounded) until the waiter thread sets *flag; returns it. */
static int await_flag(atomic_int *flag, int timeout_ms)
{
	int64_t end = rh_now_ms() + timeout_ms;

	while (!atomic_load(flag) && rh_now_ms() < end)
		dl_sleep_ms(1);
	return atomic_load(flag);
}

/* Wait (bounded) until the waiter's try returned. */
static void fwaiter_await_done(fwaiter *w, int timeout_ms)
{
	cr_assert(await_flag(&w->done, timeout_ms), "waiter %s: try did not return within %d ms",
			w->owner, timeout_ms);
}

/* Wait (bounded) until the thread is finished, then join it. */
static void fwaiter_join(fwaiter *w, int timeout_ms)
{
	cr_assert(await_flag(&w->finished, timeout_ms), "waiter %s did not finish within %d ms",
			w->owner, timeout_ms);
	pthread_join(w->th, NULL);
}

/*
 * `who` got the lock within 300 ms of the release at released_at (what
 * `release` names), then unlocked it.
 */
static void fwaiter_took_over(fwaiter *w, const char *who, int64_t released_at, const char *release)
{
	fwaiter_await_done(w, 3000);
	cr_assert_eq(w->rc, 0, "%s: %s", who, dlock_strerror(w->rc));
	cr_assert_lt(w->returned_ms - released_at, 300, "%s acquired %" PRId64 " ms after %s", who,
			w->returned_ms - released_at, release);
	fwaiter_join(w, 3000);
	cr_assert_eq(w->unlock_rc, 0, "%s's unlock: %s", who, dlock_strerror(w->unlock_rc));
}

/* A raw subscriber on w's own channel (its name into ch), where a release wakes it. */
static redisContext *subscribe_waiter(const char *name, const fwaiter *w, char *ch, size_t len)
{
	snprintf(ch, len, "redisson_lock__channel:{%s}:%s", name, w->owner);
	return dl_subscribe(rh_server_port(srv), ch);
}

/* ---- 1. FIFO ------------------------------------------------------------- */

#define FIFO_N 8

Test(fairlock, waiters_acquire_in_arrival_order, .timeout = 40)
{
	const char *name = "fair:fifo";
	dlock_client *c = open_client(FIFO_N + 4);
	dlock_lock *l = new_fair(c, name);

	/* The holder (this thread) takes it for 1000 ms and never unlocks. */
	int rc = dlock_lock_acquire(l, NULL, 0, 1000);
	cr_assert_eq(rc, 0, "holder: %s (%s)", dlock_strerror(rc), dlock_lock_errmsg(l));

	fifo_log log;
	memset(&log, 0, sizeof log);
	pthread_mutex_init(&log.mu, NULL);
	fwaiter w[FIFO_N];
	int64_t first_start = rh_now_ms();
	for (int i = 0; i < FIFO_N; i++) {
		int64_t at = first_start + 100 * i;
		int64_t now = rh_now_ms();
		if (at > now)
			dl_sleep_ms(at - now);
		/* Each waiter: try(10000, 1000) and never unlock. */
		fwaiter_init(&w[i], c, l, 10000, 1000, -1);
		w[i].index = i;
		w[i].log = &log;
		fwaiter_run(&w[i]);
	}
	for (int i = 0; i < FIFO_N; i++)
		fwaiter_join(&w[i], 15000);

	for (int i = 0; i < FIFO_N; i++)
		cr_assert_eq(w[i].rc, 0, "waiter %d (%s): %s after %" PRId64 " ms", i, w[i].owner,
				dlock_strerror(w[i].rc), w[i].returned_ms - w[i].started_ms);
	cr_assert_eq(log.next, FIFO_N);
	char order[128];
	size_t n = 0;
	for (int k = 0; k < FIFO_N; k++)
		n += (size_t)snprintf(order + n, sizeof order - n, "%d(+%" PRId64 "ms) ",
				log.order[k], log.at_ms[k] - first_start);
	cr_log_info("fair FIFO: acquisition order %s", order);
	for (int k = 0; k < FIFO_N; k++)
		cr_assert_eq(log.order[k], k, "acquisition %d went to waiter %d, not %d: order %s",
				k, log.order[k], k, order);
	/* Each held its lease (1000 ms): the next one cannot have come sooner. */
	for (int k = 1; k < FIFO_N; k++)
		cr_assert_geq(log.at_ms[k] - log.at_ms[k - 1], 900,
				"acquisitions %d and %d only %" PRId64
				" ms apart (lease 1000): order %s",
				k - 1, k, log.at_ms[k] - log.at_ms[k - 1], order);
	cr_assert_leq(log.at_ms[FIFO_N - 1] - first_start, 11000,
			"the last waiter acquired %" PRId64 " ms after the first start",
			log.at_ms[FIFO_N - 1] - first_start);

	pthread_mutex_destroy(&log.mu);
	dlock_lock_free(l);
	dlock_client_free(c);
}

/* ---- 2. a waiter that gives up leaves, and delays nobody ------------------ */

Test(fairlock, waiter_that_times_out_leaves_the_queue, .timeout = 30)
{
	const char *name = "fair:leave";
	fair_holder f = fair_holder_up(name, 900001, 30000);
	char me[80];
	owner_of(f.c, dlock_thread_id(), me, sizeof me);

	/* A (this thread) tries for 500 ms. */
	dl_assert_try(f.l, 500, 30000, DLOCK_ENOTACQUIRED, 480, 1000);
	cr_assert_eq(queue_pos(name, me), -1, "A (%s) is still in the queue", me);
	cr_assert_eq(zset_has(name, me), 0, "A (%s) still has a deadline", me);
	assert_no_queue(name); /* A was the only waiter */

	/* A (short wait) and B (long wait) queue up, B behind A. */
	fwaiter a, b;
	fwaiter_start(&a, f.c, f.l, 800, 30000, 0);
	await_queue_pos(name, a.owner, 0, 2000);
	fwaiter_start(&b, f.c, f.l, 10000, 30000, 0);
	await_queue_pos(name, b.owner, 1, 2000);

	fwaiter_join(&a, 5000);
	cr_assert_eq(a.rc, DLOCK_ENOTACQUIRED, "A: %s", dlock_strerror(a.rc));
	int64_t a_el = a.returned_ms - a.started_ms;
	cr_assert(a_el >= 780 && a_el <= 1400, "A's try(800) returned after %" PRId64 " ms", a_el);
	cr_assert(!atomic_load(&b.done), "B returned while the holder still holds: %s",
			dlock_strerror(b.rc));
	char q[MAXQ][80], z[MAXQ][80];
	int nq = queue_list(name, q), nz = zset_list(name, z);
	cr_assert_eq(nq, 1, "queue has %d entries after A left, want only B", nq);
	cr_assert_str_eq(q[0], b.owner);
	cr_assert_eq(nz, 1, "deadlines have %d entries after A left, want only B", nz);
	cr_assert_str_eq(z[0], b.owner);
	int64_t bd = deadline_of(name, b.owner);
	cr_assert_gt(bd, wall_ms() + 1000, "B's place expires at %" PRId64 ", now %" PRId64, bd,
			wall_ms());

	/* The f.holder releases: B gets it at once. */
	int64_t t_unlock = fair_holder_release(&f);
	fwaiter_took_over(&b, "B", t_unlock, "the unlock");
	fair_holder_down(&f, name);
}

/* ---- 3. a crashed waiter's place expires after its wait ------------------- */

Test(fairlock, a_silent_waiters_place_expires, .timeout = 30)
{
	const char *name = "fair:ghost";
	fair_holder f = fair_holder_up(name, 900002, 1000);

	/* "ghost:1" queues through Redisson's script with a 1500 ms wait and
	 * never asks again, though it still listens on its channel (a paused
	 * process): it keeps its place until the place expires. */
	char ghost_ch[128];
	snprintf(ghost_ch, sizeof ghost_ch, "redisson_lock__channel:{%s}:ghost:1", name);
	redisContext *ghost = dl_subscribe(rh_server_port(srv), ghost_ch);
	int acquired = 0;
	int64_t ttl = 0, enq_wall = wall_ms(), enq_mono = rh_now_ms();
	redisson_acquire(name, "ghost:1", 30000, 1500, enq_wall, &acquired, &ttl);
	cr_assert_eq(acquired, 0, "ghost acquired a held lock");
	cr_assert(ttl > 0 && ttl <= 1000,
			"ghost's acquire returned %" PRId64 " (the holder's PTTL)", ttl);
	int64_t deadline = deadline_of(name, "ghost:1");
	/* The script's deadline: the f.holder's PTTL + wait + now. */
	cr_assert_eq(deadline, enq_wall + ttl + 1500, "ghost's deadline %" PRId64 ", want %" PRId64,
			deadline, enq_wall + ttl + 1500);
	cr_assert_eq(queue_pos(name, "ghost:1"), 0);

	fair_holder_release(&f);

	/* A dlock waiter queues behind the ghost. */
	fwaiter w;
	fwaiter_start(&w, f.c, f.l, 5000, 30000, 100);
	await_queue_pos(name, w.owner, 1, 2000);
	/* While the ghost's place is valid nobody holds the lock. */
	while (!atomic_load(&w.done) && wall_ms() < deadline - 30) {
		cr_assert_eq(exists(name), 0,
				"the lock was taken %" PRId64
				" ms before the ghost's place expired",
				deadline - wall_ms());
		cr_assert_eq(queue_pos(name, "ghost:1"), 0, "the ghost left the head early");
		dl_sleep_ms(20);
	}
	fwaiter_await_done(&w, 6000);
	cr_assert_eq(w.rc, 0, "waiter: %s", dlock_strerror(w.rc));
	cr_assert_geq(w.returned_wall, deadline,
			"the waiter acquired %" PRId64 " ms before the ghost's place "
			"expired",
			deadline - w.returned_wall);
	cr_assert_leq(w.returned_wall - deadline, 400,
			"the waiter acquired %" PRId64 " ms after the ghost's "
			"place expired",
			w.returned_wall - deadline);
	int64_t since_enq = w.returned_ms - enq_mono;
	cr_assert(since_enq >= 1000 && since_enq <= 3000,
			"acquired %" PRId64 " ms after the ghost queued", since_enq);
	cr_assert_eq(queue_pos(name, "ghost:1"), -1, "the ghost is still queued");
	cr_assert_eq(zset_has(name, "ghost:1"), 0, "the ghost still has a deadline");
	fwaiter_join(&w, 3000);
	cr_assert_eq(w.unlock_rc, 0, "waiter unlock: %s", dlock_strerror(w.unlock_rc));
	redisFree(ghost);
	fair_holder_down(&f, name);
}

/*
 * A waiter that died at the head of the queue (nobody listens on its
 * channel) keeps a live one behind it out for the grace only (1 s), not
 * for its place time (Redisson's default, 5 minutes): the next waiter gets
 * the lock about a second after it was free, and the dead one is gone from
 * the queue and the deadlines.
 */
Test(fairlock, a_dead_waiter_keeps_the_next_out_for_a_second_not_its_place, .timeout = 30)
{
	const char *name = "fair:dead";
	fair_holder f = fair_holder_up(name, 900012, 30000);
	int acquired = 0;
	int64_t ttl = 0;

	redisson_acquire(name, "dead:1", 30000, 300000, wall_ms(), &acquired, &ttl);
	redisson_acquire(name, "dead:2", 30000, 300000, wall_ms(), &acquired, &ttl);
	cr_assert_eq(queue_pos(name, "dead:2"), 1);

	fwaiter w;
	fwaiter_start(&w, f.c, f.l, 10000, 30000, 0);
	await_queue_pos(name, w.owner, 2, 2000);
	int64_t freed = fair_holder_release(&f);

	fwaiter_await_done(&w, 8000);
	cr_assert_eq(w.rc, 0, "the live waiter behind two dead ones: %s", dlock_strerror(w.rc));
	int64_t took = w.returned_ms - freed;
	cr_assert(took >= 900 && took <= 4000,
			"the live waiter got the lock %" PRId64 " ms after it was free "
			"(want about the 1 s grace: 900..4000)",
			took);
	cr_assert_eq(queue_pos(name, "dead:1"), -1, "the first dead waiter is still queued");
	cr_assert_eq(queue_pos(name, "dead:2"), -1, "the second dead waiter is still queued");
	cr_assert_eq(zset_has(name, "dead:1"), 0, "the dead waiter still has a deadline");
	fwaiter_join(&w, 3000);
	cr_assert_eq(w.unlock_rc, 0, "waiter unlock: %s", dlock_strerror(w.unlock_rc));
	cr_assert_eq(rh_command_int(srv, "DEL dlock_lock__gone:{%s}", name) >= 0, 1);
	fair_holder_down(&f, name);
}

/* ---- 4. interop with Redisson's fair scripts ------------------------------ */

Test(fairlock, redisson_waiter_ahead_of_dlock_waiter, .timeout = 30)
{
	const char *name = "fair:interop-a";
	fair_holder f = fair_holder_up(name, 900003, 30000);

	int acquired = 0;
	int64_t ret = 0;
	redisson_acquire(name, "redisson:7", 30000, 10000, wall_ms(), &acquired, &ret);
	cr_assert_eq(acquired, 0, "redisson:7 acquired a held lock");
	cr_assert_gt(ret, 0);
	cr_assert_eq(queue_pos(name, "redisson:7"), 0);

	redisContext *sub7 = dl_subscribe(
			rh_server_port(srv), "redisson_lock__channel:{fair:interop-a}:redisson:7");

	fwaiter w;
	fwaiter_start(&w, f.c, f.l, 5000, 30000, 0);
	await_queue_pos(name, w.owner, 1, 2000);
	char wch[200];
	redisContext *subw = subscribe_waiter(name, &w, wch, sizeof wch);

	/* dlock's unlock wakes the head, redisson:7, on its own channel. */
	fair_holder_release(&f);
	dl_expect_message(sub7, "redisson_lock__channel:{fair:interop-a}:redisson:7", "0", 1000);

	/* redisson:7 is head and its place is valid: the dlock waiter must not take it. */
	int64_t until = rh_now_ms() + 500;
	while (rh_now_ms() < until) {
		cr_assert(!atomic_load(&w.done),
				"the dlock waiter returned (%s) while redisson:7 was ahead",
				dlock_strerror(w.rc));
		cr_assert_eq(exists(name), 0, "the lock was taken while redisson:7 was head");
		dl_sleep_ms(20);
	}
	cr_assert_eq(queue_pos(name, "redisson:7"), 0);
	cr_assert_eq(queue_pos(name, w.owner), 1);

	/* redisson:7 comes back and gets it. */
	redisson_acquire(name, "redisson:7", 30000, 10000, wall_ms(), &acquired, &ret);
	cr_assert_eq(acquired, 1, "redisson:7 (head, lock free) did not acquire: %" PRId64, ret);
	cr_assert_eq(rh_command_int(srv, "HLEN %s", name), 1);
	redisReply *r = rh_command(srv, "HGET %s redisson:7", name);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STRING);
	cr_assert_str_eq(r->str, "1");
	freeReplyObject(r);
	cr_assert_eq(queue_pos(name, w.owner), 0,
			"the dlock waiter is not head after redisson:7 acquired");
	cr_assert(!atomic_load(&w.done));

	/* Redisson's unlock wakes the dlock waiter, which gets the lock promptly. */
	int64_t t_unlock = rh_now_ms();
	cr_assert_eq(redisson_unlock(name, "redisson:7"), 1);
	dl_expect_message(subw, wch, "0", 1000);
	fwaiter_took_over(&w, "the dlock waiter", t_unlock, "Redisson's unlock");

	redisFree(sub7);
	redisFree(subw);
	fair_holder_down(&f, name);
}

Test(fairlock, dlock_waiter_ahead_of_redisson_waiter, .timeout = 30)
{
	const char *name = "fair:interop-b";
	fair_holder f = fair_holder_up(name, 900004, 30000);

	/* The dlock waiter holds 300 ms once it has the lock, then releases. */
	fwaiter w;
	fwaiter_start(&w, f.c, f.l, 10000, 30000, 300);
	await_queue_pos(name, w.owner, 0, 2000);

	int acquired = 0;
	int64_t ret = 0;
	redisson_acquire(name, "redisson:8", 30000, 10000, wall_ms(), &acquired, &ret);
	cr_assert_eq(acquired, 0, "redisson:8 acquired a held lock");
	cr_assert_eq(queue_pos(name, "redisson:8"), 1);

	fair_holder_release(&f);

	/* Redisson's waiter keeps asking: a number every time until the dlock waiter
	 * has had the lock and given it back. */
	int numbers = 0, numbers_while_held = 0;
	int64_t end = rh_now_ms() + 5000;
	acquired = 0;
	while (!acquired && rh_now_ms() < end) {
		redisson_acquire(name, "redisson:8", 30000, 10000, wall_ms(), &acquired, &ret);
		if (acquired) {
			cr_assert(atomic_load(&w.done) && w.rc == 0,
					"redisson:8 acquired before the dlock waiter "
					"ahead of it (done %d, rc %d)",
					atomic_load(&w.done), w.rc);
			cr_assert(atomic_load(&w.releasing),
					"redisson:8 acquired while the dlock waiter held the lock");
			break;
		}
		numbers++;
		if (atomic_load(&w.done) && !atomic_load(&w.releasing))
			numbers_while_held++;
		dl_sleep_ms(10);
	}
	cr_assert_eq(acquired, 1, "redisson:8 never acquired (dlock waiter: done %d rc %d)",
			atomic_load(&w.done), w.rc);
	cr_assert_gt(numbers_while_held, 0,
			"redisson:8 was never refused while the dlock waiter held the lock");
	cr_log_info("redisson:8 refused %d times (%d while the dlock waiter held it)", numbers,
			numbers_while_held);
	fwaiter_join(&w, 3000);
	cr_assert_eq(w.rc, 0);
	cr_assert_eq(w.unlock_rc, 0, "dlock waiter unlock: %s", dlock_strerror(w.unlock_rc));
	cr_assert_eq(redisson_unlock(name, "redisson:8"), 1);
	fair_holder_down(&f, name);
}

/* ---- 5. unlock by a non-owner; force unlock wakes the head --------------- */

Test(fairlock, non_owner_unlock_and_force_unlock, .timeout = 30)
{
	const char *name = "fair:force";
	fair_holder f = fair_holder_up(name, 900005, 30000);
	char other[80];
	owner_of(f.c, 900006, other, sizeof other);

	/* Not the owner: refused, nothing changes. */
	int rc = dlock_lock_release(f.l, NULL);
	cr_assert_eq(rc, DLOCK_ENOTOWNER, "unlock by this thread: %s", dlock_strerror(rc));
	rc = dlock_lock_release(f.l, other);
	cr_assert_eq(rc, DLOCK_ENOTOWNER, "unlock as another owner: %s", dlock_strerror(rc));
	cr_assert_eq(rh_command_int(srv, "HLEN %s", name), 1);
	redisReply *r = rh_command(srv, "HGET %s %s", name, f.holder);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STRING, "the holder's field is gone");
	cr_assert_str_eq(r->str, "1");
	freeReplyObject(r);
	int64_t t = rh_command_int(srv, "PTTL %s", name);
	cr_assert(t > 25000, "PTTL %" PRId64 " after refused unlocks", t);

	/* A waiter queues; force unlock wakes it on its channel. */
	fwaiter w;
	fwaiter_start(&w, f.c, f.l, 10000, 30000, 0);
	await_queue_pos(name, w.owner, 0, 2000);
	char wch[200];
	redisContext *sub = subscribe_waiter(name, &w, wch, sizeof wch);

	int deleted = -1;
	int64_t t_force = rh_now_ms();
	rc = dlock_lock_force_release(&deleted, f.l);
	cr_assert_eq(rc, 0, "force unlock: %s (%s)", dlock_strerror(rc), dlock_lock_errmsg(f.l));
	cr_assert_eq(deleted, 1);
	dl_expect_message(sub, wch, "0", 1000);
	fwaiter_took_over(&w, "the waiter", t_force, "the force unlock");
	assert_no_queue(name);
	cr_assert_eq(exists(name), 0);

	/* Force unlock of a free lock: nothing deleted. */
	deleted = -1;
	cr_assert_eq(dlock_lock_force_release(&deleted, f.l), 0);
	cr_assert_eq(deleted, 0);

	redisFree(sub);
	fair_holder_free(&f);
}

/*
 * The command line's force unlock uses a plain handle: it cannot know the
 * lock is fair, so the script tells by the queue and wakes the head on its
 * own channel (as Redisson's fair force unlock does). A head waiter left on
 * its timer would sit out the holder's 30 s lease (a Redisson waiter does).
 */
Test(fairlock, force_unlock_by_a_plain_handle_wakes_the_head, .timeout = 30)
{
	const char *name = "fair:force-plain";
	fair_holder f = fair_holder_up(name, 900008, 30000);
	fwaiter w;
	fwaiter_start(&w, f.c, f.l, 10000, 30000, 0);
	await_queue_pos(name, w.owner, 0, 2000);
	char wch[200];
	redisContext *sub = subscribe_waiter(name, &w, wch, sizeof wch);
	dlock_lock *plain = NULL;
	dl_pass(dlock_lock_new(&plain, f.c, name, NULL));

	int deleted = -1;
	int64_t t_force = rh_now_ms();
	dl_pass(dlock_lock_force_release(&deleted, plain));
	cr_assert_eq(deleted, 1);
	dl_expect_message(sub, wch, "0", 100);
	int64_t woken = rh_now_ms() - t_force;
	fwaiter_took_over(&w, "the head waiter", t_force, "the plain force unlock");
	cr_log_info("plain-handle force unlock: the head's message after %" PRId64
		    " ms, the head took the lock after %" PRId64 " ms",
			woken, w.returned_ms - t_force);
	assert_no_queue(name);

	redisFree(sub);
	dlock_lock_free(plain);
	fair_holder_free(&f);
}

/* ---- 6. a single attempt never queues ------------------------------------- */

Test(fairlock, single_attempt_never_enqueues, .timeout = 30)
{
	const char *name = "fair:once";
	/* Free: one attempt takes it, no queue is made. */
	fair_holder f = fair_holder_up(name, 900007, 30000);
	assert_no_queue(name);

	/* Held: one attempt fails at once and leaves no trace. */
	for (int i = 0; i < 3; i++) {
		dl_assert_try(f.l, 0, 30000, DLOCK_ENOTACQUIRED, 0, 199);
		assert_no_queue(name);
	}
	cr_assert_eq(rh_command_int(srv, "HLEN %s", name), 1);

	fair_holder_release(&f);
	fair_holder_down(&f, name);
}

/* ---- 6b. the waiter timeout is the lock options' fair_wait_ms ------------- */

/*
 * A waiter without a wait limit keeps its place for the handle's
 * fair_wait_ms past the holder's expiry (the script's deadline: now + the
 * holder's PTTL + the wait, that is the holder's expiry + the wait), not
 * Redisson's default 5 minutes.
 */
Test(fairlock, a_forever_waiter_keeps_its_place_for_fair_wait_ms, .timeout = 30)
{
	const char *name = "fair:wait-option";
	const int64_t lease = 30000, fair_wait = 4000;
	int64_t before = wall_ms();
	fair_holder f = fair_holder_up(name, 900008, lease);
	int64_t after = wall_ms();
	dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
	dlock_lock *mine = NULL;
	fwaiter w;

	o.kind = DLOCK_LOCK_FAIR;
	o.fair_wait_ms = fair_wait;
	dl_pass(dlock_lock_new(&mine, f.c, name, &o));
	int64_t enq_from = wall_ms();
	fwaiter_start(&w, f.c, mine, DLOCK_WAIT_FOREVER, 30000, 0);
	await_queue_pos(name, w.owner, 0, 2000);
	int64_t enq_by = wall_ms();
	/* The holder's expiry is between before + lease and after + lease. The
	 * script adds the PTTL it sees to the `now` the waiter sent, earlier by
	 * at most the enqueueing's span; 5 ms for the milliseconds rounding. */
	int64_t got = deadline_of(name, w.owner) - before - lease;
	int64_t lo = fair_wait - (enq_by - enq_from) - 5, hi = fair_wait + (after - before) + 5;
	cr_assert(got >= lo && got <= hi,
			"the waiter's place lasts %" PRId64 " ms past the holder's lease, want "
			"fair_wait_ms %" PRId64 " (%" PRId64 "..%" PRId64 ")",
			got, fair_wait, lo, hi);

	int64_t t_unlock = fair_holder_release(&f);
	fwaiter_took_over(&w, "the waiter", t_unlock, "the unlock");
	dlock_lock_free(mine);
	fair_holder_down(&f, name);
}

/* ---- 7. a server pause costs no waiter its place -------------------------- */

/*
 * Redisson's RedissonFairLockTest.testAcquireFailedNotCalledOnRedisTimeout
 * (its issue 5019), shorter: command timeout 1000 ms, and the holder's 3 s
 * lease runs out during a 5 s write pause while W2 (lock()) and A
 * (try(60 s), 1 s lease) behind it keep polling and timing out. Only a
 * waiter that gives up leaves the queue: W2 gets the lock first, A after
 * W2's unlock.
 */
Test(fairlock, server_pause_costs_no_waiter_its_place, .timeout = 60)
{
	const char *name = "fair:pause";
	dlock_client *ch = dl_client(rh_server_uri(srv), 1000, 0);
	dlock_client *c2 = dl_client(rh_server_uri(srv), 1000, 0);
	dlock_client *ca = dl_client(rh_server_uri(srv), 1000, 0);
	dlock_lock *lh = new_fair(ch, name), *l2 = new_fair(c2, name), *la = new_fair(ca, name);
	char holder[80];
	owner_of(ch, 900009, holder, sizeof holder);
	dl_pass(dlock_lock_acquire(lh, holder, 0, 3000));

	fifo_log log;
	memset(&log, 0, sizeof log);
	pthread_mutex_init(&log.mu, NULL);
	fwaiter w2, a;
	fwaiter_init(&w2, c2, l2, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG, 300);
	w2.log = &log;
	w2.index = 2;
	fwaiter_run(&w2);
	await_queue_pos(name, w2.owner, 0, 2000);
	fwaiter_init(&a, ca, la, 60000, 1000, 0);
	a.log = &log;
	a.index = 1;
	fwaiter_run(&a);
	await_queue_pos(name, a.owner, 1, 2000);

	redisReply *r = rh_command(srv, "CLIENT PAUSE 30000 WRITE");
	cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "CLIENT PAUSE refused");
	freeReplyObject(r);
	dl_sleep_ms(5000);
	r = rh_command(srv, "CLIENT UNPAUSE");
	int64_t unpaused = rh_now_ms();
	cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "CLIENT UNPAUSE refused");
	freeReplyObject(r);

	fwaiter_join(&w2, 15000);
	fwaiter_join(&a, 15000);
	cr_assert_eq(w2.rc, 0, "W2: %s", dlock_strerror(w2.rc));
	cr_assert_eq(a.rc, 0, "A: %s", dlock_strerror(a.rc));
	cr_assert_eq(log.next, 2);
	cr_log_info("after the pause: first %s after %" PRId64 " ms, then %s after %" PRId64 " ms",
			log.order[0] == 2 ? "W2" : "A", log.at_ms[0] - unpaused,
			log.order[1] == 2 ? "W2" : "A", log.at_ms[1] - unpaused);
	cr_assert_eq(log.order[0], 2,
			"A got the lock %" PRId64 " ms after the unpause, before W2 queued ahead of "
			"it (W2 %" PRId64 " ms)",
			log.at_ms[0] - unpaused, log.at_ms[1] - unpaused);
	cr_assert_lt(log.at_ms[0] - unpaused, 3000,
			"W2 got the lock %" PRId64 " ms after the unpause", log.at_ms[0] - unpaused);
	cr_assert_eq(w2.unlock_rc, 0, "W2's unlock: %s", dlock_strerror(w2.unlock_rc));
	cr_assert_eq(a.unlock_rc, 0, "A's unlock: %s", dlock_strerror(a.unlock_rc));
	assert_no_queue(name);

	pthread_mutex_destroy(&log.mu);
	dlock_lock_free(lh);
	dlock_lock_free(l2);
	dlock_lock_free(la);
	dlock_client_free(ch);
	dlock_client_free(c2);
	dlock_client_free(ca);
}

/* ---- 8. an attempt that runs after its waiter left does not queue it ------ */

#define MON_ARGS 16

/* The character a MONITOR line's backslash escape `e` stands for (not \x). */
static char unescaped(char e)
{
	switch (e) {
	case 'n': return '\n';
	case 'r': return '\r';
	case 't': return '\t';
	case 'a': return '\a';
	case 'b': return '\b';
	default: return e;
	}
}

/* The quoted arguments of a MONITOR line (as the server escapes them) into
 * out[] (each `cap` bytes, lengths in lens[]); returns how many. */
static int monitor_args(const char *line, char out[][1024], size_t *lens, size_t cap)
{
	const char *p = strstr(line, "] ");
	int n = 0;

	while (p != NULL && n < MON_ARGS && (p = strchr(p, '"')) != NULL) {
		size_t k = 0;

		for (p++; *p != '\0' && *p != '"' && k < cap; p++) {
			unsigned v = 0;

			if (*p != '\\') {
				out[n][k++] = *p;
				continue;
			}
			p++;
			if (*p == 'x' && sscanf(p + 1, "%2x", &v) == 1) {
				out[n][k++] = (char)v;
				p += 2;
			} else {
				out[n][k++] = unescaped(*p);
			}
		}
		lens[n++] = k;
		if (*p == '"')
			p++;
	}
	return n;
}

/* A fair acquire of `owner` on `name` (not the undo: its fourth key is the
 * channel): EVAL/EVALSHA, body, numkeys, name, queue, deadlines, ... */
static int is_fair_attempt(char args[][1024], int n, const char *name, const char *owner)
{
	char q[256], t[256];

	qkey(name, q, sizeof q);
	tkey(name, t, sizeof t);
	if (n < 7 || (strcasecmp(args[0], "evalsha") != 0 && strcasecmp(args[0], "eval") != 0) ||
			strcmp(args[3], name) != 0 || strcmp(args[4], q) != 0 ||
			strcmp(args[5], t) != 0 || strncmp(args[6], "redisson_lock__channel", 22) == 0)
		return 0;
	for (int i = 6; i < n; i++)
		if (strcmp(args[i], owner) == 0)
			return 1;
	return 0;
}

/*
 * The race the soak test once met: B's attempt goes unanswered while the
 * server is stopped, B keeps its place and waits on, its wait ends and it
 * leaves - on another connection, where a server that wakes may run the
 * leave first. Here the late attempt is made to come after the leave for
 * certain: the attempt B sent, as MONITOR saw it, is sent again once the
 * leave has run. It must neither queue B again nor take the lock.
 */
Test(fairlock, an_attempt_that_runs_after_its_waiter_left_does_not_queue, .timeout = 60)
{
	const char *name = "fair:late";
	fair_holder f = fair_holder_up(name, 900011, 60000);
	dlock_client *cb = dl_client(rh_server_uri(srv), 300, 0);
	dlock_lock *lb = new_fair(cb, name);
	redisContext *mon = dl_raw_connect(rh_server_port(srv), 2000);
	redisReply *r = redisCommand(mon, "MONITOR");
	cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "MONITOR refused");
	freeReplyObject(r);

	fwaiter b;
	fwaiter_start(&b, cb, lb, 1500, 30000, -1);
	await_queue_pos(name, b.owner, 0, 2000);
	cr_assert_eq(rh_server_pause(srv), 0);
	fwaiter_join(&b, 10000); /* its wait ends, its leave is sent and times out */
	cr_assert_neq(b.rc, 0, "B got the lock from a stopped server");
	cr_assert_eq(rh_server_resume(srv), 0);
	int64_t end = rh_now_ms() + 3000;
	while (queue_pos(name, b.owner) != -1 && rh_now_ms() < end)
		dl_sleep_ms(10);
	cr_assert_eq(queue_pos(name, b.owner), -1, "B's leave did not take it out of the queue");

	/* B's last attempt, as the server saw it. */
	static char args[MON_ARGS][1024], last[MON_ARGS][1024];
	size_t lens[MON_ARGS], last_lens[MON_ARGS];
	int n, nlast = 0;
	while ((r = dl_next_reply(mon, 300)) != NULL) {
		if (r->type == REDIS_REPLY_STATUS &&
				(n = monitor_args(r->str, args, lens, sizeof args[0])) > 0 &&
				is_fair_attempt(args, n, name, b.owner)) {
			memcpy(last, args, sizeof last);
			memcpy(last_lens, lens, sizeof last_lens);
			nlast = n;
		}
		freeReplyObject(r);
	}
	redisFree(mon);
	cr_assert_gt(nlast, 0, "MONITOR saw no fair acquire of B");

	/* It runs again, late: after the leave, while A holds the lock. */
	const char *argv[MON_ARGS];
	for (int i = 0; i < nlast; i++)
		argv[i] = last[i];
	redisContext *raw = dl_raw_connect(rh_server_port(srv), 2000);
	r = redisCommandArgv(raw, nlast, argv, last_lens);
	cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER,
			"the late attempt: reply type %d (%s)", r ? r->type : -1,
			r && r->type == REDIS_REPLY_ERROR ? r->str : "");
	freeReplyObject(r);
	cr_assert_eq(queue_pos(name, b.owner), -1, "a late attempt queued B after it left");
	cr_assert_eq(zset_has(name, b.owner), 0, "a late attempt gave B a deadline after it left");

	/* And once the lock is free: it does not take it either. */
	fair_holder_release(&f);
	r = redisCommandArgv(raw, nlast, argv, last_lens);
	cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER, "the late attempt took the lock");
	freeReplyObject(r);
	redisFree(raw);
	cr_assert_eq(exists(name), 0, "a late attempt took the lock for B after it left");
	dlock_lock_free(lb);
	dlock_client_free(cb);
	fair_holder_down(&f, name);
}
