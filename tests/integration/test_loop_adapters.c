/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The event-loop adapters (dlock/uv.h, dlock/libevent.h) at scale, through
 * their examples: examples/uv_locks and examples/event_locks each hold
 * 10,000 watchdog locks from one thread, on 1 and on 5 real servers, for
 * longer than the watchdog timeout. The example checks its own holds and
 * its thread count and exits 0 only when all is well; the test checks the
 * servers: once the watchdog timeout has passed since the last acquisition
 * every key is still there (only renewals can have kept them), and after
 * the example no lock key is left anywhere.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_harness.h"
#include "support.h"

#define LOCKS 10000
#define LOCKS_ARG "10000"
/* Renewed every 500 ms; a key nobody renews is gone 1.5 s after its acquire. */
#define WATCHDOG_MS 1500
#define WATCHDOG_ARG "1500"
/* Held this long after the last acquisition: the check comes in the middle. */
#define HOLD_ARG "3"
#define CHECK_AFTER_MS (WATCHDOG_MS + 500)

TestSuite(loop_adapters, .timeout = 90);

#if defined(DLOCK_UV_LOCKS) || defined(DLOCK_EVENT_LOCKS) || defined(DLOCK_UV_TEARDOWN)

typedef struct example {
	pid_t pid;
	int out;       /* its stdout and stderr */
	char text[8192];
	size_t len;
} example;

static void start_example(example *e, const char *path, rh_server **s, int n)
{
	const char *argv[16] = { path, "-n", LOCKS_ARG, "-t", HOLD_ARG, "-w", WATCHDOG_ARG };
	int argc = 7, fds[2];

	for (int i = 0; i < n; i++)
		argv[argc++] = rh_server_uri(s[i]);
	argv[argc] = NULL;
	cr_assert_eq(pipe(fds), 0);
	e->pid = fork();
	cr_assert_geq(e->pid, 0);
	if (e->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	e->out = fds[0];
	e->len = 0;
	e->text[0] = '\0';
}

/* Read its output until `want` appears or it ends (EOF) or `until` passes:
 * 1 when `want` is there. */
static int read_until(example *e, const char *want, int64_t until)
{
	while (want == NULL || strstr(e->text, want) == NULL) {
		struct pollfd p = { .fd = e->out, .events = POLLIN };
		int64_t left = until - rh_now_ms();
		ssize_t got;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return 0;
		got = read(e->out, e->text + e->len, sizeof(e->text) - 1 - e->len);
		if (got <= 0)
			return want == NULL;
		e->len += (size_t)got;
		e->text[e->len] = '\0';
	}
	return 1;
}

/* The example's lock keys (`name:<i>`) on the servers. */
static int64_t keys_on(rh_server **s, int n, const char *name)
{
	int64_t sum = 0;

	for (int i = 0; i < n; i++) {
		redisReply *r = rh_command(s[i], "KEYS %s:*", name);

		cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
		sum += (int64_t)r->elements;
		freeReplyObject(r);
	}
	return sum;
}

static void run(const char *path, const char *name, int n)
{
	rh_server *s[5];
	example e;
	int64_t acquired_at, ttl, keys;
	int status = 0;
	char want[64];

	cr_assert_eq(rh_servers_start(s, n, NULL), 0);
	start_example(&e, path, s, n);

	snprintf(want, sizeof(want), "acquired %d locks in", LOCKS);
	cr_assert(read_until(&e, want, rh_now_ms() + 30000), "%s did not acquire its locks:\n%s",
			name, e.text);
	acquired_at = rh_now_ms();

	/* Past the watchdog timeout since the last acquire: only renewals kept them. */
	dl_sleep_ms(CHECK_AFTER_MS);
	keys = keys_on(s, n, name);
	cr_assert_eq(keys, LOCKS, "%s: %lld lock keys on the servers %d ms after acquiring "
			"(watchdog %d ms)\n%s", name, (long long)keys, CHECK_AFTER_MS, WATCHDOG_MS,
			e.text);
	ttl = rh_command_int(s[0], "PTTL %s:0", name);
	cr_assert(ttl > 0 && ttl <= WATCHDOG_MS, "%s:0: PTTL %lld", name, (long long)ttl);

	cr_assert(read_until(&e, NULL, acquired_at + 30000), "%s did not end:\n%s", name, e.text);
	cr_assert_eq(waitpid(e.pid, &status, 0), e.pid);
	close(e.out);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s exited with status %d:\n%s",
			name, status, e.text);
	snprintf(want, sizeof(want), "%d renewed, released %d in", LOCKS, LOCKS);
	cr_assert(strstr(e.text, want) != NULL && strstr(e.text, "; 1 thread(s)") != NULL,
			"%s:\n%s", name, e.text);
	snprintf(want, sizeof(want), "%s: %d locks on", name, LOCKS);
	cr_assert(strstr(e.text, want) != NULL, "%s: no summary line:\n%s", name, e.text);
	keys = keys_on(s, n, name);
	cr_assert_eq(keys, 0, "%s left %lld lock keys behind", name, (long long)keys);
	snprintf(want, sizeof(want), "%s: %d locks on", name, LOCKS);
	cr_log_info("%.*s", (int)strcspn(strstr(e.text, want), "\n"), strstr(e.text, want));
	for (int i = 0; i < n; i++)
		rh_server_free(s[i]);
}
#endif

