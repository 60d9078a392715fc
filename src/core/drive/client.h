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
#include "core/drive/ask.h"
#include "core/drive/client_state.h"
#include "core/drive/forget.h"
#include "core/drive/identity.h"
#include "core/drive/pool.h"
#include "core/drive/reactor.h"
#include "core/net/script.h"

/* A reply c's member gave outside a cmd op (a batch): a cluster's
 * map follows its MOVED; an unreachable member makes the map suspect. */
void dlock__client_note_reply(dlock_client *c, int rc, const redisReply *r);

/* The background thread that listens on `channel`: the one of the member
 * serving its slot in a cluster (NULL when none is known now). */
dlock__reactor *dlock__client_reactor_for(dlock_client *c, const char *channel, size_t len);

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
