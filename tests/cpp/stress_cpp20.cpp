/* SPDX-License-Identifier: BSD-3-Clause */
// stress_cpp20 - co_await on <dlock.hpp>'s asynchronous operations across
// threads, without Criterion, so that it also runs under ThreadSanitizer: the
// clients have their own thread, where the coroutines resume, while other
// threads start them and cancel them at random moments. Real redis-server
// processes; each scenario checks its own invariant (no overlap, exact
// counters, tokens that only grow, every coroutine ended once, nothing left
// in Redis). Prints "N passed, N failed"; exits non-zero on a failure.
#include <dlock.hpp>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "redis_harness.h"

using namespace std::chrono_literals;

namespace
{

int passed, failed;

void report(const char *name, bool ok, const std::string &why)
{
	std::printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name, ok ? "" : ": ", ok ? "" : why.c_str());
	std::fflush(stdout);
	(ok ? passed : failed)++;
}

dlock::client open_client(rh_server *s)
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	o.connect_timeout_ms = 500;
	o.command_timeout_ms = 2000;
	return dlock::client(rh_server_uri(s), &o);
}

// A coroutine that starts at once; done() once it is suspended at its end,
// when the thread that ran it no longer touches the frame.
struct task {
	struct promise_type {
		std::atomic<bool> done{false};

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
		void unhandled_exception() { std::abort(); }
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

private:
	std::coroutine_handle<promise_type> h_;
};

bool all_done(const std::vector<std::optional<task>> &tasks, int64_t within_ms)
{
	for (int64_t until = rh_now_ms() + within_ms;; std::this_thread::sleep_for(2ms)) {
		bool done = true;
		for (const std::optional<task> &t : tasks)
			done = done && t && t->done();
		if (done)
			return true;
		if (rh_now_ms() >= until)
			return false;
	}
}

// Four coroutines, each started on a thread of its own, take turns on one
// fenced lock ten times: one inside at a time, tokens that only grow.
void scenario_turns(rh_server *s)
{
	dlock::client c = open_client(s);
	dlock::rlock lk(c, "stress-cpp20-turns", dlock::kind::fenced);
	std::atomic<int> inside{0}, overlaps{0}, errors{0}, counter{0};
	std::atomic<std::int64_t> last_token{0};
	std::atomic<int> backwards{0};

	auto worker = [&](std::string me) -> task {
		for (int k = 0; k < 10; k++) {
			std::error_code ec;
			dlock::async_result r = co_await lk.acquire_async(me, 20s, 10s, ec);
			if (!r) {
				errors++;
				continue;
			}
			if (r.token <= last_token.exchange(r.token))
				backwards++;
			if (inside.fetch_add(1) != 0)
				overlaps++;
			counter++;
			inside--;
			co_await lk.release_async(me, ec);
			if (ec)
				errors++;
		}
	};
	std::vector<std::optional<task>> tasks(4);
	std::vector<std::thread> starters;
	for (int i = 0; i < 4; i++)
		starters.emplace_back([&, i] { tasks[static_cast<std::size_t>(i)].emplace(worker(c.owner(static_cast<std::uint64_t>(i + 1)))); });
	for (std::thread &t : starters)
		t.join();
	std::string why;
	if (!all_done(tasks, 60000))
		why = "not every coroutine finished within 60 s";
	else if (errors != 0)
		why = std::to_string(errors.load()) + " failed operations";
	else if (overlaps != 0)
		why = std::to_string(overlaps.load()) + " times two inside";
	else if (counter != 40)
		why = "counter " + std::to_string(counter.load()) + ", want 40";
	else if (backwards != 0)
		why = std::to_string(backwards.load()) + " tokens did not grow";
	else if (rh_command_int(s, "EXISTS stress-cpp20-turns") != 0)
		why = "the lock was left on the server";
	report("4 coroutines take turns, resumed on the client's thread", why.empty(), why);
}

// Sixteen coroutines wait for a lock another client holds; this thread
// requests a stop on each at a random moment, half while it is held, half
// while the others hand it over. Each ends once, acquired (then released)
// or canceled; none is left holding.
void scenario_cancel_storm(rh_server *s, unsigned seed)
{
	dlock::client c = open_client(s), other = open_client(s);
	dlock::rlock lk(c, "stress-cpp20-cancel"), held(other, "stress-cpp20-cancel");
	const int n = 16;
	std::vector<std::stop_source> stops(n);
	std::atomic<int> acquired{0}, canceled{0}, errors{0}, inside{0}, overlaps{0}, ends{0};
	std::mt19937 rng(seed);

	auto waiter = [&](int i) -> task {
		std::string me = c.owner(static_cast<std::uint64_t>(100 + i));
		std::error_code ec;
		dlock::async_result r =
				co_await lk.acquire_async(me, 30s, 10s, stops[static_cast<std::size_t>(i)].get_token(), ec);
		ends++;
		if (r) {
			acquired++;
			if (inside.fetch_add(1) != 0)
				overlaps++;
			std::this_thread::sleep_for(1ms); // a hold that lasts (on dlock's thread: a test only)
			inside--;
			co_await lk.release_async(me, ec);
			if (ec)
				errors++;
		} else if (r.code == dlock::errc::canceled) {
			canceled++;
		} else {
			errors++;
		}
	};
	held.lock();
	std::vector<std::optional<task>> tasks(n);
	for (int i = 0; i < n; i++)
		tasks[static_cast<std::size_t>(i)].emplace(waiter(i));
	for (int i = 0; i < n; i += 2) {
		std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 20));
		stops[static_cast<std::size_t>(i)].request_stop();
	}
	held.unlock();
	for (int i = 1; i < n; i += 2) {
		std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 4));
		stops[static_cast<std::size_t>(i)].request_stop();
	}
	std::string why;
	if (!all_done(tasks, 60000))
		why = "not every coroutine finished within 60 s";
	else if (ends != n || acquired + canceled != n)
		why = std::to_string(ends.load()) + " ends, " + std::to_string(acquired.load()) +
				" acquired + " + std::to_string(canceled.load()) + " canceled, want " +
				std::to_string(n);
	else if (errors != 0)
		why = std::to_string(errors.load()) + " failed operations";
	else if (overlaps != 0)
		why = std::to_string(overlaps.load()) + " times two inside";
	else if (rh_command_int(s, "EXISTS stress-cpp20-cancel") != 0)
		why = "the lock was left on the server";
	else if (canceled < n / 2)
		why = std::to_string(canceled.load()) + " canceled: the stops while held were missed";
	std::string name = "16 waiters canceled from another thread: " + std::to_string(acquired.load()) +
			" acquired, " + std::to_string(canceled.load()) + " canceled (seed " +
			std::to_string(seed) + ")";
	report(name.c_str(), why.empty(), why);
}

} // namespace

int main()
{
	rh_server *s;
	if ((s = rh_server_start(nullptr)) == nullptr) {
		std::fprintf(stderr, "could not start redis-server\n");
		return 2;
	}
	const char *env = std::getenv("DLOCK_STRESS_SEED");
	unsigned seed = env != nullptr ? static_cast<unsigned>(std::strtoul(env, nullptr, 10))
				       : static_cast<unsigned>(rh_now_ms());
	try {
		scenario_turns(s);
		scenario_cancel_storm(s, seed);
	} catch (const dlock::error &e) {
		report("setup", false, e.what());
	}
	rh_cleanup_all();
	std::printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
