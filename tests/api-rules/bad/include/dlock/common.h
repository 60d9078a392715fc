#ifndef DLOCK_COMMON_H
#define DLOCK_COMMON_H
#include <stdint.h>
#define DLOCK_EXTERN __attribute__((visibility("default")))
#define WAIT_FOREVER (-1)
typedef struct dlock_holder {
	char host[256];
	int64_t pid;
} dlock_holder;
DLOCK_EXTERN extern const int64_t dlock_bounds[4];
#endif
