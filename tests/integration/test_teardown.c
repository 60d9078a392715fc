/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Teardown callable from any callback (dlock/client.h, dlock/loop.h): an
 * operation's callback frees its lock, client and loop - on the caller's
 * loop and on the client's own thread - and everything goes once that
 * turn is over; the frees need no order (a lock keeps its client, a client
 * its loop) and cannot fail.
 */
#include <criterion/criterion.h>

#include <stdatomic.h>
#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

TestSuite(teardown, .init = dl_server_start, .fini = dl_server_stop, .timeout = 120);

typedef struct world {
	dlock_loop *loop;
	dlock_client *client;
	dlock_lock *lock;
	_Atomic int calls;
	int code;
} world;

/* The callback frees everything it ran on. */
static void free_all(dlock_op *op, const dlock_result *r, void *ud)
{
	world *w = ud;

	(void)op;
	w->code = r->code;
	dlock_lock_free(w->lock);
	dlock_client_free(w->client);
	dlock_loop_free(w->loop); /* NULL for a client with its own thread */
	atomic_fetch_add(&w->calls, 1);
}

/* Wait for `cond` on a monotonic deadline (what ends goes on another thread). */
#define WAIT_UNTIL(cond, ms)                                                       \
	do {                                                                       \
		int64_t until_ = rh_now_ms() + (ms);                               \
		while (!(cond) && rh_now_ms() < until_)                            \
			dl_sleep_ms(5);                                            \
	} while (0)

Test(teardown, an_operations_callback_frees_lock_client_and_loop_on_the_callers_loop)
{
	int fds = dl_count_fds();
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	world w = { 0 };
	int64_t until = rh_now_ms() + 10000;

	dl_pass(dlock_loop_new(&w.loop, NULL));
	o.loop = w.loop;
	w.client = dl_client_opts(rh_server_uri(dl_srv), &o);
	w.lock = dl_lock(w.client, "teardown:loop");
	dl_pass(dlock_lock_acquire_async(NULL, w.lock, "me:1", 0, 30000, free_all, &w));
	/* Driven until the callback: the loop it freed goes as that run returns. */
	while (atomic_load(&w.calls) == 0 && rh_now_ms() < until)
		cr_assert(dlock_loop_run(w.loop, 50) >= 0, "%s", dlock_errmsg_last());
	cr_assert_eq(atomic_load(&w.calls), 1);
	cr_assert_eq(w.code, 0, "acquire: %d", w.code);
	cr_assert_eq(dl_count_fds(), fds, "the loop's and the client's descriptors are not all "
			"closed: %d open, %d before", dl_count_fds(), fds);
}

Test(teardown, an_operations_callback_on_the_clients_own_thread_frees_it)
{
	int threads = dl_count_threads(), fds = dl_count_fds();
	world w = { 0 };

	w.client = dl_client(rh_server_uri(dl_srv), 0, 0);
	w.lock = dl_lock(w.client, "teardown:thread");
	cr_assert_eq(dl_count_threads(), threads + 1, "the client's thread");
	dl_pass(dlock_lock_acquire_async(NULL, w.lock, "me:1", 0, 30000, free_all, &w));
	WAIT_UNTIL(atomic_load(&w.calls) == 1, 10000);
	cr_assert_eq(atomic_load(&w.calls), 1);
	cr_assert_eq(w.code, 0, "acquire: %d", w.code);
	/* Its thread ends itself once that turn is over. */
	WAIT_UNTIL(dl_count_threads() == threads && dl_count_fds() == fds, 10000);
	cr_assert_eq(dl_count_threads(), threads, "the client's thread still runs");
	cr_assert_eq(dl_count_fds(), fds, "the client's descriptors are not all closed");
}

typedef struct hooks {
	int closed;
} hooks;

static void watch_fd(void *data, int fd, int what)
{
	(void)data;
	(void)fd;
	(void)what;
}

static void set_timer(void *data, int64_t ms)
{
	(void)data;
	(void)ms;
}

