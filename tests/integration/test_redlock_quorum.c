/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A RedLock decides at its quorum, with the restart guard on: a stopped
 * server (SIGSTOP) costs neither the acquisition nor the caller its
 * command timeout, and the acquire it received while stopped never stays
 * behind on it once it resumes. A release returns once a quorum let go,
 * the stopped server's release running when it resumes; a late grant
 * joins the hold: renewed, watched for loss, released with the rest.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

#define N 5
/* Long, so that waiting for the stopped server shows. */
#define CMD_TIMEOUT_MS 3000

typedef struct five {
	rh_server *s[N];
	const char *uris[N];
} five;

/* Each server's uptime reads 1 s or more: the guard reads uptimes in whole
 * seconds and takes a server as young as it may be, so with a 1 ms window
 * a server is past it only from its first whole second on. */
static void past_the_guard(rh_server *const *s)
{
	int64_t end = rh_now_ms() + 5000;

	for (int i = 0; i < N; i++)
		while (rh_command_int(s[i], "EVAL %s 0",
				       "return tonumber(string.match(redis.call('info', 'server'), "
				       "'uptime_in_seconds:(%d+)'))") < 1) {
			cr_assert_lt(rh_now_ms(), end, "server %d: uptime still 0 after 5 s", i);
			dl_sleep_ms(20);
		}
}

static dlock_redlock *open_five(five *f, const char *name)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	dlock_redlock *r = NULL;

	cr_assert_eq(rh_servers_start(f->s, N, NULL), 0, "could not start %d servers", N);
	for (int i = 0; i < N; i++)
		f->uris[i] = rh_server_uri(f->s[i]);
	co.command_timeout_ms = CMD_TIMEOUT_MS;
	/* The guard off: a blocking acquisition with the guard hears every
	 * member (its late grants cannot join); without it a quorum and a short
	 * grace decide. The asynchronous tests below keep it on. */
	ro.restart_guard_ms = 0;
	int rc = dlock_redlock_new_from_uris(&r, f->uris, N, name, &co, &ro);
	cr_assert_eq(rc, 0, "redlock: %s (%s)", dlock_strerror(rc), dlock_errmsg_last());
	return r;
}

static void close_five(five *f, dlock_redlock *r)
{
	dlock_redlock_free(r);
	for (int i = 0; i < N; i++)
		rh_server_free(f->s[i]);
}

/* 1 once `name` is gone from server s, within limit_ms. */
static int key_gone_within(rh_server *s, const char *name, int64_t limit_ms)
{
	int64_t end = rh_now_ms() + limit_ms;

	while (rh_command_int(s, "EXISTS %s", name) != 0) {
		if (rh_now_ms() > end)
			return 0;
		dl_sleep_ms(10);
	}
	return 1;
}

Test(redlock_quorum, stopped_server_costs_no_timeout_and_its_late_grant_goes_back, .timeout = 60)
{
	const char *name = "rq:stopped";
	five f;
	dlock_redlock *r = open_five(&f, name);
	int64_t validity = -1;

	/* Warm: connections open, the servers' starts known for them (the
	 * first start read comes before the connection it is kept for). */
	for (int k = 0; k < 2; k++) {
		cr_assert_eq(dl_redlock_acquire_v(&validity, r, NULL, 0, 10000), 0, "%s",
				dlock_redlock_errmsg(r));
		cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	}

	cr_assert_eq(rh_server_pause(f.s[4]), 0);
	int64_t t0 = rh_now_ms();
	int rc = dl_redlock_acquire_v(&validity, r, NULL, 0, 10000);
	int64_t took = rh_now_ms() - t0;
	cr_assert_eq(rc, 0, "%s (%s)", dlock_strerror(rc), dlock_redlock_errmsg(r));
	/* Not the stopped server's timeout: a third of it, generously. */
	cr_assert_lt(took, CMD_TIMEOUT_MS / 3, "took %lld ms with one of 5 stopped (timeout %d)",
			(long long)took, CMD_TIMEOUT_MS);
	cr_assert(validity > 9000 && validity <= 10000, "validity %lld", (long long)validity);

	size_t acquired = 0;
	int took_it[N] = { 0 };
	for (int i = 0; i < N; i++) {
		dlock_member_status st = DLOCK_MEMBER_STATUS_INIT;
		cr_assert_eq(dlock_redlock_member_status(&st, r, (size_t)i), 0);
		took_it[i] = st.vote == DLOCK_VOTE_ACQUIRED;
		acquired += (size_t)took_it[i];
		if (i == 4)
			cr_assert(st.vote == DLOCK_VOTE_NONE && strstr(st.message, "pending") != NULL,
					"stopped server: vote %d (%s)", (int)st.vote, st.message);
	}
	cr_assert_geq(acquired, 3);
	cr_assert_eq(dlock_redlock_check(r, NULL), 0);

	/* Resumed: it runs the acquire it queued, and the give-back behind it. */
	cr_assert_eq(rh_server_resume(f.s[4]), 0);
	cr_assert(key_gone_within(f.s[4], name, 3000),
			"the late grant stayed on the resumed server: PTTL %lld",
			(long long)rh_command_int(f.s[4], "PTTL %s", name));
	cr_assert_eq(dlock_redlock_check(r, NULL), 0, "the quorum's holds are kept");
	/* Every member counted as taken keeps its key (a running server that
	 * answered after the grace, on a busy machine, was given back). */
	for (int i = 0; i < N; i++)
		if (took_it[i])
			cr_assert_eq(rh_command_int(f.s[i], "EXISTS %s", name), 1, "server %d", i);

	cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	for (int i = 0; i < N; i++)
		cr_assert(key_gone_within(f.s[i], name, 2000), "server %d kept the key", i);
	close_five(&f, r);
}

