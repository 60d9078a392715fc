/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/lockable.hpp - the standard Lockable and TimedLockable surface
 * (lock, try_lock_for, unlock, ...) that every lock class shares.
 */
#ifndef DLOCK_CPP_LOCKABLE_HPP
#define DLOCK_CPP_LOCKABLE_HPP

#include "error.hpp"

#include <chrono>
#include <cstdint>
#include <exception>
#include <system_error>

namespace dlock {

namespace detail {

/*
 * The Lockable/TimedLockable surface, written once over two steps each lock
 * class provides: int acquire(int64_t wait_ms) noexcept (0, or a DLOCK_E*
 * code; DLOCK_WAIT_FOREVER for no limit) and int release() noexcept.
 */
template <class Self> class timed_lockable {
public:
	/** Block until the calling thread holds the lock. */
	void lock() { check(self().acquire(DLOCK_WAIT_FOREVER)); }
	void lock(std::error_code &ec) noexcept { set_code(ec, self().acquire(DLOCK_WAIT_FOREVER)); }

	/** One attempt: false when another owner holds it. */
	bool try_lock() { return acquired(self().acquire(0)); }
	bool try_lock(std::error_code &ec) noexcept { return acquired(self().acquire(0), ec); }

	/** Wait up to `d`: false when another owner still holds it then. */
	template <class Rep, class Period>
	bool try_lock_for(const std::chrono::duration<Rep, Period> &d)
	{
		return acquired(self().acquire(wait_ms(d)));
	}
	template <class Rep, class Period>
	bool try_lock_for(const std::chrono::duration<Rep, Period> &d, std::error_code &ec) noexcept
	{
		return acquired(self().acquire(wait_ms(d)), ec);
	}

	/** Wait until `t` on its own clock (which may be adjusted meanwhile). */
	template <class Clock, class Duration>
	bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t)
	{
		return acquired(acquire_until(t));
	}
	template <class Clock, class Duration>
	bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t,
			std::error_code &ec) noexcept
	{
		return acquired(acquire_until(t), ec);
	}

	/** Release one hold; throws unless an exception is unwinding (see <dlock.hpp>). */
	void unlock()
	{
		int rc = self().release();
		if (rc != 0 && std::uncaught_exceptions() == 0)
			throw_error(rc);
	}
	void unlock(std::error_code &ec) noexcept { set_code(ec, self().release()); }

	/** The lease of later acquisitions: dlock::watchdog (default) or > 0. */
	void set_lease(std::chrono::milliseconds lease) noexcept { lease_ = lease; }
	std::chrono::milliseconds lease() const noexcept { return lease_; }

	/** How long the hold is certain to last (no traffic); each class also
	 *  has validity(std::error_code &), which this one throws from. */
	std::chrono::milliseconds validity() const
	{
		std::error_code ec;
		auto ms = static_cast<const Self &>(*this).validity(ec);
		if (ec)
			throw_error(ec.value());
		return ms;
	}

protected:
	timed_lockable() = default;

private:
	std::chrono::milliseconds lease_{DLOCK_LEASE_WATCHDOG};

	Self &self() noexcept { return static_cast<Self &>(*this); }

	static bool acquired(int rc) { return answered(rc, DLOCK_ENOTACQUIRED); }
	static bool acquired(int rc, std::error_code &ec) noexcept
	{
		return answered(rc, DLOCK_ENOTACQUIRED, ec);
	}

	/* A clock other than the library's may jump: wait again while it says
	 * the time has not come. */
	template <class Clock, class Duration>
	int acquire_until(const std::chrono::time_point<Clock, Duration> &t) noexcept
	{
		return until(t, DLOCK_ENOTACQUIRED,
				[this](std::int64_t ms) noexcept { return self().acquire(ms); });
	}
};

} // namespace detail

} // namespace dlock

#endif
