/* SPDX-License-Identifier: BSD-3-Clause */
// The C++20 part of <dlock.hpp>: co_await on an rlock's acquire_async() and
// release_async(), and on a semaphore's and a latch's operations, against a
// real redis-server. Most tests open their client
// on a loop the test drives (dlock_loop_new with no hooks: the epoll backend,
// run by dlock_loop_run on the test's thread), so coroutines resume on the
// test's thread, inside dlock_loop_run; the last one uses a client with its
// own thread, where they resume on dlock's thread.
//
// The coroutines here are of a minimal task type: started at once, their
// frame kept until the task is destroyed. Coroutines on dlock's thread never
// call cr_assert (Criterion's assertions belong to the test's main thread).
#include <criterion/criterion.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <exception>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <dlock.hpp>

#include "redis_harness.h"

using namespace std::chrono_literals;

namespace
{

rh_server *srv;

void start_server()
{
	srv = rh_server_start(nullptr);
	cr_assert(srv != nullptr, "redis-server did not start");
}

void stop_server()
{
	rh_server_free(srv);
	srv = nullptr;
}

// A coroutine that starts at once and keeps its frame (and its exception)
// until the task is destroyed.
struct task {
	struct promise_type {
		// Set once suspended at the end: the frame is no longer touched
		// by the thread that ran it, and the task may be destroyed.
		std::atomic<bool> done{false};
		std::exception_ptr error;

		struct at_end {
			bool await_ready() const noexcept { return false; }
			void await_suspend(std::coroutine_handle<promise_type> h) noexcept
			{
				h.promise().done.store(true, std::memory_order_release);
			}
			void await_resume() const noexcept {}
		};

		task get_return_object() { return task(std::coroutine_handle<promise_type>::from_promise(*this)); }
		std::suspend_never initial_suspend() noexcept { return {}; }
		at_end final_suspend() noexcept { return {}; }
		void return_void() {}
		void unhandled_exception() { error = std::current_exception(); }
	};

	explicit task(std::coroutine_handle<promise_type> h) : h_(h) {}
	task(task &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
	task(const task &) = delete;
	task &operator=(const task &) = delete;
	~task()
	{
		if (h_)
			h_.destroy();
	}

	bool done() const { return h_.promise().done.load(std::memory_order_acquire); }
	// Destroy the coroutine now, suspended or not.
	void destroy()
	{
		h_.destroy();
		h_ = nullptr;
	}
	// A task that ended by an exception: its what().
	std::string failure() const
	{
		if (!h_.promise().error)
			return "";
		try {
			std::rethrow_exception(h_.promise().error);
		} catch (const std::exception &e) {
			return e.what();
		} catch (...) {
			return "a non-standard exception";
		}
	}

private:
	std::coroutine_handle<promise_type> h_;
};

// An event a coroutine awaits and the test's thread sets (a stand-in for
// the rest of a program: "the work is done"). Awaited through a pointer:
// GCC 12 copies an awaitable captured by reference in a lambda.
struct gate {
	std::coroutine_handle<> waiter;
	bool open = false;

	struct awaiter {
		gate *g;
		bool await_ready() const noexcept { return g->open; }
		void await_suspend(std::coroutine_handle<> h) noexcept { g->waiter = h; }
		void await_resume() const noexcept {}
	};
	awaiter operator co_await() noexcept { return awaiter{this}; }

	void set()
	{
		open = true;
		if (waiter)
			std::exchange(waiter, nullptr).resume();
	}
};

// The loop the test drives, and the test's clients on it. Freed in the
// right order: clients first, then the loop, whose free must succeed (no
// client left open, no handle leaked).
struct on_loop {
	dlock_loop *loop = nullptr;
	std::optional<dlock::client> client;

	on_loop()
	{
		cr_assert_eq(dlock_loop_new(&loop, nullptr), 0, "%s", dlock_errmsg_last());
		client.emplace(open());
	}

