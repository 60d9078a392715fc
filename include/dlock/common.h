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

/** Wait without a deadline (for `wait_ms` arguments). */
#define DLOCK_WAIT_FOREVER ((int64_t)-1)

/** Hold without a lease: the client's watchdog renews the lock (for `lease_ms`). */
#define DLOCK_LEASE_WATCHDOG ((int64_t)-1)

/**
 * The functions dlock allocates its own memory with. hiredis keeps its own
 * allocator (the reply objects it builds).
 */
typedef struct dlock_allocator {
	void *(*malloc_fn)(size_t size);
	void *(*realloc_fn)(void *ptr, size_t size);
	void (*free_fn)(void *ptr);
} dlock_allocator;

/**
 * Replace dlock's allocator; NULL restores malloc/realloc/free.
 * This is the only global state of the library: call it before any other
 * dlock function and never while dlock objects exist. Not thread-safe.
 * Returns 0, or DLOCK_EINVAL when a member is NULL.
 */
DLOCK_EXTERN int dlock_set_allocator(const dlock_allocator *allocator);

#ifdef __cplusplus
}
#endif

#endif
