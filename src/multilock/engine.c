/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The quorum engine: Redisson's MultiLock loop, with a parallel first
 * attempt in front and Redlock's validity rule behind.
 *
 * 1. Parallel attempt (RedLock always; MultiLock when it may wait): the
 *    acquire script goes to every member at once; as soon as a quorum took
 *    it, or a quorum became impossible, the round is decided. Uncontended,
 *    that is one round trip whatever n is.
 * 2. Otherwise everything taken is given back and Redisson's ordered loop
 *    runs: members in order, each waiting up to its budget (MultiLock: all
 *    the remaining time; RedLock: max(remaining/n, 1) ms), failures counted
 *    against the limit n - quorum; when the limit is exceeded, give back what
 *    was taken and start again from the first member while time remains.
 *    Going in order is what guarantees progress: a contender that failed on
 *    a member never holds a later one.
 * 3. Members taken in the loop hold a provisional lease long enough to
 *    survive it; once a quorum is held, every taken member is set to the
 *    real TTL by a guarded PEXPIRE, all at once, and the validity is counted
 *    from sending that.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/alloc.h"
#include "core/fmt.h"
#include "core/ids.h"
#include "core/mux.h"
#include "core/time.h"
#include "multilock/engine.h"
#include "single/acquire.h"
#include "single/lock_internal.h"
#include "single/scripts.h"

/* Redisson's MultiLock lock(): a wait of 1500 ms per member per round. */
#define ROUND_MS_PER_MEMBER 1500
/* A random pause before a new round, so that competing clients fall out of step. */
#define RETRY_JITTER_MS 50
/* After a round that failed on errors alone, the next waits this, doubling. */
#define RETRY_MIN_MS 50
#define RETRY_MAX_MS 1000

/*
 * A member that is another one again, in disguise: the same name on the
 * same server (host:port) - for a RedLock whatever the db, since a quorum
 * would count one server twice; for a MultiLock in the same db. (Different
 * names on one server stay allowed, as in Redisson.) Hosts are compared as
 * written: "localhost" and "127.0.0.1" are not resolved (that would cost a
 * DNS lookup per handle).
 */
static int same_member(const dlock_lock *a, const dlock_lock *b, int any_db)
{
	const dlock__node *x = &a->client->node, *y = &b->client->node;

	return x->port == y->port && strcmp(x->host, y->host) == 0 && (any_db || x->db == y->db) &&
		a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) == 0;
}

int dlock__engine_init(dlock__engine *e, dlock_lock *const *members, size_t n,
		const dlock__rules *rules, void *self)
{
	size_t i, j;

	memset(e, 0, sizeof(*e));
	if (members == NULL || n == 0)
		return dlock__seterr(DLOCK_EINVAL, "multilock: no members");
	for (i = 0; i < n; i++) {
		if (members[i] == NULL)
			return dlock__seterr(DLOCK_EINVAL, "multilock: member %zu is NULL", i);
		for (j = 0; j < i; j++) {
			if (members[j] == members[i])
				return dlock__seterr(DLOCK_EINVAL,
						"multilock: member %zu is member %zu again", i, j);
			if (same_member(members[j], members[i], rules->one_per_server) &&
			    rules->one_per_server)
				return dlock__seterr(DLOCK_EINVAL, "redlock: server %s is listed twice "
						"for lock %s (members %zu and %zu): a quorum needs independent "
						"servers", members[i]->client->node.label, members[i]->shown, j, i);
			if (same_member(members[j], members[i], rules->one_per_server))
				return dlock__seterr(DLOCK_EINVAL, "multilock: lock %s on %s is listed "
						"twice (members %zu and %zu)", members[i]->shown,
						members[i]->client->node.label, j, i);
		}
	}
	e->members = dlock__calloc(n, sizeof(*e->members));
	e->status = dlock__calloc(n, sizeof(*e->status));
	if (e->members == NULL || e->status == NULL) {
		dlock__free(e->members);
		dlock__free(e->status);
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	}
	memcpy(e->members, members, n * sizeof(*members));
	e->fenced = 1;
	for (i = 0; i < n; i++)
		e->fenced &= members[i]->kind == DLOCK__FENCED;
	for (i = 0; i < n && !e->fenced; i++)
		if (members[i]->kind == DLOCK__FENCED) {
			dlock__free(e->members);
			dlock__free(e->status);
			e->members = NULL;
			return dlock__seterr(DLOCK_EINVAL,
					"multilock: fenced and unfenced members cannot be mixed");
		}
	for (i = 0; i < n; i++) {
		e->status[i].node = members[i]->client->node.label;
		e->status[i].ttl_ms = -1;
		e->status[i].uptime_s = -1;
	}
	e->n = n;
	e->rules = *rules;
	e->self = self;
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

/* The owner field on member i: the explicit owner, or the calling thread there. */
static const char *member_owner(dlock__engine *e, size_t i, const char *owner, char buf[64])
{
	if (owner != NULL)
		return owner;
	dlock_client_owner(e->members[i]->client, dlock_thread_id(), buf, 64);
	return buf;
}

static int64_t member_ttl(const dlock_lock *m, int64_t lease_ms)
{
	return lease_ms > 0 ? lease_ms : m->client->opts.watchdog_timeout_ms;
}

static void reset_tries(dlock__engine *e, dlock__member_try *t, const char *owner)
{
	size_t i;

	for (i = 0; i < e->n; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].st.node = e->members[i]->client->node.label;
		t[i].st.ttl_ms = -1;
		t[i].st.uptime_s = -1;
		t[i].believed = -1;
		t[i].owner_ptr = member_owner(e, i, owner, t[i].owner);
		if (t[i].owner_ptr != owner)
			t[i].owner_ptr = t[i].owner;
	}
}

static void set_error(dlock__member_try *t, int rc, const char *msg)
{
	t->st.vote = DLOCK_VOTE_ERROR;
	t->st.error = rc;
	snprintf(t->st.message, sizeof(t->st.message), "%s", msg);
}

static size_t count_votes(const dlock__member_try *t, size_t n, dlock_vote vote)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += t[i].st.vote == vote;
	return k;
}

/* ------------------------------------------------------------------ */
/* Many members at once                                                 */

