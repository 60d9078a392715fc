/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock-bench - the measurements of SPEC §9, side by side in one run.
 *
 * Scenarios (--scenario LIST, default 1,2,3,4,5):
 *   1  uncontended lock+unlock: RLock on 1 server (dlock_lock_acquire(l, NULL, 0, 10000)
 *      + dlock_lock_release), RedLock on 3 and 5 servers (dlock_redlock_acquire(r,
 *      NULL, 0, 10000) + dlock_redlock_release), restart guard off. Beside it,
 *      "dlock-async": the same pairs through the asynchronous calls
 *      (acquire_async, then release_async from the loop, an owner of the
 *      lock's own), one pair in flight at a time, on a dlock_loop this
 *      thread drives with dlock_loop_run, clients opened on it - what a
 *      promise-based peer (node-redlock) measures. A RedLock's async
 *      acquisition goes on at its quorum and its release calls back once a
 *      quorum let go, the rest finishing on the loop during the next pair.
 *      Blocking, async and floor alternate in blocks.
 *   2  the floor: the same two Lua round trips (dlock's own acquire and
 *      release scripts, EVALSHA, the same argument shapes) with bare
 *      hiredis, on 1 server and fanned out to 3 and 5 (every command
 *      written before any reply is read). --floor-del yes adds the DEL of
 *      an unlock latch that dlock used to send after each release (no
 *      longer: its release is safe to repeat by the believed count).
 *   3  throughput: 1, 2 and 4 threads sharing one client (1 server), each on
 *      its own lock name, lock+unlock pairs for --duration seconds; the floor
 *      with one hiredis connection per thread beside it.
 *   4  contended hand-off: 4 threads on one lock; the time from right before
 *      the holder calls dlock_lock_release to right after the next holder's
 *      dlock_lock_acquire returns, in µs and in round trips (the floor's single
 *      EVALSHA round trip p50 on 1 server, measured between the 4 chunks of
 *      hand-offs). A releaser waits until another thread holds the lock
 *      before asking again, so every hand-off measured goes to a waiter.
 *   5  one of 5 servers paused (SIGSTOP) with command_timeout_ms = 50:
 *      RedLock acquisition and lock+unlock latency, all 5 up, then paused; the
 *      floor beside it (writes to all 5, waits for the 4 live ones).
 *   6  asynchronous against blocking, on 1 and 5 servers (--async-servers):
 *      acquire+release cycles (wait 0, 10 s lease) on distinct uncontended
 *      names for --async-seconds (10) after --async-warmup (2) seconds,
 *      (a) on one dlock_loop driven by this thread alone (dlock_loop_run),
 *      one client per server opened on it, --async-window (256) cycles in
 *      flight at once (acquire_async, then release_async from its
 *      callback, then the next cycle); (b) 8 threads (--async-threads)
 *      each doing try + unlock on names of their own, sharing one default
 *      client per server. Single locks spread round-robin over the servers,
 *      and on 3 or more servers RedLocks over all of them. Acquisitions per
 *      second, process CPU (user+sys) and the servers' CPU (/proc utime +
 *      stime) per acquisition, the connections the servers accepted per
 *      cycle, p50/p99 of a cycle; (c) for single locks, the pipelined
 *      floor: the same scripts over bare hiredis, --async-window cycles per
 *      round written at once on one connection per server. At the end a
 *      markdown table with the ratios and the targets (>= 3x the
 *      rate at <= 0.7x the CPU).
 *   7  the event hook's and the stats' cost (dlock/stats.h): RLock lock+unlock
 *      on 1 server through a client without on_event and one whose on_event
 *      counts (alternating in blocks, --iterations each), their rates and
 *      ratio; then the stats work of one pair (the counters, histograms and
 *      hook calls a pair makes, and its two clock reads) timed alone over
 *      1e6 rounds, as a share of the pair. Counters are kept either way, so
 *      the rows show the hook's cost and the last line the stats' own.
 *
 * Latencies on CLOCK_MONOTONIC, in µs; client CPU per operation is
 * getrusage(RUSAGE_SELF) user+sys over the measured loop / operations (all
 * threads of this process, dlock's background threads included; not the
 * redis-servers). An operation is one lock+unlock pair. Scenarios 1 and 2
 * (and dlock and the floor in 5) alternate in blocks of --block pairs, so
 * that both see the same (shared, noisy) machine; in 1 and 2 the servers' own
 * CPU per operation (INFO cpu) is reported too.
 *
 * Without --uris the bench starts its own 5 redis-servers on free 127.0.0.1
 * ports and stops them on exit. With --uris it uses those servers (loopback
 * only); scenario 5 then needs --pause-pid, the pid of one of them, which is
 * checked against INFO's process_id. Only 127.0.0.1 is ever contacted.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "clock.h"

#include "dlock.h"
#include "single/scripts.h" /* dlock__script_acquire, dlock__script_release */
#include "core/base/time.h"    /* scenario 7: the clock reads stats adds */
#include "core/drive/stats.h"  /* scenario 7: the stats work of a pair */

#define MAX_SERVERS 16
#define LEASE_MS 10000
#define LEASE_S "10000"

/* ------------------------------------------------------------------------ */
/* Options                                                                    */

static struct {
	long iterations;        /* scenarios 1, 2 */
	long iterations_paused; /* scenario 5 */
	long warmup;            /* warm-up pairs before each measured loop */
	long warmup_paused;     /* scenario 5 */
	double duration;        /* scenario 3, seconds */
	long handoffs;          /* scenario 4 */
	long block;             /* pairs per alternating block */
	int scenarios[8];
	int async_window;       /* scenario 6: cycles in flight on the loop */
	int async_threads;      /* scenario 6: threads of the blocking row */
	double async_seconds;   /* scenario 6: measured seconds per row */
	double async_warmup;    /* scenario 6: warm-up seconds per row */
	int async_pool;         /* scenario 6: the async clients' pool_size (0: dlock's) */
	int async_counts[8];    /* scenario 6: server counts */
	int nasync_counts;
	int json;
	int samples;            /* --samples: raw pair latencies in the JSON */
	int floor_del;          /* pipeline a latch DEL after the floor's release (dlock's old cost) */
	int threads[8];
	int nthreads;
	int server_counts[8];   /* scenarios 1, 2 */
	int ncounts;
	int paused_connect_timeout_ms; /* 0 = dlock's default */
	int pause_index;        /* our own servers: which one to pause */
	pid_t pause_pid;        /* with --uris */
	const char *redis_server;
	char *uris[MAX_SERVERS];
	int nuris;
} opt = {
	.iterations = 20000,
	.iterations_paused = 300,
	.warmup = 2000,
	.warmup_paused = 20,
	.duration = 5,
	.handoffs = 2000,
	.block = 500,
	.floor_del = 0,
	.threads = { 1, 2, 4 },
	.nthreads = 3,
	.server_counts = { 1, 3, 5 },
	.ncounts = 3,
	.pause_index = 4,
	.async_window = 256,
	.async_threads = 8,
	.async_seconds = 10,
	.async_warmup = 2,
	.async_counts = { 1, 5 },
	.nasync_counts = 2,
	.redis_server = "redis-server",
};

static FILE *out; /* human-readable output: stdout, or stderr with --json */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "dlock-bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static void note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fflush(out);
}

/* ------------------------------------------------------------------------ */
/* Clocks and statistics                                                      */

typedef struct dist {
	long n;
	double p50, p99, mean, max;
} dist;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentiles of n samples in ns, reported in µs. Sorts ns. */
static dist dist_of(uint64_t *ns, long n)
{
	dist d = { n, NAN, NAN, NAN, NAN };
	double sum = 0;
	long i;

	if (n <= 0)
		return d;
	qsort(ns, (size_t)n, sizeof(*ns), cmp_u64);
	for (i = 0; i < n; i++)
		sum += (double)ns[i];
	d.p50 = (double)ns[(long)ceil(0.50 * (double)n) - 1] / 1e3;
	d.p99 = (double)ns[(long)ceil(0.99 * (double)n) - 1] / 1e3;
	d.mean = sum / (double)n / 1e3;
	d.max = (double)ns[n - 1] / 1e3;
	return d;
}

/* ------------------------------------------------------------------------ */
/* Results                                                                    */

typedef struct result {
	int scenario;
	char impl[16];   /* dlock | floor */
	char what[32];   /* lock+unlock | handoff | throughput */
	int servers;
	int threads;
	int paused;      /* servers paused during the run */
	dist pair;       /* per operation */
	dist acq;        /* acquire half (scenarios 1, 2, 5) */
	dist rel;        /* release half */
	double ops_per_s;
	double cpu_us_per_op;
	double server_cpu_us_per_op; /* redis-servers' CPU (INFO cpu), NAN if not measured */
	double conns_per_op; /* connections the servers accepted per operation (scenario 6), or NAN */
	long errors;
	double rt_us;    /* scenario 4: the round trip used as unit */
	char note[160];
	/* Totals, so runs can be merged (compare.sh --rounds). */
	long iters;
	double wall_s, cpu_us_total, server_cpu_us_total;
	uint64_t *samples; /* --samples: the pair latencies, ns (sorted) */
	long nsamples;
} result;

static result results[128];
static int nresults;
static double g_rt_us = NAN; /* floor single EVALSHA round trip p50, 1 server */

static result *new_result(int scenario, const char *impl, const char *what, int servers)
{
	result *r;

	if (nresults == (int)(sizeof(results) / sizeof(results[0])))
		die("too many results");
	r = &results[nresults++];
	memset(r, 0, sizeof(*r));
	r->scenario = scenario;
	snprintf(r->impl, sizeof(r->impl), "%s", impl);
	snprintf(r->what, sizeof(r->what), "%s", what);
	r->servers = servers;
	r->threads = 1;
	r->pair = r->acq = r->rel = (dist){ 0, NAN, NAN, NAN, NAN };
	r->rt_us = NAN;
	r->server_cpu_us_per_op = NAN;
	r->conns_per_op = NAN;
	r->wall_s = r->cpu_us_total = r->server_cpu_us_total = NAN;
	return r;
}

static void print_result(const result *r)
{
	note("  %-5s %-11s n=%d%s thr=%d  p50 %8.1f  p99 %8.1f  mean %8.1f  max %9.1f us"
			"  %8.0f ops/s  cpu %6.1f us/op",
			r->impl, r->what, r->servers, r->paused ? "(1 paused)" : "", r->threads,
			r->pair.p50, r->pair.p99, r->pair.mean, r->pair.max, r->ops_per_s,
			r->cpu_us_per_op);
	if (!isnan(r->server_cpu_us_per_op))
		note("  server cpu %.1f us/op", r->server_cpu_us_per_op);
	if (!isnan(r->conns_per_op))
		note("  new connections %.3f/op", r->conns_per_op);
	if (!isnan(r->acq.p50))
		note("  [acq p50 %.1f p99 %.1f | rel p50 %.1f p99 %.1f]", r->acq.p50, r->acq.p99,
				r->rel.p50, r->rel.p99);
	if (!isnan(r->rt_us))
		note("  [= %.2f / %.2f RT of %.1f us]", r->pair.p50 / r->rt_us,
				r->pair.p99 / r->rt_us, r->rt_us);
	if (r->errors)
		note("  errors=%ld", r->errors);
	if (r->note[0])
		note("  (%s)", r->note);
	note("\n");
}

static void json_num(FILE *f, const char *k, double v, int comma)
{
	if (isnan(v))
		fprintf(f, "\"%s\": null", k);
	else
		fprintf(f, "\"%s\": %.3f", k, v);
	if (comma)
		fputs(", ", f);
}

static void json_dist(FILE *f, const char *prefix, const dist *d)
{
	char k[64];

	snprintf(k, sizeof(k), "%sp50_us", prefix);
	json_num(f, k, d->p50, 1);
	snprintf(k, sizeof(k), "%sp99_us", prefix);
	json_num(f, k, d->p99, 1);
	snprintf(k, sizeof(k), "%smean_us", prefix);
	json_num(f, k, d->mean, 1);
	snprintf(k, sizeof(k), "%smax_us", prefix);
	json_num(f, k, d->max, 1);
}

/* ------------------------------------------------------------------------ */
/* Servers                                                                    */

typedef struct server {
	char uri[128];
	char host[64];
	int port;
	pid_t pid;      /* ours, or --pause-pid's */
	int ours;
	char dir[128];
} server;

