/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A fixed lease (-l) under run and hold is a promise: the command is gone
 * (hold has exited 124) before the lock's keys can expire. Leases too
 * short to keep it on a busy machine (below 1 s: the kill margin, a tenth
 * of the lease, would be under 100 ms) are refused with exit 64 and one
 * line naming the smallest; at the smallest accepted, a command that
 * ignores SIGTERM is killed before the next holder gets in, and dlock exits
 * 124.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define TMO "300"

TestSuite(cli_short_lease, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

/* Exit 64, one line naming the smallest lease and the way out, nothing taken. */
static void expect_refused(const char *const *args, const char *name)
{
	proc *p = dlock_env(NULL, args);

	EXPECT_STATUS(p, 64);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, "shorter than the smallest lease") != NULL &&
					strstr(p->err, "(1s)") != NULL &&
					strstr(p->err, "use -l 1s or more") != NULL,
			"`%s`: %s", p->desc, p->err);
	cr_expect_eq(p->out_len, 0, "`%s` printed %s", p->desc, p->out);
	cr_expect_eq(rh_command_int(dl_srv, "EXISTS %s", name), 0, "`%s` took %s", p->desc, name);
	proc_free(p);
}

Test(cli_short_lease, leases_under_1s_are_refused_by_run_and_hold)
{
	const char *uri = rh_server_uri(dl_srv);
	static const char *const leases[] = { "1", "50", "100", "999ms", "0.5s" };
	size_t i;

	for (i = 0; i < sizeof(leases) / sizeof(leases[0]); i++) {
		const char *l = leases[i];

		expect_refused(ARGS("-n", uri, "run", "-l", l, "sl", "--", "true"), "sl");
		expect_refused(ARGS("-n", uri, "run", "-x", "-l", l, "sl", "--", "true"), "sl");
		expect_refused(ARGS("-n", uri, "run", "-s", "-l", l, "sl", "--", "true"), "sl");
		expect_refused(ARGS("-n", uri, "run", "-c", "2", "-l", l, "sl", "--", "true"), "sl");
		expect_refused(ARGS("-n", uri, "--fenced", "run", "-l", l, "sl", "--", "true"), "sl");
		expect_refused(ARGS("-n", uri, "hold", "-l", l, "sl"), "sl");
		expect_refused(ARGS("-n", uri, "hold", "-x", "-l", l, "sl"), "sl");
		expect_refused(ARGS("-n", uri, "hold", "-s", "-l", l, "sl"), "sl");
	}
	/* acquire makes no stop promise: a short lease is the script's to keep. */
	proc *p = DLOCK("-n", uri, "acquire", "-l", "50", "--owner", "me:1", "sl");
	EXPECT_STATUS(p, 0);
	proc_free(p);
}

/* The last line of path as a number (0 when none): a /proc/uptime stamp,
 * a monotonic clock in hundredths of a second a shell can read. */
static double last_stamp(const char *path)
{
	char line[128];
	double v = 0;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof line, f) != NULL)
		if (line[0] >= '0' && line[0] <= '9')
			v = atof(line);
	fclose(f);
	return v;
}

/*
 * run <kind> -l 1s with a command that ignores SIGTERM and writes a
 * heartbeat (/proc/uptime) every 10 ms; a second run waits for the lock.
 * When the second one's command starts, the first one's is gone (kill -0
 * fails) and its last heartbeat is older; the first exits 124.
 */
static void smallest_lease_is_kept(const char *kind, const char *name)
{
	const char *uri = rh_server_uri(dl_srv);
	char dir[64], pidfile[128], beats[128], started[128], overlap[128];
	char first[512], second[512];
	proc *a, *b;
	long pid;

	make_tmpdir(dir, sizeof dir);
	snprintf(pidfile, sizeof pidfile, "%s/pid", dir);
	snprintf(beats, sizeof beats, "%s/beats", dir);
	snprintf(started, sizeof started, "%s/started", dir);
	snprintf(overlap, sizeof overlap, "%s/overlap", dir);
	snprintf(first, sizeof first,
			"echo $$ > %s; trap '' TERM; while :; do cat /proc/uptime >> %s; sleep 0.01; done",
			pidfile, beats);
	a = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", kind, "-l", "1s", name, "--", "sh",
			"-c", first));
	pid = wait_for_pidfile(pidfile, 5000);
	cr_assert_gt(pid, 0, "the first command did not start: %s", a->err);
	snprintf(second, sizeof second,
			"cat /proc/uptime > %s; if kill -0 %ld 2>/dev/null; then echo alive > %s; fi",
			started, pid, overlap);
	b = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", kind, "-w", "5s", name, "--", "sh",
			"-c", second));
	proc_wait(a, HARD_TIMEOUT_S);
	proc_wait(b, HARD_TIMEOUT_S);
	EXPECT_STATUS(a, 124);
	EXPECT_ONE_LINE_ERR(a);
	cr_expect(strstr(a->err, "end of its lease") != NULL, "%s", a->err);
	EXPECT_STATUS(b, 0);
	cr_expect_not(file_exists(overlap), "the first command still ran when the second began");
	cr_expect_leq(last_stamp(beats), last_stamp(started),
			"the first command's last heartbeat (%.2f) is after the second's start (%.2f)",
			last_stamp(beats), last_stamp(started));
	cr_expect_gt(last_stamp(beats), 0, "no heartbeat");
	proc_free(a);
	proc_free(b);
	remove_tmpdir(dir, ARGS("pid", "beats", "started", "overlap"));
}

Test(cli_short_lease, run_at_1s_is_gone_before_the_next_holder)
{
	smallest_lease_is_kept("-x", "sl-x");
}

Test(cli_short_lease, run_c_at_1s_is_gone_before_the_next_holder)
{
	smallest_lease_is_kept("-c1", "sl-c");
}

/* hold -l 1s prints the owner, then exits 124 at the lease's end. */
Test(cli_short_lease, hold_at_1s_prints_the_owner_and_ends_with_124)
{
	proc *p = DLOCK("-n", rh_server_uri(dl_srv), "--timeout", TMO, "hold", "-l", "1s", "sl-h");

	EXPECT_STATUS(p, 124);
	cr_expect_eq(count_char(p->out, '\n'), 1, "the owner: %s", p->out);
	cr_expect(strstr(p->err, "end of its lease") != NULL, "%s", p->err);
	cr_expect_lt(proc_elapsed(p), 5000, "hold -l 1s ended after %" PRId64 " ms",
			proc_elapsed(p));
	proc_free(p);
}
