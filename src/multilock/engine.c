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
#include <poll.h>
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
	if (e->members == NULL || e->status == NULL) {
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
	for (i = 0; i < e->n; i++)
		dlock__holds_unobserve(e->members[i], e);
	while (e->narmed > 0)
		dlock__free(e->armed[--e->narmed]);
	dlock__free(e->armed);
	dlock__free(e->members);
	dlock__free(e->status);
	dlock__errbuf_destroy(&e->err);
	pthread_mutex_destroy(&e->mu);
	e->members = NULL;
}

const char *dlock__member_owner(const dlock__engine *e, size_t i, const char *owner, char buf[64])
{
	if (owner != NULL)
		return owner;
	dlock_client_owner(buf, 64, dlock__lock_client(e->members[i]), dlock_thread_id());
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
/* One acquisition                                                      */

typedef struct acquisition {
	dlock__engine *e;
	const char *owner;
	int64_t wait_ms;
	int64_t lease_ms;
	int64_t deadline;
	dlock__member_try *t;      /* this round */
	dlock_member_status *seen; /* each member's latest answer, over the rounds */
	uint64_t *cancels;         /* each client's cancel count at the start */
	int64_t started;           /* when the wait began (first-contact periods) */
	int64_t validity;
	int expired; /* the last quorum's validity ran out */
	dlock__backoff backoff;
} acquisition;

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

static void acquisition_free(acquisition *a)
{
	dlock__free(a->t);
	dlock__free(a->seen);
	dlock__free(a->cancels);
}

static int acquisition_init(acquisition *a, dlock__engine *e, const char *owner, int64_t wait_ms,
		int64_t lease_ms)
{
	size_t i;

	memset(a, 0, sizeof(*a));
	a->e = e;
	a->owner = owner;
	a->wait_ms = wait_ms;
	a->lease_ms = lease_ms;
	a->validity = -1;
	a->backoff = (dlock__backoff){ RETRY_JITTER_MS, RETRY_MIN_MS, RETRY_MAX_MS, 0 };
	a->t = dlock__calloc(e->n, sizeof(*a->t));
	a->seen = dlock__calloc(e->n, sizeof(*a->seen));
	a->cancels = dlock__calloc(e->n, sizeof(*a->cancels));
	if (a->t == NULL || a->seen == NULL || a->cancels == NULL) {
		acquisition_free(a);
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	}
	for (i = 0; i < e->n; i++)
		a->cancels[i] = dlock__client_cancels(dlock__lock_client(e->members[i]));
	a->started = dlock__now_ms();
	a->deadline = dlock__deadline_in(wait_ms);
	dlock__tries_reset(e, a->t, owner);
	for (i = 0; i < e->n; i++)
		a->seen[i] = a->t[i].st; /* every member unasked, with its node */
	return 0;
}

/* Keep each member's latest answer across rounds: a round cut short by the
 * deadline leaves the members it did not reach unasked. */
static void merge_votes(acquisition *a)
{
	size_t i;

	for (i = 0; i < a->e->n; i++)
		if (a->t[i].st.vote != DLOCK_VOTE_NONE)
			a->seen[i] = a->t[i].st;
}

/* Apply the vote filter (RedLock's restart guard); 1 when a quorum still stands. */
static int filtered_quorum(acquisition *a)
{
	dlock__engine *e = a->e;

	if (e->rules.filter != NULL)
		e->rules.filter(e->rules.filter_arg, e->members, a->t, e->n, a->lease_ms);
	return dlock__tries_count(a->t, e->n, DLOCK_VOTE_ACQUIRED) >= e->rules.quorum;
}

/* The failure as a code and a message that names every member's part. */
static int fail(acquisition *a)
{
	dlock__engine *e = a->e;
	const dlock_member_status *seen = a->seen;
	char msg[DLOCK__ERRMSG_MAX];
	int rc = dlock__quorum_failure(seen, e->n, e->rules.quorum, a->expired);
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

/*
 * Step 1. A lock held for long (the watchdog) should hold every member it
 * can, to survive the most failures: wait for all, within the command
 * timeout. A leased lock decides at the quorum, after a short grace.
 * Returns 1 acquired, 0 go on with the ordered rounds, or an error.
 */
static int parallel_phase(acquisition *a)
{
	dlock__engine *e = a->e;
	dlock__parallel p = { e->rules.quorum, e->rules.filter != NULL, a->lease_ms < 0, 0, 0, 0 };
	int64_t t0, ttl = INT64_MAX;
	size_t i;
	int rc = dlock__parallel_attempt(e, a->t, a->owner, a->lease_ms, NULL, &p, &t0);

	if (rc < 0)
		return rc;
	merge_votes(a);
	if (filtered_quorum(a)) {
		for (i = 0; i < e->n; i++)
			if (a->t[i].st.vote == DLOCK_VOTE_ACQUIRED &&
					dlock__lock_ttl(e->members[i], a->lease_ms) < ttl)
				ttl = dlock__lock_ttl(e->members[i], a->lease_ms);
		/* The TTLs were set by commands sent at t0 or later. */
		a->validity = dlock__quorum_validity(
				ttl, dlock__now_ms() - t0, e->rules.drift_factor);
		if (!e->rules.check_validity || a->validity > 0)
			return 1;
		a->expired = 1;
	}
	merge_votes(a);
	dlock__rollback_some(e, a->t, NULL);
	return a->wait_ms == 0 ? fail(a) : 0;
}

static void pause_ms(int64_t ms)
{
	if (ms > 0)
		poll(NULL, 0, (int)ms);
}

static int canceled(const acquisition *a)
{
	size_t i;

	for (i = 0; i < a->e->n; i++)
		if (dlock__client_cancels(dlock__lock_client(a->e->members[i])) != a->cancels[i])
			return 1;
	return 0;
}

static int64_t time_left(const acquisition *a)
{
	return a->deadline == DLOCK__NEVER ? INT64_MAX : a->deadline - dlock__now_ms();
}

/* One ordered round and its finalize: 1 when it ends with a valid quorum. */
static int ordered_attempt(acquisition *a, int64_t round_ms)
{
	dlock__engine *e = a->e;

	dlock__tries_reset(e, a->t, a->owner);
	a->expired = 0;
	if (!dlock__ordered_round(
			    e, a->t, a->owner, round_ms, a->lease_ms, a->wait_ms == 0, a->cancels))
		return 0;
	if (filtered_quorum(a)) {
		if (e->test_hook != NULL)
			e->test_hook("finalize", e->test_hook_arg);
		a->validity = dlock__finalize(e, a->t, a->lease_ms);
		merge_votes(a);
		if (a->validity > 0 ||
				(!e->rules.check_validity &&
						dlock__tries_count(
								a->t, e->n, DLOCK_VOTE_ACQUIRED) >=
								e->rules.quorum))
			return 1;
		a->expired = 1;
	}
	dlock__rollback_some(e, a->t, NULL);
	return 0;
}

/*
 * Members that failed in a way no wait heals although their error says a
 * connection failed: a TLS refusal, or a server that never answered and
 * whose first-contact period ends before `next`, the next round (its
 * message says so). The quorum engine stops waiting for them.
 */
static size_t members_gone(acquisition *a, int64_t next)
{
	size_t i, gone = 0;

	for (i = 0; i < a->e->n; i++) {
		dlock_member_status *st = &a->seen[i];
		dlock_client *c = dlock__lock_client(a->e->members[i]);
		size_t len = strlen(st->message);

		if (st->vote != DLOCK_VOTE_ERROR)
			continue;
		if (dlock__client_refused(c, st->error)) {
			gone++;
		} else if (dlock__client_first_contact_over(c, st->error, a->started, next)) {
			gone++;
			st->error = DLOCK_ECONN;
			if (strstr(st->message, DLOCK__NEVER_ANSWERED) == NULL)
				snprintf(st->message + len, sizeof(st->message) - len, "%s",
						DLOCK__NEVER_ANSWERED);
		}
	}
	return gone;
}

/* Step 2: rounds until a quorum, the deadline, a cancel or a hopeless failure. */
static int ordered_phase(acquisition *a)
{
	dlock__engine *e = a->e;

	for (;;) {
		int64_t left = time_left(a), round_ms = (int64_t)e->n * ROUND_MS_PER_MEMBER;
		int64_t pause;
		int contention, rc;

		/* Connected by now: two members may turn out to be one server. */
		if ((rc = dlock__engine_servers_check(e)) < 0)
			return rc;
		if (left <= 0 && a->wait_ms != 0)
			return fail(a);
		if (canceled(a))
			return dlock__seterr(DLOCK_ECANCELED, "lock %s: the wait was canceled",
					dlock__lock_shown(e->members[0]));
		if (round_ms > left)
			round_ms = left > 0 ? left : 0;
		if (ordered_attempt(a, round_ms))
			return 1;
		merge_votes(a);
		if (a->wait_ms == 0)
			return fail(a);
		contention = dlock__tries_count(a->t, e->n, DLOCK_VOTE_HELD) > 0 ||
				dlock__tries_count(a->t, e->n, DLOCK_VOTE_YOUNG) > 0;
		left = time_left(a);
		pause = dlock__backoff_next(&a->backoff, contention, left, dlock__random());
		if (dlock__quorum_hopeless(a->seen, e->n, e->rules.quorum,
				    members_gone(a, dlock__now_ms() + pause)))
			return fail(a);
		pause_ms(pause);
	}
}

/* Step 3: a fenced quorum's token, then the grant. */
static int grant(acquisition *a, int64_t *validity_out, int64_t *token_out)
{
	dlock__engine *e = a->e;
	int64_t token = 0;
	size_t i;
	int rc = 0;

	/* The status describes this grant: earlier rounds were given back. */
	for (i = 0; i < e->n; i++)
		a->seen[i] = a->t[i].st;
	if (e->fenced) {
		int64_t fence_start = dlock__now_ms();

		rc = dlock__fence(e, a->t, &token);
		/* The keys' TTLs kept running while the token was written back. */
		a->validity -= dlock__now_ms() - fence_start;
		if (rc == 0 && e->rules.check_validity && a->validity <= 0)
			rc = DLOCK_EEXPIRED;
	}
	if (rc < 0) {
		/* Too few counters took the token, or the TTL ran out meanwhile:
		 * not a safe grant. */
		dlock__rollback_some(e, a->t, NULL);
		merge_votes(a);
		a->expired = rc == DLOCK_EEXPIRED;
		return rc == DLOCK_ENOMEM ? dlock__seterr(DLOCK_ENOMEM,
							    "lock %s: out of memory "
							    "fencing",
							    dlock__lock_shown(e->members[0]))
					  : fail(a);
	}
	if (token_out != NULL)
		*token_out = token;
	dlock__loss_arm(e, a->t);
	if (validity_out != NULL)
		*validity_out = a->validity;
	return 0;
}

int dlock__engine_acquire(dlock__engine *e, const char *owner, int64_t wait_ms, int64_t lease_ms,
		int64_t *validity_out, int64_t *token_out)
{
	acquisition a;
	int rc = check_args(e, owner, wait_ms, lease_ms), dup;

	/* Two members known to be one server are refused before anything is sent. */
	if (rc == 0)
		rc = dlock__engine_servers_check(e);
	if (rc < 0 || (rc = acquisition_init(&a, e, owner, wait_ms, lease_ms)) < 0)
		return rc;
	/* A MultiLock that may not wait keeps Redisson's strict order, which
	 * guarantees that one of several concurrent contenders wins. */
	if (e->rules.share_wait || wait_ms != 0)
		rc = parallel_phase(&a);
	if (rc == 0)
		rc = ordered_phase(&a);
	/* The first connections may just have shown two members to be one
	 * server: whatever the outcome, nothing taken may stay (the failed
	 * paths gave theirs back already; this finds nothing left then). */
	if (rc != DLOCK_ENOMEM && (dup = dlock__engine_servers_check(e)) < 0) {
		dlock__rollback_some(e, a.t, NULL);
		rc = dup;
	}
	if (rc == 1)
		rc = grant(&a, validity_out, token_out);
	dlock__mutex_lock(&e->mu);
	memcpy(e->status, a.seen, e->n * sizeof(*a.seen));
	dlock__mutex_unlock(&e->mu);
	acquisition_free(&a);
	return rc;
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
