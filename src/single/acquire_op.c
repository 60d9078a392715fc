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
static void end(dlock__waiter *w, int rc)
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

/* A failed attempt waits on, or ends: a quorum's member does not ride out errors. */
static dlock__wait_verdict retried(const acquire_op *o, int rc)
{
	return o->ride_out || rc == DLOCK_ENOTACQUIRED ? DLOCK__WAIT_TRANSIENT : DLOCK__WAIT_FINAL;
}

static dlock__wait_verdict given_back(acquire_op *o, int *out, int64_t *next);
static dlock__wait_verdict verdict(acquire_op *o, int rc, const redisReply *r, int answered,
		int *out, int64_t *next);

/* What an attempt's answer says. */
static dlock__wait_verdict judge(dlock__waiter *w, int *out, int64_t *next)
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
	rc = dlock__waiter_send(&o->w, o->mop, 1);
	o->w.attempts--; /* a give-back, not an attempt (dlock/stats.h) */
	return rc;
}

/* Send one attempt, once the server owes nothing (a late release of ours
 * still queued there could undo it: core/net/owed.h). */
static int attempt(dlock__waiter *w)
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

/* Cancel during an attempt: abandoned, its hold uncertain (the undo goes behind it). */
static int on_cancel(dlock__waiter *w)
{
	acquire_op *o = AOP(w, w);

	dlock__holds_uncertain(o->lo.l, o->a.owner);
	o->unsettled = o->unsettled || o->keep_place;
	return 0;
}

static const dlock__waiter_steps wait_steps = {
	.noun = "lock",
	.attempt = attempt,
	.judge = judge,
	.end = end,
	.on_cancel = on_cancel,
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
		o->left_key = left_key_new(o->lo.l, &o->left_key_len);
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
