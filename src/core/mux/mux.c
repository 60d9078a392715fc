/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One script on many servers at once.
 *
 * Operations are grouped by client: each group uses one connection, on
 * which its operations are pipelined, so a client carrying several members
 * needs one connection, not one per member, and no group ever waits for a
 * pool while holding another's connection. A group that needs a new
 * connection connects without blocking (in the same poll as the others) and
 * pipelines AUTH/SELECT in front of its commands (core/mux_group.c).
 *
 * The run is a dlock__mux advanced by its caller; dlock__mux_run() at the
 * end is the blocking driver.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/mux/mux_source.h"
#include "core/base/error.h"
#include "core/topology/cluster.h"
#include "core/mux/mux.h"
#include "core/net/owed.h"
#include "core/base/time.h"
#include "core/mux/mux_group.h"

typedef dlock__mux_group group;

/* The scratch slots of the op's command. */
static size_t op_slots(const dlock__mux_op *op)
{
	return op->call != NULL ? (size_t)op->call->argc + 3 : (size_t)op->argc;
}

/*
 * Build the op's command into space of the run's scratch block: EVALSHA,
 * or EVAL with the script's body for an op nobody waits for (or that asks
 * for it: .eval) - its NOSCRIPT (a restarted or flushed server) would be
 * skipped unread, and the release or rollback it carries would silently
 * never run.
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
	op->cmd_argc = dlock__script_argv(dlock__script_for(c->script, dlock__source_of(op->client)->node), c->nkeys,
			dlock__call_argv(c), dlock__call_lens(c), c->argc - c->nkeys,
			dlock__call_argv(c) + c->nkeys, dlock__call_lens(c) + c->nkeys, op->cmd,
			op->cmd_lens, numbuf);
	if (op->no_wait || op->eval)
		dlock__script_argv_to_eval(dlock__script_for(c->script, dlock__source_of(op->client)->node), op->cmd,
				op->cmd_lens);
}

static group *group_of(group *groups, size_t *ngroups, dlock_client *c)
{
	dlock__source *s = dlock__source_of(c);
	size_t i;

	for (i = 0; i < *ngroups; i++)
		if (groups[i].src == s)
			return &groups[i];
	groups[*ngroups].src = s;
	return &groups[(*ngroups)++];
}

static size_t command_slots(const dlock__mux_op *ops, size_t n)
{
	size_t i, slots = 0;

	for (i = 0; i < n; i++)
		if (!ops[i].skip)
			slots += op_slots(&ops[i]);
	return slots;
}

/*
 * One run's scratch block, laid out once (every piece a multiple of 8
 * bytes): the groups, their reply fifos (room for every op twice: a
 * NOSCRIPT resend each), and the commands' argv/lens. Small
 * runs use the inline buffer, saving a dozen allocations per lock operation.
 */
static int run_layout(dlock__mux *m, dlock__mux_op *ops, size_t n)
{
	size_t slots = command_slots(ops, n);
	size_t need = n * (sizeof(group) + 2 * sizeof(size_t) + 16) +
			slots * (sizeof(char *) + sizeof(size_t));

	memset(m, 0, offsetof(dlock__mux, inline_buf));
	m->ops = ops;
	m->n = n;
	m->on_heap = need > sizeof(m->inline_buf);
	m->scratch = m->on_heap ? dlock__malloc(need) : m->inline_buf;
	if (m->scratch == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "out of memory");
	memset(m->scratch, 0, need);
	m->groups = (group *)m->scratch;
	m->fifos = (size_t *)(m->groups + n);
	m->nums = (char(*)[16])(m->fifos + 2 * n);
	m->cmds = (const char **)(m->nums + n);
	m->cmd_lens = (size_t *)(m->cmds + slots);
	return 0;
}

/* An op for a cluster goes to the member serving its first key; one that
 * cannot be placed now is not sent (rc DLOCK_ETIMEDOUT, a failed vote). */
