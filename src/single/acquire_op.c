/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Acquiring and releasing a single-server lock asynchronously
 * (dlock/async.h): the wait of acquire.c as a state machine on the
 * client's loop. Its steps are acquire.c's: one attempt (a multiplexed run
 * on the loop, its undo queued behind it if it is given up), then, while
 * the wait lasts, a listener on the lock's channel and a timer at the
 * holder's TTL or the backoff, whichever wakes it first.
 *
 *   ATTEMPT --answered--> done (acquired, or final error, or wait over)
 *      \--held/transient--> WAITING --message/timer--> ATTEMPT
 *   cancel: ATTEMPT ends its run (the undo goes behind the acquire);
 *           WAITING stops listening; a fair waiter leaves its queue.
 */
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/time.h"
#include "core/drive/debts.h"
#include "core/drive/mux_loop.h"
#include "core/drive/reactor.h"
#include "core/drive/sync.h"
#include "single/acquire.h"
#include "single/lock_internal.h"
#include "single/lock_op.h"

/* How long an attempt waits for replies a server owes (as acquire.c). */
#define OWED_GRACE_MS 20
#define OWED_LOOK_MS 5

typedef struct acquire_op {
	dlock__lock_op lo; /* first: the op, the lock, the owner */
	int64_t wait_ms, lease_ms, started, deadline, owed_until;
	int64_t ttl, backoff, sent_at;
	int rc, keep_place, unsettled, in_flight, waiting;
	int woken_meanwhile; /* a message came while an attempt was out: look again at once */
	dlock__acquire a;
	dlock__rollback undo;
	dlock__mux_op mop[2]; /* the acquire, and the WAIT behind it (sync_replicas) */
	size_t nmop;
	dlock__sync sync;
	dlock__mux_loop ml;
	char *channel;
	size_t channel_len;
	dlock__reactor *rx;
	dlock__sub *sub;
	dlock__listener li;
	dlock__task wake_task;
	dlock__timer timer;
} acquire_op;

#define AOP(p, field) ((acquire_op *)((char *)(p) - offsetof(acquire_op, field)))

static void attempt(acquire_op *o);

static void stop_listening(acquire_op *o)
{
	if (o->sub != NULL)
		dlock__sub_unlisten(o->rx, o->sub, &o->li);
	o->sub = NULL;
	dlock__timer_stop(o->lo.op.loop, &o->timer);
	dlock__loop_unpost(o->lo.op.loop, &o->wake_task);
	o->waiting = 0;
}

/* The end: a fair waiter that did not get the lock leaves its queue. */
static void conclude(acquire_op *o, int rc)
{
	stop_listening(o);
	if (rc == 0) {
		o->lo.op.result.token = o->a.token;
		dlock_lock_validity(&o->lo.op.result.validity_ms, o->lo.l, o->lo.owner);
	} else if (o->lo.l->kind == DLOCK_LOCK_FAIR && o->wait_ms != 0) {
		char msg[DLOCK__ERRMSG_MAX];

		snprintf(msg, sizeof(msg), "%s", dlock__errmsg_thread());
		dlock__acquire_fair_give_up(o->lo.l, &o->a, o->wait_ms, o->unsettled);
		dlock__seterr(rc, "%s", msg);
	}
	if (rc == DLOCK_ENOTACQUIRED)
		o->lo.op.result.holder_ttl_ms = o->ttl;
	dlock__op_finish(&o->lo.op, dlock__errbuf_record(&o->lo.l->err, rc));
}

