/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock run -c N NAME` on a real redis-server: at most N jobs at once
 * across processes (consul lock -n's promise), on Redisson's
 * RPermitExpirableSemaphore NAME. A waiting run is woken by a release, the
 * permit is given back when the job ends, another N is refused, and the
 * job never outlives its permit: a permit found lost or one that cannot
 * be renewed stops it (exit 70), an -l lease ends it (124).
 *
 * Keys: the count STRING NAME, the taken permits ZSET {NAME}:timeout.
 */
#include <criterion/criterion.h>

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

TestSuite(cli_permits, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

static int64_t count_of(const char *name)
{
	redisReply *r = rh_command(dl_srv, "GET %s", name);
	int64_t v = -1;

	cr_assert_not_null(r);
	if (r->type == REDIS_REPLY_STRING)
		v = strtoll(r->str, NULL, 10);
	freeReplyObject(r);
	return v;
}

static int64_t taken(const char *name)
{
	return rh_command_int(dl_srv, "ZCARD {%s}:timeout", name);
}

/* The lease end (epoch ms) of the one permit of NAME, or -1. */
static int64_t lease_end(const char *name)
{
	redisReply *r = rh_command(dl_srv, "ZRANGE {%s}:timeout 0 0 WITHSCORES", name);
	int64_t v = -1;

	cr_assert_not_null(r);
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2)
		v = strtoll(r->element[1]->str, NULL, 10);
	freeReplyObject(r);
	return v;
}

/* Wait (bounded) until a renewal reaches the server: the lease end moves. */
static int64_t await_renewal(const char *name)
{
	int64_t deadline = rh_now_ms() + 5000, prev = lease_end(name);

	while (rh_now_ms() < deadline) {
		int64_t now = lease_end(name);

		if (now > prev && prev > 0)
			return rh_now_ms();
		prev = now;
		dl_sleep_ms(2);
	}
	cr_assert_fail("no renewal of %s's permit seen within 5 s", name);
	return 0;
}

/* The most jobs the log shows running at once ("b" begins, "e" ends, in
 * the order they were appended); *jobs the number that began. */
static int max_overlap(const char *log, int *jobs)
{
	char line[64];
	int running = 0, most = 0;
	FILE *f = fopen(log, "r");

	*jobs = 0;
	cr_assert_not_null(f, "no log %s", log);
	while (fgets(line, sizeof line, f) != NULL) {
		if (line[0] == 'b') {
			(*jobs)++;
			if (++running > most)
				most = running;
		} else if (line[0] == 'e') {
			running--;
		}
	}
	fclose(f);
	return most;
}

Test(cli_permits, three_runs_of_two_permits_run_two_at_once)
{
	const char *uri = rh_server_uri(dl_srv);
	char dir[64], log[128], script[512];
	proc *p[3];
	int64_t t0 = rh_now_ms(), all_done;
	int jobs = 0, i;

	make_tmpdir(dir, sizeof dir);
	snprintf(log, sizeof log, "%s/log", dir);
	snprintf(script, sizeof script, "echo b >> %s; sleep 1; echo e >> %s", log, log);
	for (i = 0; i < 3; i++)
		p[i] = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "-c", "2", "pool", "--",
				"sh", "-c", script));
	for (i = 0; i < 3; i++) {
		proc_wait(p[i], HARD_TIMEOUT_S);
		EXPECT_STATUS(p[i], 0);
	}
	all_done = rh_now_ms() - t0;
	cr_expect_eq(max_overlap(log, &jobs), 2, "the log shows %d jobs at once, not 2",
			max_overlap(log, &jobs));
	cr_expect_eq(jobs, 3);
	/* The third was woken by a release: a poll would come 5 s later, the
	 * permits' lease (the watchdog's 30 s) later still. */
	cr_expect_lt(all_done, 5000, "three 1 s jobs, two at once, took %" PRId64 " ms", all_done);
	cr_expect_eq(taken("pool"), 0, "a permit is still taken after the jobs ended");
	cr_expect_eq(count_of("pool"), 2, "the permits were not all given back");
	for (i = 0; i < 3; i++)
		proc_free(p[i]);
	remove_tmpdir(dir, ARGS("log"));
}

Test(cli_permits, the_job_sees_its_permit_and_a_full_semaphore_is_busy)
{
	const char *uri = rh_server_uri(dl_srv);
	pid_job j;
	proc *holder, *p;
	char id[64] = "", path[160], script[512];
	FILE *f;

	make_tmpdir(j.dir, sizeof j.dir);
	snprintf(j.pidfile, sizeof j.pidfile, "%s/pid", j.dir);
	snprintf(path, sizeof path, "%s/owner", j.dir);
	snprintf(script, sizeof script,
			"echo \"$DLOCK_NAME $DLOCK_OWNER\" > %s; echo $$ > %s; sleep 2", path,
			j.pidfile);
	holder = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "-c", "1", "solo", "--", "sh",
			"-c", script));
	cr_assert_gt(wait_for_pidfile(j.pidfile, 5000), 0, "the first run did not start");
	f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(id, sizeof id, f));
	fclose(f);
	/* DLOCK_OWNER is the permit's id, as the ZSET holds it (raw bytes). */
	redisReply *r = rh_command(dl_srv, "ZRANGE {solo}:timeout 0 -1");
	cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
	char hex[33];
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned char)r->element[0]->str[i]);
	freeReplyObject(r);
	char want[64];
	snprintf(want, sizeof want, "solo %s\n", hex);
	cr_expect_str_eq(id, want, "the job's DLOCK_NAME DLOCK_OWNER");

	/* The one permit is taken: -w 0 is busy (75), -w 300 too, after its wait. */
	p = DLOCK("-n", uri, "--timeout", TMO, "run", "-c", "1", "-w", "0", "solo", "--", "true");
	EXPECT_STATUS(p, 75);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "run", "-c", "1", "-w", "300", "solo", "--", "true");
	EXPECT_STATUS(p, 75);
	cr_expect_geq(proc_elapsed(p), 300);
	proc_free(p);

	/* A waiting run stopped by Ctrl-C takes nothing. */
	p = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "-c", "1", "solo", "--", "true"));
	dl_sleep_ms(300);
	kill(p->pid, SIGINT);
	proc_wait(p, HARD_TIMEOUT_S);
	EXPECT_STATUS(p, 130);
	proc_free(p);

	proc_wait(holder, HARD_TIMEOUT_S);
	EXPECT_STATUS(holder, 0);
	proc_free(holder);
	cr_expect_eq(taken("solo"), 0);
	cr_expect_eq(count_of("solo"), 1);
	remove_tmpdir(j.dir, ARGS("pid", "owner"));
}

Test(cli_permits, another_count_is_refused_naming_the_current_one)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *p = DLOCK("-n", uri, "--timeout", TMO, "run", "-c", "2", "sized", "--", "true");

	EXPECT_STATUS(p, 0);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "run", "-c", "3", "sized", "--", "true");
	EXPECT_STATUS(p, 64);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, "has 2 permits, not 3") != NULL && strstr(p->err, "-c 2") != NULL,
			"the refusal should name the count and what to do: %s", p->err);
	proc_free(p);
	cr_expect_eq(count_of("sized"), 2, "a refused run changed the count");
	cr_expect_eq(taken("sized"), 0);
	/* The same count is fine. */
	p = DLOCK("-n", uri, "--timeout", TMO, "run", "-c", "2", "sized", "--", "true");
	EXPECT_STATUS(p, 0);
	proc_free(p);
}

Test(cli_permits, c_with_several_nodes_rw_halves_or_fenced_is_a_usage_error)
{
	const char *uri = rh_server_uri(dl_srv);
	char two[256];
	const char *const *bad[] = {
		ARGS("-n", two, "run", "-c", "2", "u", "--", "true"),
		ARGS("-n", uri, "run", "-c", "2", "-s", "u", "--", "true"),
		ARGS("-n", uri, "run", "-x", "-c", "2", "u", "--", "true"),
		ARGS("-n", uri, "--fenced", "run", "-c", "2", "u", "--", "true"),
		ARGS("-n", uri, "-m", "redlock", "run", "-c", "2", "u", "--", "true"),
		ARGS("-n", uri, "run", "-c", "0", "u", "--", "true"),
		ARGS("-n", uri, "run", "u", "-c", "2", "--", "true"),
		ARGS("-n", uri, "status", "-c", "2", "u"),
		ARGS("-n", uri, "acquire", "-c", "2", "-l", "1000", "--owner", "o:1", "u"),
	};

	snprintf(two, sizeof two, "%s,redis://127.0.0.1:%d", uri, closed_port());
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		proc *p = dlock_env(NULL, bad[i]);

		EXPECT_STATUS(p, 64);
		EXPECT_ONE_LINE_ERR(p);
		proc_free(p);
	}
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS u {u}:timeout"), 0, "a refused run wrote");
}

/* A permit removed while its job runs: found at the next renewal (every
 * second with --watchdog 3000), the job stopped, exit 70. */
static void lost_while_running(const char *name, const char *removal)
{
	pid_job j;
	proc *run;
	int64_t removed;

	pid_job_init(&j, "", "sleep 30");
	run = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "--watchdog", "3000",
			"run", "-c", "1", name, "--", "sh", "-c", j.script));
	j.child = wait_for_pidfile(j.pidfile, 5000);
	cr_assert_gt(j.child, 0, "the command did not start");
	removed = rh_now_ms();
	freeReplyObject(rh_command(dl_srv, removal, name, name));
	proc_wait(run, HARD_TIMEOUT_S);
	EXPECT_STATUS(run, 70);
	cr_expect(strstr(run->err, "was lost") != NULL, "%s", run->err);
	cr_expect_lt(run->t1 - removed, 2500,
			"the job ran on %" PRId64 " ms after its permit was removed",
			run->t1 - removed);
	cr_expect(gone_within((pid_t)j.child, 100), "the command outlived the permit");
	proc_free(run);
	remove_tmpdir(j.dir, ARGS("pid"));
}

Test(cli_permits, a_permit_removed_from_the_zset_stops_the_job)
{
	lost_while_running("zrem", "ZREMRANGEBYRANK {%s}:timeout 0 -1");
}

Test(cli_permits, a_semaphore_deleted_stops_the_job)
{
	lost_while_running("deleted", "DEL %s {%s}:timeout");
}

/* The server paused right after a renewal: the job (which ignores SIGTERM)
 * is gone before the permit's lease can end, and dlock exits 70 soon after. */
Test(cli_permits, a_paused_server_stops_the_job_before_the_lease_can_end)
{
	pid_job j;
	int64_t renewed, gone;
	proc *run;

	pid_job_init(&j, "trap '' TERM; ", "while :; do sleep 0.05; done");
	run = dlock_bg(ARGS("-n", rh_server_uri(dl_srv), "--timeout", TMO, "--watchdog", "3000",
			"run", "-c", "1", "paused", "--", "sh", "-c", j.script));
	j.child = wait_for_pidfile(j.pidfile, 5000);
	cr_assert_gt(j.child, 0, "the command did not start");
	renewed = await_renewal("paused");
	cr_assert_eq(rh_server_pause(dl_srv), 0);
	while (!gone_within((pid_t)j.child, 10) && rh_now_ms() - renewed < 6000)
		;
	gone = rh_now_ms();
	proc_wait(run, HARD_TIMEOUT_S);
	cr_assert_eq(rh_server_resume(dl_srv), 0);
	cr_expect_lt(gone - renewed, 3000,
			"the command ran %" PRId64 " ms after the last renewal (lease 3000)",
			gone - renewed);
	cr_expect_gt(gone - renewed, 1500, "stopped %" PRId64 " ms after the renewal: too soon",
			gone - renewed);
	cr_expect_lt(run->t1 - renewed, 3000 + 2000,
			"dlock exited %" PRId64 " ms after the last renewal", run->t1 - renewed);
	EXPECT_STATUS(run, 70);
	cr_expect(strstr(run->err, "could not be renewed") != NULL, "%s", run->err);
	proc_free(run);
	remove_tmpdir(j.dir, ARGS("pid"));
}

Test(cli_permits, a_leased_permit_ends_its_job_with_124)
{
	proc *run = DLOCK("-n", rh_server_uri(dl_srv), "--timeout", TMO, "run", "-c", "1", "-l",
			"1200", "leased", "--", "sleep", "30");

	EXPECT_STATUS(run, 124);
	cr_expect_lt(proc_elapsed(run), 1200, "the job ran past its 1200 ms lease");
	cr_expect(strstr(run->err, "end of its lease") != NULL, "%s", run->err);
	proc_free(run);
	cr_expect_eq(taken("leased"), 0, "the permit was not given back");
	cr_expect_eq(count_of("leased"), 1);
}

Test(cli_permits, the_commands_status_passes_through_and_the_permit_comes_back)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *p = DLOCK("-n", uri, "--timeout", TMO, "run", "-c", "1", "status", "--", "sh", "-c",
			"exit 3");

	EXPECT_STATUS(p, 3);
	proc_free(p);
	cr_expect_eq(taken("status"), 0, "a failed command's permit was kept");
	cr_expect_eq(count_of("status"), 1);
	p = DLOCK("-n", uri, "--timeout", TMO, "run", "-c", "1", "status", "--", "sh", "-c",
			"kill -KILL $$");
	EXPECT_STATUS(p, 128 + 9);
	proc_free(p);
	cr_expect_eq(taken("status"), 0);
	/* --conflict-exit-code applies to a busy semaphore too. */
	p = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "-c", "1", "status", "--", "sleep",
			"1"));
	for (int64_t t0 = rh_now_ms(); taken("status") == 0 && rh_now_ms() - t0 < 5000;)
		dl_sleep_ms(10);
	proc *busy = DLOCK("-n", uri, "--timeout", TMO, "--conflict-exit-code", "9", "run", "-c",
			"1", "-w", "0", "status", "--", "true");
	EXPECT_STATUS(busy, 9);
	proc_free(busy);
	proc_wait(p, HARD_TIMEOUT_S);
	EXPECT_STATUS(p, 0);
	proc_free(p);
}
