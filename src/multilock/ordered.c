/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Redisson's ordered loop: members in order, each waiting up to its budget
 * (MultiLock: all the remaining time; RedLock: max(remaining/n, 1) ms),
 * failures counted against the limit n - quorum; when the limit is
 * exceeded, everything taken is given back. Going in order is what
 * guarantees progress: a contender that failed on a member never holds a
 * later one. Members taken hold a provisional lease long enough to survive
 * the round; finalize (batch.c) sets the real TTL.
 */
#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/time.h"
#include "multilock/parts.h"
#include "single/acquire.h"
#include "single/holds.h"
#include "single/member.h"

/* What one member's acquire in order says of the round. */
enum step { STEP_NEXT, STEP_QUORUM, STEP_FAILED };

/* The round under way (o->round). */
struct dlock__round {
	int64_t round_ms, round_end, provisional;
	size_t i, acquired, failures_left;
	int single_attempts;
	dlock__then then;
	/* Once a quorum is held: the rest asked at once. */
	dlock__parallel rest;
	int64_t rest_t0;
	int *ask;
};

static int64_t member_wait(
		const dlock__engine *e, int64_t round_ms, int64_t left, int single_attempts)
{
	int64_t wait = round_ms;

	if (single_attempts)
		return 0;
	if (e->rules.share_wait) {
		wait = round_ms / (int64_t)e->n;
		if (wait < 1)
			wait = 1;
	}
	if (wait > left)
		wait = left > 0 ? left : 0;
	return wait;
}

/* Member i's acquire ended with rc: what it means against the limit. */
static enum step judge_member(dlock__engine_op *o, int rc, const char *msg, int64_t token,
		int64_t holder_ttl)
{
	struct dlock__round *r = o->round;
	dlock_lock *m = o->e->members[r->i];
	dlock__member_try *t = &o->t[r->i];

	if (rc < 0)
		dlock__lock_record(m, dlock__seterr(rc, "%s", msg));
	if (rc == 0) {
		t->st.vote = DLOCK_VOTE_ACQUIRED;
		t->token = token;
		t->count = t->taken = dlock__holds_count(m, t->owner_ptr, 1);
		return ++r->acquired >= o->e->rules.quorum ? STEP_QUORUM : STEP_NEXT;
	}
	if (rc == DLOCK_ECANCELED) {
		dlock__try_fail(t, rc, msg);
		return STEP_FAILED;
	}
	if (rc == DLOCK_ENOTACQUIRED) {
		t->st.vote = DLOCK_VOTE_HELD;
		t->st.ttl_ms = holder_ttl;
	} else {
		dlock__try_fail(t, rc, msg);
		t->touched = 1; /* it may have reached the server */
	}
	if (r->failures_left == 0)
		return STEP_FAILED;
	--r->failures_left;
	return STEP_NEXT;
}

static void round_end(dlock__engine_op *o, int won)
{
	struct dlock__round *r = o->round;
	dlock__then then = r->then;

	o->round = NULL;
	dlock__free(r->ask);
	dlock__free(r);
	o->step_rc = won;
	then(o);
}

static void round_lost(dlock__engine_op *o)
{
	round_end(o, 0);
}

static void round_won(dlock__engine_op *o)
{
	round_end(o, 1);
}

/* Failed, out of time, or canceled: give back what was taken. */
static void give_up(dlock__engine_op *o)
{
	dlock__rollback_some(o, NULL, round_lost);
}

/* The extra members were asked: those that did not answer in time are
 * given back at once (their acquire may have run). */
static void rest_asked(dlock__engine_op *o)
{
	struct dlock__round *r = o->round;
	size_t i;

	for (i = 0; i < o->e->n; i++)
		r->ask[i] = r->ask[i] && o->t[i].taken == 0 && o->t[i].touched;
	dlock__rollback_some(o, r->ask, round_won);
}

/*
 * Once the ordered round holds a quorum, ask every member it did not take
 * at once, as the parallel attempt does (by the round's end: the wait is
 * never extended): a bare quorum is the weakest grant, one server whose
 * clock runs fast away from a second holder.
 */
static void take_the_rest(dlock__engine_op *o)
{
	struct dlock__round *r = o->round;
	size_t i, n = 0;

	r->rest = (dlock__parallel){ 0, 0, 1, 0, 0, r->round_end };
	for (i = 0; i < o->e->n; i++) {
		r->ask[i] = o->t[i].st.vote != DLOCK_VOTE_ACQUIRED &&
				o->t[i].st.vote != DLOCK_VOTE_YOUNG && !dlock__member_is_slow(o->e, i);
		n += (size_t)r->ask[i];
	}
	if (n == 0 || dlock__now_ms() >= r->round_end) {
		round_won(o); /* the quorum stands; the rest was an extra */
		return;
	}
	dlock__parallel_attempt(o, r->provisional, r->ask, &r->rest, &r->rest_t0, rest_asked);
}

static void take_next(dlock__engine_op *o);

static void after_member(dlock__engine_op *o, int rc, const char *msg, int64_t token,
		int64_t holder_ttl)
{
	struct dlock__round *r = o->round;
	enum step s = judge_member(o, rc, msg, token, holder_ttl);

	if (s == STEP_QUORUM && !o->canceling) {
		take_the_rest(o);
		return;
	}
	if (s != STEP_NEXT || o->canceling || ++r->i == o->e->n ||
			(!r->single_attempts && dlock__now_ms() >= r->round_end)) {
		give_up(o);
		return;
	}
	take_next(o);
}

static void member_answered(dlock_op *child, const dlock_result *res, void *userdata)
{
	dlock__engine_op *o = userdata;

	(void)child;
	o->child = NULL;
	after_member(o, res->code, res->message, res->token, res->holder_ttl_ms);
}

/* Take member i within its share of the round. */
static void take_next(dlock__engine_op *o)
{
	struct dlock__round *r = o->round;
	dlock_lock *m = o->e->members[r->i];
	dlock__member_try *t = &o->t[r->i];
	int64_t wait = member_wait(o->e, r->round_ms, r->round_end - dlock__now_ms(),
			r->single_attempts);
	int rc;

	t->believed = dlock__holds_count(m, t->owner_ptr, 1);
	if (t->believed < 0 && (o->owner == NULL || o->vouched))
		t->believed = 0;
	/* owner NULL (the thread's own), not its spelled-out string: the
	 * acquire trusts only the former to adopt holds our lost replies left. */
	rc = dlock__lock_acquire_start(&o->child, o->op.loop, m, o->owner, o->vouched, wait,
			r->provisional,
			o->cancels[r->i], member_answered, o);
	if (rc < 0)
		after_member(o, rc, dlock__errmsg_thread(), 0, -1);
}

void dlock__ordered_round(dlock__engine_op *o, int64_t round_ms, dlock__then then)
{
	struct dlock__round *r = dlock__calloc(1, sizeof(*r));
	int64_t lease_ms = o->lease_ms;

	if (r == NULL || (r->ask = dlock__calloc(o->e->n, sizeof(*r->ask))) == NULL) {
		dlock__free(r);
		dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
		o->step_rc = DLOCK_ENOMEM;
		then(o);
		return;
	}
	r->round_ms = round_ms;
	r->round_end = dlock__now_ms() + round_ms;
	r->provisional = lease_ms > 0 ? (lease_ms > 2 * round_ms ? lease_ms : 2 * round_ms)
				      : DLOCK_LEASE_WATCHDOG;
	r->failures_left = o->e->n - o->e->rules.quorum;
	r->single_attempts = o->wait_ms == 0;
	r->then = then;
	o->round = r;
	take_next(o);
}
