/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: a client's connection pool (pool.c): borrow, give back, take
 * without waiting (multiplexing), wait on a loop for one, drain owed
 * replies.
 */
#ifndef DLOCK_CORE_POOL_H
#define DLOCK_CORE_POOL_H

#include <stdint.h>

#include "core/drive/client_state.h"


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

/* The least time a connection may owe replies before it is reset. */
#define DLOCK__OWED_MAX_MIN_MS 1000

/* How long a connection of this client may owe replies: max(2 x command timeout, the minimum). */
int64_t dlock__owed_bound_ms(const dlock_client *client);

/* Step 4: read idle connections' owed replies; reset those owing too long
 * (core/drive/pool.c). */
void dlock__client_drain(dlock_client *client);

#endif
