/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The countdown latch (Redisson's RCountDownLatch) on a real redis-server:
 * a count is set once; counting down to zero wakes every waiter at once,
 * in threads of several clients, long before their wait would end, through
 * the pub/sub message and not by polling; an await on a latch at zero
 * returns at once; a wait runs out with DLOCK_ETIMEDOUT; an asynchronous
 * await is woken and can be canceled; a latch that reached zero can be set
 * again.
 *
 * Redisson's data (reference: RedissonCountDownLatch): the key <name> is a
 * STRING count, deleted at zero; the channel
 * redisson_countdownlatch__channel__{<name>} carries "0" (zero reached) and
 * "1" (a new count, or deleted).
 *
 * Worker threads never call cr_assert: they record what happened and the
 * test's main thread asserts.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include <dlock.h>

#include "redis_harness.h"
#include "rh_cluster.h"
#include "support.h"

TestSuite(countdown, .init = dl_server_start, .fini = dl_server_stop, .timeout = 120);

/* A wait no waiter here should come near: a wake-up is milliseconds. */
#define LONG_WAIT_MS 20000
/* A waiter woken by the message returns well within this (a busy host included). */
#define WOKEN_WITHIN_MS 1000
/* Long enough for a waiter to have subscribed and looked. */
#define SETTLE_MS 300

static void channel_of(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "redisson_countdownlatch__channel__{%s}", name);
}

static dlock_countdown *latch_of(dlock_client *c, const char *name)
{
	dlock_countdown *l = NULL;

	dl_pass(dlock_countdown_new(&l, c, name, NULL));
	cr_assert_not_null(l);
	return l;
}

/* The key as Redis has it: its count, or -1 when there is no key. */
static int64_t raw_count(const char *name)
{
	redisReply *r = rh_command(dl_srv, "GET %s", name);
	int64_t v = -1;

	cr_assert_not_null(r);
	if (r->type == REDIS_REPLY_STRING)
		v = strtoll(r->str, NULL, 10);
	else
		cr_assert_eq(r->type, REDIS_REPLY_NIL, "GET %s: reply type %d", name, r->type);
	freeReplyObject(r);
	return v;
}

/* How many GETs the server has run so far (INFO commandstats). */
static int64_t gets_so_far(void)
{
	redisReply *r = rh_command(dl_srv, "INFO commandstats");
	const char *p;
	int64_t n = 0;

	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STRING);
	p = strstr(r->str, "cmdstat_get:calls=");
	if (p != NULL)
		n = strtoll(p + strlen("cmdstat_get:calls="), NULL, 10);
	freeReplyObject(r);
	return n;
}

/* Local subscribers of the channel, as the server counts them (PUBSUB NUMSUB). */
static int64_t subscribers(const char *name)
{
	char ch[256];
	redisReply *r;
	int64_t n;

	channel_of(name, ch, sizeof ch);
	r = rh_command(dl_srv, "PUBSUB NUMSUB %s", ch);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	cr_assert_eq(r->elements, 2);
	n = r->element[1]->integer;
	freeReplyObject(r);
	return n;
}

/* Wait (bounded) until the channel has `want` subscribers. */
static void await_subscribers(const char *name, int64_t want)
{
	int64_t end = rh_now_ms() + 3000, n;

	while ((n = subscribers(name)) != want && rh_now_ms() < end)
		dl_sleep_ms(5);
	cr_assert_eq(n, want, "%s has %lld subscribers, want %lld", name, (long long)n,
			(long long)want);
}

/* ---- a blocking await in a thread ---------------------------------------- */

typedef struct waiter {
	dlock_countdown *l;
	int64_t wait_ms;
	int rc;
	int64_t started, returned;
	char msg[256];
	pthread_t th;
} waiter;

static void *await_main(void *arg)
{
	waiter *w = arg;

	w->started = rh_now_ms();
	w->rc = dlock_countdown_await(w->l, w->wait_ms);
	w->returned = rh_now_ms();
	if (w->rc < 0)
		snprintf(w->msg, sizeof w->msg, "%s", dlock_countdown_errmsg(w->l));
	return NULL;
}

