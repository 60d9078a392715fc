/* SPDX-License-Identifier: BSD-3-Clause */
// stress_cpp - the C++ classes of <dlock.hpp> shared by threads, without
// Criterion, so that it also runs under ThreadSanitizer (Criterion's runner
// cannot start there). Real redis-server processes; each scenario checks its
// own invariant (no overlap, exact counters, tokens that only grow, nothing
// left in Redis). Prints "N passed, N failed"; exits non-zero on a failure.
#include <dlock.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
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
	o.command_timeout_ms = 500;
	return dlock::client(rh_server_uri(s), &o);
}

// Threads x rounds inside one section guarded by `enter`/`leave`: how many
// found someone else inside, and what failed (the first error's line).
struct section {
	std::atomic<int> inside{0}, overlaps{0}, errors{0};
	int counter = 0; // guarded by the distributed lock alone
	std::mutex first_mu;
	std::string first;

	template <class Lockable> void run(Lockable &l, int rounds)
	{
		for (int i = 0; i < rounds; i++) {
			try {
				std::unique_lock<Lockable> g(l);
				if (inside.fetch_add(1) != 0)
					overlaps++;
				int seen = counter;
				std::this_thread::sleep_for(1ms);
				counter = seen + 1;
				inside.fetch_sub(1);
			} catch (const dlock::error &e) {
				errors++;
				std::lock_guard<std::mutex> g(first_mu);
				if (first.empty())
					first = e.what();
			}
		}
	}

	std::string verdict(int want) const
	{
		if (errors != 0)
			return std::to_string(errors) + " errors, first: " + first;
		if (overlaps != 0)
			return std::to_string(overlaps) + " times two threads inside";
		if (counter != want)
			return "counter " + std::to_string(counter) + ", want " + std::to_string(want);
		return "";
	}
};

// Four threads share one fenced rlock: one inside at a time, and each
// holder's token is above every token seen before it.
void scenario_shared_rlock(rh_server *s)
{
	dlock::client c = open_client(s);
	dlock::rlock l(c, "stress-cpp-one", dlock::kind::fenced);
	section sec;
	std::atomic<long long> last_token{0};
	std::atomic<int> backwards{0};
	auto work = [&] {
		for (int i = 0; i < 10; i++) {
			sec.run(l, 1);
			try {
				std::lock_guard<dlock::rlock> g(l);
				long long t = l.token();
				if (t <= last_token.exchange(t))
					backwards++;
			} catch (const dlock::error &) {
				sec.errors++;
			}
		}
	};
	std::vector<std::thread> threads;
	for (int i = 0; i < 4; i++)
		threads.emplace_back(work);
	for (std::thread &t : threads)
		t.join();
	std::string why = sec.verdict(40);
	if (why.empty() && backwards != 0)
		why = std::to_string(backwards.load()) + " tokens did not grow";
	if (why.empty() && rh_command_int(s, "EXISTS stress-cpp-one") != 0)
		why = "the lock was left on the server";
	report("shared fenced rlock, 4 threads", why.empty(), why);
}

// Two threads take two locks on two servers in opposite orders through
// std::scoped_lock: std::lock's back-off, never a deadlock.
void scenario_scoped_lock_orders(rh_server *a, rh_server *b)
{
	dlock::client ca = open_client(a), cb = open_client(b);
	dlock::rlock la(ca, "stress-cpp-pair"), lb(cb, "stress-cpp-pair");
	section sec;
	std::atomic<int> errors{0};
	auto both = [&](dlock::rlock &x, dlock::rlock &y) {
		for (int i = 0; i < 15; i++) {
			try {
				std::scoped_lock g(x, y);
				if (sec.inside.fetch_add(1) != 0)
					sec.overlaps++;
				sec.counter++;
				sec.inside.fetch_sub(1);
			} catch (const dlock::error &) {
				errors++;
			}
		}
	};
	int64_t t0 = rh_now_ms();
	std::thread t1(both, std::ref(la), std::ref(lb)), t2(both, std::ref(lb), std::ref(la));
	t1.join();
	t2.join();
	std::string why = errors != 0 ? std::to_string(errors.load()) + " errors" : sec.verdict(30);
	if (why.empty() && rh_now_ms() - t0 > 60000)
		why = "took " + std::to_string(rh_now_ms() - t0) + " ms";
	report("scoped_lock in opposite orders, 2 threads", why.empty(), why);
}

// Three threads share one redlock over three servers.
void scenario_shared_redlock(rh_server **s)
{
	std::vector<std::string> uris;
	for (int i = 0; i < 3; i++)
		uris.push_back(rh_server_uri(s[i]));
	dlock::redlock r(uris, "stress-cpp-red");
	section sec;
	std::vector<std::thread> threads;
	for (int i = 0; i < 3; i++)
		threads.emplace_back([&] { sec.run(r, 10); });
	for (std::thread &t : threads)
		t.join();
	std::string why = sec.verdict(30);
	report("shared redlock, 3 threads", why.empty(), why);
}

} // namespace

int main()
{
	rh_server *s[3];
	if (rh_servers_start(s, 3, nullptr) != 0) {
		std::fprintf(stderr, "could not start redis-server\n");
		return 2;
	}
	try {
		scenario_shared_rlock(s[0]);
		scenario_scoped_lock_orders(s[1], s[2]);
		scenario_shared_redlock(s);
	} catch (const dlock::error &e) {
		report("setup", false, e.what());
	}
	rh_cleanup_all();
	std::printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
