/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock.hpp - C++17 classes over the C API of <dlock.h>, header-only.
 *
 *   dlock::client     a client on one server (RAII over dlock_client)
 *   dlock::rlock      an RLock, fair lock or fenced lock (dlock_lock); not
 *                     "lock": a class cannot have a member lock() of its name
 *   dlock::multilock  several locks held as one (dlock_multilock)
 *   dlock::redlock    one lock on a quorum of servers (dlock_redlock)
 *   dlock::rwlock     a read-write lock: two rlocks, read and write halves
 *   dlock::semaphore  a semaphore, plain or with expirable permits
 *                     (dlock::semaphore_guard, dlock::permit)
 *   dlock::countdown_latch  a count-down latch (dlock_countdown)
 *
 * The locks (an rwlock's two halves too) meet the standard Lockable and
 * TimedLockable requirements (an rwlock: SharedTimedLockable), so std::lock_guard, std::unique_lock, std::scoped_lock (and
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
 * acquire_async() and release_async() of the locks, and the *_async() of
 * a semaphore and a latch, return a dlock::async_op for co_await; see
 * dlock/cpp/async.hpp.
 *
 * The classes, a header each under dlock/cpp/ (each compiles alone):
 *   error.hpp     dlock::error, dlock::errc, dlock::category()
 *   client.hpp    dlock::client
 *   lock.hpp      dlock::rlock
 *   multilock.hpp dlock::multilock
 *   redlock.hpp   dlock::redlock
 *   rwlock.hpp    dlock::rwlock
 *   semaphore.hpp dlock::semaphore, dlock::semaphore_guard, dlock::permit
 *   countdown.hpp dlock::countdown_latch
 *   async.hpp     dlock::async_op, dlock::async_result (C++20)
 */
#ifndef DLOCK_HPP
#define DLOCK_HPP

#include "dlock/cpp/error.hpp"
#include "dlock/cpp/client.hpp"
#include "dlock/cpp/lock.hpp"
#include "dlock/cpp/multilock.hpp"
#include "dlock/cpp/redlock.hpp"
#include "dlock/cpp/rwlock.hpp"
#include "dlock/cpp/semaphore.hpp"
#include "dlock/cpp/countdown.hpp"

#endif
