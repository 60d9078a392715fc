/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock unlock --force NAME` reaches every kind `run` and `hold` can hold,
 * not only the plain lock: a read (-s) or write (-x) hold of a read-write
 * lock and a permit (-c N) of a semaphore (`hold` takes no -c). The
 * holder hears it at once: the
 * job is stopped and dlock exits 70 within HEARD_MS, and the next taker
 * (-w 0) finds the job gone. The watchdog is 30 s, so a renewal (every
 * 10 s) is never what finds the loss within that bound; a fixed lease
 * (-l 20s) is not renewed at all, and is heard the same.
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define TMO "1000"
/* A force unlock stops the holder within this (a busy machine's bound). */
#define HEARD_MS 2000

TestSuite(cli_force_kinds, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

/* `dlock unlock --force name` succeeds, saying `said`; returns when it returned. */
static int64_t force_unlock(const char *name, const char *said)
{
	proc *un = DLOCK("-n", rh_server_uri(dl_srv), "--timeout", TMO, "unlock", "--force", name);
	int64_t at = rh_now_ms();

	ASSERT_STATUS(un, 0);
	cr_expect(strstr(un->out, said) != NULL, "`%s` said: %s", un->desc, un->out);
	proc_free(un);
	return at;
}

/* The stopped holder exited 70 within HEARD_MS of the force unlock, saying why. */
static void expect_stopped(proc *p, int64_t unlocked)
{
	proc_wait(p, HARD_TIMEOUT_S);
	EXPECT_STATUS(p, 70);
	cr_expect_leq(p->t1 - unlocked, HEARD_MS,
			"`%s` exited %" PRId64 " ms after the force unlock (bound %d ms)", p->desc,
			p->t1 - unlocked, HEARD_MS);
	cr_expect(strstr(p->err, "lost") != NULL, "%s", p->err);
}

/* A second taker (`kind` -w 0; NULL: a plain lock) gets name, and its
 * command finds the first job's process gone. */
static void next_taker_finds_the_job_gone(const char *kind, const char *name, long child)
{
	const char *args[16];
	char check[128];
	size_t n = 0;
	proc *p;

	snprintf(check, sizeof check, "if kill -0 %ld 2>/dev/null; then exit 9; fi", child);
	args[n++] = "-n";
	args[n++] = rh_server_uri(dl_srv);
	args[n++] = "--timeout";
	args[n++] = TMO;
	args[n++] = "run";
	if (kind != NULL)
		args[n++] = kind;
	args[n++] = "-w";
	args[n++] = "0";
	args[n++] = name;
	args[n++] = "--";
	args[n++] = "sh";
	args[n++] = "-c";
	args[n++] = check;
	args[n] = NULL;
	p = dlock_env(NULL, args);
	EXPECT_STATUS(p, 0);
	proc_free(p);
}

/* `run <kind...> name -- <job>`, force-unlocked while the job sleeps
 * (`kind` starts with -c for a permit). */
static void forced_run(const char *const *kind, const char *taker, const char *name)
{
	int permit = strcmp(kind[0], "-c") == 0;
	const char *uri = rh_server_uri(dl_srv);
	const char *args[16];
	size_t n = 0, i;
	pid_job j;
	proc *run;
	int64_t unlocked;

	pid_job_init(&j, "", "exec sleep 60");
	args[n++] = "-n";
	args[n++] = uri;
	args[n++] = "--timeout";
	args[n++] = TMO;
	args[n++] = "run";
	for (i = 0; kind[i] != NULL; i++)
		args[n++] = kind[i];
	args[n++] = name;
	args[n++] = "--";
	args[n++] = "sh";
	args[n++] = "-c";
	args[n++] = j.script;
	args[n] = NULL;
	run = dlock_bg(args);
	j.child = wait_for_pidfile(j.pidfile, 5000);
	cr_assert_gt(j.child, 0, "the command did not start: %s", run->err);
	unlocked = force_unlock(name, permit ? "gave back the taken permits of semaphore" : "deleted");
	expect_stopped(run, unlocked);
	cr_expect(strstr(run->err, permit ? "permit" : "lock") != NULL, "%s", run->err);
	cr_expect(gone_within((pid_t)j.child, 0), "the job (pid %ld) outlived dlock", j.child);
	EXPECT_ONE_LINE_ERR(run);
	next_taker_finds_the_job_gone(taker, name, j.child);
	proc_free(run);
	remove_tmpdir(j.dir, ARGS("pid"));
}

Test(cli_force_kinds, run_x_is_stopped_by_a_force_unlock)
{
	forced_run(ARGS("-x"), "-x", "fk-run-x");
}

Test(cli_force_kinds, run_s_is_stopped_by_a_force_unlock)
{
	forced_run(ARGS("-s"), "-x", "fk-run-s");
}

/* A permit: unlock --force gives every taken permit back (the semaphore
 * keeps its count), and the holder, listening on redisson_sc:{name},
 * stops its job; the next run gets the permit. */
Test(cli_force_kinds, run_c_is_stopped_by_a_force_unlock)
{
	forced_run(ARGS("-c", "1"), "-c1", "fk-run-c");
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS {fk-run-c}:timeout"), 0, "a permit left taken");
}

/* `hold <kind...> name`, force-unlocked while it holds: it exits 70 (a
 * script waiting on it learns the lock is gone) and the next taker (`taker`)
 * gets in. */
static void forced_hold(const char *const *kind, const char *taker, const char *name)
{
	const char *args[16];
	size_t n = 0, i;
	int fds[2];
	proc *p;
	int64_t unlocked;

	args[n++] = "-n";
	args[n++] = rh_server_uri(dl_srv);
	args[n++] = "--timeout";
	args[n++] = TMO;
	args[n++] = "hold";
	for (i = 0; kind[i] != NULL; i++)
		args[n++] = kind[i];
	args[n++] = name;
	args[n] = NULL;
	cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
	g_stdin_fd = fds[0];
	p = dlock_bg(args);
	g_stdin_fd = -1;
	close(fds[0]);
	cr_assert_eq(proc_wait_lines(p, 1, 5000), 0, "`%s` printed no owner: %s", p->desc, p->err);
	unlocked = force_unlock(name, "deleted");
	expect_stopped(p, unlocked);
	next_taker_finds_the_job_gone(taker, name, (long)p->pid);
	close(fds[1]);
	proc_free(p);
}

Test(cli_force_kinds, hold_x_exits_70_at_a_force_unlock)
{
	forced_hold(ARGS("-x"), "-x", "fk-hold-x");
}

Test(cli_force_kinds, hold_s_exits_70_at_a_force_unlock)
{
	forced_hold(ARGS("-s"), "-x", "fk-hold-s");
}

/* A fixed lease (-l) is not renewed, and its holder hears a force unlock
 * all the same: stopped within HEARD_MS, not when the 20 s lease ends. */
Test(cli_force_kinds, run_l_is_stopped_by_a_force_unlock)
{
	forced_run(ARGS("-l", "20s"), NULL, "fk-run-l");
}

Test(cli_force_kinds, run_x_l_is_stopped_by_a_force_unlock)
{
	forced_run(ARGS("-x", "-l", "20s"), "-x", "fk-run-x-l");
}

Test(cli_force_kinds, run_s_l_is_stopped_by_a_force_unlock)
{
	forced_run(ARGS("-s", "-l", "20s"), "-x", "fk-run-s-l");
}

Test(cli_force_kinds, run_c_l_is_stopped_by_a_force_unlock)
{
	forced_run(ARGS("-c", "2", "-l", "20s"), "-c2", "fk-run-c-l");
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS {fk-run-c-l}:timeout"), 0, "a permit left taken");
}

Test(cli_force_kinds, hold_l_exits_70_at_a_force_unlock)
{
	forced_hold(ARGS("-l", "20s"), NULL, "fk-hold-l");
}

Test(cli_force_kinds, hold_x_l_exits_70_at_a_force_unlock)
{
	forced_hold(ARGS("-x", "-l", "20s"), "-x", "fk-hold-x-l");
}
