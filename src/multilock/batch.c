/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The engine's batches: one small call to many members at once (core/mux/mux.h)
 * - give back what a round took, set the real TTL once a quorum is held,
 * raise the fencing counters. The calls themselves come from single/.
 */
#include <stdint.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/mux/mux.h"
#include "core/base/time.h"
#include "multilock/parts.h"
#include "single/acquire.h"
#include "single/holds.h"
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
	memset(b, 0, sizeof(*b));
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

/* The rollback under way (o->waves): the counts still to give back. */
struct dlock__waves {
	int64_t *expect;
	int64_t count; /* this wave's */
	batch b;
	dlock__then then;
};

static void wave_next(dlock__engine_op *o);

/* A wave is over: what it gave back is recorded; the next one goes. */
static void wave_over(dlock__engine_op *o)
{
	struct dlock__waves *w = o->waves;
	batch *b = &w->b;
	size_t i;

	if (o->run_rc == 0)
		for (i = 0; i < b->k; i++) {
			dlock__member_try *mt = &o->t[b->which[i]];

			dlock__rollback_finish(o->e->members[b->which[i]], mt->owner_ptr,
					mt->believed, b->ops[i].rc, b->ops[i].reply);
		}
	for (i = 0; i < b->k; i++)
		o->t[b->which[i]].taken = o->t[b->which[i]].touched = 0; /* given back (or expiring) */
	batch_free(b);
	wave_next(o);
}

/* Give back, all at once, the members expecting the next count down. The
 * last wave need not wait for a slow server's answer. */
