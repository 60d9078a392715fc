/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/multilock.h - several locks taken as one (Redisson's MultiLock).
 *
 * A MultiLock holds all of its member locks or none. Members are RLock
 * handles on any clients (servers); the MultiLock borrows them, so they must
 * outlive it. The first attempt goes to every member at once (one round trip
 * for all servers); members that are held by others are then waited for one
 * by one, each with the whole remaining wait; when one cannot be had,
 * everything taken is released and, while wait time remains, the attempt
 * starts again from the first member.
 *
 * The owner on each member is the calling thread (`<that client's uuid>:<tid>`),
 * or with the `_as` variants one explicit owner string on every member.
 * A handle may be shared by threads; _free must not race with other calls.
 */
#ifndef DLOCK_MULTILOCK_H
#define DLOCK_MULTILOCK_H

#include "common.h"
#include "lock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_multilock dlock_multilock;

/** How one member answered in the most recent acquisition on a handle. */
typedef enum dlock_vote {
	DLOCK_VOTE_NONE = 0,     /**< not asked, or asked but its answer not awaited
	                              (the outcome was decided without it) */
	DLOCK_VOTE_ACQUIRED = 1, /**< took the member lock */
	DLOCK_VOTE_HELD = 2,     /**< another owner holds it (ttl_ms says how long) */
	DLOCK_VOTE_ERROR = 3,    /**< no usable answer: see error and message */
	DLOCK_VOTE_YOUNG = 4     /**< took it on a node younger than the restart guard
	                              while another node showed a holder: not counted */
} dlock_vote;

#define DLOCK_MEMBER_STATUS_VERSION 1

/**
 * Per-member detail, for diagnostics. Set `version` (DLOCK_MEMBER_STATUS_INIT)
 * before asking: the library fills the fields that version has.
 */
typedef struct dlock_member_status {
	unsigned int version;
	const char *node;   /**< "host:port" (valid while the member's client lives) */
	dlock_vote vote;
	int error;          /**< DLOCK_E* for DLOCK_VOTE_ERROR, else 0 */
	int64_t ttl_ms;     /**< holder's remaining TTL for DLOCK_VOTE_HELD, else -1 */
	int64_t uptime_s;   /**< server uptime when the restart guard asked, else -1 */
	char message[256];  /**< one line for errors, "" otherwise */
} dlock_member_status;

#define DLOCK_MEMBER_STATUS_INIT \
	{ DLOCK_MEMBER_STATUS_VERSION, NULL, DLOCK_VOTE_NONE, 0, -1, -1, "" }

/** What DLOCK_MEMBER_STATUS_INIT does, for `version`. 0, or DLOCK_EINVAL (NULL,
 *  or a version this library does not know). */
DLOCK_EXTERN int dlock_member_status_init(dlock_member_status *s, unsigned int version);


#define DLOCK_MULTILOCK_OPTIONS_VERSION 1

/** A MultiLock's options: none yet beyond `version` (where 1.x adds them). */
typedef struct dlock_multilock_options {
	unsigned int version; /**< DLOCK_MULTILOCK_OPTIONS_VERSION (the fields you know) */
} dlock_multilock_options;

#define DLOCK_MULTILOCK_OPTIONS_INIT { DLOCK_MULTILOCK_OPTIONS_VERSION }

/** Fill `opts` with the defaults of `version`. 0, or DLOCK_EINVAL. */
DLOCK_EXTERN int dlock_multilock_options_init(dlock_multilock_options *opts, unsigned int version);

/**
 * Make a MultiLock of n (>= 1) member locks; the array is copied, the
 * members are borrowed. `opts` NULL: the defaults. Errors: DLOCK_EINVAL (NULL, n == 0, a NULL member,
 * the same handle twice, fenced and unfenced members mixed),
 * DLOCK_EDUPLICATE (the same name twice on one server and db: one resolved
 * address and port, or one socket file; the message names both spellings),
 * DLOCK_ENOMEM. *out belongs to the caller and is freed with
 * dlock_multilock_free(), before its members.
 */
DLOCK_EXTERN int dlock_multilock_new(dlock_multilock **out, dlock_lock *const *members, size_t n,
		const dlock_multilock_options *opts);

/** Free the handle (not the members). Accepts NULL. */
DLOCK_EXTERN void dlock_multilock_free(dlock_multilock *lock);

/**
 * Acquire every member for `owner` (NULL: the calling thread; an explicit
 * owner holds every member), trying for up to wait_ms (0 = one attempt,
 * members in order; DLOCK_WAIT_FOREVER = until all are held: a member
 * failing with a final error - DLOCK_EWRONGTYPE, DLOCK_EAUTH - ends it).
 * lease_ms > 0 or DLOCK_LEASE_WATCHDOG. Returns 0,
 * DLOCK_EINVAL (bad wait, lease or owner), or a quorum's errors (errors.h; the
 * quorum is every member): DLOCK_ENOTACQUIRED (a member is held by another
 * owner), DLOCK_ENOQUORUM (a member's server failed: see
 * dlock_multilock_member_status; a member whose client asks replicas to acknowledge
 * (sync_replicas) and too few did fails with DLOCK_ENOSYNC there, and is
 * given back), DLOCK_EWRONGTYPE, DLOCK_EEXPIRED, DLOCK_ENOMEM,
 * DLOCK_EFORKED, DLOCK_ECANCELED, DLOCK_EDUPLICATE (two members holding one
 * name turned out to be one server: their run_ids, learnt on connecting,
 * are the same). Nothing stays held on failure. Its twin:
 * dlock_multilock_acquire_async().
 */
DLOCK_EXTERN int dlock_multilock_acquire(dlock_multilock *lock, const char *owner,
		int64_t wait_ms, int64_t lease_ms);

/**
 * dlock_multilock_acquire() (owner NULL = calling thread) on fenced members
 * (a lock made with DLOCK_LOCK_FENCED), returning a token that grows strictly from one
 * holder to the next: the largest of the members' tokens, written back to
 * every member before success (see dlock_redlock_acquire_fenced).
 * Errors as dlock_multilock_acquire(); DLOCK_EINVAL when the members are not
 * fenced or token is NULL.
 */
DLOCK_EXTERN int dlock_multilock_acquire_fenced(int64_t *token, dlock_multilock *lock,
		const char *owner, int64_t wait_ms, int64_t lease_ms);

/**
 * Release `owner`'s (NULL: the calling thread's) hold on every member, all at once; a member that fails does not stop the
 * others. Returns 0, DLOCK_ENOTOWNER (no member was held), DLOCK_ELOST (the
 * lock had been lost before: fewer members held than needed), DLOCK_EINVAL
 * (NULL handle, bad owner), DLOCK_ENOMEM (call it again: a member
 * could not even be sent its release), or the first member's error (one
 * command's errors, errors.h; the rest were still released). Its twin:
 * dlock_multilock_release_async().
 */
DLOCK_EXTERN int dlock_multilock_release(dlock_multilock *lock, const char *owner);

/**
 * Local state of owner's hold (NULL = calling thread), no network traffic:
 * 0 all members held, DLOCK_ELOST some member's hold was lost,
 * DLOCK_ENOTOWNER not held, DLOCK_EINVAL NULL handle.
 */
DLOCK_EXTERN int dlock_multilock_check(const dlock_multilock *lock, const char *owner);

/**
 * How long every member hold of owner is certain to last from now without
 * another renewal (the shortest dlock_lock_validity_ms() of the members). No
 * traffic. Returns 0, DLOCK_ELOST, DLOCK_ENOTOWNER, DLOCK_EINVAL or
 * DLOCK_ENOMEM; *ms is 0 unless held.
 */
DLOCK_EXTERN int dlock_multilock_validity_ms(int64_t *out_ms, const dlock_multilock *lock,
		const char *owner);

/**
 * Set the callback called (on a client's background thread) when a held
 * MultiLock is lost (NULL removes it): ev->owner is the member owner whose
 * loss left too few, ev->reason that member's reason, ev->node NULL.
 * Errors: DLOCK_EINVAL (NULL handle).
 */
DLOCK_EXTERN int dlock_multilock_set_lost_cb(dlock_multilock *lock, dlock_lost_cb cb,
		void *userdata);

/** Number of members. */
DLOCK_EXTERN size_t dlock_multilock_size(const dlock_multilock *lock);
/** Member i (to query it or read its client), held by the MultiLock; NULL
 *  for no member i. As dlock_redlock_member(). */
DLOCK_EXTERN dlock_lock *dlock_multilock_member(dlock_multilock *lock, size_t i);

/**
 * Member i's answer in the most recent acquisition on this handle, into
 * *out (whose version must be set: DLOCK_MEMBER_STATUS_INIT).
 * Errors: DLOCK_EINVAL (NULL argument, no member i, unknown version).
 */
DLOCK_EXTERN int dlock_multilock_member_status(dlock_member_status *out, const dlock_multilock *lock,
		size_t i);

/** The handle's last failure message (see dlock_lock_errmsg). */
DLOCK_EXTERN const char *dlock_multilock_errmsg(const dlock_multilock *lock);

/** dlock_multilock_errmsg() copied into buf; returns the full length (see dlock_errmsg_last_r). */
DLOCK_EXTERN size_t dlock_multilock_errmsg_r(char *buf, size_t len, const dlock_multilock *lock);

/** The members that must hold the lock: n (all of them). */
DLOCK_EXTERN size_t dlock_multilock_quorum(const dlock_multilock *lock);

/**
 * *out = 1 when a quorum of members show the lock held by anyone (EXISTS on
 * every member at once), 0 when too many show it free for a quorum to hold
 * it; it answers as soon as the answers settle it (a stopped server is then
 * not waited for; its twin is below). Errors: DLOCK_ENOQUORUM when
 * the members that answered cannot settle it (the message names the first
 * failure), DLOCK_EWRONGTYPE, DLOCK_EINVAL.
 * Like Redisson's isLocked, a snapshot: it may change at once.
 */
DLOCK_EXTERN int dlock_multilock_is_locked(int *out, dlock_multilock *lock);

/**
 * *out = 1 when a quorum of members show `owner` (NULL: the calling thread)
 * holding the lock (HEXISTS on each); errors as dlock_multilock_is_locked().
 */
DLOCK_EXTERN int dlock_multilock_is_held(int *out, dlock_multilock *lock, const char *owner);

/**
 * *out_ms = member i's remaining TTL (PTTL): -2 no lock there, -1 no expiry.
 * Errors: DLOCK_EINVAL (no such member), and those of one command.
 */
DLOCK_EXTERN int dlock_multilock_member_ttl_ms(int64_t *out_ms, dlock_multilock *lock, size_t i);

/**
 * Two members on one server, by the run_id their servers gave on the
 * connections made so far (it sends nothing: a member not connected yet is
 * not compared). Every acquisition and query checks this too; a caller that
 * reads members one by one (dlock_lock_query) calls it after. Returns 0,
 * DLOCK_EDUPLICATE (the message names both members), DLOCK_EINVAL (NULL).
 */
DLOCK_EXTERN int dlock_multilock_check_servers(dlock_multilock *lock);

/* Asynchronous calls (dlock/async.h has the operation, its result and callback). */

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

/** Release `owner`'s hold on every member (as the unlock_as calls). */
DLOCK_EXTERN int dlock_multilock_release_async(dlock_op **out, dlock_multilock *m,
		const char *owner, dlock_op_cb cb, void *userdata);

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
DLOCK_EXTERN int dlock_multilock_is_held_async(dlock_op **out, dlock_multilock *lock,
		const char *owner, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_multilock_member_ttl_ms_async(dlock_op **out, dlock_multilock *lock, size_t i,
		dlock_op_cb cb, void *userdata);

#ifdef __cplusplus
}
#endif

#endif