static server servers[MAX_SERVERS];
static int nservers;
static volatile pid_t paused_pid; /* SIGCONT on any exit */
static char run_id[17];

static void cleanup(void)
{
	int i;

	if (paused_pid > 0) {
		kill(paused_pid, SIGCONT);
		paused_pid = 0;
	}
	for (i = 0; i < nservers; i++) {
		if (!servers[i].ours || servers[i].pid <= 0)
			continue;
		kill(servers[i].pid, SIGCONT);
		kill(servers[i].pid, SIGTERM);
	}
	for (i = 0; i < nservers; i++) {
		char cmd[256];

		if (!servers[i].ours || servers[i].pid <= 0)
			continue;
		waitpid(servers[i].pid, NULL, 0);
		servers[i].pid = 0;
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", servers[i].dir);
		if (system(cmd) != 0) {
			/* leave it */
		}
	}
}

static void on_signal(int sig)
{
	int i;

	/* Async-signal-safe part of cleanup(): resume, then stop our servers. */
	if (paused_pid > 0)
		kill(paused_pid, SIGCONT);
	for (i = 0; i < nservers; i++) {
		if (servers[i].ours && servers[i].pid > 0) {
			kill(servers[i].pid, SIGCONT);
			kill(servers[i].pid, SIGKILL);
		}
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static int pick_port(void)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

static redisContext *connect_to(const server *s, int timeout_ms)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	redisContext *c = redisConnectWithTimeout(s->host, s->port, tv);

	if (c == NULL || c->err) {
		if (c)
			redisFree(c);
		return NULL;
	}
	redisSetTimeout(c, tv);
	return c;
}

/* INFO server's process_id, or -1. */
static long server_process_id(const server *s, char *version, size_t vlen)
{
	redisContext *c = connect_to(s, 1000);
	redisReply *r;
	long pid = -1;
	char *p;

	if (c == NULL)
		return -1;
	r = redisCommand(c, "INFO server");
	if (r != NULL && r->type == REDIS_REPLY_STRING) {
		if ((p = strstr(r->str, "process_id:")) != NULL)
			pid = strtol(p + 11, NULL, 10);
		if (version != NULL && (p = strstr(r->str, "redis_version:")) != NULL)
			snprintf(version, vlen, "%.*s", (int)strcspn(p + 14, "\r\n"), p + 14);
	}
	freeReplyObject(r);
	redisFree(c);
	return pid;
}

static int start_server(server *s)
{
	int attempt;

	for (attempt = 0; attempt < 10; attempt++) {
		char port[16], log[192];
		pid_t parent = getpid(), pid;
		int i;

		s->port = pick_port();
		if (s->port <= 0)
			continue;
		snprintf(s->host, sizeof(s->host), "127.0.0.1");
		snprintf(s->uri, sizeof(s->uri), "redis://127.0.0.1:%d", s->port);
		snprintf(port, sizeof(port), "%d", s->port);
		snprintf(log, sizeof(log), "%s/redis.log", s->dir);
		pid = fork();
		if (pid < 0)
			return -1;
		if (pid == 0) {
			int devnull = open("/dev/null", O_RDWR);

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(127);
			if (devnull >= 0) {
				dup2(devnull, 0);
				dup2(devnull, 1);
				dup2(devnull, 2);
			}
			execlp(opt.redis_server, opt.redis_server, "--port", port, "--bind", "127.0.0.1",
					"--save", "", "--appendonly", "no", "--daemonize", "no",
					"--protected-mode", "no", "--dir", s->dir, "--logfile", log,
					(char *)NULL);
			_exit(127);
		}
		s->pid = pid;
		s->ours = 1;
		for (i = 0; i < 200; i++) {
			int status;

			if (waitpid(pid, &status, WNOHANG) == pid) {
				s->pid = 0;
				break; /* exited: port taken? try another */
			}
			if (server_process_id(s, NULL, 0) == (long)pid)
				return 0;
			usleep(25000);
		}
		if (s->pid > 0) {
			kill(s->pid, SIGKILL);
			waitpid(s->pid, NULL, 0);
			s->pid = 0;
		}
	}
	return -1;
}

static void parse_uri(server *s, const char *uri)
{
	const char *p = uri;
	const char *colon;

	snprintf(s->uri, sizeof(s->uri), "%s", uri);
	if (strncmp(p, "redis://", 8) == 0)
		p += 8;
	else if (strncmp(p, "rediss://", 9) == 0)
		p += 9;
	if (strchr(p, '@') != NULL)
		die("--uris: credentials are not supported by the bench (%s)", uri);
	colon = strchr(p, ':');
	snprintf(s->host, sizeof(s->host), "%.*s", (int)(colon ? colon - p : (long)strcspn(p, "/")), p);
	s->port = colon ? atoi(colon + 1) : 6379;
	if (strcmp(s->host, "127.0.0.1") != 0 && strcmp(s->host, "localhost") != 0)
		die("--uris: only 127.0.0.1 is allowed (%s)", uri);
	if (strcmp(s->host, "localhost") == 0)
		snprintf(s->host, sizeof(s->host), "127.0.0.1");
	if (strchr(p, '/') != NULL && atoi(strchr(p, '/') + 1) != 0)
		die("--uris: only db 0 (%s)", uri);
}

static void setup_servers(void)
{
	int i;

	if (opt.nuris > 0) {
		for (i = 0; i < opt.nuris; i++)
			parse_uri(&servers[i], opt.uris[i]);
		nservers = opt.nuris;
		if (opt.pause_pid > 0) {
			for (i = 0; i < nservers; i++)
				if (server_process_id(&servers[i], NULL, 0) == (long)opt.pause_pid)
					break;
			if (i == nservers)
				die("--pause-pid %ld is none of the --uris servers (INFO process_id)",
						(long)opt.pause_pid);
			servers[i].pid = opt.pause_pid;
			opt.pause_index = i;
		} else {
			opt.pause_index = -1;
		}
		return;
	}
	for (i = 0; i < 5; i++) {
		server *s = &servers[i];

		snprintf(s->dir, sizeof(s->dir), "/tmp/dlock-bench-%d-XXXXXX", (int)getpid());
		if (mkdtemp(s->dir) == NULL)
			die("mkdtemp: %s", strerror(errno));
		nservers = i + 1;
		if (start_server(s) < 0)
			die("could not start %s on a free port", opt.redis_server);
	}
}

/*
 * Server CPU: INFO cpu's used_cpu_user + used_cpu_sys (the redis-server
 * process's getrusage), summed over servers 0..n-1, in µs. Read on separate
 * connections; never on a paused server.
 */
static redisContext *stat_ctx[MAX_SERVERS];

static double server_cpu_us(int n)
{
	double total = 0;
	int i;

	for (i = 0; i < n; i++) {
		redisReply *r;
		const char *p;

		if (stat_ctx[i] == NULL && (stat_ctx[i] = connect_to(&servers[i], 1000)) == NULL)
			return NAN;
		r = redisCommand(stat_ctx[i], "INFO cpu");
		if (r == NULL || r->type != REDIS_REPLY_STRING) {
			freeReplyObject(r);
			redisFree(stat_ctx[i]);
			stat_ctx[i] = NULL;
			return NAN;
		}
		if ((p = strstr(r->str, "used_cpu_sys:")) != NULL)
			total += strtod(p + 13, NULL) * 1e6;
		if ((p = strstr(r->str, "used_cpu_user:")) != NULL)
			total += strtod(p + 14, NULL) * 1e6;
		freeReplyObject(r);
	}
	return total;
}

/* Connections servers 0..n-1 have accepted so far (INFO stats), or NAN. */
static double server_connections(int n)
{
	double total = 0;
	int i;

	for (i = 0; i < n; i++) {
		redisReply *r;
		const char *p;

		if (stat_ctx[i] == NULL && (stat_ctx[i] = connect_to(&servers[i], 1000)) == NULL)
			return NAN;
		r = redisCommand(stat_ctx[i], "INFO stats");
		if (r == NULL || r->type != REDIS_REPLY_STRING ||
				(p = strstr(r->str, "total_connections_received:")) == NULL) {
			freeReplyObject(r);
			return NAN;
		}
		total += strtod(p + 27, NULL);
		freeReplyObject(r);
	}
	return total;
}

/* ------------------------------------------------------------------------ */
/* The measuring loop                                                         */

/* One lock+unlock; *t_acq = the time the acquire returned. 0 or error. */
typedef int (*pair_fn)(void *ctx, uint64_t *t_acq);

/*
 * Samples of one implementation, gathered over one or more blocks: blocks
 * of two implementations alternate (--block) so that both see the same
 * machine (this one is shared and noisy) and their ratio is fair.
 */
typedef struct meter {
	pair_fn fn;
	void *ctx;
	uint64_t *pair, *acq, *rel;
	long n, cap, iters, errors;
	double cpu_us;
	double server_cpu_us;   /* NAN when not measured */
	int nstat;              /* servers whose CPU is measured (0: none) */
	uint64_t wall_ns;
} meter;

static void meter_init(meter *m, pair_fn fn, void *ctx, long cap)
{
	memset(m, 0, sizeof(*m));
	m->fn = fn;
	m->ctx = ctx;
	m->cap = cap;
	m->pair = malloc(sizeof(uint64_t) * (size_t)cap);
	m->acq = malloc(sizeof(uint64_t) * (size_t)cap);
	m->rel = malloc(sizeof(uint64_t) * (size_t)cap);
	if (m->pair == NULL || m->acq == NULL || m->rel == NULL)
		die("out of memory");
}

static void meter_warm(meter *m, long warm)
{
	uint64_t ta;
	long i, errors = 0;

	for (i = 0; i < warm; i++)
		if (m->fn(m->ctx, &ta) < 0)
			errors++;
	if (errors)
		note("  (warm-up: %ld errors)\n", errors);
}

static void meter_run(meter *m, long iters)
{
	uint64_t w0, ta = 0;
	double c0, s0 = m->nstat ? server_cpu_us(m->nstat) : NAN;
	long i;

	if (iters > m->cap - m->n)
		iters = m->cap - m->n;
	c0 = cpu_us();
	w0 = now_ns();
	for (i = 0; i < iters; i++) {
		uint64_t t0 = now_ns(), t1;

		if (m->fn(m->ctx, &ta) < 0) {
			m->errors++;
			continue;
		}
		t1 = now_ns();
		m->pair[m->n] = t1 - t0;
		m->acq[m->n] = ta - t0;
		m->rel[m->n] = t1 - ta;
		m->n++;
	}
	m->wall_ns += now_ns() - w0;
	m->cpu_us += cpu_us() - c0;
	m->iters += iters;
	if (m->nstat)
		m->server_cpu_us += server_cpu_us(m->nstat) - s0;
}

static void meter_finish(meter *m, result *r)
{
	r->pair = dist_of(m->pair, m->n);
	r->acq = dist_of(m->acq, m->n);
	r->rel = dist_of(m->rel, m->n);
	r->errors = m->errors;
	r->ops_per_s = (double)m->iters / ((double)m->wall_ns / 1e9);
	r->cpu_us_per_op = m->cpu_us / (double)m->iters;
	r->server_cpu_us_per_op = m->nstat ? m->server_cpu_us / (double)m->iters : NAN;
	r->iters = m->iters;
	r->wall_s = (double)m->wall_ns / 1e9;
	r->cpu_us_total = m->cpu_us;
	r->server_cpu_us_total = m->nstat ? m->server_cpu_us : NAN;
	if (opt.samples) {
		r->samples = m->pair; /* sorted by dist_of */
		r->nsamples = m->n;
		m->pair = NULL;
	}
	free(m->pair);
	free(m->acq);
	free(m->rel);
	m->pair = m->acq = m->rel = NULL;
}

/* Measure m[0..nm-1] (NULL ones skipped) for iters pairs each, in
 * alternating blocks. */
static void measure_all(meter **m, int nm, long warm, long iters)
{
	long done = 0;
	int j;

	for (j = 0; j < nm; j++)
		if (m[j] != NULL)
			meter_warm(m[j], warm);
	while (done < iters) {
		long k = iters - done < opt.block ? iters - done : opt.block;

		for (j = 0; j < nm; j++)
			if (m[j] != NULL)
				meter_run(m[j], k);
		done += k;
	}
}

/* Measure a (and b, may be NULL) for iters pairs each, alternating blocks. */
static void measure(meter *a, meter *b, long warm, long iters)
{
	meter *m[2] = { a, b };

	measure_all(m, 2, warm, iters);
}

static void lock_name(char *buf, size_t len, const char *what)
{
	snprintf(buf, len, "dlock-bench:%s:%s", run_id, what);
}

/* ------------------------------------------------------------------------ */
/* dlock                                                                      */

typedef struct dl_ctx {
	dlock_lock *lock;
	dlock_redlock *red;
	int verbose_errors;
} dl_ctx;

static int dl_single_pair(void *p, uint64_t *t_acq)
{
	dl_ctx *c = p;
	int rc = dlock_lock_acquire(c->lock, NULL, 0, LEASE_MS);

	if (rc < 0) {
		if (c->verbose_errors-- > 0)
			note("  lock: %s\n", dlock_lock_errmsg(c->lock));
		return rc;
	}
	*t_acq = now_ns();
	rc = dlock_lock_release(c->lock, NULL);
	if (rc < 0 && c->verbose_errors-- > 0)
		note("  unlock: %s\n", dlock_lock_errmsg(c->lock));
	return rc;
}

static int dl_red_pair(void *p, uint64_t *t_acq)
{
	dl_ctx *c = p;
	int rc = dlock_redlock_acquire(c->red, NULL, 0, LEASE_MS);

	if (rc < 0) {
		if (c->verbose_errors-- > 0)
			note("  redlock try: %s: %s\n", dlock_strerror(rc), dlock_redlock_errmsg(c->red));
		return rc;
	}
	*t_acq = now_ns();
	rc = dlock_redlock_release(c->red, NULL);
	if (rc < 0 && c->verbose_errors-- > 0)
		note("  redlock unlock: %s: %s\n", dlock_strerror(rc), dlock_redlock_errmsg(c->red));
	return rc;
}

/*
 * Scenario 1's "dlock async" row: the same pair through the asynchronous
 * calls (acquire_async, then release_async), one pair in flight at a time,
 * on a dlock_loop this thread drives with dlock_loop_run - what a program
 * built on promises (node-redlock) does.
 */
typedef struct dl_async_ctx {
	dlock_loop *loop;
	dlock_client *clients[MAX_SERVERS];
	dlock_lock *members[MAX_SERVERS];
	int n;
	dlock_redlock *red; /* 3 or more servers; else members[0] alone */
	char owner[DLOCK_OWNER_SIZE];
	int calls, code;
	char message[256];
	int verbose_errors;
} dl_async_ctx;

static void dl_async_done(dlock_op *op, const dlock_result *r, void *ud)
{
	dl_async_ctx *a = ud;

	(void)op;
	a->calls++;
	a->code = r->code;
	snprintf(a->message, sizeof(a->message), "%s", r->message != NULL ? r->message : "");
}

/* Drive the loop until the op's callback came; its code. */
static int dl_async_wait(dl_async_ctx *a, const char *what)
{
	while (a->calls == 0)
		if (dlock_loop_run(a->loop, -1) < 0)
			die("dlock_loop_run: %s", dlock_errmsg_last());
	if (a->code < 0 && a->verbose_errors-- > 0)
		note("  async %s: %s: %s\n", what, dlock_strerror(a->code), a->message);
	return a->code;
}

static int dl_async_pair(void *p, uint64_t *t_acq)
{
	dl_async_ctx *a = p;
	int rc;

	a->calls = 0;
	rc = a->red != NULL ? dlock_redlock_acquire_async(NULL, a->red, a->owner, 0, LEASE_MS,
				      dl_async_done, a)
			    : dlock_lock_acquire_async(NULL, a->members[0], a->owner, 0, LEASE_MS,
				      dl_async_done, a);
	if (rc < 0)
		die("acquire_async: %s", dlock_errmsg_last());
	if ((rc = dl_async_wait(a, "acquire")) < 0)
		return rc;
	*t_acq = now_ns();
	a->calls = 0;
	rc = a->red != NULL ? dlock_redlock_release_async(NULL, a->red, a->owner, dl_async_done, a)
			    : dlock_lock_release_async(NULL, a->members[0], a->owner, dl_async_done, a);
	if (rc < 0)
		die("release_async: %s", dlock_errmsg_last());
	return dl_async_wait(a, "release");
}

/* Clients on a loop of the bench's own, a lock on each, a RedLock over
 * them (restart guard off, as the blocking row) on 3 or more servers; the
 * owner one of this process's own, as the RedLock's owner() names it. */
static void dl_async_open(dl_async_ctx *a, int n, const char *name,
		const dlock_client_options *copts)
{
	dlock_client_options co = *copts;
	dlock_redlock_options ro;
	int i;

	memset(a, 0, sizeof(*a));
	a->n = n;
	a->verbose_errors = 5;
	if (dlock_loop_new(&a->loop, NULL) < 0)
		die("dlock_loop_new: %s", dlock_errmsg_last());
	co.loop = a->loop;
	for (i = 0; i < n; i++) {
		if (dlock_client_new(&a->clients[i], servers[i].uri, &co) < 0)
			die("dlock_client_new %s: %s", servers[i].uri, dlock_errmsg_last());
		if (dlock_lock_new(&a->members[i], a->clients[i], name, NULL) < 0)
			die("dlock_lock_new: %s", dlock_errmsg_last());
	}
	if (n == 1) {
		if (dlock_client_owner(a->owner, a->clients[0], 1) < 0)
			die("dlock_client_owner: %s", dlock_errmsg_last());
		return;
	}
	dlock_redlock_options_init(&ro, DLOCK_REDLOCK_OPTIONS_VERSION);
	ro.restart_guard_ms = 0;
	if (dlock_redlock_new(&a->red, a->members, (size_t)n, &ro) < 0)
		die("dlock_redlock_new: %s", dlock_errmsg_last());
	if (dlock_redlock_owner(a->owner, a->red, 1) < 0)
		die("dlock_redlock_owner: %s", dlock_errmsg_last());
}

/* Freed once the loop has nothing pending (a release's stragglers keep
 * their clients until they answered: driven until then). */
static void dl_async_close(dl_async_ctx *a)
{
	size_t pending = 0;
	int i;

	while (dlock_loop_pending(&pending, a->loop) == 0 && pending > 0)
		if (dlock_loop_run(a->loop, 10) < 0)
			die("dlock_loop_run: %s", dlock_errmsg_last());
	/* A straggler's answer (a loopback round trip) comes within this. */
	for (i = 0; i < 10; i++)
		if (dlock_loop_run(a->loop, 1) < 0)
			die("dlock_loop_run: %s", dlock_errmsg_last());
	dlock_redlock_free(a->red);
	for (i = 0; i < a->n; i++) {
		dlock_lock_free(a->members[i]);
		dlock_client_free(a->clients[i]);
	}
	dlock_loop_free(a->loop);
}

/* Scenario 1's client options: the defaults, and --tls-ca for rediss:// servers. */
static dlock_client_options tls_opts = DLOCK_CLIENT_OPTIONS_INIT;

static void scenario7(void);

static dlock_redlock *open_redlock(int n, const char *name, const dlock_client_options *copts)
{
	const char *uris[MAX_SERVERS];
	dlock_redlock_options ro;
	dlock_redlock *r = NULL;
	int i;

	dlock_redlock_options_init(&ro, DLOCK_REDLOCK_OPTIONS_VERSION);
	ro.restart_guard_ms = 0;
	for (i = 0; i < n; i++)
		uris[i] = servers[i].uri;
	if (dlock_redlock_new_from_uris(&r, uris, (size_t)n, name, copts, &ro) < 0)
		die("dlock_redlock_new_from_uris: %s", dlock_errmsg_last());
	return r;
}

/* ------------------------------------------------------------------------ */
/* The floor: dlock's scripts over bare hiredis                              */

typedef struct floor_ctx {
	int n;                      /* live contexts, read from */
	redisContext *c[MAX_SERVERS];
	redisContext *hung;         /* written to, never read (scenario 5) */
	char acq_sha[41], rel_sha[41];
	char name[128], channel[160], latch[224];
	size_t name_len, channel_len, latch_prefix_len;
	char owner[64];
	char latch_ttl[16];
	uint64_t rng;
	int verbose_errors;
} floor_ctx;

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static uint64_t seed(void)
{
	uint64_t s = now_ns() ^ ((uint64_t)getpid() << 32);
	int fd = open("/dev/urandom", O_RDONLY);

	if (fd >= 0) {
		if (read(fd, &s, sizeof(s)) != (ssize_t)sizeof(s)) {
			/* keep the clock seed */
		}
		close(fd);
	}
	return s ? s : 88172645463325252ull;
}

static void hex(char *dst, uint64_t v, int digits)
{
	static const char h[] = "0123456789abcdef";
	int i;

	for (i = 0; i < digits; i++)
		dst[i] = h[(v >> (4 * (digits - 1 - i))) & 15];
}

static void script_load(redisContext *c, const char *body, char sha[41])
{
	redisReply *r = redisCommand(c, "SCRIPT LOAD %s", body);

	if (r == NULL || r->type != REDIS_REPLY_STRING || r->len != 40)
		die("SCRIPT LOAD failed: %s", r ? (r->str ? r->str : "?") : c->errstr);
	memcpy(sha, r->str, 41);
	freeReplyObject(r);
}

/*
 * Keys as dlock derives them (Redisson's names): the channel and latch
 * prefix put the name in braces. Owner <uuid>:<tid>; the latch (only for
 * --floor-del yes) and its ttl as dlock's used to be, 3 * (connect +
 * command timeout) + 1000.
 */
static void floor_init(floor_ctx *f, const int *idx, int n, int hung_idx, const char *name,
		int connect_ms, int command_ms)
{
	uint64_t a, b;
	int i;

	memset(f, 0, sizeof(*f));
	f->rng = seed();
	f->verbose_errors = 5;
	f->n = n;
	for (i = 0; i < n; i++) {
		f->c[i] = connect_to(&servers[idx[i]], 1000);
		if (f->c[i] == NULL)
			die("connect to %s failed", servers[idx[i]].uri);
		script_load(f->c[i], dlock__script_acquire.body, f->acq_sha);
		script_load(f->c[i], dlock__script_release.body, f->rel_sha);
	}
	if (hung_idx >= 0) {
		f->hung = connect_to(&servers[hung_idx], 1000);
		if (f->hung == NULL)
			die("connect to %s failed", servers[hung_idx].uri);
		script_load(f->hung, dlock__script_acquire.body, f->acq_sha);
		script_load(f->hung, dlock__script_release.body, f->rel_sha);
		/* Written to without waiting: a full socket buffer must not block. */
		fcntl(f->hung->fd, F_SETFL, fcntl(f->hung->fd, F_GETFL) | O_NONBLOCK);
		f->hung->flags &= ~REDIS_BLOCK;
	}
	f->name_len = (size_t)snprintf(f->name, sizeof(f->name), "%s", name);
	f->channel_len = (size_t)snprintf(f->channel, sizeof(f->channel),
			"redisson_lock__channel:{%s}", name);
	f->latch_prefix_len = (size_t)snprintf(f->latch, sizeof(f->latch),
			"redisson_unlock_latch:{%s}:", name);
	a = xorshift(&f->rng);
	b = xorshift(&f->rng);
	/* a uuid-shaped id: 8-4-4-4-12 */
	hex(f->owner, a >> 32, 8);
	f->owner[8] = '-';
	hex(f->owner + 9, a >> 16, 4);
	f->owner[13] = '-';
	hex(f->owner + 14, a, 4);
	f->owner[18] = '-';
	hex(f->owner + 19, b >> 48, 4);
	f->owner[23] = '-';
	hex(f->owner + 24, b, 12);
	snprintf(f->owner + 36, sizeof(f->owner) - 36, ":%ld", (long)dlock_thread_id());
	snprintf(f->latch_ttl, sizeof(f->latch_ttl), "%d", 3 * (connect_ms + command_ms) + 1000);
}

static void floor_free(floor_ctx *f)
{
	int i;

	for (i = 0; i < f->n; i++)
		redisFree(f->c[i]);
	if (f->hung)
		redisFree(f->hung);
}

static int floor_fail(floor_ctx *f, const char *what, redisContext *c, redisReply *r)
{
	if (f->verbose_errors-- > 0)
		note("  floor %s: %s\n", what, r ? (r->type == REDIS_REPLY_ERROR ? r->str :
				"unexpected reply") : c->errstr);
	return -1;
}

/* Write everything appended on the live contexts (and what the hung one takes). */
static int floor_flush(floor_ctx *f)
{
	int i, done;

	for (i = 0; i < f->n; i++) {
		done = 0;
		while (!done)
			if (redisBufferWrite(f->c[i], &done) != REDIS_OK)
				return floor_fail(f, "write", f->c[i], NULL);
	}
	if (f->hung != NULL)
		redisBufferWrite(f->hung, &done);
	return 0;
}

static int floor_acquire(floor_ctx *f)
{
	const char *argv[7] = { "EVALSHA", f->acq_sha, "1", f->name, LEASE_S, f->owner, "0" };
	size_t lens[7] = { 7, 40, 1, f->name_len, sizeof(LEASE_S) - 1, strlen(f->owner), 1 };
	int i, rc = 0;

	for (i = 0; i < f->n; i++)
		redisAppendCommandArgv(f->c[i], 7, argv, lens);
	if (f->hung != NULL)
		redisAppendCommandArgv(f->hung, 7, argv, lens);
	if (floor_flush(f) < 0)
		return -1;
	for (i = 0; i < f->n; i++) {
		redisReply *r = NULL;

		if (redisGetReply(f->c[i], (void **)&r) != REDIS_OK)
			return floor_fail(f, "acquire", f->c[i], NULL);
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 ||
		    r->element[0]->type != REDIS_REPLY_INTEGER || r->element[0]->integer != 1)
			rc = floor_fail(f, "acquire", f->c[i], r);
		freeReplyObject(r);
	}
	return rc;
}

