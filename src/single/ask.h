/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internal: a lock's read-only question - is it locked, is an owner
 * holding it, its hold count, TTL or token - as a command and the judgment
 * of its reply. The lock's queries (query.c) send one on their own op; a
 * MultiLock's ask every member at once in one run (multilock/query.c).
 */
#ifndef DLOCK_SINGLE_ASK_H
#define DLOCK_SINGLE_ASK_H

#include <stdint.h>

#include "core/mux/mux.h"
#include "single/member.h"

typedef struct dlock__lock_ask {
	/* The command: a read-only one (argc > 0), or (argc 0) a script call. */
	dlock__call call;
	const char *argv[3];
	size_t lens[3];
	int argc;
	int boolean;     /* the answer is 1 or 0 (is_locked, is_held) */
	int nil_is_zero; /* a missing field or key reads as 0 */
	char field[DLOCK__OWNER_MAX + sizeof(":write")];
} dlock__lock_ask;

/* `CMD key` (a read-only command on the lock's key, or its token's). */
void dlock__lock_ask_cmd(dlock__lock_ask *a, const char *cmd, const char *key, size_t len);

/* Redisson's isLocked() of l: EXISTS, or for a read or write half a script
 * (its mode and HLEN at once). */
void dlock__lock_ask_locked(dlock__lock_ask *a, dlock_lock *l);

/* `CMD key <owner's field>` (`<owner>:write` for a write half); owner NULL:
 * the calling thread's, resolved now. 0, or DLOCK_EINVAL with a message. */
int dlock__lock_ask_owner(dlock__lock_ask *a, dlock_lock *l, const char *cmd, const char *owner);

/* Is owner (NULL: the calling thread) holding l: HEXISTS of its field. */
int dlock__lock_ask_held(dlock__lock_ask *a, dlock_lock *l, const char *owner);

/* Point op (zeroed, its client set by the caller) at a's command; a must
 * stay where it is until the run ends. */
void dlock__lock_ask_into(const dlock__lock_ask *a, dlock__mux_op *op);

/* The reply (an error reply was checked already): 0 with *v, or
 * DLOCK_EPROTO with a message naming the node, the call and the lock. */
int dlock__lock_ask_judge(const dlock__lock_ask *a, const redisReply *r, int64_t *v,
		const char *node, const char *what, const char *shown);

/* A yes-no question's reply as it stands (no message): 1 yes, 0 no, -1 no
 * answer (none yet, an error reply, another shape). */
int dlock__lock_ask_vote(const dlock__lock_ask *a, const redisReply *r);

/* A run's op that carried a's command: its answer into *v (0), or its
 * failure - the transport's, an error reply's, a reply of another shape -
 * with a message naming the node. A redirect is the caller's to follow. */
int dlock__lock_ask_answer(const dlock__lock_ask *a, const dlock__mux_op *op, const char *what,
		const char *shown, int64_t *v);

#endif
