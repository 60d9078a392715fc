/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One script on many servers at once.
 *
 * Operations are grouped by client: each group uses one connection, on
 * which its operations are pipelined, so a client carrying several members
 * needs one connection, not one per member, and no group ever waits for a
 * pool while holding another's connection. A group that needs a new
 * connection connects without blocking (in the same poll as the others) and
 * pipelines AUTH/SELECT in front of its commands.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/alloc.h"
#include "core/client.h"
#include "core/error.h"
#include "core/mux.h"
#include "core/time.h"

typedef struct group {
	dlock_client *client;
	dlock__conn *conn;
	size_t *fifo;      /* ops whose replies are due, in the order they will come */
	size_t head, tail; /* fifo[head..tail) */
	size_t nops;
	int fresh;         /* conn was opened by this run: it needs its handshake */
	int sent;          /* commands went out: a failure may come after they ran */
	int retried;       /* already moved once to a fresh connection */
	int64_t deadline;  /* for the reply at the head of the fifo (or the connect) */
} group;

/* Messages name the script; formatted only when something fails. */
static const char *what_of(const dlock__mux_op *op)
{
	return op->script->name;
}

/*
 * Build the op's command into space of the run's scratch block: EVALSHA,
 * or EVAL with the script's body for an op nobody waits for - its NOSCRIPT
 * (a restarted or flushed server) would be skipped unread, and the release
 * or rollback it carries would silently never run.
 */
static void build(dlock__mux_op *op, const char **cmd, size_t *cmd_lens, char numbuf[16])
{
	op->cmd = cmd;
	op->cmd_lens = cmd_lens;
	op->cmd_argc = dlock__script_argv(op->script, op->nkeys, op->argv, op->lens,
			op->argc - op->nkeys, op->argv + op->nkeys, op->lens + op->nkeys,
			op->cmd, op->cmd_lens, numbuf);
	if (op->no_wait)
		dlock__script_argv_to_eval(op->script, op->cmd, op->cmd_lens);
}

/* The op is answered (or given up): record it. */
static void finish(dlock__mux_op *op, int rc, redisReply *reply, int maybe_ran)
{
	op->rc = rc;
	op->reply = reply;
	op->pending = 0;
	op->abandoned = rc < 0 && maybe_ran;
	if (rc < 0)
		snprintf(op->errmsg, sizeof(op->errmsg), "%s", dlock__errmsg_thread());
}

/*
 * Fail every op still due on the group's connection. A connection that only
 * answers late (a deadline passed, or the outcome was decided without it)
 * goes back to the pool owing those replies, to be skipped when they come:
 * closing it would make the next command open a new one, and a hung
 * server's listen backlog fills up with them. Any other failure closes it.
 */
static void fail_group(group *g, dlock__mux_op *ops, int rc, size_t *npending)
{
	char msg[DLOCK__ERRMSG_MAX];
	int owed = 0;

	snprintf(msg, sizeof(msg), "%s", dlock__errmsg_thread());
	for (; g->head < g->tail; g->head++) {
		dlock__mux_op *op = &ops[g->fifo[g->head]];

		owed++;
		if (!op->pending)
			continue;
		dlock__seterr(rc, "%s", msg);
		finish(op, rc, NULL, g->sent);
		(*npending)--;
	}
	if (g->conn != NULL) {
		if (rc == DLOCK_ETIMEDOUT && g->sent && !g->conn->connecting)
			dlock__conn_give_up(g->conn, owed);
		else
			g->conn->broken = 1;
		dlock__client_conn_put(g->client, g->conn);
		g->conn = NULL;
	}
}

/* Every op due on the group is sent without waiting for its answer. */
static int group_no_wait(const group *g, const dlock__mux_op *ops)
{
	size_t i;

	for (i = g->head; i < g->tail; i++)
		if (!ops[g->fifo[i]].no_wait)
			return 0;
	return g->head < g->tail;
}

/* Sent; nobody waits: the connection goes back owing the answers, which
 * are skipped when they come (the commands run when the server can). */
static void forget_group(group *g, dlock__mux_op *ops, size_t *npending)
{
	int owed = 0;

	for (; g->head < g->tail; g->head++, owed++) {
		finish(&ops[g->fifo[g->head]], 0, NULL, 1);
		(*npending)--;
	}
	dlock__conn_give_up(g->conn, owed);
	dlock__client_conn_put(g->client, g->conn);
	g->conn = NULL;
}

/* Send the group's handshake (new connection) and every op due on it. */
static int send_group(group *g, dlock__mux_op *ops)
{
	int64_t now = dlock__now_ms();
	size_t i;
	int rc = 0;

	g->deadline = now + g->client->opts.command_timeout_ms;
	g->sent = 1;
	if (g->fresh)
		rc = dlock__conn_send_handshake(g->conn, g->deadline);
	for (i = g->head; rc == 0 && i < g->tail; i++) {
		dlock__mux_op *op = &ops[g->fifo[i]];
		op->sent_at = now;
		rc = dlock__conn_send(g->conn, op->cmd_argc, op->cmd, op->cmd_lens, what_of(op),
				g->deadline);
	}
	return rc;
}

