/* SPDX-License-Identifier: BSD-3-Clause */
/* Owed replies: see owed.h for the whole protocol. */
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "dlock/errors.h"
#include "core/drive/client.h"
#include "core/base/error.h"
#include "core/net/owed.h"
#include "core/topology/sentinel.h"
#include "core/base/time.h"

int dlock__conn_send_owed(dlock__conn *c, int argc, const char **argv, const size_t *lens)
{
	if (dlock__conn_queue(c, argc, argv, lens) < 0)
		return DLOCK_ENOMEM;
	dlock__conn_flush(c); /* what does not fit now goes with the next flush */
	dlock__conn_give_up(c, 1);
	return 0;
}

void dlock__conn_reset(dlock__conn *c)
{
	struct linger off = { 1, 0 };

	if (c != NULL && c->fd >= 0)
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
	dlock__conn_close(c);
}

void dlock__conn_give_up(dlock__conn *c, int replies)
{
	if (c->node->sentinel != NULL)
		dlock__sentinel_suspect(c->node->sentinel); /* a paused primary may be replaced */
	if (c->owed == 0)
		c->owed_since = dlock__now_ms();
	c->discard += replies;
	c->owed += replies;
	atomic_fetch_add((_Atomic int *)&c->node->owed, replies);
}

void dlock__conn_drain(dlock__conn *c)
{
	while (c->owed > 0 && !c->broken) {
		redisReply *r = NULL;
		/* Every reply still due is a skipped one: read until none is complete. */
		int rc = dlock__conn_read(c, &r, "drain", 0);

		freeReplyObject(r);
		if (rc != 0)
			break;
	}
}

int dlock__conn_owes_since_before(const dlock__conn *c, int64_t cutoff)
{
	return c->broken || (c->owed > 0 && c->owed_since < cutoff);
}

/*
 * A connection may owe replies for this long: a hung server's late replies
 * come within moments of its waking up, but across a network partition
 * they wait on TCP's retransmission backoff (seconds, growing), and the
 * node would stay refused long after the partition healed. Past the bound
 * the connection is reset and the node is asked again on a fresh one.
 */
int64_t dlock__owed_bound_ms(const dlock_client *c)
{
	int64_t b = 2 * (int64_t)c->opts.command_timeout_ms;

	return b > DLOCK__OWED_MAX_MIN_MS ? b : DLOCK__OWED_MAX_MIN_MS;
}

int dlock__client_owes(dlock_client *c, const char *key, size_t len, int64_t deadline)
{
	if (c->node.cluster != NULL && (c = dlock__client_for_key(c, key, len)) == NULL)
		return 0; /* no member now: the acquire finds out why */
	if (atomic_load(&c->node.owed) == 0)
		return 0;
	dlock__client_drain(c);
	/* A server that just woke up answers within moments: look again
	 * until the deadline (a short nap each time, the replies may be on
	 * connections other threads hold). */
	while (atomic_load(&c->node.owed) > 0 && dlock__now_ms() < deadline) {
		poll(NULL, 0, 1);
		dlock__client_drain(c);
	}
	if (atomic_load(&c->node.owed) == 0)
		return 0;
	dlock__reactor_flush_at(c->reactor, dlock__now_ms() + DLOCK__OWED_POLL_MS);
	return dlock__seterr_node(DLOCK_ETIMEDOUT, c->node.label,
			"still owes %d replies to commands that timed out: not asked again until "
			"they come (a late release could undo a new hold)",
			atomic_load(&c->node.owed));
}
