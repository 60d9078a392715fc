/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/countdown.h - RCountDownLatch: a count on one Redis server that
 * waiters wait to see reach zero, Redisson's data layout and messages, so
 * Java and C services share one latch.
 *
 * Data. The key `<name>` (verbatim) is a STRING holding the count; a latch
 * that reached zero is deleted, so "no key" reads as count 0 - for a latch
 * that was never set too, as in Redisson. Changes are announced on the
 * channel `redisson_countdownlatch__channel__{<name>}` (always with the
 * braces, as Redisson writes it): "0" when a count down reaches zero, "1"
 * when a count is set or the latch deleted. In a cluster with sharded
 * pub/sub (Redis 7+) the messages go out with SPUBLISH, as Redisson's do.
 *
 * Waiting. An await listens on the channel (one subscription per client and
 * channel, shared by every local waiter) before it reads the count, so a
 * zero reached in between is not missed, and reads it again at every
 * message: it is woken by the message, never by polling. Every waiter of
 * the latch wakes at the "0". A delete wakes dlock's waiters too (they find
 * the count 0); Redisson's own waiters only see that at their next look.
 *
 * Once at zero, a latch can be set again with try_set_count (the key is
 * gone, so the set succeeds) - Redisson's "reset".
 *
 * Kinds. A count is also what a semaphore keeps (docs/kinds.md), so a latch
 * set through dlock also gets a mark of dlock's own, `dlock_latch:{<name>}`
 * (in the key's slot; Redisson neither reads nor writes it), deleted with
 * the latch: semaphore commands refuse a marked count, and latch commands
 * refuse an expirable semaphore with permits taken and every other kind.
 *
 * A handle may be shared by threads. All functions return 0 or a negative
 * DLOCK_E* code; the handle's dlock_countdown_errmsg() names the node and
 * the cause of its last failure.
 */
#ifndef DLOCK_COUNTDOWN_H
#define DLOCK_COUNTDOWN_H

#include "common.h"
#include "client.h"
#include "async.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_countdown dlock_countdown;

#define DLOCK_COUNTDOWN_OPTIONS_VERSION 2

/**
 * Latch options. Initialise with DLOCK_COUNTDOWN_OPTIONS_INIT or
 * dlock_countdown_options_init(); fields are only ever appended, `version`
 * tells the library which you know.
 */
typedef struct dlock_countdown_options {
	unsigned int version;
	/**
	 * (version 2) 1: dlock_countdown_count() and
	 * dlock_countdown_count_down() report -1 when the latch does not exist
	 * (never set, a typo'd name, deleted, or opened - counted down to zero -
	 * over a day ago: dlock remembers an opening for a day and reports 0
	 * then), so a caller can refuse to pass a barrier that is not there.
	 * 0 (default): they report 0 then, as Redisson's getCount().
	 */
	int report_missing;
} dlock_countdown_options;

#define DLOCK_COUNTDOWN_OPTIONS_INIT { DLOCK_COUNTDOWN_OPTIONS_VERSION, 0 }

/**
 * Fill `opts` with the defaults of `version` (0 < version <=
 * DLOCK_COUNTDOWN_OPTIONS_VERSION). Returns 0, or DLOCK_EINVAL (with a
 * message) for NULL or an unknown version.
 */
DLOCK_EXTERN int dlock_countdown_options_init(dlock_countdown_options *opts, unsigned int version);

/**
 * Make a latch handle for `name` (copied; any bytes but NUL, at most
 * 64 KiB) on `client` (opts NULL: the defaults; read only during the call).
 * No network traffic. *out belongs to the caller and is freed with
 * dlock_countdown_free(), before its client is freed.
 * Errors: DLOCK_EINVAL (NULL out or client, a NULL, empty or too long name,
 * an unknown options version; in a cluster, a name whose key and channel
 * would hash to different slots - one with '{' or '}' in it, since the
 * channel adds braces of its own), DLOCK_ENOMEM.
 */
DLOCK_EXTERN int dlock_countdown_new(dlock_countdown **out, dlock_client *client, const char *name,
		const dlock_countdown_options *opts);

/**
 * Free the handle; the latch stays in Redis. Accepts NULL. No other call
 * may be running on the handle; operations still under way keep what they
 * need and end normally.
 */
DLOCK_EXTERN void dlock_countdown_free(dlock_countdown *latch);

/** The latch's name (its Redis key). */
DLOCK_EXTERN const char *dlock_countdown_name(const dlock_countdown *latch);

/**
 * Set the count to `count` (>= 1) if the latch does not exist (never set,
 * or reached zero, or deleted), and announce it ("1"). *set (may be NULL)
 * is 1 when this call set it, 0 when a latch existed (left unchanged).
 * Not resent after a lost reply (a resend would answer 0 for a set that
 * happened): a connection error or timeout then leaves it unknown.
 * Errors: DLOCK_EINVAL (NULL handle, count < 1), DLOCK_EWRONGTYPE (the
 * key is another kind's - a lock, an expirable semaphore with permits
 * taken, another program's value: docs/kinds.md; nothing changed), one
 * command's errors (errors.h).
 */
DLOCK_EXTERN int dlock_countdown_try_set_count(int *set, dlock_countdown *latch, int64_t count);

/**
 * Decrement the count; at zero the latch is deleted and "0" published,
 * waking every waiter (local and remote). On a latch that does not exist
 * it changes nothing. *left (may be NULL) is the count after it (0 once it
 * reached zero; for a latch that did not exist 0, or -1 with the option
 * report_missing). Not resent after a lost reply (it would count twice).
 * Errors: DLOCK_EINVAL (NULL handle), DLOCK_EWRONGTYPE (the key is not a
 * latch's count: another kind's, docs/kinds.md; nothing changed), one
 * command's errors (errors.h).
 */
DLOCK_EXTERN int dlock_countdown_count_down(int64_t *left, dlock_countdown *latch);

/**
 * *count = the current count (0 when the latch does not exist, or -1 with
 * the option report_missing). Errors: DLOCK_EINVAL (NULL argument),
 * DLOCK_EWRONGTYPE (the key is not a latch's count), one command's errors
 * (errors.h).
 */
DLOCK_EXTERN int dlock_countdown_count(int64_t *count, dlock_countdown *latch);

/**
 * *out = how many clients listen on the latch's channel at its server
 * (classic and sharded pub/sub): waiters in await, dlock's and Redisson's
 * alike (dlock shares one subscription per client and channel). One read-only
 * script call; for status displays (`dlock status` tells a latch from a
 * semaphore by it). Errors: DLOCK_EINVAL (NULL argument), one command's
 * errors (errors.h).
 */
DLOCK_EXTERN int dlock_countdown_subscribers(int64_t *out, dlock_countdown *latch);

/**
 * Delete the latch whatever its count, announcing it ("1") when it
 * existed; *deleted (may be NULL) is 1 then, else 0. dlock's waiters wake
 * and find the count 0. Errors: DLOCK_EINVAL (NULL handle), one command's
 * errors (errors.h).
 */
DLOCK_EXTERN int dlock_countdown_delete(int *deleted, dlock_countdown *latch);

/**
 * Wait up to wait_ms (0: one look; DLOCK_WAIT_FOREVER: no limit) for the
 * count to be zero. Returns 0 when it is (at once for a latch at zero or
 * never set), DLOCK_ETIMEDOUT when the wait ran out with the count above
 * zero, DLOCK_ECANCELED after dlock_client_cancel_waits(), DLOCK_EINVAL
 * (NULL handle, wait_ms < -1), or a wait's final errors (errors.h:
 * DLOCK_EWRONGTYPE when the key is not a count). Transient failures
 * (connection lost, timeouts, a server loading) are ridden out until the
 * wait is over, which then returns the last of them.
 */
DLOCK_EXTERN int dlock_countdown_await(dlock_countdown *latch, int64_t wait_ms);

/*
 * Asynchronous twins (see dlock/async.h): each starts an operation on the
 * latch's client's loop and returns at once; its callback runs exactly
 * once, never inside the starting call, with result->code as the blocking
 * call returns it and the answer in result->value: try_set_count 1 set /
 * 0 it existed; count_down the count left; get_count the count; delete 1
 * deleted / 0 none; await 0. *out (may be NULL) receives the op. Errors (no callback then): DLOCK_EINVAL,
 * DLOCK_ENOMEM, DLOCK_EFORKED. dlock_op_cancel() ends an await or a
 * get_count early with DLOCK_ECANCELED; a set, count down or delete is
 * not canceled (it may have run: it finishes and tells).
 */
DLOCK_EXTERN int dlock_countdown_try_set_count_async(dlock_op **out, dlock_countdown *latch,
		int64_t count, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_countdown_count_down_async(
		dlock_op **out, dlock_countdown *latch, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_countdown_count_async(
		dlock_op **out, dlock_countdown *latch, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_countdown_delete_async(
		dlock_op **out, dlock_countdown *latch, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_countdown_await_async(dlock_op **out, dlock_countdown *latch,
		int64_t wait_ms, dlock_op_cb cb, void *userdata);
/* dlock_countdown_subscribers() as an operation: its answer is the result's
 * `value`; it may be canceled. */
DLOCK_EXTERN int dlock_countdown_subscribers_async(
		dlock_op **out, dlock_countdown *latch, dlock_op_cb cb, void *userdata);

/**
 * The one-line message of the most recent failure on this handle, from any
 * thread ("" if none); a copy owned by the calling thread, valid until its
 * next dlock call.
 */
DLOCK_EXTERN const char *dlock_countdown_errmsg(const dlock_countdown *latch);

/** dlock_countdown_errmsg() copied into buf; returns the full length (see dlock_errmsg_last_r). */
DLOCK_EXTERN size_t dlock_countdown_errmsg_r(char *buf, size_t len, const dlock_countdown *latch);

#ifdef __cplusplus
}
#endif

#endif
