/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock-cluster-bench: the scale-out figure of Redis Cluster support.
 *
 *   dlock-cluster-bench --uri URI --servers H:P[,H:P...] [--threads T]
 *                       [--seconds S] [--names N]
 *     Threads take and release many distinct lock names (no contention)
 *     through one client for S seconds; prints ops/s, ops/s per primary,
 *     lock+unlock p50/p99, and the servers' CPU per operation (INFO cpu,
 *     summed over --servers: the primaries serving the names).
 *
 *   dlock-cluster-bench --uri redis+cluster://... --servers H:P,... --moved K
 *     The cost of a MOVED redirect: K times, an empty slot is handed to
 *     another primary behind the client's back (CLUSTER SETSLOT .. NODE on
 *     every primary), and the next lock+unlock of a name in it (which meets
 *     MOVED and is rerun at the new owner) is timed against the one after.
 *
 *   dlock-cluster-bench --uri redis+cluster://... --servers H:P,... --holds N
 *                       [--watchdog MS] [--periods P] [--threads T]
 *     N watchdog holds through one client (T threads acquire them), then P
 *     renewal periods (a third of the watchdog timeout each) watched: the
 *     client's writes and the servers' EVALSHA calls per renewal round and
 *     node, the servers' CPU per round (INFO cpu, the sampling included), and
 *     the least remaining TTL (PTTL) seen on ~1000 of the keys, sampled
 *     every 5 ms - the worst a hold gets before its renewal. With --free 1,
 *     then the time dlock_lock_free() takes for all N handles (their holds
 *     still renewed).
 *
 * bench/cluster-compare.sh starts the servers and runs the first two. Loopback only.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>

#include <dlock.h>

#include "clock.h"
/* The nodes' write counters (core/net/conn.h): round trips are not in the
 * public stats, which count commands. */
#include "core/drive/client.h"
#include "core/topology/cluster.h"

#define MAX_SERVERS 16
#define MAX_SAMPLES (1 << 22)

typedef struct config {
	const char *uri;
	char *hosts[MAX_SERVERS];
	int ports[MAX_SERVERS], nservers;
	int threads, names, moved, holds, periods, free_handles;
	int64_t watchdog_ms;
	double seconds;
} config;

typedef struct shared {
	const config *cfg;
	dlock_client *client;
	atomic_int stop;
	atomic_long ops, errors;
	double *lat; /* microseconds, one per op until full */
	atomic_long nlat;
} shared;

typedef struct worker {
	shared *sh;
	int id;
	pthread_t th;
} worker;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void *work(void *arg)
{
	worker *w = arg;
	shared *sh = w->sh;
	int per = sh->cfg->names / sh->cfg->threads, k = 0;
	dlock_lock **locks = calloc((size_t)per, sizeof(*locks));

	for (int i = 0; i < per; i++) {
		char name[32];

		snprintf(name, sizeof name, "bench-%d-%d", w->id, i);
		if (locks == NULL || dlock_lock_new(&locks[i], sh->client, name, NULL) != 0) {
			fprintf(stderr, "dlock-cluster-bench: lock: %s\n", dlock_errmsg_last());
			exit(1);
		}
	}
	while (!atomic_load(&sh->stop)) {
		double t0 = (now_ns() / 1e3);
		int rc = dlock_lock_acquire(locks[k], NULL, 0, 10000);

		if (rc == 0)
			rc = dlock_lock_release(locks[k], NULL);
		if (rc != 0) {
			atomic_fetch_add(&sh->errors, 1);
		} else {
			long i = atomic_fetch_add(&sh->nlat, 1);

			if (i < MAX_SAMPLES)
				sh->lat[i] = (now_ns() / 1e3) - t0;
			atomic_fetch_add(&sh->ops, 1);
		}
		k = (k + 1) % per;
	}
	for (int i = 0; i < per; i++)
		dlock_lock_free(locks[i]);
	free(locks);
	return NULL;
}

/* Sum of used_cpu_sys + used_cpu_user over the servers, seconds. */
static double servers_cpu(const config *cfg)
{
	double total = 0;

	for (int i = 0; i < cfg->nservers; i++) {
		redisContext *c = redisConnect(cfg->hosts[i], cfg->ports[i]);
		redisReply *r = c && !c->err ? redisCommand(c, "INFO cpu") : NULL;
		const char *p;

		if (r != NULL && r->type == REDIS_REPLY_STRING) {
			if ((p = strstr(r->str, "used_cpu_sys:")) != NULL)
				total += atof(p + 13);
			if ((p = strstr(r->str, "used_cpu_user:")) != NULL)
				total += atof(p + 14);
		}
		if (r)
			freeReplyObject(r);
		if (c)
			redisFree(c);
	}
	return total;
}

