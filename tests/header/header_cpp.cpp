/* SPDX-License-Identifier: BSD-3-Clause */
// <dlock.h> alone, as C++11 -pedantic -Wall -Wextra -Werror, with
// -Wold-style-cast and -Wconversion: extern "C" linkage and no C-only
// constructs (nor C casts) in the headers. main() checks that the C++
// program links and sees the same version as the library.
#include <dlock.h>

#include <cstdio>
#include <cstring>
#include <type_traits>

static_assert(DLOCK_VERSION_CHECK(0, 1, 0), "version at least 0.1.0");
static_assert(!DLOCK_VERSION_CHECK(DLOCK_VERSION_MAJOR + 1, 0, 0), "version below the next major");
static_assert(DLOCK_OK == 0 && DLOCK_EINVAL < 0 && DLOCK_ESYS < 0, "error codes are negative");
static_assert(DLOCK_WAIT_FOREVER < 0 && DLOCK_LEASE_WATCHDOG < 0, "sentinels are negative");
// The time macros expand in C++ code built with -Wold-style-cast, as int64_t.
static_assert(std::is_same<decltype(DLOCK_WAIT_FOREVER), int64_t>::value &&
				std::is_same<decltype(DLOCK_LEASE_WATCHDOG), int64_t>::value &&
				std::is_same<decltype(DLOCK_FAIR_WAIT_DEFAULT), int64_t>::value,
		"the time sentinels are int64_t");
static_assert(DLOCK_WAIT_FOREVER == -1 && DLOCK_LEASE_WATCHDOG == -1 &&
				DLOCK_FAIR_WAIT_DEFAULT == 300000,
		"the time sentinels keep their values");

namespace
{

void on_lost(const dlock_lost_event *, void *)
{
}

} // namespace

int main()
{
	const dlock_client_options opts = DLOCK_CLIENT_OPTIONS_INIT;
	dlock_lost_cb cb = on_lost;
	int (*open_fn)(dlock_client **, const char *, const dlock_client_options *) =
			dlock_client_new;
	int (*lock_acquire)(dlock_lock *, const char *, int64_t, int64_t) = dlock_lock_acquire;
	int (*lock_release)(dlock_lock *, const char *) = dlock_lock_release;
	const char *(*lock_errmsg)(const dlock_lock *) = dlock_lock_errmsg;
	const char *(*client_errmsg)(const dlock_client *) = dlock_client_errmsg;
	int (*owner)(char *, const dlock_client *, uint64_t) = dlock_client_owner;
	uint64_t (*thread_id)(void) = dlock_thread_id;

	if (opts.version != DLOCK_CLIENT_OPTIONS_VERSION || cb == nullptr || open_fn == nullptr ||
			lock_acquire == nullptr || lock_release == nullptr || lock_errmsg == nullptr ||
			client_errmsg == nullptr || owner == nullptr || thread_id == nullptr)
		return 1;
	if (std::strcmp(dlock_version(), DLOCK_VERSION_STRING) != 0) {
		std::fprintf(stderr, "library %s, headers %s\n", dlock_version(),
				DLOCK_VERSION_STRING);
		return 1;
	}
	return dlock_strerror(DLOCK_EINVAL) != nullptr ? 0 : 1;
}
