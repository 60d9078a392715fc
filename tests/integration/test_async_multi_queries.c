/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The asynchronous twins of the MultiLock's and RedLock's queries
 * (dlock/async.h), on a loop the test drives: each answers what its
 * blocking call answers - free, held by us, held by another - with one
 * callback, never from inside the call; with a server stopped (SIGSTOP) a
 * settled answer comes without waiting for it, an unsettled one within
 * its command timeout, the same as the blocking call's.
 */
#include <criterion/criterion.h>

#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

#define N 3
#define TIMEOUT_MS 2000

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

TestSuite(async_multi_queries, .init = start, .fini = stop, .timeout = 120);

/* One lock of either kind: the tests ask both through these. */
typedef struct target {
	dlock_redlock *r;
	dlock_multilock *m;
	dlock_client *clients[N];
	dlock_lock *members[N];
} target;

static void target_up(target *t, dlock_loop *loop, const char *name, int redlock)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_redlock_options ro = DLOCK_REDLOCK_OPTIONS_INIT;
	const char *uris[N];

	memset(t, 0, sizeof(*t));
	co.loop = loop;
	co.command_timeout_ms = TIMEOUT_MS;
	for (int i = 0; i < N; i++)
		uris[i] = rh_server_uri(srv[i]);
	if (redlock) {
		cr_assert_eq(dlock_redlock_new_from_uris(&t->r, uris, N, name, &co, &ro), 0, "%s",
				dlock_errmsg_last());
		return;
	}
	for (int i = 0; i < N; i++) {
		t->clients[i] = dl_client_opts(uris[i], &co);
		t->members[i] = dl_lock(t->clients[i], name);
	}
	cr_assert_eq(dlock_multilock_new(&t->m, t->members, N, NULL), 0, "%s", dlock_errmsg_last());
}

static void target_down(target *t)
{
	if (t->r != NULL) {
		dlock_redlock_free(t->r);
		return;
	}
	dlock_multilock_free(t->m);
	for (int i = 0; i < N; i++) {
		dlock_lock_free(t->members[i]);
		dlock_client_free(t->clients[i]);
	}
}

static void take(target *t, const char *owner)
{
	int rc = t->r ? dlock_redlock_acquire(t->r, owner, 0, 30000)
		      : dlock_multilock_acquire(t->m, owner, 0, 30000);

	cr_assert_eq(rc, 0, "acquire for %s: %s", owner, dlock_errmsg_last());
}

typedef enum { IS_LOCKED, IS_HELD, MEMBER_TTL, NQUERIES } query;
static const char *const names[] = { "is_locked", "is_held_as", "member_ttl" };

static int blocking(query q, target *t, const char *owner, int64_t *v)
{
	int b = 0, rc;

	*v = 0;
	if (q == MEMBER_TTL)
		return t->r ? dlock_redlock_member_ttl_ms(v, t->r, 0)
			    : dlock_multilock_member_ttl_ms(v, t->m, 0);
	if (q == IS_LOCKED)
		rc = t->r ? dlock_redlock_is_locked(&b, t->r) : dlock_multilock_is_locked(&b, t->m);
	else
		rc = t->r ? dlock_redlock_is_held(&b, t->r, owner)
			  : dlock_multilock_is_held(&b, t->m, owner);
	*v = b;
	return rc;
}

static dl_outcome twin(query q, dlock_loop *loop, target *t, const char *owner, int64_t *took)
{
	dl_outcome o = { 0 };
	int64_t t0 = rh_now_ms();

	o.starting = 1;
	if (q == IS_LOCKED)
		dl_pass(t->r ? dlock_redlock_is_locked_async(NULL, t->r, dl_note, &o)
			     : dlock_multilock_is_locked_async(NULL, t->m, dl_note, &o));
	else if (q == IS_HELD)
		dl_pass(t->r ? dlock_redlock_is_held_async(NULL, t->r, owner, dl_note, &o)
			     : dlock_multilock_is_held_async(NULL, t->m, owner, dl_note, &o));
	else
		dl_pass(t->r ? dlock_redlock_member_ttl_ms_async(NULL, t->r, 0, dl_note, &o)
			     : dlock_multilock_member_ttl_ms_async(NULL, t->m, 0, dl_note, &o));
	o.starting = 0;
	dl_await_one(loop, &o, 10000);
	*took = rh_now_ms() - t0;
	return o;
}

