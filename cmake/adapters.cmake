# SPDX-License-Identifier: BSD-3-Clause
# The event-loop adapters (docs/async.md): dlock/uv.h and dlock/libevent.h,
# each compiled into a static library of its own when its loop library is
# found with pkg-config:
#   libdlock-uv.a        dlock::uv        dlock-uv.pc        (libuv;   Debian: libuv1-dev)
#   libdlock-libevent.a  dlock::libevent  dlock-libevent.pc  (libevent; Debian: libevent-dev)
# libdlock itself links neither loop library. Each adapter links dlock::dlock
# and its loop library (PUBLIC: its header includes the loop's). They are
# users of the public API like the command (ci/layers.sh).
# Included from the top-level CMakeLists.txt; sets DLOCK_ADAPTERS to the
# names of those built.
set(DLOCK_ADAPTERS "")

# dlock_adapter(NAME MODULE PACKAGE): src/adapters/NAME.c into libdlock-NAME.a.
function(dlock_adapter name module package)
  string(TOUPPER "DLOCK_${name}_LOOP" prefix)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})
  if(NOT ${prefix}_FOUND)
    message(STATUS "dlock: ${module} not found (Debian: ${package}): libdlock-${name}.a "
      "(dlock/${name}.h) and its examples are not built")
    return()
  endif()
  add_library(dlock_${name} STATIC ${PROJECT_SOURCE_DIR}/src/adapters/${name}.c)
  add_library(dlock::${name} ALIAS dlock_${name})
  set_target_properties(dlock_${name} PROPERTIES OUTPUT_NAME dlock-${name} EXPORT_NAME ${name})
  target_compile_options(dlock_${name} PRIVATE ${DLOCK_WARNINGS})
  # <uv.h> needs POSIX types (pthread_rwlock_t) that strict C11 hides.
  target_compile_definitions(dlock_${name} PRIVATE _GNU_SOURCE)
  # The installed CMake package makes the same imported target
  # (cmake/dlockConfig.cmake.in), so its name is the same in both interfaces.
  target_link_libraries(dlock_${name} PUBLIC dlock PkgConfig::${prefix})
  message(STATUS "dlock: the ${module} adapter, libdlock-${name}.a")
  set(DLOCK_ADAPTERS ${DLOCK_ADAPTERS} ${name} PARENT_SCOPE)
endfunction()

dlock_adapter(uv libuv libuv1-dev)
dlock_adapter(libevent libevent libevent-dev)
