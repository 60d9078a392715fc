/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Giving semaphore permits back: `permits` of a plain semaphore, or an
 * expirable permit by its id - one script call as an operation on the
 * client's loop (core/drive/cmd_op.h), which the blocking calls
 * (dlock_semaphore_release, dlock_semaphore_release_permit) drive on the
 * calling thread. A release is not canceled: it finishes (a half-given-back
 * permit would help nobody).
 */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "single/semaphore_internal.h"

typedef struct release_op {
	dlock__cmd_op co; /* first */
	int64_t permits;
	char id[DLOCK_PERMIT_ID_SIZE];
	unsigned char raw[16];
	int mine; /* dlock__permit_forget's answer */
	char kbuf[24], now[24];
} release_op;

static int prepare(dlock__cmd_op *co)
{
	release_op *o = (release_op *)co;
	dlock_semaphore *s = co->handle;

	if (s->kind == DLOCK_SEMAPHORE_PLAIN) {
		dlock__sem_release_call(s, &co->call, o->permits, o->kbuf);
	} else {
		o->mine = dlock__permit_forget(s, o->id); /* renewal ends whatever the answer */
		dlock__permit_release_call(s, &co->call, o->raw, o->now);
	}
	return 0;
}

static int judge(dlock__cmd_op *co, const redisReply *r)
{
	release_op *o = (release_op *)co;
	dlock_semaphore *s = co->handle;
	const char *node = co->mop.client->node.label;
	int rc = dlock__cmd_judge_int(co, r);
	long long v = co->op.result.value;

	co->op.result.value = 0;
	if (rc < 0 || s->kind != DLOCK_SEMAPHORE_EXPIRABLE)
		return rc;
	if (v == 2)
		return dlock__seterr_node(DLOCK_ELOST, node,
				"semaphore %s: permit %s had expired (given back anyway)", s->shown,
				o->id);
	if (v == 0 && o->mine >= 0)
		return dlock__seterr_node(DLOCK_ELOST, node,
				"semaphore %s: permit %s was gone from the server", s->shown, o->id);
	if (v == 0)
		return dlock__seterr_node(DLOCK_ENOTOWNER, node,
				"semaphore %s: no permit %s (released already, or never taken)",
				s->shown, o->id);
	if (o->mine == 0)
		return dlock__seterr(DLOCK_ELOST, "semaphore %s: permit %s had been lost", s->shown,
				o->id);
	return 0;
}

/* A plain release is not resent (a repeat would give back twice); a
 * permit's is (a repeat finds it gone). */
static const dlock__cmd_kind kind_plain = { "dlock_semaphore_release", prepare, judge, NULL,
	dlock__sem_cmd_unref, 1, 0 };
static const dlock__cmd_kind kind_permit = { "dlock_semaphore_release_permit", prepare, judge,
	NULL, dlock__sem_cmd_unref, 1, 1 };

static int release_new(release_op **out, dlock_semaphore *s, int64_t permits, const char *id,
		dlock_op_cb cb, void *userdata)
{
	unsigned char raw[16];
	dlock__cmd_op *co;
	int rc;

	*out = NULL;
	if (s == NULL)
		return dlock__seterr(DLOCK_EINVAL, "semaphore release: NULL semaphore");
	if (s->kind == DLOCK_SEMAPHORE_PLAIN ? permits < 1
					     : id == NULL || dlock__permit_id_parse(id, raw) < 0)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: %s", s->shown,
				s->kind == DLOCK_SEMAPHORE_PLAIN ? "release fewer than 1 permit"
								 : "a permit id is 32 hex digits"));
	rc = dlock__sem_cmd_new(&co, sizeof(release_op),
			s->kind == DLOCK_SEMAPHORE_PLAIN ? &kind_plain : &kind_permit, s, cb,
			userdata);
	if (rc < 0)
		return rc;
	*out = (release_op *)co;
	(*out)->permits = permits;
	if (s->kind == DLOCK_SEMAPHORE_EXPIRABLE) {
		memcpy((*out)->id, id, 32);
		memcpy((*out)->raw, raw, 16);
	}
	return 0;
}

static int release_submit(dlock_op **out, dlock_semaphore *s, int64_t permits, const char *id,
		dlock_op_cb cb, void *userdata)
{
	release_op *o;
	int rc;

	if (out != NULL)
		*out = NULL;
	if ((rc = release_new(&o, s, permits, id, cb, userdata)) < 0)
		return rc;
	return dlock__cmd_op_submit(&o->co, out);
}

int dlock_semaphore_release_async(dlock_op **out, dlock_semaphore *s, int64_t permits,
		dlock_op_cb cb, void *userdata)
{
	if (out != NULL)
		*out = NULL;
	if (s != NULL && s->kind != DLOCK_SEMAPHORE_PLAIN)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: an expirable semaphore releases permits by id "
				"(dlock_semaphore_release_permit_async)", s->shown));
	return release_submit(out, s, permits, NULL, cb, userdata);
}

int dlock_semaphore_release_permit_async(dlock_op **out, dlock_semaphore *s, const char *id,
		dlock_op_cb cb, void *userdata)
{
	if (out != NULL)
		*out = NULL;
	if (s != NULL && s->kind != DLOCK_SEMAPHORE_EXPIRABLE)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: a plain semaphore has no permit ids", s->shown));
	return release_submit(out, s, 0, id, cb, userdata);
}

int dlock_semaphore_release(dlock_semaphore *s, int64_t permits)
{
	release_op *o;
	int rc;

	if (s == NULL)
		return dlock__seterr(DLOCK_EINVAL, "semaphore release: NULL handle");
	if (s->kind != DLOCK_SEMAPHORE_PLAIN)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: an expirable semaphore releases permits by id",
				s->shown));
	if ((rc = release_new(&o, s, permits, NULL, dlock__cmd_blocking, NULL)) < 0)
		return rc;
	return dlock__cmd_op_block(&o->co, NULL, NULL);
}

int dlock_semaphore_release_permit(dlock_semaphore *s, const char *id)
{
	release_op *o;
	int rc;

	if (s == NULL)
		return dlock__seterr(DLOCK_EINVAL, "semaphore release permit: NULL handle");
	if (s->kind != DLOCK_SEMAPHORE_EXPIRABLE)
		return dlock__errbuf_record(&s->err, dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: a plain semaphore has no permit ids", s->shown));
	if ((rc = release_new(&o, s, 0, id, dlock__cmd_blocking, NULL)) < 0)
		return rc;
	return dlock__cmd_op_block(&o->co, NULL, NULL);
}