Test(redlock_quorum, blocking_unlock_returns_at_quorum_with_one_stopped, .timeout = 60)
{
	const char *name = "rq:unlock";
	five f;
	dlock_redlock *r = open_five(&f, name);
	int64_t validity = -1;

	/* Held on all five (a busy machine may answer one after the grace,
	 * which gives it back: then again), so the stopped one has a key. */
	for (int k = 0, all = 0; !all; k++) {
		cr_assert_lt(k, 20, "never held on all %d servers", N);
		cr_assert_eq(dl_redlock_acquire_v(&validity, r, NULL, 0, 30000), 0, "%s",
				dlock_redlock_errmsg(r));
		all = 1;
		for (int i = 0; i < N; i++)
			all &= rh_command_int(f.s[i], "EXISTS %s", name) == 1;
		if (!all)
			cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	}

	cr_assert_eq(rh_server_pause(f.s[4]), 0);
	int64_t t0 = rh_now_ms();
	int rc = dlock_redlock_release(r, NULL);
	int64_t took = rh_now_ms() - t0;
	cr_assert_eq(rc, 0, "%s (%s)", dlock_strerror(rc), dlock_redlock_errmsg(r));
	cr_assert_lt(took, CMD_TIMEOUT_MS / 3, "unlock took %lld ms with one of 5 stopped (timeout %d)",
			(long long)took, CMD_TIMEOUT_MS);
	cr_assert_neq(dlock_redlock_check(r, NULL), 0, "still reported held after the unlock");
	for (int i = 0; i < 4; i++)
		cr_assert_eq(rh_command_int(f.s[i], "EXISTS %s", name), 0, "server %d", i);

	/* Resumed: it runs the release it was sent while stopped. */
	cr_assert_eq(rh_server_resume(f.s[4]), 0);
	cr_assert(key_gone_within(f.s[4], name, 3000),
			"the stopped server kept the key: PTTL %lld",
			(long long)rh_command_int(f.s[4], "PTTL %s", name));
	/* Its owed reply skipped, it is asked again and grants. */
	cr_assert_eq(dl_redlock_acquire_v(&validity, r, NULL, 0, 30000), 0, "%s", dlock_redlock_errmsg(r));
	cr_assert_eq(dlock_redlock_release(r, NULL), 0, "%s", dlock_redlock_errmsg(r));
	close_five(&f, r);
}

/* Five servers, a client each on `loop`, a RedLock over them (the test
 * owns the clients and the member handles, to free them in its order). */
typedef struct five_async {
	five f;
	dlock_loop *loop;
	dlock_client *c[N];
	dlock_lock *l[N];
	dlock_redlock *r;
	atomic_int lost;
} five_async;

static void on_lost(const dlock_lost_event *ev, void *ud)
{
	five_async *a = ud;

	(void)ev;
	atomic_fetch_add(&a->lost, 1);
}

