#ifndef DLOCK_COMMON_H
#define DLOCK_COMMON_H
#include <stddef.h>
#include <stdint.h>
#define DLOCK_EXTERN __attribute__((visibility("default")))
#define DLOCK_WAIT_FOREVER (-INT64_C(1))
typedef enum dlock_lost_reason { DLOCK_LOST_GONE = 1, DLOCK_LOST_FORCED = 3 } dlock_lost_reason;
/** Why a hold was lost; the library's memory, valid during the callback. */
typedef struct dlock_lost_event {
	const char *name;
	const char *owner;
	dlock_lost_reason reason;
} dlock_lost_event;
typedef void (*dlock_lost_cb)(const dlock_lost_event *ev, void *userdata);
DLOCK_EXTERN const char *dlock_lost_reason_str(dlock_lost_reason reason);
#define DLOCK_ALLOCATOR_VERSION 1
typedef struct dlock_allocator {
	unsigned int version;
	void *(*malloc_fn)(size_t size);
	void (*free_fn)(void *ptr);
} dlock_allocator;
#define DLOCK_ALLOCATOR_INIT { DLOCK_ALLOCATOR_VERSION, NULL, NULL }
DLOCK_EXTERN int dlock_allocator_init(dlock_allocator *a, unsigned int version);
DLOCK_EXTERN int dlock_set_allocator(const dlock_allocator *allocator);
#endif
