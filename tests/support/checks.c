/* SPDX-License-Identifier: BSD-3-Clause */
/* Assertion sequences several test files repeated (Criterion). */
#include <criterion/criterion.h>

#include <inttypes.h>

#include "redis_harness.h"
#include "support.h"

/* Both bounds in the message, so a flaky timing says how far off it was. */
static void assert_took(const char *call, int64_t took, int64_t lo_ms, int64_t hi_ms)
{
	cr_assert(took >= lo_ms && took <= hi_ms,
			"%s returned after %" PRId64 " ms, want %" PRId64 "..%" PRId64 " ms", call,
			took, lo_ms, hi_ms);
}

static void assert_rc(const char *call, dlock_lock *l, int rc, int want)
{
	cr_assert_eq(rc, want, "%s: rc %d (%s) %s, want %d (%s)", call, rc, dlock_strerror(rc),
			dlock_lock_errmsg(l), want, dlock_strerror(want));
}

int64_t dl_assert_try(dlock_lock *l, int64_t wait_ms, int64_t lease_ms, int want, int64_t lo_ms,
		int64_t hi_ms)
{
	char call[96];
	int64_t t0 = rh_now_ms();
	int rc = dlock_lock_try(l, wait_ms, lease_ms);
	int64_t took = rh_now_ms() - t0;

	snprintf(call, sizeof call, "dlock_lock_try(wait %" PRId64 ", lease %" PRId64 ")", wait_ms,
			lease_ms);
	assert_rc(call, l, rc, want);
	assert_took(call, took, lo_ms, hi_ms);
	return took;
}

int64_t dl_assert_lock(dlock_lock *l, int64_t lease_ms, int want, int64_t lo_ms, int64_t hi_ms)
{
	char call[64];
	int64_t t0 = rh_now_ms();
	int rc = dlock_lock_lock(l, lease_ms);
	int64_t took = rh_now_ms() - t0;

	snprintf(call, sizeof call, "dlock_lock_lock(lease %" PRId64 ")", lease_ms);
	assert_rc(call, l, rc, want);
	assert_took(call, took, lo_ms, hi_ms);
	return took;
}

void dl__free_locks(dlock_lock *const *locks, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dlock_lock_free(locks[i]);
}

void dl__close_clients(dlock_client *const *clients, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dlock_client_close(clients[i]);
}
