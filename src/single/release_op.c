/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Releasing a hold asynchronously (dlock/async.h): release.c's steps, its
 * script sent in a multiplexed run on the client's loop. A release is not
 * canceled: a hold left half-released would help nobody.
 */
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/mux/mux_loop.h"
#include "single/acquire.h"
#include "single/holds.h"
#include "single/lock_internal.h"
#include "single/lock_op.h"

typedef struct release_op {
	dlock__lock_op lo; /* first: the op, the lock, the owner */
	int lost; /* already lost before: it stays lost, whatever the release meets */
	int redirects;
	int thread_owner; /* the owner is the calling thread's (a blocking call) */
	dlock__release rel;
	dlock__mux_op mop;
	dlock__mux_loop ml;
} release_op;

static void finish(release_op *o, int rc)
{
	if (o->lost && rc != DLOCK_ELOST) {
		dlock__holds_released(o->lo.l, o->rel.owner, -1);
		rc = dlock__seterr_node(DLOCK_ELOST, o->lo.l->client->node.label,
				"lock %s was lost before the unlock: the watchdog had found it lost",
				o->lo.l->shown);
	}
	dlock__release_clear(o->lo.l, &o->rel);
	dlock__op_finish(&o->lo.op, dlock__errbuf_record(&o->lo.l->err, rc));
}

static void send(release_op *o, dlock_client *to, int asking);

static void released(dlock__mux_loop *ml)
{
	release_op *o = (release_op *)((char *)ml - offsetof(release_op, ml));
	int rc = o->mop.rc;
	dlock_client *to = NULL;

	if (rc == 0 && (rc = dlock__lock_op_redirect(o->lo.l, o->mop.reply, &o->redirects, &to)) > 0) {
		dlock__mux_loop_end(ml);
		dlock__mux_clear(&o->mop, 1);
		send(o, to, rc == 2); /* not run there: again at the node named */
		return;
	}
	if (rc == 0)
		rc = dlock__release_finish(o->lo.l, &o->rel, o->mop.reply);
	else if (dlock__seterr(rc, "%s", o->mop.errmsg) == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT ||
			rc == DLOCK_EPROTO)
		dlock__holds_unsure_release(o->lo.l, o->rel.owner);
	dlock__mux_loop_end(ml);
	dlock__mux_clear(&o->mop, 1);
	finish(o, rc);
}

/* Send the release (again, after a redirect, to `to` with ASKING or not). */
static void send(release_op *o, dlock_client *to, int asking)
{
	int rc;

	memset(&o->mop, 0, sizeof(o->mop));
	o->mop.client = to;
	o->mop.asking = asking;
	o->mop.call = &o->rel.call;
	/* A repeat is told by the count (RELEASE_REPEATED); without one, never repeated. */
	o->mop.repeat = o->rel.repeat;
	o->mop.no_retry = !o->rel.retry_safe;
	rc = dlock__mux_loop_begin(&o->ml, o->lo.op.loop, &o->mop, 1, NULL, NULL, released);
	if (rc < 0)
		finish(o, rc);
}

static void start(dlock_op *op)
{
	release_op *o = (release_op *)op;
	int rc;

	const char *owner = o->thread_owner ? NULL : o->lo.owner;

	o->lost = dlock_lock_check(o->lo.l, owner) == DLOCK_ELOST;
	rc = dlock__release_prepare(o->lo.l, owner, &o->rel);
	if (rc < 0)
		dlock__op_finish(&o->lo.op, dlock__errbuf_record(&o->lo.l->err, rc));
	else
		send(o, o->lo.l->client, 0);
}

static void cancel(dlock_op *op)
{
	(void)op; /* it finishes */
}

static void destroy(dlock_op *op)
{
	dlock__lock_op_free(&((release_op *)op)->lo);
}

static const dlock__lock_op_steps steps = { "dlock_lock_release_async", start, cancel, destroy };

int dlock_lock_release_async(
		dlock_op **out, dlock_lock *l, const char *owner, dlock_op_cb cb, void *userdata)
{
	dlock__lock_op *lo;
	int rc;

	if (out != NULL)
		*out = NULL;
	rc = dlock__lock_op_new(&lo, sizeof(release_op), l, owner, cb, userdata, &steps);
	if (rc == 0) {
		lo->op.uncancelable = 1; /* not even before it started */
		dlock__lock_op_submit(lo, out);
	}
	return rc;
}

int dlock__lock_release(dlock_lock *l, const char *owner)
{
	char buf[64];
	const char *resolved;
	dlock__ending e = { 0 };
	dlock__lock_op *lo;
	int rc;

	if ((rc = dlock__resolve_owner(l, owner, buf, sizeof(buf), &resolved)) < 0 ||
			(rc = dlock__lock_op_new(&lo, sizeof(release_op), l, resolved,
					 dlock__ending_note, &e, &steps)) < 0)
		return rc;
	((release_op *)lo)->thread_owner = owner == NULL;
	return dlock__lock_op_block(lo, &e);
}
