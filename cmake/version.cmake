# SPDX-License-Identifier: BSD-3-Clause
# <dlock/version.h> and project(VERSION). The version is set in one place, the
# top-level project() call; the header must say the same:
#   - include/dlock/version.h present (today): its DLOCK_VERSION_* numbers and
#     string are checked against project(VERSION); a mismatch stops the
#     configuration, so a release cannot ship two versions.
#   - include/dlock/version.h absent: the header is generated from
#     cmake/version.h.in into <build>/include/dlock/version.h, which the
#     targets then have on their include path and which is installed.
# Sets DLOCK_GENERATED_INCLUDE_DIR (empty when nothing is generated).
set(DLOCK_GENERATED_INCLUDE_DIR "")
set(_dlock_version_header ${PROJECT_SOURCE_DIR}/include/dlock/version.h)

if(EXISTS ${_dlock_version_header})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_dlock_version_header})
  file(STRINGS ${_dlock_version_header} _dlock_version_lines
       REGEX "^#define DLOCK_VERSION_(MAJOR|MINOR|PATCH|STRING) ")
  set(_dlock_expected
      "MAJOR=${PROJECT_VERSION_MAJOR}" "MINOR=${PROJECT_VERSION_MINOR}"
      "PATCH=${PROJECT_VERSION_PATCH}" "STRING=\"${PROJECT_VERSION}\"")
  set(_dlock_found "")
  foreach(_line IN LISTS _dlock_version_lines)
    if(_line MATCHES "^#define DLOCK_VERSION_([A-Z]+)[ \t]+([^ \t]+)")
      list(APPEND _dlock_found "${CMAKE_MATCH_1}=${CMAKE_MATCH_2}")
    endif()
  endforeach()
  foreach(_want IN LISTS _dlock_expected)
    if(NOT _want IN_LIST _dlock_found)
      message(FATAL_ERROR
        "dlock: include/dlock/version.h does not match project(VERSION ${PROJECT_VERSION}) "
        "in CMakeLists.txt: expected DLOCK_VERSION_${_want}, the header has: ${_dlock_found}.\n"
        "Set the same version in both (or remove the header: it is then generated).")
    endif()
  endforeach()
else()
  set(DLOCK_GENERATED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/generated/include)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/version.h.in
                 ${DLOCK_GENERATED_INCLUDE_DIR}/dlock/version.h @ONLY)
endif()