static void route(dlock__mux_op *op)
{
	dlock__cluster *cl = dlock__source_of(op->client)->node->cluster;
	const char *key = op->call != NULL ? dlock__call_argv(op->call)[0] : op->argv[1];
	size_t len = op->call != NULL ? dlock__call_lens(op->call)[0] : op->lens[1];
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

/* Reset every op's results, group the ops by client and build their commands. */
static void run_prepare(dlock__mux *m)
{
	size_t i, at = 0;

	for (i = 0; i < m->n; i++) {
		dlock__mux_op *op = &m->ops[i];

		op->routed_by = NULL; /* callers need not set private fields */
		if (op->skip)
			continue; /* a skipped op may have no client */
		if (dlock__source_of(op->client)->node->cluster != NULL ||
				(op->follows != NULL && op->follows->routed_by != NULL))
			route(op);
	}
	for (i = 0; i < m->n; i++) {
		dlock__mux_op *op = &m->ops[i];

		op->rc = op->skip ? DLOCK_ETIMEDOUT : 0;
		op->reply = NULL;
		op->abandoned = op->undecided = op->pending = op->stale = op->in_due = 0;
		op->errmsg[0] = '\0';
		if (!op->skip)
			group_of(m->groups, &m->ngroups, op->client)->nops++;
	}
	for (i = 0; i < m->ngroups; i++) {
		m->groups[i].fifo = m->fifos + at;
		at += 2 * m->groups[i].nops;
	}
	for (i = 0, at = 0; i < m->n; i++) {
		dlock__mux_op *op = &m->ops[i];
		group *g;

		if (op->skip)
			continue;
		g = group_of(m->groups, &m->ngroups, op->client);
		build(op, m->cmds + at, m->cmd_lens + at, m->nums[i]);
		at += op_slots(op);
		op->pending = 1;
		if (op->ordered && !op->in_due) {
			op->in_due = 1;
			atomic_fetch_add(&dlock__source_of(op->client)->ordered_due, 1);
		}
		m->npending++;
		g->fifo[g->tail++] = i;
	}
}

/*
 * The run is over when nothing is pending, `enough` says stop (asked
 * before every wait, as it may also set the time to be asked again), or
 * nothing is left to poll.
 */
static int run_settle(dlock__mux *m)
{
	size_t i;

	m->wake_at = DLOCK__NEVER;
	if (m->npending == 0 ||
			(m->enough != NULL && m->enough(m->arg, m->ops, m->n, &m->wake_at))) {
		m->over = 1;
		return 1;
	}
	for (i = 0; i < m->ngroups; i++)
		if (dlock__mux_group_active(&m->groups[i]))
			return 0;
	m->over = 1;
	return 1;
}

int dlock__mux_begin(dlock__mux *m, dlock__mux_op *ops, size_t n, dlock__mux_enough enough,
		void *arg)
{
	return dlock__mux_begin_on(m, ops, n, enough, arg, NULL, NULL, 0);
}

int dlock__mux_begin_on(dlock__mux *m, dlock__mux_op *ops, size_t n, dlock__mux_enough enough,
		void *arg, dlock__loop *loop, dlock__task *wake, int share)
{
	size_t i;
	int rc = run_layout(m, ops, n);

	if (rc < 0) {
		m->scratch = NULL; /* nothing to end */
		return rc;
	}
	m->enough = enough;
	m->arg = arg;
	run_prepare(m);
	for (i = 0; i < m->ngroups; i++) {
		m->groups[i].wake_loop = loop;
		m->groups[i].wake = wake;
		m->groups[i].may_share = share && loop != NULL;
	}
	for (i = 0; i < m->ngroups; i++)
		if (m->groups[i].head < m->groups[i].tail)
			dlock__mux_group_start(&m->groups[i], m->ops, &m->npending);
	run_settle(m);
	return 0;
}

size_t dlock__mux_poll_set(dlock__mux *m, struct pollfd *pfd, size_t max, int64_t *wake_at)
{
	size_t i, k = 0;

	if (m->over) {
		*wake_at = 0; /* advance() says so at once */
		return 0;
	}
	if (m->wake_at < *wake_at)
		*wake_at = m->wake_at;
	for (i = 0; i < m->ngroups; i++) {
		const group *g = &m->groups[i];

		if (!dlock__mux_group_active(g))
			continue;
		if (g->share != NULL) { /* its share watches the connection */
			if (g->deadline < *wake_at)
				*wake_at = g->deadline;
			continue;
		}
		if (k < max && !dlock__mux_group_looking_up(g)) {
			pfd[k].fd = g->conn->fd;
			pfd[k].events = dlock__mux_group_events(g);
			pfd[k].revents = 0;
			k++;
		}
		if (g->deadline < *wake_at)
			*wake_at = g->deadline;
		if (dlock__conn_buffered(g->conn))
			*wake_at = 0; /* TLS has bytes the socket no longer shows */
	}
	return k;
}

/* What the caller's poll saw on fd (0: not polled, or nothing). */
static short revents_of(const struct pollfd *pfd, size_t n, int fd)
{
	size_t k;

	for (k = 0; k < n; k++)
		if (pfd[k].fd == fd)
			return pfd[k].revents;
	return 0;
}

int dlock__mux_advance(dlock__mux *m, const struct pollfd *pfd, size_t n)
{
	int64_t now;
	size_t i;

	if (m->over)
		return 1;
	/* A group only touches its own connection: each is served once. */
	for (i = 0; i < m->ngroups; i++) {
		group *g = &m->groups[i];

		if (!dlock__mux_group_active(g) || g->share != NULL)
			continue; /* a shared one's replies come from its share */
		if (dlock__mux_group_looking_up(g) ? dlock__conn_lookup_over(g->conn)
						    : revents_of(pfd, n, g->conn->fd) != 0 ||
								      dlock__conn_buffered(g->conn))
			dlock__mux_group_ready(g, m->ops, &m->npending);
	}
	now = dlock__now_ms();
	for (i = 0; i < m->ngroups; i++) {
		group *g = &m->groups[i];

		if (dlock__mux_group_active(g) && now >= g->deadline)
			dlock__mux_group_expire(g, m->ops, now, &m->npending);
	}
	return run_settle(m);
}

void dlock__mux_end(dlock__mux *m)
{
	size_t i;

	if (m->scratch == NULL)
		return;
	for (i = 0; i < m->ngroups; i++)
		dlock__mux_group_abandon(&m->groups[i], m->ops, &m->npending);
	/* The commands lived in the scratch block. */
	for (i = 0; i < m->n; i++) {
		m->ops[i].cmd = NULL;
		m->ops[i].cmd_lens = NULL;
	}
	if (m->on_heap)
		dlock__free(m->scratch);
	m->scratch = NULL;
	m->over = 1;
}

void dlock__mux_clear(dlock__mux_op *ops, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		freeReplyObject(ops[i].reply);
		ops[i].reply = NULL;
	}
}
