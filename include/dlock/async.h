/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/async.h - the operation machinery: what a call that does not block
 * the caller hands back (dlock_op), how it ends (dlock_result, dlock_op_cb)
 * and how it is canceled and freed. The calls themselves are declared by
 * each kind's header, beside their blocking twins (dlock/lock.h,
 * dlock/multilock.h, dlock/redlock.h, dlock/semaphore.h, dlock/countdown.h,
 * dlock/client.h).
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
#include "errors.h"

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
	 *  dlock_lock_validity_ms() right after); otherwise -1. */
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
	const struct dlock_member_status *members;
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
	struct dlock_lock_info *lock_info;
	/** dlock_semaphore_query_async(): the same, freed with
	 *  dlock_semaphore_info_free(). */
	struct dlock_semaphore_info *semaphore_info;
	/** dlock_client_holder_async() that found a registration (value 1):
	 *  who it is, valid during the callback; otherwise NULL. */
	const struct dlock_holder *holder;
	/** dlock_semaphore_acquire_async() that took an expirable permit: its
	 *  id (DLOCK_PERMIT_ID_SIZE - 1 hex digits), valid during the callback;
	 *  otherwise NULL. */
	const char *permit_id;
} dlock_result;

/** The one callback of an operation; the library's reference to `op` is
 *  dropped when it returns (a caller that kept *out still holds its own). */
typedef void (*dlock_op_cb)(dlock_op *op, const dlock_result *result, void *userdata);

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
