/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An operation's handle is the caller's until dlock_op_free() (dlock/async.h):
 * canceling it after its callback touches nothing else, even once another
 * operation was started; and dlock_loop_pending() counts the operations
 * that have not had their callback.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

TestSuite(op_handle, .init = dl_server_start, .fini = dl_server_stop, .timeout = 120);

typedef struct outcome {
	int calls;
	int code;
	size_t pending_in_cb; /* dlock_loop_pending() from inside the callback */
	dlock_loop *loop;
	dlock_op *free_in_cb; /* dropped from inside the callback */
} outcome;

static void note(dlock_op *op, const dlock_result *r, void *ud)
{
	outcome *o = ud;

	(void)op;
	o->calls++;
	o->code = r->code;
	if (o->loop != NULL)
		dl_pass(dlock_loop_pending(&o->pending_in_cb, o->loop));
	if (o->free_in_cb != NULL)
		dlock_op_free(o->free_in_cb);
}

static dlock_client *client_on(dlock_loop *loop)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.loop = loop;
	return dl_client_opts(rh_server_uri(dl_srv), &o);
}

static void run_until(dlock_loop *loop, const int *calls, int n, int64_t within_ms)
{
	int64_t until = rh_now_ms() + within_ms;

	while (*calls < n && rh_now_ms() < until)
		cr_assert(dlock_loop_run(loop, 50) >= 0, "%s", dlock_errmsg_last());
	cr_assert_geq(*calls, n, "%d of %d callbacks within %lld ms", *calls, n,
			(long long)within_ms);
}

Test(op_handle, canceling_a_kept_handle_after_its_callback_leaves_a_new_operation_alone)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dlock_op *first = NULL, *second = NULL;
	outcome a = { 0 }, b = { 0 };
	int i;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	l = dl_lock(c, "ophandle:reuse");
	/* Several rounds: before, the first's memory was the next one's (the
	 * same kind, the same size), and canceling the old handle canceled it. */
	for (i = 0; i < 5; i++) {
		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		dl_pass(dlock_lock_is_locked_async(&first, l, note, &a));
		run_until(loop, &a.calls, 1, 5000);
		cr_assert_eq(a.code, 0, "is_locked: %d", a.code);
		dl_pass(dlock_lock_is_locked_async(&second, l, note, &b));
		cr_assert_neq(first, second, "a new operation was handed a handle still kept");
		cr_assert_eq(dlock_op_cancel(first), 0, "canceling an ended operation: no-op, 0");
		run_until(loop, &b.calls, 1, 5000);
		cr_assert_eq(b.code, 0, "the old handle's cancel reached the new operation: %d",
				b.code);
		cr_assert_eq(a.calls, 1, "an ended operation called back again");
		dlock_op_free(first);
		dlock_op_free(second);
	}
	dlock_op_free(NULL);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(op_handle, a_handle_freed_in_its_callback_or_before_it_is_safe)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	dlock_op *op = NULL, *early = NULL;
	outcome a = { 0 }, e = { 0 };

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	l = dl_lock(c, "ophandle:free");
	dl_pass(dlock_lock_acquire_async(&op, l, "me:1", 0, 30000, note, &a));
	a.free_in_cb = op; /* the callback drops the caller's reference */
	dl_pass(dlock_lock_is_locked_async(&early, l, note, &e));
	dlock_op_free(early); /* before its callback: it still runs to its end */
	run_until(loop, &a.calls, 1, 5000);
	run_until(loop, &e.calls, 1, 5000);
	cr_assert_eq(a.code, 0);
	cr_assert_eq(e.code, 0);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(op_handle, the_loop_counts_the_operations_that_have_not_had_their_callback)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	outcome o[3];
	size_t n = 99;
	int i, calls;

	memset(o, 0, sizeof(o));
	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	l = dl_lock(c, "ophandle:pending");
	dl_pass(dlock_loop_pending(&n, loop));
	cr_assert_eq(n, 0);
	for (i = 0; i < 3; i++) {
		o[i].loop = loop;
		dl_pass(dlock_lock_is_locked_async(NULL, l, note, &o[i]));
	}
	dl_pass(dlock_loop_pending(&n, loop));
	cr_assert_eq(n, 3, "3 started, none called back: %zu pending", n);
	for (calls = 0; calls < 3;) {
		cr_assert(dlock_loop_run(loop, 50) >= 0);
		calls = o[0].calls + o[1].calls + o[2].calls;
	}
	/* Each callback saw the others not yet called back: 2, 1, 0. */
	cr_assert_eq(o[0].pending_in_cb + o[1].pending_in_cb + o[2].pending_in_cb, 3,
			"pending seen from the callbacks: %zu %zu %zu", o[0].pending_in_cb,
			o[1].pending_in_cb, o[2].pending_in_cb);
	cr_assert(o[0].pending_in_cb != o[1].pending_in_cb &&
			o[1].pending_in_cb != o[2].pending_in_cb &&
			o[0].pending_in_cb != o[2].pending_in_cb);
	dl_pass(dlock_loop_pending(&n, loop));
	cr_assert_eq(n, 0);
	cr_assert_eq(dlock_loop_pending(NULL, loop), DLOCK_EINVAL);
	cr_assert_eq(dlock_loop_pending(&n, NULL), DLOCK_EINVAL);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

