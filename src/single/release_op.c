/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Releasing a hold asynchronously (dlock/async.h): release.c's steps, its
 * script sent in a multiplexed run on the client's loop. A release is not
 * canceled: a hold left half-released would help nobody.
 */
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/mux_loop.h"
#include "core/drive/op.h"
#include "single/acquire.h"
#include "single/holds.h"
#include "single/lock_internal.h"

typedef struct release_op {
	dlock_op op; /* first */
	dlock_lock *l;
	char *owner;
	int lost; /* already lost before: it stays lost, whatever the release meets */
	dlock__release rel;
	dlock__mux_op mop;
	dlock__mux_loop ml;
} release_op;

static void finish(release_op *o, int rc)
{
	if (o->lost && rc != DLOCK_ELOST) {
		dlock__holds_released(o->l, o->rel.owner, -1);
		rc = dlock__seterr_node(DLOCK_ELOST, o->l->client->node.label,
				"lock %s was lost before the unlock: the watchdog had found it lost",
				o->l->shown);
	}
	dlock__release_clear(o->l, &o->rel);
	dlock__op_finish(&o->op, dlock__errbuf_record(&o->l->err, rc));
}

static void released(dlock__mux_loop *ml)
{
	release_op *o = (release_op *)((char *)ml - offsetof(release_op, ml));
	int rc = o->mop.rc;

	if (rc == 0)
		rc = dlock__release_finish(o->l, &o->rel, o->mop.reply);
	else if (dlock__seterr(rc, "%s", o->mop.errmsg) == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT ||
			rc == DLOCK_EPROTO)
		dlock__holds_unsure_release(o->l, o->rel.owner);
	dlock__mux_loop_end(ml);
	dlock__mux_clear(&o->mop, 1);
	finish(o, rc);
}

static void start(dlock_op *op)
{
	release_op *o = (release_op *)op;
	int rc;

	o->lost = dlock_lock_check(o->l, o->owner) == DLOCK_ELOST;
	rc = dlock__release_prepare(o->l, o->owner, &o->rel);
	if (rc < 0) {
		dlock__op_finish(&o->op, dlock__errbuf_record(&o->l->err, rc));
		return;
	}
	memset(&o->mop, 0, sizeof(o->mop));
	o->mop.client = o->l->client;
	o->mop.call = &o->rel.call; /* safe to repeat: the latch answers a repeat */
	rc = dlock__mux_loop_begin(&o->ml, o->op.loop, &o->mop, 1, NULL, NULL, released);
	if (rc < 0)
		finish(o, rc);
}

static void cancel(dlock_op *op)
{
	(void)op; /* it finishes */
}

static void destroy(dlock_op *op)
{
	release_op *o = (release_op *)op;

	dlock__free(o->owner);
	dlock__client_handle_added(o->l->client, -1);
	dlock__free(o);
}

int dlock_lock_release_async(
		dlock_op **out, dlock_lock *l, const char *owner, dlock_op_cb cb, void *userdata)
{
	release_op *o;
	const char *checked;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (l == NULL || owner == NULL || cb == NULL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_lock_release_async: NULL %s",
				l == NULL ? "lock" : owner == NULL ? "owner" : "callback");
	if ((rc = dlock__client_check_fork(l->client)) < 0 ||
			(rc = dlock__resolve_owner(l, owner, NULL, 0, &checked)) < 0)
		return dlock__errbuf_record(&l->err, rc);
	o = dlock__calloc(1, sizeof(*o));
	if (o == NULL || (o->owner = dlock__strdup(owner)) == NULL) {
		dlock__free(o);
		return dlock__seterr(DLOCK_ENOMEM, "lock %s: out of memory", l->shown);
	}
	dlock__op_init(&o->op, dlock__lock_loop(l), cb, userdata);
	o->op.start = start;
	o->op.cancel = cancel;
	o->op.destroy = destroy;
	o->l = l;
	dlock__client_handle_added(l->client, 1);
	if (out != NULL)
		*out = &o->op;
	dlock__op_submit(&o->op);
	return 0;
}
