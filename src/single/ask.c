/* SPDX-License-Identifier: BSD-3-Clause */
/* A lock's read-only question as a command, and its answer (single/ask.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/drive/client.h"
#include "single/ask.h"
#include "single/lock_internal.h"
#include "single/scripts.h"

void dlock__lock_ask_cmd(dlock__lock_ask *a, const char *cmd, const char *key, size_t len)
{
	memset(a, 0, sizeof(*a));
	a->argv[0] = cmd;
	a->lens[0] = strlen(cmd);
	a->argv[1] = key;
	a->lens[1] = len;
	a->argc = 2;
}

void dlock__lock_ask_locked(dlock__lock_ask *a, dlock_lock *l)
{
	dlock__lock_ask_cmd(a, "EXISTS", l->name, l->name_len);
	a->boolean = 1;
	if (!dlock__lock_is_rw(l))
		return;
	a->argc = 0;
	dlock__call_begin(&a->call, &dlock__script_rw_locked);
	dlock__call_push(&a->call, l->name, l->name_len);
	dlock__call_keys_done(&a->call);
	dlock__call_push(&a->call, l->kind == DLOCK_LOCK_READ ? "r" : "w", 1);
}

int dlock__lock_ask_owner(dlock__lock_ask *a, dlock_lock *l, const char *cmd, const char *owner)
{
	char buf[64];
	const char *resolved = NULL;
	int rc = dlock__resolve_owner(l, owner, buf, sizeof(buf), &resolved);

	dlock__lock_ask_cmd(a, cmd, l->name, l->name_len);
	if (rc < 0)
		return rc;
	snprintf(a->field, sizeof(a->field), "%s%s", resolved,
			l->kind == DLOCK_LOCK_WRITE ? ":write" : "");
	a->argv[2] = a->field;
	a->lens[2] = strlen(a->field);
	a->argc = 3;
	a->nil_is_zero = 1;
	return 0;
}

int dlock__lock_ask_held(dlock__lock_ask *a, dlock_lock *l, const char *owner)
{
	int rc = dlock__lock_ask_owner(a, l, "HEXISTS", owner);

	a->boolean = 1;
	return rc;
}

void dlock__lock_ask_into(const dlock__lock_ask *a, dlock__mux_op *op)
{
	if (a->argc > 0) {
		op->argv = a->argv;
		op->lens = a->lens;
		op->argc = a->argc;
	} else {
		op->call = &a->call;
	}
}

/* A read-only command's reply as a number: an integer, or a number as text
 * (nil as 0 where a missing field or key means 0). 0, or -1 for another shape. */
static int number_of(const dlock__lock_ask *a, const redisReply *r, int64_t *n)
{
	if (r->type == REDIS_REPLY_INTEGER)
		*n = r->integer;
	else if (r->type == REDIS_REPLY_NIL && a->nil_is_zero)
		*n = 0;
	else if (r->type == REDIS_REPLY_STRING)
		*n = strtoll(r->str, NULL, 10);
	else
		return -1;
	return 0;
}

int dlock__lock_ask_judge(const dlock__lock_ask *a, const redisReply *r, int64_t *v,
		const char *node, const char *what, const char *shown)
{
	int64_t n;

	if (number_of(a, r, &n) < 0)
		return dlock__seterr_node(DLOCK_EPROTO, node, "%s %s: unexpected reply type %d",
				what, shown, r->type);
	*v = a->boolean ? n > 0 : n;
	return 0;
}

int dlock__lock_ask_vote(const dlock__lock_ask *a, const redisReply *r)
{
	int64_t n;

	if (r == NULL || r->type == REDIS_REPLY_ERROR || number_of(a, r, &n) < 0)
		return -1;
	return n > 0;
}

int dlock__lock_ask_answer(const dlock__lock_ask *a, const dlock__mux_op *op, const char *what,
		const char *shown, int64_t *v)
{
	int rc;

	if (op->rc < 0)
		return dlock__seterr(op->rc, "%s", op->errmsg);
	if ((rc = dlock__reply_check(&op->client->node, op->reply, what)) < 0)
		return rc;
	return dlock__lock_ask_judge(a, op->reply, v, op->client->node.label, what, shown);
}
