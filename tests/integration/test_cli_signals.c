/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every signal whose default action would end `dlock run`/`dlock hold` is
 * handled: dlock never dies of one leaving the lock held and its job
 * orphaned. SIGPIPE is ignored (a reader gone from stderr is not a death);
 * SIGALRM and the other ending signals are passed on to the job, which
 * decides; they end a wait or a hold cleanly. A stop signal that finds the
 * job stopped continues it (SIGCONT) and kills it after --grace.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define TMO "300" /* --timeout for every call */

TestSuite(cli_signals, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

static int held(const char *name)
{
	return rh_command_int(dl_srv, "EXISTS %s", name) == 1;
}

static void await_held(const char *name)
{
	for (int64_t t0 = rh_now_ms(); rh_now_ms() - t0 < 5000; dl_sleep_ms(10))
		if (held(name))
			return;
	cr_assert_fail("\"%s\" never held", name);
}

/* Whether sig is still pending for pid (sent, not yet delivered). */
static int pending(pid_t pid, int sig)
{
	char path[64], line[256];
	unsigned long long mask = 0;
	int found = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, "ShdPnd:", 7) == 0 || strncmp(line, "SigPnd:", 7) == 0) {
			mask |= strtoull(line + 7, NULL, 16);
			found = 1;
		}
	fclose(f);
	return found && (mask & (1ULL << (sig - 1))) != 0;
}

/* The state letter of pid in /proc (R, S, T, Z...), '?' when gone. */
static char state_of(pid_t pid)
{
	char path[64], buf[512], *p;
	char st = '?';
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return st;
	if (fgets(buf, sizeof buf, f) != NULL && (p = strrchr(buf, ')')) != NULL)
		st = p[2];
	fclose(f);
	return st;
}

/* Send sig to pid and wait (bounded) until it was delivered: dlock took it
 * (or died of it). */
static void deliver(pid_t pid, int sig)
{
	cr_assert_eq(kill(pid, sig), 0, "kill(%ld, %d): %s", (long)pid, sig, strerror(errno));
	for (int64_t t0 = rh_now_ms(); rh_now_ms() - t0 < 5000; dl_sleep_ms(5))
		if (!pending(pid, sig) || state_of(pid) == 'Z')
			return;
	cr_assert_fail("signal %d to %ld still pending after 5 s", sig, (long)pid);
}

/* Whether every process of group pgid is stopped. A shell that vforked (dash
 * does, for each `sleep`) waits for its child's exec in state D, not T, when
 * the stop caught the child before the exec; it is stopped all the same. */
static int group_stopped(pid_t pgid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int members = 0, running = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		char path[300], buf[512], *p;
		long pgrp = 0;
		char st = '?';
		FILE *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(buf, sizeof buf, f) != NULL && (p = strrchr(buf, ')')) != NULL)
			sscanf(p + 2, "%c %*d %ld", &st, &pgrp);
		fclose(f);
		if (pgrp != (long)pgid)
			continue;
		members++;
		if (st != 'T' && st != 't' && st != 'D')
			running++;
	}
	closedir(d);
	return members > 0 && running == 0;
}

static void await_group_stopped(pid_t pgid)
{
	for (int64_t t0 = rh_now_ms(); rh_now_ms() - t0 < 5000; dl_sleep_ms(5))
		if (group_stopped(pgid))
			return;
	cr_assert_fail("group %ld never stopped (its leader is %c)", (long)pgid, state_of(pgid));
}

static void await_state(pid_t pid, char want)
{
	for (int64_t t0 = rh_now_ms(); rh_now_ms() - t0 < 5000; dl_sleep_ms(5))
		if (state_of(pid) == want)
			return;
	cr_assert_fail("pid %ld never reached state %c (is %c)", (long)pid, want, state_of(pid));
}

/* ---- SIGPIPE ---------------------------------------------------------------------- */

/* kill -PIPE mid-job: dlock ignores it; the job runs to its end. Old: exit
 * 141, the lock left held, the job killed. */
Test(cli_signals, sigpipe_mid_job_leaves_dlock_and_the_job_alone)
{
	char go[160], done[160], script[600];
	pid_job j;
	proc *run;

	pid_job_init(&j, "", "");
	snprintf(go, sizeof go, "%s/go", j.dir);
	snprintf(done, sizeof done, "%s/done", j.dir);
	snprintf(script, sizeof script,
			"echo $$ > %s; while [ ! -e %s ]; do sleep 0.02; done; echo ok > %s",
			j.pidfile, go, done);
	run = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "sig-pipe", "--",
			"sh", "-c", script));
	cr_assert_gt(wait_for_pidfile(j.pidfile, 5000), 0, "the command did not start");
	deliver(run->pid, SIGPIPE);
	fclose(fopen(go, "w"));
	proc_wait(run, HARD_TIMEOUT_S);
	EXPECT_STATUS(run, 0);
	cr_expect(file_exists(done), "the command did not run to its end");
	cr_expect_not(held("sig-pipe"), "the lock is still held");
	proc_free(run);
	remove_tmpdir(j.dir, ARGS("pid", "go", "done"));
}

