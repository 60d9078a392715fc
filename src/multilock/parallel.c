/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The parallel attempt: the acquire script goes to every member at once;
 * as soon as a quorum took it, or a quorum became impossible, the round is
 * decided (quorum.c says when). Uncontended, that is one round trip
 * whatever n is.
 */
#include <stdio.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/mux/mux.h"
#include "core/drive/debts.h"
#include "core/drive/sync.h"
#include "core/base/time.h"
#include "multilock/attempt.h"
#include "multilock/parts.h"
#include "single/acquire.h"
#include "single/holds.h"
#include "single/lock_internal.h"
#include "single/member.h"

static int went_early(const struct dlock__attempt *at);
static int early_quorum(struct dlock__attempt *at, const dlock__mux_op *ops);

/* An uptime reply still on its way behind an acquire that was answered:
 * it is right behind, so the decision waits for it. */
static int uptime_due(const attempt_wait *w, const dlock__mux_op *ops)
{
	for (size_t k = 0; k < w->u->n; k++) {
		const dlock__mux_op *acq = &ops[w->u->member[k]];

		if (ops[w->e->n + k].pending && acq->rc == 0 && acq->reply != NULL)
			return 1;
	}
	return 0;
}

/* Member i took it: and its replicas acknowledged (1), fell short (0),
 * or are still to answer (-1). */
static int synced(const attempt_wait *w, const dlock__mux_op *ops, size_t i)
{
	const dlock__mux_op *wait = w->s->op[i] != 0 ? &ops[w->s->op[i]] : NULL;

	if (wait == NULL)
		return 1;
	if (wait->pending)
		return -1;
	return dlock__sync_enough(wait->client, wait->rc, wait->reply);
}

static size_t vouched_grants(const struct dlock__attempt *at, const dlock__mux_op *ops);

/* quorum.c's rule. An asynchronous attempt (`early`: its late grants join
 * the hold on the loop) needs, once a quorum of grants the vote filter
 * vouches for is in, neither every answer (hear_all) nor, in watchdog mode,
 * every member (wait_all). A blocking one keeps both: its loop stops with
 * the call, so a late grant could only be given back, and holding every
 * member that answers in time is what lets the lock outlive a failure. */
static int decided(attempt_wait *w, const dlock__mux_op *ops, const dlock__tally *t,
		int64_t *wake_at)
{
	dlock__parallel q = *w->p;
	int d;

	if (w->at != NULL && w->at->early && vouched_grants(w->at, ops) >= w->e->rules.quorum)
		q.hear_all = q.wait_all = 0;
	d = dlock__parallel_decided(&q, t, dlock__now_ms(), wake_at);
	w->p->quorum_at = q.quorum_at;
	return d;
}

/* The mux's stopping rule: tally the answers, let quorum.c decide. A
 * member whose acquire still waits for its replicas is pending. */
static int attempt_decided(void *arg, const dlock__mux_op *ops, size_t n, int64_t *wake_at)
{
	attempt_wait *w = arg;
	dlock__tally t = { w->e->n, 0, 0, 0, 0 };
	size_t i;

	(void)n; /* the acquires are the first e->n ops; uptimes and WAITs follow */
	/* The op went on at the quorum: the rest are heard to their end. */
	if (went_early(w->at))
		return 0;
	if (early_quorum(w->at, ops))
		return 0;
	for (i = 0; i < w->e->n; i++) {
		int acked = ops[i].rc == 0 && dlock__reply_acquired(&ops[i]) ? synced(w, ops, i) : 1;

		if (ops[i].rc < 0 || acked == 0) {
			t.failed++;
		} else if (acked < 0) {
			t.pending_live += !dlock__member_is_slow(w->e, i);
		} else if (ops[i].reply != NULL) {
			if (dlock__reply_acquired(&ops[i])) {
				t.ok++;
			} else {
				t.failed++;
				t.held += ops[i].reply->type == REDIS_REPLY_INTEGER;
			}
		} else if (ops[i].pending && !dlock__member_is_slow(w->e, i)) {
			t.pending_live++;
		}
	}
	return decided(w, ops, &t, wake_at) && !uptime_due(w, ops);
}

