/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared part of asynchronous operations (core/op.h). */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/time.h"
#include "core/loop/op.h"

#define OP_OF(t, field) ((dlock_op *)((char *)(t) - offsetof(dlock_op, field)))

/*
 * The operations not yet ended, so that dlock_op_cancel() from any thread
 * never touches one that was freed meanwhile (a client's thread may end it
 * at that very moment): an open-addressing set of pointers.
 */
#define TOMBSTONE ((dlock_op *)1)

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static dlock_op **live;
static size_t live_cap, live_used; /* used: entries and tombstones */
static size_t live_count;          /* entries: the table goes when none is left */

static size_t slot_of(const dlock_op *op, size_t cap)
{
	uint64_t h = (uint64_t)(uintptr_t)op;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return (size_t)(h & (cap - 1));
}

/* live_mu held. */
static dlock_op **live_find(const dlock_op *op)
{
	size_t i;

	if (live_cap == 0)
		return NULL;
	for (i = slot_of(op, live_cap);; i = (i + 1) & (live_cap - 1)) {
		if (live[i] == op)
			return &live[i];
		if (live[i] == NULL)
			return NULL;
	}
}

/* live_mu held: rehash without the tombstones, twice as large when more
 * than a quarter is in use. 0, or -1 out of memory. */
static int live_grow(void)
{
	size_t cap = 64, n = 0, i;
	dlock_op **old = live, **t;

	for (i = 0; i < live_cap; i++)
		n += old[i] != NULL && old[i] != TOMBSTONE;
	while (cap < 4 * (n + 1))
		cap *= 2;
	t = dlock__calloc(cap, sizeof(*t));

	if (t == NULL)
		return -1;
	for (i = 0; i < live_cap; i++) {
		size_t k;

		if (old[i] == NULL || old[i] == TOMBSTONE)
			continue;
		for (k = slot_of(old[i], cap); t[k] != NULL; k = (k + 1) & (cap - 1))
			;
		t[k] = old[i];
	}
	live_used = 0;
	for (i = 0; i < cap; i++)
		live_used += t[i] != NULL;
	live = t;
	live_cap = cap;
	dlock__free(old);
	return 0;
}

/* The op was handed out: cancel may reach it. (Out of memory: cancel
 * finds it not running, as after its end; nothing unsafe.) */
static void live_add(dlock_op *op)
{
	size_t k;

	dlock__mutex_lock(&live_mu);
	if ((live_used + 1) * 4 < live_cap * 3 || live_grow() == 0) {
		for (k = slot_of(op, live_cap); live[k] != NULL && live[k] != TOMBSTONE;
				k = (k + 1) & (live_cap - 1))
			;
		live_used += live[k] == NULL;
		live[k] = op;
		live_count++;
	}
	dlock__mutex_unlock(&live_mu);
}

static void live_remove(dlock_op *op)
{
	dlock_op **at;

	dlock__mutex_lock(&live_mu);
	if ((at = live_find(op)) != NULL) {
		*at = TOMBSTONE;
		if (--live_count == 0) { /* nothing kept between bursts of operations */
			dlock__free(live);
			live = NULL;
			live_cap = live_used = 0;
		}
	}
	dlock__mutex_unlock(&live_mu);
}

/* The last reference gone: the kind's state goes (and with it the
 * references it held on its lock and client). */
static void op_unref(dlock_op *op)
{
	if (atomic_fetch_sub(&op->refs, 1) == 1)
		op->destroy(op);
}

static void run_start(dlock__task *t)
{
	dlock_op *op = OP_OF(t, start_task);

	if (dlock__op_canceled(op)) {
		dlock__seterr(DLOCK_ECANCELED, "canceled before it started");
		dlock__op_finish(op, DLOCK_ECANCELED);
		return;
	}
	op->start(op);
}

static void run_cancel(dlock__task *t)
{
	dlock_op *op = OP_OF(t, cancel_task);

	if (!op->finished)
		op->cancel(op);
}

static void run_finish(dlock__task *t)
{
	dlock_op *op = OP_OF(t, finish_task);

	op->result.message = op->message;
	op->loop->pending--; /* from its callback on: dlock_loop_pending() */
	op->cb(op, &op->result, op->userdata);
	live_remove(op); /* a cancel from now on finds it ended */
	dlock__loop_unpost(op->loop, &op->cancel_task);
	op_unref(op);
}

void dlock__op_init(dlock_op *op, dlock__loop *loop, dlock_op_cb cb, void *userdata)
{
	memset(op, 0, sizeof(*op));
	op->loop = loop;
	op->cb = cb;
	op->userdata = userdata;
	op->result.validity_ms = -1;
	op->result.holder_ttl_ms = -1;
	dlock__task_init(&op->start_task, run_start);
	dlock__task_init(&op->cancel_task, run_cancel);
	dlock__task_init(&op->finish_task, run_finish);
}

void dlock__op_submit(dlock_op *op)
{
	dlock__op_submit_out(op, NULL);
}

void dlock__op_submit_out(dlock_op *op, dlock_op **out)
{
	atomic_store(&op->refs, out != NULL ? 2 : 1);
	if (out != NULL)
		*out = op;
	live_add(op);
	op->loop->pending++;
	dlock__loop_post(op->loop, &op->start_task);
}

void dlock__op_finish(dlock_op *op, int code)
{
	if (op->finished)
		return;
	op->finished = 1;
	op->result.code = code;
	if (code < 0)
		snprintf(op->message, sizeof(op->message), "%s", dlock__errmsg_thread());
	else
		op->message[0] = '\0';
	dlock__loop_post(op->loop, &op->finish_task);
}

void dlock__op_run(dlock_op *op, const int *done)
{
	dlock__loop *l = op->loop;

	/* Not in the set: nobody outside this call holds it to cancel it. */
	atomic_store(&op->refs, 1);
	l->pending++;
	op->start(op);
	/* Until its callback ran (it sets *done; the op is freed then), its end
	 * delivered here rather than by another turn of the loop. */
	while (!*done) {
		if (op->finished && dlock__loop_unpost(l, &op->finish_task))
			run_finish(&op->finish_task);
		else
			dlock__loop_run_once(l, DLOCK__NEVER);
	}
}

int dlock__op_canceled(const dlock_op *op)
{
	return atomic_load(&op->cancel_asked);
}

int dlock_op_cancel(dlock_op *op)
{
	if (op == NULL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_op_cancel: NULL op");
	/* Under the set's lock: the op cannot end meanwhile (a caller's
	 * reference keeps its memory; the set says whether it still runs). A
	 * release is not canceled: it finishes whatever is asked. */
	dlock__mutex_lock(&live_mu);
	if (live_find(op) != NULL && !op->uncancelable) {
		atomic_store(&op->cancel_asked, 1);
		dlock__loop_post(op->loop, &op->cancel_task);
	}
	dlock__mutex_unlock(&live_mu);
	return 0;
}

void dlock_op_free(dlock_op *op)
{
	if (op != NULL)
		op_unref(op);
}