static void waiter_start(waiter *w, dlock_countdown *l, int64_t wait_ms)
{
	memset(w, 0, sizeof(*w));
	w->l = l;
	w->wait_ms = wait_ms;
	w->returned = -1;
	cr_assert_eq(pthread_create(&w->th, NULL, await_main, w), 0);
}

/* ---- the count ------------------------------------------------------------ */

Test(countdown, a_count_is_set_only_while_the_latch_does_not_exist)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 2000, 0);
	dlock_countdown *l = latch_of(c, "gate");
	char ch[128];
	int set = -1;
	int64_t n = -1;

	channel_of("gate", ch, sizeof ch);
	redisContext *sub = dl_subscribe(rh_server_port(dl_srv), ch);

	dl_pass(dlock_countdown_count(&n, l));
	cr_assert_eq(n, 0, "a latch never set counts %lld, want 0", (long long)n);
	dl_pass(dlock_countdown_try_set_count(&set, l, 3));
	cr_assert_eq(set, 1, "the first try_set_count did not set it");
	dl_expect_message(sub, ch, "1", 2000); /* Redisson's NEW_COUNT_MESSAGE */
	cr_assert_eq(raw_count("gate"), 3, "Redis has %lld for gate", (long long)raw_count("gate"));
	cr_assert_eq(rh_command_int(dl_srv, "PTTL gate"), -1, "a latch has no TTL");

	dl_pass(dlock_countdown_try_set_count(&set, l, 7));
	cr_assert_eq(set, 0, "a second try_set_count set the latch again");
	cr_assert_eq(raw_count("gate"), 3, "the second try_set_count changed the count");
	cr_assert_null(dl_next_reply(sub, 200), "a refused try_set_count published");
	dl_pass(dlock_countdown_count(&n, l));
	cr_assert_eq(n, 3);

	cr_assert_eq(dlock_countdown_try_set_count(&set, l, 0), DLOCK_EINVAL);
	cr_assert_eq(dlock_countdown_try_set_count(&set, l, -5), DLOCK_EINVAL);
	cr_assert(strstr(dlock_countdown_errmsg(l), "gate") != NULL, "message: %s",
			dlock_countdown_errmsg(l));

	redisFree(sub);
	dlock_countdown_free(l);
	dlock_client_free(c);
}

Test(countdown, count_down_publishes_zero_and_deletes_the_key_at_zero)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 2000, 0);
	dlock_countdown *l = latch_of(c, "steps");
	char ch[128];
	int64_t left = -1;

	channel_of("steps", ch, sizeof ch);
	dl_pass(dlock_countdown_try_set_count(NULL, l, 2));
	redisContext *sub = dl_subscribe(rh_server_port(dl_srv), ch);
	dl_pass(dlock_countdown_count_down(&left, l));
	cr_assert_eq(left, 1);
	cr_assert_eq(raw_count("steps"), 1);
	cr_assert_null(dl_next_reply(sub, 100), "a count down above zero published");
	dl_pass(dlock_countdown_count_down(&left, l));
	cr_assert_eq(left, 0);
	dl_expect_message(sub, ch, "0", 2000); /* Redisson's ZERO_COUNT_MESSAGE */
	cr_assert_eq(raw_count("steps"), -1, "the key is left at zero");

	/* Past zero: nothing changes, nothing is published, no key appears. */
	dl_pass(dlock_countdown_count_down(&left, l));
	cr_assert_eq(left, 0);
	cr_assert_eq(raw_count("steps"), -1, "a count down past zero left a key");
	cr_assert_null(dl_next_reply(sub, 100), "a count down past zero published");

	redisFree(sub);
	dlock_countdown_free(l);
	dlock_client_free(c);
}

/* ---- waiting ------------------------------------------------------------ */

#define NWAITERS 6

