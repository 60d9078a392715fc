/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Asynchronous operations on a loop the test drives (dlock/async.h,
 * dlock/loop.h): every callback comes exactly once and never from inside
 * the call that started it; a wait is woken by the holder's unlock; and
 * cancellations at random moments - before the send, in flight, while
 * waiting, with the server paused part of the time - leave nothing held.
 */
#include <criterion/criterion.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

TestSuite(async, .init = dl_server_start, .fini = dl_server_stop, .timeout = 120);

static dlock_client *client_on(dlock_loop *loop)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.loop = loop;
	return dl_client_opts(rh_server_uri(dl_srv), &o);
}

static void acquire(dlock_lock *l, const char *owner, int64_t wait, dlock_op **op, dl_outcome *o)
{
	o->starting = 1;
	dl_pass(dlock_lock_acquire_async(op, l, owner, wait, DLOCK_LEASE_WATCHDOG, dl_note_checked,
			o));
	o->starting = 0;
}

Test(async, acquire_and_release_on_the_callers_loop_with_no_thread_of_dlocks)
{
	int before = dl_count_threads();
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dl_outcome a = { 0 }, r = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	l = dl_lock(c, "async:one");
	cr_assert_eq(dl_count_threads(), before, "a client on the caller's loop started a thread");
	acquire(l, "me:1", 0, NULL, &a);
	cr_assert_eq(a.calls, 0, "the callback ran inside the call that started it");
	dl_drive_until(loop, &a, 1, 1, 5000);
	cr_assert_eq(a.code, 0, "acquire: %d", a.code);
	cr_assert(a.validity > 25000, "validity %lld ms right after acquiring with the watchdog",
			(long long)a.validity);
	cr_assert_eq(rh_command_int(dl_srv, "HEXISTS async:one me:1"), 1);

	r.starting = 1;
	dl_pass(dlock_lock_release_async(NULL, l, "me:1", dl_note_checked, &r));
	r.starting = 0;
	dl_drive_until(loop, &r, 1, 1, 5000);
	cr_assert_eq(r.code, 0, "release: %d", r.code);
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS async:one"), 0);
	cr_assert_eq(a.calls + r.calls, 2);
	cr_assert(!a.inside && !r.inside);
	cr_assert_eq(dl_count_threads(), before);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

/* A callback that frees the lock its operation ran on, as a C++ coroutine
 * resumed from it frees the dlock::rlock it owned. */
typedef struct freeing {
	dl_outcome o;
	dlock_lock *lock;
} freeing;

static void note_and_free(dlock_op *op, const dlock_result *r, void *ud)
{
	freeing *f = ud;

	dl_note_checked(op, r, &f->o);
	dlock_lock_free(f->lock);
}

Test(async, a_lock_freed_by_its_operations_callback_lives_until_the_operation_ends)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	freeing a = { 0 }, r = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	/* The acquisition's callback frees the handle; so does the release's,
	 * of a second handle (an undo, a channel, the client's count: the
	 * operations' ends use their lock after the callback returned). */
	l = dl_lock(c, "async:freed");
	a.lock = l;
	dl_pass(dlock_lock_acquire_async(NULL, l, "me:1", 0, 10000, note_and_free, &a));
	dl_drive_until(loop, &a.o, 1, 1, 5000);
	cr_assert_eq(a.o.code, 0, "acquire: %d", a.o.code);
	l = dl_lock(c, "async:freed");
	r.lock = l;
	dl_pass(dlock_lock_release_async(NULL, l, "me:1", note_and_free, &r));
	dl_drive_until(loop, &r.o, 1, 1, 5000);
	cr_assert_eq(r.o.code, 0, "release: %d", r.o.code);
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS async:freed"), 0);
	/* Both handles, and the operations' counts, are gone: the client closes. */
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(async, a_waiter_is_woken_by_the_holders_unlock)
{
	dlock_loop *loop = NULL;
	dlock_client *c, *other = dl_client(rh_server_uri(dl_srv), 1000, 30000);
	dlock_lock *l, *held = dl_lock(other, "async:wake");
	dl_outcome a = { 0 };
	int64_t released_at;

	dl_pass(dlock_lock_acquire(held, NULL, DLOCK_WAIT_FOREVER, 30000)); /* a long TTL: only the message can wake it soon */
	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	l = dl_lock(c, "async:wake");
	acquire(l, "me:2", 10000, NULL, &a);
	for (int i = 0; i < 20; i++)
		dlock_loop_run(loop, 10); /* the first attempt fails; the listener subscribes */
	cr_assert_eq(a.calls, 0, "acquired a lock held by another client (code %d)", a.code);
	released_at = rh_now_ms();
	dl_pass(dlock_lock_release(held, NULL));
	dl_drive_until(loop, &a, 1, 1, 5000);
	cr_assert_eq(a.code, 0, "acquire after the unlock: %d", a.code);
	cr_assert(a.at - released_at < 1000, "woken %lld ms after the unlock (holder TTL 30 s)",
			(long long)(a.at - released_at));
	dlock_lock_free(held);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_client_free(other);
	dlock_loop_free(loop);
}

/* The test's own loop over the hooks: a poll over what dlock asked for. */
typedef struct hooks {
	int fds[64];
	short what[64];
	int n;
	int64_t timer_at; /* -1: none */
} hooks;

static void watch_fd(void *data, int fd, int what)
{
	hooks *h = data;
	int i;

	for (i = 0; i < h->n && h->fds[i] != fd; i++)
		;
	if (what == 0) {
		if (i < h->n) {
			h->fds[i] = h->fds[--h->n];
			h->what[i] = h->what[h->n];
		}
		return;
	}
	cr_assert(i < 64);
	if (i == h->n)
		h->n++;
	h->fds[i] = fd;
	h->what[i] = (short)what;
}

static void set_timer(void *data, int64_t ms)
{
	((hooks *)data)->timer_at = ms < 0 ? -1 : rh_now_ms() + ms;
}

static void hooks_turn(dlock_loop *loop, hooks *h)
{
	struct pollfd p[64];
	int i, n = h->n, wait = 50;

	for (i = 0; i < n; i++) {
		p[i].fd = h->fds[i];
		p[i].events = (short)(((h->what[i] & DLOCK_POLL_IN) ? POLLIN : 0) |
				((h->what[i] & DLOCK_POLL_OUT) ? POLLOUT : 0));
		p[i].revents = 0;
	}
	if (h->timer_at >= 0)
		wait = (int)(h->timer_at - rh_now_ms() < 0 ? 0 : h->timer_at - rh_now_ms());
	if (wait > 50)
		wait = 50;
	poll(p, (nfds_t)n, wait);
	for (i = 0; i < n; i++)
		if (p[i].revents)
			dlock_loop_fd_ready(loop, p[i].fd,
					((p[i].revents & (POLLIN | POLLERR | POLLHUP)) ? DLOCK_POLL_IN : 0) |
							((p[i].revents & POLLOUT) ? DLOCK_POLL_OUT : 0));
	if (h->timer_at >= 0 && rh_now_ms() >= h->timer_at) {
		h->timer_at = -1;
		dlock_loop_timeout(loop);
	}
}

Test(async, a_loop_driven_by_callbacks_runs_contended_acquisitions)
{
	hooks h = { .timer_at = -1 };
	dlock_loop_options lo = DLOCK_LOOP_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dl_outcome a[3] = { { 0 } };
	char owner[3][16];
	int64_t until;
	int i, held = -1;

	lo.watch_fd = watch_fd;
	lo.set_timer = set_timer;
	lo.userdata = &h;
	dl_pass(dlock_loop_new(&loop, &lo));
	c = client_on(loop);
	l = dl_lock(c, "async:hooks");
	for (i = 0; i < 3; i++) {
		snprintf(owner[i], sizeof(owner[i]), "o:%d", i);
		acquire(l, owner[i], 10000, NULL, &a[i]);
	}
	/* One gets it; each release lets the next one in, woken by pub/sub. */
	until = rh_now_ms() + 10000;
	for (int got = 0; got < 3 && rh_now_ms() < until;) {
		hooks_turn(loop, &h);
		for (i = 0; i < 3; i++) {
			if (a[i].calls == 1 && a[i].code == 0 && held != i && a[i].validity > 0) {
				cr_assert_eq(held, -1, "%s and %s held at once", owner[held], owner[i]);
				held = i;
			}
		}
		if (held >= 0) {
			dl_outcome r = { 0 };

			dl_pass(dlock_lock_release_async(NULL, l, owner[held], dl_note_checked,
					&r));
			while (r.calls == 0 && rh_now_ms() < until)
				hooks_turn(loop, &h);
			cr_assert_eq(r.code, 0);
			a[held].validity = 0; /* done with it */
			held = -1;
			got++;
		}
	}
	for (i = 0; i < 3; i++)
		cr_assert(a[i].calls == 1 && a[i].code == 0, "%s: %d callback(s), code %d", owner[i],
				a[i].calls, a[i].code);
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS async:hooks"), 0);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

/* How many of the test's lock names exist on the server. */
static size_t held_keys(void)
{
	redisReply *r = rh_command(dl_srv, "KEYS async:cancel:*");
	size_t n;

	cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
	n = r->elements;
	freeReplyObject(r);
	return n;
}

/*
 * Many acquisitions of a few names, each canceled at a random moment, the
 * server paused for a while in the middle: each callback comes once; the
 * ones that report acquired are released; afterwards no lock is held.
 */
Test(async, random_cancellations_leave_nothing_held)
{
	enum { OPS = 600, NAMES = 8 };
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l[NAMES];
	dlock_op *op[OPS];
	dl_outcome *o = calloc(OPS, sizeof(*o)), *rel = calloc(OPS, sizeof(*rel));
	int releasing[OPS] = { 0 }, retried[OPS] = { 0 };
	int cancel_at[OPS], released = 0, canceled = 0, acquired = 0;
	int64_t t0, paused_at = -1;
	unsigned seed = (unsigned)rh_now_ms();
	char name[32], owner[64];
	int i, k;

	cr_assert(o != NULL && rel != NULL);
	srand(seed);
	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	for (k = 0; k < NAMES; k++) {
		snprintf(name, sizeof(name), "async:cancel:%d", k);
		l[k] = dl_lock(c, name);
	}
	for (i = 0; i < OPS; i++) {
		dlock_client_owner(owner, c, (uint64_t)i);
		acquire(l[i % NAMES], owner, 2000 + rand() % 2000, &op[i], &o[i]);
		cancel_at[i] = rand() % 3000; /* ms from now; some after the op ended */
		if (rand() % 8 == 0) {
			cr_assert_eq(dlock_op_cancel(op[i]), 0); /* before it was sent */
			cancel_at[i] = -1;
			canceled++;
		}
	}
	t0 = rh_now_ms();
	while (rh_now_ms() - t0 < 15000) {
		int64_t now = rh_now_ms() - t0;
		int pending = 0;

		if (paused_at < 0 && now > 500) {
			cr_assert_eq(rh_server_pause(dl_srv), 0);
			paused_at = now;
		} else if (paused_at >= 0 && paused_at < 1000000 && now > paused_at + 1500) {
			cr_assert_eq(rh_server_resume(dl_srv), 0);
			paused_at = 1000000;
		}
		dlock_loop_run(loop, 10);
		for (i = 0; i < OPS; i++) {
			if (o[i].calls == 0 && cancel_at[i] >= 0 && now >= cancel_at[i]) {
				cr_assert_eq(dlock_op_cancel(op[i]), 0);
				cancel_at[i] = -1;
				canceled++;
			}
			/* Acquired: released; a release met by the pause is sent again. */
			if (o[i].calls == 1 && o[i].code == 0 &&
					(rel[i].calls == 0 ? !releasing[i] : rel[i].code == DLOCK_ETIMEDOUT)) {
				if (!releasing[i])
					acquired++;
				else
					retried[i] = 1; /* the one that timed out may have run */
				releasing[i] = 1;
				rel[i] = (dl_outcome){ 0 };
				dlock_client_owner(owner, c, (uint64_t)i);
				dl_pass(dlock_lock_release_async(NULL, l[i % NAMES], owner,
						dl_note_checked, &rel[i]));
			}
			if (releasing[i] && rel[i].calls == 1 && rel[i].code != DLOCK_ETIMEDOUT &&
					releasing[i]++ == 1) {
				/* After a release that timed out and still ran, the next one
				 * finds no hold: not owner, or lost (this client's record). */
				cr_assert(rel[i].code == 0 ||
								(retried[i] && (rel[i].code == DLOCK_ENOTOWNER ||
										       rel[i].code == DLOCK_ELOST)),
						"release of w:%d: %d %s", i, rel[i].code, dlock_lock_errmsg(l[i % NAMES]));
				released++;
			}
			pending += o[i].calls == 0 || (releasing[i] == 1);
			cr_assert(o[i].calls <= 1, "w:%d had %d callbacks", i, o[i].calls);
		}
		if (pending == 0 && paused_at == 1000000)
			break;
	}
	if (paused_at < 1000000)
		rh_server_resume(dl_srv);
	for (i = 0; i < OPS; i++) {
		cr_assert_eq(o[i].calls, 1, "w:%d had %d callbacks (seed %u)", i, o[i].calls, seed);
		cr_assert(!o[i].inside);
		cr_assert(o[i].code == 0 || o[i].code == DLOCK_ECANCELED ||
						o[i].code == DLOCK_ENOTACQUIRED || o[i].code == DLOCK_ETIMEDOUT ||
						o[i].code == DLOCK_ECONN,
				"w:%d ended with %d (seed %u)", i, o[i].code, seed);
	}
	/* Undos queued behind abandoned attempts run once the server answers. */
	for (k = 0; k < 50; k++) {
		dlock_loop_run(loop, 20);
		if (held_keys() == 0)
			break;
	}
	if (held_keys() != 0) {
		redisReply *kr = rh_command(dl_srv, "KEYS async:cancel:*");
		for (size_t j = 0; kr && j < kr->elements; j++)
			fprintf(stderr, "key: %s\n", kr->element[j]->str);
		freeReplyObject(kr);
		for (k = 0; k < NAMES; k++) {
			redisReply *r = rh_command(dl_srv, "HGETALL async:cancel:%d", k);
			for (size_t j = 0; r && j + 1 < r->elements; j += 2) {
				int w = -1;
				sscanf(strrchr(r->element[j]->str, ':') + 1, "%d", &w);
				fprintf(stderr, "held: async:cancel:%d by w:%d count %s: calls %d code %d\n", k, w,
						r->element[j + 1]->str, w >= 0 ? o[w].calls : -1, w >= 0 ? o[w].code : 0);
			}
			freeReplyObject(r);
		}
	}
	cr_assert_eq(held_keys(), 0,
			"locks still held after %d acquired, %d released, %d cancels (seed %u)", acquired,
			released, canceled, seed);
	for (i = 0; i < OPS; i++)
		dlock_op_free(op[i]);
	for (k = 0; k < NAMES; k++)
		dlock_lock_free(l[k]);
	dlock_client_free(c);
	dlock_loop_free(loop);
	free(o);
	free(rel);
}

/* Replica acknowledgement holds for asynchronous acquisitions too: a
 * server with no replica cannot give one, so the hold is given back. */
Test(async, too_few_replicas_give_the_hold_back)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dl_outcome a = { 0 };
	char owner[64];

	dl_pass(dlock_loop_new(&loop, NULL));
	co.loop = loop;
	co.sync_replicas = 1;
	co.sync_timeout_ms = 200;
	c = dl_client_opts(rh_server_uri(dl_srv), &co);
	l = dl_lock(c, "async:sync");
	dlock_client_owner(owner, c, 7);
	acquire(l, owner, 0, NULL, &a);
	dl_drive_until(loop, &a, 1, 1, 5000);
	cr_assert_eq(a.code, DLOCK_ENOSYNC, "acquire with no replica to acknowledge: %d", a.code);
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS async:sync"), 0, "the unacknowledged hold stayed");
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

/* A watch: released (0), lost to a force unlock (DLOCK_ELOST with the
 * reason), canceled, and on nothing held. */
Test(async, a_watch_hears_how_a_hold_ends)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dlock_op *op = NULL;
	dl_outcome a = { 0 }, w1 = { 0 }, w2 = { 0 }, w3 = { 0 }, w4 = { 0 }, r = { 0 };
	int lost_reason = -1;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	l = dl_lock(c, "async:watch");
	/* Nothing held: said at once (from the loop). */
	w4.starting = 1;
	dl_pass(dlock_lock_watch_async(NULL, l, "me:9", dl_note_checked, &w4));
	w4.starting = 0;
	dl_drive_until(loop, &w4, 1, 1, 5000);
	cr_assert_eq(w4.code, DLOCK_ENOTOWNER, "watch of nothing: %d", w4.code);

	/* Released: the watch ends with 0. */
	acquire(l, "me:1", 0, NULL, &a);
	dl_drive_until(loop, &a, 1, 1, 5000);
	cr_assert_eq(a.code, 0);
	dl_pass(dlock_lock_watch_async(NULL, l, "me:1", dl_note_checked, &w1));
	dl_pass(dlock_lock_watch_async(&op, l, "me:1", dl_note_checked, &w3));
	dlock_loop_run(loop, 10);
	cr_assert_eq(w1.calls + w3.calls, 0, "a watch ended while the hold lasts");
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	dl_drive_until(loop, &w3, 1, 1, 5000);
	cr_assert_eq(w3.code, DLOCK_ECANCELED);
	dl_pass(dlock_lock_release_async(NULL, l, "me:1", dl_note_checked, &r));
	dl_drive_until(loop, &w1, 1, 1, 5000);
	cr_assert_eq(w1.code, 0, "watch of a released hold: %d", w1.code);

	/* Force-unlocked: DLOCK_ELOST, reason FORCED. */
	a = (dl_outcome){ 0 };
	acquire(l, "me:2", 0, NULL, &a);
	dl_drive_until(loop, &a, 1, 1, 5000);
	cr_assert_eq(a.code, 0);
	w2.starting = 1;
	dl_pass(dlock_lock_watch_async(NULL, l, "me:2", dl_note_checked, &w2));
	w2.starting = 0;
	dlock_loop_run(loop, 10);
	dl_pass(dlock_lock_force_release(NULL, l));
	dl_drive_until(loop, &w2, 1, 1, 5000);
	cr_assert_eq(w2.code, DLOCK_ELOST, "watch of a force-unlocked hold: %d", w2.code);
	lost_reason = w2.lost_reason;
	cr_assert_eq(lost_reason, DLOCK_LOST_FORCED, "reason %d", lost_reason);
	cr_assert(!w1.inside && !w2.inside && !w3.inside && !w4.inside);
	cr_assert_eq(w1.calls + w2.calls + w3.calls + w4.calls, 4);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

/*
 * On the caller's loop every pooled connection lent out is lent to the
 * loop's own thread, to an operation in flight: a blocking call (or the
 * watchdog's renewal) that waited for one to come back would wait for
 * itself until the command timeout. It opens another instead.
 */
Test(async, a_blocking_call_beside_operations_in_flight_does_not_wait_for_the_pool)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l, *other;
	dl_outcome a = { 0 };
	int64_t t0, took;
	int locked = -1;

	dl_pass(dlock_loop_new(&loop, NULL));
	co.loop = loop;
	co.pool_size = 1;
	co.command_timeout_ms = 2000;
	c = dl_client_opts(rh_server_uri(dl_srv), &co);
	l = dl_lock(c, "async:pool:a");
	other = dl_lock(c, "async:pool:b");
	acquire(l, "me:pool", 0, NULL, &a);
	/* One turn: the acquire starts on the pool's one connection and waits
	 * there for its reply. */
	cr_assert(dlock_loop_run(loop, 1000) >= 0);
	cr_assert_eq(a.calls, 0, "the acquire ended within one turn of the loop");
	t0 = rh_now_ms();
	dl_pass(dlock_lock_is_locked(&locked, other));
	took = rh_now_ms() - t0;
	cr_assert_eq(locked, 0);
	cr_assert(took < 1000, "a query beside an acquire in flight took %lld ms (pool of 1)",
			(long long)took);
	dl_drive_until(loop, &a, 1, 1, 5000);
	cr_assert_eq(a.code, 0, "acquire: %d", a.code);
	dlock_lock_free(l);
	dlock_lock_free(other);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

/*
 * A renewal round that fails slowly (the server is paused: it ends at the
 * command timeout) runs on the loop without holding it, and is tried again
 * a while after it ended, not at once and again and again: the loop's
 * other work goes on all along.
 */
Test(async, a_slowly_failing_renewal_lets_the_loop_run_between_tries)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dl_outcome a = { 0 };
	int64_t longest;

	dl_pass(dlock_loop_new(&loop, NULL));
	co.loop = loop;
	co.command_timeout_ms = 400;
	co.watchdog_timeout_ms = 3000; /* renewed every 1 s; retried 0.25 s after a failure */
	c = dl_client_opts(rh_server_uri(dl_srv), &co);
	l = dl_lock(c, "async:slow-renewal");
	acquire(l, "me:slow", 0, NULL, &a);
	dl_drive_until(loop, &a, 1, 1, 5000);
	cr_assert_eq(a.code, 0, "acquire: %d", a.code);
	cr_assert_eq(rh_server_pause(dl_srv), 0);
	/* Rounds fail for 2.5 s: each turn of the loop costs at most one. */
	longest = dl_longest_loop_turn(loop, 2500, 50);
	cr_assert(longest >= 0);
	cr_assert_eq(rh_server_resume(dl_srv), 0);
	cr_assert(longest < 300, "one turn of the loop took %lld ms while renewals failed "
			"(command timeout 400 ms)", (long long)longest);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

/* Acquire (or release, release != 0) every lock of l[], `window` at a time,
 * each as owner "me:many"; every callback must say 0. */
static void each_lock(dlock_loop *loop, dlock_lock **l, int n, int window, int release)
{
	dl_outcome *o = calloc((size_t)n, sizeof(*o));
	int started = 0, done = 0;
	int64_t until = rh_now_ms() + 60000;

	cr_assert(o != NULL);
	while (done < n && rh_now_ms() < until) {
		while (started < n && started - done < window) {
			if (release)
				dl_pass(dlock_lock_release_async(NULL, l[started], "me:many", dl_note_checked,
						&o[started]));
			else
				dl_pass(dlock_lock_acquire_async(NULL, l[started], "me:many", 0,
						DLOCK_LEASE_WATCHDOG, dl_note_checked, &o[started]));
			started++;
		}
		cr_assert(dlock_loop_run(loop, 50) >= 0);
		while (done < started && o[done].calls == 1) {
			cr_assert_eq(o[done].code, 0, "%s of lock %d: %d",
					release ? "release" : "acquire", done, o[done].code);
			done++;
		}
	}
	cr_assert_eq(done, n, "%d of %d %s", done, n, release ? "released" : "acquired");
	free(o);
}

/*
 * A client that held 20,000 locks at once has a holds table sized for
 * them; freeing the handles after their releases must not walk it for
 * each one (20,000 x 32,768 buckets took 0.7 s).
 */
Test(async, freeing_many_released_handles_is_quick)
{
	enum { N = 20000 };
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock **l = calloc(N, sizeof(*l));
	char name[32];
	int64_t t0, took;

	cr_assert(l != NULL);
	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "async:many:%d", i);
		l[i] = dl_lock(c, name);
	}
	each_lock(loop, l, N, 8, 0);
	each_lock(loop, l, N, 8, 1);
	t0 = rh_now_ms();
	for (int i = 0; i < N; i++)
		dlock_lock_free(l[i]);
	took = rh_now_ms() - t0;
	cr_assert(took < 250, "freeing %d released handles took %lld ms", N, (long long)took);
	dlock_client_free(c);
	dlock_loop_free(loop);
	free(l);
}

