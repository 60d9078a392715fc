/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <string.h>

#include "dlock/errors.h"
#include "core/base/alloc.h"
#include "core/drive/client.h"
#include "core/drive/holder.h"
#include "core/drive/stats.h"
#include "core/topology/slot.h"
#include "core/base/time.h"
#include "single/holds.h"
#include "single/holds_table.h"
#include "single/lock_internal.h"
#include "single/scripts.h"

/* 8 bytes at a time (this runs several times per lock operation). */
static uint64_t mix(uint64_t h, const char *p, size_t n)
{
	uint64_t w;

	for (; n >= 8; p += 8, n -= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
		h ^= h >> 29;
	}
	w = 0;
	memcpy(&w, p, n);
	h = (h ^ w ^ n) * 0x9E3779B97F4A7C15ULL;
	return h ^ (h >> 32);
}

static size_t hash_key(const char *name, size_t name_len, const char *owner)
{
	return (size_t)mix(mix(0x243F6A8885A308D3ULL, name, name_len), owner, strlen(owner));
}

static hold **find_link(
		dlock__holds *h, const char *name, size_t name_len, const char *owner, char form)
{
	hold **link = &h->buckets[hash_key(name, name_len, owner) & (h->nbuckets - 1)];

	for (; *link != NULL; link = &(*link)->next)
		if ((*link)->name_len == name_len && memcmp((*link)->name, name, name_len) == 0 &&
				strcmp((*link)->owner, owner) == 0 && (*link)->form == form)
			return link;
	return link;
}

hold *dlock__holds_find(
		dlock__holds *h, const char *name, size_t name_len, const char *owner, char form)
{
	return *find_link(h, name, name_len, owner, form);
}

/* The link to l's hold of owner (where it would be), h->mu held. */
static hold **link_of(const dlock_lock *l, const char *owner)
{
	return find_link(l->holds, l->name, l->name_len, owner, dlock__lock_form(l));
}

/* l's hold of owner, or NULL; h->mu held. */
static hold *find_of(const dlock_lock *l, const char *owner)
{
	return *link_of(l, owner);
}

/* Lock the table and find owner's hold of l (NULL: none); the caller unlocks. */
static hold *lock_find(dlock__holds *h, const dlock_lock *l, const char *owner)
{
	dlock__mutex_lock(&h->mu);
	return find_of(l, owner);
}

/* Tell every watcher of x how it ended, once (h->mu held). */
static void tell_watchers(hold *x, int reason)
{
	dlock__hold_watch *w;

	while ((w = x->watchers) != NULL) {
		x->watchers = w->next;
		w->next = NULL;
		w->ended(w, reason);
	}
}

static void free_hold(hold *x)
{
	tell_watchers(x, 0);
	dlock__free(x->name);
	dlock__free(x->owner);
	dlock__free(x);
}

/* ---- the handle index: a handle's holds without walking the table ---- */

static size_t hash_ptr(const void *p)
{
	uint64_t v = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ULL;

	return (size_t)(v ^ (v >> 32));
}

/* Where handle's entry is, or would go; NULL when the index has no buckets. */
static handle_entry **handle_link(const dlock__holds *h, const dlock_lock *handle)
{
	handle_entry **e;

	if (h->nhandle_buckets == 0)
		return NULL;
	e = &h->handles[hash_ptr(handle) & (h->nhandle_buckets - 1)];
	while (*e != NULL && (*e)->handle != handle)
		e = &(*e)->next;
	return e;
}

static void handles_grow(dlock__holds *h)
{
	size_t n = h->nhandle_buckets ? h->nhandle_buckets * 2 : 16, i;
	handle_entry **b = dlock__calloc(n, sizeof(*b)), *e, *next;

	if (b == NULL)
		return; /* longer chains, still correct */
	for (i = 0; i < h->nhandle_buckets; i++)
		for (e = h->handles[i]; e != NULL; e = next) {
			size_t k = hash_ptr(e->handle) & (n - 1);

			next = e->next;
			e->next = b[k];
			b[k] = e;
		}
	dlock__free(h->handles);
	h->handles = b;
	h->nhandle_buckets = n;
}