static int floor_release(floor_ctx *f)
{
	/* The count believed held before the release (1), not a repeat ("0"). */
	const char *argv[10] = { "EVALSHA", f->rel_sha, "2", f->name, f->channel, "0", LEASE_S,
		f->owner, "1", "0" };
	size_t lens[10] = { 7, 40, 1, f->name_len, f->channel_len, 1, sizeof(LEASE_S) - 1,
		strlen(f->owner), 1, 1 };
	const char *del[2] = { "DEL", f->latch };
	size_t del_lens[2] = { 3, f->latch_prefix_len + 32 };
	int i, rc = 0;

	/* A fresh request id per release, as dlock__request_id makes one. */
	hex(f->latch + f->latch_prefix_len, xorshift(&f->rng), 16);
	hex(f->latch + f->latch_prefix_len + 16, xorshift(&f->rng), 16);
	f->latch[f->latch_prefix_len + 32] = '\0';
	for (i = 0; i < f->n; i++) {
		redisAppendCommandArgv(f->c[i], 10, argv, lens);
		if (opt.floor_del)
			redisAppendCommandArgv(f->c[i], 2, del, del_lens);
	}
	if (f->hung != NULL) {
		redisAppendCommandArgv(f->hung, 10, argv, lens);
		if (opt.floor_del)
			redisAppendCommandArgv(f->hung, 2, del, del_lens);
	}
	if (floor_flush(f) < 0)
		return -1;
	for (i = 0; i < f->n; i++) {
		redisReply *r = NULL;

		if (redisGetReply(f->c[i], (void **)&r) != REDIS_OK)
			return floor_fail(f, "release", f->c[i], NULL);
		if (r->type != REDIS_REPLY_INTEGER || r->integer != 0)
			rc = floor_fail(f, "release", f->c[i], r);
		freeReplyObject(r);
		if (opt.floor_del) {
			if (redisGetReply(f->c[i], (void **)&r) != REDIS_OK)
				return floor_fail(f, "DEL", f->c[i], NULL);
			if (r->type != REDIS_REPLY_INTEGER)
				rc = floor_fail(f, "DEL", f->c[i], r);
			freeReplyObject(r);
		}
	}
	return rc;
}

