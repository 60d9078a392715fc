/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Opening one connection for a blocking caller: the connect steps
 * (core/net/connect.c) driven as an exchange (core/net/exchange.h) on a
 * loop this call borrows. Above both, so the connect knows no exchange.
 */
#include <stddef.h>
#include <hiredis/hiredis.h>

#include "core/base/time.h"
#include "core/loop/loop.h"
#include "core/net/conn.h"
#include "core/net/exchange.h"

/* A handshake command that can refuse the connection: its reply is awaited
 * (behind a PING) before the connection is handed out. */
static int must_confirm(const dlock__node *node)
{
	return node->password != NULL || node->db != 0 || node->finder.find != NULL;
}

typedef struct opening {
	dlock__exchange x; /* first */
	int over, rc;
	redisReply *reply;
} opening;

static void opened(dlock__exchange *x, int rc, redisReply *reply)
{
	opening *o = (opening *)x;

	o->over = 1;
	o->rc = rc;
	o->reply = reply;
}

/* The connect, the handshake and (when it can refuse) a PING pipelined
 * behind it: an exchange (core/net/exchange.h) driven on the loop this
 * call borrows. */
int dlock__conn_open(dlock__conn **out, const dlock__node *node, int64_t deadline)
{
	const char *ping = "PING";
	size_t len = 4;
	dlock__loop spare, *l = dlock__loop_borrow(&spare);
	opening o = { .over = 0 };
	int rc = dlock__exchange_start(&o.x, l, node, deadline, must_confirm(node) ? 1 : 0, &ping,
			&len, "PING", opened);

	*out = NULL;
	while (rc == 0 && !o.over)
		rc = dlock__loop_run_once(l, DLOCK__NEVER);
	if (rc == 0)
		rc = o.rc;
	if (rc == 0)
		*out = dlock__exchange_keep(&o.x);
	else
		dlock__exchange_stop(&o.x);
	freeReplyObject(o.reply);
	dlock__loop_give_back(l, &spare);
	return rc;
}
