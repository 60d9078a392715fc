/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cpp_family - the read-write lock, the semaphore and the latch of
 * <dlock.hpp> together: three worker threads wait on a latch until the
 * main thread has written a config under the write lock, then read it under
 * the read lock (all at once), each holding one of two permits of a
 * semaphore while it works.
 *
 *   cpp_family [redis://[[user]:password@]host[:port][/db]]
 *
 * Exits 0 when every worker read the config, 1 on an error (the library's
 * line on stderr).
 *
 * Build against an installed dlock:
 *   c++ -std=c++17 cpp_family.cpp $(pkg-config --cflags --libs dlock) -pthread -o cpp_family
 */
#include <dlock.hpp>

#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char **argv)
{
	using namespace std::chrono_literals;
	try {
		dlock::client client(argc > 1 ? argv[1] : "redis://127.0.0.1:6379");
		dlock::rwlock config(client, "family-config");
		dlock::semaphore slots(client, "family-slots");
		dlock::countdown_latch ready(client, "family-ready");
		slots.try_set_permits(2); // the first run sets the count; later ones find it
		ready.try_set_count(1);

		std::atomic<int> done{0};
		std::vector<std::thread> workers;
		for (int i = 0; i < 3; i++)
			workers.emplace_back([&, i] {
				try {
					if (!ready.wait_for(10s)) // false: still closed after 10 s
						return;
					dlock::semaphore_guard slot(slots);           // two at a time
					std::shared_lock<dlock::rwlock> read(config); // readers together
					std::cout << "worker " + std::to_string(i) + " reads the config\n";
					done++;
				} catch (const dlock::error &e) {
					std::cerr << "cpp_family: " + std::string(e.what()) + "\n";
				}
			});
		{
			std::unique_lock<dlock::rwlock> write(config); // no reader meanwhile
			std::cout << "config written\n";
		}
		ready.count_down(); // zero: every waiter goes
		for (std::thread &w : workers)
			w.join();
		return done == 3 ? 0 : 1;
	} catch (const dlock::error &e) {
		std::cerr << "cpp_family: " << e.what() << "\n"; // names the node and the cause
		return 1;
	}
}
