/* SPDX-License-Identifier: BSD-3-Clause */
// The rest of the family in C++ - dlock::rwlock, dlock::semaphore (with
// dlock::semaphore_guard and dlock::permit) and dlock::countdown_latch -
// against a real redis-server, used as a C++ program uses std::shared_mutex,
// std::counting_semaphore and std::latch.
//
// Worker threads never call cr_assert (Criterion's assertions belong to the
// test's main thread): they record, and the main thread asserts.
#include <criterion/criterion.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>

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

dlock::client open_client()
{
	dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
	o.connect_timeout_ms = 500;
	o.command_timeout_ms = 500;
	std::error_code ec;
	dlock::client c(rh_server_uri(srv), &o, ec);
	cr_assert(!ec, "open: %s (%s)", ec.message().c_str(), dlock::last_error_message().c_str());
	return c;
}

// The read-write lock's mode on the server is `mode`.
bool mode_is(const char *key, const char *mode)
{
	return rh_command_int(srv,
			       "EVAL %s 1 %s %s",
			       "return redis.call('HGET', KEYS[1], 'mode') == ARGV[1] and 1 or 0", key,
			       mode) == 1;
}

// A semaphore's or a latch's count on the server (-1: no key).
int64_t count_on_server(const char *key)
{
	return rh_command_int(srv, "EVAL %s 1 %s",
			"return tonumber(redis.call('GET', KEYS[1]) or '-1')", key);
}

bool is_permit_id(const std::string &id)
{
	if (id.size() != 32)
		return false;
	for (char ch : id)
		if (!std::isxdigit(static_cast<unsigned char>(ch)))
			return false;
	return true;
}

int64_t elapsed_since(int64_t t0)
{
	return rh_now_ms() - t0;
}

} // namespace

TestSuite(cpp_family, .init = start_server, .fini = stop_server, .timeout = 60);

Test(cpp_family, rwlock_two_readers_together_a_writer_alone)
{
	// Three clients: three owners (the owner is the client and thread).
	dlock::client ca = open_client(), cb = open_client(), cw = open_client();
	dlock::rwlock a(ca, "cpp-rw"), b(cb, "cpp-rw"), w(cw, "cpp-rw");
	{
		std::shared_lock<dlock::rwlock> ra(a);
		cr_assert(ra.owns_lock() && a.read_lock().is_held());
		cr_assert(b.try_lock_shared_for(1s), "a second reader is let in beside the first");
		cr_assert(mode_is("cpp-rw", "read"));
		int64_t t0 = rh_now_ms();
		cr_assert(!w.try_lock_for(300ms), "a writer is kept out while readers hold it");
		cr_assert_geq(elapsed_since(t0), 300, "the writer waited its 300 ms");
		b.unlock_shared();
		cr_assert(!w.try_lock(), "one reader left still keeps the writer out");
	}
	{
		// Through the write half itself, as any rlock.
		std::unique_lock<dlock::rlock> g(w.write_lock(), 2s);
		cr_assert(g.owns_lock(), "the writer gets it once the readers are gone");
		cr_assert(mode_is("cpp-rw", "write"));
		cr_assert(!a.try_lock_shared_for(200ms), "a reader is kept out while a writer holds it");
		cr_assert(!b.try_lock(), "and so is another writer");
		cr_assert(w.try_lock_shared(), "the writer may read too");
		w.unlock_shared();
	}
	cr_assert_eq(rh_command_int(srv, "EXISTS cpp-rw"), 0, "nothing left on the server");
}

Test(cpp_family, rwlock_a_waiting_writer_gets_in_when_the_reader_leaves)
{
	dlock::client cr = open_client(), cw = open_client();
	dlock::rwlock r(cr, "cpp-rw-wait"), w(cw, "cpp-rw-wait");
	r.lock_shared();
	std::atomic<bool> got{false};
	std::atomic<int64_t> got_at{0};
	std::thread writer([&] {
		try {
			got = w.try_lock_for(10s);
			got_at = rh_now_ms();
			if (got)
				w.unlock();
		} catch (const dlock::error &) {
		}
	});
	std::this_thread::sleep_for(300ms); // the writer is waiting by now
	int64_t released_at = rh_now_ms();
	r.unlock_shared();
	writer.join();
	cr_assert(got.load(), "the writer got the lock");
	cr_assert(got_at.load() >= released_at && got_at.load() - released_at < 5000,
			"the writer got it %lld ms after the reader left",
			static_cast<long long>(got_at.load() - released_at));
}

