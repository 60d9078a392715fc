/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine's operations: what an acquisition and a release share - the
 * op on its loop (the first member's client's), its per-member state, the
 * multiplexed runs its steps make, cancel, and the blocking driver.
 */
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/time.h"
#include "multilock/parts.h"
#include "single/lock_op.h"
#include "single/member.h"

#define OP_OF(p, field) ((dlock__engine_op *)((char *)(p) - offsetof(dlock__engine_op, field)))

static void run_over(dlock__mux_loop *ml)
{
	dlock__engine_op *o = OP_OF(ml, ml);
	dlock__then then = o->after_run;

	o->run_rc = 0;
	o->after_run = NULL;
	dlock__mux_loop_end(ml);
	then(o);
}

/* Over at once (nothing to send, or it could not begin): `then` still comes
 * from the loop, as a run's would. */
static void run_skipped(dlock__timer *t)
{
	dlock__engine_op *o = OP_OF(t, skip);
	dlock__then then = o->after_run;

	o->after_run = NULL;
	then(o);
}

void dlock__engine_run(dlock__engine_op *o, dlock__mux_op *ops, size_t n, dlock__mux_enough enough,
		void *arg, dlock__then then)
{
	o->after_run = then;
	o->run_rc = n == 0 ? 0 : dlock__mux_loop_begin(&o->ml, o->op.loop, ops, n, enough, arg, run_over);
	if (n > 0 && o->run_rc == 0)
		return;
	if (o->run_rc < 0)
		dlock__seterr(o->run_rc, "multilock: out of memory");
	if (dlock__timer_set(o->op.loop, &o->skip, 0) < 0) {
		o->after_run = NULL;
		then(o); /* no timer either: from here, once */
	}
}

static void pause_over(dlock__timer *t)
{
	dlock__engine_op *o = OP_OF(t, pause);
	dlock__then then = o->after_pause;

	o->after_pause = NULL;
	then(o);
}

void dlock__engine_pause(dlock__engine_op *o, int64_t ms, dlock__then then)
{
	o->after_pause = then;
	if (dlock__timer_set(o->op.loop, &o->pause, dlock__now_ms() + (ms > 0 ? ms : 0)) < 0) {
		o->after_pause = NULL;
		then(o);
	}
}

void dlock__engine_dues_woken(dlock__engine *e)
{
	for (dlock__engine_op *o = e->due_waiters; o != NULL; o = o->due_next)
		if (o->after_pause != NULL)
			(void)dlock__timer_set(o->op.loop, &o->pause, 0); /* its bound stays */
}

/* Cancel: a member's wait ends now; a pause is cut short; a run in flight
 * ends by itself (a command timeout at most); each step's end then sees
 * `canceling`, gives back what was taken and ends the op. */
static void cancel(dlock_op *op)
{
	dlock__engine_op *o = (dlock__engine_op *)op;

	o->canceling = 1;
	if (o->child != NULL)
		dlock_op_cancel(o->child);
	if (o->after_pause != NULL) {
		dlock__timer_stop(o->op.loop, &o->pause);
		pause_over(&o->pause);
	}
}

void dlock__engine_op_free(dlock_op *op)
{
	dlock__engine_op *o = (dlock__engine_op *)op;

	/* Not o->e: the callback may have freed the lock's handle. */
	dlock__client_handle_added(o->client, -1);
	dlock__free(o->t);
	dlock__free(o->seen);
	dlock__free(o->cancels);
	dlock__free(o->owner);
	dlock__free(o);
}

int dlock__engine_op_new(dlock__engine_op **out, dlock__engine *e, const char *owner,
		dlock_op_cb cb, void *userdata, void (*start)(dlock_op *op))
{
	dlock_lock *first = e->members[0];
	dlock__engine_op *o = dlock__calloc(1, sizeof(*o));
	size_t i;

	*out = NULL;
	if (o == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	o->t = dlock__calloc(e->n, sizeof(*o->t));
	o->seen = dlock__calloc(e->n, sizeof(*o->seen));
	o->cancels = dlock__calloc(e->n, sizeof(*o->cancels));
	o->owner = owner != NULL ? dlock__strdup(owner) : NULL;
	if (o->t == NULL || o->seen == NULL || o->cancels == NULL ||
			(owner != NULL && o->owner == NULL)) {
		dlock__free(o->t);
		dlock__free(o->seen);
		dlock__free(o->cancels);
		dlock__free(o->owner);
		dlock__free(o);
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	}
	dlock__op_init(&o->op, dlock__lock_loop(first), cb, userdata);
	o->op.start = start;
	o->op.cancel = cancel;
	o->op.destroy = dlock__engine_op_free;
	o->e = e;
	o->client = dlock__lock_client(first);
	o->vouched = dlock__engine_owner_is_ours(e, owner);
	o->validity = -1;
	dlock__timer_init(&o->skip, run_skipped);
	dlock__timer_init(&o->pause, pause_over);
	for (i = 0; i < e->n; i++)
		o->cancels[i] = dlock__client_cancels(dlock__lock_client(e->members[i]));
	dlock__tries_reset(e, o->t, o->owner);
	for (i = 0; i < e->n; i++)
		o->seen[i] = o->t[i].st; /* every member unasked, with its node */
	dlock__client_handle_added(dlock__lock_client(first), 1); /* it outlives the op */
	*out = o;
	return 0;
}

void dlock__engine_op_end(dlock__engine_op *o, int rc)
{
	o->op.result.members = o->seen;
	o->op.result.nmembers = o->e->n;
	if (rc == 0) {
		o->op.result.validity_ms = o->validity;
		o->op.result.token = o->token;
	}
	dlock__op_finish(&o->op, rc);
}

int dlock__engine_block(dlock__engine *e, const char *owner, void (*start)(dlock_op *op),
		void (*setup)(dlock__engine_op *o, void *arg), void *arg, int64_t *validity,
		int64_t *token)
{
	dlock__ending b = { 0 };
	dlock__engine_op *o;
	int rc = dlock__engine_op_new(&o, e, owner, dlock__ending_note, &b, start);

	if (rc < 0)
		return rc;
	o->blocking = 1;
	if (setup != NULL)
		setup(o, arg);
	if ((rc = dlock__op_block(&o->op, dlock__lock_client(e->members[0]), &b.done)) < 0)
		return rc;
	if (b.code < 0)
		return dlock__seterr(b.code, "%s", b.message);
	if (validity != NULL)
		*validity = b.validity;
	if (token != NULL)
		*token = b.token;
	return 0;
}

int dlock__engine_async(dlock_op **out, dlock__engine *e, const char *owner, dlock_op_cb cb,
		void *userdata, void (*start)(dlock_op *op),
		void (*setup)(dlock__engine_op *o, void *arg), void *arg)
{
	dlock__engine_op *o;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (owner == NULL || cb == NULL)
		return dlock__seterr(DLOCK_EINVAL, "multilock: NULL %s",
				owner == NULL ? "owner" : "callback");
	if ((rc = dlock__engine_op_new(&o, e, owner, cb, userdata, start)) < 0)
		return rc;
	if (setup != NULL)
		setup(o, arg);
	if (out != NULL)
		*out = &o->op;
	dlock__op_submit_out(&o->op, out);
	return 0;
}
