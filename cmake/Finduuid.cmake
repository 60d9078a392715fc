# SPDX-License-Identifier: BSD-3-Clause
# Finduuid: libuuid (util-linux) for users of the installed dlock package
# (dlockConfig.cmake finds it with find_dependency; dlock::dlock_static links
# it). libuuid installs no CMake package. Defines the imported target
# uuid::uuid and uuid_FOUND, uuid_LIBRARY, uuid_INCLUDE_DIR (the directory that
# holds uuid/uuid.h). Only the library is required: dlock's public headers do
# not include uuid.h.
include(FindPackageHandleStandardArgs)

if(TARGET uuid::uuid)
  set(uuid_LIBRARY uuid::uuid)
else()
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(PC_uuid QUIET uuid)
  endif()
  find_library(uuid_LIBRARY NAMES uuid HINTS ${PC_uuid_LIBRARY_DIRS} ${PC_uuid_LIBDIR})
  find_path(uuid_INCLUDE_DIR uuid/uuid.h HINTS ${PC_uuid_INCLUDEDIR} ${PC_uuid_INCLUDEDIR}/..)
  mark_as_advanced(uuid_LIBRARY uuid_INCLUDE_DIR)
  if(PC_uuid_VERSION)
    set(uuid_VERSION ${PC_uuid_VERSION})
  endif()
endif()

find_package_handle_standard_args(uuid REQUIRED_VARS uuid_LIBRARY VERSION_VAR uuid_VERSION)

if(uuid_FOUND AND NOT TARGET uuid::uuid)
  add_library(uuid::uuid UNKNOWN IMPORTED)
  set_target_properties(uuid::uuid PROPERTIES IMPORTED_LOCATION "${uuid_LIBRARY}")
  if(uuid_INCLUDE_DIR)
    set_target_properties(uuid::uuid PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${uuid_INCLUDE_DIR}")
  endif()
endif()
