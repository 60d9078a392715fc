/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How a group's ops end (core/mux/mux_group.h; mux_group.c sends and
 * reads them): each op answered or failed is recorded; a group fails (its
 * connection back owing the replies, with each abandoned op's undo right
 * behind it, or closed) or is forgotten (nobody waits for its answers);
 * its connection goes back to the pool, or the group leaves its share.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/topology/cluster.h"
#include "core/base/error.h"
#include "core/mux/mux_group.h"
#include "core/mux/mux_share.h"
#include "core/mux/mux_source.h"
#include "core/net/script.h"
#include "core/net/owed.h"
#include "core/base/time.h"

/* Queue the undo behind a call given up on conn (sent as EVAL, its reply owed). */
static void send_undo(dlock__conn *conn, const dlock__call *u)
{
	const char *argv[DLOCK__CALL_MAX + 3];
	size_t lens[DLOCK__CALL_MAX + 3];
	char numbuf[16];
	dlock__script *script = dlock__script_for(u->script, conn->node);
	int argc = dlock__script_argv(script, u->nkeys, u->argv, u->lens, u->argc - u->nkeys,
			u->argv + u->nkeys, u->lens + u->nkeys, argv, lens, numbuf);

	/* Nobody reads its reply: a NOSCRIPT would go unseen. */
	dlock__script_argv_to_eval(script, argv, lens);
	dlock__conn_send_owed(conn, argc, argv, lens);
}

/* The op is answered (or given up): record it. now_us: when its reply was read. */
void dlock__mux_op_finish(dlock__mux_op *op, int rc, redisReply *reply, int maybe_ran,
		int64_t now_us)
{
	/* The node's figures: not an op nobody waited for (no-wait, or decided without it). */
	if (rc < 0 ? !op->undecided : reply != NULL)
		dlock__source_of(op->client)->hooks->answered(dlock__source_of(op->client), rc, reply, rc == 0 ? now_us - op->sent_us : 0);
	if (op->routed_by != NULL)
		dlock__cluster_note(op->routed_by, rc, reply);
	op->rc = rc;
	op->reply = reply;
	op->pending = 0;
	if (op->in_due) {
		op->in_due = 0;
		atomic_fetch_sub(&dlock__source_of(op->client)->ordered_due, 1);
	}
	op->abandoned = rc < 0 && maybe_ran;
	if (rc < 0)
		snprintf(op->errmsg, sizeof(op->errmsg), "%s", dlock__errmsg_thread());
}

/* The group is done with its connection: back to the pool, or out of its share. */
void dlock__mux_group_put_conn(dlock__mux_group *g)
{
	if (g->share != NULL) {
		dlock__share_leave(g);
		return;
	}
	g->src->hooks->put(g->src, g->conn);
	g->conn = NULL;
}

/* Ops given up on the group's connection that must run all the same: it
 * keeps a copy of each, sent again if it is closed or reset before they
 * answer (core/net/owed.h, rule 6). */
static void keep_musts(dlock__mux_group *g, const dlock__mux_op *ops, size_t first)
{
	size_t i;

	for (i = first; i < g->tail; i++) {
		const dlock__mux_op *op = &ops[g->fifo[i]];

		if (op->keep && op->abandoned && op->cmd != NULL)
			dlock__conn_keep(g->conn, op->cmd_argc, op->cmd, op->cmd_lens);
	}
}

/* A shared connection's group gives up: its replies are skipped where
 * they stand, each abandoned op's undo queued right behind (owed.h). */
static void give_up_shared(dlock__mux_group *g, dlock__mux_op *ops, size_t first)
{
	size_t i;

	dlock__share_give_up(g);
	for (i = first; i < g->tail; i++)
		if (ops[g->fifo[i]].undo != NULL && ops[g->fifo[i]].abandoned) {
			int before = g->conn->discard;

			send_undo(g->conn, ops[g->fifo[i]].undo);
			dlock__share_skips(g, before);
		}
}

/*
 * Fail every op still due on the group's connection. A connection that only
 * answers late (a deadline passed, or the outcome was decided without it),
 * having taken every command,
 * goes back to the pool owing those replies, to be skipped when they come:
 * closing it would make the next command open a new one, and a hung
 * server's listen backlog fills up with them. Any other failure closes it.
 */
void dlock__mux_group_fail(dlock__mux_group *g, dlock__mux_op *ops, int rc, size_t *npending)
{
	char msg[DLOCK__ERRMSG_MAX];
	int owed = 0, plain = 0;
	size_t first = g->head, i;

	snprintf(msg, sizeof(msg), "%s", dlock__errmsg_thread());
	for (; g->head < g->tail; g->head++) {
		dlock__mux_op *op = &ops[g->fifo[g->head]];

		owed++;
		plain += op->call == NULL;
		if (!op->pending)
			continue;
		dlock__seterr(rc, "%s", msg);
		dlock__mux_op_finish(op, rc, NULL, g->sent, 0);
		(*npending)--;
	}
	if (g->share != NULL) {
		if (rc == DLOCK_ETIMEDOUT && g->sent && !g->conn->broken) {
			give_up_shared(g, ops, first);
			keep_musts(g, ops, first);
		}
		dlock__mux_group_put_conn(g);
	} else if (g->conn != NULL) {
		/* Only plain commands due (WAIT): nothing to track; see mux.h. */
		if (rc == DLOCK_ETIMEDOUT && g->sent && !g->conn->connecting && plain < owed &&
				g->conn->out_len == 0) {
			dlock__conn_give_up(g->conn, owed);
			/* What may still run gets its undo right behind it (core/net/owed.h). */
			for (i = first; i < g->tail; i++)
				if (ops[g->fifo[i]].undo != NULL && ops[g->fifo[i]].abandoned)
					send_undo(g->conn, ops[g->fifo[i]].undo);
			keep_musts(g, ops, first);
		} else {
			g->conn->broken = 1;
			keep_musts(g, ops, first); /* closed: sent again elsewhere */
		}
		dlock__mux_group_put_conn(g);
	}
}

/* Every op due on the group is sent without waiting for its answer. */
int dlock__mux_group_no_wait(const dlock__mux_group *g, const dlock__mux_op *ops)
{
	size_t i;

	for (i = g->head; i < g->tail; i++)
		if (!ops[g->fifo[i]].no_wait)
			return 0;
	return g->head < g->tail;
}

/* Sent; nobody waits: the connection goes back owing the answers, which
 * are skipped when they come (the commands run when the server can). */
void dlock__mux_group_forget(dlock__mux_group *g, dlock__mux_op *ops, size_t *npending)
{
	int owed = 0;

	for (; g->head < g->tail; g->head++, owed++) {
		dlock__mux_op_finish(&ops[g->fifo[g->head]], 0, NULL, 1, 0);
		(*npending)--;
	}
	dlock__conn_give_up(g->conn, owed);
	dlock__mux_group_put_conn(g);
}
