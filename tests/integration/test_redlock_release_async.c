/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An asynchronous RedLock release calls back at the quorum-th "let go",
 * with no grace, while the other members' releases finish on the loop
 * (SPEC §16): a stopped server (SIGSTOP) neither delays the callback nor
 * keeps the lock reported held, and the callback may free the RedLock, its
 * members, their clients and the loop - the straggler's release still runs
 * and is heard, and the loop goes once it was. The next acquisition does
 * not wait for the straggler either: it goes right behind it, on its
 * connection, so the server runs the release first.
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

#define N 5
/* Long, so that waiting for the stopped server would show. */
#define CMD_TIMEOUT_MS 3000
/* The grace the release used to give a straggler before calling back. */
#define OLD_GRACE_MS 100

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

TestSuite(redlock_release_async, .init = start, .fini = stop, .timeout = 120);

/* A loop made with callbacks, driven here with poll() until it says it is gone. */
typedef struct hooks {
	int fds[64];
	short what[64];
	int n;
	int64_t timer_at; /* -1: none */
	int closed;
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

static void closed(void *data)
{
	((hooks *)data)->closed++;
}

/* One turn: what is ready runs; nothing more once the loop is gone. */
static void hooks_turn(dlock_loop *loop, hooks *h)
{
	struct pollfd p[64];
	int i, n = h->n, wait = 20;

	for (i = 0; i < n; i++) {
		p[i].fd = h->fds[i];
		p[i].events = (short)(((h->what[i] & DLOCK_POLL_IN) ? POLLIN : 0) |
				((h->what[i] & DLOCK_POLL_OUT) ? POLLOUT : 0));
		p[i].revents = 0;
	}
	if (h->timer_at >= 0)
		wait = (int)(h->timer_at - rh_now_ms() < 0 ? 0 : h->timer_at - rh_now_ms());
	if (wait > 20)
		wait = 20;
	poll(p, (nfds_t)n, wait);
	for (i = 0; i < n && !h->closed; i++)
		if (p[i].revents)
			dlock_loop_fd_ready(loop, p[i].fd,
					((p[i].revents & (POLLIN | POLLERR | POLLHUP)) ? DLOCK_POLL_IN : 0) |
							((p[i].revents & POLLOUT) ? DLOCK_POLL_OUT : 0));
	if (!h->closed && h->timer_at >= 0 && rh_now_ms() >= h->timer_at) {
		h->timer_at = -1;
		dlock_loop_timeout(loop);
	}
}

/* Five clients on one loop, a member lock each, a RedLock over them. */
typedef struct world {
	hooks h;
	dlock_loop *loop;
	dlock_client *c[N];
	dlock_lock *l[N];
	dlock_redlock *r;
	char owner[DLOCK_OWNER_SIZE];
	/* the release's callback */
	int calls, code, held_at_callback, free_all;
	int64_t called_at;
} world;

/* guard_ms: the RedLock's restart guard (0: off, decided at a bare quorum). */
static void open_world(world *w, const char *name, int64_t guard_ms)
{
	dlock_loop_options lo = DLOCK_LOOP_OPTIONS_INIT;
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;

	memset(w, 0, sizeof(*w));
	w->h.timer_at = -1;
	lo.watch_fd = watch_fd;
	lo.set_timer = set_timer;
	lo.closed = closed;
	lo.userdata = &w->h;
	dl_pass(dlock_loop_new(&w->loop, &lo));
	co.loop = w->loop;
	co.command_timeout_ms = CMD_TIMEOUT_MS;
	for (int i = 0; i < N; i++) {
		dl_pass(dlock_client_new(&w->c[i], rh_server_uri(srv[i]), &co));
		dl_pass(dlock_lock_new(&w->l[i], w->c[i], name, NULL));
	}
	ro.restart_guard_ms = guard_ms; /* 1: on, the fresh servers past it */
	dl_pass(dlock_redlock_new(&w->r, w->l, N, &ro));
	dl_pass(dlock_redlock_owner(w->owner, w->r, 1));
}

static void free_world(world *w)
{
	dlock_redlock_free(w->r);
	for (int i = 0; i < N; i++) {
		dlock_lock_free(w->l[i]);
		dlock_client_free(w->c[i]);
	}
	dlock_loop_free(w->loop);
}

typedef struct outcome {
	int calls, code;
} outcome;

static void note(dlock_op *op, const dlock_result *res, void *ud)
{
	outcome *o = ud;

	(void)op;
	o->calls++;
	o->code = res->code;
}

/* Drive the loop until *calls is set; 0 when it was not within limit_ms. */
static int drive_until(world *w, const int *calls, int64_t limit_ms)
{
	int64_t end = rh_now_ms() + limit_ms;

	while (*calls == 0 && !w->h.closed && rh_now_ms() < end)
		hooks_turn(w->loop, &w->h);
	return *calls != 0;
}

/* Drive the loop until `name` is gone from server s (0: not within limit_ms). */
static int drive_until_gone(world *w, rh_server *s, const char *name, int64_t limit_ms)
{
	int64_t end = rh_now_ms() + limit_ms;

	while (rh_command_int(s, "EXISTS %s", name) != 0) {
		if (rh_now_ms() > end)
			return 0;
		if (w->h.closed)
			dl_sleep_ms(10);
		else
			hooks_turn(w->loop, &w->h);
	}
	return 1;
}

/* Acquired on every member (retried while a member sat one out: a release
 * of the round before may still have been on its way there). */
static void acquire_on_all(world *w, const char *name)
{
	int64_t end = rh_now_ms() + 10000;

	for (;;) {
		outcome a = { 0 }, rel = { 0 };
		int all = 1;

		dl_pass(dlock_redlock_acquire_async(NULL, w->r, w->owner, 0, 30000, note, &a));
		cr_assert(drive_until(w, &a.calls, 5000), "no acquisition within 5 s");
		cr_assert_eq(a.code, 0, "acquire: %s", dlock_strerror(a.code));
		for (int i = 0; i < N; i++)
			all &= rh_command_int(srv[i], "EXISTS %s", name) == 1 &&
			       dlock_lock_check(w->l[i], w->owner) == 0;
		if (all)
			return;
		cr_assert(rh_now_ms() < end, "never held on all %d servers", N);
		dl_pass(dlock_redlock_release_async(NULL, w->r, w->owner, note, &rel));
		cr_assert(drive_until(w, &rel.calls, 5000));
		for (int i = 0; i < N; i++)
			cr_assert(drive_until_gone(w, srv[i], name, 5000));
	}
}

static void on_released(dlock_op *op, const dlock_result *res, void *ud)
{
	world *w = ud;

	(void)op;
	w->calls++;
	w->code = res->code;
	w->called_at = rh_now_ms();
	w->held_at_callback = dlock_redlock_check(w->r, w->owner) == 0;
	if (w->free_all)
		free_world(w); /* everything, the loop too, from its own callback */
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

Test(redlock_release_async, calls_back_at_the_quorum_not_after_a_grace)
{
	const char *name = "rra:quorum";
	enum { ROUNDS = 5 };
	int64_t took[ROUNDS];
	world w;

	open_world(&w, name, 1);
	for (int k = 0; k < ROUNDS; k++) {
		acquire_on_all(&w, name);
		cr_assert_eq(rh_server_pause(srv[4]), 0);
		w.calls = 0;
		int64_t t0 = rh_now_ms();
		dl_pass(dlock_redlock_release_async(NULL, w.r, w.owner, on_released, &w));
		cr_assert(drive_until(&w, &w.calls, 2 * CMD_TIMEOUT_MS), "no release callback");
		took[k] = w.called_at - t0;
		cr_assert_eq(w.code, 0, "release: %s", dlock_strerror(w.code));
		cr_assert_eq(w.held_at_callback, 0, "still reported held in the release's callback");
		cr_assert_neq(dlock_lock_check(w.l[4], w.owner), 0,
				"the stopped member is still reported held");
		/* A quorum let go at the callback; the other running one follows. */
		int gone = 0;
		for (int i = 0; i < 4; i++)
			gone += rh_command_int(srv[i], "EXISTS %s", name) == 0;
		cr_assert_geq(gone, N / 2 + 1, "only %d servers let go at the callback", gone);
		for (int i = 0; i < 4; i++)
			cr_assert(drive_until_gone(&w, srv[i], name, 5000), "server %d kept the key", i);
		/* Resumed: it runs the release it was sent while stopped. */
		cr_assert_eq(rh_server_resume(srv[4]), 0);
		cr_assert(drive_until_gone(&w, srv[4], name, 5000), "the stopped server kept the key");
	}
	/* The median of the rounds: a busy machine may slow one round, not
	 * most of them; the stopped server's 100 ms grace would show in each. */
	qsort(took, ROUNDS, sizeof(took[0]), cmp_i64);
	cr_assert_lt(took[ROUNDS / 2], OLD_GRACE_MS / 2,
			"release callbacks took %lld ms (median of %d) with one of %d servers stopped",
			(long long)took[ROUNDS / 2], ROUNDS, N);
	free_world(&w);
	/* Every straggler heard: the loop goes with its last client. */
	int64_t end = rh_now_ms() + 5000;
	while (!w.h.closed && rh_now_ms() < end)
		hooks_turn(w.loop, &w.h);
	cr_assert_eq(w.h.closed, 1, "the loop did not go once everything was freed");
}

Test(redlock_release_async, the_callback_frees_everything_and_the_straggler_still_lets_go)
{
	const char *name = "rra:free";
	world w;

	open_world(&w, name, 1);
	acquire_on_all(&w, name);
	cr_assert_eq(rh_server_pause(srv[4]), 0);
	w.calls = 0;
	w.free_all = 1;
	dl_pass(dlock_redlock_release_async(NULL, w.r, w.owner, on_released, &w));
	cr_assert(drive_until(&w, &w.calls, 2 * CMD_TIMEOUT_MS), "no release callback");
	cr_assert_eq(w.code, 0, "release: %s", dlock_strerror(w.code));
	cr_assert_eq(w.held_at_callback, 0, "still reported held in the release's callback");
	for (int i = 0; i < 4; i++)
		cr_assert_eq(rh_command_int(srv[i], "EXISTS %s", name), 0, "server %d", i);

	/* The straggler's release keeps its client, and so the loop: still
	 * driven through its callbacks, it has not said it is gone. */
	for (int k = 0; k < 5 && !w.h.closed; k++)
		hooks_turn(w.loop, &w.h);
	cr_assert_eq(w.h.closed, 0, "the loop went with a release still due on a stopped server");

	/* Resumed: the release runs there, its answer is heard, and the
	 * last reference gone, the loop goes. */
	cr_assert_eq(rh_server_resume(srv[4]), 0);
	int64_t end = rh_now_ms() + 10000;
	while (!w.h.closed && rh_now_ms() < end)
		hooks_turn(w.loop, &w.h);
	cr_assert_eq(w.h.closed, 1, "the loop never went after the straggler answered");
	cr_assert(drive_until_gone(&w, srv[4], name, 5000), "the stopped server kept the key");
	for (int i = 0; i < N; i++)
		cr_assert_eq(rh_command_int(srv[i], "EXISTS %s", name), 0, "server %d", i);
}

/* The acquisition's callback: its outcome and the stopped member's vote. */
typedef struct acquired {
	int calls, code;
	dlock_vote vote;
	char message[256];
} acquired;

static void on_acquired(dlock_op *op, const dlock_result *res, void *ud)
{
	acquired *a = ud;

	(void)op;
	a->calls++;
	a->code = res->code;
	cr_assert_eq(res->nmembers, (size_t)N);
	a->vote = res->members[N - 1].vote;
	snprintf(a->message, sizeof(a->message), "%s", res->members[N - 1].message);
}

/* Drive the loop until member m reports the owner's hold (0: not within limit_ms). */
static int drive_until_held(world *w, int m, int64_t limit_ms)
{
	int64_t end = rh_now_ms() + limit_ms;

	while (dlock_lock_check(w->l[m], w->owner) != 0 && rh_now_ms() < end)
		hooks_turn(w->loop, &w->h);
	return dlock_lock_check(w->l[m], w->owner) == 0;
}

/*
 * Released asynchronously with one server stopped, then acquired again at
 * once: the stopped member is asked too, right behind the release due
 * there (the acquisition decided at the quorum without it, not held back
 * nor leaving it out). Resumed, that server runs the release first, then
 * the acquire: the new hold stands there and is the RedLock's. Asked on
 * another connection, or not asked, the key would be gone from it.
 */
Test(redlock_release_async, the_next_acquire_goes_right_behind_the_straggler)
{
	const char *name = "rra:behind";
	outcome rel = { 0 };
	acquired a = { 0 };
	world w;

	open_world(&w, name, 0);
	acquire_on_all(&w, name);
	cr_assert_eq(rh_server_pause(srv[N - 1]), 0);
	dl_pass(dlock_redlock_release_async(NULL, w.r, w.owner, note, &rel));
	cr_assert(drive_until(&w, &rel.calls, 2 * CMD_TIMEOUT_MS), "no release callback");
	cr_assert_eq(rel.code, 0, "release: %s", dlock_strerror(rel.code));

	dl_pass(dlock_redlock_acquire_async(NULL, w.r, w.owner, 0, 30000, on_acquired, &a));
	cr_assert(drive_until(&w, &a.calls, 2 * CMD_TIMEOUT_MS), "no acquisition callback");
	cr_assert_eq(a.code, 0, "acquire: %s", dlock_strerror(a.code));
	cr_assert_neq(a.vote, DLOCK_VOTE_ERROR,
			"the stopped member was left out, not asked behind the release: %s",
			a.message);

	cr_assert_eq(rh_server_resume(srv[N - 1]), 0);
	cr_assert(drive_until_held(&w, N - 1, 5000),
			"the resumed member's grant never joined the hold");
	cr_assert_eq(rh_command_int(srv[N - 1], "HEXISTS %s %s", name, w.owner), 1,
			"the resumed server lost the new hold: the release ran after the acquire");
	for (int i = 0; i < N; i++)
		cr_assert_eq(rh_command_int(srv[i], "HEXISTS %s %s", name, w.owner), 1,
				"server %d does not hold the new hold", i);
	cr_assert_eq(dlock_redlock_check(w.r, w.owner), 0);

	rel = (outcome){ 0 };
	dl_pass(dlock_redlock_release_async(NULL, w.r, w.owner, note, &rel));
	cr_assert(drive_until(&w, &rel.calls, 5000), "no release callback");
	for (int i = 0; i < N; i++)
		cr_assert(drive_until_gone(&w, srv[i], name, 5000), "server %d kept the key", i);
	free_world(&w);
}

/*
 * An acquisition decided without a stopped member leaves its acquire due
 * there, and a release right after rolls it back behind it. The next
 * acquisition must not go behind them: when that late grant's answer
 * comes it is given back, and the give-back, sent then, would land behind
 * the new acquire and take its hold while the RedLock records it. So that
 * member is left out (after the bounded wait), and once resumed every
 * member still lets go.
 */
Test(redlock_release_async, the_next_acquire_does_not_go_behind_a_late_acquire)
{
	const char *name = "rra:open";
	outcome first = { 0 }, rel = { 0 };
	acquired a = { 0 };
	world w;

	open_world(&w, name, 0);
	cr_assert_eq(rh_server_pause(srv[N - 1]), 0);
	dl_pass(dlock_redlock_acquire_async(NULL, w.r, w.owner, 0, 30000, note, &first));
	cr_assert(drive_until(&w, &first.calls, 2 * CMD_TIMEOUT_MS), "no acquisition callback");
	cr_assert_eq(first.code, 0, "acquire: %s", dlock_strerror(first.code));
	dl_pass(dlock_redlock_release_async(NULL, w.r, w.owner, note, &rel));
	cr_assert(drive_until(&w, &rel.calls, 2 * CMD_TIMEOUT_MS), "no release callback");
	cr_assert_eq(rel.code, 0, "release: %s", dlock_strerror(rel.code));

	dl_pass(dlock_redlock_acquire_async(NULL, w.r, w.owner, 0, 30000, on_acquired, &a));
	cr_assert(drive_until(&w, &a.calls, 2 * CMD_TIMEOUT_MS), "no acquisition callback");
	cr_assert_eq(a.code, 0, "acquire: %s", dlock_strerror(a.code));
	cr_assert_eq(a.vote, DLOCK_VOTE_ERROR,
			"the stopped member was asked behind an acquire still due there (vote %d)",
			(int)a.vote);
	cr_assert_eq(dlock_lock_check(w.l[N - 1], w.owner) == 0, 0);

	cr_assert_eq(rh_server_resume(srv[N - 1]), 0);
	rel = (outcome){ 0 };
	dl_pass(dlock_redlock_release_async(NULL, w.r, w.owner, note, &rel));
	cr_assert(drive_until(&w, &rel.calls, 5000), "no release callback");
	cr_assert_eq(rel.code, 0, "release: %s", dlock_strerror(rel.code));
	for (int i = 0; i < N; i++)
		cr_assert(drive_until_gone(&w, srv[i], name, 5000), "server %d kept the key", i);
	free_world(&w);
}
