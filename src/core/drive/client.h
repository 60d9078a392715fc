/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal: the client object, its connection pool and its background thread. */
#ifndef DLOCK_CORE_CLIENT_H
#define DLOCK_CORE_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "dlock/client.h"
#include "core/net/conn.h"
#include "core/base/error.h"
#include "core/base/stats.h"
#include "core/drive/mux_source.h"
#include "core/drive/reactor.h"
#include "core/net/script.h"

struct dlock_client {
	dlock__source src; /* first: what the multiplexer knows of it (core/drive/mux_source.h) */
	pid_t pid; /* the process that opened it: a forked child may not use it */
	dlock__node node;
	dlock_client_options opts;
	char id[37];
	dlock__errbuf err;
	dlock__reactor *reactor;

	pthread_mutex_t pool_mu;
	pthread_cond_t pool_cv;
	dlock__conn **idle; /* pool_size slots */
	int n_idle;
	int n_open;        /* idle + lent out + being opened */
	struct dlock__pool_waiter *waiters, *waiters_tail; /* runs waiting for one (pool.c) */
	uint64_t conn_gen; /* connections opened so far: a new one may meet a restarted server */
	_Atomic uint64_t cancels;     /* dlock_client_cancel_waits() calls so far */
	_Atomic int64_t handles;      /* references: the caller's, and each handle and
	                                 operation made from it and not freed */
	dlock__task free_task;        /* the free, deferred to the end of a callback's turn */
	struct dlock__forget *forgets; /* keys to delete that wait for a connection (core/drive/forget.c) */
	char run_id[41];              /* the server's, from the latest connection
	                                 that learnt it ("" unknown) */
	uint64_t started_gen;         /* conn_gen when started_at was read */
	int64_t started_at;           /* monotonic ms the server started, as of started_gen */
	/* opts.label set: the registration (core/drive/holder.h); NULL: none,
	 * or a cluster's member, which uses its root's (holder_root). */
	struct dlock__holder *holder;
	const struct dlock_client *holder_root;
	dlock__stats stats;           /* dlock/stats.h's figures (core/drive/stats.c) */

	/* State of the layer above (the single-server locks), made on first
	 * use and freed with the client; core never looks inside. */
	pthread_mutex_t ext_mu;
	void *ext;
	void (*ext_free)(void *ext);
};

/*
 * 0, or DLOCK_EFORKED with a message when the caller is a child forked
 * after the client was opened: its background thread (the watchdog, the
 * pub/sub waits) did not survive the fork, and its sockets are the
 * parent's. Every command path checks it.
 */
int dlock__client_check_fork(dlock_client *client);

/* The multiplexer's view of c, filled in as c is made (core/drive/source.c). */
void dlock__client_source_init(dlock_client *c);

/* 1 with w queued when c has no idle connection and pool_size open (its
 * task comes when one is given back), else 0. `first`: ahead of the
 * others (the watchdog's renewals, which must not wait behind them). */
int dlock__client_pool_wait(dlock_client *c, dlock__pool_waiter *w, int first);

/* Take w out of the queue, if it is still there; no task comes after. */
void dlock__client_pool_unwait(dlock_client *c, dlock__pool_waiter *w);

/* Post every waiter of `loop` (a connection there may now be shared). */
void dlock__client_pool_wake_on(dlock_client *c, struct dlock_loop *loop);

/* What taking a connection would do now: 2 an idle one is there, 1 one
 * more may be opened, 0 the pool is all lent out. */
int dlock__client_pool_room(dlock_client *c);

/*
 * Borrow a connection (opening one if the pool has room) and give it back.
 * A connection that failed (c->broken) is closed instead of pooled.
 */
int dlock__client_conn_get(dlock_client *client, dlock__conn **out, int64_t deadline);
void dlock__client_conn_put(dlock_client *client, dlock__conn *c);

/*
 * For multiplexing, which must never wait for a pool while holding other
 * connections: an idle connection now, or else a new one being connected
 * (counted in the pool even beyond its size; put back, it is closed when
 * the pool is full).
 */
int dlock__client_conn_take(dlock_client *client, dlock__conn **out, dlock__loop *wake_loop,
		dlock__task *wake);

/*
 * Which server the client reached (core/drive/identity.c): the run_id its latest
 * connection learnt; 1 when known (out: 41 bytes), 0 when not yet, when INFO
 * was refused, or for a cluster root (which connects nowhere).
 */
int dlock__client_run_id(dlock_client *client, char out[41]);

/* Keep the run_id a connection of the client learnt (called as it is put back). */
void dlock__client_note_run_id(dlock_client *client, const dlock__conn *conn);

/*
 * One command on the client (a cluster root: at the member serving its
 * first key), as a run on the loop this call borrows driven to its end
 * (core/drive/mux.h): the connect, the handshake and the command are steps
 * of that loop. 0 with *out its reply (may be an error reply: check it with
 * dlock__reply_check()), or the failure with its message.
 */
int dlock__client_ask(dlock_client *client, int argc, const char **argv, const size_t *lens,
		redisReply **out);

/*
 * A cluster root's member client that serves key's slot (core/topology/cluster.h),
 * or c itself when c is not a cluster; NULL (with a message) when no node
 * can be found for it now.
 */
dlock_client *dlock__client_for_key(dlock_client *c, const char *key, size_t len);

/* A reply c's member gave outside a cmd op (a batch): a cluster's
 * map follows its MOVED; an unreachable member makes the map suspect. */