typedef struct parallel_state {
	size_t quorum;
	int wait_all_if_held; /* a vote filter may discount votes: decide on all of them */
	int wait_all;         /* watchdog mode: hold every member that answers in time */
	int64_t started;      /* when the commands went out */
	int64_t quorum_at;    /* when a quorum had answered yes (0: not yet) */
	int64_t deadline;     /* decide by then whatever is still pending (0: none) */
} parallel_state;

static int reply_acquired(const dlock__mux_op *op)
{
	return op->rc == 0 && op->reply != NULL && op->reply->type == REDIS_REPLY_ARRAY;
}

/*
 * Decide as soon as a quorum is impossible. Once a quorum said yes, give the
 * others a short grace (as long again as the quorum took, at least 2 ms):
 * on healthy servers their answers are already on the way, and every extra
 * member held makes the lock survive more failures; a hung server costs only
 * the grace, not its command timeout.
 */
static int quorum_decided(void *arg, const dlock__mux_op *ops, size_t n, int64_t *wake_at)
{
	parallel_state *ps = arg;
	size_t i, ok = 0, failed = 0, held = 0;
	int64_t now, grace_end;

	if (ps->deadline != 0) {
		if (dlock__now_ms() >= ps->deadline)
			return 1;
		*wake_at = ps->deadline;
	}
	for (i = 0; i < n; i++) {
		if (ops[i].rc < 0) {
			failed++;
		} else if (ops[i].reply != NULL) {
			if (reply_acquired(&ops[i])) {
				ok++;
			} else {
				failed++;
				held += ops[i].reply->type == REDIS_REPLY_INTEGER;
			}
		}
	}
	if (held > 0 && ps->wait_all_if_held)
		return 0;
	if (n - failed < ps->quorum)
		return 1;
	if (ok < ps->quorum)
		return 0;
	/* Only servers that timed out last time are still to answer: they are
	 * likely still hung, do not wait for them at all. */
	for (i = 0; i < n; i++)
		if (ops[i].pending && !dlock__client_is_slow(ops[i].client))
			break;
	if (i == n)
		return 1;
	if (ps->wait_all)
		return 0;
	now = dlock__now_ms();
	if (ps->quorum_at == 0)
		ps->quorum_at = now;
	grace_end = ps->quorum_at + (ps->quorum_at - ps->started > 2 ? ps->quorum_at - ps->started : 2);
	if (now >= grace_end)
		return 1;
	*wake_at = grace_end;
	return 0;
}

/*
 * Send the acquire to every member (ask[i] set; ask NULL: all) at once and
 * record each answer; ps says when to stop waiting.
 */
static int parallel_attempt(dlock__engine *e, dlock__member_try *t, const char *owner,
		int64_t lease_ms, const int *ask, parallel_state *ps, int64_t *t0)
{
	dlock__mux_op *ops = dlock__calloc(e->n, sizeof(*ops));
	dlock__acquire *acq = dlock__calloc(e->n, sizeof(*acq));
	size_t i;
	int rc = 0;

	if (ops == NULL || acq == NULL) {
		rc = dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
		goto out;
	}
	for (i = 0; i < e->n; i++) {
		int r;

		if (ask != NULL && !ask[i]) {
			ops[i].skip = 1;
			continue;
		}
		r = dlock__acquire_prepare(e->members[i], owner, 0, lease_ms, &acq[i]);
		if (r == 0 && dlock__client_owes(e->members[i]->client, 0) < 0) {
			/* Not sent: see dlock__client_owes. */
			set_error(&t[i], DLOCK_ETIMEDOUT, dlock__errmsg_thread());
			ops[i].skip = 1;
		}

		if (r < 0) {
			rc = r; /* a bad owner is bad everywhere */
			goto out;
		}
		t[i].believed = acq[i].believed;
		if (t[i].believed < 0) {
			dlock_lock *m = e->members[i];

			t[i].believed = dlock__holds_count(m, acq[i].owner, 1);
			if (t[i].believed < 0)
				t[i].believed = 0;
		}
		ops[i].client = e->members[i]->client;
		/* Resent after a dropped connection only when the count is compared. */
		ops[i].no_retry = acq[i].believed < 0;
		ops[i].script = acq[i].script;
		ops[i].nkeys = acq[i].nkeys;
		ops[i].argc = acq[i].argc;
		ops[i].argv = acq[i].argv;
		ops[i].lens = acq[i].lens;
	}
	*t0 = ps->started = dlock__now_ms();
	rc = dlock__mux_run(ops, e->n, quorum_decided, ps);
	if (rc < 0)
		goto out;
	for (i = 0; i < e->n; i++) {
		dlock_lock *m = e->members[i];
		int64_t ttl = -1;
		int r;

		if (ops[i].skip)
			continue; /* its vote says why it was not asked */
		t[i].touched = ops[i].rc == 0 || ops[i].abandoned;
		if (ops[i].rc < 0) {
			if (ops[i].undecided)
				t[i].st.vote = DLOCK_VOTE_NONE; /* decided without it */
			else
				set_error(&t[i], ops[i].rc, ops[i].errmsg);
			continue;
		}
		r = dlock__acquire_finish(m, &acq[i], ops[i].reply, ops[i].sent_at, &ttl);
		if (r == 0) {
			t[i].st.vote = DLOCK_VOTE_ACQUIRED;
			t[i].count = t[i].taken = acq[i].count;
			t[i].token = acq[i].token;
		} else if (r == DLOCK_ENOTACQUIRED) {
			t[i].st.vote = DLOCK_VOTE_HELD;
			t[i].st.ttl_ms = ttl;
			t[i].touched = 0; /* the script ran and took nothing */
		} else {
			set_error(&t[i], r, dlock__errmsg_thread());
		}
	}
out:
	if (ops != NULL)
		dlock__mux_clear(ops, e->n);
	dlock__free(ops);
	dlock__free(acq);
	return rc;
}

/* Arguments of one rollback op, kept alive while the ops run. */
typedef struct rollback_args {
	const char *argv[6];
	size_t lens[6];
	char expect[24];
	char lease[24];
} rollback_args;

