/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock.hpp - C++17 classes over the C API of <dlock.h>, header-only.
 *
 *   dlock::client     a client on one server (RAII over dlock_client)
 *   dlock::rlock      an RLock, fair lock or fenced lock (dlock_lock); not
 *                     "lock": a class cannot have a member lock() of its name
 *   dlock::multilock  several locks held as one (dlock_multilock)
 *   dlock::redlock    one lock on a quorum of servers (dlock_redlock)
 *
 * The three locks meet the standard Lockable and TimedLockable
 * requirements, so std::lock_guard, std::unique_lock, std::scoped_lock (and
 * std::lock's try-and-back-off over several) and try_lock_for(100ms) work.
 * As with std::timed_mutex, the owner is the calling thread: the thread
 * that locked must unlock. try_lock*() return false only when another
 * owner holds the lock when the wait ends; every other failure is an error.
 *
 * Errors. Each operation that can fail has two forms. The first throws
 * dlock::error, a std::system_error whose code() is in dlock::category()
 * (compare with dlock::errc) and whose what() is the library's one line
 * naming the node and the cause. The second takes a std::error_code& as its
 * last argument, is noexcept, and sets it (cleared on success); the line is
 * then dlock::last_error_message(), until the thread's next dlock call.
 *
 * unlock() throws when the release fails (DLOCK_ELOST: the critical
 * section may have outlived the lock). std::lock_guard and std::unique_lock
 * call unlock() from their destructors, where a throw ends the program, so
 * unlock() drops its error while an exception is unwinding the stack; where
 * a failed release must not end the program, release explicitly with
 * unlock(ec). The destructors of these classes never throw: they free the
 * handle and drop any error, as the C functions they call (a lock still held
 * then expires on the server, see dlock/lock.h).
 *
 * Lifetimes: a lock keeps its client's connection open, and a multilock or
 * redlock keeps its member locks' handles, for as long as it lives; the C++
 * objects themselves may go in any order. Objects are movable, not
 * copyable; a moved-from object may only be destroyed or assigned to.
 * Threads: as the C handles (dlock.h); set_lease() before sharing a lock.
 *
 * C++20 (when <coroutine> is there; DLOCK_HPP_COROUTINES is then 1): the
 * acquire_async() and release_async() of an rlock, a multilock and a
 * redlock return a dlock::async_op for co_await, over dlock/async.h, for a
 * named owner (client::owner(), multilock::owner(), redlock::owner()):
 *
 *   dlock::async_result r = co_await lock.acquire_async(owner, 5s, 30s);
 *   if (r) { ... co_await lock.release_async(owner); }
 *
 * The operation starts when awaited. co_await gives a dlock::async_result
 * (code, message, validity, token, holder_ttl): false, with
 * errc::not_acquired and the holder's TTL, when another owner held the lock
 * all the wait (as try_lock_for); every other failure, errc::canceled
 * included, throws dlock::error - or, in the form with a std::error_code&
 * last, sets it (not for errc::not_acquired, as try_lock_for(d, ec)) and the
 * result's code and message, the line then not in last_error_message().
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
 * standard library has it) passed to acquire_async() whose stop is
 * requested, ends an acquisition early with errc::canceled, after what it
 * took on the server was given back (a release is never canceled: it
 * finishes). For a client with its own
 * thread, from any thread; for a client on your loop, from the loop's thread
 * only (as every call on it). A suspended coroutine may be destroyed on the
 * thread that would resume it (for a client on your loop: yours, outside
 * dlock_loop_run): its operation is canceled and the callback, when it comes,
 * resumes nothing. Destroying it from another thread races with its
 * resumption: cancel it, and let it resume, instead.
 */
#ifndef DLOCK_HPP
#define DLOCK_HPP

#include <dlock.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

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

/** The DLOCK_E* codes as an enum, for comparing with an error's code(). */
enum class errc : int {
	invalid_argument = DLOCK_EINVAL,
	out_of_memory = DLOCK_ENOMEM,
	connection = DLOCK_ECONN,
	timed_out = DLOCK_ETIMEDOUT,
	auth = DLOCK_EAUTH,
	server = DLOCK_ESERVER,
	wrong_type = DLOCK_EWRONGTYPE,
	protocol = DLOCK_EPROTO,
	not_acquired = DLOCK_ENOTACQUIRED,
	not_owner = DLOCK_ENOTOWNER,
	lost = DLOCK_ELOST,
	no_quorum = DLOCK_ENOQUORUM,
	expired = DLOCK_EEXPIRED,
	system = DLOCK_ESYS,
	canceled = DLOCK_ECANCELED,
	forked = DLOCK_EFORKED,
	busy = DLOCK_EBUSY,
	no_sync = DLOCK_ENOSYNC,
	duplicate = DLOCK_EDUPLICATE
};

