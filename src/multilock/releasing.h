/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: a release's state (release.c runs it), which may outlive its
 * op (an asynchronous release hears its stragglers on the loop): made,
 * freed, each member's command prepared and its outcome recorded, and the
 * verdict (releasing.c).
 */
#ifndef DLOCK_MULTILOCK_RELEASING_H
#define DLOCK_MULTILOCK_RELEASING_H

#include <stddef.h>

#include "core/mux/mux_loop.h"
#include "multilock/parts.h"
#include "single/acquire.h"

typedef struct releasing {
	dlock_lock **members; /* referenced: the run may outlive the op and the engine */
	struct dlock__engine_link *link;
	size_t n, quorum;
	char *owner;          /* the op's explicit owner, copied; NULL: the thread's */
	dlock__member_try *t; /* touched: a normal unlock; else a rollback */
	dlock__mux_op *ops;
	dlock__release *rel;
	dlock__rollback *rb;
	int *done; /* per member: its outcome recorded */
	int *late; /* per member: unanswered when the op went on (2: heard since) */
	size_t released;
	int first_error;
	int nomem;
	int was_lost; /* fewer than a quorum held, because holds were lost */
	int early;    /* asynchronous: the op goes on at the quorum */
	int gone_on;  /* the op ended; the run hears the rest */
	dlock__engine_op *o; /* NULL once the op ended */
	dlock__loop *loop;   /* the op's */
	dlock__mux_loop ml;  /* the run: the releasing's own, as it may outlive the op */
	int64_t started, quorum_at; /* when sent; when a quorum had let go (0: not yet) */
	char first_msg[DLOCK__ERRMSG_MAX];
} releasing;

/* A new releasing for op o (*out set even when it fails: free it). */
int dlock__releasing_new(releasing **out, dlock__engine_op *o);
void dlock__releasing_free(releasing *r);

/* Member i's op: its unlock, or the rollback of an acquire it may have run. */
int dlock__releasing_prepare(releasing *r, const dlock__engine *e, size_t i);

/* Record member i's outcome (once). */
void dlock__releasing_finish(releasing *r, size_t i);

/* The release's result from the outcomes recorded: released where a
 * quorum was held; was_lost: the lock had been lost before. */
int dlock__releasing_verdict(const releasing *r, int was_lost);

#endif
