/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A lock's attempt in a wait (acquire_op.c has the wait's steps and, at
 * its top, how the wait goes): one attempt sent once the server owes
 * nothing, with its undo queued behind it and a WAIT when replicas must
 * acknowledge; its answer judged (the holder's TTL as the next look, a
 * fair waiter's poll, a cluster's redirect); a hold too few replicas
 * acknowledged given back as the next command on the loop.
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

/* An attempt delayed by replies a server owes looks again this often. */
#define OWED_LOOK_MS 5

typedef dlock__acquire_op acquire_op;

#define AOP(p, field) ((acquire_op *)((char *)(p) - offsetof(acquire_op, field)))

/*
 * Whether a fair waiter keeps its place when this attempt's reply does not
 * come: it does while it will still be waiting then (the undo that leaves
 * the queue is for a waiter that stops). One that ends its wait at a
 * transient error (a quorum's member) or before the reply is due does not.
 */
static int keeps_place(dlock_lock *l, int64_t wait_ms, int ride_out_errors, int64_t deadline)
{
	if (l->kind != DLOCK_LOCK_FAIR || wait_ms == 0 || !ride_out_errors)
		return 0;
	return deadline == DLOCK__NEVER ||
			deadline - dlock__now_ms() > l->client->opts.command_timeout_ms;
}

/*
 * When to look again when the lock is held: when the holder's TTL runs out
 * (an unlock message wakes the waiter sooner); a fair waiter at least every
 * DLOCK__FAIR_POLL_MS (the head may be gone without a message).
 */
static int64_t next_look(dlock_lock *l, int64_t ttl)
{
	if (l->kind == DLOCK_LOCK_FAIR && (ttl < 0 || ttl > DLOCK__FAIR_POLL_MS))
		ttl = DLOCK__FAIR_POLL_MS;
	return ttl >= 0 ? dlock__now_ms() + ttl : DLOCK__NEVER;
}

/*
 * The undo of an attempt whose reply may never come: it takes back exactly
 * the hold that attempt would have made (count believed + 1; nothing if
 * the attempt never ran). NULL when the count before is unknown (an
 * explicit owner without a record): then a late hold expires by its lease.
 * NULL too for a fair waiter that keeps waiting: undoing would cost it its
 * place (Redisson issue 5019); its next attempt adopts a late hold instead.
 */
static const dlock__call *undo_of(dlock_lock *l, const dlock__acquire *a, int64_t wait_ms,
		int keep_place, dlock__rollback *u)
{
	if (a->believed < 0 || keep_place)
		return NULL;
	dlock__rollback_prepare(l, a->owner, a->believed + 1, wait_ms, u);
	return &u->call;
}

/* A failed attempt waits on, or ends: a quorum's member does not ride out errors. */
static dlock__wait_verdict retried(const acquire_op *o, int rc)
{
	return o->ride_out || rc == DLOCK_ENOTACQUIRED ? DLOCK__WAIT_TRANSIENT : DLOCK__WAIT_FINAL;
}

static dlock__wait_verdict given_back(acquire_op *o, int *out, int64_t *next);
static dlock__wait_verdict verdict(acquire_op *o, int rc, const redisReply *r, int answered,
		int *out, int64_t *next);

