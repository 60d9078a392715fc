/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test harness: starting a Redis Cluster and waiting until it is whole. See
 * rh_cluster.h for the contract; who serves a slot, failovers and slot
 * moves are in rh_cluster_ops.c.
 *
 * Each server gets --cluster-port with a free port of its own: the default
 * bus port (port + 10000) does not exist for ports above 55535, which the
 * free-port picker hands out often. Redis 6 has no --cluster-port: there the
 * harness picks a port whose port + 10000 is free. redis-cli runs as a child with
 * PR_SET_PDEATHSIG, like the servers, with a deadline.
 */
#include "rh_cluster_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef REDIS_CLI_PATH
#define REDIS_CLI_PATH "redis-cli"
#endif

#define RHC_START_ATTEMPTS 3
#define RHC_CREATE_TIMEOUT_MS 60000
#define RHC_OK_TIMEOUT_MS 30000
#define RHC_POLL_MS 50
#define RHC_MAX_SERVERS 64

void rhc_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
	}
}

int rhc_running(const rh_cluster *c, int i)
{
	return i >= 0 && i < c->n && rh_server_pid(c->servers[i]) > 0;
}

char *rhc_text(rh_server *s, const char *cmd, const char *sub)
{
	redisReply *r = rh_command(s, "%s %s", cmd, sub);
	char *text = NULL;
	if (r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS))
		text = strdup(r->str);
	if (r)
		freeReplyObject(r);
	return text;
}

int rhc_get(const char *text, const char *name, char *out, size_t len)
{
	size_t n = strlen(name);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, name, n) != 0 || p[n] != ':')
			continue;
		size_t v = strcspn(p + n + 1, "\r\n");
		snprintf(out, len, "%.*s", (int)v, p + n + 1);
		return 0;
	}
	return -1;
}

int rhc_field(rh_server *s, const char *cmd, const char *sub, const char *name, char *out,
		size_t len)
{
	char *text = rhc_text(s, cmd, sub);
	int rc = text ? rhc_get(text, name, out, len) : -1;
	free(text);
	return rc;
}

rh_server *rhc_by_port(rh_cluster *c, int port)
{
	for (int i = 0; i < c->n; i++)
		if (rh_server_port(c->servers[i]) == port)
			return c->servers[i];
	return NULL;
}

/* ---- accessors ------------------------------------------------------------ */

int rh_cluster_size(const rh_cluster *c)
{
	return c ? c->n : 0;
}

rh_server *rh_cluster_server(rh_cluster *c, int i)
{
	return c && i >= 0 && i < c->n ? c->servers[i] : NULL;
}

int rh_cluster_index(const rh_cluster *c, const rh_server *s)
{
	for (int i = 0; c && s && i < c->n; i++)
		if (c->servers[i] == s)
			return i;
	return -1;
}

const char *rh_cluster_node_id(const rh_cluster *c, int i)
{
	return c && i >= 0 && i < c->n ? c->ids[i] : NULL;
}

const char *rh_cluster_seed_uri(const rh_cluster *c)
{
	return c ? c->seed : NULL;
}

int rh_cluster_is_primary(rh_cluster *c, int i)
{
	char role[32];
	if (!c || i < 0 || i >= c->n ||
			rhc_field(c->servers[i], "INFO", "replication", "role", role,
					sizeof role) != 0)
		return -1;
	return strcmp(role, "master") == 0;
}

void rh_cluster_free(rh_cluster *c)
{
	if (!c)
		return;
	for (int i = 0; c->servers && i < c->n; i++)
		rh_server_free(c->servers[i]);
	free(c->servers);
	free(c->ids);
	free(c->password);
	free(c->seed);
	free(c);
}

/* ---- waiting until the cluster is whole ------------------------------------- */

/* What a server's CLUSTER INFO and INFO replication say it lacks, or NULL. */
static const char *rhc_lacks(const rh_cluster *c, const char *info, const char *repl)
{
	char v[64];
	if (!info || !repl)
		return "an answer to CLUSTER INFO and INFO replication";
	if (rhc_get(info, "cluster_state", v, sizeof v) != 0 || strcmp(v, "ok") != 0)
		return "cluster_state:ok";
	if (rhc_get(info, "cluster_slots_assigned", v, sizeof v) != 0 || atoi(v) != RHC_SLOTS)
		return "all 16384 slots assigned";
	if (rhc_get(info, "cluster_known_nodes", v, sizeof v) != 0 || atoi(v) != c->n)
		return "knowing every node (cluster_known_nodes)";
	if (rhc_get(repl, "role", v, sizeof v) != 0)
		return "a role in INFO replication";
	if (strcmp(v, "slave") != 0)
		return NULL;
	if (rhc_get(repl, "master_link_status", v, sizeof v) != 0 || strcmp(v, "up") != 0)
		return "its link to its primary up";
	if (rhc_get(repl, "master_sync_in_progress", v, sizeof v) != 0 || strcmp(v, "0") != 0)
		return "its first sync done";
	return NULL;
}