/* Make ops[k] the rollback of one hold of member i with count `expect`. */
static void rollback_op(dlock__engine *e, size_t i, const char *owner, int64_t expect,
		dlock__mux_op *op, rollback_args *a)
{
	dlock_lock *m = e->members[i];

	a->argv[0] = m->name;
	a->lens[0] = m->name_len;
	a->argv[1] = m->channel;
	a->lens[1] = m->channel_len;
	a->argv[2] = "0";
	a->lens[2] = 1;
	a->argv[3] = owner;
	a->lens[3] = strlen(owner);
	a->argv[4] = a->expect;
	a->lens[4] = dlock__fmt_i64(a->expect, expect);
	a->argv[5] = a->lease;
	a->lens[5] = dlock__fmt_i64(a->lease,
			dlock__holds_lease(m, owner));
	memset(op, 0, sizeof(*op));
	op->client = m->client;
	op->script = &dlock__script_rollback;
	op->nkeys = 2;
	op->argc = 6;
	op->argv = a->argv;
	op->lens = a->lens;
}

/* Record the outcome of a rollback op on member i (believed: the count before). */
static void rollback_done(dlock__engine *e, size_t i, const char *owner, int64_t believed,
		const dlock__mux_op *op)
{
	dlock_lock *m = e->members[i];
	int64_t left = believed > 0 ? believed : 0;

	if (op->rc == 0 && op->reply != NULL && op->reply->type == REDIS_REPLY_INTEGER) {
		if (op->reply->integer < 0)
			return; /* it had not been taken: nothing changed */
		left = op->reply->integer;
	}
	/* Unreachable: forget the hold so nobody renews it; it expires. */
	dlock__holds_released(m, owner, left);
}

/*
 * Give back, all at once, every member this round may have taken: those it
 * took (count known) and those whose command may have run (count = the
 * owner's count before plus one). The rollback script only releases a hold
 * whose count is exactly that, so a command that never ran costs nothing.
 */
static void rollback_some(dlock__engine *e, dlock__member_try *t, const int *only)
{
	dlock__mux_op *ops = dlock__calloc(e->n, sizeof(*ops));
	rollback_args *args = dlock__calloc(e->n, sizeof(*args));
	size_t *which = dlock__calloc(e->n, sizeof(*which));
	size_t i, k = 0;

	if (ops == NULL || args == NULL || which == NULL)
		goto out; /* the holds expire with their TTL */
	for (i = 0; i < e->n; i++) {
		int64_t expect;

		if (only != NULL && !only[i])
			continue;
		/* By what was taken, not by the vote: a later step (the TTL
		 * reset, the fencing write-back) may have turned it into an error. */
		if (t[i].taken > 0)
			expect = t[i].taken;
		else if (t[i].touched && t[i].believed >= 0)
			expect = t[i].believed + 1;
		else
			continue;
		rollback_op(e, i, t[i].owner_ptr, expect, &ops[k], &args[k]);
		/* A server that just timed out would cost its timeout again: send
		 * the rollback and move on (it runs when the server does). */
		ops[k].no_wait = dlock__client_is_slow(e->members[i]->client);
		which[k++] = i;
	}
	if (k > 0 && dlock__mux_run(ops, k, NULL, NULL) == 0)
		for (i = 0; i < k; i++)
			rollback_done(e, which[i], t[which[i]].owner_ptr, t[which[i]].believed, &ops[i]);
	for (i = 0; i < k; i++)
		t[which[i]].taken = t[which[i]].touched = 0; /* given back (or expiring) */
	dlock__mux_clear(ops, k);
out:
	dlock__free(ops);
	dlock__free(args);
	dlock__free(which);
}

static void rollback(dlock__engine *e, dlock__member_try *t)
{
	rollback_some(e, t, NULL);
}

/*
 * Once the ordered round holds a quorum, ask every member it did not take
 * at once, as the parallel attempt does (by `deadline`, the round's budget:
 * the wait is never extended): a bare quorum is the weakest grant, one
 * server whose clock runs fast away from a second holder. Members that did
 * not answer in time are given back at once (their acquire may have run).
 */
static void take_the_rest(dlock__engine *e, dlock__member_try *t, const char *owner,
		int64_t lease_ms, int64_t deadline)
{
	parallel_state ps = { 0, 0, 1, 0, 0, deadline };
	int *ask = dlock__calloc(e->n, sizeof(*ask));
	size_t i, n = 0;
	int64_t t0;

	if (ask == NULL)
		return; /* the quorum stands; this was an extra */
	for (i = 0; i < e->n; i++) {
		ask[i] = t[i].st.vote != DLOCK_VOTE_ACQUIRED && t[i].st.vote != DLOCK_VOTE_YOUNG &&
			!dlock__client_is_slow(e->members[i]->client);
		n += ask[i];
	}
	if (n > 0 && dlock__now_ms() < deadline &&
	    parallel_attempt(e, t, owner, lease_ms, ask, &ps, &t0) == 0) {
		for (i = 0; i < e->n; i++)
			ask[i] = ask[i] && t[i].taken == 0 && t[i].touched;
		rollback_some(e, t, ask);
	}
	dlock__free(ask);
}

/*
 * Set every taken member's key to ttl (guarded: only while our field is
 * there), all at once. Members whose hold is gone stop counting. Returns
 * the validity: ttl - elapsed - drift, elapsed counted from the send.
 */
