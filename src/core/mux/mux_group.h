/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal to core/mux.c: one group of a run - the ops of one client,
 * pipelined on one connection - and what happens to it: send, read,
 * reconnect once, fail at a deadline, forget (nobody waits).
 *
 * Every function that answers ops lowers *npending, the run's count of
 * ops still waiting.
 */
#ifndef DLOCK_CORE_MUX_GROUP_H
#define DLOCK_CORE_MUX_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "core/mux/mux.h"
#include "core/mux/mux_group_state.h"

/* The group waits for a reply (or its connect): its socket is to be polled. */
static inline int dlock__mux_group_active(const dlock__mux_group *g)
{
	return g->conn != NULL && g->head < g->tail;
}

/* What to poll the group's socket for: its connection's next step, and
 * POLLOUT while commands the socket did not take yet are queued. */
short dlock__mux_group_events(const dlock__mux_group *g);

/* Take the group's connection: a pooled one sends at once, a new one
 * starts connecting (finished by dlock__mux_group_ready). */
void dlock__mux_group_start(dlock__mux_group *g, dlock__mux_op *ops, size_t *npending);

/* The group's connection looks up its host name, or asks the sentinels
 * for its address (no socket yet). */
static inline int dlock__mux_group_looking_up(const dlock__mux_group *g)
{
	return g->conn != NULL && dlock__conn_looking_up(g->conn);
}

/* The group's socket is ready (or its lookup over): go on connecting, or
 * read its replies. */
void dlock__mux_group_ready(dlock__mux_group *g, dlock__mux_op *ops, size_t *npending);

/* Its deadline passed at `now`: fail what is due; its server counts as slow. */
void dlock__mux_group_expire(dlock__mux_group *g, dlock__mux_op *ops, int64_t now,
		size_t *npending);

/* The run ends before the group was answered: abandon what is due
 * (undecided) and give the connection back. */
void dlock__mux_group_abandon(dlock__mux_group *g, dlock__mux_op *ops, size_t *npending);

/* How its ops end (mux_group_end.c), for mux_group.c: the op answered or
 * failed (now_us: when its reply was read); the group done with its
 * connection; every op still due failed with rc; whether every op due is
 * sent without waiting; those forgotten once sent. */
void dlock__mux_op_finish(dlock__mux_op *op, int rc, redisReply *reply, int maybe_ran,
		int64_t now_us);
void dlock__mux_group_put_conn(dlock__mux_group *g);
void dlock__mux_group_fail(dlock__mux_group *g, dlock__mux_op *ops, int rc, size_t *npending);
int dlock__mux_group_no_wait(const dlock__mux_group *g, const dlock__mux_op *ops);
void dlock__mux_group_forget(dlock__mux_group *g, dlock__mux_op *ops, size_t *npending);

#endif