static const char *rhc_node_lacks(rh_cluster *c, int i)
{
	char *info = rhc_text(c->servers[i], "CLUSTER", "INFO");
	char *repl = rhc_text(c->servers[i], "INFO", "replication");
	const char *lacks = rhc_lacks(c, info, repl);
	free(info);
	free(repl);
	return lacks;
}

/* Whether every running server sees the same owner for every slot. */
static const char *rhc_disagreement(rh_cluster *c, int *mine, int *theirs)
{
	int first = 1;
	for (int i = 0; i < c->n; i++) {
		if (!rhc_running(c, i))
			continue;
		if (rhc_owner_ports(c->servers[i], first ? mine : theirs) != 0)
			return "an answer to CLUSTER SHARDS";
		if (!first && memcmp(mine, theirs, RHC_SLOTS * sizeof *mine) != 0)
			return "every node to agree who serves each slot";
		first = 0;
	}
	return NULL;
}

int rh_cluster_await_ok(rh_cluster *c, int timeout_ms)
{
	if (!c)
		return -1;
	int *mine = malloc(2 * RHC_SLOTS * sizeof *mine);
	if (!mine)
		return -1;
	int64_t deadline = rh_now_ms() + timeout_ms;
	const char *lacks = NULL;
	int who = -1;
	for (;;) {
		lacks = NULL;
		for (int i = 0; i < c->n && !lacks; i++)
			if (rhc_running(c, i) && (lacks = rhc_node_lacks(c, i)))
				who = i;
		if (!lacks && (lacks = rhc_disagreement(c, mine, mine + RHC_SLOTS)))
			who = -1;
		if (!lacks || rh_now_ms() >= deadline)
			break;
		rhc_sleep_ms(RHC_POLL_MS);
	}
	free(mine);
	if (!lacks)
		return 0;
	if (who >= 0)
		fprintf(stderr, "rh_cluster: after %d ms, node %d (port %d) still lacks %s\n",
				timeout_ms, who, rh_server_port(c->servers[who]), lacks);
	else
		fprintf(stderr, "rh_cluster: after %d ms, still waiting for %s\n", timeout_ms,
				lacks);
	return -1;
}

/* ---- starting -------------------------------------------------------------- */

/* A bare program name resolved on PATH now, so the child can use execv. */
static void rhc_which(const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s", name);
	if (strchr(name, '/'))
		return;
	const char *path = getenv("PATH");
	for (path = path ? path : "/usr/bin:/bin"; *path;) {
		size_t n = strcspn(path, ":");
		char cand[PATH_MAX];
		if (n > 0 &&
				snprintf(cand, sizeof cand, "%.*s/%s", (int)n, path, name) <
						(int)sizeof cand &&
				access(cand, X_OK) == 0) {
			snprintf(out, len, "%s", cand);
			return;
		}
		path += n + (path[n] == ':');
	}
}

static void rhc_show_log(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512];
	fprintf(stderr, "rh_cluster: %s:\n", path);
	while (f && fgets(line, sizeof line, f))
		fputs(line, stderr);
	if (f)
		fclose(f);
}

/* Run argv (argv[0] a path) with its output in `log`; its exit status, or -1. */
static int rhc_run(char *const *argv, const char *log, int timeout_ms)
{
	int maxfd = (int)sysconf(_SC_OPEN_MAX);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		/* Child: async-signal-safe calls only. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		int in = open("/dev/null", O_RDONLY);
		int out = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
			_exit(126);
		for (int fd = 3; fd < (maxfd > 0 && maxfd < 65536 ? maxfd : 65536); fd++)
			close(fd);
		execv(argv[0], argv);
		_exit(127);
	}
	int64_t deadline = rh_now_ms() + timeout_ms;
	int status;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		if ((r < 0 && errno != EINTR) || rh_now_ms() >= deadline) {
			fprintf(stderr, "rh_cluster: %s did not finish within %d ms\n", argv[0],
					timeout_ms);
			kill(pid, SIGKILL);
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
			}
			return -1;
		}
		rhc_sleep_ms(20);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* redis-cli --cluster create over every server; 0 or -1 (its log on stderr). */
static int rhc_create(rh_cluster *c)
{
	char cli[PATH_MAX], log[PATH_MAX], reps[16];
	rhc_which(REDIS_CLI_PATH, cli, sizeof cli);
	snprintf(log, sizeof log, "%s/cluster-create.log", rh_server_dir(c->servers[0]));
	snprintf(reps, sizeof reps, "%d", c->replicas);
	char **argv = calloc((size_t)c->n + 12, sizeof *argv);
	char(*addr)[32] = calloc((size_t)c->n, sizeof *addr);
	int rc = -1;
	if (argv && addr) {
		int k = 0;
		argv[k++] = cli;
		argv[k++] = (char *)"--cluster";
		argv[k++] = (char *)"create";
		for (int i = 0; i < c->n; i++) {
			snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d",
					rh_server_port(c->servers[i]));
			argv[k++] = addr[i];
		}
		argv[k++] = (char *)"--cluster-replicas";
		argv[k++] = reps;
		argv[k++] = (char *)"--cluster-yes";
		if (c->password) {
			argv[k++] = (char *)"-a";
			argv[k++] = c->password;
			argv[k++] = (char *)"--no-auth-warning";
		}
		rc = rhc_run(argv, log, RHC_CREATE_TIMEOUT_MS);
	}
	free(argv);
	free(addr);
	if (rc != 0) {
		fprintf(stderr, "rh_cluster: %s --cluster create failed (exit %d)\n", cli, rc);
		rhc_show_log(log);
	}
	return rc == 0 ? 0 : -1;
}

