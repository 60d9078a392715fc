#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/alloc.h"
#include "core/client.h"
#include "core/error.h"
#include "core/mux.h"
#include "core/time.h"

static int build(dlock__mux_op *op, char numbuf[16])
{
	op->cmd = dlock__malloc(sizeof(*op->cmd) * (size_t)(op->argc + 3));
	op->cmd_lens = dlock__malloc(sizeof(*op->cmd_lens) * (size_t)(op->argc + 3));
	if (op->cmd == NULL || op->cmd_lens == NULL)
		return DLOCK_ENOMEM;
	op->cmd_argc = dlock__script_argv(op->script, op->nkeys, op->argv, op->lens,
			op->argc - op->nkeys, op->argv + op->nkeys, op->lens + op->nkeys,
			op->cmd, op->cmd_lens, numbuf);
	return 0;
}

static void finish(dlock__mux_op *op, int rc, redisReply *reply)
{
	op->rc = rc;
	op->reply = reply;
	op->pending = 0;
	if (rc < 0)
		snprintf(op->errmsg, sizeof(op->errmsg), "%s", dlock__errmsg_thread());
	if (op->conn != NULL) {
		dlock__client_conn_put(op->client, op->conn);
		op->conn = NULL;
	}
}

/*
 * A pooled connection the server closed while idle (restart, CLIENT KILL)
 * fails at once: send the op again, once, on a fresh one. Callers only
 * multiplex scripts that are safe to repeat (see single/scripts.c).
 */
static int resend_fresh(dlock__mux_op *op)
{
	dlock_client *c = op->client;
	char what[64];
	int rc;

	op->retried = 1;
	dlock__client_conn_put(c, op->conn); /* broken: closed, not pooled */
	op->conn = NULL;
	rc = dlock__client_conn_get(c, &op->conn, dlock__deadline_in(c->opts.connect_timeout_ms));
	if (rc < 0)
		return rc;
	snprintf(what, sizeof(what), "EVALSHA %s", op->script->name);
	return dlock__conn_send(op->conn, op->cmd_argc, op->cmd, op->cmd_lens, what, op->deadline);
}

int dlock__mux_run(dlock__mux_op *ops, size_t n, dlock__mux_enough enough, void *arg)
{
	struct pollfd small[16], *pfd = small;
	size_t i, npending = 0;
	size_t small_idx[16], *idx = small_idx;
	char (*nums)[16] = NULL;
	int rc = 0;

	nums = dlock__calloc(n ? n : 1, sizeof(*nums));
	if (n > 16) {
		pfd = dlock__malloc(sizeof(*pfd) * n);
		idx = dlock__malloc(sizeof(*idx) * n);
	}
	if (nums == NULL || pfd == NULL || idx == NULL) {
		rc = DLOCK_ENOMEM;
		goto out;
	}

	/* Send everything first. */
	for (i = 0; i < n; i++) {
		dlock__mux_op *op = &ops[i];
		dlock_client *c = op->client;
		char what[64];

		op->rc = 0;
		op->reply = NULL;
		op->abandoned = 0;
		op->conn = NULL;
		op->pending = 0;
		op->errmsg[0] = '\0';
		if (build(op, nums[i]) < 0) {
			finish(op, dlock__seterr_node(DLOCK_ENOMEM, c->node.label, "out of memory"), NULL);
			continue;
		}
		op->rc = dlock__client_conn_get(c, &op->conn,
				dlock__deadline_in(c->opts.connect_timeout_ms));
		if (op->rc < 0) {
			finish(op, op->rc, NULL);
			continue;
		}
		op->sent_at = dlock__now_ms();
		op->deadline = op->sent_at + c->opts.command_timeout_ms;
		snprintf(what, sizeof(what), "EVALSHA %s", op->script->name);
		op->retried = 0;
		op->rc = dlock__conn_send(op->conn, op->cmd_argc, op->cmd, op->cmd_lens, what,
				op->deadline);
		if (op->rc == DLOCK_ECONN && !op->no_retry)
			op->rc = resend_fresh(op);
		if (op->rc < 0) {
			finish(op, op->rc, NULL);
			op->abandoned = 1; /* part of it may have reached the server */
			continue;
		}
		op->pending = 1;
		npending++;
	}

	/* Then one poll over every socket still owing a reply. */
	while (npending > 0) {
		int64_t first = DLOCK__NEVER, now;
		nfds_t nfds = 0;
		int prc;

		if (enough != NULL && enough(arg, ops, n, &first))
			break;
		for (i = 0; i < n; i++) {
			if (!ops[i].pending)
				continue;
			pfd[nfds].fd = ops[i].conn->fd;
			pfd[nfds].events = POLLIN;
			pfd[nfds].revents = 0;
			idx[nfds++] = i;
			if (ops[i].deadline < first)
				first = ops[i].deadline;
		}
		prc = poll(pfd, nfds, dlock__ms_until(first));
		if (prc < 0 && errno != EINTR) {
			rc = dlock__seterr(DLOCK_ESYS, "poll: %s", strerror(errno));
			break;
		}
		now = dlock__now_ms();
		for (i = 0; i < nfds; i++) {
			dlock__mux_op *op = &ops[idx[i]];
			redisReply *reply = NULL;
			char what[64];
			int r;

			if (prc > 0 && pfd[i].revents != 0) {
				snprintf(what, sizeof(what), "EVALSHA %s", op->script->name);
				r = dlock__conn_read(op->conn, &reply, what, 0);
				if (r == DLOCK__AGAIN)
					goto check_deadline;
				if (r == DLOCK_ECONN && !op->retried && !op->no_retry &&
				    (r = resend_fresh(op)) == 0)
					continue;
				if (r == 0 && dlock__reply_is_error(reply, "NOSCRIPT")) {
					/* The server lost its script cache: the same op as EVAL. */
					freeReplyObject(reply);
					dlock__script_argv_to_eval(op->script, op->cmd, op->cmd_lens);
					snprintf(what, sizeof(what), "EVAL %s", op->script->name);
					r = dlock__conn_send(op->conn, op->cmd_argc, op->cmd,
							op->cmd_lens, what, op->deadline);
					if (r == 0)
						continue;
					reply = NULL;
				}
				finish(op, r, reply);
				op->abandoned = r < 0;
				npending--;
				continue;
			}
check_deadline:
			if (now >= op->deadline) {
				op->conn->broken = 1; /* a late reply would desynchronise it */
				finish(op, dlock__seterr_node(DLOCK_ETIMEDOUT, op->client->node.label,
						"EVALSHA %s: no answer within %d ms", op->script->name,
						op->client->opts.command_timeout_ms), NULL);
				op->abandoned = 1;
				npending--;
			}
		}
	}
	/* Stopped early: whatever is still in flight is abandoned. */
	for (i = 0; i < n; i++) {
		if (!ops[i].pending)
			continue;
		ops[i].conn->broken = 1;
		finish(&ops[i], dlock__seterr_node(DLOCK_ETIMEDOUT, ops[i].client->node.label,
				"EVALSHA %s: abandoned once the outcome was decided",
				ops[i].script->name), NULL);
		ops[i].abandoned = 1;
	}
out:
	if (pfd != small)
		dlock__free(pfd);
	if (idx != small_idx)
		dlock__free(idx);
	dlock__free(nums);
	return rc;
}

void dlock__mux_clear(dlock__mux_op *ops, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		freeReplyObject(ops[i].reply);
		ops[i].reply = NULL;
		dlock__free((void *)ops[i].cmd);
		dlock__free(ops[i].cmd_lens);
		ops[i].cmd = NULL;
		ops[i].cmd_lens = NULL;
	}
}