static int floor_pair(void *p, uint64_t *t_acq)
{
	floor_ctx *f = p;

	if (floor_acquire(f) < 0)
		return -1;
	*t_acq = now_ns();
	return floor_release(f);
}

/*
 * Scenarios 1 and 2: dlock and the floor on 1, 3 and 5 servers, measured in
 * alternating blocks when both are asked for.
 */
static void uncontended(int do_dlock, int do_floor)
{
	int k;

	if (do_dlock)
		note("scenario 1: uncontended lock+unlock (dlock: RLock on 1 server, RedLock on 3 "
				"and 5, restart guard off)\n");
	if (do_floor)
		note("scenario 2: the floor (dlock's acquire + release scripts, EVALSHA over "
				"bare hiredis, fanned out; latch DEL %s)\n",
				opt.floor_del ? "pipelined with the release" : "not sent");
	note("  %ld iterations, %ld warm-up%s\n", opt.iterations, opt.warmup,
			do_dlock && do_floor ? ", dlock and floor alternate in blocks" : "");
	for (k = 0; k < opt.ncounts; k++) {
		int n = opt.server_counts[k], idx[MAX_SERVERS], i;
		char name[128], what[32];
		dl_ctx c = { NULL, NULL, 5 };
		dl_async_ctx as;
		dlock_client *client = NULL;
		floor_ctx f;
		meter md, ma, mf;
		meter *m[3] = { NULL, NULL, NULL };
		result *rd = NULL, *ra = NULL, *rf = NULL;

		if (n < 1 || n > nservers) {
			note("  skipped: %d servers (have %d)\n", n, nservers);
			continue;
		}
		if (do_dlock) {
			snprintf(what, sizeof(what), "s1-n%d", n);
			lock_name(name, sizeof(name), what);
			if (n == 1) {
				if (dlock_client_new(&client, servers[0].uri, &tls_opts) < 0)
					die("dlock_client_new: %s", dlock_errmsg_last());
				if (dlock_lock_new(&c.lock, client, name, NULL) < 0)
					die("dlock_lock_new: %s", dlock_errmsg_last());
				meter_init(&md, dl_single_pair, &c, opt.iterations);
			} else {
				c.red = open_redlock(n, name, &tls_opts);
				meter_init(&md, dl_red_pair, &c, opt.iterations);
			}
			md.nstat = n;
			snprintf(what, sizeof(what), "s1-async-n%d", n);
			lock_name(name, sizeof(name), what);
			dl_async_open(&as, n, name, &tls_opts);
			meter_init(&ma, dl_async_pair, &as, opt.iterations);
			ma.nstat = n;
			m[0] = &md;
			m[1] = &ma;
		}
		if (do_floor) {
			for (i = 0; i < n; i++)
				idx[i] = i;
			snprintf(what, sizeof(what), "s2-n%d", n);
			lock_name(name, sizeof(name), what);
			floor_init(&f, idx, n, -1, name, 1000, 1000);
			meter_init(&mf, floor_pair, &f, opt.iterations);
			mf.nstat = n;
			m[2] = &mf;
		}
		measure_all(m, 3, opt.warmup, opt.iterations);
		if (do_dlock) {
			rd = new_result(1, "dlock", "lock+unlock", n);
			meter_finish(&md, rd);
			snprintf(rd->note, sizeof(rd->note), n == 1 ? "RLock" :
					"RedLock, restart guard off");
			print_result(rd);
			if (n == 1) {
				dlock_lock_free(c.lock);
				dlock_client_free(client);
			} else {
				dlock_redlock_free(c.red);
			}
			ra = new_result(1, "dlock-async", "lock+unlock", n);
			meter_finish(&ma, ra);
			snprintf(ra->note, sizeof(ra->note), n == 1 ? "RLock, async, one pair in flight" :
					"RedLock, async, one pair in flight, restart guard off");
			print_result(ra);
			dl_async_close(&as);
		}
		if (do_floor) {
			rf = new_result(2, "floor", "lock+unlock", n);
			meter_finish(&mf, rf);
			snprintf(rf->note, sizeof(rf->note), "latch DEL %s",
					opt.floor_del ? "pipelined" : "omitted");
			print_result(rf);
			floor_free(&f);
			if (n == 1)
				g_rt_us = rf->acq.p50;
		}
		if (rd != NULL && rf != NULL)
			note("  ratio dlock/floor on %d server%s: p50 %.2f  p99 %.2f  cpu %.2f\n", n,
					n > 1 ? "s" : "", rd->pair.p50 / rf->pair.p50,
					rd->pair.p99 / rf->pair.p99, rd->cpu_us_per_op / rf->cpu_us_per_op);
		if (ra != NULL && rf != NULL)
			note("  ratio dlock async/floor on %d server%s: p50 %.2f  p99 %.2f  cpu %.2f\n",
					n, n > 1 ? "s" : "", ra->pair.p50 / rf->pair.p50,
					ra->pair.p99 / rf->pair.p99, ra->cpu_us_per_op / rf->cpu_us_per_op);
	}
}

/* ------------------------------------------------------------------------ */
/* Scenario 3: throughput, threads sharing one client                        */

typedef struct tp_shared {
	dlock_client *client;
	int floor;
	pthread_barrier_t start;
	atomic_int stop;
} tp_shared;

typedef struct tp_thread {
	tp_shared *sh;
	pthread_t tid;
	int index;
	uint64_t *lat;
	long n, cap, errors;
} tp_thread;

static void *tp_main(void *p)
{
	tp_thread *t = p;
	char what[32], name[128];
	dl_ctx c = { NULL, NULL, 3 };
	floor_ctx f;
	pair_fn fn = t->sh->floor ? floor_pair : dl_single_pair;
	void *ctx = t->sh->floor ? (void *)&f : (void *)&c;
	uint64_t ta;
	long i;

	snprintf(what, sizeof(what), "s3-%s-t%d", t->sh->floor ? "floor" : "dlock", t->index);
	lock_name(name, sizeof(name), what);
	if (t->sh->floor) {
		int idx[1] = { 0 };

		floor_init(&f, idx, 1, -1, name, 1000, 1000);
	} else if (dlock_lock_new(&c.lock, t->sh->client, name, NULL) < 0) {
		die("dlock_lock_new: %s", dlock_errmsg_last());
	}
	for (i = 0; i < opt.warmup / 4; i++)
		fn(ctx, &ta);
	pthread_barrier_wait(&t->sh->start);
	while (!atomic_load_explicit(&t->sh->stop, memory_order_relaxed)) {
		uint64_t t0 = now_ns();

		if (fn(ctx, &ta) < 0) {
			t->errors++;
			continue;
		}
		if (t->n == t->cap) {
			t->cap = t->cap ? 2 * t->cap : 65536;
			t->lat = realloc(t->lat, sizeof(*t->lat) * (size_t)t->cap);
			if (t->lat == NULL)
				die("out of memory");
		}
		t->lat[t->n++] = now_ns() - t0;
	}
	if (t->sh->floor)
		floor_free(&f);
	else
		dlock_lock_free(c.lock);
	return NULL;
}

static void throughput(int floor, int nthreads)
{
	tp_shared sh;
	tp_thread th[64];
	uint64_t *all, w0, w1;
	double c0, c1;
	long total = 0, k = 0;
	result *r;
	int i;

	memset(&sh, 0, sizeof(sh));
	sh.floor = floor;
	if (!floor && dlock_client_new(&sh.client, servers[0].uri, NULL) < 0)
		die("dlock_client_new: %s", dlock_errmsg_last());
	pthread_barrier_init(&sh.start, NULL, (unsigned)nthreads + 1);
	for (i = 0; i < nthreads; i++) {
		memset(&th[i], 0, sizeof(th[i]));
		th[i].sh = &sh;
		th[i].index = i;
		if (pthread_create(&th[i].tid, NULL, tp_main, &th[i]) != 0)
			die("pthread_create failed");
	}
	pthread_barrier_wait(&sh.start);
	c0 = cpu_us();
	w0 = now_ns();
	usleep((useconds_t)(opt.duration * 1e6));
	atomic_store(&sh.stop, 1);
	for (i = 0; i < nthreads; i++)
		pthread_join(th[i].tid, NULL);
	w1 = now_ns();
	c1 = cpu_us();
	for (i = 0; i < nthreads; i++)
		total += th[i].n;
	all = malloc(sizeof(*all) * (size_t)(total ? total : 1));
	r = new_result(3, floor ? "floor" : "dlock", "throughput", 1);
	for (i = 0; i < nthreads; i++) {
		memcpy(all + k, th[i].lat, sizeof(*all) * (size_t)th[i].n);
		k += th[i].n;
		r->errors += th[i].errors;
		free(th[i].lat);
	}
	r->threads = nthreads;
	r->pair = dist_of(all, total);
	r->ops_per_s = (double)total / ((double)(w1 - w0) / 1e9);
	r->cpu_us_per_op = (c1 - c0) / (double)(total ? total : 1);
	snprintf(r->note, sizeof(r->note), "%s, own lock name per thread, %.0f s",
			floor ? "one hiredis connection per thread" : "one shared dlock client",
			opt.duration);
	free(all);
	pthread_barrier_destroy(&sh.start);
	if (sh.client)
		dlock_client_free(sh.client);
	print_result(r);
}

