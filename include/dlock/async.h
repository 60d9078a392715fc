/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/async.h - lock operations that do not block the caller.
 *
 * Each call starts an operation and returns at once with an op handle; the
 * operation runs on the loop of its lock's client (dlock/loop.h: the
 * caller's loop, or the client's background thread when it was opened
 * without one) and ends with exactly one callback, never from inside the
 * call that started it: for single locks (plain, fair, fenced, and the read
 * and write halves of a read-write lock), MultiLocks and RedLocks, and a
 * watch that hears of a hold's loss.
 *
 * Owners are explicit: an asynchronous caller has no thread of its own to
 * name (use dlock_client_owner() for a Redisson-style `<uuid>:<id>`).
 *
 * The op handle: pass NULL as `out` when you do not need it (the library
 * frees the operation after its callback). Given `out`, *out is your
 * reference to the operation, valid until you drop it with dlock_op_free(),
 * before, during or after the callback, from any thread: cancel it at any
 * time without a use-after-free hazard (after its callback, cancel does
 * nothing). Every *out handed out must be freed once - as any handle of
 * dlock's; a kept operation keeps its lock and client alive until then.
 * dlock_op_cancel() ends an operation early: its callback then comes
 * once, with DLOCK_ECANCELED, after whatever the operation may already have
 * taken on a server was given back (the undo runs on the connection the
 * acquire went out on, behind it) and a fair waiter left its queue.
 */
#ifndef DLOCK_ASYNC_H
#define DLOCK_ASYNC_H

#include "common.h"
#include "lock.h"
#include "multilock.h"
#include "redlock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_op dlock_op;

/** How an operation ended; valid during the callback only. */
typedef struct dlock_result {
	/** 0 (acquired, released), or DLOCK_E*: DLOCK_ENOTACQUIRED at the end
	 *  of the wait, DLOCK_ECANCELED, DLOCK_ELOST (a watch), ... */
	int code;
	/** One line naming the node and the cause; "" on success. */
	const char *message;
	/** Acquired: how long the hold is certain to last, ms (as
	 *  dlock_lock_validity() right after); otherwise -1. */
	int64_t validity_ms;
	/** Acquired a fenced lock (or a fenced MultiLock/RedLock): its token;
	 *  otherwise 0. */
	int64_t token;
	/** Not acquired because another owner holds it: its remaining TTL, ms;
	 *  otherwise -1. */
	int64_t holder_ttl_ms;
	/** A watch (dlock_lock_watch_async) that ended with DLOCK_ELOST: why
	 *  (a dlock_lost_reason); otherwise 0. */
	int lost_reason;
	/** A MultiLock/RedLock operation: each member's vote (acquire) or
	 *  status; NULL and 0 for a single lock. */
	const dlock_member_status *members;
	size_t nmembers;
	/* Fields below were appended after 0.x: the library allocates every
	 * dlock_result and hands out only pointers to it, so appending is
	 * ABI-safe; fields are only ever appended. */
	/** A query or a one-command change: the blocking call's numeric
	 *  answer (is_locked/is_held 1 or 0, a TTL in ms, a hold count, a
	 *  token, a count of permits, a force unlock's 1 or 0); 0 otherwise. */
	int64_t value;
	/** dlock_lock_query_async(): the answer, which becomes the callback's,
	 *  to free with dlock_lock_info_free() (as the blocking call's); NULL
	 *  on error and for other operations. */
	dlock_lock_info *lock_info;
	/** dlock_semaphore_query_async(): the same, freed with
	 *  dlock_semaphore_info_free(). */
	struct dlock_semaphore_info *semaphore_info;
	/** dlock_client_holder_async() that found a registration (value 1):
	 *  who it is, valid during the callback; otherwise NULL. */
	const dlock_holder *holder;
	/** dlock_semaphore_acquire_async() that took an expirable permit: its
	 *  id (DLOCK_PERMIT_ID_SIZE - 1 hex digits), valid during the callback;
	 *  otherwise NULL. */
	const char *permit_id;
} dlock_result;

