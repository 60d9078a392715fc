/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * When each server started (monotonic ms), for RedLock's restart guard: read
 * once per connection generation (a new connection may meet a restarted
 * server), and for several servers at once in one multiplexed round, so the
 * guard costs at most one command timeout however many servers it asks.
 */
#include <stdlib.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/base/error.h"
#include "core/mux/mux.h"
#include "core/base/time.h"

/* INFO inside a script, so the mux (which runs scripts) can ask many at
 * once, or ask beside an acquire on the same connection. */
static dlock__script uptime_script = DLOCK__SCRIPT("uptime",
		"return tonumber(string.match(redis.call('info', 'server'), "
		"'uptime_in_seconds:(%d+)'))");

/* The cached start of c's server, if its connections are the ones it was read on. */
static int cached(dlock_client *c, int64_t *started_ms)
{
	int hit;

	dlock__mutex_lock(&c->pool_mu);
	hit = c->started_gen == c->conn_gen && c->conn_gen != 0;
	if (hit)
		*started_ms = c->started_at;
	dlock__mutex_unlock(&c->pool_mu);
	return hit;
}

/* Record an uptime read at `before`; rounded so the server looks as young as it may be. */
static int64_t remember(dlock_client *c, uint64_t gen, int64_t before, int64_t uptime_s)
{
	int64_t started = before - uptime_s * 1000;

	dlock__mutex_lock(&c->pool_mu);
	c->started_at = started;
	c->started_gen = gen;
	dlock__mutex_unlock(&c->pool_mu);
	return started;
}

static uint64_t generation(dlock_client *c)
{
	uint64_t gen;

	dlock__mutex_lock(&c->pool_mu);
	gen = c->conn_gen;
	dlock__mutex_unlock(&c->pool_mu);
	return gen;
}

int dlock__client_started_at(dlock_client *c, int64_t *started_ms)
{
	int rc;

	dlock__clients_started_at(&c, 1, started_ms, &rc);
	return rc;
}

/* The reply of one op as an uptime: 0, or an error with the node's message. */
static int uptime_of(const dlock__mux_op *op, int64_t *uptime_s)
{
	if (op->rc < 0)
		return dlock__seterr(op->rc, "%s", op->errmsg);
	if (op->reply->type != REDIS_REPLY_INTEGER || op->reply->integer < 0)
		return dlock__reply_check(&op->client->node, op->reply, "uptime") < 0
				? DLOCK_ESERVER
				: dlock__seterr_node(DLOCK_EPROTO, op->client->node.label,
						  "uptime: INFO server has no uptime_in_seconds");
	*uptime_s = op->reply->integer;
	return 0;
}

static const dlock__call uptime_call = { &uptime_script, 0, 0, { NULL }, { 0 } };

int dlock__uptime_op(dlock__mux_op *op, dlock_client *c, uint64_t *gen)
{
	int64_t ignored;

	if (cached(c, &ignored))
		return 0;
	*gen = generation(c);
	*op = (dlock__mux_op){ .client = c, .call = &uptime_call };
	return 1;
}

int dlock__uptime_note(const dlock__mux_op *op, uint64_t gen, int64_t asked_ms, int64_t *started_ms)
{
	int64_t uptime = 0;
	int rc = uptime_of(op, &uptime);

	if (rc == 0)
		*started_ms = remember(op->client, gen, asked_ms, uptime);
	return rc;
}

int dlock__uptime_peek(const dlock__mux_op *op, int64_t asked_ms, int64_t *started_ms)
{
	if (op->pending || op->rc < 0 || op->reply == NULL ||
			op->reply->type != REDIS_REPLY_INTEGER || op->reply->integer < 0)
		return 0;
	*started_ms = asked_ms - op->reply->integer * 1000;
	return 1;
}

void dlock__clients_started_at(
		dlock_client *const *clients, size_t n, int64_t *started_ms, int *rcs)
{
	dlock__mux_op *ops = dlock__calloc(n, sizeof(*ops));
	uint64_t *gens = dlock__calloc(n, sizeof(*gens));
	size_t i, nops = 0, *which = dlock__calloc(n, sizeof(*which));
	int64_t asked = dlock__now_ms();

	for (i = 0; i < n; i++) {
		/* Unknown until answered; a start cached meanwhile is taken as is. */
		rcs[i] = DLOCK_ENOMEM;
		if (clients[i] == NULL) /* no server to ask (a cluster without a map now) */
			rcs[i] = DLOCK_ECONN;
		else if (ops != NULL && gens != NULL && which != NULL &&
				dlock__uptime_op(&ops[nops], clients[i], &gens[nops]))
			which[nops++] = i;
		else if (cached(clients[i], &started_ms[i]))
			rcs[i] = 0;
	}
	if (nops > 0 && dlock__mux_run(ops, nops, NULL, NULL) == 0)
		for (size_t k = 0; k < nops; k++)
			rcs[which[k]] = dlock__uptime_note(
					&ops[k], gens[k], asked, &started_ms[which[k]]);
	dlock__mux_clear(ops, nops);
	dlock__free(ops);
	dlock__free(gens);
	dlock__free(which);
}
