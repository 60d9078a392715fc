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
#include "lockable.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <system_error>

namespace dlock {

#ifdef DLOCK_HPP_COROUTINES
namespace detail {

inline std::string lock_subject(const void *h)
{
	return std::string("lock ") + dlock_lock_name(static_cast<const dlock_lock *>(h));
}

inline const async_calls lock_calls = {
	{
		[](dlock_op **out, void *h, const async_args &a, dlock_op_cb cb, void *ud) {
			return dlock_lock_acquire_async(out, static_cast<dlock_lock *>(h),
					a.text.c_str(), a.wait, a.lease, cb, ud);
		},
		lock_subject, DLOCK_ENOTACQUIRED,
	},
	{
		[](dlock_op **out, void *h, const async_args &a, dlock_op_cb cb, void *ud) {
			return dlock_lock_release_async(out, static_cast<dlock_lock *>(h),
					a.text.c_str(), cb, ud);
		},
		lock_subject, 0,
	},
};

} // namespace detail
#endif

/** What a dlock::rlock is: Redisson's RLock, RFairLock or RFencedLock, or
 *  the read or write half of its RReadWriteLock (DLOCK_LOCK_READ/WRITE). */
enum class kind { plain, fair, fenced, read, write };

/** A lock `name` on one client's server. */
class rlock : public detail::timed_lockable<rlock>, public detail::awaitable<rlock> {
public:
	/** A handle (no traffic). Throws dlock::error (bad name, empty client). */
	rlock(const client &c, const std::string &name, kind k = kind::plain) : kind_(k)
	{
		int rc = make(c, name);
		if (rc != 0)
			detail::throw_error(rc);
	}
	rlock(const client &c, const std::string &name, kind k, std::error_code &ec) noexcept : kind_(k)
	{
		detail::set_code(ec, make(c, name));
	}

	rlock(rlock &&) noexcept = default;
	rlock &operator=(rlock &&) noexcept = default;
	rlock(const rlock &) = delete;
	rlock &operator=(const rlock &) = delete;
	~rlock() = default;

	dlock_lock *native() const noexcept { return s_ ? s_->h : nullptr; }
	const char *name() const noexcept { return s_ ? dlock_lock_name(s_->h) : ""; }
	kind lock_kind() const noexcept { return kind_; }

	/** The calling thread holds it, by this process's records (no traffic). */
	bool is_held() const noexcept { return s_ && dlock_lock_check(s_->h, nullptr) == 0; }

	/** How long the calling thread's hold is certain to last (no traffic). */
	using detail::timed_lockable<rlock>::validity;
	std::chrono::milliseconds validity(std::error_code &ec) const noexcept
	{
		std::int64_t ms = 0;
		detail::set_code(ec, dlock_lock_validity_ms(&ms, native(), nullptr));
		return std::chrono::milliseconds(ms);
	}

	/** The fencing token of the latest acquisition through this object
	 *  (a fenced lock; 0 before one, and for other kinds). */
	std::int64_t token() const noexcept { return s_ ? s_->token.load() : 0; }


private:
	friend class detail::timed_lockable<rlock>;
	friend class detail::awaitable<rlock>;
	friend class multilock;
	friend class redlock;

	/* The handle, the client it keeps open, and the last token. */
	struct state {
		dlock_lock *h = nullptr;
		std::shared_ptr<dlock_client> client;
		std::atomic<std::int64_t> token{0};
		~state() { dlock_lock_free(h); }
	};

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
		try {
			auto st = std::make_shared<state>();
			int rc = new_handle(&st->h, c.native(), name.c_str(), kind_);
			if (rc != 0)
				return rc;
			st->client = c.h_;
			s_ = std::move(st);
			return 0;
		} catch (const std::bad_alloc &) {
			return DLOCK_ENOMEM;
		}
	}

	int acquire(std::int64_t wait) noexcept
	{
		std::int64_t lease = this->lease().count();
		if (kind_ != kind::fenced)
			return dlock_lock_acquire(native(), NULL, wait, lease);
		std::int64_t t = 0;
		int rc = dlock_lock_acquire_fenced(&t, native(), nullptr, wait, lease);
		if (rc == 0)
			s_->token.store(t);
		return rc;
	}

	int release() noexcept { return dlock_lock_release(native(), NULL); }

#ifdef DLOCK_HPP_COROUTINES
	static const detail::async_calls &calls() noexcept { return detail::lock_calls; }
#endif
	/* Where an acquisition's token goes; it keeps the handle and client. */
	std::shared_ptr<std::atomic<std::int64_t>> token_ref() const noexcept
	{
		if (!s_)
			return nullptr;
		return std::shared_ptr<std::atomic<std::int64_t>>(s_, &s_->token);
	}

	std::shared_ptr<state> s_;
	kind kind_;
};

} // namespace dlock

#endif
