/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/semaphore.h - Redisson's RSemaphore and RPermitExpirableSemaphore,
 * with their data layout, so C and Java services share one semaphore.
 *
 * Plain (DLOCK_SEMAPHORE_PLAIN, RSemaphore): the key `<name>` is a STRING,
 * the number of permits available. Acquiring k takes k if that many are
 * there; releasing k adds k. Permits belong to nobody: any process may
 * release what another took, and a crashed holder's permits are not given
 * back by themselves. (dlock adds one key of its own: a short-lived receipt
 * per acquisition, so that an attempt whose answer was lost can be undone;
 * see dlock_semaphore_acquire().)
 *
 * Expirable (DLOCK_SEMAPHORE_EXPIRABLE, RPermitExpirableSemaphore): the same
 * count under `<name>`, plus a ZSET `{name}:timeout` (`name:timeout` when
 * the name has a `{`) of the permits taken: member = the permit id (16
 * random bytes; shown as 32 hex digits, as Redisson shows it), score = the
 * epoch millisecond its lease ends. A permit whose lease has passed is put
 * back into the count by the next command that looks (any client's
 * acquire, release, count query, renewal), so a crashed holder's permit
 * comes back by itself. The deadlines are epoch milliseconds (Redisson's
 * data): the clocks of the processes sharing one must roughly agree.
 *
 * Both publish the new count on `redisson_sc:{name}` when permits come back;
 * waiters listen there (one subscription per client and name, shared) and
 * try again at each message. An expirable waiter also looks again when the
 * earliest lease ends.
 *
 * A handle may be shared by threads. All functions return 0 or a negative
 * DLOCK_E* code; dlock_semaphore_errmsg() says which node answered what.
 */
#ifndef DLOCK_SEMAPHORE_H
#define DLOCK_SEMAPHORE_H

#include "common.h"
#include "client.h"
#include "async.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_semaphore dlock_semaphore;

/** The kinds of semaphore. */
typedef enum dlock_semaphore_kind {
	/** Redisson's RSemaphore: counted permits, nobody's. */
	DLOCK_SEMAPHORE_PLAIN = 0,
	/** Redisson's RPermitExpirableSemaphore: each permit has an id and a lease. */
	DLOCK_SEMAPHORE_EXPIRABLE = 1
} dlock_semaphore_kind;

/** Room for a permit id: 32 hex digits and a NUL. */
#define DLOCK_PERMIT_ID_SIZE 33

#define DLOCK_SEMAPHORE_OPTIONS_VERSION 1

/**
 * Semaphore options. Initialise with DLOCK_SEMAPHORE_OPTIONS_INIT or
 * dlock_semaphore_options_init(); fields are only ever appended.
 */
typedef struct dlock_semaphore_options {
	unsigned int version;
	/** DLOCK_SEMAPHORE_PLAIN (default) or DLOCK_SEMAPHORE_EXPIRABLE. */
	dlock_semaphore_kind kind;
} dlock_semaphore_options;

#define DLOCK_SEMAPHORE_OPTIONS_INIT { DLOCK_SEMAPHORE_OPTIONS_VERSION, DLOCK_SEMAPHORE_PLAIN }

/**
 * Fill `opts` with the defaults of `version`. 0, or DLOCK_EINVAL for NULL or
 * an unknown version.
 */
DLOCK_EXTERN int dlock_semaphore_options_init(dlock_semaphore_options *opts, unsigned int version);

/**
 * Make a semaphore handle for `name` (copied; at most 64 KiB) on `client`
 * (NULL opts: a plain semaphore). No network traffic. *out belongs to the
 * caller and is freed with dlock_semaphore_free(), before its client.
 * Errors: DLOCK_EINVAL (NULL/empty/too long name, NULL client or out, an
 * unknown options version or kind), DLOCK_ENOMEM.
 */
DLOCK_EXTERN int dlock_semaphore_new(dlock_semaphore **out, dlock_client *client,
		const char *name, const dlock_semaphore_options *opts);

/**
 * Free the handle. Permits taken through it stay taken: an expirable one is
 * no longer renewed and comes back when its lease passes; plain ones stay
 * taken. Accepts NULL. No other call may be running on the handle; its
 * asynchronous operations may still be, and end on their own. For a client
 * on the caller's loop, call it from the thread that drives that loop.
 */
DLOCK_EXTERN void dlock_semaphore_free(dlock_semaphore *sem);

