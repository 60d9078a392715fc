/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reading a cluster's slot map as an operation on a loop (see cluster.h):
 * the nodes asked in turn, each over a non-blocking exchange
 * (core/net/exchange.h) with an even share of what is left of the
 * deadline, so a hung one cannot use it all - and the loop's other work
 * goes on meanwhile. CLUSTER SHARDS, else CLUSTER SLOTS on 6.x; the first
 * time, Redisson's probe for sharded pub/sub too. The blocking
 * dlock__cluster_refresh drives it on the loop it borrows.
 */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/error.h"
#include "core/base/time.h"
#include "core/net/exchange.h"
#include "core/net/tls.h"
#include "core/topology/cluster_refresh.h"
#include "core/topology/slotmap.h"

#define CANDIDATES 32

enum stage { SHARDS, SLOTS, PROBE };

struct dlock__map_read {
	dlock__exchange x; /* the node being asked now */
	dlock__cluster *cl;
	dlock__loop *loop;
	dlock__task *ready;
	int64_t deadline;
	char hosts[CANDIDATES][DLOCK__CLUSTER_HOST_MAX];
	int ports[CANDIDATES];
	size_t n, tried;
	dlock__node node; /* the one asked now (its TLS settings its own) */
	enum stage stage;
	const char *argv[3];
	size_t lens[3];
	int sharded;
	dlock__slotmap *map;
	int over, rc;
	char last[DLOCK__ERRMSG_MAX]; /* why the last node asked did not say */
};

static void answered(dlock__exchange *x, int rc, redisReply *reply);

/* Send "cmd sub [arg]" (an exchange's first command, or the next on it). */
static int ask(dlock__map_read *r, int first, const char *cmd, const char *sub, const char *arg)
{
	int argc = arg != NULL ? 3 : 2;

	r->argv[0] = cmd;
	r->argv[1] = sub;
	r->argv[2] = arg;
	r->lens[0] = strlen(cmd);
	r->lens[1] = strlen(sub);
	r->lens[2] = arg != NULL ? strlen(arg) : 0;
	if (first) {
		int64_t now = dlock__now_ms();

		return dlock__exchange_start(&r->x, r->loop, &r->node,
				now + (r->deadline - now) / (int64_t)(r->n - r->tried), argc, r->argv,
				r->lens, cmd, answered);
	}
	dlock__exchange_send(&r->x, argc, r->argv, r->lens, cmd);
	return 0;
}

/* The node for hosts[i]: the root's credentials, timeouts and TLS. */
static int node_for(dlock__map_read *r, size_t i)
{
	const dlock__node *root = dlock__cluster_root(r->cl);
	const char *host = r->hosts[i];

	dlock__tls_ctx_free(r->node.tls);
	memset(&r->node, 0, sizeof(r->node));
	r->node.host = r->hosts[i];
	r->node.port = r->ports[i];
	r->node.user = root->user;
	r->node.password = root->password;
	r->node.connect_timeout_ms = root->connect_timeout_ms;
	r->node.command_timeout_ms = root->command_timeout_ms;
	snprintf(r->node.label, sizeof(r->node.label),
			strchr(host, ':') ? "[%.255s]:%d" : "%.255s:%d", host, r->ports[i]);
	return root->tls != NULL ? dlock__tls_ctx_for_host(&r->node.tls, root->tls, host) : 0;
}

static void finish(dlock__map_read *r, int rc)
{
	dlock__exchange_stop(&r->x);
	r->over = 1;
	r->rc = rc;
	if (rc == 0) {
		dlock__cluster_read(r->cl, r->map, r->sharded);
		r->map = NULL;
	}
	dlock__loop_post(r->loop, r->ready);
}

/* Ask the next node, from its first command. */
static void ask_next(dlock__map_read *r)
{
	while (r->tried < r->n && dlock__now_ms() < r->deadline) {
		r->stage = SHARDS;
		if (node_for(r, r->tried) == 0 && ask(r, 1, "CLUSTER", "SHARDS", NULL) == 0)
			return;
		snprintf(r->last, sizeof(r->last), "%s", dlock__errmsg_thread());
		r->tried++;
	}
	finish(r, DLOCK_ECONN);
}