/** The one callback of an operation; the library's reference to `op` is
 *  dropped when it returns (a caller that kept *out still holds its own). */
typedef void (*dlock_op_cb)(dlock_op *op, const dlock_result *result, void *userdata);

/**
 * Acquire `lock` for `owner`, waiting up to `wait_ms` (0: one attempt;
 * DLOCK_WAIT_FOREVER) for a release, with a lease of `lease_ms`
 * (DLOCK_LEASE_WATCHDOG: renewed until released or lost). *out (may be
 * NULL) receives the op. Errors (no callback then): DLOCK_EINVAL,
 * DLOCK_ENOMEM, DLOCK_EFORKED; everything else comes in the callback.
 */
DLOCK_EXTERN int dlock_lock_acquire_async(dlock_op **out, dlock_lock *lock, const char *owner,
		int64_t wait_ms, int64_t lease_ms, dlock_op_cb cb, void *userdata);

/** Release one hold of `owner` (as dlock_lock_unlock_as()). */
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
 * Acquire a MultiLock (every member) or a RedLock (a quorum) for `owner`,
 * as the blocking try_as calls do; the operation runs on the loop of the
 * first member's client. On success the result has the validity (RedLock)
 * and a fenced quorum's token; either way `members` holds each member's
 * vote (as dlock_multilock_member_status()). Cancel gives back every
 * member the operation may have taken, wherever it was. The handle must
 * outlive its operations; it may be freed from the callback of its last.
 */