namespace detail {

class category_impl final : public std::error_category {
public:
	const char *name() const noexcept override { return "dlock"; }
	std::string message(int ev) const override { return dlock_strerror(ev); }
	/* The codes the standard names too, so `ec == std::errc::timed_out` holds. */
	std::error_condition default_error_condition(int ev) const noexcept override
	{
		switch (ev) {
		case DLOCK_EINVAL: return std::errc::invalid_argument;
		case DLOCK_ENOMEM: return std::errc::not_enough_memory;
		case DLOCK_ETIMEDOUT: return std::errc::timed_out;
		case DLOCK_ECANCELED: return std::errc::operation_canceled;
		case DLOCK_EBUSY: return std::errc::device_or_resource_busy;
		default: return std::error_condition(ev, *this);
		}
	}
};

} // namespace detail

/** The category of dlock's codes: message() is dlock_strerror(). */
inline const std::error_category &category() noexcept
{
	static const detail::category_impl instance;
	return instance;
}

inline std::error_code make_error_code(errc e) noexcept
{
	return std::error_code(static_cast<int>(e), category());
}

/** The calling thread's last failure line (dlock_errmsg_last()), copied. */
inline std::string last_error_message()
{
	char buf[256];
	std::size_t n = dlock_errmsg_last_r(buf, sizeof buf);
	if (n < sizeof buf)
		return std::string(buf, n);
	std::string line(n + 1, '\0');
	dlock_errmsg_last_r(&line[0], line.size());
	line.resize(n);
	return line;
}

/**
 * A failed dlock call: code() is the DLOCK_E* code in dlock::category(),
 * what() the library's one line for it (the code's description when the
 * library gave none).
 */
class error : public std::system_error {
public:
	error(int code, const std::string &line)
		: std::system_error(code, category(), line),
		  line_(line.empty() ? std::string(dlock_strerror(code)) : line)
	{
	}
	const char *what() const noexcept override { return line_.what(); }

private:
	std::runtime_error line_; /* a copy that cannot throw, as exceptions need */
};

} // namespace dlock

namespace std {
template <> struct is_error_code_enum<dlock::errc> : true_type {
};
} // namespace std

namespace dlock {

namespace detail {

[[noreturn]] inline void throw_error(int rc)
{
	throw error(rc, last_error_message());
}

inline void set_code(std::error_code &ec, int rc) noexcept
{
	if (rc == 0)
		ec.clear();
	else
		ec.assign(rc, category());
}

/* A wait in whole milliseconds, rounded up so a wait is never shorter than
 * asked; none for a negative one, and no limit past ~285,000 years. */
template <class Rep, class Period>
std::int64_t wait_ms(const std::chrono::duration<Rep, Period> &d) noexcept
{
	if (d <= d.zero())
		return 0;
	if (std::chrono::duration<double, std::milli>(d).count() >= 9e15)
		return DLOCK_WAIT_FOREVER;
	return std::chrono::ceil<std::chrono::milliseconds>(d).count();
}

/*
 * The Lockable/TimedLockable surface, written once over two steps each lock
 * class provides: int acquire(int64_t wait_ms) noexcept (0, or a DLOCK_E*
 * code; DLOCK_WAIT_FOREVER for no limit) and int release() noexcept.
 */
template <class Self> class timed_lockable {
public:
	/** Block until the calling thread holds the lock. */
	void lock() { check(self().acquire(DLOCK_WAIT_FOREVER)); }
	void lock(std::error_code &ec) noexcept { set_code(ec, self().acquire(DLOCK_WAIT_FOREVER)); }

	/** One attempt: false when another owner holds it. */
	bool try_lock() { return acquired(self().acquire(0)); }
	bool try_lock(std::error_code &ec) noexcept { return acquired(self().acquire(0), ec); }

	/** Wait up to `d`: false when another owner still holds it then. */
	template <class Rep, class Period>
	bool try_lock_for(const std::chrono::duration<Rep, Period> &d)
	{
		return acquired(self().acquire(wait_ms(d)));
	}
	template <class Rep, class Period>
	bool try_lock_for(const std::chrono::duration<Rep, Period> &d, std::error_code &ec) noexcept
	{
		return acquired(self().acquire(wait_ms(d)), ec);
	}

	/** Wait until `t` on its own clock (which may be adjusted meanwhile). */
	template <class Clock, class Duration>
	bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t)
	{
		return acquired(acquire_until(t));
	}
	template <class Clock, class Duration>
	bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t,
			std::error_code &ec) noexcept
	{
		return acquired(acquire_until(t), ec);
	}

