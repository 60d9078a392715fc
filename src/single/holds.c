/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hold table's records: made or renewed at an acquisition, counted
 * down at a release, asked for their count, lease, state and validity;
 * the table itself, made per client on first use and freed with it.
 */
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

static void free_hold(hold *x)
{
	dlock__holds_tell_watchers(x, 0);
	dlock__free(x->name);
	dlock__free(x->owner);
	dlock__free(x);
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
	dlock__holds_clear_handle(h, x);
	free_hold(x);
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

	hold *x = dlock__holds_lock_find(h, l, owner);
	/* A lost hold is gone from the server: nothing to adopt. */
	if (x != NULL && (trusted || x->uncertain))
		n = x->lost || x->expired ? 0 : x->count;
	dlock__mutex_unlock(&h->mu);
	return n;
}

void dlock__holds_uncertain(dlock_lock *l, const char *owner)
{
	dlock__holds *h = l->holds;

	hold *x = dlock__holds_lock_find(h, l, owner);
	if (x != NULL)
		x->uncertain = 1;
	dlock__mutex_unlock(&h->mu);
}

/* A new record of owner's hold of l at *link (h->mu held); NULL when out of memory. */
static hold *new_hold(dlock__holds *h, const dlock_lock *l, const char *owner, hold **link,
		int64_t sent_at)
{
	hold *x = dlock__calloc(1, sizeof(*x));

	if (x == NULL || (x->name = dlock__strndup(l->name, l->name_len)) == NULL ||
			(x->owner = dlock__strdup(owner)) == NULL) {
		if (x != NULL)
			free_hold(x);
		return NULL;
	}
	x->name_len = l->name_len;
	x->since = sent_at;
	x->form = dlock__lock_form(l);
	x->epoch = ++h->next_epoch;
	*link = x;
	if (++h->count > h->nbuckets)
		dlock__holds_grow(h);
	dlock__holder_held(h->client, 1); /* keeps the registration fresh */
	return x;
}

/* A fresh hold (after a lost one, or where the server had none): the old
 * record ends here, and so does any renewal still in flight for it (h->mu held). */
static void restart_hold(dlock__holds *h, hold *x, int64_t sent_at)
{
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

/* What the server now shows, into x (h->mu held); returns when the
 * watchdog's first round is due, when x is the first hold it renews
 * (DLOCK__NEVER: not). */
static int64_t record_hold(dlock__holds *h, hold *x, dlock_lock *handle, int64_t count,
		int64_t lease_ms, int64_t sent_at)
{
	int64_t round_due = DLOCK__NEVER;

	x->count = count;
	x->uncertain = 0;
	dlock__holds_set_handle(h, x, handle);
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
	return round_due;
}

int dlock__holds_acquired(dlock_lock *handle, const char *owner, int64_t count, int64_t lease_ms,
		int64_t sent_at)
{
	dlock__holds *h = handle->holds;
	const dlock_lock *l = handle;
	hold **link, *x;
	int64_t round_due;
	uint64_t epoch;
	int watching;

	dlock__mutex_lock(&h->mu);
	link = dlock__holds_link_of(l, owner);
	x = *link;
	if (x == NULL)
		x = new_hold(h, l, owner, link, sent_at);
	else if (x->lost || x->expired || count == 1)
		restart_hold(h, x, sent_at);
	if (x == NULL) {
		dlock__mutex_unlock(&h->mu);
		return DLOCK_ENOMEM;
	}
	round_due = record_hold(h, x, handle, count, lease_ms, sent_at);
	watching = x->watch == NULL && h->client->opts.watch_force_unlock;
	epoch = x->epoch;
	dlock__mutex_unlock(&h->mu);
	if (round_due != DLOCK__NEVER)
		dlock__reactor_schedule(h->client->reactor, round_due);
	if (watching)
		dlock__holds_watch(handle, owner, epoch);
	return 0;
}

int64_t dlock__holds_lease(const dlock_lock *l, const char *owner)
{
	dlock__holds *h = l->holds;
	int64_t lease;

	hold *x = dlock__holds_lock_find(h, l, owner);
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
	link = dlock__holds_link_of(l, owner);
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

	hold *x = dlock__holds_lock_find(h, l, owner);
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

	hold *x = dlock__holds_lock_find(h, l, owner);
	if (x != NULL && x->epoch == epoch && x->releasing > 0)
		x->releasing--;
	dlock__mutex_unlock(&h->mu);
}

void dlock__holds_unsure_release(dlock_lock *l, const char *owner)
{
	dlock__holds *h = l->holds;
	hold **link;

	dlock__mutex_lock(&h->mu);
	link = dlock__holds_link_of(l, owner);
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

	hold *x = dlock__holds_lock_find(h, l, owner);
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
	hold *x = dlock__holds_lock_find(h, l, owner);
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

uint64_t dlock__holds_epoch(const dlock_lock *l)
{
	dlock__holds *h = l->holds;
	uint64_t epoch;

	dlock__mutex_lock(&h->mu);
	epoch = h->next_epoch;
	dlock__mutex_unlock(&h->mu);
	return epoch;
}

void dlock__holds_detach(dlock_lock *handle)
{
	dlock__holds *h = handle->holds;
	handle_entry **e;
	size_t i;
	int took = dlock__holds_cb_enter(h);

	dlock__mutex_lock(&h->mu);
	/* Its holds by the index: freeing each of 100,000 handles must not
	 * walk a table grown for all their holds. */
	while ((e = dlock__holds_handle_link(h, handle)) != NULL && *e != NULL) {
		hold *x = (*e)->holds;

		unlink_hold(h, dlock__holds_link(h, x->name, x->name_len, x->owner, x->form));
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
	dlock__holds_cb_leave(h, took);
}
