/* SPDX-License-Identifier: BSD-3-Clause */
// The C++ classes of <dlock.hpp> against real redis-server processes, used as
// a C++ program uses a std::timed_mutex: through std::unique_lock,
// std::scoped_lock and try_lock_for, with dlock::error and std::error_code
// for failures.
//
// Worker threads never call cr_assert (Criterion's assertions belong to the
// test's main thread): they count, and the main thread asserts.
#include <criterion/criterion.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <dlock.hpp>

#include "redis_harness.h"

using namespace std::chrono_literals;
using std::chrono::milliseconds;

namespace
{

// Servers started by a test; freed by its .fini (a failed assertion leaves
// the test without running destructors).
rh_server *srv[3];

void start_servers(int n)
{
	cr_assert_eq(rh_servers_start(srv, n, nullptr), 0, "redis-servers did not start");
}

void stop_servers()
{
	for (rh_server *&s : srv) {
		rh_server_free(s);
		s = nullptr;
	}
}

// Short deadlines, so a dead server costs a fraction of a second.
dlock_client_options quick_options()
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	o.connect_timeout_ms = 500;
	o.command_timeout_ms = 500;
	return o;
}

dlock::client open_client(rh_server *s)
{
	const dlock_client_options o = quick_options();
	std::error_code ec;
	dlock::client c(rh_server_uri(s), &o, ec);
	cr_assert(!ec, "open %s: %s (%s)", rh_server_uri(s), ec.message().c_str(),
			dlock::last_error_message().c_str());
	return c;
}

int64_t exists(rh_server *s, const char *key)
{
	return rh_command_int(s, "EXISTS %s", key);
}

int64_t elapsed_since(int64_t t0)
{
	return rh_now_ms() - t0;
}

// The exception `f` throws must be a dlock::error with code `want` whose line
// names `what` (the node, or the cause).
template <class F> void assert_throws(F f, dlock::errc want, const std::string &what)
{
	try {
		f();
	} catch (const dlock::error &e) {
		cr_assert(e.code() == want, "code %d (%s), want %d; line: %s", e.code().value(),
				e.code().message().c_str(), static_cast<int>(want), e.what());
		cr_assert(std::strstr(e.what(), what.c_str()) != nullptr,
				"the line does not name %s: %s", what.c_str(), e.what());
		return;
	}
	cr_assert_fail("no dlock::error thrown (want code %d)", static_cast<int>(want));
}

std::string node_of(rh_server *s)
{
	return "127.0.0.1:" + std::to_string(rh_server_port(s));
}

} // namespace

TestSuite(cpp, .fini = stop_servers, .timeout = 60);

Test(cpp, unique_lock_round_trip)
{
	start_servers(1);
	dlock::client c = open_client(srv[0]);
	dlock::rlock l(c, "cpp-rt");
	{
		std::unique_lock<dlock::rlock> g(l);
		cr_assert(g.owns_lock());
		cr_assert(l.is_held(), "held by the calling thread");
		cr_assert_eq(exists(srv[0], "cpp-rt"), 1, "the key is on the server");
		cr_assert_gt(l.validity().count(), 0, "a held lock has validity");
	}
	cr_assert(!l.is_held(), "released by the guard");
	cr_assert_eq(exists(srv[0], "cpp-rt"), 0, "the release took the key");
}

Test(cpp, scoped_lock_over_two_servers)
{
	start_servers(2);
	dlock::client c0 = open_client(srv[0]), c1 = open_client(srv[1]);
	dlock::rlock a(c0, "cpp-pair"), b(c1, "cpp-pair");
	{
		std::scoped_lock g(a, b);
		cr_assert(a.is_held() && b.is_held());
		cr_assert_eq(exists(srv[0], "cpp-pair") + exists(srv[1], "cpp-pair"), 2);
	}
	cr_assert_eq(exists(srv[0], "cpp-pair") + exists(srv[1], "cpp-pair"), 0);

	// std::lock's back-off: with b held elsewhere, std::try_lock gives back a.
	dlock::client other = open_client(srv[1]);
	dlock::rlock theirs(other, "cpp-pair");
	theirs.lock(); // another client: another owner
	cr_assert_eq(std::try_lock(a, b), 1, "b is the one that could not be had");
	cr_assert(!a.is_held(), "a was given back");
	cr_assert_eq(exists(srv[0], "cpp-pair"), 0, "nothing left of a on its server");
}