static int64_t finalize(dlock__engine *e, dlock__member_try *t, int64_t lease_ms)
{
	dlock__mux_op *ops = dlock__calloc(e->n, sizeof(*ops));
	const char **args = dlock__calloc(e->n * 3, sizeof(*args));
	size_t *lens = dlock__calloc(e->n * 3, sizeof(*lens));
	char (*ttls)[24] = dlock__calloc(e->n, sizeof(*ttls));
	size_t *which = dlock__calloc(e->n, sizeof(*which));
	int64_t t_send, min_ttl = INT64_MAX, validity = -1;
	size_t i, k = 0;

	if (ops == NULL || args == NULL || lens == NULL || ttls == NULL || which == NULL)
		goto out;
	for (i = 0; i < e->n; i++) {
		dlock_lock *m = e->members[i];
		int64_t ttl = member_ttl(m, lease_ms);

		if (t[i].st.vote != DLOCK_VOTE_ACQUIRED && t[i].st.vote != DLOCK_VOTE_YOUNG)
			continue;
		args[3 * k] = m->name;
		lens[3 * k] = m->name_len;
		args[3 * k + 1] = ttls[k];
		lens[3 * k + 1] = dlock__fmt_i64(ttls[k], ttl);
		args[3 * k + 2] = t[i].owner_ptr;
		lens[3 * k + 2] = strlen(t[i].owner_ptr);
		ops[k].client = m->client;
		ops[k].script = &dlock__script_renew;
		ops[k].nkeys = 1;
		ops[k].argc = 3;
		ops[k].argv = args + 3 * k;
		ops[k].lens = lens + 3 * k;
		which[k++] = i;
	}
	t_send = dlock__now_ms();
	if (dlock__mux_run(ops, k, NULL, NULL) < 0)
		goto out;
	for (i = 0; i < k; i++) {
		dlock__member_try *mt = &t[which[i]];
		const redisReply *r = ops[i].reply;

		if (ops[i].rc == 0 && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
		    r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 1) {
			int64_t ttl = member_ttl(e->members[which[i]], lease_ms);

			if (mt->st.vote == DLOCK_VOTE_ACQUIRED && ttl < min_ttl)
				min_ttl = ttl;
			continue;
		}
		/* Gone already (its provisional lease ran out), or no answer. */
		set_error(mt, ops[i].rc < 0 ? ops[i].rc : DLOCK_EEXPIRED,
				ops[i].rc < 0 ? ops[i].errmsg : "hold expired while acquiring");
	}
	if (count_votes(t, e->n, DLOCK_VOTE_ACQUIRED) >= e->rules.quorum)
		validity = min_ttl - (dlock__now_ms() - t_send) -
			(int64_t)((double)min_ttl * e->rules.drift_factor) - 2;
out:
	if (ops != NULL)
		dlock__mux_clear(ops, k);
	dlock__free(ops);
	dlock__free(args);
	dlock__free(lens);
	dlock__free(ttls);
	dlock__free(which);
	return validity;
}

/* ------------------------------------------------------------------ */
/* One member at a time                                                 */

/*
 * One round of Redisson's ordered loop within round_ms. Returns 1 when a
 * quorum is held, 0 when the round failed (everything given back).
 */
static int ordered_round(dlock__engine *e, dlock__member_try *t, const char *owner,
		int64_t round_ms, int64_t lease_ms, int single_attempts, const uint64_t *cancels)
{
	int64_t round_end = dlock__now_ms() + round_ms;
	int64_t provisional = lease_ms > 0 ? (lease_ms > 2 * round_ms ? lease_ms : 2 * round_ms)
		: DLOCK_LEASE_WATCHDOG;
	int64_t budget = round_ms;
	size_t i, acquired = 0, failures_left = e->n - e->rules.quorum;

	if (e->rules.share_wait) {
		budget = round_ms / (int64_t)e->n;
		if (budget < 1)
			budget = 1;
	}
	for (i = 0; i < e->n; i++) {
		dlock_lock *m = e->members[i];
		int64_t left = round_end - dlock__now_ms(), wait = single_attempts ? 0 : budget;
		int rc;

		if (wait > left)
			wait = left > 0 ? left : 0;
		t[i].believed = dlock__holds_count(m, t[i].owner_ptr, 1);
		if (t[i].believed < 0 && owner == NULL)
			t[i].believed = 0;
		/* owner NULL (the thread's own), not its spelled-out string: the
		 * acquire trusts only the former to adopt holds our lost replies left. */
		rc = dlock__errbuf_record(&m->err,
				dlock__lock_acquire(m, owner, wait, provisional, cancels[i], 0,
					&t[i].token, &t[i].st.ttl_ms));
		if (rc == 0) {
			t[i].st.vote = DLOCK_VOTE_ACQUIRED;
			t[i].count = t[i].taken =
				dlock__holds_count(m, t[i].owner_ptr, 1);
			if (++acquired >= e->rules.quorum) {
				take_the_rest(e, t, owner, provisional, round_end);
				return 1;
			}
		} else if (rc == DLOCK_ECANCELED) {
			set_error(&t[i], rc, dlock_lock_errmsg(m));
			rollback(e, t);
			return 0;
		} else {
			if (rc == DLOCK_ENOTACQUIRED) {
				t[i].st.vote = DLOCK_VOTE_HELD;
			} else {
				set_error(&t[i], rc, dlock_lock_errmsg(m));
				t[i].touched = 1; /* it may have reached the server */
			}
			if (failures_left == 0) {
				rollback(e, t);
				return 0;
			}
			failures_left--;
		}
		if (!single_attempts && dlock__now_ms() >= round_end) {
			rollback(e, t);
			return 0;
		}
	}
	/* Every member tried and failures within the limit: only possible
	 * when the quorum was reached, handled above. */
	rollback(e, t);
	return 0;
}

/* Apply the vote filter (RedLock's restart guard); 1 when a quorum still stands. */
static int filtered_quorum(dlock__engine *e, dlock__member_try *t, int64_t lease_ms)
{
	if (e->rules.filter != NULL)
		e->rules.filter(e->rules.filter_arg, e->members, t, e->n, lease_ms);
	return count_votes(t, e->n, DLOCK_VOTE_ACQUIRED) >= e->rules.quorum;
}

static void observe_member_losses(dlock__engine *e, dlock__member_try *t);
static void owner_key(const dlock__engine *e, const char *member_owner, char *key, size_t size);
static void disarm(dlock__engine *e, const char *key);

static size_t count_seen(const dlock_member_status *seen, size_t n, dlock_vote vote)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += seen[i].vote == vote;
	return k;
}

/* Keep each member's latest answer across rounds: a round cut short by the
 * deadline leaves the members it did not reach unasked. */
static void merge_votes(dlock_member_status *seen, const dlock__member_try *t, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (t[i].st.vote != DLOCK_VOTE_NONE)
			seen[i] = t[i].st;
}

/* Members that failed with `error` (a key that is not a lock, refused
 * credentials: no wait changes those). */
static size_t count_error(const dlock_member_status *seen, size_t n, int error)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += seen[i].vote == DLOCK_VOTE_ERROR && seen[i].error == error;
	return k;
}

static size_t count_final(const dlock_member_status *seen, size_t n)
{
	return count_error(seen, n, DLOCK_EWRONGTYPE) + count_error(seen, n, DLOCK_EAUTH);
}