/* What an attempt's answer says. */
dlock__wait_verdict dlock__acquire_op_judge(dlock__waiter *w, int *out, int64_t *next)
{
	acquire_op *o = AOP(w, w);
	redisReply *r = o->mop[0].reply;
	int rc = o->mop[0].rc;

	if (o->giving_back)
		return given_back(o, out, next);
	if (rc == 0 &&
			(rc = dlock__lock_op_redirect(o->lo.l, r, &o->w.redirects, &o->send_to)) > 0) {
		/* Not run there: again at the node named, at once. */
		o->asking = rc == 2;
		return DLOCK__WAIT_AGAIN;
	}
	if (rc == 0) {
		rc = dlock__acquire_finish(o->lo.l, &o->a, r, o->sent_at, &o->ttl);
		/* The most seen in this wait: the first replies come before
		 * all have subscribed (a "taken" note sets it exactly). */
		if (o->a.waiters > o->est)
			o->est = o->a.waiters;
		if (rc == DLOCK_ENOTACQUIRED && o->a.role != 0)
			o->role = o->a.role;
		if ((rc == 0 || rc == DLOCK_ENOTACQUIRED) && o->roles_asked)
			atomic_store(&o->lo.l->herd_met, 1);
		if (rc == 0 && o->member) /* the quorum reports, not its parts */
			dlock__holds_member(o->lo.l, o->a.owner);
	} else {
		dlock__seterr(rc, "%s", o->mop[0].errmsg);
	}
	/* Made, but too few replicas acknowledged it: given back as the next
	 * command, on this loop; the verdict comes with its answer. */
	if (rc == 0 && o->w.nmop == 2 &&
			(rc = dlock__acquire_sync_check(o->lo.l, o->mop[1].rc, o->mop[1].reply)) < 0) {
		o->giving_back = 1;
		o->gb_code = rc;
		snprintf(o->gb_msg, sizeof(o->gb_msg), "%s", dlock__errmsg_thread());
		o->unsettled = 0;
		return DLOCK__WAIT_AGAIN;
	}
	return verdict(o, rc, r, r != NULL, out, next);
}

/* The give-back's answer (a cluster's redirect: again at the node named). */
static dlock__wait_verdict given_back(acquire_op *o, int *out, int64_t *next)
{
	redisReply *r = o->mop[0].reply;
	int rc = o->mop[0].rc;

	if (rc == 0 && (rc = dlock__lock_op_redirect(o->lo.l, r, &o->w.redirects,
				      &o->send_to)) > 0) {
		o->asking = rc == 2;
		return DLOCK__WAIT_AGAIN;
	}
	if (rc < 0)
		dlock__seterr(rc, "%s", o->mop[0].errmsg);
	o->giving_back = 0;
	rc = dlock__acquire_unsynced(o->lo.l, &o->a, o->gb_code, o->gb_msg, rc, r);
	/* The acquire itself was answered: its outcome is known. */
	return verdict(o, rc, NULL, 1, out, next);
}

/* What the attempt's outcome rc (its reply r, NULL when none; answered:
 * the acquire's reply came) means for the wait. */
static dlock__wait_verdict verdict(acquire_op *o, int rc, const redisReply *r, int answered,
		int *out, int64_t *next)
{
	if (!answered && (rc == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT || rc == DLOCK_EPROTO)) {
		dlock__holds_uncertain(o->lo.l, o->a.owner);
		o->unsettled = o->unsettled || o->keep_place;
	} else if (answered) {
		o->unsettled = 0;
	}
	o->rc = *out = rc;
	if (rc == 0)
		return DLOCK__WAIT_GOT;
	if (rc == DLOCK_ENOTACQUIRED) {
		*next = next_look(o->lo.l, o->ttl);
		if (o->ttl >= 0)
			*next += dlock__wait_ttl_spread(o);
		return DLOCK__WAIT_NOT_YET;
	}
	if (rc == DLOCK_ENOSYNC || dlock__acquire_transient(o->lo.l->client, rc, r))
		return retried(o, rc);
	return DLOCK__WAIT_FINAL;
}

/* Send the give-back of the hold just made: no WAIT behind it (a give-back
 * waits for no replica), resent on a broken connection as the blocking
 * give-back was (it takes back only the count this attempt added). */
static int give_back(acquire_op *o)
{
	dlock_lock *l = o->lo.l;
	int rc;

	dlock__rollback_prepare(l, o->a.owner, o->a.count, o->w.wait_ms, &o->give_back);
	memset(o->mop, 0, sizeof(o->mop));
	o->mop[0].client = o->send_to != NULL ? o->send_to : l->client;
	o->mop[0].asking = o->asking;
	o->send_to = NULL;
	o->asking = 0;
	o->mop[0].call = &o->give_back.call;
	o->mop[0].eval = 1; /* given up at its timeout, it still runs (no NOSCRIPT unread) */
	rc = dlock__waiter_send(&o->w, o->mop, 1);
	o->w.attempts--; /* a give-back, not an attempt (dlock/stats.h) */
	return rc;
}

