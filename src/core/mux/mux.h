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
 * On a loop, the runs of one client also share connections with each
 * other while replies are due (pipelining: core/mux/mux_share.h).
 *
 * A run is an object (dlock__mux) advanced by "socket ready" and "deadline
 * passed": begin, then poll_set / wait / advance until over, then end.
 * Nothing in it waits on a socket or polls by itself (a command the socket
 * cannot take at once goes out on POLLOUT), so an event loop can drive it;
 * dlock__mux_run() drives it on the loop a blocking call borrows
 * (core/mux/mux_loop.c): there is no other way of waiting. A host
 * name is looked up without waiting on a run begun on a loop (its group
 * has no socket until the lookup's end advances the run), and so are a
 * Sentinel-managed node's sentinels asked (core/topology/sentinel_ask.c).
 * A cluster's suspect slot map is read again on the root's loop while
 * routing goes by the one known. Not yet a step of its own, and so still
 * able to block in begin: a cluster client with no map at all (a lazy
 * one's first command drives the reading, core/topology/cluster_refresh.c,
 * to its end).
 */
#ifndef DLOCK_CORE_MUX_H
#define DLOCK_CORE_MUX_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/client.h"
#include "core/net/conn.h"
#include "core/net/script.h"

enum { DLOCK__BEHIND_OR_ANY = 1, DLOCK__BEHIND_ONLY = 2 };
enum { DLOCK__ORDERED = 1, DLOCK__ORDERED_OPEN = 2 };

typedef struct dlock__mux_op {
	/* in */
	dlock_client *client;
	const dlock__call *call; /* kept alive by the caller until the run ends */
	int no_retry;            /* never resend (repeating it could count twice) */
	char *repeat;            /* NULL, or a "0" the call sends that a resend turns
	                        into "1" (the script tells a repeat: single/scripts.h) */
	int no_wait;             /* send, but do not wait for the answer (a server that just
	                        timed out: best effort); rc 0, reply NULL */
	int skip;                /* do not send at all (the caller decided); rc DLOCK_ETIMEDOUT */
	int eval;                /* send the script's body (EVAL), never EVALSHA: an op that
	                        must run even when given up (a NOSCRIPT that comes after
	                        it would go unread, the script never run) */
	int keep;                /* it must run even when given up (a fair waiter's leave):
	                        a connection that loses it hands it back to be sent
	                        again (core/net/owed.h, rule 6) */
	/* A plain command instead of a script (call NULL): only one that changes
	 * nothing (WAIT). Given up at its deadline, its connection is closed,
	 * not pooled owing it: a server answering late is not hung, and a
	 * blocking command would stall the connection's next user. */
	const char *const *argv;
	const size_t *lens;
	int argc;
	int64_t slack_ms; /* the reply may take this long beyond the command timeout */
	/* Taken back when the op is given up with its connection kept owing
	 * (a deadline, an end mid-run): queued right behind it on the same
	 * connection, so the server runs both or neither (core/net/owed.h). */
	const dlock__call *undo;
	int asking; /* a cluster's ASK redirect: `client` is the member named,
	               and ASKING goes right before the op */
	const struct dlock__mux_op *follows; /* runs right behind this op on the same
	                        connection: resent only together with it */
	/* Ordering across runs on a loop (core/mux/mux_share.h). `ordered`: a
	 * later op of its client on its first key may go right behind it while
	 * it is due; DLOCK__ORDERED_OPEN: its answer may bring more commands on
	 * the key (a late grant given back), so only a DLOCK__BEHIND_OR_ANY op
	 * goes behind it. `behind`: this op goes on the connection where the
	 * client's ordered ops on its first key are due on this loop (none due:
	 * on any); where it cannot (they are on several, or its group may not
	 * share), DLOCK__BEHIND_OR_ANY goes as any op, DLOCK__BEHIND_ONLY is
	 * not sent (rc DLOCK_ETIMEDOUT). */
	int ordered;
	int behind;
	/* out */
	int rc;            /* 0 with reply set, or DLOCK_E* (reply NULL) */
	redisReply *reply; /* owned by the op until dlock__mux_clear() */
	int abandoned;     /* sent without a definite answer: it may have run */
	int undecided;     /* not waited for: the caller had decided without it
	                        (rc DLOCK_ETIMEDOUT, abandoned) */
	int64_t sent_at;
	int64_t sent_us; /* the same in us, for the node's round trip (dlock/stats.h) */
	char errmsg[256]; /* the one-line message when rc < 0 */
	/* private */
	const char **cmd;
	size_t *cmd_lens;
	int cmd_argc;
	int pending;
	int stale; /* sent before `follows` was resent (NOSCRIPT): its reply is skipped */
	int in_due; /* ordered and pending: counted in its client's ordered_due */
	struct dlock__cluster *routed_by; /* client was a cluster's: its member was chosen */
} dlock__mux_op;

/*
 * Called after every reply; return 1 to stop waiting for the rest. It may
 * set *wake_at (monotonic ms) to be asked again by then even if no reply
 * comes. NULL: wait for all (or their deadlines).
 */
typedef int (*dlock__mux_enough)(void *arg, const dlock__mux_op *ops, size_t n, int64_t *wake_at);

/*
 * One run of ops, held by its caller (it may be embedded in a heap object
 * and outlive the call that began it, but must not move between begin and
 * end: its scratch may point into inline_buf). The ops, their calls and
 * `arg` stay alive until dlock__mux_end(). Not shared between threads.
 */
typedef struct dlock__mux {
	/* private */
	dlock__mux_op *ops;
	size_t n;
	dlock__mux_enough enough;
	void *arg;
	struct dlock__mux_group *groups;
	size_t ngroups;
	size_t npending;
	size_t *fifos;
	char (*nums)[16];
	const char **cmds;
	size_t *cmd_lens;
	unsigned char *scratch; /* NULL: not begun, or ended */
	int on_heap;
	int over;
	int64_t wake_at; /* asked by `enough` */
	/* Small runs (the usual 3 or 5 servers) lay out here, not on the heap. */
	_Alignas(max_align_t) unsigned char inline_buf[4096];
} dlock__mux;

/*
 * Route, group and build the ops, take connections (pooled ones send at
 * once, new ones start a non-blocking connect), then ask `enough` once
 * (it may be asked from every step). Returns 0, or DLOCK_ENOMEM (nothing started: no end needed,
 * though calling it is harmless). The run may already be over (every op
 * skipped or failed at once): dlock__mux_advance() then returns 1.
 */
int dlock__mux_begin(dlock__mux *m, dlock__mux_op *ops, size_t n, dlock__mux_enough enough,
		void *arg);

/* The same, for a run on a loop: a new connection's host name is looked up
 * without waiting (its group has no socket meanwhile), and the lookup's
 * end posts `wake` to `loop`, whose task advances the run. `share`: its
 * connections may carry the client's other runs on that loop at the same
 * time (core/mux/mux_share.h); their replies are handed over and `wake`
 * posted, the run's groups on them have no descriptor of their own to poll. */
int dlock__mux_begin_on(dlock__mux *m, dlock__mux_op *ops, size_t n, dlock__mux_enough enough,
		void *arg, dlock__loop *loop, dlock__task *wake, int share);

/*
 * The descriptors to poll now and for what (fd, events; revents cleared),
 * at most `max` (n is always enough), and *wake_at lowered to the time by
 * which dlock__mux_advance() must be called even if none is ready (a
 * deadline, the `enough` callback's wake_at; 0 when TLS has buffered bytes
 * or the run is over). Returns how many.
 */
size_t dlock__mux_poll_set(dlock__mux *m, struct pollfd *pfd, size_t max, int64_t *wake_at);

/*
 * Handle what is ready (pfd as filled by poll_set, revents set by the
 * caller's poll or event loop; a descriptor not in pfd, or pfd NULL with
 * n 0, means "only check deadlines"), fail the groups whose deadline passed,
 * and ask `enough`. Returns 1 once the run is over (every op answered or
 * failed, or enough said stop), else 0. Never blocks.
 */
int dlock__mux_advance(dlock__mux *m, const struct pollfd *pfd, size_t n);

/*
 * End the run: ops still in flight are abandoned (undecided, rc
 * DLOCK_ETIMEDOUT; their connections go back owing the replies), the other
 * connections go back, the scratch is freed. Callable at any time after
 * begin (a cancel mid-run); a second call does nothing.
 */
void dlock__mux_end(dlock__mux *m);

/* Run every op to its end on the loop this blocking call borrows
 * (core/loop/loop.h: the thread's, or one of its own under an outer call;
 * defined in mux_loop.c). Returns 0 (each op has its own rc), DLOCK_ENOMEM,
 * or DLOCK_ESYS (the loop's wait failed). An op whose client is a cluster's goes to the member
 * serving its first key (op->client becomes that member; a follower goes
 * with its op); a MOVED reply is the op's error reply and updates the
 * cluster's map. */
int dlock__mux_run(dlock__mux_op *ops, size_t n, dlock__mux_enough enough, void *arg);

/* 1 when an op of client c on `key` marked `behind` (above) would run
 * after every ordered op of c on that key still due, and none of them is
 * open: each of c's ordered ops due is on a connection c's runs share on
 * loop, and those on `key` all on one that still works (or none is due).
 * 0 otherwise, and for a cluster's client (not looked for). Called on
 * loop's thread. */
int dlock__mux_may_follow(dlock_client *c, dlock__loop *loop, const char *key, size_t len);

/* Free the replies and private buffers of the ops (not the ops). */
void dlock__mux_clear(dlock__mux_op *ops, size_t n);

#endif
