/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: a Redis Cluster slot map - the primaries (address, node id when
 * known, replicas) and, for each of the 16384 hash slots, the index of the
 * primary serving it or -1.
 *
 * A map is built from one node's CLUSTER SHARDS reply (Redis 7+) or
 * CLUSTER SLOTS reply (Redis 6), then patched one slot at a time after a
 * MOVED redirect. Indexes of primaries are stable for the life of a map:
 * primaries are only ever appended, never removed (a primary left without
 * slots stays; a fresh map is the cure), so a router may key per-node state
 * by index.
 *
 * Threads: a map is plain data. Readers may share a map no thread changes;
 * dlock__slotmap_moved() needs the caller's exclusion.
 */
#ifndef DLOCK_CORE_SLOTMAP_H
#define DLOCK_CORE_SLOTMAP_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

/* Most primaries a map holds: more than there are slots serves no purpose. */
#define DLOCK__SLOTMAP_MAX_PRIMARIES 16384

typedef struct dlock__slotmap dlock__slotmap;

/* One node of the map: a primary or one of its replicas. */
typedef struct dlock__slotnode {
	char *host; /* never NULL or empty */
	int port;   /* 1..65535 */
	char *id;   /* the cluster node id, NULL when the reply did not say */
	int online; /* 0 when the reply said the node is failed or loading */
} dlock__slotnode;

/*
 * Parse a CLUSTER SHARDS reply into a new map in *out, the caller's to free
 * with dlock__slotmap_free(). Accepts RESP2 (each shard and node an array of
 * alternating field names and values, as hiredis 0.14 gives it) and RESP3
 * maps. For each shard that has slots, its primary is the first node with
 * role "master" whose health is "online" (else the first "master"); the
 * other nodes with role "replica" are its replicas. Shards without slots are
 * left out. A node's address is its "endpoint"; when that is NULL or empty,
 * `asked_host` (the host the reply came from; may be NULL) or else its "ip";
 * when it is "?" (unknown), its "ip". With `tls` non-zero its port is its
 * "tls-port", else its "port". A replica
 * without a usable address is left out; a primary without one is an error.
 * An empty reply gives an empty map (no slot served).
 *
 * Returns 0; DLOCK_EINVAL (out or r NULL); DLOCK_ESERVER (r is an error
 * reply); DLOCK_EPROTO with a message naming the shard and node for any
 * unexpected shape or value (wrong types, odd slot lists, slots out of
 * range or served twice, a shard with slots and no primary, ports out of
 * range); DLOCK_ENOMEM. On failure *out is NULL.
 */
int dlock__slotmap_from_shards(
		dlock__slotmap **out, const redisReply *r, const char *asked_host, int tls);

/*
 * The same from a CLUSTER SLOTS reply: entries [start, end, primary,
 * replica...], each node [endpoint, port, id?, metadata?]. A NULL or empty
 * endpoint is `asked_host`; "?" (unknown) leaves a replica out and is an
 * error for a primary. A primary serving several ranges is one primary.
 * Errors as for dlock__slotmap_from_shards().
 */
int dlock__slotmap_from_slots(dlock__slotmap **out, const redisReply *r, const char *asked_host);

/* Free the map. Accepts NULL. */
void dlock__slotmap_free(dlock__slotmap *m);

/* The index of the primary serving `slot` now, or -1 (unserved, or slot >= 16384). */
int dlock__slotmap_primary(const dlock__slotmap *m, uint16_t slot);

/* How many primaries the map holds (indexes 0..count-1). */
size_t dlock__slotmap_count(const dlock__slotmap *m);

/* Primary `idx`, or NULL when idx is out of range. Owned by the map. */
const dlock__slotnode *dlock__slotmap_node(const dlock__slotmap *m, int idx);

/* Shortcuts: primary idx's host (NULL) and port (-1 when out of range). */
const char *dlock__slotmap_host(const dlock__slotmap *m, int idx);
int dlock__slotmap_port(const dlock__slotmap *m, int idx);

/* Primary idx's replicas: how many, and the i-th (NULL when out of range). */
size_t dlock__slotmap_replica_count(const dlock__slotmap *m, int idx);
const dlock__slotnode *dlock__slotmap_replica(const dlock__slotmap *m, int idx, size_t i);

/* How many slots primary idx serves; how many slots any primary serves. */
size_t dlock__slotmap_served(const dlock__slotmap *m, int idx);
size_t dlock__slotmap_covered(const dlock__slotmap *m);

/* The index of the primary at host:port (host compared without case), or -1. */
int dlock__slotmap_find(const dlock__slotmap *m, const char *host, int port);

/*
 * A MOVED redirect said host:port serves `slot` now: point the slot at that
 * primary, appending it (no id, no replicas) when the map has no primary at
 * that address. Returns the primary's index (>= 0); DLOCK_EINVAL (NULL or
 * empty host, port or slot out of range); DLOCK_EPROTO (the map is full);
 * DLOCK_ENOMEM (the map is unchanged).
 */
int dlock__slotmap_moved(dlock__slotmap *m, uint16_t slot, const char *host, int port);

/* ---- building blocks of the parsers (slotmap_parse.c) -------------------- */

/* A new map with no primary and no slot served. 0 or DLOCK_ENOMEM. */
int dlock__slotmap_new(dlock__slotmap **out);

/*
 * The index of the primary host[0..host_len):port with that id (id may be
 * NULL: unknown), appended if new. The same id or, without ids, the same
 * address is the same primary; one of the two matching and the other not
 * is DLOCK_EPROTO. Returns the index, DLOCK_EPROTO (also: the map is full)
 * or DLOCK_ENOMEM.
 */
int dlock__slotmap_add_primary(dlock__slotmap *m, const char *host, size_t host_len, int port,
		const char *id, size_t id_len);

/* Add a replica to primary idx unless one at that address is there. 0,
 * DLOCK_EINVAL or DLOCK_ENOMEM. */
int dlock__slotmap_add_replica(dlock__slotmap *m, int idx, const char *host, size_t host_len,
		int port, const char *id, size_t id_len, int online);

/* Slots start..end are served by primary idx. DLOCK_EPROTO when one of them
 * is served by another primary already; DLOCK_EINVAL when out of range. */
int dlock__slotmap_assign(dlock__slotmap *m, int start, int end, int idx);

#endif
