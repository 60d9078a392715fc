/* SPDX-License-Identifier: BSD-3-Clause */
/* Kept commands sent again: see resend.h, and owed.h for the protocol. */
#include <poll.h>

#include "core/base/alloc.h"
#include "core/base/time.h"
#include "core/drive/pool.h"
#include "core/net/owed.h"
#include "core/drive/resend.h"

/* Under pool_mu: forget what waits (sent no more). */
static void drop(dlock_client *c)
{
	atomic_fetch_sub(&c->node.owed, c->resend_n);
	c->resend_len = 0;
	c->resend_n = 0;
}

void dlock__resend_take(dlock_client *c, dlock__conn *conn)
{
	if (conn->kept_n == 0)
		return;
	if (dlock__now_ms() - conn->kept_since < DLOCK__RESEND_MAX_MS &&
			dlock__bytes_append(&c->resend, &c->resend_len, &c->resend_cap, conn->kept,
					conn->kept_len) == 0) {
		if (c->resend_n == 0 || conn->kept_since < c->resend_since)
			c->resend_since = conn->kept_since;
		c->resend_n += conn->kept_n;
		/* Counted before conn's own debts go with it: no acquisition
		 * slips in between. */
		atomic_fetch_add(&c->node.owed, conn->kept_n);
	}
	conn->kept_len = 0;
	conn->kept_n = 0;
}

int dlock__resend_hand_over(dlock_client *c, dlock__conn *conn)
{
	int n = c->resend_n;

	if (n == 0 || conn->connecting || conn->broken)
		return 0;
	if (dlock__conn_send_kept(conn, c->resend, c->resend_len, n, c->resend_since) < 0)
		return 0;
	atomic_fetch_sub(&c->node.owed, n); /* now owed on conn */
	c->resend_len = 0;
	c->resend_n = 0;
	return 1;
}

/* Advance a connection being opened, without waiting. 0, or DLOCK_E*. */
static int advance(dlock__conn *conn)
{
	struct pollfd p = { conn->fd, dlock__conn_events(conn), 0 };

	if (conn->fd >= 0 && poll(&p, 1, 0) == 0)
		return 0; /* not yet */
	return dlock__conn_connected(conn);
}

/* Under pool_mu: the connection to work on now (taken out of the client:
 * another drain does not touch it meanwhile), or NULL. */
static dlock__conn *to_drive(dlock_client *c, int64_t now, int *open, int64_t *started)
{
	dlock__conn *conn = c->resend_conn;

	*open = 0;
	*started = c->resend_conn_at;
	if (c->resend_n > 0 && now - c->resend_since >= DLOCK__RESEND_MAX_MS)
		drop(c);
	if (c->resend_n > 0 && c->n_idle > 0)
		dlock__resend_hand_over(c, c->idle[c->n_idle - 1]);
	if (conn != NULL) {
		c->resend_conn = NULL;
		return conn;
	}
	/* One connection at a time, one attempt per connect timeout. */
	if (c->resend_n > 0 && now - c->resend_conn_at >= c->opts.connect_timeout_ms) {
		c->resend_conn_at = *started = now;
		*open = 1;
	}
	return NULL;
}

void dlock__resend_drive(dlock_client *c)
{
	int64_t now = dlock__now_ms(), started;
	dlock__conn *conn;
	int open, rc = 0;

	dlock__mutex_lock(&c->pool_mu);
	conn = to_drive(c, now, &open, &started);
	dlock__mutex_unlock(&c->pool_mu);
	if (conn == NULL && (!open || dlock__client_conn_take(c, &conn, NULL, NULL) < 0))
		return;
	if (conn->connecting)
		rc = advance(conn);
	if (rc == 0 && conn->connecting) {
		if (now - started < c->opts.connect_timeout_ms) {
			dlock__mutex_lock(&c->pool_mu);
			c->resend_conn = conn; /* looked at again by the next drain */
			dlock__mutex_unlock(&c->pool_mu);
			return;
		}
		conn->broken = 1; /* no connection within the timeout: the next try opens another */
	}
	if (rc == 0 && !conn->broken && !conn->greeted)
		rc = dlock__conn_send_handshake(conn, DLOCK__NO_WAIT);
	if (rc < 0)
		conn->broken = 1;
	dlock__client_conn_put(c, conn); /* pooled, it takes what waits */
}

void dlock__resend_free(dlock_client *c)
{
	dlock__conn_close(c->resend_conn);
	c->resend_conn = NULL;
	dlock__free(c->resend);
	c->resend = NULL;
	c->resend_len = c->resend_cap = 0;
	c->resend_n = 0;
}