Test(cpp, try_lock_for_waits_the_duration_then_fails)
{
	start_servers(1);
	dlock::client mine = open_client(srv[0]), theirs = open_client(srv[0]);
	dlock::rlock l(mine, "cpp-busy"), holder(theirs, "cpp-busy");
	holder.lock();

	int64_t t0 = rh_now_ms();
	bool got = l.try_lock_for(300ms);
	int64_t took = elapsed_since(t0);
	cr_assert(!got, "another client holds it");
	cr_assert(took >= 300 && took <= 2300, "try_lock_for(300ms) returned after %lld ms",
			static_cast<long long>(took));

	t0 = rh_now_ms();
	got = l.try_lock_until(std::chrono::system_clock::now() + 200ms);
	took = elapsed_since(t0);
	cr_assert(!got);
	cr_assert(took >= 190 && took <= 2200, "try_lock_until(now + 200ms) returned after %lld ms",
			static_cast<long long>(took));
	holder.unlock();
	cr_assert(l.try_lock_for(2s), "free again after the holder's unlock");
	l.unlock();
}

Test(cpp, error_names_the_node_when_the_server_is_down)
{
	start_servers(1);
	dlock::client c = open_client(srv[0]);
	dlock::rlock l(c, "cpp-down");
	std::string node = node_of(srv[0]);
	cr_assert_eq(rh_server_kill(srv[0]), 0);

	int64_t t0 = rh_now_ms();
	assert_throws([&] { l.try_lock_for(300ms); }, dlock::errc::connection, node);
	cr_assert_lt(elapsed_since(t0), 3000, "the wait ended with its duration");
}

Test(cpp, error_for_a_wrong_uri_or_nothing_listening)
{
	assert_throws([] { dlock::client c("redis://127.0.0.1:notaport"); },
			dlock::errc::invalid_argument, "port is not a decimal number");

	const dlock_client_options o = quick_options();
	std::string node = "127.0.0.1:" + std::to_string(rh_free_port());
	assert_throws([&] { dlock::client c("redis://" + node, &o); }, dlock::errc::connection,
			node);
}

Test(cpp, redlock_over_three_servers_locks_with_one_killed)
{
	start_servers(3);
	cr_assert_eq(rh_server_kill(srv[2]), 0);
	std::vector<std::string> uris;
	for (rh_server *s : srv)
		uris.push_back(rh_server_uri(s));
	const dlock_client_options o = quick_options();
	dlock::redlock r(uris, "cpp-red", &o);
	cr_assert_eq(r.size(), 3u);
	cr_assert_eq(r.quorum(), 2u);
	{
		std::unique_lock<dlock::redlock> g(r, std::defer_lock);
		cr_assert(g.try_lock_for(5s), "two of three servers make a quorum");
		cr_assert(r.is_held());
		cr_assert_gt(r.validity().count(), 0);
		cr_assert_eq(exists(srv[0], "cpp-red") + exists(srv[1], "cpp-red"), 2);
	}
	cr_assert_eq(exists(srv[0], "cpp-red") + exists(srv[1], "cpp-red"), 0);
}

Test(cpp, multilock_with_a_lease_and_fenced_tokens)
{
	start_servers(2);
	dlock::client c0 = open_client(srv[0]), c1 = open_client(srv[1]);
	dlock::rlock a(c0, "cpp-multi", dlock::kind::fenced), b(c1, "cpp-multi", dlock::kind::fenced);
	dlock::multilock m{a, b};
	m.set_lease(5s);
	int64_t first;
	{
		std::lock_guard<dlock::multilock> g(m);
		first = m.token();
		cr_assert_gt(first, 0, "a fenced acquisition has a token");
		int64_t ttl = rh_command_int(srv[1], "PTTL cpp-multi");
		cr_assert(ttl > 0 && ttl <= 5000, "the lease is the key's TTL: %lld ms",
				static_cast<long long>(ttl));
	}
	{
		std::lock_guard<dlock::rlock> g(a);
		cr_assert_gt(a.token(), first, "tokens grow from one holder to the next");
	}
}

