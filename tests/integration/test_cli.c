/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The `dlock` command (SPEC §7) against real redis-server processes: the
 * binary is run with fork/execv, its stdout and stderr captured through
 * pipes, its exit status read as a shell would (128+N when killed by signal
 * N), under a hard timeout.
 *
 * Covered: run passes on the command's status and the lock's identity (and
 * holds the key meanwhile), 128+N, conflicts (75 or --conflict-exit-code),
 * unreachable nodes (69), a lock lost while the command runs (70: force
 * unlock under the watchdog, a lease outlived, SIGKILL after the grace),
 * usage errors (64), acquire/release with an explicit owner (re-entry, not
 * owner), status and status --json, signal forwarding, --help/--version,
 * multilock mode.
 *
 * Every call passes --timeout 300 so that a dead node costs little, and
 * RedLock calls --restart-guard 0: these tests are not about the guard.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <dlock.h>

#include "cli_proc.h"
#include "redis_harness.h"
#include "support.h"

#ifndef DLOCK_CLI_PATH
#error "DLOCK_CLI_PATH must name the dlock binary (tests/CMakeLists.txt defines it)"
#endif

#define TMO "300"         /* --timeout for every call */

/* ---- a tiny JSON syntax check ------------------------------------------------ */

static const char *json_ws(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	return s;
}

static const char *json_value(const char *s, int depth);

static const char *json_string_lit(const char *s)
{
	if (*s++ != '"')
		return NULL;
	while (*s != '"') {
		if ((unsigned char)*s < 0x20)
			return NULL;
		if (*s == '\\') {
			s++;
			if (*s == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!isxdigit((unsigned char)s[i]))
						return NULL;
				s += 4;
			} else if (!strchr("\"\\/bfnrt", *s) || *s == '\0') {
				return NULL;
			}
		}
		s++;
	}
	return s + 1;
}

static const char *json_number(const char *s)
{
	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (isdigit((unsigned char)*s))
		while (isdigit((unsigned char)*s))
			s++;
	else
		return NULL;
	if (*s == '.') {
		s++;
		if (!isdigit((unsigned char)*s))
			return NULL;
		while (isdigit((unsigned char)*s))
			s++;
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!isdigit((unsigned char)*s))
			return NULL;
		while (isdigit((unsigned char)*s))
			s++;
	}
	return s;
}

static const char *json_value(const char *s, int depth)
{
	if (depth > 64)
		return NULL;
	s = json_ws(s);
	if (*s == '{' || *s == '[') {
		char close = *s == '{' ? '}' : ']';
		int object = *s == '{';
		s = json_ws(s + 1);
		if (*s == close)
			return s + 1;
		for (;;) {
			if (object) {
				if ((s = json_string_lit(json_ws(s))) == NULL)
					return NULL;
				s = json_ws(s);
				if (*s++ != ':')
					return NULL;
			}
			if ((s = json_value(s, depth + 1)) == NULL)
				return NULL;
			s = json_ws(s);
			if (*s == close)
				return s + 1;
			if (*s++ != ',')
				return NULL;
		}
	}
	if (*s == '"')
		return json_string_lit(s);
	if (strncmp(s, "true", 4) == 0)
		return s + 4;
	if (strncmp(s, "false", 5) == 0)
		return s + 5;
	if (strncmp(s, "null", 4) == 0)
		return s + 4;
	return json_number(s);
}

/* One JSON value and nothing but whitespace after it. */
static int json_valid(const char *s)
{
	const char *end = json_value(s, 0);
	return end != NULL && *json_ws(end) == '\0';
}

/* ---- Redis and file helpers ------------------------------------------------- */

static void node_label(rh_server *s, char *buf, size_t len)
{
	snprintf(buf, len, "127.0.0.1:%d", rh_server_port(s));
}

static int64_t exists(rh_server *s, const char *key)
{
	return rh_command_int(s, "EXISTS %s", key);
}

/* HGET as a string into buf ("" and 0 when absent); returns 1 when present. */
static int hget(rh_server *s, const char *key, const char *field, char *buf, size_t len)
{
	redisReply *r = rh_command(s, "HGET %s %s", key, field);
	int present;

	cr_assert_not_null(r, "HGET %s %s: transport error", key, field);
	cr_assert(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL, "HGET: type %d",
			r->type);
	present = r->type == REDIS_REPLY_STRING;
	snprintf(buf, len, "%s", present ? r->str : "");
	freeReplyObject(r);
	return present;
}

/* HGETALL flattened to "f1=v1;f2=v2;" (order as the server gives it). */
static void hgetall(rh_server *s, const char *key, char *buf, size_t len)
{
	redisReply *r = rh_command(s, "HGETALL %s", key);
	size_t off = 0;

	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
	buf[0] = '\0';
	for (size_t i = 0; i + 1 < r->elements && off < len; i += 2)
		off += (size_t)snprintf(buf + off, len - off, "%s=%s;", r->element[i]->str,
				r->element[i + 1]->str);
	freeReplyObject(r);
}

/* The foreign holder of the conflict tests: Redisson's layout, another JVM's owner. */
static void hold_foreign(rh_server *s, const char *key)
{
	cr_assert_eq(rh_command_int(s, "HSET %s foreign:1 1", key), 1);
	cr_assert_eq(rh_command_int(s, "PEXPIRE %s 60000", key), 1);
}

/* `dlock unlock --force name` must succeed; returns when it returned. */
static int64_t force_unlock(const char *uri, const char *name)
{
	proc *un = DLOCK("-n", uri, "--timeout", TMO, "unlock", "--force", name);
	EXPECT_STATUS(un, 0);
	int64_t at = rh_now_ms();
	proc_free(un);
	return at;
}

/* ---- 1. acquired: the command's status, identity, the key meanwhile ------------ */

/* Each test gets a fresh server (Criterion runs init/fini in its process). */
TestSuite(cli, .init = dl_server_start, .fini = dl_server_stop);