/* Listen on the channel (once), and look again at `wake` at the latest. */
static void wait_for(acquire_op *o, int64_t wake)
{
	if (o->channel == NULL) {
		o->channel = dlock__acquire_channel(o->lo.l, o->lo.owner, &o->channel_len);
		o->rx = o->channel != NULL
				? dlock__client_reactor_for(o->lo.l->client, o->channel, o->channel_len)
				: NULL;
		if (o->rx != NULL)
			o->sub = dlock__sub_listen(o->rx, o->channel, o->channel_len, &o->li);
		if (o->channel == NULL || (o->rx != NULL && o->sub == NULL)) {
			conclude(o, dlock__seterr(DLOCK_ENOMEM, "lock %s: out of memory", o->lo.l->shown));
			return;
		}
	}
	o->waiting = 1;
	if (o->woken_meanwhile) /* the unlock may have come after the attempt was answered */
		wake = dlock__now_ms();
	o->woken_meanwhile = 0;
	dlock__timer_set(o->lo.op.loop, &o->timer, wake < o->deadline ? wake : o->deadline);
}

/* What an answered (or failed) attempt leads to. */
static void after_attempt(acquire_op *o, int rc, int retry)
{
	int64_t now = dlock__now_ms(), wake;

	o->rc = rc;
	if (rc == 0 || !retry || o->wait_ms == 0 || now >= o->deadline) {
		conclude(o, rc);
		return;
	}
	wake = dlock__acquire_next_look(o->lo.l, rc, o->ttl, &o->backoff, now);
	if (dlock__client_first_contact_over(o->lo.l->client, rc, o->started, wake)) {
		conclude(o, dlock__seterr_never_answered());
		return;
	}
	wait_for(o, wake);
}

static void attempt_done(dlock__mux_loop *ml)
{
	acquire_op *o = AOP(ml, ml);
	redisReply *r = o->mop[0].reply;
	int rc = o->mop[0].rc, retry;

	o->in_flight = 0;
	if (rc == 0)
		rc = dlock__acquire_finish(o->lo.l, &o->a, r, o->sent_at, &o->ttl);
	else
		dlock__seterr(rc, "%s", o->mop[0].errmsg);
	/* Made, but too few replicas acknowledged it: given back (acquire.c). */
	if (rc == 0 && o->nmop == 2 &&
			(rc = dlock__acquire_sync_check(o->lo.l, o->mop[1].rc, o->mop[1].reply)) < 0)
		rc = dlock__acquire_unsynced(o->lo.l, &o->a, o->wait_ms, rc);
	if (r == NULL && (rc == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT || rc == DLOCK_EPROTO)) {
		dlock__holds_uncertain(o->lo.l, o->a.owner);
		o->unsettled = o->unsettled || o->keep_place;
	} else if (r != NULL) {
		o->unsettled = 0;
	}
	retry = rc == DLOCK_ENOTACQUIRED || rc == DLOCK_ENOSYNC ||
			dlock__acquire_transient(o->lo.l->client, rc, r);
	dlock__mux_loop_end(ml);
	dlock__mux_clear(o->mop, o->nmop);
	after_attempt(o, rc, retry);
}

/* Send one attempt, once the server owes nothing (a late release of ours
 * still queued there could undo it: core/net/owed.h). */
static void attempt(acquire_op *o)
{
	dlock_lock *l = o->lo.l;
	int rc = dlock__client_owes(l->client, l->name, l->name_len, 0);

	if (rc < 0 && dlock__now_ms() < o->owed_until) {
		dlock__timer_set(o->lo.op.loop, &o->timer, dlock__now_ms() + OWED_LOOK_MS);
		return;
	}
	if (rc < 0) {
		after_attempt(o, rc, 1);
		return;
	}
	/* The count may have changed meanwhile (another op, same owner). */
	if ((rc = dlock__acquire_prepare(l, o->lo.owner, o->wait_ms, o->lease_ms, &o->a)) < 0) {
		conclude(o, rc);
		return;
	}
	o->keep_place = dlock__acquire_keeps_place(l, o->wait_ms, 1, o->deadline);
	memset(o->mop, 0, sizeof(o->mop));
	o->mop[0].client = l->client;
	o->mop[0].call = &o->a.call;
	o->mop[0].no_retry = o->a.believed < 0;
	o->mop[0].undo = dlock__acquire_undo(l, &o->a, o->wait_ms, o->keep_place, &o->undo);
	o->nmop = 1;
	if (dlock__sync_prepare(&o->sync, l->client)) {
		dlock__sync_op(&o->mop[1], &o->sync, l->client, &o->mop[0]);
		o->nmop = 2;
	}
	o->sent_at = dlock__now_ms();
	rc = dlock__mux_loop_begin(&o->ml, o->lo.op.loop, o->mop, o->nmop, NULL, NULL, attempt_done);
	if (rc < 0) {
		conclude(o, rc);
		return;
	}
	o->in_flight = 1;
}

