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
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "single/lock_op.h"
#include "single/member.h"
#include "single/scripts.h"

typedef struct query_op {
	dlock__cmd_op co; /* first */
	int boolean;      /* the answer is 1 or 0 (is_locked, is_held) */
	int nil_is_zero;  /* a missing field or key reads as 0 */
	char field[DLOCK__OWNER_MAX + sizeof(":write")];
} query_op;

/* A read-only command's reply: an integer, or a number as text. */
static int judge_number(dlock__cmd_op *co, const redisReply *r)
{
	query_op *q = (query_op *)co;
	int64_t v;

	if (r->type == REDIS_REPLY_INTEGER)
		v = r->integer;
	else if (r->type == REDIS_REPLY_NIL && q->nil_is_zero)
		v = 0;
	else if (r->type == REDIS_REPLY_STRING)
		v = strtoll(r->str, NULL, 10);
	else
		return dlock__seterr_node(DLOCK_EPROTO, co->mop.client->node.label,
				"%s %s: unexpected reply type %d", co->kind->what, co->shown, r->type);
	co->op.result.value = q->boolean ? v > 0 : v;
	return 0;
}

#define QUERY_KIND(name) { name, NULL, judge_number, NULL, dlock__lock_cmd_unref, 0, 0 }

static const dlock__cmd_kind kind_locked = QUERY_KIND("dlock_lock_is_locked");
static const dlock__cmd_kind kind_held = QUERY_KIND("dlock_lock_is_held");
static const dlock__cmd_kind kind_count = QUERY_KIND("dlock_lock_hold_count");
static const dlock__cmd_kind kind_ttl = QUERY_KIND("dlock_lock_remaining_ttl");
static const dlock__cmd_kind kind_token = QUERY_KIND("dlock_lock_token");

/* A new query op on l: CMD key [field]. */
static int query_new(query_op **out, const dlock__cmd_kind *kind, dlock_lock *l, const char *cmd,
		const char *key, size_t key_len, dlock_op_cb cb, void *userdata)
{
	dlock__cmd_op *co;
	int rc = dlock__lock_cmd_new(&co, sizeof(query_op), kind, l, cb, userdata);

	*out = (query_op *)co;
	if (rc < 0)
		return rc;
	co->argv[0] = cmd;
	co->lens[0] = strlen(cmd);
	co->argv[1] = key;
	co->lens[1] = key_len;
	co->argc = 2;
	return 0;
}

/* The owner's field (`<owner>:write` for a write half) as the command's third word. */
static int add_owner_field(query_op *q, dlock_lock *l, const char *owner_in)
{
	char buf[64];
	const char *owner = NULL;
	int rc = dlock__resolve_owner(l, owner_in, buf, sizeof(buf), &owner);

	if (rc < 0)
		return rc;
	snprintf(q->field, sizeof(q->field), "%s%s", owner,
			l->kind == DLOCK_LOCK_WRITE ? ":write" : "");
	q->co.argv[2] = q->field;
	q->co.lens[2] = strlen(q->field);
	q->co.argc = 3;
	q->nil_is_zero = 1;
	return 0;
}

/* Redisson's isLocked() of a read or write half (a script: mode and HLEN at once). */
static void rw_locked_call(dlock__cmd_op *co, dlock_lock *l)
{
	co->argc = 0;
	dlock__call_begin(&co->call, &dlock__script_rw_locked);
	dlock__call_push(&co->call, l->name, l->name_len);
	dlock__call_keys_done(&co->call);
	dlock__call_push(&co->call, l->kind == DLOCK_LOCK_READ ? "r" : "w", 1);
}

/* The op of each query, not yet started; the owner resolved now (NULL: the calling thread's). */
static int locked_new(query_op **q, dlock_lock *l, dlock_op_cb cb, void *ud)
{
	int rc = query_new(q, &kind_locked, l, "EXISTS", l ? l->name : NULL,
			l ? l->name_len : 0, cb, ud);

	if (rc == 0) {
		(*q)->boolean = 1;
		if (dlock__lock_is_rw(l))
			rw_locked_call(&(*q)->co, l);
	}
	return rc;
}

