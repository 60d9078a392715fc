/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: a Sentinel-managed primary (redis.io "Sentinel client spec").
 *
 * The client's node names no server but a primary's name and the sentinels
 * that watch it. Before a connection is opened the primary's address is
 * asked of the sentinels, in order, each with its share of the connect
 * deadline (the one that answered moves to the front); the new connection
 * then confirms with ROLE that it reached a primary (core/net/connect.c), since
 * a sentinel's answer may be stale. The address is cached and asked again
 * once something suggests the primary moved: a connection dropped or timed
 * out, a READONLY reply, a ROLE that is not "master", or a +switch-master
 * event. A failover never re-creates a hold: a renewal that finds its field
 * gone on the new primary reports the lock lost.
 */
#ifndef DLOCK_CORE_SENTINEL_H
#define DLOCK_CORE_SENTINEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/net/conn.h"
#include "core/net/uri.h"

typedef struct dlock__sentinel dlock__sentinel;
struct dlock__node;

/* What the sentinels are asked with (the client's sentinel_* options and
 * timeouts, copied by the client: topology knows no client options). */
typedef struct dlock__sentinel_opts {
	const char *user, *password; /* the sentinels' own credentials (NULL: none) */
	int64_t connect_timeout_ms, command_timeout_ms;
} dlock__sentinel_opts;

/* From a parsed redis+sentinel:// URI (its sentinel list and name move in). */
int dlock__sentinel_new(dlock__sentinel **out, dlock__uri *u, const dlock__sentinel_opts *o);
void dlock__sentinel_free(dlock__sentinel *s);

/* The name the sentinels know the primary by. */
const char *dlock__sentinel_master(const dlock__sentinel *s);

/* For the asking: the sentinels' indexes in the order to ask them (at
 * most DLOCK__SENTINELS_MAX), ... */
#define DLOCK__SENTINELS_MAX 16
void dlock__sentinel_order(dlock__sentinel *s, size_t *order, size_t *n);
/* ... sentinel k named host:port (adopted; k is asked first from now on), ... */
void dlock__sentinel_named(dlock__sentinel *s, size_t k, const char *host, int port);
/* ... and the address when one is known and not suspect: 1, else 0. */
int dlock__sentinel_cached(dlock__sentinel *s, char *host, size_t hostlen, int *port,
		uint64_t *epoch);

/* The current address's epoch, without asking anyone: 0 until the
 * sentinels first named the primary. */
uint64_t dlock__sentinel_epoch(dlock__sentinel *s);

/* Something suggests the primary moved: ask the sentinels before the next connect. */
void dlock__sentinel_suspect(dlock__sentinel *s);

/* One primary: the same name at a sentinel both lists (lists need not match). */
int dlock__sentinel_same(const dlock__sentinel *a, const dlock__sentinel *b);

/* The sentinels, for a watcher of +switch-master: n, and sentinel i's node. */
size_t dlock__sentinel_count(const dlock__sentinel *s);
const struct dlock__node *dlock__sentinel_node(const dlock__sentinel *s, size_t i);

/* A +switch-master or +promoted-slave announcement's text: when it names
 * this primary, the cached address becomes the new one. 1 when it did. */
int dlock__sentinel_switched(dlock__sentinel *s, const char *text, size_t len);
int dlock__sentinel_promoted(dlock__sentinel *s, const char *text, size_t len);

#endif
