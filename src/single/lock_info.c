/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Everything a server has for a lock at one moment, read in one script
 * without changing it (dlock_lock_query, for `dlock status`): the holders
 * and their counts, the key's TTL, each read hold's own timeout key, a fair
 * lock's queue with each waiter's place, and how many clients listen on
 * the name's channels. One script, so that the parts agree with each other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "single/acquire.h"
#include "single/lock_internal.h"
#include "single/lock_op.h"
#include "single/scripts.h"

/* Waiters of a fair queue read at most (the rest are counted). */
#define QUEUE_READ_MAX "1000"
/* Timeout keys read per read holder at most (its count may be larger). */
#define HOLDS_READ_MAX "1000"

/*
 * KEYS: name, fair queue, fair timeouts. ARGV: the lock's channel, the
 * read-write lock's channel, the most waiters to read, the most timeout
 * keys to read per read holder. Reply: {HGETALL,
 * PTTL, per field of the HGETALL the PTTLs of its read holds' timeout keys
 * (empty unless a read-write lock's read holder), the queue's first
 * waiters, their places' ends (ZSCORE, nil when none), the queue's length,
 * the listeners on the channels (a fair waiter listens on its own)}.
 * KEYS[4], the waiters of a plain or fenced lock (single/scripts.c), and
 * ARGV[5] (their channels' prefix) and ARGV[6] (how many watch) add the
 * sleepers to the listeners: those that still listen on their own channel.
 */
static dlock__script script_lock_info = DLOCK__SCRIPT("lock query",
		DLOCK__LUA_KIND LOCK_KIND_CHECK
		DLOCK__LUA_LISTENERS
		"local f = redis.call('hgetall', KEYS[1]); "
		"local ttl = redis.call('pttl', KEYS[1]); "
		"local rw = false; "
		"for i = 1, #f, 2 do if f[i] == 'mode' then rw = true; end; end; "
		"local base = KEYS[1]; "
		"if not string.find(base, '{', 1, true) then base = '{' .. base .. '}'; end; "
		"local holds = {}; "
		"for i = 1, #f, 2 do "
		"  local t = {}; "
		"  local n = tonumber(f[i + 1]); "
		"  if rw and n ~= nil and f[i] ~= 'mode' and string.sub(f[i], -6) ~= ':write' then "
		"    for j = 1, math.min(n, tonumber(ARGV[4])) do "
		"      t[j] = redis.call('pttl', base .. ':' .. f[i] .. ':rwlock_timeout:' .. j); "
		"    end; "
		"  end; "
		"  holds[#holds + 1] = t; "
		"end; "
		"local q, qt, qn = {}, {}, 0; "
		"local subs = listeners(ARGV[1]) + listeners(ARGV[2]); "
		"if redis.call('type', KEYS[2]).ok == 'list' then "
		"  q = redis.call('lrange', KEYS[2], 0, tonumber(ARGV[3]) - 1); "
		"  qn = redis.call('llen', KEYS[2]); "
		"  local z = redis.call('type', KEYS[3]).ok == 'zset'; "
		"  for i = 1, #q do "
		"    qt[i] = z and redis.call('zscore', KEYS[3], q[i]) or false; "
		"    subs = subs + listeners(ARGV[1] .. ':' .. q[i]); "
		"  end; "
		"end; "
		"if redis.call('type', KEYS[4]).ok == 'zset' then "
		"  local k = tonumber(ARGV[6]); "
		"  local m = redis.call('zrange', KEYS[4], k, k + 999); "
		"  for i = 1, #m do "
		"    if listeners(ARGV[5] .. ':' .. m[i]) > 0 then subs = subs + 1; end; "
		"  end; "
		"end; "
		"return {f, ttl, holds, q, qt, qn, subs};");

struct dlock_lock_info {
	int64_t ttl_ms;
	const char *rw_mode; /* a read-write lock's `mode` field: "read", "write" or NULL */
	size_t n;
	char **owners;
	int64_t *counts;
	int64_t *ttls;        /* per holder: its read holds' longest, else the key's */
	size_t *nholds;       /* per holder: read holds' timeout keys read */
	int64_t **hold_ttls;  /* per holder: each read hold's timeout key PTTL */
	size_t queued;        /* a fair queue's length */
	size_t nq;            /* its waiters read */
	char **queue;
	int64_t *queue_ttls;  /* how long each place lasts; -2 none */
	int64_t subscribers;
};