static void open_five_async(five_async *a, const char *name, int64_t watchdog_ms)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;

	memset(a, 0, sizeof(*a));
	cr_assert_eq(rh_servers_start(a->f.s, N, NULL), 0, "could not start %d servers", N);
	past_the_guard(a->f.s);
	cr_assert_eq(dlock_loop_new(&a->loop, NULL), 0, "%s", dlock_errmsg_last());
	co.loop = a->loop;
	co.command_timeout_ms = CMD_TIMEOUT_MS;
	if (watchdog_ms > 0)
		co.watchdog_timeout_ms = watchdog_ms;
	for (int i = 0; i < N; i++) {
		cr_assert_eq(dlock_client_new(&a->c[i], rh_server_uri(a->f.s[i]), &co), 0, "%s",
				dlock_errmsg_last());
		cr_assert_eq(dlock_lock_new(&a->l[i], a->c[i], name, NULL), 0, "%s",
				dlock_errmsg_last());
	}
	ro.restart_guard_ms = 1; /* as open_five: on, the fresh servers past it */
	cr_assert_eq(dlock_redlock_new(&a->r, a->l, N, &ro), 0, "%s", dlock_errmsg_last());
	cr_assert_eq(dlock_redlock_set_lost_cb(a->r, on_lost, a), 0);
}

/* Drive the loop until the op's callback came; 0 if it did not within limit_ms. */
static int run_until(dlock_loop *loop, const dl_outcome *o, int64_t limit_ms)
{
	int64_t end = rh_now_ms() + limit_ms;

	while (o->calls == 0 && rh_now_ms() < end)
		cr_assert(dlock_loop_run(loop, 10) >= 0, "%s", dlock_errmsg_last());
	return o->calls > 0;
}

/* Drive the loop until `name` is gone from s, within limit_ms. */
static int run_until_gone(dlock_loop *loop, rh_server *s, const char *name, int64_t limit_ms)
{
	int64_t end = rh_now_ms() + limit_ms;

	while (rh_command_int(s, "EXISTS %s", name) != 0) {
		if (rh_now_ms() > end)
			return 0;
		cr_assert(dlock_loop_run(loop, 10) >= 0, "%s", dlock_errmsg_last());
	}
	return 1;
}

static void acquire_async(five_async *a, const char *owner, int64_t lease, int64_t limit_ms)
{
	dl_outcome o = { 0 };

	cr_assert_eq(dlock_redlock_acquire_async(NULL, a->r, owner, 0, lease, dl_note, &o), 0, "%s",
			dlock_errmsg_last());
	cr_assert(run_until(a->loop, &o, limit_ms), "no acquisition within %lld ms",
			(long long)limit_ms);
	cr_assert_eq(o.code, 0, "acquire: %s", dlock_strerror(o.code));
}

/* Free everything once no operation is pending (an op's run keeps its
 * clients; a loop we drive ourselves is not driven after its free). */
static void close_five_async(five_async *a)
{
	int64_t end = rh_now_ms() + 2 * CMD_TIMEOUT_MS;
	size_t pending = 1;

	while (dlock_loop_pending(&pending, a->loop) == 0 && pending > 0 && rh_now_ms() < end)
		cr_assert(dlock_loop_run(a->loop, 10) >= 0);
	cr_assert_eq(pending, 0, "%zu operation(s) still pending", pending);
	for (int i = 0; i < N; i++) {
		dlock_lock_free(a->l[i]);
		dlock_client_free(a->c[i]);
	}
	dlock_loop_free(a->loop);
	for (int i = 0; i < N; i++)
		rh_server_free(a->f.s[i]);
}

