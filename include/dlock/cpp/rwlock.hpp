/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/rwlock.hpp - dlock::rwlock: Redisson's RReadWriteLock, a read
 * half any number of owners share and a write half one owner holds alone
 * (the DLOCK_LOCK_READ and DLOCK_LOCK_WRITE kinds of dlock/lock.h).
 *
 *   dlock::rwlock rw(client, "prices");
 *   { std::shared_lock<dlock::rwlock> r(rw); ... }   // read_lock()
 *   { std::unique_lock<dlock::rwlock> w(rw); ... }   // write_lock()
 *
 * Each half is a dlock::rlock (read_lock(), write_lock()): a TimedLockable
 * with the error_code forms, set_lease(), validity() and co_await of every
 * rlock. The rwlock itself is a SharedTimedLockable over them, so
 * std::unique_lock takes the write half and std::shared_lock the read half.
 * Owners are threads, as for every rlock: a thread holding the read half
 * cannot take the write half (DLOCK_EINVAL: release the read hold first);
 * one holding the write half may take the read half too.
 */
#ifndef DLOCK_CPP_RWLOCK_HPP
#define DLOCK_CPP_RWLOCK_HPP

#include "client.hpp"
#include "error.hpp"
#include "lock.hpp"

#include <chrono>
#include <string>
#include <system_error>

namespace dlock {

/** The read-write lock `name` on one client's server. */
class rwlock {
public:
	/** Handles for both halves (no traffic). Throws dlock::error. */
	rwlock(const client &c, const std::string &name)
		: read_(c, name, kind::read), write_(c, name, kind::write)
	{
	}
	/** As above; on failure ec is set (the first half's error). */
	rwlock(const client &c, const std::string &name, std::error_code &ec) noexcept
		: read_(half(c, name, kind::read, ec, true)),
		  write_(half(c, name, kind::write, ec, false))
	{
	}

	rwlock(rwlock &&) noexcept = default;
	rwlock &operator=(rwlock &&) noexcept = default;
	rwlock(const rwlock &) = delete;
	rwlock &operator=(const rwlock &) = delete;
	~rwlock() = default;

	const char *name() const noexcept { return read_.name(); }

	/** The shared half: any number of owners hold it while no writer does. */
	rlock &read_lock() noexcept { return read_; }
	const rlock &read_lock() const noexcept { return read_; }
	/** The exclusive half: one owner, and no reader but that owner. */
	rlock &write_lock() noexcept { return write_; }
	const rlock &write_lock() const noexcept { return write_; }

	/** The lease of both halves' later acquisitions (see rlock::set_lease). */
	void set_lease(std::chrono::milliseconds lease) noexcept
	{
		read_.set_lease(lease);
		write_.set_lease(lease);
	}

	/* SharedTimedLockable: exclusive = the write half, shared = the read
	 * half. The error_code forms are the halves' own. */
	void lock() { write_.lock(); }
	bool try_lock() { return write_.try_lock(); }
	template <class Rep, class Period> bool try_lock_for(const std::chrono::duration<Rep, Period> &d)
	{
		return write_.try_lock_for(d);
	}
	template <class Clock, class Duration>
	bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t)
	{
		return write_.try_lock_until(t);
	}
	void unlock() { write_.unlock(); }

	void lock_shared() { read_.lock(); }
	bool try_lock_shared() { return read_.try_lock(); }
	template <class Rep, class Period>
	bool try_lock_shared_for(const std::chrono::duration<Rep, Period> &d)
	{
		return read_.try_lock_for(d);
	}
	template <class Clock, class Duration>
	bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration> &t)
	{
		return read_.try_lock_until(t);
	}
	void unlock_shared() { read_.unlock(); }

private:
	/* One half; ec keeps the first failure of the two. */
	static rlock half(const client &c, const std::string &name, kind k, std::error_code &ec,
			bool first) noexcept
	{
		std::error_code mine;
		rlock l(c, name, k, mine);
		if (first || !ec)
			ec = mine;
		return l;
	}

	rlock read_;
	rlock write_;
};

} // namespace dlock

#endif
