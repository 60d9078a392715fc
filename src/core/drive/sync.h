/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: replica acknowledgement of an acquisition (the client option
 * sync_replicas; Redisson's checkLockSyncedSlaves).
 *
 * WAIT cannot run inside a script, so it is pipelined right behind the
 * acquire script on the same connection: one write, two replies. WAIT
 * counts the replicas that acknowledged every write this connection made
 * so far, the acquire's included. It only ever follows an acquisition:
 * releases and renewals never wait for replicas, so a slow or paused
 * replica cannot stall an unlock.
 *
 * What it does not do: make Redis strongly consistent. A replica that
 * acknowledged can still lose the write (it restarts without persistence),
 * and one that did not can still be promoted (Redisson issue 5256).
 *
 * sync_aof asks for more: WAITAOF 1 N (Redis 7.2+) in WAIT's place, which
 * counts the primary's own fsync of its append-only file and the replicas
 * that fsynced theirs. A server without the command fails the acquisition
 * (rolled back) with DLOCK_ESERVER rather than quietly waiting for less.
 */
#ifndef DLOCK_CORE_SYNC_H
#define DLOCK_CORE_SYNC_H

#include <hiredis/hiredis.h>

#include "dlock/client.h"
#include "core/net/script.h"

struct dlock__mux_op;

/* The WAIT (or WAITAOF) command a client sends behind an acquisition. */
typedef struct dlock__sync {
	const char *argv[4];
	size_t lens[4];
	int argc;
	char replicas[24];
	char timeout[24];
} dlock__sync;

/* 1 with *s built when the client asks replicas to acknowledge, else 0. */
int dlock__sync_prepare(dlock__sync *s, const dlock_client *client);

/*
 * Make *op the WAIT of *s, to ride right behind `acquire` on the same
 * connection of a multiplexed run: its reply may take the sync timeout
 * beyond the command timeout, and it is resent only together with the
 * acquire (alone, on another connection, it would count nothing).
 */
void dlock__sync_op(struct dlock__mux_op *op, dlock__sync *s, dlock_client *client,
		const struct dlock__mux_op *acquire);

/* 1 when a WAIT (read with rc, its reply r) counted enough replicas, else 0. */
int dlock__sync_enough(const dlock_client *client, int rc, const redisReply *r);

/*
 * Judge a WAIT's outcome (rc: how its reply was read; r: the reply).
 * Returns 0 when enough replicas acknowledged, DLOCK_ENOSYNC when fewer
 * did, or the error that kept the count unknown (the reply's error mapped,
 * DLOCK_EPROTO, or rc). *synced: the count, or -1 when unknown. The message
 * names the node and `what` (e.g. "lock orders").
 */
int dlock__sync_check(const dlock_client *client, int rc, const redisReply *r, const char *what,
		int *synced);

#endif
