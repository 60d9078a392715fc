/* SPDX-License-Identifier: BSD-3-Clause */
/* What a cluster knows, for the reading of its map (see cluster_state.h). */
#include <pthread.h>
#include <stdio.h>

#include "core/base/error.h"
#include "core/base/time.h"
#include "core/topology/cluster_state.h"
#include "core/topology/slotmap.h"

#define HOST_MAX DLOCK__CLUSTER_HOST_MAX

size_t dlock__cluster_candidates(dlock__cluster *cl, char (*hosts)[DLOCK__CLUSTER_HOST_MAX],
		int *ports, size_t max)
{
	size_t n = 0, i;

	dlock__mutex_lock(&cl->mu);
	for (i = 0; cl->map != NULL && i < dlock__slotmap_count(cl->map) && n < max; i++, n++) {
		snprintf(hosts[n], HOST_MAX, "%s", dlock__slotmap_host(cl->map, (int)i));
		ports[n] = dlock__slotmap_port(cl->map, (int)i);
	}
	dlock__mutex_unlock(&cl->mu);
	for (i = 0; i < cl->n_seeds && n < max; i++, n++) {
		snprintf(hosts[n], HOST_MAX, "%s", cl->seed_hosts[i]);
		ports[n] = cl->seed_ports[i];
	}
	return n;
}

int dlock__cluster_reading(dlock__cluster *cl)
{
	int sharded;

	dlock__mutex_lock(&cl->mu);
	sharded = cl->sharded;
	cl->refreshed_at = dlock__now_ms();
	dlock__mutex_unlock(&cl->mu);
	return sharded;
}

void dlock__cluster_read(dlock__cluster *cl, dlock__slotmap *map, int sharded)
{
	dlock__slotmap *old;

	dlock__mutex_lock(&cl->mu);
	old = cl->map;
	cl->map = map;
	cl->stale = 0;
	cl->sharded = sharded;
	dlock__mutex_unlock(&cl->mu);
	dlock__slotmap_free(old);
}

const dlock__node *dlock__cluster_root(const dlock__cluster *cl)
{
	return cl->host.root;
}