Test(countdown, count_down_to_zero_wakes_every_waiter_promptly)
{
	/* Waiters on two clients (two subscriptions), counted down by a third. */
	dlock_client *c1 = dl_client(rh_server_uri(dl_srv), 2000, 0);
	dlock_client *c2 = dl_client(rh_server_uri(dl_srv), 2000, 0);
	dlock_client *c3 = dl_client(rh_server_uri(dl_srv), 2000, 0);
	dlock_countdown *l1 = latch_of(c1, "start"), *l2 = latch_of(c2, "start");
	dlock_countdown *down = latch_of(c3, "start");
	waiter w[NWAITERS];
	int64_t left = -1;

	dl_pass(dlock_countdown_try_set_count(NULL, down, 2));
	for (int i = 0; i < NWAITERS; i++)
		waiter_start(&w[i], i % 2 ? l2 : l1, LONG_WAIT_MS);
	await_subscribers("start", 2); /* one subscription per client, shared */
	dl_sleep_ms(SETTLE_MS);
	int64_t listening = -1;
	dl_pass(dlock_countdown_subscribers(&listening, down));
	cr_assert_eq(listening, 2, "dlock_countdown_subscribers counts %lld, not the 2 subscriptions",
			(long long)listening);

	/* They sleep on the channel: a second without a message costs no GET. */
	int64_t gets = gets_so_far();
	dl_sleep_ms(1000);
	int64_t polled = gets_so_far() - gets;
	cr_assert_leq(polled, 0, "%lld GETs while %d waiters slept: they poll", (long long)polled,
			NWAITERS);

	dl_pass(dlock_countdown_count_down(&left, down));
	cr_assert_eq(left, 1);
	dl_sleep_ms(SETTLE_MS);
	for (int i = 0; i < NWAITERS; i++)
		cr_assert_eq(w[i].returned, -1, "waiter %d returned (%d) with the count at 1", i,
				w[i].rc);

	int64_t at = rh_now_ms();
	dl_pass(dlock_countdown_count_down(&left, down));
	cr_assert_eq(left, 0);
	int64_t slowest = 0;
	for (int i = 0; i < NWAITERS; i++) {
		pthread_join(w[i].th, NULL);
		cr_assert_eq(w[i].rc, 0, "waiter %d: %s (%s)", i, dlock_strerror(w[i].rc),
				w[i].msg);
		if (w[i].returned - at > slowest)
			slowest = w[i].returned - at;
	}
	cr_assert_leq(slowest, WOKEN_WITHIN_MS,
			"the slowest of %d waiters woke %lld ms after the count reached zero "
			"(their wait: %d ms)",
			NWAITERS, (long long)slowest, LONG_WAIT_MS);
	fprintf(stderr, "countdown: %d waiters on 2 clients woke within %lld ms of the zero\n",
			NWAITERS, (long long)slowest);
	/* The last waiter gone, nothing stays subscribed. */
	await_subscribers("start", 0);

	dlock_countdown_free(l1);
	dlock_countdown_free(l2);
	dlock_countdown_free(down);
	dl_close_clients(c1, c2, c3);
}

Test(countdown, an_await_on_a_latch_at_zero_returns_at_once)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 2000, 0);
	dlock_countdown *l = latch_of(c, "open");

	/* Never set: Redisson reads it as 0. */
	int64_t t0 = rh_now_ms();
	dl_pass(dlock_countdown_await(l, LONG_WAIT_MS));
	dl_pass(dlock_countdown_await(l, 0));
	int64_t took = rh_now_ms() - t0;
	cr_assert_leq(took, 500, "two awaits on a latch never set took %lld ms", (long long)took);

	/* Counted down to zero. */
	dl_pass(dlock_countdown_try_set_count(NULL, l, 1));
	dl_pass(dlock_countdown_count_down(NULL, l));
	t0 = rh_now_ms();
	dl_pass(dlock_countdown_await(l, DLOCK_WAIT_FOREVER));
	took = rh_now_ms() - t0;
	cr_assert_leq(took, 500, "an await on a latch at zero took %lld ms", (long long)took);

	dlock_countdown_free(l);
	dlock_client_free(c);
}

