/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: one waiter (single/wait.c) - attempt, listen, sleep until a
 * message, the timer or the deadline, attempt again - embedded in the
 * operation of each kind that waits, which gives it a table of its own
 * steps (what an attempt sends and what its answer means).
 */
#ifndef DLOCK_SINGLE_WAIT_H
#define DLOCK_SINGLE_WAIT_H

#include <stddef.h>
#include <stdint.h>

#include "core/drive/client.h"
#include "core/loop/loop.h"
#include "core/mux/mux_loop.h"
#include "core/loop/op.h"
#include "core/drive/reactor.h"

struct dlock__waiter;

/* What an attempt's answer says (dlock__waiter_steps.judge). */
typedef enum dlock__wait_verdict {
	DLOCK__WAIT_GOT,       /* done: the wait ends with 0 */
	DLOCK__WAIT_NOT_YET,   /* look again at `next` at the latest (or at a message) */
	DLOCK__WAIT_TRANSIENT, /* an error a backoff may heal: look again after it */
	DLOCK__WAIT_FINAL,     /* an error no wait heals: the wait ends with it */
	DLOCK__WAIT_AGAIN      /* not run there (a cluster's redirect): send again at once */
} dlock__wait_verdict;

typedef struct dlock__waiter_steps {
	/* Messages say "<noun> <shown>: ..." ("lock", "semaphore", "latch"). */
	const char *noun;
	/* Prepare the attempt's call(s), their undo with them, and send them
	 * with dlock__waiter_send. 0, or an error the wait ends with. */
	int (*attempt)(struct dlock__waiter *w);
	/*
	 * The answer of the run just over (w->mop, w->nmop; cleared after
	 * this): its verdict, *rc the code the wait ends with if it ends now
	 * (0 got; DLOCK_ENOTACQUIRED, DLOCK_ETIMEDOUT, ... with its message
	 * set), *next (NOT_YET) when to look again at the latest
	 * (DLOCK__NEVER: only at a message or the deadline).
	 */
	dlock__wait_verdict (*judge)(struct dlock__waiter *w, int *rc, int64_t *next);
	/* The wait ended: rc 0 got, else the error (its message set). The
	 * waiter listens no more; the step finishes the operation. */
	void (*end)(struct dlock__waiter *w, int rc);
	/* The rest is optional (NULL: the default said). */
	/* A cancel came while an attempt was out: 1 to await its answer
	 * (then `canceled` has it), 0 to abandon it (its undo goes right
	 * behind it). NULL: abandon. */
	int (*on_cancel)(struct dlock__waiter *w);
	/* With on_cancel: the awaited answer, rc 0 when it got it. */
	void (*canceled)(struct dlock__waiter *w, int rc);
	/* Listen where the kind says before a sleep (may move *wake, the
	 * time to look again): 0, or an error the wait ends with. NULL:
	 * w->channel, where it is served now. */
	int (*listen)(struct dlock__waiter *w, int64_t *wake);
	/* Stop the kind's own listening too (dlock__waiter_stop). */
	void (*unlisten)(struct dlock__waiter *w);
	/* A message woke it: ms until it looks (0 at once), -1 when it does
	 * not hear the channel now. NULL: 0. */
	int64_t (*slot)(struct dlock__waiter *w);
	/* A look is due: 1 puts it off (the step armed the timer,
	 * dlock__waiter_arm), 0 looks now. NULL: now. */
	int (*look)(struct dlock__waiter *w);
} dlock__waiter_steps;

typedef struct dlock__waiter {
	const dlock__waiter_steps *steps;
	dlock_op *op; /* the operation it runs in (its loop, finished) */
	dlock_client *client;
	const char *shown; /* the name as messages show it */
	const char *channel; /* where it listens */
	size_t channel_len;
	int64_t wait_ms, started, deadline, backoff;
	int64_t started_us; /* `started` in us, for the wait histogram */
	int attempts;       /* attempts sent (dlock/stats.h) */
	int redirects;      /* of the attempt under way (reset at every look) */
	int in_flight, waiting, wakeable, cancel_pending;
	int woken_meanwhile; /* a message came while an attempt was out: look again at once */
	/* A blocking wait ends once the client's cancel count is no longer
	 * `cancels` (dlock_client_cancel_waits). */
	int canceled_with;
	uint64_t cancels;
	/* the attempt */
	dlock__mux_op *mop;
	size_t nmop;
	dlock__mux_loop ml;
	/* listening */
	dlock__reactor *rx;
	dlock__sub *sub;
	dlock__listener li;
	dlock__task wake_task;
	dlock__timer timer;
} dlock__waiter;

/* Set up (no traffic): the kind's steps, its client, shown name and
 * channel (both outlive the waiter; no channel with steps.listen), the
 * wait (ms, DLOCK_WAIT_FOREVER). */
void dlock__waiter_init(dlock__waiter *w, const dlock__waiter_steps *steps, dlock_op *op,
		dlock_client *client, const char *shown, const char *channel, size_t channel_len,
		int64_t wait_ms);

/* Start on the operation's loop: the clock, the deadline, then the first
 * attempt - after listening when listen_first (a latch: a change between
 * the first look and the subscription would go unheard). */
void dlock__waiter_start(dlock__waiter *w, int listen_first);

/* Send the attempt's ops (from steps.attempt). 0, or DLOCK_ENOMEM. */
int dlock__waiter_send(dlock__waiter *w, dlock__mux_op *mop, size_t n);

/* Cancel: what is under way ends (`what`: "the acquisition"), or an
 * attempt out is awaited first (steps.on_cancel). */
void dlock__waiter_cancel(dlock__waiter *w, const char *what);

/* Stop listening, the timer and the wake-up stopped. */
void dlock__waiter_stop(dlock__waiter *w);

/* End the wait with rc (its message set): it stops listening, steps.end. */
void dlock__waiter_conclude(dlock__waiter *w, int rc);

/* Look again now, as a message would (nothing while not waiting). */
void dlock__waiter_look(dlock__waiter *w);

/* Look again at `when` at the latest (the deadline caps it). 0, or an error. */
int dlock__waiter_arm(dlock__waiter *w, int64_t when);

/* From steps.attempt: no attempt now, one at `when` (not capped). 0, or an error. */
int dlock__waiter_put_off(dlock__waiter *w, int64_t when);

/* From steps.attempt: an answer without a run (it could not be sent). */
void dlock__waiter_answer(dlock__waiter *w, dlock__wait_verdict v, int rc, int64_t next);

/* Whether dlock_client_cancel_waits() ended this (blocking) wait. */
int dlock__waiter_cancel_counted(const dlock__waiter *w);

/* Listen on `channel` where it is served now, with li: *rx and *sub as it
 * listens (a cluster's slot may have moved, a primary failed over). 0, or
 * -1 out of memory. */
int dlock__waiter_follow(dlock__waiter *w, dlock__reactor **rx, dlock__sub **sub,
		dlock__listener *li, const char *channel, size_t len);

#endif
