/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: a parallel attempt's state (parallel.c runs it), which may
 * outlive its op (a RedLock going on at the quorum): made, freed, and its
 * late answers settled here (attempt.c).
 */
#ifndef DLOCK_MULTILOCK_ATTEMPT_H
#define DLOCK_MULTILOCK_ATTEMPT_H

#include <stddef.h>

#include "core/mux/mux_loop.h"
#include "core/drive/sync.h"
#include "multilock/parts.h"
#include "single/acquire.h"

/* Servers' uptimes asked beside the acquires (see ask_uptimes). */
typedef struct uptimes {
	int64_t *start; /* per member: its server's start when known without asking, else 0 */
	size_t n;
	uint64_t *gen;  /* per uptime op: its client's connection generation */
	size_t *member; /* per uptime op: the member it rides behind */
	int64_t asked;
} uptimes;

/* The replica acknowledgements asked behind the acquires (see ask_syncs). */
typedef struct syncs {
	dlock__sync *cmd; /* per member: its WAIT's arguments */
	size_t *op;       /* per member: the index of its WAIT op; 0 when none */
	size_t n;
} syncs;

struct dlock__attempt;

typedef struct attempt_wait {
	const dlock__engine *e; /* while the op waits: the run may outlive both */
	dlock__parallel *p;
	const uptimes *u;
	const syncs *s;
	struct dlock__attempt *at;
} attempt_wait;

/*
 * The attempt under way (o->attempt). With `early` (RedLock: a quorum less
 * than every member) the op goes on at the quorum-th grant the vote filter
 * vouches for, while the run goes on to hear the rest: the attempt then
 * outlives the op (it holds the members' handles and clients) and settles
 * each late answer once the op's outcome is known (dlock__parallel_settle):
 * a late grant joins a held lock (recorded, so the watchdog renews it and
 * the release gives it back), or is given back; a late refusal changes
 * nothing. A member still unanswered at its command timeout gets the undo
 * queued behind its acquire on the same connection (core/mux/mux.h).
 */
struct dlock__attempt {
	dlock__mux_op *ops;
	dlock__acquire *acq;
	dlock__rollback *undo;
	uptimes u;
	syncs s;
	int *give_back;
	attempt_wait w;
	size_t nops;
	dlock__then then;
	dlock__mux_loop ml;      /* the run: the attempt's own, as it may outlive the op */
	dlock__engine_op *o;     /* NULL once the op ended */
	int early;               /* may go on at the quorum */
	int quorum_in;           /* the quorum is in: the op goes on (once) */
	int gone_on;             /* the op went on without the run */
	int run_over;
	int fate;                /* after going on: 0 undecided, 1 held, -1 failed */
	int *late;               /* per member: unanswered when the op went on */
	unsigned release_gen;    /* the engine's release_gen when the op went on */
	dlock__timer go_on;      /* the op goes on from the loop, not inside the run */
	dlock__timer give_back_done;
	dlock_lock **members;    /* referenced while the attempt may outlive the op */
	struct dlock__engine_link *link; /* a joined grant is watched for loss through it */
	size_t n, quorum;
	char *owner;             /* the op's explicit owner, copied; NULL: the thread's */
	dlock__vote_vouch vouch;
	void *vouch_arg;
	int64_t lease_ms;
	dlock__loop *loop;       /* the op's */
	dlock__mux_op *back;     /* late grants given back (give_back[k]: whose) */
	size_t nback;
};

#define AT_OF(p, field) ((struct dlock__attempt *)((char *)(p) - offsetof(struct dlock__attempt, field)))

#define AT_OF(p, field) ((struct dlock__attempt *)((char *)(p) - offsetof(struct dlock__attempt, field)))

static inline int dlock__reply_acquired(const dlock__mux_op *op)
{
	return op->rc == 0 && op->reply != NULL && op->reply->type == REDIS_REPLY_ARRAY;
}

/* An attempt for n members (NULL: out of memory), and its end. */
struct dlock__attempt *dlock__attempt_new(size_t n);
void dlock__attempt_free(struct dlock__attempt *at);

/* The servers' starts the uptime ops answered, cached per connection. */
void dlock__attempt_note_uptimes(size_t n, const dlock__mux_op *ops, const uptimes *u);

/* The run and the op are both over: each late grant joins or is given back. */
void dlock__attempt_settle(struct dlock__attempt *at);

#endif
