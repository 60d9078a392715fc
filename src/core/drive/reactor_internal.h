/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal to the reactor's files: its state, shared by reactor.c (the
 * loop's tending: timed jobs, deferred flushes, start and stop),
 * reactor_conn.c (the pub/sub connection and the Sentinel watch that moves
 * it) and reactor_subs.c (the channels local waiters and holds listen on,
 * and what a message means to them). Everything else uses reactor.h.
 */
#ifndef DLOCK_CORE_REACTOR_INTERNAL_H
#define DLOCK_CORE_REACTOR_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "core/loop/loop.h"
#include "core/drive/reactor.h"
#include "core/topology/sentinel_watch.h"

enum sub_state { SUB_NONE, SUB_SUBSCRIBING, SUB_SUBSCRIBED, SUB_UNSUBSCRIBING };

struct dlock__sub {
	char *channel;
	size_t len;
	int watchers; /* local holds listening for a force unlock */
	int check;    /* their holds should look at the lock (dlock__reactor_notice) */
	enum sub_state state;
	uint64_t gen; /* bumped each time the subscription becomes active */
	/* A "taken" channel's last note (DLOCK__TAKEN_PREFIX): its count, the
	 * new holder's lease and how many listened when it took the lock. */
	uint64_t note_gen;
	int64_t note_lease, note_n;
	/* The reactor's message count at this channel's last message: which of
	 * two channels' messages came first (a note, then an unlock). */
	uint64_t last_seq;
	dlock__listener *listeners; /* local waiters: told by a task posted to their loop */
	struct dlock__sub *next;
};

struct dlock__reactor {
	const dlock__node *node;
	dlock__loop *loop;   /* what drives it: own_loop on the thread, or the caller's */
	dlock__loop own_loop;
	int own_thread;
	pthread_t thread;
	pthread_mutex_t mu;
	_Atomic int stopping;
	int self_stopped; /* stopped from its own thread: that thread frees it */
	dlock__task tend_task; /* look at what is due (posted by any thread) */
	dlock__task lookup_task; /* the pub/sub connection's host name was found */
	dlock__timer timer;    /* the next due time of any of it */
	dlock__io conn_io;     /* the pub/sub connection's descriptor */
	dlock__io watch_io;    /* the Sentinel watch's */
	int64_t connect_deadline;
	dlock__sub *subs;
	dlock__conn *conn;  /* pub/sub connection; only the loop touches it */
	dlock__watch watch; /* a Sentinel-managed node's +switch-master watch (the loop's) */
	int64_t reconnect_at;
	dlock__reactor_job job;
	void (*job_stop)(void *arg, int forked);
	void *job_arg;
	int64_t job_due;
	void (*flush)(void *arg);
	void (*flush_stop)(void *arg, int forked);
	void *flush_arg;
	int64_t flush_due;
	dlock__reactor_notice notice; /* tells the holds of a watched channel to look */
	void *notice_arg;
	int checks; /* some sub has its check flag set */
	uint64_t seq; /* messages read (r->mu held) */
};

/* The channels (reactor_subs.c); r->mu held unless said. */
/* Ask the loop to look at what is due (from any thread, r->mu held or not). */
void dlock__reactor_wake(dlock__reactor *r);
/* Someone local still wants the channel subscribed. */
int dlock__sub_wanted(const dlock__sub *s);
/* The holds listening on s should look at their lock now. */
void dlock__sub_want_check(dlock__reactor *r, dlock__sub *s);
/* Wake every waiter of s. */
void dlock__sub_wake_all(dlock__sub *s);
/* Free a sub no one wants and the server no longer sends (the loop's thread). */
void dlock__sub_free(dlock__sub *s);
/* What a pub/sub push means to the channels (r->mu not held). */
void dlock__reactor_handle_reply(dlock__reactor *r, redisReply *reply);
/* Tell the holds of every channel flagged for a check to look at their
 * lock (dropped around each notice). */
void dlock__reactor_notify_watchers(dlock__reactor *r);

/* The pub/sub connection (reactor_conn.c), on the loop's thread. */
/* Close it, and connect again after a pause (r->mu not held). */
void dlock__reactor_drop(dlock__reactor *r);
/* Bring the server's subscriptions in line with what local waiters want
 * (r->mu held; dropped around network work). */
void dlock__reactor_sync_subs(dlock__reactor *r);
/* Read what came, each push to dlock__reactor_handle_reply (r->mu not held). */
void dlock__reactor_read_messages(dlock__reactor *r);
/* Keep the loop watching the connection and the Sentinel watch for what
 * they wait for now (r->mu not held). */
void dlock__reactor_watch_fds(dlock__reactor *r);

/* lookup_task's step (reactor_conn.c): the pub/sub connection goes on. */
void dlock__reactor_lookup_over(dlock__task *t);

#endif