Test(countdown, a_wait_that_runs_out_returns_timed_out)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 2000, 0);
	dlock_countdown *l = latch_of(c, "never");
	int64_t n = 0;

	dl_pass(dlock_countdown_try_set_count(NULL, l, 2));
	int64_t t0 = rh_now_ms();
	int rc = dlock_countdown_await(l, 400);
	int64_t took = rh_now_ms() - t0;
	cr_assert_eq(rc, DLOCK_ETIMEDOUT, "await: %s (%s)", dlock_strerror(rc),
			dlock_countdown_errmsg(l));
	cr_assert(took >= 400 && took <= 400 + WOKEN_WITHIN_MS,
			"a 400 ms wait returned after %lld ms", (long long)took);
	cr_assert(strstr(dlock_countdown_errmsg(l), "never") != NULL &&
					strstr(dlock_countdown_errmsg(l), "still 2") != NULL &&
					strstr(dlock_countdown_errmsg(l), "400 ms") != NULL,
			"the message names the latch, its count and the wait: %s",
			dlock_countdown_errmsg(l));

	/* One look (wait 0) does not wait. */
	t0 = rh_now_ms();
	cr_assert_eq(dlock_countdown_await(l, 0), DLOCK_ETIMEDOUT);
	cr_assert_leq(rh_now_ms() - t0, 500);
	cr_assert_eq(dlock_countdown_await(l, -2), DLOCK_EINVAL);

	/* Nothing changed, nothing stays subscribed. */
	dl_pass(dlock_countdown_count(&n, l));
	cr_assert_eq(n, 2);
	await_subscribers("never", 0);

	dlock_countdown_free(l);
	dlock_client_free(c);
}

Test(countdown, a_blocking_await_ends_at_cancel_waits)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 2000, 0);
	dlock_countdown *l = latch_of(c, "held");
	waiter w;

	dl_pass(dlock_countdown_try_set_count(NULL, l, 1));
	waiter_start(&w, l, DLOCK_WAIT_FOREVER);
	await_subscribers("held", 1);
	dl_sleep_ms(SETTLE_MS);
	int64_t at = rh_now_ms();
	dl_pass(dlock_client_cancel_waits(c));
	pthread_join(w.th, NULL);
	cr_assert_eq(w.rc, DLOCK_ECANCELED, "await: %s (%s)", dlock_strerror(w.rc), w.msg);
	cr_assert_leq(w.returned - at, WOKEN_WITHIN_MS, "the cancel took %lld ms",
			(long long)(w.returned - at));

	dlock_countdown_free(l);
	dlock_client_free(c);
}

Test(countdown, delete_wakes_dlock_waiters_and_the_latch_can_be_set_again)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 2000, 0);
	dlock_countdown *l = latch_of(c, "again");
	int set = -1, deleted = -1;
	int64_t n = -1;
	waiter w;

	/* Reached zero: the key is gone, so a new count can be set. */
	dl_pass(dlock_countdown_try_set_count(&set, l, 1));
	dl_pass(dlock_countdown_count_down(NULL, l));
	dl_pass(dlock_countdown_try_set_count(&set, l, 2));
	cr_assert_eq(set, 1, "a latch at zero could not be set again");
	dl_pass(dlock_countdown_count(&n, l));
	cr_assert_eq(n, 2);

	/* The second round waits for the new count, and wakes at its zero. */
	waiter_start(&w, l, LONG_WAIT_MS);
	await_subscribers("again", 1);
	dl_sleep_ms(SETTLE_MS);
	cr_assert_eq(w.returned, -1, "the await returned (%d) on a latch set again", w.rc);
	dl_pass(dlock_countdown_count_down(NULL, l));
	dl_pass(dlock_countdown_count_down(NULL, l));
	pthread_join(w.th, NULL);
	cr_assert_eq(w.rc, 0, "%s (%s)", dlock_strerror(w.rc), w.msg);

	/* Deleted: "1" is published; dlock's waiters look and find 0. */
	dl_pass(dlock_countdown_try_set_count(&set, l, 5));
	waiter_start(&w, l, LONG_WAIT_MS);
	await_subscribers("again", 1);
	dl_sleep_ms(SETTLE_MS);
	int64_t at = rh_now_ms();
	dl_pass(dlock_countdown_delete(&deleted, l));
	cr_assert_eq(deleted, 1);
	pthread_join(w.th, NULL);
	cr_assert_eq(w.rc, 0, "%s (%s)", dlock_strerror(w.rc), w.msg);
	cr_assert_leq(w.returned - at, WOKEN_WITHIN_MS, "woken %lld ms after the delete",
			(long long)(w.returned - at));
	dl_pass(dlock_countdown_delete(&deleted, l));
	cr_assert_eq(deleted, 0, "a second delete found a latch");
	dl_pass(dlock_countdown_try_set_count(&set, l, 1));
	cr_assert_eq(set, 1, "a deleted latch could not be set again");

	dlock_countdown_free(l);
	dlock_client_free(c);
}

