/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/multilock.hpp - dlock::multilock: several locks held as one.
 */
#ifndef DLOCK_CPP_MULTILOCK_HPP
#define DLOCK_CPP_MULTILOCK_HPP

#include "async.hpp"
#include "error.hpp"
#include "lock.hpp"
#include "lockable.hpp"

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

inline std::string multilock_subject(const void *)
{
	return std::string("multilock");
}

inline const async_calls multilock_calls = {
	{
		[](dlock_op **out, void *h, const async_args &a, dlock_op_cb cb, void *ud) {
			return dlock_multilock_acquire_async(out, static_cast<dlock_multilock *>(h),
					a.text.c_str(), a.wait, a.lease, cb, ud);
		},
		multilock_subject, DLOCK_ENOTACQUIRED,
	},
	{
		[](dlock_op **out, void *h, const async_args &a, dlock_op_cb cb, void *ud) {
			return dlock_multilock_release_async(out, static_cast<dlock_multilock *>(h),
					a.text.c_str(), cb, ud);
		},
		multilock_subject, 0,
	},
};

} // namespace detail
#endif

namespace detail {

/* A multilock's or redlock's handle with its members' handles (kept alive
 * while it lives: it borrows them) and the last token. */
template <class Handle, void (*Free)(Handle *)> struct group_state {
	Handle *h = nullptr;
	std::vector<std::shared_ptr<void>> members;
	std::atomic<std::int64_t> token{0};
	~group_state() { Free(h); }
};

} // namespace detail

/** Several locks held as one: all or none (dlock/multilock.h). */
class multilock : public detail::timed_lockable<multilock>,
		  public detail::awaitable<multilock> {
public:
	using members_type = std::vector<std::reference_wrapper<const dlock::rlock>>;

	/** Members are fenced or not, all alike. Throws dlock::error. */
	explicit multilock(const members_type &members)
	{
		int rc = make(members);
		if (rc != 0)
			detail::throw_error(rc);
	}
	multilock(std::initializer_list<std::reference_wrapper<const dlock::rlock>> members)
		: multilock(members_type(members))
	{
	}
	multilock(const members_type &members, std::error_code &ec) noexcept
	{
		detail::set_code(ec, make(members));
	}

	multilock(multilock &&) noexcept = default;
	multilock &operator=(multilock &&) noexcept = default;
	multilock(const multilock &) = delete;
	multilock &operator=(const multilock &) = delete;
	~multilock() = default;

	dlock_multilock *native() const noexcept { return s_ ? s_->h : nullptr; }
	std::size_t size() const noexcept { return s_ ? dlock_multilock_size(s_->h) : 0; }

	/** Every member held by the calling thread, by local records. */
	bool is_held() const noexcept { return s_ && dlock_multilock_check(s_->h, nullptr) == 0; }

	/** The shortest validity of the members (no traffic). */
	using detail::timed_lockable<multilock>::validity;
	std::chrono::milliseconds validity(std::error_code &ec) const noexcept
	{
		std::int64_t ms = 0;
		detail::set_code(ec, dlock_multilock_validity_ms(&ms, native(), nullptr));
		return std::chrono::milliseconds(ms);
	}

	/** The token of the latest acquisition (fenced members; else 0). */
	std::int64_t token() const noexcept { return s_ ? s_->token.load() : 0; }

	/** An owner for acquire_async(), named after the first member's client
	 *  (dlock_multilock_owner). Throws dlock::error. */
	std::string owner(std::uint64_t id) const
	{
		char buf[DLOCK_OWNER_SIZE];
		int rc = dlock_multilock_owner(buf, native(), id);
		if (rc < 0)
			detail::throw_error(rc);
		return std::string(buf);
	}

private:
	friend class detail::timed_lockable<multilock>;
	friend class detail::awaitable<multilock>;
	using state = detail::group_state<dlock_multilock, dlock_multilock_free>;
#ifdef DLOCK_HPP_COROUTINES
	static const detail::async_calls &calls() noexcept { return detail::multilock_calls; }
#endif
	std::shared_ptr<std::atomic<std::int64_t>> token_ref() const noexcept
	{
		return s_ ? std::shared_ptr<std::atomic<std::int64_t>>(s_, &s_->token) : nullptr;
	}

	int make(const members_type &members) noexcept
	{
		try {
			auto st = std::make_shared<state>();
			std::vector<dlock_lock *> handles;
			for (const dlock::rlock &m : members) {
				handles.push_back(m.native());
				st->members.push_back(m.s_);
				fenced_ = m.lock_kind() == kind::fenced;
			}
			int rc = dlock_multilock_new(&st->h, handles.data(), handles.size(), nullptr);
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
			return dlock_multilock_acquire(native(), NULL, wait, lease);
		std::int64_t t = 0;
		int rc = dlock_multilock_acquire_fenced(&t, native(), nullptr, wait, lease);
		if (rc == 0)
			s_->token.store(t);
		return rc;
	}

	int release() noexcept { return dlock_multilock_release(native(), NULL); }

	std::shared_ptr<state> s_;
	bool fenced_ = false;
};

} // namespace dlock

#endif