/* One cluster-enabled server with a bus port of its own. */
static rh_server *rhc_start_server(const char *const *extra)
{
	size_t n = 0;
	while (extra && extra[n])
		n++;
	const char **args = calloc(n + 16, sizeof *args);
	if (!args)
		return NULL;
	rh_server *s = NULL;
	for (int attempt = 0; attempt < RHC_START_ATTEMPTS && !s; attempt++) {
		char bus[16];
		snprintf(bus, sizeof bus, "%d", rh_free_port());
		size_t k = 0;
		static const char *const fixed[] = { "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", /* in its --dir */
			"--cluster-node-timeout", "1000", "--repl-diskless-sync-delay", "0",
			"--cluster-port" };
		size_t nfixed = sizeof fixed / sizeof fixed[0];
		if (rh_server_version() < 70000)
			nfixed--; /* no --cluster-port: see above */
		for (size_t i = 0; i < nfixed; i++)
			args[k++] = fixed[i];
		if (nfixed == sizeof fixed / sizeof fixed[0])
			args[k++] = bus;
		char tls[16];
		snprintf(tls, sizeof tls, "%d", rh_free_port());
		for (size_t i = 0; i < n; i++) /* "--tls-port auto": a free port of its own */
			args[k++] = i > 0 && strcmp(extra[i - 1], "--tls-port") == 0 &&
							strcmp(extra[i], "auto") == 0
					? tls
					: extra[i];
		args[k] = NULL;
		s = rh_server_start(args);
	}
	free(args);
	return s;
}

static int rhc_setup(rh_cluster *c, const char *const *extra)
{
	for (size_t i = 0; extra && extra[i]; i++)
		if (strcmp(extra[i], "--requirepass") == 0 && extra[i + 1]) {
			free(c->password);
			if (!(c->password = strdup(extra[i + 1])))
				return -1;
		}
	size_t seedlen = 32 + (size_t)c->n * 24;
	c->servers = calloc((size_t)c->n, sizeof *c->servers);
	c->ids = calloc((size_t)c->n, sizeof *c->ids);
	c->seed = malloc(seedlen);
	if (!c->servers || !c->ids || !c->seed)
		return -1;
	size_t used = (size_t)snprintf(c->seed, seedlen, "redis+cluster://");
	for (int i = 0; i < c->n; i++) {
		if (!(c->servers[i] = rhc_start_server(extra)))
			return -1;
		redisReply *r = rh_command(c->servers[i], "CLUSTER MYID");
		int ok = r && r->type == REDIS_REPLY_STRING && r->len == RHC_ID_LEN;
		if (ok)
			memcpy(c->ids[i], r->str, RHC_ID_LEN + 1);
		if (r)
			freeReplyObject(r);
		if (!ok) {
			fprintf(stderr, "rh_cluster: no node id from port %d\n",
					rh_server_port(c->servers[i]));
			return -1;
		}
		used += (size_t)snprintf(c->seed + used, seedlen - used, "%s127.0.0.1:%d",
				i ? "," : "", rh_server_port(c->servers[i]));
	}
	return 0;
}

rh_cluster *rh_cluster_start(int primaries, int replicas_per_primary, const char *const *extra)
{
	if (primaries < 3 || replicas_per_primary < 0 ||
			primaries * (1 + replicas_per_primary) > RHC_MAX_SERVERS) {
		fprintf(stderr,
				"rh_cluster: %d primaries with %d replicas each: redis-cli needs "
				"3 primaries or more, and at most %d servers\n",
				primaries, replicas_per_primary, RHC_MAX_SERVERS);
		return NULL;
	}
	rh_cluster *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->primaries = primaries;
	c->replicas = replicas_per_primary;
	c->n = primaries * (1 + replicas_per_primary);
	if (rhc_setup(c, extra) != 0 || rhc_create(c) != 0 ||
			rh_cluster_await_ok(c, RHC_OK_TIMEOUT_MS) != 0) {
		rh_cluster_free(c);
		return NULL;
	}
	return c;
}

const char *rh_cluster_tls_seed_uri(rh_cluster *c)
{
	static _Thread_local char uri[1024];
	size_t at = (size_t)snprintf(uri, sizeof uri, "rediss+cluster://");

	for (int i = 0; i < rh_cluster_size(c) && at < sizeof uri; i++) {
		redisReply *r = rh_command(rh_cluster_server(c, i), "CONFIG GET tls-port");
		if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
			at += (size_t)snprintf(uri + at, sizeof uri - at, "%s127.0.0.1:%s",
					i ? "," : "", r->element[1]->str);
		if (r)
			freeReplyObject(r);
	}
	return uri;
}
