/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: what every asynchronous operation (dlock/async.h) shares - its
 * loop, its one callback, and cancellation. Each kind of operation embeds
 * it first and supplies the steps (single/acquire_op.c ...).
 *
 * An operation starts, runs and ends on its loop's thread: a start made
 * from another thread (a client with a thread of its own) is posted there,
 * and so is a cancel. Its result is delivered by a posted task, so the
 * callback never runs inside the call that started it.
 */
#ifndef DLOCK_CORE_OP_H
#define DLOCK_CORE_OP_H

#include <stdatomic.h>

#include "dlock/async.h"
#include "core/base/error.h"
#include "core/loop/loop.h"

struct dlock_op {
	dlock__loop *loop;
	dlock_op_cb cb;
	void *userdata;
	/* The kind's steps, on the loop's thread. */
	void (*start)(dlock_op *op);
	void (*cancel)(dlock_op *op); /* stop what is under way, then dlock__op_finish */
	void (*destroy)(dlock_op *op); /* free the kind's state (and the op) */
	dlock__task start_task, cancel_task, finish_task;
	_Atomic int cancel_asked;
	int uncancelable; /* a release: it finishes whatever is asked */
	int finished;
	/* The library's reference until the callback returned, and the
	 * caller's until dlock_op_free() when it asked for the handle. */
	_Atomic int refs;
	dlock_result result;
	char message[DLOCK__ERRMSG_MAX];
};

/* Set up the shared part; the result starts as "nothing known". */
void dlock__op_init(dlock_op *op, dlock__loop *loop, dlock_op_cb cb, void *userdata);

/* Start it on its loop (posted: the caller's call returns first). */
void dlock__op_submit(dlock_op *op);
/* The same, handing the caller a reference in *out when out is not NULL
 * (dropped with dlock_op_free). */
void dlock__op_submit_out(dlock_op *op, dlock_op **out);

/* The outcome: code and message (the calling thread's last, when code < 0).
 * The callback runs from a posted task, then the op is destroyed. Once only. */
void dlock__op_finish(dlock_op *op, int code);

/*
 * A blocking call: start the op now, on the calling thread, which then
 * drives its loop until the callback ran and set *done (the loop's other
 * work runs meanwhile). The callback comes from here, inside the call.
 */
void dlock__op_run(dlock_op *op, const int *done);

/* Whether a cancel was asked (read at each step). */
int dlock__op_canceled(const dlock_op *op);

#endif
