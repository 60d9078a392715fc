/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The allocation-failure torture runner. One counting allocator stays
 * installed for the whole test (each Criterion test runs in its own
 * process); only "fail at k" is toggled around the operation. Allocations
 * of the clients' background threads are counted as live but never failed,
 * so the k-th allocation of the calling thread is deterministic.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#include "support.h"

#define KMAX 500 /* far more allocations than any operation makes */

static pthread_t test_thread;
static atomic_long live;    /* blocks allocated and not freed, every thread */
static atomic_long counted; /* allocations by the test thread since arm() */
static atomic_long fail_at; /* 0: fail nothing; k: fail the k-th counted one */
static atomic_int injected; /* the k-th allocation was reached (and failed) */

static int fail_now(void)
{
	long n, k;

	if (!pthread_equal(pthread_self(), test_thread))
		return 0;
	n = atomic_fetch_add(&counted, 1) + 1;
	k = atomic_load(&fail_at);
	if (k > 0 && n == k) {
		atomic_store(&injected, 1);
		return 1;
	}
	return 0;
}

static void *count_malloc(size_t size)
{
	void *p;

	if (fail_now())
		return NULL;
	p = malloc(size);
	if (p != NULL)
		atomic_fetch_add(&live, 1);
	return p;
}

static void *count_realloc(void *ptr, size_t size)
{
	void *p;

	if (fail_now())
		return NULL; /* ptr stays valid, as with a real failure */
	p = realloc(ptr, size);
	if (p != NULL && ptr == NULL)
		atomic_fetch_add(&live, 1);
	return p;
}

static void count_free(void *ptr)
{
	if (ptr != NULL)
		atomic_fetch_sub(&live, 1);
	free(ptr);
}

static const dlock_allocator counting = { DLOCK_ALLOCATOR_VERSION, count_malloc, count_realloc,
	count_free };

void dl_torture_install(void)
{
	test_thread = pthread_self();
	cr_assert_eq(dlock_set_allocator(&counting), 0);
}

long dl_torture_live(void)
{
	return atomic_load(&live);
}

static void arm(long k)
{
	atomic_store(&injected, 0);
	atomic_store(&counted, 0);
	atomic_store(&fail_at, k);
}

/* Stop failing; returns 1 when a failure was injected since arm(). */
static int disarm(void)
{
	atomic_store(&fail_at, 0);
	return atomic_load(&injected);
}

/* One k: 1 when the k-th allocation was reached (so k + 1 comes next). */
static int run_once(const dl_torture *t, void *ctx, long k, long *allocs)
{
	long live_before = atomic_load(&live), leaked;
	int fds_before = dl_count_fds(), rc, inj;

	if (t->setup != NULL)
		t->setup(ctx);
	arm(k);
	rc = t->run(ctx);
	*allocs = atomic_load(&counted);
	inj = disarm();
	cr_assert(rc == 0 || rc == DLOCK_ENOMEM,
			"%s, k=%ld: returned %d (%s), expected 0 or "
			"DLOCK_ENOMEM: %s",
			t->op, k, rc, dlock_strerror(rc),
			t->errmsg ? t->errmsg(ctx) : dlock_errmsg_last());
	if (rc == DLOCK_ENOMEM)
		cr_assert(inj, "%s, k=%ld: DLOCK_ENOMEM without an injected failure", t->op, k);
	if (t->check != NULL)
		t->check(ctx, rc, k);
	if (t->teardown != NULL)
		t->teardown(ctx);
	leaked = atomic_load(&live) - live_before;
	cr_assert_eq(leaked, 0, "%s, k=%ld: %ld allocation(s) leaked", t->op, k, leaked);
	cr_assert_eq(dl_count_fds(), fds_before, "%s, k=%ld: descriptors leaked", t->op, k);
	return inj;
}

void dl_torture_run(const dl_torture *t, void *ctx)
{
	long k, allocs = 0;

	for (k = 1; k <= KMAX; k++)
		if (!run_once(t, ctx, k, &allocs))
			break;
	cr_assert_leq(k, KMAX, "%s: still failing after %d allocations", t->op, KMAX);
	fprintf(stderr,
			"alloc_failures: %-34s failed k = 1..%ld (%ld allocations on the calling "
			"thread)\n",
			t->op, k - 1, allocs);
}
