/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Queries over the members, as Redisson's locks have them: whether the lock
 * is held (by anyone, or by an owner) on a quorum of members, and a
 * member's TTL. The quorum queries are an operation on the first member's
 * client's loop that asks every member at once in one multiplexed run
 * (a cluster's MOVED/ASK sent again to the member named); the answer is
 * given once the members that answered settle it - a stopped server is not
 * waited for then - or, when they cannot, once every member answered or
 * failed. The _async call hands it to the loop, the blocking call drives it.
 */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"
#include "core/drive/client.h"
#include "multilock/parts.h"
#include "single/ask.h"
#include "single/lock_op.h"
#include "single/member.h"

#define WHAT(held) ((held) ? "is_held" : "is_locked")

/* Member i's question, and what became of it. */
typedef struct member_q {
	dlock__lock_ask ask;
	int redirects;         /* MOVED/ASK so far */
	int decided;           /* answered (1) or failed (-1) */
	int in_run;            /* its question went in the run under way */
	int64_t vote;          /* its answer */
	dlock_client *send_to; /* a redirect to follow (NULL: none) */
	int send_asking;
} member_q;

/* The question to every member, and what came back so far. */
typedef struct asking {
	int held;           /* is_held (else is_locked) */
	size_t n;           /* members (the op's lock may be gone when it is freed) */
	member_q *q;
	dlock__mux_op *ops; /* member i's command in the run under way */
	size_t yes, no;
	int first_rc;
	char first[DLOCK__ERRMSG_MAX];
	int runs;
} asking;

static void asking_free(asking *a)
{
	if (a == NULL)
		return;
	if (a->ops != NULL)
		dlock__mux_clear(a->ops, a->n);
	dlock__free(a->q);
	dlock__free(a->ops);
	dlock__free(a);
}

/* Settled: a quorum says yes, or too many say no for one to be possible. */
static int settled(const dlock__engine *e, size_t yes, size_t no)
{
	return yes >= e->rules.quorum || no > e->n - e->rules.quorum;
}

/* The run's `enough`: the answers so far settle it (replies not taken
 * yet counted as they will be; an error reply is no vote). */
static int enough(void *arg, const dlock__mux_op *ops, size_t n, int64_t *wake_at)
{
	dlock__engine_op *o = arg;
	const asking *a = o->step;
	size_t i, yes = a->yes, no = a->no;
	int v;

	(void)wake_at;
	for (i = 0; i < n; i++) {
		if (ops[i].skip || ops[i].rc < 0 ||
				(v = dlock__lock_ask_vote(&a->q[i].ask, ops[i].reply)) < 0)
			continue;
		yes += v == 1;
		no += v == 0;
	}
	return settled(o->e, yes, no);
}

static void note_failure(asking *a, dlock_lock *m, size_t i, int rc)
{
	a->q[i].decided = -1;
	if (a->first_rc == 0) {
		a->first_rc = rc;
		snprintf(a->first, sizeof(a->first), "%s", dlock__errmsg_thread());
	}
	dlock__lock_record(m, rc);
}

/* Member i's op of the run just over: an answer, a failure, or a redirect to follow. */
static void take_answer(dlock__engine_op *o, asking *a, size_t i)
{
	dlock_lock *m = o->e->members[i];
	const dlock__mux_op *op = &a->ops[i];
	int rc;

	if (!a->q[i].in_run || op->undecided)
		return; /* not asked now, or not waited for: settled without it */
	rc = 0;
	if (op->rc == 0 && op->reply != NULL)
		rc = dlock__lock_op_redirect(m, op->reply, &a->q[i].redirects, &a->q[i].send_to);
	if (rc != 0) {
		if (rc > 0)
			a->q[i].send_asking = rc == 2;
		else
			note_failure(a, m, i, rc);
		return;
	}
	rc = dlock__lock_ask_answer(
			&a->q[i].ask, op, WHAT(a->held), dlock__lock_shown(m), &a->q[i].vote);
	if (rc < 0) {
		note_failure(a, m, i, rc);
		return;
	}
	a->q[i].decided = 1;
	a->yes += a->q[i].vote != 0;
	a->no += a->q[i].vote == 0;
}

/* The answer: settled by the members that answered, or "cannot tell". */
static int verdict(dlock__engine_op *o, const asking *a)
{
	const dlock__engine *e = o->e;
	int rc;

	/* One server answering twice is no quorum (servers.c). */
	if ((rc = dlock__engine_servers_check(e)) < 0)
		return rc;
	o->op.result.value = a->yes >= e->rules.quorum;
	if (settled(e, a->yes, a->no))
		return 0;
	o->op.result.value = 0;
	if (a->first_rc == DLOCK_ENOMEM) /* this process's shortage, not the servers' */
		return dlock__seterr(DLOCK_ENOMEM, "%s", a->first);
	return dlock__seterr(a->first_rc == DLOCK_EWRONGTYPE ? DLOCK_EWRONGTYPE : DLOCK_ENOQUORUM,
			"lock %s: %zu of %zu members answered (%zu yes, %zu no; %zu needed): "
			"cannot tell; %s",
			dlock__lock_shown(e->members[0]), a->yes + a->no, e->n, a->yes, a->no,
			e->rules.quorum, a->first);
}

static void finish(dlock__engine_op *o, int rc)
{
	asking_free(o->step);
	o->step = NULL;
	dlock__engine_op_end(o, rc);
}

/* Send every member's question that is still to send (the first run: all;
 * then the redirected, to the member named). 0: nothing left to send. */
static size_t prepare_run(dlock__engine_op *o, asking *a)
{
	size_t i, sent = 0;

	dlock__mux_clear(a->ops, o->e->n);
	memset(a->ops, 0, o->e->n * sizeof(*a->ops));
	for (i = 0; i < o->e->n; i++) {
		dlock__mux_op *op = &a->ops[i];

		dlock__lock_ask_into(&a->q[i].ask, op);
		op->client = dlock__lock_client(o->e->members[i]);
		a->q[i].in_run = a->q[i].decided == 0 && (a->runs == 0 || a->q[i].send_to != NULL);
		if (!a->q[i].in_run) {
			op->skip = 1;
			continue;
		}
		if (a->q[i].send_to != NULL) {
			op->client = a->q[i].send_to;
			op->asking = a->q[i].send_asking;
		}
		a->q[i].send_to = NULL;
		a->q[i].send_asking = 0;
		sent++;
	}
	a->runs++;
	return sent;
}

static void asked(dlock__engine_op *o)
{
	asking *a = o->step;
	size_t i;

	if (o->run_rc < 0) {
		finish(o, o->run_rc);
		return;
	}
	for (i = 0; i < o->e->n; i++)
		take_answer(o, a, i);
	if (settled(o->e, a->yes, a->no) || prepare_run(o, a) == 0) {
		finish(o, verdict(o, a));
		return;
	}
	dlock__engine_run(o, a->ops, o->e->n, enough, o, asked);
}

static void query_start(dlock_op *op)
{
	dlock__engine_op *o = (dlock__engine_op *)op;

	prepare_run(o, o->step);
	dlock__engine_run(o, ((asking *)o->step)->ops, o->e->n, enough, o, asked);
}

/* A query is canceled at once: nothing to give back. */
static void query_cancel(dlock_op *op)
{
	dlock__engine_op *o = (dlock__engine_op *)op;
	const asking *a = o->step;

	if (o->after_run != NULL && o->run_rc == 0)
		dlock__mux_loop_end(&o->ml); /* the run in flight */
	else if (o->after_run != NULL)
		dlock__timer_stop(o->op.loop, &o->skip); /* its end from the loop, to come */
	o->after_run = NULL;
	finish(o, dlock__seterr(DLOCK_ECANCELED, "lock %s: %s canceled",
				  dlock__lock_shown(o->e->members[0]), WHAT(a->held)));
}

/* Freed with the op, even one canceled before it started. */
static void query_destroy(dlock_op *op)
{
	dlock__engine_op *o = (dlock__engine_op *)op;

	asking_free(o->step);
	o->step = NULL;
	dlock__engine_op_free(op);
}

static int asking_new(dlock__engine_op *o, int held, const char *owner)
{
	size_t i, n = o->e->n;
	asking *a = dlock__calloc(1, sizeof(*a));
	int rc = 0;

	if (a == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	a->held = held;
	a->n = n;
	a->q = dlock__calloc(n, sizeof(*a->q));
	a->ops = dlock__calloc(n, sizeof(*a->ops));
	if (a->q == NULL || a->ops == NULL) {
		asking_free(a);
		return dlock__seterr(DLOCK_ENOMEM, "multilock: out of memory");
	}
	/* The owner (NULL: the calling thread's on each member) resolved now. */
	for (i = 0; i < n && rc == 0; i++) {
		if (held)
			rc = dlock__lock_ask_held(&a->q[i].ask, o->e->members[i], owner);
		else
			dlock__lock_ask_locked(&a->q[i].ask, o->e->members[i]);
	}
	if (rc < 0) {
		asking_free(a);
		return rc;
	}
	o->op.destroy = query_destroy;
	o->op.cancel = query_cancel;
	o->step = a;
	return 0;
}

static int query_new(dlock__engine_op **out, dlock__engine *e, int held, const char *owner,
		dlock_op_cb cb, void *userdata)
{
	dlock__engine_op *o;
	int rc;

	*out = NULL;
	if (owner != NULL && (owner[0] == '\0' || strlen(owner) > DLOCK__OWNER_MAX))
		return dlock__seterr(DLOCK_EINVAL, "multilock: the owner is empty or too long");
	if ((rc = dlock__client_check_fork(dlock__lock_client(e->members[0]))) < 0 ||
			(rc = dlock__engine_op_new(&o, e, owner, cb, userdata, query_start)) < 0)
		return rc;
	if ((rc = asking_new(o, held, owner)) < 0) {
		o->op.destroy(&o->op);
		return rc;
	}
	*out = o;
	return 0;
}

static int ask_quorum(dlock__engine *e, int held, const char *owner, int *out)
{
	dlock__ending b = { 0 };
	dlock__engine_op *o;
	int rc;

	if (out == NULL)
		return dlock__seterr(DLOCK_EINVAL, "multilock query: NULL argument");
	*out = 0;
	if ((rc = query_new(&o, e, held, owner, dlock__ending_note, &b)) < 0)
		return rc;
	if ((rc = dlock__op_block(&o->op, dlock__lock_client(e->members[0]), &b.done)) < 0)
		return rc;
	if (b.code < 0)
		return dlock__seterr(b.code, "%s", b.message);
	*out = b.value != 0;
	return 0;
}

static int ask_quorum_async(dlock_op **out, dlock__engine *e, int held, const char *owner,
		dlock_op_cb cb, void *userdata)
{
	dlock__engine_op *o;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (cb == NULL)
		return dlock__seterr(DLOCK_EINVAL, "multilock query: NULL callback");
	if ((rc = query_new(&o, e, held, owner, cb, userdata)) < 0)
		return rc;
	if (out != NULL)
		*out = &o->op;
	dlock__op_submit_out(&o->op, out);
	return 0;
}

int dlock__engine_is_locked(dlock__engine *e, int *out)
{
	return ask_quorum(e, 0, NULL, out);
}

int dlock__engine_is_held(dlock__engine *e, const char *owner, int *out)
{
	return ask_quorum(e, 1, owner, out);
}

int dlock__engine_is_locked_async(dlock_op **out, dlock__engine *e, dlock_op_cb cb, void *userdata)
{
	return ask_quorum_async(out, e, 0, NULL, cb, userdata);
}

int dlock__engine_is_held_async(dlock_op **out, dlock__engine *e, const char *owner,
		dlock_op_cb cb, void *userdata)
{
	return ask_quorum_async(out, e, 1, owner, cb, userdata);
}

static int member_check(const dlock__engine *e, size_t i, int have_out)
{
	if (!have_out || i >= e->n)
		return dlock__seterr(DLOCK_EINVAL, "multilock query: %s",
				!have_out ? "NULL argument" : "no such member");
	return 0;
}

/* A member's TTL is that member's own query (single/query.c): one op, one server. */
int dlock__engine_member_ttl(dlock__engine *e, size_t i, int64_t *out_ms)
{
	int rc = member_check(e, i, out_ms != NULL);

	if (rc == 0 && (rc = dlock_lock_remaining_ttl_ms(out_ms, e->members[i])) < 0)
		return dlock__seterr(rc, "%s", dlock__errmsg_thread());
	return rc;
}

int dlock__engine_member_ttl_async(dlock_op **out, dlock__engine *e, size_t i, dlock_op_cb cb,
		void *userdata)
{
	int rc = member_check(e, i, 1);

	if (out != NULL)
		*out = NULL;
	if (rc == 0 && (rc = dlock_lock_remaining_ttl_ms_async(out, e->members[i], cb, userdata)) < 0)
		return dlock__seterr(rc, "%s", dlock__errmsg_thread());
	return rc;
}
