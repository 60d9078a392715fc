/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: what one client knows of the holds taken through it, per lock
 * name and owner, and the watchdog that renews them.
 *
 * The count is the last one the server reported, so a retried acquire can
 * tell whether its lost first attempt applied (see scripts.c). Holds taken
 * without a lease are renewed by the client's background thread every third
 * of the watchdog timeout, many per EVAL. A renewal that finds the hold gone,
 * or that cannot reach the server until the TTL must have run out, marks it
 * LOST: renewal stops and the handle's callback runs.
 */
#ifndef DLOCK_SINGLE_HOLDS_H
#define DLOCK_SINGLE_HOLDS_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/lock.h"

typedef struct dlock__holds dlock__holds;

/* The registry of a client, made on first use. NULL when out of memory. */
dlock__holds *dlock__holds_of(dlock_client *client);

/*
 * The hold count the client believes `owner` has: -1 when it has no record.
 * With `trusted` 0 (an explicit owner, which others may share) the count is
 * only given when an acquire of it ended without an answer, else -1.
 */
int64_t dlock__holds_count(const dlock_lock *l, const char *owner, int trusted);

/* An acquire for owner ended without an answer: it may or may not have counted. */
void dlock__holds_uncertain(dlock_lock *l, const char *owner);

/*
 * Record a successful acquire: the server now shows `count` holds. lease_ms
 * < 0 means watchdog. sent_at is when the acquire was sent (the TTL runs from
 * no earlier than that). `handle` receives the lost callback.
 * Returns 0 or DLOCK_ENOMEM (then nothing is renewed: the caller releases).
 */
int dlock__holds_acquired(dlock_lock *handle, const char *owner, int64_t count, int64_t lease_ms,
		int64_t sent_at);

/* The lease to keep on the key after a partial release (Redisson's internalLockLeaseTime);
 * 0 when the client has no record: keep the key's TTL. */
int64_t dlock__holds_lease(const dlock_lock *l, const char *owner);

/*
 * Record a release: `left` holds remain (0 forgets the hold), or left < 0
 * for "the server says owner holds nothing". Returns 1 when the hold had
 * been found lost before, else 0.
 */
int dlock__holds_released(dlock_lock *l, const char *owner, int64_t left);

/*
 * A release of owner's hold is on its way (begin, before it is sent) or
 * settled (end, with begin's result, after its answer was recorded).
 * Meanwhile a renewal that finds the hold gone is not a loss: the release
 * may have run first. begin returns 0 when there is no record.
 */
/* The same for an acquisition taken back (a rollback): not a release. */
void dlock__holds_undone(dlock_lock *l, const char *owner, int64_t left);

/* owner's hold is a MultiLock's or RedLock's part: no events or gauge of
 * its own (the lock reports its own, dlock/stats.h). */
void dlock__holds_member(dlock_lock *l, const char *owner);

/* owner's leased hold had its key set to lease_ms by a command sent at
 * sent_at (a MultiLock/RedLock member taken on a provisional lease, then
 * finalized): its validity counts from there. A watchdog hold is left alone. */
void dlock__holds_leased(dlock_lock *l, const char *owner, int64_t lease_ms, int64_t sent_at);

uint64_t dlock__holds_release_begin(dlock_lock *l, const char *owner);
void dlock__holds_release_end(dlock_lock *l, const char *owner, uint64_t epoch);

/*
 * A release whose answer never came (the server timed out or the connection
 * dropped) or was an error: count it as done, so that when it was the last
 * hold the watchdog stops renewing it - the unlock was asked for; if the
 * release never ran, the key expires by its TTL instead of being renewed
 * forever.
 */
void dlock__holds_unsure_release(dlock_lock *l, const char *owner);

/*
 * The MultiLock or RedLock this hold is a member of was lost: the hold is
 * worth nothing to its owner any more, so stop renewing it (it counts as
 * lost, without a callback of its own) and let the key expire, rather than
 * keep blocking everyone else until the owner unlocks.
 */
void dlock__holds_abandon(const dlock_lock *l, const char *owner);

/* The latest hold recorded so far (its epoch: later holds have greater ones). */
uint64_t dlock__holds_epoch(const dlock_lock *l);

/* Force unlock: every local hold of the name recorded by `epoch` (read
 * before the unlock was sent) is lost (callbacks run). A hold recorded
 * since may have been taken after the unlock ran - a waiter it woke - and
 * is left alone: if the unlock deleted it after all, its renewal or
 * release finds out. */
void dlock__holds_name_deleted(dlock_lock *l, uint64_t epoch);

/* 0 held, DLOCK_ELOST lost, DLOCK_ENOTOWNER no record. */
int dlock__holds_state(const dlock_lock *l, const char *owner);

/* As dlock__holds_state(), and *ms = how long the key is certain to last
 * without another renewal reaching the server (0 unless held). */
int dlock__holds_validity(const dlock_lock *l, const char *owner, int64_t *ms);

/* The handle is going away: its holds stop being renewed; waits for a running callback. */
void dlock__holds_detach(dlock_lock *handle);

/*
 * A MultiLock or RedLock that counts on a member hold registers itself to
 * hear of its loss (on the client's background thread). Returns 1 when the
 * hold exists. unobserve removes every registration of `arg` and waits for a
 * running notification to finish.
 */
typedef void (*dlock__lost_observer)(void *arg, const char *owner, int reason);
int dlock__holds_observe(
		dlock_lock *l, const char *owner, dlock__lost_observer observer, void *arg);
void dlock__holds_unobserve(dlock_lock *l, void *arg);

/*
 * Told once how a hold ends: lost (`reason` a dlock_lost_reason) or gone
 * from the table, released (0). `ended` runs with the table locked, from
 * whatever thread saw it: it must only note and post (watch_op.c).
 */
typedef struct dlock__hold_watch {
	void (*ended)(struct dlock__hold_watch *w, int reason);
	struct dlock__hold_watch *next;
} dlock__hold_watch;

/* Add w to owner's hold: 0, or DLOCK_ENOTOWNER (no hold), or DLOCK_ELOST
 * (lost already; *reason says why) - w not added then. */
int dlock__holds_watch_add(dlock_lock *l, const char *owner, dlock__hold_watch *w, int *reason);

/* Take w off again: 1, or 0 when it was told already (its `ended` ran). */
int dlock__holds_watch_remove(dlock_lock *l, const char *owner, dlock__hold_watch *w);

/*
 * watch_force_unlock for what is not a hold (a semaphore's renewed
 * permits): it listens on `channel` through the client's reactor, with
 * the holds' notice, and `heard` runs at every notice for it (a message
 * there, or a subscription made anew) - on the reactor's thread with the
 * table locked: it must only note and post. Returns 0, or -1 when no node
 * serves the channel now or out of memory (then only renewals find a
 * loss). Every listen that returned 0 is matched by an unlisten, which
 * returns once `heard` cannot run any more.
 */
typedef struct dlock__channel_watch {
	void (*heard)(struct dlock__channel_watch *w);
	struct dlock__sub *sub; /* private */
	struct dlock__reactor *rx;
	struct dlock__channel_watch *next;
} dlock__channel_watch;

int dlock__holds_listen(dlock_client *c, const char *channel, size_t len, dlock__channel_watch *w);
void dlock__holds_unlisten(dlock_client *c, dlock__channel_watch *w);

/* The handle's callback, read by the watchdog under the callback lock. */
void dlock__lock_lost_cb(dlock_lock *handle, dlock_lost_cb *cb, void **userdata);

#endif
