/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/redlock.hpp - dlock::redlock: one lock on a quorum of servers.
 */
#ifndef DLOCK_CPP_REDLOCK_HPP
#define DLOCK_CPP_REDLOCK_HPP

#include "async.hpp"
#include "error.hpp"
#include "lock.hpp"
#include "lockable.hpp"
#include "multilock.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <vector>

namespace dlock {

#ifdef DLOCK_HPP_COROUTINES
namespace detail {

inline std::string redlock_subject(const void *)
{
	return std::string("redlock");
}

inline const async_calls redlock_calls = {
	{
		[](dlock_op **out, void *h, const async_args &a, dlock_op_cb cb, void *ud) {
			return dlock_redlock_acquire_async(out, static_cast<dlock_redlock *>(h),
					a.text.c_str(), a.wait, a.lease, cb, ud);
		},
		redlock_subject, DLOCK_ENOTACQUIRED,
	},
	{
		[](dlock_op **out, void *h, const async_args &a, dlock_op_cb cb, void *ud) {
			return dlock_redlock_release_async(out, static_cast<dlock_redlock *>(h),
					a.text.c_str(), cb, ud);
		},
		redlock_subject, 0,
	},
};

} // namespace detail
#endif

/** One lock on a quorum (n/2 + 1) of n servers (dlock/redlock.h). */
class redlock : public detail::timed_lockable<redlock>, public detail::awaitable<redlock> {
public:
	using members_type = multilock::members_type;

	/** Lock `name` on the servers `uris`, one client each, connected when
	 *  first used (a server down now is a failed vote later). Options may be
	 *  NULL; opts->fenced makes fenced members. Throws dlock::error. */
	redlock(const std::vector<std::string> &uris, const std::string &name,
			const dlock_client_options *client_opts = nullptr,
			const dlock_redlock_options *opts = nullptr)
	{
		int rc = make(uris, name, client_opts, opts);
		if (rc != 0)
			detail::throw_error(rc);
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
		int rc = make(members, opts);
		if (rc != 0)
			detail::throw_error(rc);
	}
	redlock(std::initializer_list<std::reference_wrapper<const dlock::rlock>> members,
			const dlock_redlock_options *opts = nullptr)
		: redlock(members_type(members), opts)
	{
	}
	redlock(const members_type &members, const dlock_redlock_options *opts,
			std::error_code &ec) noexcept
	{
		detail::set_code(ec, make(members, opts));
	}

	redlock(redlock &&) noexcept = default;
	redlock &operator=(redlock &&) noexcept = default;
	redlock(const redlock &) = delete;
	redlock &operator=(const redlock &) = delete;
	~redlock() = default;

	dlock_redlock *native() const noexcept { return s_ ? s_->h : nullptr; }
	std::size_t size() const noexcept { return s_ ? dlock_redlock_size(s_->h) : 0; }
	std::size_t quorum() const noexcept { return s_ ? dlock_redlock_quorum(s_->h) : 0; }

	/** Held on a quorum by the calling thread, by local records. */
	bool is_held() const noexcept { return s_ && dlock_redlock_check(s_->h, nullptr) == 0; }

	/** How long the quorum's holds are certain to last (no traffic). */
	using detail::timed_lockable<redlock>::validity;
	std::chrono::milliseconds validity(std::error_code &ec) const noexcept
	{
		std::int64_t ms = 0;
		detail::set_code(ec, dlock_redlock_validity_ms(&ms, native(), nullptr));
		return std::chrono::milliseconds(ms);
	}

	/** The token of the latest acquisition (fenced members; else 0). */
	std::int64_t token() const noexcept { return s_ ? s_->token.load() : 0; }

	/** An owner for acquire_async(), named after the first member's client
	 *  (dlock_redlock_owner). Throws dlock::error. */
	std::string owner(std::uint64_t id) const
	{
		char buf[DLOCK_OWNER_SIZE];
		int rc = dlock_redlock_owner(buf, native(), id);
		if (rc < 0)
			detail::throw_error(rc);
		return std::string(buf);
	}

private:
	friend class detail::timed_lockable<redlock>;
	friend class detail::awaitable<redlock>;
	using state = detail::group_state<dlock_redlock, dlock_redlock_free>;
#ifdef DLOCK_HPP_COROUTINES
	static const detail::async_calls &calls() noexcept { return detail::redlock_calls; }
#endif
	std::shared_ptr<std::atomic<std::int64_t>> token_ref() const noexcept
	{
		return s_ ? std::shared_ptr<std::atomic<std::int64_t>>(s_, &s_->token) : nullptr;
	}

	int make(const std::vector<std::string> &uris, const std::string &name,
			const dlock_client_options *client_opts, const dlock_redlock_options *opts) noexcept
	{
		try {
			auto st = std::make_shared<state>();
			std::vector<const char *> list;
			for (const std::string &u : uris)
				list.push_back(u.c_str());
			int rc = dlock_redlock_new_from_uris(&st->h, list.data(), list.size(),
					name.c_str(), client_opts, opts);
			if (rc == 0) {
				s_ = std::move(st);
				fenced_ = opts != nullptr && opts->fenced;
			}
			return rc;
		} catch (const std::bad_alloc &) {
			return DLOCK_ENOMEM;
		}
	}

	int make(const members_type &members, const dlock_redlock_options *opts) noexcept
	{
		try {
			auto st = std::make_shared<state>();
			std::vector<dlock_lock *> handles;
			for (const dlock::rlock &m : members) {
				handles.push_back(m.native());
				st->members.push_back(m.s_);
				fenced_ = m.lock_kind() == kind::fenced;
			}
			int rc = dlock_redlock_new(&st->h, handles.data(), handles.size(), opts);
			if (rc == 0)
				s_ = std::move(st);
			return rc;
		} catch (const std::bad_alloc &) {
			return DLOCK_ENOMEM;
		}
	}

	int acquire(std::int64_t wait) noexcept
	{
		std::int64_t lease = this->lease().count();
		if (!fenced_)
			return dlock_redlock_acquire(native(), NULL, wait, lease);
		std::int64_t t = 0;
		int rc = dlock_redlock_acquire_fenced(&t, native(), nullptr, wait, lease);
		if (rc == 0)
			s_->token.store(t);
		return rc;
	}

	int release() noexcept { return dlock_redlock_release(native(), NULL); }

	std::shared_ptr<state> s_;
	bool fenced_ = false;
};


} // namespace dlock

#endif
