/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Acquiring semaphore permits: the waiter (wait.c) with the semaphore's
 * steps. The asynchronous call runs it on the client's loop; the blocking
 * calls run it on the calling thread's loop to its end.
 *
 *   ATTEMPT --taken / final error / wait over--> done
 *      \--too few / transient--> WAITING --message / timer--> ATTEMPT
 *
 * A waiter listens on redisson_sc:{name} (the client's one subscription,
 * shared) and tries again at each message; the timer is the earliest
 * lease end (expirable), a long safety poll, or a transient error's
 * backoff. A cancel during an attempt: an expirable attempt is abandoned
 * with its undo (the release of its permit id, which gives back nothing
 * when the attempt never ran) queued behind it; a plain attempt cannot be
 * undone blindly (a permit has no owner), so its answer is awaited and
 * what it took is released before the canceled callback.
 */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/fmt.h"
#include "core/base/ids.h"
#include "core/base/time.h"
#include "core/mux/mux_loop.h"
#include "core/loop/op.h"
#include "core/drive/stats.h"
#include "single/acquire.h"
#include "single/lock_op.h"
#include "single/semaphore_internal.h"
#include "single/wait.h"

typedef struct sem_op {
	dlock_op op; /* first */
	dlock__waiter w;
	dlock_semaphore *s;
	int64_t permits, lease_ms, expiry, sent_at;
	int giving_back;
	char id[DLOCK_PERMIT_ID_SIZE];
	unsigned char raw[16];
	int have_id; /* the result's permit id is set */
	char kbuf[24], due[24], now[24], undo_now[24];
	char *receipt; /* a plain attempt's receipt key (the prefix, then a request id) */
	size_t receipt_len;
	dlock__call call, undo;
	dlock__mux_op mop;
	dlock__mux_loop give_ml; /* the give-back of a canceled plain attempt */
} sem_op;

#define SOP(p, field) ((sem_op *)((char *)(p) - offsetof(sem_op, field)))

static void start(dlock_op *op);

static void finish(sem_op *o, int rc)
{
	if (!o->op.finished) /* once: a second end is ignored */
		dlock__stat_acquire(o->s->client, rc, o->s->name, o->have_id && rc == 0 ? o->id : NULL,
				dlock__now_us() - o->w.started_us, o->w.attempts, 1, 1);
	dlock__op_finish(&o->op, dlock__errbuf_record(&o->s->err, rc));
}

/* The wait is over (the waiter listens no more). */
static void end(dlock__waiter *w, int rc)
{
	sem_op *o = SOP(w, w);

	if (rc == 0 && o->s->kind == DLOCK_SEMAPHORE_EXPIRABLE) {
		o->have_id = 1;
		o->op.result.permit_id = o->id;
		o->op.result.validity_ms = dlock__permit_lease(o->s, o->lease_ms);
	}
	finish(o, rc);
}

static int end_canceled(sem_op *o)
{
	return dlock__seterr(DLOCK_ECANCELED, "semaphore %s: the acquisition was canceled",
			o->s->shown);
}

static void gave_back(dlock__mux_loop *ml)
{
	sem_op *o = SOP(ml, give_ml);

	dlock__mux_loop_end(ml);
	dlock__mux_clear(&o->mop, 1);
	o->giving_back = 0;
	finish(o, end_canceled(o));
}

/* A canceled attempt took its permits (a plain one's, or one whose answer
 * was in when the cancel came): release them, then end. */
static void give_back(sem_op *o)
{
	int expirable = o->s->kind != DLOCK_SEMAPHORE_PLAIN;

	/* A permit: its own release (o->undo, by its id); permits: a release of as many. */
	if (!expirable)
		dlock__sem_release_call(o->s, &o->call, o->permits, o->kbuf);
	memset(&o->mop, 0, sizeof(o->mop));
	o->mop.client = o->s->client;
	o->mop.call = expirable ? &o->undo : &o->call;
	o->mop.no_retry = 1;
	if (dlock__mux_loop_begin(&o->give_ml, o->op.loop, &o->mop, 1, NULL, NULL, gave_back) < 0) {
		finish(o, dlock__seterr(DLOCK_ENOMEM,
				  "semaphore %s: out of memory giving back %lld permits", o->s->shown,
				  (long long)o->permits));
		return;
	}
	o->giving_back = 1;
}

