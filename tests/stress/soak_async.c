/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * soak_async - 10,000 asynchronous acquisitions at once on one loop, one
 * thread, against real servers, with random cancellations and one server
 * paused part of the time.
 *
 * Setup: 3 redis-servers (tests/harness), one dlock_loop made without hooks
 * (the epoll backend, driven here by dlock_loop_run), one client per server
 * opened on it (command and connect timeout 400 ms, watchdog timeout
 * 2000 ms), 300 lock names spread over the servers, a third each plain,
 * fair (fair_wait_ms 5000) and fenced. Every acquisition (DLOCK_SOAK_OPS,
 * default 10000) is started before the loop first runs, each as its own
 * owner (dlock_client_owner), on a random name, with a random wait (0,
 * 100-6000 ms, or DLOCK_WAIT_FOREVER) and lease (30-3000 ms, or
 * DLOCK_LEASE_WATCHDOG): about 33 per name, so most of them wait on pub/sub
 * (fair ones in the queue). Cancellations: some right after the start,
 * some from timers at random moments up to 8 s, some from inside other
 * operations' callbacks (of acquisitions and releases), a few twice; a few
 * releases are canceled too (they finish anyway). What is acquired is
 * released (dlock_lock_release_async) after a random hold of 0-25 ms, a
 * fifth of them from inside the acquisition's callback; a release that
 * meets the paused server (timed out, connection) is sent again until it
 * gets an answer. One server is SIGSTOPped 1.5 s in, for 3 s (longer than
 * the watchdog timeout: its watchdog holds are lost meanwhile), then
 * SIGCONTed (DLOCK_SOAK_NO_PAUSE=1: not at all).
 *
 * Checks: every acquisition has exactly one callback, every release start
 * exactly one, none from inside the call that started it; codes only from
 * the documented set (acquire: acquired, not acquired, canceled, timed
 * out, connection; release: released, lost - its lease or the watchdog
 * ran out -, a timeout or connection error sent again, and after such a
 * retry also not owner); an error comes with a message; fenced grants
 * carry a token, others none; no grant that promises time (validity > 0)
 * while another owner still holds the name by its own hold's check
 * (dlock_lock_check: a lease or watchdog renewal that cannot have run
 * out); the process has exactly the one thread it started with, all along
 * (a sanitizer's own thread, present at start, is counted in that); every
 * operation has ended within 90 s (more under sanitizers, at most 240 s);
 * once they have and the server is back, no lock key and no fair queue or
 * deadline key is left on any server (SCAN), within 5 s of settling while
 * the loop runs (the undos of abandoned attempts run when the server
 * answers again); every handle, client and the loop are freed (the ASan
 * build checks leaks).
 *
 * Prints one summary line (counts by code, cancels, timing, the longest
 * turn of the loop beyond its timeout, the connections the servers
 * accepted) and "N passed, N failed"; exits non-zero on any failure,
 * naming the seed (DLOCK_SOAK_SEED=N repeats a run's random choices; the
 * servers' timing does not repeat). DLOCK_SOAK_DEBUG=1 shows progress
 * every 2 s. Under sanitizers and valgrind everything takes longer: the
 * run's deadline stretches (never the checks); DLOCK_SOAK_OPS scales the
 * count.
 */
#include <dlock.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redis_harness.h"
#include "support.h"

#define NSERVERS 3
#define NAMES 300
#define MAX_CODES 32

/* Times, ms. */
#define CMD_TIMEOUT_MS 400
#define WATCHDOG_MS 2000
#define FAIR_WAIT_MS 5000
#define PAUSE_AT_MS 1500
#define PAUSE_FOR_MS 3000
#define CANCEL_WITHIN_MS 8000
#define RUN_WITHIN_MS 90000
#define SETTLE_MS 5000 /* after the end: the undos of abandoned attempts land */

static int passed, failed;
static int g_fails; /* failed checks so far (the first few are described) */

#define CHECK(cond, ...) \
	do { \
		if (!(cond) && g_fails++ < 10) { \
			fprintf(stderr, "  FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fprintf(stderr, "\n"); \
		} \
	} while (0)

static void report(const char *name, int ok)
{
	printf("%s %s\n", ok ? "PASS" : "FAIL", name);
	if (ok)
		passed++;
	else
		failed++;
}

/* ---- the operations ------------------------------------------------------ */

enum { WAITING, HELD, RELEASING, DONE };

typedef struct soak_op {
	int name;
	int64_t wait, lease;
	dlock_op *acq;  /* the acquisition, until its callback */
	dlock_op *rel;  /* the release under way, until its callback */
	int state;
	int acq_calls;  /* must end at exactly 1 */
	int code;       /* the acquisition's */
	int rel_starts, rel_calls;
	int rel_code;   /* the last release's */
	int64_t granted_at;
	char owner[64];
} soak_op;

static soak_op *ops;
static int nops;
static rh_server *srv[NSERVERS];
static dlock_lock *locks[NAMES];
static dlock_lock_kind kinds[NAMES];
static int lock_server[NAMES];
static int *by_name[NAMES]; /* the ops of each name */
static int nby_name[NAMES];

static int in_call;         /* inside a dlock call of ours: a callback now is a bug */
static int acq_left;        /* acquisitions without their callback */
static int rel_left;        /* releases started or due, not finished */
static int inside_calls, overlaps, bad_codes, no_message, bad_tokens;
static long acq_by_code[MAX_CODES], rel_by_code[MAX_CODES];
static long cancels_start, cancels_timer, cancels_cb, cancels_twice, rel_cancels, rel_retries;
static long rel_in_cb, grants_by_kind[3], expired_grants;
static unsigned long long rng;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Uniform in [lo, hi]. */
static int64_t between(int64_t lo, int64_t hi)
{
	return lo + (int64_t)(next_rand() % (uint64_t)(hi - lo + 1));
}

static int chance(int percent)
{
	return (int)(next_rand() % 100) < percent;
}

static int code_slot(int code)
{
	return code <= 0 && -code < MAX_CODES ? -code : MAX_CODES - 1;
}

/* ---- timed actions (a binary heap by time) --------------------------------- */

enum { EV_CANCEL, EV_RELEASE };

typedef struct event {
	int64_t at;
	int kind, op;
} event;

static event *heap;
static size_t nheap, heap_cap;

static void ev_push(int64_t at, int kind, int op)
{
	size_t i;

	if (nheap == heap_cap) {
		heap_cap = heap_cap ? 2 * heap_cap : 4096;
		heap = realloc(heap, heap_cap * sizeof(*heap));
		if (heap == NULL) {
			fprintf(stderr, "out of memory\n");
			exit(2);
		}
	}
	i = nheap++;
	while (i > 0 && heap[(i - 1) / 2].at > at) {
		heap[i] = heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	heap[i] = (event){ at, kind, op };
}

static event ev_pop(void)
{
	event top = heap[0], last = heap[--nheap];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= nheap)
			break;
		if (c + 1 < nheap && heap[c + 1].at < heap[c].at)
			c++;
		if (heap[c].at >= last.at)
			break;
		heap[i] = heap[c];
		i = c;
	}
	if (nheap > 0)
		heap[i] = last;
	return top;
}

/* ---- callbacks ------------------------------------------------------------- */

static void start_release(soak_op *o);

static void cancel_op(dlock_op *op)
{
	in_call++;
	CHECK(dlock_op_cancel(op) == 0, "dlock_op_cancel: %s", dlock_errmsg_last());
	in_call--;
}

/* From inside a callback: cancel a random acquisition still under way, or
 * (now and then) a release - which finishes anyway. */
static void cancel_someone(void)
{
	soak_op *v = &ops[next_rand() % (uint64_t)nops];

	if (v->acq != NULL) {
		cancel_op(v->acq);
		cancels_cb++;
	} else if (v->rel != NULL && chance(20)) {
		cancel_op(v->rel);
		rel_cancels++;
	}
}

/* Whether another owner of the name still holds it by its own hold's check. */
static void check_exclusive(soak_op *o)
{
	int i, n = o->name;

	for (i = 0; i < nby_name[n]; i++) {
		soak_op *p = &ops[by_name[n][i]];
		redisReply *h;
		int64_t left = -1;

		if (p == o || p->state != HELD || dlock_lock_check(locks[n], p->owner) != 0)
			continue;
		overlaps++;
		dlock_lock_validity_ms(&left, locks[n], p->owner);
		h = rh_command(srv[lock_server[n]], "HGETALL %s", dlock_lock_name(locks[n]));
		CHECK(0,
				"%s granted to op %d (wait %" PRId64 ", lease %" PRId64 ") while op %d "
				"(wait %" PRId64 ", lease %" PRId64 ", granted %" PRId64 " ms ago) holds it "
				"for %" PRId64 " ms more; the server has %s with %s (PTTL %" PRId64 ")",
				dlock_lock_name(locks[n]), (int)(o - ops), o->wait, o->lease, (int)(p - ops),
				p->wait, p->lease, rh_now_ms() - p->granted_at, left,
				h != NULL && h->type == REDIS_REPLY_ARRAY && h->elements >= 2
						? h->element[0]->str
						: "nobody",
				h != NULL && h->type == REDIS_REPLY_ARRAY && h->elements >= 2
						? h->element[1]->str
						: "-",
				rh_command_int(srv[lock_server[n]], "PTTL %s", dlock_lock_name(locks[n])));
		freeReplyObject(h);
	}
}

static void acquired(dlock_op *op, const dlock_result *r, void *ud)
{
	soak_op *o = ud;

	(void)op;
	if (in_call) {
		inside_calls++;
		CHECK(0, "op %d: acquisition callback inside a call that started or canceled an op",
				(int)(o - ops));
	}
	o->acq = NULL;
	dlock_op_free(op); /* the reference kept in o->acq */
	o->acq_calls++;
	o->code = r->code;
	acq_left--;
	acq_by_code[code_slot(r->code)]++;
	if (r->code != 0 && r->code != DLOCK_ENOTACQUIRED && r->code != DLOCK_ECANCELED &&
			r->code != DLOCK_ETIMEDOUT && r->code != DLOCK_ECONN) {
		bad_codes++;
		CHECK(0, "op %d on %s: acquisition ended with %d (%s): %s", (int)(o - ops),
				dlock_lock_name(locks[o->name]), r->code, dlock_strerror(r->code), r->message);
	}
	if (r->code < 0 && (r->message == NULL || r->message[0] == '\0')) {
		no_message++;
		CHECK(0, "op %d: code %d without a message", (int)(o - ops), r->code);
	}
	if (r->code == 0) {
		int fenced = kinds[o->name] == DLOCK_LOCK_FENCED;

		grants_by_kind[kinds[o->name]]++;
		if (fenced ? r->token <= 0 : r->token != 0) {
			bad_tokens++;
			CHECK(0, "op %d: %s grant with token %" PRId64, (int)(o - ops),
					fenced ? "fenced" : "unfenced", r->token);
		}
		o->granted_at = rh_now_ms();
		/* A grant whose lease ran out before its callback (the loop was
		 * late, a short lease) promises nothing: validity 0. */
		if (r->validity_ms > 0)
			check_exclusive(o);
		else
			expired_grants++;
		o->state = HELD;
		rel_left++;
		if (chance(20)) {
			rel_in_cb++;
			start_release(o);
		} else {
			ev_push(rh_now_ms() + between(0, 25), EV_RELEASE, (int)(o - ops));
		}
	} else {
		o->state = DONE;
	}
	if (chance(12))
		cancel_someone();
}

static void released(dlock_op *op, const dlock_result *r, void *ud)
{
	soak_op *o = ud;
	int retried = o->rel_starts > 1;

	(void)op;
	if (in_call) {
		inside_calls++;
		CHECK(0, "op %d: release callback inside a call that started or canceled an op",
				(int)(o - ops));
	}
	o->rel = NULL;
	dlock_op_free(op); /* the reference kept in o->rel */
	o->rel_calls++;
	o->rel_code = r->code;
	rel_by_code[code_slot(r->code)]++;
	if (r->code < 0 && (r->message == NULL || r->message[0] == '\0')) {
		no_message++;
		CHECK(0, "op %d: release code %d without a message", (int)(o - ops), r->code);
	}
	if (r->code == DLOCK_ETIMEDOUT || r->code == DLOCK_ECONN) {
		/* No answer: again, until one comes (the first may have run). */
		rel_retries++;
		ev_push(rh_now_ms() + between(50, 200), EV_RELEASE, (int)(o - ops));
	} else {
		if (r->code != 0 && r->code != DLOCK_ELOST &&
				!(retried && r->code == DLOCK_ENOTOWNER)) {
			bad_codes++;
			CHECK(0, "op %d on %s: release (start %d) ended with %d (%s): %s",
					(int)(o - ops), dlock_lock_name(locks[o->name]), o->rel_starts,
					r->code, dlock_strerror(r->code), r->message);
		}
		o->state = DONE;
		rel_left--;
	}
	if (chance(12))
		cancel_someone();
}

static void start_release(soak_op *o)
{
	int rc;

	o->state = RELEASING;
	o->rel_starts++;
	in_call++;
	rc = dlock_lock_release_async(&o->rel, locks[o->name], o->owner, released, o);
	in_call--;
	if (rc != 0) {
		CHECK(0, "op %d: dlock_lock_release_async: %s", (int)(o - ops), dlock_errmsg_last());
		o->state = DONE;
		rel_left--;
		return;
	}
	if (chance(3)) {
		cancel_op(o->rel); /* a release is not canceled: it finishes */
		rel_cancels++;
	}
}

/* ---- the run ------------------------------------------------------------- */

static int slow_factor(void)
{
	const char *preload = getenv("LD_PRELOAD");
	int f = 1;

#if defined(__SANITIZE_THREAD__)
	f = 4;
#elif defined(__SANITIZE_ADDRESS__)
	f = 2;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
	f = 4;
#elif __has_feature(address_sanitizer)
	f = 2;
#endif
#endif
	if (preload && strstr(preload, "vgpreload"))
		f = 20; /* valgrind */
	return f;
}

/* A number from INFO `section` of server s ("field:" included), or -1. */
static double info_field(rh_server *s, const char *section, const char *field)
{
	redisReply *r = rh_command(s, "INFO %s", section);
	const char *p = r != NULL && r->type == REDIS_REPLY_STRING ? strstr(r->str, field) : NULL;
	double v = p != NULL ? atof(p + strlen(field)) : -1;

	freeReplyObject(r);
	return v;
}

/* Keys left on server s: lock names and fair queues/deadlines (`bad`), and
 * the rest (token counters, which outlive holds by design). */
static void scan_keys(rh_server *s, long *bad, long *other, int print)
{
	char cursor[32] = "0";

	do {
		redisReply *r = rh_command(s, "SCAN %s COUNT 1000", cursor);
		size_t i;

		if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
			freeReplyObject(r);
			*bad += 1000000; /* unreadable: counts as failed */
			return;
		}
		snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
		for (i = 0; i < r->element[1]->elements; i++) {
			const char *k = r->element[1]->element[i]->str;

			if (strncmp(k, "soak:", 5) == 0 || strncmp(k, "redisson_lock_queue:", 20) == 0 ||
					strncmp(k, "redisson_lock_timeout:", 22) == 0) {
				++*bad;
				if (print)
					fprintf(stderr, "  left on %s: %s\n", rh_server_uri(s), k);
			} else {
				++*other;
			}
		}
		freeReplyObject(r);
	} while (strcmp(cursor, "0") != 0);
}

static soak_op *op_named(int n, const char *owner)
{
	int i;

	for (i = 0; i < nby_name[n]; i++)
		if (strcmp(ops[by_name[n][i]].owner, owner) == 0)
			return &ops[by_name[n][i]];
	return NULL;
}

/* For a failure: which ops still hold a name or have a place in its queue. */
static void dump_leftovers(void)
{
	int n, shown = 0;

	for (n = 0; n < NAMES && shown < 30; n++) {
		const char *name = dlock_lock_name(locks[n]);
		redisReply *h = rh_command(srv[lock_server[n]], "HGETALL %s", name);
		redisReply *q = rh_command(srv[lock_server[n]],
				"ZRANGE redisson_lock_timeout:{%s} 0 -1 WITHSCORES", name);
		size_t j;

		for (j = 0; h != NULL && h->type == REDIS_REPLY_ARRAY && j + 1 < h->elements; j += 2) {
			soak_op *o = op_named(n, h->element[j]->str);

			if (o != NULL && shown++ < 30)
				fprintf(stderr,
						"  %s held by op %d (count %s): wait %" PRId64
						", lease %" PRId64 ", acquisition %d, releases %d, last %d\n",
						name, (int)(o - ops), h->element[j + 1]->str, o->wait, o->lease,
						o->code, o->rel_starts, o->rel_code);
		}
		for (j = 0; q != NULL && q->type == REDIS_REPLY_ARRAY && j + 1 < q->elements; j += 2) {
			soak_op *o = op_named(n, q->element[j]->str);

			if (o != NULL && shown++ < 30)
				fprintf(stderr,
						"  %s queued: op %d (place until %s, epoch ms): wait %" PRId64
						", lease %" PRId64 ", acquisition %d\n",
						name, (int)(o - ops), q->element[j + 1]->str, o->wait, o->lease,
						o->code);
		}
		freeReplyObject(h);
		freeReplyObject(q);
	}
}

static void print_codes(const char *what, const long *by_code)
{
	int i;

	printf("%s", what);
	for (i = 0; i < MAX_CODES; i++)
		if (by_code[i])
			printf(" %s=%ld", i == 0 ? "ok" : dlock_strerror(-i), by_code[i]);
}

static void progress(int64_t at)
{
	int i, forever = 0, left[3] = { 0, 0, 0 };

	for (i = 0; i < nops; i++) {
		if (ops[i].acq != NULL) {
			forever += ops[i].wait == DLOCK_WAIT_FOREVER;
			left[kinds[ops[i].name]]++;
		}
	}
	fprintf(stderr, "  %.1f s: %d acquisitions left (%d waiting forever; plain/fair/fenced "
			"%d/%d/%d), %d releases\n",
			(double)at / 1e3, acq_left, forever, left[0], left[1], left[2], rel_left);
}

int main(void)
{
	const char *env_ops = getenv("DLOCK_SOAK_OPS"), *env_seed = getenv("DLOCK_SOAK_SEED");
	int debug = getenv("DLOCK_SOAK_DEBUG") != NULL, no_pause = getenv("DLOCK_SOAK_NO_PAUSE") != NULL;
	int factor = slow_factor(), threads_at_start = dl_count_threads(), threads_max = 0;
	int64_t t0, t_started, t_ended = -1, t_settled = -1, paused_at = -1, resumed_at = -1;
	int64_t deadline, next_look = 0, next_progress = 0, longest_turn = 0;
	double conns[NSERVERS];
	unsigned long long seed;
	dlock_client *clients[NSERVERS] = { NULL };
	dlock_loop *loop = NULL;
	long bad_keys = 0, other_keys = 0, conns_total = 0;
	int i, n, pause_idx, ok;

	nops = env_ops && atoi(env_ops) > 0 ? atoi(env_ops) : 10000;
	seed = env_seed && *env_seed ? strtoull(env_seed, NULL, 10) : (unsigned long long)rh_now_ms();
	rng = seed * 2654435761ull + 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (rh_servers_start(srv, NSERVERS, NULL) != 0) {
		fprintf(stderr, "soak_async: could not start %d redis-servers\n", NSERVERS);
		return 2;
	}
	for (i = 0; i < NSERVERS; i++)
		conns[i] = info_field(srv[i], "stats", "total_connections_received:");
	pause_idx = (int)(next_rand() % NSERVERS);
	if (dlock_loop_new(&loop, NULL) != 0) {
		fprintf(stderr, "dlock_loop_new: %s\n", dlock_errmsg_last());
		return 2;
	}
	for (i = 0; i < NSERVERS; i++) {
		dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;

		o.loop = loop;
		o.command_timeout_ms = CMD_TIMEOUT_MS;
		o.connect_timeout_ms = CMD_TIMEOUT_MS;
		o.watchdog_timeout_ms = WATCHDOG_MS;
		if (dlock_client_new(&clients[i], rh_server_uri(srv[i]), &o) != 0) {
			fprintf(stderr, "open %s: %s\n", rh_server_uri(srv[i]), dlock_errmsg_last());
			return 2;
		}
	}
	ops = calloc((size_t)nops, sizeof(*ops));
	if (ops == NULL)
		return 2;
	for (n = 0; n < NAMES; n++) {
		dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
		char name[32];

		lock_server[n] = n % NSERVERS;
		kinds[n] = (dlock_lock_kind)(n / NSERVERS % 3);
		lo.kind = kinds[n];
		lo.fair_wait_ms = FAIR_WAIT_MS;
		snprintf(name, sizeof(name), "soak:%d", n);
		by_name[n] = malloc(sizeof(int) * (size_t)nops);
		if (by_name[n] == NULL ||
				dlock_lock_new(&locks[n], clients[lock_server[n]], name, &lo) != 0) {
			fprintf(stderr, "dlock_lock_new: %s\n", dlock_errmsg_last());
			return 2;
		}
	}

	/* Every acquisition at once, before the loop first runs. */
	t0 = rh_now_ms();
	for (i = 0; i < nops; i++) {
		soak_op *o = &ops[i];
		int rc, w = (int)(next_rand() % 100);

		o->name = (int)(next_rand() % NAMES);
		by_name[o->name][nby_name[o->name]++] = i;
		o->wait = w < 15 ? 0 : w < 20 ? DLOCK_WAIT_FOREVER : between(100, 6000);
		o->lease = chance(35) ? DLOCK_LEASE_WATCHDOG : between(30, 3000);
		dlock_client_owner(o->owner, clients[lock_server[o->name]],
				(uint64_t)i + 1);
		in_call++;
		rc = dlock_lock_acquire_async(&o->acq, locks[o->name], o->owner, o->wait, o->lease,
				acquired, o);
		in_call--;
		if (rc != 0) {
			fprintf(stderr, "dlock_lock_acquire_async: %s\n", dlock_errmsg_last());
			return 2;
		}
		acq_left++;
		if (chance(10)) {
			cancel_op(o->acq);
			cancels_start++;
			if (chance(20)) {
				cancel_op(o->acq);
				cancels_twice++;
			}
		} else if (chance(25)) {
			ev_push(t0 + between(0, CANCEL_WITHIN_MS), EV_CANCEL, i);
		}
	}
	t_started = rh_now_ms();
	printf("soak_async: %d acquisitions over %d names (%d plain, fair, fenced) on %d servers, "
			"one loop; server %d paused at %d ms for %d ms; seed %llu\n",
			nops, NAMES, NAMES / 3, NSERVERS, pause_idx, no_pause ? -1 : PAUSE_AT_MS,
			no_pause ? 0 : PAUSE_FOR_MS, seed);

	/* Stretched under sanitizers, but reported before ctest's 300 s timeout. */
	deadline = t0 + ((int64_t)RUN_WITHIN_MS * factor < 240000 ? (int64_t)RUN_WITHIN_MS * factor
								   : 240000);
	while (rh_now_ms() < deadline) {
		int64_t now = rh_now_ms(), wait_ms = 20, took;
		int rc;

		if (paused_at < 0 && now - t0 >= PAUSE_AT_MS) {
			CHECK(no_pause || rh_server_pause(srv[pause_idx]) == 0, "SIGSTOP");
			paused_at = now;
		} else if (paused_at >= 0 && resumed_at < 0 && now - paused_at >= PAUSE_FOR_MS) {
			CHECK(no_pause || rh_server_resume(srv[pause_idx]) == 0, "SIGCONT");
			resumed_at = now;
		}
		while (nheap > 0 && heap[0].at <= now) {
			event e = ev_pop();
			soak_op *o = &ops[e.op];

			if (e.kind == EV_CANCEL && o->acq != NULL) {
				cancel_op(o->acq);
				cancels_timer++;
			} else if (e.kind == EV_RELEASE) {
				start_release(o);
			}
		}
		if (now >= next_look) {
			int t = dl_count_threads();

			if (t > threads_max)
				threads_max = t;
			next_look = now + 50;
		}
		if (debug && now >= next_progress) {
			progress(now - t0);
			next_progress = now + 2000;
		}
		if (acq_left == 0 && rel_left == 0 && resumed_at >= 0) {
			t_ended = now;
			break;
		}
		if (nheap > 0 && heap[0].at - now < wait_ms)
			wait_ms = heap[0].at - now > 0 ? heap[0].at - now : 0;
		rc = dlock_loop_run(loop, wait_ms);
		CHECK(rc >= 0, "dlock_loop_run: %s", dlock_errmsg_last());
		took = rh_now_ms() - now - wait_ms;
		if (took > longest_turn)
			longest_turn = took;
	}
	if (resumed_at < 0 && paused_at >= 0 && !no_pause)
		rh_server_resume(srv[pause_idx]);

	/* Nothing left: the undos queued behind abandoned attempts land once
	 * the server answers; the loop keeps running meanwhile. */
	if (t_ended >= 0) {
		int64_t until = rh_now_ms() + SETTLE_MS * factor;

		for (;;) {
			bad_keys = other_keys = 0;
			for (i = 0; i < NSERVERS; i++)
				scan_keys(srv[i], &bad_keys, &other_keys, 0);
			if (bad_keys == 0 || rh_now_ms() >= until)
				break;
			for (int64_t t = rh_now_ms() + 100; rh_now_ms() < t;)
				dlock_loop_run(loop, 20);
		}
		t_settled = rh_now_ms();
	}
	for (i = 0; i < NSERVERS; i++)
		conns_total += (long)(info_field(srv[i], "stats", "total_connections_received:") -
				conns[i]);

	printf("soak_async: %d ops in %.1f s (started in %" PRId64 " ms, all ended at %.1f s, "
			"settled %+" PRId64 " ms); ",
			nops, (double)((t_settled >= 0 ? t_settled : rh_now_ms()) - t0) / 1e3,
			t_started - t0, t_ended >= 0 ? (double)(t_ended - t0) / 1e3 : -1.0,
			t_ended >= 0 ? t_settled - t_ended : -1);
	print_codes("acquire:", acq_by_code);
	print_codes("; release:", rel_by_code);
	printf("; granted plain/fair/fenced %ld/%ld/%ld (%ld expired before their callback); "
			"cancels: %ld at start (%ld twice), %ld timed, %ld in callbacks, %ld of "
			"releases; releases in callbacks %ld, sent again %ld; longest loop turn +%" PRId64
			" ms; threads %d (at start %d); connections accepted %ld; keys left: %ld "
			"locks/queues, %ld counters/latches\n",
			grants_by_kind[0], grants_by_kind[1], grants_by_kind[2], expired_grants,
			cancels_start, cancels_twice, cancels_timer, cancels_cb, rel_cancels, rel_in_cb,
			rel_retries, longest_turn, threads_max, threads_at_start, conns_total, bad_keys,
			other_keys);

	ok = t_ended >= 0;
	if (!ok) {
		fprintf(stderr, "  not done within %" PRId64 " s: %d acquisitions and %d releases left\n",
				(deadline - t0) / 1000, acq_left, rel_left);
		progress(rh_now_ms() - t0);
	}
	report("every operation ended in time", ok);

	ok = 1;
	for (i = 0; i < nops; i++) {
		soak_op *o = &ops[i];

		if (o->acq_calls != 1 || o->rel_calls != o->rel_starts) {
			ok = 0;
			CHECK(0, "op %d: %d acquisition callbacks, %d release callbacks for %d starts", i,
					o->acq_calls, o->rel_calls, o->rel_starts);
		}
	}
	report("every callback exactly once", ok);
	report("no callback inside the call that started it", inside_calls == 0);
	report("codes from the documented set, each error with a message",
			bad_codes == 0 && no_message == 0);
	report("fenced grants carry a token, others none", bad_tokens == 0);
	report("no grant while another owner's hold was valid", overlaps == 0);
	report("one thread all along",
			threads_max == threads_at_start && (factor > 1 || threads_at_start == 1));
	if (bad_keys != 0) {
		for (i = 0; i < NSERVERS; i++)
			scan_keys(srv[i], &bad_keys, &other_keys, 1);
		dump_leftovers();
	}
	report("no lock or fair queue key left on any server", t_settled >= 0 && bad_keys == 0);

	for (n = 0; n < NAMES; n++) {
		dlock_lock_free(locks[n]);
		free(by_name[n]);
	}
	for (i = 0; i < NSERVERS; i++)
		dlock_client_free(clients[i]);
	dlock_loop_free(loop);
	for (i = 0; i < NSERVERS; i++)
		rh_server_free(srv[i]);
	free(ops);
	free(heap);
	if (g_fails > 0 && failed == 0)
		report("teardown", 0);
	printf("%d passed, %d failed (seed %llu)\n", passed, failed, seed);
	return failed ? 1 : 0;
}