static void scenario3(void)
{
	int i;

	note("scenario 3: throughput on 1 server, threads sharing one client, %.0f s each\n",
			opt.duration);
	for (i = 0; i < opt.nthreads; i++) {
		throughput(0, opt.threads[i]);
		throughput(1, opt.threads[i]);
	}
}

/* ------------------------------------------------------------------------ */
/* Scenario 4: contended hand-off                                             */

typedef struct ho_shared {
	dlock_lock *lock;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	long gen;                 /* under mu: bumped by each new holder */
	atomic_int stop;
	_Atomic uint64_t unlock_at; /* right before the holder called unlock */
	atomic_int last_holder;
	uint64_t *lat;            /* written by the holder only */
	long n, target, self_handoffs, errors, holds;
} ho_shared;

typedef struct ho_thread {
	ho_shared *sh;
	pthread_t tid;
	int index;
} ho_thread;

static void *ho_main(void *p)
{
	ho_thread *t = p;
	ho_shared *sh = t->sh;

	for (;;) {
		uint64_t acquired, unlocked_at;
		long my_gen;
		int rc = dlock_lock_acquire(sh->lock, NULL, DLOCK_WAIT_FOREVER, LEASE_MS);

		acquired = now_ns();
		if (rc < 0) {
			note("  hand-off lock: %s\n", dlock_lock_errmsg(sh->lock));
			sh->errors++;
			atomic_store(&sh->stop, 1);
			pthread_mutex_lock(&sh->mu);
			pthread_cond_broadcast(&sh->cv);
			pthread_mutex_unlock(&sh->mu);
			return NULL;
		}
		unlocked_at = atomic_load(&sh->unlock_at);
		if (!atomic_load(&sh->stop) && unlocked_at != 0) {
			if (atomic_load(&sh->last_holder) == t->index)
				sh->self_handoffs++;
			else if (sh->n < sh->target)
				sh->lat[sh->n++] = acquired - unlocked_at;
			if (sh->n >= sh->target)
				atomic_store(&sh->stop, 1);
		}
		sh->holds++;
		atomic_store(&sh->last_holder, t->index);
		pthread_mutex_lock(&sh->mu);
		my_gen = ++sh->gen;
		pthread_cond_broadcast(&sh->cv);
		pthread_mutex_unlock(&sh->mu);

		atomic_store(&sh->unlock_at, now_ns());
		if (dlock_lock_release(sh->lock, NULL) < 0) {
			note("  hand-off unlock: %s\n", dlock_lock_errmsg(sh->lock));
			sh->errors++;
		}
		if (atomic_load(&sh->stop))
			return NULL;
		/* Let a waiter have it before asking again: every hand-off measured
		 * is one to a thread that was waiting (no barging by the releaser). */
		pthread_mutex_lock(&sh->mu);
		while (sh->gen == my_gen && !atomic_load(&sh->stop))
			pthread_cond_wait(&sh->cv, &sh->mu);
		pthread_mutex_unlock(&sh->mu);
		if (atomic_load(&sh->stop))
			return NULL;
	}
}

/*
 * The hand-offs run in 4 chunks; between chunks the floor measures the
 * 1-server EVALSHA round trip (1000 pairs), so that the unit and the
 * hand-offs see the same machine.
 */
static void scenario4(void)
{
	enum { NTH = 4, CHUNKS = 4, RT_PAIRS = 1000 };
	ho_shared sh;
	ho_thread th[NTH];
	dlock_client *client = NULL;
	char name[128];
	int idx[1] = { 0 };
	uint64_t wall = 0;
	double cpu = 0;
	floor_ctx f;
	meter rt;
	result *r, rtr;
	int i, chunk;

	note("scenario 4: contended hand-off, %d threads on one lock (1 server), %ld hand-offs, "
			"round trip measured between %d chunks\n", NTH, opt.handoffs, CHUNKS);
	memset(&sh, 0, sizeof(sh));
	pthread_mutex_init(&sh.mu, NULL);
	pthread_cond_init(&sh.cv, NULL);
	sh.lat = malloc(sizeof(*sh.lat) * (size_t)opt.handoffs);
	lock_name(name, sizeof(name), "s4");
	if (dlock_client_new(&client, servers[0].uri, NULL) < 0)
		die("dlock_client_new: %s", dlock_errmsg_last());
	if (dlock_lock_new(&sh.lock, client, name, NULL) < 0)
		die("dlock_lock_new: %s", dlock_errmsg_last());
	lock_name(name, sizeof(name), "s4-rt");
	floor_init(&f, idx, 1, -1, name, 1000, 1000);
	meter_init(&rt, floor_pair, &f, CHUNKS * RT_PAIRS);
	meter_warm(&rt, opt.warmup / 4);
	for (chunk = 0; chunk < CHUNKS; chunk++) {
		uint64_t w0;
		double c0;

		sh.target = opt.handoffs * (chunk + 1) / CHUNKS;
		atomic_store(&sh.stop, 0);
		atomic_store(&sh.unlock_at, 0);
		atomic_store(&sh.last_holder, -1);
		c0 = cpu_us();
		w0 = now_ns();
		for (i = 0; i < NTH; i++) {
			th[i].sh = &sh;
			th[i].index = i;
			if (pthread_create(&th[i].tid, NULL, ho_main, &th[i]) != 0)
				die("pthread_create failed");
		}
		for (i = 0; i < NTH; i++)
			pthread_join(th[i].tid, NULL);
		wall += now_ns() - w0;
		cpu += cpu_us() - c0;
		meter_run(&rt, RT_PAIRS);
	}
	memset(&rtr, 0, sizeof(rtr));
	meter_finish(&rt, &rtr);
	floor_free(&f);
	r = new_result(4, "dlock", "handoff", 1);
	r->threads = NTH;
	r->pair = dist_of(sh.lat, sh.n);
	r->ops_per_s = (double)sh.holds / ((double)wall / 1e9);
	r->cpu_us_per_op = cpu / (double)(sh.holds ? sh.holds : 1);
	r->errors = sh.errors;
	r->rt_us = rtr.acq.p50;
	free(rtr.samples);
	snprintf(r->note, sizeof(r->note), "unlock called -> next holder's lock returned; "
			"%ld self hand-offs excluded", sh.self_handoffs);
	print_result(r);
	free(sh.lat);
	dlock_lock_free(sh.lock);
	dlock_client_free(client);
	pthread_mutex_destroy(&sh.mu);
	pthread_cond_destroy(&sh.cv);
}

/* ------------------------------------------------------------------------ */
/* Scenario 5: one of 5 servers paused                                        */

