/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A client's own calls to its server - PING, the server's uptime - as
 * operations of one command on its loop (core/drive/cmd_op.h): the _async
 * call hands the op to the loop, the blocking call drives it on the
 * calling thread.
 */
#include <stdlib.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/time.h"
#include "core/drive/cmd_op.h"
#include "core/topology/cluster.h"

/* The op's count on the client (dlock__cmd_op_new's) is all it keeps. */
static void no_unref(void *c)
{
	(void)c;
}

/* A cluster's PING goes to a member: PING's message names the slot. */
static int prepare_ping(dlock__cmd_op *co)
{
	co->argv[0] = "PING";
	co->lens[0] = 4;
	co->argv[1] = "dlock";
	co->lens[1] = 5;
	co->argc = co->client->node.cluster != NULL ? 2 : 1;
	return 0;
}

static int judge_ping(dlock__cmd_op *co, const redisReply *r)
{
	(void)r; /* any answer that is no error */
	co->op.result.value = 0;
	return 0;
}

/* INFO's section name is its first word: on a cluster, its slot's member answers. */
static int prepare_uptime(dlock__cmd_op *co)
{
	co->argv[0] = "INFO";
	co->lens[0] = 4;
	co->argv[1] = "server";
	co->lens[1] = 6;
	co->argc = 2;
	return 0;
}

static int judge_uptime(dlock__cmd_op *co, const redisReply *r)
{
	const char *p;

	if (r->type != REDIS_REPLY_STRING || (p = strstr(r->str, "uptime_in_seconds:")) == NULL)
		return dlock__seterr_node(DLOCK_EPROTO, co->mop.client->node.label,
				"INFO server: no uptime_in_seconds");
	co->op.result.value = strtoll(p + strlen("uptime_in_seconds:"), NULL, 10);
	return 0;
}

static const dlock__cmd_kind kind_ping = { "dlock_client_ping", prepare_ping, judge_ping, NULL,
	no_unref, 0, 0 };
/* Connecting is a PING on a connection made and authenticated for it. */
static const dlock__cmd_kind kind_connect = { "dlock_client_connect", prepare_ping, judge_ping,
	NULL, no_unref, 0, 0 };
static const dlock__cmd_kind kind_uptime = { "dlock_client_uptime_s", prepare_uptime, judge_uptime,
	NULL, no_unref, 0, 0 };

static int client_op_new(dlock__cmd_op **out, const dlock__cmd_kind *kind, dlock_client *c,
		dlock_op_cb cb, void *userdata)
{
	*out = NULL;
	if (c == NULL)
		return dlock__seterr(DLOCK_EINVAL, "%s: NULL client", kind->what);
	return dlock__cmd_op_new(out, sizeof(**out), kind, c, c, &c->err, c->node.label, cb,
			userdata);
}

static int submit(dlock_op **out, const dlock__cmd_kind *kind, dlock_client *c, dlock_op_cb cb,
		void *userdata)
{
	dlock__cmd_op *co;
	int rc;

	if (out != NULL)
		*out = NULL;
	rc = client_op_new(&co, kind, c, cb, userdata);
	return rc < 0 ? rc : dlock__cmd_op_submit(co, out);
}

int dlock_client_ping(dlock_client *c)
{
	dlock__cmd_op *co;
	int rc;

	if (c == NULL)
		return dlock__seterr(DLOCK_EINVAL, "ping: client is NULL");
	/* A cluster answers by giving its slot map (not yet an op: the map's
	 * read blocks; dlock_client_ping_async asks a member instead). */
	if (c->node.cluster != NULL)
		return dlock__errbuf_record(&c->err,
				dlock__cluster_refresh(c->node.cluster,
						dlock__deadline_in(c->opts.command_timeout_ms)));
	rc = client_op_new(&co, &kind_ping, c, dlock__cmd_blocking, NULL);
	return rc < 0 ? rc : dlock__cmd_op_block(co, NULL, NULL);
}

int dlock_client_connect_async(dlock_op **out, dlock_client *c, dlock_op_cb cb, void *userdata)
{
	return submit(out, &kind_connect, c, cb, userdata);
}

int dlock_client_ping_async(dlock_op **out, dlock_client *c, dlock_op_cb cb, void *userdata)
{
	return submit(out, &kind_ping, c, cb, userdata);
}

int dlock_client_uptime_s(int64_t *seconds, dlock_client *c)
{
	dlock__cmd_op *co;
	int64_t v = 0;
	int rc;

	if (c == NULL || seconds == NULL)
		return dlock__seterr(DLOCK_EINVAL, "uptime: NULL argument");
	if ((rc = client_op_new(&co, &kind_uptime, c, dlock__cmd_blocking, NULL)) < 0 ||
			(rc = dlock__cmd_op_block(co, &v, NULL)) < 0)
		return rc;
	*seconds = v;
	return 0;
}

int dlock_client_uptime_s_async(dlock_op **out, dlock_client *c, dlock_op_cb cb, void *userdata)
{
	return submit(out, &kind_uptime, c, cb, userdata);
}
