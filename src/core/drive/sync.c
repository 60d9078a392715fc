/* SPDX-License-Identifier: BSD-3-Clause */
/* Replica acknowledgement: WAIT pipelined behind an acquisition (see sync.h). */
#include <stdio.h>

#include "dlock/errors.h"
#include "core/drive/client.h"
#include "core/topology/cluster.h"
#include "core/base/error.h"
#include "core/base/fmt.h"
#include "core/drive/mux.h"
#include "core/net/owed.h"
#include "core/drive/sync.h"
#include "core/base/time.h"

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

/* Queue the call (EVALSHA, or EVAL after NOSCRIPT) and send it with the WAIT: one write. */
static int send_pair(dlock__conn *conn, const dlock__call *call, int eval, const dlock__sync *s,
		int64_t deadline)
{
	const char *argv[DLOCK__CALL_MAX + 3];
	size_t lens[DLOCK__CALL_MAX + 3];
	char numbuf[16];
	dlock__script *script = dlock__script_for(call->script, conn->node);
	int argc = dlock__script_argv(script, call->nkeys, call->argv, call->lens,
			call->argc - call->nkeys, call->argv + call->nkeys,
			call->lens + call->nkeys, argv, lens, numbuf);

	if (eval) {
		dlock__script_argv_to_eval(script, argv, lens);
		dlock__conn_ask(conn); /* ASKING held for one command only */
	}
	if (conn->broken)
		return dlock__conn_fail(
				conn, DLOCK_ECONN, call->script->name, "connection already failed");
	if (dlock__conn_queue(conn, argc, argv, lens) < 0)
		return dlock__seterr_node(DLOCK_ENOMEM, conn->node->label, "%s: out of memory",
				call->script->name);
	return dlock__conn_send(
			conn, s->argc, (const char **)s->argv, s->lens, call->script->name, deadline);
}

/* One try on one connection. Returns the call's outcome; once it was
 * answered, the WAIT's is in *sync_rc and *sync_out. */
static int synced_once(dlock_client *c, dlock__conn *conn, const dlock__call *call,
		const dlock__call *undo, const dlock__sync *s, redisReply **out, int *sync_rc,
		redisReply **sync_out)
{
	int64_t deadline = dlock__deadline_in(c->opts.command_timeout_ms);
	int rc, eval;

	for (eval = 0; eval < 2; eval++) {
		rc = send_pair(conn, call, eval, s, deadline);
		if (rc == 0)
			rc = dlock__conn_read(conn, out, call->script->name, deadline);
		if (rc < 0)
			break;
		/* WAIT answers within its timeout of being run, which is no later
		 * than the call's deadline. */
		*sync_rc = dlock__conn_read(
				conn, sync_out, s->argv[0], deadline + c->opts.sync_timeout_ms);
		if (*sync_rc == DLOCK_ETIMEDOUT)
			conn->broken = 1; /* see dlock__client_run_synced */
		if (eval || *sync_rc < 0 || !dlock__reply_is_error(*out, "NOSCRIPT"))
			return 0;
		/* The server lost its script cache: nothing ran; both again. */
		freeReplyObject(*out);
		freeReplyObject(*sync_out);
		*out = *sync_out = NULL;
		deadline = dlock__deadline_in(c->opts.command_timeout_ms);
	}
	if (rc == DLOCK_ETIMEDOUT && !conn->broken && conn->owed > 0) {
		dlock__conn_give_up(conn, 1); /* the WAIT behind the call */
		if (undo != NULL)
			dlock__client_send_undo(conn, undo);
	}
	return rc;
}

/* The synced call for a cluster's member (dlock__cluster_exec). */
typedef struct synced_args {
	const dlock__call *call, *undo;
	int retry;
	const dlock__sync *s;
	int *sync_rc;
	redisReply **sync_out;
} synced_args;

static int run_synced_at(dlock_client *member, void *arg, redisReply **out)
{
	synced_args *x = arg;

	freeReplyObject(*x->sync_out); /* of a redirected try */
	return dlock__client_run_synced(
			member, x->call, x->retry, x->undo, x->s, out, x->sync_rc, x->sync_out);
}

int dlock__client_run_synced(dlock_client *c, const dlock__call *call, int retry,
		const dlock__call *undo, const dlock__sync *s, redisReply **out, int *sync_rc,
		redisReply **sync_out)
{
	int attempt, rc = 0;

	*out = *sync_out = NULL;
	if (c->node.cluster != NULL) {
		synced_args x = { call, undo, retry, s, sync_rc, sync_out };

		*sync_rc = DLOCK_ECONN;
		return dlock__cluster_exec(c->node.cluster, call->argv[0], call->lens[0],
				run_synced_at, &x, out);
	}
	*sync_rc = DLOCK_ECONN;
	for (attempt = 0; attempt < 2; attempt++) {
		dlock__conn *conn = NULL;

		rc = dlock__client_conn_get(
				c, &conn, dlock__deadline_in(c->opts.command_timeout_ms));
		if (rc < 0)
			return rc;
		rc = synced_once(c, conn, call, undo, s, out, sync_rc, sync_out);
		dlock__client_conn_put(c, conn);
		if (rc != DLOCK_ECONN || !retry)
			break;
	}
	return rc;
}
