/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/semaphore.hpp - dlock::semaphore: Redisson's RSemaphore (plain:
 * counted permits, nobody's) and RPermitExpirableSemaphore (expirable: each
 * permit has an id and a lease), over dlock/semaphore.h.
 *
 *   dlock::semaphore pool(client, "db-connections");
 *   pool.try_set_permits(4);
 *   { dlock::semaphore_guard g(pool); ... }              // one permit, given back
 *
 *   dlock::semaphore jobs(client, "jobs", dlock::semaphore_kind::expirable);
 *   if (dlock::permit p = jobs.try_acquire_permit_for(5s, 30s)) { ... p.id() ... }
 *
 * A plain semaphore has the calls of std::counting_semaphore (acquire,
 * try_acquire, try_acquire_for/until, release), with a count of permits
 * (default 1); dlock::semaphore_guard holds some for a scope. An expirable
 * one hands out dlock::permit objects: a permit's id (which any process may
 * release) and RAII - its destructor gives it back. A permit with the
 * watchdog lease is renewed while the semaphore's handle lives: a permit
 * keeps it alive. try_acquire*() return false (an empty permit) only when
 * too few permits came within the wait; every other failure throws
 * dlock::error or sets the std::error_code& of the non-throwing form
 * (whose count of permits is then always written out).
 */
#ifndef DLOCK_CPP_SEMAPHORE_HPP
#define DLOCK_CPP_SEMAPHORE_HPP

#include "async.hpp"
#include "client.hpp"
#include "error.hpp"
#include "handle.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace dlock {

/** Redisson's RSemaphore, or its RPermitExpirableSemaphore. */
enum class semaphore_kind { plain, expirable };

/** What a server has for a semaphore at one moment (semaphore::query()). */
struct semaphore_info {
	/** A permit taken from an expirable semaphore. */
	struct taken {
		std::string id;
		/** Its lease left by this machine's clock: 0 passed, -1 none. */
		std::chrono::milliseconds lease_left;
	};
	/** A count is set (the key exists). */
	bool is_set = false;
	/** The available count as read (may be below zero). */
	std::int64_t available = 0;
	/** The permits taken (an expirable semaphore; else none). */
	std::vector<taken> permits;
	/** Clients listening for permits, dlock's and Redisson's. */
	std::int64_t waiters = 0;
};

namespace detail {

/* The handle and the client it keeps open; permits keep it (renewals). */
using semaphore_handle = handle<dlock_semaphore, dlock_semaphore_free>;
using semaphore_state = handle_state<dlock_semaphore, dlock_semaphore_free>;

#ifdef DLOCK_HPP_COROUTINES
inline std::string semaphore_subject(const void *h)
{
	return std::string("semaphore ") +
			(h != nullptr ? dlock_semaphore_name(static_cast<const dlock_semaphore *>(h)) : "");
}

inline const async_call semaphore_acquire = {
	[](dlock_op **out, void *h, const async_args &a, dlock_op_cb cb, void *ud) {
		return dlock_semaphore_acquire_async(out, static_cast<dlock_semaphore *>(h), a.count,
				a.wait, cb, ud);
	},
	semaphore_subject,
	DLOCK_ENOTACQUIRED,
};

inline const async_call semaphore_acquire_permit = {
	[](dlock_op **out, void *h, const async_args &a, dlock_op_cb cb, void *ud) {
		return dlock_semaphore_acquire_permit_async(out, static_cast<dlock_semaphore *>(h),
				a.wait, a.lease, cb, ud);
	},
	semaphore_subject,
	DLOCK_ENOTACQUIRED,
};

inline const async_call semaphore_release = {
	[](dlock_op **out, void *h, const async_args &a, dlock_op_cb cb, void *ud) {
		return dlock_semaphore_release_async(out, static_cast<dlock_semaphore *>(h), a.count,
				cb, ud);
	},
	semaphore_subject, 0,
};

inline const async_call semaphore_release_permit = {
	[](dlock_op **out, void *h, const async_args &a, dlock_op_cb cb, void *ud) {
		return dlock_semaphore_release_permit_async(out, static_cast<dlock_semaphore *>(h),
				a.text.c_str(), cb, ud);
	},
	semaphore_subject, 0,
};
#endif

} // namespace detail