/* x no longer belongs to a handle (h->mu held). */
static void clear_handle(dlock__holds *h, hold *x)
{
	handle_entry **link, *e;

	if (x->handle == NULL)
		return;
	if (!x->indexed) {
		h->unindexed--;
		x->handle = NULL;
		return;
	}
	link = handle_link(h, x->handle);
	e = *link;
	if (x->hprev != NULL)
		x->hprev->hnext = x->hnext;
	else
		e->holds = x->hnext;
	if (x->hnext != NULL)
		x->hnext->hprev = x->hprev;
	x->hprev = x->hnext = NULL;
	x->indexed = 0;
	x->handle = NULL;
	if (e->holds == NULL) {
		*link = e->next;
		dlock__free(e);
		h->nhandles--;
	}
}

/* x belongs to handle from now (h->mu held). Out of memory, it is left
 * out of the index, and detach and the callbacks walk the table for it. */
static void set_handle(dlock__holds *h, hold *x, dlock_lock *handle)
{
	handle_entry **link, *e;

	if (x->handle == handle)
		return;
	clear_handle(h, x);
	x->handle = handle;
	if (handle == NULL)
		return;
	if (h->nhandles >= h->nhandle_buckets)
		handles_grow(h);
	link = handle_link(h, handle);
	e = link != NULL ? *link : NULL;
	if (link != NULL && e == NULL && (e = dlock__calloc(1, sizeof(*e))) != NULL) {
		e->handle = handle;
		*link = e;
		h->nhandles++;
	}
	if (e == NULL) {
		h->unindexed++;
		return;
	}
	x->hprev = NULL;
	x->hnext = e->holds;
	if (e->holds != NULL)
		e->holds->hprev = x;
	e->holds = x;
	x->indexed = 1;
}

