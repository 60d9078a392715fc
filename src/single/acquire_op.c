/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Acquiring a single-server lock: the waiter (single/wait.c) with the
 * lock's steps. The asynchronous call (dlock/async.h) runs it on the
 * client's loop; the blocking calls (dlock__lock_acquire) run the same
 * machine on a loop of the calling thread and drive it to its end, as
 * curl_easy_perform() does on curl_multi. The wait, as Redisson does it:
 * one attempt (a multiplexed run, its undo queued behind it if it is given
 * up); then, while the wait lasts, a listener on the lock's channel and a
 * timer at the holder's TTL or the backoff, whichever wakes it first. A
 * lost message costs at most the holder's TTL. Transient errors are tried
 * again until the wait is used up - or, for a server that never answered,
 * until its first-contact period is; dlock_client_cancel_waits() ends a
 * wait with DLOCK_ECANCELED.
 *
 *   ATTEMPT --answered--> done (acquired, or final error, or wait over)
 *      \--held/transient--> WAITING --message/timer--> ATTEMPT
 *   cancel: ATTEMPT ends its run (the undo goes behind the acquire);
 *           WAITING stops listening; a fair waiter leaves its queue.
 *   A fair waiter that ends without the lock LEAVES its queue (a run on
 *   the loop like an attempt's; the loop is never blocked) and ends when
 *   the leave is answered or given up; a cancel then changes nothing.
 *   What is the lock's own (its steps): an attempt waits a moment for
 *   replies the server owes first (core/net/owed.h); a quorum's member
 *   does not ride out errors; where it listens and when a woken waiter
 *   asks are its herd roles (below, acquire_wait.c).
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
#include "core/mux/mux_loop.h"
#include "core/drive/reactor.h"
#include "core/drive/stats.h"
#include "core/drive/sync.h"
#include "single/acquire.h"
#include "single/acquire_wait.h"
#include "single/lock_internal.h"
#include "single/lock_op.h"

/* How long an attempt waits for replies a server owes (a server waking up
 * sends them at once; a hung one costs no more; acquire_attempt.c looks
 * every OWED_LOOK_MS). */
#define OWED_GRACE_MS 20

/* A look waits this long at most for the waiter's own channel to be
 * subscribed, so that it asks with roles (then without). */
#define OWN_WAIT_MS 1000

typedef dlock__acquire_op acquire_op;

#define AOP(p, field) ((acquire_op *)((char *)(p) - offsetof(acquire_op, field)))

static void conclude(acquire_op *o, int rc)
{
	dlock__waiter_conclude(&o->w, rc);
}

static int out_of_memory(const acquire_op *o)
{
	return dlock__seterr(DLOCK_ENOMEM, "lock %s: out of memory", o->lo.l->shown);
}

/* Listen as the waiter's role says (a sleeper's own time to look in *wake). */
static int listen_as_role(dlock__waiter *w, int64_t *wake)
{
	acquire_op *o = AOP(w, w);
	int rc;

	if (o->channel == NULL && (rc = dlock__wait_first(o)) < 0)
		return rc;
	return dlock__wait_listen(o, wake) < 0 ? out_of_memory(o) : 0;
}

static void unlisten(dlock__waiter *w)
{
	dlock__wait_stop(AOP(w, w));
}

/* A watcher woken by "0" asks in its slot (acquire_wait.c); one that does
 * not listen on the lock's channel now is not woken by it. */
static int64_t slot(dlock__waiter *w)
{
	acquire_op *o = AOP(w, w);

	return o->watching ? dlock__wait_slot(o) : -1;
}

/* A look is due. A herd waiter that waits for a holder asks once its own
 * channel is subscribed (own_word): then it learns its role. At the
 * deadline it asks at once (the waiter's last attempt). */
static int look(dlock__waiter *w)
{
	acquire_op *o = AOP(w, w);
	int rc;

	if (o->herd && o->rc == DLOCK_ENOTACQUIRED && !o->own_ready && o->osub != NULL &&
			dlock__now_ms() < o->own_asked + OWN_WAIT_MS &&
			dlock__now_ms() < o->w.deadline) {
		o->look_pending = 1;
		if ((rc = dlock__waiter_arm(w, o->own_asked + OWN_WAIT_MS)) < 0)
			conclude(o, rc);
		return 1;
	}
	o->look_pending = 0;
	o->owed_until = dlock__now_ms() + OWED_GRACE_MS;
	return 0;
}

static const dlock__waiter_steps wait_steps = {
	.noun = "lock",
	.attempt = dlock__acquire_op_attempt,
	.judge = dlock__acquire_op_judge,
	.end = dlock__acquire_op_end,
	.on_cancel = dlock__acquire_op_on_cancel,
	.canceled = dlock__acquire_op_canceled,
	.listen = listen_as_role,
	.unlisten = unlisten,
	.slot = slot,
	.look = look,
};

/* A note on the "taken" channel: a waiter took the lock. One that waits
 * sleeps until that hold's lease is out (spread), its slot given up. */
static void taken(dlock__task *t)
{
	acquire_op *o = AOP(t, taken_task);
	int64_t lease, n;
	uint64_t gen;
	int unlocked_since = 0, rc;

	if (o->tsub == NULL || o->lo.op.finished)
		return;
	/* The lock's channel is served by the same reactor (one slot). */
	gen = dlock__sub_note(o->trx, o->tsub, &lease, &n, o->w.rx == o->trx ? o->w.sub : NULL,
			&unlocked_since);
	if (gen == o->note_gen)
		return; /* the subscription made, or dropped: not a note */
	o->note_gen = gen;
	if (n > 0)
		o->est = n;
	/* Asking now (its reply tells), or an unlock came after the note (its
	 * wake-up may have run first): nothing to wait for. */
	if (!o->w.waiting || lease <= 0 || unlocked_since)
		return;
	rc = dlock__waiter_arm(&o->w, dlock__now_ms() + lease + dlock__wait_ttl_spread(o));
	if (rc < 0)
		conclude(o, rc);
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
	if (dlock__waiter_cancel_counted(&o->w) || (first && o->look_pending)) {
		dlock__waiter_look(&o->w); /* a cancel ends it there */
		return;
	}
	if (o->watching)
		return; /* it hears the lock's channel already */
	if (!o->w.waiting) {
		o->promoted_meanwhile = o->promoted_meanwhile || !first;
		return;
	}
	if (o->role == DLOCK__HERD_SLEEP) {
		o->role = DLOCK__HERD_WATCH;
		if (dlock__wait_watch(o) < 0) {
			conclude(o, out_of_memory(o));
			return;
		}
		if (o->w.sub != NULL)
			return; /* its subscription wakes it (the waiter's woken) */
	}
	dlock__waiter_look(&o->w);
}

static void start(dlock_op *op)
{
	acquire_op *o = (acquire_op *)op;

	o->tli.loop = op->loop; /* the loop it runs on, known now */
	o->oli.loop = op->loop;
	o->owed_until = dlock__now_ms() + OWED_GRACE_MS;
	if (o->lo.l->kind == DLOCK_LOCK_FAIR && o->w.wait_ms != 0 && o->ride_out)
		o->left_key = dlock__acquire_left_key_new(o->lo.l, &o->left_key_len);
	dlock__waiter_start(&o->w, 0);
}

/* Cancel: end what is under way; whatever it may have taken is given back. */
static void cancel(dlock_op *op)
{
	acquire_op *o = (acquire_op *)op;

	if (o->leaving)
		return; /* it ends once it has left */
	dlock__waiter_cancel(&o->w, "the acquisition");
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
	/* Where it listens is the lock's steps' (acquire_wait.c). */
	dlock__waiter_init(&o->w, &wait_steps, &o->lo.op, l->client, l->shown, NULL, 0, wait_ms);
	o->lease_ms = lease_ms;
	o->ride_out = 1;
	o->est = 1;
	o->herd = l->taken != NULL;
	o->tli.task = &o->taken_task;
	dlock__task_init(&o->taken_task, taken);
	o->oli.task = &o->own_task;
	dlock__task_init(&o->own_task, own_word);
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
	(*out)->w.canceled_with = 1;
	(*out)->w.cancels = cancels;
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
	/* The quorum's handle on its member: no reference (it cancels the
	 * member only until the member's callback, which it is). */
	if (out != NULL)
		*out = &o->lo.op;
	dlock__lock_op_submit(&o->lo, NULL);
	return 0;
}
