/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One group of a multiplexed run (core/mux_group.h): its connection, the
 * replies due on it in order, and what happens when its socket is ready or
 * its deadline passes.
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

static int64_t due_by(const dlock__mux_group *g, const dlock__mux_op *ops, int64_t now)
{
	int64_t d = now + g->src->command_timeout_ms;

	return g->head < g->tail ? d + ops[g->fifo[g->head]].slack_ms : d;
}

/* Messages name the script (or the command); formatted only when something fails. */
static const char *what_of(const dlock__mux_op *op)
{
	return op->call != NULL ? op->call->script->name : op->argv[0];
}

/* The op is answered (or given up): record it. now_us: when its reply was read. */
static void finish(dlock__mux_op *op, int rc, redisReply *reply, int maybe_ran, int64_t now_us)
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
static void put_conn(dlock__mux_group *g)
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
static void fail_group(dlock__mux_group *g, dlock__mux_op *ops, int rc, size_t *npending)
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
		finish(op, rc, NULL, g->sent, 0);
		(*npending)--;
	}
	if (g->share != NULL) {
		if (rc == DLOCK_ETIMEDOUT && g->sent && !g->conn->broken) {
			give_up_shared(g, ops, first);
			keep_musts(g, ops, first);
		}
		put_conn(g);
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
		put_conn(g);
	}
}

/* Every op due on the group is sent without waiting for its answer. */
static int group_no_wait(const dlock__mux_group *g, const dlock__mux_op *ops)
{
	size_t i;

	for (i = g->head; i < g->tail; i++)
		if (!ops[g->fifo[i]].no_wait)
			return 0;
	return g->head < g->tail;
}

/* Sent; nobody waits: the connection goes back owing the answers, which
 * are skipped when they come (the commands run when the server can). */
static void forget_group(dlock__mux_group *g, dlock__mux_op *ops, size_t *npending)
{
	int owed = 0;

	for (; g->head < g->tail; g->head++, owed++) {
		finish(&ops[g->fifo[g->head]], 0, NULL, 1, 0);
		(*npending)--;
	}
	dlock__conn_give_up(g->conn, owed);
	put_conn(g);
}

/* Queue op's command on the group's connection (behind ASKING for an ASK
 * redirect); `now`: write it and whatever is queued at once, else leave it
 * for the group's one write. */
static int queue_op(dlock__mux_group *g, const dlock__mux_op *op, int now)
{
	if (g->share != NULL) /* the turn's one write (never an ASK: see shareable) */
		return dlock__share_queue(g, op->cmd_argc, op->cmd, op->cmd_lens, what_of(op));
	if (op->asking) {
		g->conn->asking = 1;
		dlock__conn_ask(g->conn);
	}
	if (now || g->conn->broken) /* broken: the send says so (ECONN) */
		return dlock__conn_send(g->conn, op->cmd_argc, op->cmd, op->cmd_lens, what_of(op),
				DLOCK__NO_WAIT);
	return dlock__conn_queue(g->conn, op->cmd_argc, op->cmd, op->cmd_lens) < 0
			? dlock__seterr_node(DLOCK_ENOMEM, g->conn->label, "%s: out of memory",
					  what_of(op))
			: 0;
}

static int send_op(dlock__mux_group *g, const dlock__mux_op *op)
{
	return queue_op(g, op, 1);
}

/* The group's connection may be shared with other runs: a run on a loop
 * whose ops are all scripts waited for, with no ASK redirect (ASKING
 * would have to go right before, and its reply be read in the fifo). */
static int shareable(const dlock__mux_group *g, const dlock__mux_op *ops)
{
	size_t i;

	if (!g->may_share || g->wake_loop == NULL)
		return 0;
	for (i = g->head; i < g->tail; i++) {
		const dlock__mux_op *op = &ops[g->fifo[i]];

		if (op->asking || op->call == NULL || op->no_wait)
			return 0;
	}
	return 1;
}

/*
 * Send the group's handshake (new connection) and every op due on it,
 * without waiting: what the socket does not take now goes on POLLOUT.
 * The ops go out in one write, not one each: a watchdog round has an op
 * per cluster slot held (thousands at a node), and a write each would cost
 * the client a system call and the server a read per op.
 */