Test(cpp_family, semaphore_n_permits_the_next_waits_for_a_release)
{
	dlock::client c = open_client(), other = open_client();
	dlock::semaphore pool(c, "cpp-sem"), theirs(other, "cpp-sem");
	cr_assert(pool.try_set_permits(2), "the first set sets the count");
	cr_assert(!theirs.try_set_permits(5), "a second set changes nothing");
	cr_assert_eq(pool.available(), 2);

	dlock::semaphore_guard g1(pool), g2(theirs);
	cr_assert(g1.owns() && g2.owns() && g1.permits() == 1);
	cr_assert_eq(count_on_server("cpp-sem"), 0, "both permits are taken");
	cr_assert(!pool.try_acquire(), "no third permit");
	int64_t t0 = rh_now_ms();
	dlock::semaphore_guard g3(pool, 300ms);
	cr_assert(!g3 && g3.permits() == 0, "no permit came within the wait");
	cr_assert_geq(elapsed_since(t0), 300, "it waited its 300 ms");

	std::atomic<bool> got{false};
	std::atomic<int64_t> got_at{0};
	std::thread waiter([&] {
		try {
			got = pool.try_acquire_for(10s);
			got_at = rh_now_ms();
		} catch (const dlock::error &) {
		}
	});
	std::this_thread::sleep_for(300ms); // the waiter listens by now
	int64_t released_at = rh_now_ms();
	g2.release(); // another client gives one back: permits are nobody's
	waiter.join();
	cr_assert(got.load(), "the release let the waiter in");
	cr_assert(got_at.load() - released_at < 5000, "it came %lld ms after the release",
			static_cast<long long>(got_at.load() - released_at));
	pool.release(); // the waiter's
	cr_assert(!g2.owns(), "a released guard owns nothing");
	pool.acquire();
	{
		dlock::semaphore_guard adopted(pool, 1, std::adopt_lock);
		cr_assert_eq(count_on_server("cpp-sem"), 0);
	}
	cr_assert_eq(count_on_server("cpp-sem"), 1, "the adopted permit went back; g1's is out");

	std::error_code ec;
	cr_assert(!pool.try_acquire_for(100ms, 2, ec) && !ec, "too few is false, not an error");
	cr_assert(pool.try_acquire(1, ec) && !ec);
	pool.release(1, ec);
	cr_assert(!ec);
}

Test(cpp_family, expirable_permits_have_ids_and_go_back_with_their_object)
{
	dlock::client c = open_client();
	dlock::semaphore jobs(c, "cpp-exp", dlock::semaphore_kind::expirable);
	cr_assert(jobs.permit_kind() == dlock::semaphore_kind::expirable);
	jobs.try_set_permits(1);
	std::string id;
	{
		dlock::permit p = jobs.acquire_permit(10s);
		cr_assert(p && p.is_held());
		id = p.id();
		cr_assert(is_permit_id(id), "a permit id is 32 hex digits: %s", id.c_str());
		cr_assert_eq(rh_command_int(srv, "ZCARD {cpp-exp}:timeout"), 1,
				"the permit is in the semaphore's ZSET (its 16 bytes)");
		cr_assert(p.validity() > 9s && p.validity() <= 10s, "validity of a 10 s lease");

		dlock::semaphore_info info = jobs.query();
		cr_assert(info.is_set && info.available == 0 && info.permits.size() == 1);
		cr_assert_str_eq(info.permits[0].id.c_str(), id.c_str());
		cr_assert(info.permits[0].lease_left > 9s);

		int64_t t0 = rh_now_ms();
		dlock::permit none = jobs.try_acquire_permit_for(200ms);
		cr_assert(!none && none.id().empty(), "no second permit");
		cr_assert_geq(elapsed_since(t0), 200);

		dlock::permit moved = std::move(p);
		cr_assert(!p && moved.id() == id, "a move hands the permit over");
	} // the permit goes back here
	cr_assert_eq(rh_command_int(srv, "ZCARD {cpp-exp}:timeout"), 0, "given back");
	cr_assert_eq(jobs.available(), 1);

	// Released by id, from another handle, and released twice.
	dlock::permit p = jobs.acquire_permit();
	dlock::semaphore elsewhere(c, "cpp-exp", dlock::semaphore_kind::expirable);
	elsewhere.release_permit(p.id());
	std::error_code ec;
	p.release(ec);
	cr_assert(ec == dlock::errc::not_owner || ec == dlock::errc::lost,
			"released already: %s", ec.message().c_str());
	cr_assert(!p, "empty after a release, whatever the answer");
	cr_assert_eq(jobs.available(), 1);

	// An empty permit going calls nothing: the thread's last line stays.
	elsewhere.release_permit("not-an-id", ec);
	cr_assert(ec == dlock::errc::invalid_argument);
	std::string line = dlock::last_error_message();
	{
		dlock::permit empty = jobs.try_acquire_permit_for(0ms, 10s, ec);
		cr_assert(empty && !ec, "the permit is back: %s", ec.message().c_str());
		empty.release();
		dlock::permit none;
		elsewhere.release_permit("not-an-id", ec);
	}
	std::string after = dlock::last_error_message();
	cr_assert(after == line, "destroying empty permits left the line alone: \"%s\", then \"%s\"",
			line.c_str(), after.c_str());

	// A plain semaphore's calls on an expirable one are refused.
	try {
		jobs.acquire();
		cr_assert_fail("acquire() of an expirable semaphore did not throw");
	} catch (const dlock::error &e) {
		cr_assert(e.code() == dlock::errc::invalid_argument, "%s", e.what());
	}
}

