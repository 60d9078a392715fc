/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/common.h - export macro, time sentinels and the allocator hook.
 */
#ifndef DLOCK_COMMON_H
#define DLOCK_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(DLOCK_STATIC_DEFINE)
#  define DLOCK_EXTERN
#elif defined(__GNUC__) || defined(__clang__)
#  define DLOCK_EXTERN __attribute__((visibility("default")))
#else
#  define DLOCK_EXTERN
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The sentinels are typed with INT64_C, not a cast: valid C99, and no
 * old-style cast in C++ built with -Wold-style-cast. */

/** Wait without a deadline (for `wait_ms` arguments). */
#define DLOCK_WAIT_FOREVER (-INT64_C(1))

/** Hold without a lease: the client's watchdog renews the lock (for `lease_ms`). */
#define DLOCK_LEASE_WATCHDOG (-INT64_C(1))

/**
 * Why a held lock was lost, as the lost callbacks receive it. Only appended.
 */
typedef enum dlock_lost_reason {
	DLOCK_LOST_GONE = 1,        /**< a renewal or release found the hold gone from the server
	                                 (expired, deleted by someone else, server restarted empty
	                                 or failed over) */
	DLOCK_LOST_UNREACHABLE = 2, /**< no renewal reached the server before the key's TTL
	                                 must have run out */
	DLOCK_LOST_FORCED = 3,      /**< force-unlocked through this process's client */
	DLOCK_LOST_REPLACED = 4     /**< the key now holds a value that is not a lock */
} dlock_lost_reason;

/** A short, fixed description of a dlock_lost_reason ("unknown" for others). */
DLOCK_EXTERN const char *dlock_lost_reason_str(int reason);

/**
 * A hold found lost, as every kind's lost callback receives it. The
 * library's memory, valid during the callback; fields are only appended.
 */
typedef struct dlock_lost_event {
	/** The lock's, semaphore's name (a MultiLock/RedLock: its first member's). */
	const char *name;
	/** Who lost it: a lock's owner; a semaphore's permit id; a MultiLock's or
	 *  RedLock's member owner whose loss left too few. */
	const char *owner;
	/** Why. */
	dlock_lost_reason reason;
	/** "host:port" of the server it was lost on (a lock's, a semaphore's);
	 *  NULL for a MultiLock/RedLock, which loses a quorum, not a node (its
	 *  member status says which members are still held). */
	const char *node;
} dlock_lost_event;

/**
 * The one lost callback of every kind (dlock_lock_set_lost_cb,
 * dlock_multilock_set_lost_cb, dlock_redlock_set_lost_cb,
 * dlock_semaphore_set_lost_cb). Called on a client's background thread;
 * keep it short and do not wait for a lock in it (calls that do not wait,
 * such as unlock or check, are fine).
 */
typedef void (*dlock_lost_cb)(const dlock_lost_event *ev, void *userdata);

/**
 * The functions dlock allocates its own memory with. hiredis keeps its own
 * allocator (the reply objects it builds).
 */
#define DLOCK_ALLOCATOR_VERSION 1

typedef struct dlock_allocator {
	unsigned int version;   /**< DLOCK_ALLOCATOR_VERSION (the fields you know) */
	void *(*malloc_fn)(size_t size);
	void *(*realloc_fn)(void *ptr, size_t size);
	void (*free_fn)(void *ptr);
} dlock_allocator;

/** Version set, functions NULL: set all three (or use dlock_allocator_init()). */
#define DLOCK_ALLOCATOR_INIT { DLOCK_ALLOCATOR_VERSION, NULL, NULL, NULL }

/**
 * Set `a->version` to `version` and the functions that version has to
 * malloc, realloc and free, to be replaced as you like. 0, or DLOCK_EINVAL
 * (NULL, or a version this library does not know).
 */
DLOCK_EXTERN int dlock_allocator_init(dlock_allocator *a, unsigned int version);

/**
 * Replace dlock's allocator; NULL restores malloc/realloc/free.
 * This is the only global state of the library: call it before any other
 * dlock function and never while dlock objects exist. Not thread-safe.
 * Returns 0, or DLOCK_EINVAL when a function is NULL or the version is not
 * one this library knows (0 < version <= DLOCK_ALLOCATOR_VERSION).
 */
DLOCK_EXTERN int dlock_set_allocator(const dlock_allocator *allocator);

#ifdef __cplusplus
}
#endif

#endif
