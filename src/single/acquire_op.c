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
#include "core/drive/op.h"
#include "core/drive/reactor.h"
#include "single/acquire.h"
#include "single/lock_internal.h"

/* How long an attempt waits for replies a server owes (as acquire.c). */
#define OWED_GRACE_MS 20
#define OWED_LOOK_MS 5

typedef struct acquire_op {
	dlock_op op; /* first */
	dlock_lock *l;
	char *owner;
	int64_t wait_ms, lease_ms, started, deadline, owed_until;
	int64_t ttl, backoff, sent_at;
	int rc, keep_place, unsettled, in_flight, waiting;
	int woken_meanwhile; /* a message came while an attempt was out: look again at once */
	dlock__acquire a;
	dlock__rollback undo;
	dlock__mux_op mop;
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
	dlock__timer_stop(o->op.loop, &o->timer);
	dlock__loop_unpost(o->op.loop, &o->wake_task);
	o->waiting = 0;
}

/* The end: a fair waiter that did not get the lock leaves its queue. */
static void conclude(acquire_op *o, int rc)
{
	stop_listening(o);
	if (rc == 0) {
		o->op.result.token = o->a.token;
		dlock_lock_validity(&o->op.result.validity_ms, o->l, o->owner);
	} else if (o->l->kind == DLOCK_LOCK_FAIR && o->wait_ms != 0) {
		char msg[DLOCK__ERRMSG_MAX];

		snprintf(msg, sizeof(msg), "%s", dlock__errmsg_thread());
		dlock__acquire_fair_give_up(o->l, &o->a, o->wait_ms, o->unsettled);
		dlock__seterr(rc, "%s", msg);
	}
	if (rc == DLOCK_ENOTACQUIRED)
		o->op.result.holder_ttl_ms = o->ttl;
	dlock__op_finish(&o->op, dlock__errbuf_record(&o->l->err, rc));
}

/* Listen on the channel (once), and look again at `wake` at the latest. */
static void wait_for(acquire_op *o, int64_t wake)
{
	if (o->channel == NULL) {
		o->channel = dlock__acquire_channel(o->l, o->owner, &o->channel_len);
		o->rx = o->channel != NULL
				? dlock__client_reactor_for(o->l->client, o->channel, o->channel_len)
				: NULL;
		if (o->rx != NULL)
			o->sub = dlock__sub_listen(o->rx, o->channel, o->channel_len, &o->li);
		if (o->channel == NULL || (o->rx != NULL && o->sub == NULL)) {
			conclude(o, dlock__seterr(DLOCK_ENOMEM, "lock %s: out of memory", o->l->shown));
			return;
		}
	}
	o->waiting = 1;
	if (o->woken_meanwhile) /* the unlock may have come after the attempt was answered */
		wake = dlock__now_ms();
	o->woken_meanwhile = 0;
	dlock__timer_set(o->op.loop, &o->timer, wake < o->deadline ? wake : o->deadline);
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
	wake = dlock__acquire_next_look(o->l, rc, o->ttl, &o->backoff, now);
	if (dlock__client_first_contact_over(o->l->client, rc, o->started, wake)) {
		conclude(o, dlock__seterr_never_answered());
		return;
	}
	wait_for(o, wake);
}

static void attempt_done(dlock__mux_loop *ml)
{
	acquire_op *o = AOP(ml, ml);
	redisReply *r = o->mop.reply;
	int rc = o->mop.rc, retry;

	o->in_flight = 0;
	if (rc == 0)
		rc = dlock__acquire_finish(o->l, &o->a, r, o->sent_at, &o->ttl);
	else
		dlock__seterr(rc, "%s", o->mop.errmsg);
	if (r == NULL && (rc == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT || rc == DLOCK_EPROTO)) {
		dlock__holds_uncertain(o->l, o->a.owner);
		o->unsettled = o->unsettled || o->keep_place;
	} else if (r != NULL) {
		o->unsettled = 0;
	}
	retry = rc == DLOCK_ENOTACQUIRED || dlock__acquire_transient(o->l->client, rc, r);
	dlock__mux_loop_end(ml);
	dlock__mux_clear(&o->mop, 1);
	after_attempt(o, rc, retry);
}