Test(cli, run_passes_exit_status_and_identity, .timeout = 60)
{
	rh_server *s = dl_srv;
	const char *uri = rh_server_uri(s);
	char port[16], env_nodes[128], script[256];
	snprintf(port, sizeof port, "%d", rh_server_port(s));
	snprintf(env_nodes, sizeof env_nodes, "DLOCK_NODES=%s", uri);

	proc *p = DLOCK("-n", uri, "--timeout", TMO, "run", "cli-one", "--", "sh", "-c", "exit 0");
	EXPECT_STATUS(p, 0);
	cr_expect_eq(exists(s, "cli-one"), 0, "the key must be gone after the run");
	proc_free(p);

	p = DLOCK("-n", uri, "--timeout", TMO, "run", "cli-one", "--", "sh", "-c", "exit 7");
	EXPECT_STATUS(p, 7);
	cr_expect_eq(exists(s, "cli-one"), 0);
	proc_free(p);

	/* Nodes from DLOCK_NODES; the child reports its environment and the key. */
	snprintf(script, sizeof script,
			"echo \"$DLOCK_NAME $DLOCK_OWNER\"; redis-cli -p %s hgetall \"$DLOCK_NAME\"",
			port);
	p = dlock_env((const char *const[]){ env_nodes, NULL },
			ARGS("--timeout", TMO, "run", "cli-one", "--", "sh", "-c", script));
	ASSERT_STATUS(p, 0);
	{
		char name[64] = "", owner[128] = "", field[128] = "", count[16] = "";
		int k = sscanf(p->out, "%63s %127s %127s %15s", name, owner, field, count);
		cr_assert_eq(k, 4, "child output: %s", p->out);
		cr_expect_str_eq(name, "cli-one", "DLOCK_NAME");
		cr_expect(owner_matches(owner, p->pid), "DLOCK_OWNER \"%s\" is not <uuid>:%ld",
				owner, (long)p->pid);
		cr_expect_str_eq(field, owner, "the hash field is the owner (HGETALL: %s)", p->out);
		cr_expect_str_eq(count, "1");
		cr_expect_eq(count_char(p->out, '\n'), 3, "one holder only: %s", p->out);
	}
	cr_expect_eq(exists(s, "cli-one"), 0);
	proc_free(p);

	/* From the parent while the command sleeps: one field <uuid>:<dlock's pid>,
     * count 1, the watchdog's lease (default 30 s). */
	p = dlock_bg(ARGS("-n", uri, "--timeout", TMO, "run", "cli-one", "--", "sh", "-c",
			"exec sleep 1"));
	{
		int64_t deadline = rh_now_ms() + 5000;
		while (exists(s, "cli-one") != 1 && rh_now_ms() < deadline)
			dl_sleep_ms(10);
		redisReply *r = rh_command(s, "HGETALL cli-one");
		cr_assert_not_null(r);
		cr_assert_eq(r->elements, 2, "one holder expected, HGETALL has %zu elements",
				r->elements);
		cr_expect(owner_matches(r->element[0]->str, p->pid),
				"field \"%s\" is not <uuid>:%ld", r->element[0]->str, (long)p->pid);
		cr_expect_str_eq(r->element[1]->str, "1");
		freeReplyObject(r);
		int64_t pttl = rh_command_int(s, "PTTL cli-one");
		cr_expect(pttl > 20000 && pttl <= 30000, "PTTL %" PRId64 " (watchdog lease 30000)",
				pttl);
	}
	proc_wait(p, HARD_TIMEOUT_S);
	EXPECT_STATUS(p, 0);
	cr_expect_eq(exists(s, "cli-one"), 0);
	proc_free(p);
}

/* Without -l the watchdog keeps the lock past its lease for as long as CMD runs. */
Test(cli, run_without_lease_is_renewed_past_the_watchdog_lease, .timeout = 60)
{
	rh_server *s = dl_srv;
	char script[256];
	snprintf(script, sizeof script,
			"sleep 1.5; redis-cli -p %d hget \"$DLOCK_NAME\" \"$DLOCK_OWNER\"",
			rh_server_port(s));

	proc *p = DLOCK("-n", rh_server_uri(s), "--timeout", TMO, "--watchdog", "600", "run",
			"cli-wd", "--", "sh", "-c", script);
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(p->out, "1\n", "still held after 2.5 watchdog leases: %s", p->out);
	cr_expect_eq(exists(s, "cli-wd"), 0);
	proc_free(p);
}

/* ---- 2. killed by a signal: 128+N ----------------------------------------------- */

Test(cli, run_child_killed_by_signal_gives_128_plus_n, .timeout = 30)
{
	rh_server *s = dl_srv;

	proc *p = DLOCK("-n", rh_server_uri(s), "--timeout", TMO, "run", "cli-sig", "--", "sh",
			"-c", "kill -TERM $$");
	EXPECT_STATUS(p, 128 + SIGTERM);
	cr_expect_eq(exists(s, "cli-sig"), 0, "released after the child died");
	proc_free(p);

	/* A command that cannot be executed: 127 as a shell says, the lock released. */
	p = DLOCK("-n", rh_server_uri(s), "--timeout", TMO, "run", "cli-sig", "--",
			"/nonexistent/dlock-test-command");
	EXPECT_STATUS(p, 127);
	cr_expect_eq(exists(s, "cli-sig"), 0);
	proc_free(p);
}

/* ---- 3. held by others: 75 (or --conflict-exit-code) ------------------------------ */

Test(cli, run_conflict_exits_75_after_the_wait, .timeout = 60)
{
	rh_server *s = dl_srv;
	const char *uri = rh_server_uri(s);
	char node[64], before[256], after[256];
	node_label(s, node, sizeof node);
	hold_foreign(s, "cli-conf");
	hgetall(s, "cli-conf", before, sizeof before);

	proc *p = DLOCK("-n", uri, "--timeout", TMO, "run", "-w", "500", "cli-conf", "--", "true");
	EXPECT_STATUS(p, 75);
	cr_expect(proc_elapsed(p) >= 450 && proc_elapsed(p) <= 1500, "-w 500 took %" PRId64 " ms",
			proc_elapsed(p));
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, "cli-conf") != NULL, "stderr names the lock: %s", p->err);
	cr_expect(strstr(p->err, node) != NULL, "stderr names the node %s: %s", node, p->err);
	cr_expect(strstr(p->err, "held") != NULL, "stderr gives the cause (held): %s", p->err);
	cr_expect_eq(p->out_len, 0, "nothing on stdout: %s", p->out);
	proc_free(p);

	p = DLOCK("-n", uri, "--timeout", TMO, "run", "-w", "0", "cli-conf", "--", "true");
	EXPECT_STATUS(p, 75);
	cr_expect_lt(proc_elapsed(p), 400, "-w 0 took %" PRId64 " ms", proc_elapsed(p));
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, "cli-conf") != NULL, "%s", p->err);
	proc_free(p);

	p = DLOCK("-n", uri, "--timeout", TMO, "--conflict-exit-code", "9", "run", "-w", "0",
			"cli-conf", "--", "true");
	EXPECT_STATUS(p, 9);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);

	/* acquire answers the same way. */
	p = DLOCK("-n", uri, "--timeout", TMO, "acquire", "-l", "5000", "--owner", "me:1",
			"cli-conf");
	EXPECT_STATUS(p, 75);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);

	hgetall(s, "cli-conf", after, sizeof after);
	cr_expect_str_eq(after, before, "the foreign hold is untouched");
}

/* ---- 4. too few nodes reachable: 69 --------------------------------------------- */

Test(cli, run_without_quorum_exits_69, .timeout = 60)
{
	rh_server *s[3];
	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);
	char nodes[512], dead1[64], dead2[64], single[128];
	snprintf(nodes, sizeof nodes, "%s,%s,%s", rh_server_uri(s[0]), rh_server_uri(s[1]),
			rh_server_uri(s[2]));
	node_label(s[1], dead1, sizeof dead1);
	node_label(s[2], dead2, sizeof dead2);
	cr_assert_eq(rh_server_kill(s[1]), 0);
	cr_assert_eq(rh_server_kill(s[2]), 0);

	proc *p = DLOCK("-n", nodes, "--timeout", TMO, "--restart-guard", "0", "run", "-w", "0",
			"cli-quorum", "--", "true");
	EXPECT_STATUS(p, 69);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, dead1) != NULL || strstr(p->err, dead2) != NULL,
			"stderr names a dead node (%s or %s): %s", dead1, dead2, p->err);
	cr_expect_lt(proc_elapsed(p), 2000, "took %" PRId64 " ms", proc_elapsed(p));
	cr_expect_eq(exists(s[0], "cli-quorum"), 0, "no hold left on the live node");
	proc_free(p);

	/* acquire: the same status. */
	p = DLOCK("-n", nodes, "--timeout", TMO, "--restart-guard", "0", "acquire", "-l", "5000",
			"--owner", "me:1", "cli-quorum");
	EXPECT_STATUS(p, 69);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect_eq(exists(s[0], "cli-quorum"), 0);
	proc_free(p);

	/* One node, nobody listening. */
	int port = closed_port();
	snprintf(single, sizeof single, "redis://127.0.0.1:%d", port);
	snprintf(dead1, sizeof dead1, "127.0.0.1:%d", port);
	p = DLOCK("-n", single, "--timeout", TMO, "run", "-w", "0", "cli-quorum", "--", "true");
	EXPECT_STATUS(p, 69);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, dead1) != NULL, "stderr names %s: %s", dead1, p->err);
	proc_free(p);

	for (int i = 0; i < 3; i++)
		rh_server_free(s[i]);
}