static void wave_next(dlock__engine_op *o)
{
	struct dlock__waves *w = o->waves;
	dlock__engine *e = o->e;
	dlock__mux_op *op;
	int64_t next;
	size_t i;

	w->count = next_wave(w->expect, e->n, w->count);
	if (w->count == 0 || batch_init(&w->b, e->n, sizeof(dlock__rollback)) < 0) {
		/* Done (or out of memory: the holds expire with their TTL). */
		dlock__then then = w->then;

		batch_free(&w->b);
		dlock__free(w->expect);
		dlock__free(w);
		o->waves = NULL;
		then(o);
		return;
	}
	next = next_wave(w->expect, e->n, w->count);
	for (i = 0; i < e->n; i++) {
		dlock__rollback *u = batch_next(&w->b);

		if (w->expect[i] != w->count)
			continue;
		dlock__rollback_prepare(e->members[i], o->t[i].owner_ptr, w->count, 0, u);
		op = batch_add(&w->b, e, i, &u->call);
		/* A server that just timed out would cost its timeout again: send
		 * the rollback and move on (it runs when the server does). */
		op->no_wait = next == 0 && dlock__member_is_slow(e, i);
		/* Unanswered (not waited for, or given up at its timeout), it
		 * must still run: EVALSHA would not on a server without the
		 * script (a NOSCRIPT nobody reads), and the grant would stay. */
		op->eval = 1;
	}
	dlock__engine_run(o, w->b.ops, w->b.k, NULL, NULL, wave_over);
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
void dlock__rollback_some(dlock__engine_op *o, const int *only, dlock__then then)
{
	struct dlock__waves *w = dlock__calloc(1, sizeof(*w));
	size_t i;

	if (w == NULL || (w->expect = dlock__calloc(o->e->n, sizeof(*w->expect))) == NULL) {
		dlock__free(w);
		then(o); /* the holds expire with their TTL */
		return;
	}
	for (i = 0; i < o->e->n; i++)
		w->expect[i] = rollback_expect(o->t, only, i);
	w->count = INT64_MAX;
	w->then = then;
	o->waves = w;
	wave_next(o);
}

/* The finalize or the fence under way (o->waves is not used by them). */
typedef struct single_batch {
	batch b;
	int64_t t_send;
	dlock__then then;
	struct fence_wait {
		size_t quorum;
		int64_t max;
	} fw;
} single_batch;

static single_batch *single_batch_new(dlock__engine_op *o, size_t call_size, dlock__then then)
{
	single_batch *sb = dlock__calloc(1, sizeof(*sb));

	if (sb != NULL && batch_init(&sb->b, o->e->n, call_size) < 0) {
		batch_free(&sb->b);
		dlock__free(sb);
		sb = NULL;
	}
	if (sb != NULL)
		sb->then = then;
	return sb;
}

static void single_batch_end(dlock__engine_op *o, single_batch *sb)
{
	dlock__then then = sb->then;

	batch_free(&sb->b);
	dlock__free(sb);
	o->step = NULL;
	then(o);
}

static void finalized(dlock__engine_op *o)
{
	single_batch *sb = o->step;
	batch *b = &sb->b;
	dlock__member_try *t = o->t;
	int64_t min_ttl = INT64_MAX;
	size_t i;

	o->validity = -1;
	for (i = 0; o->run_rc == 0 && i < b->k; i++) {
		dlock__member_try *mt = &t[b->which[i]];
		int64_t ttl = dlock__lock_ttl(o->e->members[b->which[i]], o->lease_ms);

		if (b->ops[i].rc == 0 && dlock__renew_succeeded(b->ops[i].reply)) {
			/* Its record still has the provisional lease: the key's is this. */
			dlock__holds_leased(o->e->members[b->which[i]], mt->owner_ptr, ttl, sb->t_send);
			if (mt->st.vote == DLOCK_VOTE_ACQUIRED && ttl < min_ttl)
				min_ttl = ttl;
			continue;
		}
		/* Gone already (its provisional lease ran out), or no answer. */
		dlock__try_fail(mt, b->ops[i].rc < 0 ? b->ops[i].rc : DLOCK_EEXPIRED,
				b->ops[i].rc < 0 ? b->ops[i].errmsg : "hold expired while acquiring");
	}
	if (o->run_rc == 0 && dlock__tries_count(t, o->e->n, DLOCK_VOTE_ACQUIRED) >= o->e->rules.quorum)
		o->validity = dlock__quorum_validity(
				min_ttl, dlock__now_ms() - sb->t_send, o->e->rules.drift_factor);
	single_batch_end(o, sb);
}

/*
 * Set every taken member's key to its TTL (guarded: only while our field is
 * there), all at once. Members whose hold is gone stop counting. The
 * validity is counted from the send; -1 without a quorum.
 */
void dlock__finalize(dlock__engine_op *o, dlock__then then)
{
	dlock__engine *e = o->e;
	single_batch *sb = single_batch_new(o, sizeof(dlock__renew), then);
	size_t i;

	o->validity = -1;
	if (sb == NULL) {
		then(o);
		return;
	}
	for (i = 0; i < e->n; i++) {
		dlock__renew *r = batch_next(&sb->b);

		if (o->t[i].st.vote != DLOCK_VOTE_ACQUIRED && o->t[i].st.vote != DLOCK_VOTE_YOUNG)
			continue;
		dlock__renew_prepare(e->members[i], o->t[i].owner_ptr,
				dlock__lock_ttl(e->members[i], o->lease_ms), r);
		batch_add(&sb->b, e, i, &r->call);
	}
	sb->t_send = dlock__now_ms();
	o->step = sb;
	dlock__engine_run(o, sb->b.ops, sb->b.k, NULL, NULL, finalized);
}

/*
 * The fenced quorum's token. Each server counts on its own, so take the
 * largest token the counted members gave and raise the counters to it
 * ("set if greater") before reporting success. Any later quorum shares at
 * least one server with the quorum that confirmed, whose counter is then
 * already >= the token, so the next holder's token is larger - as long as
 * that server kept its data (see redlock.h).
 */

/* Enough once a quorum holds the raised counter: that is what the argument needs. */
static int fence_decided(void *arg, const dlock__mux_op *ops, size_t n, int64_t *wake_at)
{
	const struct fence_wait *fw = arg;
	size_t i, raised = 0;

	(void)wake_at;
	for (i = 0; i < n; i++)
		raised += ops[i].rc == 0 && dlock__token_raised(ops[i].reply, fw->max);
	return raised >= fw->quorum;
}

static void fenced(dlock__engine_op *o)
{
	single_batch *sb = o->step;
	size_t i, raised = 0;

	for (i = 0; o->run_rc == 0 && i < sb->b.k; i++) {
		const dlock__mux_op *op = &sb->b.ops[i];
		dlock__member_try *mt = &o->t[sb->b.which[i]];

		if (op->rc == 0 && dlock__token_raised(op->reply, sb->fw.max))
			raised++;
		else if (op->undecided)
			continue; /* not waited for once a quorum had it */
		else if (mt->st.vote == DLOCK_VOTE_ACQUIRED)
			dlock__try_fail(mt, op->rc < 0 ? op->rc : DLOCK_ESERVER,
					op->rc < 0 ? op->errmsg : "fencing token not raised");
	}
	o->step_rc = o->run_rc < 0 ? o->run_rc : raised >= o->e->rules.quorum ? 0 : DLOCK_ENOQUORUM;
	o->token = sb->fw.max;
	single_batch_end(o, sb);
}

void dlock__fence(dlock__engine_op *o, dlock__then then)
{
	dlock__engine *e = o->e;
	single_batch *sb = single_batch_new(o, sizeof(dlock__token_raise), then);
	size_t i;

	if (sb == NULL) {
		o->step_rc = DLOCK_ENOMEM;
		then(o);
		return;
	}
	sb->fw = (struct fence_wait){ e->rules.quorum, 0 };
	for (i = 0; i < e->n; i++)
		if (o->t[i].st.vote == DLOCK_VOTE_ACQUIRED && o->t[i].token > sb->fw.max)
			sb->fw.max = o->t[i].token;
	/* Every member, not only the voters: the more servers know the token,
	 * the more restarts it survives. */
	for (i = 0; i < e->n; i++) {
		dlock__token_raise *r = batch_next(&sb->b);

		dlock__token_raise_prepare(e->members[i], sb->fw.max, r);
		batch_add(&sb->b, e, i, &r->call);
	}
	o->step = sb;
	dlock__engine_run(o, sb->b.ops, sb->b.k, fence_decided, &sb->fw, fenced);
}

/* The uptimes asked for a vote filter (dlock__ask_uptimes). */
typedef struct uptimes_asked {
	dlock__mux_op *ops;
	uint64_t *gen;
	size_t k;
	int64_t asked;
	dlock__then then;
} uptimes_asked;

static void uptimes_free(dlock__engine_op *o, uptimes_asked *q)
{
	if (q->ops != NULL)
		dlock__mux_clear(q->ops, q->k);
	dlock__free(q->ops);
	dlock__free(q->gen);
	dlock__free(q);
	o->step = NULL;
}

static void uptimes_answered(dlock__engine_op *o)
{
	uptimes_asked *q = o->step;
	dlock__then then = q->then;
	int64_t started;
	size_t i;

	for (i = 0; o->run_rc == 0 && i < q->k; i++)
		dlock__uptime_note(&q->ops[i], q->gen[i], q->asked, &started);
	uptimes_free(o, q);
	then(o);
}

void dlock__ask_uptimes(dlock__engine_op *o, dlock__then then)
{
	dlock__engine *e = o->e;
	uptimes_asked *q = dlock__calloc(1, sizeof(*q));
	size_t i;

	if (q == NULL || (q->ops = dlock__calloc(e->n, sizeof(*q->ops))) == NULL ||
			(q->gen = dlock__calloc(e->n, sizeof(*q->gen))) == NULL) {
		if (q != NULL)
			uptimes_free(o, q);
		then(o); /* the filter asks them itself */
		return;
	}
	for (i = 0; i < e->n; i++) {
		/* In a cluster: the member that serves the lock's key. */
		dlock_client *c = o->t[i].st.vote != DLOCK_VOTE_ACQUIRED
				? NULL
				: dlock__client_for_key(dlock__lock_client(e->members[i]),
						  dlock__lock_name(e->members[i]),
						  dlock__lock_name_len(e->members[i]));

		if (c != NULL && dlock__uptime_op(&q->ops[q->k], c, &q->gen[q->k]))
			q->k++;
	}
	if (q->k == 0) {
		uptimes_free(o, q);
		then(o);
		return;
	}
	q->then = then;
	q->asked = dlock__now_ms();
	o->step = q;
	dlock__engine_run(o, q->ops, q->k, NULL, NULL, uptimes_answered);
}
