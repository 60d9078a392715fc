/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * uv_locks - hold 10,000 locks from one thread, on a libuv loop.
 *
 *   uv_locks [-n LOCKS] [-c IN_FLIGHT] [-t SECONDS] [-w WATCHDOG_MS] [URI...]
 *
 *   -n LOCKS        how many locks to take, spread over the servers (default 10000)
 *   -c IN_FLIGHT    operations in flight per client at most, and its pool of
 *                   connections (default 8; 0: no limit, every lock at once)
 *   -t SECONDS      how long to hold them (default 10)
 *   -w WATCHDOG_MS  the watchdog lease, renewed every third of it (default 3000)
 *   URI             one client per URI (default redis://127.0.0.1:6379)
 *
 * Every client is opened on the libuv loop through <dlock/uv.h>: dlock starts
 * no thread, and its work (connections, replies, renewals) runs on the loop
 * between the program's own. The program
 *   1. acquires LOCKS locks asynchronously, with watchdog leases, keeping
 *      IN_FLIGHT acquisitions going on each client. An operation in flight
 *      has a connection to itself: a pooled one when one is idle, else one
 *      opened for it and closed after it. So the window is also the size
 *      of the pool: a connection each, kept (without a window, 10,000
 *      acquisitions started at once open 10,000 connections);
 *   2. holds the locks for SECONDS while a 10 ms timer stands for its other
 *      work, noting how late each tick comes: how long the loop was kept
 *      from it (while holding: by the watchdog's renewal rounds, which run
 *      on the loop, one EVAL after another for each 100 holds);
 *   3. checks that every hold is still valid, that none was reported lost
 *      and that the process has one thread, then releases them all, with
 *      the same window;
 *   4. frees everything (uv_run returns when nothing is left) and prints
 *      one line.
 * Exit status: 0 when every lock was acquired, held throughout and
 * released, in one thread; 1 otherwise, saying why; 2 for bad arguments.
 *
 * Build against an installed dlock:
 *   cc uv_locks.c $(pkg-config --cflags --libs dlock-uv) -o uv_locks
 */
#define _POSIX_C_SOURCE 200809L

#include <dlock.h>
#include <dlock/uv.h>

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TICK_MS 10
#define MAX_SERVERS 64

enum phase { ACQUIRING, HOLDING, RELEASING, DONE };

typedef struct held {
	dlock_lock *lock;
	const char *owner;
	struct app *app;
	int acquired;
	int64_t acquired_at, validity; /* ms: when its callback came, what it said */
} held;

typedef struct app {
	int n, nclients, window, hold_s;
	int64_t watchdog_ms;
	uv_loop_t uv;
	dlock_uv *du;
	dlock_client *clients[MAX_SERVERS];
	char owners[MAX_SERVERS][64];
	held *locks;
	int next[MAX_SERVERS]; /* client k's next lock: k, k + nclients, ... */
	enum phase phase;
	int acquired, released, ended; /* ended: callbacks of the current phase */
	int lost, renewed, threads;
	int64_t phase_start, acquire_ms, release_ms;
	uv_timer_t tick, hold, finish;
	int64_t last_tick, ticks, late_max[DONE];
	char failure[512]; /* the first thing that went wrong */
} app;

static int64_t now_ms(void)
{
	return (int64_t)(uv_hrtime() / 1000000);
}

static void fail(app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Note the first thing that went wrong. */
static void fail(app *a, const char *fmt, ...)
{
	va_list ap;

	if (a->failure[0] != '\0')
		return;
	va_start(ap, fmt);
	vsnprintf(a->failure, sizeof(a->failure), fmt, ap);
	va_end(ap);
}

static int threads_in_process(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The program's other work: a tick every TICK_MS, and how late it came. */
static void on_tick(uv_timer_t *t)
{
	app *a = t->data;
	int64_t now = now_ms();

	if (a->last_tick != 0 && a->phase < DONE) {
		int64_t late = now - a->last_tick - TICK_MS;

		if (late > a->late_max[a->phase])
			a->late_max[a->phase] = late;
	}
	a->last_tick = now;
	a->ticks++;
}

/* Called on the loop if a renewal finds a hold gone. */
static void on_lost(const dlock_lost_event *ev, void *ud)
{
	app *a = ud;

	a->lost++;
	fail(a, "%s was lost while held on %s (%s)", ev->name, ev->node,
			dlock_lost_reason_str(ev->reason));
}

/* The steps, in the order they come: each one's callback starts the next. */
static void acquire_next(app *a, int k);
static void on_acquired(dlock_op *op, const dlock_result *r, void *ud);
static void all_acquired(app *a);
static void on_hold_over(uv_timer_t *t);
static void release_all(app *a);
static void release_next(app *a, int k);
static void on_released(dlock_op *op, const dlock_result *r, void *ud);
static void all_released(app *a);
static void on_finish(uv_timer_t *t);

/* 1. Start IN_FLIGHT acquisitions on each client; each callback starts
 *    the next. The callbacks come from the loop, once it runs. */
static void acquire_all(app *a)
{
	a->phase_start = now_ms();
	for (int k = 0; k < a->nclients; k++) {
		a->next[k] = k;
		for (int j = 0; j < a->window && a->next[k] < a->n; j++)
			acquire_next(a, k);
	}
}

/* Start the acquisition of client k's next lock, if any is left. A previous
 * run killed midway leaves holds that expire within the watchdog timeout:
 * wait that long for them. */
static void acquire_next(app *a, int k)
{
	while (a->next[k] < a->n) {
		held *h = &a->locks[a->next[k]];
		int rc;

		a->next[k] += a->nclients;
		rc = dlock_lock_acquire_async(NULL, h->lock, h->owner, a->watchdog_ms,
				DLOCK_LEASE_WATCHDOG, on_acquired, h);
		if (rc == 0)
			return;
		fail(a, "acquire of %s: %s", dlock_lock_name(h->lock), dlock_strerror(rc));
		if (++a->ended == a->n) {
			all_acquired(a);
			return;
		}
	}
}

static void on_acquired(dlock_op *op, const dlock_result *r, void *ud)
{
	held *h = ud;
	app *a = h->app;

	(void)op;
	if (r->code == 0) {
		h->acquired = 1;
		h->acquired_at = now_ms();
		h->validity = r->validity_ms;
		a->acquired++;
	} else {
		fail(a, "acquire of %s: %s: %s", dlock_lock_name(h->lock), dlock_strerror(r->code),
				r->message);
	}
	if (++a->ended == a->n)
		all_acquired(a);
	else
		acquire_next(a, (int)(h - a->locks) % a->nclients);
}

/* 2. Everything has answered: hold what we got for a while. */
static void all_acquired(app *a)
{
	a->acquire_ms = now_ms() - a->phase_start;
	if (a->acquired != a->n) {
		release_all(a);
		return;
	}
	printf("uv_locks: acquired %d locks in %lld ms; holding them for %d s\n", a->n,
			(long long)a->acquire_ms, a->hold_s);
	fflush(stdout);
	a->phase = HOLDING;
	uv_timer_start(&a->hold, on_hold_over, (uint64_t)a->hold_s * 1000, 0);
}

/* 3a. Still held (renewed), none lost, one thread? */
static void check_holds(app *a)
{
	int64_t now = now_ms();
	int valid = 0;

	a->threads = threads_in_process();
	for (int i = 0; i < a->n; i++) {
		held *h = &a->locks[i];
		int64_t left = 0;

		if (dlock_lock_validity_ms(&left, h->lock, h->owner) != 0 || left <= 0)
			continue;
		valid++;
		/* Without a renewal it would have only what the acquire gave, less
		 * the time since: more means a renewal reached the server. */
		if (left > h->validity - (now - h->acquired_at) + 5)
			a->renewed++;
	}
	if (valid != a->n)
		fail(a, "%d of %d locks still held after %d s", valid, a->n, a->hold_s);
	else if (a->hold_s * 1000 >= a->watchdog_ms && a->renewed != a->n)
		fail(a, "only %d of %d holds renewed in %d s", a->renewed, a->n, a->hold_s);
	if (a->threads != 1)
		fail(a, "%d threads in the process while holding the locks (expected 1)",
				a->threads);
}

static void on_hold_over(uv_timer_t *t)
{
	app *a = t->data;

	check_holds(a);
	release_all(a);
}

/* 3b. Give back every lock held, IN_FLIGHT at a time on each client. */
static void release_all(app *a)
{
	a->phase = RELEASING;
	a->ended = 0;
	a->phase_start = now_ms();
	if (a->acquired == 0) {
		all_released(a);
		return;
	}
	for (int k = 0; k < a->nclients; k++) {
		a->next[k] = k;
		for (int j = 0; j < a->window && a->next[k] < a->n; j++)
			release_next(a, k);
	}
}

/* Start the release of client k's next held lock, if any is left. */
static void release_next(app *a, int k)
{
	while (a->next[k] < a->n) {
		held *h = &a->locks[a->next[k]];
		int rc;

		a->next[k] += a->nclients;
		if (!h->acquired)
			continue;
		rc = dlock_lock_release_async(NULL, h->lock, h->owner, on_released, h);
		if (rc == 0)
			return;
		fail(a, "release of %s: %s", dlock_lock_name(h->lock), dlock_strerror(rc));
		if (++a->ended == a->acquired) {
			all_released(a);
			return;
		}
	}
}

static void on_released(dlock_op *op, const dlock_result *r, void *ud)
{
	held *h = ud;
	app *a = h->app;

	(void)op;
	if (r->code == 0)
		a->released++;
	else
		fail(a, "release of %s: %s: %s", dlock_lock_name(h->lock), dlock_strerror(r->code),
				r->message);
	if (++a->ended == a->acquired)
		all_released(a);
	else
		release_next(a, (int)(h - a->locks) % a->nclients);
}

/* 4. Every release has answered: free it all, from a libuv callback (not
 *    from within dlock's). */
static void all_released(app *a)
{
	a->release_ms = now_ms() - a->phase_start;
	a->phase = DONE;
	uv_timer_start(&a->finish, on_finish, 0, 0);
}

static void free_dlock(app *a)
{
	for (int i = 0; i < a->n; i++)
		dlock_lock_free(a->locks[i].lock);
	for (int k = 0; k < a->nclients; k++)
		dlock_client_free(a->clients[k]);
	dlock_uv_free(a->du);
}

static void on_finish(uv_timer_t *t)
{
	app *a = t->data;

	free_dlock(a);
	uv_close((uv_handle_t *)&a->tick, NULL);
	uv_close((uv_handle_t *)&a->hold, NULL);
	uv_close((uv_handle_t *)&a->finish, NULL);
}

/* One client per server on the libuv loop, and the lock handles. */
static int open_all(app *a, char **uris)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	char name[64];

	o.loop = dlock_uv_loop(a->du);
	o.watchdog_timeout_ms = a->watchdog_ms;
	o.pool_size = a->window < 1024 ? a->window : 1024; /* one for each operation in flight */
	for (int k = 0; k < a->nclients; k++) {
		if (dlock_client_new(&a->clients[k], uris[k], &o) != 0) {
			fprintf(stderr, "uv_locks: %s: %s\n", uris[k], dlock_errmsg_last());
			return -1;
		}
		dlock_client_owner(a->owners[k], a->clients[k], 1);
	}
	for (int i = 0; i < a->n; i++) {
		held *h = &a->locks[i];
		dlock_client *c = a->clients[i % a->nclients];

		snprintf(name, sizeof(name), "uv_locks:%d", i);
		h->app = a;
		h->owner = a->owners[i % a->nclients];
		if (dlock_lock_new(&h->lock, c, name, NULL) != 0 ||
				dlock_lock_set_lost_cb(h->lock, on_lost, a) != 0) {
			fprintf(stderr, "uv_locks: %s: %s\n", name, dlock_errmsg_last());
			return -1;
		}
	}
	return 0;
}

static int64_t max_lateness(const app *a)
{
	int64_t m = 0;

	for (int p = ACQUIRING; p < DONE; p++)
		m = a->late_max[p] > m ? a->late_max[p] : m;
	return m;
}

static int usage(void)
{
	fprintf(stderr, "usage: uv_locks [-n LOCKS] [-c IN_FLIGHT] [-t SECONDS] "
			"[-w WATCHDOG_MS] [URI...]\n");
	return 2;
}

int main(int argc, char **argv)
{
	static char *default_uri[] = { "redis://127.0.0.1:6379" };
	app a = { .n = 10000, .window = 8, .hold_s = 10, .watchdog_ms = 3000 };
	char **uris = default_uri;
	int opt, ok;

	while ((opt = getopt(argc, argv, "n:c:t:w:")) != -1) {
		if (opt == 'n')
			a.n = atoi(optarg);
		else if (opt == 'c')
			a.window = atoi(optarg);
		else if (opt == 't')
			a.hold_s = atoi(optarg);
		else if (opt == 'w')
			a.watchdog_ms = atoll(optarg);
		else
			return usage();
	}
	a.nclients = argc - optind;
	if (a.nclients > 0)
		uris = argv + optind;
	else
		a.nclients = 1;
	if (a.window <= 0)
		a.window = a.n; /* no limit: everything at once */
	if (a.n < 1 || a.hold_s < 0 || a.watchdog_ms < 3 || a.nclients > MAX_SERVERS)
		return usage();

	uv_loop_init(&a.uv);
	a.locks = calloc((size_t)a.n, sizeof(*a.locks));
	if (a.locks == NULL || dlock_uv_new(&a.du, &a.uv, NULL) != 0 || open_all(&a, uris) != 0) {
		fprintf(stderr, "uv_locks: could not set up\n");
		return 1;
	}
	uv_timer_init(&a.uv, &a.tick);
	uv_timer_init(&a.uv, &a.hold);
	uv_timer_init(&a.uv, &a.finish);
	a.tick.data = a.hold.data = a.finish.data = &a;

	acquire_all(&a);
	uv_timer_start(&a.tick, on_tick, TICK_MS, TICK_MS);
	uv_run(&a.uv, UV_RUN_DEFAULT); /* until on_finish has freed everything */
	if (uv_loop_close(&a.uv) != 0)
		fail(&a, "handles left open on the libuv loop");
	free(a.locks);

	printf("uv_locks: %d locks on %d server(s): acquired %d in %lld ms, %d renewed, "
	       "released %d in %lld ms; %lld ticks, max tick lateness %lld ms "
	       "(acquiring %lld, holding %lld, releasing %lld); %d thread(s)\n",
			a.n, a.nclients, a.acquired, (long long)a.acquire_ms, a.renewed, a.released,
			(long long)a.release_ms, (long long)a.ticks, (long long)max_lateness(&a),
			(long long)a.late_max[ACQUIRING], (long long)a.late_max[HOLDING],
			(long long)a.late_max[RELEASING], a.threads);
	ok = a.failure[0] == '\0' && a.acquired == a.n && a.released == a.n && a.lost == 0;
	if (!ok && a.failure[0] == '\0')
		fail(&a, "not every lock was acquired and released");
	if (!ok)
		fprintf(stderr, "uv_locks: FAILED: %s\n", a.failure);
	return ok ? 0 : 1;
}
