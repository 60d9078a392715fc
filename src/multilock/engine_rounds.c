/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An acquisition's steps, from the parallel attempt's end on (its start,
 * engine_acquire.c, runs step 1 or goes to step 2 at once):
 *
 * 1. The parallel attempt decided at a quorum, or when a quorum became
 *    impossible: a grant, or everything taken given back.
 * 2. Redisson's ordered round, again and again while time remains, with a
 *    pause between rounds (a jitter after contention, a backoff after
 *    errors).
 * 3. A quorum from the ordered round gets its real TTL (finalize); a
 *    fenced quorum raises the counters to its token; the validity decides.
 *
 * Each function below is a step's end; conclude() is the acquisition's.
 */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/base/ids.h"
#include "core/base/time.h"
#include "core/base/fields.h"
#include "multilock/parts.h"
#include "single/holds.h"
#include "single/member.h"

/* Redisson's MultiLock lock(): a wait of 1500 ms per member per round. */
#define ROUND_MS_PER_MEMBER 1500

/* Keep each member's latest answer across rounds: a round cut short by the
 * deadline leaves the members it did not reach unasked. */
static void merge_votes(dlock__engine_op *o)
{
	size_t i;

	for (i = 0; i < o->e->n; i++)
		if (o->t[i].st.vote != DLOCK_VOTE_NONE)
			o->seen[i] = o->t[i].st;
}

/* Apply the vote filter (RedLock's restart guard); 1 when a quorum still
 * stands. The uptimes it needs are known by now (asked beside). */
static int filtered_quorum(dlock__engine_op *o)
{
	dlock__engine *e = o->e;

	if (e->rules.filter != NULL)
		e->rules.filter(e->rules.filter_arg, e->members, o->t, e->n, o->lease_ms);
	return dlock__tries_count(o->t, e->n, DLOCK_VOTE_ACQUIRED) >= e->rules.quorum;
}

/* The failure as a code and a message that names every member's part. */
static int failure(dlock__engine_op *o)
{
	dlock__engine *e = o->e;
	const dlock_member_status *seen = o->seen;
	char msg[DLOCK__ERRMSG_MAX];
	int rc = dlock__quorum_failure(seen, e->n, e->rules.quorum, o->expired);
	size_t i, n;

	n = (size_t)snprintf(msg, sizeof(msg), "lock %s: %s: ", dlock__lock_shown(e->members[0]),
			dlock_strerror(rc));
	if (n < sizeof(msg))
		n += (size_t)dlock__quorum_tally_text(
				msg + n, sizeof(msg) - n, seen, e->n, e->rules.quorum);
	for (i = 0; i < e->n && n < sizeof(msg); i++)
		if (seen[i].vote == DLOCK_VOTE_ERROR || seen[i].vote == DLOCK_VOTE_YOUNG)
			n += (size_t)snprintf(msg + n, sizeof(msg) - n, "; %s", seen[i].message);
	return dlock__seterr(rc, "%s", msg);
}

static int canceled_error(dlock__engine_op *o)
{
	return dlock__seterr(DLOCK_ECANCELED, "lock %s: the acquisition was canceled",
			dlock__lock_shown(o->e->members[0]));
}

/* The end, whatever it is: the first connections may just have shown two
 * members to be one server (nothing is held then: a grant checks first);
 * the status describes this acquisition. */
static void conclude(dlock__engine_op *o, int rc)
{
	dlock__engine *e = o->e;
	int dup;

	if (rc < 0 && rc != DLOCK_ENOMEM && (dup = dlock__engine_servers_check(e)) < 0)
		rc = dup;
	dlock__mutex_lock(&e->mu);
	memcpy(e->status, o->seen, e->n * sizeof(*o->seen));
	dlock__mutex_unlock(&e->mu);
	dlock__engine_stat_acquire(o, rc);
	dlock__parallel_settle(o, rc);
	dlock__engine_op_end(o, rc);
}

static void conclude_failed(dlock__engine_op *o)
{
	conclude(o, failure(o));
}

void dlock__engine_canceled(dlock__engine_op *o)
{
	conclude(o, canceled_error(o));
}

/* A grant that turned out unsafe, or canceled: given back, then the end. */
static void give_back_and(dlock__engine_op *o, dlock__then then)
{
	dlock__rollback_some(o, NULL, then);
}