/* A reader gone from dlock's stderr: the message it writes at a loss is an
 * EPIPE to shrug off, not a death by SIGPIPE (old: exit 141). */
Test(cli_signals, stderr_reader_gone_is_not_a_death)
{
	proc *run, *un;

	run = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "sig-stderr",
			"--", "sleep", "30"));
	await_held("sig-stderr");
	close(run->fd[1]); /* nobody reads dlock's stderr any more */
	run->fd[1] = -1;
	un = DLOCK("-n", rh_server_uri(dl_srv), "--timeout", TMO, "unlock", "--force",
			"sig-stderr");
	ASSERT_STATUS(un, 0);
	proc_wait(run, HARD_TIMEOUT_S);
	EXPECT_STATUS(run, 70);
	proc_free(un);
	proc_free(run);
}

/* ---- SIGALRM and the other ending signals ---------------------------------------- */

/* Each is passed on to the job, which traps it and exits 3: dlock exits 3
 * and releases. Old: SIGALRM, SIGVTALRM, ... killed dlock (128+N), the job
 * with it, and left the lock held. */
Test(cli_signals, ending_signals_are_passed_on_to_the_job)
{
	int sigs[] = { SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGUSR1, SIGRTMIN, SIGRTMAX };

	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		char before[64];
		pid_job j;
		proc *run;

		snprintf(before, sizeof before, "trap 'exit 3' %d; ", sigs[i]);
		pid_job_init(&j, before, "while :; do sleep 0.05; done");
		run = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run",
				"sig-pass", "--", "sh", "-c", j.script));
		cr_assert_gt(wait_for_pidfile(j.pidfile, 5000), 0, "the command did not start");
		kill(run->pid, sigs[i]);
		proc_wait(run, HARD_TIMEOUT_S);
		cr_expect_eq(run->status, 3, "signal %d: dlock exited %d, expected the job's 3; %s",
				sigs[i], run->status, run->err);
		cr_expect_not(held("sig-pass"), "signal %d: the lock is still held", sigs[i]);
		proc_free(run);
		remove_tmpdir(j.dir, ARGS("pid"));
	}
}

/* Until a waiter listens on NAME's unlock channel (5 s at most). */
static void await_waiter(const char *name)
{
	for (int64_t t0 = rh_now_ms(); rh_now_ms() - t0 < 5000; dl_sleep_ms(10)) {
		redisReply *r = rh_command(
				dl_srv, "PUBSUB NUMSUB redisson_lock__channel:{%s}", name);
		long long n = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2
				? r->element[1]->integer
				: 0;

		freeReplyObject(r);
		if (n > 0)
			return;
	}
	cr_assert_fail("nobody waits for \"%s\"", name);
}

/* While waiting there is no job: the signal ends the wait as its default
 * would, but cleanly (one line, 128+N, nothing held). */
Test(cli_signals, sigalrm_ends_a_wait_cleanly)
{
	proc *holder, *run;

	holder = DLOCK("-n", rh_server_uri(dl_srv), "acquire", "-l", "20s", "--owner", "other",
			"sig-wait");
	ASSERT_STATUS(holder, 0);
	run = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "sig-wait", "--",
			"true"));
	await_waiter("sig-wait");
	kill(run->pid, SIGALRM);
	proc_wait(run, HARD_TIMEOUT_S);
	EXPECT_STATUS(run, 128 + SIGALRM);
	EXPECT_ONE_LINE_ERR(run);
	cr_expect(strstr(run->err, "signal 14") != NULL, "%s", run->err);
	proc_free(holder);
	proc_free(run);
}

/* hold has no job: an ending signal releases it (old: exit 142, still held). */
Test(cli_signals, ending_signals_release_a_hold)
{
	int sigs[] = { SIGALRM, SIGUSR2, SIGRTMIN };

	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		proc *hold = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "hold",
				"sig-hold"));

		cr_assert_eq(proc_wait_lines(hold, 1, 5000), 0, "hold printed no owner: %s",
				hold->err);
		deliver(hold->pid, SIGPIPE); /* ignored */
		kill(hold->pid, sigs[i]);
		proc_wait(hold, HARD_TIMEOUT_S);
		cr_expect_eq(hold->status, 0, "signal %d: hold exited %d; %s", sigs[i],
				hold->status, hold->err);
		cr_expect_not(held("sig-hold"), "signal %d: still held", sigs[i]);
		proc_free(hold);
	}
}

