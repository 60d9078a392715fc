/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine's batches: one small call to many members at once (core/drive/mux.h)
 * - give back what a round took, set the real TTL once a quorum is held,
 * raise the fencing counters. The calls themselves come from single/.
 */
#include <stdint.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/mux.h"
#include "core/base/time.h"
#include "multilock/parts.h"
#include "single/acquire.h"
#include "single/member.h"

/* Ops and their calls: ops[k] runs calls[k] on member which[k]. */
typedef struct batch {
	dlock__mux_op *ops;
	size_t *which;
	unsigned char *calls;
	size_t call_size;
	size_t k;
} batch;

static int batch_init(batch *b, size_t n, size_t call_size)
{
	b->ops = dlock__calloc(n, sizeof(*b->ops));
	b->which = dlock__calloc(n, sizeof(*b->which));
	b->calls = dlock__calloc(n, call_size);
	b->call_size = call_size;
	b->k = 0;
	return b->ops != NULL && b->which != NULL && b->calls != NULL ? 0 : DLOCK_ENOMEM;
}

/* The next call's storage, for member i (its op is filled by batch_add). */
static void *batch_next(batch *b)
{
	return b->calls + b->k * b->call_size;
}

/* Queue the call just built in batch_next() for member i. */
static dlock__mux_op *batch_add(batch *b, dlock__engine *e, size_t i, const dlock__call *call)
{
	dlock__mux_op *op = &b->ops[b->k];

	op->client = dlock__lock_client(e->members[i]);
	op->call = call;
	b->which[b->k++] = i;
	return op;
}

static void batch_free(batch *b)
{
	if (b->ops != NULL)
		dlock__mux_clear(b->ops, b->k);
	dlock__free(b->ops);
	dlock__free(b->which);
	dlock__free(b->calls);
}

/* What member i's rollback expects to find (see below); 0: nothing to give back. */
static int64_t rollback_expect(const dlock__member_try *t, const int *only, size_t i)
{
	if (only != NULL && !only[i])
		return 0;
	/* By what was taken, not by the vote: a later step (the TTL reset,
	 * the fencing write-back) may have turned it into an error. */
	if (t[i].taken > 0)
		return t[i].taken;
	if (t[i].touched && t[i].believed >= 0)
		return t[i].believed + 1;
	return 0;
}

/* The highest count below `below` that some member still expects; 0: none. */
static int64_t next_wave(const int64_t *expect, size_t n, int64_t below)
{
	int64_t top = 0;
	size_t i;

	for (i = 0; i < n; i++)
		if (expect[i] < below && expect[i] > top)
			top = expect[i];
	return top;
}

/* Give back, all at once, the members expecting `count`. `last`: no wave
 * follows, so a slow server's answer need not be waited for. */
static void rollback_wave(dlock__engine *e, dlock__member_try *t, const int64_t *expect,
		int64_t count, int last)
{
	batch b;
	size_t i;

	if (batch_init(&b, e->n, sizeof(dlock__rollback)) < 0)
		goto out; /* the holds expire with their TTL */
	for (i = 0; i < e->n; i++) {
		dlock__rollback *u = batch_next(&b);

		if (expect[i] != count)
			continue;
		dlock__rollback_prepare(e->members[i], t[i].owner_ptr, count, 0, u);
		/* A server that just timed out would cost its timeout again: send
		 * the rollback and move on (it runs when the server does). */
		batch_add(&b, e, i, &u->call)->no_wait = last && dlock__member_is_slow(e, i);
	}
	if (b.k > 0 && dlock__mux_run(b.ops, b.k, NULL, NULL) == 0)
		for (i = 0; i < b.k; i++) {
			dlock__member_try *mt = &t[b.which[i]];

			dlock__rollback_finish(e->members[b.which[i]], mt->owner_ptr, mt->believed,
					b.ops[i].rc, b.ops[i].reply);
		}
	for (i = 0; i < b.k; i++)
		t[b.which[i]].taken = t[b.which[i]].touched = 0; /* given back (or expiring) */
out:
	batch_free(&b);
}

/*
 * Give back every member this round may have taken: those it took (count
 * known) and those whose command may have run (count = the owner's count
 * before plus one). The rollback script only releases a hold whose count is
 * exactly that, so a command that never ran costs nothing. Two members may
 * be one key on one server before anything shows it (a socket and a TCP
 * port): that hold was re-entered (counts 1 and 2), and a count of 1 sent
 * beside the 2 may run first and find 2. So the highest counts go first,
 * one batch per count; usually every count is 1 and that is one batch.
 */
void dlock__rollback_some(dlock__engine *e, dlock__member_try *t, const int *only)
{
	int64_t *expect = dlock__calloc(e->n, sizeof(*expect)), count, next;
	size_t i;

	if (expect == NULL)
		return; /* the holds expire with their TTL */
	for (i = 0; i < e->n; i++)
		expect[i] = rollback_expect(t, only, i);
	for (count = next_wave(expect, e->n, INT64_MAX); count > 0; count = next) {
		next = next_wave(expect, e->n, count);
		rollback_wave(e, t, expect, count, next == 0);
	}
	dlock__free(expect);
}

