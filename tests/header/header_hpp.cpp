/* SPDX-License-Identifier: BSD-3-Clause */
// <dlock.hpp> alone, as C++17 -pedantic -Wall -Wextra -Werror. The types must
// be what the standard's lock utilities ask for (checked at compile time);
// main() checks, without a server, the error category and that a bad URI
// throws dlock::error with its code and the library's line.
#include <dlock.hpp>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <shared_mutex>
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
template void use_as_timed_mutex(dlock::rwlock &);

static_assert(std::is_nothrow_move_constructible<dlock::rwlock>::value &&
				std::is_nothrow_move_constructible<dlock::semaphore>::value &&
				std::is_nothrow_move_constructible<dlock::permit>::value &&
				std::is_nothrow_move_constructible<dlock::semaphore_guard>::value &&
				std::is_nothrow_move_constructible<dlock::countdown_latch>::value,
		"the family's handles move");
static_assert(!std::is_copy_constructible<dlock::rwlock>::value &&
				!std::is_copy_constructible<dlock::semaphore>::value &&
				!std::is_copy_constructible<dlock::permit>::value &&
				!std::is_copy_constructible<dlock::semaphore_guard>::value &&
				!std::is_copy_constructible<dlock::countdown_latch>::value,
		"and are not copied");
static_assert(std::is_nothrow_destructible<dlock::permit>::value &&
				std::is_nothrow_destructible<dlock::semaphore_guard>::value,
		"releasing destructors never throw");

// The SharedTimedLockable calls std::shared_lock makes, and every overload
// of the semaphore and the latch, instantiated.
void use_the_family(dlock::rwlock &rw, dlock::semaphore &s, dlock::countdown_latch &l)
{
	using namespace std::chrono_literals;
	std::error_code ec;
	{
		std::shared_lock<dlock::rwlock> a(rw, 100ms);
		std::shared_lock<dlock::rwlock> b(rw, std::chrono::system_clock::now() + 1s);
		std::shared_lock<dlock::rwlock> c(rw, std::try_to_lock);
		std::lock_guard<dlock::rlock> d(rw.read_lock());
		rw.set_lease(10s);
	}
	bool b = s.try_set_permits(3) && s.try_set_permits(3, ec);
	s.set_permits(4);
	s.set_permits(4, ec);
	s.add_permits(-1);
	s.add_permits(-1, ec);
	std::int64_t n = s.available() + s.available(ec) + s.force_release() + s.force_release(ec);
	dlock::semaphore_info info = s.query();
	info = s.query(ec);
	s.acquire();
	s.acquire(2, ec);
	b = s.try_acquire() && s.try_acquire(2, ec) && s.try_acquire_for(1s) &&
			s.try_acquire_for(1s, 2, ec) &&
			s.try_acquire_until(std::chrono::steady_clock::now() + 1s) &&
			s.try_acquire_until(std::chrono::system_clock::now() + 1s, 2, ec);
	s.release();
	s.release(2, ec);
	{
		dlock::semaphore_guard g1(s), g2(s, 2), g3(s, 1s), g4(s, 1s, 2), g5(s, 1, std::adopt_lock);
		g5.release(ec);
		g4.release();
		n += g1.permits() + (g2.owns() ? 1 : 0) + (g3 ? 1 : 0);
	}
	dlock::permit p = s.acquire_permit();
	p = s.acquire_permit(10s, ec);
	p = s.try_acquire_permit_for(1s);
	p = s.try_acquire_permit_for(1s, 10s, ec);
	n += p.validity().count() + p.validity(ec).count() + (p.is_held() ? 1 : 0);
	s.release_permit(p.id());
	s.release_permit(p.id(), ec);
	p = s.adopt_permit(p.id());
	p.release(ec);
	p.release();

	b = l.try_set_count(2) && l.try_set_count(2, ec) && l.remove() && l.remove(ec);
	n += l.count_down() + l.count_down(ec) + l.count() + l.count(ec) + l.waiters() + l.waiters(ec);
	l.wait();
	l.wait(ec);
	b = l.try_wait() && l.try_wait(ec) && l.wait_for(1s) && l.wait_for(1s, ec) &&
			l.wait_until(std::chrono::steady_clock::now() + 1s) &&
			l.wait_until(std::chrono::system_clock::now() + 1s, ec);
	if (b && n > 0 && *rw.name() && *s.name() && *l.name())
		std::printf("unreachable\n");
}

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

fire_and_forget use_the_family_with_co_await(dlock::semaphore &s, dlock::countdown_latch &l,
		std::stop_token stop)
{
	using namespace std::chrono_literals;
	std::error_code ec;
	dlock::async_result r = co_await s.acquire_async(2, 1s);
	r = co_await s.acquire_async(2, 1s, ec);
	r = co_await s.acquire_permit_async(1s);
	r = co_await s.acquire_permit_async(1s, 10s, ec);
	r = co_await s.acquire_permit_async(1s, 10s, stop);
	dlock::permit p = s.adopt_permit(r.permit);
	r = co_await s.release_permit_async(r.permit);
	r = co_await s.release_permit_async(r.permit, ec);
	r = co_await s.release_async();
	r = co_await s.release_async(2, ec);
	r = co_await l.try_set_count_async(3);
	r = co_await l.try_set_count_async(3, ec);
	r = co_await l.count_down_async();
	r = co_await l.count_down_async(ec);
	r = co_await l.count_async();
	r = co_await l.count_async(ec);
	r = co_await l.remove_async();
	r = co_await l.remove_async(ec);
	r = co_await l.wait_async(1s);
	r = co_await l.wait_async(1s, ec);
	r = co_await l.wait_async(1s, stop);
	if (r.value > 0)
		p.release();
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