/* Send one attempt, once the server owes nothing (a late release of ours
 * still queued there could undo it: core/net/owed.h). */
int dlock__acquire_op_attempt(dlock__waiter *w)
{
	acquire_op *o = AOP(w, w);
	dlock_lock *l = o->lo.l;
	size_t n = 1;
	int rc;

	if (o->giving_back)
		return give_back(o);
	rc = dlock__client_owes(l->client, l->name, l->name_len, 0);

	if (rc < 0 && dlock__now_ms() < o->owed_until &&
			dlock__waiter_put_off(w, dlock__now_ms() + OWED_LOOK_MS) == 0)
		return 0;
	if (rc < 0) {
		o->rc = rc;
		dlock__waiter_answer(w, retried(o, rc), rc, DLOCK__NEVER);
		return 0;
	}
	/* The count may have changed meanwhile (another op, same owner). */
	if ((rc = dlock__acquire_prepare(l, o->thread_owner ? NULL : o->lo.owner, o->vouched,
			     o->w.wait_ms, o->lease_ms, &o->a)) < 0)
		return rc;
	o->roles_asked = o->herd ? dlock__wait_roles(o) : 0;
	if (o->herd)
		dlock__acquire_herd(l, &o->a, o->w.attempts > 0, o->roles_asked);
	if (o->left_key != NULL)
		dlock__acquire_wait_key(l, &o->a, o->left_key, o->left_key_len);
	o->keep_place = keeps_place(l, o->w.wait_ms, o->ride_out, o->w.deadline);
	memset(o->mop, 0, sizeof(o->mop));
	o->mop[0].client = o->send_to != NULL ? o->send_to : l->client;
	o->mop[0].asking = o->asking;
	o->send_to = NULL;
	o->asking = 0;
	o->mop[0].call = &o->a.call;
	o->mop[0].no_retry = o->a.believed < 0;
	o->mop[0].undo = undo_of(l, &o->a, o->w.wait_ms, o->keep_place, &o->undo);
	if (dlock__sync_prepare(&o->sync, l->client)) {
		dlock__sync_op(&o->mop[1], &o->sync, l->client, &o->mop[0]);
		n = 2;
	}
	o->sent_at = dlock__now_ms();
	return dlock__waiter_send(w, o->mop, n);
}

/*
 * The awaited answer of an attempt canceled once that answer was in (its
 * end posted, so no undo could go behind it): a hold it made goes back -
 * the count it added, as an unsynced one's does - and the wait ends
 * canceled (a fair waiter leaving its queue, as any end without the lock).
 */
void dlock__acquire_op_canceled(dlock__waiter *w, int rc)
{
	acquire_op *o = AOP(w, w);
	dlock_lock *l = o->lo.l;

	if (rc == 0 || o->giving_back) {
		o->giving_back = 1;
		o->gb_code = DLOCK_ECANCELED;
		snprintf(o->gb_msg, sizeof(o->gb_msg), "lock %s: the acquisition was canceled",
				l->shown);
		o->unsettled = 0;
		if ((rc = give_back(o)) == 0)
			return;
		o->giving_back = 0;
		rc = dlock__acquire_unsynced(l, &o->a, o->gb_code, o->gb_msg, rc, NULL);
		dlock__waiter_conclude(w, rc);
		return;
	}
	if (rc != DLOCK_ECANCELED) /* else the give-back's answer said how it went */
		rc = dlock__seterr(DLOCK_ECANCELED, "lock %s: the acquisition was canceled", l->shown);
	dlock__waiter_conclude(w, rc);
}

/* Cancel during an attempt: abandoned, its hold uncertain (the undo goes behind it). */
int dlock__acquire_op_on_cancel(dlock__waiter *w)
{
	acquire_op *o = AOP(w, w);

	dlock__holds_uncertain(o->lo.l, o->a.owner);
	o->unsettled = o->unsettled || o->keep_place;
	return 0;
}