/**
 * One permit of an expirable semaphore: its id, and RAII - the destructor
 * gives it back (dropping any error; release() to see it). Empty (false)
 * when default-made, moved from, released, or not acquired.
 */
class permit {
public:
	permit() noexcept = default;
	permit(permit &&o) noexcept : s_(std::move(o.s_)), id_(std::move(o.id_)) { o.id_.clear(); }
	permit &operator=(permit &&o) noexcept
	{
		if (this != &o) {
			drop();
			s_ = std::move(o.s_);
			id_ = std::move(o.id_);
			o.id_.clear();
		}
		return *this;
	}
	permit(const permit &) = delete;
	permit &operator=(const permit &) = delete;
	~permit() { drop(); }

	/** This object holds a permit (by what it was given; see is_held()). */
	explicit operator bool() const noexcept { return s_ != nullptr; }
	/** The permit's id, 32 hex digits ("" when empty). */
	const std::string &id() const noexcept { return id_; }

	/** Held, by this process's records (no traffic): not released, not lost. */
	bool is_held() const noexcept
	{
		return s_ && dlock_semaphore_check(s_->h, id_.c_str()) == 0;
	}

	/** How long the permit is certain to last (no traffic). */
	std::chrono::milliseconds validity() const
	{
		std::error_code ec;
		auto ms = validity(ec);
		if (ec)
			detail::throw_error(ec.value());
		return ms;
	}
	std::chrono::milliseconds validity(std::error_code &ec) const noexcept
	{
		std::int64_t ms = 0;
		detail::set_code(ec, dlock_semaphore_validity_ms(&ms, s_ ? s_->h : nullptr,
						     id_.c_str()));
		return std::chrono::milliseconds(ms);
	}

	/** Give it back now; empty afterwards, whatever the answer. Throws
	 *  dlock::error: errc::lost when its lease had passed, ... */
	void release() { detail::check(give_back()); }
	void release(std::error_code &ec) noexcept { detail::set_code(ec, give_back()); }

private:
	friend class semaphore;

	permit(std::shared_ptr<detail::semaphore_state> s, std::string id) noexcept
		: s_(std::move(s)), id_(std::move(id))
	{
	}

	/* An empty one calls nothing: the thread's last line stays. */
	void drop() noexcept
	{
		if (s_)
			give_back();
	}

	int give_back() noexcept
	{
		if (!s_)
			return dlock_semaphore_release_permit(nullptr, id_.c_str()); /* its line */
		int rc = dlock_semaphore_release_permit(s_->h, id_.c_str());
		s_.reset();
		id_.clear();
		return rc;
	}

	std::shared_ptr<detail::semaphore_state> s_;
	std::string id_;
};

/** A semaphore `name` on one client's server. Move-only. */
class semaphore : public detail::semaphore_handle {
public:
	/** A handle (no traffic). Throws dlock::error (bad name, empty client). */
	semaphore(const client &c, const std::string &name, semaphore_kind k = semaphore_kind::plain)
		: kind_(k)
	{
		detail::check(make(c, name));
	}
	semaphore(const client &c, const std::string &name, semaphore_kind k,
			std::error_code &ec) noexcept
		: kind_(k)
	{
		detail::set_code(ec, make(c, name));
	}

	const char *name() const noexcept { return s_ ? dlock_semaphore_name(s_->h) : ""; }
	semaphore_kind permit_kind() const noexcept { return kind_; }

	/** Set the count to `permits` unless one is set: true when this call set it. */
	bool try_set_permits(std::int64_t permits)
	{
		return detail::answer(dlock_semaphore_try_set_permits, native(), permits) == 1;
	}
	bool try_set_permits(std::int64_t permits, std::error_code &ec) noexcept
	{
		return detail::answer(ec, dlock_semaphore_try_set_permits, native(), permits) == 1;
	}
	/** Change the count (expirable: the total) to `permits`. */
	void set_permits(std::int64_t permits)
	{
		detail::check(dlock_semaphore_set_permits(native(), permits));
	}
	void set_permits(std::int64_t permits, std::error_code &ec) noexcept
	{
		detail::set_code(ec, dlock_semaphore_set_permits(native(), permits));
	}
	/** Add `delta` (may be negative) to the available count. */
	void add_permits(std::int64_t delta) { detail::check(dlock_semaphore_add_permits(native(), delta)); }
	void add_permits(std::int64_t delta, std::error_code &ec) noexcept
	{
		detail::set_code(ec, dlock_semaphore_add_permits(native(), delta));
	}
	/** The permits available now (0 when no count is set). */
	std::int64_t available() { return detail::answer(dlock_semaphore_available, native()); }
	std::int64_t available(std::error_code &ec) noexcept
	{
		return detail::answer(ec, dlock_semaphore_available, native());
	}
	/** The count and the permits taken, as read, changing nothing. */
	semaphore_info query()
	{
		semaphore_info info;
		detail::check(read_info(info));
		return info;
	}
	semaphore_info query(std::error_code &ec) noexcept
	{
		semaphore_info info;
		detail::set_code(ec, read_info(info));
		return info;
	}