static int owner_query_new(query_op **q, const dlock__cmd_kind *kind, const char *cmd,
		dlock_lock *l, const char *owner, dlock_op_cb cb, void *ud)
{
	int rc = query_new(q, kind, l, cmd, l ? l->name : NULL, l ? l->name_len : 0, cb, ud);

	if (rc == 0 && (rc = add_owner_field(*q, l, owner)) < 0) {
		(*q)->co.op.destroy(&(*q)->co.op);
		rc = dlock__errbuf_record(&l->err, rc);
	}
	if (rc == 0)
		(*q)->boolean = kind == &kind_held;
	return rc;
}

static int ttl_new(query_op **q, dlock_lock *l, dlock_op_cb cb, void *ud)
{
	return query_new(q, &kind_ttl, l, "PTTL", l ? l->name : NULL, l ? l->name_len : 0, cb, ud);
}

static int token_new(query_op **q, dlock_lock *l, dlock_op_cb cb, void *ud)
{
	int rc;

	*q = NULL;
	if (l != NULL && l->kind != DLOCK_LOCK_FENCED)
		return dlock__errbuf_record(&l->err,
				dlock__seterr(DLOCK_EINVAL, "lock %s is not fenced", l->shown));
	rc = query_new(q, &kind_token, l, "GET", l ? l->token_key : NULL,
			l ? l->token_key_len : 0, cb, ud);
	if (rc == 0)
		(*q)->nil_is_zero = 1;
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

int dlock_lock_is_held_as(int *out, dlock_lock *l, const char *owner)
{
	query_op *q = NULL;
	int64_t v = 0;
	int rc;

	CHECK_OUT(l, out);
	rc = block(owner_query_new(&q, &kind_held, "HEXISTS", l, owner, dlock__cmd_blocking, NULL), &q, &v);
	*out = (int)v;
	return rc;
}

int dlock_lock_is_held_as_async(dlock_op **out, dlock_lock *l, const char *owner, dlock_op_cb cb,
		void *userdata)
{
	query_op *q = NULL;

	OUT_NULL(out);
	return submit(owner_query_new(&q, &kind_held, "HEXISTS", l, owner, cb, userdata), &q, out);
}

int dlock_lock_is_held(int *out, dlock_lock *l)
{
	return dlock_lock_is_held_as(out, l, NULL);
}

int dlock_lock_is_held_async(dlock_op **out, dlock_lock *l, dlock_op_cb cb, void *userdata)
{
	return dlock_lock_is_held_as_async(out, l, NULL, cb, userdata);
}

int dlock_lock_hold_count_as(int64_t *out, dlock_lock *l, const char *owner)
{
	query_op *q = NULL;

	CHECK_OUT(l, out);
	*out = 0;
	return block(owner_query_new(&q, &kind_count, "HGET", l, owner, dlock__cmd_blocking, NULL), &q, out);
}

int dlock_lock_hold_count_as_async(dlock_op **out, dlock_lock *l, const char *owner,
		dlock_op_cb cb, void *userdata)
{
	query_op *q = NULL;

	OUT_NULL(out);
	return submit(owner_query_new(&q, &kind_count, "HGET", l, owner, cb, userdata), &q, out);
}

int dlock_lock_hold_count(int64_t *out, dlock_lock *l)
{
	return dlock_lock_hold_count_as(out, l, NULL);
}

int dlock_lock_hold_count_async(dlock_op **out, dlock_lock *l, dlock_op_cb cb, void *userdata)
{
	return dlock_lock_hold_count_as_async(out, l, NULL, cb, userdata);
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

int dlock_lock_remaining_ttl(int64_t *out_ms, dlock_lock *l)
{
	query_op *q = NULL;

	CHECK_OUT(l, out_ms);
	return block(ttl_new(&q, l, dlock__cmd_blocking, NULL), &q, out_ms);
}

int dlock_lock_remaining_ttl_async(dlock_op **out, dlock_lock *l, dlock_op_cb cb, void *userdata)
{
	query_op *q = NULL;

	OUT_NULL(out);
	return submit(ttl_new(&q, l, cb, userdata), &q, out);
}