/*
 * A pooled connection the server closed while idle (restart, CLIENT KILL)
 * fails at once: move the group, once, to a fresh connection, if every op
 * still due there may be repeated.
 */
static int reconnect_group(group *g, dlock__mux_op *ops)
{
	size_t i;
	int rc;

	if (g->retried || g->fresh)
		return -1;
	for (i = g->head; i < g->tail; i++)
		if (ops[g->fifo[i]].no_retry)
			return -1;
	g->retried = 1;
	g->conn->broken = 1;
	dlock__client_conn_put(g->client, g->conn); /* closed, with the idle ones */
	g->conn = NULL;
	rc = dlock__client_conn_take(g->client, &g->conn);
	if (rc < 0)
		return rc;
	g->fresh = 1;
	g->deadline = dlock__now_ms() + g->client->opts.connect_timeout_ms;
	return g->conn->connecting ? 0 : send_group(g, ops);
}

/* Read what the group's connection has; returns replies consumed or < 0. */
static int read_group(group *g, dlock__mux_op *ops, size_t *npending)
{
	int got = 0;

	while (g->head < g->tail) {
		dlock__mux_op *op = &ops[g->fifo[g->head]];
		redisReply *reply = NULL;
		int r;

		r = dlock__conn_read(g->conn, &reply, what_of(op), 0);
		if (r == DLOCK__AGAIN)
			return got;
		if (r < 0)
			return r;
		got++;
		g->head++;
		if (dlock__reply_is_error(reply, "NOSCRIPT")) {
			/* The server lost its script cache: the same op as EVAL, due last. */
			freeReplyObject(reply);
			dlock__script_argv_to_eval(op->script, op->cmd, op->cmd_lens);
			g->deadline = dlock__now_ms() + g->client->opts.command_timeout_ms;
			r = dlock__conn_send(g->conn, op->cmd_argc, op->cmd, op->cmd_lens, what_of(op),
					g->deadline);
			if (r < 0)
				return r;
			g->fifo[g->tail++] = (size_t)(op - ops);
			continue;
		}
		finish(op, 0, reply, 1);
		(*npending)--;
		atomic_store(&g->client->slow_until, 0);
		/* The next reply has its own command timeout from now. */
		g->deadline = dlock__now_ms() + g->client->opts.command_timeout_ms;
	}
	return got;
}

static group *group_of(group *groups, size_t *ngroups, dlock_client *c)
{
	size_t i;

	for (i = 0; i < *ngroups; i++)
		if (groups[i].client == c)
			return &groups[i];
	groups[*ngroups].client = c;
	return &groups[(*ngroups)++];
}

/* Bytes of scratch space one run needs; small runs (the usual 3 or 5
 * servers) use the stack, saving a dozen allocations per lock operation. */
static size_t scratch_size(const dlock__mux_op *ops, size_t n)
{
	size_t i, slots = 0;

	for (i = 0; i < n; i++)
		slots += (size_t)ops[i].argc + 3;
	return n * (sizeof(group) + 3 * sizeof(size_t) + sizeof(struct pollfd) + 16) +
		slots * (sizeof(char *) + sizeof(size_t));
}