Test(cpp_family, latch_count_down_to_zero_releases_a_waiting_thread)
{
	dlock::client c = open_client(), other = open_client();
	dlock::countdown_latch latch(c, "cpp-latch"), theirs(other, "cpp-latch");
	cr_assert(latch.try_set_count(2));
	cr_assert(!latch.try_set_count(5), "set already");
	cr_assert_eq(count_on_server("cpp-latch"), 2);

	std::atomic<int> opened{-1};
	std::atomic<int64_t> opened_at{0};
	std::thread waiter([&] {
		try {
			opened = theirs.wait_for(10s) ? 1 : 0;
			opened_at = rh_now_ms();
		} catch (const dlock::error &) {
		}
	});
	cr_assert_eq(latch.count_down(), 1);
	cr_assert_eq(latch.count(), 1);
	std::this_thread::sleep_for(200ms);
	cr_assert_eq(opened.load(), -1, "one count left: the waiter still waits");
	int64_t zero_at = rh_now_ms();
	cr_assert_eq(latch.count_down(), 0);
	waiter.join();
	cr_assert_eq(opened.load(), 1, "zero opened the latch for the waiter");
	cr_assert(opened_at.load() - zero_at < 5000, "it woke %lld ms after zero",
			static_cast<long long>(opened_at.load() - zero_at));
	cr_assert(latch.try_wait(), "open at zero");
	cr_assert_eq(count_on_server("cpp-latch"), -1, "zero deletes the key");
}

Test(cpp_family, latch_wait_times_out_and_errors_are_errors)
{
	dlock::client c = open_client();
	dlock::countdown_latch latch(c, "cpp-latch-t");
	cr_assert(latch.wait_for(0ms), "a latch never set is open");
	latch.try_set_count(1);
	int64_t t0 = rh_now_ms();
	cr_assert(!latch.wait_for(300ms), "still at 1: false, not an error");
	cr_assert_geq(elapsed_since(t0), 300);
	std::error_code ec;
	cr_assert(!latch.wait_until(std::chrono::steady_clock::now() + 200ms, ec) && !ec);
	cr_assert(latch.remove(), "removed");
	cr_assert(latch.wait_for(1s, ec) && !ec, "open once removed");

	// Another kind's key is refused, with the library's line.
	rh_command_int(srv, "HSET cpp-not-a-latch a 1");
	dlock::countdown_latch wrong(c, "cpp-not-a-latch");
	wrong.count_down(ec);
	cr_assert(ec == dlock::errc::wrong_type, "got %s", ec.message().c_str());
	try {
		wrong.count();
		cr_assert_fail("count() of a hash did not throw");
	} catch (const dlock::error &e) {
		cr_assert(e.code() == dlock::errc::wrong_type);
		cr_assert(std::string(e.what()).find("cpp-not-a-latch") != std::string::npos ||
						std::string(e.what()).find("127.0.0.1") != std::string::npos,
				"the line names the latch or the node: %s", e.what());
	}
}
