/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A watch (dlock_lock_watch_async): an operation that ends when a hold
 * does - lost (DLOCK_ELOST, the reason in the result) or released (0) -
 * so a loss is an event of the same kind as every other outcome. The
 * hold table tells it (single/holds.h), from whatever thread saw the end;
 * the end is posted to the op's loop.
 */
#include <stddef.h>

#include "dlock/common.h"
#include "dlock/errors.h"
#include "single/holds.h"
#include "single/lock_op.h"

typedef struct watch_op {
	dlock__lock_op lo; /* first: the op, the lock, the owner */
	dlock__hold_watch hw;
	dlock__task ended_task;
	int reason; /* how the hold ended (0: released), set before ended_task is posted */
} watch_op;

#define WOP(p, field) ((watch_op *)((char *)(p) - offsetof(watch_op, field)))

static void finish_lost(watch_op *o, int reason)
{
	o->lo.op.result.lost_reason = reason;
	dlock__op_finish(&o->lo.op,
			dlock__seterr(DLOCK_ELOST, "lock %s: the hold of %s was lost: %s",
					o->lo.l->shown, o->lo.owner, dlock_lost_reason_str(reason)));
}

static void ended(dlock__task *t)
{
	watch_op *o = WOP(t, ended_task);

	if (o->reason == 0)
		dlock__op_finish(&o->lo.op, 0); /* released */
	else
		finish_lost(o, o->reason);
}

/* The table's word, with its lock held (any thread): note it and post. */
static void hold_ended(dlock__hold_watch *w, int reason)
{
	watch_op *o = WOP(w, hw);

	o->reason = reason;
	dlock__loop_post(o->lo.op.loop, &o->ended_task);
}

static void start(dlock_op *op)
{
	watch_op *o = (watch_op *)op;
	int reason = 0, rc = dlock__holds_watch_add(o->lo.l, o->lo.owner, &o->hw, &reason);

	if (rc == DLOCK_ELOST)
		finish_lost(o, reason);
	else if (rc < 0)
		dlock__op_finish(op, dlock__seterr(rc, "lock %s: %s holds nothing to watch",
					     o->lo.l->shown, o->lo.owner));
}

static void cancel(dlock_op *op)
{
	watch_op *o = (watch_op *)op;

	/* Told already: its end is posted and finishes it. */
	if (dlock__holds_watch_remove(o->lo.l, o->lo.owner, &o->hw))
		dlock__op_finish(op, dlock__seterr(DLOCK_ECANCELED, "lock %s: the watch was canceled",
					     o->lo.l->shown));
}

static void destroy(dlock_op *op)
{
	watch_op *o = (watch_op *)op;

	dlock__loop_unpost(op->loop, &o->ended_task);
	dlock__lock_op_free(&o->lo);
}

static const dlock__lock_op_steps steps = { "dlock_lock_watch_async", start, cancel, destroy };

int dlock_lock_watch_async(dlock_op **out, dlock_lock *lock, const char *owner, dlock_op_cb cb,
		void *userdata)
{
	dlock__lock_op *lo;
	watch_op *o;
	int rc;

	if (out != NULL)
		*out = NULL;
	if ((rc = dlock__lock_op_new(&lo, sizeof(*o), lock, owner, cb, userdata, &steps)) < 0)
		return rc;
	o = (watch_op *)lo;
	o->hw.ended = hold_ended;
	dlock__task_init(&o->ended_task, ended);
	dlock__lock_op_submit(lo, out);
	return 0;
}