Test(countdown, a_key_that_is_not_a_count_is_refused)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 2000, 0);
	dlock_countdown *h = latch_of(c, "ahash"), *s = latch_of(c, "astring");
	int64_t n = 0;

	cr_assert_eq(rh_command_int(dl_srv, "HSET ahash f 1"), 1);
	freeReplyObject(rh_command(dl_srv, "SET astring hello"));
	cr_assert_eq(dlock_countdown_count(&n, h), DLOCK_EWRONGTYPE, "%s",
			dlock_countdown_errmsg(h));
	cr_assert_eq(dlock_countdown_count_down(NULL, h), DLOCK_EWRONGTYPE, "%s",
			dlock_countdown_errmsg(h));
	cr_assert_eq(dlock_countdown_await(h, LONG_WAIT_MS), DLOCK_EWRONGTYPE, "%s",
			dlock_countdown_errmsg(h));
	cr_assert_eq(dlock_countdown_count(&n, s), DLOCK_EWRONGTYPE, "%s",
			dlock_countdown_errmsg(s));
	cr_assert_eq(dlock_countdown_count_down(NULL, s), DLOCK_EWRONGTYPE, "%s",
			dlock_countdown_errmsg(s));
	cr_assert(strstr(dlock_countdown_errmsg(s), "astring") != NULL, "%s",
			dlock_countdown_errmsg(s));
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS astring"), 1);

	dlock_countdown_free(h);
	dlock_countdown_free(s);
	dlock_client_free(c);
}

/* ---- asynchronous ----------------------------------------------------------- */

static dlock_client *client_on(dlock_loop *loop)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.loop = loop;
	return dl_client_opts(rh_server_uri(dl_srv), &o);
}

/* Drive the loop until o has its callback, or within_ms. */
static void run_until_done(dlock_loop *loop, dl_outcome *o, int64_t within_ms)
{
	int64_t until = rh_now_ms() + within_ms;

	while (o->calls == 0 && rh_now_ms() < until)
		cr_assert(dlock_loop_run(loop, 20) >= 0, "%s", dlock_errmsg_last());
	cr_assert_eq(o->calls, 1, "%d callbacks within %lld ms", o->calls, (long long)within_ms);
	cr_assert_not(o->inside, "the callback ran inside the starting call");
}

/* Drive the loop for ms, asserting o's callback does not come. */
static void run_for(dlock_loop *loop, const dl_outcome *o, int64_t ms)
{
	int64_t until = rh_now_ms() + ms;

	while (rh_now_ms() < until)
		cr_assert(dlock_loop_run(loop, 20) >= 0, "%s", dlock_errmsg_last());
	cr_assert_eq(o->calls, 0, "the await ended (code %d) with the count above zero", o->code);
}

