# SPDX-License-Identifier: BSD-3-Clause
# Run by cpack (CPACK_PRE_BUILD_SCRIPTS, set in cmake/package.cmake) on the
# staged files of every component before they are packed: what Debian wants of
# a package that dlock's install rules leave to the packager. Its ELF files are
# stripped as dh_strip strips them (debug symbols, .comment and .note), each
# package gets
# /usr/share/doc/<package>/copyright and a changelog (a native package's: one
# entry, for this version), and its man pages are gzipped (-n: no name or time
# stamp in the file). The changelog's date is SOURCE_DATE_EPOCH's when that is
# set (string(TIMESTAMP) reads it), for a reproducible package.
if(NOT CPACK_GENERATOR STREQUAL "DEB")
  return()
endif()
if(NOT CPACK_DLOCK_INSTALL_PREFIX STREQUAL "/usr")
  message(FATAL_ERROR "dlock: this build was configured with the prefix "
    "${CPACK_DLOCK_INSTALL_PREFIX}; a Debian package needs /usr (the multiarch library "
    "directory, no rpath): configure a build with -DCMAKE_INSTALL_PREFIX=/usr for cpack -G DEB, "
    "or run ci/packages.sh")
endif()
find_program(_dlock_gzip gzip REQUIRED)

function(dlock_gzip file)
  execute_process(COMMAND "${_dlock_gzip}" -9nf "${file}" RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "dlock: gzip ${file} failed (${status})")
  endif()
endfunction()

# dlock_strip FILE: by kind, as dh_strip does: an archive keeps its symbols.
function(dlock_strip file)
  execute_process(COMMAND file -b "${file}" OUTPUT_VARIABLE kind)
  set(args --remove-section=.comment --remove-section=.note)
  if(kind MATCHES "current ar archive")
    list(APPEND args --strip-debug --enable-deterministic-archives)
  elseif(kind MATCHES "shared object" AND NOT kind MATCHES "executable")
    list(APPEND args --strip-unneeded)
  elseif(NOT kind MATCHES "^ELF")
    return()
  endif()
  execute_process(COMMAND "${CPACK_DLOCK_STRIP}" ${args} "${file}" RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "dlock: strip ${file} failed (${status})")
  endif()
endfunction()

string(TIMESTAMP _date "%a, %d %b %Y %H:%M:%S +0000" UTC)
foreach(_comp IN LISTS CPACK_COMPONENTS_ALL)
  set(_root "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/${_comp}")
  if(NOT IS_DIRECTORY "${_root}")
    continue()
  endif()
  string(TOUPPER "${_comp}" _upper)
  set(_package "${CPACK_DEBIAN_${_upper}_PACKAGE_NAME}")
  file(GLOB_RECURSE _files "${_root}/*")
  foreach(_file IN LISTS _files)
    if(NOT IS_SYMLINK "${_file}")
      dlock_strip("${_file}")
    endif()
  endforeach()
  set(_doc "${_root}${CPACK_PACKAGING_INSTALL_PREFIX}/share/doc/${_package}")
  file(MAKE_DIRECTORY "${_doc}")
  configure_file("${CPACK_DLOCK_LICENSE_FILE}" "${_doc}/copyright" COPYONLY)
  file(WRITE "${_doc}/changelog"
    "dlock (${CPACK_PACKAGE_VERSION}) unstable; urgency=medium\n\n"
    "  * dlock ${CPACK_PACKAGE_VERSION}, packaged with CPack from the dlock sources.\n\n"
    " -- ${CPACK_DEBIAN_PACKAGE_MAINTAINER}  ${_date}\n")
  dlock_gzip("${_doc}/changelog")
  file(GLOB_RECURSE _pages "${_root}${CPACK_PACKAGING_INSTALL_PREFIX}/share/man/*.[1-9]")
  foreach(_page IN LISTS _pages)
    dlock_gzip("${_page}")
  endforeach()
endforeach()