	/* A plain semaphore: as std::counting_semaphore, `permits` at a time. */

	/** Block until `permits` are taken. */
	void acquire(std::int64_t permits = 1) { detail::check(take(permits, DLOCK_WAIT_FOREVER)); }
	void acquire(std::int64_t permits, std::error_code &ec) noexcept
	{
		detail::set_code(ec, take(permits, DLOCK_WAIT_FOREVER));
	}
	/** One attempt: false when too few are available. */
	bool try_acquire(std::int64_t permits = 1) { return taken(take(permits, 0)); }
	bool try_acquire(std::int64_t permits, std::error_code &ec) noexcept
	{
		return taken(take(permits, 0), ec);
	}
	/** Wait up to `d`: false when too few came. */
	template <class Rep, class Period>
	bool try_acquire_for(const std::chrono::duration<Rep, Period> &d, std::int64_t permits = 1)
	{
		return taken(take(permits, detail::wait_ms(d)));
	}
	template <class Rep, class Period>
	bool try_acquire_for(const std::chrono::duration<Rep, Period> &d, std::int64_t permits,
			std::error_code &ec) noexcept
	{
		return taken(take(permits, detail::wait_ms(d)), ec);
	}
	/** Wait until `t` on its own clock. */
	template <class Clock, class Duration>
	bool try_acquire_until(const std::chrono::time_point<Clock, Duration> &t,
			std::int64_t permits = 1)
	{
		return taken(take_until(t, permits));
	}
	template <class Clock, class Duration>
	bool try_acquire_until(const std::chrono::time_point<Clock, Duration> &t,
			std::int64_t permits, std::error_code &ec) noexcept
	{
		return taken(take_until(t, permits), ec);
	}
	/** Give `permits` back (anyone may). */
	void release(std::int64_t permits = 1)
	{
		detail::check(dlock_semaphore_release(native(), permits));
	}
	void release(std::int64_t permits, std::error_code &ec) noexcept
	{
		detail::set_code(ec, dlock_semaphore_release(native(), permits));
	}

	/* An expirable semaphore: one permit at a time, with a lease (watchdog:
	 * renewed while this handle lives; or > 0: comes back after it). */

	/** Block until a permit is taken. */
	permit acquire_permit(std::chrono::milliseconds lease = watchdog)
	{
		permit p;
		detail::check(take_permit(p, DLOCK_WAIT_FOREVER, lease));
		return p;
	}
	permit acquire_permit(std::chrono::milliseconds lease, std::error_code &ec) noexcept
	{
		permit p;
		detail::set_code(ec, take_permit(p, DLOCK_WAIT_FOREVER, lease));
		return p;
	}
	/** Wait up to `d`: an empty permit when none came. */
	template <class Rep, class Period>
	permit try_acquire_permit_for(const std::chrono::duration<Rep, Period> &d,
			std::chrono::milliseconds lease = watchdog)
	{
		permit p;
		detail::answered(take_permit(p, detail::wait_ms(d), lease), DLOCK_ENOTACQUIRED);
		return p;
	}
	template <class Rep, class Period>
	permit try_acquire_permit_for(const std::chrono::duration<Rep, Period> &d,
			std::chrono::milliseconds lease, std::error_code &ec) noexcept
	{
		permit p;
		detail::answered(take_permit(p, detail::wait_ms(d), lease), DLOCK_ENOTACQUIRED, ec);
		return p;
	}
	/** Give back the permit `id`, whoever took it. */
	void release_permit(const std::string &id)
	{
		detail::check(dlock_semaphore_release_permit(native(), id.c_str()));
	}
	void release_permit(const std::string &id, std::error_code &ec) noexcept
	{
		detail::set_code(ec, dlock_semaphore_release_permit(native(), id.c_str()));
	}
	/** A permit taken through this handle by id (acquire_permit_async()),
	 *  as an object that gives it back when it goes. */
	permit adopt_permit(std::string id) const noexcept { return permit(s_, std::move(id)); }
	/** Give back every permit taken, whoever holds it; how many were. */
	std::int64_t force_release()
	{
		return detail::answer(dlock_semaphore_force_release, native());
	}
	std::int64_t force_release(std::error_code &ec) noexcept
	{
		return detail::answer(ec, dlock_semaphore_force_release, native());
	}

#ifdef DLOCK_HPP_COROUTINES
	/* co_await (dlock/cpp/async.hpp): false (errc::not_acquired) when too
	 * few permits came within the wait. */

