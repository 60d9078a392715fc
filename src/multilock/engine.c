/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The quorum engine: Redisson's MultiLock loop, with a parallel first
 * attempt in front and Redlock's validity rule behind (parts.h lists the
 * files). This file drives an acquisition:
 *
 * 1. The parallel attempt (RedLock always; MultiLock when it may wait):
 *    decided at a quorum, or when a quorum became impossible.
 * 2. Otherwise everything taken is given back and Redisson's ordered round
 *    runs, again and again while time remains, with a pause between rounds
 *    (a jitter after contention, a backoff after errors).
 * 3. A quorum from the ordered round gets its real TTL (finalize); a
 *    fenced quorum raises the counters to its token; the validity decides.
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
/* A random pause before a new round, so that competing clients fall out of step. */
#define RETRY_JITTER_MS 50
/* After a round that failed on errors alone, the next waits this, doubling. */
#define RETRY_MIN_MS 50
#define RETRY_MAX_MS 1000

/* A member that is another one again, itself or on the same server (servers.c). */
static int check_members(dlock_lock *const *members, size_t n, const dlock__rules *rules)
{
	size_t i, j;

	if (members == NULL || n == 0)
		return dlock__seterr(DLOCK_EINVAL, "multilock: no members");
	for (i = 0; i < n; i++) {
		if (members[i] == NULL)
			return dlock__seterr(DLOCK_EINVAL, "multilock: member %zu is NULL", i);
		for (j = 0; j < i; j++)
			if (members[j] == members[i])
				return dlock__seterr(DLOCK_EINVAL,
						"multilock: member %zu is member %zu again", i, j);
	}
	for (i = 1; i < n; i++)
		if (dlock__lock_is_fenced(members[i]) != dlock__lock_is_fenced(members[0]))
			return dlock__seterr(DLOCK_EINVAL,
					"multilock: fenced and unfenced members cannot be mixed");
	return dlock__members_distinct(members, n, rules);
}

int dlock__engine_init(dlock__engine *e, dlock_lock *const *members, size_t n,
		const dlock__rules *rules, void *self)
{
	int rc;

	memset(e, 0, sizeof(*e));
	if ((rc = check_members(members, n, rules)) < 0)
		return rc;
	e->members = dlock__calloc(n, sizeof(*e->members));
	e->status = dlock__calloc(n, sizeof(*e->status));
	e->release_ran = dlock__calloc(n, sizeof(*e->release_ran));
	e->release_due = dlock__calloc(n, sizeof(*e->release_due));
	e->link = dlock__link_new(e);
	if (e->members == NULL || e->status == NULL || e->link == NULL || e->release_ran == NULL ||
			e->release_due == NULL) {
		dlock__link_unref(e->link);
		dlock__free(e->release_ran);
		dlock__free(e->release_due);
		dlock__free(e->members);
		dlock__free(e->status);
		e->members = NULL;
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	}
	memcpy(e->members, members, n * sizeof(*members));
	e->n = n;
	e->rules = *rules;
	e->self = self;
	e->fenced = dlock__lock_is_fenced(members[0]);
	dlock__tries_reset(e, NULL, NULL);
	if (dlock__errbuf_init(&e->err) != 0 || pthread_mutex_init(&e->mu, NULL) != 0)
		abort();
	return 0;
}

void dlock__engine_destroy(dlock__engine *e)
{
	size_t i;

	if (e->members == NULL)
		return;
	dlock__link_cut(e->link);
	for (i = 0; i < e->n; i++)
		dlock__holds_unobserve(e->members[i], e);
	while (e->narmed > 0)
		dlock__free(e->armed[--e->narmed]);
	dlock__free(e->armed);
	dlock__free(e->members);
	dlock__free(e->status);
	dlock__free(e->release_ran);
	dlock__free(e->release_due);
	dlock__errbuf_destroy(&e->err);
	pthread_mutex_destroy(&e->mu);
	e->members = NULL;
}

