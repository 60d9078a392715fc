/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/countdown.hpp - dlock::countdown_latch: Redisson's
 * RCountDownLatch, a count on one server that waiters wait to see reach
 * zero (dlock/countdown.h).
 *
 *   dlock::countdown_latch ready(client, "workers-ready");
 *   ready.try_set_count(3);             // the coordinator, once
 *   ready.count_down();                 // each worker
 *   if (!ready.wait_for(30s)) ...       // false: still above zero then
 *
 * The waits are std::latch's (wait, try_wait) with a limit (wait_for,
 * wait_until): false only when the count was still above zero when the
 * wait ended; every other failure throws dlock::error or sets the
 * std::error_code& of the non-throwing form. With C++20 each call has a
 * twin for co_await (dlock/cpp/async.hpp) whose result.value is its answer.
 */
#ifndef DLOCK_CPP_COUNTDOWN_HPP
#define DLOCK_CPP_COUNTDOWN_HPP

#include "async.hpp"
#include "client.hpp"
#include "error.hpp"
#include "handle.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>

namespace dlock {

namespace detail {

#ifdef DLOCK_HPP_COROUTINES
inline std::string countdown_subject(const void *h)
{
	return std::string("latch ") +
			(h != nullptr ? dlock_countdown_name(static_cast<const dlock_countdown *>(h)) : "");
}

inline dlock_countdown *as_countdown(void *h)
{
	return static_cast<dlock_countdown *>(h);
}

inline const async_call countdown_try_set = {
	[](dlock_op **out, void *h, const async_args &a, dlock_op_cb cb, void *ud) {
		return dlock_countdown_try_set_count_async(out, as_countdown(h), a.count, cb, ud);
	},
	countdown_subject, 0,
};
inline const async_call countdown_count_down = {
	[](dlock_op **out, void *h, const async_args &, dlock_op_cb cb, void *ud) {
		return dlock_countdown_count_down_async(out, as_countdown(h), cb, ud);
	},
	countdown_subject, 0,
};
inline const async_call countdown_get_count = {
	[](dlock_op **out, void *h, const async_args &, dlock_op_cb cb, void *ud) {
		return dlock_countdown_count_async(out, as_countdown(h), cb, ud);
	},
	countdown_subject, 0,
};
inline const async_call countdown_delete = {
	[](dlock_op **out, void *h, const async_args &, dlock_op_cb cb, void *ud) {
		return dlock_countdown_delete_async(out, as_countdown(h), cb, ud);
	},
	countdown_subject, 0,
};
inline const async_call countdown_await = {
	[](dlock_op **out, void *h, const async_args &a, dlock_op_cb cb, void *ud) {
		return dlock_countdown_await_async(out, as_countdown(h), a.wait, cb, ud);
	},
	countdown_subject, DLOCK_ETIMEDOUT,
};
#endif

} // namespace detail

/** A count-down latch `name` on one client's server. Move-only. */
class countdown_latch : public detail::handle<dlock_countdown, dlock_countdown_free> {
public:
	/** A handle (no traffic); opts (NULL: defaults) is read during the
	 *  call. Throws dlock::error (bad name or options, empty client). */
	countdown_latch(const client &c, const std::string &name,
			const dlock_countdown_options *opts = nullptr)
	{
		detail::check(make(c, name, opts));
	}
	countdown_latch(const client &c, const std::string &name, const dlock_countdown_options *opts,
			std::error_code &ec) noexcept
	{
		detail::set_code(ec, make(c, name, opts));
	}

	const char *name() const noexcept { return s_ ? dlock_countdown_name(s_->h) : ""; }

	/** Set the count to `count` (>= 1) unless the latch exists: true when
	 *  this call set it (at zero the latch is gone, so it can be set again). */
	bool try_set_count(std::int64_t count)
	{
		return detail::answer(dlock_countdown_try_set_count, native(), count) == 1;
	}
	bool try_set_count(std::int64_t count, std::error_code &ec) noexcept
	{
		return detail::answer(ec, dlock_countdown_try_set_count, native(), count) == 1;
	}
	/** Decrement; at zero every waiter wakes. The count left (0 for a
	 *  latch that does not exist; -1 then with report_missing). */
	std::int64_t count_down() { return detail::answer(dlock_countdown_count_down, native()); }
	std::int64_t count_down(std::error_code &ec) noexcept
	{
		return detail::answer(ec, dlock_countdown_count_down, native());
	}
	/** The count now (0 when the latch does not exist; -1 then with report_missing). */
	std::int64_t count() { return detail::answer(dlock_countdown_count, native()); }
	std::int64_t count(std::error_code &ec) noexcept
	{
		return detail::answer(ec, dlock_countdown_count, native());
	}
	/** Delete the latch whatever its count (its waiters wake): true when it existed. */
	bool remove() { return detail::answer(dlock_countdown_delete, native()) == 1; }
	bool remove(std::error_code &ec) noexcept
	{
		return detail::answer(ec, dlock_countdown_delete, native()) == 1;
	}
	/** Clients waiting on the latch at its server, dlock's and Redisson's. */
	std::int64_t waiters() { return detail::answer(dlock_countdown_subscribers, native()); }
	std::int64_t waiters(std::error_code &ec) noexcept
	{
		return detail::answer(ec, dlock_countdown_subscribers, native());
	}