/* Whether handle has a hold in the table (h->mu held). */
static int handle_attached(const dlock__holds *h, const dlock_lock *handle)
{
	handle_entry **link = handle_link(h, handle);
	size_t k;
	hold *x;

	if (link != NULL && *link != NULL)
		return 1;
	/* Out of memory once, a hold of it may have stayed out of the index. */
	for (k = 0; h->unindexed > 0 && k < h->nbuckets; k++)
		for (x = h->buckets[k]; x != NULL; x = x->next)
			if (x->handle == handle)
				return 1;
	return 0;
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

static void unlink_hold(dlock__holds *h, hold **link)
{
	hold *x = *link;

	dlock__holds_unwatch(x);
	*link = x->next;
	h->count--;
	dlock__holder_held(h->client, -1);
	if (x->counted) /* ended without a release or loss to report (undone, forgotten) */
		atomic_fetch_sub_explicit(&h->client->stats.held, 1, memory_order_relaxed);
	if (x->watchdog && !x->lost)
		h->watched--;
	clear_handle(h, x);
	free_hold(x);
}

static void grow(dlock__holds *h)
{
	size_t n = h->nbuckets * 2, i;
	hold **b = dlock__calloc(n, sizeof(*b));

	if (b == NULL)
		return; /* longer chains, still correct */
	for (i = 0; i < h->nbuckets; i++) {
		hold *x = h->buckets[i], *next;

		for (; x != NULL; x = next) {
			size_t k = hash_key(x->name, x->name_len, x->owner) & (n - 1);

			next = x->next;
			x->next = b[k];
			b[k] = x;
		}
	}
	dlock__free(h->buckets);
	h->buckets = b;
	h->nbuckets = n;
}

static void holds_free(void *arg)
{
	dlock__holds *h = arg;
	size_t i;

	for (i = 0; i < h->nbuckets; i++)
		while (h->buckets[i] != NULL) {
			h->buckets[i]->watch = NULL; /* the reactors are gone already */
			unlink_hold(h, &h->buckets[i]);
		}
	dlock__free(h->buckets);
	dlock__free(h->handles); /* its entries went with their holds */
	pthread_mutex_destroy(&h->mu);
	pthread_mutex_destroy(&h->cb_mu);
	dlock__free(h);
}

dlock__holds *dlock__holds_of(dlock_client *c)
{
	dlock__holds *h;

	dlock__mutex_lock(&c->ext_mu);
	h = c->ext;
	if (h == NULL) {
		h = dlock__calloc(1, sizeof(*h));
		if (h != NULL) {
			h->nbuckets = 16;
			h->buckets = dlock__calloc(h->nbuckets, sizeof(*h->buckets));
			if (h->buckets == NULL) {
				dlock__free(h);
				h = NULL;
			}
		}
		if (h != NULL) {
			if (pthread_mutex_init(&h->mu, NULL) != 0 ||
					pthread_mutex_init(&h->cb_mu, NULL) != 0)
				abort();
			h->client = c;
			h->round_due = DLOCK__NEVER;
			h->sweep_due = DLOCK__NEVER;
			c->ext = h;
			c->ext_free = holds_free;
			dlock__reactor_set_job(c->reactor, dlock__watchdog_run,
					dlock__watchdog_stop, h);
		}
	}
	dlock__mutex_unlock(&c->ext_mu);
	return h;
}

int64_t dlock__holds_count(const dlock_lock *l, const char *owner, int trusted)
{
	dlock__holds *h = l->holds;
	int64_t n = -1;

	hold *x = lock_find(h, l, owner);
	/* A lost hold is gone from the server: nothing to adopt. */
	if (x != NULL && (trusted || x->uncertain))
		n = x->lost || x->expired ? 0 : x->count;
	dlock__mutex_unlock(&h->mu);
	return n;
}

void dlock__holds_uncertain(dlock_lock *l, const char *owner)
{
	dlock__holds *h = l->holds;

	hold *x = lock_find(h, l, owner);
	if (x != NULL)
		x->uncertain = 1;
	dlock__mutex_unlock(&h->mu);
}

/*
 * watch_force_unlock: the hold listens on its lock's channel, renewed or
 * leased alike (a message checks a leased hold without extending it, and
 * the watch ends with the lease: watchdog.c; the notice the subscription
 * brings sets that up). The node is found outside the table's lock (a cluster's
 * map may be read); the watch is made under it, so a notice that comes at
 * once finds the hold.
 */
static void watch(dlock_lock *l, const char *owner, uint64_t epoch)
{
	dlock__holds *h = l->holds;
	dlock__reactor *rx = dlock__client_reactor_for(l->client, l->channel, l->channel_len);
	hold *x;

	if (rx == NULL)
		return; /* no node known now: the renewals still find a loss */
	x = lock_find(h, l, owner);
	if (x != NULL && x->epoch == epoch && !x->lost && x->watch == NULL) {
		/* NULL when out of memory: the renewals still find a loss. */
		x->watch = dlock__sub_watch(rx, l->channel, l->channel_len, dlock__watchdog_notice, h);
		x->watch_rx = x->watch != NULL ? rx : NULL;
	}
	dlock__mutex_unlock(&h->mu);
}

int dlock__holds_acquired(dlock_lock *handle, const char *owner, int64_t count, int64_t lease_ms,
		int64_t sent_at)
{
	dlock__holds *h = handle->holds;
	const dlock_lock *l = handle;
	hold **link, *x;
	int64_t round_due = DLOCK__NEVER;
	uint64_t epoch;
	int watching;

	dlock__mutex_lock(&h->mu);
	link = link_of(l, owner);
	x = *link;
	if (x == NULL) {
		x = dlock__calloc(1, sizeof(*x));
		if (x == NULL || (x->name = dlock__strndup(l->name, l->name_len)) == NULL ||
				(x->owner = dlock__strdup(owner)) == NULL) {
			if (x != NULL)
				free_hold(x);
			dlock__mutex_unlock(&h->mu);
			return DLOCK_ENOMEM;
		}
		x->name_len = l->name_len;
		x->since = sent_at;
		x->form = dlock__lock_form(l);
		x->epoch = ++h->next_epoch;
		*link = x;
		if (++h->count > h->nbuckets)
			grow(h);
		dlock__holder_held(h->client, 1); /* keeps the registration fresh */
	} else if (x->lost || x->expired || count == 1) {
		/* A fresh hold (after a lost one, or where the server had none):
		 * the old record ends here, and so does any renewal still in
		 * flight for it. */
		if (x->watchdog && !x->lost)
			h->watched--;
		x->lost = 0;
		x->expired = 0;
		x->watchdog = 0;
		x->releasing = 0;
		x->observer = NULL;
		x->observer_arg = NULL;
		x->member = 0;
		x->epoch = ++h->next_epoch;
		x->since = sent_at;
	}
	x->count = count;
	x->uncertain = 0;
	set_handle(h, x, handle);
	x->lease_ms = lease_ms < 0 ? h->client->opts.watchdog_timeout_ms : lease_ms;
	x->confirmed_at = sent_at;
	if (!x->counted && !x->member) {
		x->counted = 1;
		dlock__stat_held(h->client);
	}
	if (lease_ms < 0 && !x->watchdog) {
		x->watchdog = 1;
		if (h->watched++ == 0)
			round_due = h->round_due =
					dlock__now_ms() + h->client->opts.watchdog_timeout_ms / 3;
	}
	watching = x->watch == NULL && h->client->opts.watch_force_unlock;
	epoch = x->epoch;
	dlock__mutex_unlock(&h->mu);
	if (round_due != DLOCK__NEVER)
		dlock__reactor_schedule(h->client->reactor, round_due);
	if (watching)
		watch(handle, owner, epoch);
	return 0;
}

int64_t dlock__holds_lease(const dlock_lock *l, const char *owner)
{
	dlock__holds *h = l->holds;
	int64_t lease;

	hold *x = lock_find(h, l, owner);
	/* Unknown (taken by another process): leave the key's TTL alone. */
	lease = x != NULL ? x->lease_ms : 0;
	dlock__mutex_unlock(&h->mu);
	return lease;
}

static int released(dlock_lock *l, const char *owner, int64_t left, int report);

int dlock__holds_released(dlock_lock *l, const char *owner, int64_t left)
{
	return released(l, owner, left, 1);
}

void dlock__holds_undone(dlock_lock *l, const char *owner, int64_t left)
{
	released(l, owner, left, 0);
}

static int released(dlock_lock *l, const char *owner, int64_t left, int report)
{
	dlock__holds *h = l->holds;
	hold **link;
	int was_lost = 0;
	int64_t held_ms = -1; /* the hold's time, when this release ended it */

	dlock__mutex_lock(&h->mu);
	link = link_of(l, owner);
	if (*link != NULL) {
		was_lost = (*link)->lost;
		if (left > 0) {
			(*link)->count = left;
		} else {
			/* The last hold went (left 0): RELEASED. The server having
			 * none (left < 0) is a loss the caller reports as DLOCK_ELOST. */
			if (report && left == 0 && (*link)->counted && !was_lost) {
				(*link)->counted = 0;
				held_ms = dlock__now_ms() - (*link)->since;
			}
			unlink_hold(h, link);
		}
	}
	dlock__mutex_unlock(&h->mu);
	if (held_ms >= 0)
		dlock__stat_released(h->client, l->name, owner, held_ms);
	return was_lost;
}

uint64_t dlock__holds_release_begin(dlock_lock *l, const char *owner)
{
	dlock__holds *h = l->holds;
	uint64_t epoch = 0;

	hold *x = lock_find(h, l, owner);
	if (x != NULL) {
		x->releasing++;
		epoch = x->epoch;
	}
	dlock__mutex_unlock(&h->mu);
	return epoch;
}

void dlock__holds_release_end(dlock_lock *l, const char *owner, uint64_t epoch)
{
	dlock__holds *h = l->holds;

	hold *x = lock_find(h, l, owner);
	if (x != NULL && x->epoch == epoch && x->releasing > 0)
		x->releasing--;
	dlock__mutex_unlock(&h->mu);
}

void dlock__holds_unsure_release(dlock_lock *l, const char *owner)
{
	dlock__holds *h = l->holds;
	hold **link;

	dlock__mutex_lock(&h->mu);
	link = link_of(l, owner);
	if (*link != NULL) {
		if ((*link)->count > 1 && !(*link)->lost)
			(*link)->count--;
		else
			unlink_hold(h, link);
	}
	dlock__mutex_unlock(&h->mu);
}

/*
 * Whether the key may have expired by now (h->mu held): its TTL ran from no
 * earlier than confirmed_at, less the drift a fast server clock may add
 * (Redlock's drift factor, 0.01). A watchdog hold whose renewals stopped
 * reaching the server, or a leased hold past its lease, is no longer held,
 * however late the background thread runs.
 */
int64_t dlock__holds_valid_until(const dlock__holds *h, const hold *x)
{
	int64_t ttl = x->watchdog ? h->client->opts.watchdog_timeout_ms : x->lease_ms;

	return x->confirmed_at + ttl - ttl / 100 - DLOCK__DRIFT_FLOOR_MS;
}

int dlock__holds_expired(const dlock__holds *h, const hold *x, int64_t now)
{
	return now >= dlock__holds_valid_until(h, x);
}

int dlock__holds_state(const dlock_lock *l, const char *owner)
{
	dlock__holds *h = l->holds;
	int rc;

	hold *x = lock_find(h, l, owner);
	if (x == NULL)
		rc = DLOCK_ENOTOWNER;
	else if (x->lost || x->expired)
		rc = DLOCK_ELOST;
	else if (x->releasing == 0 && dlock__holds_expired(h, x, dlock__now_ms()))
		rc = DLOCK_ELOST, x->expired = 1; /* the watchdog reports it (callbacks) */
	else
		rc = 0;
	dlock__mutex_unlock(&h->mu);
	return rc;
}

int dlock__holds_validity(const dlock_lock *l, const char *owner, int64_t *ms)
{
	dlock__holds *h = l->holds;
	int rc = DLOCK_ENOTOWNER;

	*ms = 0;
	hold *x = lock_find(h, l, owner);
	if (x != NULL && (x->lost || x->expired))
		rc = DLOCK_ELOST;
	else if (x != NULL)
		*ms = dlock__holds_valid_until(h, x) - dlock__now_ms();
	if (x != NULL && rc == DLOCK_ENOTOWNER)
		rc = *ms > 0 ? 0 : DLOCK_ELOST;
	if (*ms < 0)
		*ms = 0;
	dlock__mutex_unlock(&h->mu);
	return rc;
}

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
	tell_watchers(x, reason);
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
	for (i = 0; i < nev; i++) {
		dlock_lost_cb fn = NULL;
		void *ud = NULL;
		int attached;

		/* The handle may have been detached since: only call live ones. */
		dlock__mutex_lock(&h->mu);
		attached = ev[i].handle != NULL && handle_attached(h, ev[i].handle);
		dlock__mutex_unlock(&h->mu);
		if (attached) {
			dlock__lock_lost_cb(ev[i].handle, &fn, &ud);
			if (fn != NULL)
				fn(ev[i].handle, ev[i].owner, ev[i].reason, ud);
		}
		if (ev[i].observer != NULL)
			ev[i].observer(ev[i].observer_arg, ev[i].owner, ev[i].reason);
		dlock__free(ev[i].owner);
	}
	dlock__mutex_unlock(&h->cb_mu);
}

