/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: what the multiplexer needs of a client - its source of
 * connections - and nothing else. A client begins with one
 * (core/drive/client.h) and fills in its hooks; the multiplexer reaches
 * the client only through them, as net reaches topology only through a
 * node's finder: it knows no pool, no holder, no client.
 */
#ifndef DLOCK_CORE_MUX_SOURCE_H
#define DLOCK_CORE_MUX_SOURCE_H

#include <stdatomic.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

#include "dlock/client.h"
#include "core/loop/loop.h"
#include "core/net/conn.h"

/*
 * A run on a loop that waits for a pooled connection: `task` is posted
 * to `loop` when one is given back (core/mux/mux_loop.c).
 */
typedef struct dlock__pool_waiter {
	dlock__loop *loop;
	dlock__task *task;
	struct dlock__pool_waiter *next;
	int queued;
} dlock__pool_waiter;

typedef struct dlock__source dlock__source;

typedef struct dlock__source_hooks {
	/* An idle connection now, or else a new one being connected (counted
	 * in the pool even beyond its size): never waits. */
	int (*take)(dlock__source *s, dlock__conn **out, dlock__loop *wake_loop,
			dlock__task *wake);
	/* Give it back (a broken one is closed instead). */
	void (*put)(dlock__source *s, dlock__conn *conn);
	/* What a take would do now: 2 an idle one, 1 one more opened, 0 none. */
	int (*room)(dlock__source *s);
	/* 1 with w queued when the pool is all lent out, else 0 (`first`: ahead
	 * of the others); take w out again; post every waiter of `loop`. */
	int (*wait)(dlock__source *s, dlock__pool_waiter *w, int first);
	void (*unwait)(dlock__source *s, dlock__pool_waiter *w);
	void (*wake_on)(dlock__source *s, dlock__loop *loop);
	/* A fresh connection's handshake is queued: what rides on it first
	 * (the holder's registration). */
	void (*fresh)(dlock__source *s, dlock__conn *conn);
	/* A command's answer, for the figures (rtt_us 0 when it failed). */
	void (*answered)(dlock__source *s, int rc, const redisReply *reply, int64_t rtt_us);
} dlock__source_hooks;

struct dlock__source {
	const dlock__source_hooks *hooks;
	const dlock__node *node; /* its node (a cluster root's routes by node->cluster) */
	int64_t connect_timeout_ms, command_timeout_ms;
	_Atomic int64_t timed_out_at; /* monotonic ms a multiplexed command timed
	                                 out; 0 once the server answered again */
	_Atomic long ordered_due; /* its ordered ops (core/mux/mux.h) begun and not
	                             yet answered or given up, on any loop */
};

/* A client's source: the client begins with it (core/drive/client.h). */
static inline dlock__source *dlock__source_of(dlock_client *c)
{
	return (dlock__source *)(void *)c;
}

#endif
