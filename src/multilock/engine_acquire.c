/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An acquisition's start, as an op (engine_op.c): its arguments checked,
 * the releases of ours still due on a member awaited, then the parallel
 * attempt (RedLock always; MultiLock when it may wait) or Redisson's
 * ordered rounds at once (engine_rounds.c runs the steps); the blocking
 * and the asynchronous call.
 */
#include <stdio.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/base/ids.h"
#include "core/base/time.h"
#include "core/base/fields.h"
#include "multilock/parts.h"
#include "single/holds.h"
#include "single/member.h"

/* A random pause before a new round, so that competing clients fall out of step. */
#define RETRY_JITTER_MS 50
/* After a round that failed on errors alone, the next waits this, doubling. */
#define RETRY_MIN_MS 50
#define RETRY_MAX_MS 1000

static int check_args(dlock__engine *e, const char *owner, int64_t wait_ms, int64_t lease_ms)
{
	size_t i;
	int rc;

	if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER)
		return dlock__seterr(
				DLOCK_EINVAL, "multilock: wait must be >= 0 or DLOCK_WAIT_FOREVER");
	if (lease_ms <= 0 && lease_ms != DLOCK_LEASE_WATCHDOG)
		return dlock__seterr(DLOCK_EINVAL,
				"multilock: lease must be > 0 or DLOCK_LEASE_WATCHDOG");
	if (owner != NULL && (owner[0] == '\0' || strlen(owner) > DLOCK__OWNER_MAX))
		return dlock__seterr(DLOCK_EINVAL, "multilock: the owner is empty or too long");
	for (i = 0; i < e->n; i++)
		if ((rc = dlock__client_check_fork(dlock__lock_client(e->members[i]))) < 0)
			return rc;
	return 0;
}

/* How long an asynchronous acquisition waits for a release still on its
 * way to a member (a straggler of one that went on at its quorum,
 * release.c) before it leaves that member out, as a node that owes: from
 * when the member became due, and at least DUE_MIN_WAIT_MS itself (a loop
 * not driven for a while has the answers waiting on its sockets). */
#define DUE_WAIT_MS 100
#define DUE_MIN_WAIT_MS 2

/* A member has releases due that the acquire cannot go right behind. */
static int dues_pending(const dlock__engine_op *o)
{
	for (size_t i = 0; i < o->e->n; i++)
		if (atomic_load(&o->e->release_due[i]) > 0 && !dlock__due_behind(o, i))
			return 1;
	return 0;
}

static void parallel_start(dlock__engine_op *o)
{
	dlock__engine *e = o->e;

	o->par = (dlock__parallel){ e->rules.quorum, e->rules.filter != NULL, o->lease_ms < 0, 0, 0,
		0 };
	o->rounds++;
	dlock__parallel_attempt(o, o->lease_ms, NULL, &o->par, &o->t0, dlock__engine_parallel_over);
}

static void dues_over(dlock__engine_op *o);

/*
 * A member with a release of ours still on its way gets the acquire right
 * behind it, on its connection (the server runs them in that order); where
 * it cannot (the release is on a connection of its own or split over
 * several, a WAIT must follow the acquire, or an acquire of ours is still
 * due there, whose late grant would be given back behind this one:
 * core/mux/mux.h's DLOCK__ORDERED_OPEN), it is asked once that was
 * answered: an acquire sent on another connection could run before it on
 * the server and be undone by it. Healthy servers answer within a round
 * trip (woken by dlock__engine_dues_woken); a stopped one is waited for
 * DUE_WAIT_MS from when it became due at most, then left out. A blocking
 * call leaves it out at once (its loop is not the one the release runs on).
 */
static void await_dues(dlock__engine_op *o)
{
	dlock__engine *e = o->e;
	int64_t until = atomic_load(&e->due_at) + DUE_WAIT_MS, now = dlock__now_ms();

	if (until < o->started + DUE_MIN_WAIT_MS)
		until = o->started + DUE_MIN_WAIT_MS;

	if (o->canceling) {
		dlock__engine_canceled(o);
		return;
	}
	if (o->blocking || now >= until || !dues_pending(o)) {
		parallel_start(o);
		return;
	}
	o->due_next = e->due_waiters;
	e->due_waiters = o;
	dlock__engine_pause(o, until - now, dues_over);
}

static void dues_over(dlock__engine_op *o)
{
	dlock__engine_op **p = &o->e->due_waiters;

	while (*p != NULL && *p != o)
		p = &(*p)->due_next;
	if (*p == o)
		*p = o->due_next;
	o->due_next = NULL;
	await_dues(o);
}

static void acquire_start(dlock_op *op)
{
	dlock__engine_op *o = (dlock__engine_op *)op;
	dlock__engine *e = o->e;
	int rc;

	o->started = dlock__now_ms();
	o->deadline = dlock__deadline_in(o->wait_ms);
	o->backoff = (dlock__backoff){ RETRY_JITTER_MS, RETRY_MIN_MS, RETRY_MAX_MS, 0 };
	/* Two members known to be one server are refused before anything is sent. */
	if ((rc = dlock__engine_servers_check(e)) < 0) {
		dlock__engine_op_end(o, rc);
		return;
	}
	/* A MultiLock that may not wait keeps Redisson's strict order, which
	 * guarantees that one of several concurrent contenders wins. */
	if (!e->rules.share_wait && o->wait_ms == 0) {
		dlock__engine_rounds(o);
		return;
	}
	await_dues(o);
}

typedef struct acquire_args {
	int64_t wait_ms, lease_ms;
} acquire_args;

static void acquire_setup(dlock__engine_op *o, void *arg)
{
	const acquire_args *a = arg;

	o->wait_ms = a->wait_ms;
	o->lease_ms = a->lease_ms;
}

int dlock__engine_acquire(dlock__engine *e, const char *owner, int64_t wait_ms, int64_t lease_ms,
		int64_t *validity_out, int64_t *token_out)
{
	acquire_args a = { wait_ms, lease_ms };
	int rc = check_args(e, owner, wait_ms, lease_ms);

	if (rc < 0)
		return rc;
	return dlock__engine_block(e, owner, acquire_start, acquire_setup, &a, validity_out,
			token_out);
}

int dlock__engine_acquire_async(dlock_op **out, dlock__engine *e, const char *owner,
		int64_t wait_ms, int64_t lease_ms, dlock_op_cb cb, void *userdata)
{
	acquire_args a = { wait_ms, lease_ms };
	int rc = check_args(e, owner, wait_ms, lease_ms);

	if (rc < 0) {
		if (out != NULL)
			*out = NULL;
		return rc;
	}
	return dlock__engine_async(out, e, owner, cb, userdata, acquire_start, acquire_setup, &a);
}
