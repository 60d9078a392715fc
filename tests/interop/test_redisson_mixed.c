/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Java and C holders of one lock at once, against the real Redisson (Java).
 *
 * Mixed contention: two Redisson workers and three dlock threads (each its
 * own owner) take one RReadWriteLock, or one RPermitExpirableSemaphore of 2
 * permits, over and over for RUN_MS, holding a few ms each time. Every
 * critical section is stamped with CLOCK_MONOTONIC: a dlock section from
 * the return of its lock call to the start of its unlock call, a Redisson
 * one from the end of its lock call to the start of its unlock call (the
 * peer's System.nanoTime() stamps, the same clock). Afterwards: no writer
 * overlaps any other section, readers did overlap, at most 2 permits were
 * held at any instant and 2 were at some point, and both sides had sections.
 *
 * Crashed holders: a Redisson holder whose JVM is SIGKILLed, and a dlock
 * holder whose client is freed without releasing, leave a leased hold that
 * the other side's waiter gets when the lease ends: not before, and not
 * long after.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interop.h"
#include "redis_harness.h"
#include "support.h"

#define RUN_MS 5000
#define C_WORKERS 3
#define J_WORKERS 2
#define MAX_SECTIONS 20000
#define HOLD_MIN_MS 1
#define HOLD_SPAN_MS 4        /* holds of 1..4 ms */
#define WRITE_PERCENT 40
/* A dlock thread rests 0..THINK_SPAN_MS-1 ms between sections: it loops
 * far faster than the Redisson workers, driven from the test's thread
 * through a pipe, and would otherwise leave them few sections. */
#define THINK_SPAN_MS 4
#define CRASH_LEASE_MS 3000
/* A waiter for a leased hold whose holder crashed: it must not get it
 * before the lease (less the clocks' millisecond rounding: the permit's end
 * is an epoch millisecond), and gets it this long after at most: a waiter
 * wakes by the hold's remaining time, not by polling, so this is room for a
 * busy host (the runs show a few ms), not for a missed deadline. */
#define EARLY_SLACK_MS 20
#define LATE_MARGIN_MS 1000

static java_peer *peer;
static dlock_client *cli;

static void setup(void)
{
	dl_server_start();
	peer = jp_start(rh_server_uri(dl_srv), 30000);
	cli = dl_client(rh_server_uri(dl_srv), 5000, 30000);
}

static void teardown(void)
{
	jp_stop(peer);
	dlock_client_free(cli);
	dl_server_stop();
}

TestSuite(redisson_mixed, .init = setup, .fini = teardown, .timeout = 240);

/* ---- sections -------------------------------------------------------------- */

enum { SIDE_JAVA = 0, SIDE_C = 1 };

typedef struct section {
	int side;
	int write;     /* rwlock: the write half */
	int64_t begin; /* CLOCK_MONOTONIC ns */
	int64_t end;
} section;

static section secs[MAX_SECTIONS];
static int nsecs;
static pthread_mutex_t secs_mu = PTHREAD_MUTEX_INITIALIZER;

static void record(int side, int write, int64_t begin, int64_t end)
{
	pthread_mutex_lock(&secs_mu);
	if (nsecs < MAX_SECTIONS)
		secs[nsecs++] = (section){ side, write, begin, end };
	pthread_mutex_unlock(&secs_mu);
}

static int overlap(const section *a, const section *b)
{
	return a->begin < b->end && b->begin < a->end;
}

static int count_side(int side, int write)
{
	int n = 0;

	for (int i = 0; i < nsecs; i++)
		n += secs[i].side == side && (write < 0 || secs[i].write == write);
	return n;
}

/* ---- the contenders ---------------------------------------------------------- */

typedef enum { MODE_RWLOCK, MODE_SEMAPHORE } mode;

typedef struct c_worker {
	mode m;
	const char *name;
	unsigned seed;
	int64_t deadline;
	pthread_t thread;
	int rc;          /* first failure */
	char err[256];
} c_worker;

static int hold_ms(unsigned *seed)
{
	return HOLD_MIN_MS + (int)(rand_r(seed) % HOLD_SPAN_MS);
}

static void c_rwlock(c_worker *w)
{
	dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
	dlock_lock *half[2] = { NULL, NULL };

	o.kind = DLOCK_LOCK_READ;
	w->rc = dlock_lock_new(&half[0], cli, w->name, &o);
	o.kind = DLOCK_LOCK_WRITE;
	if (!w->rc)
		w->rc = dlock_lock_new(&half[1], cli, w->name, &o);
	while (!w->rc && jp_now_ns() < w->deadline) {
		int write = (int)(rand_r(&w->seed) % 100) < WRITE_PERCENT;
		dlock_lock *l = half[write];

		w->rc = dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, 10000);
		if (w->rc) {
			snprintf(w->err, sizeof w->err, "lock: %s", dlock_lock_errmsg(l));
			break;
		}
		int64_t begin = jp_now_ns();
		dl_sleep_ms(hold_ms(&w->seed));
		int64_t end = jp_now_ns();
		w->rc = dlock_lock_release(l, NULL);
		if (w->rc) {
			snprintf(w->err, sizeof w->err, "unlock: %s", dlock_lock_errmsg(l));
			break;
		}
		record(SIDE_C, write, begin, end);
		dl_sleep_ms(rand_r(&w->seed) % THINK_SPAN_MS);
	}
	dlock_lock_free(half[0]);
	dlock_lock_free(half[1]);
}

