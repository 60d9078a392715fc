/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: commands to one node as an operation on a loop. The connect
 * (its name looked up, TLS, AUTH/SELECT pipelined with the first command),
 * the sends and the replies are steps the loop calls back: nothing waits,
 * so the loop's other work goes on meanwhile. A deadline bounds it all.
 * Topology asks sentinels (and cluster nodes) with it; a blocking caller
 * drives it on the loop it borrows.
 */
#ifndef DLOCK_CORE_EXCHANGE_H
#define DLOCK_CORE_EXCHANGE_H

#include <stdint.h>
#include <hiredis/hiredis.h>

#include "core/loop/loop.h"
#include "core/net/conn.h"

typedef struct dlock__exchange dlock__exchange;

/* A reply came (rc 0, *reply the callee's; it may be an error reply), or
 * the exchange failed (rc < 0, message set, connection closed). Called on
 * the loop's thread; may send again or stop. */
typedef void (*dlock__exchange_done)(dlock__exchange *x, int rc, redisReply *reply);

struct dlock__exchange {
	dlock__exchange_done done;
	dlock__loop *loop;
	dlock__conn *c;
	dlock__io io;
	dlock__timer timer;
	dlock__task lookup_task;
	int argc; /* the command to send once connected (argv, lens: the caller's) */
	const char **argv;
	const size_t *lens;
	const char *what;
	int waiting; /* a reply is awaited (2: the connect's end) */
};

/* Connect to node on loop and send argv (kept by the caller until its reply
 * comes), all before deadline: `done` tells. argc 0: only connect (and
 * send the handshake); `done` tells with no reply. 0 started, or the
 * failure now (done is not called). node outlives the exchange. */
int dlock__exchange_start(dlock__exchange *x, dlock__loop *loop, const dlock__node *node,
		int64_t deadline, int argc, const char **argv, const size_t *lens,
		const char *what, dlock__exchange_done done);

/* From `done`: one more command on the same connection. */
void dlock__exchange_send(dlock__exchange *x, int argc, const char **argv, const size_t *lens,
		const char *what);

/* Take its connection (the caller's from now on; NULL after a failure):
 * nothing is called back after this. */
dlock__conn *dlock__exchange_keep(dlock__exchange *x);

/* Close it: nothing is called back after this. Idempotent. */
void dlock__exchange_stop(dlock__exchange *x);

#endif
