/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock --fair run`: Redisson's RFairLock from the command line. Runs
 * that wait are served in the order they asked, and a waiter that gives up
 * leaves the queue.
 */
#include <criterion/criterion.h>

#include <string.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define TMO "1000"

TestSuite(cli_fair, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

/* Wait until `n` waiters are queued on NAME's fair queue (5 s at most). */
static void wait_queued(const char *queue, int64_t n)
{
	int64_t until = rh_now_ms() + 5000;

	while (rh_command_int(dl_srv, "LLEN %s", queue) < n && rh_now_ms() < until)
		dl_sleep_ms(10);
	cr_assert_eq(rh_command_int(dl_srv, "LLEN %s", queue), n, "waiters queued");
}

Test(cli_fair, waiting_runs_are_served_in_the_order_they_asked)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *holder, *first, *second;
	pid_job j;

	pid_job_init(&j, "", "sleep 1");
	holder = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "--fair", "run", "queue", "--", "sh", "-c",
			j.script));
	cr_assert(wait_for_pidfile(j.pidfile, 5000) > 0, "the holder did not start");
	first = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "--fair", "run", "queue", "--", "sh", "-c",
			"sleep 0.3; echo first"));
	wait_queued("redisson_lock_queue:{queue}", 1);
	second = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "--fair", "run", "queue", "--", "echo",
			"second"));
	wait_queued("redisson_lock_queue:{queue}", 2);
	cr_assert_eq(proc_wait(holder, HARD_TIMEOUT_S), 0);
	cr_assert_eq(proc_wait(first, HARD_TIMEOUT_S), 0);
	cr_assert_eq(proc_wait(second, HARD_TIMEOUT_S), 0);
	EXPECT_STATUS(holder, 0);
	EXPECT_STATUS(first, 0);
	EXPECT_STATUS(second, 0);
	cr_expect(first->t1 <= second->t1 && strcmp(first->out, "first\n") == 0,
			"the first waiter ended first (first at %lld, second at %lld ms)",
			(long long)first->t1, (long long)second->t1);
	proc_free(holder);
	proc_free(first);
	proc_free(second);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS queue redisson_lock_queue:{queue}"), 0,
			"no lock and no queue left");
	remove_tmpdir(j.dir, ARGS("pid"));
}

Test(cli_fair, a_waiter_that_gives_up_leaves_the_queue)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *holder, *p;
	pid_job j;

	pid_job_init(&j, "", "sleep 1.5");
	holder = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "--fair", "run", "line", "--", "sh", "-c",
			j.script));
	cr_assert(wait_for_pidfile(j.pidfile, 5000) > 0, "the holder did not start");
	p = DLOCK("-n", uri, "--timeout", TMO, "--fair", "run", "-w", "300", "line", "--", "true");
	EXPECT_STATUS(p, 75);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);
	cr_expect_eq(rh_command_int(dl_srv, "LLEN redisson_lock_queue:{line}"), 0,
			"the waiter that gave up left the queue");
	cr_assert_eq(proc_wait(holder, HARD_TIMEOUT_S), 0);
	EXPECT_STATUS(holder, 0);
	proc_free(holder);
	remove_tmpdir(j.dir, ARGS("pid"));
}