/*
 * Two servers' clients on one loop; one server hangs. Its renewal round
 * sends its 10 batches at once and waits for them on the loop, rather than
 * a command timeout for each in turn (2 s) while the loop - and the other
 * client's renewals with it - stand still: the healthy server's hold, with
 * a watchdog timeout of 1.2 s, outlives a 2.5 s hang.
 */
Test(async, a_hung_server_does_not_stop_another_clients_renewals)
{
	enum { N = 1000 };
	dlock_client_options ho = DLOCK_CLIENT_OPTIONS_INIT, wo = DLOCK_CLIENT_OPTIONS_INIT;
	rh_server *other = rh_server_start(NULL);
	dlock_loop *loop = NULL;
	dlock_client *hung, *well;
	dlock_lock **l = calloc(N, sizeof(*l)), *kept;
	dl_outcome a = { 0 };
	char name[32];
	int64_t longest;

	cr_assert(other != NULL && l != NULL);
	dl_pass(dlock_loop_new(&loop, NULL));
	ho.loop = wo.loop = loop;
	ho.command_timeout_ms = 200;
	ho.watchdog_timeout_ms = 6000;
	wo.watchdog_timeout_ms = 1200; /* renewed every 400 ms */
	hung = dl_client_opts(rh_server_uri(dl_srv), &ho);
	well = dl_client_opts(rh_server_uri(other), &wo);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "async:hung:%d", i);
		l[i] = dl_lock(hung, name);
	}
	each_lock(loop, l, N, 8, 0); /* 10 batches of renewals */
	kept = dl_lock(well, "async:healthy");
	acquire(kept, "me:well", 0, NULL, &a);
	dl_drive_until(loop, &a, 1, 1, 5000);
	cr_assert_eq(a.code, 0, "acquire: %d", a.code);

	cr_assert_eq(rh_server_pause(dl_srv), 0);
	longest = dl_longest_loop_turn(loop, 2500, 50);
	cr_assert(longest >= 0);
	cr_assert_eq(rh_server_resume(dl_srv), 0);
	cr_assert_eq(dlock_lock_check(kept, "me:well"), 0, "the healthy server's hold was lost");
	cr_assert_eq(rh_command_int(other, "EXISTS async:healthy"), 1);
	cr_assert(longest < 1000, "one turn of the loop took %lld ms (command timeout 200 ms)",
			(long long)longest);

	for (int i = 0; i < N; i++)
		dlock_lock_free(l[i]);
	dlock_lock_free(kept);
	dlock_client_free(hung);
	dlock_client_free(well);
	dlock_loop_free(loop);
	rh_server_free(other);
	free(l);
}
