/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: one acquire attempt split in its two halves, so that the quorum
 * engine can send many at once (core/mux/mux.h) and still record each hold
 * exactly as a single lock does.
 */
#ifndef DLOCK_SINGLE_ACQUIRE_H
#define DLOCK_SINGLE_ACQUIRE_H

#include <stdint.h>
#include <hiredis/hiredis.h>

#include "dlock/async.h"
#include "dlock/lock.h"
#include "dlock/loop.h"
#include "core/base/time.h" /* dlock__wall_ms: a fair lock's deadlines */
#include "core/net/script.h"

/*
 * How long a fair waiter's place lasts past the one ahead of it, as its
 * acquire, leave and rollback all tell the server (they must agree: a
 * leave takes this much off the places behind). A try with a wait: the wait
 * and a command timeout more, so that the leave of a waiter that gives up
 * at its deadline reaches the server before its place expires (else the
 * place is pruned and those behind keep waiting for the time it had).
 * Otherwise the lock's fair_wait_ms.
 */
int64_t dlock__fair_place_ms(const dlock_lock *l, int64_t wait_ms);

/* A fair waiter asks again at least this often while others are ahead of it. */
#define DLOCK__FAIR_POLL_MS 50

typedef struct dlock__acquire {
	dlock__call call;
	const char *owner; /* points into owner_buf or at the caller's string */
	int64_t lease_ms;  /* as asked: > 0 or DLOCK_LEASE_WATCHDOG */
	int64_t believed;  /* hold count before, as the client believed it (-1 unknown) */
	int64_t count;     /* holds after a successful acquire */
	int64_t token;     /* fenced: the token this acquisition got */
	int64_t waiters;   /* busy, asked by dlock__acquire_herd: processes watching; else -1 */
	int role;          /* busy, asked with `roles`: DLOCK__HERD_WATCH or _SLEEP; else 0 */
	const char *left;  /* the wait's left mark (dlock__acquire_wait_key); NULL: none */
	size_t left_len;
	char owner_buf[64];
	char lease_s[24];
	char believed_s[24];
	char wait_s[24];
	char now_s[24];
} dlock__acquire;

/*
 * Fill *a for lock l; owner NULL = the calling thread. `wait_ms` matters to
 * a fair lock only: > 0 joins the queue with that wait, 0 is one attempt
 * that never queues. `vouched`: the caller knows the owner is this
 * process's alone (a quorum's owner named after one of its clients), so
 * the client's record is the truth, as for the thread's own. DLOCK_EINVAL
 * for a bad owner.
 */
int dlock__acquire_prepare(dlock_lock *l, const char *owner, int vouched, int64_t wait_ms,
		int64_t lease_ms, dlock__acquire *a);

/* How many waiting processes of a plain or fenced lock listen on its channel (scripts.c). */
#define DLOCK__HERD_WATCHERS 4
#define DLOCK__HERD_WATCHERS_ARG "4" /* the same, as the scripts' argument */
#define DLOCK__HERD_WATCH 1
#define DLOCK__HERD_SLEEP 2

/*
 * Ask as a waiter of a plain or fenced lock (after dlock__acquire_prepare):
 * a busy lock then also counts the watching processes (a->waiters, after
 * dlock__acquire_finish) and a new hold is told to them on dlock's "taken"
 * channel (scripts.c, single/acquire_op.c) when `tell` (a waiter's retry;
 * a first attempt, mostly uncontended, skips the count). With `roles` (a
 * retry of a waiter that listens on its wake-up channel) it also joins the
 * lock's waiters and learns whether to watch or sleep (a->role); one that
 * would sleep first drops the watchers that are gone. Other kinds are left
 * as they are.
 */
#define DLOCK__HERD_ROLES 1
void dlock__acquire_herd(const dlock_lock *l, dlock__acquire *a, int tell, int roles);

/*
 * Name a fair waiter's mark in its attempt (after dlock__acquire_prepare):
 * `key` (the lock's hash tag, and an id of this one wait; it must outlive
 * the attempt and the leave) exists once the wait has left its queue while
 * an attempt of it was unanswered (dlock__fair_exit_prepare), and an attempt
 * that runs late, after that leave, then neither queues nor takes the lock.
 * Other kinds are left as they are.
 */