static void granted(dlock__engine_op *o)
{
	if (o->canceling) {
		give_back_and(o, dlock__engine_canceled);
		return;
	}
	dlock__loss_arm(o->e, o->t);
	conclude(o, 0);
}

static void fence_given_back(dlock__engine_op *o)
{
	merge_votes(o);
	conclude(o, o->step_rc == DLOCK_ENOMEM
				? dlock__seterr(DLOCK_ENOMEM, "lock %s: out of memory fencing",
						  dlock__lock_shown(o->e->members[0]))
				: failure(o));
}

static void fenced(dlock__engine_op *o)
{
	/* The keys' TTLs kept running while the token was written back. */
	o->validity -= dlock__now_ms() - o->fence_start;
	if (o->step_rc == 0 && o->e->rules.check_validity && o->validity <= 0)
		o->step_rc = DLOCK_EEXPIRED;
	if (o->step_rc < 0) {
		/* Too few counters took the token, or the TTL ran out meanwhile:
		 * not a safe grant. */
		o->expired = o->step_rc == DLOCK_EEXPIRED;
		give_back_and(o, fence_given_back);
		return;
	}
	granted(o);
}

static void duplicate_given_back(dlock__engine_op *o)
{
	conclude(o, o->step_rc);
}

/* Step 3: a quorum is held - unless two members are one server after all;
 * a fenced quorum's token, then the grant. */
static void grant(dlock__engine_op *o)
{
	dlock__engine *e = o->e;
	size_t i;
	int dup = dlock__engine_servers_check(e);

	if (dup < 0) {
		o->step_rc = dup;
		give_back_and(o, duplicate_given_back);
		return;
	}
	/* The status describes this grant: earlier rounds were given back. */
	for (i = 0; i < e->n; i++)
		o->seen[i] = o->t[i].st;
	if (!e->fenced) {
		granted(o);
		return;
	}
	o->fence_start = dlock__now_ms();
	dlock__fence(o, fenced);
}

static int64_t time_left(const dlock__engine_op *o)
{
	return o->deadline == DLOCK__NEVER ? INT64_MAX : o->deadline - dlock__now_ms();
}

static int canceled(const dlock__engine_op *o)
{
	size_t i;

	if (o->canceling)
		return 1;
	for (i = 0; i < o->e->n; i++)
		if (dlock__client_cancels(dlock__lock_client(o->e->members[i])) != o->cancels[i])
			return 1;
	return 0;
}

/*
 * Members that failed in a way no wait heals although their error says a
 * connection failed: a TLS refusal, or a server that never answered and
 * whose first-contact period ends before `next`, the next round (its
 * message says so). The quorum engine stops waiting for them.
 */
static size_t members_gone(dlock__engine_op *o, int64_t next)
{
	size_t i, gone = 0;

	for (i = 0; i < o->e->n; i++) {
		dlock_member_status *st = &o->seen[i];
		dlock_client *c = dlock__lock_client(o->e->members[i]);
		size_t len = strlen(st->message);

		if (st->vote != DLOCK_VOTE_ERROR)
			continue;
		if (dlock__client_refused(c, st->error)) {
			gone++;
		} else if (dlock__client_first_contact_over(c, st->error, o->started, next)) {
			gone++;
			st->error = DLOCK_ECONN;
			if (strstr(st->message, DLOCK__NEVER_ANSWERED) == NULL)
				snprintf(st->message + len, sizeof(st->message) - len, "%s",
						DLOCK__NEVER_ANSWERED);
		}
	}
	return gone;
}

/* A round failed (everything given back): the pause, or the end. */
static void round_failed(dlock__engine_op *o)
{
	dlock__engine *e = o->e;
	int64_t pause;
	int contention;

	merge_votes(o);
	if (o->canceling) {
		dlock__engine_canceled(o);
		return;
	}
	if (o->wait_ms == 0) {
		conclude_failed(o);
		return;
	}
	contention = dlock__tries_count(o->t, e->n, DLOCK_VOTE_HELD) > 0 ||
			dlock__tries_count(o->t, e->n, DLOCK_VOTE_YOUNG) > 0;
	pause = dlock__backoff_next(&o->backoff, contention, time_left(o), dlock__random());
	if (dlock__quorum_hopeless(o->seen, e->n, e->rules.quorum,
			    members_gone(o, dlock__now_ms() + pause))) {
		conclude_failed(o);
		return;
	}
	dlock__engine_pause(o, pause, dlock__engine_rounds);
}