/* Replicas that do not acknowledge (here: none at all) are 69 too, and
 * leave nothing held; bad values are usage errors. */
Test(cli, sync_replicas_short_exits_69, .timeout = 60)
{
	rh_server *s = dl_srv;
	const char *uri = rh_server_uri(s);

	proc *p = DLOCK("-n", uri, "--timeout", TMO, "--sync-replicas", "1", "--sync-timeout",
			"200", "acquire", "-l", "5000", "--owner", "me:1", "cli-sync");
	EXPECT_STATUS(p, 69);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, "0 of 1 replicas") != NULL, "%s", p->err);
	cr_expect_geq(proc_elapsed(p), 150, "did not wait for WAIT: %" PRId64 " ms",
			proc_elapsed(p));
	cr_expect_eq(exists(s, "cli-sync"), 0, "given back");
	proc_free(p);

	p = DLOCK("-n", uri, "--timeout", TMO, "--sync-replicas", "-1", "status", "cli-sync");
	EXPECT_STATUS(p, 64);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "--sync-replicas", "1025", "status", "cli-sync");
	EXPECT_STATUS(p, 64);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "--sync-timeout", "0", "status", "cli-sync");
	EXPECT_STATUS(p, 64);
	proc_free(p);
}

/* --sync-aof on a server that cannot fsync-count (older than 7.2, or no
 * appendonly): 69 naming WAITAOF, nothing left held; a --sync-replicas
 * above it is a usage error. */
Test(cli, sync_aof_refused_exits_69, .timeout = 60)
{
	rh_server *s = dl_srv;
	const char *uri = rh_server_uri(s);

	proc *p = DLOCK("-n", uri, "--timeout", TMO, "--sync-aof", "1", "--sync-timeout", "200",
			"acquire", "-l", "5000", "--owner", "me:1", "cli-aof");
	EXPECT_STATUS(p, 69);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, "WAITAOF") != NULL, "%s", p->err);
	cr_expect_eq(exists(s, "cli-aof"), 0, "given back");
	proc_free(p);

	p = DLOCK("-n", uri, "--timeout", TMO, "--sync-aof", "1", "--sync-replicas", "2", "status",
			"cli-aof");
	EXPECT_STATUS(p, 64);
	cr_expect(strstr(p->err, "--sync-aof") != NULL, "%s", p->err);
	proc_free(p);
	p = DLOCK("-n", uri, "--timeout", TMO, "--sync-aof", "1025", "status", "cli-aof");
	EXPECT_STATUS(p, 64);
	proc_free(p);
}

/* ---- 5. lost while CMD runs: 70 ------------------------------------------------- */

/* `dlock --watchdog 3000 run --grace <grace> name -- sh -c <j's script>` on
 * the suite's server in the background, once the command has started (its
 * pid in j->child). */
static proc *watched_run(pid_job *j, const char *grace, const char *name)
{
	proc *run = dlock_bg(ARGS("--watchdog", "3000", "-n", rh_server_uri(dl_srv), "--timeout",
			TMO, "run", "--grace", grace, name, "--", "sh", "-c", j->script));
	j->child = wait_for_pidfile(j->pidfile, 5000);
	cr_assert_gt(j->child, 0, "the command did not start");
	return run;
}

/* j runs under the lock; once it ran settle_ms, the lock is force-unlocked
 * from outside and dlock must exit 70 (lost). Returns when the unlock was. */
static int64_t lose_watched_run(
		pid_job *j, const char *grace, const char *name, int settle_ms, proc **run)
{
	*run = watched_run(j, grace, name);
	dl_sleep_ms(settle_ms);
	cr_assert_eq(exists(dl_srv, name), 1);
	int64_t unlocked = force_unlock(rh_server_uri(dl_srv), name);
	proc_wait(*run, HARD_TIMEOUT_S);
	EXPECT_STATUS(*run, 70);
	return unlocked;
}

Test(cli, run_force_unlocked_under_watchdog_exits_70, .timeout = 60)
{
	pid_job j;
	proc *run;
	pid_job_init(&j, "", "exec sleep 30");

	int64_t unlocked = lose_watched_run(&j, "500", "cli-lost", 500, &run);
	cr_expect_leq(run->t1 - unlocked, 2500,
			"exited %" PRId64
			" ms after the force unlock (watchdog/3 + grace + margin)",
			run->t1 - unlocked);
	cr_expect(kill((pid_t)j.child, 0) == -1 && errno == ESRCH, "the command (pid %ld) survived",
			j.child);
	EXPECT_ONE_LINE_ERR(run);
	cr_expect(strstr(run->err, "cli-lost") != NULL, "%s", run->err);
	cr_expect_eq(exists(dl_srv, "cli-lost"), 0);
	proc_free(run);
	remove_tmpdir(j.dir, ARGS("pid"));
}

/* A command that ignores SIGTERM gets SIGKILL after the grace period. */
Test(cli, run_lost_command_ignoring_sigterm_is_killed_after_grace, .timeout = 60)
{
	pid_job j;
	proc *run;
	pid_job_init(&j, "trap '' TERM; ", "while :; do sleep 0.05; done");

	int64_t unlocked = lose_watched_run(&j, "700", "cli-kill", 0, &run);
	/* At least the grace (SIGTERM is ignored), at most detection + grace + margin. */
	cr_expect(run->t1 - unlocked >= 650 && run->t1 - unlocked <= 2500,
			"exited %" PRId64 " ms after the force unlock (grace 700)",
			run->t1 - unlocked);
	cr_expect(gone_within((pid_t)j.child, 1000), "the command (pid %ld) survived SIGKILL",
			j.child);
	proc_free(run);
	remove_tmpdir(j.dir, ARGS("pid"));
}

/* ---- 6. usage errors: 64 ------------------------------------------------------- */

Test(cli, usage_errors_exit_64_with_one_line, .timeout = 60)
{
	rh_server *s = dl_srv;
	const char *uri = rh_server_uri(s);
	char two[256];
	snprintf(two, sizeof two, "%s,%s", uri, uri);

	const char *const *cases[] = {
		ARGS("-n", uri, "--timeout", TMO, "--bogus", "run", "cli-use", "--", "true"),
		ARGS("-n", uri, "--timeout", TMO, "run", "--bogus", "cli-use", "--", "true"),
		ARGS("-n", "http://x", "--timeout", TMO, "run", "cli-use", "--", "true"),
		ARGS("-n", uri, "--timeout", TMO, "run", "", "--", "true"),
		ARGS("-n", uri, "--timeout", TMO, "run", "cli-use", "--"),
		ARGS("-n", uri, "--timeout", TMO, "acquire", "--owner", "me:1", "cli-use"),
		ARGS("-n", uri, "--timeout", TMO, "acquire", "-l", "5000", "cli-use"),
		ARGS("-n", uri, "--timeout", TMO, "release", "cli-use"),
		ARGS("-n", uri, "--timeout", TMO, "unlock", "cli-use"),
		ARGS("-n", two, "-m", "rlock", "--timeout", TMO, "run", "cli-use", "--", "true"),
		ARGS("-n", uri, "--timeout", "abc", "run", "cli-use", "--", "true"),
		ARGS("-n", uri, "--timeout", TMO, "--conflict-exit-code", "abc", "run", "cli-use",
				"--", "true"),
		ARGS("-n", uri, "--timeout", TMO, "-m", "paxos", "run", "cli-use", "--", "true"),
		ARGS("-n", uri, "--timeout", TMO, "frobnicate", "cli-use"),
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		proc *p = dlock_env(NULL, cases[i]);
		EXPECT_STATUS(p, 64);
		EXPECT_ONE_LINE_ERR(p);
		cr_expect_eq(p->out_len, 0, "`%s`: nothing on stdout: %s", p->desc, p->out);
		proc_free(p);
	}
	cr_expect_eq(exists(s, "cli-use"), 0, "no usage error may touch the lock");
}

