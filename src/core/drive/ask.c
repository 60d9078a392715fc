/* SPDX-License-Identifier: BSD-3-Clause */
/* One command on a client as a multiplexed run driven to its end (see client.h). */
#include <string.h>

#include "core/base/error.h"
#include "core/drive/ask.h"
#include "core/mux/mux.h"
#include "core/mux/mux_loop.h"

int dlock__client_ask(dlock_client *c, int argc, const char **argv, const size_t *lens,
		redisReply **out)
{
	dlock__mux_op op;
	int rc;

	*out = NULL;
	memset(&op, 0, sizeof(op));
	op.client = c;
	op.argv = argv;
	op.lens = lens;
	op.argc = argc;
	rc = dlock__mux_run(&op, 1, NULL, NULL);
	if (rc == 0 && op.rc < 0)
		rc = dlock__seterr(op.rc, "%s", op.errmsg);
	if (rc == 0) {
		*out = op.reply;
		op.reply = NULL;
	}
	dlock__mux_clear(&op, 1);
	return rc;
}