static void closed(void *data)
{
	((hooks *)data)->closed++;
}

Test(teardown, frees_in_any_order_the_last_one_frees)
{
	dlock_loop_options lo = DLOCK_LOOP_OPTIONS_INIT;
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	hooks h = { 0 };
	int threads = dl_count_threads();

	/* The loop first: it stays for its client, and says when it goes. */
	lo.watch_fd = watch_fd;
	lo.set_timer = set_timer;
	lo.closed = closed;
	lo.userdata = &h;
	dl_pass(dlock_loop_new(&loop, &lo));
	o.loop = loop;
	o.lazy_connect = 1;
	c = dl_client_opts(rh_server_uri(dl_srv), &o);
	dlock_loop_free(loop);
	cr_assert_eq(h.closed, 0, "the loop went with a client still open on it");
	dlock_client_free(c);
	cr_assert_eq(h.closed, 1, "the loop did not go with its last client");

	/* The client before its lock: the lock still works, then takes it along. */
	c = dl_client(rh_server_uri(dl_srv), 0, 0);
	l = dl_lock(c, "teardown:order");
	dlock_client_free(c);
	dl_pass(dlock_lock_acquire(l, "me:1", 0, 30000));
	cr_assert_eq(rh_command_int(dl_srv, "HEXISTS teardown:order me:1"), 1);
	dl_pass(dlock_lock_release(l, "me:1"));
	cr_assert_eq(dl_count_threads(), threads + 1, "the client went before its lock");
	dlock_lock_free(l);
	WAIT_UNTIL(dl_count_threads() == threads, 5000);
	cr_assert_eq(dl_count_threads(), threads, "the client did not go with its lock");
}

/* A lost callback frees the lock, the client and the loop it came from. */
static void lost_free_all(const dlock_lost_event *ev, void *ud)
{
	world *w = ud;

	w->code = (int)ev->reason;
	dlock_lock_free(w->lock);
	dlock_client_free(w->client);
	dlock_loop_free(w->loop);
	atomic_fetch_add(&w->calls, 1);
}

static void note_code(dlock_op *op, const dlock_result *r, void *ud)
{
	(void)op;
	*(int *)ud = r->code;
}

Test(teardown, a_lost_callback_frees_lock_client_and_loop)
{
	/* The test's own connection to the server first (it stays open). */
	int64_t none = rh_command_int(dl_srv, "EXISTS teardown:lost");
	int fds = dl_count_fds();
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	world w = { 0 };
	int acquired = 1;
	int64_t until = rh_now_ms() + 10000;

	cr_assert_eq(none, 0);
	dl_pass(dlock_loop_new(&w.loop, NULL));
	o.loop = w.loop;
	w.client = dl_client_opts(rh_server_uri(dl_srv), &o);
	w.lock = dl_lock(w.client, "teardown:lost");
	dl_pass(dlock_lock_set_lost_cb(w.lock, lost_free_all, &w));
	dl_pass(dlock_lock_acquire_async(NULL, w.lock, "me:1", 0, DLOCK_LEASE_WATCHDOG, note_code,
			&acquired));
	while (acquired == 1 && rh_now_ms() < until)
		cr_assert(dlock_loop_run(w.loop, 50) >= 0, "%s", dlock_errmsg_last());
	cr_assert_eq(acquired, 0, "acquire: %d", acquired);
	/* Taken away behind its back: the next renewal finds it gone. */
	cr_assert_eq(rh_command_int(dl_srv, "DEL teardown:lost"), 1);
	until = rh_now_ms() + 60000;
	while (atomic_load(&w.calls) == 0 && rh_now_ms() < until)
		cr_assert(dlock_loop_run(w.loop, 50) >= 0, "%s", dlock_errmsg_last());
	cr_assert_eq(atomic_load(&w.calls), 1, "no lost callback");
	cr_assert_eq(dl_count_fds(), fds, "the loop's and the client's descriptors are not all "
			"closed: %d open, %d before", dl_count_fds(), fds);
}
