/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Job control at a terminal, as flock(1) has it: an interactive bash on a
 * pseudo-terminal runs `dlock run`, gets Ctrl-Z, and its prompt returns;
 * `fg` continues the job, `kill %1` ends it and frees the lock; a job
 * stopped longer than its lock lasts is killed on `fg`, never run unlocked.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define PROMPT "dlock-jc$ "
#define CTRL_C "\003"
#define CTRL_Z "\032"

/* An interactive bash on a pseudo-terminal; what it wrote since the last mark. */
typedef struct shell {
	pid_t pid;
	int master;
	char out[65536];
	size_t len, mark;
	long job; /* the command's pid, once read from its pid file */
} shell;

static shell g_shell; /* the test's: ended by the suite's fini, even after a failure */

static void shell_end(shell *sh);

static void jobctl_fini(void)
{
	shell_end(&g_shell);
	dl_server_stop();
}

TestSuite(cli_jobctl, .init = dl_server_start, .fini = jobctl_fini, .timeout = 60);

static void shell_child(const char *slave)
{
	int fd;

	setsid();
	fd = open(slave, O_RDWR);
	if (fd < 0 || ioctl(fd, TIOCSCTTY, 0) < 0)
		_exit(126);
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
	setenv("PS1", PROMPT, 1);
	setenv("HISTFILE", "/dev/null", 1);
	setenv("TERM", "dumb", 1);
	unsetenv("DLOCK_NODES");
	execl("/bin/bash", "bash", "--norc", "--noprofile", "-i", (char *)NULL);
	_exit(127);
}

/* Read what the shell wrote, until `want` appears after the mark or
 * timeout_ms passes; 1 if it appeared (the mark then moves past it). */
static int shell_expect(shell *sh, const char *want, int64_t timeout_ms)
{
	int64_t deadline = rh_now_ms() + timeout_ms;

	for (;;) {
		char *hit = strstr(sh->out + sh->mark, want);
		struct pollfd p = { sh->master, POLLIN, 0 };
		ssize_t got;

		if (hit != NULL) {
			sh->mark = (size_t)(hit - sh->out) + strlen(want);
			return 1;
		}
		if (rh_now_ms() >= deadline)
			return 0;
		if (poll(&p, 1, 20) <= 0)
			continue;
		got = read(sh->master, sh->out + sh->len, sizeof sh->out - 1 - sh->len);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0)
			return 0;
		sh->len += (size_t)got;
		sh->out[sh->len] = '\0';
	}
}

static void shell_type(shell *sh, const char *text)
{
	size_t n = strlen(text);

	cr_assert_eq(write(sh->master, text, n), (ssize_t)n, "typing: %s", strerror(errno));
}

static void shell_start(shell *sh)
{
	const char *slave;

	memset(sh, 0, sizeof *sh);
	sh->master = posix_openpt(O_RDWR | O_NOCTTY);
	cr_assert_geq(sh->master, 0, "posix_openpt: %s", strerror(errno));
	cr_assert_eq(grantpt(sh->master), 0);
	cr_assert_eq(unlockpt(sh->master), 0);
	slave = ptsname(sh->master);
	cr_assert_not_null(slave);
	sh->pid = fork();
	cr_assert_geq(sh->pid, 0);
	if (sh->pid == 0)
		shell_child(slave);
	cr_assert(shell_expect(sh, PROMPT, 10000), "no prompt from bash: %s", sh->out);
}

/* The parent of pid, from /proc; 0 if gone. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512], *p;
	int ppid = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	if (fgets(buf, sizeof buf, f) != NULL && (p = strrchr(buf, ')')) != NULL)
		sscanf(p + 1, " %*c %d", &ppid);
	fclose(f);
	return (pid_t)ppid;
}

/* The state letter of pid (R, S, T, Z...), '?' when gone. */
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

