/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal to single/: the hold table's records, shared by holds.c (the
 * table's records), holds_index.c (finding them), holds_watch.c (what
 * listens to them), holds_loss.c (losses and observers) and watchdog.c
 * (the renewals). Nothing outside single/ includes it.
 */
#ifndef DLOCK_SINGLE_HOLDS_TABLE_H
#define DLOCK_SINGLE_HOLDS_TABLE_H

#include <pthread.h>
#include <stdint.h>

#include "core/drive/reactor.h"
#include "single/holds.h"

/* Redlock's constant drift allowance on top of the 1% (ms). */
#define DLOCK__DRIFT_FLOOR_MS 2

typedef struct hold {
	char *name;
	size_t name_len;
	char *owner;
	char form; /* dlock__lock_form: a read and a write hold of one owner are two */
	uint64_t epoch; /* distinguishes a hold from a later one of the same key */
	int64_t count;
	int64_t lease_ms; /* kept on the key after a partial release */
	int watchdog;
	int lost;
	int lost_reason;      /* a dlock_lost_reason, once lost */
	int expired;          /* check() saw the TTL run out: lost, whatever a late renewal says */
	int uncertain;        /* an acquire got no answer: compare counts on the next one */
	int releasing;        /* releases of it on their way: "gone" may be their doing */
	int64_t confirmed_at; /* the TTL was last set no earlier than this */
	int64_t since;        /* acquired (sent) at, for hold_ms (dlock/stats.h) */
	int counted;          /* in the client's held gauge: a hold of its own, not yet ended */
	int member;           /* a MultiLock/RedLock's part: its events are the lock's */
	dlock_lock *handle;
	dlock__lost_observer observer; /* a MultiLock/RedLock that counts on this hold */
	void *observer_arg;
	dlock__sub *watch; /* watch_force_unlock: listening on the lock's channel (leased too) */
	dlock__reactor *watch_rx;
	int check; /* a message came there: renew it now, out of turn (a leased one: check it) */
	dlock__hold_watch *watchers; /* told once how the hold ends (watch_op.c) */
	int indexed;                 /* in its handle's list (the table's handle index) */
	struct hold *hprev, *hnext;  /* its handle's holds */
	struct hold *next;
} hold;

/* A handle's holds, found by the handle without walking the table. */
typedef struct handle_entry {
	dlock_lock *handle;
	hold *holds;
	struct handle_entry *next;
} handle_entry;

struct dlock__holds {
	dlock_client *client;
	pthread_mutex_t mu;    /* the table */
	pthread_mutex_t cb_mu; /* held while a lost callback runs, so detach can wait for it */
	_Atomic uint64_t cb_thread; /* the thread running them (0: none): it may detach */
	hold **buckets;
	size_t nbuckets;
	size_t count;
	size_t watched; /* holds with watchdog and not lost */
	uint64_t next_epoch;
	int64_t round_due; /* the watchdog's next round of every hold (DLOCK__NEVER: none) */
	int64_t sweep_due; /* a watching leased hold's lease ends: stop its watch then */
	handle_entry **handles; /* the handle index: handle -> its holds */
	size_t nhandle_buckets, nhandles;
	size_t unindexed; /* holds whose handle the index lacks (out of memory) */
	struct dlock__renewing *renewing; /* the round on the reactor's loop (its thread only) */
	int again;                        /* the job ran during that round: run once more */
	dlock__channel_watch *listening;  /* others on the holds' notice (dlock__holds_listen) */
};

/* A loss to report once the table is unlocked. */
typedef struct lost_event {
	dlock_lock *handle;
	char *owner;
	dlock__lost_observer observer;
	void *observer_arg;
	int reason; /* dlock_lost_reason */
} lost_event;

/* One renewal in flight: copies, so the table may change meanwhile. */
typedef struct renewal {
	char *name;
	size_t name_len;
	char *owner;
	char form;   /* the hold's dlock__lock_form */
	int check;   /* a leased hold a message asked to check: the lease is not extended */
	char how[3]; /* what the renew script reads: the form, after "-" for a check */
	uint64_t epoch;
	unsigned slot; /* the name's cluster slot: one EVAL's keys share one */
} renewal;

