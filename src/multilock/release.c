/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Release on every member at once. Members the client believes held get a
 * normal unlock (safe to repeat by the believed count). The others may
 * still hold an acquire that reached a server after the client stopped
 * waiting for it (a paused server resumed): the rollback script takes
 * exactly that back.
 */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/drive/mux_loop.h"
#include "multilock/parts.h"
#include "single/acquire.h"
#include "single/holds.h"
#include "single/lock_internal.h"
#include "single/member.h"

/*
 * A release decides once a quorum of members let go (or once those still
 * to answer could not change the answer), every command sent by then: the
 * caller need not wait for the slowest server.
 *  - Asynchronous: at once. The rest are heard on the loop, the run
 *    outliving the op (it holds the members and their clients); until
 *    then the engine does not ask those members (an acquire sent on
 *    another connection could run first and be undone).
 *  - Blocking: after the acquisitions' short grace (quorum.h), as its
 *    loop stops with the call: a straggler's reply is left owed on its
 *    connection (core/net/owed.h), and an owing node is not asked until it
 *    comes - on healthy servers the grace hears everyone instead.
 * A late release needs no judging: its hold counts as released when the op
 * decides, so it is neither renewed nor reported held any more.
 */
typedef struct releasing {
	dlock__engine_op *o;  /* NULL once the op ended */
	dlock_lock **members; /* referenced: the run may outlive the op */
	size_t n, quorum;
	char *owner;          /* the op's explicit owner, copied; NULL: the thread's */
	dlock__member_try *t; /* touched: a normal unlock; else a rollback */
	dlock__mux_op *ops;
	dlock__release *rel;
	dlock__rollback *rb;
	int *done; /* per member: its outcome recorded */
	size_t released;
	int first_error;
	int nomem;
	int was_lost; /* fewer than a quorum held, because holds were lost */
	int keep_on;  /* asynchronous: the run goes on after the op decided */
	int decided, run_over;
	int *late;    /* per member: still to answer when the op went on */
	struct dlock__engine_link *link;
	dlock__parallel rule; /* blocking: quorum.c's, for the grace */
	dlock__mux_loop ml;
	dlock__timer decide; /* the op ends from the loop, not inside the run */
	char first_msg[DLOCK__ERRMSG_MAX];
} releasing;

#define R_OF(p, field) ((releasing *)((char *)(p) - offsetof(releasing, field)))

static void releasing_free(releasing *r)
{
	size_t i;

	if (r->ops != NULL)
		dlock__mux_clear(r->ops, r->n);
	for (i = 0; r->rel != NULL && r->t != NULL && i < r->n; i++)
		if (r->t[i].touched)
			dlock__release_clear(r->members[i], &r->rel[i]);
	for (i = 0; r->late != NULL && r->link != NULL && i < r->n; i++)
		if (r->late[i])
			dlock__link_releasing(r->link, i, -1);
	dlock__link_unref(r->link);
	dlock__free(r->late);
	for (i = 0; r->members != NULL && i < r->n && r->members[i] != NULL; i++) {
		dlock__client_handle_added(dlock__lock_client(r->members[i]), -1);
		dlock__lock_unref(r->members[i]);
	}
	dlock__free(r->members);
	dlock__free(r->owner);
	dlock__free(r->t);
	dlock__free(r->ops);
	dlock__free(r->rel);
	dlock__free(r->rb);
	dlock__free(r->done);
	dlock__free(r);
}

static void decide_now(dlock__timer *tm);

