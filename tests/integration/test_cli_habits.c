/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What flock(1), consul lock and etcdctl lock users write: -q for a cron
 * line that skips quietly when the lock is busy, -E N, durations with
 * units, help per command, `hold` (a lock held for a script until a signal
 * or EOF on stdin) and `wait` (until a lock is free), and the option
 * combinations refused because they could not work.
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define TMO "1000"

TestSuite(cli_habits, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

/* NAME held by another owner for 20 s. */
static void hold_elsewhere(const char *name)
{
	proc *p = DLOCK("-n", rh_server_uri(dl_srv), "acquire", "-l", "20s", "--owner", "other",
			name);

	ASSERT_STATUS(p, 0);
	proc_free(p);
}

static void expect_64_saying(const char *const *args, const char *words)
{
	proc *p = dlock_env(NULL, args);

	EXPECT_STATUS(p, 64);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, words) != NULL, "`%s`: stderr should say \"%s\": %s", p->desc,
			words, p->err);
	proc_free(p);
}

/* ---- -q, -E ---------------------------------------------------------------------- */

Test(cli_habits, quiet_is_silent_on_a_busy_lock_only)
{
	const char *uri = rh_server_uri(dl_srv);
	char dead[64];
	proc *p;

	hold_elsewhere("nightly");
	p = DLOCK("-q", "-n", uri, "run", "-w", "0", "nightly", "--", "true");
	EXPECT_STATUS(p, 75);
	cr_expect_eq(p->err_len, 0, "-q printed: %s", p->err);
	proc_free(p);
	p = DLOCK("-n", uri, "run", "-q", "-w", "0", "nightly", "--", "true"); /* after the command */
	EXPECT_STATUS(p, 75);
	cr_expect_eq(p->err_len, 0, "-q after the command printed: %s", p->err);
	proc_free(p);
	p = DLOCK("-n", uri, "--quiet", "acquire", "-l", "5s", "--owner", "me", "nightly");
	EXPECT_STATUS(p, 75);
	cr_expect_eq(p->err_len, 0, "acquire -q printed: %s", p->err);
	proc_free(p);
	/* other errors still print their line */
	snprintf(dead, sizeof dead, "redis://127.0.0.1:%d", closed_port());
	p = DLOCK("-q", "-n", dead, "--timeout", "300", "run", "-w", "0", "nightly", "--", "true");
	EXPECT_STATUS(p, 69);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);
	p = DLOCK("-q", "-n", uri, "run", "-w", "soon", "nightly", "--", "true");
	EXPECT_STATUS(p, 64);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);
}

Test(cli_habits, the_cron_line_skips_a_busy_run_with_status_0)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *p;

	/* the cron line of README.md and docs/cli.md, with a command that shows whether it ran */
	p = DLOCK("-q", "-E", "0", "-n", uri, "run", "-w", "0", "nightly", "--", "echo", "ran");
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(p->out, "ran\n");
	proc_free(p);
	hold_elsewhere("nightly");
	p = DLOCK("-q", "-E", "0", "-n", uri, "run", "-w", "0", "nightly", "--", "echo", "ran");
	EXPECT_STATUS(p, 0);
	cr_expect_eq(p->out_len + p->err_len, 0, "busy: nothing at all, got %s%s", p->out, p->err);
	proc_free(p);
	p = DLOCK("-E", "3", "-n", uri, "run", "-w", "0", "nightly", "--", "true");
	EXPECT_STATUS(p, 3);
	proc_free(p);
	expect_64_saying(ARGS("-E", "256", "-n", uri, "status", "nightly"),
			"-E takes a whole number from 0 to 255, not \"256\"");
}

/* ---- durations -------------------------------------------------------------------- */

Test(cli_habits, durations_with_units)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *p;
	int64_t pttl;

	hold_elsewhere("busy");
	p = DLOCK("-n", uri, "run", "-w", "1s", "busy", "--", "true");
	EXPECT_STATUS(p, 75);
	cr_expect(proc_elapsed(p) >= 950 && proc_elapsed(p) < 3000,
			"-w 1s waited %lld ms", (long long)proc_elapsed(p));
	proc_free(p);
	p = DLOCK("-n", uri, "acquire", "-l", "2s", "--owner", "me", "leased");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	pttl = rh_command_int(dl_srv, "PTTL leased");
	cr_expect(pttl > 1500 && pttl <= 2000, "-l 2s: PTTL %lld", (long long)pttl);
	p = DLOCK("-n", uri, "acquire", "-l", "1.5m", "--owner", "me", "leased2");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	pttl = rh_command_int(dl_srv, "PTTL leased2");
	cr_expect(pttl > 89000 && pttl <= 90000, "-l 1.5m: PTTL %lld", (long long)pttl);
	p = DLOCK("-n", uri, "acquire", "-l", "2500", "--owner", "me", "leased3");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	pttl = rh_command_int(dl_srv, "PTTL leased3");
	cr_expect(pttl > 2000 && pttl <= 2500, "-l 2500 (ms): PTTL %lld", (long long)pttl);
	expect_64_saying(ARGS("-n", uri, "run", "-w", "1.5x", "busy", "--", "true"), "30s");
	expect_64_saying(ARGS("-n", uri, "--grace", "1h30", "run", "busy", "--", "true"),
			"--grace");
	expect_64_saying(ARGS("-n", uri, "latch", "wait", "-w", "5 s", "l"), "1.5s");
}

