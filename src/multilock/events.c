/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A MultiLock's or RedLock's own events (dlock/stats.h): to the first
 * member's client, its parts reporting nothing of their own (single/holds.h,
 * dlock__holds_member). Its node events stay with each member's client.
 */
#include "dlock/errors.h"
#include "core/base/time.h"
#include "core/drive/stats.h"
#include "multilock/parts.h"
#include "single/member.h"

void dlock__engine_stat_acquire(dlock__engine_op *o, int rc)
{
	dlock__engine *e = o->e;
	dlock_client *c = dlock__lock_client(e->members[0]);
	int64_t now_us = dlock__now_us(), now = now_us / 1000;
	int votes = rc == 0 ? (int)dlock__tries_count(o->t, e->n, DLOCK_VOTE_ACQUIRED) : 0;

	if (o->op.finished)
		return; /* once: a second end is ignored */
	if (rc == 0) {
		atomic_store_explicit(&e->held_since, now, memory_order_relaxed);
		dlock__stat_held(c);
	}
	dlock__stat_acquire(c, rc, dlock__lock_name(e->members[0]), o->t[0].owner_ptr,
			now_us - o->started * 1000, o->rounds, votes, (int)e->n);
}

static int64_t held_for(const dlock__engine *e)
{
	return dlock__now_ms() - atomic_load_explicit(&e->held_since, memory_order_relaxed);
}

void dlock__engine_stat_released(dlock__engine *e, const char *owner)
{
	dlock__stat_released(dlock__lock_client(e->members[0]), dlock__lock_name(e->members[0]),
			owner, held_for(e));
}

void dlock__engine_stat_lost(dlock__engine *e, const char *owner, int reason)
{
	dlock__stat_lost(dlock__lock_client(e->members[0]), dlock__lock_name(e->members[0]), owner,
			reason, held_for(e));
}