	/** co_await: take `permits` of a plain semaphore, waiting up to `wait`. */
	template <class Rep, class Period>
	async_op acquire_async(std::int64_t permits, const std::chrono::duration<Rep, Period> &wait) noexcept
	{
		return make_op(detail::semaphore_acquire, {}, detail::wait_ms(wait), 0, permits,
				nullptr);
	}
	template <class Rep, class Period>
	async_op acquire_async(std::int64_t permits, const std::chrono::duration<Rep, Period> &wait,
			std::error_code &ec) noexcept
	{
		return make_op(detail::semaphore_acquire, {}, detail::wait_ms(wait), 0, permits,
				&ec);
	}
	/** co_await: one permit of an expirable semaphore; result.permit is
	 *  its id (adopt_permit() makes it an object). */
	template <class Rep, class Period>
	async_op acquire_permit_async(const std::chrono::duration<Rep, Period> &wait,
			std::chrono::milliseconds lease = watchdog) noexcept
	{
		return make_op(detail::semaphore_acquire_permit, {}, detail::wait_ms(wait),
				lease.count(), 1, nullptr);
	}
	template <class Rep, class Period>
	async_op acquire_permit_async(const std::chrono::duration<Rep, Period> &wait,
			std::chrono::milliseconds lease, std::error_code &ec) noexcept
	{
		return make_op(detail::semaphore_acquire_permit, {}, detail::wait_ms(wait),
				lease.count(), 1, &ec);
	}
#ifdef DLOCK_HPP_STOP_TOKEN
	/** As above; a stop requested on `stop` cancels the wait. */
	template <class Rep, class Period>
	async_op acquire_permit_async(const std::chrono::duration<Rep, Period> &wait,
			std::chrono::milliseconds lease, std::stop_token stop) noexcept
	{
		return make_op(detail::semaphore_acquire_permit, {}, detail::wait_ms(wait),
				lease.count(), 1, nullptr, std::move(stop));
	}
#endif
	/** co_await: give `permits` of a plain semaphore back. */
	async_op release_async(std::int64_t permits = 1) noexcept
	{
		return make_op(detail::semaphore_release, {}, 0, 0, permits, nullptr);
	}
	async_op release_async(std::int64_t permits, std::error_code &ec) noexcept
	{
		return make_op(detail::semaphore_release, {}, 0, 0, permits, &ec);
	}
	/** co_await: give the expirable permit `id` back. */
	async_op release_permit_async(std::string id) noexcept
	{
		return make_op(detail::semaphore_release_permit, std::move(id), 0, 0, 1, nullptr);
	}
	async_op release_permit_async(std::string id, std::error_code &ec) noexcept
	{
		return make_op(detail::semaphore_release_permit, std::move(id), 0, 0, 1, &ec);
	}
#endif

private:
	int make(const client &c, const std::string &name) noexcept
	{
		dlock_semaphore_options o = DLOCK_SEMAPHORE_OPTIONS_INIT;
		o.kind = kind_ == semaphore_kind::expirable ? DLOCK_SEMAPHORE_EXPIRABLE
							    : DLOCK_SEMAPHORE_PLAIN;
		return open_on(c.h_, [&](dlock_semaphore **h, dlock_client *cl) {
			return dlock_semaphore_new(h, cl, name.c_str(), &o);
		});
	}

