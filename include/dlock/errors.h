/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/errors.h - error codes.
 *
 * Every function that can fail returns 0 on success or one of the negative
 * codes below. Codes are only ever appended, never renumbered. The handle a
 * call worked on keeps a one-line message for the failure (node, command,
 * server reply): see dlock_client_errmsg() and dlock_lock_errmsg(); every
 * failure, DLOCK_EINVAL included, sets one.
 *
 * Each function's comment lists the codes it can return. Three sets recur,
 * named once here:
 *   one command's errors: DLOCK_ECONN, DLOCK_ETIMEDOUT, DLOCK_EPROTO (the
 *     server not reached in time, or an unreadable reply), DLOCK_EAUTH,
 *     DLOCK_ESERVER (an error reply: READONLY, OOM, NOPERM, LOADING, ...),
 *     DLOCK_EWRONGTYPE, DLOCK_ENOMEM, DLOCK_EFORKED;
 *   a wait's final errors: DLOCK_EAUTH, DLOCK_EWRONGTYPE, DLOCK_ESERVER
 *     other than LOADING/BUSY/TRYAGAIN/CLUSTERDOWN, DLOCK_ENOMEM,
 *     DLOCK_EFORKED, DLOCK_ECANCELED, DLOCK_ECONN for a TLS handshake
 *     refused (untrusted certificate, wrong name) - a wait rides out the
 *     others (connection lost, timeouts, a server loading) until its time
 *     is up, and then returns the last of them; a server that never
 *     answered, only for the client's first_contact_timeout_ms;
 *   a quorum's errors: DLOCK_ENOTACQUIRED (held by others on too many
 *     members), DLOCK_ENOQUORUM (too few members answered; their errors are
 *     in the message and in the member status), DLOCK_EWRONGTYPE (instead
 *     of ENOQUORUM when a member's key is not a lock), DLOCK_EEXPIRED (a
 *     quorum, but only after the validity had run out), DLOCK_ENOMEM,
 *     DLOCK_EFORKED, DLOCK_ECANCELED, DLOCK_EDUPLICATE (two members were
 *     found to be one server once connected).
 */
#ifndef DLOCK_ERRORS_H
#define DLOCK_ERRORS_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dlock_error {
	DLOCK_OK = 0,
	DLOCK_EINVAL = -1,       /**< a NULL, empty or out-of-range argument */
	DLOCK_ENOMEM = -2,       /**< an allocation failed in this process */
	DLOCK_ECONN = -3,        /**< could not connect, or the connection dropped */
	DLOCK_ETIMEDOUT = -4,    /**< a network deadline passed (server slow, paused or gone) */
	DLOCK_EAUTH = -5,        /**< the server refused the credentials */
	DLOCK_ESERVER = -6,      /**< the server answered with an error (READONLY, OOM, NOPERM, ...) */
	DLOCK_EWRONGTYPE = -7,   /**< the lock's key exists and is not a lock (WRONGTYPE) */
	DLOCK_EPROTO = -8,       /**< the server's reply was not what the protocol promises */
	DLOCK_ENOTACQUIRED = -9, /**< the lock is held by someone else (within the wait) */
	DLOCK_ENOTOWNER = -10,   /**< the caller does not hold the lock it tried to release */
	DLOCK_ELOST = -11,       /**< the lock was held and has been lost (expired, deleted, node reset) */
	DLOCK_ENOQUORUM = -12,   /**< too few nodes answered to decide (infrastructure failure) */
	DLOCK_EEXPIRED = -13,    /**< a quorum was reached only after the lease had run out */
	DLOCK_ESYS = -14,        /**< an operating-system call failed (threads, sockets) */
	DLOCK_ECANCELED = -15,   /**< the wait was canceled (dlock_client_cancel_waits) */
	DLOCK_EFORKED = -16,     /**< the client was opened by the parent of this forked
	                              process: open a new client in the child */
	DLOCK_EBUSY = -17,       /**< the object is still in use (a client with lock handles) */
	DLOCK_ENOSYNC = -18,     /**< fewer replicas than sync_replicas acknowledged the
	                              acquisition in time: it was rolled back */
	DLOCK_EDUPLICATE = -19   /**< two members of a MultiLock/RedLock are one server
	                              (one address, or one run_id): it would be counted
	                              twice; the message names both spellings */
} dlock_error;

/**
 * A short, fixed description of an error code ("lock held by another owner").
 * Pure and reentrant; unknown codes give "unknown error".
 */
DLOCK_EXTERN const char *dlock_strerror(int error);

/**
 * The calling thread's most recent failure message, from whichever dlock
 * call failed last in this thread ("" if none). Useful when a constructor
 * failed and there is no handle to ask. Valid until the thread's next dlock
 * call.
 */
DLOCK_EXTERN const char *dlock_errmsg_last(void);

/**
 * dlock_errmsg_last() copied into buf (len bytes, always NUL-terminated
 * when len > 0), for callers that keep the message past their next dlock
 * call. Returns the message's full length (as snprintf), so a longer
 * buffer can be retried; the _r getters of the handles work the same.
 */
DLOCK_EXTERN size_t dlock_errmsg_last_r(char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