/*
 * Set every taken member's key to its TTL (guarded: only while our field is
 * there), all at once. Members whose hold is gone stop counting. Returns
 * the validity, counted from the send; -1 without a quorum.
 */
int64_t dlock__finalize(dlock__engine *e, dlock__member_try *t, int64_t lease_ms)
{
	int64_t t_send, min_ttl = INT64_MAX, validity = -1;
	batch b;
	size_t i;

	if (batch_init(&b, e->n, sizeof(dlock__renew)) < 0)
		goto out;
	for (i = 0; i < e->n; i++) {
		dlock__renew *r = batch_next(&b);

		if (t[i].st.vote != DLOCK_VOTE_ACQUIRED && t[i].st.vote != DLOCK_VOTE_YOUNG)
			continue;
		dlock__renew_prepare(e->members[i], t[i].owner_ptr,
				dlock__lock_ttl(e->members[i], lease_ms), r);
		batch_add(&b, e, i, &r->call);
	}
	t_send = dlock__now_ms();
	if (dlock__mux_run(b.ops, b.k, NULL, NULL) < 0)
		goto out;
	for (i = 0; i < b.k; i++) {
		dlock__member_try *mt = &t[b.which[i]];
		int64_t ttl = dlock__lock_ttl(e->members[b.which[i]], lease_ms);

		if (b.ops[i].rc == 0 && dlock__renew_succeeded(b.ops[i].reply)) {
			if (mt->st.vote == DLOCK_VOTE_ACQUIRED && ttl < min_ttl)
				min_ttl = ttl;
			continue;
		}
		/* Gone already (its provisional lease ran out), or no answer. */
		dlock__try_fail(mt, b.ops[i].rc < 0 ? b.ops[i].rc : DLOCK_EEXPIRED,
				b.ops[i].rc < 0 ? b.ops[i].errmsg : "hold expired while acquiring");
	}
	if (dlock__tries_count(t, e->n, DLOCK_VOTE_ACQUIRED) >= e->rules.quorum)
		validity = dlock__quorum_validity(
				min_ttl, dlock__now_ms() - t_send, e->rules.drift_factor);
out:
	batch_free(&b);
	return validity;
}

/*
 * The fenced quorum's token. Each server counts on its own, so take the
 * largest token the counted members gave and raise the counters to it
 * ("set if greater") before reporting success. Any later quorum shares at
 * least one server with the quorum that confirmed, whose counter is then
 * already >= the token, so the next holder's token is larger - as long as
 * that server kept its data (see redlock.h).
 */
typedef struct fence_wait {
	size_t quorum;
	int64_t max;
} fence_wait;

/* Enough once a quorum holds the raised counter: that is what the argument needs. */
static int fence_decided(void *arg, const dlock__mux_op *ops, size_t n, int64_t *wake_at)
{
	const fence_wait *fw = arg;
	size_t i, raised = 0;

	(void)wake_at;
	for (i = 0; i < n; i++)
		raised += ops[i].rc == 0 && dlock__token_raised(ops[i].reply, fw->max);
	return raised >= fw->quorum;
}

int dlock__fence(dlock__engine *e, dlock__member_try *t, int64_t *token)
{
	fence_wait fw = { e->rules.quorum, 0 };
	size_t i, raised = 0;
	batch b;
	int rc = DLOCK_ENOMEM;

	if (batch_init(&b, e->n, sizeof(dlock__token_raise)) < 0)
		goto out;
	for (i = 0; i < e->n; i++)
		if (t[i].st.vote == DLOCK_VOTE_ACQUIRED && t[i].token > fw.max)
			fw.max = t[i].token;
	/* Every member, not only the voters: the more servers know the token,
	 * the more restarts it survives. */
	for (i = 0; i < e->n; i++) {
		dlock__token_raise *r = batch_next(&b);

		dlock__token_raise_prepare(e->members[i], fw.max, r);
		batch_add(&b, e, i, &r->call);
	}
	rc = dlock__mux_run(b.ops, b.k, fence_decided, &fw);
	for (i = 0; rc == 0 && i < b.k; i++) {
		const dlock__mux_op *op = &b.ops[i];

		if (op->rc == 0 && dlock__token_raised(op->reply, fw.max))
			raised++;
		else if (op->undecided)
			continue; /* not waited for once a quorum had it */
		else if (t[b.which[i]].st.vote == DLOCK_VOTE_ACQUIRED)
			dlock__try_fail(&t[b.which[i]], op->rc < 0 ? op->rc : DLOCK_ESERVER,
					op->rc < 0 ? op->errmsg : "fencing token not raised");
	}
	if (rc == 0)
		rc = raised >= e->rules.quorum ? 0 : DLOCK_ENOQUORUM;
	*token = fw.max;
out:
	batch_free(&b);
	return rc;
}