/* Query q's twin answers code and value as its blocking call does. */
static void agrees(query q, dlock_loop *loop, target *t, const char *owner, int want_code,
		int64_t want, const char *state)
{
	int64_t bv, took;
	int brc = blocking(q, t, owner, &bv);
	dl_outcome o = twin(q, loop, t, owner, &took);

	cr_expect_eq(o.code, brc, "%s, %s: async %d (%s), blocking %d (%s)", state, names[q],
			o.code, o.message, brc, dlock_errmsg_last());
	cr_expect_eq(o.code, want_code, "%s, %s: %d (%s)", state, names[q], o.code, o.message);
	if (o.code != 0)
		cr_expect(strlen(o.message) > 0, "%s, %s: no message", state, names[q]);
	else if (q == MEMBER_TTL && want == -3)
		cr_expect(o.value > 0 && o.value <= 30000 && bv > 0 && bv <= 30000,
				"%s, ttl: async %lld, blocking %lld", state, (long long)o.value,
				(long long)bv);
	else
		cr_expect(o.value == want && bv == want,
				"%s, %s: async %lld, blocking %lld, want %lld", state, names[q],
				(long long)o.value, (long long)bv, (long long)want);
}

static void every_state(int redlock)
{
	dlock_loop *loop = NULL;
	target t;

	dl_pass(dlock_loop_new(&loop, NULL));
	target_up(&t, loop, redlock ? "amq:r" : "amq:m", redlock);
	agrees(IS_LOCKED, loop, &t, NULL, 0, 0, "free");
	agrees(IS_HELD, loop, &t, "me:1", 0, 0, "free");
	agrees(MEMBER_TTL, loop, &t, NULL, 0, -2, "free");
	take(&t, "me:1");
	agrees(IS_LOCKED, loop, &t, NULL, 0, 1, "held");
	agrees(IS_HELD, loop, &t, "me:1", 0, 1, "held");
	agrees(IS_HELD, loop, &t, "other:1", 0, 0, "held by another");
	agrees(IS_HELD, loop, &t, NULL, 0, 0, "held by another than this thread");
	agrees(MEMBER_TTL, loop, &t, NULL, 0, -3, "held");
	target_down(&t);
	dlock_loop_free(loop);
}

Test(async_multi_queries, redlock_twins_answer_as_the_blocking_calls)
{
	every_state(1);
}

Test(async_multi_queries, multilock_twins_answer_as_the_blocking_calls)
{
	every_state(0);
}

/* A settled answer does not wait for the stopped server; it comes well
 * within the command timeout's reach, and as the blocking call's. */
Test(async_multi_queries, a_stopped_server_is_not_waited_for_once_settled)
{
	dlock_loop *loop = NULL;
	int64_t took;
	dl_outcome o;
	target t;

	dl_pass(dlock_loop_new(&loop, NULL));
	target_up(&t, loop, "amq:stopped", 1);
	take(&t, "me:2");
	cr_assert_eq(rh_server_pause(srv[2]), 0);
	agrees(IS_LOCKED, loop, &t, NULL, 0, 1, "one of three stopped");
	agrees(IS_HELD, loop, &t, "me:2", 0, 1, "one of three stopped");
	agrees(IS_HELD, loop, &t, "other:2", 0, 0, "one of three stopped");
	/* Two yes of three settle it: no command timeout waited. */
	o = twin(IS_LOCKED, loop, &t, NULL, &took);
	cr_assert_eq(o.value, 1);
	cr_expect(took < TIMEOUT_MS, "settled by two of three, yet took %lld ms", (long long)took);
	cr_assert_eq(rh_server_resume(srv[2]), 0);
	dl_pass(dlock_redlock_release(t.r, "me:2"));
	target_down(&t);
	dlock_loop_free(loop);
}

