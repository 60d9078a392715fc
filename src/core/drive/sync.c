/* SPDX-License-Identifier: BSD-3-Clause */
/* Replica acknowledgement: WAIT pipelined behind an acquisition (see sync.h). */
#include <stdio.h>

#include "dlock/errors.h"
#include "core/drive/client.h"
#include "core/base/error.h"
#include "core/base/fmt.h"
#include "core/mux/mux.h"
#include "core/drive/sync.h"

int dlock__sync_prepare(dlock__sync *s, const dlock_client *c)
{
	int aof = c->opts.sync_aof > 0;

	if (!aof && c->opts.sync_replicas <= 0)
		return 0;
	s->argc = 0;
	if (aof) {
		s->argv[s->argc] = "WAITAOF";
		s->lens[s->argc++] = 7;
		s->argv[s->argc] = "1"; /* numlocal: the primary's own fsync */
		s->lens[s->argc++] = 1;
	} else {
		s->argv[s->argc] = "WAIT";
		s->lens[s->argc++] = 4;
	}
	s->argv[s->argc] = s->replicas;
	s->lens[s->argc++] = dlock__fmt_i64(
			s->replicas, aof ? c->opts.sync_aof : c->opts.sync_replicas);
	s->argv[s->argc] = s->timeout;
	s->lens[s->argc++] = dlock__fmt_i64(s->timeout, c->opts.sync_timeout_ms);
	return 1;
}

void dlock__sync_op(
		dlock__mux_op *op, dlock__sync *s, dlock_client *c, const dlock__mux_op *acquire)
{
	*op = (dlock__mux_op){ .client = c, .argv = s->argv, .lens = s->lens, .argc = s->argc };
	op->slack_ms = c->opts.sync_timeout_ms;
	op->follows = acquire;
}

/* WAITAOF's reply: [numlocal, numreplicas], both integers >= 0. */
static int aof_counts(const redisReply *r, long long *local, long long *replicas)
{
	if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
			r->element[0]->type != REDIS_REPLY_INTEGER ||
			r->element[1]->type != REDIS_REPLY_INTEGER || r->element[0]->integer < 0 ||
			r->element[1]->integer < 0)
		return 0;
	*local = r->element[0]->integer;
	*replicas = r->element[1]->integer;
	return 1;
}

int dlock__sync_enough(const dlock_client *c, int rc, const redisReply *r)
{
	long long local, replicas;

	if (c->opts.sync_aof > 0)
		return rc == 0 && aof_counts(r, &local, &replicas) && local >= 1 &&
				replicas >= c->opts.sync_aof;
	return rc == 0 && r != NULL && r->type == REDIS_REPLY_INTEGER &&
			r->integer >= c->opts.sync_replicas;
}

static int aof_check(
		const dlock_client *c, const redisReply *r, const char *what, int *synced)
{
	long long local, replicas;

	if (r != NULL && r->type == REDIS_REPLY_ERROR) {
		if (dlock__reply_is_error(r, "ERR unknown command"))
			return dlock__seterr_node(DLOCK_ESERVER, c->node.label,
					"%s: WAITAOF needs Redis 7.2 or later (sync_aof), which this "
					"server is not: %s",
					what, r->str);
		return dlock__seterr_node(DLOCK_ESERVER, c->node.label,
				"%s: WAITAOF (sync_aof): %s", what, r->str ? r->str : "error");
	}
	if (!aof_counts(r, &local, &replicas))
		return dlock__seterr_node(DLOCK_EPROTO, c->node.label,
				"%s: WAITAOF: unexpected reply (type %d)", what, r ? r->type : -1);
	*synced = replicas > 1024 ? 1024 : (int)replicas;
	if (local >= 1 && replicas >= c->opts.sync_aof)
		return 0;
	return dlock__seterr_node(DLOCK_ENOSYNC, c->node.label,
			"%s: %s and %lld of %d replicas fsynced the acquisition within %lld ms",
			what, local >= 1 ? "the primary" : "not the primary", replicas,
			c->opts.sync_aof, (long long)c->opts.sync_timeout_ms);
}

int dlock__sync_check(
		const dlock_client *c, int rc, const redisReply *r, const char *what, int *synced)
{
	*synced = -1;
	if (rc < 0)
		return rc; /* the read's message stands */
	if (c->opts.sync_aof > 0)
		return aof_check(c, r, what, synced);
	if ((rc = dlock__reply_check(&c->node, r, "WAIT")) < 0)
		return rc;
	if (r->type != REDIS_REPLY_INTEGER || r->integer < 0)
		return dlock__seterr_node(DLOCK_EPROTO, c->node.label,
				"%s: WAIT: unexpected reply (type %d)", what, r->type);
	*synced = r->integer > 1024 ? 1024 : (int)r->integer;
	if (r->integer >= c->opts.sync_replicas)
		return 0;
	return dlock__seterr_node(DLOCK_ENOSYNC, c->node.label,
			"%s: %lld of %d replicas acknowledged the acquisition within %lld ms", what,
			(long long)r->integer, c->opts.sync_replicas,
			(long long)c->opts.sync_timeout_ms);
}
