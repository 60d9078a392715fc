#ifndef DLOCK_LOCK_H
#define DLOCK_LOCK_H
#include "common.h"
#include "async.h"
#include "client.h"
typedef struct dlock_lock dlock_lock;
#define DLOCK_LOCK_OPTIONS_VERSION 1
typedef struct dlock_lock_options {
	unsigned int version;
	int64_t fair_wait_ms;
} dlock_lock_options;
#define DLOCK_LOCK_OPTIONS_INIT { DLOCK_LOCK_OPTIONS_VERSION, 0 }
DLOCK_EXTERN int dlock_lock_options_init(dlock_lock_options *opts, unsigned int version);
DLOCK_EXTERN int dlock_lock_new(dlock_lock **out, dlock_client *client, const char *name,
		const dlock_lock_options *opts);
DLOCK_EXTERN void dlock_lock_free(dlock_lock *lock);
/** Take it. Errors: a wait's final errors (errors.h). */
DLOCK_EXTERN int dlock_lock_acquire(dlock_lock *lock, const char *owner, int64_t wait_ms,
		int64_t lease_ms);
/** dlock_lock_acquire() that also writes the token. Errors as dlock_lock_acquire(). */
DLOCK_EXTERN int dlock_lock_acquire_fenced(int64_t *token, dlock_lock *lock, const char *owner,
		int64_t wait_ms, int64_t lease_ms);
DLOCK_EXTERN int dlock_lock_acquire_async(dlock_op **out, dlock_lock *lock, const char *owner,
		int64_t wait_ms, int64_t lease_ms, dlock_op_cb cb, void *userdata);
/** Errors: one command's errors (errors.h). */
DLOCK_EXTERN int dlock_lock_release(dlock_lock *lock, const char *owner);
DLOCK_EXTERN int dlock_lock_release_async(dlock_op **out, dlock_lock *lock, const char *owner,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN int dlock_lock_watch_async(dlock_op **out, dlock_lock *lock, const char *owner,
		dlock_op_cb cb, void *userdata);
/*
 * The queries below read the server (one command).
 */
/** *out = 1 when anyone holds it. */
DLOCK_EXTERN int dlock_lock_is_locked(int *out, dlock_lock *lock);
DLOCK_EXTERN int dlock_lock_is_locked_async(dlock_op **out, dlock_lock *lock, dlock_op_cb cb,
		void *userdata);
/** Local state, no network traffic. */
DLOCK_EXTERN int dlock_lock_check(const dlock_lock *lock, const char *owner);
DLOCK_EXTERN int dlock_lock_validity_ms(int64_t *out_ms, const dlock_lock *lock, const char *owner);
DLOCK_EXTERN int dlock_lock_set_lost_cb(dlock_lock *lock, dlock_lost_cb cb, void *userdata);
DLOCK_EXTERN const char *dlock_lock_name(const dlock_lock *lock);
DLOCK_EXTERN const char *dlock_lock_errmsg(const dlock_lock *lock);
DLOCK_EXTERN size_t dlock_lock_errmsg_r(char *buf, size_t len, const dlock_lock *lock);
#endif
