/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: the client's background work, on its loop (core/loop/loop.h): the
 * client's own thread, or the caller's event loop.
 *
 * It owns the pub/sub connection: local waiters listen on a channel (one
 * SUBSCRIBE per client and channel, shared by every local waiter, and an
 * UNSUBSCRIBE when the last one leaves) and are told when an unlock
 * message comes. Holds may listen on the same subscriptions
 * (watchers): a message there, or a subscription made anew, tells them to
 * look at their lock (a force unlock). It also runs one periodic job (the
 * watchdog of the single layer), so one thread per client does all
 * background work.
 */
#ifndef DLOCK_CORE_REACTOR_H
#define DLOCK_CORE_REACTOR_H

#include <stdint.h>

#include "core/net/conn.h"

struct dlock_loop;
typedef struct dlock__reactor dlock__reactor;
typedef struct dlock__sub dlock__sub;

/* The periodic job: runs on the reactor thread at its due time and returns
 * the next due time (monotonic ms; DLOCK__NEVER for none). */
typedef int64_t (*dlock__reactor_job)(void *arg, int64_t now);

/* On `loop` (the caller's), or with NULL on a loop of its own driven by a
 * thread of its own. */
int dlock__reactor_start(dlock__reactor **out, const dlock__node *node, struct dlock_loop *loop);

/* Stop the thread and free everything. No sub may still be joined.
 * forked: this is a child forked after the start, where the thread does not
 * exist: only free this process's copy. */
void dlock__reactor_stop(dlock__reactor *r, int forked);

/* Install the periodic job (once). `stop` (may be NULL) runs at the
 * reactor's stop, its thread joined and its loop still there, to end what
 * the job left under way on the loop (`forked`: in a forked child). */
void dlock__reactor_set_job(dlock__reactor *r, dlock__reactor_job job,
		void (*stop)(void *arg, int forked), void *arg);

/* Ask for the job to run no later than `due`. */
void dlock__reactor_schedule(dlock__reactor *r, int64_t due);

/* A second, one-shot task (the client's flush of deferred commands): set it
 * once, then ask for it to run no later than `due` (r NULL: nothing). `stop`
 * (may be NULL) runs at the reactor's stop as the job's does. */
void dlock__reactor_set_flush(dlock__reactor *r, void (*flush)(void *arg),
		void (*stop)(void *arg, int forked), void *arg);
void dlock__reactor_flush_at(dlock__reactor *r, int64_t due);

/*
 * What the holds listening on a channel are told, on the reactor thread with
 * no lock of the reactor held: an unlock message came on s, or messages may
 * have gone unheard (s was subscribed anew, or the connection dropped).
 * It must not block: it asks for a check and returns.
 */
typedef void (*dlock__reactor_notice)(void *arg, const dlock__sub *s);

/*
 * Listen on the channel for a hold: the same subscription as its waiters
 * (one per channel, shared with them). Once the subscription is active the
 * notice runs (an unlock before it went unheard), and then at every message.
 * One notice and arg per reactor: every call passes the same. Returns NULL
 * only when out of memory. Every watch is matched by an unwatch.
 */
dlock__sub *dlock__sub_watch(dlock__reactor *r, const char *channel, size_t len,
		dlock__reactor_notice notice, void *arg);
void dlock__sub_unwatch(dlock__reactor *r, dlock__sub *s);

/*
 * A waiter for a lock, blocking or not (single/wait.c): it has `task`
 * posted to its `loop` when the subscription becomes active (also at once
 * when it already is: an unlock may have gone unheard), when the connection
 * drops, and at an unlock message - every waiter for "1", the one that
 * waited longest for "0" (Redisson's UNLOCK_MESSAGE) - and looks at the
 * lock then. One woken that stops listening before it looked passes the
 * wake-up on. Every listen is matched by an unlisten.
 */
struct dlock__task;
typedef struct dlock__listener {
	struct dlock_loop *loop;
	struct dlock__task *task;
	/* Woken by every message, "0" included: a countdown latch's waiters,
	 * whose "0" (the count reached zero) is news for all of them. */
	int every_message;
	struct dlock__listener *next; /* private */
} dlock__listener;

dlock__sub *dlock__sub_listen(dlock__reactor *r, const char *channel, size_t len,
		dlock__listener *li);
void dlock__sub_unlisten(dlock__reactor *r, dlock__sub *s, dlock__listener *li);

/*
 * dlock's own channel beside a lock's (single/acquire_wait.c): a waiter that
 * takes the lock publishes "<lease ms>:<listeners>" on
 * dlock_lock__taken:{name}, so the other waiting processes know the lock is
 * taken and by how many they wait, without asking the server. Each message
 * wakes every listener of the channel; dlock__sub_note reads the last one:
 * its count (changed: a new note), lease and listeners, and in
 * *other_since (may be NULL) whether a message came on `other` (a sub of
 * the same reactor: the lock's channel) after it - an unlock that the
 * note must not hide, however the waiter's tasks were queued.
 */
#define DLOCK__TAKEN_PREFIX "dlock_lock__taken:"
uint64_t dlock__sub_note(dlock__reactor *r, const dlock__sub *s, int64_t *lease, int64_t *n,
		const dlock__sub *other, int *other_since);

/* Whether it has a thread of its own (else the caller's loop drives it). */
int dlock__reactor_own_thread(const dlock__reactor *r);

/* The loop the reactor runs on. */
struct dlock_loop *dlock__reactor_loop(const dlock__reactor *r);

/* The channel of a sub joined or watched (fixed for its life). */
const char *dlock__sub_channel(const dlock__sub *s, size_t *len);

/* Wake every waiter of every channel (they look at their cancel state). */
void dlock__reactor_wake_waiters(dlock__reactor *r);

/* Test hook: number of channels the reactor believes subscribed or pending. */
int dlock__reactor_channel_count(dlock__reactor *r);

#endif
