/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: one group of a run as the run (core/mux/mux.c), the group's
 * steps (mux_group.c) and the share it may read through (mux_share.c) see
 * it. The share calls the group back through `calls`, so it stands below
 * the group's steps, which use it.
 */
#ifndef DLOCK_CORE_MUX_GROUP_STATE_H
#define DLOCK_CORE_MUX_GROUP_STATE_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

#include "core/mux/mux.h"
#include "core/mux/mux_source.h"

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
	 * runs there (core/mux/mux_share.h); `share`: it does, and the share
	 * reads and writes for the group, handing it its replies. */
	int may_share;
	struct dlock__mux_share *share;
	const struct dlock__group_calls *calls; /* for its share: set as it starts */
	dlock__mux_op *ops; /* the run's, and its count of ops waiting */
	size_t *npending;
	unsigned looked; /* the share's last look for ordered ops saw it (mux_share.c) */
} dlock__mux_group;

/* What the share calls on a group in it. */
typedef struct dlock__group_calls {
	/* What the op due next on the group is called, for messages. */
	const char *(*what)(const dlock__mux_group *g);
	/* The share hands the group its next reply (owned by it from now). */
	void (*reply)(dlock__mux_group *g, redisReply *reply);

	/* The shared connection failed with rc (message set): the group moves to
	 * a connection of its own, once, or fails; either way it leaves the share. */
	void (*failed)(dlock__mux_group *g, int rc);
} dlock__group_calls;

#endif