	/** Block until the count is zero (at once for a latch not set). */
	void wait() { detail::check(dlock_countdown_await(native(), DLOCK_WAIT_FOREVER)); }
	void wait(std::error_code &ec) noexcept
	{
		detail::set_code(ec, dlock_countdown_await(native(), DLOCK_WAIT_FOREVER));
	}
	/** One look: true when the count is zero. */
	bool try_wait() { return opened(dlock_countdown_await(native(), 0)); }
	bool try_wait(std::error_code &ec) noexcept
	{
		return opened(dlock_countdown_await(native(), 0), ec);
	}
	/** Wait up to `d`: false when the count is still above zero then. */
	template <class Rep, class Period> bool wait_for(const std::chrono::duration<Rep, Period> &d)
	{
		return opened(dlock_countdown_await(native(), detail::wait_ms(d)));
	}
	template <class Rep, class Period>
	bool wait_for(const std::chrono::duration<Rep, Period> &d, std::error_code &ec) noexcept
	{
		return opened(dlock_countdown_await(native(), detail::wait_ms(d)), ec);
	}
	/** Wait until `t` on its own clock. */
	template <class Clock, class Duration>
	bool wait_until(const std::chrono::time_point<Clock, Duration> &t)
	{
		return opened(await_until(t));
	}
	template <class Clock, class Duration>
	bool wait_until(const std::chrono::time_point<Clock, Duration> &t,
			std::error_code &ec) noexcept
	{
		return opened(await_until(t), ec);
	}

#ifdef DLOCK_HPP_COROUTINES
	/* co_await (dlock/cpp/async.hpp); result.value is the blocking call's
	 * answer. */

	/** co_await: try_set_count(); value 1 set, 0 it existed. */
	async_op try_set_count_async(std::int64_t count) noexcept
	{
		return op(detail::countdown_try_set, 0, count, nullptr);
	}
	async_op try_set_count_async(std::int64_t count, std::error_code &ec) noexcept
	{
		return op(detail::countdown_try_set, 0, count, &ec);
	}
	/** co_await: count_down(); value the count left. */
	async_op count_down_async() noexcept { return op(detail::countdown_count_down, 0, 0, nullptr); }
	async_op count_down_async(std::error_code &ec) noexcept
	{
		return op(detail::countdown_count_down, 0, 0, &ec);
	}
	/** co_await: count(); value the count. */
	async_op count_async() noexcept { return op(detail::countdown_get_count, 0, 0, nullptr); }
	async_op count_async(std::error_code &ec) noexcept
	{
		return op(detail::countdown_get_count, 0, 0, &ec);
	}
	/** co_await: remove(); value 1 removed, 0 none. */
	async_op remove_async() noexcept { return op(detail::countdown_delete, 0, 0, nullptr); }
	async_op remove_async(std::error_code &ec) noexcept
	{
		return op(detail::countdown_delete, 0, 0, &ec);
	}
	/** co_await: wait up to `wait` for zero; false (errc::timed_out, not
	 *  thrown) when the count was still above zero then. */
	template <class Rep, class Period>
	async_op wait_async(const std::chrono::duration<Rep, Period> &wait) noexcept
	{
		return op(detail::countdown_await, detail::wait_ms(wait), 0, nullptr);
	}
	template <class Rep, class Period>
	async_op wait_async(const std::chrono::duration<Rep, Period> &wait, std::error_code &ec) noexcept
	{
		return op(detail::countdown_await, detail::wait_ms(wait), 0, &ec);
	}
#ifdef DLOCK_HPP_STOP_TOKEN
	/** As above; a stop requested on `stop` cancels the wait. */
	template <class Rep, class Period>
	async_op wait_async(const std::chrono::duration<Rep, Period> &wait, std::stop_token stop) noexcept
	{
		return make_op(detail::countdown_await, {}, detail::wait_ms(wait), 0, 0, nullptr,
				std::move(stop));
	}
#endif
#endif

private:
	int make(const client &c, const std::string &name, const dlock_countdown_options *opts) noexcept
	{
		return open_on(c.h_, [&](dlock_countdown **h, dlock_client *cl) {
			return dlock_countdown_new(h, cl, name.c_str(), opts);
		});
	}

	template <class Clock, class Duration>
	int await_until(const std::chrono::time_point<Clock, Duration> &t) noexcept
	{
		return detail::until(t, DLOCK_ETIMEDOUT, [this](std::int64_t ms) noexcept {
			return dlock_countdown_await(native(), ms);
		});
	}
	static bool opened(int rc) { return detail::answered(rc, DLOCK_ETIMEDOUT); }
	static bool opened(int rc, std::error_code &ec) noexcept
	{
		return detail::answered(rc, DLOCK_ETIMEDOUT, ec);
	}

#ifdef DLOCK_HPP_COROUTINES
	async_op op(const detail::async_call &call, std::int64_t wait, std::int64_t count,
			std::error_code *ec) const noexcept
	{
		return make_op(call, {}, wait, 0, count, ec);
	}
#endif
};

} // namespace dlock

#endif
