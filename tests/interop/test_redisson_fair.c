/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RFairLock and RFencedLock against the real Redisson (Java): one FIFO queue
 * across the two languages, a waiter that gives up leaves it, force unlock
 * wakes the head, and fencing tokens rise across both.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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
	dlock_client_free(cli);
	dl_server_stop();
}

TestSuite(redisson_fair, .init = setup, .fini = teardown, .timeout = 180);

static dlock_lock *fair_lock(void)
{
	dlock_lock *l = NULL;
	dl_pass(dlock_lock_new(&l, cli, "fair", dl_kind(DLOCK_LOCK_FAIR)));
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

/* Wait until the fair waiter `owner` listens on its channel. */
static void subscribed(const char *owner)
{
	int64_t deadline = rh_now_ms() + 10000;
	while (rh_now_ms() < deadline) {
		redisReply *r = rh_command(
				dl_srv, "PUBSUB NUMSUB redisson_lock__channel:{fair}:%s", owner);
		cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
		long long n = r->element[1]->integer;
		freeReplyObject(r);
		if (n > 0)
			return;
		dl_sleep_ms(2);
	}
	cr_assert_fail("the fair waiter %s never subscribed to its channel", owner);
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

/* ---- waiters of either language -------------------------------------------- */

/* A waiter in the fair queue: a Redisson worker or a dlock thread. */
typedef struct waiter {
	const char *java_worker; /* NULL: a dlock thread */
	int64_t wait_ms;         /* how long it waits before giving up */
	dlock_lock *l;           /* the dlock side's handle */
	long seq;                /* the Java request */
	io_call call;            /* the dlock call */
	char owner[256];         /* its field in the queue */
} waiter;

static int c_try(void *arg)
{
	waiter *w = arg;
	return dlock_lock_acquire(w->l, NULL, w->wait_ms, IO_LONG_LEASE_MS);
}

/* Queue w as the position-th waiter. */
static void join_queue(waiter *w, int64_t position)
{
	jp_reply r;
	if (w->java_worker) {
		snprintf(w->owner, sizeof w->owner, "%s", jp_ok(peer, &r, w->java_worker, "owner"));
		w->seq = jp_send(peer, w->java_worker, "try fair fair %lld %d",
				(long long)w->wait_ms, IO_LONG_LEASE_MS);
	} else {
		io_call_start(&w->call, c_try, w);
	}
	queue_reaches(position);
	if (!w->java_worker)
		cr_assert_eq(dlock_client_owner(w->owner, cli, w->call.thread_id), 0);
	/* Queued comes before subscribed: a wake-up timed before the waiter
	 * listens would time its retry instead. */
	subscribed(w->owner);
}

static const char *language(const waiter *w)
{
	return w->java_worker ? "Redisson" : "dlock";
}

/* Whether w's try returned within timeout_ms: *got says if it took the lock,
 * *at_ns when it returned. */
static int returned(waiter *w, int64_t timeout_ms, int *got, int64_t *at_ns)
{
	if (w->java_worker) {
		jp_reply r;
		if (!jp_poll(peer, w->seq, timeout_ms, &r))
			return 0;
		cr_assert(r.ok, "Redisson's fair lock failed: %s", r.value);
		*got = strcmp(r.value, "true") == 0;
		*at_ns = r.t_end_ns;
		return 1;
	}
	if (!io_call_poll(&w->call, timeout_ms))
		return 0;
	cr_assert(w->call.rc == 0 || w->call.rc == DLOCK_ENOTACQUIRED, "dlock's fair lock: rc %d",
			w->call.rc);
	*got = w->call.rc == 0;
	*at_ns = w->call.t_end_ns;
	return 1;
}

/* Wait for w to take the lock; returns when it did. */
static int64_t takes_it(waiter *w, int64_t timeout_ms, const char *why)
{
	int got = 0;
	int64_t at = 0;
	cr_assert(returned(w, timeout_ms, &got, &at) && got, "%s (%s)", why, language(w));
	return at;
}

/* Release w's hold; returns when the unlock call started. */
static int64_t release(waiter *w)
{
	jp_reply r;
	if (w->java_worker) {
		jp_ok(peer, &r, w->java_worker, "unlock fair fair");
		return r.t_start_ns;
	}
	int64_t start = jp_now_ns();
	cr_assert_eq(io_call_join(&w->call), 0);
	io_call_unlock(&w->call, cli, w->l);
	return start;
}

/* ---- FIFO across the languages --------------------------------------------- */

Test(redisson_fair, waiters_are_served_in_order_across_languages)
{
	dlock_lock *l = fair_lock();
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, IO_LONG_LEASE_MS));
	waiter ws[] = { { .java_worker = "w1" }, { 0 }, { .java_worker = "w2" }, { 0 } };
	size_t n = sizeof ws / sizeof ws[0];
	for (size_t i = 0; i < n; i++) {
		ws[i].wait_ms = 30000;
		ws[i].l = l;
		join_queue(&ws[i], (int64_t)i + 1);
	}

	int64_t released = jp_now_ns();
	dl_pass(dlock_lock_release(l, NULL));
	for (size_t i = 0; i < n; i++) {
		int64_t at = takes_it(&ws[i], 10000, "the next waiter was not served next");
		for (size_t j = i + 1; j < n; j++)
			cr_assert_not(returned(&ws[j], 0, &(int){ 0 }, &(int64_t){ 0 }),
					"waiter %zu got the fair lock before waiter %zu", j + 1,
					i + 1);
		char what[96];
		snprintf(what, sizeof what, "fair hand-off %zu, %s -> %s", i + 1,
				i == 0 ? "dlock" : language(&ws[i - 1]), language(&ws[i]));
		io_wake(peer, what, released, at);
		released = release(&ws[i]);
	}
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS fair " QUEUE " " TIMEOUTS), 0);
	dlock_lock_free(l);
}