/* The blocking calls drive the same op: settled without the stopped server. */
Test(async_multi_queries, blocking_queries_do_not_wait_for_a_stopped_server_once_settled)
{
	dlock_loop *loop = NULL;
	int64_t t0, took;
	int yes = -1;
	target t;

	dl_pass(dlock_loop_new(&loop, NULL));
	target_up(&t, loop, "amq:bstopped", 1);
	take(&t, "me:5");
	cr_assert_eq(rh_server_pause(srv[2]), 0);
	t0 = rh_now_ms();
	dl_pass(dlock_redlock_is_locked(&yes, t.r));
	dl_pass(dlock_redlock_is_held(&yes, t.r, "me:5"));
	took = rh_now_ms() - t0;
	cr_assert_eq(yes, 1);
	cr_expect(took < TIMEOUT_MS, "two settled queries took %lld ms (command timeout %d)",
			(long long)took, TIMEOUT_MS);
	cr_assert_eq(rh_server_resume(srv[2]), 0);
	dl_pass(dlock_redlock_release(t.r, "me:5"));
	target_down(&t);
	dlock_loop_free(loop);
}

/* Two of three stopped: nothing settles it; "cannot tell" within the
 * command timeout (plus slack), one callback, as the blocking call. */
Test(async_multi_queries, unsettled_ends_within_the_command_timeout)
{
	dlock_loop *loop = NULL;
	int64_t took;
	dl_outcome o;
	target t;

	dl_pass(dlock_loop_new(&loop, NULL));
	target_up(&t, loop, "amq:two", 1);
	take(&t, "me:3");
	cr_assert_eq(rh_server_pause(srv[1]), 0);
	cr_assert_eq(rh_server_pause(srv[2]), 0);
	agrees(IS_LOCKED, loop, &t, NULL, DLOCK_ENOQUORUM, 0, "two of three stopped");
	agrees(IS_HELD, loop, &t, "me:3", DLOCK_ENOQUORUM, 0, "two of three stopped");
	o = twin(IS_LOCKED, loop, &t, NULL, &took);
	cr_expect(took < TIMEOUT_MS + 5000, "took %lld ms with a %d ms command timeout",
			(long long)took, TIMEOUT_MS);
	cr_expect(strstr(o.message, "cannot tell") != NULL, "%s", o.message);
	cr_assert_eq(rh_server_resume(srv[1]), 0);
	cr_assert_eq(rh_server_resume(srv[2]), 0);
	dl_pass(dlock_redlock_release(t.r, "me:3"));
	target_down(&t);
	dlock_loop_free(loop);
}

/* A MultiLock needs every member: one stopped and one "no" settles "not
 * held by other" at once; "held" cannot be told. */
Test(async_multi_queries, multilock_with_a_stopped_member)
{
	dlock_loop *loop = NULL;
	target t;

	dl_pass(dlock_loop_new(&loop, NULL));
	target_up(&t, loop, "amq:mstop", 0);
	take(&t, "me:4");
	cr_assert_eq(rh_server_pause(srv[0]), 0);
	agrees(IS_HELD, loop, &t, "other:4", 0, 0, "one of three stopped");
	agrees(IS_LOCKED, loop, &t, NULL, DLOCK_ENOQUORUM, 0, "one of three stopped");
	agrees(MEMBER_TTL, loop, &t, NULL, DLOCK_ETIMEDOUT, 0, "member 0 stopped");
	cr_assert_eq(rh_server_resume(srv[0]), 0);
	dl_pass(dlock_multilock_release(t.m, "me:4"));
	target_down(&t);
	dlock_loop_free(loop);
}

/* Canceled at once: one callback, DLOCK_ECANCELED, no wait for the stopped server. */
Test(async_multi_queries, a_query_is_canceled_at_once)
{
	dlock_loop *loop = NULL;
	dlock_op *op = NULL;
	dl_outcome o = { 0 };
	int64_t t0;
	target t;

	dl_pass(dlock_loop_new(&loop, NULL));
	target_up(&t, loop, "amq:cancel", 1);
	cr_assert_eq(rh_server_pause(srv[1]), 0);
	cr_assert_eq(rh_server_pause(srv[2]), 0);
	dl_pass(dlock_redlock_is_locked_async(&op, t.r, dl_note, &o));
	dlock_loop_run(loop, 20);
	t0 = rh_now_ms();
	dl_pass(dlock_op_cancel(op));
	dlock_op_free(op);
	dl_await_one(loop, &o, 5000);
	cr_expect_eq(o.code, DLOCK_ECANCELED, "%d (%s)", o.code, o.message);
	cr_expect(rh_now_ms() - t0 < TIMEOUT_MS, "the cancel waited for the command timeout");
	cr_assert_eq(rh_server_resume(srv[1]), 0);
	cr_assert_eq(rh_server_resume(srv[2]), 0);
	target_down(&t);
	dlock_loop_free(loop);
}