/** The semaphore's name (its Redis key). */
DLOCK_EXTERN const char *dlock_semaphore_name(const dlock_semaphore *sem);

/**
 * Set the number of permits if the semaphore has none set yet (its key is
 * absent): *set (may be NULL) is 1 when this call set it, 0 when a count
 * was there already (nothing changed). A waiter is woken. permits >= 0.
 * Errors: DLOCK_EINVAL, DLOCK_EWRONGTYPE (the key is not a semaphore), one
 * command's errors (errors.h).
 */
DLOCK_EXTERN int dlock_semaphore_try_set_permits(int *set, dlock_semaphore *sem, int64_t permits);

/**
 * Add `delta` permits (may be negative; the count may go below zero, as in
 * Redisson) to the available count, creating it at `delta` when absent.
 * Waiters are woken when permits are available after it.
 * Errors as dlock_semaphore_try_set_permits().
 */
DLOCK_EXTERN int dlock_semaphore_add_permits(dlock_semaphore *sem, int64_t delta);

/**
 * Change the count to `permits`. Plain: the available count becomes
 * `permits`. Expirable (Redisson's setPermits): the total - available plus
 * the permits taken - becomes `permits`, so the available count moves by
 * the difference (and may go below zero while holders give permits back).
 * Errors as dlock_semaphore_try_set_permits().
 */
DLOCK_EXTERN int dlock_semaphore_set_permits(dlock_semaphore *sem, int64_t permits);

/**
 * *out = the permits available now (0 when no count is set). An expirable
 * semaphore first takes back the permits whose leases have passed.
 * Errors as dlock_semaphore_try_set_permits().
 */
DLOCK_EXTERN int dlock_semaphore_available(int64_t *out, dlock_semaphore *sem);

/**
 * Plain semaphore: take `permits` (>= 1) permits, waiting up to wait_ms
 * (0: one attempt; DLOCK_WAIT_FOREVER) for releases. Returns 0 when taken,
 * DLOCK_ENOTACQUIRED when too few were available when the wait ended,
 * DLOCK_EINVAL (bad count or wait; an expirable semaphore), DLOCK_ECANCELED
 * (dlock_client_cancel_waits), or as dlock_lock_acquire(): a wait's final error,
 * or when the wait ran out on one, the last transient error (DLOCK_ECONN,
 * DLOCK_ETIMEDOUT, ...). An attempt whose reply never came is undone on
 * the same connection right behind it: a permit has no owner, so each
 * attempt that takes permits also leaves a short-lived receipt,
 * `dlock_semaphore_undo:{name}:<request-id>` (dlock's own key, as the unlock
 * latch; Redisson never reads it), which the undo consumes and which is
 * deleted once the answer came.
 */
DLOCK_EXTERN int dlock_semaphore_acquire(dlock_semaphore *sem, int64_t permits, int64_t wait_ms);

/**
 * Plain semaphore: give `permits` (>= 1) permits back (anyone may), which
 * wakes waiters. Errors: DLOCK_EINVAL, one command's errors.
 */
DLOCK_EXTERN int dlock_semaphore_release(dlock_semaphore *sem, int64_t permits);

/**
 * Expirable semaphore: take one permit, waiting up to wait_ms, with a lease:
 * lease_ms > 0 - the permit comes back after lease_ms unless released, and
 * is never renewed; DLOCK_LEASE_WATCHDOG - its lease is the client's
 * watchdog timeout, renewed every third of it on the client's background
 * loop while this handle lives and the permit is held (a renewal that finds
 * it gone marks it lost: dlock_semaphore_check() and the lost
 * callback). id gets the permit's id.
 * Errors as dlock_semaphore_acquire(); DLOCK_EINVAL also for a plain
 * semaphore, a NULL id or a bad lease.
 */
DLOCK_EXTERN int dlock_semaphore_acquire_permit(char id[DLOCK_PERMIT_ID_SIZE], dlock_semaphore *sem,
		int64_t wait_ms, int64_t lease_ms);

/**
 * Expirable semaphore: give the permit `id` back (any process that knows the
 * id may). Its renewal ends whatever the answer.
 * Errors: DLOCK_ELOST (its lease had passed or someone removed it: this
 * handle held it, or the server found it expired - it was counted back),
 * DLOCK_ENOTOWNER (no such permit: released already, or never taken),
 * DLOCK_EINVAL (not 32 hex digits, a plain semaphore), one command's errors.
 */
DLOCK_EXTERN int dlock_semaphore_release_permit(dlock_semaphore *sem, const char *id);

