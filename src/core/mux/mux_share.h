/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: one connection shared by the runs of one client on one loop
 * (pipelining, as hiredis's async context does).
 *
 * A group of a run on a loop (core/mux/mux_group.h) that has sent on its
 * connection hands it to a share; the groups of later runs of the same
 * client on that loop queue their commands on it while the earlier
 * replies are still due, instead of waiting for a pooled connection. The
 * share keeps the FIFO of who reads the next replies (a group, or a skip:
 * a reply nobody waits for any more), watches the descriptor once, and
 * hands each reply to the head of the FIFO. What the runs queue during one
 * turn of the loop leaves in one write (a posted flush, or at once beyond
 * DLOCK__SHARE_OUT_MAX bytes).
 *
 * Which connection: an idle pooled one first; else the least loaded share
 * while it has fewer than DLOCK__SHARE_BUSY replies due; else one more
 * connection while the pool has room; else the least loaded share however
 * busy. A group given up (its deadline, the run's end) turns its replies
 * into owed skips (core/net/owed.h) and its undo goes right behind them:
 * the others are not disturbed. A connection that fails fails every group
 * due on it; each retries on a connection of its own as a group does.
 * Ordering holds: a group's commands (and an op's `follows`, its undo, a
 * NOSCRIPT resend) go on the share in the order they are queued, and so
 * do runs: an op marked `behind` goes on the share where its client's
 * ordered ops on its key are due (an acquire right behind a release still
 * due, so the server runs them in that order), however busy, an idle
 * connection notwithstanding (core/mux/mux.h). Ops that
 * need a connection of their own (an ASK redirect's ASKING, a plain
 * command such as WAIT, ops nobody waits for) are never shared, nor are
 * runs a blocking call drives on a borrowed loop.
 */
#ifndef DLOCK_CORE_MUX_SHARE_H
#define DLOCK_CORE_MUX_SHARE_H

#include "core/mux/mux_group_state.h"

/* Replies due on a share beyond which one more pooled connection is opened. */
#define DLOCK__SHARE_BUSY 32
/* Bytes queued on a share beyond which they are written without waiting for the turn's end. */
#define DLOCK__SHARE_OUT_MAX 65536

typedef struct dlock__mux_share dlock__mux_share;

/* The share of c on loop that a group about to take a connection joins
 * (see above), or NULL: take one of the pool. */
dlock__mux_share *dlock__share_pick(dlock__source *c, dlock__loop *loop);

/* c has a share on loop a run may join (it need not wait for the pool);
 * loop NULL: on any loop. */
int dlock__share_available(dlock__source *c, dlock__loop *loop);

/* What is due of c's ordered ops (core/mux/mux.h), as a share sees it. */
typedef struct dlock__due {
	size_t on_key;   /* on the key, through c's shares on the loop */
	size_t open;     /* of those, DLOCK__ORDERED_OPEN */
	int elsewhere;   /* some (any key) are due elsewhere: not sent yet, on a
	                    connection of their own, on another loop */
} dlock__due;

/* The share c's ordered ops on `key` due on loop are all on (a working
 * one), or NULL (none due, or on more than one); *d what is due. Called on
 * loop's thread. */
dlock__mux_share *dlock__share_behind(dlock__source *c, dlock__loop *loop, const char *key,
		size_t len, dlock__due *d);

/* g joins s: g->conn and g->share are set. */
void dlock__share_join(dlock__mux_share *s, dlock__mux_group *g);

/* g's own connection (greeted, its handshake sent) becomes a share g is
 * in; runs waiting for the pool on g's loop are told. 0, or DLOCK_ENOMEM
 * (g keeps it to itself). */
int dlock__share_adopt(dlock__mux_group *g);

/* Queue a command whose reply g reads (due last), for the turn's write.
 * 0, DLOCK_ECONN (broken) or DLOCK_ENOMEM, message set. */
int dlock__share_queue(dlock__mux_group *g, int argc, const char **argv, const size_t *lens,
		const char *what);

/* Commands were queued on g's connection since it skipped `before`
 * replies at its head (conn->discard): their replies are skips, in order. */
void dlock__share_skips(dlock__mux_group *g, int before);

/* g gives up the replies it has due: they become owed skips (node->owed). */
void dlock__share_give_up(dlock__mux_group *g);

/* g leaves its share (replies still due to it are skipped); the
 * connection goes back to the pool once no group is in the share. */
void dlock__share_leave(dlock__mux_group *g);

#endif