	/** Release one hold; throws unless an exception is unwinding (see the top). */
	void unlock()
	{
		int rc = self().release();
		if (rc != 0 && std::uncaught_exceptions() == 0)
			throw_error(rc);
	}
	void unlock(std::error_code &ec) noexcept { set_code(ec, self().release()); }

	/** The lease of later acquisitions: dlock::watchdog (default) or > 0. */
	void set_lease(std::chrono::milliseconds lease) noexcept { lease_ = lease; }
	std::chrono::milliseconds lease() const noexcept { return lease_; }

	/** How long the hold is certain to last (no traffic); each class also
	 *  has validity(std::error_code &), which this one throws from. */
	std::chrono::milliseconds validity() const
	{
		std::error_code ec;
		auto ms = static_cast<const Self &>(*this).validity(ec);
		if (ec)
			throw_error(ec.value());
		return ms;
	}

protected:
	timed_lockable() = default;

private:
	std::chrono::milliseconds lease_{DLOCK_LEASE_WATCHDOG};

	Self &self() noexcept { return static_cast<Self &>(*this); }

	static void check(int rc)
	{
		if (rc != 0)
			throw_error(rc);
	}
	static bool acquired(int rc)
	{
		if (rc == DLOCK_ENOTACQUIRED)
			return false;
		check(rc);
		return true;
	}
	static bool acquired(int rc, std::error_code &ec) noexcept
	{
		set_code(ec, rc == DLOCK_ENOTACQUIRED ? 0 : rc);
		return rc == 0;
	}

	/* A clock other than the library's may jump: wait again while it says
	 * the time has not come. */
	template <class Clock, class Duration>
	int acquire_until(const std::chrono::time_point<Clock, Duration> &t) noexcept
	{
		for (;;) {
			int rc = self().acquire(wait_ms(t - Clock::now()));
			if (rc != DLOCK_ENOTACQUIRED || Clock::now() >= t)
				return rc;
		}
	}
};

} // namespace detail

/** A lease meaning "no lease": the client's watchdog renews the hold. */
inline constexpr std::chrono::milliseconds watchdog{DLOCK_LEASE_WATCHDOG};

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

	/** Acquired (released). */
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
	std::int64_t validity = -1, token = 0, holder_ttl = -1;

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
	 * it is still there. The op is freed when this returns. */
	static void done(dlock_op *, const dlock_result *r, void *userdata) noexcept
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
			try {
				s->message = r->message != nullptr ? r->message : "";
			} catch (const std::bad_alloc &) {
				/* no line: dlock::error says the code's description */
			}
			h = std::exchange(s->waiter, nullptr);
		}
		s->unref();
		if (h)
			h.resume();
	}
};

template <class Self> class awaitable;

/* The C calls an async_op runs, for each kind of handle (dlock/async.h),
 * and what its own lines call the handle ("lock NAME", "redlock"). */
struct async_calls {
	int (*acquire)(dlock_op **out, void *h, const char *owner, std::int64_t wait_ms,
			std::int64_t lease_ms, dlock_op_cb cb, void *userdata);
	int (*release)(dlock_op **out, void *h, const char *owner, dlock_op_cb cb, void *userdata);
	std::string (*subject)(const void *h);
};

inline const async_calls lock_calls = {
	[](dlock_op **out, void *h, const char *owner, std::int64_t wait, std::int64_t lease,
			dlock_op_cb cb, void *ud) {
		return dlock_lock_acquire_async(out, static_cast<dlock_lock *>(h), owner, wait, lease,
				cb, ud);
	},
	[](dlock_op **out, void *h, const char *owner, dlock_op_cb cb, void *ud) {
		return dlock_lock_release_async(out, static_cast<dlock_lock *>(h), owner, cb, ud);
	},
	[](const void *h) {
		return std::string("lock ") + dlock_lock_name(static_cast<const dlock_lock *>(h));
	},
};

inline const async_calls multilock_calls = {
	[](dlock_op **out, void *h, const char *owner, std::int64_t wait, std::int64_t lease,
			dlock_op_cb cb, void *ud) {
		return dlock_multilock_acquire_async(out, static_cast<dlock_multilock *>(h), owner,
				wait, lease, cb, ud);
	},
	[](dlock_op **out, void *h, const char *owner, dlock_op_cb cb, void *ud) {
		return dlock_multilock_release_async(out, static_cast<dlock_multilock *>(h), owner, cb,
				ud);
	},
	[](const void *) { return std::string("multilock"); },
};

