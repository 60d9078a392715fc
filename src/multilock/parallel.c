/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The parallel attempt: the acquire script goes to every member at once;
 * as soon as a quorum took it, or a quorum became impossible, the round is
 * decided (quorum.c says when). Uncontended, that is one round trip
 * whatever n is.
 */
#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/drive/mux.h"
#include "core/drive/debts.h"
#include "core/drive/sync.h"
#include "core/base/time.h"
#include "multilock/parts.h"
#include "single/acquire.h"
#include "single/holds.h"
#include "single/member.h"

/* How long a server that timed out is not waited for: after that, it is
 * given one more chance of a command timeout. */
#define SLOW_WINDOW_MS 2000

int dlock__member_is_slow(const dlock__engine *e, size_t i)
{
	int64_t at = dlock__client_timed_out_at(dlock__lock_client(e->members[i]));

	return at != 0 && dlock__now_ms() < at + SLOW_WINDOW_MS;
}

/* Servers' uptimes asked beside the acquires (see ask_uptimes). */
typedef struct uptimes {
	size_t n;
	uint64_t *gen;  /* per uptime op: its client's connection generation */
	size_t *member; /* per uptime op: the member it rides behind */
	int64_t asked;
} uptimes;

/* The replica acknowledgements asked behind the acquires (see ask_syncs). */
typedef struct syncs {
	dlock__sync *cmd; /* per member: its WAIT's arguments */
	size_t *op;       /* per member: the index of its WAIT op; 0 when none */
	size_t n;
} syncs;

typedef struct attempt_wait {
	const dlock__engine *e;
	dlock__parallel *p;
	const uptimes *u;
	const syncs *s;
} attempt_wait;

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