/* The node asked now answered `reply`: the next step. 0 asked more, 1 done, or a failure. */
static int judge(dlock__map_read *r, const redisReply *reply)
{
	const char *host = r->hosts[r->tried];
	int rc;

	switch (r->stage) {
	case SHARDS:
		if (reply->type == REDIS_REPLY_ERROR) { /* 6.x: no SHARDS */
			r->stage = SLOTS;
			return ask(r, 0, "CLUSTER", "SLOTS", NULL);
		}
		rc = dlock__slotmap_from_shards(&r->map, reply, host, r->node.tls != NULL);
		break;
	case SLOTS:
		rc = dlock__reply_check(&r->node, reply, "CLUSTER SLOTS");
		if (rc == 0)
			rc = dlock__slotmap_from_slots(&r->map, reply, host);
		break;
	default: /* PROBE: sharded pub/sub is there when the server knows the command */
		r->sharded = reply->type != REDIS_REPLY_ERROR;
		return 1;
	}
	if (rc < 0 || r->sharded >= 0)
		return rc < 0 ? rc : 1;
	/* Redisson's probe (the bogus channel "0" avoids a hang on Azure). */
	r->stage = PROBE;
	return ask(r, 0, "PUBSUB", "SHARDNUMSUB", "0");
}

static void answered(dlock__exchange *x, int rc, redisReply *reply)
{
	dlock__map_read *r = (dlock__map_read *)x;

	if (rc == 0)
		rc = judge(r, reply);
	freeReplyObject(reply);
	if (rc == 0)
		return; /* asked more: answered again */
	if (rc == 1) {
		finish(r, 0);
		return;
	}
	snprintf(r->last, sizeof(r->last), "%s", dlock__errmsg_thread());
	dlock__slotmap_free(r->map);
	r->map = NULL;
	dlock__exchange_stop(x);
	r->tried++;
	ask_next(r);
}

int dlock__cluster_read_start(dlock__cluster *cl, dlock__loop *loop, dlock__task *ready,
		int64_t deadline, dlock__map_read **out)
{
	dlock__map_read *r = dlock__calloc(1, sizeof(*r));

	*out = NULL;
	if (r == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "%s: out of memory", dlock__cluster_root(cl)->label);
	r->cl = cl;
	r->loop = loop;
	r->ready = ready;
	r->deadline = deadline;
	r->n = dlock__cluster_candidates(cl, r->hosts, r->ports, CANDIDATES);
	r->sharded = dlock__cluster_reading(cl);
	snprintf(r->last, sizeof(r->last), "no node to ask");
	*out = r;
	ask_next(r); /* may be over at once: `ready` is posted, never run here */
	return 0;
}

int dlock__cluster_read_over(const dlock__map_read *r)
{
	return r->over;
}

void dlock__cluster_read_drop(dlock__map_read *r)
{
	if (r == NULL)
		return;
	dlock__exchange_stop(&r->x);
	if (r->over)
		dlock__loop_unpost(r->loop, r->ready);
	dlock__tls_ctx_free(r->node.tls);
	dlock__slotmap_free(r->map);
	dlock__free(r);
}

void dlock__cluster_read_forget(dlock__map_read *r)
{
	if (r == NULL)
		return;
	dlock__conn_close(r->x.c); /* a forked child's copy: its loop is the parent's */
	dlock__tls_ctx_free(r->node.tls);
	dlock__slotmap_free(r->map);
	dlock__free(r);
}

int dlock__cluster_read_take(dlock__map_read *r)
{
	int rc = r->rc;

	if (rc < 0)
		dlock__seterr(rc, "%s: no node gave the slot map (%zu asked): %s",
				dlock__cluster_root(r->cl)->label, r->tried, r->last);
	r->over = 0; /* taken: nothing to unpost */
	dlock__cluster_read_drop(r);
	return rc;
}

/* Nothing to do when the reading ends: the drive below looks at r->over. */
static void noted(dlock__task *t)
{
	(void)t;
}

int dlock__cluster_refresh(dlock__cluster *cl, int64_t deadline)
{
	dlock__loop spare, *l = dlock__loop_borrow(&spare);
	dlock__map_read *r = NULL;
	dlock__task ready;
	int rc;

	dlock__task_init(&ready, noted);
	rc = dlock__cluster_read_start(cl, l, &ready, deadline, &r);
	while (rc == 0 && !r->over)
		rc = dlock__loop_run_once(l, DLOCK__NEVER);
	if (rc == 0) {
		dlock__loop_unpost(l, &ready);
		rc = dlock__cluster_read_take(r);
	} else {
		dlock__cluster_read_drop(r);
	}
	dlock__loop_give_back(l, &spare);
	return rc;
}
