/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stress_threads - the library's threads under load, without Criterion, so
 * that it also runs under ThreadSanitizer (Criterion's runner cannot start
 * under TSan) and valgrind. Real redis-server processes; every scenario is
 * bounded and checks its own invariant (exact counters, no overlap, nothing
 * left in Redis). Prints "N passed, N failed" and exits non-zero on failure.
 */
#include <dlock.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "redis_harness.h"
#include "rh_cluster.h"

static int passed, failed;

/* Under valgrind everything runs tens of times slower: DLOCK_STRESS_SLOW=N
 * stretches every timeout and pause by N (ci/matrix.sh sets it). */
static int slow = 1;

static int ms(int v)
{
	return v * slow;
}

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "  FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fprintf(stderr, "\n"); \
			ok = 0; \
		} \
	} while (0)

static void report(const char *name, int ok)
{
	printf("%s %s\n", ok ? "PASS" : "FAIL", name);
	fflush(stdout);
	if (ok)
		passed++;
	else
		failed++;
}

/* watch: watch_force_unlock (holds listen on their channel and check themselves). */
static dlock_client *open_client_watching(rh_server *s, int watchdog_ms, int pool, int watch)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;

	o.watch_force_unlock = watch;
	o.watchdog_timeout_ms = ms(watchdog_ms);
	o.command_timeout_ms = ms(500);
	o.connect_timeout_ms = ms(500);
	o.pool_size = pool;
	if (dlock_client_new(&c, rh_server_uri(s), &o) != 0) {
		fprintf(stderr, "open %s: %s\n", rh_server_uri(s), dlock_errmsg_last());
		exit(2);
	}
	return c;
}

static dlock_client *open_client(rh_server *s, int watchdog_ms, int pool)
{
	return open_client_watching(s, watchdog_ms, pool, 0);
}

/* ---- shared client: counter under an RLock, watchdog renewing meanwhile ---- */

typedef struct shared {
	dlock_lock *lock;
	dlock_redlock *redlock;
	dlock_multilock *multilock;
	int rounds;
	int counter; /* protected by the distributed lock only */
	atomic_int inside;
	atomic_int overlaps;
	atomic_int errors;
	atomic_int lost;
	char killed_node[32];     /* "127.0.0.1:PORT" of the server killed meanwhile */
	atomic_int unlocks_short; /* unlocks that found the killed server was needed */
} shared;

/* Count an unexpected result; the first few are described on stderr. */
static void note_error(shared *sh, const char *what, int rc, const char *msg)
{
	if (atomic_fetch_add(&sh->errors, 1) < 3)
		fprintf(stderr, "  %s: %s: %s\n", what, dlock_strerror(rc), msg);
}

static void section(shared *sh)
{
	int v;

	if (atomic_fetch_add(&sh->inside, 1) != 0)
		atomic_fetch_add(&sh->overlaps, 1);
	v = sh->counter;
	usleep(100);
	sh->counter = v + 1;
	atomic_fetch_sub(&sh->inside, 1);
}

static void *rlock_worker(void *arg)
{
	shared *sh = arg;
	int i;

	for (i = 0; i < sh->rounds; i++) {
		int rc = (i % 2) ? dlock_lock_acquire(sh->lock, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG)
				 : dlock_lock_acquire(sh->lock, NULL, 10000, 5000);

		if (rc != 0) {
			note_error(sh, "acquire", rc, dlock_lock_errmsg(sh->lock));
			continue;
		}
		section(sh);
		if ((rc = dlock_lock_release(sh->lock, NULL)) != 0)
			note_error(sh, "unlock", rc, dlock_lock_errmsg(sh->lock));
	}
	return NULL;
}

static void on_lost(const dlock_lost_event *ev, void *ud)
{
	(void)ev;
	atomic_fetch_add(&((shared *)ud)->lost, 1);
}

