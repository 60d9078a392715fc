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

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <utility>

namespace dlock {

namespace detail {

struct countdown_state {
	dlock_countdown *h = nullptr;
	std::shared_ptr<dlock_client> client;
	~countdown_state() { dlock_countdown_free(h); }
};

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

/** A count-down latch `name` on one client's server. */
class countdown_latch {
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

	countdown_latch(countdown_latch &&) noexcept = default;
	countdown_latch &operator=(countdown_latch &&) noexcept = default;
	countdown_latch(const countdown_latch &) = delete;
	countdown_latch &operator=(const countdown_latch &) = delete;
	~countdown_latch() = default;

	dlock_countdown *native() const noexcept { return s_ ? s_->h : nullptr; }
	const char *name() const noexcept { return s_ ? dlock_countdown_name(s_->h) : ""; }

	/** Set the count to `count` (>= 1) unless the latch exists: true when
	 *  this call set it (at zero the latch is gone, so it can be set again). */
	bool try_set_count(std::int64_t count)
	{
		int set = 0;
		detail::check(dlock_countdown_try_set_count(&set, native(), count));
		return set == 1;
	}
	bool try_set_count(std::int64_t count, std::error_code &ec) noexcept
	{
		int set = 0;
		detail::set_code(ec, dlock_countdown_try_set_count(&set, native(), count));
		return set == 1;
	}
	/** Decrement; at zero every waiter wakes. The count left (0 for a
	 *  latch that does not exist; -1 then with report_missing). */
	std::int64_t count_down()
	{
		std::int64_t left = 0;
		detail::check(dlock_countdown_count_down(&left, native()));
		return left;
	}
	std::int64_t count_down(std::error_code &ec) noexcept
	{
		std::int64_t left = 0;
		detail::set_code(ec, dlock_countdown_count_down(&left, native()));
		return left;
	}
	/** The count now (0 when the latch does not exist; -1 then with report_missing). */
	std::int64_t count()
	{
		std::int64_t n = 0;
		detail::check(dlock_countdown_count(&n, native()));
		return n;
	}
	std::int64_t count(std::error_code &ec) noexcept
	{
		std::int64_t n = 0;
		detail::set_code(ec, dlock_countdown_count(&n, native()));
		return n;
	}
	/** Delete the latch whatever its count (its waiters wake): true when it existed. */
	bool remove()
	{
		int deleted = 0;
		detail::check(dlock_countdown_delete(&deleted, native()));
		return deleted == 1;
	}
	bool remove(std::error_code &ec) noexcept
	{
		int deleted = 0;
		detail::set_code(ec, dlock_countdown_delete(&deleted, native()));
		return deleted == 1;
	}
	/** Clients waiting on the latch at its server, dlock's and Redisson's. */
	std::int64_t waiters()
	{
		std::int64_t n = 0;
		detail::check(dlock_countdown_subscribers(&n, native()));
		return n;
	}
	std::int64_t waiters(std::error_code &ec) noexcept
	{
		std::int64_t n = 0;
		detail::set_code(ec, dlock_countdown_subscribers(&n, native()));
		return n;
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
		return async_op(detail::countdown_await, native(),
				detail::make_args({}, detail::wait_ms(wait), 0, 0), keep(), nullptr,
				std::move(stop));
	}
#endif
#endif

private:
	int make(const client &c, const std::string &name, const dlock_countdown_options *opts) noexcept
	{
		try {
			auto st = std::make_shared<detail::countdown_state>();
			int rc = dlock_countdown_new(&st->h, c.native(), name.c_str(), opts);
			if (rc != 0)
				return rc;
			st->client = c.h_;
			s_ = std::move(st);
			return 0;
		} catch (const std::bad_alloc &) {
			return DLOCK_ENOMEM;
		}
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
	/* What an operation keeps alive: the handle (no token to store). */
	std::shared_ptr<std::atomic<std::int64_t>> keep() const noexcept
	{
		return s_ ? std::shared_ptr<std::atomic<std::int64_t>>(s_, nullptr) : nullptr;
	}
	async_op op(const detail::async_call &call, std::int64_t wait, std::int64_t count,
			std::error_code *ec) noexcept
	{
		return async_op(call, native(), detail::make_args({}, wait, 0, count), keep(), ec);
	}
#endif

	std::shared_ptr<detail::countdown_state> s_;
};

} // namespace dlock

#endif