/*
 * A cancel that comes after the acquire's answer was read but before the
 * acquisition saw it (the answer is read for it and handed on by a posted
 * task; a cancel posted first runs first): the lock it took goes back. The
 * server is paused while the acquire waits for its answer; once the server
 * has made the hold (read by a connection of the test's own) the answer
 * sits unread in the client's socket, and the cancel is posted before the
 * loop runs again.
 */
Test(op_handle, a_cancel_after_the_answer_came_gives_the_lock_back)
{
	static const char *const kinds[] = { "plain", "fair", "fenced" };
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_op *op = NULL;
	int i;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	for (i = 0; i < 3; i++) {
		dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
		dlock_lock *l = NULL;
		outcome a = { 0 };
		char name[64];
		int64_t until;

		lo.kind = i == 0 ? DLOCK_LOCK_PLAIN : i == 1 ? DLOCK_LOCK_FAIR : DLOCK_LOCK_FENCED;
		snprintf(name, sizeof(name), "ophandle:late-cancel:%s", kinds[i]);
		dl_pass(dlock_lock_new(&l, c, name, &lo));
		/* Connected, the scripts loaded: the acquire goes out at once. */
		dl_pass(dlock_lock_acquire_async(NULL, l, "me:0", 0, 30000, note, &a));
		run_until(loop, &a.calls, 1, 5000);
		cr_assert_eq(a.code, 0, "%s: warm-up: %d", kinds[i], a.code);
		dl_pass(dlock_lock_release_async(NULL, l, "me:0", note, &a));
		run_until(loop, &a.calls, 2, 5000);
		cr_assert_eq(a.code, 0, "%s: warm-up release: %d", kinds[i], a.code);
		memset(&a, 0, sizeof(a));
		cr_assert_eq(rh_server_pause(dl_srv), 0);
		dl_pass(dlock_lock_acquire_async(&op, l, "me:1", 5000, 30000, note, &a));
		for (until = rh_now_ms() + 200; rh_now_ms() < until;)
			cr_assert(dlock_loop_run(loop, 20) >= 0, "%s", dlock_errmsg_last());
		cr_assert_eq(a.calls, 0, "%s: answered by a paused server", kinds[i]);
		cr_assert_eq(rh_server_resume(dl_srv), 0);
		for (until = rh_now_ms() + 10000;
				rh_command_int(dl_srv, "EXISTS %s", name) != 1 && rh_now_ms() < until;)
			usleep(1000);
		cr_assert_eq(rh_command_int(dl_srv, "EXISTS %s", name), 1,
				"%s: the acquire never ran on the server", kinds[i]);
		dl_pass(dlock_op_cancel(op));
		run_until(loop, &a.calls, 1, 10000);
		cr_assert_eq(a.code, DLOCK_ECANCELED, "%s: %d (%s)", kinds[i], a.code,
				dlock_strerror(a.code));
		/* The give-back ran before the callback. */
		cr_assert_eq(rh_command_int(dl_srv, "EXISTS %s", name), 0,
				"%s: a canceled acquisition left its hold on the server", kinds[i]);
		cr_assert_eq(rh_command_int(dl_srv, "EXISTS redisson_lock_queue:{%s}", name), 0,
				"%s: a canceled acquisition left its place in the queue", kinds[i]);
		dlock_op_free(op);
		dlock_lock_free(l);
	}
	dlock_client_free(c);
	dlock_loop_free(loop);
}
