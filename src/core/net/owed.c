/* SPDX-License-Identifier: BSD-3-Clause */
/* Owed replies, a connection's half: see owed.h for the whole protocol. */
#include <string.h>
#include <sys/socket.h>

#include "dlock/errors.h"
#include "core/base/error.h"
#include "core/base/sys.h"
#include "core/net/owed.h"
#include "core/base/time.h"

int dlock__conn_send_owed(dlock__conn *c, int argc, const char **argv, const size_t *lens)
{
	int rc = dlock__conn_queue(c, argc, argv, lens);

	if (rc < 0)
		return rc;
	dlock__conn_flush(c); /* what does not fit now goes with the next flush */
	dlock__conn_give_up(c, 1);
	return 0;
}

int dlock__conn_keep(dlock__conn *c, int argc, const char **argv, const size_t *lens)
{
	if (dlock__resp_append(&c->kept, &c->kept_len, &c->kept_cap, argc, argv, lens) < 0)
		return DLOCK_ENOMEM;
	if (c->kept_n++ == 0)
		c->kept_since = dlock__now_ms();
	return 0;
}

int dlock__conn_send_kept(dlock__conn *c, const char *resp, size_t len, int n, int64_t since)
{
	size_t out_len = c->out_len;

	if (c->broken)
		return DLOCK_ECONN;
	if (dlock__bytes_append(&c->out, &c->out_len, &c->out_cap, resp, len) < 0)
		return DLOCK_ENOMEM;
	if (dlock__bytes_append(&c->kept, &c->kept_len, &c->kept_cap, resp, len) < 0) {
		c->out_len = out_len;
		return DLOCK_ENOMEM;
	}
	if (c->kept_n == 0 || since < c->kept_since)
		c->kept_since = since;
	c->kept_n += n;
	dlock__conn_flush(c);
	dlock__conn_give_up(c, n);
	return 0;
}

void dlock__conn_reset(dlock__conn *c)
{
	struct linger off = { 1, 0 };

	if (c != NULL && c->fd >= 0)
		dlock__sys_get()->sockopt(c->fd, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
	dlock__conn_close(c);
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
