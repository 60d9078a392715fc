/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Queries that read what a server has for a lock, without changing it:
 * whether it is held and by whom, hold counts, the TTL and the fencing
 * token (everything at once, dlock_lock_query, is in lock_info.c). Each is
 * an operation of one command on the lock's client's loop
 * (core/drive/cmd_op.h): the _async call hands it to the loop, the
 * blocking call drives it on the calling thread.
 */
#include <stdio.h>

#include "dlock/errors.h"
#include "single/ask.h"
#include "single/lock_op.h"

typedef struct query_op {
	dlock__cmd_op co; /* first */
	dlock__lock_ask a;
} query_op;

static int judge(dlock__cmd_op *co, const redisReply *r)
{
	return dlock__lock_ask_judge(&((query_op *)co)->a, r, &co->op.result.value,
			co->mop.client->node.label, co->kind->what, co->shown);
}

#define QUERY_KIND(name) { name, NULL, judge, NULL, dlock__lock_cmd_unref, 0, 0 }

static const dlock__cmd_kind kind_locked = QUERY_KIND("dlock_lock_is_locked");
static const dlock__cmd_kind kind_held = QUERY_KIND("dlock_lock_is_held");
static const dlock__cmd_kind kind_count = QUERY_KIND("dlock_lock_hold_count");
static const dlock__cmd_kind kind_ttl = QUERY_KIND("dlock_lock_remaining_ttl_ms");
static const dlock__cmd_kind kind_token = QUERY_KIND("dlock_lock_token");

/* The op's command: the question's (which lives in the op, as its field). */
static void take_command(query_op *q)
{
	dlock__cmd_op *co = &q->co;
	int i;

	co->call = q->a.call;
	co->argc = q->a.argc;
	for (i = 0; i < q->a.argc; i++) {
		co->argv[i] = q->a.argv[i];
		co->lens[i] = q->a.lens[i];
	}
}

/* A new query op on l, its question still to ask. */
static int query_new(query_op **out, const dlock__cmd_kind *kind, dlock_lock *l, dlock_op_cb cb,
		void *userdata)
{
	dlock__cmd_op *co;
	int rc = dlock__lock_cmd_new(&co, sizeof(query_op), kind, l, cb, userdata);

	*out = (query_op *)co;
	return rc;
}

/* The op of each query, not yet started; the owner resolved now (NULL: the calling thread's). */
static int locked_new(query_op **q, dlock_lock *l, dlock_op_cb cb, void *ud)
{
	int rc = query_new(q, &kind_locked, l, cb, ud);

	if (rc == 0) {
		dlock__lock_ask_locked(&(*q)->a, l);
		take_command(*q);
	}
	return rc;
}

static int owner_query_new(query_op **q, const dlock__cmd_kind *kind, const char *cmd,
		dlock_lock *l, const char *owner, dlock_op_cb cb, void *ud)
{
	int rc = query_new(q, kind, l, cb, ud);

	if (rc < 0)
		return rc;
	rc = kind == &kind_held ? dlock__lock_ask_held(&(*q)->a, l, owner)
				: dlock__lock_ask_owner(&(*q)->a, l, cmd, owner);
	if (rc < 0) {
		(*q)->co.op.destroy(&(*q)->co.op);
		return dlock__errbuf_record(&l->err, rc);
	}
	take_command(*q);
	return 0;
}

static int ttl_new(query_op **q, dlock_lock *l, dlock_op_cb cb, void *ud)
{
	int rc = query_new(q, &kind_ttl, l, cb, ud);

	if (rc == 0) {
		dlock__lock_ask_cmd(&(*q)->a, "PTTL", l->name, l->name_len);
		take_command(*q);
	}
	return rc;
}

static int token_new(query_op **q, dlock_lock *l, dlock_op_cb cb, void *ud)
{
	int rc;

	*q = NULL;
	if (l != NULL && l->kind != DLOCK_LOCK_FENCED)
		return dlock__errbuf_record(&l->err,
				dlock__seterr(DLOCK_EINVAL, "lock %s is not fenced", l->shown));
	if ((rc = query_new(q, &kind_token, l, cb, ud)) == 0) {
		dlock__lock_ask_cmd(&(*q)->a, "GET", l->token_key, l->token_key_len);
		(*q)->a.nil_is_zero = 1;
		take_command(*q);
	}
	return rc;
}