/* Send one attempt, once the server owes nothing (a late release of ours
 * still queued there could undo it: core/net/owed.h). */
static void attempt(acquire_op *o)
{
	dlock_lock *l = o->l;
	int rc = dlock__client_owes(l->client, l->name, l->name_len, 0);

	if (rc < 0 && dlock__now_ms() < o->owed_until) {
		dlock__timer_set(o->op.loop, &o->timer, dlock__now_ms() + OWED_LOOK_MS);
		return;
	}
	if (rc < 0) {
		after_attempt(o, rc, 1);
		return;
	}
	/* The count may have changed meanwhile (another op, same owner). */
	if ((rc = dlock__acquire_prepare(l, o->owner, o->wait_ms, o->lease_ms, &o->a)) < 0) {
		conclude(o, rc);
		return;
	}
	o->keep_place = dlock__acquire_keeps_place(l, o->wait_ms, 1, o->deadline);
	memset(&o->mop, 0, sizeof(o->mop));
	o->mop.client = l->client;
	o->mop.call = &o->a.call;
	o->mop.no_retry = o->a.believed < 0;
	o->mop.undo = dlock__acquire_undo(l, &o->a, o->wait_ms, o->keep_place, &o->undo);
	o->sent_at = dlock__now_ms();
	rc = dlock__mux_loop_begin(&o->ml, o->op.loop, &o->mop, 1, NULL, NULL, attempt_done);
	if (rc < 0) {
		conclude(o, rc);
		return;
	}
	o->in_flight = 1;
}

/* A message on the channel, the subscription made, or the timer. */
static void look_again(acquire_op *o)
{
	if (!o->waiting || o->op.finished)
		return;
	if (dlock__now_ms() >= o->deadline) {
		conclude(o, o->rc);
		return;
	}
	o->waiting = 0;
	o->woken_meanwhile = 0;
	dlock__timer_stop(o->op.loop, &o->timer);
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
	else if (!o->in_flight && !o->op.finished)
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
		dlock__holds_uncertain(o->l, o->a.owner);
		o->unsettled = o->unsettled || o->keep_place;
		dlock__mux_clear(&o->mop, 1);
	}
	conclude(o, dlock__seterr(DLOCK_ECANCELED, "lock %s: the acquisition was canceled",
			    o->l->shown));
}

static void destroy(dlock_op *op)
{
	acquire_op *o = (acquire_op *)op;

	if (o->channel != o->l->channel)
		dlock__free(o->channel);
	dlock__free(o->owner);
	dlock__client_handle_added(o->l->client, -1);
	dlock__free(o);
}

dlock__loop *dlock__lock_loop(dlock_lock *l)
{
	return dlock__reactor_loop(l->client->reactor);
}

int dlock_lock_acquire_async(dlock_op **out, dlock_lock *l, const char *owner, int64_t wait_ms,
		int64_t lease_ms, dlock_op_cb cb, void *userdata)
{
	acquire_op *o;
	const char *checked;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (l == NULL || owner == NULL || cb == NULL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_lock_acquire_async: NULL %s",
				l == NULL ? "lock" : owner == NULL ? "owner" : "callback");
	if ((rc = dlock__acquire_check_times(l, wait_ms, lease_ms)) < 0 ||
			(rc = dlock__client_check_fork(l->client)) < 0 ||
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
	o->wait_ms = wait_ms;
	o->lease_ms = lease_ms;
	o->li.loop = o->op.loop;
	o->li.task = &o->wake_task;
	dlock__task_init(&o->wake_task, woken);
	dlock__timer_init(&o->timer, timer_fired);
	dlock__client_handle_added(l->client, 1); /* the client outlives the op */
	if (out != NULL)
		*out = &o->op;
	dlock__op_submit(&o->op);
	return 0;
}
