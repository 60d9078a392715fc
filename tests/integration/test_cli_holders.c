/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Who holds it: a run registers its host, pid, command and --label, and
 * `status` in another process names the holder by them; a run that finds
 * the lock busy names its holder the same way. A holder without a
 * registration (any other client) shows as its owner, as before.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define TMO "1000"

TestSuite(cli_holders, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

/* Until NAME is held (5 s at most). */
static void await_held(const char *name)
{
	for (int64_t t0 = rh_now_ms(); rh_now_ms() - t0 < 5000; dl_sleep_ms(20))
		if (rh_command_int(dl_srv, "EXISTS %s", name) == 1)
			return;
	cr_assert_fail("\"%s\" never held", name);
}

static void stop(proc *p)
{
	kill(p->pid, SIGTERM);
	proc_wait(p, HARD_TIMEOUT_S);
	proc_free(p);
}

Test(cli_holders, status_names_a_labelled_run_by_its_label_host_pid_and_command)
{
	const char *uri = rh_server_uri(dl_srv);
	char host[256] = "", want[768];
	proc *run, *p;

	gethostname(host, sizeof host);
	run = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "--label", "nightly", "report",
			"--", "sleep", "30"));
	await_held("report");

	p = DLOCK("-n", uri, "--timeout", TMO, "status", "report");
	EXPECT_STATUS(p, 0);
	snprintf(want, sizeof want, " held by nightly [%s pid %d (sleep 30)] for ", host,
			(int)run->pid);
	cr_expect(strstr(p->out, want) != NULL, "wanted \"%s\" in:\n%s", want, p->out);
	proc_free(p);

	p = DLOCK("-n", uri, "--timeout", TMO, "status", "--json", "report");
	EXPECT_STATUS(p, 0);
	snprintf(want, sizeof want,
			"\"holder\":{\"host\":\"%s\",\"pid\":%d,\"label\":\"nightly\","
			"\"command\":\"sleep 30\",\"since_ms\":",
			host, (int)run->pid);
	const char *at = strstr(p->out, want);
	cr_assert_not_null(at, "wanted %s in:\n%s", want, p->out);
	long long since = strtoll(at + strlen(want), NULL, 10);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	long long ago = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000 - since;
	cr_expect(ago >= 0 && ago < 10000, "registered %lld ms ago", ago);
	proc_free(p);
	stop(run);
}

Test(cli_holders, a_busy_run_names_its_holder)
{
	const char *uri = rh_server_uri(dl_srv);
	char host[256] = "", want[768];
	proc *run, *p;

	gethostname(host, sizeof host);
	/* No label: host, pid and command still name it. */
	run = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "backup", "--", "sleep", "30"));
	await_held("backup");
	p = DLOCK("-n", uri, "--timeout", TMO, "run", "-w", "0", "backup", "--", "true");
	EXPECT_STATUS(p, 75);
	EXPECT_ONE_LINE_ERR(p);
	snprintf(want, sizeof want, "; held by %s pid %d (sleep 30) for ", host, (int)run->pid);
	cr_expect(strstr(p->err, want) != NULL, "wanted \"%s\" in: %s", want, p->err);
	proc_free(p);
	stop(run);
}

Test(cli_holders, a_holder_without_registration_shows_as_its_owner)
{
	const char *uri = rh_server_uri(dl_srv);
	proc *p;

	/* A Redisson-style owner: no client of that UUID registered. */
	freeReplyObject(rh_command(dl_srv, "HSET java 6f1c8a40-0000-4000-8000-000000000001:1 1"));
	freeReplyObject(rh_command(dl_srv, "PEXPIRE java 20000"));
	p = DLOCK("-n", uri, "--timeout", TMO, "status", "--json", "java");
	EXPECT_STATUS(p, 0);
	cr_expect(strstr(p->out, "\"owner\":\"6f1c8a40-0000-4000-8000-000000000001:1\",\"count\":1,"
				 "\"ttl_ms\":") != NULL &&
					strstr(p->out, "\"holder\":null}") != NULL,
			"%s", p->out);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "acquire", "-l", "5s", "--owner", "me:1", "java");
	EXPECT_STATUS(p, 75);
	cr_expect(strstr(p->err, "; held by 6f1c8a40-0000-4000-8000-000000000001:1\n") != NULL,
			"%s", p->err);
	proc_free(p);
}