/* A plain attempt cannot be undone blindly: a cancel awaits its answer. */
static int on_cancel(dlock__waiter *w)
{
	return SOP(w, w)->s->kind == DLOCK_SEMAPHORE_PLAIN;
}

/* The awaited answer of a canceled plain attempt: what it took goes back. */
static void canceled(dlock__waiter *w, int rc)
{
	sem_op *o = SOP(w, w);

	if (rc == 0) {
		give_back(o);
		return;
	}
	finish(o, end_canceled(o));
}

/* The reply of an attempt: 0 taken, DLOCK_ENOTACQUIRED (o->expiry set), or an error. */
static int parse(sem_op *o, const redisReply *r)
{
	dlock_semaphore *s = o->s;
	int rc = dlock__reply_check(&s->client->node, r, "acquire permits");

	o->expiry = -1;
	if (rc < 0)
		return rc;
	if (s->kind == DLOCK_SEMAPHORE_PLAIN && r->type == REDIS_REPLY_INTEGER)
		rc = r->integer >= 0 ? 0 : DLOCK_ENOTACQUIRED;
	else if (s->kind == DLOCK_SEMAPHORE_EXPIRABLE && r->type == REDIS_REPLY_ARRAY)
		rc = 0;
	else if (s->kind == DLOCK_SEMAPHORE_EXPIRABLE && r->type == REDIS_REPLY_INTEGER) {
		o->expiry = r->integer;
		rc = DLOCK_ENOTACQUIRED;
	} else
		return dlock__seterr_node(DLOCK_EPROTO, s->client->node.label,
				"acquire permits %s: unexpected reply type %d", s->shown, r->type);
	if (rc == DLOCK_ENOTACQUIRED)
		dlock__seterr(rc, "semaphore %s: fewer than %lld permits available", s->shown,
				(long long)o->permits);
	return rc;
}

/* What an attempt's answer says; a permit taken is recorded. */
static dlock__wait_verdict judge(dlock__waiter *w, int *out, int64_t *next)
{
	sem_op *o = SOP(w, w);
	redisReply *r = o->mop.reply;
	int rc = o->mop.rc;

	if (rc == 0)
		rc = parse(o, r);
	else
		dlock__seterr(rc, "%s", o->mop.errmsg);
	*out = rc;
	if (rc == 0 && o->s->kind == DLOCK_SEMAPHORE_PLAIN)
		dlock__client_forget(o->s->client, o->receipt, o->receipt_len);
	if (rc == 0 && o->s->kind == DLOCK_SEMAPHORE_EXPIRABLE &&
			(*out = dlock__permit_add(o->s, o->id, o->raw, o->lease_ms, o->sent_at)) < 0)
		return DLOCK__WAIT_FINAL; /* out of memory: the permit comes back with its lease */
	if (rc == 0)
		return DLOCK__WAIT_GOT;
	if (rc == DLOCK_ENOTACQUIRED) {
		/* An expirable permit's lease end: it comes back then, and only
		 * a command that looks gives it back (no message announces it). */
		*next = dlock__now_ms() + (o->expiry >= 0 && o->expiry < DLOCK__SEM_POLL_MS
							  ? o->expiry + 1
							  : DLOCK__SEM_POLL_MS);
		return DLOCK__WAIT_NOT_YET;
	}
	if (dlock__acquire_transient(o->s->client, rc, r) || (r != NULL &&
			(dlock__reply_is_error(r, "MOVED") || dlock__reply_is_error(r, "ASK"))))
		return DLOCK__WAIT_TRANSIENT;
	return DLOCK__WAIT_FINAL;
}