int dlock__due_behind(const dlock__engine_op *o, size_t i)
{
	dlock_lock *m = o->e->members[i];
	dlock_client *c = dlock__lock_client(m);
	dlock__sync sync;

	/* A blocking run has connections of its own; a WAIT goes on one too. */
	if (atomic_load(&o->e->release_due[i]) <= 0 || o->blocking || dlock__sync_prepare(&sync, c))
		return 0;
	return dlock__mux_may_follow(c, o->op.loop, dlock__lock_name(m), dlock__lock_name_len(m));
}

/* Build member i's acquire into ops[i]; < 0 for an owner that is bad everywhere. */
static int prepare_member(const dlock__engine_op *o, size_t i, dlock__member_try *t,
		const char *owner, int64_t lease_ms, dlock__acquire *acq, dlock__rollback *undo,
		dlock__mux_op *op)
{
	dlock__engine *e = o->e;
	dlock_lock *m = e->members[i];
	int rc = dlock__acquire_prepare(m, owner, o->vouched, 0, lease_ms, acq);

	if (rc < 0)
		return rc;
	/* Right behind the release still due there: the server runs it first
	 * (and a later release goes right behind this one). */
	op->ordered = DLOCK__ORDERED_OPEN; /* a late grant is given back on its answer */
	op->behind = dlock__due_behind(o, i) ? DLOCK__BEHIND_ONLY : 0;
	if (atomic_load(&e->release_due[i]) > 0 && !op->behind) {
		/* Not sent: see engine.h's release_due. */
		dlock__seterr(DLOCK_ETIMEDOUT,
				"lock %s: a release sent to this node is still unanswered; "
				"not asked to acquire until it is",
				dlock__lock_shown(m));
		dlock__try_fail(t, DLOCK_ETIMEDOUT, dlock__errmsg_thread());
		op->skip = 1;
	} else if (dlock__client_owes(dlock__lock_client(m), dlock__lock_name(m),
				   dlock__lock_name_len(m), 0) < 0) {
		/* Not sent: see dlock__client_owes. */
		dlock__try_fail(t, DLOCK_ETIMEDOUT, dlock__errmsg_thread());
		op->skip = 1;
	}
	t->believed = acq->believed;
	if (t->believed < 0)
		t->believed = dlock__holds_count(m, acq->owner, 1);
	if (t->believed < 0)
		t->believed = 0;
	op->client = dlock__lock_client(m);
	/* Resent after a dropped connection only when the count is compared. */
	op->no_retry = acq->believed < 0;
	op->call = &acq->call;
	/* Not waited for (decided without it, or canceled): taken back right
	 * behind it, on its connection - a give-back sent on another one could
	 * run first on a paused server and miss it. Only with the count known. */
	if (acq->believed >= 0) {
		dlock__rollback_prepare(m, acq->owner, acq->believed + 1, 0, undo);
		op->undo = &undo->call;
	}
	return 0;
}

/* Member i took it: 0 when its replicas acknowledged (or none were asked),
 * else the failure, its message set. */
static int check_synced(dlock__engine *e, size_t i, const dlock__mux_op *wait)
{
	if (wait == NULL)
		return 0;
	if (wait->rc < 0) /* the message came with the op */
		dlock__seterr(wait->rc, "%s", wait->errmsg);
	return dlock__acquire_sync_check(e->members[i], wait->rc, wait->reply);
}

/* Record member i's answer in its try; *give_back when it took the lock
 * but too few replicas acknowledged it. */
