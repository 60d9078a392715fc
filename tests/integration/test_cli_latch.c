/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock latch set|down|count|wait` on a real redis-server: what a shell
 * script sees (stdout, exit status, one line on stderr) and what Redis
 * holds (Redisson's RCountDownLatch key). A `latch wait` in the background
 * is woken by the last `latch down` in milliseconds, not by polling.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <hiredis/hiredis.h>

#include <dlock.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#ifndef DLOCK_CLI_PATH
#error "DLOCK_CLI_PATH must name the dlock binary (tests/CMakeLists.txt defines it)"
#endif

#define TMO "1000" /* --timeout for every call */

TestSuite(cli_latch, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

/* The key's count, or -1 when there is none. */
static long long raw_count(const char *name)
{
	redisReply *r = rh_command(dl_srv, "GET %s", name);
	long long v = -1;

	cr_assert_not_null(r);
	if (r->type == REDIS_REPLY_STRING)
		v = strtoll(r->str, NULL, 10);
	freeReplyObject(r);
	return v;
}

/* The command's stdout as a number. */
static long long out_num(const proc *p)
{
	char *end;
	long long v = strtoll(p->out, &end, 10);

	cr_assert(end != p->out && (*end == '\n' || *end == '\0'), "`%s` printed \"%s\"", p->desc,
			p->out);
	return v;
}

Test(cli_latch, set_down_and_count_as_a_script_sees_them)
{
	const char *uri = rh_server_uri(dl_srv);

	proc *p = DLOCK("-n", uri, "--timeout", TMO, "latch", "set", "workers", "2");
	ASSERT_STATUS(p, 0);
	cr_expect_eq(raw_count("workers"), 2);
	proc_free(p);

	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "set", "workers", "5");
	EXPECT_STATUS(p, 1); /* exists: unchanged */
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, "workers") != NULL, "%s", p->err);
	cr_expect_eq(raw_count("workers"), 2);
	proc_free(p);

	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "count", "workers");
	ASSERT_STATUS(p, 0);
	cr_expect_eq(out_num(p), 2);
	proc_free(p);

	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "down", "workers");
	ASSERT_STATUS(p, 0);
	cr_expect_eq(out_num(p), 1, "down printed the count left: %s", p->out);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "down", "workers");
	ASSERT_STATUS(p, 0);
	cr_expect_eq(out_num(p), 0);
	cr_expect_eq(raw_count("workers"), -1, "the latch at zero is deleted");
	proc_free(p);

	/* At zero the key is gone but the latch is known as opened: a wait or
	 * a look that comes after the opening passes; a typo'd name does not
	 * (unless told that no latch is zero); it can be set again. */
	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "wait", "-w", "0", "workers");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "count", "workers");
	EXPECT_STATUS(p, 0);
	cr_expect_eq(out_num(p), 0, "an opened latch counts 0: %s", p->out);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "wait", "-w", "0", "wrokers");
	EXPECT_STATUS(p, 1);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "wait", "-w", "0", "--missing-ok",
			"wrokers");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "set", "workers", "1");
	EXPECT_STATUS(p, 0);
	proc_free(p);
}

Test(cli_latch, a_waiting_script_is_woken_by_the_last_count_down)
{
	const char *uri = rh_server_uri(dl_srv);

	proc *p = DLOCK("-n", uri, "--timeout", TMO, "latch", "set", "drained", "2");
	ASSERT_STATUS(p, 0);
	proc_free(p);

	proc *w = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "latch", "wait", "drained"));
	dl_sleep_ms(500);
	cr_expect(waitpid(w->pid, NULL, WNOHANG) == 0, "latch wait ended with the count at 2");
	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "down", "drained");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	dl_sleep_ms(300);
	cr_expect(waitpid(w->pid, NULL, WNOHANG) == 0, "latch wait ended with the count at 1");

	int64_t at = rh_now_ms();
	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "down", "drained");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	proc_wait(w, HARD_TIMEOUT_S);
	EXPECT_STATUS(w, 0);
	cr_expect_leq(w->t1 - at, 1000, "latch wait returned %" PRId64 " ms after the zero",
			w->t1 - at);
	proc_free(w);
}

Test(cli_latch, a_wait_that_runs_out_exits_75)
{
	const char *uri = rh_server_uri(dl_srv);

	proc *p = DLOCK("-n", uri, "--timeout", TMO, "latch", "set", "stuck", "3");
	ASSERT_STATUS(p, 0);
	proc_free(p);
	/* -w before or after the verb. */
	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "wait", "-w", "300", "stuck");
	EXPECT_STATUS(p, 75);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(proc_elapsed(p) >= 300, "exited after %" PRId64 " ms", proc_elapsed(p));
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "-w", "200", "wait", "stuck");
	EXPECT_STATUS(p, 75);
	proc_free(p);
	cr_expect_eq(raw_count("stuck"), 3);
}

Test(cli_latch, usage_and_data_errors)
{
	const char *uri = rh_server_uri(dl_srv);
	static const char *const bad[][6] = {
		{ "latch", "nope", "x", NULL },          /* unknown verb */
		{ "latch", "set", "x", NULL },           /* no count */
		{ "latch", "set", "x", "0", NULL },      /* count < 1 */
		{ "latch", "set", "x", "two", NULL },    /* not a number */
		{ "latch", "down", "-w", "5", "x", NULL }, /* -w is for wait */
		{ "latch", "down", "x", "extra", NULL }, /* an argument too many */
		{ "latch", "wait", NULL },               /* no name */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *args[10] = { "-n", uri };
		size_t n = 2;
		for (size_t k = 0; bad[i][k] != NULL; k++)
			args[n++] = bad[i][k];
		args[n] = NULL;
		proc *p = dlock_env(NULL, args);
		EXPECT_STATUS(p, 64);
		EXPECT_ONE_LINE_ERR(p);
		proc_free(p);
	}
	cr_expect_eq(raw_count("x"), -1, "a refused command wrote the latch");

	/* Two nodes: a latch is one key on one server. */
	char two[256];
	snprintf(two, sizeof two, "%s,redis://127.0.0.1:%d", uri, closed_port());
	proc *p = DLOCK("-n", two, "latch", "count", "x");
	EXPECT_STATUS(p, 64);
	proc_free(p);

	/* A key that is no count: 65, as for a lock. */
	cr_assert_eq(rh_command_int(dl_srv, "HSET notalatch f 1"), 1);
	p = DLOCK("-n", uri, "--timeout", TMO, "latch", "down", "notalatch");
	EXPECT_STATUS(p, 65);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);
}

Test(cli_latch, a_latch_without_its_verb_says_which_verbs_there_are)
{
	proc *p = DLOCK("-n", rh_server_uri(dl_srv), "latch");

	EXPECT_STATUS(p, 64);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, "set, down, count or wait") != NULL, "%s", p->err);
	proc_free(p);
}
