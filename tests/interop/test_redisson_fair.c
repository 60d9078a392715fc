/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RFairLock and RFencedLock against the real Redisson (Java): one FIFO queue
 * across the two languages, a waiter that gives up leaves it, force unlock
 * wakes the head, and fencing tokens rise across both.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "interop.h"
#include "redis_harness.h"
#include "support.h"

#define QUEUE "redisson_lock_queue:{fair}"
#define TIMEOUTS "redisson_lock_timeout:{fair}"

static java_peer *peer;
static dlock_client *cli;

static void setup(void)
{
	dl_server_start();
	peer = jp_start(rh_server_uri(dl_srv), 30000);
	cli = dl_client(rh_server_uri(dl_srv), 5000, 30000);
}

static void teardown(void)
{
	jp_stop(peer);
	dlock_client_close(cli);
	dl_server_stop();
}

TestSuite(redisson_fair, .init = setup, .fini = teardown, .timeout = 180);

static dlock_lock *fair_lock(void)
{
	dlock_lock *l = NULL;
	dl_pass(dlock_fairlock_new(&l, cli, "fair", 0));
	return l;
}

/* Wait until the fair queue holds n waiters, so the next one queues behind. */
static void queue_reaches(int64_t n)
{
	int64_t deadline = rh_now_ms() + 10000, len = -1;
	while (rh_now_ms() < deadline && (len = rh_command_int(dl_srv, "LLEN " QUEUE)) != n)
		dl_sleep_ms(5);
	cr_assert_eq(len, n, "the fair queue holds %" PRId64 " waiters, expected %" PRId64, len, n);
}

static int64_t deadline_of(const char *owner)
{
	redisReply *r = rh_command(dl_srv, "ZSCORE " TIMEOUTS " %s", owner);
	cr_assert(r && r->type == REDIS_REPLY_STRING, "%s has no deadline in " TIMEOUTS, owner);
	int64_t v = strtoll(r->str, NULL, 10);
	freeReplyObject(r);
	return v;
}

static int queued(const char *owner)
{
	redisReply *r = rh_command(dl_srv, "LPOS " QUEUE " %s", owner);
	cr_assert_not_null(r);
	int in = r->type == REDIS_REPLY_INTEGER;
	freeReplyObject(r);
	return in;
}

static int lock_long(void *l)
{
	return dlock_lock_lock(l, IO_LONG_LEASE_MS);
}

static int try_briefly(void *l)
{
	return dlock_lock_try(l, 1500, IO_LONG_LEASE_MS);
}

static void c_owner(char *buf, size_t len, const io_call *w)
{
	cr_assert(dlock_client_owner(buf, len, cli, w->thread_id) > 0);
}

/* ---- FIFO across the languages --------------------------------------------- */

/* The four waiters, in the order they queue and must be served. */
typedef struct waiter {
	const char *java_worker; /* NULL: a dlock thread */
	long seq;                /* the Java lock request */
	io_call call;            /* the dlock lock call */
} waiter;

static int got_it(waiter *w, int64_t timeout_ms, int64_t *at_ns)
{
	if (w->java_worker) {
		jp_reply r;
		if (!jp_poll(peer, w->seq, timeout_ms, &r))
			return 0;
		cr_assert(r.ok, "Redisson's fair lock failed: %s", r.value);
		*at_ns = r.t_end_ns;
		return 1;
	}
	if (!io_call_poll(&w->call, timeout_ms))
		return 0;
	cr_assert_eq(w->call.rc, 0, "dlock's fair lock failed: rc %d", w->call.rc);
	*at_ns = w->call.t_end_ns;
	return 1;
}

/* Release waiter w's hold; returns when the unlock call started. */
static int64_t release(waiter *w, dlock_lock *l)
{
	if (w->java_worker) {
		jp_reply r;
		jp_ok(peer, &r, w->java_worker, "unlock fair fair");
		return r.t_start_ns;
	}
	int64_t start = jp_now_ns();
	cr_assert_eq(io_call_join(&w->call), 0);
	io_call_unlock(&w->call, cli, l);
	return start;
}