static void record_answer(dlock__engine *e, size_t i, dlock__member_try *t, dlock__acquire *acq,
		const dlock__mux_op *op, const dlock__mux_op *wait, int *give_back)
{
	int64_t ttl = -1;
	int rc;

	t->touched = op->rc == 0 || op->abandoned;
	if (op->rc < 0) {
		if (op->undecided) {
			t->st.vote = DLOCK_VOTE_NONE; /* decided without it */
			snprintf(t->st.message, sizeof(t->st.message),
					"pending: no answer when the quorum decided (its "
					"acquire is taken back behind it should it run)");
		}
		else
			dlock__try_fail(t, op->rc, op->errmsg);
		return;
	}
	rc = dlock__acquire_finish(e->members[i], acq, op->reply, op->sent_at, &ttl);
	if (rc == DLOCK_ENOTACQUIRED) {
		t->st.vote = DLOCK_VOTE_HELD;
		t->st.ttl_ms = ttl;
		t->touched = 0; /* the script ran and took nothing */
		return;
	}
	if (rc == 0) {
		dlock__holds_member(e->members[i], acq->owner); /* the lock reports, not its parts */
		t->count = t->taken = acq->count;
		t->token = acq->token;
		rc = check_synced(e, i, wait);
		*give_back = rc < 0; /* taken: the rollback gives back `taken` */
	}
	if (rc == 0)
		t->st.vote = DLOCK_VOTE_ACQUIRED;
	else
		dlock__try_fail(t, rc, dlock__errmsg_thread());
}

/*
 * With a vote filter (RedLock's restart guard), a member whose server's
 * start is not known for its current connection is asked its uptime right
 * behind the acquire, on the same connection: the guard then judges without
 * a round trip of its own, so an attempt costs one command timeout at most.
 * The uptime ops go after the e->n acquires.
 */
static void ask_uptimes(dlock__engine *e, const dlock__parallel *p, dlock__mux_op *ops, uptimes *u)
{
	u->n = 0;
	u->asked = dlock__now_ms();
	if (!p->hear_all || u->gen == NULL || u->member == NULL)
		return;
	for (size_t i = 0; i < e->n; i++) {
		/* In a cluster: the member that serves the lock, where the acquire goes. */
		dlock_client *c = ops[i].skip
				? NULL
				: dlock__client_for_key(ops[i].client,
						  dlock__lock_name(e->members[i]),
						  dlock__lock_name_len(e->members[i]));

		if (c != NULL && dlock__uptime_op(&ops[e->n + u->n], c, &u->gen[u->n]))
			u->member[u->n++] = i;
		else if (c != NULL && dlock__client_started_at(c, &u->start[i]) < 0)
			u->start[i] = 0; /* known a moment ago: read from the cache */
	}
}

/*
 * A member whose client asks replicas to acknowledge (sync_replicas) gets
 * its WAIT right behind its acquire, on the same connection (core/drive/sync.h).
 * The WAIT ops go after the uptimes; one per member, even for members on
 * the same server (each must follow its own acquire through a resend).
 */
static void ask_syncs(dlock__engine *e, dlock__mux_op *ops, size_t base, syncs *s)
{
	s->n = 0;
	for (size_t i = 0; s->cmd != NULL && i < e->n; i++) {
		dlock_client *c = dlock__lock_client(e->members[i]);

		if (ops[i].skip || !dlock__sync_prepare(&s->cmd[i], c))
			continue;
		s->op[i] = base + s->n++;
		dlock__sync_op(&ops[s->op[i]], &s->cmd[i], c, &ops[i]);
	}
}

/* Record every answer; give_back[i]: taken, but its replicas fell short. */
static void record_answers(dlock__engine *e, dlock__member_try *t, dlock__acquire *acq,
		const dlock__mux_op *ops, const syncs *s, int *give_back)
{
	size_t i;

	for (i = 0; i < e->n; i++) {
		give_back[i] = 0;
		if (!ops[i].skip) /* else its vote says why it was not asked */
			record_answer(e, i, &t[i], &acq[i], &ops[i],
					s->op[i] != 0 ? &ops[s->op[i]] : NULL, &give_back[i]);
	}
}

static int went_early(const struct dlock__attempt *at)
{
	return at->quorum_in;
}

/* Member i's server's start: known before asking, or answered by the
 * uptime op right behind its acquire (on the same connection, so it comes
 * with the grant); 0 while unknown. */
