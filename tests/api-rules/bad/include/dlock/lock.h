#ifndef DLOCK_LOCK_H
#define DLOCK_LOCK_H
#include "common.h"
#include "client.h"
typedef struct dlock_lock dlock_lock;
typedef void (*dlock_lock_lost_cb)(dlock_lock *lock, const char *owner, int reason, void *userdata);
DLOCK_EXTERN int dlock_lock_new(dlock_lock **out, dlock_client *client, const char *name);
DLOCK_EXTERN void dlock_lock_free(dlock_lock *lock);
/** Errors: a wait's final errors (errors.h). */
DLOCK_EXTERN int dlock_lock_try(dlock_lock *lock, int64_t wait_ms, int64_t lease_ms);
/** Errors: one command's errors (errors.h). */
DLOCK_EXTERN int dlock_lock_release(dlock_lock *lock);
DLOCK_EXTERN int dlock_lock_acquire_async(dlock_op **out, dlock_lock *lock, int64_t wait_ms,
		dlock_op_cb cb);
DLOCK_EXTERN int dlock_lock_get_count(int64_t *count, dlock_lock *lock);
DLOCK_EXTERN int dlock_lock_permit(char *id, dlock_lock *lock);
DLOCK_EXTERN int dlock_lock_set_lost_cb(dlock_lock *lock, dlock_lock_lost_cb cb, void *userdata);
DLOCK_EXTERN const char *dlock_lock_errmsg(const dlock_lock *lock);
#endif
