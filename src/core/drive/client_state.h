/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: what a client is (struct dlock_client) and the two questions
 * every part of it asks - was it opened in this process, which client
 * serves a key - below the parts (pool, forget, holder, ...) and the
 * client's open and close (client.c) above them.
 */
#ifndef DLOCK_CORE_CLIENT_STATE_H
#define DLOCK_CORE_CLIENT_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#include "dlock/client.h"
#include "core/net/conn.h"
#include "core/base/error.h"
#include "core/base/stats.h"
#include "core/mux/mux_source.h"
#include "core/drive/reactor.h"
#include "core/net/script.h"


struct dlock_client {
	dlock__source src; /* first: what the multiplexer knows of it (core/mux/mux_source.h) */
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
	/* Kept commands a closed or reset connection lost, to send again
	 * (core/drive/resend.c): RESP, how many, since when; and the
	 * connection being opened for them. Under pool_mu. */
	char *resend;
	size_t resend_len, resend_cap;
	int resend_n;
	int64_t resend_since;
	dlock__conn *resend_conn;
	int64_t resend_conn_at; /* monotonic ms that connection was started */
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

/*
 * A cluster root's member client that serves key's slot (core/topology/cluster.h),
 * or c itself when c is not a cluster; NULL (with a message) when no node
 * can be found for it now.
 */
dlock_client *dlock__client_for_key(dlock_client *c, const char *key, size_t len);

/* The multiplexer's view of c, filled in as c is made (core/drive/source.c). */
void dlock__client_source_init(dlock_client *c);

#endif
