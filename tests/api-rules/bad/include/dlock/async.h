#ifndef DLOCK_ASYNC_H
#define DLOCK_ASYNC_H
#include "common.h"
#include "lock.h"
typedef struct dlock_op dlock_op;
typedef struct dlock_result {
	int code;
} dlock_result;
typedef void (*dlock_op_cb)(dlock_op *op, const dlock_result *result, void *ud);
DLOCK_EXTERN int dlock_op_cancel(dlock_op *op);
DLOCK_EXTERN int dlock_lock_release_async(dlock_op **out, dlock_lock *lock, const char *owner,
		dlock_op_cb cb, void *userdata);
DLOCK_EXTERN const char *dlock_lock_op_permit(const dlock_op *op);
#endif