/**
 * Expirable semaphore: give back every permit taken, whoever holds it (an
 * operator's act, as dlock_lock_force_release() for a lock). The taken
 * permits go back into the count, and the new count is published on
 * redisson_sc:{name} as a release does, so waiters (Redisson's too) take
 * them. Their holders lose them: at once one whose client has
 * watch_force_unlock (it listens there while it holds a renewed permit),
 * else at its next renewal. *freed (may be NULL) = how many were taken.
 * Errors: DLOCK_EINVAL (NULL handle, a plain semaphore: it does not know
 * which permits are taken), DLOCK_EWRONGTYPE (the keys hold something else),
 * one command's errors (errors.h).
 */
DLOCK_EXTERN int dlock_semaphore_force_release(int64_t *freed, dlock_semaphore *sem);

/**
 * The local state of a permit taken through this handle, without network
 * traffic: 0 held, DLOCK_ELOST lost (a renewal found it gone, or no renewal
 * reached the server within its lease, or a fixed lease passed; final: a
 * late renewal the server still ran does not make it held again, and a
 * renewed permit's loss also comes through the lost callback),
 * DLOCK_ENOTOWNER not held through this handle (nor lost in the last
 * minute past its lease: older records of lost permits are dropped).
 */
DLOCK_EXTERN int dlock_semaphore_check(const dlock_semaphore *sem, const char *id);

/**
 * How long the permit `id` taken through this handle is certain to last
 * from now if no further renewal reaches the server: the last renewal that
 * reached it (or the acquire, for a fixed lease) plus its lease, less the
 * clock drift allowance (1% + 2 ms), minus now - as dlock_lock_validity_ms()
 * for a lock. No network traffic. A program that must stop using what the
 * permit guards before it can come back to others (`dlock run -c` does)
 * plans with it. *ms is 0 unless held. Returns 0, DLOCK_ELOST (lost, or
 * the time is up), DLOCK_ENOTOWNER (not held through this handle),
 * DLOCK_EINVAL (NULL argument).
 */
DLOCK_EXTERN int dlock_semaphore_validity_ms(int64_t *out_ms, const dlock_semaphore *sem,
		const char *id);

/**
 * Set the lost callback (NULL removes it), before sharing the handle. It is
 * called on the client's background loop when a renewed permit is found
 * lost: ev->owner is the permit's id, ev->node the semaphore's server. Keep
 * it short; it must not wait. It may free the semaphore (the calls for
 * other permits found lost by the same renewal still come; the handle stays
 * valid until they are over). DLOCK_EINVAL for NULL sem.
 */
DLOCK_EXTERN int dlock_semaphore_set_lost_cb(dlock_semaphore *sem, dlock_lost_cb cb,
		void *userdata);

/**
 * Start an acquisition that does not block (see dlock/async.h): `permits`
 * permits of a plain semaphore, as dlock_semaphore_acquire(); an expirable
 * one's permit: dlock_semaphore_acquire_permit_async(), as
 * dlock_semaphore_acquire_permit(), whose result->permit_id is the
 * permit's id during the callback. The callback comes once, never inside
 * the call, with 0, DLOCK_ENOTACQUIRED at the end of the wait, or an
 * error. dlock_op_cancel() ends it with DLOCK_ECANCELED after whatever it
 * took was given back. Errors (no callback then): DLOCK_EINVAL (also the
 * other kind of semaphore), DLOCK_ENOMEM, DLOCK_EFORKED.
 */
