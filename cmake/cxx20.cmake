# SPDX-License-Identifier: BSD-3-Clause
# DLOCK_CXX20_COROUTINES: the C++ compiler builds C++20 coroutines with its
# C++20 flag alone, as the co_await part of <dlock.hpp> needs. The C++20 test
# and example are built only then (older compilers build the C++17 ones).
include(CheckCXXSourceCompiles)
if("cxx_std_20" IN_LIST CMAKE_CXX_COMPILE_FEATURES)
  set(CMAKE_REQUIRED_FLAGS "${CMAKE_CXX20_STANDARD_COMPILE_OPTION}")
  check_cxx_source_compiles([=[
#include <coroutine>
struct task {
  struct promise_type {
    task get_return_object() { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() {}
  };
};
task f() { co_await std::suspend_never{}; }
int main() { f(); return 0; }
]=] DLOCK_CXX20_COROUTINES)
  unset(CMAKE_REQUIRED_FLAGS)
else()
  set(DLOCK_CXX20_COROUTINES OFF)
endif()