/* ---- help ---------------------------------------------------------------------------- */

static void expect_help(const char *const *args, const char *command, const char *options)
{
	proc *p = dlock_env(NULL, args);
	char words[256], *w, *save = NULL;

	EXPECT_STATUS(p, 0);
	cr_expect_eq(p->err_len, 0, "`%s`: %s", p->desc, p->err);
	cr_expect(strncmp(p->out, "Usage: dlock", 12) == 0 && strstr(p->out, command) != NULL,
			"`%s`: %s", p->desc, p->out);
	snprintf(words, sizeof words, "%s", options);
	for (w = strtok_r(words, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save))
		cr_expect(strstr(p->out, w) != NULL, "`%s` does not mention %s", p->desc, w);
	proc_free(p);
}

Test(cli_habits, every_command_has_its_own_help)
{
	static const char *const pages[][2] = { { "run", "-w -l --grace -s -x -c --fair --fenced" },
		{ "acquire", "-l -w --owner --fair --fenced" }, { "release", "--owner" },
		{ "status", "--json" }, { "unlock", "--force" }, { "latch", "set down count wait -w" },
		{ "hold", "-w -l -s -x stdin SIGTERM 70" }, { "wait", "-w 75" } };
	size_t i;
	proc *p;

	for (i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
		expect_help(ARGS("help", pages[i][0]), pages[i][0], pages[i][1]);
		expect_help(ARGS(pages[i][0], "--help"), pages[i][0], pages[i][1]);
		expect_help(ARGS(pages[i][0], "-h"), pages[i][0], pages[i][1]);
	}
	expect_help(ARGS("--help"), "help COMMAND", "hold wait -q -E 250ms");
	expect_help(ARGS("help"), "help COMMAND", "hold wait");
	p = DLOCK("help", "nosuch");
	EXPECT_STATUS(p, 64);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect_eq(p->out_len, 0);
	proc_free(p);
}

/* ---- hold ------------------------------------------------------------------------------ */

/* `dlock hold ARGS...` with stdin a pipe whose write end is *wr. */
static proc *hold_piped(int *wr, const char *const *args)
{
	int fds[2];
	proc *p;

	cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
	g_stdin_fd = fds[0];
	p = dlock_bg(args);
	g_stdin_fd = -1;
	close(fds[0]);
	*wr = fds[1];
	cr_assert_eq(proc_wait_lines(p, 1, 5000), 0, "`%s` printed no owner: %s", p->desc, p->err);
	return p;
}

static int64_t hexists(const char *key, const char *out)
{
	char owner[256];

	snprintf(owner, sizeof owner, "%.*s", (int)strcspn(out, "\n"), out);
	return rh_command_int(dl_srv, "HEXISTS %s %s", key, owner);
}

Test(cli_habits, hold_prints_the_owner_and_releases_at_eof)
{
	int wr;
	proc *p = hold_piped(&wr, ARGS("-n", rh_server_uri(dl_srv), "hold", "deploy"));
	int64_t pttl = rh_command_int(dl_srv, "PTTL deploy");

	cr_expect_eq(hexists("deploy", p->out), 1, "the key holds the printed owner %s", p->out);
	cr_expect(pttl > 20000, "watchdog lease: PTTL %lld", (long long)pttl);
	cr_expect(write(wr, "ignored\n", 8) == 8);
	dl_sleep_ms(300);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS deploy"), 1, "input is not EOF");
	close(wr);
	cr_assert_eq(proc_wait(p, HARD_TIMEOUT_S), 0);
	EXPECT_STATUS(p, 0);
	cr_expect_eq(p->err_len, 0, "%s", p->err);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS deploy"), 0, "released at EOF");
	proc_free(p);
}

Test(cli_habits, hold_releases_on_sigterm)
{
	int wr;
	proc *p = hold_piped(&wr, ARGS("-n", rh_server_uri(dl_srv), "--fenced", "hold", "-l",
					      "30s", "deploy"));

	cr_assert_eq(proc_wait_lines(p, 2, 5000), 0, "no token line: %s", p->out);
	cr_expect(atoll(strchr(p->out, '\n') + 1) > 0, "line 2 is the token: %s", p->out);
	kill(p->pid, SIGTERM);
	cr_assert_eq(proc_wait(p, HARD_TIMEOUT_S), 0);
	EXPECT_STATUS(p, 0);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS deploy"), 0, "released at SIGTERM");
	close(wr);
	proc_free(p);
}

