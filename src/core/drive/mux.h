/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: one script on many servers at once.
 *
 * Every operation is sent before any reply is read (operations on the same
 * client share one pipelined connection), then one poll waits on all of
 * them, so n servers cost about one round trip, and a dead or hung one costs
 * at most its connect or command timeout without delaying the others. The
 * caller may stop waiting early (a quorum is decided); operations still in
 * flight are then abandoned (`undecided`): the command may or may not have
 * run, and its connection goes back to the pool owing the reply, which is
 * skipped when it comes (core/net/owed.h). A connection that failed is closed.
 */
#ifndef DLOCK_CORE_MUX_H
#define DLOCK_CORE_MUX_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/client.h"
#include "core/net/conn.h"
#include "core/net/script.h"

typedef struct dlock__mux_op {
	/* in */
	dlock_client *client;
	const dlock__call *call; /* kept alive by the caller until the run ends */
	int no_retry;            /* never resend (repeating it could count twice) */
	int no_wait;             /* send, but do not wait for the answer (a server that just
	                        timed out: best effort); rc 0, reply NULL */
	int skip;                /* do not send at all (the caller decided); rc DLOCK_ETIMEDOUT */
	/* A plain command instead of a script (call NULL): only one that changes
	 * nothing (WAIT). Given up at its deadline, its connection is closed,
	 * not pooled owing it: a server answering late is not hung, and a
	 * blocking command would stall the connection's next user. */
	const char *const *argv;
	const size_t *lens;
	int argc;
	int64_t slack_ms; /* the reply may take this long beyond the command timeout */
	const struct dlock__mux_op *follows; /* runs right behind this op on the same
	                        connection: resent only together with it */
	/* out */
	int rc;            /* 0 with reply set, or DLOCK_E* (reply NULL) */
	redisReply *reply; /* owned by the op until dlock__mux_clear() */
	int abandoned;     /* sent without a definite answer: it may have run */
	int undecided;     /* not waited for: the caller had decided without it
	                        (rc DLOCK_ETIMEDOUT, abandoned) */
	int64_t sent_at;
	char errmsg[256]; /* the one-line message when rc < 0 */
	/* private */
	const char **cmd;
	size_t *cmd_lens;
	int cmd_argc;
	int pending;
	int stale; /* sent before `follows` was resent (NOSCRIPT): its reply is skipped */
	struct dlock__cluster *routed_by; /* client was a cluster's: its member was chosen */
} dlock__mux_op;

/*
 * Called after every reply; return 1 to stop waiting for the rest. It may
 * set *wake_at (monotonic ms) to be asked again by then even if no reply
 * comes. NULL: wait for all (or their deadlines).
 */
typedef int (*dlock__mux_enough)(void *arg, const dlock__mux_op *ops, size_t n, int64_t *wake_at);

/* Run every op; returns 0 (each op has its own rc), or DLOCK_ENOMEM. An
 * op whose client is a cluster's goes to the member serving its first key
 * (op->client becomes that member; a follower goes with its op); a MOVED
 * reply is the op's error reply and updates the cluster's map. */
int dlock__mux_run(dlock__mux_op *ops, size_t n, dlock__mux_enough enough, void *arg);

/* Free the replies and private buffers of the ops (not the ops). */
void dlock__mux_clear(dlock__mux_op *ops, size_t n);

#endif