static void scenario5(void)
{
	dlock_client_options co;
	int pi = opt.pause_index, idx[MAX_SERVERS], i, k, live = 0, phase;
	long warm = opt.warmup_paused;

	if (nservers < 5) {
		note("scenario 5: skipped (needs 5 servers)\n");
		return;
	}
	if (pi < 0 || pi >= 5 || servers[pi].pid <= 0) {
		note("scenario 5: skipped (with --uris, give --pause-pid of one of the first 5)\n");
		return;
	}
	dlock_client_options_init(&co, DLOCK_CLIENT_OPTIONS_VERSION);
	co.command_timeout_ms = 50;
	if (opt.paused_connect_timeout_ms > 0)
		co.connect_timeout_ms = opt.paused_connect_timeout_ms;
	note("scenario 5: RedLock on 5 servers, command_timeout_ms = 50 (connect %lld ms), "
			"server %d (%s, pid %ld) paused; %ld iterations, %ld warm-up\n",
			(long long)co.connect_timeout_ms, pi, servers[pi].uri, (long)servers[pi].pid,
			opt.iterations_paused, warm);
	for (i = 0; i < 5; i++)
		if (i != pi)
			idx[live++] = i;

	for (phase = 0; phase < 2; phase++) {
		char name[128], what[32];
		dl_ctx c = { NULL, NULL, 3 };
		floor_ctx f;
		meter md, mf;
		result *r;

		snprintf(what, sizeof(what), "s5-%s", phase ? "paused" : "up");
		lock_name(name, sizeof(name), what);
		c.red = open_redlock(5, name, &co);
		/* Connect every member while all are up, as a running service would be. */
		for (k = 0; k < 3; k++)
			dl_red_pair(&c, &(uint64_t){ 0 });
		snprintf(what, sizeof(what), "s5-floor-%s", phase ? "paused" : "up");
		lock_name(name, sizeof(name), what);
		if (phase)
			floor_init(&f, idx, live, pi, name, co.connect_timeout_ms, co.command_timeout_ms);
		else
			floor_init(&f, (int[]){ 0, 1, 2, 3, 4 }, 5, -1, name, co.connect_timeout_ms,
					co.command_timeout_ms);
		if (phase) {
			if (kill(servers[pi].pid, SIGSTOP) != 0)
				die("kill(%ld, SIGSTOP): %s", (long)servers[pi].pid, strerror(errno));
			paused_pid = servers[pi].pid;
			usleep(100000);
		}
		meter_init(&md, dl_red_pair, &c, opt.iterations_paused);
		meter_init(&mf, floor_pair, &f, opt.iterations_paused);
		measure(&md, &mf, warm, opt.iterations_paused);
		r = new_result(5, "dlock", "lock+unlock", 5);
		r->paused = phase;
		meter_finish(&md, r);
		snprintf(r->note, sizeof(r->note), "RedLock, command timeout 50 ms");
		print_result(r);

		r = new_result(5, "floor", "lock+unlock", 5);
		r->paused = phase;
		meter_finish(&mf, r);
		snprintf(r->note, sizeof(r->note), phase ?
				"writes to all 5, waits for the 4 live ones" : "fan-out to 5");
		print_result(r);

		if (phase) {
			kill(servers[pi].pid, SIGCONT);
			paused_pid = 0;
		}
		floor_free(&f);
		dlock_redlock_free(c.red);
		if (phase) {
			/* Let the resumed server work through what queued up. */
			char v[8];

			for (k = 0; k < 100 && server_process_id(&servers[pi], v, sizeof(v)) < 0; k++)
				usleep(50000);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Scenario 6: asynchronous on one loop thread against 8 blocking threads     */

#define S6_RATE_TARGET 3.0 /* async acquisitions/s at least this many times the threads' */
#define S6_CPU_TARGET 0.7  /* at most this share of the threads' client CPU per acquisition */

/*
 * The redis-servers' CPU from /proc/<pid>/stat (utime + stime, all their
 * threads), µs, summed over servers 0..n-1: reading it costs the servers
 * nothing, unlike INFO. The pid is ours, or INFO process_id's for --uris
 * (loopback, so this machine's; checked to be a redis process). NAN when
 * /proc cannot tell; then INFO cpu's figure is used.
 */
static long proc_pid[MAX_SERVERS];

static double server_proc_cpu_us(int n)
{
	double ticks = 0;
	int i;

	for (i = 0; i < n; i++) {
		char path[64], buf[1024], *p;
		unsigned long ut, st;
		size_t len;
		FILE *f;

		if (proc_pid[i] <= 0)
			proc_pid[i] = servers[i].ours ? (long)servers[i].pid
						      : server_process_id(&servers[i], NULL, 0);
		snprintf(path, sizeof(path), "/proc/%ld/stat", proc_pid[i]);
		if (proc_pid[i] <= 0 || (f = fopen(path, "r")) == NULL)
			return server_cpu_us(n);
		len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = '\0';
		/* "pid (comm) state ppid pgrp session tty tpgid flags minflt
		 * cminflt majflt cmajflt utime stime ..." */
		if (strstr(buf, "(redis") == NULL || (p = strrchr(buf, ')')) == NULL ||
				sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
						&ut, &st) != 2)
			return server_cpu_us(n);
		ticks += (double)ut + (double)st;
	}
	return ticks / (double)sysconf(_SC_CLK_TCK) * 1e6;
}

/* Pair latencies of the measured window, ns, growing as they come. */
typedef struct lat_buf {
	uint64_t *v;
	long n, cap;
} lat_buf;

static void lat_push(lat_buf *b, uint64_t ns)
{
	if (b->n == b->cap) {
		long cap = b->cap ? b->cap * 2 : 65536;
		uint64_t *v = realloc(b->v, sizeof(*v) * (size_t)cap);

		if (v == NULL)
			die("out of memory");
		b->v = v;
		b->cap = cap;
	}
	b->v[b->n++] = ns;
}

/* Where a row stands at the start and at the end of its measured window. */
typedef struct s6_snap {
	uint64_t wall_ns;
	double cpu_us, server_cpu_us, conns;
	long done;
} s6_snap;

static void s6_snap_take(s6_snap *s, int n, long done)
{
	s->done = done;
	s->wall_ns = now_ns();
	s->cpu_us = cpu_us();
	s->server_cpu_us = server_proc_cpu_us(n);
	s->conns = server_connections(n);
}

/* A row's figures from its window: cycles completed between a and b. */
static void s6_fill(result *r, const s6_snap *a, const s6_snap *b, lat_buf *lat)
{
	long ops = b->done - a->done;
	double per = ops > 0 ? (double)ops : 1;

	r->iters = ops;
	r->wall_s = (double)(b->wall_ns - a->wall_ns) / 1e9;
	r->cpu_us_total = b->cpu_us - a->cpu_us;
	r->server_cpu_us_total = b->server_cpu_us - a->server_cpu_us;
	r->ops_per_s = (double)ops / r->wall_s;
	r->cpu_us_per_op = r->cpu_us_total / per;
	r->server_cpu_us_per_op = r->server_cpu_us_total / per;
	r->conns_per_op = (b->conns - a->conns) / per;
	r->pair = dist_of(lat->v, lat->n);
	free(lat->v);
	memset(lat, 0, sizeof(*lat));
}

static void s6_sleep(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

typedef struct as_slot {
	struct as_run *run;
	dlock_lock *lock;                    /* a single lock's row, */
	dlock_redlock *red;                  /* or a RedLock's over */
	dlock_lock *members[MAX_SERVERS];    /* these, one per server */
	char owner[64];
	uint64_t t0;
} as_slot;

typedef struct as_run {
	long done, errors, inflight;
	int measuring, stopping;
	lat_buf lat;
	dlock_loop *loop;
} as_run;

static void as_start(as_slot *s);

/* A cycle ended (released, or not acquired): count it, start the next. */
static void as_cycle_end(as_slot *s)
{
	as_run *run = s->run;

	if (run->measuring)
		lat_push(&run->lat, now_ns() - s->t0);
	run->done++;
	run->inflight--;
	as_start(s);
}

static void as_released(dlock_op *op, const dlock_result *r, void *ud)
{
	as_slot *s = ud;

	(void)op;
	if (r->code < 0 && s->run->errors++ < 3)
		note("  async release: %s\n", r->message);
	as_cycle_end(s);
}

static void as_acquired(dlock_op *op, const dlock_result *r, void *ud)
{
	as_slot *s = ud;

	(void)op;
	if (r->code < 0) {
		if (s->run->errors++ < 3)
			note("  async acquire: %s\n", r->message);
		as_cycle_end(s);
		return;
	}
	if ((s->red != NULL ? dlock_redlock_release_async(NULL, s->red, s->owner, as_released, s)
			    : dlock_lock_release_async(NULL, s->lock, s->owner, as_released, s)) < 0)
		die("release_async: %s", dlock_errmsg_last());
}

/* The slot's next cycle, unless the row is stopping. */
static void as_start(as_slot *s)
{
	as_run *run = s->run;

	if (run->stopping)
		return;
	run->inflight++;
	s->t0 = now_ns();
	if ((s->red != NULL ? dlock_redlock_acquire_async(NULL, s->red, s->owner, 0, LEASE_MS,
					      as_acquired, s)
			    : dlock_lock_acquire_async(NULL, s->lock, s->owner, 0, LEASE_MS, as_acquired,
					      s)) < 0)
		die("acquire_async: %s", dlock_errmsg_last());
}

/* Drive the loop for `s` seconds (cycles keep starting themselves). */
static void as_drive(as_run *run, double s)
{
	uint64_t end = now_ns() + (uint64_t)(s * 1e9);

	while (now_ns() < end)
		if (dlock_loop_run(run->loop, 10) < 0)
			die("dlock_loop_run: %s", dlock_errmsg_last());
}

/* A RedLock named `what` over one member per client (the clients are shared,
 * as a service shares one client per server among its locks). */
static dlock_redlock *redlock_over(dlock_client **clients, int n, const char *what,
		dlock_lock **members)
{
	dlock_redlock_options ro;
	dlock_redlock *r = NULL;
	char name[128];
	int j;

	lock_name(name, sizeof(name), what);
	for (j = 0; j < n; j++)
		if (dlock_lock_new(&members[j], clients[j], name, NULL) < 0)
			die("dlock_lock_new: %s", dlock_errmsg_last());
	dlock_redlock_options_init(&ro, DLOCK_REDLOCK_OPTIONS_VERSION);
	ro.restart_guard_ms = 0;
	if (dlock_redlock_new(&r, members, (size_t)n, &ro) < 0)
		die("dlock_redlock_new: %s", dlock_errmsg_last());
	return r;
}

static void redlock_free_with(dlock_redlock *r, dlock_lock **members, int n)
{
	int j;

	dlock_redlock_free(r);
	for (j = 0; j < n; j++)
		dlock_lock_free(members[j]);
}

/* (a) acquire+release cycles, --async-window in flight, on one loop this
 * thread drives: single locks spread over the n servers, or (red) RedLocks
 * over all n; --async-warmup seconds, then --async-seconds measured. */
static result *async_row(int n, int red)
{
	dlock_client *clients[MAX_SERVERS];
	as_slot *slots = calloc((size_t)opt.async_window, sizeof(*slots));
	s6_snap a, b;
	as_run run;
	uint64_t end;
	result *r;
	int i;

	if (slots == NULL)
		die("out of memory");
	memset(&run, 0, sizeof(run));
	if (dlock_loop_new(&run.loop, NULL) < 0)
		die("dlock_loop_new: %s", dlock_errmsg_last());
	for (i = 0; i < n; i++) {
		dlock_client_options co = tls_opts;

		co.loop = run.loop;
		if (opt.async_pool > 0)
			co.pool_size = opt.async_pool;
		if (dlock_client_new(&clients[i], servers[i].uri, &co) < 0)
			die("dlock_client_new %s: %s", servers[i].uri, dlock_errmsg_last());
	}
	for (i = 0; i < opt.async_window; i++) {
		char what[48], name[128];

		snprintf(what, sizeof(what), "s6-async-%s-n%d-%d", red ? "red" : "one", n, i);
		slots[i].run = &run;
		if (red) {
			slots[i].red = redlock_over(clients, n, what, slots[i].members);
			dlock_redlock_owner(slots[i].owner, slots[i].red,
					(uint64_t)i + 1);
			continue;
		}
		lock_name(name, sizeof(name), what);
		if (dlock_lock_new(&slots[i].lock, clients[i % n], name, NULL) < 0)
			die("dlock_lock_new: %s", dlock_errmsg_last());
		dlock_client_owner(slots[i].owner, clients[i % n],
				(uint64_t)i + 1);
	}
	for (i = 0; i < opt.async_window; i++)
		as_start(&slots[i]);
	as_drive(&run, opt.async_warmup);
	s6_snap_take(&a, n, run.done);
	run.measuring = 1;
	run.errors = 0;
	as_drive(&run, opt.async_seconds);
	s6_snap_take(&b, n, run.done);
	run.measuring = 0;
	run.stopping = 1;
	end = now_ns() + 30000000000ull; /* what is in flight ends within its timeouts */
	while (run.inflight > 0 && now_ns() < end)
		if (dlock_loop_run(run.loop, 100) < 0)
			die("dlock_loop_run: %s", dlock_errmsg_last());
	if (run.inflight > 0)
		die("scenario 6: %ld async cycles still in flight 30 s after the window", run.inflight);
	r = new_result(6, "async", red ? "redlock" : "acq+rel", n);
	s6_fill(r, &a, &b, &run.lat);
	r->errors = run.errors;
	snprintf(r->note, sizeof(r->note), "one loop thread, %d in flight, %s over %d server%s, "
			"pool %d", opt.async_window, red ? "RedLocks" : "single locks", n, n > 1 ? "s" : "",
			opt.async_pool > 0 ? opt.async_pool : tls_opts.pool_size);
	for (i = 0; i < opt.async_window; i++) {
		if (red)
			redlock_free_with(slots[i].red, slots[i].members, n);
		dlock_lock_free(slots[i].lock);
	}
	for (i = 0; i < n; i++)
		dlock_client_free(clients[i]);
	dlock_loop_free(run.loop);
	free(slots);
	return r;
}

typedef struct bl_thread {
	dlock_lock *lock;
	dlock_redlock *red;
	dlock_lock *members[MAX_SERVERS];
	pthread_t tid;
	atomic_int *measuring, *stop;
	atomic_long done;
	long errors;
	lat_buf lat;
} bl_thread;

/* Cycles until told to stop; latencies and errors of the measured window. */
static void *bl_main(void *p)
{
	bl_thread *t = p;
	dl_ctx c = { t->lock, t->red, 3 };
	int (*pair)(void *, uint64_t *) = t->red != NULL ? dl_red_pair : dl_single_pair;
	uint64_t ta;

	while (!atomic_load_explicit(t->stop, memory_order_relaxed)) {
		uint64_t t0 = now_ns();
		int rc = pair(&c, &ta);

		if (atomic_load_explicit(t->measuring, memory_order_relaxed)) {
			lat_push(&t->lat, now_ns() - t0);
			t->errors += rc < 0;
		}
		atomic_fetch_add_explicit(&t->done, 1, memory_order_relaxed);
	}
	return NULL;
}

static long bl_done(bl_thread *th, int nth)
{
	long total = 0;
	int i;

	for (i = 0; i < nth; i++)
		total += atomic_load_explicit(&th[i].done, memory_order_relaxed);
	return total;
}

/* (b) the same cycles with the blocking API: --async-threads threads, each on
 * names of its own, sharing one default client (its own thread) per server. */
static result *blocking_row(int n, int red)
{
	int nth = opt.async_threads, i;
	dlock_client *clients[MAX_SERVERS];
	bl_thread *th = calloc((size_t)nth, sizeof(*th));
	atomic_int measuring = 0, stop = 0;
	lat_buf all = { NULL, 0, 0 };
	s6_snap a, b;
	result *r;

	if (th == NULL)
		die("out of memory");
	for (i = 0; i < n; i++)
		if (dlock_client_new(&clients[i], servers[i].uri, &tls_opts) < 0)
			die("dlock_client_new %s: %s", servers[i].uri, dlock_errmsg_last());
	for (i = 0; i < nth; i++) {
		char what[48], name[128];

		snprintf(what, sizeof(what), "s6-block-%s-n%d-%d", red ? "red" : "one", n, i);
		lock_name(name, sizeof(name), what);
		if (red)
			th[i].red = redlock_over(clients, n, what, th[i].members);
		else if (dlock_lock_new(&th[i].lock, clients[i % n], name, NULL) < 0)
			die("dlock_lock_new: %s", dlock_errmsg_last());
		th[i].measuring = &measuring;
		th[i].stop = &stop;
		if (pthread_create(&th[i].tid, NULL, bl_main, &th[i]) != 0)
			die("pthread_create failed");
	}
	s6_sleep(opt.async_warmup);
	s6_snap_take(&a, n, bl_done(th, nth));
	atomic_store(&measuring, 1);
	s6_sleep(opt.async_seconds);
	s6_snap_take(&b, n, bl_done(th, nth));
	atomic_store(&measuring, 0);
	atomic_store(&stop, 1);
	r = new_result(6, "block", red ? "redlock" : "acq+rel", n);
	for (i = 0; i < nth; i++) {
		long j;

		pthread_join(th[i].tid, NULL);
		for (j = 0; j < th[i].lat.n; j++)
			lat_push(&all, th[i].lat.v[j]);
		free(th[i].lat.v);
		r->errors += th[i].errors;
		if (red)
			redlock_free_with(th[i].red, th[i].members, n);
		dlock_lock_free(th[i].lock);
	}
	s6_fill(r, &a, &b, &all);
	r->threads = nth;
	snprintf(r->note, sizeof(r->note), "%d threads, %s, one client per server", nth,
			red ? "dlock_redlock_acquire + dlock_redlock_release" : "dlock_lock_acquire + dlock_lock_release");
	free(th);
	for (i = 0; i < n; i++)
		dlock_client_free(clients[i]);
	return r;
}

/*
 * (c) The pipelined floor: what pipelining alone gives one thread. The
 * same acquire and release scripts (EVALSHA, dlock's argument shapes) over
 * bare hiredis, one connection per server, --async-window cycles per round:
 * every acquire of the round written at once, every reply read in order,
 * then every release the same way. Single locks spread over the n servers.
 */
typedef struct fp_name {
	char name[128], channel[160];
	size_t name_len, channel_len;
} fp_name;

/* Write what is appended on each context, then read one reply per name. */
static int fp_batch(floor_ctx *fc, int n, int k, const char *what)
{
	int i, bad = 0;

	for (i = 0; i < n; i++)
		if (floor_flush(&fc[i]) < 0)
			return -1;
	for (i = 0; i < k; i++) {
		floor_ctx *f = &fc[i % n];
		redisReply *r = NULL;

		if (redisGetReply(f->c[0], (void **)&r) != REDIS_OK)
			return floor_fail(f, what, f->c[0], NULL);
		if (r->type == REDIS_REPLY_ERROR)
			bad = floor_fail(f, what, f->c[0], r);
		freeReplyObject(r);
	}
	return bad;
}

/* One round: k acquires, then k releases; 0 or -1. */
static int fp_round(floor_ctx *fc, int n, const fp_name *nm, int k)
{
	int i;

	for (i = 0; i < k; i++) {
		floor_ctx *f = &fc[i % n];
		const char *argv[7] = { "EVALSHA", f->acq_sha, "1", nm[i].name, LEASE_S, f->owner, "0" };
		size_t lens[7] = { 7, 40, 1, nm[i].name_len, sizeof(LEASE_S) - 1, strlen(f->owner), 1 };

		redisAppendCommandArgv(f->c[0], 7, argv, lens);
	}
	if (fp_batch(fc, n, k, "pipelined acquire") < 0)
		return -1;
	for (i = 0; i < k; i++) {
		floor_ctx *f = &fc[i % n];
		const char *argv[10] = { "EVALSHA", f->rel_sha, "2", nm[i].name, nm[i].channel, "0",
			LEASE_S, f->owner, "1", "0" };
		size_t lens[10] = { 7, 40, 1, nm[i].name_len, nm[i].channel_len, 1,
			sizeof(LEASE_S) - 1, strlen(f->owner), 1, 1 };

		redisAppendCommandArgv(f->c[0], 10, argv, lens);
	}
	return fp_batch(fc, n, k, "pipelined release");
}

static result *floor_pipelined_row(int n)
{
	int k = opt.async_window, i;
	floor_ctx *fc = calloc((size_t)n, sizeof(*fc));
	fp_name *nm = calloc((size_t)k, sizeof(*nm));
	lat_buf lat = { NULL, 0, 0 };
	long done = 0, errors = 0;
	uint64_t end;
	s6_snap a, b;
	result *r;

	if (fc == NULL || nm == NULL)
		die("out of memory");
	for (i = 0; i < n; i++)
		floor_init(&fc[i], &i, 1, -1, "unused", 1000, 1000);
	for (i = 0; i < k; i++) {
		char what[48];

		snprintf(what, sizeof(what), "s6-floor-n%d-%d", n, i);
		lock_name(nm[i].name, sizeof(nm[i].name), what);
		nm[i].name_len = strlen(nm[i].name);
		nm[i].channel_len = (size_t)snprintf(nm[i].channel, sizeof(nm[i].channel),
				"redisson_lock__channel:{%s}", nm[i].name);
	}
	end = now_ns() + (uint64_t)(opt.async_warmup * 1e9);
	while (now_ns() < end)
		fp_round(fc, n, nm, k);
	s6_snap_take(&a, n, 0);
	end = now_ns() + (uint64_t)(opt.async_seconds * 1e9);
	while (now_ns() < end) {
		uint64_t t0 = now_ns(), t1;

		errors += fp_round(fc, n, nm, k) < 0;
		t1 = now_ns();
		for (i = 0; i < k; i++)
			lat_push(&lat, t1 - t0);
		done += k;
	}
	s6_snap_take(&b, n, done);
	r = new_result(6, "floor", "pipelined", n);
	s6_fill(r, &a, &b, &lat);
	r->errors = errors;
	snprintf(r->note, sizeof(r->note), "bare hiredis, one thread, %d per round pipelined on "
			"one connection per server", k);
	for (i = 0; i < n; i++)
		floor_free(&fc[i]);
	free(fc);
	free(nm);
	return r;
}

/* The rows measured, for the table at the end. */
typedef struct s6_row {
	result *a, *b, *f; /* async, blocking, the pipelined floor (NULL for RedLocks) */
	int red;
} s6_row;

static s6_row s6_rows[16];
static int s6_nrows;

/* One pair of rows: async against blocking, and their ratios. */
static void scenario6_pair(int n, int red)
{
	result *a = async_row(n, red), *b, *f = NULL;

	print_result(a);
	if (opt.async_threads == 0)
		return; /* profiling the loop alone */
	b = blocking_row(n, red);
	print_result(b);
	if (!red) {
		f = floor_pipelined_row(n);
		print_result(f);
	}
	note("  async/blocking n=%d%s: acquisitions/s x%.2f, CPU per acquisition x%.2f "
			"(%.1f against %.1f us)\n",
			n, red ? " RedLock" : "", a->ops_per_s / b->ops_per_s,
			a->cpu_us_per_op / b->cpu_us_per_op, a->cpu_us_per_op, b->cpu_us_per_op);
	if (s6_nrows < (int)(sizeof(s6_rows) / sizeof(s6_rows[0])))
		s6_rows[s6_nrows++] = (s6_row){ a, b, f, red };
}

static const char *pass_fail(int ok)
{
	return ok ? "PASS" : "FAIL";
}

/* The rows side by side, their ratios and the two targets. */
static void scenario6_table(void)
{
	int i;

	if (s6_nrows == 0)
		return;
	note("\n| servers | locks | async acq/s | threads acq/s | ratio | async CPU us/acq | "
			"threads CPU us/acq | ratio | async server CPU us/acq | threads server CPU "
			"us/acq | ratio client+server | async p50 / p99 us | threads p50 / p99 us | "
			"errors | acq/s >= %.1fx | CPU <= %.1fx | pipelined floor acq/s (x threads), "
			"CPU + server CPU us/acq |\n", S6_RATE_TARGET, S6_CPU_TARGET);
	note("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---|---|\n");
	for (i = 0; i < s6_nrows; i++) {
		const result *a = s6_rows[i].a, *b = s6_rows[i].b, *f = s6_rows[i].f;
		double rate = a->ops_per_s / b->ops_per_s, cpu = a->cpu_us_per_op / b->cpu_us_per_op;
		double tot = (a->cpu_us_per_op + a->server_cpu_us_per_op) /
			(b->cpu_us_per_op + b->server_cpu_us_per_op);
		char floor_cell[96] = "-";

		if (f != NULL)
			snprintf(floor_cell, sizeof(floor_cell), "%.0f (%.2fx), %.1f + %.1f",
					f->ops_per_s, f->ops_per_s / b->ops_per_s, f->cpu_us_per_op,
					f->server_cpu_us_per_op);
		note("| %d | %s | %.0f | %.0f | %.2fx | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx | "
				"%.0f / %.0f | %.0f / %.0f | %ld / %ld | %s | %s | %s |\n",
				a->servers, s6_rows[i].red ? "RedLock over all" : "single, spread",
				a->ops_per_s, b->ops_per_s, rate, a->cpu_us_per_op, b->cpu_us_per_op, cpu,
				a->server_cpu_us_per_op, b->server_cpu_us_per_op, tot, a->pair.p50,
				a->pair.p99, b->pair.p50, b->pair.p99, a->errors, b->errors,
				pass_fail(rate >= S6_RATE_TARGET), pass_fail(cpu <= S6_CPU_TARGET), floor_cell);
	}
	note("\n(async: one loop thread, %d cycles in flight; threads: %d blocking threads; "
			"%g s measured after %g s of warm-up per row; CPU = this process's user+sys, "
			"server CPU = the redis-servers' utime+stime; the rate target is the issue's for "
			"1 server; the pipelined floor: bare hiredis, the same scripts, %d per round "
			"written at once on one connection per server)\n",
			opt.async_window, opt.async_threads, opt.async_seconds, opt.async_warmup,
			opt.async_window);
}

static void scenario6(void)
{
	int i;

	note("scenario 6: asynchronous (one loop thread, %d in flight) against blocking (%d threads): "
			"acquire+release (wait 0) on distinct uncontended names, %g s per row after "
			"%g s of warm-up: single locks (RLock) spread over the servers, then RedLocks "
			"over all of them (3 or more)\n",
			opt.async_window, opt.async_threads, opt.async_seconds, opt.async_warmup);
	for (i = 0; i < opt.nasync_counts; i++) {
		int n = opt.async_counts[i];

		if (n < 1 || n > nservers) {
			note("  %d servers: skipped (%d available)\n", n, nservers);
			continue;
		}
		scenario6_pair(n, 0);
		if (n >= 3)
			scenario6_pair(n, 1);
	}
	scenario6_table();
}

/* ------------------------------------------------------------------------ */
/* Output                                                                     */

static void cpu_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];

	snprintf(buf, len, "unknown");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "model name", 10) == 0) {
			char *p = strchr(line, ':');

			if (p != NULL) {
				p += 1 + strspn(p + 1, " \t");
				snprintf(buf, len, "%.*s", (int)strcspn(p, "\n"), p);
			}
			break;
		}
	}
	fclose(f);
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void write_json(const char *redis_version)
{
	char model[256], date[64];
	time_t t = time(NULL);
	int i;

	cpu_model(model, sizeof(model));
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	printf("{\n  \"tool\": \"dlock-bench\", \"dlock_version\": \"%s\", \"date\": \"%s\", "
			"\"nproc\": %ld, \"cpu_model\": ", DLOCK_VERSION_STRING, date,
			sysconf(_SC_NPROCESSORS_ONLN));
	json_string(stdout, model);
	printf(", \"redis_version\": ");
	json_string(stdout, redis_version);
	printf(",\n  \"iterations\": %ld, \"iterations_paused\": %ld, \"warmup\": %ld, "
			"\"warmup_paused\": %ld, \"duration_s\": %.1f, \"handoffs\": %ld, \"floor_latch_del\": \"%s\", ",
			opt.iterations, opt.iterations_paused, opt.warmup, opt.warmup_paused, opt.duration, opt.handoffs,
			opt.floor_del ? "pipelined" : "omitted");
	json_num(stdout, "rt_us", g_rt_us, 0);
	printf(",\n  \"results\": [\n");
	for (i = 0; i < nresults; i++) {
		const result *r = &results[i];

		printf("    {\"scenario\": %d, \"impl\": \"%s\", \"what\": \"%s\", \"servers\": %d, "
				"\"paused\": %d, \"threads\": %d, \"samples\": %ld, \"errors\": %ld, ",
				r->scenario, r->impl, r->what, r->servers, r->paused, r->threads,
				r->pair.n, r->errors);
		json_dist(stdout, "", &r->pair);
		json_dist(stdout, "acquire_", &r->acq);
		json_dist(stdout, "release_", &r->rel);
		json_num(stdout, "ops_per_s", r->ops_per_s, 1);
		json_num(stdout, "cpu_us_per_op", r->cpu_us_per_op, 1);
		json_num(stdout, "server_cpu_us_per_op", r->server_cpu_us_per_op, 1);
		json_num(stdout, "connections_per_op", r->conns_per_op, 1);
		json_num(stdout, "rt_us", r->rt_us, 1);
		json_num(stdout, "p50_rt", isnan(r->rt_us) ? NAN : r->pair.p50 / r->rt_us, 1);
		json_num(stdout, "p99_rt", isnan(r->rt_us) ? NAN : r->pair.p99 / r->rt_us, 1);
		printf("\"iters\": %ld, ", r->iters);
		json_num(stdout, "wall_s", r->wall_s, 1);
		json_num(stdout, "cpu_us_total", r->cpu_us_total, 1);
		json_num(stdout, "server_cpu_us_total", r->server_cpu_us_total, 1);
		if (r->samples != NULL) {
			long k;

			printf("\"pair_ns\": [");
			for (k = 0; k < r->nsamples; k++)
				printf("%s%" PRIu64, k ? "," : "", r->samples[k]);
			printf("], ");
		}
		printf("\"note\": ");
		json_string(stdout, r->note);
		printf("}%s\n", i + 1 < nresults ? "," : "");
	}
	printf("  ]\n}\n");
}

/* ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
"usage: dlock-bench [options]\n"
"  --scenario LIST        scenarios to run, e.g. 1,2,5 (default 1,2,3,4,5,6; 7 on request)\n"
"  --iterations N         lock+unlock pairs for scenarios 1 and 2 (default 20000)\n"
"  --iterations-paused N  pairs for scenario 5, per phase (default 300)\n"
"  --warmup N             warm-up pairs before each loop (default 2000)\n"
"  --warmup-paused N      warm-up pairs in scenario 5, per phase (default 20)\n"
"  --duration S           seconds per run of scenario 3 (default 5)\n"
"  --threads LIST         thread counts for scenario 3 (default 1,2,4)\n"
"  --servers LIST         server counts for scenarios 1 and 2 (default 1,3,5)\n"
"  --handoffs N           hand-offs measured in scenario 4 (default 2000)\n"
"  --async-window K       scenario 6: cycles in flight on the loop (default 256)\n"
"  --async-threads N      scenario 6: threads of the blocking row (default 8; 0: no\n"
"                         blocking row, to profile the loop alone)\n"
"  --async-servers LIST   scenario 6: server counts (default 1,5)\n"
"  --async-seconds S      scenario 6: seconds measured per row (default 10)\n"
"  --async-warmup S       scenario 6: seconds of warm-up before each (default 2)\n"
"  --async-pool N         scenario 6: pool_size of the async row's clients (default:\n"
"                         dlock's, 8), to see what more connections change\n"
"  --block N              dlock and floor alternate every N pairs (default 500)\n"
"  --uris U1,U2,...       use these servers (redis://127.0.0.1:PORT) instead of\n"
"                         starting 5 redis-servers\n"
"  --tls-ca FILE          rediss:// URIs: their CA (--scenario 1 only: the floor,\n"
"                         scenario 2, speaks plain TCP)\n"
"  --pause-pid PID        with --uris: the server scenario 5 pauses (SIGSTOP)\n"
"  --pause-index I        without --uris: which of our 5 servers to pause (default 4)\n"
"  --paused-connect-timeout-ms MS  scenario 5's connect timeout (default: dlock's)\n"
"  --floor-del yes|no     pipeline a latch DEL after the floor's release, as dlock\n"
"                         did before its release was safe to repeat (default no)\n"
"  --redis-server PATH    redis-server to start (default: from PATH)\n"
"  --json                 print JSON on stdout (the human report goes to stderr)\n"
"  --samples              with --json: every pair latency (ns) of scenarios 1, 2, 5\n");
}

static void parse_list(const char *s, int *outv, int max, int *count)
{
	char *copy = strdup(s), *tok, *save = NULL;
	int n = 0;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == max)
			die("list too long: %s", s);
		outv[n++] = atoi(tok);
	}
	*count = n;
	free(copy);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "scenario", required_argument, NULL, 's' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "iterations-paused", required_argument, NULL, 'P' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "warmup-paused", required_argument, NULL, 'W' },
		{ "duration", required_argument, NULL, 'd' },
		{ "threads", required_argument, NULL, 't' },
		{ "servers", required_argument, NULL, 'S' },
		{ "handoffs", required_argument, NULL, 'H' },
		{ "async-window", required_argument, NULL, 'K' },
		{ "async-threads", required_argument, NULL, 'A' },
		{ "async-servers", required_argument, NULL, 'Y' },
		{ "async-seconds", required_argument, NULL, 'E' },
		{ "async-warmup", required_argument, NULL, 'F' },
		{ "async-pool", required_argument, NULL, 'G' },
		{ "block", required_argument, NULL, 'B' },
		{ "uris", required_argument, NULL, 'u' },
		{ "tls-ca", required_argument, NULL, 'T' },
		{ "pause-pid", required_argument, NULL, 'p' },
		{ "pause-index", required_argument, NULL, 'i' },
		{ "paused-connect-timeout-ms", required_argument, NULL, 'C' },
		{ "floor-del", required_argument, NULL, 'D' },
		{ "redis-server", required_argument, NULL, 'R' },
		{ "json", no_argument, NULL, 'j' },
		{ "samples", no_argument, NULL, 'X' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char version[32] = "?";
	int c, i, list[8], nlist;

	out = stdout;
	for (i = 1; i <= 6; i++)
		opt.scenarios[i] = 1; /* 7 on request */
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			memset(opt.scenarios, 0, sizeof(opt.scenarios));
			parse_list(optarg, list, 8, &nlist);
			for (i = 0; i < nlist; i++) {
				if (list[i] < 1 || list[i] > 7)
					die("--scenario: 1..7");
				opt.scenarios[list[i]] = 1;
			}
			break;
		case 'n': opt.iterations = atol(optarg); break;
		case 'P': opt.iterations_paused = atol(optarg); break;
		case 'w': opt.warmup = atol(optarg); break;
		case 'W': opt.warmup_paused = atol(optarg); break;
		case 'd': opt.duration = atof(optarg); break;
		case 't': parse_list(optarg, opt.threads, 8, &opt.nthreads); break;
		case 'S': parse_list(optarg, opt.server_counts, 8, &opt.ncounts); break;
		case 'H': opt.handoffs = atol(optarg); break;
		case 'K': opt.async_window = atoi(optarg); break;
		case 'A': opt.async_threads = atoi(optarg); break;
		case 'Y': parse_list(optarg, opt.async_counts, 8, &opt.nasync_counts); break;
		case 'E': opt.async_seconds = atof(optarg); break;
		case 'F': opt.async_warmup = atof(optarg); break;
		case 'G': opt.async_pool = atoi(optarg); break;
		case 'B': opt.block = atol(optarg); break;
		case 'u': {
			char *copy = strdup(optarg), *tok, *save = NULL;

			for (tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
				if (opt.nuris == MAX_SERVERS)
					die("--uris: at most %d", MAX_SERVERS);
				opt.uris[opt.nuris++] = strdup(tok);
			}
			free(copy);
			break;
		}
		case 'T': tls_opts.tls_ca_file = optarg; break;
		case 'p': opt.pause_pid = (pid_t)atol(optarg); break;
		case 'i': opt.pause_index = atoi(optarg); break;
		case 'C': opt.paused_connect_timeout_ms = atoi(optarg); break;
		case 'D': opt.floor_del = strcmp(optarg, "no") != 0; break;
		case 'R': opt.redis_server = optarg; break;
		case 'j': opt.json = 1; out = stderr; break;
		case 'X': opt.samples = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || opt.iterations < 1 || opt.iterations_paused < 1 || opt.warmup < 0 || opt.warmup_paused < 0 ||
	    opt.duration <= 0 || opt.handoffs < 1 || opt.block < 1 || opt.async_window < 1 ||
	    opt.async_threads < 0 || opt.async_threads > 256 || !(opt.async_seconds > 0) ||
	    !(opt.async_warmup >= 0) || opt.async_pool < 0 || opt.async_pool > 1024) {
		usage(stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	atexit(cleanup);
	{
		uint64_t s = seed();

		hex(run_id, s, 16);
		run_id[16] = '\0';
	}
	setup_servers();
	server_process_id(&servers[0], version, sizeof(version));
	{
		char model[256];

		cpu_model(model, sizeof(model));
		note("dlock-bench %s: %d servers (%s), redis %s, %ld CPUs (%s), run %s\n",
				DLOCK_VERSION_STRING, nservers, opt.nuris ? "given" : "started here",
				version, sysconf(_SC_NPROCESSORS_ONLN), model, run_id);
	}
	if (opt.scenarios[1] || opt.scenarios[2])
		uncontended(opt.scenarios[1], opt.scenarios[2]);
	if (opt.scenarios[3])
		scenario3();
	if (opt.scenarios[4])
		scenario4();
	if (opt.scenarios[5])
		scenario5();
	if (opt.scenarios[6])
		scenario6();
	if (opt.scenarios[7])
		scenario7();
	if (opt.json)
		write_json(version);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Scenario 7: the event hook and the stats                                  */

static atomic_ulong s7_events;

static void s7_count(const dlock_stat_event *ev, void *ud)
{
	(void)ev;
	(void)ud;
	atomic_fetch_add_explicit(&s7_events, 1, memory_order_relaxed);
}

/* The stats work one RLock lock+unlock pair does, without the wire: two
 * commands answered, an acquisition, a hold begun and released, and the two
 * clock reads the acquisition's wait and the hold's time take (and the
 * acquisition's start, read before stats too: an overestimate). */
static double stats_ns_per_pair(dlock_client *c, long rounds)
{
	redisReply reply;
	volatile int64_t sink = 0;
	uint64_t t0;
	long i;

	memset(&reply, 0, sizeof(reply));
	reply.type = REDIS_REPLY_INTEGER;
	t0 = now_ns();
	for (i = 0; i < rounds; i++) {
		int64_t a = dlock__now_us(); /* the acquisition's start: read before too */

		dlock__stat_command(c, 0, &reply, 40);
		dlock__stat_acquire(c, 0, "bench", "owner", dlock__now_us() - a, 1, 1, 1);
		dlock__stat_held(c);
		dlock__stat_command(c, 0, &reply, 40);
		dlock__stat_released(c, "bench", "owner", dlock__now_ms() - a / 1000);
		sink += a;
	}
	(void)sink;
	return (double)(now_ns() - t0) / (double)rounds;
}

static void scenario7(void)
{
	dlock_client_options plain = tls_opts, hooked = tls_opts;
	dlock_client *cp = NULL, *ch = NULL;
	dl_ctx a = { NULL, NULL, 5 }, b = { NULL, NULL, 5 };
	char name[128];
	meter ma, mb;
	result *ra, *rb;
	double ns;

	note("scenario 7: the event hook's cost, RLock lock+unlock on 1 server, without and "
			"with a counting on_event (alternating blocks)\n");
	note("  %ld iterations each, %ld warm-up\n", opt.iterations, opt.warmup);
	hooked.on_event = s7_count;
	if (dlock_client_new(&cp, servers[0].uri, &plain) < 0 ||
			dlock_client_new(&ch, servers[0].uri, &hooked) < 0)
		die("dlock_client_new: %s", dlock_errmsg_last());
	lock_name(name, sizeof(name), "s7-plain");
	if (dlock_lock_new(&a.lock, cp, name, NULL) < 0)
		die("dlock_lock_new: %s", dlock_errmsg_last());
	lock_name(name, sizeof(name), "s7-hooked");
	if (dlock_lock_new(&b.lock, ch, name, NULL) < 0)
		die("dlock_lock_new: %s", dlock_errmsg_last());
	meter_init(&ma, dl_single_pair, &a, opt.iterations);
	meter_init(&mb, dl_single_pair, &b, opt.iterations);
	measure(&ma, &mb, opt.warmup, opt.iterations);
	ra = new_result(7, "dlock", "no hook", 1);
	meter_finish(&ma, ra);
	snprintf(ra->note, sizeof(ra->note), "on_event NULL");
	print_result(ra);
	rb = new_result(7, "dlock", "hook", 1);
	meter_finish(&mb, rb);
	snprintf(rb->note, sizeof(rb->note), "on_event counting: %lu events",
			(unsigned long)atomic_load(&s7_events));
	print_result(rb);
	note("  ratio hook/no hook: ops/s %.4f  mean %.4f  p50 %.4f  p99 %.4f  cpu %.4f\n",
			rb->ops_per_s / ra->ops_per_s, rb->pair.mean / ra->pair.mean,
			rb->pair.p50 / ra->pair.p50, rb->pair.p99 / ra->pair.p99,
			rb->cpu_us_per_op / ra->cpu_us_per_op);
	ns = stats_ns_per_pair(ch, 1000000);
	note("  stats work of one pair, alone (hook on, 1e6 rounds): %.1f ns = %.3f%% of the "
			"no-hook pair's mean %.1f us\n",
			ns, ns / (ra->pair.mean * 1000.0) * 100.0, ra->pair.mean);
	dlock_lock_free(a.lock);
	dlock_lock_free(b.lock);
	dlock_client_free(cp);
	dlock_client_free(ch);
}
