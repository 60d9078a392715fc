/* SPDX-License-Identifier: BSD-3-Clause */
// <dlock.hpp> alone, as C++17 -pedantic -Wall -Wextra -Werror. The types must
// be what the standard's lock utilities ask for (checked at compile time);
// main() checks, without a server, the error category and that a bad URI
// throws dlock::error with its code and the library's line.
#include <dlock.hpp>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <type_traits>

static_assert(std::is_error_code_enum<dlock::errc>::value, "errc converts to std::error_code");
static_assert(std::is_base_of<std::system_error, dlock::error>::value, "a std::system_error");
static_assert(!std::is_copy_constructible<dlock::client>::value, "a client is not copied");
static_assert(std::is_nothrow_move_constructible<dlock::client>::value, "a client moves");
static_assert(!std::is_copy_constructible<dlock::rlock>::value, "a lock is not copied");
static_assert(std::is_nothrow_move_constructible<dlock::rlock>::value &&
				std::is_nothrow_move_constructible<dlock::multilock>::value &&
				std::is_nothrow_move_constructible<dlock::redlock>::value,
		"locks move");
static_assert(std::is_nothrow_destructible<dlock::rlock>::value &&
				std::is_nothrow_destructible<dlock::redlock>::value,
		"destructors never throw");

// The TimedLockable calls the standard's lock utilities make, instantiated.
template <class L> void use_as_timed_mutex(L &l)
{
	using namespace std::chrono_literals;
	std::unique_lock<L> a(l, 100ms);
	std::unique_lock<L> b(l, std::chrono::system_clock::now() + 1s);
	std::lock_guard<L> c(l);
	std::scoped_lock<L, L> d(l, l);
}

template void use_as_timed_mutex(dlock::rlock &);
template void use_as_timed_mutex(dlock::multilock &);
template void use_as_timed_mutex(dlock::redlock &);

#ifdef DLOCK_HPP_COROUTINES
// Built again as C++20 (header_hpp20): the co_await part, its every overload.
#include <coroutine>
#include <stop_token>

static_assert(!std::is_copy_constructible_v<dlock::async_op> &&
				!std::is_move_constructible_v<dlock::async_op>,
		"an operation is awaited where it was made");
static_assert(std::is_same_v<decltype(std::declval<dlock::async_op &>().await_resume()),
				      dlock::async_result>,
		"co_await gives an async_result");

struct fire_and_forget {
	struct promise_type {
		fire_and_forget get_return_object() noexcept { return {}; }
		std::suspend_never initial_suspend() noexcept { return {}; }
		std::suspend_never final_suspend() noexcept { return {}; }
		void return_void() noexcept {}
		void unhandled_exception() noexcept {}
	};
};

fire_and_forget use_with_co_await(dlock::rlock &l, std::stop_token stop)
{
	using namespace std::chrono_literals;
	std::error_code ec;
	dlock::async_result r = co_await l.acquire_async("owner", 100ms);
	r = co_await l.acquire_async("owner", 1s, 10s);
	r = co_await l.acquire_async("owner", 1s, ec);
	r = co_await l.acquire_async("owner", 1s, dlock::watchdog, ec);
	r = co_await l.acquire_async("owner", 1s, dlock::watchdog, stop);
	r = co_await l.acquire_async("owner", 1s, dlock::watchdog, stop, ec);
	dlock::async_op op = l.release_async("owner", ec);
	op.cancel();
	if (!(co_await op))
		r = co_await l.release_async("owner");
}
#endif

int main()
{
	std::error_code ec = dlock::errc::timed_out;
	if (ec != std::errc::timed_out || ec.message() != dlock_strerror(DLOCK_ETIMEDOUT) ||
			std::string(ec.category().name()) != "dlock")
		return 1;
	try {
		dlock::client c("nope://x");
	} catch (const dlock::error &e) {
		if (e.code() != dlock::errc::invalid_argument || *e.what() == '\0')
			return 1;
		if (e.what() != dlock::last_error_message()) {
			std::fprintf(stderr, "what() %s, last line %s\n", e.what(),
					dlock::last_error_message().c_str());
			return 1;
		}
		return 0;
	}
	return 1;
}
