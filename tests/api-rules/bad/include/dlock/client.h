#ifndef DLOCK_CLIENT_H
#define DLOCK_CLIENT_H
#include "common.h"
typedef struct dlock_client dlock_client;
typedef struct dlock_client_options {
	int64_t connect_timeout_ms;
	void *data;
} dlock_client_options;
DLOCK_EXTERN int dlock_client_open(dlock_client **out, const char *uri,
		const dlock_client_options *opts);
DLOCK_EXTERN int dlock_client_free(dlock_client *client);
DLOCK_EXTERN int dlock_client_holder(dlock_holder *out, dlock_client *client, const char *owner);
DLOCK_EXTERN int dlock_client_owner(char *buf, size_t len, const dlock_client *client);
DLOCK_EXTERN const char *dlock_client_errmsg(const dlock_client *client);
DLOCK_EXTERN size_t dlock_client_errmsg_r(char *buf, size_t len, const dlock_client *client);
DLOCK_EXTERN int dlock_lock_token(dlock_lock *lock, int64_t *token);
static inline int dlock_client__helper(dlock_client *c) { return c != 0; }
#endif
