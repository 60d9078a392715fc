/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/handle.hpp - internal: what the classes of dlock/cpp/ are made
 * of. A C handle in a state shared with what outlives the object (pending
 * operations, permits), move-only; the two forms (throwing, std::error_code&)
 * of a C call that answers one value; a lock's calls (rlock, multilock,
 * redlock), written once over the C functions of its kind.
 */
#ifndef DLOCK_CPP_HANDLE_HPP
#define DLOCK_CPP_HANDLE_HPP

#include "async.hpp"
#include "error.hpp"
#include "lockable.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace dlock {

namespace detail {

/* A C call answering one value through its first argument, in the throwing
 * form and in the std::error_code& one. */
template <class T, class... P, class... A> T answer(int (*call)(T *, P...), A... args)
{
	T v{};
	check(call(&v, args...));
	return v;
}
template <class T, class... P, class... A>
T answer(std::error_code &ec, int (*call)(T *, P...), A... args) noexcept
{
	T v{};
	set_code(ec, call(&v, args...));
	return v;
}

/* A handle, what it keeps alive (its client, or its members' states: it
 * borrows them) and a lock's last token; freed before what it keeps. */
template <class H, void (*Close)(H *)> struct handle_state {
	H *h = nullptr;
	std::vector<std::shared_ptr<void>> keep;
	std::atomic<std::int64_t> token{0};
	~handle_state() { Close(h); }
};

/* The state of a class of dlock/cpp/: native() is its handle (NULL when
 * making it failed, or moved from). Move-only. */
template <class H, void (*Close)(H *)> class handle {
public:
	H *native() const noexcept { return s_ ? s_->h : nullptr; }

protected:
	using state = handle_state<H, Close>;

	handle() = default;
	handle(handle &&) noexcept = default;
	handle &operator=(handle &&) noexcept = default;
	handle(const handle &) = delete;
	handle &operator=(const handle &) = delete;
	~handle() = default;

	/* open(state &) calls the C constructor; the state is kept when it did. */
	template <class Open> int open(Open open_state) noexcept
	{
		try {
			auto st = std::make_shared<state>();
			int rc = open_state(*st);
			if (rc == 0)
				s_ = std::move(st);
			return rc;
		} catch (const std::bad_alloc &) {
			return DLOCK_ENOMEM;
		}
	}

	/* A handle on a client's server, new_handle(&h, client) its C
	 * constructor; the state keeps the client open. */
	template <class New>
	int open_on(const std::shared_ptr<dlock_client> &c, New new_handle) noexcept
	{
		return open([&](state &st) {
			st.keep.push_back(c);
			return new_handle(&st.h, c.get());
		});
	}

	/* What an operation keeps alive: the handle, and where its token goes
	 * (token_ref) or no token (keep). */
	std::shared_ptr<std::atomic<std::int64_t>> token_ref() const noexcept
	{
		return s_ ? std::shared_ptr<std::atomic<std::int64_t>>(s_, &s_->token) : nullptr;
	}
	std::shared_ptr<std::atomic<std::int64_t>> keep() const noexcept
	{
		return s_ ? std::shared_ptr<std::atomic<std::int64_t>>(s_, nullptr) : nullptr;
	}

#ifdef DLOCK_HPP_COROUTINES
	/* One operation of a semaphore or a latch (no token to store). */
	async_op make_op(const async_call &call, std::string text, std::int64_t wait,
			std::int64_t lease, std::int64_t count, std::error_code *ec) const noexcept
	{
		return async_op(call, native(), make_args(std::move(text), wait, lease, count),
				keep(), ec);
	}
#ifdef DLOCK_HPP_STOP_TOKEN
	async_op make_op(const async_call &call, std::string text, std::int64_t wait,
			std::int64_t lease, std::int64_t count, std::error_code *ec,
			std::stop_token stop) const noexcept
	{
		return async_op(call, native(), make_args(std::move(text), wait, lease, count),
				keep(), ec, std::move(stop));
	}
#endif
#endif

	std::shared_ptr<state> s_;
};

/*
 * A lock of one kind, over the C functions its traits T name: handle (the
 * C type), close, check, validity_ms, acquire, acquire_fenced, release,
 * acquire_async, release_async, and subject (what its own lines call it).
 * Self sets fenced_ when its acquisitions are fenced.
 */
template <class Self, class T>
class lock_base : public handle<typename T::handle, T::close>,
		  public timed_lockable<Self>,
		  public awaitable<Self> {
public:
	/** Held by the calling thread, by this process's records (no traffic). */
	bool is_held() const noexcept { return this->s_ && T::check(this->s_->h, nullptr) == 0; }

	/** How long the calling thread's hold is certain to last (no traffic). */
	using timed_lockable<Self>::validity;
	std::chrono::milliseconds validity(std::error_code &ec) const noexcept
	{
		std::int64_t ms = answer(ec, T::validity_ms, this->native(), nullptr);
		return std::chrono::milliseconds(ms);
	}

	/** The token of the latest acquisition through this object (fenced
	 *  locks; 0 before one, and for other kinds). */
	std::int64_t token() const noexcept { return this->s_ ? this->s_->token.load() : 0; }

protected:
	bool fenced_ = false;

private:
	friend class timed_lockable<Self>;
	friend class awaitable<Self>;

	int acquire(std::int64_t wait) noexcept
	{
		std::int64_t lease = this->lease().count();
		if (!fenced_)
			return T::acquire(this->native(), nullptr, wait, lease);
		std::int64_t t = 0;
		int rc = T::acquire_fenced(&t, this->native(), nullptr, wait, lease);
		if (rc == 0)
			this->s_->token.store(t);
		return rc;
	}

	int release() noexcept { return T::release(this->native(), nullptr); }

#ifdef DLOCK_HPP_COROUTINES
	static int start_acquire(dlock_op **out, void *h, const async_args &a, dlock_op_cb cb,
			void *ud) noexcept
	{
		return T::acquire_async(out, static_cast<typename T::handle *>(h), a.text.c_str(),
				a.wait, a.lease, cb, ud);
	}
	static int start_release(dlock_op **out, void *h, const async_args &a, dlock_op_cb cb,
			void *ud) noexcept
	{
		auto *native_h = static_cast<typename T::handle *>(h);
		return T::release_async(out, native_h, a.text.c_str(), cb, ud);
	}
	static const async_calls &calls() noexcept
	{
		static const async_calls c = {
			{start_acquire, T::subject, DLOCK_ENOTACQUIRED},
			{start_release, T::subject, 0},
		};
		return c;
	}
#endif
};

} // namespace detail

} // namespace dlock

#endif