static void c_semaphore(c_worker *w)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s = NULL;
	char id[DLOCK_PERMIT_ID_SIZE];

	o.kind = DLOCK_SEMAPHORE_EXPIRABLE;
	w->rc = dlock_semaphore_new(&s, cli, w->name, &o);
	while (!w->rc && jp_now_ns() < w->deadline) {
		w->rc = dlock_semaphore_acquire_permit(id, s, DLOCK_WAIT_FOREVER, 10000);
		if (w->rc) {
			snprintf(w->err, sizeof w->err, "acquire: %s", dlock_semaphore_errmsg(s));
			break;
		}
		int64_t begin = jp_now_ns();
		dl_sleep_ms(hold_ms(&w->seed));
		int64_t end = jp_now_ns();
		w->rc = dlock_semaphore_release_permit(s, id);
		if (w->rc) {
			snprintf(w->err, sizeof w->err, "release: %s", dlock_semaphore_errmsg(s));
			break;
		}
		record(SIDE_C, 0, begin, end);
		dl_sleep_ms(rand_r(&w->seed) % THINK_SPAN_MS);
	}
	dlock_semaphore_free(s);
}

static void *c_main(void *arg)
{
	c_worker *w = arg;

	if (w->m == MODE_RWLOCK)
		c_rwlock(w);
	else
		c_semaphore(w);
	return NULL;
}

/* A Redisson worker, driven from the test's thread. */
typedef struct j_worker {
	char name[8];
	enum { J_IDLE, J_LOCKING, J_HOLDING, J_UNLOCKING } state;
	long seq;
	int write;
	char permit[400];
	int64_t begin;
	int64_t hold_until;
} j_worker;

static void j_start_lock(java_peer *p, j_worker *j, mode m, const char *name, unsigned *seed)
{
	if (m == MODE_RWLOCK) {
		j->write = (int)(rand_r(seed) % 100) < WRITE_PERCENT;
		j->seq = jp_send(p, j->name, "lock %s %s -1", j->write ? "write" : "read", name);
	} else {
		j->write = 0;
		j->seq = jp_send(p, j->name, "pes-acquire %s 10000", name);
	}
	j->state = J_LOCKING;
}

static void j_start_unlock(java_peer *p, j_worker *j, mode m, const char *name)
{
	if (m == MODE_RWLOCK)
		j->seq = jp_send(p, j->name, "unlock %s %s", j->write ? "write" : "read", name);
	else
		j->seq = jp_send(p, j->name, "pes-release %s %s", name, j->permit);
	j->state = J_UNLOCKING;
}

/* Run the contention: C_WORKERS dlock threads and J_WORKERS Redisson
 * workers on name for RUN_MS; the sections land in secs[]. */