Test(countdown, an_async_await_is_woken_by_the_zero_and_can_be_canceled)
{
	dlock_loop *loop = NULL;
	dl_pass(dlock_loop_new(&loop, NULL));
	dlock_client *c = client_on(loop);
	dlock_client *other = dl_client(rh_server_uri(dl_srv), 2000, 0);
	dlock_countdown *l = latch_of(c, "async"), *down = latch_of(other, "async");
	dlock_op *op = NULL;
	dl_outcome set = { 0 }, w = { 0 }, cn = { 0 };

	/* The other calls asynchronously too, on the same loop. */
	set.starting = 1;
	dl_pass(dlock_countdown_try_set_count_async(NULL, l, 1, dl_note_checked, &set));
	set.starting = 0;
	run_until_done(loop, &set, 5000);
	cr_assert_eq(set.code, 0);
	cr_assert_eq(set.value, 1, "try_set_count_async answered %lld", (long long)set.value);

	w.starting = 1;
	dl_pass(dlock_countdown_await_async(NULL, l, LONG_WAIT_MS, dl_note_checked, &w));
	w.starting = 0;
	run_for(loop, &w, SETTLE_MS + 200);
	int64_t at = rh_now_ms();
	dl_pass(dlock_countdown_count_down(NULL, down)); /* another client, its own thread */
	run_until_done(loop, &w, WOKEN_WITHIN_MS);
	cr_assert_eq(w.code, 0, "await_async: %s", dlock_strerror(w.code));
	cr_assert_leq(w.at - at, WOKEN_WITHIN_MS, "woken %lld ms after the zero",
			(long long)(w.at - at));

	/* Canceled while it waits: one callback, DLOCK_ECANCELED; the count stays. */
	dl_pass(dlock_countdown_try_set_count(NULL, down, 3));
	cn.starting = 1;
	dl_pass(dlock_countdown_await_async(&op, l, LONG_WAIT_MS, dl_note_checked, &cn));
	cn.starting = 0;
	run_for(loop, &cn, SETTLE_MS);
	cr_assert_eq(subscribers("async"), 1, "the waiting op is not subscribed");
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	run_until_done(loop, &cn, 2000);
	cr_assert_eq(cn.code, DLOCK_ECANCELED, "canceled await: %s", dlock_strerror(cn.code));
	cr_assert_eq(raw_count("async"), 3);
	/* Its subscription goes with it. */
	int64_t end = rh_now_ms() + 3000;
	while (subscribers("async") != 0 && rh_now_ms() < end)
		cr_assert(dlock_loop_run(loop, 20) >= 0);
	cr_assert_eq(subscribers("async"), 0, "the canceled await left its subscription");

	/* A cancel right after the start: still exactly one callback. */
	dl_outcome early = { 0 };
	dl_pass(dlock_countdown_await_async(&op, l, LONG_WAIT_MS, dl_note_checked, &early));
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	run_until_done(loop, &early, 2000);
	cr_assert_eq(early.code, DLOCK_ECANCELED);

	/* The remaining calls, asynchronously. */
	dl_outcome cnt = { 0 }, dn = { 0 }, del = { 0 };
	dl_pass(dlock_countdown_count_async(NULL, l, dl_note_checked, &cnt));
	run_until_done(loop, &cnt, 5000);
	cr_assert_eq(cnt.value, 3);
	dl_pass(dlock_countdown_count_down_async(NULL, l, dl_note_checked, &dn));
	run_until_done(loop, &dn, 5000);
	cr_assert_eq(dn.value, 2);
	dl_pass(dlock_countdown_delete_async(NULL, l, dl_note_checked, &del));
	run_until_done(loop, &del, 5000);
	cr_assert_eq(del.value, 1);
	cr_assert_eq(raw_count("async"), -1);

	dlock_countdown_free(l);
	dlock_countdown_free(down);
	dlock_client_free(c);
	dlock_client_free(other);
	dlock_loop_free(loop);
}

Test(countdown, bad_arguments_are_refused)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 2000, 0);
	dlock_countdown *l = NULL;
	dlock_countdown_options o;
	int64_t n;

	cr_assert_eq(dlock_countdown_new(&l, c, "", NULL), DLOCK_EINVAL);
	cr_assert_eq(dlock_countdown_new(&l, c, NULL, NULL), DLOCK_EINVAL);
	cr_assert_eq(dlock_countdown_new(&l, NULL, "x", NULL), DLOCK_EINVAL);
	cr_assert_eq(dlock_countdown_new(NULL, c, "x", NULL), DLOCK_EINVAL);
	cr_assert_eq(dlock_countdown_options_init(&o, 99), DLOCK_EINVAL);
	dl_pass(dlock_countdown_options_init(&o, DLOCK_COUNTDOWN_OPTIONS_VERSION));
	o.version = 0;
	cr_assert_eq(dlock_countdown_new(&l, c, "x", &o), DLOCK_EINVAL);
	o.version = DLOCK_COUNTDOWN_OPTIONS_VERSION;
	dl_pass(dlock_countdown_new(&l, c, "x", &o));
	cr_assert_str_eq(dlock_countdown_name(l), "x");
	cr_assert_eq(dlock_countdown_count(NULL, l), DLOCK_EINVAL);
	cr_assert_eq(dlock_countdown_count(&n, NULL), DLOCK_EINVAL);
	cr_assert_eq(dlock_countdown_await(NULL, 0), DLOCK_EINVAL);
	cr_assert_eq(dlock_countdown_await_async(NULL, l, 0, NULL, NULL), DLOCK_EINVAL);
	/* Closing the client first is fine: the latch keeps it until it goes. */
	dlock_client_free(c);
	cr_assert_str_eq(dlock_countdown_name(l), "x");
	dlock_countdown_free(l);
	dlock_countdown_free(NULL);
}