/* Prepare an attempt and its undo, and send it. */
static int attempt(dlock__waiter *w)
{
	sem_op *o = SOP(w, w);
	dlock_semaphore *s = o->s;
	dlock__call *c = &o->call;
	int rc;

	memset(c, 0, sizeof(*c));
	memset(&o->mop, 0, sizeof(o->mop));
	if (s->kind == DLOCK_SEMAPHORE_PLAIN) {
		dlock__request_id(o->receipt + s->receipt_prefix_len);
		c->script = &dlock__script_sem_acquire;
		dlock__call_push(c, s->name, s->name_len);
		dlock__call_push(c, o->receipt, o->receipt_len);
		dlock__call_keys_done(c);
		dlock__call_push(c, o->kbuf, dlock__fmt_i64(o->kbuf, o->permits));
		dlock__call_push(c, DLOCK__SEM_RECEIPT_MS, strlen(DLOCK__SEM_RECEIPT_MS));
		o->mop.no_retry = 1; /* a repeat could take twice */
		/* Gives back only what this attempt took (its receipt). */
		memset(&o->undo, 0, sizeof(o->undo));
		o->undo.script = &dlock__script_sem_undo;
		dlock__call_push(&o->undo, s->name, s->name_len);
		dlock__call_push(&o->undo, s->channel, s->channel_len);
		dlock__call_push(&o->undo, o->receipt, o->receipt_len);
		dlock__call_keys_done(&o->undo);
		o->mop.undo = &o->undo;
	} else {
		/* A new id per attempt: an abandoned one's undo may be on its way. */
		dlock__permit_id_new(o->id, o->raw);
		c->script = &dlock__script_permit_acquire;
		dlock__call_push(c, s->name, s->name_len);
		dlock__call_push(c, s->timeouts, s->timeouts_len);
		dlock__call_push(c, s->channel, s->channel_len);
		dlock__call_keys_done(c);
		dlock__call_push(c, "1", 1);
		dlock__call_push(c, o->due,
				dlock__permit_deadline(o->due, dlock__permit_lease(s, o->lease_ms)));
		dlock__call_push(c, o->now, dlock__fmt_i64(o->now, dlock__wall_ms()));
		dlock__call_push(c, DLOCK__PERMIT_NO_LEASE, strlen(DLOCK__PERMIT_NO_LEASE));
		dlock__call_push(c, (const char *)o->raw, 16);
		/* Exact whether the attempt ran or not: it releases this id only. */
		dlock__permit_release_call(s, &o->undo, o->raw, o->undo_now);
		o->mop.undo = &o->undo;
	}
	o->mop.client = s->client;
	o->mop.call = c;
	o->sent_at = dlock__now_ms();
	if ((rc = dlock__waiter_send(w, &o->mop, 1)) < 0)
		return dlock__seterr(rc, "semaphore %s: out of memory", s->shown);
	return 0;
}

static const dlock__waiter_steps steps = {
	.noun = "semaphore",
	.attempt = attempt,
	.judge = judge,
	.end = end,
	.on_cancel = on_cancel,
	.canceled = canceled,
};

static void start(dlock_op *op)
{
	dlock__waiter_start(&((sem_op *)op)->w, 0);
}

static void cancel(dlock_op *op)
{
	sem_op *o = (sem_op *)op;

	if (o->giving_back)
		return; /* it ends once that is over */
	dlock__waiter_cancel(&o->w, "the acquisition");
}

static void destroy(dlock_op *op)
{
	sem_op *o = (sem_op *)op;
	dlock_semaphore *s = o->s;

	dlock__free(o->receipt);
	dlock__free(o);
	dlock__sem_unref(s);
}

static int new_op(sem_op **out, dlock_semaphore *s, int64_t permits, int64_t wait_ms,
		int64_t lease_ms, dlock_op_cb cb, void *userdata)
{
	sem_op *o;
	int rc;

	*out = NULL;
	if (s == NULL || cb == NULL)
		return dlock__seterr(DLOCK_EINVAL, "semaphore acquire: NULL %s",
				s == NULL ? "semaphore" : "callback");
	if (permits < 1 || (s->kind == DLOCK_SEMAPHORE_EXPIRABLE && permits != 1) ||
			(wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER) ||
			(s->kind == DLOCK_SEMAPHORE_EXPIRABLE && lease_ms <= 0 &&
					lease_ms != DLOCK_LEASE_WATCHDOG))
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: bad permits (%lld), wait (%lld) or lease (%lld)",
				s->shown, (long long)permits, (long long)wait_ms,
				(long long)lease_ms));
	if ((rc = dlock__client_check_fork(s->client)) < 0)
		return dlock__errbuf_record(&s->err, rc);
	o = dlock__calloc(1, sizeof(*o));
	if (o == NULL)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_ENOMEM,
				"semaphore %s: out of memory", s->shown));
	if (s->kind == DLOCK_SEMAPHORE_PLAIN) {
		o->receipt_len = s->receipt_prefix_len + 32;
		if ((o->receipt = dlock__malloc(o->receipt_len + 1)) == NULL) {
			dlock__free(o);
			return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_ENOMEM,
					"semaphore %s: out of memory", s->shown));
		}
		memcpy(o->receipt, s->receipt_prefix, s->receipt_prefix_len);
	}
	dlock__op_init(&o->op, dlock__sem_loop(s), cb, userdata);
	o->op.start = start;
	o->op.cancel = cancel;
	o->op.destroy = destroy;
	o->s = s;
	atomic_fetch_add(&s->refs, 1);
	o->permits = permits;
	o->lease_ms = lease_ms;
	dlock__waiter_init(&o->w, &steps, &o->op, s->client, s->shown, s->channel, s->channel_len,
			wait_ms);
	*out = o;
	return 0;
}