/* `dlock ARGS` exits 64 with one line naming a and b, nothing on stdout. */
static void expect_64_naming(const char *const *args, const char *a, const char *b)
{
	proc *p = dlock_env(NULL, args);
	EXPECT_STATUS(p, 64);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, a) != NULL && strstr(p->err, b) != NULL,
			"`%s`: the line should name %s and %s: %s", p->desc, a, b, p->err);
	cr_expect_eq(p->out_len, 0, "`%s`: nothing on stdout: %s", p->desc, p->out);
	proc_free(p);
}

/*
 * One server under two spellings would count twice: 64, one line naming
 * both, for every command, and nothing taken or deleted. The acquisitions
 * run on a free lock (a MultiLock's one attempt stops at a member held by
 * others, before a second spelling is ever contacted: then nothing was
 * counted and "held" is the honest answer); status and unlock --force meet
 * a foreign hold, which must survive.
 */
static void expect_refused_twice(const char *nodes, const char *a, const char *b,
		rh_server *s, const char *name)
{
	char after[256];

	expect_64_naming(ARGS("-n", nodes, "--timeout", TMO, "--restart-guard", "0", "run", "-w",
					 "0", name, "--", "true"),
			a, b);
	expect_64_naming(ARGS("-n", nodes, "--timeout", TMO, "-m", "multilock", "acquire", "-l",
					 "5000", "--owner", "me:1", name),
			a, b);
	cr_expect_eq(exists(s, name), 0, "a refused acquisition left the lock held");
	hold_foreign(s, name);
	expect_64_naming(ARGS("-n", nodes, "--timeout", TMO, "status", name), a, b);
	expect_64_naming(ARGS("-n", nodes, "--timeout", TMO, "unlock", "--force", name), a, b);
	hgetall(s, name, after, sizeof after);
	cr_expect_str_eq(after, "foreign:1=1;", "the foreign hold was touched: %s", after);
}

Test(cli, one_server_listed_twice_exits_64_naming_both, .timeout = 60)
{
	char dir[64], sock[128], nodes[512], a[160], b[64], tcp[64];
	int dead = closed_port();

	/* Two names for one address: refused when opened. */
	rh_server *s = dl_srv;
	snprintf(nodes, sizeof nodes, "%s,redis://localhost:%d,redis://127.0.0.1:%d",
			rh_server_uri(s), rh_server_port(s), dead);
	snprintf(a, sizeof a, "127.0.0.1:%d", rh_server_port(s));
	snprintf(b, sizeof b, "localhost:%d", rh_server_port(s));
	expect_refused_twice(nodes, a, b, s, "cli-twice");

	/* A server's socket and its TCP port: only its run_id tells, at first contact. */
	make_tmpdir(dir, sizeof dir);
	snprintf(sock, sizeof sock, "%s/redis.sock", dir);
	rh_server *u = rh_server_start(ARGS("--unixsocket", sock, "--unixsocketperm", "700"));
	cr_assert_not_null(u);
	snprintf(nodes, sizeof nodes, "unix://%s,%s,redis://127.0.0.1:%d", sock, rh_server_uri(u),
			dead);
	snprintf(a, sizeof a, "unix:%s", sock);
	snprintf(tcp, sizeof tcp, "127.0.0.1:%d", rh_server_port(u));
	expect_refused_twice(nodes, a, tcp, u, "cli-twice");
	rh_server_free(u);
	unlink(sock);
	rmdir(dir);
}

/* ---- 7. acquire/release with one owner re-enter ----------------------------------- */

Test(cli, acquire_release_with_owner_reenters, .timeout = 60)
{
	rh_server *s = dl_srv;
	const char *uri = rh_server_uri(s);
	char v[64];

	for (int i = 0; i < 2; i++) {
		proc *p = DLOCK("-n", uri, "--timeout", TMO, "acquire", "-l", "10000", "--owner",
				"me:1", "cli-re");
		EXPECT_STATUS(p, 0);
		proc_free(p);
	}
	cr_assert(hget(s, "cli-re", "me:1", v, sizeof v));
	cr_expect_str_eq(v, "2", "hold count after two acquires");
	cr_expect_eq(rh_command_int(s, "HLEN cli-re"), 1);

	proc *p = DLOCK("-n", uri, "--timeout", TMO, "release", "--owner", "me:1", "cli-re");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	cr_assert(hget(s, "cli-re", "me:1", v, sizeof v));
	cr_expect_str_eq(v, "1", "hold count after one release");
	int64_t pttl = rh_command_int(s, "PTTL cli-re");
	cr_expect(pttl > 8000 && pttl <= 10000, "PTTL %" PRId64 ": the 10 s lease is kept", pttl);

	p = DLOCK("-n", uri, "--timeout", TMO, "release", "--owner", "me:1", "cli-re");
	EXPECT_STATUS(p, 0);
	proc_free(p);
	cr_expect_eq(exists(s, "cli-re"), 0, "the last release deletes the key");

	p = DLOCK("-n", uri, "--timeout", TMO, "release", "--owner", "me:1", "cli-re");
	EXPECT_STATUS(p, 1);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);
}

/* ---- 8. release by a non-owner: 1, nothing changed --------------------------------- */

Test(cli, release_by_other_owner_exits_1_and_changes_nothing, .timeout = 30)
{
	rh_server *s = dl_srv;
	const char *uri = rh_server_uri(s);
	char before[256], after[256];

	proc *p = DLOCK("-n", uri, "--timeout", TMO, "acquire", "-l", "10000", "--owner", "me:1",
			"cli-other");
	ASSERT_STATUS(p, 0);
	proc_free(p);
	hgetall(s, "cli-other", before, sizeof before);
	cr_expect_str_eq(before, "me:1=1;");

	p = DLOCK("-n", uri, "--timeout", TMO, "release", "--owner", "someone-else", "cli-other");
	EXPECT_STATUS(p, 1);
	EXPECT_ONE_LINE_ERR(p);
	proc_free(p);
	hgetall(s, "cli-other", after, sizeof after);
	cr_expect_str_eq(after, before, "the hash is unchanged");
	int64_t pttl = rh_command_int(s, "PTTL cli-other");
	cr_expect(pttl > 8000 && pttl <= 10000, "PTTL %" PRId64, pttl);
}

/* ---- 9. status and status --json ----------------------------------------------- */

/* The part of `text` about node i: from its label to the next node's label. */
static void node_segment(const char *text, char labels[][64], int n, int i, char *buf, size_t len)
{
	const char *start = strstr(text, labels[i]), *end = text + strlen(text);

	cr_assert_not_null(start, "%s missing from: %s", labels[i], text);
	for (int j = 0; j < n; j++) {
		const char *q = strstr(text, labels[j]);
		if (j != i && q != NULL && q > start && q < end)
			end = q;
	}
	snprintf(buf, len, "%.*s", (int)(end - start), start);
}

