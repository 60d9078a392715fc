/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/multilock.hpp - dlock::multilock: several locks held as one.
 */
#ifndef DLOCK_CPP_MULTILOCK_HPP
#define DLOCK_CPP_MULTILOCK_HPP

#include "error.hpp"
#include "group.hpp"
#include "lock.hpp"

#include <functional>
#include <initializer_list>
#include <string>
#include <system_error>

namespace dlock {

namespace detail {

/* The C functions of a multilock (detail::group_base). */
struct multilock_c {
	using handle = dlock_multilock;
	static constexpr auto create = dlock_multilock_new;
	static constexpr auto close = dlock_multilock_free;
	static constexpr auto check = dlock_multilock_check;
	static constexpr auto validity_ms = dlock_multilock_validity_ms;
	static constexpr auto acquire = dlock_multilock_acquire;
	static constexpr auto acquire_fenced = dlock_multilock_acquire_fenced;
	static constexpr auto release = dlock_multilock_release;
	static constexpr auto acquire_async = dlock_multilock_acquire_async;
	static constexpr auto release_async = dlock_multilock_release_async;
	static constexpr auto size = dlock_multilock_size;
	static constexpr auto owner = dlock_multilock_owner;
	static std::string subject(const void *) { return std::string("multilock"); }
};

} // namespace detail

/** Several locks held as one: all or none (dlock/multilock.h). Move-only;
 *  is_held(): every member held; validity(): the shortest of the members'. */
class multilock : public detail::group_base<multilock, detail::multilock_c> {
public:
	/** Members are fenced or not, all alike. Throws dlock::error. */
	explicit multilock(const members_type &members) { detail::check(make(members)); }
	multilock(std::initializer_list<std::reference_wrapper<const dlock::rlock>> members)
		: multilock(members_type(members))
	{
	}
	multilock(const members_type &members, std::error_code &ec) noexcept
	{
		detail::set_code(ec, make(members));
	}

private:
	int make(const members_type &members) noexcept
	{
		const dlock_multilock_options *defaults = nullptr;
		return open_members(members, defaults);
	}
};

} // namespace dlock

#endif