/* ---- a stop signal to a stopped job ----------------------------------------------- */

/* The job's group is SIGSTOPped (by someone else: dlock keeps the lock);
 * then SIGTERM to dlock. Returns dlock, ended, and the moment of the TERM. */
static proc *term_a_stopped_job(const char *before, const char *name, int64_t *termed)
{
	pid_job j;
	proc *run;

	pid_job_init(&j, before, "while :; do sleep 0.05; done");
	g_own_group = 1;
	run = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "--grace", "1000",
			name, "--", "sh", "-c", j.script));
	g_own_group = 0;
	j.child = wait_for_pidfile(j.pidfile, 5000);
	cr_assert_gt(j.child, 0, "the command did not start");
	cr_assert_eq(kill(-(pid_t)j.child, SIGSTOP), 0);
	await_group_stopped((pid_t)j.child);
	await_state(run->pid, 'S'); /* dlock goes on holding */
	*termed = rh_now_ms();
	kill(run->pid, SIGTERM);
	proc_wait(run, HARD_TIMEOUT_S);
	cr_expect(gone_within((pid_t)j.child, 1000), "the command survived");
	cr_expect_not(held(name), "the lock is still held");
	remove_tmpdir(j.dir, ARGS("pid"));
	return run;
}

/* Continued, the job acts on the SIGTERM at once. Old: it stayed stopped
 * with the TERM pending, and dlock held the lock for ever. */
Test(cli_signals, sigterm_to_a_stopped_job_continues_it)
{
	int64_t termed;
	proc *run = term_a_stopped_job("trap 'exit 5' TERM; ", "sig-stopped", &termed);

	EXPECT_STATUS(run, 5);
	cr_expect_lt(run->t1 - termed, 1000, "ended %" PRId64 " ms after the SIGTERM",
			run->t1 - termed);
	proc_free(run);
}

/* One that ignores it is killed after the grace (1 s). */
Test(cli_signals, sigterm_to_a_stopped_job_kills_it_after_the_grace)
{
	int64_t termed;
	proc *run = term_a_stopped_job("trap '' TERM; ", "sig-stopped-deaf", &termed);

	EXPECT_STATUS(run, 128 + SIGKILL);
	cr_expect_geq(run->t1 - termed, 1000, "killed %" PRId64 " ms after the SIGTERM (grace 1 s)",
			run->t1 - termed);
	cr_expect_lt(run->t1 - termed, 3000, "killed %" PRId64 " ms after the SIGTERM (grace 1 s)",
			run->t1 - termed);
	proc_free(run);
}

/*
 * Stopped is stopped wherever the stop caught the job: here only its child
 * is (as when dash, in vfork for a `sleep`, waits in D for a child stopped
 * before its exec - the shell never shows T). The job ignores SIGTERM, so
 * only the SIGKILL after the grace ends it. Old: dlock looked at the shell
 * alone, saw it running, and waited for ever.
 */
Test(cli_signals, sigterm_with_only_a_child_of_the_job_stopped_kills_it_after_the_grace)
{
	pid_job j;
	char child_file[300], script[700];
	int64_t termed;
	long child;
	proc *run;

	pid_job_init(&j, "", "");
	snprintf(child_file, sizeof child_file, "%s/child", j.dir);
	snprintf(script, sizeof script, "trap '' TERM; echo $$ > %s; sleep 1000 & echo $! > %s; wait",
			j.pidfile, child_file);
	g_own_group = 1;
	run = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "--grace", "1000",
			"sig-child-stopped", "--", "sh", "-c", script));
	g_own_group = 0;
	j.child = wait_for_pidfile(j.pidfile, 5000);
	cr_assert_gt(j.child, 0, "the command did not start");
	child = wait_for_pidfile(child_file, 5000);
	cr_assert_gt(child, 0, "the command's child did not start");
	cr_assert_eq(kill((pid_t)child, SIGSTOP), 0);
	await_state((pid_t)child, 'T');
	cr_assert_neq(state_of((pid_t)j.child), 'T', "the shell itself is not stopped");
	termed = rh_now_ms();
	kill(run->pid, SIGTERM);
	proc_wait(run, HARD_TIMEOUT_S);
	EXPECT_STATUS(run, 128 + SIGKILL);
	cr_expect_geq(run->t1 - termed, 1000, "killed %" PRId64 " ms after the SIGTERM (grace 1 s)",
			run->t1 - termed);
	cr_expect(gone_within((pid_t)child, 1000), "the stopped child survived");
	cr_expect_not(held("sig-child-stopped"), "the lock is still held");
	proc_free(run);
	remove_tmpdir(j.dir, ARGS("pid", "child"));
}
