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
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/base/error.h"
#include "core/topology/cluster.h"
#include "core/drive/mux.h"
#include "core/net/owed.h"
#include "core/base/time.h"

typedef struct group {
	dlock_client *client;
	dlock__conn *conn;
	size_t *fifo;      /* ops whose replies are due, in the order they will come */
	size_t head, tail; /* fifo[head..tail) */
	size_t nops;
	int fresh;        /* conn was opened by this run: it needs its handshake */
	int sent;         /* commands went out: a failure may come after they ran */
	int retried;      /* already moved once to a fresh connection */
	int64_t deadline; /* for the reply at the head of the fifo (or the connect) */
} group;

static int64_t due_by(const group *g, const dlock__mux_op *ops, int64_t now)
{
	int64_t d = now + g->client->opts.command_timeout_ms;

	return g->head < g->tail ? d + ops[g->fifo[g->head]].slack_ms : d;
}

/* Messages name the script (or the command); formatted only when something fails. */
static const char *what_of(const dlock__mux_op *op)
{
	return op->call != NULL ? op->call->script->name : op->argv[0];
}

/* The scratch slots of the op's command. */
static size_t op_slots(const dlock__mux_op *op)
{
	return op->call != NULL ? (size_t)op->call->argc + 3 : (size_t)op->argc;
}

/*
 * Build the op's command into space of the run's scratch block: EVALSHA,
 * or EVAL with the script's body for an op nobody waits for - its NOSCRIPT
 * (a restarted or flushed server) would be skipped unread, and the release
 * or rollback it carries would silently never run.
 */
static void build(dlock__mux_op *op, const char **cmd, size_t *cmd_lens, char numbuf[16])
{
	const dlock__call *c = op->call;

	op->cmd = cmd;
	op->cmd_lens = cmd_lens;
	if (c == NULL) {
		memcpy(cmd, op->argv, sizeof(*cmd) * (size_t)op->argc);
		memcpy(cmd_lens, op->lens, sizeof(*cmd_lens) * (size_t)op->argc);
		op->cmd_argc = op->argc;
		return;
	}
	op->cmd_argc = dlock__script_argv(dlock__script_for(c->script, &op->client->node), c->nkeys,
			c->argv, c->lens, c->argc - c->nkeys, c->argv + c->nkeys,
			c->lens + c->nkeys, op->cmd, op->cmd_lens, numbuf);
	if (op->no_wait)
		dlock__script_argv_to_eval(dlock__script_for(c->script, &op->client->node), op->cmd,
				op->cmd_lens);
}