static int classify_failure(dlock__engine *e, const dlock_member_status *seen, int expired)
{
	char msg[DLOCK__ERRMSG_MAX];
	size_t i, errors = count_seen(seen, e->n, DLOCK_VOTE_ERROR), n = 0;
	size_t held = count_seen(seen, e->n, DLOCK_VOTE_HELD);
	int rc;

	/* Too few nodes answering is the infrastructure's fault. A young node's
	 * vote the restart guard refused is contention: the guard doubts it
	 * only when another node shows a holder (or in strict mode), and the
	 * wait goes on as for a holder. */
	if (expired)
		rc = DLOCK_EEXPIRED;
	else if (e->n - errors < e->rules.quorum)
		rc = count_error(seen, e->n, DLOCK_EWRONGTYPE) > 0 ? DLOCK_EWRONGTYPE : DLOCK_ENOQUORUM;
	else
		rc = DLOCK_ENOTACQUIRED;
	/* A member that failed for lack of memory failed in this process, not on its
	 * server: unless another owner was seen holding the lock, that is the cause. */
	for (i = 0; (rc == DLOCK_ENOQUORUM || (rc == DLOCK_ENOTACQUIRED && held == 0)) && i < e->n; i++)
		if (seen[i].vote == DLOCK_VOTE_ERROR && seen[i].error == DLOCK_ENOMEM)
			rc = DLOCK_ENOMEM;
	n = (size_t)snprintf(msg, sizeof(msg),
			"lock %s: %s: %zu of %zu needed, %zu took it, %zu held by others, %zu failed",
			e->members[0]->shown, dlock_strerror(rc), e->rules.quorum, e->n,
			count_seen(seen, e->n, DLOCK_VOTE_ACQUIRED) + count_seen(seen, e->n, DLOCK_VOTE_YOUNG),
			held, errors);
	for (i = 0; i < e->n && n < sizeof(msg); i++)
		if (seen[i].vote == DLOCK_VOTE_ERROR || seen[i].vote == DLOCK_VOTE_YOUNG)
			n += (size_t)snprintf(msg + n, sizeof(msg) - n, "; %s", seen[i].message);
	return dlock__seterr(rc, "%s", msg);
}

static void publish_status(dlock__engine *e, const dlock_member_status *seen)
{
	dlock__mutex_lock(&e->mu);
	memcpy(e->status, seen, e->n * sizeof(*seen));
	dlock__mutex_unlock(&e->mu);
}

/*
 * The fenced quorum's token. Each server counts on its own, so take the
 * largest token the counted members gave and raise the counters to it
 * ("set if greater") before reporting success. Any later quorum shares at
 * least one server with the quorum that confirmed, whose counter is then
 * already >= the token, so the next holder's token is larger - as long as
 * that server kept its data (see redlock.h). Returns 0 when a quorum holds
 * the raised counter.
 */
typedef struct fence_state {
	size_t quorum;
	int64_t max;
} fence_state;

/* Enough once a quorum holds the raised counter: that is what the argument needs. */
static int fence_decided(void *arg, const dlock__mux_op *ops, size_t n, int64_t *wake_at)
{
	const fence_state *fs = arg;
	size_t i, raised = 0;

	(void)wake_at;
	for (i = 0; i < n; i++)
		raised += ops[i].rc == 0 && ops[i].reply != NULL &&
			ops[i].reply->type == REDIS_REPLY_INTEGER && ops[i].reply->integer >= fs->max;
	return raised >= fs->quorum;
}

static int fence(dlock__engine *e, dlock__member_try *t, int64_t *token)
{
	fence_state fs;
	dlock__mux_op *ops = dlock__calloc(e->n, sizeof(*ops));
	const char **args = dlock__calloc(e->n * 2, sizeof(*args));
	size_t *lens = dlock__calloc(e->n * 2, sizeof(*lens));
	size_t *which = dlock__calloc(e->n, sizeof(*which));
	char max_s[24];
	int64_t max = 0;
	size_t i, k = 0, raised = 0;
	int rc = DLOCK_ENOMEM;

	if (ops == NULL || args == NULL || lens == NULL || which == NULL)
		goto out;
	for (i = 0; i < e->n; i++)
		if (t[i].st.vote == DLOCK_VOTE_ACQUIRED && t[i].token > max)
			max = t[i].token;
	snprintf(max_s, sizeof(max_s), "%" PRId64, max);
	/* Every member, not only the voters: the more servers know the token,
	 * the more restarts it survives. */
	for (i = 0; i < e->n; i++) {
		dlock_lock *m = e->members[i];

		args[2 * k] = m->token_key;
		lens[2 * k] = m->token_key_len;
		args[2 * k + 1] = max_s;
		lens[2 * k + 1] = strlen(max_s);
		ops[k].client = m->client;
		ops[k].script = &dlock__script_token_raise;
		ops[k].nkeys = 1;
		ops[k].argc = 2;
		ops[k].argv = args + 2 * k;
		ops[k].lens = lens + 2 * k;
		which[k++] = i;
	}
	fs.quorum = e->rules.quorum;
	fs.max = max;
	rc = dlock__mux_run(ops, k, fence_decided, &fs);
	for (i = 0; rc == 0 && i < k; i++) {
		const redisReply *r = ops[i].reply;

		if (ops[i].rc == 0 && r->type == REDIS_REPLY_INTEGER && r->integer >= max)
			raised++;
		else if (ops[i].undecided)
			continue; /* not waited for once a quorum had it */
		else if (t[which[i]].st.vote == DLOCK_VOTE_ACQUIRED)
			set_error(&t[which[i]], ops[i].rc < 0 ? ops[i].rc : DLOCK_ESERVER,
					ops[i].rc < 0 ? ops[i].errmsg : "fencing token not raised");
	}
	if (rc == 0)
		rc = raised >= e->rules.quorum ? 0 : DLOCK_ENOQUORUM;
	*token = max;
out:
	if (ops != NULL)
		dlock__mux_clear(ops, k);
	dlock__free(ops);
	dlock__free(args);
	dlock__free(lens);
	dlock__free(which);
	return rc;
}

static void pause_ms(int64_t ms)
{
	if (ms > 0)
		poll(NULL, 0, (int)ms);
}