void dlock__holds_abandon(const dlock_lock *l, const char *owner)
{
	dlock__holds *h = l->holds;

	hold *x = lock_find(h, l, owner);
	if (x != NULL)
		dlock__holds_mark_lost(h, x, 0, NULL, NULL);
	dlock__mutex_unlock(&h->mu);
}

uint64_t dlock__holds_epoch(const dlock_lock *l)
{
	dlock__holds *h = l->holds;
	uint64_t epoch;

	dlock__mutex_lock(&h->mu);
	epoch = h->next_epoch;
	dlock__mutex_unlock(&h->mu);
	return epoch;
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

void dlock__holds_detach(dlock_lock *handle)
{
	dlock__holds *h = handle->holds;
	handle_entry **e;
	size_t i;

	dlock__mutex_lock(&h->cb_mu);
	dlock__mutex_lock(&h->mu);
	/* Its holds by the index: freeing each of 100,000 handles must not
	 * walk a table grown for all their holds. */
	while ((e = handle_link(h, handle)) != NULL && *e != NULL) {
		hold *x = (*e)->holds;

		unlink_hold(h, find_link(h, x->name, x->name_len, x->owner, x->form));
	}
	/* Out of memory once, a hold of it may have stayed out of the index. */
	for (i = 0; h->unindexed > 0 && i < h->nbuckets; i++) {
		hold **link = &h->buckets[i];

		while (*link != NULL) {
			if ((*link)->handle == handle)
				unlink_hold(h, link);
			else
				link = &(*link)->next;
		}
	}
	dlock__mutex_unlock(&h->mu);
	dlock__mutex_unlock(&h->cb_mu);
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

	hold *x = lock_find(h, l, owner);
	if (x != NULL)
		make_member(h, x);
	dlock__mutex_unlock(&h->mu);
}

int dlock__holds_observe(dlock_lock *l, const char *owner, dlock__lost_observer observer, void *arg)
{
	dlock__holds *h = l->holds;

	hold *x = lock_find(h, l, owner);
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

	dlock__mutex_lock(&h->cb_mu);
	dlock__mutex_lock(&h->mu);
	for (i = 0; i < h->nbuckets; i++)
		for (x = h->buckets[i]; x != NULL; x = x->next)
			if (x->observer_arg == arg)
				x->observer = NULL, x->observer_arg = NULL;
	dlock__mutex_unlock(&h->mu);
	dlock__mutex_unlock(&h->cb_mu);
}

int dlock__holds_watch_add(dlock_lock *l, const char *owner, dlock__hold_watch *w, int *reason)
{
	dlock__holds *h = l->holds;
	hold *x = lock_find(h, l, owner);
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
	hold *x = lock_find(h, l, owner);
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