Test(cli, status_json_and_table_with_a_dead_node, .timeout = 60)
{
	rh_server *s[3];
	char labels[3][64], nodes[512], seg[1024];
	const char *holders = "\"holders\":[{\"owner\":\"me:1\",\"count\":1,\"ttl_ms\":";
	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);
	snprintf(nodes, sizeof nodes, "%s,%s,%s", rh_server_uri(s[0]), rh_server_uri(s[1]),
			rh_server_uri(s[2]));
	for (int i = 0; i < 3; i++)
		node_label(s[i], labels[i], sizeof labels[i]);
	cr_assert_eq(rh_server_kill(s[2]), 0);

	proc *p = DLOCK("-n", nodes, "--timeout", TMO, "--restart-guard", "0", "acquire", "-l",
			"20000", "--owner", "me:1", "cli-st");
	ASSERT_STATUS(p, 0);
	proc_free(p);

	p = DLOCK("-n", nodes, "--timeout", TMO, "--restart-guard", "0", "status", "--json",
			"cli-st");
	EXPECT_STATUS(p, 0);
	cr_expect(json_valid(p->out), "not JSON: %s", p->out);
	cr_expect(strstr(p->out, "\"quorum\":2") != NULL, "%s", p->out);
	cr_expect_eq(count_str(p->out, holders), 2, "two live holders: %s", p->out);
	cr_expect_eq(count_str(p->out, "\"reachable\":false"), 1, "%s", p->out);
	for (int i = 0; i < 3; i++) {
		node_segment(p->out, labels, 3, i, seg, sizeof seg);
		if (i < 2) {
			cr_expect(strstr(seg, holders) != NULL, "node %s: %s", labels[i], seg);
			cr_expect(strstr(seg, "\"reachable\":true") != NULL, "node %s: %s",
					labels[i], seg);
		} else {
			cr_expect(strstr(seg, "\"reachable\":false") != NULL, "node %s: %s",
					labels[i], seg);
		}
	}
	proc_free(p);

	p = DLOCK("-n", nodes, "--timeout", TMO, "--restart-guard", "0", "status", "cli-st");
	EXPECT_STATUS(p, 0);
	{
		/* Header line(s) first, then exactly one line per node. */
		char *lines[16];
		int n = 0;
		char *save = NULL;
		for (char *l = strtok_r(p->out, "\n", &save); l != NULL && n < 16;
				l = strtok_r(NULL, "\n", &save))
			lines[n++] = l;
		cr_assert(n >= 4 && n <= 5, "%d lines: header(s) and 3 nodes expected", n);
		cr_expect(strstr(lines[0], "cli-st") != NULL, "header names the lock: %s",
				lines[0]);
		for (int i = 0; i < 3; i++) {
			int where = -1, times = 0;
			for (int j = 0; j < n; j++)
				if (strstr(lines[j], labels[i]) != NULL &&
						strstr(lines[j], labels[i]) ==
								lines[j] + strspn(lines[j], " ")) {
					where = j;
					times++;
				}
			cr_expect_eq(times, 1, "node %s must start exactly one line", labels[i]);
			cr_expect_geq(where, n - 3, "node lines come after the header");
			if (where >= 0 && i < 2)
				cr_expect(strstr(lines[where], "me:1") != NULL, "%s", lines[where]);
			if (where >= 0 && i == 2)
				cr_expect(strstr(lines[where], "unreachable") != NULL, "%s",
						lines[where]);
		}
	}
	proc_free(p);

	for (int i = 0; i < 3; i++)
		rh_server_free(s[i]);
}

/* ---- 10. signals are forwarded ---------------------------------------------------- */

Test(cli, run_forwards_sigint_to_the_command, .timeout = 60)
{
	rh_server *s = dl_srv;
	char dir[64], ready[128], script[512];
	make_tmpdir(dir, sizeof dir);
	snprintf(ready, sizeof ready, "%s/ready", dir);
	/* The background sleep ignores SIGINT (no job control): the trap ends it. */
	snprintf(script, sizeof script,
			"trap 'kill $! 2>/dev/null; exit 5' INT; sleep 30 & echo $$ > %s; wait",
			ready);

	proc *p = dlock_bg(ARGS("-n", rh_server_uri(s), "--timeout", TMO, "run", "cli-fwd", "--",
			"sh", "-c", script));
	cr_assert_gt(wait_for_pidfile(ready, 5000), 0, "the command did not start");
	if (rh_now_ms() - p->t0 < 500)
		dl_sleep_ms(500 - (rh_now_ms() - p->t0));
	cr_expect_eq(exists(s, "cli-fwd"), 1);
	int64_t sent = rh_now_ms();
	cr_assert_eq(kill(p->pid, SIGINT), 0);
	proc_wait(p, HARD_TIMEOUT_S);
	EXPECT_STATUS(p, 5);
	cr_expect_leq(p->t1 - sent, 2000, "exit %" PRId64 " ms after SIGINT", p->t1 - sent);
	cr_expect_eq(exists(s, "cli-fwd"), 0, "released");
	proc_free(p);

	remove_tmpdir(dir, ARGS("ready"));
}

/*
 * Beyond the brief's list: an operator's Ctrl-C / SIGTERM while `run` still
 * waits for a held lock (there is no CMD yet to pass it to) must stop dlock
 * promptly, without running CMD and without touching the other's hold.
 */
Test(cli, run_waiting_for_the_lock_stops_on_sigterm, .timeout = 60)
{
	rh_server *s = dl_srv;
	char dir[64], marker[128], script[256], before[256], after[256];
	make_tmpdir(dir, sizeof dir);
	snprintf(marker, sizeof marker, "%s/ran", dir);
	snprintf(script, sizeof script, "touch %s", marker);
	hold_foreign(s, "cli-wait");
	hgetall(s, "cli-wait", before, sizeof before);

	proc *p = dlock_bg(ARGS("-n", rh_server_uri(s), "--timeout", TMO, "run", "-w", "4000",
			"cli-wait", "--", "sh", "-c", script));
	dl_sleep_ms(500);
	int64_t sent = rh_now_ms();
	cr_assert_eq(kill(p->pid, SIGTERM), 0);
	proc_wait(p, HARD_TIMEOUT_S);
	cr_expect_leq(p->t1 - sent, 1500,
			"`%s` exited %" PRId64
			" ms after SIGTERM (status %d): the signal was ignored "
			"while waiting\nstderr: %s",
			p->desc, p->t1 - sent, p->status, p->err);
	cr_expect_neq(p->status, 0);
	cr_expect(!file_exists(marker), "CMD ran after SIGTERM");
	hgetall(s, "cli-wait", after, sizeof after);
	cr_expect_str_eq(after, before);
	proc_free(p);

	remove_tmpdir(dir, ARGS("ran"));
}

/* ---- 11. --help and --version ------------------------------------------------------ */

Test(cli, help_and_version, .timeout = 30)
{
	proc *p = DLOCK("--help");
	EXPECT_STATUS(p, 0);
	const char *words[] = { "run", "acquire", "release", "status", "unlock", "64", "69", "70",
		"75" };
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
		cr_expect(has_word(p->out, words[i]), "--help does not mention %s", words[i]);
	cr_expect_eq(p->err_len, 0, "%s", p->err);
	proc_free(p);

	p = DLOCK("-h");
	EXPECT_STATUS(p, 0);
	cr_expect(has_word(p->out, "acquire"));
	proc_free(p);

	char want[128];
	snprintf(want, sizeof want, "dlock %s\n", dlock_version());
	p = DLOCK("--version");
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(p->out, want);
	cr_expect_eq(p->err_len, 0, "%s", p->err);
	proc_free(p);
}

/* ---- 12. multilock ---------------------------------------------------------------- */