void dlock_lock_info_free(dlock_lock_info *info)
{
	size_t i;

	if (info == NULL)
		return;
	for (i = 0; i < info->n; i++) {
		dlock__free(info->owners[i]);
		dlock__free(info->hold_ttls[i]);
	}
	for (i = 0; i < info->nq; i++)
		dlock__free(info->queue[i]);
	dlock__free(info->owners);
	dlock__free(info->counts);
	dlock__free(info->ttls);
	dlock__free(info->nholds);
	dlock__free(info->hold_ttls);
	dlock__free(info->queue);
	dlock__free(info->queue_ttls);
	dlock__free(info);
}

static int bad_reply(dlock_lock *l, const char *what)
{
	return dlock__seterr_node(DLOCK_EPROTO, l->client->node.label, "query %s: %s", l->shown,
			what);
}

/* A read holder's timeout keys (t, an array of PTTLs) into holder i. */
static int read_holds(dlock_lock *l, const redisReply *t, dlock_lock_info *info, size_t i)
{
	size_t j;

	info->ttls[i] = info->ttl_ms;
	if (t->type != REDIS_REPLY_ARRAY)
		return bad_reply(l, "read holds that are not an array");
	if (t->elements == 0)
		return 0;
	if ((info->hold_ttls[i] = dlock__calloc(t->elements, sizeof(int64_t))) == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "query %s: out of memory", l->shown);
	info->ttls[i] = -2;
	for (j = 0; j < t->elements; j++) {
		int64_t v = t->element[j]->type == REDIS_REPLY_INTEGER ? t->element[j]->integer : -2;

		info->hold_ttls[i][j] = v;
		/* -1 (no expiry) outlasts any TTL; -2 (gone) none. */
		if (info->ttls[i] != -1 && (v == -1 || v > info->ttls[i]))
			info->ttls[i] = v;
	}
	info->nholds[i] = t->elements;
	return 0;
}