static int run_threads(void *(*fn)(void *), shared *sh, int n)
{
	pthread_t t[16];
	int i;

	for (i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, fn, sh) != 0)
			return -1;
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/* Every section counted, none overlapping, no error, no hold lost. */
static int counted_exactly(shared *sh, int expected)
{
	int ok = 1;

	CHECK(sh->counter == expected, "counter %d, expected %d", sh->counter, expected);
	CHECK(atomic_load(&sh->overlaps) == 0, "%d overlapping sections",
			atomic_load(&sh->overlaps));
	CHECK(atomic_load(&sh->errors) == 0, "%d errors", atomic_load(&sh->errors));
	CHECK(atomic_load(&sh->lost) == 0, "%d holds reported lost", atomic_load(&sh->lost));
	return ok;
}

static void scenario_shared_client(rh_server *s, int watch)
{
	shared sh = { 0 };
	dlock_client *c = open_client_watching(s, 300, 3, watch);
	int ok = 1;

	dlock_lock_new(&sh.lock, c, "stress:rlock", NULL);
	dlock_lock_set_lost_cb(sh.lock, on_lost, &sh);
	sh.rounds = 150;
	run_threads(rlock_worker, &sh, 8);
	ok = counted_exactly(&sh, 8 * 150);
	CHECK(rh_command_int(s, "EXISTS stress:rlock") == 0, "the lock key is left");
	dlock_lock_free(sh.lock);
	dlock_client_free(c);
	report(watch ? "shared client, 8 threads, watchdog renewing, holds listening"
		     : "shared client, 8 threads, watchdog renewing",
			ok);
}

/* ---- force unlock and lost callbacks racing with holders and waiters ---- */

static atomic_int stop_breaker;

static void *breaker(void *arg)
{
	dlock_lock *l = arg;

	while (!atomic_load(&stop_breaker)) {
		dlock_lock_force_release(NULL, l);
		usleep(3000);
	}
	return NULL;
}

static void *holder_worker(void *arg)
{
	shared *sh = arg;
	int i;

	for (i = 0; i < sh->rounds; i++) {
		int rc = dlock_lock_acquire(sh->lock, NULL, 2000, DLOCK_LEASE_WATCHDOG);

		if (rc == 0) {
			usleep(500);
			rc = dlock_lock_release(sh->lock, NULL);
			/* A force unlock may have taken it: lost or not owner, never anything else. */
			if (rc != 0 && rc != DLOCK_ELOST && rc != DLOCK_ENOTOWNER)
				note_error(sh, "unlock", rc, dlock_lock_errmsg(sh->lock));
		} else if (rc != DLOCK_ENOTACQUIRED) {
			note_error(sh, "acquire", rc, dlock_lock_errmsg(sh->lock));
		}
	}
	return NULL;
}

static void scenario_force_unlock(rh_server *s, int watch)
{
	shared sh = { 0 };
	dlock_client *c = open_client_watching(s, 300, 4, watch), *other = open_client(s, 300, 1);
	dlock_lock *breaker_lock;
	pthread_t b;
	int ok = 1;

	dlock_lock_new(&sh.lock, c, "stress:force", NULL);
	dlock_lock_set_lost_cb(sh.lock, on_lost, &sh);
	dlock_lock_new(&breaker_lock, other, "stress:force", NULL);
	sh.rounds = 100;
	atomic_store(&stop_breaker, 0);
	pthread_create(&b, NULL, breaker, breaker_lock);
	run_threads(holder_worker, &sh, 4);
	atomic_store(&stop_breaker, 1);
	pthread_join(b, NULL);
	CHECK(atomic_load(&sh.errors) == 0, "%d unexpected results", atomic_load(&sh.errors));
	dlock_lock_force_release(NULL, breaker_lock);
	dlock_lock_free(breaker_lock);
	dlock_lock_free(sh.lock);
	dlock_client_free(other);
	dlock_client_free(c);
	report(watch ? "force unlocks racing holders, waiters and the watchdog, holds listening"
		     : "force unlocks racing holders, waiters and the watchdog",
			ok);
}

/* ---- RedLock and MultiLock shared by threads, a server killed meanwhile ---- */