/* Until pid's state is (want_stopped) or is not (!want_stopped) 'T', 5 s at most. */
static int await_stopped(pid_t pid, int want_stopped)
{
	for (int64_t t0 = rh_now_ms(); rh_now_ms() - t0 < 5000; dl_sleep_ms(5))
		if ((state_of(pid) == 'T') == want_stopped)
			return 1;
	return 0;
}

/* Whatever the test left behind: a dlock still running (the old code's
 * hang) is killed, its job with it (PR_SET_PDEATHSIG), then the shell. */
static void shell_end(shell *sh)
{
	int st;

	if (sh->pid <= 0)
		return;
	if (sh->job > 0) {
		pid_t dlock = parent_of((pid_t)sh->job);

		if (dlock > 1 && dlock != sh->pid)
			kill(dlock, SIGKILL);
		kill((pid_t)sh->job, SIGKILL);
	}
	kill(sh->pid, SIGKILL);
	waitpid(sh->pid, &st, 0);
	close(sh->master);
	sh->pid = 0;
}

static int held(const char *name)
{
	return rh_command_int(dl_srv, "EXISTS %s", name) == 1;
}

/* Until NAME is held (want 1) or free (want 0), timeout_ms at most. */
static int await_held(const char *name, int want, int64_t timeout_ms)
{
	for (int64_t t0 = rh_now_ms(); rh_now_ms() - t0 < timeout_ms; dl_sleep_ms(10))
		if (held(name) == want)
			return 1;
	return 0;
}

/* Type `dlock [globals] run NAME -- sh -c '<echo pid; body>' [tail]`; wait
 * until the lock is held and the command runs. */
static void start_run(shell *sh, pid_job *j, const char *globals, const char *name,
		const char *body, const char *tail)
{
	char line[2048];

	pid_job_init(j, "", body);
	snprintf(line, sizeof line, "%s -n %s --timeout 300 %s run %s -- sh -c '%s'%s\n",
			DLOCK_CLI_PATH, rh_server_uri(dl_srv), globals, name, j->script, tail);
	shell_type(sh, line);
	sh->job = j->child = wait_for_pidfile(j->pidfile, 5000);
	cr_assert_gt(j->child, 0, "the command did not start: %s", sh->out + sh->mark);
	cr_assert(await_held(name, 1, 5000), "\"%s\" not held", name);
}

/* ^Z: the prompt comes back (old: never - bash waited for a dlock that
 * still ran), with the job and dlock stopped and the lock kept. */
static void suspend(shell *sh, pid_job *j, const char *name)
{
	pid_t dlock = parent_of((pid_t)j->child);

	shell_type(sh, CTRL_Z);
	cr_assert(shell_expect(sh, "Stopped", 5000) && shell_expect(sh, PROMPT, 5000),
			"no prompt within 5 s of ^Z (command %c, dlock %c, terminal's group %ld): %s",
			state_of((pid_t)j->child), state_of(dlock), (long)tcgetpgrp(sh->master),
			sh->out + sh->mark);
	cr_expect(held(name), "the lock was let go at ^Z");
	cr_expect(await_stopped(dlock, 1), "dlock is not stopped");
	/* The command is stopped, or (dash) waits in vfork for a child that
	 * the ^Z stopped before its exec: it does not run either way. */
	cr_expect(state_of((pid_t)j->child) == 'T' || state_of((pid_t)j->child) == 'D',
			"the command is not stopped (%c)", state_of((pid_t)j->child));
}

/* The shell's $? for the last command. */
static int last_status(shell *sh)
{
	int rc = -1;

	shell_type(sh, "echo \"rc=$?.\"\n");
	cr_assert(shell_expect(sh, "\nrc=", 5000), "no status: %s", sh->out + sh->mark);
	cr_assert(shell_expect(sh, ".", 1000), "no status: %s", sh->out + sh->mark);
	sscanf(strrchr(sh->out, '=') + 1, "%d", &rc);
	return rc;
}