Test(redlock_quorum, async_release_at_quorum_then_free_and_the_straggler_lets_go, .timeout = 60)
{
	const char *name = "rq:release-async";
	const char *owner = "rq-owner-1";
	five_async a;

	open_five_async(&a, name, 0);
	acquire_async(&a, owner, 30000, 5000);
	for (int i = 0; i < N; i++)
		cr_assert_eq(rh_command_int(a.f.s[i], "EXISTS %s", name), 1, "server %d", i);

	cr_assert_eq(rh_server_pause(a.f.s[4]), 0);
	dl_outcome o = { 0 };
	int64_t t0 = rh_now_ms();
	cr_assert_eq(dlock_redlock_release_async(NULL, a.r, owner, dl_note, &o), 0);
	cr_assert(run_until(a.loop, &o, 2 * CMD_TIMEOUT_MS));
	int64_t took = rh_now_ms() - t0;
	cr_assert_eq(o.code, 0, "release: %s", dlock_strerror(o.code));
	cr_assert_lt(took, CMD_TIMEOUT_MS / 3, "release took %lld ms with one of 5 stopped (timeout %d)",
			(long long)took, CMD_TIMEOUT_MS);
	cr_assert_neq(dlock_redlock_check(a.r, owner), 0, "still reported held after the release");

	/* The handle goes at once; the straggler's release still finishes. */
	dlock_redlock_free(a.r);
	a.r = NULL;
	cr_assert_eq(rh_server_resume(a.f.s[4]), 0);
	cr_assert(run_until_gone(a.loop, a.f.s[4], name, 3000),
			"the stopped server kept the key: PTTL %lld",
			(long long)rh_command_int(a.f.s[4], "PTTL %s", name));
	for (int i = 0; i < 4; i++)
		cr_assert_eq(rh_command_int(a.f.s[i], "EXISTS %s", name), 0, "server %d", i);
	close_five_async(&a);
}

/*
 * Warm the clients: connections open, the servers' starts known (the
 * restart guard vouches for their grants). On a lock of its own: a
 * straggler of its release, given up, would leave a node owing, and so
 * out of the test's next acquisition (core/net/owed.h).
 */
static void warm(five_async *a)
{
	const char *name = "rq:warm";
	dlock_lock *l[N];
	dlock_redlock *w;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	dl_outcome o = { 0 }, rel = { 0 };

	for (int i = 0; i < N; i++)
		cr_assert_eq(dlock_lock_new(&l[i], a->c[i], name, NULL), 0);
	ro.restart_guard_ms = 1;
	cr_assert_eq(dlock_redlock_new(&w, l, N, &ro), 0, "%s", dlock_errmsg_last());
	cr_assert_eq(dlock_redlock_acquire_async(NULL, w, "rq-warm", 0, 10000, dl_note, &o), 0);
	cr_assert(run_until(a->loop, &o, 5000) && o.code == 0, "warm: %d", o.code);
	cr_assert_eq(dlock_redlock_release_async(NULL, w, "rq-warm", dl_note, &rel), 0);
	cr_assert(run_until(a->loop, &rel, 5000) && rel.code == 0, "warm release: %d", rel.code);
	dlock_redlock_free(w);
	for (int i = 0; i < N; i++) {
		dlock_lock_free(l[i]);
		cr_assert(run_until_gone(a->loop, a->f.s[i], name, 3000));
	}
}

/* The watchdog renewed `name` on s: its PTTL rose above what it had fallen to. */
static int renewed_within(dlock_loop *loop, rh_server *s, const char *name, int64_t limit_ms)
{
	int64_t end = rh_now_ms() + limit_ms, low = rh_command_int(s, "PTTL %s", name);

	while (rh_now_ms() < end) {
		int64_t now;

		cr_assert(dlock_loop_run(loop, 10) >= 0, "%s", dlock_errmsg_last());
		now = rh_command_int(s, "PTTL %s", name);
		if (now <= 0)
			return 0;
		if (now > low + 100)
			return 1;
		low = now < low ? now : low;
	}
	return 0;
}

/* A member's local hold state reads DLOCK_ELOST within limit_ms. */
static int member_lost_within(five_async *a, int i, const char *owner, int64_t limit_ms)
{
	int64_t end = rh_now_ms() + limit_ms;

	while (dlock_lock_check(a->l[i], owner) != DLOCK_ELOST) {
		if (rh_now_ms() > end)
			return 0;
		cr_assert(dlock_loop_run(a->loop, 10) >= 0);
	}
	return 1;
}

