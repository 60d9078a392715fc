/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock run -s NAME` / `run -x NAME` (flock's letters) on a real
 * redis-server: shared runs together, an exclusive one alone, an exclusive
 * waiter woken when the last shared run ends, and the options refused where
 * they make no sense. The data is Redisson's RReadWriteLock's.
 */
#include <criterion/criterion.h>

#include <string.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define TMO "1000"

TestSuite(cli_rw, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

/* The hash field `mode` of NAME: 'r', 'w', or 0 when there is none. */
static char mode_of(const char *name)
{
	redisReply *r = rh_command(dl_srv, "HGET %s mode", name);
	char m = 0;

	cr_assert_not_null(r);
	if (r->type == REDIS_REPLY_STRING)
		m = r->str[0];
	freeReplyObject(r);
	return m;
}

Test(cli_rw, shared_runs_share_and_an_exclusive_one_waits_for_them)
{
	const char *uri = rh_server_uri(dl_srv);
	pid_job j;
	proc *reader, *p;
	int64_t t0;

	/* A shared run holds while its command sleeps... */
	pid_job_init(&j, "", "sleep 1.5");
	reader = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "-s", "report", "--", "sh", "-c",
			j.script));
	cr_assert(wait_for_pidfile(j.pidfile, 5000) > 0, "the shared run did not start");
	cr_expect_eq(mode_of("report"), 'r');
	/* ...a second shared run gets in at once... */
	p = DLOCK("-n", uri, "--timeout", TMO, "run", "-s", "-w", "0", "report", "--", "true");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	/* ...an exclusive one does not (busy: 75)... */
	p = DLOCK("-n", uri, "--timeout", TMO, "run", "-x", "-w", "0", "report", "--", "true");
	EXPECT_STATUS(p, 75);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);
	/* ...and one that waits runs once the shared run has ended, woken by
	 * its release (not at a TTL: the watchdog's is 30 s). */
	t0 = rh_now_ms();
	p = DLOCK("-n", uri, "--timeout", TMO, "run", "-x", "report", "--", "true");
	EXPECT_STATUS(p, 0);
	cr_expect(rh_now_ms() - t0 < 10000, "the exclusive run waited %lld ms",
			(long long)(rh_now_ms() - t0));
	proc_free(p);
	cr_assert_eq(proc_wait(reader, HARD_TIMEOUT_S), 0);
	EXPECT_STATUS(reader, 0);
	proc_free(reader);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS report"), 0, "nothing left held");
	remove_tmpdir(j.dir, ARGS("pid"));
}

Test(cli_rw, an_exclusive_run_keeps_shared_ones_out)
{
	const char *uri = rh_server_uri(dl_srv);
	pid_job j;
	proc *writer, *p;

	pid_job_init(&j, "", "sleep 1");
	writer = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "-x", "migrate", "--", "sh", "-c",
			j.script));
	cr_assert(wait_for_pidfile(j.pidfile, 5000) > 0, "the exclusive run did not start");
	cr_expect_eq(mode_of("migrate"), 'w');
	p = DLOCK("-n", uri, "--timeout", TMO, "run", "-s", "-w", "0", "migrate", "--", "true");
	EXPECT_STATUS(p, 75);
	proc_free(p);
	/* A plain run (Redisson's RLock) on the same name is another layout
	 * of the same key: each sees the other's hold as someone else's. */
	p = DLOCK("-n", uri, "--timeout", TMO, "run", "-w", "0", "migrate", "--", "true");
	EXPECT_STATUS(p, 75);
	proc_free(p);
	cr_assert_eq(proc_wait(writer, HARD_TIMEOUT_S), 0);
	EXPECT_STATUS(writer, 0);
	proc_free(writer);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS migrate"), 0);
	remove_tmpdir(j.dir, ARGS("pid"));
}

Test(cli_rw, shared_and_exclusive_together_or_with_fenced_are_usage_errors)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *p = DLOCK("-n", uri, "run", "-s", "-x", "both", "--", "true");

	EXPECT_STATUS(p, 64);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);
	p = DLOCK("-n", uri, "--fenced", "run", "-s", "both", "--", "true");
	EXPECT_STATUS(p, 64);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);
	p = DLOCK("-n", uri, "status", "-x", "both");
	EXPECT_STATUS(p, 64);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS both"), 0);
}

Test(cli_rw, acquire_and_release_a_half_from_a_shell)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *p = DLOCK("-n", uri, "acquire", "-s", "-l", "10000", "--owner", "job:1", "cache");

	EXPECT_STATUS(p, 0);
	proc_free(p);
	p = DLOCK("-n", uri, "acquire", "-s", "-l", "10000", "--owner", "job:2", "cache");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	cr_expect_eq(rh_command_int(dl_srv, "HLEN cache"), 3, "mode and two readers");
	p = DLOCK("-n", uri, "acquire", "-x", "-l", "10000", "--owner", "job:3", "cache");
	EXPECT_STATUS(p, 75);
	proc_free(p);
	p = DLOCK("-n", uri, "release", "-s", "--owner", "job:1", "cache");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	p = DLOCK("-n", uri, "release", "-s", "--owner", "job:2", "cache");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS cache"), 0);
	p = DLOCK("-n", uri, "acquire", "-x", "-l", "10000", "--owner", "job:3", "cache");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	cr_expect_eq(rh_command_int(dl_srv, "HEXISTS cache job:3:write"), 1,
			"the writer's field is Redisson's <owner>:write");
	p = DLOCK("-n", uri, "release", "-x", "--owner", "job:3", "cache");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS cache"), 0);
}