static int send_group(dlock__mux_group *g, dlock__mux_op *ops)
{
	int64_t now_us = dlock__now_us(), now = now_us / 1000;
	size_t i;
	int rc = 0;

	g->deadline = due_by(g, ops, now);
	g->sent = 1;
	if (g->fresh && g->share == NULL)
		rc = dlock__conn_send_handshake(g->conn, DLOCK__NO_WAIT);
	/* Greeted: shared from now on, if it may be (out of memory: not shared). */
	if (rc == 0 && g->share == NULL && shareable(g, ops))
		(void)dlock__share_adopt(g);
	/* A hold taken here: the client's registration rides along when stale. */
	for (i = g->head; rc == 0 && i < g->tail; i++)
		if (ops[g->fifo[i]].call != NULL && ops[g->fifo[i]].call->script->registers) {
			int before = g->conn->discard;

			g->src->hooks->fresh(g->src, g->conn);
			if (g->share != NULL)
				dlock__share_skips(g, before);
			break;
		}
	for (i = g->head; rc == 0 && i < g->tail; i++) {
		dlock__mux_op *op = &ops[g->fifo[i]];
		op->sent_at = now;
		op->sent_us = now_us;
		rc = queue_op(g, op, i + 1 == g->tail);
	}
	return rc;
}

/*
 * A pooled connection the server closed while idle (restart, CLIENT KILL)
 * fails at once: move the group, once, to a fresh connection, if every op
 * still due there may be repeated.
 */
static int reconnect_group(dlock__mux_group *g, dlock__mux_op *ops)
{
	size_t i;
	int rc;

	if (g->retried || g->fresh)
		return -1;
	for (i = g->head; i < g->tail; i++) {
		const dlock__mux_op *op = &ops[g->fifo[i]];

		if (op->no_retry || (op->follows != NULL && !op->follows->pending))
			return -1;
	}
	/* They may have run before the connection went: say so to those that ask. */
	for (i = g->head; i < g->tail; i++)
		if (ops[g->fifo[i]].repeat != NULL)
			ops[g->fifo[i]].repeat[0] = '1';
	g->retried = 1;
	g->conn->broken = 1;
	put_conn(g); /* closed, with the idle ones */
	rc = g->src->hooks->take(g->src, &g->conn, g->wake_loop, g->wake);
	if (rc < 0)
		return rc;
	g->fresh = 1;
	g->deadline = dlock__now_ms() + g->src->connect_timeout_ms;
	return g->conn->connecting ? 0 : send_group(g, ops);
}

/* Send op again, due last. */
static int resend(dlock__mux_group *g, dlock__mux_op *ops, dlock__mux_op *op)
{
	int r = send_op(g, op);

	if (r == 0)
		g->fifo[g->tail++] = (size_t)(op - ops);
	return r;
}

/* The server lost its script cache: op again as EVAL, due last. The ops
 * that must follow it and were sent before its answer came (a WAIT that
 * would count nothing) go stale: sent again when their reply comes. */
static int resend_as_eval(dlock__mux_group *g, dlock__mux_op *ops, dlock__mux_op *op)
{
	size_t i;

	dlock__script_argv_to_eval(dlock__script_for(op->call->script, dlock__source_of(op->client)->node), op->cmd,
			op->cmd_lens);
	for (i = g->head; i < g->tail; i++)
		if (ops[g->fifo[i]].follows == op)
			ops[g->fifo[i]].stale = 1;
	return resend(g, ops, op);
}

/* The reply to the op at the head of the fifo came: answer it, or send it
 * again (NOSCRIPT, stale). 0, or < 0 when the resend failed. */
static int take_reply(dlock__mux_group *g, dlock__mux_op *ops, size_t *npending,
		redisReply *reply)
{
	dlock__mux_op *op = &ops[g->fifo[g->head]];
	int64_t now_us = dlock__now_us();
	int r;

	g->head++;
	/* The next reply has its own command timeout from now. */
	g->deadline = due_by(g, ops, now_us / 1000);
	if (op->stale || (op->call != NULL && dlock__reply_is_error(reply, "NOSCRIPT"))) {
		int stale = op->stale;

		freeReplyObject(reply);
		r = stale ? resend(g, ops, op) : resend_as_eval(g, ops, op);
		op->stale = 0;
		if (r < 0) {
			/* Not due any more: it fails here (a NOSCRIPT did not run). */
			finish(op, r, NULL, stale, 0);
			(*npending)--;
			return r;
		}
		g->deadline = due_by(g, ops, dlock__now_ms());
		return 0;
	}
	finish(op, 0, reply, 1, now_us);
	(*npending)--;
	atomic_store(&g->src->timed_out_at, 0);
	return 0;
}