static void contend(mode m, const char *name)
{
	c_worker cw[C_WORKERS];
	j_worker jw[J_WORKERS];
	unsigned seed = (unsigned)jp_now_ns();
	int64_t deadline = jp_now_ns() + (int64_t)RUN_MS * 1000000;
	jp_reply r;

	nsecs = 0;
	for (int i = 0; i < C_WORKERS; i++) {
		cw[i] = (c_worker){ .m = m, .name = name, .seed = seed + 7919u * (unsigned)i,
			.deadline = deadline };
		cr_assert_eq(pthread_create(&cw[i].thread, NULL, c_main, &cw[i]), 0);
	}
	for (int i = 0; i < J_WORKERS; i++) {
		jw[i] = (j_worker){ .state = J_IDLE };
		snprintf(jw[i].name, sizeof jw[i].name, "m%d", i);
	}
	for (;;) {
		int busy = 0;

		for (int i = 0; i < J_WORKERS; i++) {
			j_worker *j = &jw[i];

			switch (j->state) {
			case J_IDLE:
				if (jp_now_ns() < deadline) {
					j_start_lock(peer, j, m, name, &seed);
					busy = 1;
				}
				break;
			case J_LOCKING:
				busy = 1;
				if (!jp_poll(peer, j->seq, 2, &r))
					break;
				cr_assert(r.ok, "Redisson %s: lock on %s: %s", j->name, name, r.value);
				memcpy(j->permit, r.value, sizeof j->permit);
				j->begin = r.t_end_ns;
				j->hold_until = jp_now_ns() + (int64_t)hold_ms(&seed) * 1000000;
				j->state = J_HOLDING;
				break;
			case J_HOLDING:
				busy = 1;
				if (jp_now_ns() >= j->hold_until)
					j_start_unlock(peer, j, m, name);
				break;
			case J_UNLOCKING:
				busy = 1;
				if (!jp_poll(peer, j->seq, 2, &r))
					break;
				cr_assert(r.ok, "Redisson %s: unlock on %s: %s", j->name, name, r.value);
				record(SIDE_JAVA, j->write, j->begin, r.t_start_ns);
				j->state = J_IDLE;
				break;
			}
		}
		if (!busy)
			break;
	}
	for (int i = 0; i < C_WORKERS; i++) {
		pthread_join(cw[i].thread, NULL);
		cr_assert_eq(cw[i].rc, 0, "dlock worker %d: %s", i, cw[i].err);
	}
	cr_assert_lt(nsecs, MAX_SECTIONS, "more sections than room for them");
}

Test(redisson_mixed, rwlock_contention_keeps_writers_exclusive)
{
	int reader_pairs = 0, cross_reader_pairs = 0;

	contend(MODE_RWLOCK, "mix-rw");
	for (int i = 0; i < nsecs; i++) {
		for (int k = i + 1; k < nsecs; k++) {
			const section *a = &secs[i], *b = &secs[k];

			if (!overlap(a, b))
				continue;
			cr_assert(!a->write && !b->write,
					"a %s %s section [%" PRId64 ", %" PRId64 "] overlaps a %s %s "
					"section [%" PRId64 ", %" PRId64 "] (%.3f ms)",
					a->side == SIDE_C ? "dlock" : "Redisson", a->write ? "write" : "read",
					a->begin, a->end, b->side == SIDE_C ? "dlock" : "Redisson",
					b->write ? "write" : "read", b->begin, b->end,
					(double)((a->end < b->end ? a->end : b->end) -
						(a->begin > b->begin ? a->begin : b->begin)) / 1e6);
			reader_pairs++;
			cross_reader_pairs += a->side != b->side;
		}
	}
	printf("interop mixed RReadWriteLock (Redisson %s): %d sections in %d ms; Redisson %d "
	       "read + %d write, dlock %d read + %d write; overlapping reader pairs %d "
	       "(%d Redisson with dlock); no writer overlapped\n",
			jp_version(peer), nsecs, RUN_MS, count_side(SIDE_JAVA, 0), count_side(SIDE_JAVA, 1),
			count_side(SIDE_C, 0), count_side(SIDE_C, 1), reader_pairs, cross_reader_pairs);
	fflush(stdout);
	for (int side = SIDE_JAVA; side <= SIDE_C; side++)
		for (int write = 0; write <= 1; write++)
			cr_assert_gt(count_side(side, write), 0, "no %s %s section: nothing was checked",
					side == SIDE_C ? "dlock" : "Redisson", write ? "write" : "read");
	cr_assert_gt(reader_pairs, 0, "readers never held together: a read lock that excludes");
	cr_assert_eq(rh_command_int(dl_srv, "EXISTS mix-rw"), 0, "the lock outlived its holders");
}

static int cmp_event(const void *a, const void *b)
{
	const int64_t *x = a, *y = b;

	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1]; /* at one instant, ends (-1) first */
}

