/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cpp20_await - co_await on the lock "hello" (C++20, <dlock.hpp>): a
 * coroutine acquires it for an owner of its own, and releases it, on a
 * loop this program drives, so dlock starts no thread and the coroutine
 * resumes on this one, inside dlock_loop_run().
 *
 *   cpp20_await [redis://[[user]:password@]host[:port][/db]]
 *
 * Exits 0 after holding the lock, 2 when another owner held it for the
 * whole wait, 1 on an error (the library's line on stderr).
 *
 * Build against an installed dlock:
 *   c++ -std=c++20 cpp20_await.cpp $(pkg-config --cflags --libs dlock) -o cpp20_await
 */
#include <dlock.hpp>

#include <chrono>
#include <coroutine>
#include <exception>
#include <iostream>
#include <string>

using namespace std::chrono_literals;

// The smallest coroutine type: it starts at once and frees itself at its end.
struct job {
	struct promise_type {
		job get_return_object() noexcept { return {}; }
		std::suspend_never initial_suspend() noexcept { return {}; }
		std::suspend_never final_suspend() noexcept { return {}; }
		void return_void() noexcept {}
		void unhandled_exception() noexcept { std::terminate(); }
	};
};

job hold_hello(dlock::rlock &lock, std::string owner, int &status)
{
	try {
		// Wait up to 5 s; a 10 s lease, so the key expires even if we die.
		dlock::async_result r = co_await lock.acquire_async(owner, 5s, 10s);
		if (!r) {
			std::cerr << "cpp20_await: held by another owner\n";
			status = 2;
			co_return;
		}
		std::cout << "holding \"hello\" for " << r.validity.count() << " ms more\n";
		co_await lock.release_async(owner); // a failed release throws too
		status = 0;
	} catch (const dlock::error &e) {
		std::cerr << "cpp20_await: " << e.what() << "\n"; // names the node and the cause
		status = 1;
	}
}

int main(int argc, char **argv)
{
	dlock_loop *loop = nullptr;
	if (dlock_loop_new(&loop, nullptr) != 0) { // driven by dlock_loop_run below
		std::cerr << "cpp20_await: " << dlock::last_error_message() << "\n";
		return 1;
	}
	int status = -1;
	try {
		dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
		o.loop = loop;
		dlock::client client(argc > 1 ? argv[1] : "redis://127.0.0.1:6379", &o);
		dlock::rlock lock(client, "hello");
		hold_hello(lock, client.owner(1), status);
		while (status < 0) // the coroutine resumes in here
			if (dlock_loop_run(loop, -1) < 0)
				throw dlock::error(DLOCK_ESYS, dlock::last_error_message());
	} catch (const dlock::error &e) {
		std::cerr << "cpp20_await: " << e.what() << "\n";
		status = 1;
	}
	dlock_loop_free(loop); // after the client: it was closed with its last lock
	return status;
}