static int canceled(dlock__engine *e, const uint64_t *cancels)
{
	size_t i;

	for (i = 0; i < e->n; i++)
		if (dlock__client_cancels(e->members[i]->client) != cancels[i])
			return 1;
	return 0;
}

/*
 * The pause before the next round: a short jitter after contention (the
 * members' own waits did the waiting); after a round that failed on errors
 * alone (servers down, partitioned, loading), a backoff doubling from
 * RETRY_MIN_MS to RETRY_MAX_MS, so a wait rides out an outage without
 * hammering what is left. Never past the wait.
 */
static int64_t next_pause(dlock__engine *e, const dlock__member_try *t, int64_t *backoff,
		int64_t left)
{
	int64_t pause;

	if (count_votes(t, e->n, DLOCK_VOTE_HELD) > 0 || count_votes(t, e->n, DLOCK_VOTE_YOUNG) > 0) {
		*backoff = 0;
		pause = (int64_t)(dlock__random() % RETRY_JITTER_MS);
	} else {
		*backoff = *backoff == 0 ? RETRY_MIN_MS : *backoff * 2;
		if (*backoff > RETRY_MAX_MS)
			*backoff = RETRY_MAX_MS;
		pause = *backoff / 2 + (int64_t)(dlock__random() % (uint64_t)(*backoff / 2 + 1));
	}
	return pause < left ? pause : left;
}

int dlock__engine_acquire(dlock__engine *e, const char *owner, int64_t wait_ms,
		int64_t lease_ms, int64_t *validity_out, int64_t *token_out)
{
	int64_t token = 0;
	dlock__member_try *t;
	dlock_member_status *seen;
	uint64_t *cancels;
	int64_t deadline, validity = -1, t0 = 0, backoff = 0;
	int rc = 0, expired = 0, parallel;
	size_t i;

	if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER)
		return dlock__seterr(DLOCK_EINVAL, "multilock: wait must be >= 0 or DLOCK_WAIT_FOREVER");
	if (lease_ms <= 0 && lease_ms != DLOCK_LEASE_WATCHDOG)
		return dlock__seterr(DLOCK_EINVAL, "multilock: lease must be > 0 or DLOCK_LEASE_WATCHDOG");
	if (owner != NULL && (owner[0] == '\0' || strlen(owner) > DLOCK__OWNER_MAX))
		return dlock__seterr(DLOCK_EINVAL, "multilock: the owner is empty or too long");
	for (i = 0; i < e->n; i++)
		if ((rc = dlock__client_check_fork(e->members[i]->client)) < 0)
			return rc;
	t = dlock__calloc(e->n, sizeof(*t));
	seen = dlock__calloc(e->n, sizeof(*seen));
	cancels = dlock__calloc(e->n, sizeof(*cancels));
	if (t == NULL || seen == NULL || cancels == NULL) {
		dlock__free(t);
		dlock__free(seen);
		dlock__free(cancels);
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	}
	for (i = 0; i < e->n; i++)
		cancels[i] = dlock__client_cancels(e->members[i]->client);
	deadline = dlock__deadline_in(wait_ms);
	reset_tries(e, t, owner);
	for (i = 0; i < e->n; i++)
		seen[i] = t[i].st; /* every member unasked, with its node */

	/* A MultiLock that may not wait keeps Redisson's strict order, which
	 * guarantees that one of several concurrent contenders wins. */
	parallel = e->rules.share_wait || wait_ms != 0;
	if (parallel) {
		/* A lock held for long (the watchdog) should hold every member it
		 * can, to survive the most failures: wait for all, within the
		 * command timeout. A leased lock decides at the quorum, after a
		 * short grace. */
		parallel_state ps = { e->rules.quorum, e->rules.filter != NULL, lease_ms < 0, 0, 0, 0 };

		rc = parallel_attempt(e, t, owner, lease_ms, NULL, &ps, &t0);
		if (rc < 0)
			goto done;
		if (filtered_quorum(e, t, lease_ms)) {
			int64_t ttl = INT64_MAX;

			merge_votes(seen, t, e->n);
			for (i = 0; i < e->n; i++)
				if (t[i].st.vote == DLOCK_VOTE_ACQUIRED &&
				    member_ttl(e->members[i], lease_ms) < ttl)
					ttl = member_ttl(e->members[i], lease_ms);
			/* The TTLs were set by commands sent at t0 or later. */
			validity = ttl - (dlock__now_ms() - t0) -
				(int64_t)((double)ttl * e->rules.drift_factor) - 2;
			if (!e->rules.check_validity || validity > 0)
				goto acquired;
			expired = 1;
		}
		merge_votes(seen, t, e->n);
		rollback(e, t);
		if (wait_ms == 0) {
			rc = classify_failure(e, seen, expired);
			goto done;
		}
	}

	for (;;) {
		int64_t left = deadline == DLOCK__NEVER ? INT64_MAX : deadline - dlock__now_ms();
		int64_t round_ms = (int64_t)e->n * ROUND_MS_PER_MEMBER;

		if (left <= 0 && wait_ms != 0) {
			rc = classify_failure(e, seen, expired);
			goto done;
		}
		if (canceled(e, cancels)) {
			rc = dlock__seterr(DLOCK_ECANCELED, "lock %s: the wait was canceled",
					e->members[0]->shown);
			goto done;
		}
		if (round_ms > left)
			round_ms = left > 0 ? left : 0;
		reset_tries(e, t, owner);
		expired = 0;
		if (ordered_round(e, t, owner, round_ms, lease_ms, wait_ms == 0, cancels)) {
			if (filtered_quorum(e, t, lease_ms)) {
				if (e->test_hook != NULL)
					e->test_hook("finalize", e->test_hook_arg);
				validity = finalize(e, t, lease_ms);
				merge_votes(seen, t, e->n);
				if (validity > 0 || (!e->rules.check_validity &&
				    count_votes(t, e->n, DLOCK_VOTE_ACQUIRED) >= e->rules.quorum))
					goto acquired;
				expired = 1;
			}
			rollback(e, t);
		}
		merge_votes(seen, t, e->n);
		if (wait_ms == 0 || count_final(seen, e->n) > e->n - e->rules.quorum) {
			rc = classify_failure(e, seen, expired);
			goto done;
		}
		left = deadline == DLOCK__NEVER ? INT64_MAX : deadline - dlock__now_ms();
		pause_ms(next_pause(e, t, &backoff, left));
	}

