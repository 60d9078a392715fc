/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/redlock.h - RedLock: one lock held on a quorum (n/2+1) of n
 * independent Redis servers.
 *
 * The MultiLock engine with a quorum: the first attempt goes to all members
 * at once, and the lock is granted as soon as a quorum took it and refused
 * as soon as that became impossible; members held by others are then waited
 * for with max(remaining/n, 1) ms each. A dead or paused server costs at most
 * its client's command timeout and never changes n.
 *
 * Validity: the time the caller may rely on holding the lock,
 *   validity = ttl - elapsed - (ttl * drift_factor + 2 ms),
 * where elapsed is measured (monotonic clock) from sending the commands that
 * set the counted members' TTLs to the quorum decision; validity <= 0 is
 * DLOCK_EEXPIRED and nothing stays held.
 *
 * Restart guard: a server that restarted without its data can hand a second
 * owner a quorum while the first still holds the lock (Kleppmann). A node is
 * "young" while its uptime is below the guard window; a young node's "free"
 * vote is not counted when another node shows the lock held by someone else.
 * It needs no extra round trip unless there is contention (uptime is cached
 * per connection). Freshly started servers are young too: in a cluster's
 * first minute, contended acquisitions may be refused where they would have
 * succeeded. Window 0 turns the guard off.
 */
#ifndef DLOCK_REDLOCK_H
#define DLOCK_REDLOCK_H

#include "common.h"
#include "client.h"
#include "lock.h"
#include "multilock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_redlock dlock_redlock;

#define DLOCK_REDLOCK_OPTIONS_VERSION 1

typedef struct dlock_redlock_options {
	unsigned int version;
	/** Clock drift allowance per ms of TTL (default 0.01). */
	double drift_factor;
	/** Restart guard window, ms: -1 = the longer of the watchdog timeout and
	 *  the lease (default), 0 = off. While it is on, an acquisition decides
	 *  only once every member answered or timed out (the answer still to
	 *  come may be the holder that makes the others' votes doubtful), so a
	 *  hung server costs one command timeout, then is skipped for 2 s. */
	int64_t restart_guard_ms;
	/** 1: ignore young nodes' votes altogether (safest, least available). */
	int restart_guard_strict;
	/** 1: dlock_redlock_new_from_uris() makes fenced members (see dlock_redlock_acquire_fenced). */
	int fenced;
} dlock_redlock_options;

#define DLOCK_REDLOCK_OPTIONS_INIT { DLOCK_REDLOCK_OPTIONS_VERSION, 0.01, -1, 0, 0 }

DLOCK_EXTERN int dlock_redlock_options_init(dlock_redlock_options *opts, unsigned int version);

/**
 * A RedLock over n (>= 1) member locks (borrowed, like dlock_multilock_new;
 * normally one per server, same name). opts may be NULL.
 * Errors: DLOCK_EINVAL (as dlock_multilock_new, bad options or their
 * version), DLOCK_EDUPLICATE (one server listed twice for one name, in any
 * db: by resolved address or socket file; the message names both
 * spellings), DLOCK_ENOMEM. *out belongs to the caller and is freed with
 * dlock_redlock_free(), before its members.
 */
DLOCK_EXTERN int dlock_redlock_new(dlock_redlock **out, dlock_lock *const *members, size_t n,
		const dlock_redlock_options *opts);

/**
 * A RedLock on lock `name` over the servers `uris` (one client each, owned by
 * the RedLock and connected lazily, so a server that is down at start is just
 * a failed vote). client_opts and opts may be NULL. *out belongs to the
 * caller and is freed with dlock_redlock_free().
 * Errors: DLOCK_EINVAL (bad URI: the message names it; bad options),
 * DLOCK_EDUPLICATE (as dlock_redlock_new), DLOCK_ENOMEM, DLOCK_ESYS.
 */
DLOCK_EXTERN int dlock_redlock_new_from_uris(dlock_redlock **out, const char *const *uris,
		size_t n, const char *name, const dlock_client_options *client_opts,
		const dlock_redlock_options *opts);

