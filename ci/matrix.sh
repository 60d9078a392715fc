#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dlock's compiler, sanitizer and valgrind matrix (ci/test.sh runs it after
# the plain build, which is gcc's; it can also be run alone). Separate build
# directories:
#   build-clang  the plain suite (ctest -LE stress) built with clang and
#                clang++, warnings as errors
#   build-asan   the whole test suite under AddressSanitizer + UBSan
#   build-tsan   the stress programs under ThreadSanitizer (Criterion's test
#                runner cannot start under TSan, so the threaded paths are
#                exercised by tests/stress/, which needs no Criterion)
#   valgrind     memcheck over the unit tests, the stress programs and the
#                allocation-failure tests of the plain build (children traced)
#   build-fuzz   the libFuzzer targets (clang), FUZZ_SECONDS each (default 30)
#                from the seed corpora in fuzz/corpus
# Exits non-zero when any part fails.
set -euo pipefail
exec </dev/null

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
plain=${BUILD_DIR:-build-ci}
case $plain in /*) ;; *) plain=$root/$plain ;; esac
jobs=$(nproc 2>/dev/null || echo 2)
failed=()

section() { printf '\n==== %s ====\n' "$1"; }

configure_and_build() { # dir sanitizer [label: build only the tests that carry it]
	local targets=()
	cmake -S "$root" -B "$1" -DCMAKE_BUILD_TYPE=Debug -DDLOCK_WERROR=ON \
		-DDLOCK_SANITIZER="$2" -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_INTEROP_TESTS=OFF >/dev/null
	if [ -n "${3:-}" ]; then
		# Each test runs the program of its name: build those, not the whole tree.
		mapfile -t targets < <(cd "$1" && ctest -N -L "$3" | sed -n 's/^ *Test *#[0-9]*: //p')
		[ ${#targets[@]} -gt 0 ] || { echo "matrix: no test labelled $3" >&2; return 1; }
		targets=(--target "${targets[@]}")
	fi
	cmake --build "$1" -j"$jobs" "${targets[@]}"
}

section "clang: the plain suite (build-clang)"
if CC=clang CXX=clang++ cmake -S "$root" -B "$root/build-clang" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DDLOCK_WERROR=ON -DDLOCK_INTEROP_TESTS=OFF >/dev/null && cmake --build "$root/build-clang" -j"$jobs"; then
	if ! (cd "$root/build-clang" && ctest --output-on-failure -j2 -LE stress); then
		failed+=("clang")
	fi
else
	failed+=("clang build")
fi

section "ASan + UBSan: the whole suite (build-asan)"
configure_and_build "$root/build-asan" address,undefined
if ! (cd "$root/build-asan" &&
	ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:strict_string_checks=1:malloc_context_size=3 \
	LSAN_OPTIONS=suppressions=$root/ci/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	ctest --output-on-failure -j2); then
	failed+=("asan")
fi

section "TSan: stress programs (build-tsan)"
configure_and_build "$root/build-tsan" thread stress
if ! (cd "$root/build-tsan" &&
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	ctest --output-on-failure -L stress); then
	failed+=("tsan")
fi

section "valgrind memcheck (plain build: unit, stress, allocation failures)"
# Criterion runs each test in a child process whose valgrind verdict does not
# reach the runner's exit status: every process writes its own log, and any
# log with an error or a definite leak fails the run. The redis-servers the
# tests start are not traced (--trace-children-skip).
vglogs=$plain/valgrind-logs
rm -rf "$vglogs" && mkdir -p "$vglogs"
vg=(valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
	--show-leak-kinds=definite --trace-children=yes --trace-children-skip='*redis-server*,*redis-cli*'
	--suppressions="$root/ci/valgrind.supp")
for t in "$plain"/tests/unit_test_* "$plain"/tests/stress_* "$plain"/tests/integration_test_alloc_failures; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	echo "-- $name"
	DLOCK_STRESS_SLOW=20 "${vg[@]}" --log-file="$vglogs/$name.%p.log" "$t" >"$vglogs/$name.out" 2>&1 ||
		failed+=("valgrind $name (exit status)")
	tail -1 "$vglogs/$name.out"
	bad=$(grep -lE "ERROR SUMMARY: [1-9]|definitely lost: [1-9]" "$vglogs/$name".*.log 2>/dev/null || true)
	if [ -n "$bad" ]; then
		for f in $bad; do tail -30 "$f"; done
		failed+=("valgrind $name")
	fi
done

section "libFuzzer: URI parser, reply mapping, slot maps (build-fuzz)"
fuzz_seconds=${FUZZ_SECONDS:-30}
if CC=clang cmake -S "$root" -B "$root/build-fuzz" -DCMAKE_BUILD_TYPE=Debug -DDLOCK_FUZZ=ON \
	-DDLOCK_SANITIZER=address,undefined -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF \
	-DDLOCK_BUILD_CLI=OFF >/dev/null && cmake --build "$root/build-fuzz" -j"$jobs" >/dev/null; then
	for target in uri reply slotmap; do
		work=$root/build-fuzz/corpus-$target
		mkdir -p "$work"
		echo "-- fuzz_$target for ${fuzz_seconds}s"
		if ! (cd "$root/build-fuzz" && "./fuzz/fuzz_$target" -max_total_time="$fuzz_seconds" \
			-print_final_stats=1 "$work" "$root/fuzz/corpus/$target" >"fuzz-$target.log" 2>&1); then
			tail -30 "$root/build-fuzz/fuzz-$target.log"
			echo "a crash input is in build-fuzz/ (crash-*): add it to fuzz/corpus/$target" >&2
			failed+=("fuzz_$target")
		else
			grep -E "stat::number_of_executed_units|Done" "$root/build-fuzz/fuzz-$target.log" | tail -1
		fi
	done
else
	failed+=("fuzz build")
fi

if [ ${#failed[@]} -ne 0 ]; then
	printf '\n==== ci/matrix.sh: FAILED: %s ====\n' "${failed[*]}" >&2
	exit 1
fi
printf '\n==== ci/matrix.sh: PASSED ====\n'
