/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: one connection to one Redis server.
 *
 * dlock does its own socket work (non-blocking sockets, poll, MSG_NOSIGNAL)
 * and uses hiredis only to format commands and parse replies: that gives
 * every operation a real total deadline, lets RedLock multiplex many servers
 * in one poll, and never raises SIGPIPE in the caller's process.
 */
#ifndef DLOCK_CORE_CONN_H
#define DLOCK_CORE_CONN_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <hiredis/hiredis.h>

#include "core/loop/loop.h"

/*
 * Where a server that moves is (a Sentinel-managed primary): the transport
 * asks before each connect and tells when something suggests the server
 * moved. Topology fills it in (core/topology/sentinel.c), so the transport
 * needs to know nothing of sentinels.
 */
typedef struct dlock__finding dlock__finding; /* an asking under way (topology's) */
typedef struct dlock__finder {
	/* The address now into host/port, and its epoch (it changes whenever
	 * the address does), before deadline: a blocking caller's drive of
	 * `start`'s operation. */
	int (*find)(void *self, int64_t deadline, char *host, size_t hostlen, int *port,
			uint64_t *epoch);
	/* The same as an operation on `loop`: 0 with *out NULL when the
	 * address is known now (find() gives it at once); else *out is under
	 * way until deadline and its end posts `ready` to `loop`. Or the failure. */
	int (*start)(void *self, dlock__loop *loop, dlock__task *ready, int64_t deadline,
			dlock__finding **out);
	/* Whether its end came (`ready` was posted). */
	int (*over)(const dlock__finding *f);
	/* Its answer, as find()'s, once over; f is freed. */
	int (*take)(dlock__finding *f, char *host, size_t hostlen, int *port, uint64_t *epoch);
	/* Give it up not taken: nothing is posted after this. */
	void (*drop)(dlock__finding *f);
	/* Something suggests the server moved: ask again before the next connect. */
	void (*suspect)(void *self);
	void *self;
} dlock__finder;

/* Where a server is and how to talk to it; shared by its connections. */
typedef struct dlock__node {
	char *host; /* TCP; NULL for a Unix socket */
	int port;
	char *path; /* a Unix socket's path; NULL for TCP */
	char *user;
	char *password;
	int db;
	int64_t connect_timeout_ms;
	int64_t command_timeout_ms;
	char label[280];            /* "host:port" or "unix:/path", for messages */
	struct dlock__tls_ctx *tls; /* rediss://: the TLS settings; NULL for plain TCP */
	/* redis+sentinel://: where the primary is comes from the sentinels
	 * (then host is NULL and label is "sentinel:NAME"): the transport asks
	 * `finder` (find NULL for any other node); the client keeps the
	 * sentinels themselves (core/topology/sentinel.h). */
	dlock__finder finder;
	struct dlock__sentinel *sentinel;
	/* A cluster node on Redis 7+: unlocks are published with SPUBLISH and
	 * waiters listen with SSUBSCRIBE (Redisson's sharded subscription mode). */
	int sharded_pubsub;
	/* redis+cluster://: the cluster this root client routes to (core/topology/cluster.h);
	 * the root itself connects nowhere. The transport only carries it. */
	struct dlock__cluster *cluster;
	/* Replies the server owes to commands given up at a deadline, over all
	 * of this node's connections. While it owes any, a late release still
	 * queued there could undo a new hold of the same owner taken over
	 * another connection: acquisitions wait until it has answered. */
	_Atomic int owed;
	/* The server answered once (a reply came back) since the client was
	 * opened: a wait gives up on one that never did (first_contact_timeout_ms). */
	_Atomic int answered;
	/* The last connection was refused in a way no retry heals (TLS: an
	 * untrusted certificate, a wrong name, a plain port); cleared by an answer. */
	_Atomic int refused;
	/* Writes that put bytes on this node's connections: a pipelined batch
	 * is one when the socket takes it whole (tests and the bench count
	 * round trips with it). */
	_Atomic uint64_t writes;
} dlock__node;

struct dlock__conn;

/* TLS over a connection's socket, as the transport calls it: installed by
 * the handshake's start (core/net/tls.c), so the transport calls TLS only
 * through this table and TLS builds on the transport, not the reverse. */
