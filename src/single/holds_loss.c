/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How a hold is lost: marked (the gauge, the stop of its watch, its
 * watchers told), then its handle's callback and the MultiLock or RedLock
 * observing it told, outside the table's lock; a whole name's holds lost
 * at a force unlock; the parts of a MultiLock or RedLock.
 */
#include <stdint.h>
#include <string.h>

#include "core/base/alloc.h"
#include "core/base/time.h"
#include "core/drive/client.h"
#include "core/drive/stats.h"
#include "single/holds.h"
#include "single/holds_table.h"
#include "single/lock_internal.h"

/* Mark a hold lost (h->mu held) and remember it for its callbacks. */
void dlock__holds_mark_lost(dlock__holds *h, hold *x, int reason, lost_event *ev, size_t *nev)
{
	if (x->lost)
		return;
	x->lost = 1;
	x->lost_reason = reason;
	if (x->counted) {
		x->counted = 0;
		dlock__stat_lost(h->client, x->name, x->owner, reason, dlock__now_ms() - x->since);
	}
	dlock__holds_unwatch(x);
	dlock__holds_tell_watchers(x, reason);
	if (x->watchdog)
		h->watched--;
	if (ev == NULL || (x->handle == NULL && x->observer == NULL))
		return;
	ev[*nev].owner = dlock__strdup(x->owner);
	if (ev[*nev].owner == NULL)
		return; /* the state still says lost; only the callback is missed */
	ev[*nev].handle = x->handle;
	ev[*nev].observer = x->observer;
	ev[*nev].observer_arg = x->observer_arg;
	ev[*nev].reason = reason;
	(*nev)++;
}

void dlock__holds_run_callbacks(dlock__holds *h, lost_event *ev, size_t nev)
{
	size_t i;

	dlock__mutex_lock(&h->cb_mu);
	atomic_store(&h->cb_thread, dlock_thread_id());
	for (i = 0; i < nev; i++) {
		dlock_lost_cb fn = NULL;
		void *ud = NULL;
		int attached;

		/* The handle may have been detached since: only call live ones. */
		dlock__mutex_lock(&h->mu);
		attached = ev[i].handle != NULL && dlock__holds_handle_attached(h, ev[i].handle);
		dlock__mutex_unlock(&h->mu);
		if (attached) {
			dlock__lock_lost_cb(ev[i].handle, &fn, &ud);
			if (fn != NULL) {
				dlock_lost_event le = { dlock_lock_name(ev[i].handle), ev[i].owner,
					(dlock_lost_reason)ev[i].reason, dlock_client_node(h->client) };

				fn(&le, ud);
			}
		}
		if (ev[i].observer != NULL)
			ev[i].observer(ev[i].observer_arg, ev[i].owner, ev[i].reason);
		dlock__free(ev[i].owner);
	}
	atomic_store(&h->cb_thread, 0);
	dlock__mutex_unlock(&h->cb_mu);
}

int dlock__holds_cb_enter(dlock__holds *h)
{
	if (atomic_load(&h->cb_thread) == dlock_thread_id())
		return 0;
	dlock__mutex_lock(&h->cb_mu);
	return 1;
}

void dlock__holds_cb_leave(dlock__holds *h, int took)
{
	if (took)
		dlock__mutex_unlock(&h->cb_mu);
}

void dlock__holds_abandon(const dlock_lock *l, const char *owner)
{
	dlock__holds *h = l->holds;

	hold *x = dlock__holds_lock_find(h, l, owner);
	if (x != NULL)
		dlock__holds_mark_lost(h, x, 0, NULL, NULL);
	dlock__mutex_unlock(&h->mu);
}

void dlock__holds_name_deleted(dlock_lock *l, uint64_t epoch)
{
	dlock__holds *h = l->holds;
	lost_event *cb = NULL;
	size_t ncb = 0, i, n;
	hold *x;

	dlock__mutex_lock(&h->mu);
	cb = dlock__calloc(h->count ? h->count : 1, sizeof(*cb));
	n = h->nbuckets;
	for (i = 0; i < n; i++)
		for (x = h->buckets[i]; x != NULL; x = x->next)
			if (x->epoch <= epoch && x->name_len == l->name_len &&
					memcmp(x->name, l->name, l->name_len) == 0)
				dlock__holds_mark_lost(h, x, DLOCK_LOST_FORCED, cb, &ncb);
	dlock__mutex_unlock(&h->mu);
	if (cb != NULL)
		dlock__holds_run_callbacks(h, cb, ncb);
	dlock__free(cb);
}

/* h->mu held: x is a MultiLock's or RedLock's part; the lock reports, not the part. */
static void make_member(dlock__holds *h, hold *x)
{
	x->member = 1;
	if (x->counted) {
		x->counted = 0;
		atomic_fetch_sub_explicit(&h->client->stats.held, 1, memory_order_relaxed);
	}
}

void dlock__holds_member(dlock_lock *l, const char *owner)
{
	dlock__holds *h = l->holds;

	hold *x = dlock__holds_lock_find(h, l, owner);
	if (x != NULL)
		make_member(h, x);
	dlock__mutex_unlock(&h->mu);
}

void dlock__holds_leased(dlock_lock *l, const char *owner, int64_t lease_ms, int64_t sent_at)
{
	dlock__holds *h = l->holds;

	hold *x = dlock__holds_lock_find(h, l, owner);
	if (x != NULL && !x->watchdog && !x->lost && lease_ms > 0) {
		x->lease_ms = lease_ms;
		x->confirmed_at = sent_at;
	}
	dlock__mutex_unlock(&h->mu);
}

int dlock__holds_observe(dlock_lock *l, const char *owner, dlock__lost_observer observer, void *arg)
{
	dlock__holds *h = l->holds;

	hold *x = dlock__holds_lock_find(h, l, owner);
	if (x != NULL && !x->lost) {
		x->observer = observer;
		x->observer_arg = arg;
		make_member(h, x);
	}
	dlock__mutex_unlock(&h->mu);
	return x != NULL;
}

void dlock__holds_unobserve(dlock_lock *l, void *arg)
{
	dlock__holds *h = l->holds;
	size_t i;
	hold *x;
	int took = dlock__holds_cb_enter(h);

	dlock__mutex_lock(&h->mu);
	for (i = 0; i < h->nbuckets; i++)
		for (x = h->buckets[i]; x != NULL; x = x->next)
			if (x->observer_arg == arg)
				x->observer = NULL, x->observer_arg = NULL;
	dlock__mutex_unlock(&h->mu);
	dlock__holds_cb_leave(h, took);
}