Test(cli, multilock_run_holds_every_node, .timeout = 60)
{
	rh_server *s[2];
	char nodes[256], script[512], after[256];
	cr_assert_eq(rh_servers_start(s, 2, NULL), 0);
	snprintf(nodes, sizeof nodes, "%s,%s", rh_server_uri(s[0]), rh_server_uri(s[1]));
	snprintf(script, sizeof script,
			"redis-cli -p %d hget \"$DLOCK_NAME\" \"$DLOCK_OWNER\"; "
			"redis-cli -p %d hget \"$DLOCK_NAME\" \"$DLOCK_OWNER\"",
			rh_server_port(s[0]), rh_server_port(s[1]));

	proc *p = DLOCK("-n", nodes, "-m", "multilock", "--timeout", TMO, "run", "cli-multi", "--",
			"sh", "-c", script);
	EXPECT_STATUS(p, 0);
	cr_expect_str_eq(p->out, "1\n1\n", "held on both nodes by DLOCK_OWNER: %s", p->out);
	cr_expect_eq(exists(s[0], "cli-multi"), 0);
	cr_expect_eq(exists(s[1], "cli-multi"), 0);
	proc_free(p);

	/* One member held by another: 75, and nothing left on the free member. */
	hold_foreign(s[1], "cli-multi");
	p = DLOCK("-n", nodes, "-m", "multilock", "--timeout", TMO, "run", "-w", "0", "cli-multi",
			"--", "true");
	EXPECT_STATUS(p, 75);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect_eq(exists(s[0], "cli-multi"), 0);
	hgetall(s[1], "cli-multi", after, sizeof after);
	cr_expect_str_eq(after, "foreign:1=1;");
	proc_free(p);
	rh_command_int(s[1], "DEL cli-multi");

	/* One member dead: every member is needed, so 69. */
	cr_assert_eq(rh_server_kill(s[1]), 0);
	p = DLOCK("-n", nodes, "-m", "multilock", "--timeout", TMO, "run", "-w", "0", "cli-multi",
			"--", "true");
	EXPECT_STATUS(p, 69);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect_eq(exists(s[0], "cli-multi"), 0);
	proc_free(p);

	rh_server_free(s[0]);
	rh_server_free(s[1]);
}

/* ---- 12. `run` owns its job, waits for as long as it takes, reports loss ----------- */

static long count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	long n = 0;
	int c;

	if (f == NULL)
		return 0;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* Acquire scripts the server ran (EVAL and EVALSHA of any script). */
static long script_calls(rh_server *s)
{
	redisReply *r = rh_command(s, "INFO commandstats");
	long n = 0;

	cr_assert_not_null(r);
	for (const char *p = r->str; (p = strstr(p, "cmdstat_eval")) != NULL; p++) {
		const char *c = strstr(p, "calls=");
		if (c != NULL)
			n += atol(c + 6);
	}
	freeReplyObject(r);
	return n;
}

/* README.md's, docs/cli.md's and --help's first example: no -w waits for as long as it takes. */
Test(cli, run_without_w_waits_on_pubsub_until_released, .timeout = 60)
{
	rh_server *s = dl_srv;
	const char *uri = rh_server_uri(s);

	proc *a = DLOCK("-n", uri, "acquire", "-l", "60000", "--owner", "ops:1", "nightly-report");
	EXPECT_STATUS(a, 0);
	proc_free(a);
	proc *run = dlock_bg(ARGS("-n", uri, "run", "nightly-report", "--", "true"));
	dl_sleep_ms(500);
	freeReplyObject(rh_command(s, "CONFIG RESETSTAT"));
	dl_sleep_ms(2000);
	long calls = script_calls(s);
	cr_expect(!run->done && waitpid(run->pid, NULL, WNOHANG) == 0, "run gave up while held");
	/* Waiting on pub/sub: woken by the unlock or the holder's TTL (60 s). */
	cr_expect_leq(calls, 2, "%ld acquire scripts in 2 s of waiting: it polls", calls);

	proc *rel = DLOCK("-n", uri, "release", "--owner", "ops:1", "nightly-report");
	int64_t released = rh_now_ms();
	EXPECT_STATUS(rel, 0);
	proc_free(rel);
	proc_wait(run, HARD_TIMEOUT_S);
	EXPECT_STATUS(run, 0);
	cr_expect_leq(run->t1 - released, 1000, "ran %" PRId64 " ms after the release",
			run->t1 - released);
	cr_expect_eq(exists(s, "nightly-report"), 0);
	proc_free(run);
}

/* A loss stops the whole job: the shell's background grandchild too. */
Test(cli, run_loss_stops_the_grandchildren, .timeout = 60)
{
	rh_server *s = dl_srv;
	const char *uri = rh_server_uri(s);

	proc *run = dlock_bg(ARGS("--watchdog", "900", "-n", uri, "--timeout", TMO, "run",
			"--grace", "500", "cli-tree", "--", "sh", "-c", "sleep 37.123 & wait"));
	int64_t until = rh_now_ms() + 5000;
	while (!process_running("sleep 37.123") && rh_now_ms() < until)
		dl_sleep_ms(10);
	cr_assert(process_running("sleep 37.123"), "the job did not start");
	force_unlock(uri, "cli-tree");
	proc_wait(run, HARD_TIMEOUT_S);
	EXPECT_STATUS(run, 70);
	cr_expect(!process_running("sleep 37.123"), "the grandchild outlived the lost lock");
	proc_free(run);
}

/* The command ends, but left a process behind: it is stopped before the release. */
Test(cli, run_stops_what_the_command_left_running, .timeout = 60)
{
	rh_server *s = dl_srv;

	proc *run = DLOCK("-n", rh_server_uri(s), "--timeout", TMO, "run", "--grace", "300",
			"cli-left", "--", "sh", "-c", "setsid sleep 38.321 & exit 3");
	EXPECT_STATUS(run, 3);
	cr_expect(!process_running("sleep 38.321"), "a process of the job outlived the lock");
	proc_free(run);
}

/* A dlock killed with SIGKILL takes its command with it. */
Test(cli, run_sigkilled_takes_its_command_with_it, .timeout = 60)
{
	rh_server *s = dl_srv;
	pid_job j;
	pid_job_init(&j, "", "exec sleep 39.4");

	proc *run = dlock_bg(ARGS("-n", rh_server_uri(s), "--timeout", TMO, "run", "cli-orphan",
			"--", "sh", "-c", j.script));
	long child = wait_for_pidfile(j.pidfile, 5000);
	cr_assert_gt(child, 0, "the command did not start");
	cr_assert_eq(kill(run->pid, SIGKILL), 0);
	proc_wait(run, HARD_TIMEOUT_S);
	/* Gone, or a zombie waiting for init to reap it: not running. */
	int64_t until = rh_now_ms() + 1000;
	while (process_running("sleep 39.4") && rh_now_ms() < until)
		dl_sleep_ms(10);
	cr_expect(!process_running("sleep 39.4"), "the command (pid %ld) outlived its killed dlock",
			child);
	proc_free(run);
	remove_tmpdir(j.dir, ARGS("pid"));
}

/* A fresh temporary directory (64 bytes) and the paths (128 bytes) of two files in it. */
static void tmpdir_with(char *dir, char *a, const char *a_name, char *b, const char *b_name)
{
	make_tmpdir(dir, 64);
	snprintf(a, 128, "%s/%s", dir, a_name);
	snprintf(b, 128, "%s/%s", dir, b_name);
}