/* ---- on a Redis Cluster: sharded pub/sub (SPUBLISH / SSUBSCRIBE) ----------- */

static rh_cluster *cl;

static void cluster_up(void)
{
	cl = rh_cluster_start(3, 0, NULL);
	cr_assert_not_null(cl, "could not start a Redis Cluster (redis-server 7 and redis-cli)");
}

static void cluster_down(void)
{
	rh_cluster_free(cl);
	cl = NULL;
}

TestSuite(countdown_cluster, .init = cluster_up, .fini = cluster_down, .timeout = 120);

/* Three names served by three different primaries. */
static void names_on_three_shards(char names[3][32])
{
	rh_server *seen[3];
	int found = 0;

	for (int i = 0; found < 3 && i < 1000; i++) {
		char name[32];
		snprintf(name, sizeof name, "gate-%d", i);
		rh_server *s = dl_slot_owner(cl, name);
		int fresh = 1;
		for (int k = 0; k < found; k++)
			fresh = fresh && seen[k] != s;
		if (!fresh)
			continue;
		seen[found] = s;
		snprintf(names[found++], sizeof names[0], "%s", name);
	}
	cr_assert_eq(found, 3, "no names on three shards");
}

Test(countdown_cluster, waiters_on_three_shards_wake_at_their_zero_and_cancel)
{
	dlock_client *c = dl_client(rh_cluster_seed_uri(cl), 2000, 0);
	dlock_client *d = dl_client(rh_cluster_seed_uri(cl), 2000, 0);
	char names[3][32];
	dlock_countdown *l[3], *down[3];
	waiter w[3];

	names_on_three_shards(names);
	for (int i = 0; i < 3; i++) {
		l[i] = latch_of(c, names[i]);
		down[i] = latch_of(d, names[i]);
		dl_pass(dlock_countdown_try_set_count(NULL, down[i], 1));
		waiter_start(&w[i], l[i], LONG_WAIT_MS);
	}
	dl_sleep_ms(SETTLE_MS + 200);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(w[i].returned, -1, "the waiter on %s returned (%d) at count 1",
				names[i], w[i].rc);
		int64_t at = rh_now_ms(), left = -1;
		dl_pass(dlock_countdown_count_down(&left, down[i]));
		cr_assert_eq(left, 0);
		pthread_join(w[i].th, NULL);
		cr_assert_eq(w[i].rc, 0, "%s: %s (%s)", names[i], dlock_strerror(w[i].rc),
				w[i].msg);
		cr_assert_leq(w[i].returned - at, WOKEN_WITHIN_MS,
				"the waiter on %s woke %lld ms after its zero", names[i],
				(long long)(w[i].returned - at));
	}

	/* A wait with no end is ended by cancel_waits, wherever its channel is. */
	dl_pass(dlock_countdown_try_set_count(NULL, down[1], 2));
	waiter_start(&w[1], l[1], DLOCK_WAIT_FOREVER);
	dl_sleep_ms(SETTLE_MS + 200);
	int64_t at = rh_now_ms();
	dl_pass(dlock_client_cancel_waits(c));
	pthread_join(w[1].th, NULL);
	cr_assert_eq(w[1].rc, DLOCK_ECANCELED, "%s (%s)", dlock_strerror(w[1].rc), w[1].msg);
	cr_assert_leq(w[1].returned - at, WOKEN_WITHIN_MS, "the cancel took %lld ms",
			(long long)(w[1].returned - at));

	for (int i = 0; i < 3; i++) {
		dlock_countdown_free(l[i]);
		dlock_countdown_free(down[i]);
	}
	dl_close_clients(c, d);
}

Test(countdown_cluster, a_name_whose_key_and_channel_hash_apart_is_refused)
{
	dlock_client *c = dl_client(rh_cluster_seed_uri(cl), 2000, 0);
	dlock_countdown *l = NULL;

	cr_assert_eq(dlock_countdown_new(&l, c, "{tag}gate", NULL), DLOCK_EINVAL);
	cr_assert(strstr(dlock_errmsg_last(), "slot") != NULL, "%s", dlock_errmsg_last());
	cr_assert_eq(dlock_countdown_new(&l, c, "a}b", NULL), DLOCK_EINVAL);
	dlock_client_free(c);
}
