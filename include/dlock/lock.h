/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/lock.h - RLock: a reentrant lock on one Redis server, Redisson's
 * data layout (a HASH `<name>`: `<uuid>:<thread-id>` -> hold count), and
 * its fair and fenced kinds and the two halves of its RReadWriteLock
 * (dlock_lock_kind).
 *
 * Owners. By default the owner is the calling thread (`<client-uuid>:<tid>`),
 * so a thread must release what it took, as many times as it took it. The
 * `_as` variants take an explicit owner string, used verbatim as the hash
 * field (a write half appends ":write", as Redisson's writeLock() does), for
 * code that acquires in one thread and releases in another (build one with
 * dlock_client_owner(), or share a Redisson client's owner).
 *
 * Leases. lease_ms > 0: the lock expires after lease_ms and is never renewed.
 * DLOCK_LEASE_WATCHDOG: the key lives for the client's watchdog timeout and the
 * client renews it every third of that while the owner holds it; if a renewal
 * finds the hold gone (or cannot reach the server before the TTL would have
 * run out) the hold is LOST: renewal stops, the lost callback runs and
 * dlock_lock_check() reports DLOCK_ELOST.
 *
 * A lock handle may be shared by threads; the lost callback must be set before
 * that. All functions return 0 or a negative DLOCK_E* code; the handle's
 * dlock_lock_errmsg() says which node answered what.
 */
#ifndef DLOCK_LOCK_H
#define DLOCK_LOCK_H

#include "common.h"
#include "async.h"
#include "client.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_lock dlock_lock;

/** The kinds of single-server lock; every function works on each. */
typedef enum dlock_lock_kind {
	/** Redisson's RLock. */
	DLOCK_LOCK_PLAIN = 0,
	/**
	 * Redisson's RFairLock: waiters get the lock in the order they asked for
	 * it, across processes and languages (the queue
	 * `redisson_lock_queue:{name}` and deadlines `redisson_lock_timeout:{name}`),
	 * and a release wakes only the first in line. A waiter's place lasts
	 * fair_wait_ms past the one ahead of it (a try with wait_ms > 0: wait_ms
	 * and one command timeout, so that its leave arrives before the place
	 * expires), so a crashed waiter's place expires; one that gives up
	 * leaves at once, taking its place off the deadlines behind it. The deadlines are epoch milliseconds
	 * (Redisson's data), so the clocks of the processes sharing a fair lock
	 * must roughly agree. As in Redisson, releasing a fair lock that no
	 * longer exists succeeds.
	 */
	DLOCK_LOCK_FAIR = 1,
	/**
	 * Redisson's RFencedLock: every acquisition, re-entry included,
	 * increments the counter `redisson_lock_token:{name}`, so each holder can
	 * show the resource it protects a number that grows from one holder to
	 * the next (Kleppmann's fencing token); the resource rejects a write with
	 * a smaller token than it has seen. Acquire with dlock_lock_acquire_fenced()
	 * to learn the token.
	 */
	DLOCK_LOCK_FENCED = 2,
	/**
	 * The read half of Redisson's RReadWriteLock (getReadWriteLock(name)
	 * .readLock()): shared. Any number of owners hold it together while no
	 * one holds the write half; the owner that holds the write half may take
	 * it too. Data (Redisson's): the HASH `name` with `mode` = `read`, the
	 * field `<owner>` -> hold count, and per hold k a STRING
	 * `{name}:<owner>:rwlock_timeout:<k>` with its own TTL; the hash lives as
	 * long as the longest of them. Waiters listen on `redisson_rwlock:{name}`.
	 * The watchdog renews the owner's timeout keys and the hash. Queries:
	 * held/count read the owner's field; dlock_lock_is_locked() is
	 * Redisson's readLock().isLocked(): mode read, or mode write with a read
	 * hold beside the writer's. A force unlock deletes the lock only while
	 * it is in read mode.
	 */
	DLOCK_LOCK_READ = 3,
	/**
	 * The write half of Redisson's RReadWriteLock (writeLock()): exclusive
	 * of every other owner's read and write holds. Data: `mode` = `write`
	 * and the field `<owner>:write` (the owner as passed, with ":write"
	 * appended on the wire; the API keeps taking the plain owner, which
	 * reads as its read hold's field). Re-entry adds the lease to the key's
	 * TTL, as Redisson's. An owner that holds only the read half cannot take
	 * this one (Redisson would wait forever): the attempt fails at once with
	 * DLOCK_EINVAL, "upgrade from read to write is not supported: release
	 * the read lock first". The last release publishes `1` (wake every
	 * waiter); with read holds of the same owner left, the lock turns to
	 * read mode. dlock_lock_is_locked() is 1 while the mode is write; a
	 * force unlock deletes the lock only while it is in write mode.
	 */
	DLOCK_LOCK_WRITE = 4
} dlock_lock_kind;

/** A fair lock waiter's place lasts this long by default (Redisson's fairLockWaitTimeout). */
#define DLOCK_FAIR_WAIT_DEFAULT INT64_C(300000)

#define DLOCK_LOCK_OPTIONS_VERSION 1

/**
 * Lock options. Initialise with DLOCK_LOCK_OPTIONS_INIT or
 * dlock_lock_options_init(), then change what you need. Fields are only
 * ever appended; `version` tells the library which fields you know.
 */
typedef struct dlock_lock_options {
	unsigned int version;
	/** DLOCK_LOCK_PLAIN (default), DLOCK_LOCK_FAIR, DLOCK_LOCK_FENCED,
	 *  DLOCK_LOCK_READ or DLOCK_LOCK_WRITE. */
	dlock_lock_kind kind;
	/** DLOCK_LOCK_FAIR: how long a waiter's place in the queue lasts past
	 *  the one ahead of it, ms (default DLOCK_FAIR_WAIT_DEFAULT; 0 means
	 *  the default). Ignored by the other kinds. */
	int64_t fair_wait_ms;
} dlock_lock_options;

#define DLOCK_LOCK_OPTIONS_INIT \
	{ DLOCK_LOCK_OPTIONS_VERSION, DLOCK_LOCK_PLAIN, DLOCK_FAIR_WAIT_DEFAULT }

/**
 * Fill `opts` with the defaults of `version` (any 0 < version <=
 * DLOCK_LOCK_OPTIONS_VERSION). Returns 0, or DLOCK_EINVAL (with a message)
 * for NULL or an unknown version.
 */
DLOCK_EXTERN int dlock_lock_options_init(dlock_lock_options *opts, unsigned int version);

/**
 * Make a lock handle for `name` (copied; any bytes but NUL, at most 64 KiB)
 * on `client`, of the kind `opts` says (NULL: a plain RLock; opts is read
 * only during the call). No network traffic. *out belongs to the caller and
 * is freed with dlock_lock_free(), before its client is freed.
 * Errors: DLOCK_EINVAL (NULL/empty/too long name, NULL client, an unknown
 * options version or kind, a negative fair_wait_ms), DLOCK_ENOMEM.
 */
DLOCK_EXTERN int dlock_lock_new(dlock_lock **out, dlock_client *client, const char *name,
		const dlock_lock_options *opts);

/**
 * Free the handle. Holds taken through it stay in Redis (leased ones expire;
 * watchdog ones are no longer renewed and expire within the watchdog
 * timeout). Accepts NULL. No other call may be running on the handle.
 */
DLOCK_EXTERN void dlock_lock_free(dlock_lock *lock);

/** The lock's name (its Redis key). */
DLOCK_EXTERN const char *dlock_lock_name(const dlock_lock *lock);

/**
 * Acquire the lock for `owner` (NULL: the calling thread; otherwise an
 * explicit owner string, see the top of this file), waiting up to
 * `wait_ms` for a release: 0 = one attempt, DLOCK_WAIT_FOREVER = until it
 * is acquired or the wait is canceled. lease_ms > 0 or
 * DLOCK_LEASE_WATCHDOG. Re-entry by the holder increments the hold count.
 * Returns 0 when acquired, DLOCK_ENOTACQUIRED when someone else still holds
 * it when the wait ends, DLOCK_EINVAL (bad wait or lease; a NULL handle; an
 * empty owner or one longer than 1024 bytes), a wait's final error
 * (DLOCK_EAUTH, DLOCK_EWRONGTYPE, DLOCK_ESERVER, DLOCK_ENOMEM,
 * DLOCK_EFORKED, DLOCK_ECANCELED), or, when the wait ran out on one, the
 * last transient error: DLOCK_ECONN, DLOCK_ETIMEDOUT, DLOCK_EPROTO,
 * DLOCK_ESERVER (LOADING, BUSY), DLOCK_ENOSYNC (fewer than the client's
 * sync_replicas acknowledged the acquisition within its sync_timeout_ms:
 * it was given back; an attempt that asks replicas costs up to that
 * timeout more). A single attempt (wait 0) returns any of them at once;
 * a wait forever does not end on a transient error: it tries again with a
 * backoff until canceled. Its twin: dlock_lock_acquire_async().
 */
DLOCK_EXTERN int dlock_lock_acquire(dlock_lock *lock, const char *owner, int64_t wait_ms,
		int64_t lease_ms);

/**
 * dlock_lock_acquire() for a fenced lock, returning the fencing token of
 * this acquisition in *token. Errors as dlock_lock_acquire(); DLOCK_EINVAL
 * when the lock is not fenced or token is NULL. Its twin is
 * dlock_lock_acquire_async(), whose result carries the token.
 */
DLOCK_EXTERN int dlock_lock_acquire_fenced(int64_t *token, dlock_lock *lock, const char *owner,
		int64_t wait_ms, int64_t lease_ms);

/**
 * Release one hold of `owner` (NULL: the calling thread). The last release
 * deletes the key and publishes an unlock message that wakes one waiter
 * (local or remote). Errors: DLOCK_ELOST (the hold was lost before the
 * release: the watchdog had found it lost, its lease had ended, or the
 * server no longer had it - the caller's critical section may have
 * outlived the lock; returned whatever the release then met, timeouts
 * included), DLOCK_ENOTOWNER (this client has no record of such a hold and
 * the server none either; nothing changed), DLOCK_EINVAL (NULL handle, bad
 * owner), one command's errors (errors.h) - the release may then have run
 * or not; renewal ends whatever the answer. A release whose reply was lost
 * is retried with the same request id, so it counts once. Its twin:
 * dlock_lock_release_async().
 */
DLOCK_EXTERN int dlock_lock_release(dlock_lock *lock, const char *owner);

/**
 * *out = how many replicas acknowledged the most recent acquisition made
 * through this handle (by any thread) when its client asks them to
 * (sync_replicas > 0; see client.h and docs/topologies.md, "Replica acknowledgement").
 * Every acquisition the server granted sets it, also one that then failed
 * with DLOCK_ENOSYNC and was given back (the count it fell short with).
 * -1 when none asked yet, the client does not ask, or the last one could
 * not learn the count (WAIT failed or went unanswered). It is what WAIT
 * answered, not a promise: replication stays asynchronous. For a MultiLock
 * or RedLock, ask its member handles. No network traffic.
 * Errors: DLOCK_EINVAL (NULL argument).
 */
DLOCK_EXTERN int dlock_lock_synced_replicas(int *out, const dlock_lock *lock);

/**
 * *token = the lock's current token counter (0 if never taken).
 * Errors: DLOCK_EINVAL (NULL argument, not a fenced lock), one command's
 * errors (errors.h).
 */
DLOCK_EXTERN int dlock_lock_token(int64_t *token, dlock_lock *lock);

/**
 * Delete the lock whoever holds it and wake waiters: for a fair lock (its
 * queue exists, whatever kind of handle this is) the head of the queue, on
 * its own channel, as Redisson's fair forceUnlock. *deleted (may be NULL)
 * is 1 when a lock existed, 2 when the name was an expirable semaphore
 * whose taken permits all came back (its holders lose them), 0 when there
 * was nothing to break. Another kind's key is refused (DLOCK_EWRONGTYPE,
 * nothing changed). Local renewals of this name stop; local holders
 * learn of the loss through dlock_lock_check()/the lost callback.
 * Errors: DLOCK_EINVAL (NULL handle), one command's errors (errors.h).
 */
DLOCK_EXTERN int dlock_lock_force_release(int *deleted, dlock_lock *lock);

/*
 * The queries below read the server (one command) and return DLOCK_EINVAL
 * for a NULL argument or a bad owner, or one command's errors (errors.h).
 */

/** *out = 1 when anyone holds the lock (EXISTS; for a read or write half,
 *  Redisson's isLocked() of that half: see DLOCK_LOCK_READ/WRITE). */
DLOCK_EXTERN int dlock_lock_is_locked(int *out, dlock_lock *lock);

/** *out = 1 when `owner` (NULL: the calling thread) holds the lock
 *  (HEXISTS of its field: `<owner>:write` for a write half). */
DLOCK_EXTERN int dlock_lock_is_held(int *out, dlock_lock *lock, const char *owner);

/** *out = `owner`'s (NULL: the calling thread's) hold count (0 when not held). */
DLOCK_EXTERN int dlock_lock_hold_count(int64_t *out, dlock_lock *lock, const char *owner);

/** *out_ms = the key's remaining time to live (PTTL): -2 no lock, -1 no expiry. */
DLOCK_EXTERN int dlock_lock_remaining_ttl_ms(int64_t *out_ms, dlock_lock *lock);

/** What a server has for a lock at one moment (dlock_lock_query). */
typedef struct dlock_lock_info dlock_lock_info;

/**
 * Read who holds the lock on its server, with their hold counts and TTLs,
 * the key's TTL, a fair lock's queue and how many clients listen on the
 * name's channels: one read-only script, so the parts agree. A read-write
 * lock's `mode` field is no holder (dlock_lock_info_rw_mode() gives it);
 * its writer shows as `<owner>:write`. Whatever the handle's kind, the
 * key is read as it is (a plain handle reads a read-write lock or a fair
 * queue too). *out is freed with
 * dlock_lock_info_free(). Errors: DLOCK_EINVAL (NULL argument),
 * DLOCK_EWRONGTYPE (the key is not a lock), DLOCK_ENOMEM, DLOCK_EAUTH,
 * DLOCK_ECONN, DLOCK_ETIMEDOUT, DLOCK_ESERVER, DLOCK_EPROTO, DLOCK_EFORKED.
 */
DLOCK_EXTERN int dlock_lock_query(dlock_lock_info **out, dlock_lock *lock);

/** The key's TTL when read: -2 no lock, -1 no expiry. */
DLOCK_EXTERN int64_t dlock_lock_info_ttl_ms(const dlock_lock_info *info);

/** How many owners hold the lock (0 or 1 for a lock; a read lock may have more). */
DLOCK_EXTERN size_t dlock_lock_info_holders(const dlock_lock_info *info);

/** Holder i's owner string ("<uuid>:<thread>"), or NULL past the end. */
DLOCK_EXTERN const char *dlock_lock_info_holder_owner(const dlock_lock_info *info, size_t i);

/** Holder i's hold count (reentrant holds), 0 past the end. */
DLOCK_EXTERN int64_t dlock_lock_info_holder_count(const dlock_lock_info *info, size_t i);

/**
 * A read-write lock's mode (Redisson's `mode` field): "read" (its holders
 * are readers), "write" (its holder, `<owner>:write`, is the writer; it may
 * hold read locks too) or NULL (not a read-write lock, or not held).
 */
DLOCK_EXTERN const char *dlock_lock_info_rw_mode(const dlock_lock_info *info);

/**
 * How long holder i's hold lasts without renewal, ms: a read-write lock's
 * reader, the longest of its read holds' own timeout keys; any other, the
 * key's TTL. -1 no expiry, -2 gone or past the end.
 */
DLOCK_EXTERN int64_t dlock_lock_info_holder_ttl_ms(const dlock_lock_info *info, size_t i);

/** A read-write lock's reader i: how many of its read holds' timeout keys were read
 *  (its count, at most 1000); 0 for any other holder. */
DLOCK_EXTERN size_t dlock_lock_info_read_holds(const dlock_lock_info *info, size_t i);

/** The PTTL of read hold k (0-based) of reader i: -2 gone or past the end. */
DLOCK_EXTERN int64_t dlock_lock_info_read_hold_ttl_ms(const dlock_lock_info *info, size_t i,
		size_t k);

/** A fair lock's waiters in its queue (Redisson's `redisson_lock_queue:{name}`), 0 none. */
DLOCK_EXTERN size_t dlock_lock_info_queued(const dlock_lock_info *info);

/** Queued waiter i, in the order they will be served (the first 1000 are read);
 *  NULL past them. */
DLOCK_EXTERN const char *dlock_lock_info_queued_owner(const dlock_lock_info *info, size_t i);

/** How long queued waiter i keeps its place unless it looks again, ms
 *  (`redisson_lock_timeout:{name}`); -2 none or past the end. */
DLOCK_EXTERN int64_t dlock_lock_info_queued_ttl_ms(const dlock_lock_info *info, size_t i);

/**
 * How many clients listen on the name's unlock channels at its server
 * (classic and sharded pub/sub; a fair waiter on its own): waiters, and
 * holders that watch for a force unlock (dlock_client_options
 * watch_force_unlock, as `dlock run` does), which it cannot tell apart.
 */
DLOCK_EXTERN int64_t dlock_lock_info_subscribers(const dlock_lock_info *info);

/** Free a dlock_lock_query() answer. Accepts NULL. */
DLOCK_EXTERN void dlock_lock_info_free(dlock_lock_info *info);

/**
 * The local state of `owner`'s hold (NULL = the calling thread), without
 * network traffic: 0 held, DLOCK_ELOST lost, DLOCK_ENOTOWNER not held
 * through this client. "Held" never outlasts the key: a leased hold is lost
 * once its lease (less 1% drift) has passed since the acquire was sent, a
 * watchdog hold once as long has passed since the last renewal that reached
 * the server - even if the background thread has not run meanwhile.
 */
DLOCK_EXTERN int dlock_lock_check(const dlock_lock *lock, const char *owner);

/**
 * How long `owner`'s hold (NULL = the calling thread) is certain to last
 * from now if no further renewal reaches the server: the last renewal that
 * reached it (or the acquire, for a lease) plus the lease or watchdog
 * timeout, less the clock drift allowance (1% + 2 ms), minus now. No network
 * traffic. A program that must stop touching the resource before the lock
 * can expire (`dlock run` does) plans with it. *ms is 0 unless held.
 * Returns 0, DLOCK_ELOST (lost, or the time is up), DLOCK_ENOTOWNER (not
 * held through this handle), DLOCK_EINVAL (NULL argument, bad owner).
 */
DLOCK_EXTERN int dlock_lock_validity_ms(int64_t *out_ms, const dlock_lock *lock, const char *owner);

/**
 * Set the callback for lost watchdog holds taken through this handle
 * (NULL to remove): ev->owner is the hold's owner, ev->node the lock's
 * server (dlock/common.h). Set it before sharing the handle between threads.
 * Errors: DLOCK_EINVAL (NULL handle).
 */
DLOCK_EXTERN int dlock_lock_set_lost_cb(dlock_lock *lock, dlock_lost_cb cb, void *userdata);

/**
 * The one-line message of the most recent failure on this handle, from any
 * thread ("" if none); a copy owned by the calling thread, valid until its
 * next dlock call.
 */
DLOCK_EXTERN const char *dlock_lock_errmsg(const dlock_lock *lock);

/** dlock_lock_errmsg() copied into buf; returns the full length (see dlock_errmsg_last_r). */
DLOCK_EXTERN size_t dlock_lock_errmsg_r(char *buf, size_t len, const dlock_lock *lock);

/* Asynchronous calls (dlock/async.h has the operation, its result and callback). */

/**
 * Acquire `lock` for `owner`, waiting up to `wait_ms` (0: one attempt;
 * DLOCK_WAIT_FOREVER) for a release, with a lease of `lease_ms`
 * (DLOCK_LEASE_WATCHDOG: renewed until released or lost). *out (may be
 * NULL) receives the op. Errors (no callback then): DLOCK_EINVAL,
 * DLOCK_ENOMEM, DLOCK_EFORKED; everything else comes in the callback.
 */
DLOCK_EXTERN int dlock_lock_acquire_async(dlock_op **out, dlock_lock *lock, const char *owner,
		int64_t wait_ms, int64_t lease_ms, dlock_op_cb cb, void *userdata);

/** Release one hold of `owner` (as dlock_lock_release()). */
DLOCK_EXTERN int dlock_lock_release_async(dlock_op **out, dlock_lock *lock, const char *owner,
		dlock_op_cb cb, void *userdata);

/**
 * Hear how `owner`'s hold of `lock` ends: the callback comes once, with
 * DLOCK_ELOST and `lost_reason` (a dlock_lost_reason) when it is lost -
 * renewals found it gone or could not reach the server in time, a force
 * unlock, a key replaced - or with 0 once it is released. DLOCK_ENOTOWNER
 * when the owner holds nothing now (DLOCK_ELOST when its hold is lost
 * already). The same event as dlock_lock_set_lost_cb(), as an operation:
 * on the client's loop, cancelable, one per hold or many.
 */
DLOCK_EXTERN int dlock_lock_watch_async(dlock_op **out, dlock_lock *lock, const char *owner,
		dlock_op_cb cb, void *userdata);

/**
 * The lock's queries and its force unlock as operations: the same command
 * and the same answer as the blocking call of the name without `_async`
 * (dlock/lock.h), in the result: `code` its return value, `value` its
 * number - is_locked/is_held 1 or 0, a hold count, a token, the TTL in ms
 * (-2 no key, -1 none), a force unlock's 1 or 0 - and for
 * dlock_lock_query_async() `lock_info`, the callback's to free with
 * dlock_lock_info_free() (NULL on error). A NULL owner (and the calls
 * without one) means the calling thread's, as the blocking calls take it,
 * resolved when the call is made. A query may be canceled (it changed
 * nothing); a force unlock is not (it finishes). Errors (no callback then):
 * DLOCK_EINVAL, DLOCK_ENOMEM, DLOCK_EFORKED.
 */
DLOCK_EXTERN int dlock_lock_is_locked_async(dlock_op **out, dlock_lock *lock, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_lock_is_held_async(dlock_op **out, dlock_lock *lock, const char *owner,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_lock_hold_count_async(dlock_op **out, dlock_lock *lock,
		const char *owner, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_lock_remaining_ttl_ms_async(dlock_op **out, dlock_lock *lock, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_lock_token_async(dlock_op **out, dlock_lock *lock, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_lock_query_async(dlock_op **out, dlock_lock *lock, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_lock_force_release_async(dlock_op **out, dlock_lock *lock, dlock_op_cb cb,
		void *userdata);

#ifdef __cplusplus
}
#endif

#endif
