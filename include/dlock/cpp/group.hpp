/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/group.hpp - internal: what dlock::multilock and dlock::redlock
 * share, a lock held over member locks.
 */
#ifndef DLOCK_CPP_GROUP_HPP
#define DLOCK_CPP_GROUP_HPP

#include "error.hpp"
#include "handle.hpp"
#include "lock.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dlock {

namespace detail {

/* A lock over members (lock_base), whose traits T also name size, owner
 * and create (the C constructor over member handles). */
template <class Self, class T> class group_base : public lock_base<Self, T> {
public:
	using members_type = std::vector<std::reference_wrapper<const dlock::rlock>>;

	std::size_t size() const noexcept { return this->s_ ? T::size(this->s_->h) : 0; }

	/** An owner for acquire_async(), named after the first member's client
	 *  (dlock_multilock_owner, dlock_redlock_owner). Throws dlock::error. */
	std::string owner(std::uint64_t id) const
	{
		char buf[DLOCK_OWNER_SIZE];
		int rc = T::owner(buf, this->native(), id);
		if (rc < 0)
			throw_error(rc);
		return std::string(buf);
	}

protected:
	/* Over member locks, fenced or not, all alike; the state keeps the
	 * members' states (the C handle borrows them). */
	template <class Options>
	int open_members(const members_type &members, Options opts) noexcept
	{
		return this->open([&](typename group_base::state &st) {
			std::vector<dlock_lock *> handles;
			for (const dlock::rlock &m : members) {
				handles.push_back(m.native());
				st.keep.push_back(m.s_);
				this->fenced_ = m.lock_kind() == kind::fenced;
			}
			return T::create(&st.h, handles.data(), handles.size(), opts);
		});
	}
};

} // namespace detail

} // namespace dlock

#endif