static int submit(dlock_op **out, dlock_semaphore *s, int64_t permits, int64_t wait_ms,
		int64_t lease_ms, dlock_op_cb cb, void *userdata)
{
	sem_op *o;
	int rc;

	if ((rc = new_op(&o, s, permits, wait_ms, lease_ms, cb, userdata)) < 0)
		return rc;
	dlock__op_submit_out(&o->op, out);
	return 0;
}

int dlock_semaphore_acquire_async(dlock_op **out, dlock_semaphore *s, int64_t permits,
		int64_t wait_ms, dlock_op_cb cb, void *userdata)
{
	if (out != NULL)
		*out = NULL;
	if (s != NULL && s->kind != DLOCK_SEMAPHORE_PLAIN)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: an expirable semaphore acquires with "
				"dlock_semaphore_acquire_permit_async",
				s->shown));
	return submit(out, s, permits, wait_ms, 0, cb, userdata);
}

int dlock_semaphore_acquire_permit_async(dlock_op **out, dlock_semaphore *s, int64_t wait_ms,
		int64_t lease_ms, dlock_op_cb cb, void *userdata)
{
	if (out != NULL)
		*out = NULL;
	if (s != NULL && s->kind != DLOCK_SEMAPHORE_EXPIRABLE)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: a plain semaphore has no permit ids", s->shown));
	return submit(out, s, 1, wait_ms, lease_ms, cb, userdata);
}

/* How a blocking call's operation ended. */
typedef struct ending {
	int done, code;
	char id[DLOCK_PERMIT_ID_SIZE];
	char message[DLOCK__ERRMSG_MAX];
} ending;

static void note(dlock_op *op, const dlock_result *r, void *userdata)
{
	ending *e = userdata;

	(void)op;
	e->done = 1;
	e->code = r->code;
	snprintf(e->id, sizeof(e->id), "%s", r->permit_id != NULL ? r->permit_id : "");
	snprintf(e->message, sizeof(e->message), "%s", r->message);
}

static int block(dlock_semaphore *s, int64_t permits, int64_t wait_ms, int64_t lease_ms, char *id)
{
	ending e;
	sem_op *o;
	int rc;

	memset(&e, 0, sizeof(e));
	if ((rc = new_op(&o, s, permits, wait_ms, lease_ms, note, &e)) < 0)
		return rc;
	o->w.canceled_with = 1;
	o->w.cancels = dlock__client_cancels(s->client);
	if ((rc = dlock__op_block(&o->op, s->client, &e.done)) < 0)
		return dlock__errbuf_record(&s->err, rc);
	if (e.code < 0)
		return dlock__errbuf_record(&s->err, dlock__seterr(e.code, "%s", e.message));
	if (id != NULL)
		memcpy(id, e.id, DLOCK_PERMIT_ID_SIZE);
	return 0;
}

int dlock_semaphore_acquire(dlock_semaphore *s, int64_t permits, int64_t wait_ms)
{
	if (s != NULL && s->kind != DLOCK_SEMAPHORE_PLAIN)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: an expirable semaphore acquires with "
				"dlock_semaphore_acquire_permit",
				s->shown));
	return block(s, permits, wait_ms, 0, NULL);
}

int dlock_semaphore_acquire_permit(
		char id[DLOCK_PERMIT_ID_SIZE], dlock_semaphore *s, int64_t wait_ms, int64_t lease_ms)
{
	if (s != NULL && (s->kind != DLOCK_SEMAPHORE_EXPIRABLE || id == NULL))
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: %s", s->shown,
				id == NULL ? "id is NULL" : "a plain semaphore has no permit ids"));
	return block(s, 1, wait_ms, lease_ms, id);
}
