/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared part of asynchronous operations (core/op.h). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/time.h"
#include "core/drive/op.h"

#define OP_OF(t, field) ((dlock_op *)((char *)(t) - offsetof(dlock_op, field)))

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
	op->cb(op, &op->result, op->userdata);
	dlock__loop_unpost(op->loop, &op->cancel_task);
	op->loop->pending--;
	op->destroy(op);
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
	if (op->uncancelable)
		return 0;
	atomic_store(&op->cancel_asked, 1);
	dlock__loop_post(op->loop, &op->cancel_task);
	return 0;
}