static int64_t start_of(const struct dlock__attempt *at, size_t i)
{
	int64_t started;

	if (at->u.start[i] != 0)
		return at->u.start[i];
	for (size_t k = 0; k < at->u.n; k++)
		if (at->u.member[k] == i &&
				dlock__uptime_peek(&at->ops[at->n + k], at->u.asked, &started))
			return started;
	return 0;
}

/* Member i's grant counts whatever the others answer: no vote filter, or
 * one that vouches for its server, whose start is known. */
static int vouched(const struct dlock__attempt *at, size_t i)
{
	const dlock__engine *e = at->w.e;
	int64_t started;

	if (e->rules.filter == NULL)
		return 1;
	if (at->vouch == NULL || (started = start_of(at, i)) == 0)
		return 0;
	return at->vouch(at->vouch_arg, e->members[i], at->lease_ms, started);
}

static void go_on(dlock__timer *tm);

static size_t vouched_grants(const struct dlock__attempt *at, const dlock__mux_op *ops)
{
	size_t i, ok = 0;

	for (i = 0; i < at->n; i++)
		ok += !ops[i].pending && dlock__reply_acquired(&ops[i]) && vouched(at, i);
	return ok;
}

/*
 * A quorum of grants the filter vouches for is in, and every acquire still
 * unanswered would be taken back if it ran after its timeout (its undo
 * rides behind it): the op goes on now, from the loop; the run goes on.
 */
static int early_quorum(struct dlock__attempt *at, const dlock__mux_op *ops)
{
	size_t i, ok = 0, pending = 0;

	if (at == NULL || !at->early)
		return 0;
	for (i = 0; i < at->n; i++) {
		if (ops[i].pending) {
			if (ops[i].undo == NULL)
				return 0;
			pending++;
		} else if (dlock__reply_acquired(&ops[i]) && vouched(at, i)) {
			ok++;
		}
	}
	if (ok < at->quorum || pending == 0)
		return 0; /* not yet, or every answer is in: the usual end */
	at->quorum_in = 1;
	if (dlock__timer_set(at->loop, &at->go_on, 0) < 0)
		go_on(&at->go_on);
	return 1;
}

/* The attempt is over: its answers recorded, what fell short given back. */
static void attempt_over(dlock__engine_op *o)
{
	struct dlock__attempt *at = o->attempt;
	dlock__then then = at->then;
	size_t i, n = 0;

	o->attempt = NULL;
	o->step_rc = o->run_rc;
	if (o->run_rc == 0) {
		record_answers(o->e, o->t, at->acq, at->ops, &at->s, at->give_back);
		dlock__attempt_note_uptimes(o->e->n, at->ops, &at->u);
		for (i = 0; i < o->e->n; i++)
			n += (size_t)at->give_back[i];
	}
	if (n == 0) {
		dlock__attempt_free(at);
		then(o);
		return;
	}
	/* Taken, but too few replicas acknowledged: given back first. */
	dlock__rollback_some(o, at->give_back, then);
	dlock__attempt_free(at);
}

/* The op goes on with the answers in; the ones still to come are late:
 * no vote (DLOCK_VOTE_NONE, the message says so), untouched by the op's
 * give-backs (the attempt settles them). */
static void go_on(dlock__timer *tm)
{
	struct dlock__attempt *at = AT_OF(tm, go_on);
	dlock__engine_op *o = at->o;
	dlock__then then = at->then;
	size_t i;

	if (o == NULL || at->run_over || at->gone_on)
		return; /* the run ended first: it goes on the usual way */
	at->gone_on = 1;
	at->release_gen = atomic_load(&o->e->release_gen);
	o->attempt = NULL;
	o->tail = at;
	o->step_rc = 0;
	for (i = 0; i < at->n; i++) {
		at->give_back[i] = 0;
		if (!at->ops[i].pending) {
			if (!at->ops[i].skip)
				record_answer(o->e, i, &o->t[i], &at->acq[i], &at->ops[i], NULL,
						&at->give_back[i]);
			continue;
		}
		at->late[i] = 1;
		o->t[i].st.vote = DLOCK_VOTE_NONE;
		snprintf(o->t[i].st.message, sizeof(o->t[i].st.message),
				"pending: no answer yet when the quorum was reached (a late grant "
				"joins the hold, a late refusal changes nothing)");
	}
	then(o);
}

