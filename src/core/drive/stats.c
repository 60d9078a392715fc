/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The layers' reports (core/drive/stats.h): counters always, the client's
 * on_event hook when it has one. The hook is called on the reporting
 * thread, possibly with internal locks held, which is why it must not call
 * dlock (dlock/stats.h).
 */
#include <string.h>

#include "dlock/errors.h"
#include "core/drive/client.h"
#include "core/drive/stats.h"

static void emit(dlock_client *c, const dlock_stat_event *ev)
{
	c->opts.on_event(ev, c->opts.event_userdata);
}

/* A fresh event of `type` (the rest 0/NULL). */
#define EVENT(type) { (type), NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0 }

/* A node answering or not: one event per transition, as the exchange
 * tells one thread alone that it made it. */
static void node_state(dlock_client *c, int state, int code)
{
	dlock__stats *s = &c->stats;
	int was = atomic_load_explicit(&s->state, memory_order_relaxed);

	if (was == state || (was == DLOCK__NODE_NEW && state == DLOCK__NODE_DOWN))
		return; /* no change, or a node that never answered: not "down" */
	was = atomic_exchange(&s->state, state);
	if (was == state || was == DLOCK__NODE_NEW)
		return;
	if (state == DLOCK__NODE_DOWN)
		dlock__stat_add(&s->downs, 1);
	if (c->opts.on_event != NULL) {
		dlock_stat_event ev = EVENT(state == DLOCK__NODE_DOWN ? DLOCK_STAT_NODE_DOWN
								     : DLOCK_STAT_NODE_UP);

		ev.node = c->node.label;
		ev.code = state == DLOCK__NODE_DOWN ? code : 0;
		emit(c, &ev);
	}
}

void dlock__stat_command(dlock_client *c, int rc, const redisReply *reply, int64_t rtt_us)
{
	dlock__stats *s = &c->stats;

	if (rc == 0 && reply != NULL) {
		dlock__hist_add(&s->rtt, rtt_us); /* its count is the commands answered */
		if (reply->type == REDIS_REPLY_ERROR)
			dlock__stat_add(&s->errors, 1);
		node_state(c, DLOCK__NODE_UP, 0);
		return;
	}
	dlock__stat_add(&s->errors, 1);
	if (rc == DLOCK_ECONN || rc == DLOCK_ETIMEDOUT || rc == DLOCK_EPROTO)
		node_state(c, DLOCK__NODE_DOWN, rc);
}

void dlock__stat_acquire(dlock_client *c, int rc, const char *name, const char *owner,
		int64_t wait_us, int attempts, int votes, int members)
{
	dlock__stats *s = &c->stats;

	dlock__hist_add(&s->wait, wait_us);
	if (rc == 0) {
		dlock__stat_add(&s->acquired, 1);
	} else {
		dlock__stat_add(rc == DLOCK_ENOTACQUIRED ? &s->not_acquired : &s->failed, 1);
	}
	if (c->opts.on_event != NULL) {
		dlock_stat_event ev = EVENT(rc == 0 ? DLOCK_STAT_ACQUIRED : DLOCK_STAT_NOT_ACQUIRED);

		ev.name = name;
		ev.owner = owner;
		ev.code = rc;
		ev.wait_ms = wait_us / 1000;
		ev.attempts = attempts;
		ev.votes = rc == 0 ? votes : 0;
		ev.members = members;
		emit(c, &ev);
	}
}

void dlock__stat_held(dlock_client *c)
{
	atomic_fetch_add_explicit(&c->stats.held, 1, memory_order_relaxed);
}

static void hold_ended(dlock_client *c, int type, const char *name, const char *owner,
		int reason, int64_t hold_ms)
{
	dlock__stats *s = &c->stats;

	atomic_fetch_sub_explicit(&s->held, 1, memory_order_relaxed);
	dlock__hist_add(&s->hold, hold_ms * 1000);
	dlock__stat_add(type == DLOCK_STAT_LOST ? &s->lost : &s->released, 1);
	if (c->opts.on_event != NULL) {
		dlock_stat_event ev = EVENT(type);

		ev.name = name;
		ev.owner = owner;
		ev.reason = reason;
		ev.hold_ms = hold_ms;
		ev.members = 1;
		emit(c, &ev);
	}
}

void dlock__stat_released(dlock_client *c, const char *name, const char *owner, int64_t hold_ms)
{
	hold_ended(c, DLOCK_STAT_RELEASED, name, owner, 0, hold_ms);
}

void dlock__stat_lost(dlock_client *c, const char *name, const char *owner, int reason,
		int64_t hold_ms)
{
	hold_ended(c, DLOCK_STAT_LOST, name, owner, reason, hold_ms);
}

void dlock__stat_renewed(dlock_client *c, uint64_t n)
{
	if (n > 0)
		dlock__stat_add(&c->stats.renewals, n);
}

void dlock__stat_renewal_failed(dlock_client *c, const char *node, int code)
{
	dlock__stat_add(&c->stats.renewal_failures, 1);
	if (c->opts.on_event != NULL) {
		dlock_stat_event ev = EVENT(DLOCK_STAT_RENEWAL_FAILED);

		ev.node = node;
		ev.code = code;
		emit(c, &ev);
	}
}

void dlock__stat_brain_split(dlock_client *c, const char *name, const char *node,
		const char *owner)
{
	dlock__stat_add(&c->stats.brain_splits, 1);
	if (c->opts.on_event != NULL) {
		dlock_stat_event ev = EVENT(DLOCK_STAT_BRAIN_SPLIT);

		ev.name = name;
		ev.node = node;
		ev.owner = owner;
		emit(c, &ev);
	}
}
