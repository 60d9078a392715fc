/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RLock watchdog against real redis-server processes: renewal while held,
 * no renewal after release or with a lease, a holder that dies, a server
 * restarted empty, and a server that stops answering for a while.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dlock.h>

#include "redis_harness.h"
#include "support.h"

/* ---- helpers ------------------------------------------------------------ */

static dlock_client *open_client(rh_server *s, int watchdog_ms, int command_timeout_ms)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client *c = NULL;

	o.watchdog_timeout_ms = watchdog_ms;
	if (command_timeout_ms > 0)
		o.command_timeout_ms = command_timeout_ms;
	int rc = dlock_client_new(&c, rh_server_uri(s), &o);
	cr_assert_eq(rc, 0, "client_open: %s (%s)", dlock_strerror(rc), dlock_errmsg_last());
	return c;
}

/* The calling thread's owner name (`<uuid>:<tid>`). */
/* Poll EXISTS every 5 ms until the key is gone or `limit_ms` passed; returns
 * the time it was first seen gone (rh_now_ms) or -1. */
static int64_t wait_key_gone(rh_server *s, const char *name, int64_t limit_ms)
{
	int64_t end = rh_now_ms() + limit_ms;
	for (;;) {
		int64_t now = rh_now_ms();
		int64_t e = rh_command_int(s, "EXISTS %s", name);
		cr_assert_neq(e, INT64_MIN, "EXISTS failed");
		if (e == 0)
			return now;
		if (now > end)
			return -1;
		dl_sleep_ms(5);
	}
}

/* A server, a client and a lock whose lost callbacks are recorded. */
typedef struct watched {
	rh_server *s;
	dlock_client *c;
	dlock_lock *l;
	dl_lost rec;
	char owner[64]; /* the calling thread's */
} watched;

static void watched_up(watched *w, const char *name, int watchdog_ms, int command_timeout_ms)
{
	w->s = rh_server_start(NULL);
	cr_assert_not_null(w->s);
	w->c = open_client(w->s, watchdog_ms, command_timeout_ms);
	w->l = dl_lock(w->c, name);
	dl_lost_init(&w->rec);
	cr_assert_eq(dlock_lock_set_lost_cb(w->l, dl_on_lost, &w->rec), 0);
	dl_owner(w->c, w->owner, sizeof w->owner);
}

/* The outage cases: held under a 1500 ms watchdog with 200 ms commands, and
 * past its first renewal (every 500 ms) before the server stops. */