/* A new releasing for op o, holding what it needs should it outlive the op. */
static int releasing_new(releasing **out, dlock__engine_op *o)
{
	dlock__engine *e = o->e;
	releasing *r = dlock__calloc(1, sizeof(*r));
	size_t i;

	*out = r;
	if (r == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	r->o = o;
	r->n = e->n;
	r->quorum = e->rules.quorum;
	r->keep_on = !o->blocking;
	dlock__timer_init(&r->decide, decide_now);
	r->t = dlock__calloc(e->n, sizeof(*r->t));
	r->ops = dlock__calloc(e->n, sizeof(*r->ops));
	r->rel = dlock__calloc(e->n, sizeof(*r->rel));
	r->rb = dlock__calloc(e->n, sizeof(*r->rb));
	r->done = dlock__calloc(e->n, sizeof(*r->done));
	r->late = dlock__calloc(e->n, sizeof(*r->late));
	r->link = dlock__link_ref(e->link);
	r->rule = (dlock__parallel){ .quorum = e->rules.quorum, .started = dlock__now_ms() };
	r->members = dlock__calloc(e->n, sizeof(*r->members));
	if (o->owner != NULL)
		r->owner = dlock__strdup(o->owner);
	if (r->t == NULL || r->ops == NULL || r->rel == NULL || r->rb == NULL || r->done == NULL || r->late == NULL ||
			r->members == NULL || (o->owner != NULL && r->owner == NULL))
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	for (i = 0; i < e->n; i++) {
		r->members[i] = e->members[i];
		atomic_fetch_add(&r->members[i]->refs, 1);
		dlock__client_handle_added(dlock__lock_client(e->members[i]), 1);
	}
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
	/* A blocking call may give it up sent: then it must run unanswered,
	 * which EVALSHA would not (an unread NOSCRIPT). */
	op->eval = !r->keep_on;
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

/* The op goes on without the members still to answer: until they do, the
 * engine does not ask them (dlock__link_is_releasing). */
static void mark_late(releasing *r, const dlock__mux_op *ops)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		if (ops[i].pending) {
			r->late[i] = 1;
			dlock__link_releasing(r->link, i, 1);
		}
}

/* The release is decided (see the top): 1 for a blocking call to stop. */
static int decide(releasing *r, const dlock__mux_op *ops, const dlock__tally *t, int64_t *wake_at)
{
	if (!r->keep_on)
		return dlock__parallel_decided(&r->rule, t, dlock__now_ms(), wake_at);
	if (t->ok < r->quorum && t->n - t->failed >= r->quorum)
		return 0;
	if (dlock__timer_set(r->ml.loop, &r->decide, 0) < 0) {
		r->keep_on = 0; /* no timer: the run ends now, the rest left owed */
		return 1;
	}
	r->decided = 1; /* the op ends from the loop; the run goes on */
	mark_late(r, ops);
	return 0;
}

/*
 * The run's stopping rule: record each answer as it comes, and decide
 * once every command is on its way (a connection still opening sends
 * nothing if given up). A rollback (a member not believed held) releases
 * no hold: it counts as a member that did not let go.
 */
static int release_decided(void *arg, const dlock__mux_op *ops, size_t n, int64_t *wake_at)
{
	releasing *r = arg;
	dlock__tally t = { .n = n };
	size_t i, pending = 0;

	if (r->decided)
		return 0; /* the op went on: the rest are heard to their end */
	for (i = 0; i < n; i++) {
		if (!ops[i].pending) {
			finish_member(r, i);
			continue;
		}
		if (ops[i].sent_at == 0)
			return 0;
		pending++;
		t.pending_live += r->t[i].touched;
	}
	if (pending == 0)
		return 0; /* every answer is in: the run ends by itself */
	t.ok = r->released;
	t.failed = n - r->released - t.pending_live;
	return decide(r, ops, &t, wake_at);
}

/* The op's end: every member not heard from counts as released. */
static void conclude(releasing *r, int rc)
{
	dlock__engine_op *o = r->o;
	size_t i;

	if (rc == 0) {
		for (i = 0; i < r->n; i++)
			finish_member(r, i);
		rc = verdict(r, r->was_lost);
		if (rc == 0)
			dlock__engine_stat_released(o->e, r->t[0].owner_ptr);
	}
	r->o = NULL;
	o->step = NULL;
	dlock__engine_op_end(o, rc);
}

static void decide_now(dlock__timer *tm)
{
	releasing *r = R_OF(tm, decide);

	if (r->o != NULL)
		conclude(r, 0);
	if (r->run_over)
		releasing_free(r);
}

static void run_over(dlock__mux_loop *ml)
{
	releasing *r = R_OF(ml, ml);

	dlock__mux_loop_end(ml);
	r->run_over = 1;
	if (r->o != NULL) {
		dlock__timer_stop(ml->loop, &r->decide);
		conclude(r, 0);
	}
	releasing_free(r); /* late answers: nothing to judge */
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
	if (rc == 0) {
		/* A lock found lost stays lost, whatever the release meets: fewer
		 * than a quorum still held, and that because holds were lost - not
		 * because an earlier unlock (one that ran out of memory) released
		 * some. */
		dlock__holds_tally(e, o->owner, &alive, &lost);
		r->was_lost = lost > 0 && alive < e->rules.quorum;
		dlock__loss_disarm(e, r->t[0].owner_ptr);
		o->step = r;
		if (dlock__mux_loop_begin(&r->ml, o->op.loop, r->ops, e->n, release_decided, r,
				    run_over) < 0)
			rc = dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	}
	if (rc < 0) {
		o->step = NULL;
		if (r != NULL)
			releasing_free(r);
		dlock__engine_op_end(o, rc);
	}
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
