# SPDX-License-Identifier: BSD-3-Clause
# Debian packages, split as Debian splits a library, one per install component
# (cmake/install.cmake):
#   libdlock<SOVERSION>  runtime: the shared library and its soname link
#   libdlock-dev         dev: headers, libdlock.so, libdlock.a, dlock.pc, the
#                        CMake package, and the event-loop adapters
#                        (libdlock-uv.a, libdlock-libevent.a, their .pc files
#                        and CMake targets); depends on libdlock<SOVERSION> (= version)
#   dlock                cli: the command, its man page, its shell completion
#
#   cmake -S . -B build-deb -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
#         -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF
#   cmake --build build-deb -j && (cd build-deb && cpack -G DEB)
#
# The prefix /usr matters: GNUInstallDirs then puts the library in Debian's
# multiarch directory (lib/x86_64-linux-gnu) and the command gets no rpath.
# ci/packages.sh builds, checks, installs and removes them.
# (cmake/deb-finish.cmake stops cpack -G DEB on a build with another prefix.)
# CPACK_PRE_BUILD_SCRIPTS is 3.19's, CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
# 3.20's: an older CMake builds and installs dlock but makes no packages.
if(CMAKE_VERSION VERSION_LESS 3.20)
  message(STATUS "dlock: Debian packages (cpack -G DEB) need CMake >= 3.20; not set up")
  return()
endif()
set(CPACK_DLOCK_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")

set(DLOCK_DEB_MAINTAINER "dlock maintainers <maintainers@users.noreply.a-seed-811c45d0.example>"
  CACHE STRING "The Maintainer field of dlock's Debian packages")
set(DLOCK_DEB_HOMEPAGE "" CACHE STRING "The Homepage field of dlock's Debian packages (none if empty)")

set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VENDOR "the dlock authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${DLOCK_DEB_MAINTAINER}")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# The install scripts see the real prefix (/usr) and DESTDIR the staging
# directory: dlock.pc's prefix is written at install time and must say /usr.
set(CPACK_SET_DESTDIR ON)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
if(TARGET dlock_cli)
  list(APPEND CPACK_COMPONENTS_ALL cli)
endif()

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # name_version_arch.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${DLOCK_DEB_MAINTAINER}")
if(DLOCK_DEB_HOMEPAGE)
  set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${DLOCK_DEB_HOMEPAGE}")
endif()
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends from the ELF files' needs (dpkg-shlibdeps, from dpkg-dev).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)

set(_dlock_lib_package libdlock${DLOCK_SOVERSION})
# Each description: the synopsis line, then paragraphs (CPack indents them and
# turns the empty lines into " .").
set(_dlock_about "dlock gives C and C++ programs the distributed locks Java programs get from
Redisson, and speaks its wire format: a reentrant lock with lease renewal,
fair and fenced locks, read-write locks, semaphores, count-down latches,
MultiLock, and RedLock over a quorum of independent Redis servers.")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME ${_dlock_lib_package})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "Redisson-compatible distributed locks on Redis (shared library)
${_dlock_about}

This package holds the shared library.")
# A shlibs file (CPack makes one only for a package with a shared library),
# so that packages built against it depend on libdlockN (>= this version).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# dpkg runs ldconfig once after installing or removing it (CPack's postinst and
# postrm call it too; lintian only warns of that).
file(WRITE ${PROJECT_BINARY_DIR}/deb/runtime/triggers "activate-noawait ldconfig\n")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/deb/runtime/triggers)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libdlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The CMake package finds hiredis (and OpenSSL when built with TLS),
# and the static library links them: their -dev packages come along.
set(_dlock_dev_depends "${_dlock_lib_package} (= ${PROJECT_VERSION}), libhiredis-dev")
if(DLOCK_TLS_LIBS)
  string(APPEND _dlock_dev_depends ", libssl-dev")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${_dlock_dev_depends}")
# The adapters are static libraries for programs on libuv or libevent:
# theirs to install (dlock-uv.pc requires libuv); libdlock itself needs neither.
set(_dlock_dev_suggests "")
foreach(_dlock_adapter ${DLOCK_ADAPTERS})
  if(_dlock_adapter STREQUAL "uv")
    list(APPEND _dlock_dev_suggests libuv1-dev)
  elseif(_dlock_adapter STREQUAL "libevent")
    list(APPEND _dlock_dev_suggests libevent-dev)
  endif()
endforeach()
if(_dlock_dev_suggests)
  list(JOIN _dlock_dev_suggests ", " _dlock_dev_suggests)
  set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "${_dlock_dev_suggests}")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_DEV_DESCRIPTION "Redisson-compatible distributed locks on Redis (development files)
${_dlock_about}

This package holds the headers (with the C++ classes), the static library,
dlock.pc and the CMake package, and the libuv and libevent adapters: the
static libraries libdlock-uv.a and libdlock-libevent.a with dlock-uv.pc,
dlock-libevent.pc and the CMake targets dlock::uv and dlock::libevent.")

set(CPACK_DEBIAN_CLI_PACKAGE_NAME dlock)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_CLI_DESCRIPTION "Redisson-compatible distributed locks on Redis (command-line tool)
${_dlock_about}

This package holds the dlock command, which runs a program under a lock
(for cron jobs, migrations and deploy steps), with its man page and its
bash and zsh completion.")
# dpkg-shlibdeps runs in the component's staging directory; the library it
# needs is in the runtime one beside it. The dependency on it is stated here.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ../runtime${CPACK_PACKAGING_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR})
set(CPACK_DEBIAN_CLI_PACKAGE_DEPENDS "${_dlock_lib_package} (= ${PROJECT_VERSION})")

# After staging, before packing: what Debian wants of every package that
# CMake's install rules do not do (compressed man pages, a copyright file, a
# changelog).
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/deb-finish.cmake)
set(CPACK_DLOCK_LICENSE_FILE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_DLOCK_STRIP ${CMAKE_STRIP})

include(CPack)