/* Ctrl-C at a terminal signals the shell job's group: the command gets it once. */
Test(cli, run_sigint_to_the_job_reaches_the_command_once, .timeout = 60)
{
	rh_server *s = dl_srv;
	char dir[64], ready[128], ints[128], script[512];
	tmpdir_with(dir, ready, "ready", ints, "ints");
	snprintf(script, sizeof script,
			"trap 'echo int >> %s' INT; echo $$ > %s; i=0; "
			"while [ $i -lt 20 ]; do sleep 0.05; i=$((i+1)); done",
			ints, ready);

	g_own_group = 1;
	proc *run = dlock_bg(ARGS("-n", rh_server_uri(s), "--timeout", TMO, "run", "cli-int", "--",
			"sh", "-c", script));
	g_own_group = 0;
	cr_assert_gt(wait_for_pidfile(ready, 5000), 0, "the command did not start");
	cr_assert_eq(kill(-run->pid, SIGINT), 0); /* the terminal signals the whole job */
	proc_wait(run, HARD_TIMEOUT_S);
	EXPECT_STATUS(run, 0);
	cr_expect_eq(count_lines(ints), 1, "the command got SIGINT %ld times", count_lines(ints));
	proc_free(run);
	remove_tmpdir(dir, ARGS("ready", "ints"));
}

/* Under nohup, SIGHUP stays ignored: by dlock and by its command. */
Test(cli, run_under_nohup_ignores_sighup, .timeout = 60)
{
	rh_server *s = dl_srv;
	char dir[64], ready[128], done[128], script[512];
	tmpdir_with(dir, ready, "ready", done, "done");
	snprintf(script, sizeof script, "echo $$ > %s; sleep 0.5; echo ok > %s", ready, done);

	g_own_group = 1;
	g_ignore_hup = 1;
	proc *run = dlock_bg(ARGS("-n", rh_server_uri(s), "--timeout", TMO, "run", "cli-hup", "--",
			"sh", "-c", script));
	g_own_group = 0;
	g_ignore_hup = 0;
	cr_assert_gt(wait_for_pidfile(ready, 5000), 0, "the command did not start");
	cr_assert_eq(kill(-run->pid, SIGHUP), 0); /* the terminal went away */
	proc_wait(run, HARD_TIMEOUT_S);
	EXPECT_STATUS(run, 0);
	cr_expect(file_exists(done), "the command was killed by a SIGHUP nohup ignores");
	proc_free(run);
	remove_tmpdir(dir, ARGS("ready", "done"));
}

/* --grace is counted so that even a command ignoring SIGTERM is gone by the lease's end. */
Test(cli, run_lease_stops_a_stubborn_command_before_the_lease_ends, .timeout = 60)
{
	rh_server *s = dl_srv;
	char dir[64], started[128], unused[128], script[512];
	struct stat st;
	struct timespec now;
	int64_t lived_ms;

	tmpdir_with(dir, started, "started", unused, "unused");
	snprintf(script, sizeof script, "touch %s; trap '' TERM; while :; do sleep 0.05; done",
			started);
	proc *run = DLOCK("-n", rh_server_uri(s), "--timeout", TMO, "run", "-l", "1000", "--grace",
			"400", "cli-stubborn", "--", "sh", "-c", script);
	clock_gettime(CLOCK_REALTIME, &now);
	EXPECT_STATUS(run, 124);
	/* The lease began at the acquisition, before the command started: from
	 * the command's start to dlock's exit is at most the lease's remainder
	 * (dlock's own start, slow on a busy machine, is no part of the lease). */
	cr_assert_eq(stat(started, &st), 0, "the command did not start");
	lived_ms = ((int64_t)now.tv_sec - st.st_mtim.tv_sec) * 1000 +
			((int64_t)now.tv_nsec - st.st_mtim.tv_nsec) / 1000000;
	cr_expect(proc_elapsed(run) >= 550 && lived_ms <= 1150,
			"a run with -l 1000 --grace 400 ended %" PRId64 " ms after it started (%" PRId64
			" ms after its command did): the command outlived its lease",
			proc_elapsed(run), lived_ms);
	proc_free(run);
	remove_tmpdir(dir, ARGS("started"));
}

/* The hold vanished while the command ran, and the command ended before any renewal. */
Test(cli, run_lock_lost_found_at_release_exits_70, .timeout = 60)
{
	rh_server *s = dl_srv;
	char script[256];
	snprintf(script, sizeof script, "redis-cli -p %d DEL cli-gone >/dev/null",
			rh_server_port(s));

	proc *run = DLOCK("-n", rh_server_uri(s), "--timeout", TMO, "run", "cli-gone", "--", "sh",
			"-c", script);
	EXPECT_STATUS(run, 70);
	cr_expect(strstr(run->err, "lost") != NULL, "stderr: %s", run->err);
	proc_free(run);
}

/* A key another lock library holds: its own exit status and words, on every command. */
Test(cli, key_of_another_library_exits_65_and_says_so, .timeout = 60)
{
	rh_server *s[3];
	char nodes[256];
	cr_assert_eq(rh_servers_start(s, 3, NULL), 0);
	snprintf(nodes, sizeof nodes, "%s,%s,%s", rh_server_uri(s[0]), rh_server_uri(s[1]),
			rh_server_uri(s[2]));
	for (int i = 0; i < 3; i++)
		freeReplyObject(rh_command(s[i], "SET cli-foreign some-token"));

	proc *one = DLOCK("-n", rh_server_uri(s[0]), "--timeout", TMO, "run", "-w", "0",
			"cli-foreign", "--", "true");
	EXPECT_STATUS(one, 65);
	cr_expect(strstr(one->err,
				  "\"cli-foreign\" is a string of another program "
				  "(another lock library?), not a lock") != NULL,
			"stderr: %s", one->err);
	EXPECT_ONE_LINE_ERR(one);
	proc_free(one);

	proc *red = DLOCK("-n", nodes, "--timeout", TMO, "run", "cli-foreign", "--", "true");
	EXPECT_STATUS(red, 65);
	cr_expect(strstr(red->err, "another lock library?") != NULL, "stderr: %s", red->err);
	proc_free(red);

	proc *acq = DLOCK("-n", nodes, "--timeout", TMO, "acquire", "-l", "1000", "--owner", "x",
			"cli-foreign");
	EXPECT_STATUS(acq, 65);
	proc_free(acq);

	proc *st = DLOCK("-n", nodes, "--timeout", TMO, "status", "cli-foreign");
	cr_expect_neq(st->status, 0, "status with a node answering an error exits 0");
	proc_free(st);
	for (int i = 0; i < 3; i++)
		rh_server_free(s[i]);
}

/* A wait rides out a server restart: it is not "unreachable" until the wait ends. */
Test(cli, run_wait_rides_out_a_server_restart, .timeout = 60)
{
	rh_server *s = rh_server_start(NULL);
	cr_assert_not_null(s);

	cr_assert_eq(rh_server_kill(s), 0);
	proc *run = dlock_bg(ARGS("-n", rh_server_uri(s), "--timeout", TMO, "run", "-w", "10000",
			"cli-restart", "--", "true"));
	dl_sleep_ms(1500);
	cr_assert_eq(rh_server_restart(s), 0);
	proc_wait(run, HARD_TIMEOUT_S);
	EXPECT_STATUS(run, 0);
	proc_free(run);
	rh_server_free(s);
}

/* ... and a majority of a RedLock's servers gone for a while. */
Test(cli, redlock_run_wait_rides_out_a_majority_outage, .timeout = 60)
{
	rh_server *s[5];
	char nodes[512] = "";
	cr_assert_eq(rh_servers_start(s, 5, NULL), 0);
	for (int i = 0; i < 5; i++) {
		strcat(nodes, i ? "," : "");
		strcat(nodes, rh_server_uri(s[i]));
	}
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_server_pause(s[i]), 0);
	proc *run = dlock_bg(ARGS("-n", nodes, "--timeout", TMO, "--restart-guard", "0", "run",
			"-w", "15000", "cli-outage", "--", "true"));
	dl_sleep_ms(2500);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rh_server_resume(s[i]), 0);
	proc_wait(run, HARD_TIMEOUT_S);
	EXPECT_STATUS(run, 0);
	cr_expect_geq(proc_elapsed(run), 2400, "acquired while a majority was paused?");
	proc_free(run);
	for (int i = 0; i < 5; i++)
		rh_server_free(s[i]);
}

