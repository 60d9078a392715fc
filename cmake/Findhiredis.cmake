# SPDX-License-Identifier: BSD-3-Clause
# Findhiredis: hiredis for users of the installed dlock package (dlockConfig.cmake
# finds it with find_dependency; dlock::dlock_static links it). Defines the
# imported target hiredis::hiredis and hiredis_FOUND, hiredis_LIBRARY,
# hiredis_INCLUDE_DIR (the directory that holds hiredis/hiredis.h).
#
# hiredis >= 1.0 installs a CMake package of its own, with the same target
# name: it is used when found. hiredis 0.14 (Debian 12's) has none usable, so
# the library is looked for directly, with pkg-config's directories as hints.
# Only the library is required: dlock's public headers do not include hiredis.
include(FindPackageHandleStandardArgs)

if(NOT TARGET hiredis::hiredis)
  find_package(hiredis CONFIG QUIET)
endif()

if(TARGET hiredis::hiredis)
  set(hiredis_LIBRARY hiredis::hiredis)
else()
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(PC_hiredis QUIET hiredis)
  endif()
  find_library(hiredis_LIBRARY NAMES hiredis HINTS ${PC_hiredis_LIBRARY_DIRS} ${PC_hiredis_LIBDIR})
  # pkg-config's includedir is .../include/hiredis on some systems, .../include on others.
  find_path(hiredis_INCLUDE_DIR hiredis/hiredis.h
            HINTS ${PC_hiredis_INCLUDEDIR} ${PC_hiredis_INCLUDEDIR}/.. ${PC_hiredis_INCLUDE_DIRS})
  mark_as_advanced(hiredis_LIBRARY hiredis_INCLUDE_DIR)
  if(PC_hiredis_VERSION)
    set(hiredis_VERSION ${PC_hiredis_VERSION})
  endif()
endif()

find_package_handle_standard_args(hiredis REQUIRED_VARS hiredis_LIBRARY VERSION_VAR hiredis_VERSION)

if(hiredis_FOUND AND NOT TARGET hiredis::hiredis)
  add_library(hiredis::hiredis UNKNOWN IMPORTED)
  set_target_properties(hiredis::hiredis PROPERTIES IMPORTED_LOCATION "${hiredis_LIBRARY}")
  if(hiredis_INCLUDE_DIR)
    set_target_properties(hiredis::hiredis PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${hiredis_INCLUDE_DIR}")
  endif()
endif()
