#ifndef DLOCK_CLIENT_H
#define DLOCK_CLIENT_H
#include "common.h"
#include "async.h"
#ifdef __cplusplus
extern "C" {
#endif
typedef struct dlock_client dlock_client;
#define DLOCK_OWNER_SIZE 64
#define DLOCK_CLIENT_OPTIONS_VERSION 1
typedef struct dlock_client_options {
	unsigned int version;
	int64_t connect_timeout_ms;
	void (*on_event)(int type, void *userdata);
	void *event_userdata;
} dlock_client_options;
#define DLOCK_CLIENT_OPTIONS_INIT { DLOCK_CLIENT_OPTIONS_VERSION, 1000, NULL, NULL }
DLOCK_EXTERN int dlock_client_options_init(dlock_client_options *opts, unsigned int version);
/** Errors: DLOCK_EINVAL, one command's errors (errors.h). */
DLOCK_EXTERN int dlock_client_new(dlock_client **out, const char *uri,
		const dlock_client_options *opts);
DLOCK_EXTERN void dlock_client_free(dlock_client *client);
/** Connect now. Errors: DLOCK_ECONN. */
DLOCK_EXTERN int dlock_client_connect(dlock_client *client);
DLOCK_EXTERN int dlock_client_connect_async(dlock_op **out, dlock_client *client,
		dlock_op_cb cb, void *userdata);
/** Seconds since the server started. Errors: one command's errors (errors.h). */
DLOCK_EXTERN int dlock_client_uptime_s(int64_t *out_s, dlock_client *client);
DLOCK_EXTERN int dlock_client_uptime_s_async(dlock_op **out, dlock_client *client,
		dlock_op_cb cb, void *userdata);
/** Take a fresh owner id from the server (a fixed-size out-param, then
 *  inputs: the twin has the inputs). Errors: DLOCK_ECONN. */
DLOCK_EXTERN int dlock_client_lease_owner(char owner[DLOCK_OWNER_SIZE], dlock_client *client,
		int64_t wait_ms);
DLOCK_EXTERN int dlock_client_lease_owner_async(dlock_op **out, dlock_client *client,
		int64_t wait_ms, dlock_op_cb cb, void *userdata);
/** No network traffic. */
DLOCK_EXTERN int dlock_client_owner(char owner[DLOCK_OWNER_SIZE], const dlock_client *client,
		uint64_t thread_id);
DLOCK_EXTERN const char *dlock_client_errmsg(const dlock_client *client);
DLOCK_EXTERN size_t dlock_client_errmsg_r(char *buf, size_t len, const dlock_client *client);
#ifdef __cplusplus
}
#endif
#endif
