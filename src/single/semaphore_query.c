/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a server has for a semaphore at one moment, read without changing
 * it (dlock_semaphore_query, for `dlock status`): the available count and,
 * for an expirable semaphore, the permits taken with their leases.
 */
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "single/acquire.h"
#include "single/semaphore_internal.h"

struct dlock_semaphore_info {
	int set;           /* the count key exists */
	int64_t available; /* its value (0 when not set) */
	size_t n;          /* permits taken (expirable) */
	char (*ids)[DLOCK_PERMIT_ID_SIZE];
	int64_t *ttls; /* remaining lease ms; -1 no lease */
	int64_t waiters; /* clients listening on the semaphore's channel */
};

void dlock_semaphore_info_free(dlock_semaphore_info *info)
{
	if (info == NULL)
		return;
	dlock__free(info->ids);
	dlock__free(info->ttls);
	dlock__free(info);
}

static void hex(char out[DLOCK_PERMIT_ID_SIZE], const char *raw, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < 16; i++) {
		unsigned char b = i < len ? (unsigned char)raw[i] : 0;

		out[2 * i] = digits[b >> 4];
		out[2 * i + 1] = digits[b & 15];
	}
	out[32] = '\0';
}

/* The taken permits from a ZRANGE WITHSCORES reply (id, score, ...). */
static int read_permits(dlock_semaphore *s, const redisReply *z, dlock_semaphore_info *info)
{
	int64_t now = dlock__wall_ms();
	size_t i, n = z->elements / 2;

	info->ids = dlock__calloc(n ? n : 1, sizeof(*info->ids));
	info->ttls = dlock__calloc(n ? n : 1, sizeof(*info->ttls));
	if (info->ids == NULL || info->ttls == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "query %s: out of memory", s->shown);
	for (i = 0; i < n; i++) {
		const redisReply *id = z->element[2 * i], *due = z->element[2 * i + 1];
		long long end;

		if (id->type != REDIS_REPLY_STRING || due->type != REDIS_REPLY_STRING)
			return dlock__seterr_node(DLOCK_EPROTO, s->client->node.label,
					"query %s: a permit that is not a string", s->shown);
		hex(info->ids[i], id->str, id->len);
		end = strtoll(due->str, NULL, 10);
		/* Redisson's nonExpirableTimeout (and beyond): a permit without a lease. */
		info->ttls[i] = end >= strtoll(DLOCK__PERMIT_NO_LEASE, NULL, 10) ? -1
				: end > now ? end - now : 0;
		info->n++;
	}
	return 0;
}

static int read_reply(dlock_semaphore *s, const redisReply *r, dlock_semaphore_info *info)
{
	const redisReply *count, *taken;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
			r->element[1]->type != REDIS_REPLY_ARRAY ||
			r->element[2]->type != REDIS_REPLY_INTEGER)
		return dlock__seterr_node(DLOCK_EPROTO, s->client->node.label,
				"query %s: unexpected reply type %d", s->shown, r->type);
	count = r->element[0];
	taken = r->element[1];
	info->waiters = r->element[2]->integer;
	if (count->type == REDIS_REPLY_STRING) {
		char *end;

		info->set = 1;
		info->available = strtoll(count->str, &end, 10);
		if (end == count->str || *end != '\0')
			return dlock__seterr_node(DLOCK_EWRONGTYPE, s->client->node.label,
					"query %s: the key holds a string that is not a count",
					s->shown);
	} else if (count->type == REDIS_REPLY_INTEGER) {
		info->set = 1;
		info->available = count->integer;
	}
	return read_permits(s, taken, info);
}

/* The query as an operation of one script call (core/drive/cmd_op.h). */
static int query_prepare(dlock__cmd_op *co)
{
	dlock_semaphore *s = co->handle;

	dlock__call_begin(&co->call, &dlock__script_sem_query);
	dlock__call_push(&co->call, s->name, s->name_len);
	if (s->timeouts != NULL)
		dlock__call_push(&co->call, s->timeouts, s->timeouts_len);
	dlock__call_keys_done(&co->call);
	dlock__call_push(&co->call, s->channel, s->channel_len);
	return 0;
}

static int query_judge(dlock__cmd_op *co, const redisReply *r)
{
	dlock_semaphore *s = co->handle;
	dlock_semaphore_info *info = dlock__calloc(1, sizeof(*info));
	int rc;

	if (info == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "query %s: out of memory", s->shown);
	if ((rc = read_reply(s, r, info)) < 0) {
		dlock_semaphore_info_free(info);
		return rc;
	}
	co->op.result.semaphore_info = info; /* the callback's from now on */
	return 0;
}

static const dlock__cmd_kind kind_query = { "dlock_semaphore_query", query_prepare, query_judge,
	NULL, dlock__sem_cmd_unref, 0, 0 };

int dlock_semaphore_query(dlock_semaphore_info **out, dlock_semaphore *s)
{
	dlock__cmd_op *co;
	void *info = NULL;
	int rc;

	if (out == NULL || s == NULL)
		return dlock__seterr(DLOCK_EINVAL, "semaphore query: NULL argument");
	*out = NULL;
	if ((rc = dlock__sem_cmd_new(&co, sizeof(*co), &kind_query, s, dlock__cmd_blocking, NULL)) < 0)
		return rc;
	rc = dlock__cmd_op_block(co, NULL, &info);
	*out = info;
	return rc;
}

int dlock_semaphore_query_async(dlock_op **out, dlock_semaphore *s, dlock_op_cb cb, void *userdata)
{
	dlock__cmd_op *co;
	int rc;

	if (out != NULL)
		*out = NULL;
	if ((rc = dlock__sem_cmd_new(&co, sizeof(*co), &kind_query, s, cb, userdata)) < 0)
		return rc;
	return dlock__cmd_op_submit(co, out);
}

int dlock_semaphore_info_is_set(const dlock_semaphore_info *info)
{
	return info != NULL && info->set;
}

int64_t dlock_semaphore_info_available(const dlock_semaphore_info *info)
{
	return info != NULL ? info->available : 0;
}

size_t dlock_semaphore_info_permits(const dlock_semaphore_info *info)
{
	return info != NULL ? info->n : 0;
}

const char *dlock_semaphore_info_permit_id(const dlock_semaphore_info *info, size_t i)
{
	return info != NULL && i < info->n ? info->ids[i] : NULL;
}

int64_t dlock_semaphore_info_subscribers(const dlock_semaphore_info *info)
{
	return info != NULL ? info->waiters : 0;
}

int64_t dlock_semaphore_info_permit_ttl_ms(const dlock_semaphore_info *info, size_t i)
{
	return info != NULL && i < info->n ? info->ttls[i] : 0;
}
