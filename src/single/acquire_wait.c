/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where a waiting acquisition listens (single/acquire_op.c has the lock's
 * steps of the wait, single/wait.c the wait itself, and acquire_op.c at
 * its top how waking without a herd works): the lock's channel, dlock's
 * "taken" channel, and a waiter's own channel; the watcher's and the
 * sleeper's times.
 */
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/base/ids.h"
#include "core/base/time.h"
#include "single/acquire_wait.h"
#include "single/lock_internal.h"

/* Never spread wider than this (ms): a stale count must not keep a waiter long. */
#define HERD_SPREAD_MAX 256

/* A sleeper looks by itself this long after the holder's TTL, spread over
 * the next SLEEP_SPREAD_MS (the watchers take the lock before that), and
 * every SLEEP_MAX_MS at most whatever the TTL: a long one may be stale (a
 * holder that released long ago, and a Redisson holder's release tells no
 * sleeper). A look that finds the lock busy costs one script, and drops
 * the watchers that are gone (scripts.c): a few hundred sleepers cost the
 * server about a hundred scripts a second. */
#define SLEEP_AFTER_MS 250
#define SLEEP_SPREAD_MS 1000
#define SLEEP_MAX_MS 2000

/* A uniform draw in [0, n). */
static int64_t draw(int64_t n)
{
	return n <= 1 ? 0 : (int64_t)(dlock__random() % (uint64_t)n);
}

/* The spread after a holder's TTL: 2 * est ms, so about one asks every
 * 2 ms - time for the first one's note to reach the others, even on a
 * busy machine. */
int64_t dlock__wait_ttl_spread(const dlock__acquire_op *o)
{
	return o->herd ? draw(2 * o->est < HERD_SPREAD_MAX ? 2 * o->est : HERD_SPREAD_MAX) : 0;
}

/*
 * The slot of a waiter woken by "0" (ms from now; 0 = at once): one of
 * est/2 slots, so about two ask at once. The others wait a gap first, long
 * enough for the note of the one that took the lock to reach them: the
 * server writes it to every listener in turn (some 3 us each).
 */
int64_t dlock__wait_slot(const dlock__acquire_op *o)
{
	int64_t slots = (o->est + 1) / 2, u;

	if (!o->herd || o->est <= 2)
		return 0;
	u = draw(slots < HERD_SPREAD_MAX ? slots : HERD_SPREAD_MAX);
	return u == 0 ? 0 : 1 + o->est / 128 + (u - 1);
}

/* "<base>:<owner>" (a fair waiter's channel, a waiter's own): NULL when out of memory. */
static char *joined(const char *base, size_t blen, const char *owner, size_t *len)
{
	size_t olen = strlen(owner);
	char *ch = dlock__malloc(blen + 1 + olen + 1);

	if (ch == NULL)
		return NULL;
	memcpy(ch, base, blen);
	ch[blen] = ':';
	memcpy(ch + blen + 1, owner, olen + 1);
	*len = blen + 1 + olen;
	return ch;
}

/* The channel a waiter listens on: the lock's, or for a fair lock its own. */
static char *wait_channel(dlock_lock *l, const char *owner, size_t *len)
{
	if (l->kind != DLOCK_LOCK_FAIR) {
		*len = l->channel_len;
		return l->channel;
	}
	return joined(l->channel, l->channel_len, owner, len);
}

static void unfollow(dlock__reactor *rx, dlock__sub **sub, dlock__listener *li)
{
	if (*sub != NULL)
		dlock__sub_unlisten(rx, *sub, li);
	*sub = NULL;
}