/** Free the handle, and the clients and members it opened. Accepts NULL. */
DLOCK_EXTERN void dlock_redlock_free(dlock_redlock *lock);

/**
 * Acquire a quorum of members for `owner` (NULL: the calling thread),
 * trying for up to wait_ms (0 = one parallel attempt; DLOCK_WAIT_FOREVER =
 * until a quorum is held: members' final errors on more than n - quorum
 * members end it). lease_ms > 0 or DLOCK_LEASE_WATCHDOG (members renewed by
 * their clients' watchdogs; lost when fewer than a quorum can be renewed,
 * and then the members still held are no longer renewed, so they expire).
 * How long the hold is certain to last: dlock_redlock_validity_ms() (the
 * async twin's result->validity_ms). Returns 0, DLOCK_EINVAL (bad wait,
 * lease or owner), or a quorum's errors (errors.h):
 * DLOCK_ENOTACQUIRED (held by another owner on too many members),
 * DLOCK_ENOQUORUM (too many servers failed to answer, or, with
 * sync_replicas, their replicas to acknowledge: see dlock_multilock_acquire),
 * DLOCK_EWRONGTYPE, DLOCK_EEXPIRED (a quorum, but only after the TTL had run out),
 * DLOCK_ENOMEM, DLOCK_EFORKED, DLOCK_ECANCELED, DLOCK_EDUPLICATE (two
 * members turned out to be one server by run_id, see dlock_multilock_acquire).
 * Nothing stays held on failure: every member that may have been taken is
 * released. Its twin: dlock_redlock_acquire_async().
 */
DLOCK_EXTERN int dlock_redlock_acquire(dlock_redlock *lock, const char *owner, int64_t wait_ms,
		int64_t lease_ms);

/**
 * dlock_redlock_acquire() (owner NULL = calling thread) on fenced members,
 * returning a fencing token that grows strictly from one holder to the next
 * although each server counts on its own: the largest token of the quorum,
 * written back to every reachable member ("set if greater") and confirmed
 * by a quorum before success is reported, so any later quorum, which shares
 * a server with that one, counts past it.
 * The argument needs that shared server to have kept its counter. A delayed
 * restart protects the lock (its key expires anyway) but not the counter:
 * if servers may restart without their data, keep the counters
 * `redisson_lock_token:*` persistent (appendonly yes, appendfsync always),
 * or a majority restarting empty one after the other can hand out a smaller
 * token again.
 * Errors as dlock_redlock_acquire(); DLOCK_EINVAL when the members are not
 * fenced locks or token is NULL.
 */
DLOCK_EXTERN int dlock_redlock_acquire_fenced(int64_t *token, dlock_redlock *lock,
		const char *owner, int64_t wait_ms, int64_t lease_ms);

/**
 * Release `owner`'s (NULL: the calling thread's) hold on every member (also
 * those that failed while acquiring). Errors as dlock_multilock_release();
 * a quorum of releases is success. Its twin: dlock_redlock_release_async().
 */
DLOCK_EXTERN int dlock_redlock_release(dlock_redlock *lock, const char *owner);

/**
 * Local state, no traffic: 0 held on a quorum, DLOCK_ELOST fewer than a
 * quorum still held, DLOCK_ENOTOWNER not held, DLOCK_EINVAL NULL handle.
 */
DLOCK_EXTERN int dlock_redlock_check(const dlock_redlock *lock, const char *owner);

/**
 * How long a quorum of owner's member holds is certain to last from now
 * without another renewal (dlock_lock_validity_ms() of each member; the
 * quorum-th longest). No traffic. Returns 0, DLOCK_ELOST, DLOCK_ENOTOWNER,
 * DLOCK_EINVAL or DLOCK_ENOMEM; *ms is 0 unless held.
 */
DLOCK_EXTERN int dlock_redlock_validity_ms(int64_t *out_ms, const dlock_redlock *lock,
		const char *owner);

