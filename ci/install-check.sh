#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Install dlock into a temporary prefix and build examples/hello_lock.c against
# the installed copy the three ways a user would: pkg-config, find_package with
# dlock::dlock, and find_package with dlock::dlock_static. Each binary must
# load and fail cleanly against an unreachable server.
#
#   ci/install-check.sh [BUILD_DIR]   (default: a fresh build in the temp dir)
#
# With BUILD_DIR, that already-configured build tree is installed instead of a
# new one being built.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
jobs=$(nproc 2>/dev/null || echo 2)

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
	quiet cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF
	quiet cmake --build "$build" -j"$jobs"
	step "installing into $prefix"
fi
quiet cmake --install "$build" --prefix "$prefix"

libdir=$(dirname "$(find "$prefix" -name 'libdlock.so' -print -quit)")
for f in "$prefix/include/dlock.h" "$prefix/include/dlock/lock.h" "$libdir/libdlock.a" \
	"$libdir/pkgconfig/dlock.pc" "$libdir/cmake/dlock/dlockConfig.cmake" \
	"$libdir/cmake/dlock/dlockConfigVersion.cmake" "$libdir/cmake/dlock/dlockTargets.cmake"; do
	[ -e "$f" ] || { echo "install-check: not installed: $f" >&2; exit 1; }
done

# run_unreachable NAME BINARY: it must start (the library loads), fail with a
# non-zero status, and name the unreachable node in its error line.
run_unreachable() {
	local name=$1 bin=$2 out status=0
	out=$(LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		timeout 30 "$bin" "$unreachable" 2>&1 </dev/null) || status=$?
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

step "find_package(dlock): dlock::dlock and dlock::dlock_static"
mkdir -p "$tmp/consumer"
cp "$root/examples/hello_lock.c" "$tmp/consumer/"
cat >"$tmp/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(dlock_consumer LANGUAGES C)
find_package(dlock 0.1 REQUIRED)
message(STATUS "found dlock ${dlock_VERSION} in ${dlock_DIR}")
add_executable(hello hello_lock.c)
target_link_libraries(hello PRIVATE dlock::dlock)
add_executable(hello_static hello_lock.c)
target_link_libraries(hello_static PRIVATE dlock::dlock_static)
CMAKE
quiet cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCMAKE_C_FLAGS="-Wall -Wextra -Werror"
grep 'found dlock' "$tmp/quiet.log"
quiet cmake --build "$tmp/consumer/build" -j"$jobs"

deps=$(ldd "$tmp/consumer/build/hello_static")
if grep -q libdlock <<<"$deps"; then
	echo "install-check: hello_static is linked to a shared libdlock" >&2
	exit 1
fi
run_unreachable find_package-shared "$tmp/consumer/build/hello"
run_unreachable find_package-static "$tmp/consumer/build/hello_static"

step "passed"