static int throughput(const config *cfg)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	shared sh;
	worker w[64];
	double cpu0, cpu1, t0, t1;
	long n;

	memset(&sh, 0, sizeof sh);
	sh.cfg = cfg;
	sh.lat = malloc(sizeof(double) * MAX_SAMPLES);
	o.pool_size = cfg->threads;
	if (sh.lat == NULL || dlock_client_new(&sh.client, cfg->uri, &o) != 0) {
		fprintf(stderr, "dlock-cluster-bench: %s\n", dlock_errmsg_last());
		return 1;
	}
	cpu0 = servers_cpu(cfg);
	t0 = (now_ns() / 1e3);
	for (int i = 0; i < cfg->threads; i++) {
		w[i].sh = &sh;
		w[i].id = i;
		pthread_create(&w[i].th, NULL, work, &w[i]);
	}
	{
		struct timespec ts = { (time_t)cfg->seconds,
			(long)((cfg->seconds - (double)(time_t)cfg->seconds) * 1e9) };

		nanosleep(&ts, NULL);
	}
	atomic_store(&sh.stop, 1);
	for (int i = 0; i < cfg->threads; i++)
		pthread_join(w[i].th, NULL);
	t1 = (now_ns() / 1e3);
	cpu1 = servers_cpu(cfg);
	n = atomic_load(&sh.nlat) < MAX_SAMPLES ? atomic_load(&sh.nlat) : MAX_SAMPLES;
	qsort(sh.lat, (size_t)n, sizeof(double), cmp_double);
	double secs = (t1 - t0) / 1e6, ops = (double)atomic_load(&sh.ops);
	printf("uri=%s threads=%d names=%d ops=%.0f errors=%ld ops_per_s=%.0f "
	       "ops_per_s_per_primary=%.0f p50_us=%.0f p99_us=%.0f server_cpu_us_per_op=%.1f\n",
			cfg->uri, cfg->threads, cfg->names, ops, atomic_load(&sh.errors),
			ops / secs, ops / secs / cfg->nservers, n ? sh.lat[n / 2] : 0,
			n ? sh.lat[n * 99 / 100] : 0, ops > 0 ? (cpu1 - cpu0) * 1e6 / ops : 0);
	dlock_client_free(sh.client);
	free(sh.lat);
	return 0;
}

static redisReply *cmd_at(const config *cfg, int i, const char *fmt, ...)
{
	redisContext *c = redisConnect(cfg->hosts[i], cfg->ports[i]);
	redisReply *r = NULL;
	va_list ap;

	if (c != NULL && !c->err) {
		va_start(ap, fmt);
		r = redisvCommand(c, fmt, ap);
		va_end(ap);
	}
	if (c)
		redisFree(c);
	return r;
}

/* Server i's node id (CLUSTER MYID). */
static void node_id(const config *cfg, int i, char id[64])
{
	redisReply *r = cmd_at(cfg, i, "CLUSTER MYID");

	snprintf(id, 64, "%s", r && r->type == REDIS_REPLY_STRING ? r->str : "");
	if (r)
		freeReplyObject(r);
}

static double lock_unlock_us(dlock_lock *l)
{
	double t0 = (now_ns() / 1e3);

	if (dlock_lock_acquire(l, NULL, 0, 10000) != 0 || dlock_lock_release(l, NULL) != 0) {
		fprintf(stderr, "dlock-cluster-bench: %s\n", dlock_lock_errmsg(l));
		exit(1);
	}
	return (now_ns() / 1e3) - t0;
}

