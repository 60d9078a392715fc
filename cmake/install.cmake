# SPDX-License-Identifier: BSD-3-Clause
# Installation: the shared and static libraries, the public headers, a CMake
# package (find_package(dlock) -> dlock::dlock, dlock::dlock_static, and
# dlock::uv, dlock::libevent when built), pkg-config files (dlock.pc,
# dlock-uv.pc, dlock-libevent.pc) and the dlock command with its man page and
# its bash and zsh completion.
# Included from the top-level CMakeLists.txt when DLOCK_INSTALL is on.
#
# Three components, split as Debian splits a library (cmake/package.cmake
# makes one package of each; `cmake --install build --component NAME` installs
# one):
#   runtime  the shared library and its soname link, nothing else
#   dev      headers, the unversioned .so link, the static library, dlock.pc
#            and the CMake package, and the adapters' static libraries
#            (libdlock-uv.a, libdlock-libevent.a) with their .pc files
#   cli      the dlock command, its man page and its shell completion
include(CMakePackageConfigHelpers)

set(DLOCK_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/dlock
    CACHE STRING "Where dlockConfig.cmake is installed, relative to the prefix")

# dlock_objects is not installed: both libraries are built from its object
# files and name only imported targets (or plain library names) in their
# install interface, so the export set holds just these two.
# The unversioned libdlock.so link is for building only: it goes with dev.
install(TARGETS dlock dlock_static
  EXPORT dlockTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)

install(FILES ${PROJECT_SOURCE_DIR}/include/dlock.h ${PROJECT_SOURCE_DIR}/include/dlock.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
# An adapter's header goes with its library: without it, it declares
# functions nothing defines.
set(_dlock_headers_left_out "")
foreach(_dlock_adapter uv libevent)
  if(NOT _dlock_adapter IN_LIST DLOCK_ADAPTERS)
    list(APPEND _dlock_headers_left_out PATTERN ${_dlock_adapter}.h EXCLUDE)
  endif()
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/dlock
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp" ${_dlock_headers_left_out})
if(DLOCK_GENERATED_INCLUDE_DIR)
  install(FILES ${DLOCK_GENERATED_INCLUDE_DIR}/dlock/version.h
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dlock COMPONENT dev)
endif()

# The command and its man page, whose .TH line is given this version.
if(TARGET dlock_cli)
  install(TARGETS dlock_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
  set(_dlock_man ${PROJECT_SOURCE_DIR}/doc/dlock.1)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_dlock_man})
  file(READ ${_dlock_man} _dlock_man_text)
  string(REGEX REPLACE "(\\.TH [^\n]*\")dlock [^\"]*\"" "\\1dlock ${PROJECT_VERSION}\""
         _dlock_man_stamped "${_dlock_man_text}")
  if(_dlock_man_stamped STREQUAL _dlock_man_text AND NOT _dlock_man_text MATCHES "\"dlock ${PROJECT_VERSION}\"")
    message(WARNING "dlock: doc/dlock.1 has no .TH line with \"dlock VERSION\": installed as it is")
  endif()
  # Written through configure_file so that an unchanged page is not rewritten.
  file(WRITE ${PROJECT_BINARY_DIR}/man/dlock.1.tmp "${_dlock_man_stamped}")
  configure_file(${PROJECT_BINARY_DIR}/man/dlock.1.tmp ${PROJECT_BINARY_DIR}/man/dlock.1 COPYONLY)
  install(FILES ${PROJECT_BINARY_DIR}/man/dlock.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT cli)
  # Shell completion, where bash-completion and zsh look by default.
  install(FILES ${PROJECT_SOURCE_DIR}/contrib/completion/dlock.bash
    DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME dlock COMPONENT cli)
  install(FILES ${PROJECT_SOURCE_DIR}/contrib/completion/_dlock
    DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/site-functions COMPONENT cli)
endif()

install(EXPORT dlockTargets
  FILE dlockTargets.cmake
  NAMESPACE dlock::
  DESTINATION ${DLOCK_INSTALL_CMAKEDIR} COMPONENT dev)

# The adapters (cmake/adapters.cmake): each static library with an export
# set of its own, dlock-NAMETargets.cmake, which dlockConfig.cmake loads when
# the loop library is found (find_package(dlock COMPONENTS uv) insists).
foreach(_dlock_adapter ${DLOCK_ADAPTERS})
  install(TARGETS dlock_${_dlock_adapter}
    EXPORT dlock-${_dlock_adapter}Targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
  install(EXPORT dlock-${_dlock_adapter}Targets
    FILE dlock-${_dlock_adapter}Targets.cmake
    NAMESPACE dlock::
    DESTINATION ${DLOCK_INSTALL_CMAKEDIR} COMPONENT dev)
endforeach()

# dlockConfig.cmake finds hiredis with this module (hiredis 0.14 installs
# no CMake package with a target).
install(FILES
  ${PROJECT_SOURCE_DIR}/cmake/Findhiredis.cmake
  DESTINATION ${DLOCK_INSTALL_CMAKEDIR} COMPONENT dev)

# What dlockConfig.cmake and dlock.pc say of TLS's libraries.
if(DLOCK_TLS_LIBS)
  set(DLOCK_TLS_FOUND_FOR_CONFIG TRUE)
  set(DLOCK_PC_TLS_LIBS " -lssl -lcrypto")
else()
  set(DLOCK_TLS_FOUND_FOR_CONFIG FALSE)
  set(DLOCK_PC_TLS_LIBS "")
endif()
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/dlockConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dlockConfig.cmake
  INSTALL_DESTINATION ${DLOCK_INSTALL_CMAKEDIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/dlockConfig.cmake
  ${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
  DESTINATION ${DLOCK_INSTALL_CMAKEDIR} COMPONENT dev)

# pkg-config. The file is written at install time so that its prefix is the
# one actually installed to (`cmake --install build --prefix DIR` included),
# not the one the build was configured with.
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(DLOCK_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(DLOCK_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(DLOCK_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(DLOCK_PC_LIBDIR "\${exec_prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
# Configure everything but the prefix now; @DLOCK_PC_PREFIX@ survives this
# pass (it is replaced by itself) and is filled in by the install script.
set(DLOCK_PC_PREFIX "@DLOCK_PC_PREFIX@")
# dlock.pc, and dlock-NAME.pc for each adapter (Requires: dlock and its loop
# library, whose headers the adapter's header includes).
set(_dlock_pcs dlock)
configure_file(${PROJECT_SOURCE_DIR}/cmake/dlock.pc.in ${PROJECT_BINARY_DIR}/dlock.pc.in @ONLY)
foreach(_dlock_adapter ${DLOCK_ADAPTERS})
  set(DLOCK_ADAPTER ${_dlock_adapter})
  set(DLOCK_ADAPTER_MODULE ${_dlock_adapter})
  if(_dlock_adapter STREQUAL "uv")
    set(DLOCK_ADAPTER_MODULE libuv)
  endif()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/dlock-adapter.pc.in
    ${PROJECT_BINARY_DIR}/dlock-${_dlock_adapter}.pc.in @ONLY)
  list(APPEND _dlock_pcs dlock-${_dlock_adapter})
endforeach()
foreach(_dlock_pc ${_dlock_pcs})
  install(CODE "
    set(DLOCK_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${PROJECT_BINARY_DIR}/${_dlock_pc}.pc.in\" \"${PROJECT_BINARY_DIR}/${_dlock_pc}.pc\" @ONLY)
  " COMPONENT dev)
  install(FILES ${PROJECT_BINARY_DIR}/${_dlock_pc}.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
endforeach()