/* Listen on the lock's channel, and a herd waiter on the "taken" one. */
int dlock__wait_watch(dlock__acquire_op *o)
{
	dlock_lock *l = o->lo.l;
	const dlock__sub *was = o->tsub;
	int64_t lease, n;

	o->watching = 1;
	if (dlock__waiter_follow(&o->w, &o->w.rx, &o->w.sub, &o->w.li, o->channel,
			    o->channel_len) < 0)
		return -1;
	if (!o->herd)
		return 0;
	if (dlock__waiter_follow(&o->w, &o->trx, &o->tsub, &o->tli, l->taken, l->taken_len) < 0)
		return -1;
	/* Notes from before are not news (the lock's channel wakes it then). */
	if (o->tsub != NULL && o->tsub != was)
		o->note_gen = dlock__sub_note(o->trx, o->tsub, &lease, &n, NULL, NULL);
	return 0;
}

static void unwatch(dlock__acquire_op *o)
{
	unfollow(o->w.rx, &o->w.sub, &o->w.li);
	unfollow(o->trx, &o->tsub, &o->tli);
	dlock__loop_unpost(o->lo.op.loop, &o->w.wake_task);
	dlock__loop_unpost(o->lo.op.loop, &o->taken_task);
	o->watching = 0;
}

/* A herd waiter's own channel, where it is told to watch. */
static int listen_own(dlock__acquire_op *o)
{
	if (o->own == NULL &&
			(o->own = joined(o->lo.l->wake, o->lo.l->wake_len, o->lo.owner, &o->own_len)) ==
					NULL)
		return -1;
	if (o->osub == NULL)
		o->own_asked = dlock__now_ms();
	return dlock__waiter_follow(&o->w, &o->orx, &o->osub, &o->oli, o->own, o->own_len);
}

void dlock__wait_stop(dlock__acquire_op *o)
{
	unwatch(o);
	unfollow(o->orx, &o->osub, &o->oli);
	dlock__loop_unpost(o->lo.op.loop, &o->own_task);
	dlock__timer_stop(o->lo.op.loop, &o->w.timer);
	o->w.waiting = 0;
}

/* The first wait: its channel. 0, or DLOCK_ENOMEM. */
int dlock__wait_first(dlock__acquire_op *o)
{
	o->channel = wait_channel(o->lo.l, o->lo.owner, &o->channel_len);
	if (o->channel == NULL)
		return dlock__seterr(DLOCK_ENOMEM, "lock %s: out of memory", o->lo.l->shown);
	return 0;
}

/* A sleeper looks by itself after the holder's TTL (the watchers take the
 * lock before that) or SLEEP_MAX_MS, spread so that sleepers do not all ask. */
static int64_t sleeper_wake(const dlock__acquire_op *o)
{
	int64_t ttl = o->ttl >= 0 && o->ttl < SLEEP_MAX_MS ? o->ttl : SLEEP_MAX_MS;

	return dlock__now_ms() + ttl + SLEEP_AFTER_MS + draw(SLEEP_SPREAD_MS);
}

/* Listen where this waiter's role says; the time to look again when it sleeps (else `wake`). */
int dlock__wait_listen(dlock__acquire_op *o, int64_t *wake)
{
	if (!o->herd)
		return dlock__wait_watch(o);
	if (listen_own(o) < 0)
		return -1;
	if (o->role == DLOCK__HERD_SLEEP && o->promoted_meanwhile)
		o->role = DLOCK__HERD_WATCH;
	o->promoted_meanwhile = 0;
	if (o->role == DLOCK__HERD_SLEEP) {
		unwatch(o);
		*wake = sleeper_wake(o);
		return 0;
	}
	/* A newcomer among enough watchers: its own channel first; once
	 * subscribed it asks with roles (own_word). */
	if (o->role == 0 && !o->own_ready && o->est >= DLOCK__HERD_WATCHERS && !o->watching)
		return 0;
	return dlock__wait_watch(o);
}

/* How a herd waiter's retry asks (single/acquire.h). */
int dlock__wait_roles(const dlock__acquire_op *o)
{
	return o->w.attempts > 0 && o->own_ready ? DLOCK__HERD_ROLES : 0;
}