acquired:
	/* The status describes this grant: earlier rounds were given back. */
	for (i = 0; i < e->n; i++)
		seen[i] = t[i].st;
	if (e->fenced) {
		int64_t fence_start = dlock__now_ms();

		rc = fence(e, t, &token);
		/* The keys' TTLs kept running while the token was written back. */
		validity -= dlock__now_ms() - fence_start;
		if (rc == 0 && e->rules.check_validity && validity <= 0)
			rc = DLOCK_EEXPIRED;
	}
	if (e->fenced && rc < 0) {
		/* Too few counters took the token, or the TTL ran out meanwhile:
		 * not a safe grant. */
		rollback(e, t);
		merge_votes(seen, t, e->n);
		rc = rc == DLOCK_ENOMEM ? dlock__seterr(DLOCK_ENOMEM, "lock %s: out of memory fencing",
				e->members[0]->shown) : classify_failure(e, seen, rc == DLOCK_EEXPIRED);
		goto done;
	}
	if (token_out != NULL)
		*token_out = token;
	observe_member_losses(e, t);
	if (validity_out != NULL)
		*validity_out = validity;
	rc = 0;
done:
	publish_status(e, seen);
	dlock__free(t);
	dlock__free(seen);
	dlock__free(cancels);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Release, state, loss                                                 */

/*
 * Release on every member at once. Members the client believes held get a
 * normal unlock (request-id latch). The others may still hold an acquire
 * that reached a server after the client stopped waiting for it (a paused
 * server resumed): the rollback script takes exactly that back.
 */
/* Fewer than a quorum still held, and that because holds were lost - not
 * because an earlier unlock (one that ran out of memory) released some. */
static int quorum_lost(dlock__engine *e, const char *owner)
{
	size_t i, alive = 0, lost = 0;
	char buf[64];

	for (i = 0; i < e->n; i++) {
		dlock_lock *m = e->members[i];
		int s = dlock__holds_state(m, member_owner(e, i, owner, buf));

		alive += s == 0;
		lost += s == DLOCK_ELOST;
	}
	return lost > 0 && alive < e->rules.quorum;
}

int dlock__engine_release(dlock__engine *e, const char *owner)
{
	dlock__member_try *t = dlock__calloc(e->n, sizeof(*t));
	dlock__mux_op *ops = dlock__calloc(e->n, sizeof(*ops));
	dlock__release *rel = dlock__calloc(e->n, sizeof(*rel));
	rollback_args *rb = dlock__calloc(e->n, sizeof(*rb));
	size_t i, released = 0;
	int rc = 0, first_error = 0, nomem = 0, was_lost = 0;
	char first_msg[DLOCK__ERRMSG_MAX] = "";

	if (t == NULL || ops == NULL || rel == NULL || rb == NULL) {
		rc = dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
		goto out;
	}
	if (owner != NULL && (owner[0] == '\0' || strlen(owner) > DLOCK__OWNER_MAX)) {
		rc = dlock__seterr(DLOCK_EINVAL, "multilock: the owner is empty or too long");
		goto out;
	}
	reset_tries(e, t, owner);
	/* A lock found lost stays lost, whatever the release meets. */
	was_lost = quorum_lost(e, owner);
	{
		char key[DLOCK__OWNER_MAX + 1];

		owner_key(e, t[0].owner_ptr, key, sizeof(key));
		disarm(e, key);
	}
	for (i = 0; i < e->n; i++) {
		dlock_lock *m = e->members[i];

		/* An explicit owner may have been taken by another process (a
		 * script's `dlock acquire`): release it wherever it is held. */
		t[i].touched = owner != NULL ||
			dlock__holds_count(m, t[i].owner_ptr, 1) >= 0;
		if (t[i].touched) {
			rc = dlock__release_prepare(m, t[i].owner_ptr, &rel[i]);
			if (rc < 0)
				goto out;
			memset(&ops[i], 0, sizeof(ops[i]));
			ops[i].client = m->client;
			ops[i].script = rel[i].script;
			ops[i].nkeys = rel[i].nkeys;
			ops[i].argc = rel[i].argc;
			/* A server that just timed out would cost its timeout again:
			 * send the release and do not wait (it runs when the server does). */
			ops[i].no_wait = dlock__client_is_slow(m->client);
			ops[i].argv = rel[i].argv;
			ops[i].lens = rel[i].lens;
		} else {
			rollback_op(e, i, t[i].owner_ptr, 1, &ops[i], &rb[i]);
			ops[i].no_wait = dlock__client_is_slow(m->client);
		}
	}
	rc = dlock__mux_run(ops, e->n, NULL, NULL);
	if (rc < 0)
		goto out;
	for (i = 0; i < e->n; i++) {
		dlock_lock *m = e->members[i];
		int r;

		if (!t[i].touched) {
			nomem |= ops[i].rc == DLOCK_ENOMEM;
			rollback_done(e, i, t[i].owner_ptr, 0, &ops[i]);
			continue;
		}
		r = ops[i].rc;
		nomem |= r == DLOCK_ENOMEM;
		if (r == 0 && ops[i].reply == NULL) {
			/* Sent without waiting: count it as done, so renewal stops
			 * with the last hold; the key expires if it never runs. */
			dlock__holds_unsure_release(m, t[i].owner_ptr);
			continue;
		}
		if (r < 0) {
			dlock__seterr(r, "%s", ops[i].errmsg);
			if (r != DLOCK_ENOMEM)
				dlock__holds_unsure_release(m, t[i].owner_ptr);
		} else {
			r = dlock__release_finish(m, &rel[i], ops[i].reply);
		}
		if (r == 0)
			released++;
		else if (first_error == 0 && r != DLOCK_ENOTOWNER) {
			first_error = r;
			snprintf(first_msg, sizeof(first_msg), "%s", dlock__errmsg_thread());
		}
		if (r < 0)
			dlock__errbuf_record(&m->err, r);
	}
	/* Released where a quorum was held: a member that could not be reached
	 * stays a detail (no longer renewed, its hold expires). One this process could not even
	 * send to for lack of memory is not: say so, so the caller unlocks again
	 * (a watchdog hold left recorded would be renewed forever). */
	if (nomem)
		rc = dlock__seterr(DLOCK_ENOMEM, "lock %s released on %zu of %zu nodes: out of memory",
				e->members[0]->shown, released, e->n);
	else if (released >= e->rules.quorum)
		rc = 0;
	else if (first_error < 0)
		rc = dlock__seterr(first_error, "lock %s released on %zu of %zu nodes (quorum %zu): %s",
				e->members[0]->shown, released, e->n, e->rules.quorum, first_msg);
	else if (released == 0)
		rc = dlock__seterr(DLOCK_ENOTOWNER, "lock %s is not held by %s on any node",
				e->members[0]->shown, t[0].owner_ptr);
	if (was_lost && rc != DLOCK_ENOMEM)
		rc = dlock__seterr(DLOCK_ELOST, "lock %s had been lost before the unlock (fewer "
				"than %zu of %zu members still held); released on %zu", e->members[0]->shown,
				e->rules.quorum, e->n, released);
out:
	if (ops != NULL)
		dlock__mux_clear(ops, e->n);
	for (i = 0; rel != NULL && i < e->n; i++)
		dlock__release_clear(e->members[i], &rel[i]);
	dlock__free(t);
	dlock__free(ops);
	dlock__free(rel);
	dlock__free(rb);
	return rc;
}