void dlock__acquire_wait_key(const dlock_lock *l, dlock__acquire *a, const char *key, size_t len);

/*
 * Interpret the reply of the acquire script sent at sent_at: 0 acquired
 * (and recorded, so the watchdog renews it), DLOCK_ENOTACQUIRED with *ttl,
 * or an error (error replies mapped, message set). Does not free r.
 */
int dlock__acquire_finish(dlock_lock *l, dlock__acquire *a, const redisReply *r, int64_t sent_at,
		int64_t *ttl);

/*
 * The replica acknowledgement (core/drive/sync.h) of an acquisition that was
 * made: judge the WAIT's outcome (read with sync_rc, reply sync_reply) and
 * keep the count on the handle (dlock_lock_synced_replicas). 0 enough,
 * DLOCK_ENOSYNC too few, or the error that left the count unknown, with a
 * message; the caller gives the hold back.
 */
int dlock__acquire_sync_check(dlock_lock *l, int sync_rc, const redisReply *sync_reply);

/*
 * Acquire with the wait for a release (pub/sub), blocking: the wait of
 * single/acquire_op.c driven to its end on the calling thread; *token (may be NULL)
 * receives a fenced lock's token, *holder_ttl (may be NULL) the holder's
 * PTTL when the result is DLOCK_ENOTACQUIRED. `cancels` is the client's
 * cancel count when the caller's wait began (dlock__client_cancels): once
 * it changes, the wait ends with DLOCK_ECANCELED. With `ride_out_errors`
 * the wait also outlasts transient errors; without it (a quorum's member,
 * whose engine moves on to the next member instead) they end it.
 */
int dlock__lock_acquire(dlock_lock *l, const char *owner, int64_t wait_ms, int64_t lease_ms,
		uint64_t cancels, int ride_out_errors, int64_t *token, int64_t *holder_ttl);

/*
 * The same wait as an op on `loop` (a quorum's member: transient errors end
 * it), for owner (NULL: the thread's that runs the loop; `vouched` as
 * for dlock__acquire_prepare); cb gets the
 * outcome. *out: the op, valid until its callback (no reference to free,
 * unlike dlock/async.h's). 0, or an error (no op, no callback).
 */
int dlock__lock_acquire_start(dlock_op **out, dlock_loop *loop, dlock_lock *l,
		const char *owner, int vouched, int64_t wait_ms, int64_t lease_ms, uint64_t cancels,
		dlock_op_cb cb, void *userdata);

/*
 * The halves of acquire.c the wait (single/acquire_op.c) uses: whether a
 * failure is worth waiting out, the argument checks, the give-back of an
 * acquisition too few replicas acknowledged (a fair waiter's leaving is
 * below, with the rollback it may be).
 */
int dlock__acquire_transient(dlock_client *c, int rc, const redisReply *r);
int dlock__acquire_check_times(dlock_lock *l, int64_t wait_ms, int64_t lease_ms);
int dlock__acquire_unsynced(dlock_lock *l, const dlock__acquire *a, int code, const char *msg,
		int rc, const redisReply *r);

/* The owner is `<this client's uuid>:...`: no other client can hold it. */
int dlock__owned_by_client(const dlock_client *c, const char *owner);

/* The release of one hold, split the same way. */
typedef struct dlock__release {
	dlock__call call; /* the kind's release script */
	const char *owner;
	uint64_t epoch; /* of the hold marked as being released (0: none) */
	/* The count is known (and no acquire of it is in doubt): a repeat is
	 * recognised (RELEASE_REPEATED in scripts.h), or there is nothing a
	 * repeat could take. Otherwise the release must not be sent twice
	 * (dlock__mux_op.no_retry). */
	int retry_safe;
	char repeat[2]; /* the script's `repeat`: "0", set to "1" by a resend (dlock__mux_op.repeat) */
	char owner_buf[64];
	char lease_s[24];
	char believed_s[24];
	char now_s[24];
} dlock__release;