int dlock__engine_owner_is_ours(const dlock__engine *e, const char *owner)
{
	size_t i;

	for (i = 0; owner != NULL && i < e->n; i++) {
		const char *id = dlock_client_id(dlock__lock_client(e->members[i]));

		if (strncmp(owner, id, 36) == 0 && owner[36] == ':')
			return 1;
	}
	return 0;
}

int dlock__engine_owner(char owner[DLOCK_OWNER_SIZE], const dlock__engine *e, uint64_t id)
{
	return dlock_client_owner(owner, dlock__lock_client(e->members[0]), id);
}

const char *dlock__member_owner(const dlock__engine *e, size_t i, const char *owner, char buf[64])
{
	if (owner != NULL)
		return owner;
	dlock_client_owner(buf, dlock__lock_client(e->members[i]), dlock_thread_id());
	return buf;
}

static void status_reset(const dlock__engine *e, size_t i, dlock_member_status *st)
{
	memset(st, 0, sizeof(*st));
	st->version = DLOCK_MEMBER_STATUS_VERSION;
	st->node = dlock_client_node(dlock__lock_client(e->members[i]));
	st->ttl_ms = -1;
	st->uptime_s = -1;
}

/* t NULL: the engine's published status. */
void dlock__tries_reset(const dlock__engine *e, dlock__member_try *t, const char *owner)
{
	size_t i;

	for (i = 0; i < e->n; i++) {
		if (t == NULL) {
			status_reset(e, i, &e->status[i]);
			continue;
		}
		memset(&t[i], 0, sizeof(t[i]));
		status_reset(e, i, &t[i].st);
		t[i].believed = -1;
		t[i].owner_ptr = dlock__member_owner(e, i, owner, t[i].owner);
		if (t[i].owner_ptr != owner)
			t[i].owner_ptr = t[i].owner;
	}
}

void dlock__try_fail(dlock__member_try *t, int rc, const char *msg)
{
	t->st.vote = DLOCK_VOTE_ERROR;
	t->st.error = rc;
	snprintf(t->st.message, sizeof(t->st.message), "%s", msg);
}

size_t dlock__tries_count(const dlock__member_try *t, size_t n, dlock_vote vote)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += t[i].st.vote == vote;
	return k;
}

/* ------------------------------------------------------------------ */
/* One acquisition, as an op: each function below is a step's end.       */

static int check_args(dlock__engine *e, const char *owner, int64_t wait_ms, int64_t lease_ms)
{
	size_t i;
	int rc;

	if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER)
		return dlock__seterr(
				DLOCK_EINVAL, "multilock: wait must be >= 0 or DLOCK_WAIT_FOREVER");
	if (lease_ms <= 0 && lease_ms != DLOCK_LEASE_WATCHDOG)
		return dlock__seterr(DLOCK_EINVAL,
				"multilock: lease must be > 0 or DLOCK_LEASE_WATCHDOG");
	if (owner != NULL && (owner[0] == '\0' || strlen(owner) > DLOCK__OWNER_MAX))
		return dlock__seterr(DLOCK_EINVAL, "multilock: the owner is empty or too long");
	for (i = 0; i < e->n; i++)
		if ((rc = dlock__client_check_fork(dlock__lock_client(e->members[i]))) < 0)
			return rc;
	return 0;
}

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

static void conclude_canceled(dlock__engine_op *o)
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
		give_back_and(o, conclude_canceled);
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

static void ordered_round(dlock__engine_op *o);

