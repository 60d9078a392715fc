/*
 * Internal: one acquire attempt split in its two halves, so that the quorum
 * engine can send many at once (core/mux.h) and still record each hold
 * exactly as a single lock does.
 */
#ifndef DLOCK_SINGLE_ACQUIRE_H
#define DLOCK_SINGLE_ACQUIRE_H

#include <stdint.h>
#include <hiredis/hiredis.h>

#include "dlock/lock.h"

typedef struct dlock__acquire {
	const char *argv[4];  /* KEYS then ARGV of dlock__script_acquire */
	size_t lens[4];
	const char *owner;    /* points into owner_buf or at the caller's string */
	int64_t lease_ms;     /* as asked: > 0 or DLOCK_LEASE_WATCHDOG */
	int64_t believed;     /* hold count before, as the client believed it */
	char owner_buf[64];
	char lease_s[24];
	char believed_s[24];
} dlock__acquire;

/* Fill *a for lock l; owner NULL = the calling thread. DLOCK_EINVAL for a bad owner. */
int dlock__acquire_prepare(dlock_lock *l, const char *owner, int64_t lease_ms, dlock__acquire *a);

/*
 * Interpret the reply of the acquire script sent at sent_at: 0 acquired
 * (and recorded, so the watchdog renews it), DLOCK_ENOTACQUIRED with *ttl,
 * or an error (error replies mapped, message set). Does not free r.
 */
int dlock__acquire_finish(dlock_lock *l, dlock__acquire *a, const redisReply *r,
		int64_t sent_at, int64_t *ttl);

/* The hold count the acquire produced, after dlock__acquire_finish returned 0. */
int64_t dlock__acquire_count(const redisReply *r);

/* The release of one hold, split the same way. */
typedef struct dlock__release {
	const char *argv[7];  /* KEYS then ARGV of dlock__script_release */
	size_t lens[7];
	const char *owner;
	char *latch;          /* allocated: redisson_unlock_latch:{name}:<request-id> */
	char owner_buf[64];
	char lease_s[24];
	char latch_ttl[24];
} dlock__release;

/* Fill *r (owner NULL = the calling thread). DLOCK_EINVAL, DLOCK_ENOMEM. */
int dlock__release_prepare(dlock_lock *l, const char *owner, dlock__release *r);

/* 0 released one hold, DLOCK_ENOTOWNER, DLOCK_ELOST, or an error. Updates the record. */
int dlock__release_finish(dlock_lock *l, dlock__release *r, const redisReply *reply);

/* Free what prepare allocated. */
void dlock__release_clear(dlock__release *r);

#endif
