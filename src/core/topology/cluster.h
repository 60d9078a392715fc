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
	void *self;
} dlock__cluster_host;

/* From a parsed redis+cluster:// URI (its seed list moves in), serving `host`. */
int dlock__cluster_new(dlock__cluster **out, dlock__uri *u, const dlock__cluster_host *host);

/* Close the members and free (in a forked child too: each client knows
 * its own process). Accepts NULL. */
void dlock__cluster_free(dlock__cluster *cl);

/* Read the slot map now, before deadline (dlock_client_new without lazy_connect). */
int dlock__cluster_refresh(dlock__cluster *cl, int64_t deadline);

/* The member serving key[0..len)'s slot now, opened on first use; reads
 * the map first when none is known, it is suspect, or no one serves the slot. */
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