Test(redlock_quorum, a_late_grant_joins_is_renewed_watched_and_released, .timeout = 90)
{
	const char *name = "rq:late";
	char owner[DLOCK_OWNER_SIZE];
	/* Renewed every third of it: rounds come often, the test stays short. */
	const int64_t watchdog_ms = 1500;
	five_async a;

	open_five_async(&a, name, watchdog_ms);
	/* This process's own owner: an acquire unanswered at its timeout is
	 * taken back behind it, so the acquisition may go on at the quorum. */
	cr_assert_eq(dlock_redlock_owner(owner, a.r, 2), 0);
	warm(&a);

	/* Decided while it is stopped: its acquire is answered late. */
	cr_assert_eq(rh_server_pause(a.f.s[4]), 0);
	acquire_async(&a, owner, DLOCK_LEASE_WATCHDOG, CMD_TIMEOUT_MS / 3);
	cr_assert_eq(rh_server_resume(a.f.s[4]), 0);

	dl_outcome rel;
	/* The late grant joins: on the server, then renewed like the others. */
	int64_t end = rh_now_ms() + CMD_TIMEOUT_MS;
	while (rh_command_int(a.f.s[4], "EXISTS %s", name) != 1 && rh_now_ms() < end)
		cr_assert(dlock_loop_run(a.loop, 10) >= 0);
	cr_assert(renewed_within(a.loop, a.f.s[4], name, 3 * watchdog_ms),
			"the joined member was not renewed: PTTL %lld",
			(long long)rh_command_int(a.f.s[4], "PTTL %s", name));
	cr_assert_eq(dlock_lock_check(a.l[4], owner), 0, "the joined member is not held");

	/* Two in-time members lost: 3 of 5 still held, not lost yet. */
	for (int i = 0; i < 2; i++)
		cr_assert_eq(rh_command_int(a.f.s[i], "DEL %s", name), 1);
	for (int i = 0; i < 2; i++)
		cr_assert(member_lost_within(&a, i, owner, 3 * watchdog_ms), "member %d not lost", i);
	cr_assert_eq(atomic_load(&a.lost), 0, "lost with a quorum still held");
	/* The joined member lost: fewer than a quorum; its loss tells. */
	cr_assert_eq(rh_command_int(a.f.s[4], "DEL %s", name), 1);
	end = rh_now_ms() + 3 * watchdog_ms;
	while (atomic_load(&a.lost) == 0 && rh_now_ms() < end)
		cr_assert(dlock_loop_run(a.loop, 10) >= 0);
	cr_assert_eq(atomic_load(&a.lost), 1, "the joined member's loss went unheard");

	rel = (dl_outcome){ 0 };
	cr_assert_eq(dlock_redlock_release_async(NULL, a.r, owner, dl_note, &rel), 0);
	cr_assert(run_until(a.loop, &rel, 5000));
	for (int i = 0; i < N; i++)
		cr_assert(run_until_gone(a.loop, a.f.s[i], name, 3 * watchdog_ms), "server %d kept the key", i);
	dlock_redlock_free(a.r);
	close_five_async(&a);
}

Test(redlock_quorum, a_late_grant_that_joins_is_released_with_the_rest, .timeout = 60)
{
	const char *name = "rq:late-unlock";
	char owner[DLOCK_OWNER_SIZE];
	five_async a;

	open_five_async(&a, name, 1500);
	cr_assert_eq(dlock_redlock_owner(owner, a.r, 3), 0);
	warm(&a);

	cr_assert_eq(rh_server_pause(a.f.s[4]), 0);
	acquire_async(&a, owner, DLOCK_LEASE_WATCHDOG, CMD_TIMEOUT_MS / 3);
	cr_assert_eq(rh_server_resume(a.f.s[4]), 0);
	/* Joined: held on our record. */
	int64_t end = rh_now_ms() + CMD_TIMEOUT_MS;
	while (dlock_lock_check(a.l[4], owner) != 0 && rh_now_ms() < end)
		cr_assert(dlock_loop_run(a.loop, 10) >= 0);
	cr_assert_eq(dlock_lock_check(a.l[4], owner), 0, "the late grant did not join");

	dl_outcome rel = { 0 };
	cr_assert_eq(dlock_redlock_release_async(NULL, a.r, owner, dl_note, &rel), 0);
	cr_assert(run_until(a.loop, &rel, 5000));
	cr_assert_eq(rel.code, 0, "release: %s", dlock_strerror(rel.code));
	for (int i = 0; i < N; i++)
		cr_assert(run_until_gone(a.loop, a.f.s[i], name, 3000), "server %d kept the key", i);
	dlock_redlock_free(a.r);
	close_five_async(&a);
}
