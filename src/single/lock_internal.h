/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal: the RLock handle, shared with the layers above. */
#ifndef DLOCK_SINGLE_LOCK_INTERNAL_H
#define DLOCK_SINGLE_LOCK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "dlock/lock.h"
#include "core/drive/client.h"
#include "single/holds.h"
#include "single/member.h"

/* Longest lock name accepted: longer ones are almost surely a bug. */
#define DLOCK__NAME_MAX 65536

struct dlock_lock {
	dlock_lock_kind kind; /* plain, fair, fenced: one data layout; read, write: another */
	dlock_client *client;
	dlock__holds *holds;
	char *name;
	size_t name_len;
	char *channel; /* redisson_lock__channel:{name}; a read/write half's redisson_rwlock:{name} */
	size_t channel_len;
	char *taken; /* plain, fenced: dlock_lock__taken:{name}, dlock's own (core/drive/reactor.h) */
	size_t taken_len;
	/* plain, fenced: the ZSET of waiting processes and the prefix of their
	 * wake-up channels (watchers and sleepers: single/scripts.c) */
	char *waiters, *wake;
	size_t waiters_len, wake_len;
	/* An attempt through this handle joined those waiters (so the server
	 * lets its user touch them): its releases wake them (release.c). */
	_Atomic int herd_met;
	char *token_key; /* fenced: redisson_lock_token:{name} */
	size_t token_key_len;
	char *queue; /* redisson_lock_queue:{name} (a fair lock's; force unlock looks) */
	size_t queue_len;
	char *timeouts; /* redisson_lock_timeout:{name} */
	size_t timeouts_len;
	int64_t fair_wait_ms; /* fair: how long a waiter's place lasts */
	char shown[80];       /* the name as messages show it: printable, truncated */
	dlock__errbuf err;
	pthread_mutex_t cb_mu;
	dlock_lost_cb lost_cb;
	void *lost_ud;
	_Atomic int synced; /* replicas that acknowledged the last acquisition; -1 unknown */
	/* The caller's reference, and one per operation not yet freed
	 * (single/lock_op.c): dlock_lock_free() from an operation's callback, or
	 * while one runs, leaves the last free to the operation's end. */
	_Atomic int refs;
};

/* A half of a read-write lock (Redisson's RReadWriteLock layout). */
static inline int dlock__lock_is_rw(const dlock_lock *l)
{
	return l->kind == DLOCK_LOCK_READ || l->kind == DLOCK_LOCK_WRITE;
}

/*
 * How a hold of l is renewed, and which hold record it is (the read and
 * write halves of one owner on one name are two holds): 0 by its field,
 * 'r' a read hold (its timeout keys too), 'w' a write hold (field
 * `<owner>:write`). The renew script reads the same letters.
 */
static inline char dlock__lock_form(const dlock_lock *l)
{
	return l->kind == DLOCK_LOCK_READ ? 'r' : l->kind == DLOCK_LOCK_WRITE ? 'w' : 0;
}

/* Drop one reference to the handle (dlock_lock_free() drops the caller's);
 * the last one frees it. */
void dlock__lock_unref(dlock_lock *l);

/* The owner string: explicit (checked), or `<uuid>:<tid>` of the calling thread in buf. */
int dlock__resolve_owner(
		const dlock_lock *l, const char *owner, char *buf, size_t size, const char **out);

/* The caller's lock options (NULL: defaults) into *dst, as far as their
 * version has them, checked. 0, or DLOCK_EINVAL with a message. */
int dlock__lock_options_load(dlock_lock_options *dst, const dlock_lock_options *src);

/* Redisson's prefixName(): "prefix:{name}", or "prefix:name" when the name has a '{'. */
char *dlock__prefix_name(const char *prefix, const char *name, size_t name_len, size_t *out_len);

#endif
