/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: an acquisition's state - its steps of the waiter in
 * single/acquire_op.c (its attempt in acquire_attempt.c, its end in
 * acquire_leave.c), the waiter itself in single/wait.c - and where it
 * listens (single/acquire_wait.c).
 */
#ifndef DLOCK_SINGLE_ACQUIRE_WAIT_H
#define DLOCK_SINGLE_ACQUIRE_WAIT_H

#include <stdint.h>

#include "core/mux/mux_loop.h"
#include "core/drive/reactor.h"
#include "core/drive/sync.h"
#include "single/acquire.h"
#include "single/lock_op.h"
#include "single/wait.h"

typedef struct dlock__acquire_op {
	dlock__lock_op lo; /* first: the op, the lock, the owner */
	dlock__waiter w;   /* the wait (single/wait.c), with the lock's steps */
	int64_t lease_ms, owed_until;
	int64_t ttl, sent_at;
	int rc, keep_place, unsettled;
	int thread_owner;    /* the owner is the calling thread's (a blocking call) */
	int vouched;         /* the owner is this process's alone (dlock__acquire_prepare) */
	int ride_out;        /* transient errors are waited out (not: a quorum's member) */
	int leaving;         /* a fair waiter's leave is out; then it ends with end_rc */
	int end_rc;
	char end_msg[DLOCK__ERRMSG_MAX];
	int member;          /* a MultiLock's or RedLock's part: no events of its own */
	dlock_client *send_to; /* a cluster's redirect: the member named (else the lock's client) */
	int asking;
	dlock__acquire a;
	dlock__rollback undo;
	/* Made, but too few replicas acknowledged it: the give-back is the
	 * next command sent (acquire_op.c), then the wait goes on or ends
	 * with gb_code, its message gb_msg. */
	int giving_back, gb_code;
	char gb_msg[DLOCK__ERRMSG_MAX];
	dlock__rollback give_back;
	dlock__fair_exit exit;
	dlock__mux_op mop[2]; /* the acquire, and the WAIT behind it (sync_replicas) */
	dlock__sync sync;
	dlock__mux_loop leave_ml; /* the leave's run */
	char *channel; /* the lock's channel (the waiter's w.rx, w.sub, w.li) */
	size_t channel_len;
	char *left_key; /* a fair waiter's mark, set when it leaves with a reply owed */
	size_t left_key_len;
	/* Waking without a herd (top of file): the "taken" channel's listener. */
	int herd;          /* a plain or fenced lock's waiter: asks with the channel */
	int64_t est;       /* waiting processes, as last counted (1: unknown) */
	uint64_t note_gen; /* the last "taken" note read */
	dlock__reactor *trx;
	dlock__sub *tsub;
	dlock__listener tli;
	dlock__task taken_task;
	/* Watchers and sleepers (top of file): the waiter's own channel. */
	int role;               /* DLOCK__HERD_WATCH or _SLEEP as last answered; 0 unknown */
	int watching;           /* listens on the lock's channel (and the "taken" one) */
	int own_ready;          /* its own channel is subscribed: its retries ask with roles */
	int promoted_meanwhile; /* a word came while an attempt was out */
	int look_pending;       /* a look waits for its own channel's subscription */
	int roles_asked;        /* the attempt out joins the waiters (dlock__wait_roles) */
	int64_t own_asked;      /* when it asked for that subscription */
	char *own;
	size_t own_len;
	dlock__reactor *orx;
	dlock__sub *osub;
	dlock__listener oli;
	dlock__task own_task;
} dlock__acquire_op;

/* The spread after a holder's TTL, and the slot of a watcher woken by "0" (ms). */
int64_t dlock__wait_ttl_spread(const dlock__acquire_op *o);
int64_t dlock__wait_slot(const dlock__acquire_op *o);

/* The first wait: its channel. 0, or DLOCK_ENOMEM. */
int dlock__wait_first(dlock__acquire_op *o);

/* Listen on the lock's channel (and a herd waiter on the "taken" one). 0, or -1 out of memory. */
int dlock__wait_watch(dlock__acquire_op *o);

/* Listen where the waiter's role says; a sleeper's time to look again in
 * *wake (else left). 0, or -1 out of memory. */
int dlock__wait_listen(dlock__acquire_op *o, int64_t *wake);

/* Stop listening everywhere, the timer stopped (the waiter's steps.unlisten). */
void dlock__wait_stop(dlock__acquire_op *o);

/* How a herd waiter's next attempt asks (DLOCK__HERD_ROLES or 0). */
int dlock__wait_roles(const dlock__acquire_op *o);

/* The lock's steps of the waiter (wait.h's dlock__waiter_steps): send an
 * attempt, judge its answer, a cancel during one (acquire_attempt.c); the
 * end, a leave first where the waiter must (acquire_leave.c). */
int dlock__acquire_op_attempt(dlock__waiter *w);
dlock__wait_verdict dlock__acquire_op_judge(dlock__waiter *w, int *out, int64_t *next);
int dlock__acquire_op_on_cancel(dlock__waiter *w);
void dlock__acquire_op_canceled(dlock__waiter *w, int rc);
void dlock__acquire_op_end(dlock__waiter *w, int rc);

/* A fair waiter's mark for this wait (dlock__acquire_wait_key), or NULL. */
char *dlock__acquire_left_key_new(const dlock_lock *l, size_t *len);

#endif