/* ---- a waiter that gives up ------------------------------------------------ */

/* Waiter a (1.5 s) gives up; b, queued behind it, stays queued with an
 * earlier deadline (a waiter's deadline counts the waits of those ahead of
 * it) and takes the lock when the holder lets go. */
static void gives_up_and_shrinks(waiter *a, waiter *b, void (*holder_releases)(void))
{
	a->wait_ms = 1500;
	b->wait_ms = 30000;
	join_queue(a, 1);
	join_queue(b, 2);
	int64_t before = deadline_of(b->owner);
	int got = 1;
	int64_t at = 0;
	cr_assert(returned(a, 30000, &got, &at) && !got, "the first waiter (%s) did not give up",
			language(a));
	cr_assert_not(queued(a->owner), "the waiter that gave up is still queued");
	cr_assert(queued(b->owner), "the waiter behind it left the queue too");
	int64_t after = deadline_of(b->owner);
	fprintf(stderr,
			"interop fair give-up (%s, then %s): the next deadline moved %" PRId64
			" ms\n",
			language(a), language(b), after - before);
	cr_assert(after < before,
			"the next waiter's deadline did not shrink (%" PRId64 " -> %" PRId64 ")",
			before, after);
	if (!a->java_worker)
		io_call_join(&a->call);
	holder_releases();
	takes_it(b, 10000, "the waiter behind did not get the lock");
	release(b);
}

static dlock_lock *holder_lock;

static void redisson_holder_releases(void)
{
	jp_reply r;
	jp_ok(peer, &r, "w0", "unlock fair fair");
}

static void dlock_holder_releases(void)
{
	dl_pass(dlock_lock_release(holder_lock, NULL));
}

Test(redisson_fair, a_dlock_waiter_that_gives_up_shrinks_redissons_deadline)
{
	jp_reply r;
	dlock_lock *l = fair_lock();
	jp_ok(peer, &r, "w0", "lock fair fair %d", IO_LONG_LEASE_MS);
	waiter a = { .l = l }, b = { .java_worker = "w1" };
	gives_up_and_shrinks(&a, &b, redisson_holder_releases);
	dlock_lock_free(l);
}

Test(redisson_fair, a_redisson_waiter_that_gives_up_shrinks_dlocks_deadline)
{
	holder_lock = fair_lock();
	dl_pass(dlock_lock_acquire(holder_lock, NULL, DLOCK_WAIT_FOREVER, IO_LONG_LEASE_MS));
	waiter a = { .java_worker = "w1" }, b = { .l = holder_lock };
	gives_up_and_shrinks(&a, &b, dlock_holder_releases);
	dlock_lock_free(holder_lock);
}

/* ---- force unlock wakes the head ------------------------------------------- */

/* The head waiter (queued and subscribed) wakes from the other side's force unlock. */
static void force_wakes_head(waiter *head, int64_t (*force)(void), const char *what)
{
	head->wait_ms = 30000;
	join_queue(head, 1);
	int64_t forced = force();
	io_wake(peer, what, forced, takes_it(head, 10000, "the head waiter did not wake"));
	release(head);
}

static int64_t redisson_forces(void)
{
	jp_reply r;
	cr_assert_str_eq(jp_ok(peer, &r, "w9", "force fair fair"), "true");
	return r.t_start_ns;
}

static int64_t dlock_forces(void)
{
	int deleted = 0;
	int64_t start = jp_now_ns();
	dl_pass(dlock_lock_force_release(&deleted, holder_lock));
	cr_assert_eq(deleted, 1);
	return start;
}

