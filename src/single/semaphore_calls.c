/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A semaphore's count: set it, add to it, read it, free an expirable one's
 * taken permits by force. Each call is an operation of one command on the
 * handle's client's loop (core/drive/cmd_op.h): the _async call hands it
 * to the loop, the blocking call drives it on the calling thread.
 */
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/fmt.h"
#include "single/acquire.h"
#include "single/semaphore_internal.h"

typedef struct count_op {
	dlock__cmd_op co; /* first */
	int64_t arg;      /* the count, or the delta */
	char num[24], now[24];
} count_op;

static dlock_semaphore *sem_of(const dlock__cmd_op *co)
{
	return co->handle;
}

/* The script on the count and channel (and the timeouts when `all`), with arg. */
static void count_call(dlock__cmd_op *co, dlock__script *script, int all)
{
	count_op *o = (count_op *)co;

	dlock__sem_push_keys(sem_of(co), &co->call, script, all);
	dlock__call_push(&co->call, o->num, dlock__fmt_i64(o->num, o->arg));
}

static int prepare_try_set(dlock__cmd_op *co)
{
	count_call(co, &dlock__script_sem_try_set, 0);
	return 0;
}

static int prepare_add(dlock__cmd_op *co)
{
	count_call(co, &dlock__script_sem_add, 0);
	return 0;
}

static int prepare_set(dlock__cmd_op *co)
{
	count_call(co, &dlock__script_sem_set, 1);
	return 0;
}

/* A plain semaphore's count is its key (GET); an expirable one's is
 * counted by a script, which gives expired permits back first. */
static int prepare_available(dlock__cmd_op *co)
{
	count_op *o = (count_op *)co;
	dlock_semaphore *s = sem_of(co);

	if (s->kind == DLOCK_SEMAPHORE_PLAIN) {
		co->argv[0] = "GET";
		co->lens[0] = 3;
		co->argv[1] = s->name;
		co->lens[1] = s->name_len;
		co->argc = 2;
		return 0;
	}
	dlock__call_begin(&co->call, &dlock__script_sem_available);
	dlock__call_push(&co->call, s->name, s->name_len);
	dlock__call_push(&co->call, s->timeouts, s->timeouts_len);
	dlock__call_push(&co->call, s->channel, s->channel_len);
	dlock__call_keys_done(&co->call);
	dlock__call_push(&co->call, o->now, dlock__fmt_i64(o->now, dlock__wall_ms()));
	return 0;
}

static int prepare_force(dlock__cmd_op *co)
{
	dlock__sem_push_keys(sem_of(co), &co->call, &dlock__script_sem_force_release, 1);
	return 0;
}

/* try set: 1 set, 0 it was set already. */
static int judge_set(dlock__cmd_op *co, const redisReply *r)
{
	int rc = dlock__cmd_judge_int(co, r);

	co->op.result.value = rc == 0 && co->op.result.value == 1;
	return rc;
}

/* add, set: no answer beyond the outcome. */
static int judge_done(dlock__cmd_op *co, const redisReply *r)
{
	int rc = dlock__cmd_judge_int(co, r);

	co->op.result.value = 0;
	return rc;
}

static int judge_available(dlock__cmd_op *co, const redisReply *r)
{
	if (co->argc == 0 || r->type == REDIS_REPLY_INTEGER)
		return dlock__cmd_judge_int(co, r);
	if (r->type == REDIS_REPLY_STRING)
		co->op.result.value = strtoll(r->str, NULL, 10);
	else if (r->type == REDIS_REPLY_NIL)
		co->op.result.value = 0; /* never set */
	else
		return dlock__seterr_node(DLOCK_EPROTO, co->mop.client->node.label,
				"GET %s: unexpected reply type %d", co->shown, r->type);
	return 0;
}

static int judge_force(dlock__cmd_op *co, const redisReply *r)
{
	dlock_semaphore *s = sem_of(co);
	int rc = dlock__cmd_judge_int(co, r), any;

	if (rc < 0 || co->op.result.value <= 0)
		return rc;
	dlock__mutex_lock(&s->mu);
	any = s->job.started && !s->freed;
	dlock__mutex_unlock(&s->mu);
	if (any)
		dlock__permit_renew_now(s); /* this handle's own permits are lost too */
	return 0;
}

/* Changes are not canceled; a repeat of an add would add twice, the others
 * find their work done. */
static const dlock__cmd_kind kind_try_set = { "dlock_semaphore_try_set_permits", prepare_try_set,
	judge_set, NULL, dlock__sem_cmd_unref, 1, 1 };
static const dlock__cmd_kind kind_add = { "dlock_semaphore_add_permits", prepare_add, judge_done,
	NULL, dlock__sem_cmd_unref, 1, 0 };
static const dlock__cmd_kind kind_set = { "dlock_semaphore_set_permits", prepare_set, judge_done,
	NULL, dlock__sem_cmd_unref, 1, 1 };
static const dlock__cmd_kind kind_available = { "dlock_semaphore_available", prepare_available,
	judge_available, NULL, dlock__sem_cmd_unref, 0, 0 };
