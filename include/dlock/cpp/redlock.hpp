/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/redlock.hpp - dlock::redlock: one lock on a quorum of servers.
 */
#ifndef DLOCK_CPP_REDLOCK_HPP
#define DLOCK_CPP_REDLOCK_HPP

#include "error.hpp"
#include "group.hpp"
#include "lock.hpp"
#include "multilock.hpp"

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>
#include <system_error>
#include <vector>

namespace dlock {

namespace detail {

/* The C functions of a redlock (detail::group_base). */
struct redlock_c {
	using handle = dlock_redlock;
	static constexpr auto create = dlock_redlock_new;
	static constexpr auto close = dlock_redlock_free;
	static constexpr auto check = dlock_redlock_check;
	static constexpr auto validity_ms = dlock_redlock_validity_ms;
	static constexpr auto acquire = dlock_redlock_acquire;
	static constexpr auto acquire_fenced = dlock_redlock_acquire_fenced;
	static constexpr auto release = dlock_redlock_release;
	static constexpr auto acquire_async = dlock_redlock_acquire_async;
	static constexpr auto release_async = dlock_redlock_release_async;
	static constexpr auto size = dlock_redlock_size;
	static constexpr auto owner = dlock_redlock_owner;
	static std::string subject(const void *) { return std::string("redlock"); }
};

} // namespace detail

/** One lock on a quorum (n/2 + 1) of n servers (dlock/redlock.h). Move-only;
 *  is_held(): held on a quorum; validity(): how long the quorum's holds are
 *  certain to last. */
class redlock : public detail::group_base<redlock, detail::redlock_c> {
public:
	/** Lock `name` on the servers `uris`, one client each, connected when
	 *  first used (a server down now is a failed vote later). Options may be
	 *  NULL; opts->fenced makes fenced members. Throws dlock::error. */
	redlock(const std::vector<std::string> &uris, const std::string &name,
			const dlock_client_options *client_opts = nullptr,
			const dlock_redlock_options *opts = nullptr)
	{
		detail::check(make(uris, name, client_opts, opts));
	}
	redlock(const std::vector<std::string> &uris, const std::string &name,
			const dlock_client_options *client_opts, const dlock_redlock_options *opts,
			std::error_code &ec) noexcept
	{
		detail::set_code(ec, make(uris, name, client_opts, opts));
	}

	/** Over member locks (normally one per server, one name). */
	explicit redlock(const members_type &members, const dlock_redlock_options *opts = nullptr)
	{
		detail::check(open_members(members, opts));
	}
	redlock(std::initializer_list<std::reference_wrapper<const dlock::rlock>> members,
			const dlock_redlock_options *opts = nullptr)
		: redlock(members_type(members), opts)
	{
	}
	redlock(const members_type &members, const dlock_redlock_options *opts,
			std::error_code &ec) noexcept
	{
		detail::set_code(ec, open_members(members, opts));
	}

	std::size_t quorum() const noexcept { return s_ ? dlock_redlock_quorum(s_->h) : 0; }

private:
	int make(const std::vector<std::string> &uris, const std::string &name,
			const dlock_client_options *client_opts, const dlock_redlock_options *opts) noexcept
	{
		fenced_ = opts != nullptr && opts->fenced;
		return open([&](state &st) {
			std::vector<const char *> list;
			for (const std::string &u : uris)
				list.push_back(u.c_str());
			return dlock_redlock_new_from_uris(&st.h, list.data(), list.size(),
					name.c_str(), client_opts, opts);
		});
	}
};

} // namespace dlock

#endif