static void run_over(dlock__mux_loop *ml)
{
	struct dlock__attempt *at = AT_OF(ml, ml);
	dlock__engine_op *o = at->o;

	dlock__mux_loop_end(ml);
	at->run_over = 1;
	if (!at->gone_on) {
		dlock__timer_stop(ml->loop, &at->go_on);
		o->run_rc = 0;
		attempt_over(o);
		return;
	}
	if (at->fate != 0)
		dlock__attempt_settle(at);
	/* else the op's end settles them (dlock__parallel_settle) */
}

static void begin_failed(dlock__engine_op *o)
{
	struct dlock__attempt *at = o->attempt;
	dlock__then then = at->then;

	o->attempt = NULL;
	o->step_rc = dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	dlock__attempt_free(at);
	then(o);
}

/* The attempt keeps what it needs should it outlive the op. */
static int attempt_keep(struct dlock__attempt *at, dlock__engine_op *o)
{
	dlock__engine *e = o->e;
	size_t i;

	at->n = e->n;
	at->quorum = e->rules.quorum;
	at->vouch = e->rules.vouch;
	at->vouch_arg = e->rules.filter_arg;
	at->o = o;
	at->loop = o->op.loop;
	at->link = dlock__link_ref(e->link);
	/* A blocking call's loop stops with the call: late answers would wait
	 * for the thread's next call. It decides at the quorum and a grace. */
	at->early = e->rules.share_wait && e->rules.quorum < e->n && !o->blocking;
	if (o->owner != NULL && (at->owner = dlock__strdup(o->owner)) == NULL)
		return -1;
	if ((at->members = dlock__calloc(e->n, sizeof(*at->members))) == NULL)
		return -1;
	for (i = 0; i < e->n; i++) {
		at->members[i] = e->members[i];
		atomic_fetch_add(&at->members[i]->refs, 1);
		dlock__client_handle_added(dlock__lock_client(e->members[i]), 1);
	}
	dlock__timer_init(&at->go_on, go_on);
	return 0;
}

void dlock__parallel_attempt(dlock__engine_op *o, int64_t lease_ms, const int *ask,
		dlock__parallel *p, int64_t *t0, dlock__then then)
{
	dlock__engine *e = o->e;
	struct dlock__attempt *at = dlock__attempt_new(e->n);
	size_t i;
	int rc = 0;

	if (at == NULL || attempt_keep(at, o) < 0) {
		if (at != NULL)
			dlock__attempt_free(at);
		o->step_rc = dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
		then(o);
		return;
	}
	at->lease_ms = lease_ms;
	for (i = 0; i < e->n && rc == 0; i++) {
		at->ops[i].skip = ask != NULL && !ask[i];
		if (!at->ops[i].skip)
			rc = prepare_member(o, i, &o->t[i], at->owner, lease_ms, &at->acq[i],
					&at->undo[i], &at->ops[i]);
	}
	if (rc < 0) {
		dlock__attempt_free(at);
		o->step_rc = rc;
		then(o);
		return;
	}
	ask_uptimes(e, p, at->ops, &at->u);
	ask_syncs(e, at->ops, e->n + at->u.n, &at->s);
	/* Replicas to hear, or members given to an ordered round: all heard. */
	at->early &= at->s.n == 0 && ask == NULL;
	at->nops = e->n + at->u.n + at->s.n;
	at->w = (attempt_wait){ e, p, &at->u, &at->s, at };
	at->then = then;
	o->attempt = at;
	*t0 = p->started = dlock__now_ms();
	if (dlock__mux_loop_begin(&at->ml, o->op.loop, at->ops, at->nops, attempt_decided, &at->w,
			    run_over) < 0)
		dlock__engine_pause(o, 0, begin_failed);
}