	int take(std::int64_t permits, std::int64_t wait) noexcept
	{
		return dlock_semaphore_acquire(native(), permits, wait);
	}
	template <class Clock, class Duration>
	int take_until(const std::chrono::time_point<Clock, Duration> &t, std::int64_t permits) noexcept
	{
		return detail::until(t, DLOCK_ENOTACQUIRED,
				[this, permits](std::int64_t ms) noexcept { return take(permits, ms); });
	}
	static bool taken(int rc) { return detail::answered(rc, DLOCK_ENOTACQUIRED); }
	static bool taken(int rc, std::error_code &ec) noexcept
	{
		return detail::answered(rc, DLOCK_ENOTACQUIRED, ec);
	}

	int take_permit(permit &p, std::int64_t wait, std::chrono::milliseconds lease) noexcept
	{
		char id[DLOCK_PERMIT_ID_SIZE] = "";
		int rc = dlock_semaphore_acquire_permit(id, native(), wait, lease.count());
		if (rc != 0)
			return rc;
		try {
			p = permit(s_, id);
			return 0;
		} catch (const std::bad_alloc &) {
			dlock_semaphore_release_permit(native(), id); /* no object to hold it */
			return DLOCK_ENOMEM;
		}
	}

	int read_info(semaphore_info &info) noexcept
	{
		dlock_semaphore_info *raw = nullptr;
		int rc = dlock_semaphore_query(&raw, native());
		if (rc != 0)
			return rc;
		std::unique_ptr<dlock_semaphore_info, void (*)(dlock_semaphore_info *)> i(
				raw, dlock_semaphore_info_free);
		try {
			info.is_set = dlock_semaphore_info_is_set(raw) == 1;
			info.available = dlock_semaphore_info_available(raw);
			info.waiters = dlock_semaphore_info_subscribers(raw);
			std::size_t n = dlock_semaphore_info_permits(raw);
			for (std::size_t k = 0; k < n; k++)
				info.permits.push_back({dlock_semaphore_info_permit_id(raw, k),
						std::chrono::milliseconds(
								dlock_semaphore_info_permit_ttl_ms(raw, k))});
			return 0;
		} catch (const std::bad_alloc &) {
			return DLOCK_ENOMEM;
		}
	}

	semaphore_kind kind_;
};

/**
 * Permits of a plain semaphore held for a scope: taken by the constructor,
 * given back by the destructor (dropping any error; release() to see it).
 */
class semaphore_guard {
public:
	semaphore_guard() noexcept = default;
	/** Block until `permits` are taken. Throws dlock::error. */
	explicit semaphore_guard(semaphore &s, std::int64_t permits = 1) : s_(&s), n_(permits)
	{
		s.acquire(permits);
	}
	/** Wait up to `wait`: owns() is false when too few came. */
	template <class Rep, class Period>
	semaphore_guard(semaphore &s, const std::chrono::duration<Rep, Period> &wait,
			std::int64_t permits = 1)
		: s_(&s), n_(s.try_acquire_for(wait, permits) ? permits : 0)
	{
	}
	/** Permits taken already: this guard gives them back. */
	semaphore_guard(semaphore &s, std::int64_t permits, std::adopt_lock_t) noexcept
		: s_(&s), n_(permits)
	{
	}
	semaphore_guard(semaphore_guard &&o) noexcept
		: s_(std::exchange(o.s_, nullptr)), n_(std::exchange(o.n_, 0))
	{
	}
	semaphore_guard &operator=(semaphore_guard &&o) noexcept
	{
		if (this != &o) {
			give_back();
			s_ = std::exchange(o.s_, nullptr);
			n_ = std::exchange(o.n_, 0);
		}
		return *this;
	}
	semaphore_guard(const semaphore_guard &) = delete;
	semaphore_guard &operator=(const semaphore_guard &) = delete;
	~semaphore_guard() { give_back(); }

	bool owns() const noexcept { return n_ > 0; }
	explicit operator bool() const noexcept { return owns(); }
	std::int64_t permits() const noexcept { return n_; }

	/** Give the permits back now. Throws dlock::error. */
	void release() { detail::check(give_back()); }
	void release(std::error_code &ec) noexcept { detail::set_code(ec, give_back()); }

private:
	int give_back() noexcept
	{
		if (n_ <= 0)
			return 0;
		int rc = dlock_semaphore_release(s_->native(), n_);
		n_ = 0;
		return rc;
	}

	semaphore *s_ = nullptr;
	std::int64_t n_ = 0;
};

} // namespace dlock

#endif
