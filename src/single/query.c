/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Queries that read what a server has for a lock, without changing it:
 * whether it is held and by whom, hold counts, the TTL and the fencing
 * token (everything at once, dlock_lock_query, is in lock_info.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "single/lock_internal.h"
#include "single/scripts.h"

/* A read-only query: CMD name [field]. */
static int query(dlock_lock *l, const char *cmd, const char *field, int64_t *out, int nil_is_zero)
{
	const char *argv[3] = { cmd, l->name, field };
	size_t lens[3] = { strlen(cmd), l->name_len, field ? strlen(field) : 0 };
	redisReply *r = NULL;
	int rc;

	rc = dlock__client_run(l->client, field ? 3 : 2, argv, lens, 1, &r);
	if (rc == 0)
		rc = dlock__reply_check(&l->client->node, r, cmd);
	if (rc == 0) {
		if (r->type == REDIS_REPLY_INTEGER)
			*out = r->integer;
		else if (r->type == REDIS_REPLY_NIL && nil_is_zero)
			*out = 0;
		else if (r->type == REDIS_REPLY_STRING)
			*out = strtoll(r->str, NULL, 10);
		else
			rc = dlock__seterr_node(DLOCK_EPROTO, l->client->node.label,
					"%s %s: unexpected reply type %d", cmd, l->shown, r->type);
	}
	freeReplyObject(r);
	return rc;
}

/* CMD name <owner's field>: for a write half `<owner>:write`. */
static int query_owner(dlock_lock *l, const char *cmd, const char *owner_in, int64_t *out)
{
	char buf[64], field[DLOCK__OWNER_MAX + sizeof(":write")];
	const char *owner = NULL;
	int rc = dlock__resolve_owner(l, owner_in, buf, sizeof(buf), &owner);

	if (rc < 0)
		return rc;
	if (l->kind == DLOCK_LOCK_WRITE) {
		snprintf(field, sizeof(field), "%s:write", owner);
		owner = field;
	}
	return query(l, cmd, owner, out, 1);
}

/* Redisson's isLocked() of a read or write half (a script: mode and HLEN at once). */
static int rw_locked(dlock_lock *l, int64_t *out)
{
	dlock__call call;
	redisReply *r = NULL;
	int rc;

	call.script = &dlock__script_rw_locked;
	call.argc = 0;
	dlock__call_push(&call, l->name, l->name_len);
	dlock__call_keys_done(&call);
	dlock__call_push(&call, l->kind == DLOCK_LOCK_READ ? "r" : "w", 1);
	rc = dlock__client_run_call(l->client, &call, 1, NULL, &r);
	if (rc == 0)
		rc = dlock__reply_check(&l->client->node, r, "is locked");
	if (rc == 0 && r->type != REDIS_REPLY_INTEGER)
		rc = dlock__seterr_node(DLOCK_EPROTO, l->client->node.label,
				"is locked %s: unexpected reply type %d", l->shown, r->type);
	if (rc == 0)
		*out = r->integer;
	freeReplyObject(r);
	return rc;
}

#define CHECK_OUT(l, out) \
	do { \
		if ((l) == NULL || (out) == NULL) \
			return dlock__seterr(DLOCK_EINVAL, "lock query: NULL argument"); \
	} while (0)

int dlock_lock_is_locked(int *out, dlock_lock *l)
{
	int64_t v = 0;
	int rc;

	CHECK_OUT(l, out);
	rc = dlock__lock_is_rw(l) ? rw_locked(l, &v) : query(l, "EXISTS", NULL, &v, 0);
	*out = rc == 0 && v > 0;
	return dlock__errbuf_record(&l->err, rc);
}

int dlock_lock_is_held_as(int *out, dlock_lock *l, const char *owner)
{
	int64_t v = 0;
	int rc;

	CHECK_OUT(l, out);
	rc = query_owner(l, "HEXISTS", owner, &v);
	*out = rc == 0 && v > 0;
	return dlock__errbuf_record(&l->err, rc);
}

int dlock_lock_is_held(int *out, dlock_lock *l)
{
	return dlock_lock_is_held_as(out, l, NULL);
}

int dlock_lock_hold_count_as(int64_t *out, dlock_lock *l, const char *owner)
{
	int rc;

	CHECK_OUT(l, out);
	*out = 0;
	rc = query_owner(l, "HGET", owner, out);
	return dlock__errbuf_record(&l->err, rc);
}

int dlock_lock_hold_count(int64_t *out, dlock_lock *l)
{
	return dlock_lock_hold_count_as(out, l, NULL);
}

int dlock_lock_token(int64_t *token, dlock_lock *l)
{
	const char *argv[2];
	size_t lens[2];
	redisReply *r = NULL;
	int rc;

	CHECK_OUT(l, token);
	if (l->kind != DLOCK_LOCK_FENCED)
		return dlock__errbuf_record(&l->err,
				dlock__seterr(DLOCK_EINVAL, "lock %s is not fenced", l->shown));
	argv[0] = "GET";
	lens[0] = 3;
	argv[1] = l->token_key;
	lens[1] = l->token_key_len;
	*token = 0;
	rc = dlock__client_run(l->client, 2, argv, lens, 1, &r);
	if (rc == 0)
		rc = dlock__reply_check(&l->client->node, r, "GET token");
	if (rc == 0 && r->type == REDIS_REPLY_STRING)
		*token = strtoll(r->str, NULL, 10);
	freeReplyObject(r);
	return dlock__errbuf_record(&l->err, rc);
}

int dlock_lock_remaining_ttl(int64_t *out_ms, dlock_lock *l)
{
	CHECK_OUT(l, out_ms);
	return dlock__errbuf_record(&l->err, query(l, "PTTL", NULL, out_ms, 0));
}