typedef struct dlock__conn_tls {
	/* As recv()/send(): > 0 bytes, 0 closed (read), -1 with errno (EAGAIN: c->want set). */
	ssize_t (*read)(struct dlock__conn *c, void *buf, size_t len);
	ssize_t (*write)(struct dlock__conn *c, const void *buf, size_t len);
	int (*pending)(const struct dlock__conn *c); /* decrypted bytes buffered */
	const char *(*strerror)(void);               /* why the last read/write failed */
	void (*close)(struct dlock__conn *c);        /* free the TLS state */
} dlock__conn_tls;

typedef struct dlock__conn {
	int fd;
	int broken;         /* a transport failure happened: close, never reuse */
	int discard;        /* replies nobody waits for any more (fire-and-forget commands,
	                replies given up at a deadline): skipped when they come */
	int owed;           /* of those, the ones given up at a deadline (counted in node->owed) */
	int64_t owed_since; /* monotonic ms the oldest owed reply was given up */
	char *out;          /* formatted commands not sent yet (deferred ones wait here
	                for the next command, to share its write) */
	size_t out_len, out_cap;
	/* Commands given up on it that must run all the same (core/net/owed.h,
	 * rule 6), in RESP: dropped once it owes nothing, sent again if it is
	 * closed or reset owing. */
	char *kept;
	size_t kept_len, kept_cap;
	int kept_n;
	int64_t kept_since; /* monotonic ms the oldest of them was first given up */
	int connecting; /* a non-blocking connect (and TLS handshake) is under way */
	struct dlock__lookup *lookup; /* connecting, its host name still being looked up
	                (fd -1, want 0): its end posts `wake` to `wake_loop` */
	struct dlock__finding *finding; /* connecting, a moving node's address still
	                asked for (fd -1, want 0): its end posts `wake` to `wake_loop` */
	dlock__loop *wake_loop;
	dlock__task *wake;
	int tcp_up;     /* the socket is connected (a TLS handshake may follow) */
	short want;     /* what the next step waits for: POLLIN or POLLOUT */
	int answered;   /* any byte came back: a close before is worth a hint */
	void *tls;      /* OpenSSL's SSL, when the node is TLS (core/net/tls.c) */
	const dlock__conn_tls *tls_ops; /* with it: how the transport reads and writes */
	const struct dlock__tls_ctx *tls_ctx;
	int checks[4]; /* pipelined AUTH/SELECT/ROLE/INFO whose replies are checked first: the code */
	int nchecks;
	int greeted; /* its handshake was sent (dlock__conn_send_handshake) */
	redisReader *reader;
	const dlock__node *node;
	const char *label;    /* for messages: node->label, or addr_label for a sentinel node */
	char addr_label[300]; /* "sentinel:NAME (host:port)": the primary this one reached */
	uint64_t epoch;       /* a sentinel node's address generation when it connected */
	int asking;           /* lent for a cluster ASK redirect: every command sent
	                         for it goes after ASKING (dlock__conn_ask) */
	char run_id[41];      /* the server's INFO run_id, once the handshake's INFO
	                         answered; "" until then, or when INFO is refused */
} dlock__conn;

/* checks[] code of a ROLE that must say "master" (a Sentinel-managed node). */
#define DLOCK__CHECK_ROLE 1
/* checks[] code of the INFO server that names the server (run_id): an error
 * reply (an ACL without INFO) leaves it unknown and fails nothing. */
#define DLOCK__CHECK_RUN_ID 2

/* The node's server may have moved (a dropped or refused connection, a
 * READONLY reply, a reply given up): its finder asks again. */
void dlock__node_suspect(const dlock__node *node);

/* Mark c broken (never reused) and set "node: what: why"; returns code.
 * Shared by conn.c and connect.c. */
int dlock__conn_fail(dlock__conn *c, int code, const char *what, const char *why);

/* Append a command in RESP to *buf (length *len, capacity *cap), or raw
 * bytes. 0, or DLOCK_ENOMEM (the buffer unchanged). */
int dlock__resp_append(char **buf, size_t *len, size_t *cap, int argc, const char **argv,
		const size_t *lens);
int dlock__bytes_append(char **buf, size_t *len, size_t *cap, const char *bytes, size_t n);

/* Stop waiting for `replies` replies of this connection: they are skipped
 * when they come, and counted as owed (core/net/owed.h, rule 1). */
void dlock__conn_give_up(dlock__conn *c, int replies);