void dlock__client_note_reply(dlock_client *c, int rc, const redisReply *r);

/* The background thread that listens on `channel`: the one of the member
 * serving its slot in a cluster (NULL when none is known now). */
dlock__reactor *dlock__client_reactor_for(dlock_client *c, const char *channel, size_t len);

/* x and y reach the same server, db aside: one resolved address and port,
 * one socket file (by real path), the same Sentinel-managed primary or
 * cluster (a seed in common). `where` gets what they share ("127.0.0.1:6379"),
 * for messages. core/drive/identity.c */
int dlock__node_same_server(const dlock__node *x, const dlock__node *y, char *where, size_t len);

/* How long a deferred command (a used unlock latch's DEL) waits for a
 * command to ride along with before the background thread sends it. */
#define DLOCK__DEFER_DELAY_MS 20

/*
 * Delete a key without waiting for the reply (Redisson deletes a used unlock
 * latch the same way): deferred on an idle pooled connection, whose next
 * reader skips the reply. When every connection is lent out, the delete
 * waits in the client's queue for the next one put back (core/drive/forget.c).
 * Only a connection that dies with it, or running out of memory, leaves
 * the key to its TTL.
 */
void dlock__client_forget(dlock_client *client, const char *key, size_t len);

/* Under pool_mu: the queued deletes go out with conn, a healthy connection
 * about to be pooled. 1 when it took any (schedule a flush). */
int dlock__forgets_hand_over(dlock_client *client, dlock__conn *conn);

/* At close: queued and deferred deletes are written now, without waiting. */
void dlock__forgets_send(dlock_client *client);
void dlock__forgets_free(dlock_client *client);

/*
 * The caller's options (NULL: the defaults) into *dst, field by field as far
 * as their version has them; later fields keep their defaults. DLOCK_EINVAL
 * for a version this library does not know.
 */
int dlock__client_options_copy(dlock_client_options *dst, const dlock_client_options *src);

/* 0, or DLOCK_EINVAL with a message naming the field out of range. */
int dlock__client_options_check(const dlock_client_options *o);

/* A reference to the client was taken (+1: a handle, an op) or dropped (-1);
 * the last dropped frees it (deferred from inside its loop's callbacks). */
void dlock__client_handle_added(dlock_client *client, int delta);

/* The cancel count a wait starts with: it is canceled once that changes. */
uint64_t dlock__client_cancels(dlock_client *client);

/*
 * Giving up on servers (core/drive/first_contact.c). A wait rides out connection
 * failures (refused, reset, timed out, a name that does not resolve) of a
 * server that answered once; one that never answered since its client was
 * opened is tried for first_contact_timeout_ms of the wait only.
 */

/* c's server answered once since c was opened (a cluster: gave its map). */
int dlock__client_answered(dlock_client *c);

/* rc, a connection failure on c, is one no wait heals: the server refused
 * the TLS handshake (an untrusted certificate, a wrong name, a plain port). */
int dlock__client_refused(dlock_client *c, int rc);

/* A wait that began at `since` met connection failure rc (DLOCK_ECONN or
 * DLOCK_ETIMEDOUT) on c and would try again at `next`: 1 when it must not,
 * c's server having never answered and a try at `next` possibly ending (a
 * connect timeout later) past c's first-contact period. Other failures: 0. */
int dlock__client_first_contact_over(dlock_client *c, int rc, int64_t since, int64_t next);

/* What such a failure's message gets appended. */
#define DLOCK__NEVER_ANSWERED " (never answered since start)"

/* The calling thread's failure message (the wait's last failure) with
 * DLOCK__NEVER_ANSWERED appended; returns DLOCK_ECONN. */
int dlock__seterr_never_answered(void);

/* When a multiplexed command last timed out, or 0 once the server answered again. */
int64_t dlock__client_timed_out_at(const dlock_client *client);

/*
 * When the server started, on this process's monotonic clock (from INFO's
 * uptime, 1 s resolution). Cached until the client opens a new connection,
 * which is when a restarted server could first be seen.
 */
int dlock__client_started_at(dlock_client *client, int64_t *started_ms);

/* The same for n clients at once (core/drive/started.c): the ones whose start is
 * not known for their current connections are asked in one multiplexed
 * round, at most one command timeout. rcs[i]: 0, or why started_ms[i] is
 * unknown (DLOCK_ENOMEM when the round could not be run at all; a NULL
 * client is unknown). */
void dlock__clients_started_at(
		dlock_client *const *clients, size_t n, int64_t *started_ms, int *rcs);

struct dlock__mux_op;

/* The uptime question as a mux op, to ride beside another command on c's
 * connection: 1 with *op and *gen (c's connection generation) set when c's
 * start is not known, 0 when it is (nothing to ask). */
int dlock__uptime_op(struct dlock__mux_op *op, dlock_client *c, uint64_t *gen);

/* Record the answer to an uptime op asked at asked_ms: 0 with *started_ms
 * (also cached for generation gen), or why it is unknown. */
int dlock__uptime_note(const struct dlock__mux_op *op, uint64_t gen, int64_t asked_ms,
		int64_t *started_ms);

/* The answer to an uptime op asked at asked_ms, read without recording it:
 * 1 with *started_ms, 0 when it has none (not answered, or an error). */
int dlock__uptime_peek(const struct dlock__mux_op *op, int64_t asked_ms, int64_t *started_ms);

#endif