Test(redisson_mixed, expirable_semaphore_contention_holds_at_most_its_permits)
{
	jp_reply r;

	cr_assert_str_eq(jp_ok(peer, &r, "m0", "pes-set mix-sem 2"), "true");
	contend(MODE_SEMAPHORE, "mix-sem");
	int64_t (*ev)[2] = calloc((size_t)nsecs * 2, sizeof *ev);
	cr_assert_not_null(ev);
	for (int i = 0; i < nsecs; i++) {
		ev[2 * i][0] = secs[i].begin;
		ev[2 * i][1] = 1;
		ev[2 * i + 1][0] = secs[i].end;
		ev[2 * i + 1][1] = -1;
	}
	qsort(ev, (size_t)nsecs * 2, sizeof *ev, cmp_event);
	int cur = 0, max = 0;
	int64_t at_two_ns = 0, since = 0;
	for (int i = 0; i < nsecs * 2; i++) {
		if (cur == 2)
			at_two_ns += ev[i][0] - since;
		cur += (int)ev[i][1];
		since = ev[i][0];
		if (cur > max) {
			max = cur;
			cr_assert_leq(max, 2, "%d sections held at once at %" PRId64 " (2 permits)", max,
					ev[i][0]);
		}
	}
	free(ev);
	/* Pairs of a Redisson and a dlock section held together. */
	int cross = 0;
	for (int i = 0; i < nsecs; i++)
		for (int k = i + 1; k < nsecs; k++)
			cross += secs[i].side != secs[k].side && overlap(&secs[i], &secs[k]);
	printf("interop mixed RPermitExpirableSemaphore N=2 (Redisson %s): %d sections in %d ms; "
	       "Redisson %d, dlock %d; max held at once %d, 2 held for %.0f ms in all, "
	       "%d Redisson+dlock overlapping pairs\n",
			jp_version(peer), nsecs, RUN_MS, count_side(SIDE_JAVA, -1), count_side(SIDE_C, -1),
			max, (double)at_two_ns / 1e6, cross);
	fflush(stdout);
	cr_assert_gt(count_side(SIDE_JAVA, -1), 0, "no Redisson section: nothing was checked");
	cr_assert_gt(count_side(SIDE_C, -1), 0, "no dlock section: nothing was checked");
	cr_assert_eq(max, 2, "never 2 permits held at once: a semaphore of 1");
	cr_assert_str_eq(jp_ok(peer, &r, "m0", "pes-avail mix-sem"), "2", "permits leaked");
}

/* ---- crashed holders ---------------------------------------------------------- */

/* Check and print a reclaim: the call that took the hold ran from
 * taken_from to taken_to (ns), the waiter got it at got. The lease runs from
 * some instant of that call (Redisson reckons a permit's from before it
 * sends the command), so it cannot end before taken_from + lease and must
 * have ended by taken_to + lease. */
static void reclaimed(const char *what, const char *version, int64_t taken_from, int64_t taken_to,
		int64_t got)
{
	double from_start_ms = (double)(got - taken_from) / 1e6;
	double from_end_ms = (double)(got - taken_to) / 1e6;

	printf("interop crash %s (Redisson %s): lease %d ms, reclaimed %.1f ms after the taking "
	       "call began, %.1f ms after it returned (%.1f ms past the latest lease end)\n",
			what, version, CRASH_LEASE_MS, from_start_ms, from_end_ms,
			from_end_ms - CRASH_LEASE_MS);
	fflush(stdout);
	cr_assert(from_start_ms >= CRASH_LEASE_MS - EARLY_SLACK_MS,
			"%s: the waiter got it %.1f ms after the taking call began, before the %d ms "
			"lease ended", what, from_start_ms, CRASH_LEASE_MS);
	cr_assert(from_end_ms <= CRASH_LEASE_MS + LATE_MARGIN_MS,
			"%s: the waiter got it %.1f ms after the taking call returned; the lease was %d ms",
			what, from_end_ms, CRASH_LEASE_MS);
}

static dlock_semaphore *pes_on(dlock_client *c, const char *name)
{
	dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
	dlock_semaphore *s = NULL;

	o.kind = DLOCK_SEMAPHORE_EXPIRABLE;
	dl_pass(dlock_semaphore_new(&s, c, name, &o));
	return s;
}