inline const async_calls redlock_calls = {
	[](dlock_op **out, void *h, const char *owner, std::int64_t wait, std::int64_t lease,
			dlock_op_cb cb, void *ud) {
		return dlock_redlock_acquire_async(out, static_cast<dlock_redlock *>(h), owner, wait,
				lease, cb, ud);
	},
	[](dlock_op **out, void *h, const char *owner, dlock_op_cb cb, void *ud) {
		return dlock_redlock_release_async(out, static_cast<dlock_redlock *>(h), owner, cb, ud);
	},
	[](const void *) { return std::string("redlock"); },
};

} // namespace detail

/**
 * One asynchronous operation of an rlock, a multilock or a redlock, for
 * co_await once; it starts when awaited. Neither copied nor moved: await it
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
		int rc = acquire_
				? calls_->acquire(&s_->op, handle_, owner_.c_str(), wait_, lease_,
						  &detail::op_state::done, s_)
				: calls_->release(&s_->op, handle_, owner_.c_str(),
						  &detail::op_state::done, s_);
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
		} else {
			note_line(r.message, code == DLOCK_EINVAL ? "awaited twice" : "out of memory");
		}
		if (code != 0)
			r.code.assign(code, category());
		else if (r.token != 0 && token_ != nullptr)
			token_->store(r.token);
		int err = acquire_ && code == DLOCK_ENOTACQUIRED ? 0 : code;
		if (ec_ != nullptr)
			detail::set_code(*ec_, err);
		else if (err != 0)
			throw error(err, r.message);
		return r;
	}

private:
	template <class> friend class detail::awaitable;

	/* token: where an acquisition's token goes; it keeps the handle alive. */
	async_op(const detail::async_calls &calls, void *handle, bool acquire,
			std::shared_ptr<std::atomic<std::int64_t>> token, std::string owner,
			std::int64_t wait, std::int64_t lease, std::error_code *ec) noexcept
		: s_(new (std::nothrow) detail::op_state), calls_(&calls), handle_(handle),
		  token_(std::move(token)), owner_(std::move(owner)), wait_(wait), lease_(lease),
		  ec_(ec), acquire_(acquire)
	{
	}
#ifdef DLOCK_HPP_STOP_TOKEN
	async_op(const detail::async_calls &calls, void *handle, bool acquire,
			std::shared_ptr<std::atomic<std::int64_t>> token, std::string owner,
			std::int64_t wait, std::int64_t lease, std::error_code *ec,
			std::stop_token stop) noexcept
		: async_op(calls, handle, acquire, std::move(token), std::move(owner), wait, lease, ec)
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
					: calls_->subject(handle_) + ": " + what;
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
	const detail::async_calls *calls_;
	void *handle_;
	std::shared_ptr<std::atomic<std::int64_t>> token_; /* the handle's: keeps it */
	std::string owner_;
	std::int64_t wait_, lease_;
	std::error_code *ec_;
	int failed_ = 0;
	bool acquire_;
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
		return async_op(Self::calls(), me.native(), acquire, me.token_ref(), std::move(owner),
				wait, lease.count(), ec);
	}