	dlock::client open() const
	{
		dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
		o.connect_timeout_ms = 500;
		o.command_timeout_ms = 500;
		o.loop = loop;
		std::error_code ec;
		dlock::client c(rh_server_uri(srv), &o, ec);
		cr_assert(!ec, "open: %s (%s)", ec.message().c_str(), dlock::last_error_message().c_str());
		return c;
	}

	// Drive the loop until `done` holds; false at the deadline.
	bool run_until(const std::function<bool()> &done, int64_t within_ms = 5000) const
	{
		int64_t until = rh_now_ms() + within_ms;
		while (!done()) {
			if (rh_now_ms() >= until)
				return false;
			cr_assert_geq(dlock_loop_run(loop, 20), 0, "%s", dlock_errmsg_last());
		}
		return true;
	}

	void run_for(int64_t ms) const
	{
		run_until([] { return false; }, ms);
	}

	// Close the client (every lock of it is gone by now) and free the loop.
	void finish()
	{
		client.reset();
		dlock_loop_free(loop);
		loop = nullptr;
	}
};

int64_t hexists(const char *key, const std::string &field)
{
	return rh_command_int(srv, "HEXISTS %s %s", key, field.c_str());
}

int64_t exists(const char *key)
{
	return rh_command_int(srv, "EXISTS %s", key);
}

// A holder on a client of its own thread, through the blocking API.
struct holder {
	dlock::client c;
	dlock::rlock l;