static const dlock__cmd_kind kind_force = { "dlock_semaphore_force_release", prepare_force,
	judge_force, NULL, dlock__sem_cmd_unref, 1, 1 };

/* What the kind refuses before any traffic: 0, or DLOCK_EINVAL with a message. */
static int refused(const dlock__cmd_kind *kind, dlock_semaphore *s, int64_t arg)
{
	if (kind == &kind_try_set && arg < 0)
		return dlock__seterr(DLOCK_EINVAL, "semaphore %s: a negative count (%lld)", s->shown,
				(long long)arg);
	if (kind == &kind_force && s->kind != DLOCK_SEMAPHORE_EXPIRABLE)
		return dlock__seterr(DLOCK_EINVAL,
				"semaphore %s: a force release is for an expirable semaphore (a "
				"plain one does not know which permits are taken)",
				s->shown);
	return 0;
}

static int count_new(count_op **out, const dlock__cmd_kind *kind, dlock_semaphore *s, int64_t arg,
		dlock_op_cb cb, void *userdata)
{
	dlock__cmd_op *co;
	int rc;

	*out = NULL;
	if (s != NULL && (rc = refused(kind, s, arg)) < 0)
		return dlock__errbuf_record(&s->err, rc);
	if ((rc = dlock__sem_cmd_new(&co, sizeof(count_op), kind, s, cb, userdata)) < 0)
		return rc;
	*out = (count_op *)co;
	(*out)->arg = arg;
	return 0;
}

/* The blocking call: the op driven here; its answer into *value (may be NULL). */
static int block(const dlock__cmd_kind *kind, dlock_semaphore *s, int64_t arg, int64_t *value)
{
	count_op *o;
	int rc = count_new(&o, kind, s, arg, dlock__cmd_blocking, NULL);

	return rc < 0 ? rc : dlock__cmd_op_block(&o->co, value, NULL);
}

static int submit(dlock_op **out, const dlock__cmd_kind *kind, dlock_semaphore *s, int64_t arg,
		dlock_op_cb cb, void *userdata)
{
	count_op *o;
	int rc;

	if (out != NULL)
		*out = NULL;
	rc = count_new(&o, kind, s, arg, cb, userdata);
	return rc < 0 ? rc : dlock__cmd_op_submit(&o->co, out);
}

#define CHECK_SEM(s, what) \
	do { \
		if ((s) == NULL) \
			return dlock__seterr(DLOCK_EINVAL, "semaphore %s: NULL handle", what); \
	} while (0)

int dlock_semaphore_try_set_permits(int *set, dlock_semaphore *s, int64_t permits)
{
	int64_t v = 0;
	int rc;

	CHECK_SEM(s, "try set permits");
	rc = block(&kind_try_set, s, permits, &v);
	if (rc == 0 && set != NULL)
		*set = (int)v;
	return rc;
}

int dlock_semaphore_try_set_permits_async(dlock_op **out, dlock_semaphore *s, int64_t permits,
		dlock_op_cb cb, void *userdata)
{
	return submit(out, &kind_try_set, s, permits, cb, userdata);
}

int dlock_semaphore_add_permits(dlock_semaphore *s, int64_t delta)
{
	CHECK_SEM(s, "add permits");
	return block(&kind_add, s, delta, NULL);
}

int dlock_semaphore_add_permits_async(dlock_op **out, dlock_semaphore *s, int64_t delta,
		dlock_op_cb cb, void *userdata)
{
	return submit(out, &kind_add, s, delta, cb, userdata);
}

int dlock_semaphore_set_permits(dlock_semaphore *s, int64_t permits)
{
	CHECK_SEM(s, "set permits");
	return block(&kind_set, s, permits, NULL);
}

int dlock_semaphore_set_permits_async(dlock_op **out, dlock_semaphore *s, int64_t permits,
		dlock_op_cb cb, void *userdata)
{
	return submit(out, &kind_set, s, permits, cb, userdata);
}

int dlock_semaphore_available(int64_t *out, dlock_semaphore *s)
{
	CHECK_SEM(s, "available");
	if (out == NULL)
		return dlock__errbuf_record(&s->err,
				dlock__seterr(DLOCK_EINVAL, "semaphore %s: out is NULL", s->shown));
	*out = 0;
	return block(&kind_available, s, 0, out);
}

int dlock_semaphore_available_async(dlock_op **out, dlock_semaphore *s, dlock_op_cb cb,
		void *userdata)
{
	return submit(out, &kind_available, s, 0, cb, userdata);
}

int dlock_semaphore_force_release(int64_t *freed, dlock_semaphore *s)
{
	int64_t v = 0;
	int rc;

	if (freed != NULL)
		*freed = 0;
	CHECK_SEM(s, "force release");
	rc = block(&kind_force, s, 0, &v);
	if (rc == 0 && freed != NULL)
		*freed = v;
	return rc;
}

int dlock_semaphore_force_release_async(dlock_op **out, dlock_semaphore *s, dlock_op_cb cb,
		void *userdata)
{
	return submit(out, &kind_force, s, 0, cb, userdata);
}
