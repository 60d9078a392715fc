/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * <dlock.h> alone, as C99 -pedantic -Wall -Wextra -Werror. Most checks are
 * compile-time; main() checks what only the linked library can answer.
 */
#include <dlock.h>

#include <stdio.h>
#include <string.h>

/* C99 has no _Static_assert; a negative array size fails the build instead. */
#define HEADER_STATIC_ASSERT(cond, name) typedef char header_assert_##name[(cond) ? 1 : -1]

HEADER_STATIC_ASSERT(DLOCK_VERSION_CHECK(0, 3, 0), version_at_least_0_3_0);
HEADER_STATIC_ASSERT(!DLOCK_VERSION_CHECK(DLOCK_VERSION_MAJOR + 1, 0, 0), version_below_next_major);
HEADER_STATIC_ASSERT(DLOCK_OK == 0 && DLOCK_EINVAL < 0 && DLOCK_ESYS < 0, error_codes_negative);
HEADER_STATIC_ASSERT(DLOCK_WAIT_FOREVER < 0 && DLOCK_LEASE_WATCHDOG < 0, sentinels_negative);

/* The API's signatures as function pointers: a changed signature or a
 * missing export breaks the build. */
static int (*const p_client_new)(
		dlock_client **, const char *, const dlock_client_options *) = dlock_client_new;
static int (*const p_client_connect)(dlock_client *) = dlock_client_connect;
static int (*const p_client_connect_async)(dlock_op **, dlock_client *, dlock_op_cb, void *) =
		dlock_client_connect_async;
static void (*const p_client_free)(dlock_client *) = dlock_client_free;
static const char *(*const p_client_errmsg)(const dlock_client *) = dlock_client_errmsg;
static int (*const p_owner)(char[DLOCK_OWNER_SIZE], const dlock_client *, uint64_t) =
		dlock_client_owner;
static int (*const p_lock_new)(dlock_lock **, dlock_client *, const char *,
		const dlock_lock_options *) = dlock_lock_new;
static int (*const p_lock_options_init)(
		dlock_lock_options *, unsigned int) = dlock_lock_options_init;
static int (*const p_lock_acquire)(dlock_lock *, const char *, int64_t, int64_t) =
		dlock_lock_acquire;
static int (*const p_lock_acquire_fenced)(int64_t *, dlock_lock *, const char *, int64_t,
		int64_t) = dlock_lock_acquire_fenced;
static int (*const p_lock_release)(dlock_lock *, const char *) = dlock_lock_release;
static int (*const p_lock_check)(const dlock_lock *, const char *) = dlock_lock_check;
static int (*const p_lock_set_lost_cb)(
		dlock_lock *, dlock_lost_cb, void *) = dlock_lock_set_lost_cb;
static const char *(*const p_lost_reason_str)(int) = dlock_lost_reason_str;
static const char *(*const p_lock_errmsg)(const dlock_lock *) = dlock_lock_errmsg;
static void (*const p_lock_free)(dlock_lock *) = dlock_lock_free;
static int (*const p_set_allocator)(const dlock_allocator *) = dlock_set_allocator;
static int (*const p_allocator_init)(dlock_allocator *, unsigned int) = dlock_allocator_init;
static int (*const p_holder_init)(dlock_holder *, unsigned int) = dlock_holder_init;
static int (*const p_member_status_init)(
		dlock_member_status *, unsigned int) = dlock_member_status_init;
static size_t (*const p_loop_errmsg_r)(char *, size_t, const dlock_loop *) = dlock_loop_errmsg_r;
static size_t (*const p_sem_errmsg_r)(
		char *, size_t, const dlock_semaphore *) = dlock_semaphore_errmsg_r;
static const int64_t *(*const p_stat_bounds_us)(void) = dlock_stat_bounds_us;

int main(void)
{
	dlock_client_options macro_opts = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_client_options fn_opts;
	int failures = 0;
	const void *const fns[] = {
		(const void *)&p_client_new,
		(const void *)&p_client_connect,
		(const void *)&p_client_connect_async,
		(const void *)&p_client_free,
		(const void *)&p_client_errmsg,
		(const void *)&p_owner,
		(const void *)&p_lock_new,
		(const void *)&p_lock_options_init,
		(const void *)&p_lock_acquire,
		(const void *)&p_lock_acquire_fenced,
		(const void *)&p_lock_release,
		(const void *)&p_lock_check,
		(const void *)&p_lock_set_lost_cb,
		(const void *)&p_lost_reason_str,
		(const void *)&p_lock_errmsg,
		(const void *)&p_lock_free,
		(const void *)&p_set_allocator,
		(const void *)&p_allocator_init,
		(const void *)&p_holder_init,
		(const void *)&p_member_status_init,
		(const void *)&p_loop_errmsg_r,
		(const void *)&p_sem_errmsg_r,
		(const void *)&p_stat_bounds_us,
	};
	size_t i;

	for (i = 0; i < sizeof fns / sizeof fns[0]; i++) {
		if (fns[i] == NULL)
			failures++;
	}
	if (p_client_new == NULL || p_lock_new == NULL || p_lock_free == NULL)
		failures++;
	if (strcmp(dlock_version(), DLOCK_VERSION_STRING) != 0) {
		fprintf(stderr, "library %s, headers %s\n", dlock_version(), DLOCK_VERSION_STRING);
		failures++;
	}
	memset(&fn_opts, 0xff, sizeof fn_opts);
	if (dlock_client_options_init(&fn_opts, DLOCK_CLIENT_OPTIONS_VERSION) != 0 ||
			fn_opts.version != macro_opts.version ||
			fn_opts.connect_timeout_ms != macro_opts.connect_timeout_ms ||
			fn_opts.command_timeout_ms != macro_opts.command_timeout_ms ||
			fn_opts.watchdog_timeout_ms != macro_opts.watchdog_timeout_ms ||
			fn_opts.pool_size != macro_opts.pool_size ||
			fn_opts.lazy_connect != macro_opts.lazy_connect) {
		fprintf(stderr, "dlock_client_options_init() disagrees with DLOCK_CLIENT_OPTIONS_INIT\n");
		failures++;
	}
	if (dlock_client_options_init(NULL, DLOCK_CLIENT_OPTIONS_VERSION) != DLOCK_EINVAL) {
		fprintf(stderr, "dlock_client_options_init(NULL) is not DLOCK_EINVAL\n");
		failures++;
	}
	if (dlock_strerror(DLOCK_ENOTACQUIRED) == NULL || dlock_strerror(-1000) == NULL) {
		fprintf(stderr, "dlock_strerror() returned NULL\n");
		failures++;
	}
	return failures == 0 ? 0 : 1;
}