DLOCK_EXTERN int dlock_semaphore_acquire_async(dlock_op **out, dlock_semaphore *sem,
		int64_t permits, int64_t wait_ms, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_semaphore_acquire_permit_async(dlock_op **out, dlock_semaphore *sem,
		int64_t wait_ms, int64_t lease_ms, dlock_op_cb cb, void *userdata);

/**
 * Give `permits` (>= 1) of a plain semaphore back without blocking, with
 * the outcome of dlock_semaphore_release() in the callback (an expirable
 * permit: dlock_semaphore_release_permit_async()). A release is not
 * canceled (dlock_op_cancel() lets it finish). Errors (no callback then):
 * DLOCK_EINVAL (also an expirable semaphore), DLOCK_ENOMEM, DLOCK_EFORKED.
 */
DLOCK_EXTERN int dlock_semaphore_release_async(dlock_op **out, dlock_semaphore *sem,
		int64_t permits, dlock_op_cb cb, void *userdata);

/** What a server has for a semaphore at one moment (dlock_semaphore_query). */
typedef struct dlock_semaphore_info dlock_semaphore_info;

/**
 * Read the semaphore's count and, for an expirable one, the permits taken
 * (the ZSET `{name}:timeout`), in one script call that changes nothing:
 * unlike dlock_semaphore_available(), permits whose lease passed are shown
 * (with a remaining lease of 0), not counted back. For `dlock status` and
 * monitoring. *out is freed with dlock_semaphore_info_free().
 * Errors: DLOCK_EINVAL (NULL argument), DLOCK_EWRONGTYPE (a key is not a
 * semaphore's: another type, or a string that is not a number),
 * DLOCK_ENOMEM, one command's errors (errors.h).
 */
DLOCK_EXTERN int dlock_semaphore_query(dlock_semaphore_info **out, dlock_semaphore *sem);

/** 1 when the count key exists (a count was set), else 0. */
DLOCK_EXTERN int dlock_semaphore_info_is_set(const dlock_semaphore_info *info);

/** The available count as read (0 when none is set; may be below zero). */
DLOCK_EXTERN int64_t dlock_semaphore_info_available(const dlock_semaphore_info *info);

/** How many permits are taken (expirable semaphores; 0 for a plain one). */
DLOCK_EXTERN size_t dlock_semaphore_info_permits(const dlock_semaphore_info *info);

/** Taken permit i's id (32 hex digits), or NULL past the end. */
DLOCK_EXTERN const char *dlock_semaphore_info_permit_id(const dlock_semaphore_info *info, size_t i);

/**
 * Taken permit i's remaining lease in ms, from this machine's clock (the
 * deadlines are epoch ms): 0 its lease has passed and the next command
 * that looks gives it back; -1 a permit without a lease. 0 past the end.
 */
DLOCK_EXTERN int64_t dlock_semaphore_info_permit_ttl_ms(const dlock_semaphore_info *info,
		size_t i);

/**
 * How many clients listened on the semaphore's channel `redisson_sc:{name}`
 * at its server (classic and sharded pub/sub): waiters for permits, dlock's
 * and Redisson's alike (dlock shares one subscription per client and name).
 */
DLOCK_EXTERN int64_t dlock_semaphore_info_subscribers(const dlock_semaphore_info *info);

/** Free a dlock_semaphore_query() answer. Accepts NULL. */
DLOCK_EXTERN void dlock_semaphore_info_free(dlock_semaphore_info *info);

/**
 * The one-line message of the most recent failure on this handle, from any
 * thread ("" if none); a copy owned by the calling thread, valid until its
 * next dlock call.
 */
DLOCK_EXTERN const char *dlock_semaphore_errmsg(const dlock_semaphore *sem);

/** dlock_semaphore_errmsg() copied into buf; returns the full length (see dlock_errmsg_last_r). */
DLOCK_EXTERN size_t dlock_semaphore_errmsg_r(char *buf, size_t len, const dlock_semaphore *sem);

/* Asynchronous calls (dlock/async.h has the operation, its result and callback). */

/**
 * A semaphore's calls as operations, with the blocking call's outcome
 * (dlock/semaphore.h) in the result: `value` is try_set's 1 (set) or 0,
 * available's count, force_release's permits freed (0 for add and set);
 * dlock_semaphore_query_async() gives `semaphore_info`, the callback's to
 * free with dlock_semaphore_info_free() (NULL on error).
 * dlock_semaphore_release_permit_async() is dlock_semaphore_release_async()
 * for an expirable permit. available and query may be canceled; the
 * changes are not (they finish). Errors (no callback then): DLOCK_EINVAL,
 * DLOCK_ENOMEM, DLOCK_EFORKED.
 */
DLOCK_EXTERN int dlock_semaphore_try_set_permits_async(dlock_op **out,
		dlock_semaphore *sem, int64_t permits, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_semaphore_add_permits_async(dlock_op **out, dlock_semaphore *sem,
		int64_t delta, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_semaphore_set_permits_async(dlock_op **out, dlock_semaphore *sem,
		int64_t permits, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_semaphore_available_async(dlock_op **out, dlock_semaphore *sem,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_semaphore_force_release_async(dlock_op **out, dlock_semaphore *sem,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_semaphore_query_async(dlock_op **out, dlock_semaphore *sem,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_semaphore_release_permit_async(dlock_op **out,
		dlock_semaphore *sem, const char *id, dlock_op_cb cb, void *userdata);

#ifdef __cplusplus
}
#endif

#endif