Test(redisson_fair, waiters_are_served_in_order_across_languages)
{
	dlock_lock *l = fair_lock();
	dl_pass(dlock_lock_lock(l, IO_LONG_LEASE_MS));
	waiter ws[] = { { .java_worker = "w1" }, { 0 }, { .java_worker = "w2" }, { 0 } };
	size_t n = sizeof ws / sizeof ws[0];
	for (size_t i = 0; i < n; i++) {
		if (ws[i].java_worker)
			ws[i].seq = jp_send(peer, ws[i].java_worker, "lock fair fair %d", IO_LONG_LEASE_MS);
		else
			io_call_start(&ws[i].call, lock_long, l);
		queue_reaches((int64_t)i + 1);
	}

	int64_t released = jp_now_ns();
	dl_pass(dlock_lock_unlock(l));
	for (size_t i = 0; i < n; i++) {
		int64_t at = 0;
		cr_assert(got_it(&ws[i], 10000, &at), "waiter %zu (%s) was not served next", i + 1,
				ws[i].java_worker ? "Redisson" : "dlock");
		for (size_t j = i + 1; j < n; j++)
			cr_assert_not(got_it(&ws[j], 0, &(int64_t){ 0 }),
					"waiter %zu got the fair lock before waiter %zu", j + 1, i + 1);
		char what[96];
		snprintf(what, sizeof what, "fair hand-off %zu, %s -> %s", i + 1,
				i == 0 ? "dlock" : ws[i - 1].java_worker ? "Redisson" : "dlock",
				ws[i].java_worker ? "Redisson" : "dlock");
		io_wake(peer, what, released, at);
		released = release(&ws[i], l);
	}
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS fair " QUEUE " " TIMEOUTS), 0);
	dlock_lock_free(l);
}

/* ---- a waiter that gives up ------------------------------------------------ */

/* Waiter A gives up; B, queued behind it, stays queued with an earlier
 * deadline (a waiter's deadline counts the waits of those ahead of it). */
static void gives_up_and_shrinks(const char *a_owner, const char *b_owner, int (*a_gave_up)(void))
{
	int64_t before = deadline_of(b_owner);
	cr_assert(a_gave_up(), "the first waiter did not give up");
	cr_assert_not(queued(a_owner), "the waiter that gave up is still queued");
	cr_assert(queued(b_owner), "the waiter behind it left the queue too");
	int64_t after = deadline_of(b_owner);
	fprintf(stderr, "interop fair give-up: the next waiter's deadline moved %" PRId64 " ms\n",
			after - before);
	cr_assert(after < before, "the next waiter's deadline did not shrink (%" PRId64 " -> %" PRId64 ")",
			before, after);
}

static io_call *gave_up_call;
static long gave_up_seq;

static int dlock_gave_up(void)
{
	return io_call_join(gave_up_call) == DLOCK_ENOTACQUIRED;
}

static int redisson_gave_up(void)
{
	jp_reply r;
	jp_wait(peer, gave_up_seq, &r);
	return r.ok && strcmp(r.value, "false") == 0;
}

Test(redisson_fair, a_dlock_waiter_that_gives_up_shrinks_redissons_deadline)
{
	jp_reply r;
	dlock_lock *l = fair_lock();
	jp_ok(peer, &r, "w0", "lock fair fair %d", IO_LONG_LEASE_MS);
	io_call a;
	io_call_start(&a, try_briefly, l);
	queue_reaches(1);
	char a_owner[128], b_owner[256];
	c_owner(a_owner, sizeof a_owner, &a);
	snprintf(b_owner, sizeof b_owner, "%s", jp_ok(peer, &r, "w1", "owner"));
	long b = jp_send(peer, "w1", "try fair fair 30000 %d", IO_LONG_LEASE_MS);
	queue_reaches(2);

	gave_up_call = &a;
	gives_up_and_shrinks(a_owner, b_owner, dlock_gave_up);
	jp_ok(peer, &r, "w0", "unlock fair fair");
	jp_wait(peer, b, &r);
	cr_assert_str_eq(r.value, "true", "Redisson's waiter: %s", r.value);
	jp_ok(peer, &r, "w1", "unlock fair fair");
	dlock_lock_free(l);
}