static int moved_cost(const config *cfg)
{
	dlock_client *c = NULL;
	double *with = calloc((size_t)cfg->moved, sizeof(double));
	double *without = calloc((size_t)cfg->moved, sizeof(double));
	char ids[MAX_SERVERS][64];

	if (with == NULL || without == NULL || dlock_client_new(&c, cfg->uri, NULL) != 0) {
		fprintf(stderr, "dlock-cluster-bench: %s\n", dlock_errmsg_last());
		return 1;
	}
	for (int i = 0; i < cfg->nservers; i++)
		node_id(cfg, i, ids[i]);
	for (int k = 0; k < cfg->moved; k++) {
		char name[32];
		dlock_lock *l = NULL;
		redisReply *r;
		long long slot;
		int from = -1;

		snprintf(name, sizeof name, "moved-%d", k);
		dlock_lock_new(&l, c, name, NULL);
		lock_unlock_us(l); /* the client knows the owner now */
		r = cmd_at(cfg, 0, "CLUSTER KEYSLOT %s", name);
		slot = r ? r->integer : -1;
		freeReplyObject(r);
		for (int i = 0; i < cfg->nservers && from < 0; i++) {
			r = cmd_at(cfg, i, "EXISTS %s", name); /* MOVED from the others */
			from = r && r->type == REDIS_REPLY_INTEGER ? i : -1;
			freeReplyObject(r);
		}
		int to = (from + 1) % cfg->nservers;
		for (int i = 0; i < cfg->nservers; i++) /* the slot is empty: hand it over */
			freeReplyObject(cmd_at(
					cfg, i, "CLUSTER SETSLOT %lld NODE %s", slot, ids[to]));
		with[k] = lock_unlock_us(l);    /* MOVED, then the new owner */
		without[k] = lock_unlock_us(l); /* the map knows it */
		dlock_lock_free(l);
	}
	qsort(with, (size_t)cfg->moved, sizeof(double), cmp_double);
	qsort(without, (size_t)cfg->moved, sizeof(double), cmp_double);
	printf("moved samples=%d lock_unlock_after_moved_p50_us=%.0f lock_unlock_p50_us=%.0f "
	       "moved_cost_p50_us=%.0f\n",
			cfg->moved, with[cfg->moved / 2], without[cfg->moved / 2],
			with[cfg->moved / 2] - without[cfg->moved / 2]);
	dlock_client_free(c);
	free(with);
	free(without);
	return 0;
}

/* ---- --holds: renewal rounds at scale ---- */

typedef struct holder_part {
	const config *cfg;
	dlock_client *client;
	dlock_lock **locks;
	int from, to;
	atomic_long *failed;
	pthread_t th;
} holder_part;

static void *take_holds(void *arg)
{
	holder_part *p = arg;
	int rc, k;

	for (int i = p->from; i < p->to; i++) {
		char name[32];

		snprintf(name, sizeof name, "hold-%d", i);
		if (dlock_lock_new(&p->locks[i], p->client, name, NULL) != 0) {
			atomic_fetch_add(p->failed, 1);
			continue;
		}
		/* Distinct names: a failure is transient (a timeout, a node not up yet); again. */
		for (rc = -1, k = 0; rc != 0 && k < 5; k++)
			rc = dlock_lock_acquire(p->locks[i], NULL, 0, DLOCK_LEASE_WATCHDOG);
		if (rc != 0) {
			fprintf(stderr, "dlock-cluster-bench: %s: %s\n", name,
					dlock_lock_errmsg(p->locks[i]));
			atomic_fetch_add(p->failed, 1);
		}
	}
	return NULL;
}

typedef struct node_writes {
	char label[MAX_SERVERS][280];
	uint64_t writes[MAX_SERVERS];
	int n;
} node_writes;

static void count_writes(dlock_client *member, void *arg)
{
	node_writes *w = arg;

	if (w->n == MAX_SERVERS)
		return;
	snprintf(w->label[w->n], sizeof w->label[0], "%s", member->node.label);
	w->writes[w->n++] = atomic_load(&member->node.writes);
}

static void writes_now(dlock_client *c, node_writes *w)
{
	memset(w, 0, sizeof *w);
	dlock__cluster_each_member(c->node.cluster, count_writes, w);
}

/* cmdstat_evalsha calls= of server i (0 when absent). */
static long long evalsha_calls(const config *cfg, int i)
{
	redisReply *r = cmd_at(cfg, i, "INFO commandstats");
	long long n = 0;
	const char *p;

	if (r != NULL && r->type == REDIS_REPLY_STRING &&
			(p = strstr(r->str, "cmdstat_evalsha:calls=")) != NULL)
		n = atoll(p + strlen("cmdstat_evalsha:calls="));
	if (r)
		freeReplyObject(r);
	return n;
}

/* Which server holds key: the one that does not answer MOVED. */
static int owner_of(redisContext **ctx, const config *cfg, const char *key)
{
	for (int i = 0; i < cfg->nservers; i++) {
		redisReply *r = redisCommand(ctx[i], "PTTL %s", key);
		int here = r != NULL && r->type == REDIS_REPLY_INTEGER;

		if (r)
			freeReplyObject(r);
		if (here)
			return i;
	}
	return -1;
}

