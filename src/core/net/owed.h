/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: owed replies - what dlock does with a command whose answer it
 * stopped waiting for.
 *
 * The problem. A command that times out may still run: the server was
 * paused, busy or partitioned, and executes it when it wakes up. Closing
 * the connection does not stop that (the command may already be in the
 * server's buffer), and a new connection per timeout fills a hung server's
 * listen backlog. Worse, a late command can undo a newer one: a release of
 * owner X that runs after X's next acquire (sent over another connection)
 * takes away the new hold.
 *
 * The protocol.
 * 1. Give up, keep the connection (dlock__conn_give_up): the connection
 *    goes back to the pool owing the reply; its next reader skips owed
 *    replies before its own (replies come in order). The node counts what
 *    all its connections owe (node->owed).
 * 2. Queue the undo right behind (dlock__conn_send_owed): an acquire that
 *    timed out is followed on the same connection by a script that takes
 *    back exactly the hold it would have made, so the server runs both or
 *    neither (a mux op's `undo`; single/calls.c builds them).
 *    Commands nobody waits for go as EVAL, never EVALSHA: a NOSCRIPT
 *    answer would go unread and the command silently never run.
 * The connection's half is here; the client's (steps 3 to 5: waiting,
 * collecting, the bound) is core/drive/debts.h.
 *
 * 3. No acquire while a node owes (dlock__client_owes): a late release
 *    still queued there could undo it. A single lock waits a moment for the
 *    debts (a server waking up answers at once); the quorum engine does not
 *    wait: that member is not asked this round.
 * 4. Collect (dlock__client_drain): the client's background thread reads
 *    owed replies from idle connections every DLOCK__OWED_POLL_MS while any are
 *    owed; a connection that dies takes its debts with it (the server
 *    dropped what it had not run).
 * 5. Bound (DLOCK__OWED_MAX_MIN_MS): across a partition late replies wait
 *    on TCP's retransmission backoff and the node would stay refused long
 *    after it healed. A connection owing for longer than max(2 x command
 *    timeout, this) is reset (RST, dlock__conn_reset): a server that had
 *    not read the queued commands discards them, and the debts go with it.
 *
 * 6. Kept (dlock__conn_keep): some commands given up must run all the
 *    same - a fair waiter's leave is the only thing that takes its place
 *    out of the queue, and nothing pairs with it that a reset could discard
 *    as well. The connection keeps a copy while it owes; once it owes
 *    nothing they have run. Closed or reset owing (rule 5, a broken
 *    connection), it hands them to its client, which sends them again
 *    (core/drive/resend.h).
 *
 * Multiplexed runs (core/mux/mux.c) follow the same rules: groups given up at
 * their deadline or abandoned once the outcome was decided go back owing.
 * On a connection runs share (core/mux/mux_share.h) the owed replies of a
 * group given up stand in the middle of the others: they are counted owed
 * at once, and skipped (c->discard) when they reach the head of its FIFO.
 */
#ifndef DLOCK_CORE_OWED_H
#define DLOCK_CORE_OWED_H

#include "core/net/conn.h"

/* dlock__conn_give_up (rule 1) is the transport's own (conn.h). */

/*
 * Queue a command behind the ones given up on c and count its reply as owed
 * too: it runs on the server right after them, or not at all. Sent without
 * blocking; what does not fit goes with the next flush. 0, or DLOCK_ENOMEM
 * (also for a broken connection).
 */
int dlock__conn_send_owed(dlock__conn *c, int argc, const char **argv, const size_t *lens);

/*
 * Rule 6: keep a copy of a command given up on c that must run: sent again
 * if c is closed or reset before it owes nothing. 0, or DLOCK_ENOMEM (not
 * kept: then it runs only if c delivers it).
 */
int dlock__conn_keep(dlock__conn *c, int argc, const char **argv, const size_t *lens);

/*
 * Send kept commands again on c (n of them, in RESP, kept since `since`):
 * owed and kept on c as they were on the connection that lost them. 0, or
 * DLOCK_ENOMEM / DLOCK_ECONN (c unchanged but for its output buffer).
 */
int dlock__conn_send_kept(dlock__conn *c, const char *resp, size_t len, int n, int64_t since);

/* Read and skip whatever owed replies have arrived, without waiting. */
void dlock__conn_drain(dlock__conn *c);

/* The connection has owed replies since before `cutoff` (monotonic ms), or is broken. */
int dlock__conn_owes_since_before(const dlock__conn *c, int64_t cutoff);

/* Close with a reset (RST, not FIN): the server discards what it had not read. */
void dlock__conn_reset(dlock__conn *c);

#endif