static void watched_held(watched *w, const char *name)
{
	watched_up(w, name, 1500, 200);
	cr_assert_eq(dlock_lock_acquire(w->l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s", dlock_lock_errmsg(w->l));
	dl_sleep_ms(700);
}

static void watched_down(watched *w)
{
	dlock_lock_free(w->l);
	dlock_client_free(w->c);
	dl_lost_destroy(&w->rec);
	rh_server_free(w->s);
}

/* ---- 1. the watchdog keeps a lock, and stops with the release ------------ */

Test(rlock_watchdog, renews_while_held_and_stops_after_unlock, .timeout = 30)
{
	dl_single t;
	dl_single_up(&t, "wd:keep", 0, 1000);
	char owner[64];
	dl_owner(t.c, owner, sizeof owner);

	cr_assert_eq(dlock_lock_acquire(t.l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s", dlock_lock_errmsg(t.l));
	int64_t pttl = rh_command_int(t.s, "PTTL %s", "wd:keep");
	cr_assert(pttl > 0 && pttl <= 1000, "PTTL right after lock: %lld", (long long)pttl);

	/* 3.5 timeouts: without renewal the key would be long gone. */
	dl_sleep_ms(3500);
	cr_assert_eq(rh_command_int(t.s, "EXISTS %s", "wd:keep"), 1,
			"the watchdog did not keep the lock");
	pttl = rh_command_int(t.s, "PTTL %s", "wd:keep");
	cr_assert(pttl > 0 && pttl <= 1000, "PTTL after 3.5 s: %lld (expected (0, 1000])",
			(long long)pttl);
	redisReply *r = rh_command(t.s, "HGET %s %s", "wd:keep", owner);
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STRING, "our field is not in the hash");
	cr_assert_str_eq(r->str, "1");
	freeReplyObject(r);
	cr_assert_eq(dlock_lock_check(t.l, NULL), 0);

	cr_assert_eq(dlock_lock_release(t.l, NULL), 0, "%s", dlock_lock_errmsg(t.l));
	cr_assert_eq(rh_command_int(t.s, "EXISTS %s", "wd:keep"), 0);
	cr_assert_eq(dlock_lock_check(t.l, NULL), DLOCK_ENOTOWNER);

	/* A hash that looks exactly like our released hold must not be renewed. */
	cr_assert_eq(rh_command_int(t.s, "HSET %s %s %s", "wd:keep", owner, "1"), 1);
	int64_t t0 = rh_now_ms();
	cr_assert_eq(rh_command_int(t.s, "PEXPIRE %s %d", "wd:keep", 1000), 1);
	int64_t gone = wait_key_gone(t.s, "wd:keep", 2500);
	cr_assert_neq(gone, -1, "the released hold is still renewed 2.5 s later");
	cr_assert_leq(gone - t0, 1200, "released hold lived %lld ms with a 1000 ms TTL (renewed)",
			(long long)(gone - t0));

	dl_single_down(&t);
}

/* ---- 2. a lease is never renewed ---------------------------------------- */

Test(rlock_watchdog, leased_lock_is_not_renewed, .timeout = 30)
{
	dl_single t;
	dl_single_up(&t, "wd:leased", 0, 1000);

	int64_t t0 = rh_now_ms();
	cr_assert_eq(dlock_lock_acquire(t.l, NULL, DLOCK_WAIT_FOREVER, 800), 0, "%s", dlock_lock_errmsg(t.l));
	int64_t pttl = rh_command_int(t.s, "PTTL %s", "wd:leased");
	cr_assert(pttl > 0 && pttl <= 800, "PTTL of an 800 ms lease: %lld", (long long)pttl);
	cr_assert_eq(dlock_lock_check(t.l, NULL), 0);

	int64_t gone = wait_key_gone(t.s, "wd:leased", 3000);
	cr_assert_neq(gone, -1, "an 800 ms lease was still there 3 s later");
	int64_t lived = gone - t0;
	cr_assert(lived >= 700 && lived <= 1300, "an 800 ms lease lived %lld ms", (long long)lived);

	/* The expired lease is not ours any more: the unlock says it was lost
     * (the caller's section outlived its lease), and then "not owner". */
	cr_assert_eq(dlock_lock_release(t.l, NULL), DLOCK_ELOST);
	cr_assert_eq(dlock_lock_release(t.l, NULL), DLOCK_ENOTOWNER);

	dl_single_down(&t);
}

/* ---- 3. a holder killed with SIGKILL frees the lock within one timeout --- */

Test(rlock_watchdog, killed_holder_frees_lock_within_timeout, .timeout = 30)
{
	rh_server *s = rh_server_start(NULL); /* main thread, before any other thread */
	cr_assert_not_null(s);
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	pid_t parent = getpid();

	pid_t child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		/* The holder: a separate process with its own client and watchdog. */
		char owner[64] = { 0 };
		dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
		dlock_client *c = NULL;
		dlock_lock *l = NULL;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(3);
		close(fds[0]);
		o.watchdog_timeout_ms = 1000;
		if (dlock_client_new(&c, rh_server_uri(s), &o) != 0 ||
				dlock_lock_new(&l, c, "wd:killed", NULL) != 0)
			_exit(1);
		if (dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG) != 0)
			_exit(2);
		dlock_client_owner(owner, c, dlock_thread_id());
		if (write(fds[1], owner, sizeof owner) != (ssize_t)sizeof owner)
			_exit(4);
		for (;;)
			pause();
	}
	close(fds[1]);
	char child_owner[64];
	ssize_t n = read(fds[0], child_owner, sizeof child_owner);
	close(fds[0]);
	if (n != (ssize_t)sizeof child_owner) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		cr_assert_fail("the holder process did not report its lock (read %zd)", n);
	}
	child_owner[sizeof child_owner - 1] = '\0';
	cr_assert_eq(rh_command_int(s, "HEXISTS %s %s", "wd:killed", child_owner), 1);

	/* The parent's client, made after the fork. */
	dlock_client *c = open_client(s, 1000, 0);
	dlock_lock *l = dl_lock(c, "wd:killed");

	/* The child's watchdog is really renewing: 1.5 TTLs later it is still held. */
	dl_sleep_ms(1500);
	cr_assert_eq(rh_command_int(s, "HEXISTS %s %s", "wd:killed", child_owner), 1,
			"the child's watchdog did not renew its lock");
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, DLOCK_LEASE_WATCHDOG), DLOCK_ENOTACQUIRED);

	cr_assert_eq(kill(child, SIGKILL), 0);
	int status;
	cr_assert_eq(waitpid(child, &status, 0), child);
	int64_t t_kill = rh_now_ms();
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d", status);
	int64_t pttl = rh_command_int(s, "PTTL %s", "wd:killed");
	int64_t t_pttl = rh_now_ms();
	cr_assert(pttl > 0 && pttl <= 1000, "PTTL at the kill: %lld", (long long)pttl);

	int rc = dlock_lock_acquire(l, NULL, 3000, DLOCK_LEASE_WATCHDOG);
	int64_t t_acq = rh_now_ms();
	cr_assert_eq(rc, 0, "try after the holder died: %s (%s)", dlock_strerror(rc),
			dlock_lock_errmsg(l));
	cr_assert_leq(t_acq - t_kill, 1000 + 300, "acquired %lld ms after the holder was killed",
			(long long)(t_acq - t_kill));
	/* Nobody unlocked: it can only have been taken once the TTL ran out. */
	cr_assert_geq(t_acq, t_pttl + pttl - 200,
			"acquired %lld ms after the kill, before the TTL (%lld ms) ran out",
			(long long)(t_acq - t_kill), (long long)pttl);
	cr_assert_eq(rh_command_int(s, "HEXISTS %s %s", "wd:killed", child_owner), 0);
	cr_assert_eq(rh_command_int(s, "HLEN %s", "wd:killed"), 1);
	dl_assert_held_once_then_release(s, l);
	dlock_lock_free(l);
	dlock_client_free(c);
	rh_server_free(s);
}

