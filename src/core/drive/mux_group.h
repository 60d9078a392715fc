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

#include "core/drive/mux.h"
#include "core/drive/mux_source.h"

typedef struct dlock__mux_group {
	dlock__source *src; /* the client whose ops these are */
	dlock__conn *conn;
	size_t *fifo;      /* ops whose replies are due, in the order they will come */
	size_t head, tail; /* fifo[head..tail) */
	size_t nops;
	int fresh;        /* conn was opened by this run: it needs its handshake */
	int sent;         /* commands went out: a failure may come after they ran */
	int retried;      /* already moved once to a fresh connection */
	int forgetting;   /* only no-wait ops: forgotten once their bytes are out */
	int64_t deadline; /* for the reply at the head of the fifo (or the connect) */
	/* The run's loop, told when a new connection's host name is found
	 * (NULL: looked up while starting it). */
	dlock__loop *wake_loop;
	dlock__task *wake;
	/* A run on a loop may share its connections with the client's other
	 * runs there (core/drive/mux_share.h); `share`: it does, and the share
	 * reads and writes for the group, handing it its replies. */
	int may_share;
	struct dlock__mux_share *share;
	dlock__mux_op *ops; /* the run's, and its count of ops waiting */
	size_t *npending;
} dlock__mux_group;

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

/* What the op due next on the group is called, for messages. */
const char *dlock__mux_group_what(const dlock__mux_group *g);

/* The share hands the group its next reply (owned by it from now). */
void dlock__mux_group_reply(dlock__mux_group *g, redisReply *reply);

/* The shared connection failed with rc (message set): the group moves to
 * a connection of its own, once, or fails; either way it leaves the share. */
void dlock__mux_group_failed(dlock__mux_group *g, int rc);

#endif