Test(cpp, non_throwing_variants_set_the_error_code)
{
	std::error_code ec;
	dlock::client bad("nope://x", nullptr, ec);
	cr_assert(ec == dlock::errc::invalid_argument && ec == std::errc::invalid_argument);
	cr_assert(!bad, "an empty client after a failed open");

	start_servers(1);
	dlock::client mine = open_client(srv[0]), theirs = open_client(srv[0]);
	dlock::rlock l(mine, "cpp-ec"), holder(theirs, "cpp-ec");
	l.unlock(ec);
	cr_assert(ec == dlock::errc::not_owner, "unlock of a lock not held: %s",
			ec.message().c_str());

	holder.lock(ec);
	cr_assert(!ec);
	cr_assert(!l.try_lock(ec) && !ec, "held elsewhere is false, not an error");
	cr_assert(!l.try_lock_for(100ms, ec) && !ec);
	holder.unlock(ec);
	cr_assert(!ec);
	cr_assert(l.try_lock_until(std::chrono::steady_clock::now() + 1s, ec) && !ec);
	cr_assert_gt(l.validity(ec).count(), 0);
	cr_assert(!ec);

	cr_assert_eq(rh_server_kill(srv[0]), 0);
	l.unlock(ec);
	cr_assert(ec, "a release to a dead server fails");
	cr_assert(&ec.category() == &dlock::category());
	cr_assert(!holder.try_lock_for(200ms, ec));
	cr_assert(ec == dlock::errc::connection, "got %s", ec.message().c_str());
	std::string line = dlock::last_error_message();
	cr_assert(line.find(node_of(srv[0])) != std::string::npos,
			"the thread's last line names the node: %s", line.c_str());
}

Test(cpp, unlock_throws_except_while_unwinding)
{
	start_servers(2);
	dlock::client c0 = open_client(srv[0]);
	dlock::rlock held(c0, "cpp-unwind");
	held.lock();
	std::string node = node_of(srv[0]);
	cr_assert_eq(rh_server_kill(srv[0]), 0);
	bool thrown = false;
	try {
		held.unlock();
	} catch (const dlock::error &e) {
		thrown = true;
		cr_assert(std::strstr(e.what(), node.c_str()) != nullptr,
				"the failed release names %s: %s", node.c_str(), e.what());
	}
	cr_assert(thrown, "a release to a dead server throws from unlock()");

	dlock::client c = open_client(srv[1]);
	dlock::rlock l(c, "cpp-unwind");
	try {
		std::unique_lock<dlock::rlock> g(l);
		cr_assert_eq(rh_server_kill(srv[1]), 0);
		throw std::runtime_error("the critical section failed");
	} catch (const std::runtime_error &e) {
		// The guard's failed release was dropped; this is the original one.
		cr_assert_str_eq(e.what(), "the critical section failed");
	}
}

Test(cpp, two_threads_one_lock_never_both_inside)
{
	start_servers(1);
	dlock::client c = open_client(srv[0]);
	dlock::rlock l(c, "cpp-threads");
	std::atomic<int> inside{0}, overlaps{0}, errors{0};
	int counter = 0; // guarded by the dlock alone
	auto work = [&] {
		for (int i = 0; i < 25; i++) {
			try {
				std::unique_lock<dlock::rlock> g(l);
				if (inside.fetch_add(1) != 0)
					overlaps++;
				int seen = counter;
				std::this_thread::sleep_for(1ms);
				counter = seen + 1;
				inside.fetch_sub(1);
			} catch (const dlock::error &) {
				errors++;
			}
		}
	};
	int64_t t0 = rh_now_ms();
	std::thread t1(work), t2(work);
	t1.join();
	t2.join();
	cr_assert_eq(errors.load(), 0, "no acquisition or release failed");
	cr_assert_eq(overlaps.load(), 0, "both threads were inside at once");
	cr_assert_eq(counter, 50, "every increment counted once");
	cr_assert_lt(elapsed_since(t0), 30000, "50 hand-overs took %lld ms",
			static_cast<long long>(elapsed_since(t0)));
	cr_assert_eq(exists(srv[0], "cpp-threads"), 0, "nothing left on the server");
}