#ifdef DLOCK_UV_LOCKS
Test(loop_adapters, libuv_holds_10000_locks_on_one_server)
{
	run(DLOCK_UV_LOCKS, "uv_locks", 1);
}

Test(loop_adapters, libuv_holds_10000_locks_on_five_servers)
{
	run(DLOCK_UV_LOCKS, "uv_locks", 5);
}
#else
Test(loop_adapters, libuv_example_not_built)
{
	cr_skip_test("examples/uv_locks was not built (libuv not found, or examples off)");
}
#endif

#ifdef DLOCK_UV_TEARDOWN
/*
 * Teardown from a dlock callback: examples/uv_teardown frees its locks,
 * client and adapter from the last release's callback; uv_run() must
 * return by itself (no timer of the program's to bounce through) and
 * uv_loop_close() find no handle open. Under valgrind when there is one:
 * nothing read after its free, nothing left allocated.
 */
Test(loop_adapters, libuv_program_tears_dlock_down_from_its_last_callback)
{
	const char *vg = access("/usr/bin/valgrind", X_OK) == 0 ? "/usr/bin/valgrind" : NULL;
	const char *argv[8];
	rh_server *s;
	example e;
	int status = 0, argc = 0, fds[2];

	cr_assert_eq(rh_servers_start(&s, 1, NULL), 0);
	if (vg != NULL) {
		argv[argc++] = vg;
		argv[argc++] = "--error-exitcode=9";
		argv[argc++] = "--leak-check=full";
		argv[argc++] = "--errors-for-leak-kinds=definite,indirect";
		argv[argc++] = "-q";
	}
	argv[argc++] = DLOCK_UV_TEARDOWN;
	argv[argc++] = rh_server_uri(s);
	argv[argc] = NULL;
	cr_assert_eq(pipe(fds), 0);
	e.pid = fork();
	cr_assert_geq(e.pid, 0);
	if (e.pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	e.out = fds[0];
	e.len = 0;
	e.text[0] = '\0';
	/* It ends by itself (the example's alarm kills a uv_run that does not). */
	cr_assert(read_until(&e, NULL, rh_now_ms() + 60000), "uv_teardown did not end:\n%s",
			e.text);
	cr_assert_eq(waitpid(e.pid, &status, 0), e.pid);
	close(e.out);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			"uv_teardown: status %d (%s):\n%s", status,
			WIFSIGNALED(status) ? "killed: uv_run never returned" : "exited", e.text);
	cr_assert(strstr(e.text, "torn down from a dlock callback") != NULL, "%s", e.text);
	cr_assert_eq(keys_on(&s, 1, "uv_teardown"), 0, "locks left behind");
	cr_log_info("%s%s", vg != NULL ? "(valgrind) " : "", e.text);
	rh_server_free(s);
}
#endif

#ifdef DLOCK_EVENT_LOCKS
Test(loop_adapters, libevent_holds_10000_locks_on_one_server)
{
	run(DLOCK_EVENT_LOCKS, "event_locks", 1);
}

Test(loop_adapters, libevent_holds_10000_locks_on_five_servers)
{
	run(DLOCK_EVENT_LOCKS, "event_locks", 5);
}
#else
Test(loop_adapters, libevent_example_not_built)
{
	cr_skip_test("examples/event_locks was not built (libevent not found, or examples off)");
}
#endif
