#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ci/abi-check.sh - libdlock.so's ABI against the committed baseline, with
# libabigail (Debian: abigail-tools; ci/deps.sh installs it).
#
#   ci/abi-check.sh             build libdlock.so, compare its ABI with
#                               abi/<soname>.abixml (abi/libdlock.so.1.abixml)
#   ci/abi-check.sh --update    write that baseline from the current code
#
# What it does: builds libdlock.so alone (Debug, -g -Og, source paths made
# relative with -ffile-prefix-map so that the dump names no checkout
# directory) into $ABI_BUILD_DIR (default build-abi), dumps its ABI with abidw
# and compares it with the baseline for its soname with abidiff. The ABI is
# what the public headers (include/dlock.h, include/dlock/*.h) declare: the
# exported functions and the types they reach. Structs and unions defined
# anywhere else are the library's own business (the opaque handles: struct
# dlock_client, dlock_lock, ... are defined in src/), and changes in them are
# not reported (abi/opaque.suppr).
#
# (Not `abidw --headers-dir include --drop-private-types`: libabigail tells a
# public header by its file name alone, so src/core/drive/client.h, the definition
# of the opaque struct dlock_client, counts as public beside
# include/dlock/client.h; and dropping the private types drops, with gcc, the
# handle parameters of the functions that take them.)
#
# The verdict:
#   incompatible   abidiff's ABIDIFF_ABI_INCOMPATIBLE_CHANGE bit (8), or any
#                  function or variable removed: FAILS. Restore the interface,
#                  or make it a new ABI: bump the SOVERSION (DLOCK_SOVERSION
#                  in CMakeLists.txt) and record the new
#                  soname's baseline with --update.
#   changed        an existing function or variable reaches a type that
#                  changed (a parameter's type, a public struct's layout, ...):
#                  abidiff cannot tell whether that is compatible. FAILS.
#                  If it is compatible by design, record it with --update;
#                  if not, it is incompatible (above).
#   added          only new functions or variables: PASSES, and lists them.
#                  --update records them, so that removing one later fails.
#   unchanged      PASSES.
# No baseline for the current soname: FAILS, saying to create it with
# --update. --update refuses to overwrite a baseline with an incompatible ABI
# (bump the SOVERSION instead) unless --force is given too.
#
# The baseline is x86_64 and gcc-built; abidiff compares meaning, not bytes,
# so another compiler (clang) or libabigail version reads the same.
set -euo pipefail
exec </dev/null

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd -P)
build=${ABI_BUILD_DIR:-build-abi}
case $build in /*) ;; *) build=$root/$build ;; esac
jobs=$(nproc 2>/dev/null || echo 2)
suppr=$root/abi/opaque.suppr

update=0
force=0
for arg in "$@"; do
	case $arg in
	--update) update=1 ;;
	--force) force=1 ;;
	-h | --help)
		sed -n '3,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
		exit 0
		;;
	*)
		echo "abi-check: unknown argument: $arg (usage: ci/abi-check.sh [--update [--force]])" >&2
		exit 2
		;;
	esac
done

for tool in abidw abidiff readelf; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "abi-check: $tool not found: install abigail-tools and binutils (ci/deps.sh does)" >&2
		exit 1
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-abi-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# quiet CMD...: run CMD, show its output only if it fails.
quiet() {
	if ! "$@" >"$tmp/quiet.log" 2>&1; then
		cat "$tmp/quiet.log" >&2
		echo "abi-check: failed: $*" >&2
		exit 1
	fi
}

echo "abi-check: building libdlock.so (Debug, -g -Og) in $build"
quiet cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -Og" \
	-DCMAKE_C_FLAGS="-ffile-prefix-map=$root/=" -DDLOCK_WERROR=OFF -DDLOCK_SANITIZER= \
	-DDLOCK_FUZZ=OFF -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_BUILD_CLI=OFF \
	-DDLOCK_INSTALL=OFF
quiet cmake --build "$build" -j"$jobs" --target dlock
lib=$build/libdlock.so
compiler=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
compiler=$("$compiler" --version 2>/dev/null | head -1)
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p')
[ -n "$soname" ] || { echo "abi-check: $lib has no SONAME" >&2; exit 1; }
baseline=$root/abi/$soname.abixml
rel=${baseline#"$root/"}

current=$tmp/current.abixml
abidw --no-corpus-path --no-comp-dir-path --no-elf-needed --drop-undefined-syms \
	--out-file "$current" "$lib"
if grep -qF "$root" "$current"; then
	echo "abi-check: the dump names the checkout directory ($root): -ffile-prefix-map did not apply" >&2
	exit 1
fi

# The baseline starts with comment lines (licence, origin) that abidiff, which
# tells an ABI file by its first element, does not accept: compared without.
strip_comments() { sed '/^<!--.*-->$/d' "$1"; }

# compare: abidiff baseline vs current into $tmp/report; sets status, removed,
# changed, added and verdict (incompatible, changed, added or unchanged).
compare() {
	strip_comments "$baseline" >"$tmp/baseline.abixml"
	status=0
	abidiff --suppressions "$suppr" "$tmp/baseline.abixml" "$current" >"$tmp/report" 2>&1 || status=$?
	if [ $((status & 3)) -ne 0 ]; then
		cat "$tmp/report" >&2
		echo "abi-check: abidiff failed (exit status $status)" >&2
		exit 1
	fi
	# "Functions changes summary: 1 Removed, 2 Changed (3 filtered out), 4 Added functions"
	# and the like for variables and for symbols without debug info.
	sum() {
		{ grep 'changes summary:' "$tmp/report" || true; } | { grep -oE "[0-9]+ $1" || true; } |
			awk '{ n += $1 } END { print n + 0 }'
	}
	removed=$(sum Removed)
	changed=$(sum Changed)
	added=$(sum Added)
	if [ $((status & 8)) -ne 0 ] || [ "$removed" -gt 0 ]; then
		verdict=incompatible
	elif [ "$changed" -gt 0 ]; then
		verdict=changed
	elif [ "$added" -gt 0 ] || [ "$status" -ne 0 ]; then
		verdict=added
	else
		verdict=unchanged
	fi
}

show_report() { sed 's/^/    /' "$tmp/report"; }

write_baseline() {
	mkdir -p "$root/abi"
	{
		echo '<!-- SPDX-License-Identifier: BSD-3-Clause -->'
		echo "<!-- $soname: the ABI baseline of ci/abi-check.sh, written by ci/abi-check.sh --update; do not edit. -->"
		echo "<!-- Dumped with $(abidw --version | head -1) from a $compiler build. -->"
		cat "$current"
	} >"$baseline"
	echo "abi-check: wrote $rel ($(grep -c '<function-decl .*elf-symbol-id=' "$current") exported functions); commit it"
}

if [ "$update" = 1 ]; then
	if [ -f "$baseline" ]; then
		compare
		if [ "$verdict" = incompatible ] && [ "$force" != 1 ]; then
			show_report
			cat >&2 <<EOF
abi-check: NOT updated: the current ABI is incompatible with $rel.
abi-check: An incompatible ABI is a new soname: bump the SOVERSION (DLOCK_SOVERSION in
abi-check: CMakeLists.txt), then run ci/abi-check.sh --update to record
abi-check: the new soname's baseline (and git rm the old one when nothing needs it).
abi-check: To overwrite this baseline anyway: ci/abi-check.sh --update --force.
EOF
			exit 1
		fi
		[ "$verdict" = unchanged ] || { echo "abi-check: recording these changes ($verdict):"; show_report; }
	fi
	write_baseline
	others=$(cd "$root" && ls abi/*.abixml 2>/dev/null | grep -vxF "$rel" || true)
	[ -z "$others" ] || echo "abi-check: other baselines, for earlier sonames: $others"
	exit 0
fi

if [ ! -f "$baseline" ]; then
	cat >&2 <<EOF
abi-check: FAILED: no ABI baseline for $soname ($rel).
abi-check: A new soname needs its baseline: run ci/abi-check.sh --update and commit $rel.
EOF
	exit 1
fi

compare
case $verdict in
unchanged)
	echo "abi-check: PASSED: the ABI of $soname is the baseline's ($rel)"
	;;
added)
	echo "abi-check: PASSED: compatible additions to $soname:"
	show_report
	echo "abi-check: (ci/abi-check.sh --update records them in $rel, so that removing one later fails)"
	;;
changed)
	show_report
	cat >&2 <<EOF
abi-check: FAILED: the ABI of $soname changed ($changed changed, $added added against $rel).
abi-check: Existing functions reach types that changed (report above); abidiff cannot tell
abi-check: whether that is compatible. If it is by design (say, a member appended to a
abi-check: versioned options struct), record it: ci/abi-check.sh --update, and commit $rel.
abi-check: If it is not, it is an incompatible change: bump the SOVERSION (DLOCK_SOVERSION
abi-check: in CMakeLists.txt) and run ci/abi-check.sh --update.
EOF
	exit 1
	;;
incompatible)
	show_report
	cat >&2 <<EOF
abi-check: FAILED: INCOMPATIBLE change to the ABI of $soname ($removed removed, $changed changed
abi-check: against $rel; abidiff exit status $status).
abi-check: Programs linked against $soname would break. Restore the interface, or make this a
abi-check: new ABI deliberately: bump the SOVERSION (DLOCK_SOVERSION in CMakeLists.txt),
abi-check: then run ci/abi-check.sh --update and commit the new baseline.
EOF
	exit 1
	;;
esac
