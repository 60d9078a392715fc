/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: what a cluster (core/topology/cluster.h) knows - the client it
 * serves, its seeds, the slot map, the members opened - and the few
 * accessors the reading of the map (cluster_refresh.h) uses. The router
 * (cluster.c) and the reading stand above it; it knows neither.
 */
#ifndef DLOCK_CORE_CLUSTER_STATE_H
#define DLOCK_CORE_CLUSTER_STATE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/client.h"
#include "core/loop/loop.h"
#include "core/net/conn.h"

typedef struct dlock__cluster dlock__cluster;
typedef struct dlock__map_read dlock__map_read;
struct dlock__slotmap;

/*
 * What the cluster needs of the client it serves (the root), which fills it
 * in: the root's node - credentials, timeouts and TLS settings for the
 * members, its label for messages - and how to open and close a member
 * client. The cluster keeps the members it opened and never looks inside a
 * client.
 */
typedef struct dlock__cluster_host {
	const dlock__node *root;
	/* A member client for host:port; `sharded`: its pub/sub is sharded. */
	int (*open_member)(void *self, dlock_client **out, const char *host, int port,
			int sharded);
	void (*close_member)(dlock_client *member);
	/* The root's loop, where a suspect map is read again in the background
	 * (NULL: none now; then routing reads it itself). */
	dlock__loop *(*loop_of)(void *self);
	void *self;
} dlock__cluster_host;

#define DLOCK__CLUSTER_HOST_MAX 256

typedef struct dlock__member {
	char host[DLOCK__CLUSTER_HOST_MAX];
	int port;
	dlock_client *client;
} dlock__member;

struct dlock__cluster {
	dlock__cluster_host host; /* the client served */
	size_t n_seeds;
	char **seed_hosts;
	int *seed_ports;

	pthread_mutex_t mu; /* guards what follows */
	struct dlock__slotmap *map;
	int stale;            /* read the map again before the next command */
	int64_t refreshed_at; /* monotonic ms of the last read (or attempt) */
	int sharded;          /* sharded pub/sub: 1 yes, 0 no, -1 not known yet */
	dlock__member *members;
	size_t n_members, cap_members;
	int bg_posted; /* a background reading is asked for or under way */
	/* The background reading (core/topology/cluster_refresh.c), on the
	 * root's loop: touched on that loop's thread only. */
	dlock__loop *bg_loop;
	dlock__map_read *bg;
	dlock__task bg_start, bg_over;
};

/* For the reading: the nodes to ask (known primaries first, then the
 * seeds), ... */
size_t dlock__cluster_candidates(dlock__cluster *cl, char (*hosts)[DLOCK__CLUSTER_HOST_MAX],
		int *ports, size_t max);
/* ... a reading begins (what is known of sharded pub/sub: 1, 0, -1), ... */
int dlock__cluster_reading(dlock__cluster *cl);
/* ... the map it read (which moves in), ... */
void dlock__cluster_read(dlock__cluster *cl, struct dlock__slotmap *map, int sharded);
/* ... and the root's node: credentials, timeouts, TLS, its label. */
const dlock__node *dlock__cluster_root(const dlock__cluster *cl);

#endif
