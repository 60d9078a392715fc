/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock/cpp/async.hpp - co_await on asynchronous operations (C++20).
 *
 * C++20 (when <coroutine> is there; DLOCK_HPP_COROUTINES is then 1): the
 * acquire_async() and release_async() of an rlock, a multilock and a
 * redlock return a dlock::async_op for co_await, over dlock/async.h, for a
 * named owner (client::owner(), multilock::owner(), redlock::owner()):
 *
 *   dlock::async_result r = co_await lock.acquire_async(owner, 5s, 30s);
 *   if (r) { ... co_await lock.release_async(owner); }
 *
 * The same for a semaphore (acquire_async(), acquire_permit_async(),
 * release_async(), release_permit_async(); no owner: permits are nobody's,
 * or have an id) and a latch (wait_async(), count_down_async(), ...).
 *
 * The operation starts when awaited. co_await gives a dlock::async_result
 * (code, message, validity, token, holder_ttl, permit, value): false, with
 * errc::not_acquired and the holder's TTL, when another owner held the lock
 * all the wait (as try_lock_for; for a semaphore: too few permits came),
 * and false with errc::timed_out when a latch's wait ended above zero;
 * every other failure, errc::canceled included, throws dlock::error - or,
 * in the form with a std::error_code& last, sets it (not for those two
 * answers, as try_lock_for(d, ec)) and the result's code and message, the
 * line then not in last_error_message().
 *
 * Where the coroutine resumes: on the loop's thread, from inside the
 * operation's callback (dlock/async.h). For a client on your loop (the
 * `loop` option, dlock/loop.h), that is your thread, within
 * dlock_loop_run() (or dlock_loop_fd_ready()/dlock_loop_timeout()); for a
 * client with its own thread, dlock's background thread: do not block
 * there, move the work to your executor. A failure to start (a bad owner,
 * no memory) resumes at once, on the awaiting thread, without suspending.
 * The resumed coroutine may start other operations and destroy the
 * dlock::rlock it awaited (the handle lives until the operation's end).
 * The client must outlive its operations: keep a dlock::client alive while
 * operations of its locks may be pending, and do not let its last reference
 * (a dlock::client, or an rlock made from it) go inside a resumed coroutine:
 * the close would be refused there, and the client never closed.
 *
 * Cancellation: async_op::cancel(), or a std::stop_token (where the
 * standard library has it) passed to acquire_async(),
 * acquire_permit_async() or wait_async() whose stop is requested, ends an
 * acquisition or a wait early with errc::canceled, after what it took on
 * the server was given back (a release, a count down, a set or a removal
 * is never canceled: it finishes). For a client with its own
 * thread, from any thread; for a client on your loop, from the loop's thread
 * only (as every call on it). A suspended coroutine may be destroyed on the
 * thread that would resume it (for a client on your loop: yours, outside
 * dlock_loop_run): its operation is canceled and the callback, when it comes,
 * resumes nothing. Destroying it from another thread races with its
 * resumption: cancel it, and let it resume, instead.
 */
#ifndef DLOCK_CPP_ASYNC_HPP
#define DLOCK_CPP_ASYNC_HPP

#include "error.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <system_error>

#if __cplusplus >= 202002L && __has_include(<coroutine>)
#define DLOCK_HPP_COROUTINES 1
#include <coroutine>
#include <mutex>
#include <optional>
#include <utility>
#include <version>
#if defined(__cpp_lib_jthread) && __has_include(<stop_token>)
#define DLOCK_HPP_STOP_TOKEN 1
#include <stop_token>
#endif
#endif

namespace dlock {

#ifdef DLOCK_HPP_COROUTINES

/** How an asynchronous operation ended: its dlock_result (dlock/async.h). */
struct async_result {
	/** Clear: acquired (released). Else in dlock::category(): errc::not_acquired
	 *  (another owner held it all the wait), errc::canceled, ... */
	std::error_code code;
	/** The library's line naming the node and the cause; "" on success. */
	std::string message;
	/** Acquired: how long the hold is certain to last; otherwise -1 ms. */
	std::chrono::milliseconds validity{-1};
	/** Acquired a fenced lock: its token; otherwise 0. */
	std::int64_t token = 0;
	/** Not acquired because another owner holds it: its TTL; otherwise -1 ms. */
	std::chrono::milliseconds holder_ttl{-1};
	/** Took an expirable semaphore's permit: its id (32 hex digits); else "". */
	std::string permit;
	/** The result's value; a latch's operation: what it answered -
	 *  try_set_count 1 set / 0 it existed, count_down the count left,
	 *  count the count, remove 1 removed / 0 none; otherwise 0. */
	std::int64_t value = 0;

	/** Acquired (released, done). */
	explicit operator bool() const noexcept { return !code; }
};

namespace detail {

/* What an async_op shares with its operation's callback, which may come
 * after the async_op is gone (its coroutine destroyed while suspended). The
 * mutex orders the callback, cancel() from another thread and the
 * async_op's end; freed by the last of the async_op and the callback. */
struct op_state {
	std::mutex mu;
	dlock_op *op = nullptr;         /* started, its callback not come yet */
	std::coroutine_handle<> waiter; /* to resume; empty once resumed or detached */
	bool cancel_asked = false;
	std::atomic<int> refs{1};
	int code = 0;
	std::string message;
	std::int64_t validity = -1, token = 0, holder_ttl = -1, value = 0;
	std::string permit;

	void unref() noexcept
	{
		if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
			delete this;
	}

	void cancel() noexcept
	{
		std::lock_guard<std::mutex> g(mu);
		cancel_asked = true;
		if (op != nullptr)
			dlock_op_cancel(op);
	}

	/* The operation's callback: keep the outcome, resume the coroutine if
	 * it is still there; drops the reference kept in `op`. */
	static void done(dlock_op *op, const dlock_result *r, void *userdata) noexcept
	{
		auto *s = static_cast<op_state *>(userdata);
		std::coroutine_handle<> h;
		{
			std::lock_guard<std::mutex> g(s->mu);
			s->op = nullptr;
			s->code = r->code;
			s->validity = r->validity_ms;
			s->token = r->token;
			s->holder_ttl = r->holder_ttl_ms;
			s->value = r->value;
			try {
				s->message = r->message != nullptr ? r->message : "";
				s->permit = r->permit_id != nullptr ? r->permit_id : "";
			} catch (const std::bad_alloc &) {
				/* no line: dlock::error says the code's description */
			}
			h = std::exchange(s->waiter, nullptr);
		}
		dlock_op_free(op); /* the reference start() kept in s->op */
		s->unref();
		if (h)
			h.resume();
	}
};

template <class Self> class awaitable;
template <class H, void (*Close)(H *)> class handle;

/* What one operation is given: an owner (a lock's) or a permit id, a wait,
 * a lease and a number of permits, as its C call takes them. */
struct async_args {
	std::string text;
	std::int64_t wait = 0, lease = 0, count = 0;
};

/* One kind of operation an async_op runs (dlock/async.h and the kinds'
 * headers): its C call, what its own lines call the handle ("lock NAME",
 * "redlock"), and the code that is an
 * answer rather than a failure (errc::not_acquired for an acquisition,
 * errc::timed_out for a latch's wait; 0 for none). */
struct async_call {
	int (*start)(dlock_op **out, void *h, const async_args &a, dlock_op_cb cb, void *userdata);
	std::string (*subject)(const void *h);
	int answer;
};

inline async_args make_args(std::string text, std::int64_t wait, std::int64_t lease,
		std::int64_t count) noexcept
{
	async_args a;
	a.text = std::move(text);
	a.wait = wait;
	a.lease = lease;
	a.count = count;
	return a;
}

/* A lock's two operations, for awaitable<Self>. */
struct async_calls {
	async_call acquire, release;
};

} // namespace detail

/**
 * One asynchronous operation of an rlock, a multilock, a redlock, a
 * semaphore or a latch, for co_await once; it starts when awaited. Neither copied nor moved: await it
 * where it was made.
 */
class async_op {
public:
	async_op(const async_op &) = delete;
	async_op &operator=(const async_op &) = delete;

	/* Destroyed while its coroutine is suspended on it: the operation is
	 * canceled and its callback resumes nothing (see the top of the file). */
	~async_op()
	{
#ifdef DLOCK_HPP_STOP_TOKEN
		on_stop_.reset(); /* waits for a cancel running on another thread */
#endif
		if (s_ == nullptr)
			return;
		{
			std::lock_guard<std::mutex> g(s_->mu);
			if (s_->waiter) {
				s_->waiter = nullptr;
				if (s_->op != nullptr)
					dlock_op_cancel(s_->op);
			}
		}
		s_->unref();
	}

	/** End an acquisition early: it then ends with errc::canceled (before it
	 *  was awaited: at once). Threads: see the top of the file. */
	void cancel() noexcept
	{
		if (s_ != nullptr)
			s_->cancel();
	}

	bool await_ready() const noexcept { return false; }

	/* Start the operation; false (resume now) when it could not start. */
	bool await_suspend(std::coroutine_handle<> h) noexcept
	{
		if (awaited_ || s_ == nullptr)
			return fail(awaited_ ? DLOCK_EINVAL : DLOCK_ENOMEM);
		awaited_ = true;
#ifdef DLOCK_HPP_STOP_TOKEN
		if (stop_.stop_possible()) /* runs at once if the stop was requested */
			on_stop_.emplace(stop_, canceler{s_});
#endif
		std::lock_guard<std::mutex> g(s_->mu);
		if (s_->cancel_asked) {
			s_->code = DLOCK_ECANCELED;
			note_line(s_->message, "canceled before it started");
			return false;
		}
		s_->waiter = h;
		s_->refs.fetch_add(1, std::memory_order_relaxed); /* the callback's */
		int rc = call_->start(&s_->op, handle_, args_, &detail::op_state::done, s_);
		if (rc == 0)
			return true; /* the callback waits for the mutex: nothing is touched after */
		s_->waiter = nullptr;
		s_->refs.fetch_sub(1, std::memory_order_relaxed);
		s_->code = rc;
		note_line(s_->message, nullptr);
		return false;
	}

	/* The outcome; throws dlock::error in the throwing form (see the top). */
	async_result await_resume()
	{
		async_result r;
		int code = failed_;
		if (code == 0) {
			code = s_->code;
			r.message = std::move(s_->message);
			r.validity = std::chrono::milliseconds(s_->validity);
			r.token = s_->token;
			r.holder_ttl = std::chrono::milliseconds(s_->holder_ttl);
			r.permit = std::move(s_->permit);
			r.value = s_->value;
		} else {
			note_line(r.message, code == DLOCK_EINVAL ? "awaited twice" : "out of memory");
		}
		if (code != 0)
			r.code.assign(code, category());
		else if (r.token != 0 && token_ != nullptr)
			token_->store(r.token);
		int err = code == call_->answer ? 0 : code;
		if (ec_ != nullptr)
			detail::set_code(*ec_, err);
		else if (err != 0)
			throw error(err, r.message);
		return r;
	}

private:
	template <class> friend class detail::awaitable;
	template <class H, void (*Close)(H *)> friend class detail::handle;

	/* token: where an acquisition's token goes; it keeps the handle alive
	 * (a handle without tokens: an alias of its state that points nowhere). */
	async_op(const detail::async_call &call, void *handle, detail::async_args args,
			std::shared_ptr<std::atomic<std::int64_t>> token, std::error_code *ec) noexcept
		: s_(new (std::nothrow) detail::op_state), call_(&call), handle_(handle),
		  token_(std::move(token)), args_(std::move(args)), ec_(ec)
	{
	}
#ifdef DLOCK_HPP_STOP_TOKEN
	async_op(const detail::async_call &call, void *handle, detail::async_args args,
			std::shared_ptr<std::atomic<std::int64_t>> token, std::error_code *ec,
			std::stop_token stop) noexcept
		: async_op(call, handle, std::move(args), std::move(token), ec)
	{
		stop_ = std::move(stop);
	}
#endif

	bool fail(int code) noexcept
	{
		failed_ = code;
		return false;
	}

	/* A start that failed: the library's line; or this header's own about
	 * the handle, "lock NAME: what". */
	void note_line(std::string &line, const char *what) const noexcept
	{
		try {
			line = what == nullptr ? last_error_message()
					: call_->subject(handle_) + ": " + what;
		} catch (const std::bad_alloc &) {
		}
	}

#ifdef DLOCK_HPP_STOP_TOKEN
	struct canceler {
		detail::op_state *s;
		void operator()() const noexcept { s->cancel(); }
	};
	std::stop_token stop_;
	std::optional<std::stop_callback<canceler>> on_stop_;
#endif
	detail::op_state *s_;
	const detail::async_call *call_;
	void *handle_;
	std::shared_ptr<std::atomic<std::int64_t>> token_; /* the handle's: keeps it */
	detail::async_args args_;
	std::error_code *ec_;
	int failed_ = 0;
	bool awaited_ = false;
};

#endif

namespace detail {

#ifdef DLOCK_HPP_COROUTINES
/*
 * co_await on a handle's operations (see the top of the file): the
 * acquire_async() and release_async() of an rlock, a multilock and a
 * redlock. Self gives native(), lease(), token_ref() and its calls().
 */
template <class Self> class awaitable {
public:
	/** co_await: acquire for `owner`, waiting up to `wait` (as try_lock_for),
	 *  with the lease of set_lease() or `lease`; see the top of the file. */
	template <class Rep, class Period>
	async_op acquire_async(std::string owner, const std::chrono::duration<Rep, Period> &wait) noexcept
	{
		return op(true, std::move(owner), detail::wait_ms(wait), held_lease(), nullptr);
	}
	template <class Rep, class Period>
	async_op acquire_async(std::string owner, const std::chrono::duration<Rep, Period> &wait,
			std::chrono::milliseconds lease) noexcept
	{
		return op(true, std::move(owner), detail::wait_ms(wait), lease, nullptr);
	}
	template <class Rep, class Period>
	async_op acquire_async(std::string owner, const std::chrono::duration<Rep, Period> &wait,
			std::error_code &ec) noexcept
	{
		return op(true, std::move(owner), detail::wait_ms(wait), held_lease(), &ec);
	}
	template <class Rep, class Period>
	async_op acquire_async(std::string owner, const std::chrono::duration<Rep, Period> &wait,
			std::chrono::milliseconds lease, std::error_code &ec) noexcept
	{
		return op(true, std::move(owner), detail::wait_ms(wait), lease, &ec);
	}
#ifdef DLOCK_HPP_STOP_TOKEN
	/** As above; a stop requested on `stop` cancels the acquisition. */
	template <class Rep, class Period>
	async_op acquire_async(std::string owner, const std::chrono::duration<Rep, Period> &wait,
			std::chrono::milliseconds lease, std::stop_token stop) noexcept
	{
		return op(true, std::move(owner), detail::wait_ms(wait), lease, nullptr, std::move(stop));
	}
	template <class Rep, class Period>
	async_op acquire_async(std::string owner, const std::chrono::duration<Rep, Period> &wait,
			std::chrono::milliseconds lease, std::stop_token stop, std::error_code &ec) noexcept
	{
		return op(true, std::move(owner), detail::wait_ms(wait), lease, &ec, std::move(stop));
	}
#endif
	/** co_await: release one hold of `owner`; see the top of the file. */
	async_op release_async(std::string owner) noexcept
	{
		return op(false, std::move(owner), 0, held_lease(), nullptr);
	}
	async_op release_async(std::string owner, std::error_code &ec) noexcept
	{
		return op(false, std::move(owner), 0, held_lease(), &ec);
	}

private:
	async_op op(bool acquire, std::string owner, std::int64_t wait, std::chrono::milliseconds lease,
			std::error_code *ec) noexcept
	{
		const Self &me = static_cast<const Self &>(*this);
		return async_op(acquire ? Self::calls().acquire : Self::calls().release, me.native(),
				make_args(std::move(owner), wait, lease.count(), 0), me.token_ref(), ec);
	}
#ifdef DLOCK_HPP_STOP_TOKEN
	async_op op(bool acquire, std::string owner, std::int64_t wait, std::chrono::milliseconds lease,
			std::error_code *ec, std::stop_token stop) noexcept
	{
		const Self &me = static_cast<const Self &>(*this);
		return async_op(acquire ? Self::calls().acquire : Self::calls().release, me.native(),
				make_args(std::move(owner), wait, lease.count(), 0), me.token_ref(), ec, std::move(stop));
	}
#endif
	std::chrono::milliseconds held_lease() const noexcept
	{
		return static_cast<const Self &>(*this).lease();
	}
};
#else
template <class Self> class awaitable {};
#endif

} // namespace detail

} // namespace dlock

#endif
