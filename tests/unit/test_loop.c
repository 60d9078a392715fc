/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The loop's posted tasks (core/loop/loop.h): unposting takes a queued
 * task out and leaves the rest to run in order; unposting one that is not
 * queued - what every finished operation does with its cancel - costs
 * nothing however long the queue is (10,000 operations started at once
 * queue 10,000 starts).
 */
#include <stdlib.h>

#include <criterion/criterion.h>

#include "core/base/time.h"
#include "core/loop/loop.h"

typedef struct counted {
	dlock__task task; /* first */
	int *ran;
} counted;

static void count_run(dlock__task *t)
{
	(*((counted *)t)->ran)++;
}

Test(loop, unpost_takes_out_a_queued_task_and_the_rest_run)
{
	dlock__loop l;
	counted t[3];
	int ran = 0;

	cr_assert_eq(dlock__loop_init(&l), 0);
	for (int i = 0; i < 3; i++) {
		dlock__task_init(&t[i].task, count_run);
		t[i].ran = &ran;
		dlock__loop_post(&l, &t[i].task);
	}
	cr_assert_eq(dlock__loop_unpost(&l, &t[1].task), 1);
	cr_assert_eq(dlock__loop_unpost(&l, &t[1].task), 0, "unposted twice");
	dlock__loop_dispatch_due(&l);
	cr_assert_eq(ran, 2);
	dlock__loop_post(&l, &t[1].task); /* the tail was kept right */
	dlock__loop_dispatch_due(&l);
	cr_assert_eq(ran, 3);
	dlock__loop_destroy(&l);
}

Test(loop, unposting_tasks_not_queued_does_not_walk_the_queue)
{
	enum { N = 50000 };
	dlock__loop l;
	counted *queued = calloc(N, sizeof(*queued)), *idle = calloc(N, sizeof(*idle));
	int ran = 0;
	int64_t t0, took;

	cr_assert(queued != NULL && idle != NULL);
	cr_assert_eq(dlock__loop_init(&l), 0);
	for (int i = 0; i < N; i++) {
		dlock__task_init(&queued[i].task, count_run);
		queued[i].ran = &ran;
		dlock__loop_post(&l, &queued[i].task);
		dlock__task_init(&idle[i].task, count_run);
	}
	t0 = dlock__now_ms();
	for (int i = 0; i < N; i++)
		cr_assert_eq(dlock__loop_unpost(&l, &idle[i].task), 0);
	took = dlock__now_ms() - t0;
	cr_assert(took < 500, "%d unposts of tasks not queued, behind %d queued: %lld ms", N, N,
			(long long)took);
	dlock__loop_dispatch_due(&l);
	cr_assert_eq(ran, N);
	dlock__loop_destroy(&l);
	free(queued);
	free(idle);
}
