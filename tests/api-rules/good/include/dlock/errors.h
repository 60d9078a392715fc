#ifndef DLOCK_ERRORS_H
#define DLOCK_ERRORS_H
#include "common.h"
typedef enum dlock_error { DLOCK_OK = 0, DLOCK_EINVAL = -1, DLOCK_ECONN = -3 } dlock_error;
DLOCK_EXTERN const char *dlock_strerror(int error);
DLOCK_EXTERN const char *dlock_errmsg_last(void);
DLOCK_EXTERN size_t dlock_errmsg_last_r(char *buf, size_t len);
#endif
