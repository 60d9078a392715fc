/* SPDX-License-Identifier: BSD-3-Clause */
/* Kept commands sent again: see resend.h, and owed.h for the protocol. */
#include "core/base/alloc.h"
#include "core/base/time.h"
#include "core/drive/client_state.h"
#include "core/net/owed.h"
#include "core/drive/resend.h"

void dlock__resend_drop(dlock_client *c)
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

void dlock__resend_free(dlock_client *c)
{
	dlock__conn_close(c->resend_conn);
	c->resend_conn = NULL;
	dlock__free(c->resend);
	c->resend = NULL;
	c->resend_len = c->resend_cap = 0;
	c->resend_n = 0;
}
