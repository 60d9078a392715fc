/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: a Redis Cluster behind one client (redis+cluster://seeds).
 *
 * The client the caller holds (the root) talks to no server itself: each
 * command goes to a member client - one per primary, opened on first use,
 * each with its own pool and background thread - chosen by the slot of the
 * command's first key (CRC16 with hash tags, core/topology/slot.h) in the slot map
 * (core/topology/slotmap.h), which is read from the seeds and then from the nodes
 * it names (CLUSTER SHARDS, else CLUSTER SLOTS on 6.x).
 *
 * Redirects: MOVED points the slot at the node named and runs the command
 * there; ASK runs it once at the node named, after ASKING on the same
 * connection, without changing the map; at most a few redirects per
 * command. TRYAGAIN and CLUSTERDOWN are tried again after a jittered pause
 * within the command timeout, then go back to the caller, whose wait treats
 * them as transient. A member that cannot be reached makes the map
 * suspect: it is read again before the next command (at most every
 * REFRESH_MIN_MS). Sharded pub/sub (Redis 7+) is found as Redisson finds
 * it (PUBSUB SHARDNUMSUB) and then used by every member: scripts publish
 * with SPUBLISH and waiters listen with SSUBSCRIBE at the node of the
 * channel's slot.
 */
#ifndef DLOCK_CORE_CLUSTER_H
#define DLOCK_CORE_CLUSTER_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

#include "dlock/client.h"
#include "core/net/conn.h"
#include "core/net/uri.h"

typedef struct dlock__cluster dlock__cluster;

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

/* From a parsed redis+cluster:// URI (its seed list moves in), serving `host`. */
int dlock__cluster_new(dlock__cluster **out, dlock__uri *u, const dlock__cluster_host *host);

/* Close the members and free (in a forked child too: each client knows
 * its own process). Accepts NULL. */
void dlock__cluster_free(dlock__cluster *cl);

/* Read the slot map now, before deadline (dlock_client_open without
 * lazy_connect): the reading below driven on the loop this call borrows. */
int dlock__cluster_refresh(dlock__cluster *cl, int64_t deadline);

/*
 * Reading the slot map as an operation on `loop` (cluster_refresh.c): the
 * known primaries, then the seeds, asked in turn over non-blocking
 * connections on that loop, each with an even share of what is left
 * before deadline. Its end posts `ready` to `loop`; then take the outcome
 * (0, or the failure with its message; r is freed). Drop one not taken:
 * nothing is posted after.
 */
typedef struct dlock__map_read dlock__map_read;
int dlock__cluster_read_start(dlock__cluster *cl, dlock__loop *loop, dlock__task *ready,
		int64_t deadline, dlock__map_read **out);
int dlock__cluster_read_over(const dlock__map_read *r);
int dlock__cluster_read_take(dlock__map_read *r);
void dlock__cluster_read_drop(dlock__map_read *r);

/* The background reading's end (the root's reactor stopping, its loop
 * still there; `forked`: in a forked child, the loop untouched). */
void dlock__cluster_stop_reading(dlock__cluster *cl, int forked);
/* The same for a reading: forget it without touching its loop. */
void dlock__cluster_read_forget(dlock__map_read *r);

/* For the reading: the nodes to ask (known primaries first, then the
 * seeds), ... */
#define DLOCK__CLUSTER_HOST_MAX 256
size_t dlock__cluster_candidates(dlock__cluster *cl, char (*hosts)[DLOCK__CLUSTER_HOST_MAX],
		int *ports, size_t max);
/* ... a reading begins (what is known of sharded pub/sub: 1, 0, -1), ... */
int dlock__cluster_reading(dlock__cluster *cl);
/* ... the map it read (which moves in), ... */
struct dlock__slotmap;
void dlock__cluster_read(dlock__cluster *cl, struct dlock__slotmap *map, int sharded);
/* ... and the root's node: credentials, timeouts, TLS, its label. */
const dlock__node *dlock__cluster_root(const dlock__cluster *cl);

/* The member serving key[0..len)'s slot now, opened on first use. The map
 * is read first when none is known (driven to its end here); a suspect one,
 * or one where no one serves the slot, is read again in the background on
 * the root's loop (host.loop_of) while this routes by what is known - the
 * caller's loop never waits on a reading. */
int dlock__cluster_route(dlock__cluster *cl, const char *key, size_t len, dlock_client **out);

/* Something run on one member: 0 with *out a reply (which may be an error
 * reply), or an error code. */
typedef int (*dlock__member_run)(dlock_client *member, void *arg, redisReply **out);

/*
 * Run `run` at the member serving `key`, following MOVED and ASK redirects
 * (ASK: the member's next pooled command is preceded by ASKING).
 */
int dlock__cluster_exec(dlock__cluster *cl, const char *key, size_t len, dlock__member_run run,
		void *arg, redisReply **out);

/*
 * A reply that may be a redirect: 1 for MOVED (the map is updated), 2 for
 * ASK, with *m the member named; 0 for another reply; < 0 when the member
 * cannot be opened.
 */
int dlock__cluster_follow(dlock__cluster *cl, const redisReply *r, dlock_client **m);

/* The most redirects one command follows (resharding under way beyond that). */
#define DLOCK__MAX_REDIRECTS 5

/* A reply seen elsewhere (a multiplexed or batched command): a MOVED
 * updates the map; an unreachable member (rc ECONN/ETIMEDOUT) makes it suspect. */
void dlock__cluster_note(dlock__cluster *cl, int rc, const redisReply *r);

/* Call fn for each member opened so far, under the cluster's lock: fn must
 * not call into the cluster. */
void dlock__cluster_each_member(
		dlock__cluster *cl, void (*fn)(dlock_client *member, void *arg), void *arg);

/* A node of the cluster gave its slot map once: the cluster has answered. */
int dlock__cluster_answered(dlock__cluster *cl);

/* One cluster: the seed lists share a node (the lists need not match). */
int dlock__cluster_same(const dlock__cluster *a, const dlock__cluster *b);

/* This thread's next dlock__client_conn_get() is for an ASK redirect. */
extern _Thread_local int dlock__asking_next;

#endif