/* The blocking call: run the op (*q, made by the call that gave rc) here;
 * its answer into *out. (q by address: arguments have no order.) */
static int block(int rc, query_op **q, int64_t *out)
{
	int64_t v = 0;

	if (rc < 0)
		return rc;
	rc = dlock__cmd_op_block(&(*q)->co, &v, NULL);
	*out = rc == 0 ? v : 0;
	return rc;
}

static int submit(int rc, query_op **q, dlock_op **out)
{
	return rc < 0 ? rc : dlock__cmd_op_submit(&(*q)->co, out);
}

#define CHECK_OUT(l, out) \
	do { \
		if ((l) == NULL || (out) == NULL) \
			return dlock__seterr(DLOCK_EINVAL, "lock query: NULL argument"); \
	} while (0)

#define OUT_NULL(out) \
	do { \
		if ((out) != NULL) \
			*(out) = NULL; \
	} while (0)

int dlock_lock_is_locked(int *out, dlock_lock *l)
{
	query_op *q = NULL;
	int64_t v = 0;
	int rc;

	CHECK_OUT(l, out);
	rc = block(locked_new(&q, l, dlock__cmd_blocking, NULL), &q, &v);
	*out = (int)v;
	return rc;
}

int dlock_lock_is_locked_async(dlock_op **out, dlock_lock *l, dlock_op_cb cb, void *userdata)
{
	query_op *q = NULL;

	OUT_NULL(out);
	return submit(locked_new(&q, l, cb, userdata), &q, out);
}

int dlock_lock_is_held(int *out, dlock_lock *l, const char *owner)
{
	query_op *q = NULL;
	int64_t v = 0;
	int rc;

	CHECK_OUT(l, out);
	rc = block(owner_query_new(&q, &kind_held, "HEXISTS", l, owner, dlock__cmd_blocking, NULL), &q, &v);
	*out = (int)v;
	return rc;
}

int dlock_lock_is_held_async(dlock_op **out, dlock_lock *l, const char *owner, dlock_op_cb cb,
		void *userdata)
{
	query_op *q = NULL;

	OUT_NULL(out);
	return submit(owner_query_new(&q, &kind_held, "HEXISTS", l, owner, cb, userdata), &q, out);
}

int dlock_lock_hold_count(int64_t *out, dlock_lock *l, const char *owner)
{
	query_op *q = NULL;

	CHECK_OUT(l, out);
	*out = 0;
	return block(owner_query_new(&q, &kind_count, "HGET", l, owner, dlock__cmd_blocking, NULL), &q, out);
}

int dlock_lock_hold_count_async(dlock_op **out, dlock_lock *l, const char *owner,
		dlock_op_cb cb, void *userdata)
{
	query_op *q = NULL;

	OUT_NULL(out);
	return submit(owner_query_new(&q, &kind_count, "HGET", l, owner, cb, userdata), &q, out);
}

int dlock_lock_token(int64_t *token, dlock_lock *l)
{
	query_op *q = NULL;

	CHECK_OUT(l, token);
	*token = 0;
	return block(token_new(&q, l, dlock__cmd_blocking, NULL), &q, token);
}

int dlock_lock_token_async(dlock_op **out, dlock_lock *l, dlock_op_cb cb, void *userdata)
{
	query_op *q = NULL;

	OUT_NULL(out);
	return submit(token_new(&q, l, cb, userdata), &q, out);
}

int dlock_lock_remaining_ttl_ms(int64_t *out_ms, dlock_lock *l)
{
	query_op *q = NULL;

	CHECK_OUT(l, out_ms);
	return block(ttl_new(&q, l, dlock__cmd_blocking, NULL), &q, out_ms);
}

int dlock_lock_remaining_ttl_ms_async(dlock_op **out, dlock_lock *l, dlock_op_cb cb, void *userdata)
{
	query_op *q = NULL;

	OUT_NULL(out);
	return submit(ttl_new(&q, l, cb, userdata), &q, out);
}
