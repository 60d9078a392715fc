/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A parallel attempt's lifetime (attempt.h): made, kept by a RedLock that
 * went on at the quorum until its last answer, then each late grant joins
 * the hold (recorded: renewed, released with the rest, its loss counted)
 * or is given back; a late refusal changes nothing.
 */
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "multilock/attempt.h"
#include "single/holds.h"
#include "single/lock_internal.h"
#include "single/member.h"

static void late_given_back(dlock__timer *tm)
{
	dlock__attempt_free(AT_OF(tm, give_back_done));
}

void dlock__attempt_free(struct dlock__attempt *at)
{
	size_t i;

	if (at->ops != NULL)
		dlock__mux_clear(at->ops, at->nops);
	if (at->back != NULL)
		dlock__mux_clear(at->back, at->nback);
	for (i = 0; at->members != NULL && i < at->n; i++) {
		dlock__client_handle_added(dlock__lock_client(at->members[i]), -1);
		dlock__lock_unref(at->members[i]);
	}
	dlock__free(at->members);
	dlock__link_unref(at->link);
	dlock__free(at->back);
	dlock__free(at->late);
	dlock__free(at->owner);
	dlock__free(at->ops);
	dlock__free(at->acq);
	dlock__free(at->undo);
	dlock__free(at->u.gen);
	dlock__free(at->u.member);
	dlock__free(at->u.start);
	dlock__free(at->s.cmd);
	dlock__free(at->s.op);
	dlock__free(at->give_back);
	dlock__free(at);
}

struct dlock__attempt *dlock__attempt_new(size_t n)
{
	struct dlock__attempt *at = dlock__calloc(1, sizeof(*at));

	if (at == NULL)
		return NULL;
	at->ops = dlock__calloc(3 * n, sizeof(*at->ops));
	at->acq = dlock__calloc(n, sizeof(*at->acq));
	at->undo = dlock__calloc(n, sizeof(*at->undo));
	at->u.gen = dlock__calloc(n, sizeof(*at->u.gen));
	at->u.member = dlock__calloc(n, sizeof(*at->u.member));
	at->u.start = dlock__calloc(n, sizeof(*at->u.start));
	at->s.cmd = dlock__calloc(n, sizeof(*at->s.cmd));
	at->s.op = dlock__calloc(n, sizeof(*at->s.op));
	at->give_back = dlock__calloc(n, sizeof(*at->give_back));
	at->late = dlock__calloc(n, sizeof(*at->late));
	if (at->ops == NULL || at->acq == NULL || at->undo == NULL || at->u.gen == NULL ||
			at->u.member == NULL || at->u.start == NULL || at->s.cmd == NULL ||
			at->s.op == NULL || at->give_back == NULL || at->late == NULL) {
		dlock__attempt_free(at);
		return NULL;
	}
	dlock__timer_init(&at->give_back_done, late_given_back);
	return at;
}


void dlock__attempt_note_uptimes(size_t n, const dlock__mux_op *ops, const uptimes *u)
{
	int64_t started;

	for (size_t k = 0; k < u->n; k++)
		dlock__uptime_note(&ops[n + k], u->gen[k], u->asked, &started);
}


static void give_back_over(dlock__mux_loop *ml)
{
	struct dlock__attempt *at = AT_OF(ml, ml);
	size_t k;

	dlock__mux_loop_end(ml);
	for (k = 0; k < at->nback; k++) {
		size_t i = (size_t)at->give_back[k]; /* the member of give-back k */
		const redisReply *reply = at->back[k].reply;

		dlock__rollback_finish(at->members[i], at->acq[i].owner, at->acq[i].believed,
				at->back[k].rc, reply);
		/* Nothing to take back: a release's take-back ran first, and the
		 * grant's record goes with it. */
		if (at->back[k].rc == 0 && reply != NULL && reply->type == REDIS_REPLY_INTEGER &&
				reply->integer < 0)
			dlock__holds_undone(at->members[i], at->acq[i].owner,
					at->acq[i].believed > 0 ? at->acq[i].believed : 0);
		dlock__link_release_due(at->link, i, -1);
	}
	dlock__attempt_free(at);
}

/* Does the owner still hold the lock this attempt took (a hold recorded on
 * a member that granted in time)? A release since then says no - one
 * begun already too: it did not see the late grant, whose record would
 * outlive its hold (the release's take-back may run first on the server). */
static int still_held(const struct dlock__attempt *at)
{
	unsigned gen;
	size_t i;

	if (dlock__link_release_gen(at->link, &gen) < 0 || gen != at->release_gen)
		return 0;

	for (i = 0; i < at->n; i++)
		if (!at->late[i] && dlock__reply_acquired(&at->ops[i]) &&
				dlock__holds_count(at->members[i], at->acq[i].owner, 1) >= 0)
			return 1;
	return 0;
}

void dlock__attempt_settle(struct dlock__attempt *at)
{
	size_t i, k = 0;
	int join = at->fate > 0 && still_held(at);

	dlock__attempt_note_uptimes(at->n, at->ops, &at->u);
	at->back = dlock__calloc(at->n, sizeof(*at->back));
	for (i = 0; i < at->n; i++) {
		dlock__mux_op *op = &at->ops[i];
		int64_t ttl = -1;

		if (!at->late[i] || op->rc < 0 || op->reply == NULL)
			continue; /* a refusal; or unanswered, its undo behind it */
		if (dlock__acquire_finish(at->members[i], &at->acq[i], op->reply, op->sent_at,
				    &ttl) != 0)
			continue; /* held by another, or an error: nothing taken */
		dlock__holds_member(at->members[i], at->acq[i].owner);
		if (join) {
			/* Recorded: renewed, released with the rest, and its
			 * loss counted as any member's. */
			dlock__loss_join(at->link, at->members[i], at->acq[i].owner);
			continue;
		}
		if (at->back == NULL) {
			/* Out of memory: not renewed, it expires by its lease. */
			dlock__holds_unsure_release(at->members[i], at->acq[i].owner);
			continue;
		}
		/* As EVAL: given up at its timeout it must still run (batch.c). */
		at->back[k] = (dlock__mux_op){ .client = op->client, .call = &at->undo[i].call,
			.ordered = DLOCK__ORDERED, .behind = DLOCK__BEHIND_OR_ANY, .eval = 1 };
		at->give_back[k++] = (int)i;
		/* Not asked to acquire until it is taken back (engine.h). */
		dlock__link_release_due(at->link, i, 1);
	}
	at->nback = k;
	if (k == 0 || dlock__mux_loop_begin(&at->ml, at->loop, at->back, k, NULL, NULL,
				      give_back_over) < 0) {
		/* Nothing to give back (or no memory to): freed from the loop. */
		for (i = 0; i < k; i++)
			dlock__link_release_due(at->link, (size_t)at->give_back[i], -1);
		if (dlock__timer_set(at->loop, &at->give_back_done, 0) < 0)
			dlock__attempt_free(at);
	}
}

void dlock__parallel_settle(dlock__engine_op *o, int rc)
{
	struct dlock__attempt *at = o->tail;

	if (at == NULL)
		return;
	o->tail = NULL;
	at->o = NULL;
	at->fate = rc == 0 ? 1 : -1;
	if (at->run_over)
		dlock__attempt_settle(at);
}