/* Read what the group's connection has; returns replies consumed or < 0. */
static int read_group(dlock__mux_group *g, dlock__mux_op *ops, size_t *npending)
{
	int got = 0;

	while (g->head < g->tail) {
		redisReply *reply = NULL;
		int r = dlock__conn_read(g->conn, &reply, what_of(&ops[g->fifo[g->head]]), 0);

		if (r == DLOCK__AGAIN)
			return got;
		if (r < 0 || (r = take_reply(g, ops, npending, reply)) < 0)
			return r;
		got++;
	}
	return got;
}

static const char *group_what(const dlock__mux_group *g)
{
	return g->head < g->tail ? what_of(&g->ops[g->fifo[g->head]]) : "reply";
}

static void group_reply(dlock__mux_group *g, redisReply *reply)
{
	int rc = take_reply(g, g->ops, g->npending, reply);

	if (rc < 0)
		fail_group(g, g->ops, rc, g->npending);
}

short dlock__mux_group_events(const dlock__mux_group *g)
{
	return (short)(dlock__conn_events(g->conn) | (g->conn->out_len > 0 ? POLLOUT : 0));
}

/* Just sent: a group of no-wait ops is forgotten once its commands are out. */
static void sent_group(dlock__mux_group *g, dlock__mux_op *ops, size_t *npending)
{
	if (g->conn->connecting || !group_no_wait(g, ops))
		return;
	g->forgetting = 1;
	if (g->conn->out_len == 0)
		forget_group(g, ops, npending);
}

static void group_failed(dlock__mux_group *g, int rc);

/* What the share calls on a group in it (mux_group_state.h). */
static const dlock__group_calls calls = { group_what, group_reply, group_failed };

/*
 * The share the group's ops marked `behind` go on (mux.h): where their
 * client's ordered ops on their key are due. NULL with rc 0: none due (or
 * none it must follow), any connection will do; rc < 0: due where an op
 * that must follow cannot (split over connections, or the group may not
 * share), so the group is not sent.
 */
static dlock__mux_share *behind_share(const dlock__mux_group *g, const dlock__mux_op *ops,
		int *rc)
{
	dlock__mux_share *on = NULL;
	dlock__due d; /* `elsewhere` and `open` were looked at by the op's caller (mux.h) */
	size_t i;

	*rc = 0;
	for (i = g->head; i < g->tail; i++) {
		const dlock__mux_op *op = &ops[g->fifo[i]];
		dlock__mux_share *s;

		/* A run that may not share goes as any op unless it must follow. */
		if (!op->behind || op->call == NULL || op->call->nkeys < 1 ||
				(!g->may_share && op->behind != DLOCK__BEHIND_ONLY))
			continue;
		s = dlock__share_behind(g->src, g->wake_loop, dlock__call_argv(op->call)[0],
				dlock__call_lens(op->call)[0], &d);
		if (d.on_key == 0)
			continue;
		if (s == NULL || (on != NULL && s != on) || !shareable(g, ops)) {
			if (op->behind != DLOCK__BEHIND_ONLY)
				continue; /* as any op */
			*rc = dlock__seterr_node(DLOCK_ETIMEDOUT, g->src->node->label,
					"%s: a command on its key is still due on a connection it "
					"cannot follow; not sent until it is answered",
					what_of(op));
			return NULL;
		}
		on = s;
	}
	return on;
}