/* A message on the channel, the subscription made, or the timer. */
static void look_again(acquire_op *o)
{
	if (!o->waiting || o->lo.op.finished)
		return;
	if (dlock__now_ms() >= o->deadline) {
		conclude(o, o->rc);
		return;
	}
	o->waiting = 0;
	o->woken_meanwhile = 0;
	dlock__timer_stop(o->lo.op.loop, &o->timer);
	o->owed_until = dlock__now_ms() + OWED_GRACE_MS;
	attempt(o);
}

static void woken(dlock__task *t)
{
	acquire_op *o = AOP(t, wake_task);

	if (!o->waiting)
		o->woken_meanwhile = 1;
	look_again(o);
}

static void timer_fired(dlock__timer *t)
{
	acquire_op *o = AOP(t, timer);

	if (o->waiting)
		look_again(o);
	else if (!o->in_flight && !o->lo.op.finished)
		attempt(o); /* the owed-replies look */
}

static void start(dlock_op *op)
{
	acquire_op *o = (acquire_op *)op;

	o->started = dlock__now_ms();
	o->deadline = dlock__deadline_in(o->wait_ms);
	o->owed_until = o->started + OWED_GRACE_MS;
	attempt(o);
}

/* Cancel: end what is under way; whatever it may have taken is given back. */
static void cancel(dlock_op *op)
{
	acquire_op *o = (acquire_op *)op;

	if (o->in_flight) {
		/* Abandoned: its undo goes right behind it (dlock__mux_op.undo). */
		o->in_flight = 0;
		dlock__mux_loop_end(&o->ml);
		dlock__holds_uncertain(o->lo.l, o->a.owner);
		o->unsettled = o->unsettled || o->keep_place;
		dlock__mux_clear(o->mop, o->nmop);
	}
	conclude(o, dlock__seterr(DLOCK_ECANCELED, "lock %s: the acquisition was canceled",
			    o->lo.l->shown));
}

static void destroy(dlock_op *op)
{
	acquire_op *o = (acquire_op *)op;

	if (o->channel != o->lo.l->channel)
		dlock__free(o->channel);
	dlock__lock_op_free(&o->lo);
}

static const dlock__lock_op_steps steps = { "dlock_lock_acquire_async", start, cancel, destroy };

int dlock_lock_acquire_async(dlock_op **out, dlock_lock *l, const char *owner, int64_t wait_ms,
		int64_t lease_ms, dlock_op_cb cb, void *userdata)
{
	dlock__lock_op *lo;
	acquire_op *o;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (l != NULL && (rc = dlock__acquire_check_times(l, wait_ms, lease_ms)) < 0)
		return dlock__errbuf_record(&l->err, rc);
	rc = dlock__lock_op_new(&lo, sizeof(*o), l, owner, cb, userdata, &steps);
	if (rc < 0)
		return rc;
	o = (acquire_op *)lo;
	o->wait_ms = wait_ms;
	o->lease_ms = lease_ms;
	o->li.loop = o->lo.op.loop;
	o->li.task = &o->wake_task;
	dlock__task_init(&o->wake_task, woken);
	dlock__timer_init(&o->timer, timer_fired);
	dlock__lock_op_submit(lo, out);
	return 0;
}
