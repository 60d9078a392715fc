/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test harness: a real Redis Cluster (redis-server >= 7.0 and redis-cli) on
 * 127.0.0.1, built from rh_server processes (see redis_harness.h: free
 * ports, PR_SET_PDEATHSIG, private directories), each with
 * --cluster-enabled yes, its nodes.conf in its own directory, a node timeout
 * of 1 s and a cluster bus port of its own (--cluster-port, so any free
 * port works). Call everything from the test's main thread; every wait is
 * bounded and says on stderr what it was still waiting for.
 */
#ifndef DLOCK_RH_CLUSTER_H
#define DLOCK_RH_CLUSTER_H

#include "redis_harness.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rh_cluster rh_cluster;

/*
 * Start primaries * (1 + replicas_per_primary) servers (primaries >= 3, as
 * redis-cli requires), join them with `redis-cli --cluster create ...
 * --cluster-replicas R --cluster-yes` (its output goes to cluster-create.log
 * in the first server's directory, and to stderr when it fails), and wait
 * (30 s at most) until rh_cluster_await_ok() holds. `extra` is added to
 * every server's arguments, as for rh_server_start() (a --requirepass in it
 * is passed to redis-cli and MIGRATE; add --masterauth yourself; a
 * "--tls-port", "auto" pair gives each server a TLS port of its own). Returns
 * NULL, with the reason on stderr, when the cluster cannot be made.
 */
rh_cluster *rh_cluster_start(int primaries, int replicas_per_primary, const char *const *extra);

/* Kill every server, remove their directories, free. Accepts NULL. */
void rh_cluster_free(rh_cluster *c);

/* How many servers; server i (0 .. n-1: the primaries first, as created), or NULL. */
int rh_cluster_size(const rh_cluster *c);
rh_server *rh_cluster_server(rh_cluster *c, int i);

/* The index of s in the cluster, or -1. */
int rh_cluster_index(const rh_cluster *c, const rh_server *s);

/* Server i's cluster node id (40 hex digits; it never changes). */
const char *rh_cluster_node_id(const rh_cluster *c, int i);

/* "redis+cluster://127.0.0.1:P1,127.0.0.1:P2,..." listing every server. */
const char *rh_cluster_seed_uri(const rh_cluster *c);

/* For a cluster started with "--tls-port", "auto" in `extra` (each server
 * then gets a free TLS port of its own): "rediss+cluster://..." over their
 * TLS ports (CONFIG GET tls-port). Valid until the thread's next call. */
const char *rh_cluster_tls_seed_uri(rh_cluster *c);

/*
 * Every running server says cluster_state:ok, knows every running server
 * and sees all 16384 slots assigned; every running replica's link to its
 * primary is up and synced; all of them agree who serves each slot.
 * Returns 0, or -1 after timeout_ms with what was missing on stderr.
 */
int rh_cluster_await_ok(rh_cluster *c, int timeout_ms);

/* Is server i a primary now (INFO replication role:master)? 1, 0, or -1 when it does not answer. */
int rh_cluster_is_primary(rh_cluster *c, int i);

/*
 * The server serving `slot` in `asked`'s view (CLUSTER SHARDS, or CLUSTER
 * SLOTS on a server without it), or in the first running server's view when
 * asked is NULL. NULL when unserved, unanswered or not one of ours.
 */
rh_server *rh_cluster_slot_owner(rh_cluster *c, rh_server *asked, int slot);

/* The slot of key (CLUSTER KEYSLOT on a running server), or -1. */
int rh_cluster_key_slot(rh_cluster *c, const char *key);

/*
 * A manual failover of `primary`: CLUSTER FAILOVER sent to one of its
 * replicas, then wait (timeout_ms) until that replica is a primary, every
 * running server says it serves the slots and the old primary is its
 * synced replica. Returns the promoted server, or NULL (reason on stderr).
 */
rh_server *rh_cluster_failover(rh_cluster *c, rh_server *primary, int timeout_ms);

/*
 * Moving one slot between primaries as the cluster specification describes,
 * in three steps so a test can act in between (e.g. to see -ASK):
 *   begin: CLUSTER SETSLOT <slot> IMPORTING <from-id> on `to`, then
 *          SETSLOT <slot> MIGRATING <to-id> on the current owner;
 *   keys:  MIGRATE up to max_keys of the slot's keys (all when max_keys <= 0),
 *          returning how many moved, or -1;
 *   end:   the rest of the keys, then SETSLOT <slot> NODE <to-id> on `to`, the
 *          old owner and every other primary, and wait (10 s) until every
 *          running server says `to` serves it.
 */
typedef struct rh_slot_move {
	int slot;
	rh_server *from, *to;
} rh_slot_move;

int rh_cluster_move_begin(rh_cluster *c, int slot, rh_server *to, rh_slot_move *mv);
int rh_cluster_move_keys(rh_cluster *c, const rh_slot_move *mv, int max_keys);
int rh_cluster_move_end(rh_cluster *c, const rh_slot_move *mv);

/* All three steps, sleeping pause_ms between them (0: none). 0 or -1. */
int rh_cluster_move_slot(rh_cluster *c, int slot, rh_server *to, int pause_ms);

#ifdef __cplusplus
}
#endif

#endif
