/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Giving semaphore permits back without blocking: one script call on the
 * client's loop, as dlock_semaphore_release() and
 * dlock_semaphore_release_permit() make it. A release is not canceled: it
 * finishes (a half-given-back permit would help nobody).
 */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/mux_loop.h"
#include "core/loop/op.h"
#include "single/semaphore_internal.h"

typedef struct release_op {
	dlock_op op; /* first */
	dlock_semaphore *s;
	int64_t permits;
	char id[DLOCK_PERMIT_ID_SIZE];
	unsigned char raw[16];
	int mine; /* dlock__permit_forget's answer */
	char kbuf[24], now[24];
	dlock__call call;
	dlock__mux_op mop;
	dlock__mux_loop ml;
} release_op;

static void done(dlock__mux_loop *ml)
{
	release_op *o = (release_op *)((char *)ml - offsetof(release_op, ml));
	dlock_semaphore *s = o->s;
	redisReply *r = o->mop.reply;
	int rc = o->mop.rc;

	if (rc == 0)
		rc = dlock__reply_check(&s->client->node, r, "release permits");
	else
		dlock__seterr(rc, "%s", o->mop.errmsg);
	if (rc == 0 && r->type != REDIS_REPLY_INTEGER)
		rc = dlock__seterr_node(DLOCK_EPROTO, s->client->node.label,
				"release %s: unexpected reply type %d", s->shown, r->type);
	if (rc == 0 && s->kind == DLOCK_SEMAPHORE_EXPIRABLE) {
		long long v = r->integer;

		if (v == 2)
			rc = dlock__seterr_node(DLOCK_ELOST, s->client->node.label,
					"semaphore %s: permit %s had expired (given back anyway)",
					s->shown, o->id);
		else if (v == 0)
			rc = dlock__seterr_node(o->mine >= 0 ? DLOCK_ELOST : DLOCK_ENOTOWNER,
					s->client->node.label, "semaphore %s: no permit %s on the server",
					s->shown, o->id);
		else if (o->mine == 0)
			rc = dlock__seterr(DLOCK_ELOST, "semaphore %s: permit %s had been lost",
					s->shown, o->id);
	}
	dlock__mux_loop_end(ml);
	dlock__mux_clear(&o->mop, 1);
	dlock__op_finish(&o->op, dlock__errbuf_record(&s->err, rc));
}

static void start(dlock_op *op)
{
	release_op *o = (release_op *)op;
	dlock_semaphore *s = o->s;

	if (s->kind == DLOCK_SEMAPHORE_PLAIN) {
		dlock__sem_release_call(s, &o->call, o->permits, o->kbuf);
	} else {
		o->mine = dlock__permit_forget(s, o->id);
		dlock__permit_release_call(s, &o->call, o->raw, o->now);
	}
	memset(&o->mop, 0, sizeof(o->mop));
	o->mop.client = s->client;
	o->mop.call = &o->call;
	o->mop.no_retry = s->kind == DLOCK_SEMAPHORE_PLAIN; /* a repeat would give back twice */
	if (dlock__mux_loop_begin(&o->ml, op->loop, &o->mop, 1, NULL, NULL, done) < 0)
		dlock__op_finish(op, dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_ENOMEM,
				"semaphore %s: out of memory", s->shown)));
}

static void cancel(dlock_op *op)
{
	(void)op; /* uncancelable: it finishes */
}

static void destroy(dlock_op *op)
{
	release_op *o = (release_op *)op;
	dlock_semaphore *s = o->s;

	dlock__free(o);
	dlock__sem_unref(s);
}

int dlock_semaphore_release_async(dlock_op **out, dlock_semaphore *s, int64_t permits,
		const char *id, dlock_op_cb cb, void *userdata)
{
	unsigned char raw[16];
	release_op *o;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (s == NULL || cb == NULL)
		return dlock__seterr(DLOCK_EINVAL, "semaphore release: NULL %s",
				s == NULL ? "semaphore" : "callback");
	if (s->kind == DLOCK_SEMAPHORE_PLAIN ? permits < 1
					     : id == NULL || dlock__permit_id_parse(id, raw) < 0)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: %s", s->shown,
				s->kind == DLOCK_SEMAPHORE_PLAIN ? "release fewer than 1 permit"
								 : "a permit id is 32 hex digits"));
	if ((rc = dlock__client_check_fork(s->client)) < 0)
		return dlock__errbuf_record(&s->err, rc);
	if ((o = dlock__calloc(1, sizeof(*o))) == NULL)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_ENOMEM,
				"semaphore %s: out of memory", s->shown));
	dlock__op_init(&o->op, dlock__sem_loop(s), cb, userdata);
	o->op.start = start;
	o->op.cancel = cancel;
	o->op.destroy = destroy;
	o->op.uncancelable = 1;
	o->s = s;
	atomic_fetch_add(&s->refs, 1);
	o->permits = permits;
	if (s->kind == DLOCK_SEMAPHORE_EXPIRABLE) {
		memcpy(o->id, id, 32);
		memcpy(o->raw, raw, 16);
	}
	if (out != NULL)
		*out = &o->op;
	dlock__op_submit(&o->op);
	return 0;
}