/* Release one hold of owner (NULL: the calling thread), blocking: the
 * asynchronous release (single/release_op.c) driven to its end here. */
int dlock__lock_release(dlock_lock *l, const char *owner);

/* What a release of l publishes: "0" (wake one waiter), "1" for a write half (wake all). */
const char *dlock__release_message(const dlock_lock *l);

/* Fill *r (owner NULL = the calling thread). DLOCK_EINVAL, DLOCK_ENOMEM. */
int dlock__release_prepare(dlock_lock *l, const char *owner, dlock__release *r);

/* 0 released one hold, DLOCK_ENOTOWNER, DLOCK_ELOST, or an error. Updates the record. */
int dlock__release_finish(dlock_lock *l, dlock__release *r, const redisReply *reply);

/* Free what prepare (for lock l) allocated and end the release's mark on the hold. */
void dlock__release_clear(dlock_lock *l, dlock__release *r);

/*
 * The take-back of one hold an acquire may have made: it releases owner's
 * hold only when its count there is exactly `expect` (an acquire that
 * never ran costs nothing), and for a fair lock also the queue place the
 * acquire (with wait_ms) may have taken.
 */
typedef struct dlock__rollback {
	dlock__call call;
	char count[24];
	char lease[24];
	char wait[24];
} dlock__rollback;

void dlock__rollback_prepare(dlock_lock *l, const char *owner, int64_t expect, int64_t wait_ms,
		dlock__rollback *u);
/*
 * Record what a rollback (rc, reply) did to the client's record: the hold
 * goes when the rollback took it, or when nobody knows (the server did not
 * answer: nobody renews it, it expires). believed: the count before the
 * acquire that is taken back.
 */
void dlock__rollback_finish(dlock_lock *l, const char *owner, int64_t believed, int rc,
		const redisReply *reply);

/*
 * A fair waiter that stops waiting without the lock leaves its queue: the
 * call to send (into *x), sent like an attempt on the waiter's loop, never
 * blocking it. With `unsettled` (an attempt that kept the place went
 * unanswered) and a known count it is the undo of that attempt, which also
 * leaves; with `unsettled` and the attempts' mark (a->left) it also sets
 * the mark, so that the unanswered attempt, should it run after the leave,
 * does nothing. Finish records what the undo did (nothing for a plain leave).
 */
typedef struct dlock__fair_exit {
	dlock__rollback u; /* the undo; a plain leave uses its call and wait */
	int undo;
	char left_ttl[24]; /* how long the mark lasts (ms) */
} dlock__fair_exit;

const dlock__call *dlock__fair_exit_prepare(dlock_lock *l, const dlock__acquire *a,
		int64_t wait_ms, int unsettled, dlock__fair_exit *x);
void dlock__fair_exit_finish(dlock_lock *l, const dlock__acquire *a, const dlock__fair_exit *x,
		int rc, const redisReply *r);

/* The leave of a plain or fenced lock's waiter that joined its waiters
 * (dlock__acquire_herd with roles) and ends without the lock, in x's call;
 * dlock__fair_exit_finish then records nothing. */
const dlock__call *dlock__herd_exit_prepare(dlock_lock *l, const dlock__acquire *a,
		dlock__fair_exit *x);

/* Set owner's hold to ttl ms, only while it is there (Redisson's renewal). */
typedef struct dlock__renew {
	dlock__call call;
	char ttl[24];
	char form[2]; /* dlock__lock_form: how the script finds the hold */
} dlock__renew;

void dlock__renew_prepare(dlock_lock *l, const char *owner, int64_t ttl, dlock__renew *r);
/* 1 when the reply says the hold was there and renewed. */
int dlock__renew_succeeded(const redisReply *reply);

/* Raise a fenced lock's token counter to `max` (set if greater). */
typedef struct dlock__token_raise {
	dlock__call call;
	char max[24];
} dlock__token_raise;

void dlock__token_raise_prepare(dlock_lock *l, int64_t max, dlock__token_raise *t);
/* 1 when the reply says the counter is now at least max. */
int dlock__token_raised(const redisReply *reply, int64_t max);

#endif
