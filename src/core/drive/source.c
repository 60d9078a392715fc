/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A client as the multiplexer's source of connections (core/mux/mux_source.h):
 * its pool, its holder's ride on a fresh connection and its figures, behind
 * the hooks the multiplexer calls.
 */
#include <stdatomic.h>
#include <stddef.h>

#include "core/drive/client_state.h"
#include "core/drive/holder.h"
#include "core/mux/mux_source.h"
#include "core/drive/pool.h"
#include "core/drive/stats.h"

/* The client a source begins. */
static dlock_client *client_of(dlock__source *s)
{
	return (dlock_client *)(void *)s;
}

static int take(dlock__source *s, dlock__conn **out, dlock__loop *wake_loop, dlock__task *wake)
{
	return dlock__client_conn_take(client_of(s), out, wake_loop, wake);
}

static void put(dlock__source *s, dlock__conn *conn)
{
	dlock__client_conn_put(client_of(s), conn);
}

static int room(dlock__source *s)
{
	return dlock__client_pool_room(client_of(s));
}

static int wait(dlock__source *s, dlock__pool_waiter *w, int first)
{
	return dlock__client_pool_wait(client_of(s), w, first);
}

static void unwait(dlock__source *s, dlock__pool_waiter *w)
{
	dlock__client_pool_unwait(client_of(s), w);
}

static void wake_on(dlock__source *s, dlock__loop *loop)
{
	dlock__client_pool_wake_on(client_of(s), loop);
}

static void fresh(dlock__source *s, dlock__conn *conn)
{
	dlock__holder_ride(client_of(s), conn);
}

static void answered(dlock__source *s, int rc, const redisReply *reply, int64_t rtt_us)
{
	dlock__stat_command(client_of(s), rc, reply, rtt_us);
}

static const dlock__source_hooks hooks = { take, put, room, wait, unwait, wake_on, fresh,
	answered };

_Static_assert(offsetof(struct dlock_client, src) == 0, "a client begins with its source");

void dlock__client_source_init(dlock_client *c)
{
	c->src.hooks = &hooks;
	c->src.node = &c->node;
	c->src.connect_timeout_ms = c->opts.connect_timeout_ms;
	c->src.command_timeout_ms = c->opts.command_timeout_ms;
	atomic_init(&c->src.timed_out_at, 0);
}