void dlock__mux_group_start(dlock__mux_group *g, dlock__mux_op *ops, size_t *npending)
{
	int rc = 0;
	dlock__mux_share *s = behind_share(g, ops, &rc);

	g->ops = ops;
	g->npending = npending;
	g->calls = &calls;
	if (rc < 0) {
		fail_group(g, ops, rc, npending);
		return;
	}
	if (s == NULL && shareable(g, ops))
		s = dlock__share_pick(g->src, g->wake_loop);
	if (s != NULL)
		dlock__share_join(s, g);
	else
		rc = g->src->hooks->take(g->src, &g->conn, g->wake_loop, g->wake);

	/* New, even when its connect finished at once (a Unix socket). */
	if (rc == 0 && !g->conn->greeted)
		g->fresh = 1;
	if (rc == 0 && g->conn->connecting) {
		g->deadline = dlock__now_ms() + g->src->connect_timeout_ms;
		return;
	}
	if (rc == 0) {
		rc = send_group(g, ops);
		if (rc == DLOCK_ECONN)
			rc = reconnect_group(g, ops) == 0 ? 0 : DLOCK_ECONN;
	}
	if (rc < 0)
		fail_group(g, ops, rc, npending);
	else
		sent_group(g, ops, npending);
}

/* Connected: send what is still queued, read what came (a no-wait group
 * reads nothing: it is forgotten once its commands are out). */
static int serve_group(dlock__mux_group *g, dlock__mux_op *ops, size_t *npending)
{
	int rc = 0;

	if (g->conn->out_len > 0)
		rc = dlock__conn_push(g->conn, what_of(&ops[g->fifo[g->head]]));
	if (rc == 0 && !g->forgetting)
		rc = read_group(g, ops, npending);
	if (rc == DLOCK_ECONN && reconnect_group(g, ops) == 0)
		rc = 0;
	if (rc == 0 && g->forgetting && !g->conn->connecting && g->conn->out_len == 0)
		forget_group(g, ops, npending);
	return rc;
}

void dlock__mux_group_ready(dlock__mux_group *g, dlock__mux_op *ops, size_t *npending)
{
	int rc;

	if (g->conn->connecting) {
		rc = dlock__conn_connected(g->conn);
		if (rc == 0 && g->conn->connecting)
			return; /* a TLS handshake goes on */
		if (rc == 0)
			rc = send_group(g, ops);
		if (rc == 0) {
			sent_group(g, ops, npending);
			return;
		}
	} else {
		rc = serve_group(g, ops, npending);
	}
	if (rc < 0)
		fail_group(g, ops, rc, npending);
}

static void group_failed(dlock__mux_group *g, int rc)
{
	if (rc == DLOCK_ECONN && reconnect_group(g, g->ops) == 0)
		return;
	fail_group(g, g->ops, rc, g->npending);
}

void dlock__mux_group_expire(dlock__mux_group *g, dlock__mux_op *ops, int64_t now,
		size_t *npending)
{
	const dlock__mux_op *head = &ops[g->fifo[g->head]];

	atomic_store(&g->src->timed_out_at, now);
	if (dlock__mux_group_looking_up(g))
		dlock__seterr_node(DLOCK_ETIMEDOUT, g->src->node->label,
				"name lookup: no answer within %lld ms",
				(long long)g->src->connect_timeout_ms);
	else if (g->conn->connecting)
		dlock__seterr_node(DLOCK_ETIMEDOUT, g->src->node->label,
				"connect: no answer within %lld ms",
				(long long)g->src->connect_timeout_ms);
	else
		dlock__seterr_node(DLOCK_ETIMEDOUT, g->src->node->label,
				"%s%s: no answer within %lld ms",
				head->call != NULL ? "EVALSHA " : "", what_of(head),
				(long long)(g->src->command_timeout_ms + head->slack_ms));
	fail_group(g, ops, DLOCK_ETIMEDOUT, npending);
}

void dlock__mux_group_abandon(dlock__mux_group *g, dlock__mux_op *ops, size_t *npending)
{
	size_t k;

	if (g->head < g->tail) {
		for (k = g->head; k < g->tail; k++)
			ops[g->fifo[k]].undecided = ops[g->fifo[k]].pending;
		dlock__seterr_node(DLOCK_ETIMEDOUT, g->src->node->label,
				"abandoned once the outcome was decided");
		fail_group(g, ops, DLOCK_ETIMEDOUT, npending);
	} else if (g->conn != NULL) {
		put_conn(g);
	}
}
