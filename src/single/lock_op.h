/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: what the asynchronous operations on a single lock share
 * (acquire_op.c, release_op.c): the lock, an owner copied for the op's
 * life, and the start-up checks every one of them makes.
 */
#ifndef DLOCK_SINGLE_LOCK_OP_H
#define DLOCK_SINGLE_LOCK_OP_H

#include <stddef.h>

#include "core/drive/cmd_op.h"
#include "core/loop/op.h"
#include "single/lock_internal.h"

typedef struct dlock__lock_op {
	dlock_op op; /* first */
	dlock_lock *l;
	char *owner;
} dlock__lock_op;

/* The loop a lock's asynchronous operations run on: its client's. */
dlock__loop *dlock__lock_loop(dlock_lock *l);

/* The steps of a kind of operation (see core/loop/op.h). */
typedef struct dlock__lock_op_steps {
	const char *what; /* the public function, for messages */
	void (*start)(dlock_op *op);
	void (*cancel)(dlock_op *op);
	void (*destroy)(dlock_op *op);
} dlock__lock_op_steps;

/*
 * Check the arguments (a lock, an explicit owner, a callback; not a forked
 * child), then allocate an op of `size` bytes - a struct that begins with
 * dlock__lock_op, zeroed - on the lock's client's loop. 0, or DLOCK_EINVAL,
 * DLOCK_EFORKED, DLOCK_ENOMEM (*out NULL, no callback will come).
 */
int dlock__lock_op_new(dlock__lock_op **out, size_t size, dlock_lock *l, const char *owner,
		dlock_op_cb cb, void *userdata, const dlock__lock_op_steps *steps);

/*
 * A lock's command came back as a cluster's redirect (r: its reply): where
 * to send it again. 1 for MOVED, 2 for ASK (ASKING goes first: the mux op's
 * `asking`), with *to the member named; 0 when r is no redirect; < 0 when
 * that member cannot be opened, or after DLOCK__MAX_REDIRECTS of them
 * (*redirects counts), with a message.
 */
int dlock__lock_op_redirect(dlock_lock *l, const redisReply *r, int *redirects, dlock_client **to);

/* Hand the op to its loop; *out (may be NULL) gets it. */
void dlock__lock_op_submit(dlock__lock_op *o, dlock_op **out);

/* How an operation a blocking call drives ended (dlock__ending_note is its callback). */
typedef struct dlock__ending {
	int done, code;
	int64_t token, holder_ttl, validity, value;
	char message[DLOCK__ERRMSG_MAX];
} dlock__ending;

void dlock__ending_note(dlock_op *op, const dlock_result *r, void *userdata);

/*
 * A blocking call: run o (made with dlock__ending_note and e) to its end on
 * the calling thread - on the thread's own loop when the client has a
 * thread of its own, on the client's loop when the caller drives one.
 * Returns e->code, the calling thread's message set from it.
 */
int dlock__lock_op_block(dlock__lock_op *o, dlock__ending *e);

/*
 * A one-command op on lock l (core/drive/cmd_op.h): its reference taken
 * (kind->unref must be dlock__lock_cmd_unref), on its client's loop. 0, or
 * DLOCK_EINVAL (l or cb NULL), DLOCK_EFORKED, DLOCK_ENOMEM with a message.
 */
int dlock__lock_cmd_new(dlock__cmd_op **out, size_t size, const dlock__cmd_kind *kind, dlock_lock *l,
		dlock_op_cb cb, void *userdata);
void dlock__lock_cmd_unref(void *l);

/* Free what dlock__lock_op_new took (the owner, the client's count, the
 * lock's reference, o). */
void dlock__lock_op_free(dlock__lock_op *o);

#endif