/* The server refused c for good (core/net/tls.c): a wait does not try it again. */
void dlock__conn_refused(dlock__conn *c);

/* dlock__conn_read() with deadline 0 and no complete reply yet. */
#define DLOCK__AGAIN 1

/* Connect, AUTH and SELECT as the node says, all before `deadline`. */
int dlock__conn_open(dlock__conn **out, const dlock__node *node, int64_t deadline);
void dlock__conn_close(dlock__conn *c);

/*
 * The same in steps, for multiplexing: start a non-blocking connect
 * (c->connecting while under way: poll for dlock__conn_events()), advance it
 * each time the socket is ready (a TLS node's handshake takes several
 * steps; c->connecting stays set until it is done), then send AUTH/SELECT
 * without waiting; their replies are checked by the next read.
 */
int dlock__conn_start(dlock__conn **out, const dlock__node *node);
/* The same on a loop: a host name is looked up, and a Sentinel-managed
 * node's address asked for, without waiting (c->lookup or c->finding, no
 * descriptor yet); the end posts `wake` to `loop`, from where
 * dlock__conn_connected() goes on. */
int dlock__conn_start_on(dlock__conn **out, const dlock__node *node, dlock__loop *loop,
		dlock__task *wake);
/* A lookup (or an address asked for) under way has its answer:
 * dlock__conn_connected() goes on now. */
int dlock__conn_lookup_over(const dlock__conn *c);
/* The address is still being found: no descriptor to watch yet. */
int dlock__conn_looking_up(const dlock__conn *c);
int dlock__conn_connected(dlock__conn *c);

/* The poll events the connection waits for now. */
short dlock__conn_events(const dlock__conn *c);

/* Bytes are buffered above the socket (TLS): readable without polling. */
int dlock__conn_buffered(const dlock__conn *c);
int dlock__conn_send_handshake(dlock__conn *c, int64_t deadline);

/* Send a command (and whatever was deferred): what the socket takes now,
 * the rest kept queued (c->out_len) for dlock__conn_push() once the socket
 * is writable - nothing waits. `what` names it in messages; `deadline`
 * must be DLOCK__NO_WAIT. */
int dlock__conn_send(dlock__conn *c, int argc, const char **argv, const size_t *lens,
		const char *what, int64_t deadline);

/* dlock__conn_send's deadline for "never wait". */
#define DLOCK__NO_WAIT 0

/* Send more of what is queued without waiting (see dlock__conn_send);
 * 0, or a transport failure (c broken). */
int dlock__conn_push(dlock__conn *c, const char *what);

/*
 * Read one reply, of what is already on the socket: DLOCK__AGAIN when it
 * is not complete yet (the caller's loop calls back when more comes; no
 * read waits). `deadline` must be 0. A transport failure marks the
 * connection broken.
 */
int dlock__conn_read(dlock__conn *c, redisReply **out, const char *what, int64_t deadline);

/*
 * Queue a command whose reply nobody waits for: it goes out with the next
 * command sent on the connection (one write for both), and its reply is
 * skipped. A connection closed first never sends it.
 */
int dlock__conn_defer(dlock__conn *c, int argc, const char **argv, const size_t *lens);

/* A connection lent for an ASK redirect (c->asking): queue ASKING, which
 * goes out with the next command; its reply is skipped. No-op otherwise. */
void dlock__conn_ask(dlock__conn *c);

/* Format a command into the output buffer (sent with the next send or
 * flush): DLOCK_ECONN on a failed connection, DLOCK_ENOMEM (no message set). */
int dlock__conn_queue(dlock__conn *c, int argc, const char **argv, const size_t *lens);

/* Send what was deferred, without waiting: what does not fit the socket now
 * stays for the next send. */
void dlock__conn_flush(dlock__conn *c);

/*
 * Map an error reply to a code and message ("node: what: <reply>"):
 * WRONGTYPE -> DLOCK_EWRONGTYPE, NOAUTH/WRONGPASS -> DLOCK_EAUTH, others
 * DLOCK_ESERVER. Returns 0 when the reply is not an error.
 */
int dlock__reply_check(const dlock__node *node, const redisReply *r, const char *what);

/* The reply is an error that starts with `prefix` (e.g. "NOSCRIPT"), or a
 * script error of Redis 6 that wraps one (see conn.c). */
int dlock__reply_is_error(const redisReply *r, const char *prefix);

#endif