static void *redlock_worker(void *arg)
{
	shared *sh = arg;
	int i;

	for (i = 0; i < sh->rounds; i++) {
		int rc = sh->redlock
				? dlock_redlock_acquire(sh->redlock, NULL, 10000, DLOCK_LEASE_WATCHDOG)
				: dlock_multilock_acquire(sh->multilock, NULL, 10000, 5000);

		if (rc != 0) {
			note_error(sh, "acquire", rc,
					sh->redlock ? dlock_redlock_errmsg(sh->redlock)
						    : dlock_multilock_errmsg(sh->multilock));
			continue;
		}
		section(sh);
		rc = sh->redlock ? dlock_redlock_release(sh->redlock, NULL)
				 : dlock_multilock_release(sh->multilock, NULL);
		/*
		 * A RedLock may be granted on 2 of 3 while the third still shows
		 * the previous holder. If the server killed meanwhile was one of
		 * the two, the unlock rightly says it released the other one only,
		 * naming that server. Anything else is an error.
		 */
		if (rc == DLOCK_ECONN && sh->redlock &&
				strstr(dlock_redlock_errmsg(sh->redlock),
						"released on 1 of 3 nodes") != NULL &&
				strstr(dlock_redlock_errmsg(sh->redlock), sh->killed_node) !=
						NULL) {
			atomic_fetch_add(&sh->unlocks_short, 1);
			continue;
		}
		if (rc != 0)
			note_error(sh, "unlock", rc,
					sh->redlock ? dlock_redlock_errmsg(sh->redlock)
						    : dlock_multilock_errmsg(sh->multilock));
	}
	return NULL;
}

static void scenario_quorum(rh_server **s)
{
	shared sh = { 0 };
	dlock_client *c[3];
	dlock_lock *m[3];
	dlock_redlock_options o = DLOCK_REDLOCK_OPTIONS_INIT;
	pthread_t t[4];
	int i, ok = 1;

	for (i = 0; i < 3; i++) {
		c[i] = open_client(s[i], 600, 4);
		dlock_lock_new(&m[i], c[i], "stress:quorum", NULL);
	}
	o.restart_guard_ms = 0;
	dlock_redlock_new(&sh.redlock, m, 3, &o);
	sh.rounds = 40;
	snprintf(sh.killed_node, sizeof(sh.killed_node), "127.0.0.1:%d", rh_server_port(s[2]));
	for (i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, redlock_worker, &sh);
	/* One server dies and comes back while they work: the quorum carries on. */
	usleep(ms(150) * 1000);
	rh_server_kill(s[2]);
	usleep(ms(300) * 1000);
	rh_server_restart(s[2]);
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK(sh.counter == 4 * 40, "redlock counter %d, expected %d", sh.counter, 4 * 40);
	CHECK(atomic_load(&sh.overlaps) == 0, "%d overlapping sections", atomic_load(&sh.overlaps));
	CHECK(atomic_load(&sh.errors) == 0, "%d errors", atomic_load(&sh.errors));
	if (atomic_load(&sh.unlocks_short) > 0)
		printf("  (%d unlocks released no quorum: the killed server was one of two holding)\n",
				atomic_load(&sh.unlocks_short));
	dlock_redlock_free(sh.redlock);
	report("RedLock shared by 4 threads, a server killed and restarted", ok);

	memset(&sh, 0, sizeof(sh));
	ok = 1;
	dlock_multilock_new(&sh.multilock, m, 3, NULL);
	sh.rounds = 40;
	run_threads(redlock_worker, &sh, 4);
	CHECK(sh.counter == 4 * 40, "multilock counter %d, expected %d", sh.counter, 4 * 40);
	CHECK(atomic_load(&sh.overlaps) == 0, "%d overlapping sections", atomic_load(&sh.overlaps));
	CHECK(atomic_load(&sh.errors) == 0, "%d errors", atomic_load(&sh.errors));
	for (i = 0; i < 3; i++)
		CHECK(rh_command_int(s[i], "EXISTS stress:quorum") == 0, "key left on server %d",
				i + 1);
	dlock_multilock_free(sh.multilock);
	for (i = 0; i < 3; i++) {
		dlock_lock_free(m[i]);
		dlock_client_free(c[i]);
	}
	report("MultiLock shared by 4 threads", ok);
}

/* ---- clients opened and closed while their threads are busy ---- */