/** As dlock_multilock_set_lost_cb(): the callback comes when fewer than a
 *  quorum of a held RedLock's members can still be renewed. */
DLOCK_EXTERN int dlock_redlock_set_lost_cb(dlock_redlock *lock, dlock_lost_cb cb,
		void *userdata);

/** Number of members. */
DLOCK_EXTERN size_t dlock_redlock_size(const dlock_redlock *lock);
/** Member i (to query it or read its client), owned by the RedLock. */
DLOCK_EXTERN dlock_lock *dlock_redlock_member(dlock_redlock *lock, size_t i);
/** As dlock_multilock_member_status(). */
DLOCK_EXTERN int dlock_redlock_member_status(dlock_member_status *out, const dlock_redlock *lock,
		size_t i);
/** The handle's last failure message (see dlock_lock_errmsg). */
DLOCK_EXTERN const char *dlock_redlock_errmsg(const dlock_redlock *lock);

/** dlock_redlock_errmsg() copied into buf; returns the full length (see dlock_errmsg_last_r). */
DLOCK_EXTERN size_t dlock_redlock_errmsg_r(char *buf, size_t len, const dlock_redlock *lock);

/** The members that must hold the lock: n/2 + 1. */
DLOCK_EXTERN size_t dlock_redlock_quorum(const dlock_redlock *lock);

/**
 * *out = 1 when a quorum of members show the lock held by anyone (EXISTS on
 * every member at once), 0 when too many show it free for a quorum to hold
 * it; it answers as soon as the answers settle it (a stopped server is then
 * not waited for; dlock/async.h has the twin). Errors: DLOCK_ENOQUORUM when
 * the members that answered cannot settle it (the message names the first
 * failure), DLOCK_EWRONGTYPE, DLOCK_EINVAL.
 * Like Redisson's isLocked, a snapshot: it may change at once.
 */
DLOCK_EXTERN int dlock_redlock_is_locked(int *out, dlock_redlock *lock);

/**
 * *out = 1 when a quorum of members show `owner` (NULL: the calling thread)
 * holding the lock (HEXISTS on each); errors as dlock_redlock_is_locked().
 */
DLOCK_EXTERN int dlock_redlock_is_held(int *out, dlock_redlock *lock, const char *owner);

/**
 * *out_ms = member i's remaining TTL (PTTL): -2 no lock there, -1 no expiry.
 * Errors: DLOCK_EINVAL (no such member), and those of one command.
 */
DLOCK_EXTERN int dlock_redlock_member_ttl_ms(int64_t *out_ms, dlock_redlock *lock, size_t i);

/**
 * Two members on one server, by the run_id their servers gave on the
 * connections made so far (it sends nothing: a member not connected yet is
 * not compared). Every acquisition and query checks this too; a caller that
 * reads members one by one (dlock_lock_query) calls it after. Returns 0,
 * DLOCK_EDUPLICATE (the message names both members), DLOCK_EINVAL (NULL).
 */
DLOCK_EXTERN int dlock_redlock_check_servers(dlock_redlock *lock);

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
DLOCK_EXTERN int dlock_redlock_owner(char owner[DLOCK_OWNER_SIZE], const dlock_redlock *lock,
		uint64_t id);

/** Release `owner`'s hold on every member (as the unlock_as calls). */
DLOCK_EXTERN int dlock_redlock_release_async(dlock_op **out, dlock_redlock *r, const char *owner,
		dlock_op_cb cb, void *userdata);

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
DLOCK_EXTERN int dlock_redlock_is_locked_async(dlock_op **out, dlock_redlock *lock,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_redlock_is_held_async(dlock_op **out, dlock_redlock *lock,
		const char *owner, dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_redlock_member_ttl_ms_async(dlock_op **out, dlock_redlock *lock, size_t i,
		dlock_op_cb cb, void *userdata);

#ifdef __cplusplus
}
#endif

#endif
