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
#include "multilock/releasing.h"
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

#define RL_OF(p, field) ((releasing *)((char *)(p) - offsetof(releasing, field)))

static void go_on(releasing *r);

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
			dlock__releasing_finish(r, i);
			continue;
		}
		if (ops[i].sent_at == 0)
			return 0;
		pending++;
		pending_live += r->t[i].touched;
	}
	/* Short of a quorum, the rest still change the answer (dlock__releasing_verdict()). */
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
		rc = dlock__releasing_verdict(r, r->was_lost);
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
		dlock__releasing_finish(r, i);
	end_op(r, rc);
	dlock__releasing_free(r);
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
			dlock__releasing_finish(r, i);
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
	dlock__releasing_finish(r, i); /* a rollback: what it took back; else recorded */
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
	dlock__releasing_free(r);
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
	int rc = dlock__releasing_new(&r, o);

	for (i = 0; i < e->n && rc == 0; i++)
		rc = dlock__releasing_prepare(r, e, i);
	if (rc < 0) {
		if (r != NULL)
			dlock__releasing_free(r);
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