/* ---- 4. the server restarts empty under a watchdog lock ------------------ */

Test(rlock_watchdog, restart_with_data_lost_declares_lost_and_reconnects, .timeout = 40)
{
	watched w;
	watched_up(&w, "wd:restart", 1500, 0);

	cr_assert_eq(dlock_lock_acquire(w.l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s", dlock_lock_errmsg(w.l));
	cr_assert_eq(rh_command_int(w.s, "EXISTS %s", "wd:restart"), 1);
	dl_sleep_ms(600); /* at least one renewal on the first server process */

	int64_t t_kill = rh_now_ms();
	cr_assert_eq(rh_server_kill(w.s), 0);
	cr_assert_eq(rh_server_restart(w.s), 0);
	int64_t t_back = rh_now_ms();
	cr_assert_eq(rh_command_int(w.s, "EXISTS %s", "wd:restart"), 0);

	int fired = dl_lost_wait(&w.rec, t_kill + 1500 + 500);
	cr_assert(fired, "no lost callback %lld ms after the kill (server back after %lld ms)",
			(long long)(rh_now_ms() - t_kill), (long long)(t_back - t_kill));
	cr_assert_eq(dl_lost_count(&w.rec), 1);
	cr_assert_str_eq(w.rec.name, dlock_lock_name(w.l));
	cr_assert_str_eq(w.rec.node, dlock_client_node(w.c), "the event names the lock's server");
	cr_assert_str_eq(w.rec.owner, w.owner);
	cr_assert_eq(w.rec.reason, DLOCK_LOST_GONE);
	cr_assert_eq(dlock_lock_check(w.l, NULL), DLOCK_ELOST);
	int rc = dlock_lock_release(w.l, NULL);
	cr_assert_eq(rc, DLOCK_ELOST, "unlock of a lost hold: %s (%s)", dlock_strerror(rc),
			dlock_lock_errmsg(w.l));

	/* The client reconnects by itself and the watchdog works on the new process. */
	dlock_lock *l2 = dl_lock(w.c, "wd:restart:2");
	rc = dlock_lock_acquire(l2, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG);
	cr_assert_eq(rc, 0, "lock after the restart: %s (%s)", dlock_strerror(rc),
			dlock_lock_errmsg(l2));
	dl_sleep_ms(3 * 1500);
	cr_assert_eq(rh_command_int(w.s, "EXISTS %s", "wd:restart:2"), 1,
			"not renewed on the new server process");
	int64_t pttl = rh_command_int(w.s, "PTTL %s", "wd:restart:2");
	cr_assert(pttl > 0 && pttl <= 1500, "PTTL %lld", (long long)pttl);
	cr_assert_eq(dlock_lock_check(l2, NULL), 0);
	cr_assert_eq(dl_lost_count(&w.rec), 1);
	cr_assert_eq(dlock_lock_release(l2, NULL), 0);
	cr_assert_eq(rh_command_int(w.s, "EXISTS %s", "wd:restart:2"), 0);

	dlock_lock_free(l2);
	watched_down(&w);
}

/*
 * The same restart, with a client that several threads have used, so that
 * its pool holds several idle connections, all dead after the restart.
 * "Reconnects by itself" must hold for such a client too: the first calls
 * after the restart get real answers, not the errors of stale connections.
 */

#define BUSY_THREADS 4

typedef struct busy_arg {
	dlock_lock *lock;
	pthread_barrier_t *start;
	int failures;
} busy_arg;

static void *busy_worker(void *p)
{
	busy_arg *a = p;
	pthread_barrier_wait(a->start);
	for (int i = 0; i < 300; i++) {
		int locked = 0;
		if (dlock_lock_is_locked(&locked, a->lock) != 0)
			a->failures++;
	}
	return NULL;
}

static int64_t connected_clients(rh_server *s)
{
	redisReply *r = rh_command(s, "INFO clients");
	cr_assert_not_null(r);
	cr_assert_eq(r->type, REDIS_REPLY_STRING);
	const char *p = strstr(r->str, "connected_clients:");
	cr_assert_not_null(p);
	int64_t n = strtoll(p + strlen("connected_clients:"), NULL, 10);
	freeReplyObject(r);
	return n;
}

Test(rlock_watchdog, restart_with_several_pooled_connections, .timeout = 40)
{
	watched w;
	watched_up(&w, "wd:restart:pool", 1500, 0);

	/* Several threads at once: the pool opens several connections. */
	pthread_barrier_t start;
	pthread_t th[BUSY_THREADS];
	busy_arg args[BUSY_THREADS];
	cr_assert_eq(pthread_barrier_init(&start, NULL, BUSY_THREADS), 0);
	for (int i = 0; i < BUSY_THREADS; i++) {
		args[i] = (busy_arg){ w.l, &start, 0 };
		cr_assert_eq(pthread_create(&th[i], NULL, busy_worker, &args[i]), 0);
	}
	for (int i = 0; i < BUSY_THREADS; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(args[i].failures, 0);
	}
	pthread_barrier_destroy(&start);
	/* Precondition: at least 3 pooled connections besides the harness's own. */
	int64_t clients = connected_clients(w.s);
	cr_assert_geq(clients, 1 + 3, "only %lld connections: the pool did not grow",
			(long long)clients);

	cr_assert_eq(dlock_lock_acquire(w.l, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG), 0, "%s", dlock_lock_errmsg(w.l));
	dl_sleep_ms(600);

	int64_t t_kill = rh_now_ms();
	cr_assert_eq(rh_server_kill(w.s), 0);
	cr_assert_eq(rh_server_restart(w.s), 0);
	cr_assert(dl_lost_wait(&w.rec, t_kill + 1500 + 500),
			"no lost callback %lld ms after the kill",
			(long long)(rh_now_ms() - t_kill));
	cr_assert_eq(dlock_lock_check(w.l, NULL), DLOCK_ELOST);

	/* The first calls after the restart, as a single thread makes them. */
	int rc = dlock_lock_release(w.l, NULL);
	cr_assert_eq(rc, DLOCK_ELOST,
			"unlock of a lost hold after a restart (%lld pooled connections): %s (%s)",
			(long long)(clients - 1), dlock_strerror(rc), dlock_lock_errmsg(w.l));
	dlock_lock *l2 = dl_lock(w.c, "wd:restart:pool:2");
	rc = dlock_lock_acquire(l2, NULL, DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG);
	cr_assert_eq(rc, 0, "lock after the restart: %s (%s)", dlock_strerror(rc),
			dlock_lock_errmsg(l2));
	cr_assert_eq(rh_command_int(w.s, "EXISTS %s", "wd:restart:pool:2"), 1);
	cr_assert_eq(dlock_lock_release(l2, NULL), 0);

	dlock_lock_free(l2);
	watched_down(&w);
}

/* ---- 5. a short outage (server paused) does not lose the lock ------------ */

Test(rlock_watchdog, short_pause_keeps_the_hold, .timeout = 30)
{
	watched w;
	watched_held(&w, "wd:pause:short");

	cr_assert_eq(rh_server_pause(w.s), 0);
	dl_sleep_ms(600);
	cr_assert_eq(rh_server_resume(w.s), 0);

	cr_assert_eq(rh_command_int(w.s, "EXISTS %s", "wd:pause:short"), 1);
	cr_assert_eq(dlock_lock_check(w.l, NULL), 0,
			"declared lost after a 600 ms outage with a 1500 ms TTL");

	dl_sleep_ms(3000);
	cr_assert_eq(dl_lost_count(&w.rec), 0, "lost callback after a 600 ms outage");
	cr_assert_eq(dlock_lock_check(w.l, NULL), 0);
	cr_assert_eq(rh_command_int(w.s, "EXISTS %s", "wd:pause:short"), 1,
			"no longer renewed after the outage");
	int64_t pttl = rh_command_int(w.s, "PTTL %s", "wd:pause:short");
	cr_assert(pttl > 0 && pttl <= 1500, "PTTL %lld", (long long)pttl);
	int rc = dlock_lock_release(w.l, NULL);
	cr_assert_eq(rc, 0, "unlock: %s (%s)", dlock_strerror(rc), dlock_lock_errmsg(w.l));
	cr_assert_eq(rh_command_int(w.s, "EXISTS %s", "wd:pause:short"), 0);

	watched_down(&w);
}

/* ---- 6. an outage longer than the TTL loses the hold, on time ------------ */

Test(rlock_watchdog, long_pause_declares_lost_without_server, .timeout = 30)
{
	watched w;
	watched_held(&w, "wd:pause:long");

	int64_t t_ttl = rh_now_ms();
	int64_t pttl = rh_command_int(w.s, "PTTL %s", "wd:pause:long");
	cr_assert(pttl > 0 && pttl <= 1500, "PTTL %lld", (long long)pttl);
	int64_t t_pause = rh_now_ms();
	cr_assert_eq(rh_server_pause(w.s), 0);

	/* TTL + one renewal period (500 ms) + margin, all while the server is stopped. */
	int fired = dl_lost_wait(&w.rec, t_pause + 1500 + 500 + 300);
	int64_t t_seen = rh_now_ms();
	int64_t waited = t_seen - t_pause;
	/* Resume before asserting, so a failure does not leave the server stopped for long. */
	if (waited < 2500)
		dl_sleep_ms(2500 - waited);
	cr_assert_eq(rh_server_resume(w.s), 0);

	cr_assert(fired, "hold not declared lost %lld ms into a 2500 ms outage (TTL 1500 ms)",
			(long long)waited);
	cr_assert_eq(dl_lost_count(&w.rec), 1);
	cr_assert_str_eq(w.rec.owner, w.owner);
	cr_assert_eq(w.rec.reason, DLOCK_LOST_UNREACHABLE);
	cr_assert_leq(w.rec.at_ms - t_pause, 1500 + 500 + 300);
	/* Not before the key's TTL could have run out on the server. */
	cr_assert_geq(w.rec.at_ms, t_ttl + pttl - 250,
			"declared lost %lld ms into the outage, but the key had %lld ms left",
			(long long)(w.rec.at_ms - t_pause), (long long)pttl);
	cr_assert_eq(dlock_lock_check(w.l, NULL), DLOCK_ELOST);

	/* The server is back; the key has expired there and the release says lost. */
	cr_assert_eq(rh_command_int(w.s, "EXISTS %s", "wd:pause:long"), 0);
	int rc = dlock_lock_release(w.l, NULL);
	cr_assert_eq(rc, DLOCK_ELOST, "unlock of a lost hold: %s (%s)", dlock_strerror(rc),
			dlock_lock_errmsg(w.l));

	watched_down(&w);
}