Test(redisson_fair, a_redisson_waiter_that_gives_up_shrinks_dlocks_deadline)
{
	jp_reply r;
	dlock_lock *l = fair_lock();
	dl_pass(dlock_lock_lock(l, IO_LONG_LEASE_MS));
	char a_owner[256], b_owner[128];
	snprintf(a_owner, sizeof a_owner, "%s", jp_ok(peer, &r, "w1", "owner"));
	gave_up_seq = jp_send(peer, "w1", "try fair fair 1500 %d", IO_LONG_LEASE_MS);
	queue_reaches(1);
	io_call b;
	io_call_start(&b, lock_long, l);
	queue_reaches(2);
	c_owner(b_owner, sizeof b_owner, &b);

	gives_up_and_shrinks(a_owner, b_owner, redisson_gave_up);
	dl_pass(dlock_lock_unlock(l));
	cr_assert_eq(io_call_join(&b), 0);
	io_call_unlock(&b, cli, l);
	dlock_lock_free(l);
}

/* ---- force unlock wakes the head ------------------------------------------- */

Test(redisson_fair, redissons_force_unlock_wakes_dlocks_head_waiter)
{
	jp_reply r;
	dlock_lock *l = fair_lock();
	jp_ok(peer, &r, "w0", "lock fair fair %d", IO_LONG_LEASE_MS);
	io_call w;
	io_call_start(&w, lock_long, l);
	queue_reaches(1);
	cr_assert_str_eq(jp_ok(peer, &r, "w9", "force fair fair"), "true");
	cr_assert_eq(io_call_join(&w), 0);
	io_wake(peer, "fair forceUnlock wake-up, Redisson -> dlock", r.t_start_ns, w.t_end_ns);
	io_call_unlock(&w, cli, l);
	dlock_lock_free(l);
}

Test(redisson_fair, dlocks_force_unlock_wakes_redissons_head_waiter)
{
	jp_reply r;
	dlock_lock *l = fair_lock();
	dl_pass(dlock_lock_lock(l, IO_LONG_LEASE_MS));
	long seq = jp_send(peer, "w1", "lock fair fair %d", IO_LONG_LEASE_MS);
	queue_reaches(1);
	int deleted = 0;
	int64_t forced = jp_now_ns();
	dl_pass(dlock_lock_force_unlock(&deleted, l));
	cr_assert_eq(deleted, 1);
	jp_wait(peer, seq, &r);
	cr_assert(r.ok, "Redisson's fair waiter: %s", r.value);
	io_wake(peer, "fair forceUnlock wake-up, dlock -> Redisson", forced, r.t_end_ns);
	jp_ok(peer, &r, "w1", "unlock fair fair");
	dlock_lock_free(l);
}

/* ---- fencing tokens ------------------------------------------------------------ */

static int64_t java_token(void)
{
	jp_reply r;
	int64_t token = strtoll(jp_ok(peer, &r, "w1", "lock fenced fenced 10000"), NULL, 10);
	jp_ok(peer, &r, "w1", "unlock fenced fenced");
	return token;
}

static int64_t dlock_token(dlock_lock *l)
{
	int64_t token = 0;
	dl_pass(dlock_lock_try_fenced(&token, l, NULL, 0, 10000));
	dl_pass(dlock_lock_unlock(l));
	return token;
}

Test(redisson_fair, fencing_tokens_rise_across_languages)
{
	dlock_lock *l = NULL;
	dl_pass(dlock_fencedlock_new(&l, cli, "fenced"));
	int64_t last = 0;
	for (int i = 0; i < 8; i++) {
		int java = i % 3 != 1; /* J C J J C J J C: runs of both */
		int64_t token = java ? java_token() : dlock_token(l);
		cr_assert(token > last, "acquisition %d (%s) got token %" PRId64 " after %" PRId64, i + 1,
				java ? "Redisson" : "dlock", token, last);
		last = token;
	}
	int64_t counter = 0;
	dl_pass(dlock_lock_token(&counter, l));
	cr_assert_eq(counter, last, "dlock reads the token counter as %" PRId64 ", last token %" PRId64,
			counter, last);
	dlock_lock_free(l);
}
