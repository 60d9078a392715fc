/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cpp_lock - the C++ classes of <dlock.hpp>: take the lock "hello" on one
 * Redis server through std::unique_lock, as a std::timed_mutex, and release
 * it when the scope ends.
 *
 *   cpp_lock [redis://[[user]:password@]host[:port][/db]]
 *
 * Exits 0 after holding the lock, 2 when another owner held it for the
 * whole wait, 1 on an error (the library's line on stderr).
 *
 * Build against an installed dlock:
 *   c++ -std=c++17 cpp_lock.cpp $(pkg-config --cflags --libs dlock) -o cpp_lock
 */
#include <dlock.hpp>

#include <chrono>
#include <iostream>
#include <mutex>

int main(int argc, char **argv)
{
	using namespace std::chrono_literals;
	try {
		dlock::client client(argc > 1 ? argv[1] : "redis://127.0.0.1:6379");
		dlock::rlock lock(client, "hello");
		lock.set_lease(10s); // expires after 10 s even if this process dies

		std::unique_lock<dlock::rlock> guard(lock, 5s); // wait up to 5 s
		if (!guard.owns_lock()) {
			std::cerr << "cpp_lock: held by another owner\n";
			return 2;
		}
		std::cout << "holding \"hello\" on " << client.node() << " for "
			  << lock.validity().count() << " ms more\n";
		guard.unlock(); // released here rather than by the guard: a failure throws
	} catch (const dlock::error &e) {
		std::cerr << "cpp_lock: " << e.what() << "\n"; // names the node and the cause
		return 1;
	}
	return 0;
}