/* A round failed (everything given back): the pause, or the end. */
static void round_failed(dlock__engine_op *o)
{
	dlock__engine *e = o->e;
	int64_t pause;
	int contention;

	merge_votes(o);
	if (o->canceling) {
		conclude_canceled(o);
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
	dlock__engine_pause(o, pause, ordered_round);
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
static void ordered_round(dlock__engine_op *o)
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
		conclude_canceled(o);
	else if (o->wait_ms == 0)
		conclude_failed(o);
	else
		ordered_round(o);
}

/*
 * Step 1 ends. A lock held for long (the watchdog) holds every member it
 * can, to survive the most failures: it waited for all, within the command
 * timeout. A leased lock decided at the quorum, after a short grace.
 */
static void parallel_over(dlock__engine_op *o)
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

/* How long an asynchronous acquisition waits for a release still on its
 * way to a member (a straggler of one that went on at its quorum,
 * release.c) before it leaves that member out, as a node that owes: from
 * when the member became due, and at least DUE_MIN_WAIT_MS itself (a loop
 * not driven for a while has the answers waiting on its sockets). */
#define DUE_WAIT_MS 100
#define DUE_MIN_WAIT_MS 2

/* A member has releases due that the acquire cannot go right behind. */
static int dues_pending(const dlock__engine_op *o)
{
	for (size_t i = 0; i < o->e->n; i++)
		if (atomic_load(&o->e->release_due[i]) > 0 && !dlock__due_behind(o, i))
			return 1;
	return 0;
}

static void parallel_start(dlock__engine_op *o)
{
	dlock__engine *e = o->e;

	o->par = (dlock__parallel){ e->rules.quorum, e->rules.filter != NULL, o->lease_ms < 0, 0, 0,
		0 };
	o->rounds++;
	dlock__parallel_attempt(o, o->lease_ms, NULL, &o->par, &o->t0, parallel_over);
}

static void dues_over(dlock__engine_op *o);

/*
 * A member with a release of ours still on its way gets the acquire right
 * behind it, on its connection (the server runs them in that order); where
 * it cannot (the release is on a connection of its own or split over
 * several, a WAIT must follow the acquire, or an acquire of ours is still
 * due there, whose late grant would be given back behind this one:
 * core/mux/mux.h's DLOCK__ORDERED_OPEN), it is asked once that was
 * answered: an acquire sent on another connection could run before it on
 * the server and be undone by it. Healthy servers answer within a round
 * trip (woken by dlock__engine_dues_woken); a stopped one is waited for
 * DUE_WAIT_MS from when it became due at most, then left out. A blocking
 * call leaves it out at once (its loop is not the one the release runs on).
 */
static void await_dues(dlock__engine_op *o)
{
	dlock__engine *e = o->e;
	int64_t until = atomic_load(&e->due_at) + DUE_WAIT_MS, now = dlock__now_ms();

	if (until < o->started + DUE_MIN_WAIT_MS)
		until = o->started + DUE_MIN_WAIT_MS;

	if (o->canceling) {
		conclude_canceled(o);
		return;
	}
	if (o->blocking || now >= until || !dues_pending(o)) {
		parallel_start(o);
		return;
	}
	o->due_next = e->due_waiters;
	e->due_waiters = o;
	dlock__engine_pause(o, until - now, dues_over);
}

static void dues_over(dlock__engine_op *o)
{
	dlock__engine_op **p = &o->e->due_waiters;

	while (*p != NULL && *p != o)
		p = &(*p)->due_next;
	if (*p == o)
		*p = o->due_next;
	o->due_next = NULL;
	await_dues(o);
}

void dlock__engine_dues_woken(dlock__engine *e)
{
	for (dlock__engine_op *o = e->due_waiters; o != NULL; o = o->due_next)
		if (o->after_pause != NULL)
			(void)dlock__timer_set(o->op.loop, &o->pause, 0); /* its bound stays */
}

static void acquire_start(dlock_op *op)
{
	dlock__engine_op *o = (dlock__engine_op *)op;
	dlock__engine *e = o->e;
	int rc;

	o->started = dlock__now_ms();
	o->deadline = dlock__deadline_in(o->wait_ms);
	o->backoff = (dlock__backoff){ RETRY_JITTER_MS, RETRY_MIN_MS, RETRY_MAX_MS, 0 };
	/* Two members known to be one server are refused before anything is sent. */
	if ((rc = dlock__engine_servers_check(e)) < 0) {
		dlock__engine_op_end(o, rc);
		return;
	}
	/* A MultiLock that may not wait keeps Redisson's strict order, which
	 * guarantees that one of several concurrent contenders wins. */
	if (!e->rules.share_wait && o->wait_ms == 0) {
		ordered_round(o);
		return;
	}
	await_dues(o);
}

typedef struct acquire_args {
	int64_t wait_ms, lease_ms;
} acquire_args;

static void acquire_setup(dlock__engine_op *o, void *arg)
{
	const acquire_args *a = arg;

	o->wait_ms = a->wait_ms;
	o->lease_ms = a->lease_ms;
}

int dlock__engine_acquire(dlock__engine *e, const char *owner, int64_t wait_ms, int64_t lease_ms,
		int64_t *validity_out, int64_t *token_out)
{
	acquire_args a = { wait_ms, lease_ms };
	int rc = check_args(e, owner, wait_ms, lease_ms);

	if (rc < 0)
		return rc;
	return dlock__engine_block(e, owner, acquire_start, acquire_setup, &a, validity_out,
			token_out);
}

int dlock__engine_acquire_async(dlock_op **out, dlock__engine *e, const char *owner,
		int64_t wait_ms, int64_t lease_ms, dlock_op_cb cb, void *userdata)
{
	acquire_args a = { wait_ms, lease_ms };
	int rc = check_args(e, owner, wait_ms, lease_ms);

	if (rc < 0) {
		if (out != NULL)
			*out = NULL;
		return rc;
	}
	return dlock__engine_async(out, e, owner, cb, userdata, acquire_start, acquire_setup, &a);
}

/* ------------------------------------------------------------------ */
/* State                                                                */

int dlock__engine_check(const dlock__engine *e, const char *owner)
{
	size_t alive, lost;

	dlock__holds_tally(e, owner, &alive, &lost);
	if (alive >= e->rules.quorum)
		return 0;
	return alive + lost > 0 ? DLOCK_ELOST : DLOCK_ENOTOWNER;
}

/* The fields after `version`, and the version that added each. */
static const dlock__field status_fields[] = {
	DLOCK__FIELD(dlock_member_status, node, 1),
	DLOCK__FIELD(dlock_member_status, vote, 1),
	DLOCK__FIELD(dlock_member_status, error, 1),
	DLOCK__FIELD(dlock_member_status, ttl_ms, 1),
	DLOCK__FIELD(dlock_member_status, uptime_s, 1),
	DLOCK__FIELD(dlock_member_status, message, 1),
};
static const dlock_member_status status_defaults = DLOCK_MEMBER_STATUS_INIT;
static const dlock__versioned status_versioned = DLOCK__VERSIONED("member status",
		"DLOCK_MEMBER_STATUS_INIT", DLOCK_MEMBER_STATUS_VERSION, dlock_member_status,
		&status_defaults, status_fields);

int dlock_member_status_init(dlock_member_status *s, unsigned int version)
{
	return dlock__versioned_init(s, version, &status_versioned);
}

int dlock__engine_status(const dlock__engine *e, size_t i, dlock_member_status *out)
{
	pthread_mutex_t *mu = (pthread_mutex_t *)&e->mu; /* the lock is not part of the value */
	dlock_member_status st;
	int rc;

	if ((rc = dlock__versioned_check(out, &status_versioned)) < 0)
		return rc;
	if (i >= e->n)
		return dlock__seterr(DLOCK_EINVAL, "member status: no such member %zu (of %zu)", i,
				e->n);
	dlock__mutex_lock(mu);
	st = e->status[i];
	dlock__mutex_unlock(mu);
	/* Only the fields the caller's version has: its struct may end there. */
	return dlock__versioned_store(out, &st, &status_versioned);
}

void dlock__engine_set_lost(dlock__engine *e, dlock__engine_lost_fn fn, void *userdata)
{
	dlock__mutex_lock(&e->mu);
	e->lost_fn = fn;
	e->lost_ud = userdata;
	dlock__mutex_unlock(&e->mu);
}