Test(redisson_mixed, a_killed_java_permit_holder_s_permit_comes_back_to_dlock_by_its_lease)
{
	dlock_semaphore *s = pes_on(cli, "crash-pes-j");
	char id[DLOCK_PERMIT_ID_SIZE], version[64];
	jp_reply r;

	snprintf(version, sizeof version, "%s", jp_version(peer));
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "pes-set crash-pes-j 1"), "true");
	jp_ok(peer, &r, "w1", "pes-acquire crash-pes-j %d", CRASH_LEASE_MS);
	jp_kill(peer);
	peer = NULL;
	cr_assert_eq(dlock_semaphore_acquire_permit(id, s, 0, 10000), DLOCK_ENOTACQUIRED,
			"dlock took the permit of a Redisson holder before its lease ended");
	dl_pass(dlock_semaphore_acquire_permit(id, s, 15000, 10000));
	reclaimed("RPermitExpirableSemaphore, killed Redisson holder -> dlock waiter", version,
			r.t_start_ns, r.t_end_ns, jp_now_ns());
	dl_pass(dlock_semaphore_release_permit(s, id));
	dlock_semaphore_free(s);
}

Test(redisson_mixed, a_killed_java_writer_s_lock_comes_back_to_dlock_by_its_lease)
{
	dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
	dlock_lock *l = NULL;
	char version[64];
	jp_reply r;

	o.kind = DLOCK_LOCK_WRITE;
	dl_pass(dlock_lock_new(&l, cli, "crash-rw-j", &o));
	snprintf(version, sizeof version, "%s", jp_version(peer));
	jp_ok(peer, &r, "w1", "lock write crash-rw-j %d", CRASH_LEASE_MS);
	jp_kill(peer);
	peer = NULL;
	cr_assert_eq(dlock_lock_acquire(l, NULL, 0, 10000), DLOCK_ENOTACQUIRED,
			"dlock took the write lock of a Redisson holder before its lease ended");
	dl_pass(dlock_lock_acquire(l, NULL, 15000, 10000));
	reclaimed("RReadWriteLock write, killed Redisson holder -> dlock waiter", version,
			r.t_start_ns, r.t_end_ns, jp_now_ns());
	dl_pass(dlock_lock_release(l, NULL));
	dlock_lock_free(l);
}

Test(redisson_mixed, a_freed_dlock_client_s_permit_comes_back_to_java_by_its_lease)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 5000, 30000);
	dlock_semaphore *s = pes_on(c, "crash-pes-c");
	char id[DLOCK_PERMIT_ID_SIZE];
	jp_reply r;
	int set = 0;

	dl_pass(dlock_semaphore_try_set_permits(&set, s, 1));
	cr_assert_eq(set, 1);
	int64_t t0 = jp_now_ns();
	dl_pass(dlock_semaphore_acquire_permit(id, s, 0, CRASH_LEASE_MS));
	int64_t t1 = jp_now_ns();
	/* The crash as Redisson sees it: no release, the connections close. */
	dlock_semaphore_free(s);
	dlock_client_free(c);
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "pes-try crash-pes-c 0 60000"), "null",
			"Redisson took dlock's permit before its lease ended");
	jp_ok(peer, &r, "w1", "pes-try crash-pes-c 15000 60000");
	cr_assert_str_neq(r.value, "null", "Redisson did not get the permit back");
	reclaimed("RPermitExpirableSemaphore, freed dlock holder -> Redisson waiter", jp_version(peer),
			t0, t1, r.t_end_ns);
	jp_ok(peer, &r, "w1", "pes-release crash-pes-c %s", r.value);
}

Test(redisson_mixed, a_freed_dlock_client_s_write_lock_comes_back_to_java_by_its_lease)
{
	dlock_client *c = dl_client(rh_server_uri(dl_srv), 5000, 30000);
	dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
	dlock_lock *l = NULL;
	jp_reply r;

	o.kind = DLOCK_LOCK_WRITE;
	dl_pass(dlock_lock_new(&l, c, "crash-rw-c", &o));
	int64_t t0 = jp_now_ns();
	dl_pass(dlock_lock_acquire(l, NULL, DLOCK_WAIT_FOREVER, CRASH_LEASE_MS));
	int64_t t1 = jp_now_ns();
	dlock_lock_free(l);
	dlock_client_free(c);
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "try write crash-rw-c 0 -1"), "false",
			"Redisson took dlock's write lock before its lease ended");
	cr_assert_str_eq(jp_ok(peer, &r, "w1", "try write crash-rw-c 15000 -1"), "true",
			"Redisson did not get the write lock back");
	reclaimed("RReadWriteLock write, freed dlock holder -> Redisson waiter", jp_version(peer), t0,
			t1, r.t_end_ns);
	jp_ok(peer, &r, "w1", "unlock write crash-rw-c");
}
