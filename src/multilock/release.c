/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Release on every member at once. Members the client believes held get a
 * normal unlock (safe to repeat by the believed count). The others may
 * still hold an acquire that reached a server after the client stopped
 * waiting for it (a paused server resumed): the rollback script takes
 * exactly that back.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/time.h"
#include "core/drive/client.h"
#include "core/mux/mux_loop.h"
#include "multilock/parts.h"
#include "single/acquire.h"
#include "single/holds.h"
#include "single/lock_internal.h"
#include "single/member.h"

/*
 * When a release decides (SPEC §16).
 *
 * Asynchronous: at the quorum-th "let go", every command sent. The op's
 * callback comes then; the run goes on, on the loop, to hear the rest
 * (`late` members): it references the members and their clients, so the
 * caller may free the lock, the clients and the loop from the callback,
 * and the stragglers still finish. A member whose release is still due is
 * no longer renewed nor reported held from the callback on, and is not
 * asked to acquire until its answer came (engine.h's release_due).
 *
 * Blocking: once a quorum let go and the rest had a grace
 * (RELEASE_GRACE_MS, or as long again as the quorum took). The run cannot
 * go on past the call: its loop is the calling thread's, driven only while
 * a blocking call of that thread runs, so a straggler's answer would wait
 * for the thread's next call. Healthy servers, even busy ones, answer
 * within the grace; a stopped one costs the grace, not its command
 * timeout. Its reply is left owed on its connection (core/net/owed.h:
 * skipped when it comes; the release goes as EVAL until one ran on that
 * server, so it runs unanswered), and a node that owes is not asked to
 * acquire until it came (a late release could undo a new hold) - which is
 * why the grace is longer than an acquisition's (quorum.h): a straggler
 * given up costs the next acquisition a member. A release given up needs
 * no judging: its hold counts as released when the op decides, so it is
 * neither renewed nor reported held any more.
 */
#define RELEASE_GRACE_MS 100

typedef struct releasing {
	dlock_lock **members; /* referenced: the run may outlive the op and the engine */
	struct dlock__engine_link *link;
	size_t n, quorum;
	char *owner;          /* the op's explicit owner, copied; NULL: the thread's */
	dlock__member_try *t; /* touched: a normal unlock; else a rollback */
	dlock__mux_op *ops;
	dlock__release *rel;
	dlock__rollback *rb;
	int *done; /* per member: its outcome recorded */
	int *late; /* per member: unanswered when the op went on (2: heard since) */
	size_t released;
	int first_error;
	int nomem;
	int was_lost; /* fewer than a quorum held, because holds were lost */
	int early;    /* asynchronous: the op goes on at the quorum */
	int gone_on;  /* the op ended; the run hears the rest */
	dlock__engine_op *o; /* NULL once the op ended */
	dlock__loop *loop;   /* the op's */
	dlock__mux_loop ml;  /* the run: the releasing's own, as it may outlive the op */
	int64_t started, quorum_at; /* when sent; when a quorum had let go (0: not yet) */
	char first_msg[DLOCK__ERRMSG_MAX];
} releasing;

#define RL_OF(p, field) ((releasing *)((char *)(p) - offsetof(releasing, field)))

static void releasing_free(releasing *r)
{
	size_t i;

	if (r->ops != NULL)
		dlock__mux_clear(r->ops, r->n);
	for (i = 0; r->rel != NULL && r->t != NULL && r->members != NULL && i < r->n; i++)
		if (r->t[i].touched)
			dlock__release_clear(r->members[i], &r->rel[i]);
	for (i = 0; r->members != NULL && i < r->n; i++) {
		if (r->members[i] == NULL)
			continue;
		dlock__client_handle_added(dlock__lock_client(r->members[i]), -1);
		dlock__lock_unref(r->members[i]);
	}
	dlock__link_unref(r->link);
	dlock__free(r->members);
	dlock__free(r->owner);
	dlock__free(r->t);
	dlock__free(r->ops);
	dlock__free(r->rel);
	dlock__free(r->rb);
	dlock__free(r->done);
	dlock__free(r->late);
	dlock__free(r);
}

static void go_on(releasing *r);

/* Keep the members (and so their clients and loop) while the run lasts. */
static void keep_members(releasing *r, const dlock__engine *e)
{
	for (size_t i = 0; i < e->n; i++) {
		r->members[i] = e->members[i];
		atomic_fetch_add(&r->members[i]->refs, 1);
		dlock__client_handle_added(dlock__lock_client(e->members[i]), 1);
	}
}

