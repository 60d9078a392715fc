/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal to multilock/: an acquisition or a release of the quorum engine
 * as an operation (core/loop/op.h) on a loop - the first member's client's
 * for the asynchronous calls, the calling thread's for the blocking ones,
 * which run the same op to its end (engine_op.c). Each step (parts.h)
 * starts a multiplexed run, a member's acquire or a timer and returns;
 * once it is over it calls its `then`, on the loop.
 */
#ifndef DLOCK_MULTILOCK_ENGINE_OP_H
#define DLOCK_MULTILOCK_ENGINE_OP_H

#include "core/mux/mux_loop.h"
#include "core/loop/op.h"
#include "multilock/engine.h"
#include "multilock/quorum.h"

typedef struct dlock__engine_op dlock__engine_op;
typedef void (*dlock__then)(dlock__engine_op *o);

struct dlock__attempt; /* parallel.c */
struct dlock__waves;   /* batch.c */
struct dlock__round;   /* ordered.c */

struct dlock__engine_op {
	dlock_op op; /* first */
	dlock__engine *e;
	dlock_client *client; /* the first member's, whose loop it runs on */
	char *owner; /* explicit (the op's copy), or NULL: the calling thread's */
	int blocking; /* run by a blocking call, on the calling thread's loop */
	int vouched; /* the owner is named after a member's client: this process's alone */
	int64_t wait_ms, lease_ms, deadline, started;
	int rounds; /* acquisition rounds sent (dlock/stats.h's attempts) */
	dlock__member_try *t;      /* this round */
	dlock_member_status *seen; /* each member's latest answer, over the rounds */
	uint64_t *cancels;         /* each client's cancel count at the start */
	int64_t validity;          /* of the quorum held, or -1 */
	int expired;               /* the last quorum's validity ran out */
	int64_t token;             /* a fenced quorum's */
	int64_t fence_start;
	dlock__backoff backoff;
	dlock__parallel par; /* the parallel phase's rule */
	int64_t t0;          /* when its commands went out */
	int canceling;       /* dlock_op_cancel: each step's end gives back and ends */
	/* The step under way: one of these. */
	dlock__mux_loop ml;
	dlock__then after_run;
	int run_rc;
	dlock__timer skip; /* a run with nothing to send ends from the loop */
	dlock_op *child;   /* a member's acquire (ordered.c) */
	dlock__timer pause;
	dlock__then after_pause;
	struct dlock__engine_op *due_next; /* in e->due_waiters */
	struct dlock__attempt *attempt;
	struct dlock__attempt *tail; /* went on at a quorum: the rest still heard */
	struct dlock__waves *waves;
	struct dlock__round *round;
	void *step;  /* a batch's own state (batch.c, release.c) */
	int step_rc; /* what the last step said (each step says what it means) */
};

/* An op on the engine for owner (NULL: the calling thread's), on its first
 * member's client's loop, not started; `start` is its first step. */
int dlock__engine_op_new(dlock__engine_op **out, dlock__engine *e, const char *owner,
		dlock_op_cb cb, void *userdata, void (*start)(dlock_op *op));

/* The op's destroy step: free what dlock__engine_op_new took (a kind with
 * state of its own frees that, then calls this). */
void dlock__engine_op_free(dlock_op *op);

/* An asynchronous call: make the op for an explicit owner (setup, may be
 * NULL, fills in its arguments) and hand it to its loop; *out (may be
 * NULL) gets it. 0, or an error (no op, no callback). */
int dlock__engine_async(dlock_op **out, dlock__engine *e, const char *owner, dlock_op_cb cb,
		void *userdata, void (*start)(dlock_op *op),
		void (*setup)(dlock__engine_op *o, void *arg), void *arg);

/*
 * A blocking call: make the op (setup, may be NULL, fills in its
 * arguments), run it to its end on the calling thread, return its code
 * with the message set; *validity and *token (may be NULL) on success.
 */
int dlock__engine_block(dlock__engine *e, const char *owner, void (*start)(dlock_op *op),
		void (*setup)(dlock__engine_op *o, void *arg), void *arg, int64_t *validity,
		int64_t *token);

/* Run ops on the op's loop (core/mux/mux_loop.h); `then` once it is over
 * (never from within this call), o->run_rc its result. */
void dlock__engine_run(dlock__engine_op *o, dlock__mux_op *ops, size_t n, dlock__mux_enough enough,
		void *arg, dlock__then then);

/* `then` after ms (cut short by a cancel). */
void dlock__engine_pause(dlock__engine_op *o, int64_t ms, dlock__then then);

/* The end: code rc (its message the thread's), the members' votes. Every
 * step's state is freed by then: the callback may free the lock's handle. */
void dlock__engine_op_end(dlock__engine_op *o, int rc);

#endif