int dlock__mux_run(dlock__mux_op *ops, size_t n, dlock__mux_enough enough, void *arg)
{
	_Alignas(max_align_t) unsigned char stack[4096];
	size_t need = scratch_size(ops, n), i, ngroups = 0, npending = 0;
	unsigned char *scratch = need <= sizeof(stack) ? stack : dlock__malloc(need);
	group *groups;
	size_t *fifos, *pidx;
	struct pollfd *pfd;
	char (*nums)[16];
	const char **cmds;
	size_t *cmd_lens;
	int rc = 0;

	if (scratch == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "out of memory");
	memset(scratch, 0, need);
	/* Carve the block; every piece is a multiple of 8 bytes. */
	groups = (group *)scratch;
	fifos = (size_t *)(groups + n);
	pidx = fifos + 2 * n;
	pfd = (struct pollfd *)(pidx + n);
	nums = (char (*)[16])(pfd + n);
	cmds = (const char **)(nums + n);
	{
		size_t slots = 0;

		for (i = 0; i < n; i++)
			slots += (size_t)ops[i].argc + 3;
		cmd_lens = (size_t *)(cmds + slots);
	}
	for (i = 0; i < n; i++) {
		ops[i].rc = ops[i].skip ? DLOCK_ETIMEDOUT : 0;
		ops[i].reply = NULL;
		ops[i].abandoned = 0;
		ops[i].undecided = 0;
		ops[i].pending = 0;
		ops[i].errmsg[0] = '\0';
		if (!ops[i].skip)
			group_of(groups, &ngroups, ops[i].client)->nops++;
	}
	/* Each group's fifo has room for every op twice (a NOSCRIPT resend each). */
	{
		size_t at = 0;

		for (i = 0; i < ngroups; i++) {
			groups[i].fifo = fifos + at;
			at += 2 * groups[i].nops;
		}
	}
	{
		size_t at = 0;

		for (i = 0; i < n; i++) {
			group *g;

			if (ops[i].skip)
				continue;
			g = group_of(groups, &ngroups, ops[i].client);
			build(&ops[i], cmds + at, cmd_lens + at, nums[i]);
			at += (size_t)ops[i].argc + 3;
			ops[i].pending = 1;
			npending++;
			g->fifo[g->tail++] = i;
		}
	}

	/* Connections: pooled ones send at once; new ones connect in the poll. */
	for (i = 0; i < ngroups; i++) {
		group *g = &groups[i];
		int r;

		if (g->head == g->tail)
			continue;
		r = dlock__client_conn_take(g->client, &g->conn);
		if (r == 0 && g->conn->connecting) {
			g->fresh = 1;
			g->deadline = dlock__now_ms() + g->client->opts.connect_timeout_ms;
			continue;
		}
		if (r == 0) {
			r = send_group(g, ops);
			if (r == DLOCK_ECONN)
				r = reconnect_group(g, ops) == 0 ? 0 : DLOCK_ECONN;
		}
		if (r < 0)
			fail_group(g, ops, r, &npending);
		else if (!g->conn->connecting && group_no_wait(g, ops))
			forget_group(g, ops, &npending);
	}

	while (npending > 0) {
		int64_t first = DLOCK__NEVER, now;
		nfds_t nfds = 0;
		int prc;

		if (enough != NULL && enough(arg, ops, n, &first))
			break;
		for (i = 0; i < ngroups; i++) {
			group *g = &groups[i];

			if (g->conn == NULL || g->head == g->tail)
				continue;
			pfd[nfds].fd = g->conn->fd;
			pfd[nfds].events = g->conn->connecting ? POLLOUT : POLLIN;
			pfd[nfds].revents = 0;
			pidx[nfds++] = i;
			if (g->deadline < first)
				first = g->deadline;
		}
		if (nfds == 0)
			break;
		prc = poll(pfd, nfds, dlock__ms_until(first));
		if (prc < 0 && errno != EINTR) {
			rc = dlock__seterr(DLOCK_ESYS, "poll: %s", strerror(errno));
			break;
		}
		now = dlock__now_ms();
		for (i = 0; i < nfds; i++) {
			group *g = &groups[pidx[i]];
			int r = 0;

			if (prc > 0 && pfd[i].revents != 0) {
				if (g->conn->connecting) {
					r = dlock__conn_connected(g->conn);
					if (r == 0)
						r = send_group(g, ops);
					if (r == 0 && group_no_wait(g, ops)) {
						forget_group(g, ops, &npending);
						continue;
					}
				} else {
					r = read_group(g, ops, &npending);
					if (r == DLOCK_ECONN && reconnect_group(g, ops) == 0)
						r = 0;
				}
				if (r < 0) {
					fail_group(g, ops, r, &npending);
					continue;
				}
			}
			if (g->head < g->tail && now >= g->deadline) {
				atomic_store(&g->client->slow_until, now + DLOCK__SLOW_WINDOW_MS);
				if (g->conn->connecting)
					dlock__seterr_node(DLOCK_ETIMEDOUT, g->client->node.label,
							"connect: no answer within %d ms",
							g->client->opts.connect_timeout_ms);
				else
					dlock__seterr_node(DLOCK_ETIMEDOUT, g->client->node.label,
							"EVALSHA %s: no answer within %d ms",
							ops[g->fifo[g->head]].script->name,
							g->client->opts.command_timeout_ms);
				fail_group(g, ops, DLOCK_ETIMEDOUT, &npending);
			}
		}
	}
	/* Stopped early: whatever is still in flight is abandoned. */
	for (i = 0; i < ngroups; i++) {
		group *g = &groups[i];

		if (g->head < g->tail) {
			size_t k;

			for (k = g->head; k < g->tail; k++)
				ops[g->fifo[k]].undecided = ops[g->fifo[k]].pending;
			dlock__seterr_node(DLOCK_ETIMEDOUT, g->client->node.label,
					"abandoned once the outcome was decided");
			fail_group(g, ops, DLOCK_ETIMEDOUT, &npending);
		} else if (g->conn != NULL) {
			dlock__client_conn_put(g->client, g->conn);
			g->conn = NULL;
		}
	}
	/* The commands lived in the scratch block. */
	for (i = 0; i < n; i++) {
		ops[i].cmd = NULL;
		ops[i].cmd_lens = NULL;
	}
	if (scratch != stack)
		dlock__free(scratch);
	return rc;
}

void dlock__mux_clear(dlock__mux_op *ops, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		freeReplyObject(ops[i].reply);
		ops[i].reply = NULL;
	}
}