/* A new releasing for op o. */
static int releasing_new(releasing **out, dlock__engine_op *o)
{
	dlock__engine *e = o->e;
	releasing *r = dlock__calloc(1, sizeof(*r));

	*out = r;
	if (r == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	r->n = e->n;
	r->quorum = e->rules.quorum;
	r->o = o;
	r->loop = o->op.loop;
	r->link = dlock__link_ref(e->link);
	r->early = !o->blocking;
	r->members = dlock__calloc(e->n, sizeof(*r->members));
	r->late = dlock__calloc(e->n, sizeof(*r->late));
	r->t = dlock__calloc(e->n, sizeof(*r->t));
	r->ops = dlock__calloc(e->n, sizeof(*r->ops));
	r->rel = dlock__calloc(e->n, sizeof(*r->rel));
	r->rb = dlock__calloc(e->n, sizeof(*r->rb));
	r->done = dlock__calloc(e->n, sizeof(*r->done));
	r->started = dlock__now_ms();
	if (o->owner != NULL)
		r->owner = dlock__strdup(o->owner);
	if (r->members == NULL || r->late == NULL || r->t == NULL || r->ops == NULL ||
			r->rel == NULL || r->rb == NULL || r->done == NULL ||
			(o->owner != NULL && r->owner == NULL))
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	keep_members(r, e);
	dlock__tries_reset(e, r->t, r->owner);
	return 0;
}

/* Member i's op: its unlock, or the rollback of an acquire it may have run. */
static int prepare_member(releasing *r, const dlock__engine *e, size_t i)
{
	dlock_lock *m = r->members[i];
	dlock__member_try *t = &r->t[i];
	dlock__mux_op *op = &r->ops[i];
	int rc;

	/* An explicit owner may have been taken by another process (a
	 * script's `dlock acquire`): release it wherever it is held. */
	t->touched = r->owner != NULL || dlock__holds_count(m, t->owner_ptr, 1) >= 0;
	if (t->touched) {
		if ((rc = dlock__release_prepare(m, t->owner_ptr, &r->rel[i])) < 0) {
			t->touched = 0; /* nothing to clear */
			return rc;
		}
		op->call = &r->rel[i].call;
		op->repeat = r->rel[i].repeat;
		op->no_retry = !r->rel[i].retry_safe;
	} else {
		dlock__rollback_prepare(m, t->owner_ptr, 1, 0, &r->rb[i]);
		op->call = &r->rb[i].call;
	}
	op->client = dlock__lock_client(m);
	/* The member's commands keep their order on the server: a later
	 * acquire of ours may go right behind it while it is due (parallel.c),
	 * and it goes behind an acquire still due there. */
	op->ordered = DLOCK__ORDERED;
	op->behind = DLOCK__BEHIND_OR_ANY;
	/* It may be given up sent: then it must run unanswered, which
	 * EVALSHA would not on a server without the script (an unread
	 * NOSCRIPT); once one ran there, EVALSHA saves the body's bytes. */
	op->eval = !atomic_load(&e->release_ran[i]);
	/* A server that just timed out would cost its timeout again: send
	 * and do not wait (it runs when the server does). */
	op->no_wait = dlock__member_is_slow(e, i);
	return 0;
}

/* Record member i's outcome (once). */
static void finish_member(releasing *r, size_t i)
{
	dlock_lock *m = r->members[i];
	const dlock__member_try *t = &r->t[i];
	const dlock__mux_op *op = &r->ops[i];
	int rc = op->rc;

	if (r->done[i])
		return;
	r->done[i] = 1;
	if (op->pending || op->undecided) {
		/* Sent, its answer not waited for: counted as released, so
		 * renewal stops; the key expires should it never run. */
		if (t->touched)
			dlock__holds_unsure_release(m, t->owner_ptr);
		else
			dlock__rollback_finish(m, t->owner_ptr, 0, DLOCK_ETIMEDOUT, NULL);
		return;
	}
	r->nomem |= rc == DLOCK_ENOMEM;
	if (!t->touched) {
		dlock__rollback_finish(m, t->owner_ptr, 0, op->rc, op->reply);
		return;
	}
	if (rc == 0 && op->reply == NULL) {
		/* Sent without waiting: count it as done, so renewal stops
		 * with the last hold; the key expires if it never runs. */
		dlock__holds_unsure_release(m, t->owner_ptr);
		return;
	}
	if (rc < 0) {
		dlock__seterr(rc, "%s", op->errmsg);
		if (rc != DLOCK_ENOMEM)
			dlock__holds_unsure_release(m, t->owner_ptr);
	} else {
		dlock__link_release_ran(r->link, i); /* answered: the script is there now */
		rc = dlock__release_finish(m, &r->rel[i], op->reply);
	}
	if (rc == 0)
		r->released++;
	else if (r->first_error == 0 && rc != DLOCK_ENOTOWNER) {
		r->first_error = rc;
		snprintf(r->first_msg, sizeof(r->first_msg), "%s", dlock__errmsg_thread());
	}
	if (rc < 0)
		dlock__lock_record(m, rc);
}

/*
 * Released where a quorum was held: a member that could not be reached
 * stays a detail (no longer renewed, its hold expires). One this process
 * could not even send to for lack of memory is not: say so, so the caller
 * unlocks again (a watchdog hold left recorded would be renewed forever).
 */
static int verdict(const releasing *r, int was_lost)
{
	const char *shown = dlock__lock_shown(r->members[0]);
	int rc = 0;

	if (r->nomem)
		return dlock__seterr(DLOCK_ENOMEM,
				"lock %s released on %zu of %zu nodes: out of "
				"memory",
				shown, r->released, r->n);
	if (r->released >= r->quorum)
		rc = 0;
	else if (r->first_error < 0)
		rc = dlock__seterr(r->first_error,
				"lock %s released on %zu of %zu nodes (quorum "
				"%zu): %s",
				shown, r->released, r->n, r->quorum, r->first_msg);
	else if (r->released == 0)
		rc = dlock__seterr(DLOCK_ENOTOWNER, "lock %s is not held by %s on any node", shown,
				r->t[0].owner_ptr);
	if (was_lost)
		rc = dlock__seterr(DLOCK_ELOST,
				"lock %s had been lost before the unlock (fewer "
				"than %zu of %zu members still held); released on %zu",
				shown, r->quorum, r->n, r->released);
	return rc;
}

/* The decision is in and members are still to answer: asynchronous, the
 * op goes on now (its callback comes from the loop, never from here) and
 * the run hears the rest; blocking, they get the grace. 1: stop waiting. */
static int decide_with_pending(releasing *r, int64_t *wake_at)
{
	int64_t now, grace_end;

	if (r->early) {
		go_on(r);
		return 0;
	}
	now = dlock__now_ms();
	if (r->quorum_at == 0)
		r->quorum_at = now;
	grace_end = r->quorum_at + (r->quorum_at - r->started > RELEASE_GRACE_MS
						   ? r->quorum_at - r->started
						   : RELEASE_GRACE_MS);
	if (now >= grace_end)
		return 1;
	*wake_at = grace_end;
	return 0;
}

static void late_answered(releasing *r, size_t i);

/*
 * The run's stopping rule: record each answer as it comes, and decide
 * once every command is on its way (a connection still opening sends
 * nothing if given up). A rollback (a member not believed held) releases
 * no hold: it is not waited for once a quorum let go.
 */
static int release_decided(void *arg, const dlock__mux_op *ops, size_t n, int64_t *wake_at)
{
	releasing *r = arg;
	size_t i, pending = 0, pending_live = 0;

	if (r->gone_on) {
		/* The op went on: the rest are heard to their end, each no
		 * longer due once it answered. */
		for (i = 0; i < n; i++)
			if (r->late[i] == 1 && !ops[i].pending) {
				r->late[i] = 2;
				late_answered(r, i);
			}
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (!ops[i].pending) {
			finish_member(r, i);
			continue;
		}
		if (ops[i].sent_at == 0)
			return 0;
		pending++;
		pending_live += r->t[i].touched;
	}
	/* Short of a quorum, the rest still change the answer (verdict()). */
	if (r->released < r->quorum)
		return 0;
	/* Asynchronous, a rollback on its way is heard too: its answer says
	 * what it took back (single/acquire.h). */
	if ((r->early ? pending : pending_live) == 0)
		return 1;
	return decide_with_pending(r, wake_at);
}

/* The op's end: its verdict on the members decided (a member not heard
 * from counts as released). The releasing is the run's from here. */
static void end_op(releasing *r, int rc)
{
	dlock__engine_op *o = r->o;

	if (rc == 0) {
		rc = verdict(r, r->was_lost);
		if (rc == 0)
			dlock__engine_stat_released(o->e, r->t[0].owner_ptr);
	}
	o->step = NULL;
	r->o = NULL;
	dlock__engine_op_end(o, rc);
}

/* The run ended before the op went on: every member decided now. */
static void released(releasing *r, int rc)
{
	size_t i;

	for (i = 0; rc == 0 && i < r->n; i++)
		finish_member(r, i);
	end_op(r, rc);
	releasing_free(r);
}

/* The op goes on at the quorum: a member still unanswered is late - no
 * longer renewed nor reported held, not asked to acquire until it
 * answered; a rollback on its way is judged when it answers. */
static void go_on(releasing *r)
{
	size_t i;

	r->gone_on = 1;
	for (i = 0; i < r->n; i++) {
		if (!r->ops[i].pending) {
			finish_member(r, i);
			continue;
		}
		r->late[i] = 1;
		dlock__link_release_due(r->link, i, 1);
		if (r->t[i].touched) {
			dlock__holds_unsure_release(r->members[i], r->t[i].owner_ptr);
			r->done[i] = 1;
		}
	}
	end_op(r, 0);
}

/* A late member answered (or timed out): its release is no longer due. */
static void late_answered(releasing *r, size_t i)
{
	const dlock__mux_op *op = &r->ops[i];

	if (r->t[i].touched && !op->pending && !op->undecided && op->rc == 0 && op->reply != NULL)
		dlock__link_release_ran(r->link, i);
	if (r->t[i].touched && op->rc < 0)
		dlock__lock_record(r->members[i], op->rc);
	finish_member(r, i); /* a rollback: what it took back; else recorded */
	dlock__link_release_due(r->link, i, -1);
}

static void run_over(dlock__mux_loop *ml)
{
	releasing *r = RL_OF(ml, ml);
	size_t i;

	dlock__mux_loop_end(ml);
	if (!r->gone_on) {
		released(r, 0);
		return;
	}
	for (i = 0; i < r->n; i++)
		if (r->late[i] == 1)
			late_answered(r, i);
	releasing_free(r);
}

static void begin_failed(dlock__engine_op *o)
{
	releasing *r = o->step;

	released(r, dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory"));
}

static void release_start(dlock_op *op)
{
	dlock__engine_op *o = (dlock__engine_op *)op;
	dlock__engine *e = o->e;
	releasing *r;
	size_t i, alive, lost;
	int rc = releasing_new(&r, o);

	for (i = 0; i < e->n && rc == 0; i++)
		rc = prepare_member(r, e, i);
	if (rc < 0) {
		if (r != NULL)
			releasing_free(r);
		dlock__engine_op_end(o, rc);
		return;
	}
	o->step = r;
	/* A lock found lost stays lost, whatever the release meets: fewer than
	 * a quorum still held, and that because holds were lost - not because
	 * an earlier unlock (one that ran out of memory) released some. */
	dlock__holds_tally(e, o->owner, &alive, &lost);
	r->was_lost = lost > 0 && alive < e->rules.quorum;
	dlock__loss_disarm(e, r->t[0].owner_ptr);
	atomic_fetch_add(&e->release_gen, 1); /* late grants of before: given back */
	if (dlock__mux_loop_begin(&r->ml, r->loop, r->ops, r->n, release_decided, r, run_over) < 0)
		dlock__engine_pause(o, 0, begin_failed);
}

static int check_owner(const char *owner)
{
	if (owner != NULL && (owner[0] == '\0' || strlen(owner) > DLOCK__OWNER_MAX))
		return dlock__seterr(DLOCK_EINVAL, "multilock: the owner is empty or too long");
	return 0;
}

int dlock__engine_release(dlock__engine *e, const char *owner)
{
	int rc = check_owner(owner);

	return rc < 0 ? rc : dlock__engine_block(e, owner, release_start, NULL, NULL, NULL, NULL);
}

int dlock__engine_release_async(dlock_op **out, dlock__engine *e, const char *owner,
		dlock_op_cb cb, void *userdata)
{
	int rc = check_owner(owner);

	if (rc < 0) {
		if (out != NULL)
			*out = NULL;
		return rc;
	}
	return dlock__engine_async(out, e, owner, cb, userdata, release_start, NULL, NULL);
}
