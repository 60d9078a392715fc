/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What `dlock status` reads of each node, shared by its one-shot output
 * (status.c) and its --watch (status_watch.c).
 */
#ifndef DLOCK_CLI_STATUS_H
#define DLOCK_CLI_STATUS_H

#include "target.h"

typedef enum node_kind {
	KIND_LOCK,      /* a lock's hash, or nothing */
	KIND_RWLOCK,    /* a read-write lock's hash (its `mode` field) */
	KIND_PERMITS,   /* an expirable semaphore: a count and taken permits */
	KIND_SEMAPHORE, /* a count with waiters on the semaphore's channel only */
	KIND_LATCH,     /* a count with waiters on the latch's channel only */
	KIND_COUNT      /* a count alone: a semaphore's free permits or a latch's count */
} node_kind;

typedef struct node_view {
	int reachable;
	int rc; /* the query's error, or 0 */
	char error[512];
	node_kind kind;
	dlock_lock_info *info;     /* a lock's; NULL when the query failed or not a lock */
	dlock_semaphore_info *sem; /* a count's (KIND_PERMITS and after) */
	int64_t latch_waiters;     /* listening on the latch's channel */
} node_view;

/* What every node showed, summed up. */
typedef struct status_counts {
	size_t reachable, held, refused, wrongtype;
	size_t queued;       /* a fair lock's queue, the longest a node has */
	int64_t subscribers; /* listening on the name's channels, the most a node has */
} status_counts;

/* Read every node of t into v (t->n of them) and sum them up in *c. */
void cli_status_read(cli_target *t, node_view *v, status_counts *c);
/* Free what cli_status_read() put in v (not v itself). */
void cli_status_free(const cli_target *t, node_view *v);
/* The table `dlock status NAME` prints. */
void cli_status_print_table(const cli_target *t, const node_view *v, const status_counts *c,
		FILE *out);
/* 0, or EXIT_USAGE with one line when two nodes are one server. */
int cli_status_refuse_twice(cli_target *t);

/* A node's holders (a lock's owners, an expirable semaphore's permit ids). */
size_t cli_view_holders(const node_view *v);
const char *cli_view_holder(const node_view *v, size_t i);
/* Its waiters: a fair queue's length, else the clients listening. */
int64_t cli_view_waiting(const node_view *v);
/* What that number is: "waiting", or for a lock without a queue "waiting
 * or watching" (a holder watching for a force unlock listens too). */
const char *cli_view_waiting_words(const node_view *v);

/* A holder as people want to read it (holder.c): "OWNER (label [host pid
 * N (command)])" when its client registered, else the owner itself; in buf. */
const char *cli_holder_describe(dlock_client *client, const char *owner, char *buf, size_t len);
/* 1 and *h filled when owner's client registered on client's node, else 0. */
int cli_holder_lookup(dlock_holder *h, dlock_client *client, const char *owner);
/* "label [host pid N (command)]" or "host pid N (command)". */
const char *cli_holder_words(const dlock_holder *h, char *buf, size_t len);
/* "for 12m 3s": since it registered. */
const char *cli_holder_since(const dlock_holder *h, char *buf, size_t len);

/* `status --watch`: redraw (a terminal) or print changes until SIGINT/SIGTERM. */
int cli_status_watch(cli_target *t, int64_t interval_ms, FILE *out);

#endif