static void scenario_churn(rh_server *s)
{
	int i, ok = 1;

	for (i = 0; i < 20; i++) {
		dlock_client *c = open_client(s, 30, 2);
		dlock_lock *l;

		dlock_lock_new(&l, c, "stress:churn", NULL);
		CHECK(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG) == 0, "lock: %s",
				dlock_lock_errmsg(l));
		usleep(ms(15) * 1000); /* the watchdog runs (every 10 ms) */
		/* Freed while held: renewal stops; then the client closes under it. */
		dlock_lock_free(l);
		dlock_client_free(c);
	}
	usleep(ms(100) * 1000);
	CHECK(rh_command_int(s, "EXISTS stress:churn") == 0, "an unrenewed hold did not expire");
	report("clients closed while holding and renewing", ok);
}

/* ---- a Redis Cluster: one client's threads open members, route, renew per slot ---- */

typedef struct cluster_arg {
	dlock_client *c;
	int id;
	atomic_int *errors;
} cluster_arg;

/* Distinct names of every shard: no contention, many slots, members opened
 * by whichever thread needs one first. */
static void *cluster_worker(void *arg)
{
	cluster_arg *a = arg;
	int i;

	for (i = 0; i < 60; i++) {
		char name[32];
		dlock_lock *l = NULL;
		int rc;

		snprintf(name, sizeof name, "stress:cl:%d:%d", a->id, i);
		rc = dlock_lock_new(&l, a->c, name, NULL);
		if (rc == 0)
			rc = dlock_lock_acquire(l, NULL, 5000, i % 2 ? DLOCK_LEASE_WATCHDOG : 5000);
		if (rc == 0)
			rc = dlock_lock_release(l, NULL);
		if (rc != 0 && atomic_fetch_add(a->errors, 1) < 3)
			fprintf(stderr, "  %s: %s: %s\n", name, dlock_strerror(rc),
					l ? dlock_lock_errmsg(l) : dlock_errmsg_last());
		dlock_lock_free(l);
	}
	return NULL;
}

static void scenario_cluster(void)
{
	rh_cluster *cl = rh_cluster_start(3, 0, NULL);
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	shared sh = { 0 };
	atomic_int errors = 0;
	cluster_arg args[8];
	pthread_t t[8];
	dlock_client *c = NULL;
	int ok = 1, i;

	if (cl == NULL) {
		report("cluster: could not start one", 0);
		return;
	}
	o.watchdog_timeout_ms = ms(300);
	o.command_timeout_ms = ms(1000);
	o.connect_timeout_ms = ms(1000);
	if (dlock_client_new(&c, rh_cluster_seed_uri(cl), &o) != 0) {
		fprintf(stderr, "open cluster: %s\n", dlock_errmsg_last());
		exit(2);
	}
	for (i = 0; i < 8; i++) {
		args[i] = (cluster_arg){ c, i, &errors };
		pthread_create(&t[i], NULL, cluster_worker, &args[i]);
	}
	for (i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	CHECK(atomic_load(&errors) == 0, "%d errors on distinct names", atomic_load(&errors));
	/* One name, 8 threads, the watchdog renewing at its node meanwhile. */
	dlock_lock_new(&sh.lock, c, "stress:cluster", NULL);
	dlock_lock_set_lost_cb(sh.lock, on_lost, &sh);
	sh.rounds = 40;
	run_threads(rlock_worker, &sh, 8);
	ok = counted_exactly(&sh, 8 * 40) && ok;
	dlock_lock_free(sh.lock);
	dlock_client_free(c);
	rh_cluster_free(cl);
	report("cluster client, 8 threads over every shard", ok);
}

int main(void)
{
	rh_server *s[3];
	const char *env = getenv("DLOCK_STRESS_SLOW");

	if (env != NULL && atoi(env) > 0)
		slow = atoi(env);
	if (rh_servers_start(s, 3, NULL) != 0) {
		fprintf(stderr, "could not start redis-server\n");
		return 2;
	}
	scenario_shared_client(s[0], 0);
	scenario_shared_client(s[0], 1);
	scenario_force_unlock(s[1], 0);
	scenario_force_unlock(s[1], 1);
	scenario_quorum(s);
	scenario_churn(s[0]);
	scenario_cluster();
	rh_cleanup_all();
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
