/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `dlock status --watch NAME` into a pipe: one timestamped line per change
 * (a holder came or went, the waiters, a node down or up), nothing while
 * nothing changes, and exit 0 on SIGTERM or SIGINT.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#define TMO "1000"

TestSuite(cli_status_watch, .init = dl_server_start, .fini = dl_server_stop, .timeout = 60);

/* What the watch wrote so far, read without waiting for it to end. */
static void take_output(proc *w)
{
	char tmp[4096];
	ssize_t r;

	while (w->fd[0] >= 0 && (r = read(w->fd[0], tmp, sizeof tmp)) > 0) {
		size_t k = (size_t)r;

		if (k > OUT_MAX - 1 - w->out_len)
			k = OUT_MAX - 1 - w->out_len;
		memcpy(w->out + w->out_len, tmp, k);
		w->out_len += k;
		w->out[w->out_len] = '\0';
	}
}

/* Until the watch wrote a line ending in `text` (5 s at most); the line. */
static const char *await_line(proc *w, const char *text)
{
	static char line[1024];
	int64_t until = rh_now_ms() + 5000;

	for (;;) {
		char want[512];

		take_output(w);
		snprintf(want, sizeof want, "%s\n", text);
		const char *at = strstr(w->out, want);
		if (at != NULL) {
			const char *start = at;

			while (start > w->out && start[-1] != '\n')
				start--;
			snprintf(line, sizeof line, "%.*s", (int)(at + strlen(text) - start), start);
			return line;
		}
		if (rh_now_ms() > until)
			break;
		struct pollfd pf = { w->fd[0], POLLIN, 0 };
		poll(&pf, 1, 20);
	}
	cr_assert_fail("no line ending in \"%s\" within 5 s; the watch wrote:\n%s", text, w->out);
	return NULL;
}

/* "2026-11-27T03:25:01.123Z 127.0.0.1:PORT " */
static void expect_stamped(const char *line, const char *node)
{
	int y, mo, d, h, mi, s, ms, n = 0;

	cr_expect(sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ %n", &y, &mo, &d, &h, &mi, &s, &ms,
				  &n) == 7 && n == 25,
			"not a UTC timestamp first: %s", line);
	cr_expect(strncmp(line + 25, node, strlen(node)) == 0, "the node second: %s", line);
}

static void cli(const char *const *args)
{
	proc *p = dlock_env(NULL, args);

	ASSERT_STATUS(p, 0);
	proc_free(p);
}

/* The signal ends the watch at once, with exit 0. */
static void stop(proc *w, int sig)
{
	int64_t sent = rh_now_ms();

	kill(w->pid, sig);
	proc_wait(w, HARD_TIMEOUT_S);
	cr_expect_eq(w->status, 0, "the watch ended with %d on signal %d: %s", w->status, sig,
			w->err);
	cr_expect_lt(w->t1 - sent, 2000, "the watch took %lld ms to end on signal %d",
			(long long)(w->t1 - sent), sig);
	proc_free(w);
}

Test(cli_status_watch, a_pipe_gets_one_line_per_change_and_none_while_quiet)
{
	const char *uri = rh_server_uri(dl_srv), *line;
	proc *w = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "status", "--watch", "--interval",
			"100", "wl"));
	char node[64];

	snprintf(node, sizeof node, "%s ", uri + 8);
	cli(ARGS("-n", uri, "acquire", "-l", "20000", "--owner", "w:1", "wl"));
	line = await_line(w, "held by w:1");
	expect_stamped(line, node);

	/* A waiter: the count of those listening goes up and down. */
	proc *waiter = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "-w", "15000", "wl", "--",
			"true"));
	line = await_line(w, "1 waiting or watching (was 0)");
	expect_stamped(line, node);
	cli(ARGS("-n", uri, "release", "--owner", "w:1", "wl"));
	line = await_line(w, "no longer held by w:1");
	expect_stamped(line, node);
	cr_assert_eq(proc_wait(waiter, HARD_TIMEOUT_S), 0);
	EXPECT_STATUS(waiter, 0);
	proc_free(waiter);
	await_line(w, "0 waiting or watching (was 1)");

	/* Quiet: nothing more, for many rounds. */
	dl_sleep_ms(300);
	take_output(w);
	size_t before = w->out_len;
	dl_sleep_ms(600);
	take_output(w);
	cr_expect_eq(w->out_len, before, "lines while nothing changed: %s", w->out + before);
	stop(w, SIGTERM);
}

Test(cli_status_watch, a_node_that_goes_away_and_comes_back_is_reported)
{
	rh_server *s = rh_server_start(NULL);
	char node[64];

	cr_assert_not_null(s);
	snprintf(node, sizeof node, "%s ", rh_server_uri(s) + 8);
	proc *w = dlock_bg(ARGS("-n", rh_server_uri(s), "--timeout", "300", "status", "--watch",
			"--interval", "100", "gone"));
	cli(ARGS("-n", rh_server_uri(s), "acquire", "-l", "60000", "--owner", "g:1", "gone"));
	await_line(w, "held by g:1");
	cr_assert_eq(rh_server_kill(s), 0);
	take_output(w);
	int64_t until = rh_now_ms() + 5000;
	while (strstr(w->out, " unreachable: ") == NULL && rh_now_ms() < until) {
		dl_sleep_ms(20);
		take_output(w);
	}
	cr_assert(strstr(w->out, " unreachable: ") != NULL, "%s", w->out);
	cr_expect(strstr(w->out, "no longer held by g:1") == NULL,
			"an unreachable node's holder is unknown, not gone: %s", w->out);
	cr_assert_eq(rh_server_restart(s), 0);
	const char *line = await_line(w, "reachable");
	expect_stamped(line, node);
	/* The restart lost the lock (no persistence): its holder is gone. */
	await_line(w, "no longer held by g:1");
	stop(w, SIGINT);
	rh_server_free(s);
}

Test(cli_status_watch, a_registered_holder_is_named_by_its_label)
{
	const char *uri = rh_server_uri(dl_srv);
	char host[256] = "", want[512];
	proc *w = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "status", "--watch", "--interval",
			"100", "named"));
	proc *run = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "--label", "nightly", "named",
			"--", "sleep", "30"));

	gethostname(host, sizeof host);
	snprintf(want, sizeof want, " (nightly [%s pid %d (sleep 30)])", host, (int)run->pid);
	const char *line = await_line(w, want);
	cr_expect(strstr(line, " held by ") != NULL, "%s", line);
	/* The holder listens for force unlocks: wait until a look has seen it
	 * (a busy machine can show the hold before the subscription). */
	await_line(w, "1 waiting or watching (was 0)");
	kill(run->pid, SIGTERM);
	proc_wait(run, HARD_TIMEOUT_S);
	proc_free(run);
	await_line(w, "0 waiting or watching (was 1)");
	cr_expect(strstr(w->out, " no longer held by ") != NULL, "%s", w->out);
	stop(w, SIGTERM);
}
