/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What `dlock run` promises about its command's end: the job never outlives
 * the lock. The server is paused right after a renewal and the command must
 * be gone before the keys can expire; a force unlock stops it within a
 * second; a lease that ends is exit 124; processes that left the job's group
 * are stopped and killed; a second stop signal kills; options a command does
 * not take are refused.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define TMO "300" /* --timeout for every call */

TestSuite(cli_run_stop, .init = dl_server_start, .fini = dl_server_stop);

static int64_t pttl(const char *name)
{
	return rh_command_int(dl_srv, "PTTL %s", name);
}

/* Wait (bounded) until a renewal reaches the server: PTTL goes up. Returns
 * the moment it was seen; *ttl = the PTTL then. */
static int64_t await_renewal(const char *name, int64_t *ttl)
{
	int64_t deadline = rh_now_ms() + 5000, prev = pttl(name);

	while (rh_now_ms() < deadline) {
		int64_t now = pttl(name);

		if (now > prev && prev > 0) {
			*ttl = now;
			return rh_now_ms();
		}
		prev = now;
		dl_sleep_ms(2);
	}
	cr_assert_fail("no renewal of %s seen within 5 s", name);
	return 0;
}

/*
 * The last moment pid was seen running (neither gone nor a zombie), polling
 * until it is not, within timeout_ms; -1 if it still ran then. A test run
 * late by a busy machine sees it alive no later than it was.
 */
static int64_t last_seen_running(pid_t pid, int64_t timeout_ms)
{
	int64_t deadline = rh_now_ms() + timeout_ms, seen = -1;
	char path[64];

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	while (rh_now_ms() < deadline) {
		int64_t at = rh_now_ms();
		char buf[512], *p = NULL;
		FILE *f = fopen(path, "r");
		int running = 0;

		if (f != NULL) {
			running = fgets(buf, sizeof buf, f) != NULL &&
					(p = strrchr(buf, ')')) != NULL && p[2] != 'Z';
			fclose(f);
		}
		if (!running)
			return seen;
		seen = at;
		dl_sleep_ms(5);
	}
	return -1;
}

/*
 * A watchdog run whose command ignores SIGTERM; the server is paused right
 * after a renewal. The command must be gone before that renewal's TTL runs
 * out: after it, another client may hold the lock.
 */
static void paused_after_renewal(const char *grace, const char *name)
{
	pid_job j;
	int64_t ttl = 0, renewed, expiry, gone;
	proc *run;

	pid_job_init(&j, "trap '' TERM; ", "while :; do sleep 0.05; done");
	run = dlock_bg(grace != NULL
					? ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO,
							  "--watchdog", "3000", "run", "--grace", grace,
							  name, "--", "sh", "-c", j.script)
					: ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO,
							  "--watchdog", "3000", "run", name, "--", "sh",
							  "-c", j.script));
	j.child = wait_for_pidfile(j.pidfile, 5000);
	cr_assert_gt(j.child, 0, "the command did not start");
	renewed = await_renewal(name, &ttl);
	cr_assert_eq(rh_server_pause(dl_srv), 0);
	expiry = renewed + ttl;
	gone = last_seen_running((pid_t)j.child, 6000);
	cr_assert_geq(gone, 0, "the command survived the pause");
	cr_assert_eq(rh_server_resume(dl_srv), 0);
	proc_wait(run, HARD_TIMEOUT_S);
	cr_expect_lt(gone, expiry,
			"the command was seen running %" PRId64
			" ms after its keys could expire (renewal seen with PTTL %" PRId64
			"); stderr: %s",
			gone - expiry, ttl, run->err);
	cr_expect_gt(gone, expiry - 1500,
			"stopped %" PRId64 " ms before the keys could expire: too soon",
			expiry - gone);
	EXPECT_STATUS(run, 70);
	cr_expect(strstr(run->err, "could not be renewed") != NULL, "%s", run->err);
	proc_free(run);
	remove_tmpdir(j.dir, ARGS("pid"));
}

Test(cli_run_stop, watchdog_job_is_gone_before_the_keys_can_expire, .timeout = 60)
{
	paused_after_renewal("500", "stop-paused");
}

/* The default grace (10 s) is longer than the watchdog timeout: shortened. */
Test(cli_run_stop, default_grace_is_shortened_to_fit_the_watchdog, .timeout = 60)
{
	paused_after_renewal(NULL, "stop-default-grace");
}

Test(cli_run_stop, lease_end_exits_124, .timeout = 60)
{
	proc *run = DLOCK("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "-l", "1200",
			"stop-lease", "--", "sleep", "60");

	EXPECT_STATUS(run, 124);
	cr_expect_lt(proc_elapsed(run), 1200, "a -l 1200 run took %" PRId64 " ms",
			proc_elapsed(run));
	EXPECT_ONE_LINE_ERR(run);
	cr_expect(strstr(run->err, "lease") != NULL, "%s", run->err);
	proc_free(run);
}

/* `dlock run name -- sh -c <j's script>` in the background, once the
 * command has started (its pid in j->child). */
