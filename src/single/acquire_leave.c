/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The end of a lock's wait (acquire_op.c): one that did not get the lock
 * leaves first - a fair waiter its queue (named by its wait's mark), a
 * herd waiter that joined them the waiters - as a run of its own on the
 * loop; then the op finishes, its figures counted.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/ids.h"
#include "core/base/time.h"
#include "core/drive/debts.h"
#include "core/mux/mux_loop.h"
#include "core/drive/reactor.h"
#include "core/drive/stats.h"
#include "core/drive/sync.h"
#include "single/acquire.h"
#include "single/acquire_wait.h"
#include "single/lock_internal.h"
#include "single/lock_op.h"

typedef dlock__acquire_op acquire_op;

#define AOP(p, field) ((acquire_op *)((char *)(p) - offsetof(acquire_op, field)))

/*
 * The mark a fair waiter that keeps its place names in its attempts
 * (dlock__acquire_wait_key): `dlock_lock__left:{name}:<wait id>`, in the
 * lock's slot, one id per wait. NULL (out of memory): none, and a late
 * attempt may queue again (its place then expires with its wait).
 */
char *dlock__acquire_left_key_new(const dlock_lock *l, size_t *len)
{
	size_t n;
	char *base = dlock__prefix_name("dlock_lock__left", l->name, l->name_len, &n);
	char *k = base != NULL ? dlock__realloc(base, n + 18) : NULL;

	if (k == NULL) {
		dlock__free(base);
		return NULL;
	}
	*len = n + (size_t)snprintf(k + n, 18, ":%016" PRIx64, dlock__random());
	return k;
}

static void finish(acquire_op *o, int rc)
{
	if (rc == DLOCK_ENOTACQUIRED)
		o->lo.op.result.holder_ttl_ms = o->ttl;
	if (!o->member && !o->lo.op.finished) /* once: a second end is ignored */
		dlock__stat_acquire(o->lo.l->client, rc, o->lo.l->name, o->lo.owner,
				dlock__now_us() - o->w.started_us, o->w.attempts, 1, 1);
	dlock__op_finish(&o->lo.op, dlock__errbuf_record(&o->lo.l->err, rc));
}

static void left(dlock__mux_loop *ml)
{
	acquire_op *o = AOP(ml, leave_ml);

	dlock__fair_exit_finish(o->lo.l, &o->a, &o->exit, o->mop[0].rc, o->mop[0].reply);
	dlock__mux_loop_end(ml);
	dlock__mux_clear(o->mop, 1);
	finish(o, dlock__seterr(o->end_rc, "%s", o->end_msg));
}

/* A waiter that did not get the lock leaves: a fair one its queue, a herd
 * one that joined them the waiters (acquire_wait.c). Then it ends with rc.
 * 0 while the leave is out; < 0 when it could not be sent (a fair place
 * expires with its wait, a member of the waiters is dropped once found
 * gone). */
static int leave(acquire_op *o, int rc)
{
	dlock_lock *l = o->lo.l;

	o->end_rc = rc;
	snprintf(o->end_msg, sizeof(o->end_msg), "%s", dlock__errmsg_thread());
	memset(o->mop, 0, sizeof(o->mop));
	o->mop[0].client = l->client;
	o->mop[0].call = l->kind == DLOCK_LOCK_FAIR
			? dlock__fair_exit_prepare(l, &o->a, o->w.wait_ms, o->unsettled, &o->exit)
			: dlock__herd_exit_prepare(l, &o->a, &o->exit);
	/* It may time out and run later: as EVAL, so that a server that does
	 * not know the script yet runs it all the same. */
	o->mop[0].eval = 1;
	/* The only thing that takes a place out of the queue: a connection
	 * that loses it (reset owing, closed) hands it back to be sent again. */
	o->mop[0].keep = l->kind == DLOCK_LOCK_FAIR;
	if (dlock__mux_loop_begin(&o->leave_ml, o->lo.op.loop, o->mop, 1, NULL, NULL, left) < 0) {
		dlock__seterr(rc, "%s", o->end_msg);
		return -1;
	}
	o->leaving = 1;
	return 0;
}

/* Whether a waiter that ends without the lock leaves first. */
static int must_leave(const acquire_op *o)
{
	if (o->lo.l->kind == DLOCK_LOCK_FAIR)
		return o->w.wait_ms != 0;
	return o->herd && o->role != 0;
}

/* The end (the waiter listens no more): one that did not get the lock leaves first. */
void dlock__acquire_op_end(dlock__waiter *w, int rc)
{
	acquire_op *o = AOP(w, w);

	if (rc == 0) {
		o->lo.op.result.token = o->a.token;
		dlock_lock_validity_ms(&o->lo.op.result.validity_ms, o->lo.l, o->lo.owner);
	} else if (must_leave(o) && leave(o, rc) == 0) {
		return;
	}
	finish(o, rc);
}
