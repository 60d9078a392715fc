/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A give-back given up at its timeout (its server paused) still runs once
 * that server does, although the server does not know the rollback script
 * yet: sent as EVALSHA, a NOSCRIPT nobody reads would leave the grant held
 * until its lease ran out. The servers are paused so that the grant comes
 * first, the refusal decides the attempt after it, and the give-back meets
 * a stopped server.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

#define N 2

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

TestSuite(rollback_given_up, .init = start, .fini = stop, .timeout = 60);

/* Drive the loop until server s shows the owner on the lock as `want`, or ms passed. */
static int hold_on(dlock_loop *loop, int s, int want, int64_t ms)
{
	int64_t until = rh_now_ms() + ms;
	int got;

	while ((got = (int)rh_command_int(srv[s], "HEXISTS gu:%d me:1", s)) != want &&
			rh_now_ms() < until)
		cr_assert(dlock_loop_run(loop, 10) >= 0, "%s", dlock_errmsg_last());
	return got;
}

Test(rollback_given_up, a_give_back_given_up_runs_where_the_script_is_unknown)
{
	dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_loop *loop = NULL;
	dlock_client *c[N];
	dlock_lock *l[N];
	dlock_multilock *m = NULL;
	dl_outcome a = { 0 };
	int64_t until;

	dl_pass(dlock_loop_new(&loop, NULL));
	co.loop = loop;
	co.command_timeout_ms = 1000;
	for (int i = 0; i < N; i++) {
		char name[16];

		snprintf(name, sizeof(name), "gu:%d", i);
		c[i] = dl_client_opts(rh_server_uri(srv[i]), &co);
		l[i] = dl_lock(c[i], name);
	}
	dl_pass(dlock_multilock_new(&m, l, N, NULL));
	/* Another owner holds member 1, whose server answers only once
	 * member 0's grant is in. */
	cr_assert_eq(rh_command_int(srv[1], "HSET gu:1 other:1 1"), 1);
	cr_assert_eq(rh_command_int(srv[1], "PEXPIRE gu:1 20000"), 1);
	cr_assert_eq(rh_server_pause(srv[1]), 0);
	dl_pass(dlock_multilock_acquire_async(NULL, m, "me:1", 0, 20000, dl_note, &a));
	cr_assert_eq(hold_on(loop, 0, 1, 5000), 1, "member 0 never granted");
	for (until = rh_now_ms() + 50; rh_now_ms() < until;)
		dlock_loop_run(loop, 10); /* the grant read */
	/* Member 0's server stops before the refusal comes: its give-back
	 * waits there, is given up at its timeout, and runs when it resumes. */
	cr_assert_eq(rh_server_pause(srv[0]), 0);
	cr_assert_eq(rh_server_resume(srv[1]), 0);
	dl_await_one(loop, &a, 10000);
	cr_assert_eq(rh_server_resume(srv[0]), 0);
	cr_assert_neq(a.code, 0, "acquired with a member held by another");

	cr_assert_eq(hold_on(loop, 0, 0, 3000), 0,
			"member 0's grant is still held (PTTL %lld): its give-back never ran",
			(long long)rh_command_int(srv[0], "PTTL gu:0"));
	dlock_multilock_free(m);
	for (int i = 0; i < N; i++) {
		dlock_lock_free(l[i]);
		dlock_client_free(c[i]);
	}
	dlock_loop_free(loop);
}