static int renewals_at_scale(const config *cfg)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;
	dlock_lock **locks = calloc((size_t)cfg->holds, sizeof(*locks));
	holder_part parts[64];
	atomic_long failed = 0;
	redisContext *ctx[MAX_SERVERS];
	int nsample = cfg->holds < 1000 ? cfg->holds : 1000, *sample_at, lost = 0;
	char (*sample)[32];
	long long eval0[MAX_SERVERS], eval1[MAX_SERVERS];
	node_writes w0, w1;
	dlock_stats *s0 = NULL, *s1 = NULL;
	int64_t least = INT64_MAX, period = cfg->watchdog_ms / 3;
	struct timespec pause = { 0, 5000000L };
	double t0, t1, cpu0, cpu1;

	o.watchdog_timeout_ms = cfg->watchdog_ms;
	o.pool_size = cfg->threads;
	sample = calloc((size_t)nsample, sizeof(*sample));
	sample_at = calloc((size_t)nsample, sizeof(*sample_at));
	if (locks == NULL || sample == NULL || sample_at == NULL ||
			dlock_client_new(&c, cfg->uri, &o) != 0) {
		fprintf(stderr, "dlock-cluster-bench: %s\n", dlock_errmsg_last());
		return 1;
	}
	t0 = now_ns() / 1e6;
	for (int i = 0; i < cfg->threads; i++) {
		parts[i] = (holder_part){ cfg, c, locks, (int)((long)cfg->holds * i / cfg->threads),
			(int)((long)cfg->holds * (i + 1) / cfg->threads), &failed, 0 };
		pthread_create(&parts[i].th, NULL, take_holds, &parts[i]);
	}
	for (int i = 0; i < cfg->threads; i++)
		pthread_join(parts[i].th, NULL);
	t1 = now_ns() / 1e6;
	if (atomic_load(&failed) > 0) {
		fprintf(stderr, "dlock-cluster-bench: %ld holds not taken: %s\n",
				atomic_load(&failed), dlock_errmsg_last());
		return 1;
	}
	dlock_client_stats(&s0, c);
	printf("holds=%d taken_in_ms=%.0f acquire_per_s=%.0f lost_while_taking=%llu\n", cfg->holds,
			t1 - t0, cfg->holds / ((t1 - t0) / 1e3), (unsigned long long)s0->lost);
	dlock_stats_free(s0);
	s0 = NULL;
	for (int i = 0; i < cfg->nservers; i++) {
		ctx[i] = redisConnect(cfg->hosts[i], cfg->ports[i]);
		if (ctx[i] == NULL || ctx[i]->err)
			return 1;
	}
	for (int k = 0; k < nsample; k++) {
		snprintf(sample[k], sizeof sample[k], "hold-%d",
				(int)((long)k * cfg->holds / nsample));
		sample_at[k] = owner_of(ctx, cfg, sample[k]);
	}
	/* Start at a round's edge: the holds were taken over t1 - t0 ms, so
	 * the rounds after the first one are steady. */
	{
		struct timespec ts = { (time_t)(period / 1000), (long)(period % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	dlock_client_stats(&s0, c);
	writes_now(c, &w0);
	for (int i = 0; i < cfg->nservers; i++)
		eval0[i] = evalsha_calls(cfg, i);
	cpu0 = servers_cpu(cfg);
	t0 = now_ns() / 1e6;
	/* Sample PTTL every 5 ms, a pipeline per server, until P periods. */
	while (now_ns() / 1e6 - t0 < (double)(period * cfg->periods)) {
		for (int k = 0; k < nsample; k++)
			if (sample_at[k] >= 0)
				redisAppendCommand(ctx[sample_at[k]], "PTTL %s", sample[k]);
		for (int k = 0; k < nsample; k++) {
			redisReply *r = NULL;

			if (sample_at[k] < 0 || redisGetReply(ctx[sample_at[k]], (void **)&r) != REDIS_OK)
				continue;
			if (r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && r->integer < least)
				least = r->integer;
			if (r->type == REDIS_REPLY_INTEGER && r->integer == -2)
				lost++;
			freeReplyObject(r);
		}
		nanosleep(&pause, NULL); /* the servers' time is for the renewals */
	}
	t1 = now_ns() / 1e6;
	cpu1 = servers_cpu(cfg);
	dlock_client_stats(&s1, c);
	writes_now(c, &w1);
	for (int i = 0; i < cfg->nservers; i++)
		eval1[i] = evalsha_calls(cfg, i);
	double rounds = (double)(s1->renewals - s0->renewals) / cfg->holds;

	printf("watchdog_ms=%lld periods=%.1f rounds=%.2f renewal_failures=%llu lost=%llu "
	       "sampled=%d sampled_gone=%d least_pttl_ms=%lld least_pttl_pct=%.0f "
	       "server_cpu_ms_per_round=%.0f\n",
			(long long)cfg->watchdog_ms, (t1 - t0) / period, rounds,
			(unsigned long long)(s1->renewal_failures - s0->renewal_failures),
			(unsigned long long)(s1->lost - s0->lost), nsample, lost,
			(long long)(least == INT64_MAX ? -1 : least),
			least == INT64_MAX ? 0.0 : 100.0 * (double)least / (double)cfg->watchdog_ms,
			rounds > 0 ? (cpu1 - cpu0) * 1e3 / rounds : 0);
	for (int i = 0; i < w1.n; i++) {
		int j = 0;

		while (j < cfg->nservers) { /* the server of this member, by port */
			const char *colon = strrchr(w1.label[i], ':');

			if (colon != NULL && atoi(colon + 1) == cfg->ports[j])
				break;
			j++;
		}
		printf("node=%s writes_per_round=%.1f evalsha_per_round=%.0f\n", w1.label[i],
				rounds > 0 ? (double)(w1.writes[i] - w0.writes[i]) / rounds : 0,
				rounds > 0 && j < cfg->nservers ? (double)(eval1[j] - eval0[j]) / rounds
								: 0);
	}
	if (cfg->free_handles) {
		/* Each handle forgets its hold (no unlock): the keys expire. */
		t0 = now_ns() / 1e6;
		for (int i = 0; i < cfg->holds; i++)
			dlock_lock_free(locks[i]);
		t1 = now_ns() / 1e6;
		printf("freed handles=%d in_ms=%.0f\n", cfg->holds, t1 - t0);
	}
	/* No client teardown: the keys expire with the watchdog timeout, and
	 * the servers are removed anyway. */
	fflush(stdout);
	_Exit(0);
}

static int parse_servers(config *cfg, char *list)
{
	for (char *tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
		char *colon = strrchr(tok, ':');

		if (colon == NULL || cfg->nservers == MAX_SERVERS)
			return -1;
		*colon = '\0';
		cfg->hosts[cfg->nservers] = tok;
		cfg->ports[cfg->nservers++] = atoi(colon + 1);
	}
	return cfg->nservers > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	config cfg = { .threads = 8, .names = 4096, .seconds = 5, .periods = 6,
		.watchdog_ms = 3000 };

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--uri") == 0)
			cfg.uri = argv[i + 1];
		else if (strcmp(argv[i], "--servers") == 0 && parse_servers(&cfg, argv[i + 1]) < 0)
			return 2;
		else if (strcmp(argv[i], "--threads") == 0)
			cfg.threads = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--seconds") == 0)
			cfg.seconds = atof(argv[i + 1]);
		else if (strcmp(argv[i], "--names") == 0)
			cfg.names = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--moved") == 0)
			cfg.moved = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--holds") == 0)
			cfg.holds = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--watchdog") == 0)
			cfg.watchdog_ms = atoll(argv[i + 1]);
		else if (strcmp(argv[i], "--periods") == 0)
			cfg.periods = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--free") == 0)
			cfg.free_handles = atoi(argv[i + 1]);
	}
	if (cfg.uri == NULL || cfg.nservers == 0 || cfg.threads < 1 || cfg.threads > 64 ||
			cfg.names < cfg.threads) {
		fprintf(stderr,
				"usage: dlock-cluster-bench --uri URI --servers H:P[,H:P...] "
				"[--threads T] [--seconds S] [--names N] [--moved K]\n"
				"       dlock-cluster-bench --uri URI --servers H:P[,H:P...] --holds N "
				"[--watchdog MS] [--periods P] [--threads T] [--free 1]\n");
		return 2;
	}
	if (cfg.holds > 0)
		return cfg.watchdog_ms >= 300 && cfg.periods > 0 ? renewals_at_scale(&cfg) : 2;
	return cfg.moved > 0 ? moved_cost(&cfg) : throughput(&cfg);
}