#ifdef DLOCK_HPP_STOP_TOKEN
	async_op op(bool acquire, std::string owner, std::int64_t wait, std::chrono::milliseconds lease,
			std::error_code *ec, std::stop_token stop) noexcept
	{
		const Self &me = static_cast<const Self &>(*this);
		return async_op(Self::calls(), me.native(), acquire, me.token_ref(), std::move(owner),
				wait, lease.count(), ec, std::move(stop));
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

/** A client on one server: a URI (see dlock_client_open) and options. */
class client {
public:
	/** Open a client; `opts` (NULL: defaults) is copied. Throws dlock::error. */
	explicit client(const std::string &uri, const dlock_client_options *opts = nullptr)
	{
		int rc = open(uri, opts);
		if (rc != 0)
			detail::throw_error(rc);
	}
	/** As above; on failure ec is set and the client is empty (false). */
	client(const std::string &uri, const dlock_client_options *opts, std::error_code &ec) noexcept
	{
		detail::set_code(ec, open(uri, opts));
	}

	client(client &&) noexcept = default;
	client &operator=(client &&) noexcept = default;
	client(const client &) = delete;
	client &operator=(const client &) = delete;
	/* Closes the client once no lock made from it is left. */
	~client() = default;

	explicit operator bool() const noexcept { return static_cast<bool>(h_); }
	dlock_client *native() const noexcept { return h_.get(); }
	/** The client's UUID, and the "host:port" its messages name. */
	const char *id() const noexcept { return h_ ? dlock_client_id(h_.get()) : ""; }
	const char *node() const noexcept { return h_ ? dlock_client_node(h_.get()) : ""; }

	/** An owner name for the calls that take one (acquire_async()):
	 *  Redisson's `<client uuid>:<id>`. Throws dlock::error (empty client). */
	std::string owner(std::uint64_t id) const
	{
		char buf[128];
		int n = dlock_client_owner(buf, sizeof buf, native(), id);
		if (n < 0)
			detail::throw_error(n);
		return std::string(buf, static_cast<std::size_t>(n));
	}

	/** PING the server. */
	void ping()
	{
		int rc = dlock_client_ping(native());
		if (rc != 0)
			detail::throw_error(rc);
	}
	void ping(std::error_code &ec) noexcept { detail::set_code(ec, dlock_client_ping(native())); }

	/** End every wait in progress on this client with errc::canceled. */
	void cancel_waits() noexcept { dlock_client_cancel_waits(native()); }

private:
	friend class rlock;

	int open(const std::string &uri, const dlock_client_options *opts) noexcept
	{
		try {
			dlock_client *c = nullptr;
			int rc = dlock_client_open(&c, uri.c_str(), opts);
			if (rc == 0)
				h_.reset(c, [](dlock_client *p) { dlock_client_close(p); });
			return rc;
		} catch (const std::bad_alloc &) {
			return DLOCK_ENOMEM;
		}
	}

	std::shared_ptr<dlock_client> h_;
};

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
		detail::set_code(ec, dlock_lock_validity(&ms, native(), nullptr));
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
			return dlock_lock_try(native(), wait, lease);
		std::int64_t t = 0;
		int rc = dlock_lock_try_fenced(&t, native(), nullptr, wait, lease);
		if (rc == 0)
			s_->token.store(t);
		return rc;
	}

	int release() noexcept { return dlock_lock_unlock(native()); }

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
		detail::set_code(ec, dlock_multilock_validity(&ms, native(), nullptr));
		return std::chrono::milliseconds(ms);
	}

	/** The token of the latest acquisition (fenced members; else 0). */
	std::int64_t token() const noexcept { return s_ ? s_->token.load() : 0; }

	/** An owner for acquire_async(), named after the first member's client
	 *  (dlock_multilock_owner). Throws dlock::error. */
	std::string owner(std::uint64_t id) const
	{
		char buf[128];
		int n = dlock_multilock_owner(buf, sizeof buf, native(), id);
		if (n < 0)
			detail::throw_error(n);
		return std::string(buf, static_cast<std::size_t>(n));
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
			int rc = dlock_multilock_new(&st->h, handles.data(), handles.size());
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
			return dlock_multilock_try(native(), wait, lease);
		std::int64_t t = 0;
		int rc = dlock_multilock_try_fenced(&t, native(), nullptr, wait, lease);
		if (rc == 0)
			s_->token.store(t);
		return rc;
	}

	int release() noexcept { return dlock_multilock_unlock(native()); }

	std::shared_ptr<state> s_;
	bool fenced_ = false;
};

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
		detail::set_code(ec, dlock_redlock_validity(&ms, native(), nullptr));
		return std::chrono::milliseconds(ms);
	}

	/** The token of the latest acquisition (fenced members; else 0). */
	std::int64_t token() const noexcept { return s_ ? s_->token.load() : 0; }

	/** An owner for acquire_async(), named after the first member's client
	 *  (dlock_redlock_owner). Throws dlock::error. */
	std::string owner(std::uint64_t id) const
	{
		char buf[128];
		int n = dlock_redlock_owner(buf, sizeof buf, native(), id);
		if (n < 0)
			detail::throw_error(n);
		return std::string(buf, static_cast<std::size_t>(n));
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
			return dlock_redlock_try(nullptr, native(), wait, lease);
		std::int64_t t = 0;
		int rc = dlock_redlock_try_fenced(nullptr, &t, native(), nullptr, wait, lease);
		if (rc == 0)
			s_->token.store(t);
		return rc;
	}

	int release() noexcept { return dlock_redlock_unlock(native()); }

	std::shared_ptr<state> s_;
	bool fenced_ = false;
};

} // namespace dlock

#endif
