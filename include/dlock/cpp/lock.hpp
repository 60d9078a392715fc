/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/lock.hpp - dlock::rlock: an RLock, fair lock or fenced lock, or
 * one half of a read-write lock, on one server (dlock/lock.h).
 */
#ifndef DLOCK_CPP_LOCK_HPP
#define DLOCK_CPP_LOCK_HPP

#include "async.hpp"
#include "client.hpp"
#include "error.hpp"
#include "handle.hpp"

#include <string>
#include <system_error>

namespace dlock {

namespace detail {

/* The C functions of a lock (detail::lock_base). */
struct lock_c {
	using handle = dlock_lock;
	static constexpr auto close = dlock_lock_free;
	static constexpr auto check = dlock_lock_check;
	static constexpr auto validity_ms = dlock_lock_validity_ms;
	static constexpr auto acquire = dlock_lock_acquire;
	static constexpr auto acquire_fenced = dlock_lock_acquire_fenced;
	static constexpr auto release = dlock_lock_release;
	static constexpr auto acquire_async = dlock_lock_acquire_async;
	static constexpr auto release_async = dlock_lock_release_async;
	static std::string subject(const void *h)
	{
		return std::string("lock ") + dlock_lock_name(static_cast<const dlock_lock *>(h));
	}
};

template <class Self, class T> class group_base;

} // namespace detail

/** What a dlock::rlock is: Redisson's RLock, RFairLock or RFencedLock, or
 *  the read or write half of its RReadWriteLock (DLOCK_LOCK_READ/WRITE). */
enum class kind { plain, fair, fenced, read, write };

/** A lock `name` on one client's server. Move-only. */
class rlock : public detail::lock_base<rlock, detail::lock_c> {
public:
	/** A handle (no traffic). Throws dlock::error (bad name, empty client). */
	rlock(const client &c, const std::string &name, kind k = kind::plain) : kind_(k)
	{
		detail::check(make(c, name));
	}
	rlock(const client &c, const std::string &name, kind k, std::error_code &ec) noexcept : kind_(k)
	{
		detail::set_code(ec, make(c, name));
	}

	const char *name() const noexcept { return s_ ? dlock_lock_name(s_->h) : ""; }
	kind lock_kind() const noexcept { return kind_; }

private:
	template <class, class> friend class detail::group_base; /* keeps s_ */

	/* The one place that picks the C constructor for a kind. */
	static int new_handle(dlock_lock **out, dlock_client *c, const char *name, kind k) noexcept
	{
		dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;

		o.kind = k == kind::fair ? DLOCK_LOCK_FAIR
				: k == kind::fenced ? DLOCK_LOCK_FENCED
				: k == kind::read ? DLOCK_LOCK_READ
				: k == kind::write ? DLOCK_LOCK_WRITE : DLOCK_LOCK_PLAIN;
		return dlock_lock_new(out, c, name, &o);
	}

	int make(const client &c, const std::string &name) noexcept
	{
		fenced_ = kind_ == kind::fenced;
		return open_on(c.h_, [&](dlock_lock **h, dlock_client *cl) {
			return new_handle(h, cl, name.c_str(), kind_);
		});
	}

	kind kind_;
};

} // namespace dlock

#endif