Test(cli_jobctl, ctrl_z_returns_the_prompt_and_fg_continues_the_job)
{
	shell *sh = &g_shell;
	pid_job j;

	shell_start(sh);
	start_run(sh, &j, "", "jc-fg", "exec sleep 30", "");
	suspend(sh, &j, "jc-fg");
	shell_type(sh, "fg\n");
	cr_expect(await_stopped((pid_t)j.child, 0), "`fg` did not continue the command");
	cr_expect(state_of((pid_t)j.child) != '?', "the command is gone after `fg`");
	cr_expect(held("jc-fg"), "the lock was let go at `fg`");
	shell_type(sh, CTRL_C); /* the job has the terminal again: ^C reaches it */
	cr_assert(shell_expect(sh, PROMPT, 5000), "no prompt after ^C: %s", sh->out + sh->mark);
	cr_expect_eq(last_status(sh), 128 + SIGINT);
	cr_expect_not(held("jc-fg"), "the lock is still held");
	shell_end(sh);
	remove_tmpdir(j.dir, ARGS("pid"));
}

/* A pipeline stops whole (its other commands too), and `kill %1` on the
 * stopped job (SIGTERM, SIGCONT) ends it and frees the lock. */
Test(cli_jobctl, kill_of_a_stopped_job_ends_it_and_frees_the_lock)
{
	shell *sh = &g_shell;
	pid_job j;

	shell_start(sh);
	start_run(sh, &j, "", "jc-kill", "exec sleep 30", " | cat");
	suspend(sh, &j, "jc-kill");
	shell_type(sh, "kill %1\n");
	cr_expect(await_held("jc-kill", 0, 5000), "the lock is still held 5 s after `kill %%1`");
	cr_expect(gone_within((pid_t)j.child, 5000), "the command survived `kill %%1`");
	shell_end(sh);
	remove_tmpdir(j.dir, ARGS("pid"));
}

/* Stopped longer than the lock lasts (no renewals while dlock is stopped):
 * on `fg` the job is killed where it stands, exit 70. It wrote nothing
 * more: it never ran without the lock. */
Test(cli_jobctl, fg_after_the_lock_expired_kills_the_job_unrun)
{
	char ticks[160], body[320];
	struct stat before, after;
	shell *sh = &g_shell;
	pid_job j;

	shell_start(sh);
	snprintf(ticks, sizeof ticks, "/tmp/dlock-jc-ticks-%ld", (long)getpid());
	unlink(ticks);
	snprintf(body, sizeof body, "while :; do echo x >> %s; sleep 0.02; done", ticks);
	start_run(sh, &j, "--watchdog 1500", "jc-expired", body, "");
	/* Its first tick written (a busy machine may run it late): the ^Z
	 * then stops a command that ran, and its file is there to compare. */
	for (int64_t end = rh_now_ms() + 5000; !file_exists(ticks) && rh_now_ms() < end;)
		dl_sleep_ms(10);
	cr_assert(file_exists(ticks), "the command wrote no tick within 5 s");
	suspend(sh, &j, "jc-expired");
	cr_assert(await_held("jc-expired", 0, 10000), "the lock did not expire while stopped");
	cr_assert_eq(stat(ticks, &before), 0);
	shell_type(sh, "fg\n");
	cr_assert(shell_expect(sh, "was lost while dlock was stopped", 5000), "%s",
			sh->out + sh->mark);
	cr_assert(shell_expect(sh, PROMPT, 5000), "no prompt after `fg`: %s", sh->out + sh->mark);
	cr_expect_eq(last_status(sh), 70);
	cr_expect(gone_within((pid_t)j.child, 1000), "the command survived");
	cr_assert_eq(stat(ticks, &after), 0);
	cr_expect_eq(after.st_size, before.st_size, "the command ran on after `fg`, unlocked");
	shell_end(sh);
	unlink(ticks);
	remove_tmpdir(j.dir, ARGS("pid"));
}