DLOCK_EXTERN int dlock_multilock_acquire_async(dlock_op **out, dlock_multilock *m,
		const char *owner, int64_t wait_ms, int64_t lease_ms, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_redlock_acquire_async(dlock_op **out, dlock_redlock *r, const char *owner,
		int64_t wait_ms, int64_t lease_ms, dlock_op_cb cb, void *userdata);

/**
 * Write an owner `<uuid>:<id>` named after the lock's first member's
 * client into `owner`; 0, or DLOCK_EINVAL (NULL argument).
 * Such an owner is this process's alone, so the lock's records of it are
 * the truth: a canceled acquisition gives back exactly what it took, even
 * an acquire a paused server runs late. (Other explicit owners may be
 * shared with other processes: an acquire whose answer never came is then
 * left to expire with its lease rather than risk releasing theirs.)
 */
DLOCK_EXTERN int dlock_multilock_owner(char owner[DLOCK_OWNER_SIZE], const dlock_multilock *lock,
		uint64_t id);
DLOCK_EXTERN int dlock_redlock_owner(char owner[DLOCK_OWNER_SIZE], const dlock_redlock *lock,
		uint64_t id);

/** Release `owner`'s hold on every member (as the unlock_as calls). */
DLOCK_EXTERN int dlock_multilock_release_async(dlock_op **out, dlock_multilock *m,
		const char *owner, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_redlock_release_async(dlock_op **out, dlock_redlock *r, const char *owner,
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
DLOCK_EXTERN int dlock_lock_is_held_async(dlock_op **out, dlock_lock *lock, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_lock_is_held_as_async(dlock_op **out, dlock_lock *lock, const char *owner,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_lock_hold_count_async(dlock_op **out, dlock_lock *lock, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_lock_hold_count_as_async(dlock_op **out, dlock_lock *lock,
		const char *owner, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_lock_remaining_ttl_async(dlock_op **out, dlock_lock *lock, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_lock_token_async(dlock_op **out, dlock_lock *lock, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_lock_query_async(dlock_op **out, dlock_lock *lock, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_lock_force_unlock_async(dlock_op **out, dlock_lock *lock, dlock_op_cb cb,
		void *userdata);

/**
 * The MultiLock's and RedLock's queries as operations, with the blocking
 * call's outcome (dlock/multilock.h, dlock/redlock.h) in the result:
 * `value` is is_locked's or is_held_as's 1 or 0, member_ttl's TTL in ms
 * (-2 no lock there, -1 no expiry). is_locked and is_held_as ask every
 * member at once and answer as soon as the members that answered settle
 * it (a stopped server costs nothing then; else at most its command
 * timeout); DLOCK_ENOQUORUM or DLOCK_EWRONGTYPE when they cannot. A NULL
 * owner means the calling thread's, resolved when the call is made. Each
 * may be canceled. Errors (no callback then): DLOCK_EINVAL, DLOCK_ENOMEM,
 * DLOCK_EFORKED.
 */
DLOCK_EXTERN int dlock_multilock_is_locked_async(dlock_op **out, dlock_multilock *lock,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_multilock_is_held_as_async(dlock_op **out, dlock_multilock *lock,
		const char *owner, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_multilock_member_ttl_async(dlock_op **out, dlock_multilock *lock, size_t i,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_redlock_is_locked_async(dlock_op **out, dlock_redlock *lock,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_redlock_is_held_as_async(dlock_op **out, dlock_redlock *lock,
		const char *owner, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_redlock_member_ttl_async(dlock_op **out, dlock_redlock *lock, size_t i,
		dlock_op_cb cb, void *userdata);

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
struct dlock_semaphore;
DLOCK_EXTERN int dlock_semaphore_try_set_permits_async(dlock_op **out,
		struct dlock_semaphore *sem, int64_t permits, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_semaphore_add_permits_async(dlock_op **out, struct dlock_semaphore *sem,
		int64_t delta, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_semaphore_set_permits_async(dlock_op **out, struct dlock_semaphore *sem,
		int64_t permits, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_semaphore_available_async(dlock_op **out, struct dlock_semaphore *sem,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_semaphore_force_release_async(dlock_op **out, struct dlock_semaphore *sem,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_semaphore_query_async(dlock_op **out, struct dlock_semaphore *sem,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_semaphore_release_permit_async(dlock_op **out,
		struct dlock_semaphore *sem, const char *id, dlock_op_cb cb, void *userdata);

/**
 * A client's calls to its server as operations: PING (`code` 0 when it
 * answered; on a cluster it asks the member serving a slot, where the
 * blocking dlock_client_ping() reads the slot map), the server's uptime
 * in seconds (`value`), and a registered owner's holder (`value` 1 and
 * `holder`, or 0 when none registered). Each may be canceled. Errors (no
 * callback then): DLOCK_EINVAL, DLOCK_ENOMEM, DLOCK_EFORKED.
 */
DLOCK_EXTERN int dlock_client_ping_async(dlock_op **out, dlock_client *client, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_client_uptime_async(dlock_op **out, dlock_client *client, dlock_op_cb cb,
		void *userdata);
DLOCK_EXTERN int dlock_client_holder_async(dlock_op **out, dlock_client *client,
		const char *owner, dlock_op_cb cb, void *userdata);

/**
 * End the operation early. Its callback comes once, with DLOCK_ECANCELED,
 * from the loop (not from within this call), after what it took was given
 * back; a release is not canceled (it finishes: a hold left half-released
 * would help nobody). Any thread may call it, even as the operation ends
 * on another: an operation whose callback has come already is left alone
 * (0). `op` must be a reference the caller holds (*out not yet freed with
 * dlock_op_free()). 0, or DLOCK_EINVAL for NULL.
 */
DLOCK_EXTERN int dlock_op_cancel(dlock_op *op);

/**
 * Drop the caller's reference to an operation (its *out): the operation
 * goes once its callback has returned too. It does not cancel it (call
 * dlock_op_cancel() first for that). Any thread, any time, the callback
 * included; once per *out. Accepts NULL.
 */
DLOCK_EXTERN void dlock_op_free(dlock_op *op);

#ifdef __cplusplus
}
#endif

#endif
