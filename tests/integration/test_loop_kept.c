/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An epoll loop leaves a pooled connection's descriptor in its set between
 * operations (no epoll_ctl pair per operation). What that must never cost:
 * a loop that spins on a descriptor nobody watches - one the server closed
 * while idle in the pool, or one the client closed while a forked child
 * still holds it open - or an operation that cannot reach its server.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

TestSuite(loop_kept, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

static void note(dlock_op *op, const dlock_result *r, void *ud)
{
	int *code = ud;

	(void)op;
	*code = r->code;
	if (r->code < 0)
		cr_log_warn("%s", r->message);
}

/* One operation's code, the loop driven until its callback (5 s at most). */
static int drive(dlock_loop *loop, int *code)
{
	int64_t until = rh_now_ms() + 5000;

	while (*code == 1 && rh_now_ms() < until)
		cr_assert(dlock_loop_run(loop, 50) >= 0, "%s", dlock_errmsg_last());
	cr_assert_neq(*code, 1, "no callback within 5 s");
	return *code;
}

/* Under an owner named after the client: its count is known, so an
 * acquisition that finds its pooled connection closed may be resent on a
 * new one (an owner of the caller's own may not: the server might have run it). */
static void acquire_and_release(dlock_loop *loop, dlock_client *c, dlock_lock *l)
{
	char owner[64];
	int code = 1;

	dlock_client_owner(owner, c, 1);
	dl_pass(dlock_lock_acquire_async(NULL, l, owner, 0, 10000, note, &code));
	cr_assert_eq(drive(loop, &code), 0, "acquire: %d", code);
	code = 1;
	dl_pass(dlock_lock_release_async(NULL, l, owner, note, &code));
	cr_assert_eq(drive(loop, &code), 0, "release: %d", code);
}

/* How often dlock_loop_run(loop, 20 ms) returns in `ms` with nothing to do:
 * about ms/20; a loop spinning on a ready descriptor returns thousands of times. */
static int turns_while_idle(dlock_loop *loop, int64_t ms)
{
	int64_t until = rh_now_ms() + ms;
	int turns = 0;

	while (rh_now_ms() < until) {
		cr_assert(dlock_loop_run(loop, 20) >= 0, "%s", dlock_errmsg_last());
		turns++;
	}
	return turns;
}

static dlock_client *client_on(dlock_loop *loop)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

	o.loop = loop;
	return dl_client_opts(rh_server_uri(dl_srv), &o);
}

Test(loop_kept, a_pooled_connection_the_server_closes_neither_spins_the_loop_nor_fails_the_next_operation)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	int turns;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	l = dl_lock(c, "kept:closed");
	acquire_and_release(loop, c, l);
	/* The server closes the pooled connection: its descriptor, still in the
	 * loop's set, reads end-of-file until it is taken out. */
	cr_assert(rh_command_int(dl_srv, "CLIENT KILL TYPE normal") >= 1);
	turns = turns_while_idle(loop, 300);
	cr_assert(turns < 100, "the loop turned %d times in 300 ms with nothing to do", turns);
	acquire_and_release(loop, c, l);
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS kept:closed"), 0);
	dlock_lock_free(l);
	dlock_client_free(c);
	dlock_loop_free(loop);
}

Test(loop_kept, a_connection_closed_while_a_forked_child_holds_it_leaves_the_loops_set)
{
	dlock_loop *loop = NULL;
	dlock_client *c;
	dlock_lock *l;
	pid_t child;
	int turns, status;

	dl_pass(dlock_loop_new(&loop, NULL));
	c = client_on(loop);
	l = dl_lock(c, "kept:forked");
	acquire_and_release(loop, c, l);
	/* A child that keeps copies of every descriptor (no exec: CLOEXEC does
	 * not close them), so closing ours does not end the socket... */
	child = fork();
	cr_assert(child >= 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	dlock_lock_free(l);
	dlock_client_free(c);
	/* ...and the server's close makes it readable: were it still in the
	 * loop's set under a number we closed, nothing could take it out. */
	cr_assert(rh_command_int(dl_srv, "CLIENT KILL TYPE normal") >= 1);
	turns = turns_while_idle(loop, 300);
	kill(child, SIGKILL);
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(turns < 100, "the loop turned %d times in 300 ms with nothing to do", turns);
	dlock_loop_free(loop);
}
