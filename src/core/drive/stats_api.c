/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock_client_stats(): a snapshot of the counters (core/base/stats.h),
 * in one allocation with its nodes and their names. A cluster root's
 * nodes are its members (the ones opened so far); any other client is its
 * one node (a Sentinel-managed one: named with the primary it reached).
 */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/topology/cluster.h"

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

typedef struct filling {
	dlock_stats *out;
	size_t cap;
	char (*names)[320]; /* a label, or a Sentinel connection's "NAME (host:port)" */
} filling;

static void count_member(dlock_client *member, void *arg)
{
	(void)member;
	(*(size_t *)arg)++;
}

/* The node's name: a Sentinel-managed one's says which primary its newest
 * pooled connection reached ("sentinel:NAME (host:port)"), else its label. */
static void node_name(dlock_client *c, char *buf, size_t len)
{
	const char *label = c->node.label;

	if (c->node.finder.find == NULL) {
		snprintf(buf, len, "%s", label);
		return;
	}
	dlock__mutex_lock(&c->pool_mu);
	if (c->n_idle > 0 && c->idle[c->n_idle - 1]->label != NULL)
		label = c->idle[c->n_idle - 1]->label;
	snprintf(buf, len, "%s", label);
	dlock__mutex_unlock(&c->pool_mu);
}

static void add_node(dlock_client *c, void *arg)
{
	filling *f = arg;
	dlock_stat_node *n;
	const dlock__stats *s = &c->stats;

	if (f->out->nnodes == f->cap)
		return; /* opened since the count: in the next snapshot */
	n = &f->out->nodes[f->out->nnodes];
	node_name(c, f->names[f->out->nnodes], sizeof(*f->names));
	n->node = f->names[f->out->nnodes];
	n->errors = LOAD(s->errors);
	n->downs = LOAD(s->downs);
	n->up = LOAD(s->state) == DLOCK__NODE_UP;
	dlock__hist_read(&s->rtt, &n->rtt);
	n->commands = n->rtt.count;
	f->out->nnodes++;
}

int dlock_client_stats(dlock_stats **out, const dlock_client *client)
{
	/* Reading the figures changes nothing the caller sees; only the pool's
	 * mutex is taken (node_name), which a const handle may still lock. */
	dlock_client *c = (dlock_client *)client;
	const dlock__stats *s;
	dlock_stats *st;
	filling f;
	size_t cap = 1;
	int64_t held;

	if (out == NULL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_client_stats: NULL out");
	*out = NULL;
	if (c == NULL)
		return dlock__seterr(DLOCK_EINVAL, "dlock_client_stats: NULL client");
	if (c->node.cluster != NULL) {
		cap = 0;
		dlock__cluster_each_member(c->node.cluster, count_member, &cap);
	}
	/* One block: the snapshot, its nodes, their names. */
	st = dlock__calloc(1, sizeof(*st) + cap * (sizeof(dlock_stat_node) + sizeof(*f.names)));
	if (st == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "dlock_client_stats: out of memory");
	s = &c->stats;
	st->acquired = LOAD(s->acquired);
	st->not_acquired = LOAD(s->not_acquired);
	st->failed = LOAD(s->failed);
	st->released = LOAD(s->released);
	st->lost = LOAD(s->lost);
	st->renewals = LOAD(s->renewals);
	st->renewal_failures = LOAD(s->renewal_failures);
	st->brain_splits = LOAD(s->brain_splits);
	held = LOAD(s->held);
	st->held = held > 0 ? (uint64_t)held : 0; /* a release counted before its acquisition */
	dlock__hist_read(&s->wait, &st->wait);
	dlock__hist_read(&s->hold, &st->hold);
	st->nodes = (dlock_stat_node *)(st + 1);
	f.out = st;
	f.cap = cap;
	f.names = (void *)(st->nodes + cap);
	if (c->node.cluster != NULL)
		dlock__cluster_each_member(c->node.cluster, add_node, &f);
	else
		add_node(c, &f);
	*out = st;
	return 0;
}

void dlock_stats_free(dlock_stats *stats)
{
	dlock__free(stats);
}