/* ---- 13. servers that cannot answer end a wait by themselves -------------------- */

/* A typo'd host: `run` without -w gives up on a server that never answered
 * within the first-contact period (5 s), with one line naming it. A .invalid
 * name never resolves. */
Test(cli, run_without_w_on_an_unresolvable_host_exits_69_within_5_s, .timeout = 60)
{
	proc *p = DLOCK("-n", "redis://no-such-host.invalid:6379", "--timeout", TMO, "run",
			"cli-typo", "--", "true");
	EXPECT_STATUS(p, 69);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, "no-such-host.invalid:6379") != NULL &&
					strstr(p->err, "never answered") != NULL,
			"stderr should name the host and say it never answered: %s", p->err);
	cr_expect_lt(proc_elapsed(p), 5000, "a typo'd host took %" PRId64 " ms to give up",
			proc_elapsed(p));
	proc_free(p);

	/* acquire -w: the same period, whatever the wait. */
	p = DLOCK("-n", "redis://no-such-host.invalid:6379", "--timeout", TMO, "acquire", "-w",
			"60000", "-l", "1000", "--owner", "me:1", "cli-typo");
	EXPECT_STATUS(p, 69);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect_lt(proc_elapsed(p), 5000, "acquire -w 60000 took %" PRId64 " ms",
			proc_elapsed(p));
	proc_free(p);
}

/*
 * The same for a Sentinel URI whose sentinels do not resolve: each try asks
 * the three in turn within one connect timeout (it took 5.3 s when a try
 * asked them twice and a lost DNS reply held a lookup for the resolver's
 * 5 s).
 */
Test(cli, run_without_w_on_unresolvable_sentinels_exits_69_within_5_s, .timeout = 60)
{
	const char *uri = "redis+sentinel://s1.invalid,s2.invalid,s3.invalid/mymaster";
	const char *const *runs[] = {
		ARGS("-n", uri, "--timeout", TMO, "run", "cli-typo", "--", "true"),
		ARGS("-n", uri, "run", "cli-typo", "--", "true"), /* the default timeout: 1 s */
		ARGS("-n", uri, "--timeout", TMO, "acquire", "-w", "60000", "-l", "1000",
				"--owner", "me:1", "cli-typo"),
	};

	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		proc *p = dlock_env(NULL, runs[i]);
		EXPECT_STATUS(p, 69);
		EXPECT_ONE_LINE_ERR(p);
		cr_expect(strstr(p->err, "sentinel:mymaster") != NULL &&
						strstr(p->err, ".invalid:26379") != NULL &&
						strstr(p->err, "never answered") != NULL,
				"`%s`: stderr should name the sentinels and say they never answered: %s",
				p->desc, p->err);
		cr_expect_lt(proc_elapsed(p), 5000, "`%s` took %" PRId64 " ms to give up", p->desc,
				proc_elapsed(p));
		cr_log_info("`%s`: %" PRId64 " ms", p->desc, proc_elapsed(p));
		proc_free(p);
	}
}

/*
 * A name lookup that does not return (a resolver whose replies are lost:
 * the slowdns shim holds getaddrinfo 10 s for *.hang.invalid) is given up
 * at the connect timeout like a connect: 69 within 5 s, naming the host.
 * Before, the first try alone took the lookup's 10 s.
 */
Test(cli, a_hung_name_lookup_ends_within_the_first_contact_period, .timeout = 60)
{
	char asan[512];
	const char *prior = getenv("ASAN_OPTIONS");

	/* An ASan build's runtime must come first unless told otherwise. */
	snprintf(asan, sizeof asan, "ASAN_OPTIONS=%s%sverify_asan_link_order=0",
			prior != NULL ? prior : "", prior != NULL && *prior ? ":" : "");
	proc *p = dlock_env(ARGS("LD_PRELOAD=" SLOWDNS_PATH, asan),
			ARGS("-n", "redis://db.hang.invalid:6379", "--timeout", TMO, "run",
					"cli-hang", "--", "true"));
	EXPECT_STATUS(p, 69);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, "db.hang.invalid:6379") != NULL &&
					strstr(p->err, "name lookup") != NULL &&
					strstr(p->err, "never answered") != NULL,
			"stderr should name the host and its lookup: %s", p->err);
	cr_expect_lt(proc_elapsed(p), 5000, "a hung lookup took %" PRId64 " ms to give up",
			proc_elapsed(p));
	cr_log_info("a hung lookup: %" PRId64 " ms: %s", proc_elapsed(p), p->err);
	proc_free(p);
}

/* Refused credentials are not an outage: no wait, one line. */
Test(cli, run_without_w_with_a_wrong_password_exits_at_once, .timeout = 60)
{
	const char *const extra[] = { "--requirepass", "s3cret", NULL };
	rh_server *s = rh_server_start(extra);
	cr_assert_not_null(s);
	char uri[96], node[64];
	snprintf(uri, sizeof uri, "redis://:wrong@127.0.0.1:%d", rh_server_port(s));
	node_label(s, node, sizeof node);

	proc *p = DLOCK("-n", uri, "--timeout", TMO, "run", "cli-auth", "--", "true");
	EXPECT_STATUS(p, 69);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, node) != NULL, "stderr names %s: %s", node, p->err);
	cr_expect_lt(proc_elapsed(p), 1000, "a refused password took %" PRId64 " ms",
			proc_elapsed(p));
	proc_free(p);
	rh_server_free(s);
}

/* A TLS server whose self-signed certificate nobody trusts: no wait either. */
Test(cli, run_without_w_with_an_untrusted_certificate_exits_at_once, .timeout = 60)
{
	char dir[64], crt[128], key[128], cmd[768], port[16], uri[96];
	if (getenv("DLOCK_TEST_NO_TLS") != NULL) /* the version matrix's servers */
		cr_skip_test("DLOCK_TEST_NO_TLS: this redis-server was built without TLS");
	tmpdir_with(dir, crt, "self.crt", key, "self.key");
	snprintf(cmd, sizeof cmd,
			"openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
			"-keyout %s -out %s -days 2 -subj /CN=self "
			"-addext subjectAltName=IP:127.0.0.1 2>/dev/null",
			key, crt);
	cr_assert_eq(system(cmd), 0, "failed: %s", cmd);
	rh_server *s = NULL;
	int tls_port = 0;
	for (int attempt = 0; attempt < 5 && s == NULL; attempt++) {
		tls_port = rh_free_port();
		snprintf(port, sizeof port, "%d", tls_port);
		const char *args[] = { "--tls-port", port, "--tls-cert-file", crt,
			"--tls-key-file", key, "--tls-ca-cert-file", crt, "--tls-auth-clients",
			"no", NULL };
		s = rh_server_start(args);
	}
	cr_assert_not_null(s, "could not start a TLS redis-server");
	snprintf(uri, sizeof uri, "rediss://127.0.0.1:%d", tls_port);

	proc *p = DLOCK("-n", uri, "--timeout", TMO, "run", "cli-tls", "--", "true");
	EXPECT_STATUS(p, 69);
	EXPECT_ONE_LINE_ERR(p);
	cr_expect(strstr(p->err, "not trusted") != NULL, "stderr: %s", p->err);
	cr_expect_lt(proc_elapsed(p), 1000, "an untrusted certificate took %" PRId64 " ms",
			proc_elapsed(p));
	proc_free(p);
	rh_server_free(s);
	remove_tmpdir(dir, ARGS("self.crt", "self.key"));
}
