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
#include "core/drive/mux.h"
#include "multilock/parts.h"
#include "single/acquire.h"
#include "single/holds.h"
#include "single/member.h"

typedef struct releasing {
	dlock__engine *e;
	dlock__member_try *t; /* touched: a normal unlock; else a rollback */
	dlock__mux_op *ops;
	dlock__release *rel;
	dlock__rollback *rb;
	size_t released;
	int first_error;
	int nomem;
	int was_lost; /* fewer than a quorum held, because holds were lost */
	char first_msg[DLOCK__ERRMSG_MAX];
} releasing;

static void releasing_free(releasing *r)
{
	size_t i;

	if (r->ops != NULL)
		dlock__mux_clear(r->ops, r->e->n);
	for (i = 0; r->rel != NULL && r->t != NULL && i < r->e->n; i++)
		if (r->t[i].touched)
			dlock__release_clear(r->e->members[i], &r->rel[i]);
	dlock__free(r->t);
	dlock__free(r->ops);
	dlock__free(r->rel);
	dlock__free(r->rb);
}

static int releasing_init(releasing *r, dlock__engine *e)
{
	memset(r, 0, sizeof(*r));
	r->e = e;
	r->t = dlock__calloc(e->n, sizeof(*r->t));
	r->ops = dlock__calloc(e->n, sizeof(*r->ops));
	r->rel = dlock__calloc(e->n, sizeof(*r->rel));
	r->rb = dlock__calloc(e->n, sizeof(*r->rb));
	if (r->t == NULL || r->ops == NULL || r->rel == NULL || r->rb == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	return 0;
}

/* Member i's op: its unlock, or the rollback of an acquire it may have run. */
static int prepare_member(releasing *r, size_t i, const char *owner)
{
	dlock_lock *m = r->e->members[i];
	dlock__member_try *t = &r->t[i];
	dlock__mux_op *op = &r->ops[i];
	int rc;

	/* An explicit owner may have been taken by another process (a
	 * script's `dlock acquire`): release it wherever it is held. */
	t->touched = owner != NULL || dlock__holds_count(m, t->owner_ptr, 1) >= 0;
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
	/* A server that just timed out would cost its timeout again: send
	 * and do not wait (it runs when the server does). */
	op->no_wait = dlock__member_is_slow(r->e, i);
	return 0;
}

/* Record member i's outcome. */
static void finish_member(releasing *r, size_t i)
{
	dlock_lock *m = r->e->members[i];
	const dlock__member_try *t = &r->t[i];
	const dlock__mux_op *op = &r->ops[i];
	int rc = op->rc;

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
	const dlock__engine *e = r->e;
	const char *shown = dlock__lock_shown(e->members[0]);
	int rc = 0;

	if (r->nomem)
		return dlock__seterr(DLOCK_ENOMEM,
				"lock %s released on %zu of %zu nodes: out of "
				"memory",
				shown, r->released, e->n);
	if (r->released >= e->rules.quorum)
		rc = 0;
	else if (r->first_error < 0)
		rc = dlock__seterr(r->first_error,
				"lock %s released on %zu of %zu nodes (quorum "
				"%zu): %s",
				shown, r->released, e->n, e->rules.quorum, r->first_msg);
	else if (r->released == 0)
		rc = dlock__seterr(DLOCK_ENOTOWNER, "lock %s is not held by %s on any node", shown,
				r->t[0].owner_ptr);
	if (was_lost)
		rc = dlock__seterr(DLOCK_ELOST,
				"lock %s had been lost before the unlock (fewer "
				"than %zu of %zu members still held); released on %zu",
				shown, e->rules.quorum, e->n, r->released);
	return rc;
}

static void release_free(dlock__engine_op *o)
{
	releasing *r = o->step;

	if (r == NULL)
		return;
	releasing_free(r);
	dlock__free(r);
	o->step = NULL;
}

static void released(dlock__engine_op *o)
{
	releasing *r = o->step;
	size_t i;
	int rc = o->run_rc;

	if (rc == 0) {
		for (i = 0; i < o->e->n; i++)
			finish_member(r, i);
		rc = verdict(r, r->was_lost);
		if (rc == 0)
			dlock__engine_stat_released(o->e, r->t[0].owner_ptr);
	}
	release_free(o);
	dlock__engine_op_end(o, rc);
}

static void release_start(dlock_op *op)
{
	dlock__engine_op *o = (dlock__engine_op *)op;
	dlock__engine *e = o->e;
	releasing *r = dlock__calloc(1, sizeof(*r));
	size_t i, alive, lost;
	int rc;

	if (r == NULL) {
		dlock__engine_op_end(o, dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory"));
		return;
	}
	o->step = r;
	if ((rc = releasing_init(r, e)) < 0) {
		release_free(o);
		dlock__engine_op_end(o, rc);
		return;
	}
	dlock__tries_reset(e, r->t, o->owner);
	/* A lock found lost stays lost, whatever the release meets: fewer than
	 * a quorum still held, and that because holds were lost - not because
	 * an earlier unlock (one that ran out of memory) released some. */
	dlock__holds_tally(e, o->owner, &alive, &lost);
	r->was_lost = lost > 0 && alive < e->rules.quorum;
	dlock__loss_disarm(e, r->t[0].owner_ptr);
	for (i = 0; i < e->n && rc == 0; i++)
		rc = prepare_member(r, i, o->owner);
	if (rc < 0) {
		release_free(o);
		dlock__engine_op_end(o, rc);
		return;
	}
	dlock__engine_run(o, r->ops, e->n, NULL, NULL, released);
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