static int reply_acquired(const dlock__mux_op *op)
{
	return op->rc == 0 && op->reply != NULL && op->reply->type == REDIS_REPLY_ARRAY;
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

/* The mux's stopping rule: tally the answers, let quorum.c decide. A
 * member whose acquire still waits for its replicas is pending. */
static int attempt_decided(void *arg, const dlock__mux_op *ops, size_t n, int64_t *wake_at)
{
	attempt_wait *w = arg;
	dlock__tally t = { w->e->n, 0, 0, 0, 0 };
	size_t i;

	(void)n; /* the acquires are the first e->n ops; uptimes and WAITs follow */
	for (i = 0; i < w->e->n; i++) {
		int acked = ops[i].rc == 0 && reply_acquired(&ops[i]) ? synced(w, ops, i) : 1;

		if (ops[i].rc < 0 || acked == 0) {
			t.failed++;
		} else if (acked < 0) {
			t.pending_live += !dlock__member_is_slow(w->e, i);
		} else if (ops[i].reply != NULL) {
			if (reply_acquired(&ops[i])) {
				t.ok++;
			} else {
				t.failed++;
				t.held += ops[i].reply->type == REDIS_REPLY_INTEGER;
			}
		} else if (ops[i].pending && !dlock__member_is_slow(w->e, i)) {
			t.pending_live++;
		}
	}
	return dlock__parallel_decided(w->p, &t, dlock__now_ms(), wake_at) && !uptime_due(w, ops);
}

/* Build member i's acquire into ops[i]; < 0 for an owner that is bad everywhere. */
static int prepare_member(dlock__engine *e, size_t i, dlock__member_try *t, const char *owner,
		int64_t lease_ms, dlock__acquire *acq, dlock__mux_op *op)
{
	dlock_lock *m = e->members[i];
	int rc = dlock__acquire_prepare(m, owner, 0, lease_ms, acq);

	if (rc < 0)
		return rc;
	if (dlock__client_owes(dlock__lock_client(m), dlock__lock_name(m), dlock__lock_name_len(m),
			    0) < 0) {
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
		if (op->undecided)
			t->st.vote = DLOCK_VOTE_NONE; /* decided without it */
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
	}
}

static void note_uptimes(dlock__engine *e, const dlock__mux_op *ops, const uptimes *u)
{
	int64_t started;

	for (size_t k = 0; k < u->n; k++)
		dlock__uptime_note(&ops[e->n + k], u->gen[k], u->asked, &started);
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

/* Record every answer; members taken whose replicas fell short are given back. */
static void record_answers(dlock__engine *e, dlock__member_try *t, dlock__acquire *acq,
		const dlock__mux_op *ops, const syncs *s, int *give_back)
{
	size_t i, n = 0;

	for (i = 0; i < e->n; i++) {
		give_back[i] = 0;
		if (!ops[i].skip) /* else its vote says why it was not asked */
			record_answer(e, i, &t[i], &acq[i], &ops[i],
					s->op[i] != 0 ? &ops[s->op[i]] : NULL, &give_back[i]);
		n += (size_t)give_back[i];
	}
	if (n > 0)
		dlock__rollback_some(e, t, give_back);
}

int dlock__parallel_attempt(dlock__engine *e, dlock__member_try *t, const char *owner,
		int64_t lease_ms, const int *ask, dlock__parallel *p, int64_t *t0)
{
	dlock__mux_op *ops = dlock__calloc(3 * e->n, sizeof(*ops));
	dlock__acquire *acq = dlock__calloc(e->n, sizeof(*acq));
	uptimes u = { 0, dlock__calloc(e->n, sizeof(*u.gen)),
		dlock__calloc(e->n, sizeof(*u.member)), 0 };
	syncs s = { dlock__calloc(e->n, sizeof(*s.cmd)), dlock__calloc(e->n, sizeof(*s.op)), 0 };
	int *give_back = dlock__calloc(e->n, sizeof(*give_back));
	attempt_wait w = { e, p, &u, &s };
	size_t i;
	int rc = 0;

	if (ops == NULL || acq == NULL || s.cmd == NULL || s.op == NULL || give_back == NULL) {
		rc = dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
		goto out;
	}
	for (i = 0; i < e->n && rc == 0; i++) {
		ops[i].skip = ask != NULL && !ask[i];
		if (!ops[i].skip)
			rc = prepare_member(e, i, &t[i], owner, lease_ms, &acq[i], &ops[i]);
	}
	if (rc < 0)
		goto out;
	ask_uptimes(e, p, ops, &u);
	ask_syncs(e, ops, e->n + u.n, &s);
	*t0 = p->started = dlock__now_ms();
	rc = dlock__mux_run(ops, e->n + u.n + s.n, attempt_decided, &w);
	if (rc == 0) {
		record_answers(e, t, acq, ops, &s, give_back);
		note_uptimes(e, ops, &u);
	}
out:
	if (ops != NULL)
		dlock__mux_clear(ops, e->n + u.n + s.n);
	dlock__free(ops);
	dlock__free(acq);
	dlock__free(u.gen);
	dlock__free(u.member);
	dlock__free(s.cmd);
	dlock__free(s.op);
	dlock__free(give_back);
	return rc;
}

/*
 * Once the ordered round holds a quorum, ask every member it did not take
 * at once, as the parallel attempt does (by `deadline`, the round's budget:
 * the wait is never extended): a bare quorum is the weakest grant, one
 * server whose clock runs fast away from a second holder. Members that did
 * not answer in time are given back at once (their acquire may have run).
 */
void dlock__take_the_rest(dlock__engine *e, dlock__member_try *t, const char *owner,
		int64_t lease_ms, int64_t deadline)
{
	dlock__parallel p = { 0, 0, 1, 0, 0, deadline };
	int *ask = dlock__calloc(e->n, sizeof(*ask));
	size_t i, n = 0;
	int64_t t0;

	if (ask == NULL)
		return; /* the quorum stands; this was an extra */
	for (i = 0; i < e->n; i++) {
		ask[i] = t[i].st.vote != DLOCK_VOTE_ACQUIRED && t[i].st.vote != DLOCK_VOTE_YOUNG &&
				!dlock__member_is_slow(e, i);
		n += ask[i];
	}
	if (n > 0 && dlock__now_ms() < deadline &&
			dlock__parallel_attempt(e, t, owner, lease_ms, ask, &p, &t0) == 0) {
		for (i = 0; i < e->n; i++)
			ask[i] = ask[i] && t[i].taken == 0 && t[i].touched;
		dlock__rollback_some(e, t, ask);
	}
	dlock__free(ask);
}