/* The op is answered (or given up): record it. */
static void finish(dlock__mux_op *op, int rc, redisReply *reply, int maybe_ran)
{
	if (op->routed_by != NULL)
		dlock__cluster_note(op->routed_by, rc, reply);
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
	int owed = 0, plain = 0;

	snprintf(msg, sizeof(msg), "%s", dlock__errmsg_thread());
	for (; g->head < g->tail; g->head++) {
		dlock__mux_op *op = &ops[g->fifo[g->head]];

		owed++;
		plain += op->call == NULL;
		if (!op->pending)
			continue;
		dlock__seterr(rc, "%s", msg);
		finish(op, rc, NULL, g->sent);
		(*npending)--;
	}
	if (g->conn != NULL) {
		/* Only plain commands due (WAIT): nothing to track; see mux.h. */
		if (rc == DLOCK_ETIMEDOUT && g->sent && !g->conn->connecting && plain < owed)
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

	g->deadline = due_by(g, ops, now);
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
	for (i = g->head; i < g->tail; i++) {
		const dlock__mux_op *op = &ops[g->fifo[i]];

		if (op->no_retry || (op->follows != NULL && !op->follows->pending))
			return -1;
	}
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

/* Send op again, due last (g->deadline is the head's). */
static int resend(group *g, dlock__mux_op *ops, dlock__mux_op *op)
{
	int r = dlock__conn_send(
			g->conn, op->cmd_argc, op->cmd, op->cmd_lens, what_of(op), g->deadline);

	if (r == 0)
		g->fifo[g->tail++] = (size_t)(op - ops);
	return r;
}

/* The server lost its script cache: op again as EVAL, due last. The ops
 * that must follow it and were sent before its answer came (a WAIT that
 * would count nothing) go stale: sent again when their reply comes. */
static int resend_as_eval(group *g, dlock__mux_op *ops, dlock__mux_op *op)
{
	size_t i;

	dlock__script_argv_to_eval(dlock__script_for(op->call->script, &op->client->node), op->cmd,
			op->cmd_lens);
	for (i = g->head; i < g->tail; i++)
		if (ops[g->fifo[i]].follows == op)
			ops[g->fifo[i]].stale = 1;
	return resend(g, ops, op);
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
		/* The next reply has its own command timeout from now. */
		g->deadline = due_by(g, ops, dlock__now_ms());
		if (op->stale || (op->call != NULL && dlock__reply_is_error(reply, "NOSCRIPT"))) {
			freeReplyObject(reply);
			r = op->stale ? resend(g, ops, op) : resend_as_eval(g, ops, op);
			op->stale = 0;
			if (r < 0)
				return r;
			g->deadline = due_by(g, ops, dlock__now_ms());
			continue;
		}
		finish(op, 0, reply, 1);
		(*npending)--;
		atomic_store(&g->client->timed_out_at, 0);
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

/*
 * One run's scratch block, laid out once: the groups, their reply fifos
 * (room for every op twice: a NOSCRIPT resend each), the poll set, and
 * the commands' argv/lens. Small runs (the usual 3 or 5 servers) use the
 * stack, saving a dozen allocations per lock operation.
 */
typedef struct run {
	dlock__mux_op *ops;
	size_t n;
	group *groups;
	size_t ngroups;
	size_t npending;
	size_t *fifos;
	size_t *pidx; /* pfd[k] polls groups[pidx[k]] */
	struct pollfd *pfd;
	char (*nums)[16];
	const char **cmds;
	size_t *cmd_lens;
	unsigned char *scratch;
	int on_heap;
} run;

static size_t command_slots(const dlock__mux_op *ops, size_t n)
{
	size_t i, slots = 0;

	for (i = 0; i < n; i++)
		if (!ops[i].skip)
			slots += op_slots(&ops[i]);
	return slots;
}

/* Carve the block (every piece is a multiple of 8 bytes). */
static int run_layout(run *r, dlock__mux_op *ops, size_t n, unsigned char *stack, size_t size)
{
	size_t slots = command_slots(ops, n);
	size_t need = n * (sizeof(group) + 3 * sizeof(size_t) + sizeof(struct pollfd) + 16) +
			slots * (sizeof(char *) + sizeof(size_t));

	memset(r, 0, sizeof(*r));
	r->ops = ops;
	r->n = n;
	r->on_heap = need > size;
	r->scratch = r->on_heap ? dlock__malloc(need) : stack;
	if (r->scratch == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "out of memory");
	memset(r->scratch, 0, need);
	r->groups = (group *)r->scratch;
	r->fifos = (size_t *)(r->groups + n);
	r->pidx = r->fifos + 2 * n;
	r->pfd = (struct pollfd *)(r->pidx + n);
	r->nums = (char(*)[16])(r->pfd + n);
	r->cmds = (const char **)(r->nums + n);
	r->cmd_lens = (size_t *)(r->cmds + slots);
	return 0;
}

/* Reset every op's results, group the ops by client and build their commands. */
/* An op for a cluster goes to the member serving its first key; one that
 * cannot be placed now is not sent (rc DLOCK_ETIMEDOUT, a failed vote). */
static void route(dlock__mux_op *op)
{
	dlock__cluster *cl = op->client->node.cluster;
	const char *key = op->call != NULL ? op->call->argv[0] : op->argv[1];
	size_t len = op->call != NULL ? op->call->lens[0] : op->lens[1];
	dlock_client *m = NULL;

	if (op->follows != NULL) {
		op->client = op->follows->client;
		op->skip = op->skip || op->follows->skip;
		return;
	}
	op->routed_by = cl;
	if ((op->call != NULL ? op->call->nkeys < 1 : op->argc < 2) ||
			dlock__cluster_route(cl, key, len, &m) < 0)
		op->skip = 1;
	else
		op->client = m;
}

static void run_prepare(run *r)
{
	size_t i, at = 0;

	for (i = 0; i < r->n; i++) {
		dlock__mux_op *op = &r->ops[i];

		op->routed_by = NULL; /* callers need not set private fields */
		if (op->skip)
			continue; /* a skipped op may have no client */
		if (op->client->node.cluster != NULL ||
				(op->follows != NULL && op->follows->routed_by != NULL))
			route(op);
	}
	for (i = 0; i < r->n; i++) {
		dlock__mux_op *op = &r->ops[i];

		op->rc = op->skip ? DLOCK_ETIMEDOUT : 0;
		op->reply = NULL;
		op->abandoned = op->undecided = op->pending = op->stale = 0;
		op->errmsg[0] = '\0';
		if (!op->skip)
			group_of(r->groups, &r->ngroups, op->client)->nops++;
	}
	for (i = 0; i < r->ngroups; i++) {
		r->groups[i].fifo = r->fifos + at;
		at += 2 * r->groups[i].nops;
	}
	for (i = 0, at = 0; i < r->n; i++) {
		dlock__mux_op *op = &r->ops[i];
		group *g;

		if (op->skip)
			continue;
		g = group_of(r->groups, &r->ngroups, op->client);
		build(op, r->cmds + at, r->cmd_lens + at, r->nums[i]);
		at += op_slots(op);
		op->pending = 1;
		r->npending++;
		g->fifo[g->tail++] = i;
	}
}

/* Connections: pooled ones send at once; new ones connect in the poll. */
static void run_connect(run *r)
{
	size_t i;

	for (i = 0; i < r->ngroups; i++) {
		group *g = &r->groups[i];
		int rc;

		if (g->head == g->tail)
			continue;
		rc = dlock__client_conn_take(g->client, &g->conn);
		/* New, even when its connect finished at once (a Unix socket). */
		if (rc == 0 && !g->conn->greeted)
			g->fresh = 1;
		if (rc == 0 && g->conn->connecting) {
			g->deadline = dlock__now_ms() + g->client->opts.connect_timeout_ms;
			continue;
		}
		if (rc == 0) {
			rc = send_group(g, r->ops);
			if (rc == DLOCK_ECONN)
				rc = reconnect_group(g, r->ops) == 0 ? 0 : DLOCK_ECONN;
		}
		if (rc < 0)
			fail_group(g, r->ops, rc, &r->npending);
		else if (!g->conn->connecting && group_no_wait(g, r->ops))
			forget_group(g, r->ops, &r->npending);
	}
}

/* The group's socket is ready: finish its connect, or read its replies. */
static void group_ready(run *r, group *g)
{
	int rc;

	if (g->conn->connecting) {
		rc = dlock__conn_connected(g->conn);
		if (rc == 0 && g->conn->connecting)
			return; /* a TLS handshake goes on */
		if (rc == 0)
			rc = send_group(g, r->ops);
		if (rc == 0 && group_no_wait(g, r->ops)) {
			forget_group(g, r->ops, &r->npending);
			return;
		}
	} else {
		rc = read_group(g, r->ops, &r->npending);
		if (rc == DLOCK_ECONN && reconnect_group(g, r->ops) == 0)
			rc = 0;
	}
	if (rc < 0)
		fail_group(g, r->ops, rc, &r->npending);
}

/*
 * One poll over every group still due a reply, until a reply, a group's
 * deadline or wake_at. Returns 1 when nothing is left to poll, 0, or an
 * error.
 */
static int run_poll_once(run *r, int64_t wake_at)
{
	nfds_t nfds = 0, k;
	size_t i;
	int ready;

	for (i = 0; i < r->ngroups; i++) {
		group *g = &r->groups[i];

		if (g->conn == NULL || g->head == g->tail)
			continue;
		r->pfd[nfds].fd = g->conn->fd;
		r->pfd[nfds].events = dlock__conn_events(g->conn);
		r->pfd[nfds].revents = 0;
		r->pidx[nfds++] = i;
		if (g->deadline < wake_at)
			wake_at = g->deadline;
		if (dlock__conn_buffered(g->conn))
			wake_at = 0; /* TLS has bytes the socket no longer shows */
	}
	if (nfds == 0)
		return 1;
	ready = poll(r->pfd, nfds, dlock__ms_until(wake_at));
	if (ready < 0 && errno != EINTR)
		return dlock__seterr(DLOCK_ESYS, "poll: %s", strerror(errno));
	for (k = 0; k < nfds; k++) {
		group *g = &r->groups[r->pidx[k]];

		if (g->conn != NULL && (r->pfd[k].revents != 0 || dlock__conn_buffered(g->conn)))
			group_ready(r, g);
	}
	return 0;
}

/* Fail the groups whose deadline passed; their server counts as slow. */
static void run_expire(run *r)
{
	int64_t now = dlock__now_ms();
	size_t i;

	for (i = 0; i < r->ngroups; i++) {
		group *g = &r->groups[i];

		if (g->conn == NULL || g->head == g->tail || now < g->deadline)
			continue;
		atomic_store(&g->client->timed_out_at, now);
		if (g->conn->connecting)
			dlock__seterr_node(DLOCK_ETIMEDOUT, g->client->node.label,
					"connect: no answer within %lld ms",
					(long long)g->client->opts.connect_timeout_ms);
		else
			dlock__seterr_node(DLOCK_ETIMEDOUT, g->client->node.label,
					"%s%s: no answer within %lld ms",
					r->ops[g->fifo[g->head]].call != NULL ? "EVALSHA " : "",
					what_of(&r->ops[g->fifo[g->head]]),
					(long long)(g->client->opts.command_timeout_ms +
							r->ops[g->fifo[g->head]].slack_ms));
		fail_group(g, r->ops, DLOCK_ETIMEDOUT, &r->npending);
	}
}

/* Stopped early: whatever is still in flight is abandoned; connections go back. */
static void run_abandon(run *r)
{
	size_t i, k;

	for (i = 0; i < r->ngroups; i++) {
		group *g = &r->groups[i];

		if (g->head < g->tail) {
			for (k = g->head; k < g->tail; k++)
				r->ops[g->fifo[k]].undecided = r->ops[g->fifo[k]].pending;
			dlock__seterr_node(DLOCK_ETIMEDOUT, g->client->node.label,
					"abandoned once the outcome was decided");
			fail_group(g, r->ops, DLOCK_ETIMEDOUT, &r->npending);
		} else if (g->conn != NULL) {
			dlock__client_conn_put(g->client, g->conn);
			g->conn = NULL;
		}
	}
}

/* The commands lived in the scratch block. */
static void run_free(run *r)
{
	size_t i;

	for (i = 0; i < r->n; i++) {
		r->ops[i].cmd = NULL;
		r->ops[i].cmd_lens = NULL;
	}
	if (r->on_heap)
		dlock__free(r->scratch);
}

int dlock__mux_run(dlock__mux_op *ops, size_t n, dlock__mux_enough enough, void *arg)
{
	_Alignas(max_align_t) unsigned char stack[4096];
	run r;
	int rc = run_layout(&r, ops, n, stack, sizeof(stack));

	if (rc < 0)
		return rc;
	run_prepare(&r);
	run_connect(&r);
	while (r.npending > 0) {
		int64_t wake_at = DLOCK__NEVER;

		if (enough != NULL && enough(arg, ops, n, &wake_at))
			break;
		rc = run_poll_once(&r, wake_at);
		if (rc != 0)
			break;
		run_expire(&r);
	}
	run_abandon(&r);
	run_free(&r);
	return rc < 0 ? rc : 0;
}

void dlock__mux_clear(dlock__mux_op *ops, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		freeReplyObject(ops[i].reply);
		ops[i].reply = NULL;
	}
}