/* The holders (field, value, ...) with their read holds' timeout keys. */
static int read_holders(dlock_lock *l, const redisReply *r, const redisReply *holds,
		dlock_lock_info *info)
{
	size_t i, n = r->elements / 2;
	int rc;

	if (holds->type != REDIS_REPLY_ARRAY || holds->elements != n)
		return bad_reply(l, "read holds that do not match the holders");
	info->owners = dlock__calloc(n ? n : 1, sizeof(*info->owners));
	info->counts = dlock__calloc(n ? n : 1, sizeof(*info->counts));
	info->ttls = dlock__calloc(n ? n : 1, sizeof(*info->ttls));
	info->nholds = dlock__calloc(n ? n : 1, sizeof(*info->nholds));
	info->hold_ttls = dlock__calloc(n ? n : 1, sizeof(*info->hold_ttls));
	if (info->owners == NULL || info->counts == NULL || info->ttls == NULL ||
			info->nholds == NULL || info->hold_ttls == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "query %s: out of memory", l->shown);
	for (i = 0; i < n; i++) {
		const redisReply *f = r->element[2 * i], *v = r->element[2 * i + 1];

		if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			return bad_reply(l, "a holder that is not a string");
		/* A read-write lock's mode is no holder (writers show as `<owner>:write`). */
		if (f->len == 4 && memcmp(f->str, "mode", 4) == 0 &&
				(strcmp(v->str, "read") == 0 || strcmp(v->str, "write") == 0)) {
			info->rw_mode = v->str[0] == 'r' ? "read" : "write";
			continue;
		}
		if ((info->owners[info->n] = dlock__strndup(f->str, f->len)) == NULL)
			return dlock__seterr(DLOCK_ENOMEM, "query %s: out of memory", l->shown);
		info->counts[info->n] = strtoll(v->str, NULL, 10);
		/* n is counted after both are set: the free walks what is there. */
		rc = read_holds(l, holds->element[i], info, info->n);
		info->n++;
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* A fair lock's waiters (q) and the ends of their places (qt, ms since the epoch). */
static int read_queue(dlock_lock *l, const redisReply *q, const redisReply *qt, int64_t now,
		dlock_lock_info *info)
{
	size_t i, n = q->elements;

	if (qt->elements != n)
		return bad_reply(l, "a queue without its timeouts");
	info->queue = dlock__calloc(n ? n : 1, sizeof(*info->queue));
	info->queue_ttls = dlock__calloc(n ? n : 1, sizeof(*info->queue_ttls));
	if (info->queue == NULL || info->queue_ttls == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "query %s: out of memory", l->shown);
	for (i = 0; i < n; i++) {
		const redisReply *w = q->element[i], *end = qt->element[i];
		int64_t due;

		if (w->type != REDIS_REPLY_STRING)
			return bad_reply(l, "a waiter that is not a string");
		if ((info->queue[i] = dlock__strndup(w->str, w->len)) == NULL)
			return dlock__seterr(DLOCK_ENOMEM, "query %s: out of memory", l->shown);
		info->nq++;
		if (end->type != REDIS_REPLY_STRING) {
			info->queue_ttls[i] = -2;
			continue;
		}
		due = (int64_t)strtod(end->str, NULL);
		info->queue_ttls[i] = due > now ? due - now : 0;
	}
	return 0;
}

static int read_reply(dlock_lock *l, const redisReply *r, int64_t now, dlock_lock_info *info)
{
	const redisReply *const *e;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 7)
		return bad_reply(l, "unexpected reply");
	e = (const redisReply *const *)r->element;
	if (e[0]->type != REDIS_REPLY_ARRAY || e[1]->type != REDIS_REPLY_INTEGER ||
			e[3]->type != REDIS_REPLY_ARRAY || e[4]->type != REDIS_REPLY_ARRAY ||
			e[5]->type != REDIS_REPLY_INTEGER || e[6]->type != REDIS_REPLY_INTEGER)
		return bad_reply(l, "unexpected reply");
	info->ttl_ms = e[1]->integer;
	info->queued = e[5]->integer > 0 ? (size_t)e[5]->integer : 0;
	info->subscribers = e[6]->integer;
	{
		int rc = read_holders(l, e[0], e[2], info);

		return rc < 0 ? rc : read_queue(l, e[3], e[4], now, info);
	}
}

/* The names the query reads besides the lock's own, whatever the handle's
 * kind (the keys tell which kind it is). */
enum { LOCK_CHANNEL, RW_CHANNEL, WAITERS, WAKE, NNAMES };
static const char *const query_prefixes[NNAMES] = { "redisson_lock__channel", "redisson_rwlock",
	"dlock_lock__waiters", "dlock_lock__wake" };

static void free_names(char **names)
{
	for (size_t i = 0; i < NNAMES; i++)
		dlock__free(names[i]);
}

static int make_names(const dlock_lock *l, char **names, size_t *lens)
{
	int ok = 1;

	for (size_t i = 0; i < NNAMES; i++) {
		names[i] = dlock__prefix_name(query_prefixes[i], l->name, l->name_len, &lens[i]);
		ok = ok && names[i] != NULL;
	}
	return ok ? 0 : -1;
}

/* The query as an operation of one script call (core/drive/cmd_op.h). */
typedef struct info_op {
	dlock__cmd_op co; /* first */
	char *names[NNAMES];
	size_t lens[NNAMES];
	int64_t now; /* wall ms as it was sent, for the TTLs the reply gives */
} info_op;

static int info_judge(dlock__cmd_op *co, const redisReply *r)
{
	info_op *q = (info_op *)co;
	dlock_lock *l = co->handle;
	dlock_lock_info *info = dlock__calloc(1, sizeof(*info));
	int rc;

	if (info == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "query %s: out of memory", l->shown);
	if ((rc = read_reply(l, r, q->now, info)) < 0) {
		dlock_lock_info_free(info);
		return rc;
	}
	co->op.result.lock_info = info; /* the callback's from now on */
	return 0;
}

static int info_prepare(dlock__cmd_op *co)
{
	((info_op *)co)->now = dlock__wall_ms();
	return 0;
}

static void info_clear(dlock__cmd_op *co)
{
	free_names(((info_op *)co)->names);
}

static const dlock__cmd_kind kind_info = { "dlock_lock_query", info_prepare, info_judge,
	info_clear, dlock__lock_cmd_unref, 0, 0 };

static int info_new(info_op **out, dlock_lock *l, dlock_op_cb cb, void *userdata)
{
	dlock__cmd_op *co;
	info_op *q;
	dlock__call *call;
	int rc = dlock__lock_cmd_new(&co, sizeof(info_op), &kind_info, l, cb, userdata);

	if (rc < 0)
		return rc;
	q = (info_op *)co;
	if (make_names(l, q->names, q->lens) < 0) {
		co->op.destroy(&co->op);
		return dlock__errbuf_record(&l->err,
				dlock__seterr(DLOCK_ENOMEM, "query %s: out of memory", l->shown));
	}
	call = &co->call;
	dlock__call_begin(call, &script_lock_info);
	dlock__call_push(call, l->name, l->name_len);
	dlock__call_push(call, l->queue, l->queue_len);
	dlock__call_push(call, l->timeouts, l->timeouts_len);
	dlock__call_push(call, q->names[WAITERS], q->lens[WAITERS]);
	dlock__call_keys_done(call);
	dlock__call_push(call, q->names[LOCK_CHANNEL], q->lens[LOCK_CHANNEL]);
	dlock__call_push(call, q->names[RW_CHANNEL], q->lens[RW_CHANNEL]);
	dlock__call_push(call, QUEUE_READ_MAX, strlen(QUEUE_READ_MAX));
	dlock__call_push(call, HOLDS_READ_MAX, strlen(HOLDS_READ_MAX));
	dlock__call_push(call, q->names[WAKE], q->lens[WAKE]);
	dlock__call_push(call, DLOCK__HERD_WATCHERS_ARG, strlen(DLOCK__HERD_WATCHERS_ARG));
	*out = q;
	return 0;
}

int dlock_lock_query(dlock_lock_info **out, dlock_lock *l)
{
	info_op *q;
	void *info = NULL;
	int rc;

	if (out == NULL || l == NULL)
		return dlock__seterr(DLOCK_EINVAL, "lock query: NULL argument");
	*out = NULL;
	if ((rc = info_new(&q, l, dlock__cmd_blocking, NULL)) < 0)
		return rc;
	rc = dlock__cmd_op_block(&q->co, NULL, &info);
	*out = info;
	return rc;
}

int dlock_lock_query_async(dlock_op **out, dlock_lock *l, dlock_op_cb cb, void *userdata)
{
	info_op *q;
	int rc;

	if (out != NULL)
		*out = NULL;
	if ((rc = info_new(&q, l, cb, userdata)) < 0)
		return rc;
	return dlock__cmd_op_submit(&q->co, out);
}

int64_t dlock_lock_info_ttl_ms(const dlock_lock_info *info)
{
	return info != NULL ? info->ttl_ms : -2;
}

size_t dlock_lock_info_holders(const dlock_lock_info *info)
{
	return info != NULL ? info->n : 0;
}

const char *dlock_lock_info_holder_owner(const dlock_lock_info *info, size_t i)
{
	return info != NULL && i < info->n ? info->owners[i] : NULL;
}

int64_t dlock_lock_info_holder_count(const dlock_lock_info *info, size_t i)
{
	return info != NULL && i < info->n ? info->counts[i] : 0;
}

const char *dlock_lock_info_rw_mode(const dlock_lock_info *info)
{
	return info != NULL ? info->rw_mode : NULL;
}

int64_t dlock_lock_info_holder_ttl_ms(const dlock_lock_info *info, size_t i)
{
	return info != NULL && i < info->n ? info->ttls[i] : -2;
}

size_t dlock_lock_info_read_holds(const dlock_lock_info *info, size_t i)
{
	return info != NULL && i < info->n ? info->nholds[i] : 0;
}

int64_t dlock_lock_info_read_hold_ttl_ms(const dlock_lock_info *info, size_t i, size_t k)
{
	return info != NULL && i < info->n && k < info->nholds[i] ? info->hold_ttls[i][k] : -2;
}

size_t dlock_lock_info_queued(const dlock_lock_info *info)
{
	return info != NULL ? info->queued : 0;
}

const char *dlock_lock_info_queued_owner(const dlock_lock_info *info, size_t i)
{
	return info != NULL && i < info->nq ? info->queue[i] : NULL;
}

int64_t dlock_lock_info_queued_ttl_ms(const dlock_lock_info *info, size_t i)
{
	return info != NULL && i < info->nq ? info->queue_ttls[i] : -2;
}

int64_t dlock_lock_info_subscribers(const dlock_lock_info *info)
{
	return info != NULL ? info->subscribers : 0;
}
