#ifndef DLOCK_ASYNC_H
#define DLOCK_ASYNC_H
#include "common.h"
#include "errors.h"
typedef struct dlock_op dlock_op;
typedef struct dlock_result {
	int code;
	const char *message;
	int64_t value;
	const struct dlock_member_status *members;
} dlock_result;
typedef void (*dlock_op_cb)(dlock_op *op, const dlock_result *result, void *userdata);
DLOCK_EXTERN int dlock_op_cancel(dlock_op *op);
#endif