static void finalized(dlock__engine_op *o)
{
	merge_votes(o);
	if (o->canceling) {
		give_back_and(o, round_failed);
		return;
	}
	if (o->validity > 0 ||
			(!o->e->rules.check_validity &&
					dlock__tries_count(o->t, o->e->n, DLOCK_VOTE_ACQUIRED) >=
							o->e->rules.quorum)) {
		grant(o);
		return;
	}
	o->expired = 1;
	give_back_and(o, round_failed);
}

/* A quorum from the ordered round, its uptimes known: judged, then given
 * its real TTL (finalize). */
static void round_judged(dlock__engine_op *o)
{
	if (o->canceling || !filtered_quorum(o)) {
		give_back_and(o, round_failed);
		return;
	}
	if (o->e->test_hook != NULL)
		o->e->test_hook("finalize", o->e->test_hook_arg);
	dlock__finalize(o, finalized);
}

static void round_over(dlock__engine_op *o)
{
	if (o->step_rc < 0) {
		conclude(o, o->step_rc);
		return;
	}
	if (o->step_rc == 0) {
		round_failed(o);
		return;
	}
	if (o->e->rules.filter != NULL)
		dlock__ask_uptimes(o, round_judged);
	else
		round_judged(o);
}

/* Step 2: rounds until a quorum, the deadline, a cancel or a hopeless failure. */
void dlock__engine_rounds(dlock__engine_op *o)
{
	dlock__engine *e = o->e;
	int64_t left = time_left(o), round_ms = (int64_t)e->n * ROUND_MS_PER_MEMBER;
	int rc;

	/* Connected by now: two members may turn out to be one server. */
	if ((rc = dlock__engine_servers_check(e)) < 0) {
		conclude(o, rc);
		return;
	}
	if (left <= 0 && o->wait_ms != 0) {
		conclude_failed(o);
		return;
	}
	if (canceled(o)) {
		conclude(o, dlock__seterr(DLOCK_ECANCELED, "lock %s: the wait was canceled",
				    dlock__lock_shown(e->members[0])));
		return;
	}
	if (round_ms > left)
		round_ms = left > 0 ? left : 0;
	dlock__tries_reset(e, o->t, o->owner);
	o->expired = 0;
	o->rounds++;
	dlock__ordered_round(o, round_ms, round_over);
}

static void parallel_given_back(dlock__engine_op *o)
{
	if (o->canceling)
		dlock__engine_canceled(o);
	else if (o->wait_ms == 0)
		conclude_failed(o);
	else
		dlock__engine_rounds(o);
}

/*
 * Step 1 ends. A lock held for long (the watchdog) holds every member it
 * can, to survive the most failures: it waited for all, within the command
 * timeout. A leased lock decided at the quorum, after a short grace.
 */
void dlock__engine_parallel_over(dlock__engine_op *o)
{
	dlock__engine *e = o->e;
	int64_t ttl = INT64_MAX;
	size_t i;

	if (o->step_rc < 0) {
		conclude(o, o->step_rc);
		return;
	}
	merge_votes(o);
	if (!o->canceling && filtered_quorum(o)) {
		for (i = 0; i < e->n; i++)
			if (o->t[i].st.vote == DLOCK_VOTE_ACQUIRED &&
					dlock__lock_ttl(e->members[i], o->lease_ms) < ttl)
				ttl = dlock__lock_ttl(e->members[i], o->lease_ms);
		/* The TTLs were set by commands sent at t0 or later. */
		o->validity = dlock__quorum_validity(
				ttl, dlock__now_ms() - o->t0, e->rules.drift_factor);
		if (!e->rules.check_validity || o->validity > 0) {
			grant(o);
			return;
		}
		o->expired = 1;
	}
	/* Late grants of this attempt are given back, not joined to a later round. */
	dlock__parallel_settle(o, DLOCK_ENOTACQUIRED);
	merge_votes(o);
	give_back_and(o, parallel_given_back);
}