Test(redisson_fair, redissons_force_unlock_wakes_dlocks_head_waiter)
{
	jp_reply r;
	dlock_lock *l = fair_lock();
	jp_ok(peer, &r, "w0", "lock fair fair %d", IO_LONG_LEASE_MS);
	waiter head = { .l = l };
	force_wakes_head(&head, redisson_forces, "fair forceUnlock wake-up, Redisson -> dlock");
	dlock_lock_free(l);
}

Test(redisson_fair, dlocks_force_unlock_wakes_redissons_head_waiter)
{
	holder_lock = fair_lock();
	dl_pass(dlock_lock_acquire(holder_lock, NULL, DLOCK_WAIT_FOREVER, IO_LONG_LEASE_MS));
	waiter head = { .java_worker = "w1" };
	force_wakes_head(&head, dlock_forces, "fair forceUnlock wake-up, dlock -> Redisson");
	dlock_lock_free(holder_lock);
}

/* A plain handle cannot know the lock is fair: the force unlock tells by the
 * queue, and wakes Redisson's head on its own channel (not on its timer, the
 * holder's IO_LONG_LEASE_MS). */
static int64_t dlock_plain_handle_forces(void)
{
	dlock_lock *plain = NULL;
	int deleted = 0;
	dl_pass(dlock_lock_new(&plain, cli, "fair", NULL));
	int64_t start = jp_now_ns();
	dl_pass(dlock_lock_force_release(&deleted, plain));
	cr_assert_eq(deleted, 1);
	dlock_lock_free(plain);
	return start;
}

/* The wake-up from `force` of Redisson's head waiter in lock(), not tryLock(). */
static void force_wakes_locking_head(int64_t (*force)(void), const char *what)
{
	jp_reply r;
	jp_ok(peer, &r, "w0", "lock fair fair %d", IO_LONG_LEASE_MS);
	char owner[256];
	snprintf(owner, sizeof owner, "%s", jp_ok(peer, &r, "w1", "owner"));
	long seq = jp_send(peer, "w1", "lock fair fair %d", IO_LONG_LEASE_MS);
	queue_reaches(1);
	subscribed(owner);
	/* Past its retry after subscribing: asleep until a message or its timer. */
	dl_sleep_ms(IO_SETTLE_MS);
	int64_t forced = force();
	jp_wait(peer, seq, &r);
	cr_assert(r.ok, "Redisson's lock() failed: %s", r.value);
	io_wake(peer, what, forced, r.t_end_ns);
	jp_ok(peer, &r, "w1", "unlock fair fair");
}

Test(redisson_fair, a_plain_handles_force_unlock_wakes_redissons_head_waiter)
{
	force_wakes_locking_head(dlock_plain_handle_forces,
			"fair forceUnlock wake-up, dlock plain handle -> Redisson lock()");
}

#ifdef DLOCK_CLI_PATH
extern char **environ;

/* `dlock unlock --force fair`, the command line (a plain handle). */
static int64_t dlock_command_forces(void)
{
	const char *argv[] = { DLOCK_CLI_PATH, "-n", rh_server_uri(dl_srv), "unlock", "--force",
		"fair", NULL };
	int64_t start = jp_now_ns();
	pid_t pid;
	int status = -1;
	cr_assert_eq(posix_spawn(&pid, DLOCK_CLI_PATH, NULL, NULL, (char **)argv, environ), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			"dlock unlock --force fair: status %d", status);
	return start;
}

Test(redisson_fair, the_commands_force_unlock_wakes_redissons_head_waiter)
{
	force_wakes_locking_head(dlock_command_forces,
			"fair forceUnlock wake-up, dlock unlock --force -> Redisson lock()");
}
#endif

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
	dl_pass(dlock_lock_acquire_fenced(&token, l, NULL, 0, 10000));
	dl_pass(dlock_lock_release(l, NULL));
	return token;
}

Test(redisson_fair, fencing_tokens_rise_across_languages)
{
	dlock_lock *l = NULL;
	dl_pass(dlock_lock_new(&l, cli, "fenced", dl_kind(DLOCK_LOCK_FENCED)));
	int64_t last = 0;
	for (int i = 0; i < 8; i++) {
		int java = i % 3 != 1; /* J C J J C J J C: runs of both */
		int64_t token = java ? java_token() : dlock_token(l);
		cr_assert(token > last, "acquisition %d (%s) got token %" PRId64 " after %" PRId64,
				i + 1, java ? "Redisson" : "dlock", token, last);
		last = token;
	}
	int64_t counter = 0;
	dl_pass(dlock_lock_token(&counter, l));
	cr_assert_eq(counter, last,
			"dlock reads the token counter as %" PRId64 ", last token %" PRId64,
			counter, last);
	dlock_lock_free(l);
}