/* Finding holds (holds_index.c), h->mu held unless said. */
/* The hold of (name, owner, form), or NULL. */
hold *dlock__holds_find(dlock__holds *h, const char *name, size_t name_len, const char *owner,
		char form);
/* The link to that hold (where it would be). */
hold **dlock__holds_link(dlock__holds *h, const char *name, size_t name_len, const char *owner,
		char form);
/* The link to l's hold of owner (where it would be). */
hold **dlock__holds_link_of(const dlock_lock *l, const char *owner);
/* Lock the table (h->mu not held) and find owner's hold of l (NULL: none);
 * the caller unlocks. */
hold *dlock__holds_lock_find(dlock__holds *h, const dlock_lock *l, const char *owner);
/* Twice the buckets, once there are more holds than buckets. */
void dlock__holds_grow(dlock__holds *h);
/* Where handle's entry in the handle index is, or would go; NULL when the
 * index has no buckets. */
handle_entry **dlock__holds_handle_link(const dlock__holds *h, const dlock_lock *handle);
/* x no longer belongs to a handle. */
void dlock__holds_clear_handle(dlock__holds *h, hold *x);
/* x belongs to handle from now (out of memory, left out of the index). */
void dlock__holds_set_handle(dlock__holds *h, hold *x, dlock_lock *handle);
/* Whether handle has a hold in the table. */
int dlock__holds_handle_attached(const dlock__holds *h, const dlock_lock *handle);
/* What listens to a hold (holds_watch.c). */
/* Tell every watcher of x how it ended, once (h->mu held). */
void dlock__holds_tell_watchers(hold *x, int reason);
/* watch_force_unlock: owner's hold of l, recorded as `epoch`, listens on
 * the lock's channel (h->mu not held; the node is found outside it). */
void dlock__holds_watch(dlock_lock *l, const char *owner, uint64_t epoch);

/* Whether the key may have expired by now without a renewal (h->mu held). */
int dlock__holds_expired(const dlock__holds *h, const hold *x, int64_t now);
/* From when it may have: the last confirmed renewal plus the TTL, less drift (h->mu held). */
int64_t dlock__holds_valid_until(const dlock__holds *h, const hold *x);
/* Mark a hold lost (h->mu held; holds_loss.c), remembering it in ev[*nev]
 * for its callbacks. */
void dlock__holds_mark_lost(dlock__holds *h, hold *x, int reason, lost_event *ev, size_t *nev);
/* Run the callbacks of the losses in ev (h->mu not held) and free their owners. */
void dlock__holds_run_callbacks(dlock__holds *h, lost_event *ev, size_t nev);
/* Wait out lost callbacks running on other threads (cb_mu), unless this
 * thread is the one running them (a callback freeing its handle): 1 when
 * it took cb_mu, to hand to dlock__holds_cb_leave(). */
int dlock__holds_cb_enter(dlock__holds *h);
void dlock__holds_cb_leave(dlock__holds *h, int took);
/* The reactor's job that renews every watched hold (watchdog.c), and
 * between its rounds the holds a notice asked to check. */
int64_t dlock__watchdog_run(void *arg, int64_t now);
/* The reactor is stopping: a round under way ends (core/drive/reactor.h). */
void dlock__watchdog_stop(void *arg, int forked);
/* A reactor's notice (core/drive/reactor.h): the holds listening on s are checked now. */
void dlock__watchdog_notice(void *arg, const dlock__sub *s);
/* Stop listening on the hold's channel (h->mu held). */
void dlock__holds_unwatch(hold *x);
/* Listen on the hold's channel at rx from now on (h->mu held): in a
 * cluster, where its slot moved. */
void dlock__holds_rewatch(dlock__holds *h, hold *x, dlock__reactor *rx);

#endif