static proc *start_run(pid_job *j, const char *name)
{
	proc *run = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", name, "--",
			"sh", "-c", j->script));

	j->child = wait_for_pidfile(j->pidfile, 5000);
	cr_assert_gt(j->child, 0, "the command did not start");
	return run;
}

/* A force unlock from another shell reaches a holding run at once. */
Test(cli_run_stop, force_unlock_stops_the_job_within_a_second, .timeout = 60)
{
	pid_job j;
	proc *run, *un;
	int64_t unlocked;

	pid_job_init(&j, "", "exec sleep 60");
	run = start_run(&j, "stop-forced");
	un = DLOCK("-n", rh_server_uri(dl_srv), "--timeout", TMO, "unlock", "--force",
			"stop-forced");
	unlocked = rh_now_ms();
	ASSERT_STATUS(un, 0);
	proc_wait(run, HARD_TIMEOUT_S);
	EXPECT_STATUS(run, 70);
	cr_expect_leq(run->t1 - unlocked, 1000,
			"dlock exited %" PRId64 " ms after the force unlock (target: 1 s)",
			run->t1 - unlocked);
	EXPECT_ONE_LINE_ERR(run);
	proc_free(un);
	proc_free(run);
	remove_tmpdir(j.dir, ARGS("pid"));
}

/*
 * The late orphan: a process that left the group (setsid), ignores
 * SIGTERM and is re-parented to dlock only once its parent dies. It must be
 * killed after the grace, and the lock freed, not held for its 15 s.
 */
Test(cli_run_stop, late_orphans_are_killed_after_the_grace, .timeout = 60)
{
	char dir[64], pidfile[128], script[512];
	proc *run;
	long orphan;

	make_tmpdir(dir, sizeof dir);
	snprintf(pidfile, sizeof pidfile, "%s/pid", dir);
	snprintf(script, sizeof script,
			"(trap '' TERM; setsid sh -c \"trap '' TERM; echo \\$\\$ > %s; "
			"sleep 15.321; :\" &); sleep 0.3",
			pidfile);
	run = DLOCK("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "--grace", "1000",
			"stop-orphans", "--", "sh", "-c", script);
	orphan = wait_for_pidfile(pidfile, 1000);
	EXPECT_STATUS(run, 0);
	cr_expect_lt(proc_elapsed(run), 3000,
			"dlock held the lock %" PRId64 " ms for a job of 0.3 s, grace 1 s",
			proc_elapsed(run));
	cr_expect_gt(orphan, 0, "the orphan did not start");
	cr_expect(orphan <= 0 || gone_within((pid_t)orphan, 500), "the orphan (pid %ld) survived",
			orphan);
	cr_expect_not(process_running("sleep 15.321"), "the orphan's sleep survived");
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS stop-orphans"), 0);
	proc_free(run);
	remove_tmpdir(dir, ARGS("pid"));
}

/* Ctrl-C twice, the way a supervisor or an operator's kill does it. */
Test(cli_run_stop, second_stop_signal_kills_the_command, .timeout = 60)
{
	pid_job j;
	proc *run;
	int64_t second;

	pid_job_init(&j, "trap '' TERM INT; ", "while :; do sleep 0.05; done");
	run = start_run(&j, "stop-twice");
	kill(run->pid, SIGINT);
	dl_sleep_ms(300);
	cr_assert_eq(kill((pid_t)j.child, 0), 0, "one SIGINT stopped a command that ignores it");
	kill(run->pid, SIGINT);
	second = rh_now_ms();
	proc_wait(run, HARD_TIMEOUT_S);
	EXPECT_STATUS(run, 128 + SIGKILL);
	cr_expect_lt(run->t1 - second, 1000, "dlock ended %" PRId64 " ms after the second SIGINT",
			run->t1 - second);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS stop-twice"), 0);
	proc_free(run);
	remove_tmpdir(j.dir, ARGS("pid"));
}

/* run --owner ran with another owner; --force, --json, status -l did nothing;
 * an option after run's NAME ran as the command. */
Test(cli_run_stop, options_a_command_does_not_take_are_refused, .timeout = 60)
{
	const char *uri = rh_server_uri(dl_srv);
	struct {
		const char *const *args;
		const char *option;
	} cases[] = {
		{ ARGS("-n", uri, "run", "--owner", "myhost:1", "job", "--", "true"), "--owner" },
		{ ARGS("-n", uri, "run", "--force", "job", "--", "true"), "--force" },
		{ ARGS("-n", uri, "run", "--json", "job", "--", "true"), "--json" },
		{ ARGS("-n", uri, "status", "-l", "5000", "job"), "--lease" },
		{ ARGS("-n", uri, "release", "-w", "10", "--owner", "o", "job"), "--wait" },
		{ ARGS("-n", uri, "unlock", "--force", "--grace", "5", "job"), "--grace" },
		{ ARGS("-n", uri, "run", "job", "-w", "5", "--", "true"), "-w after NAME" },
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		proc *p = dlock_env(NULL, cases[i].args);

		EXPECT_STATUS(p, 64);
		EXPECT_ONE_LINE_ERR(p);
		cr_expect(strstr(p->err, cases[i].option) != NULL, "`%s`: %s", p->desc, p->err);
		proc_free(p);
	}
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS job"), 0, "a refused run took the lock");
}
