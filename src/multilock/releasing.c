/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A release's state (releasing.h; release.c runs it): made with the
 * members it references, freed; each member's command prepared (its
 * unlock, or the rollback of an acquire it may have run) and its outcome
 * recorded; the verdict on the members.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/time.h"
#include "core/drive/client.h"
#include "multilock/parts.h"
#include "multilock/releasing.h"
#include "single/holds.h"
#include "single/lock_internal.h"
#include "single/member.h"

void dlock__releasing_free(releasing *r)
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
int dlock__releasing_new(releasing **out, dlock__engine_op *o)
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
int dlock__releasing_prepare(releasing *r, const dlock__engine *e, size_t i)
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
void dlock__releasing_finish(releasing *r, size_t i)
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
int dlock__releasing_verdict(const releasing *r, int was_lost)
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
