/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Acquiring a single-server lock: the wait, as a state machine on a loop.
 * The asynchronous call (dlock/async.h) runs it on the client's loop; the
 * blocking calls (dlock__lock_acquire) run the same machine on a loop of
 * the calling thread and drive it to its end, as curl_easy_perform() does
 * on curl_multi. The wait, as Redisson does it: one attempt (a multiplexed
 * run, its undo queued behind it if it is given up); then, while the wait
 * lasts, a listener on the lock's channel and a timer at the holder's TTL
 * or the backoff, whichever wakes it first. A lost message costs at most
 * the holder's TTL. Transient errors are tried again until the wait is used
 * up - or, for a server that never answered, until its first-contact
 * period is; dlock_client_cancel_waits() ends a wait with DLOCK_ECANCELED.
 *
 *   ATTEMPT --answered--> done (acquired, or final error, or wait over)
 *      \--held/transient--> WAITING --message/timer--> ATTEMPT
 *   cancel: ATTEMPT ends its run (the undo goes behind the acquire);
 *           WAITING stops listening; a fair waiter leaves its queue.
 *   A fair waiter that ends without the lock LEAVES its queue (a run on
 *   the loop like an attempt's; the loop is never blocked) and ends when
 *   the leave is answered or given up; a cancel then changes nothing.
 *
 * Waking without a herd (plain and fenced locks). Every waiting process
 * hears every "0", and if each asked the server at once a hand-off would
 * cost as many scripts as there are waiting processes (the work growing
 * with their square). So a waiter also listens on dlock's "taken" channel
 * (core/drive/reactor.h) and asks with it (dlock__acquire_herd): a waiter
 * that takes the lock tells the others there, with the lease and how many
 * listen, and a busy reply says how many listen too. From that count
 * (`est`) a waiter woken by "0" asks at once only with a chance of about
 * 2/est, else in a random slot of the next est/2 ms, after a gap that
 * lets a note reach every process first - and a "taken" note
 * heard before its slot sends it back to sleep until that holder's lease
 * is out. So about two ask per hand-off; a slot that finds nobody asked
 * asks a moment later, so no wake-up is lost. The timer at a holder's TTL
 * (a holder that died says nothing) is spread over 2 * est ms, so that the
 * waiters do not all ask in the millisecond the key expires: the first
 * takes it and tells the rest. A Redisson holder tells nothing: then the
 * slots all ask, one by one. Redisson's waiters hear "0" as ever.
 *
 * Watchers and sleepers. Every "0" still reaches every listening process
 * (a few us of the server's time each), so only the first few waiting
 * processes listen: a waiter also listens on a channel of its own, and its
 * retries join the lock's waiters and learn a role (scripts.c). A watcher
 * waits as above. A sleeper stops listening on the lock's and the "taken"
 * channel and waits for a word on its own (it moved up into the watchers:
 * it listens again, then asks), or for a timer after the holder's TTL - a
 * few seconds at most, the TTL may be stale - in case that word never
 * comes. Dead waiters never keep a live one asleep: a release, and a
 * waiter that would sleep, drop them from the watchers first. A newcomer
 * that finds enough watchers already listens on its own channel only,
 * until its role is known. At its deadline a wait makes a last attempt.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/ids.h"
#include "core/base/time.h"
#include "core/drive/debts.h"
#include "core/drive/mux_loop.h"
#include "core/drive/reactor.h"
#include "core/drive/stats.h"
#include "core/drive/sync.h"
#include "single/acquire.h"
#include "single/acquire_wait.h"
#include "single/lock_internal.h"
#include "single/lock_op.h"

/* A wait that meets a transient error tries again after a backoff between these. */
#define RETRY_MIN_MS 50
#define RETRY_MAX_MS 1000

/* How long an attempt waits for replies a server owes (a server waking up
 * sends them at once; a hung one costs no more), looking this often. */
#define OWED_GRACE_MS 20
#define OWED_LOOK_MS 5

/* A look waits this long at most for the waiter's own channel to be
 * subscribed, so that it asks with roles (then without). */
#define OWN_WAIT_MS 1000

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
 * When to look again after a failed attempt. Contention: when the holder's
 * TTL runs out (an unlock message wakes the waiter sooner); a fair waiter
 * at least every DLOCK__FAIR_POLL_MS (the head may be gone without a message).
 * A transient error: after a backoff that doubles from RETRY_MIN_MS to
 * RETRY_MAX_MS, jittered so that waiters do not come back in step.
 */
static int64_t next_look(dlock_lock *l, int rc, int64_t ttl, int64_t *backoff, int64_t now)
{
	if (rc == DLOCK_ENOTACQUIRED) {
		*backoff = 0;
		if (l->kind == DLOCK_LOCK_FAIR && (ttl < 0 || ttl > DLOCK__FAIR_POLL_MS))
			ttl = DLOCK__FAIR_POLL_MS;
		return ttl >= 0 ? now + ttl : DLOCK__NEVER;
	}
	*backoff = *backoff == 0 ? RETRY_MIN_MS : *backoff * 2;
	if (*backoff > RETRY_MAX_MS)
		*backoff = RETRY_MAX_MS;
	return now + *backoff / 2 + (int64_t)(dlock__random() % (uint64_t)(*backoff / 2 + 1));
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

/*
 * The mark a fair waiter that keeps its place names in its attempts
 * (dlock__acquire_wait_key): `dlock_lock__left:{name}:<wait id>`, in the
 * lock's slot, one id per wait. NULL (out of memory): none, and a late
 * attempt may queue again (its place then expires with its wait).
 */
static char *left_key_new(const dlock_lock *l, size_t *len)
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

static void attempt(acquire_op *o);

static void finish(acquire_op *o, int rc)
{
	if (rc == DLOCK_ENOTACQUIRED)
		o->lo.op.result.holder_ttl_ms = o->ttl;
	if (!o->member && !o->lo.op.finished) /* once: a second end is ignored */
		dlock__stat_acquire(o->lo.l->client, rc, o->lo.l->name, o->lo.owner,
				dlock__now_us() - o->started_us, o->attempts, 1, 1);
	dlock__op_finish(&o->lo.op, dlock__errbuf_record(&o->lo.l->err, rc));
}

static void left(dlock__mux_loop *ml)
{
	acquire_op *o = AOP(ml, ml);

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
			? dlock__fair_exit_prepare(l, &o->a, o->wait_ms, o->unsettled, &o->exit)
			: dlock__herd_exit_prepare(l, &o->a, &o->exit);
	/* It may time out and run later: as EVAL, so that a server that does
	 * not know the script yet runs it all the same. */
	o->mop[0].eval = 1;
	o->nmop = 1;
	if (dlock__mux_loop_begin(&o->ml, o->lo.op.loop, o->mop, 1, NULL, NULL, left) < 0) {
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
		return o->wait_ms != 0;
	return o->herd && o->role != 0;
}

/* The end: a waiter that did not get the lock leaves first (leave). */
static void conclude(acquire_op *o, int rc)
{
	dlock__wait_stop(o);
	if (rc == 0) {
		o->lo.op.result.token = o->a.token;
		dlock_lock_validity(&o->lo.op.result.validity_ms, o->lo.l, o->lo.owner);
	} else if (must_leave(o) && leave(o, rc) == 0) {
		return;
	}
	finish(o, rc);
}

/* Sleep until `wake` at the latest (the deadline caps it). */
static int arm(acquire_op *o, int64_t wake)
{
	return dlock__timer_set(o->lo.op.loop, &o->timer, wake < o->deadline ? wake : o->deadline);
}

/* Listen as the waiter's role says, and look again at `wake` at the latest. */
static void wait_for(acquire_op *o, int64_t wake)
{
	int rc;

	if (o->channel == NULL && (rc = dlock__wait_first(o)) < 0) {
		conclude(o, rc);
		return;
	}
	if (dlock__wait_listen(o, &wake) < 0) {
		conclude(o, dlock__seterr(DLOCK_ENOMEM, "lock %s: out of memory", o->lo.l->shown));
		return;
	}
	o->waiting = 1;
	if (o->woken_meanwhile && o->watching) /* the unlock may have come after the attempt was answered */
		wake = dlock__now_ms() + dlock__wait_slot(o);
	o->woken_meanwhile = 0;
	if (arm(o, wake) < 0)
		conclude(o, DLOCK_ENOMEM);
}

/* What an answered (or failed) attempt leads to. */
static void after_attempt(acquire_op *o, int rc, int retry)
{
	int64_t now = dlock__now_ms(), wake;

	o->rc = rc;
	retry = retry && (o->ride_out || rc == DLOCK_ENOTACQUIRED);
	if (rc == 0 || !retry || o->wait_ms == 0 || now >= o->deadline) {
		conclude(o, rc);
		return;
	}
	wake = next_look(o->lo.l, rc, o->ttl, &o->backoff, now);
	if (rc == DLOCK_ENOTACQUIRED && o->ttl >= 0)
		wake += dlock__wait_ttl_spread(o);
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
	if (rc == 0 && (rc = dlock__lock_op_redirect(o->lo.l, r, &o->redirects, &o->send_to)) > 0) {
		/* Not run there: again at the node named, at once. */
		o->asking = rc == 2;
		dlock__mux_loop_end(ml);
		dlock__mux_clear(o->mop, o->nmop);
		attempt(o);
		return;
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

	if (rc < 0 && dlock__now_ms() < o->owed_until &&
			dlock__timer_set(o->lo.op.loop, &o->timer, dlock__now_ms() + OWED_LOOK_MS) == 0)
		return;
	if (rc < 0) {
		after_attempt(o, rc, 1);
		return;
	}
	/* The count may have changed meanwhile (another op, same owner). */
	if ((rc = dlock__acquire_prepare(l, o->thread_owner ? NULL : o->lo.owner, o->vouched, o->wait_ms,
			     o->lease_ms, &o->a)) < 0) {
		conclude(o, rc);
		return;
	}
	o->roles_asked = o->herd ? dlock__wait_roles(o) : 0;
	if (o->herd)
		dlock__acquire_herd(l, &o->a, o->attempts > 0, o->roles_asked);
	if (o->left_key != NULL)
		dlock__acquire_wait_key(l, &o->a, o->left_key, o->left_key_len);
	o->keep_place = keeps_place(l, o->wait_ms, o->ride_out, o->deadline);
	memset(o->mop, 0, sizeof(o->mop));
	o->mop[0].client = o->send_to != NULL ? o->send_to : l->client;
	o->mop[0].asking = o->asking;
	o->send_to = NULL;
	o->asking = 0;
	o->mop[0].call = &o->a.call;
	o->mop[0].no_retry = o->a.believed < 0;
	o->mop[0].undo = undo_of(l, &o->a, o->wait_ms, o->keep_place, &o->undo);
	o->nmop = 1;
	if (dlock__sync_prepare(&o->sync, l->client)) {
		dlock__sync_op(&o->mop[1], &o->sync, l->client, &o->mop[0]);
		o->nmop = 2;
	}
	o->sent_at = dlock__now_ms();
	o->attempts++;
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
	if (o->canceled_with && dlock__client_cancels(o->lo.l->client) != o->cancels) {
		conclude(o, dlock__seterr(DLOCK_ECANCELED, "lock %s: the wait was canceled",
				    o->lo.l->shown));
		return;
	}
	/* A herd waiter that waits for a holder asks once its own channel is
	 * subscribed (own_word): then it learns its role. At the deadline it
	 * asks at once: a wait ends with the answer of a last attempt (made
	 * then; after_attempt ends it), never with that of an earlier one -
	 * the lock may be free by now, the server back from an outage. */
	if (o->herd && o->rc == DLOCK_ENOTACQUIRED && !o->own_ready && o->osub != NULL &&
			dlock__now_ms() < o->own_asked + OWN_WAIT_MS &&
			dlock__now_ms() < o->deadline) {
		o->look_pending = 1;
		if (arm(o, o->own_asked + OWN_WAIT_MS) < 0)
			conclude(o, DLOCK_ENOMEM);
		return;
	}
	o->look_pending = 0;
	o->waiting = 0;
	o->woken_meanwhile = 0;
	o->redirects = 0;
	dlock__timer_stop(o->lo.op.loop, &o->timer);
	o->owed_until = dlock__now_ms() + OWED_GRACE_MS;
	attempt(o);
}

static void woken(dlock__task *t)
{
	acquire_op *o = AOP(t, wake_task);
	int64_t slot;

	if (!o->waiting)
		o->woken_meanwhile = 1;
	/* Others heard it too: unless this one's slot is now, stand back (a
	 * canceled wait ends at once, in look_again). */
	if (o->waiting && !o->lo.op.finished &&
			!(o->canceled_with && dlock__client_cancels(o->lo.l->client) != o->cancels) &&
			(slot = dlock__wait_slot(o)) > 0) {
		if (arm(o, dlock__now_ms() + slot) < 0)
			conclude(o, DLOCK_ENOMEM);
		return;
	}
	look_again(o);
}

/* A note on the "taken" channel: a waiter took the lock. One that waits
 * sleeps until that hold's lease is out (spread), its slot given up. */
static void taken(dlock__task *t)
{
	acquire_op *o = AOP(t, taken_task);
	int64_t lease, n;
	uint64_t gen;
	int unlocked_since = 0;

	if (o->tsub == NULL || o->lo.op.finished)
		return;
	/* The lock's channel is served by the same reactor (one slot). */
	gen = dlock__sub_note(o->trx, o->tsub, &lease, &n, o->rx == o->trx ? o->sub : NULL,
			&unlocked_since);
	if (gen == o->note_gen)
		return; /* the subscription made, or dropped: not a note */
	o->note_gen = gen;
	if (n > 0)
		o->est = n;
	/* Asking now (its reply tells), or an unlock came after the note (its
	 * wake-up may have run first): nothing to wait for. */
	if (!o->waiting || lease <= 0 || unlocked_since)
		return;
	if (arm(o, dlock__now_ms() + lease + dlock__wait_ttl_spread(o)) < 0)
		conclude(o, DLOCK_ENOMEM);
}

/*
 * The waiter's own channel: subscribed (then its retries ask with roles),
 * or a word that it moved up into the watchers (or a dropped connection,
 * read the same way). A sleeper listens on the lock's channel again and
 * asks once that is subscribed; a newcomer asks now.
 */
static void own_word(dlock__task *t)
{
	acquire_op *o = AOP(t, own_task);
	int first = !o->own_ready;

	if (o->osub == NULL || o->lo.op.finished)
		return;
	o->own_ready = 1;
	if ((o->canceled_with && dlock__client_cancels(o->lo.l->client) != o->cancels) ||
			(first && o->look_pending)) {
		look_again(o); /* a cancel ends it there */
		return;
	}
	if (o->watching)
		return; /* it hears the lock's channel already */
	if (!o->waiting) {
		o->promoted_meanwhile = o->promoted_meanwhile || !first;
		return;
	}
	if (o->role == DLOCK__HERD_SLEEP) {
		o->role = DLOCK__HERD_WATCH;
		if (dlock__wait_watch(o) < 0) {
			conclude(o, dlock__seterr(DLOCK_ENOMEM, "lock %s: out of memory",
					    o->lo.l->shown));
			return;
		}
		if (o->sub != NULL)
			return; /* its subscription wakes it (woken) */
	}
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

	o->li.loop = op->loop; /* the loop it runs on, known now */
	o->tli.loop = op->loop;
	o->oli.loop = op->loop;
	o->started_us = dlock__now_us(); /* the clock read it made before, in us */
	o->started = o->started_us / 1000;
	o->deadline = dlock__deadline_in(o->wait_ms);
	o->owed_until = o->started + OWED_GRACE_MS;
	if (o->lo.l->kind == DLOCK_LOCK_FAIR && o->wait_ms != 0 && o->ride_out)
		o->left_key = left_key_new(o->lo.l, &o->left_key_len);
	attempt(o);
}

/* Cancel: end what is under way; whatever it may have taken is given back. */
static void cancel(dlock_op *op)
{
	acquire_op *o = (acquire_op *)op;

	if (o->leaving)
		return; /* it ends once it has left */
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
	dlock__free(o->own);
	dlock__free(o->left_key);
	dlock__lock_op_free(&o->lo);
}

static const dlock__lock_op_steps steps = { "dlock_lock_acquire_async", start, cancel, destroy };

/* A new acquisition (not started); owner as resolved (the thread's, or explicit). */
static int new_acquire(acquire_op **out, dlock_lock *l, const char *owner, int64_t wait_ms,
		int64_t lease_ms, dlock_op_cb cb, void *userdata)
{
	dlock__lock_op *lo;
	acquire_op *o;
	int rc;

	*out = NULL;
	if (l != NULL && (rc = dlock__acquire_check_times(l, wait_ms, lease_ms)) < 0)
		return dlock__errbuf_record(&l->err, rc);
	rc = dlock__lock_op_new(&lo, sizeof(*o), l, owner, cb, userdata, &steps);
	if (rc < 0)
		return rc;
	o = (acquire_op *)lo;
	o->wait_ms = wait_ms;
	o->lease_ms = lease_ms;
	o->ride_out = 1;
	o->li.task = &o->wake_task;
	dlock__task_init(&o->wake_task, woken);
	o->est = 1;
	o->herd = l->taken != NULL;
	o->tli.task = &o->taken_task;
	dlock__task_init(&o->taken_task, taken);
	o->oli.task = &o->own_task;
	dlock__task_init(&o->own_task, own_word);
	dlock__timer_init(&o->timer, timer_fired);
	*out = o;
	return 0;
}

int dlock_lock_acquire_async(dlock_op **out, dlock_lock *l, const char *owner, int64_t wait_ms,
		int64_t lease_ms, dlock_op_cb cb, void *userdata)
{
	acquire_op *o;
	int rc;

	if (out != NULL)
		*out = NULL;
	rc = new_acquire(&o, l, owner, wait_ms, lease_ms, cb, userdata);
	if (rc == 0)
		dlock__lock_op_submit(&o->lo, out);
	return rc;
}

/* An acquisition for owner (NULL: the calling thread's) that a caller's
 * cancel count ends (dlock_client_cancel_waits), not started. */
static int new_waiting_acquire(acquire_op **out, dlock_lock *l, const char *owner,
		int64_t wait_ms, int64_t lease_ms, uint64_t cancels, dlock_op_cb cb, void *userdata)
{
	char buf[64];
	const char *resolved;
	int rc;

	if ((rc = dlock__resolve_owner(l, owner, buf, sizeof(buf), &resolved)) < 0 ||
			(rc = new_acquire(out, l, resolved, wait_ms, lease_ms, cb, userdata)) < 0)
		return rc;
	(*out)->thread_owner = owner == NULL;
	(*out)->canceled_with = 1;
	(*out)->cancels = cancels;
	return 0;
}

int dlock__lock_acquire(dlock_lock *l, const char *owner, int64_t wait_ms, int64_t lease_ms,
		uint64_t cancels, int ride_out_errors, int64_t *token, int64_t *holder_ttl)
{
	dlock__ending e = { 0 };
	acquire_op *o;
	int rc = new_waiting_acquire(&o, l, owner, wait_ms, lease_ms, cancels, dlock__ending_note,
			&e);

	if (rc < 0)
		return rc;
	o->ride_out = ride_out_errors;
	rc = dlock__lock_op_block(&o->lo, &e);
	if (rc == 0 && token != NULL)
		*token = e.token;
	if (rc == DLOCK_ENOTACQUIRED && holder_ttl != NULL)
		*holder_ttl = e.holder_ttl;
	return rc;
}

int dlock__lock_acquire_start(dlock_op **out, dlock__loop *loop, dlock_lock *l, const char *owner,
		int vouched, int64_t wait_ms, int64_t lease_ms, uint64_t cancels, dlock_op_cb cb,
		void *userdata)
{
	acquire_op *o;
	int rc = new_waiting_acquire(&o, l, owner, wait_ms, lease_ms, cancels, cb, userdata);

	if (rc < 0)
		return rc;
	o->vouched = vouched;
	o->ride_out = 0;
	o->member = 1; /* a quorum's member (multilock/ordered.c) */
	o->herd = 0;   /* its budget is short: it asks when woken, as before */
	o->lo.op.loop = loop;
	dlock__lock_op_submit(&o->lo, out);
	return 0;
}
