/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What listens to a hold: with watch_force_unlock, its lock's channel
 * through the reactor (a force unlock heard at once, the notice going to
 * the watchdog), moved with the slot in a cluster; and the watchers told
 * once how it ends (watch_op.c).
 */
#include <stddef.h>

#include "dlock/errors.h"
#include "core/drive/client.h"
#include "core/topology/slot.h"
#include "single/holds.h"
#include "single/holds_table.h"
#include "single/lock_internal.h"

/* Tell every watcher of x how it ended, once (h->mu held). */
void dlock__holds_tell_watchers(hold *x, int reason)
{
	dlock__hold_watch *w;

	while ((w = x->watchers) != NULL) {
		x->watchers = w->next;
		w->next = NULL;
		w->ended(w, reason);
	}
}

void dlock__holds_unwatch(hold *x)
{
	if (x->watch != NULL)
		dlock__sub_unwatch(x->watch_rx, x->watch);
	x->watch = NULL;
	x->watch_rx = NULL;
	x->check = 0;
}

void dlock__holds_rewatch(dlock__holds *h, hold *x, dlock__reactor *rx)
{
	dlock__reactor *old_rx = x->watch_rx;
	dlock__sub *old = x->watch;
	size_t len;
	const char *channel = dlock__sub_channel(old, &len);

	/* rx serves the name's slot: the channel's too, unless an odd brace
	 * in the name gave them different slots (then it stays where it is). */
	if (dlock__key_slot(channel, len) != dlock__key_slot(x->name, x->name_len))
		return;
	/* NULL when out of memory: the renewals still find a loss. */
	x->watch = dlock__sub_watch(rx, channel, len, dlock__watchdog_notice, h);
	x->watch_rx = x->watch != NULL ? rx : NULL;
	dlock__sub_unwatch(old_rx, old);
}

/*
 * watch_force_unlock: the hold listens on its lock's channel, renewed or
 * leased alike (a message checks a leased hold without extending it, and
 * the watch ends with the lease: watchdog.c; the notice the subscription
 * brings sets that up). The node is found outside the table's lock (a cluster's
 * map may be read); the watch is made under it, so a notice that comes at
 * once finds the hold.
 */
void dlock__holds_watch(dlock_lock *l, const char *owner, uint64_t epoch)
{
	dlock__holds *h = l->holds;
	dlock__reactor *rx = dlock__client_reactor_for(l->client, l->channel, l->channel_len);
	hold *x;

	if (rx == NULL)
		return; /* no node known now: the renewals still find a loss */
	x = dlock__holds_lock_find(h, l, owner);
	if (x != NULL && x->epoch == epoch && !x->lost && x->watch == NULL) {
		/* NULL when out of memory: the renewals still find a loss. */
		x->watch = dlock__sub_watch(rx, l->channel, l->channel_len, dlock__watchdog_notice, h);
		x->watch_rx = x->watch != NULL ? rx : NULL;
	}
	dlock__mutex_unlock(&h->mu);
}

int dlock__holds_watch_add(dlock_lock *l, const char *owner, dlock__hold_watch *w, int *reason)
{
	dlock__holds *h = l->holds;
	hold *x = dlock__holds_lock_find(h, l, owner);
	int rc = 0;

	if (x == NULL) {
		rc = DLOCK_ENOTOWNER;
	} else if (x->lost) {
		*reason = x->lost_reason;
		rc = DLOCK_ELOST;
	} else {
		w->next = x->watchers;
		x->watchers = w;
	}
	dlock__mutex_unlock(&h->mu);
	return rc;
}

int dlock__holds_watch_remove(dlock_lock *l, const char *owner, dlock__hold_watch *w)
{
	dlock__holds *h = l->holds;
	hold *x = dlock__holds_lock_find(h, l, owner);
	dlock__hold_watch **at;
	int found = 0;

	for (at = x != NULL ? &x->watchers : NULL; at != NULL && *at != NULL; at = &(*at)->next) {
		if (*at == w) {
			*at = w->next;
			found = 1;
			break;
		}
	}
	dlock__mutex_unlock(&h->mu);
	return found;
}
