#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Install dlock into a temporary prefix and build examples/hello_lock.c against
# the installed copy the ways a user would: pkg-config (run through
# LD_LIBRARY_PATH, and through an rpath as docs/install.md shows), find_package
# with dlock::dlock, and find_package with dlock::dlock_static; then as a
# subproject, add_subdirectory(dlock). The event-loop adapters too, when
# libuv or libevent is here: examples/uv_teardown.c with pkg-config
# dlock-uv, and find_package(dlock COMPONENTS uv libevent) with dlock::uv
# and dlock::libevent; libdlock.so must link neither loop library. Each
# binary must load and fail cleanly against an unreachable server. Also checked: every installed version (dlock.pc,
# the CMake package, the command, the man page) is project(VERSION)'s, and
# dlock.pc's own Cflags name no dependency's directories.
#
#   ci/install-check.sh [BUILD_DIR]   (default: a fresh build in the temp dir)
#
# With BUILD_DIR, that already-configured build tree is installed instead of a
# new one being built. CMAKE=/path/to/cmake runs every CMake step with that
# one (to check the minimum version CMakeLists.txt declares).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
jobs=$(nproc 2>/dev/null || echo 2)
cmake=${CMAKE:-cmake}
version=$(sed -n 's/^project(dlock VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
[ -n "$version" ] || { echo "install-check: no project(dlock VERSION ...) in CMakeLists.txt" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-install-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
unreachable=redis://127.0.0.1:1

step() { printf '\n--- install-check: %s\n' "$*"; }

# quiet CMD...: run CMD, show its output only if it fails.
quiet() {
	local log=$tmp/quiet.log
	if ! "$@" >"$log" 2>&1; then
		cat "$log" >&2
		echo "install-check: failed: $*" >&2
		exit 1
	fi
}

if [ $# -ge 1 ]; then
	build=$1
	step "installing $build into $prefix"
else
	build=$tmp/build
	step "building dlock into $build"
	quiet "$cmake" -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF
	quiet "$cmake" --build "$build" -j"$jobs"
	step "installing into $prefix"
fi
echo "install-check: $("$cmake" --version | head -1)"
quiet "$cmake" --install "$build" --prefix "$prefix"

libdir=$(dirname "$(find "$prefix" -name 'libdlock.so' -print -quit)")
for f in "$prefix/include/dlock.h" "$prefix/include/dlock.hpp" "$prefix/include/dlock/lock.h" \
	"$prefix/include/dlock/cpp/lock.hpp" \
	"$libdir/libdlock.a" "$libdir/pkgconfig/dlock.pc" "$libdir/cmake/dlock/dlockConfig.cmake" \
	"$libdir/cmake/dlock/dlockConfigVersion.cmake" "$libdir/cmake/dlock/dlockTargets.cmake"; do
	[ -e "$f" ] || { echo "install-check: not installed: $f" >&2; exit 1; }
done

# The event-loop adapters: installed (library, header, .pc, CMake export)
# when their loop library is here to build them; libdlock.so links neither.
adapters=()
pkg-config --exists libuv && adapters+=(uv)
pkg-config --exists libevent && adapters+=(libevent)
for a in ${adapters[@]+"${adapters[@]}"}; do
	for f in "$prefix/include/dlock/$a.h" "$libdir/libdlock-$a.a" "$libdir/pkgconfig/dlock-$a.pc" \
		"$libdir/cmake/dlock/dlock-${a}Targets.cmake"; do
		[ -e "$f" ] || { echo "install-check: the $a adapter: not installed: $f" >&2; exit 1; }
	done
done
echo "install-check: adapters installed: ${adapters[*]:-none (neither libuv nor libevent is here)}"
if needed=$(readelf -d "$libdir/libdlock.so" | grep NEEDED) && grep -E 'libuv|libevent' <<<"$needed"; then
	echo "install-check: libdlock.so links a loop library (the adapters are libdlock-uv.a, libdlock-libevent.a)" >&2
	exit 1
fi

step "versions: project(VERSION) is $version"
# expect_version WHAT ACTUAL
expect_version() {
	if [ "$2" != "$version" ]; then
		echo "install-check: $1 says '$2', project(VERSION) is $version" >&2
		exit 1
	fi
	echo "install-check: $1: $2"
}
expect_version dlock.pc "$(sed -n 's/^Version: //p' "$libdir/pkgconfig/dlock.pc")"
expect_version dlockConfigVersion.cmake \
	"$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$libdir/cmake/dlock/dlockConfigVersion.cmake")"
expect_version "libdlock.so real name" \
	"$(basename "$(readlink -f "$libdir/libdlock.so")" | sed 's/^libdlock\.so\.//')"
if [ -x "$prefix/bin/dlock" ]; then
	expect_version "dlock --version" \
		"$(LD_LIBRARY_PATH="$libdir" "$prefix/bin/dlock" --version | sed 's/^dlock //')"
	expect_version "man page" \
		"$(find "$prefix" -name dlock.1 -exec sed -n 's/^\.TH .*"dlock \([^"]*\)".*/\1/p' {} +)"
fi
# The public headers do not include hiredis: `pkg-config --cflags`
# names only dlock's include directory (no Requires.private to bring theirs).
cflags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags dlock | sed "s/ *$//")
if [ "$cflags" != "-I$prefix/include" ]; then
	echo "install-check: pkg-config --cflags dlock: '$cflags' (expected only -I$prefix/include)" >&2
	exit 1
fi
if grep -rlE '#[[:space:]]*include[[:space:]]*[<"](hiredis|uuid)' "$prefix/include"; then
	echo "install-check: an installed public header includes hiredis or uuid" >&2
	exit 1
fi

# run_unreachable NAME BINARY [LIBRARY_PATH]: it must start (the library
# loads; LIBRARY_PATH, default the installed libdir, is LD_LIBRARY_PATH for
# it), fail with a non-zero status, and name the unreachable node in its error
# line.
run_unreachable() {
	local name=$1 bin=$2 ldpath=${3-$libdir} out status=0 ld=(--unset=LD_LIBRARY_PATH)
	[ -z "$ldpath" ] || ld=(LD_LIBRARY_PATH="$ldpath")
	out=$(env "${ld[@]}" timeout 30 "$bin" "$unreachable" 2>&1 </dev/null) || status=$?
	if [ "$status" -eq 0 ]; then
		echo "install-check: $name: exit 0 against $unreachable (expected a failure)" >&2
		exit 1
	fi
	if [ "$status" -ge 124 ]; then
		echo "install-check: $name: did not run or hung (status $status): $out" >&2
		exit 1
	fi
	if ! grep -q '127\.0\.0\.1:1\b' <<<"$out"; then
		echo "install-check: $name: error does not name 127.0.0.1:1: $out" >&2
		exit 1
	fi
	echo "install-check: $name: ok (exit $status: $out)"
}

step "pkg-config: cc hello_lock.c \$(pkg-config --cflags --libs dlock)"
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
echo "pkg-config --cflags --libs dlock: $(pkg-config --cflags --libs dlock)"
# shellcheck disable=SC2046  # word splitting of the flags is intended
cc -std=c99 -Wall -Wextra -Werror -o "$tmp/hello_pc" "$root/examples/hello_lock.c" \
	$(pkg-config --cflags --libs dlock)
deps=$(LD_LIBRARY_PATH="$libdir" ldd "$tmp/hello_pc")
grep -q "$libdir/libdlock.so" <<<"$deps" || {
	echo "install-check: hello_pc does not load the installed libdlock.so:" >&2
	echo "$deps" >&2
	exit 1
}
run_unreachable pkg-config "$tmp/hello_pc"

step "pkg-config with an rpath (docs/install.md's command), run without LD_LIBRARY_PATH"
# shellcheck disable=SC2046  # word splitting of the flags is intended
cc -o "$tmp/hello_rpath" "$root/examples/hello_lock.c" $(pkg-config --cflags --libs dlock) \
	-Wl,-rpath,"$(pkg-config --variable=libdir dlock)"
deps=$(env --unset=LD_LIBRARY_PATH ldd "$tmp/hello_rpath")
grep -q "$libdir/libdlock.so" <<<"$deps" || {
	echo "install-check: hello_rpath does not find the installed libdlock.so by its rpath:" >&2
	echo "$deps" >&2
	exit 1
}
run_unreachable pkg-config-rpath "$tmp/hello_rpath" ""

step "pkg-config --static: the archive with hiredis and pthreads"
# shellcheck disable=SC2046  # word splitting of the flags is intended
cc -std=c99 -Wall -Wextra -Werror -o "$tmp/hello_pc_static" "$root/examples/hello_lock.c" \
	$(pkg-config --cflags dlock) "$libdir/libdlock.a" $(pkg-config --static --libs dlock | sed 's/-ldlock//')
if ldd "$tmp/hello_pc_static" | grep -q libdlock; then
	echo "install-check: hello_pc_static is linked to a shared libdlock" >&2
	exit 1
fi
run_unreachable pkg-config-static "$tmp/hello_pc_static" ""

if [[ " ${adapters[*]-} " == *" uv "* ]]; then
	step "pkg-config: cc uv_teardown.c \$(pkg-config --cflags --libs dlock-uv)"
	echo "pkg-config --cflags --libs dlock-uv: $(pkg-config --cflags --libs dlock-uv)"
	# shellcheck disable=SC2046  # word splitting of the flags is intended
	cc -std=c99 -Wall -Wextra -Werror -o "$tmp/uv_pc" "$root/examples/uv_teardown.c" \
		$(pkg-config --cflags --libs dlock-uv)
	nm "$tmp/uv_pc" | grep -q ' T dlock_uv_new$' ||
		{ echo "install-check: uv_pc has no dlock_uv_new of libdlock-uv.a" >&2; exit 1; }
	run_unreachable pkg-config-dlock-uv "$tmp/uv_pc"
fi

step "find_package(dlock): dlock::dlock and dlock::dlock_static"
mkdir -p "$tmp/consumer"
cp "$root/examples/hello_lock.c" "$tmp/consumer/"
cat >"$tmp/consumer/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(dlock_consumer LANGUAGES C)
find_package(dlock ${version%.*} REQUIRED)
message(STATUS "found dlock \${dlock_VERSION} in \${dlock_DIR}")
add_executable(hello hello_lock.c)
target_link_libraries(hello PRIVATE dlock::dlock)
add_executable(hello_static hello_lock.c)
target_link_libraries(hello_static PRIVATE dlock::dlock_static)
if(DLOCK_ADAPTERS)
  find_package(dlock ${version%.*} REQUIRED COMPONENTS \${DLOCK_ADAPTERS})
endif()
if(TARGET dlock::uv)
  add_executable(uv_teardown uv_teardown.c)
  target_link_libraries(uv_teardown PRIVATE dlock::uv)
endif()
if(TARGET dlock::libevent)
  add_executable(event_locks event_locks.c)
  target_link_libraries(event_locks PRIVATE dlock::libevent)
endif()
CMAKE
cp "$root/examples/uv_teardown.c" "$root/examples/event_locks.c" "$tmp/consumer/"
quiet "$cmake" -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCMAKE_C_FLAGS="-Wall -Wextra -Werror" -DDLOCK_ADAPTERS="$(IFS=';'; echo "${adapters[*]-}")"
grep 'found dlock' "$tmp/quiet.log"
quiet "$cmake" --build "$tmp/consumer/build" -j"$jobs"

deps=$(ldd "$tmp/consumer/build/hello_static")
if grep -q libdlock <<<"$deps"; then
	echo "install-check: hello_static is linked to a shared libdlock" >&2
	exit 1
fi
run_unreachable find_package-shared "$tmp/consumer/build/hello"
run_unreachable find_package-static "$tmp/consumer/build/hello_static"
for a in ${adapters[@]+"${adapters[@]}"}; do
	bin=$tmp/consumer/build/uv_teardown
	[ "$a" = uv ] || bin=$tmp/consumer/build/event_locks
	[ -x "$bin" ] || { echo "install-check: find_package(dlock COMPONENTS $a) built no ${bin##*/}" >&2; exit 1; }
	run_unreachable "find_package-dlock::$a" "$bin"
done

step "add_subdirectory(dlock) in a parent project with no build type"
# The parent's choices stand: no build type is forced on it, and dlock's tests,
# examples and install rules stay off (its Criterion is not needed).
mkdir -p "$tmp/parent"
cp "$root/examples/hello_lock.c" "$tmp/parent/"
cat >"$tmp/parent/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(dlock_parent LANGUAGES C)
add_subdirectory(${DLOCK_SOURCE_DIR} dlock)
add_executable(hello hello_lock.c)
target_link_libraries(hello PRIVATE dlock::dlock)
add_executable(hello_static hello_lock.c)
target_link_libraries(hello_static PRIVATE dlock::dlock_static)
install(TARGETS hello_static DESTINATION bin)
CMAKE
quiet "$cmake" -S "$tmp/parent" -B "$tmp/parent/build" -DDLOCK_SOURCE_DIR="$root" \
	-DCMAKE_C_FLAGS="-Wall -Wextra -Werror"
cache=$tmp/parent/build/CMakeCache.txt
for want in CMAKE_BUILD_TYPE:STRING= DLOCK_BUILD_TESTS:BOOL=OFF DLOCK_BUILD_EXAMPLES:BOOL=OFF \
	DLOCK_INSTALL:BOOL=OFF; do
	grep -qxF "$want" "$cache" || {
		echo "install-check: add_subdirectory: expected $want in the cache, found: $(grep "^${want%%:*}:" "$cache")" >&2
		exit 1
	}
done
quiet "$cmake" --build "$tmp/parent/build" -j"$jobs"
quiet "$cmake" --install "$tmp/parent/build" --prefix "$tmp/parent/prefix"
installed=$(cd "$tmp/parent/prefix" && find . -type f -o -type l | sort)
if [ "$installed" != ./bin/hello_static ]; then
	echo "install-check: add_subdirectory: the parent's install put in more than its own program:" >&2
	echo "$installed" >&2
	exit 1
fi
run_unreachable add_subdirectory-shared "$tmp/parent/build/hello" ""
run_unreachable add_subdirectory-static "$tmp/parent/build/hello_static" ""

step "passed"