	holder(const char *name, std::chrono::milliseconds lease, dlock::kind k = dlock::kind::plain)
		: c(rh_server_uri(srv)), l(c, name, k)
	{
		l.set_lease(lease);
		l.lock();
	}
	~holder()
	{
		std::error_code ec;
		l.unlock(ec);
	}
};

// Wait (on the test's thread) until `done` holds, up to 10 s.
bool wait_until(const std::function<bool()> &done)
{
	for (int64_t until = rh_now_ms() + 10000; !done(); std::this_thread::sleep_for(1ms))
		if (rh_now_ms() >= until)
			return false;
	return true;
}

// The coroutine ended without an exception.
void assert_no_exception(const task &co)
{
	std::string what = co.failure();
	cr_assert(what.empty(), "the coroutine threw: %s", what.c_str());
}

// Tests' bodies (C++ functions: GCC 12 cannot compile a coroutine lambda in
// a function of C linkage, as Criterion's tests are). Most run with a loop
// and a client on it; after they returned (their locks and coroutines gone),
// the client closes and the loop frees.
template <class F> void with_loop(F body)
{
	on_loop t;
	body(t);
	t.finish();
}

void acquire_and_release_through_co_await(on_loop &t)
{
	dlock::rlock lk(*t.client, "co-one");
	const std::string me = t.client->owner(1);
	dlock::async_result got, gone;
	int64_t key_while_held = -1;

	auto body = [&]() -> task {
		got = co_await lk.acquire_async(me, 0ms);
		key_while_held = hexists("co-one", me);
		gone = co_await lk.release_async(me);
	};
	task co = body();
	cr_assert(!co.done(), "the coroutine resumed before the loop ran (inside the call)");
	cr_assert(t.run_until([&] { return co.done(); }), "the coroutine did not finish");
	assert_no_exception(co);
	cr_assert(got, "acquire: %s", got.message.c_str());
	cr_assert(!got.code && got.message.empty());
	cr_assert(got.validity > 25s, "validity %lld ms right after a watchdog acquisition",
			static_cast<long long>(got.validity.count()));
	cr_assert_eq(got.holder_ttl.count(), -1);
	cr_assert_eq(got.token, 0, "a plain lock has no token");
	cr_assert_eq(key_while_held, 1, "the owner's field is on the server while held");
	cr_assert(gone, "release: %s", gone.message.c_str());
	cr_assert_eq(exists("co-one"), 0, "the release took the key");

	// A lease, and a fenced lock's token (also kept by the rlock).
	dlock::rlock fenced(*t.client, "co-fenced", dlock::kind::fenced);
	auto leased = [&]() -> task {
		got = co_await fenced.acquire_async(me, 1s, 5s);
		key_while_held = rh_command_int(srv, "PTTL co-fenced");
		co_await fenced.release_async(me);
	};
	task co2 = leased();
	cr_assert(t.run_until([&] { return co2.done(); }));
	assert_no_exception(co2);
	cr_assert(got && got.token > 0, "token %lld", static_cast<long long>(got.token));
	cr_assert_eq(fenced.token(), got.token, "the rlock keeps the latest token");
	cr_assert(got.validity > 4s && got.validity <= 5s, "validity %lld ms of a 5 s lease",
			static_cast<long long>(got.validity.count()));
	cr_assert(key_while_held > 4000 && key_while_held <= 5000, "PTTL %lld",
			static_cast<long long>(key_while_held));
	cr_assert_eq(exists("co-fenced"), 0);
}

void the_second_of_two_waits_until_the_first_releases(on_loop &t)
{
	dlock::rlock lk(*t.client, "co-two");
	const std::string first = t.client->owner(1), second = t.client->owner(2);
	gate work_done;
	dlock::async_result a, b;
	int64_t released_at = 0, b_acquired_at = 0, inside = 0, overlap = 0;

	auto one = [&]() -> task {
		a = co_await lk.acquire_async(first, 0ms);
		inside++;
		co_await work_done;
		inside--;
		released_at = rh_now_ms();
		co_await lk.release_async(first);
	};
	auto two = [&]() -> task {
		b = co_await lk.acquire_async(second, 10s);
		b_acquired_at = rh_now_ms();
		overlap += inside;
		co_await lk.release_async(second);
	};
	task co1 = one();
	cr_assert(t.run_until([&] { return inside == 1; }), "the first did not acquire");
	task co2 = two();
	t.run_for(300); // the second's attempt fails; it listens for the release
	cr_assert(!co2.done() && b_acquired_at == 0, "the second acquired a held lock");

	work_done.set(); // the first releases, on this thread, outside the loop
	cr_assert(t.run_until([&] { return co1.done() && co2.done(); }));
	assert_no_exception(co1);
	assert_no_exception(co2);
	cr_assert(a && b, "a: %s; b: %s", a.message.c_str(), b.message.c_str());
	cr_assert_eq(overlap, 0, "both were inside at once");
	cr_assert(b_acquired_at >= released_at && b_acquired_at - released_at < 2000,
			"the second acquired %lld ms after the release (woken by it, not a 30 s TTL)",
			static_cast<long long>(b_acquired_at - released_at));
	cr_assert_eq(exists("co-two"), 0);
}

void held_elsewhere_is_false_with_the_holders_ttl_not_an_error(on_loop &t)
{
	holder h("co-busy", 10s);
	dlock::rlock lk(*t.client, "co-busy");
	const std::string me = t.client->owner(1);
	dlock::async_result thrown_form, ec_form;
	std::error_code ec = dlock::errc::busy;

	auto body = [&]() -> task {
		thrown_form = co_await lk.acquire_async(me, 200ms);
		ec_form = co_await lk.acquire_async(me, 0ms, ec);
	};
	int64_t t0 = rh_now_ms();
	task co = body();
	cr_assert(t.run_until([&] { return co.done(); }));
	assert_no_exception(co);
	cr_assert_geq(rh_now_ms() - t0, 200, "the wait was not waited");
	for (const dlock::async_result *r : { &thrown_form, &ec_form }) {
		cr_assert(!*r && r->code == dlock::errc::not_acquired, "code %s",
				r->code.message().c_str());
		cr_assert(r->holder_ttl > 0ms && r->holder_ttl <= 10s, "holder TTL %lld ms",
				static_cast<long long>(r->holder_ttl.count()));
		cr_assert_eq(r->validity.count(), -1);
	}
	cr_assert(!ec, "held elsewhere leaves the error code clear, as try_lock_for");
	cr_assert_eq(hexists("co-busy", me), 0);
}

void errors_throw_dlock_error_or_set_the_error_code(on_loop &t)
{
	dlock::rlock lk(*t.client, "co-errors");
	const std::string me = t.client->owner(1);
	std::string thrown_line;
	dlock::errc thrown_code{};
	std::error_code ec;
	dlock::async_result ec_result, bad_owner;
	bool bad_owner_done = false;

	// Releasing what one does not hold: not_owner, thrown or set.
	auto body = [&]() -> task {
		try {
			co_await lk.release_async(me);
		} catch (const dlock::error &e) {
			thrown_code = static_cast<dlock::errc>(e.code().value());
			thrown_line = e.what();
		}
		ec_result = co_await lk.release_async(me, ec);
	};
	task co = body();
	cr_assert(t.run_until([&] { return co.done(); }));
	assert_no_exception(co);
	cr_assert(thrown_code == dlock::errc::not_owner, "thrown code %d", static_cast<int>(thrown_code));
	cr_assert(thrown_line.find("co-errors") != std::string::npos, "the line names the lock: %s",
			thrown_line.c_str());
	cr_assert(ec == dlock::errc::not_owner && ec_result.code == ec, "ec %s",
			ec.message().c_str());
	cr_assert(!ec_result.message.empty());

	// An owner the library refuses never starts: the coroutine resumes at once.
	auto refused = [&]() -> task {
		bad_owner = co_await lk.acquire_async(std::string(2000, 'o'), 0ms, ec);
		bad_owner_done = true;
	};
	task co2 = refused();
	cr_assert(bad_owner_done, "a refused start suspended the coroutine");
	cr_assert(ec == dlock::errc::invalid_argument, "ec %s", ec.message().c_str());
	cr_assert(!bad_owner.message.empty());

	// A server gone: the line names the node.
	std::string node = "127.0.0.1:" + std::to_string(rh_server_port(srv));
	cr_assert_eq(rh_server_kill(srv), 0);
	thrown_line.clear();
	auto down = [&]() -> task {
		try {
			co_await lk.acquire_async(me, 300ms);
		} catch (const dlock::error &e) {
			thrown_code = static_cast<dlock::errc>(e.code().value());
			thrown_line = e.what();
		}
	};
	task co3 = down();
	cr_assert(t.run_until([&] { return co3.done(); }));
	assert_no_exception(co3);
	cr_assert(thrown_code == dlock::errc::connection || thrown_code == dlock::errc::timed_out,
			"code %d: %s", static_cast<int>(thrown_code), thrown_line.c_str());
	cr_assert(thrown_line.find(node) != std::string::npos, "the line names %s: %s",
			node.c_str(), thrown_line.c_str());
}

void a_stop_ends_a_wait_with_canceled_and_leaves_nothing_held(on_loop &t)
{
	dlock::rlock lk(*t.client, "co-cancel"), fair(*t.client, "co-cancel-fair", dlock::kind::fair);
	const std::string me = t.client->owner(1);
	std::stop_source stop;
	std::error_code code_seen;
	int64_t fair_queue_while_waiting = -1;

	{
		holder h("co-cancel", 10s);
		auto body = [&]() -> task {
			try {
				co_await lk.acquire_async(me, 30s, dlock::watchdog, stop.get_token());
			} catch (const dlock::error &e) {
				code_seen = e.code();
			}
		};
		task co = body();
		t.run_for(300);
		cr_assert(!co.done(), "the wait ended while the lock was held");
		stop.request_stop(); // on the loop's thread, as a client on our loop asks
		cr_assert(t.run_until([&] { return co.done(); }));
		cr_assert(code_seen == dlock::errc::canceled && code_seen == std::errc::operation_canceled,
				"code %s", code_seen.message().c_str());
		cr_assert_eq(hexists("co-cancel", me), 0);
	}
	// The holder released: a canceled waiter takes nothing afterwards.
	t.run_for(300);
	cr_assert_eq(exists("co-cancel"), 0, "the canceled waiter took the lock after the release");

	// A stop requested before the await: nothing starts.
	std::error_code ec;
	dlock::async_result r1, r2;
	std::stop_source early;
	auto at_once = [&]() -> task {
		early.request_stop();
		r2 = co_await lk.acquire_async(me, 0ms, 10s, early.get_token(), ec);
	};
	task co2 = at_once();
	cr_assert(co2.done(), "a stop requested before the await suspended it");
	cr_assert(r2.code == dlock::errc::canceled && ec == dlock::errc::canceled);

	// cancel() on a named async_op, as soon as it started on a free lock
	// (before the loop ran: nothing sent yet).
	dlock::async_op *in_flight = nullptr;
	auto named = [&]() -> task {
		dlock::async_op op = lk.acquire_async(me, 0ms, 10s, ec);
		in_flight = &op;
		r1 = co_await op;
		in_flight = nullptr;
	};
	task co3 = named();
	cr_assert(in_flight != nullptr);
	in_flight->cancel();
	cr_assert(t.run_until([&] { return co3.done(); }));
	cr_assert(r1.code == dlock::errc::canceled, "code %s", r1.code.message().c_str());
	t.run_for(100);
	cr_assert_eq(exists("co-cancel"), 0, "a canceled acquisition left the lock held");

	// A fair waiter canceled leaves its queue.
	{
		holder h("co-cancel-fair", 10s, dlock::kind::fair);
		std::stop_source s;
		auto body = [&]() -> task {
			r1 = co_await fair.acquire_async(me, 30s, dlock::watchdog, s.get_token(), ec);
		};
		task co = body();
		t.run_for(300);
		fair_queue_while_waiting = rh_command_int(srv, "LLEN redisson_lock_queue:{co-cancel-fair}");
		s.request_stop();
		cr_assert(t.run_until([&] { return co.done(); }));
		cr_assert(r1.code == dlock::errc::canceled, "code %s", r1.code.message().c_str());
		cr_assert_eq(fair_queue_while_waiting, 1, "the waiter was not in the queue");
		cr_assert_eq(rh_command_int(srv, "LLEN redisson_lock_queue:{co-cancel-fair}"), 0,
				"the canceled waiter is still in the queue");
	}
}

void a_coroutine_destroyed_while_suspended_cancels_its_operation(on_loop &t)
{
	const std::string me = t.client->owner(1);
	bool resumed = false;
	{
		holder h("co-destroyed", 10s);
		// The coroutine owns its rlock: destroying the frame frees the handle
		// while the operation still runs (the library keeps it until the end).
		auto body = [&]() -> task {
			dlock::rlock lk(*t.client, "co-destroyed");
			co_await lk.acquire_async(me, 30s);
			resumed = true;
		};
		task co = body();
		t.run_for(300);
		cr_assert(!co.done());
		co.destroy(); // on the loop's thread, outside dlock_loop_run
		// The operation ends (canceled) and its callback resumes nothing.
		cr_assert(t.run_until([&] { return dlock_loop_run(t.loop, 0) == 0; }),
				"the destroyed coroutine's operation did not end");
		cr_assert(!resumed, "a destroyed coroutine was resumed");
	}
	t.run_for(300);
	cr_assert_eq(exists("co-destroyed"), 0, "the destroyed coroutine's wait took the lock");
}

void a_coroutine_may_destroy_its_lock_when_resumed(on_loop &t)
{
	const std::string me = t.client->owner(1);
	int rounds = 0;
	// The rlock is destroyed as the coroutine returns, inside the release's
	// callback; and one per round, inside the acquisition's.
	auto body = [&]() -> task {
		for (int i = 0; i < 5; i++) {
			{
				dlock::rlock lk(*t.client, "co-own");
				co_await lk.acquire_async(me, 1s, 10s);
			}
			dlock::rlock lk(*t.client, "co-own");
			co_await lk.release_async(me);
			rounds++;
		}
		dlock::rlock last(*t.client, "co-own");
		co_await last.acquire_async(me, 1s, 10s);
		co_await last.release_async(me);
	};
	task co = body();
	cr_assert(t.run_until([&] { return co.done(); }));
	assert_no_exception(co);
	cr_assert_eq(rounds, 5);
	cr_assert_eq(exists("co-own"), 0);
}

// A client with its own thread: coroutines resume there; the test's thread
// waits for them (polling their end) and cancels across threads.
void a_client_with_its_own_thread_resumes_there()
{
	dlock::client c(rh_server_uri(srv));
	dlock::rlock lk(c, "co-thread");
	const std::string me = c.owner(1);
	std::thread::id resumed_on;
	dlock::async_result got, gone;
	std::error_code ec;

	auto body = [&]() -> task {
		got = co_await lk.acquire_async(me, 1s, ec);
		resumed_on = std::this_thread::get_id();
		gone = co_await lk.release_async(me, ec);
	};
	task co = body();
	cr_assert(wait_until([&] { return co.done(); }), "the coroutine did not finish");
	assert_no_exception(co);
	cr_assert(got && gone, "acquire: %s; release: %s", got.message.c_str(), gone.message.c_str());
	cr_assert(resumed_on != std::this_thread::get_id(), "resumed on the test's thread");
	cr_assert_eq(exists("co-thread"), 0);

	// A stop requested from this thread cancels a wait running on dlock's.
	holder h("co-thread", 10s);
	std::stop_source stop;
	auto waiting = [&]() -> task {
		got = co_await lk.acquire_async(me, 30s, dlock::watchdog, stop.get_token(), ec);
	};
	task co2 = waiting();
	std::this_thread::sleep_for(300ms);
	cr_assert(!co2.done(), "the wait ended while the lock was held");
	stop.request_stop();
	cr_assert(wait_until([&] { return co2.done(); }), "the canceled wait did not end");
	cr_assert(got.code == dlock::errc::canceled && ec == dlock::errc::canceled, "code %s",
			got.code.message().c_str());
	cr_assert_eq(hexists("co-thread", me), 0);
}

// A multilock's and a redlock's acquire_async() and release_async(): the
// same async_op over dlock_multilock_* and dlock_redlock_* (members' votes
// stay in the C result; co_await gives the outcome, validity and token).
void quorum_handles_through_co_await(on_loop &t)
{
	dlock::rlock m1(*t.client, "co-m1"), m2(*t.client, "co-m2");
	dlock::multilock ml{m1, m2};
	const std::string mine = ml.owner(1);
	dlock::async_result got, gone;
	int64_t both_held = -1;

	auto multi = [&]() -> task {
		got = co_await ml.acquire_async(mine, 0ms);
		both_held = hexists("co-m1", mine) + hexists("co-m2", mine);
		gone = co_await ml.release_async(mine);
	};
	task co = multi();
	cr_assert(!co.done(), "resumed inside the call that started it");
	cr_assert(t.run_until([&] { return co.done(); }));
	assert_no_exception(co);
	cr_assert(got, "multilock acquire: %s", got.message.c_str());
	cr_assert_eq(both_held, 2, "every member held");
	cr_assert(gone, "multilock release: %s", gone.message.c_str());
	cr_assert_eq(exists("co-m1") + exists("co-m2"), 0);

	// A RedLock over three servers, its clients on the test's loop.
	rh_server *more[2] = { rh_server_start(nullptr), rh_server_start(nullptr) };
	cr_assert(more[0] != nullptr && more[1] != nullptr, "redis-server did not start");
	{
		dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
		o.loop = t.loop;
		std::vector<std::string> uris{ rh_server_uri(srv), rh_server_uri(more[0]),
			rh_server_uri(more[1]) };
		dlock::redlock rl(uris, "co-red", &o);
		dlock::redlock other(uris, "co-red");
		const std::string owner = rl.owner(1);
		dlock::async_result busy;
		int64_t held_on = -1;

		auto red = [&]() -> task {
			got = co_await rl.acquire_async(owner, 0ms, 5s);
			held_on = 0;
			for (rh_server *s : { srv, more[0], more[1] })
				held_on += rh_command_int(s, "HEXISTS co-red %s", owner.c_str());
			gone = co_await rl.release_async(owner);
			other.set_lease(10s);
			other.lock(); /* held by another owner: the next try is refused */
			busy = co_await rl.acquire_async(owner, 0ms, 5s);
			other.unlock();
		};
		task co2 = red();
		cr_assert(t.run_until([&] { return co2.done(); }));
		assert_no_exception(co2);
		cr_assert(got, "redlock acquire: %s", got.message.c_str());
		cr_assert(got.validity > 4s && got.validity <= 5s, "validity %lld ms of a 5 s lease",
				static_cast<long long>(got.validity.count()));
		cr_assert_eq(held_on, 3, "held on every server");
		cr_assert(gone, "redlock release: %s", gone.message.c_str());
		cr_assert(!busy && busy.code == dlock::errc::not_acquired,
				"held by another owner: %s", busy.message.c_str());
	}
	for (rh_server *s : { srv, more[0], more[1] })
		cr_assert_eq(rh_command_int(s, "EXISTS co-red"), 0, "nothing left held");
	rh_server_free(more[0]);
	rh_server_free(more[1]);
}

// The rest of the family on the loop: a semaphore's permits and a latch's
// calls through co_await; the other side is a client with its own thread,
// through the blocking API.
void a_semaphore_through_co_await(on_loop &t)
{
	dlock::client own(rh_server_uri(srv));
	dlock::semaphore sem(*t.client, "co-sem"), theirs(own, "co-sem");
	theirs.try_set_permits(1);
	theirs.acquire(); // the one permit is out
	dlock::async_result none, got, back;
	int64_t got_at = 0;

	auto body = [&]() -> task {
		none = co_await sem.acquire_async(1, 0ms);
		got = co_await sem.acquire_async(1, 10s);
		got_at = rh_now_ms();
		back = co_await sem.release_async();
	};
	task co = body();
	t.run_for(300); // the attempt failed; the second listens for a release
	cr_assert(!co.done() && got_at == 0, "a permit was taken while none was there");
	int64_t released_at = rh_now_ms();
	theirs.release();
	cr_assert(t.run_until([&] { return co.done(); }), "the coroutine did not finish");
	assert_no_exception(co);
	cr_assert(!none && none.code == dlock::errc::not_acquired,
			"no permit is false, not an error: %s", none.message.c_str());
	cr_assert(got, "acquire: %s", got.message.c_str());
	cr_assert(got_at - released_at < 5000, "taken %lld ms after the release",
			static_cast<long long>(got_at - released_at));
	cr_assert(back, "release: %s", back.message.c_str());
	cr_assert_eq(theirs.available(), 1, "the permit is back");

	// An expirable permit: co_await gives its id.
	dlock::semaphore jobs(*t.client, "co-exp", dlock::semaphore_kind::expirable);
	dlock::semaphore(own, "co-exp", dlock::semaphore_kind::expirable).try_set_permits(1);
	int64_t taken_while_held = -1;
	auto expirable = [&]() -> task {
		got = co_await jobs.acquire_permit_async(1s, 10s);
		taken_while_held = rh_command_int(srv, "ZCARD {co-exp}:timeout");
		back = co_await jobs.release_permit_async(got.permit);
	};
	task co2 = expirable();
	cr_assert(t.run_until([&] { return co2.done(); }));
	assert_no_exception(co2);
	cr_assert(got && got.permit.size() == 32, "a permit id of 32 hex digits: '%s' (%s)",
			got.permit.c_str(), got.message.c_str());
	cr_assert_eq(taken_while_held, 1, "the permit is in the ZSET while held");
	cr_assert(back, "release: %s", back.message.c_str());
	cr_assert_eq(rh_command_int(srv, "ZCARD {co-exp}:timeout"), 0, "given back");
}

void a_latch_through_co_await(on_loop &t)
{
	dlock::client own(rh_server_uri(srv));
	dlock::countdown_latch latch(*t.client, "co-latch"), theirs(own, "co-latch");
	theirs.try_set_count(1);
	dlock::async_result timed_out, opened, set, left, count, removed;
	int64_t waited = 0, opened_at = 0;
	int stage = 0;

	auto body = [&]() -> task {
		int64_t t0 = rh_now_ms();
		timed_out = co_await latch.wait_async(200ms);
		waited = rh_now_ms() - t0;
		stage = 1;
		opened = co_await latch.wait_async(10s);
		opened_at = rh_now_ms();
		set = co_await latch.try_set_count_async(2);
		left = co_await latch.count_down_async();
		count = co_await latch.count_async();
		removed = co_await latch.remove_async();
	};
	task co = body();
	cr_assert(t.run_until([&] { return stage == 1; }), "the first wait did not end");
	cr_assert(!timed_out && timed_out.code == dlock::errc::timed_out,
			"still at 1: false with timed_out, not thrown: %s", timed_out.message.c_str());
	cr_assert_geq(waited, 200, "it waited its 200 ms");
	t.run_for(200);
	cr_assert(!co.done() && opened_at == 0, "opened while the count was 1");
	int64_t zero_at = rh_now_ms();
	cr_assert_eq(theirs.count_down(), 0);
	cr_assert(t.run_until([&] { return co.done(); }), "the coroutine did not finish");
	assert_no_exception(co);
	cr_assert(opened, "zero opens the latch: %s", opened.message.c_str());
	cr_assert(opened_at - zero_at < 5000, "woke %lld ms after zero",
			static_cast<long long>(opened_at - zero_at));
	cr_assert(set && set.value == 1, "set again after zero: %lld",
			static_cast<long long>(set.value));
	cr_assert(left && left.value == 1, "count_down left %lld", static_cast<long long>(left.value));
	cr_assert(count && count.value == 1, "count %lld", static_cast<long long>(count.value));
	cr_assert(removed && removed.value == 1, "removed %lld", static_cast<long long>(removed.value));
	cr_assert_eq(exists("co-latch"), 0);

	// A stop ends a wait with canceled, thrown in the throwing form.
	theirs.try_set_count(1);
	std::stop_source src;
	std::string caught;
	auto stopped = [&]() -> task {
		try {
			co_await latch.wait_async(10s, src.get_token());
		} catch (const dlock::error &e) {
			caught = e.code() == dlock::errc::canceled ? "canceled" : e.what();
		}
	};
	task co2 = stopped();
	t.run_for(100);
	cr_assert(!co2.done());
	src.request_stop();
	cr_assert(t.run_until([&] { return co2.done(); }), "the stop did not end the wait");
	cr_assert_str_eq(caught.c_str(), "canceled");
	cr_assert_eq(theirs.count(), 1, "a canceled wait changes nothing");
}

} // namespace

TestSuite(cpp20, .init = start_server, .fini = stop_server, .timeout = 60);

Test(cpp20, acquire_and_release_through_co_await)
{
	with_loop(acquire_and_release_through_co_await);
}

Test(cpp20, the_second_of_two_waits_until_the_first_releases)
{
	with_loop(the_second_of_two_waits_until_the_first_releases);
}

Test(cpp20, held_elsewhere_is_false_with_the_holders_ttl_not_an_error)
{
	with_loop(held_elsewhere_is_false_with_the_holders_ttl_not_an_error);
}

Test(cpp20, errors_throw_dlock_error_or_set_the_error_code)
{
	with_loop(errors_throw_dlock_error_or_set_the_error_code);
}

Test(cpp20, a_stop_ends_a_wait_with_canceled_and_leaves_nothing_held)
{
	with_loop(a_stop_ends_a_wait_with_canceled_and_leaves_nothing_held);
}

Test(cpp20, a_coroutine_destroyed_while_suspended_cancels_its_operation)
{
	with_loop(a_coroutine_destroyed_while_suspended_cancels_its_operation);
}

Test(cpp20, a_coroutine_may_destroy_its_lock_when_resumed)
{
	with_loop(a_coroutine_may_destroy_its_lock_when_resumed);
}

Test(cpp20, a_multilock_and_a_redlock_through_co_await)
{
	with_loop(quorum_handles_through_co_await);
}

Test(cpp20, a_client_with_its_own_thread_resumes_there)
{
	a_client_with_its_own_thread_resumes_there();
}

Test(cpp20, a_semaphore_through_co_await)
{
	with_loop(a_semaphore_through_co_await);
}

Test(cpp20, a_latch_through_co_await)
{
	with_loop(a_latch_through_co_await);
}