int dlock__engine_check(dlock__engine *e, const char *owner)
{
	size_t i, alive = 0, known = 0;
	char buf[64];

	for (i = 0; i < e->n; i++) {
		dlock_lock *m = e->members[i];
		int s = dlock__holds_state(m, member_owner(e, i, owner, buf));

		alive += s == 0;
		known += s != DLOCK_ENOTOWNER;
	}
	if (alive >= e->rules.quorum)
		return 0;
	return known > 0 ? DLOCK_ELOST : DLOCK_ENOTOWNER;
}

int dlock__engine_status(dlock__engine *e, size_t i, dlock_member_status *out)
{
	if (out == NULL || i >= e->n)
		return DLOCK_EINVAL;
	dlock__mutex_lock(&e->mu);
	*out = e->status[i];
	dlock__mutex_unlock(&e->mu);
	return 0;
}

void dlock__engine_set_lost(dlock__engine *e, dlock__engine_lost_fn fn, void *userdata)
{
	dlock__mutex_lock(&e->mu);
	e->lost_fn = fn;
	e->lost_ud = userdata;
	dlock__mutex_unlock(&e->mu);
}

/*
 * Owners whose held lock has not been reported lost yet ("armed"), keyed the
 * same way whichever member reports: an explicit owner as it is, a thread
 * owner as ":<tid>" (its uuid differs from member to member).
 */
static void owner_key(const dlock__engine *e, const char *member_owner, char *key, size_t size)
{
	size_t i;

	for (i = 0; i < e->n; i++) {
		const char *id = e->members[i]->client->id;

		if (strncmp(member_owner, id, 36) == 0 && member_owner[36] == ':') {
			snprintf(key, size, "%s", member_owner + 36);
			return;
		}
	}
	snprintf(key, size, "%s", member_owner);
}

/* e->mu held. */
static size_t armed_find(const dlock__engine *e, const char *key)
{
	size_t i;

	for (i = 0; i < e->narmed; i++)
		if (strcmp(e->armed[i], key) == 0)
			return i;
	return (size_t)-1;
}

static void arm(dlock__engine *e, const char *key)
{
	dlock__mutex_lock(&e->mu);
	if (armed_find(e, key) == (size_t)-1) {
		char **grown = dlock__realloc(e->armed, (e->narmed + 1) * sizeof(*grown));
		char *copy = dlock__strdup(key);

		if (grown != NULL)
			e->armed = grown;
		if (grown != NULL && copy != NULL)
			e->armed[e->narmed++] = copy;
		else
			dlock__free(copy); /* no callback for this hold; check() still tells */
	}
	dlock__mutex_unlock(&e->mu);
}

/* Remove the key (e->mu held); returns 1 when it was armed. */
static int disarm_locked(dlock__engine *e, const char *key)
{
	size_t i = armed_find(e, key);

	if (i == (size_t)-1)
		return 0;
	dlock__free(e->armed[i]);
	e->armed[i] = e->armed[--e->narmed];
	return 1;
}

static void disarm(dlock__engine *e, const char *key)
{
	dlock__mutex_lock(&e->mu);
	disarm_locked(e, key);
	dlock__mutex_unlock(&e->mu);
}

/*
 * A member hold was lost (on that member client's background thread). The
 * whole lock is lost once fewer than a quorum of members are still held:
 * report that once per acquisition. Members of different clients report on
 * different threads, so the count and the report happen under the engine's
 * lock.
 */
static void member_lost(void *arg, const char *owner, int reason)
{
	dlock__engine *e = arg;
	dlock__engine_lost_fn fn = NULL;
	void *ud = NULL;
	size_t i, alive = 0;
	char key[DLOCK__OWNER_MAX + 1], buf[DLOCK__OWNER_MAX + 64];

	owner_key(e, owner, key, sizeof(key));
	dlock__mutex_lock(&e->mu);
	for (i = 0; i < e->n; i++) {
		dlock_lock *m = e->members[i];
		const char *o = key;

		if (key[0] == ':') {
			snprintf(buf, sizeof(buf), "%s%s", m->client->id, key);
			o = buf;
		}
		alive += dlock__holds_state(m, o) == 0;
	}
	if (alive < e->rules.quorum && disarm_locked(e, key)) {
		fn = e->lost_fn;
		ud = e->lost_ud;
	}
	dlock__mutex_unlock(&e->mu);
	if (fn != NULL)
		fn(e->self, owner, reason, ud);
}

static void observe_member_losses(dlock__engine *e, dlock__member_try *t)
{
	char key[DLOCK__OWNER_MAX + 1];
	size_t i;

	owner_key(e, t[0].owner_ptr, key, sizeof(key));
	arm(e, key);
	for (i = 0; i < e->n; i++) {
		dlock_lock *m = e->members[i];

		if (t[i].st.vote == DLOCK_VOTE_ACQUIRED)
			dlock__holds_observe(m, t[i].owner_ptr,
					member_lost, e);
	}
}