Test(cli_habits, hold_exits_70_when_force_unlocked)
{
	int wr;
	proc *p = hold_piped(&wr, ARGS("-n", rh_server_uri(dl_srv), "hold", "deploy"));
	proc *u = DLOCK("-n", rh_server_uri(dl_srv), "unlock", "--force", "deploy");

	EXPECT_STATUS(u, 0);
	proc_free(u);
	proc_wait(p, HARD_TIMEOUT_S);
	EXPECT_STATUS(p, 70);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(proc_elapsed(p) < 5000, "heard the force unlock after %lld ms",
			(long long)proc_elapsed(p));
	close(wr);
	proc_free(p);
}

Test(cli_habits, hold_waits_for_a_busy_lock_as_run_does)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *p;

	hold_elsewhere("deploy");
	p = DLOCK("-n", uri, "hold", "-w", "300ms", "deploy");
	EXPECT_STATUS(p, 75);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect_eq(p->out_len, 0);
	proc_free(p);
	p = DLOCK("-q", "-n", uri, "hold", "-w", "0", "deploy");
	EXPECT_STATUS(p, 75);
	cr_expect_eq(p->err_len, 0, "%s", p->err);
	proc_free(p);
}

/* ---- wait ------------------------------------------------------------------------------ */

Test(cli_habits, wait_returns_at_once_when_free)
{
	proc *p = DLOCK("-n", rh_server_uri(dl_srv), "wait", "nightly");

	EXPECT_STATUS(p, 0);
	cr_expect(proc_elapsed(p) < 1000, "took %lld ms", (long long)proc_elapsed(p));
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS nightly"), 0, "wait took nothing");
	proc_free(p);
}

Test(cli_habits, wait_returns_soon_after_the_release)
{
	int wr;
	proc *h = hold_piped(&wr, ARGS("-n", rh_server_uri(dl_srv), "hold", "nightly"));
	proc *w = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "wait", "nightly"));
	int64_t released;

	dl_sleep_ms(700);
	close(wr);
	cr_assert_eq(proc_wait(h, HARD_TIMEOUT_S), 0);
	released = h->t1;
	cr_assert_eq(proc_wait(w, HARD_TIMEOUT_S), 0);
	EXPECT_STATUS(w, 0);
	cr_expect(proc_elapsed(w) >= 600, "wait returned after %lld ms, before the release",
			(long long)proc_elapsed(w));
	cr_expect(w->t1 - released < 500, "wait returned %lld ms after the release",
			(long long)(w->t1 - released));
	proc_free(h);
	proc_free(w);
}

Test(cli_habits, wait_runs_out_with_75)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *p;

	hold_elsewhere("nightly");
	p = DLOCK("-n", uri, "wait", "-w", "500ms", "nightly");
	EXPECT_STATUS(p, 75);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(proc_elapsed(p) >= 450 && proc_elapsed(p) < 2500, "-w 500ms took %lld ms",
			(long long)proc_elapsed(p));
	proc_free(p);
	p = DLOCK("-q", "-E", "0", "-n", uri, "wait", "-w", "0", "nightly");
	EXPECT_STATUS(p, 0);
	cr_expect_eq(p->err_len, 0, "%s", p->err);
	proc_free(p);
	cr_expect_eq(rh_command_int(dl_srv, "HEXISTS nightly other"), 1, "the holder keeps it");
	/* a key that is no lock would look held for ever */
	rh_command_int(dl_srv, "SET counter 5");
	p = DLOCK("-n", uri, "wait", "counter");
	EXPECT_STATUS(p, 65);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);
}

/* ---- refused combinations ------------------------------------------------------------- */

Test(cli_habits, options_that_cannot_work_are_refused)
{
	const char *uri = rh_server_uri(dl_srv);

	expect_64_saying(ARGS("-n", uri, "--timeout", "20s", "--watchdog", "30s", "run", "x", "--",
					 "true"),
			"--timeout 20s is more than half of --watchdog 30s");
	expect_64_saying(ARGS("-n", uri, "--watchdog", "2s", "--timeout", "1500ms", "hold", "x"),
			"half of --watchdog");
	expect_64_saying(ARGS("-n", uri, "--watchdog", "100", "run", "x", "--", "true"),
			"--watchdog takes a duration from 300ms to 24h, not \"100\"");
	expect_64_saying(ARGS("-n", uri, "-n", uri, "status", "x"), "comma-separated");
	expect_64_saying(ARGS("-n", uri, "--restart-guard", "5s", "run", "x", "--", "true"),
			"RedLock");
	expect_64_saying(ARGS("-n", uri, "--sync-timeout", "2s", "run", "x", "--", "true"),
			"--sync-replicas");
	expect_64_saying(ARGS("-n", uri, "wait", "-l", "5s", "x"), "wait does not take -l");
	expect_64_saying(ARGS("-n", uri, "hold", "--grace", "5s", "x"), "hold does not take");
	expect_64_saying(ARGS("-n", uri, "hold", "x", "y"), "unexpected argument");
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS x"), 0, "nothing taken");
}
