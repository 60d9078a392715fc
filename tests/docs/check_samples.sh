#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# check_samples.sh - every C, C++ and shell sample in README.md and docs/*.md
# is built or run, so the documentation cannot drift from the code.
#
#   check_samples.sh --source DIR --dlock BIN --redis-server BIN --lib LIBDLOCK.so
#                    --cc CC --cxx CXX --include DIR [--include DIR ...]
#                    [--link ARCHIVE ...] [--sanitize LIST] [FILE.md ...]
# (--sanitize: the library was built with -fsanitize=LIST; so are the samples;
# --link: a static library every C/C++ sample is linked with too, before the
# `needs` flags: the event-loop adapters, libdlock-uv.a and libdlock-libevent.a)
#
# What a fenced block is checked for, by its language:
#   ```c        a whole program: compiled with -std=gnu11 (as CMake builds dlock) -Wall -Wextra -Werror, linked
#               to the built libdlock, and run (exit 0 expected).
#   ```cpp      the same as C++17 (-Wall -Wextra -Wshadow -Werror).
#   ```sh       run with bash -e in an empty directory against a real redis-server.
#   ```console  the same for its "$ " lines (the other lines are output, not compared).
#   other languages and bare ``` blocks (output, cmake, JSON) are not samples.
# Samples run against two throwaway redis-servers on free 127.0.0.1 ports: the
# text 127.0.0.1:6379 becomes the first one's address and 127.0.0.1:6380 the
# second's, DLOCK_NODES names the first, `dlock` on PATH is the built one, `build/`
# is the build directory, and every `./NAME.sh` a shell block mentions is a
# script that exits 0. A runnable sample that names any other server fails the
# check: it would send traffic off this host.
#
# A marker on the line before the fence changes that, words separated by spaces:
#   <!-- sample: fragment -->      C: not a whole program. Its leading #include
#                                  lines and function definitions (callbacks) go
#                                  at file scope; the rest is the body of main(),
#                                  which declares
#                                  `dlock_client *client`, `dlock_lock *lock`,
#                                  `dlock_op *op` (all NULL) and `int rc = 0`, frees
#                                  lock and client at the end and fails if rc != 0.
#                                  Includes <dlock.h>, <stdio.h>, <stdlib.h>,
#                                  <string.h>, <inttypes.h>.
#   <!-- sample: compile-only -->  C/C++: built and linked, not run (it needs
#                                  servers that are not here).
#   <!-- sample: needs PKG -->     C/C++: also compiled with pkg-config PKG's flags
#                                  (libuv, libevent: the --link adapters need
#                                  them); a missing PKG fails the check.
#   <!-- sample: c++20 -->         C++: -std=c++20 instead of C++17.
#   <!-- sample: excerpt FILE -->  any language: lines cut from FILE (a repository
#                                  file CI builds): every line of the block, its
#                                  // comment and indentation aside, is a line of
#                                  FILE. Nothing else is done with it.
#   <!-- sample: syntax-only -->   shell: only `bash -n`, for what cannot run here
#                                  (other hosts, Sentinel or Cluster setups, sudo,
#                                  the demo and the whole test suite).
# Whatever the marker, a shell sample's repository paths (ci/..., bench/...,
# examples/..., tests/..., contrib/..., doc/..., docs/...) must exist, and every
# relative link of a page must name a file that exists.
#
# Exits 0 when every sample passed, 1 naming each one that did not (FILE:LINE).
set -uo pipefail
exec </dev/null

src= dlock= redis= lib= cc=cc cxx=c++
includes=()
links=() # the adapters' static libraries
sanitize=() # a sanitizer build's library: the samples are built with it too
files=()
while [ $# -gt 0 ]; do
	case $1 in
	--source) src=$2; shift 2 ;;
	--dlock) dlock=$2; shift 2 ;;
	--redis-server) redis=$2; shift 2 ;;
	--lib) lib=$2; shift 2 ;;
	--cc) cc=$2; shift 2 ;;
	--cxx) cxx=$2; shift 2 ;;
	--include) includes+=("-I$2"); shift 2 ;;
	--link) links+=("$2"); shift 2 ;;
	--sanitize) [ -z "$2" ] || sanitize=("-fsanitize=$2" -fno-omit-frame-pointer); shift 2 ;;
	-*) echo "check_samples: unknown option $1" >&2; exit 2 ;;
	*) files+=("$1"); shift ;;
	esac
done
for v in src dlock redis lib; do
	[ -n "${!v}" ] || { echo "check_samples: --${v/redis/redis-server} is missing" >&2; exit 2; }
done
if [ ${#files[@]} -eq 0 ]; then
	files=("$src/README.md")
	for f in "$src"/docs/*.md; do files+=("$f"); done
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-docs.XXXXXX")
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

failed=()
fail() { failed+=("$1: $2"); echo "FAIL $1: $2"; }

# ------------------------------------------------------------ servers
# start_server DIR: a redis-server on a free loopback port; prints the port.
start_server() {
	local dir=$1 port pid
	mkdir -p "$dir"
	for _ in $(seq 30); do
		port=$((20000 + RANDOM % 20001))
		"$redis" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
			--daemonize no --dir "$dir" --logfile "$dir/redis.log" >/dev/null 2>&1 &
		pid=$!
		for _ in $(seq 100); do
			# Ours (not a server that already had the port) answers PING.
			if ! kill -0 "$pid" 2>/dev/null; then break; fi
			if grep -q "Ready to accept connections" "$dir/redis.log" 2>/dev/null; then
				echo "$pid $port"
				return 0
			fi
			sleep 0.05
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		: >"$dir/redis.log"
	done
	return 1
}
read -r pid1 port1 < <(start_server "$tmp/redis1") || { echo "check_samples: no redis-server" >&2; exit 1; }
pids+=("$pid1")
read -r pid2 port2 < <(start_server "$tmp/redis2") || { echo "check_samples: no redis-server" >&2; exit 1; }
pids+=("$pid2")
echo "servers: 127.0.0.1:$port1 (for 6379), 127.0.0.1:$port2 (for 6380)"

mkdir -p "$tmp/bin"
ln -s "$dlock" "$tmp/bin/dlock"
builddir=$(dirname "$dlock")

# localize FILE: the documented addresses become the servers'.
localize() {
	sed -i -e "s/127\.0\.0\.1:6379/127.0.0.1:$port1/g" -e "s/127\.0\.0\.1:6380/127.0.0.1:$port2/g" "$1"
}

# offhost FILE: prints the first URI in FILE that names a host other than this one.
offhost() {
	grep -oE '(redis|rediss|redis\+sentinel|redis\+cluster|rediss\+cluster)://[^ "'\'',)]*' "$1" |
		grep -vE '^[a-z+]+://([^@/]*@)?127\.0\.0\.1(:[0-9]+)?(/[0-9]*)?$' | head -1
}

# ------------------------------------------------------------ extraction
# Each sample: $tmp/s/N.body, $tmp/s/N.meta = "FILE LINE LANG MARKERS...".
mkdir -p "$tmp/s"
for f in "${files[@]}"; do
	awk -v file="${f#"$src"/}" -v out="$tmp/s" -v n0="$(find "$tmp/s" -name '*.meta' | wc -l)" '
		BEGIN { n = n0 }
		infence {
			if ($0 ~ /^```[ \t]*$/) { infence = 0; close(body); next }
			if (keep) print > body
			next
		}
		/^```/ {
			lang = substr($0, 4); sub(/[ \t].*/, "", lang)
			infence = 1
			keep = (lang == "c" || lang == "cpp" || lang == "sh" || lang == "bash" || lang == "console")
			if (keep) {
				n++
				body = out "/" n ".body"
				printf "" > body
				printf "%s %d %s %s\n", file, NR, (lang == "bash" ? "sh" : lang), marker > (out "/" n ".meta")
				close(out "/" n ".meta")
			}
			marker = ""
			next
		}
		/^<!-- sample:.*-->[ \t]*$/ {
			marker = $0; sub(/^<!-- sample:[ \t]*/, "", marker); sub(/[ \t]*-->[ \t]*$/, "", marker)
			next
		}
		/[^ \t]/ { marker = "" }
	' "$f"
	# Relative links: the file each names must exist.
	grep -noE '\]\([^)#: ]+(#[^)]*)?\)' "$f" | while IFS= read -r hit; do
		line=${hit%%:*}
		target=${hit#*](}; target=${target%)}; target=${target%%#*}
		[ -e "$(dirname "$f")/$target" ] || echo "${f#"$src"/}:$line: link to $target, which does not exist"
	done >"$tmp/links"
	while IFS= read -r l; do fail "${l%%: link*}" "${l#*: }"; done <"$tmp/links"
done

# ------------------------------------------------------------ checks
cflags=(-std=gnu11 -Wall -Wextra -Werror "${includes[@]}" "${sanitize[@]}")
cxxflags=(-Wall -Wextra -Wshadow -Werror "${includes[@]}" "${sanitize[@]}")
ldflags=("$lib" "-Wl,-rpath,$(dirname "$lib")" -lpthread "${sanitize[@]}")

# wrap_fragment BODY OUT: a C fragment made a program (see the top of this file).
wrap_fragment() {
	local last
	# The head: #include lines, blank lines and whole functions (a line in
	# column 0 that ends with ")", then "{" ... "}" in column 0).
	last=$(awk '
		infn { if (/^}/) { infn = 0; head = NR } next }
		/^#include/ || /^[ \t]*$/ { if (/^#/) head = NR; next }
		/^[A-Za-z_].*\)[ \t]*$/ { sig = NR; next }
		/^\{/ && sig == NR - 1 { infn = 1; next }
		{ exit }
		END { print head + 0 }' "$1")
	{
		printf '#include <dlock.h>\n#include <inttypes.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n'
		head -n "$last" "$1"
		printf 'int main(void)\n{\n\tdlock_client *client = NULL;\n\tdlock_lock *lock = NULL;\n'
		printf '\tdlock_op *op = NULL;\n\tint rc = 0;\n\t(void)op;\n'
		printf '#line %d\n' "$((last + 1))"
		tail -n +"$((last + 1))" "$1"
		printf '\tdlock_lock_free(lock);\n\tdlock_client_free(client);\n\treturn rc != 0;\n}\n'
	} >"$2"
}

has() { case " $markers " in *" $1 "*) return 0 ;; esac; return 1; }

# repo_paths BODY: every repository path a shell sample names exists.
repo_paths() {
	local p
	for p in $(grep -oE '(^|[[:space:];&|(])(\.ci|ci|bench|tests|examples|contrib|doc|docs)/[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*' "$1" |
		sed -E 's/^[[:space:];&|(]//' | sort -u); do
		[ -e "$src/$p" ] || { echo "$p"; return; }
	done
}

counts_run=0 counts_built=0 counts_syntax=0 counts_excerpt=0
total=$(find "$tmp/s" -name '*.meta' | wc -l)
for n in $(seq 1 "$total"); do
	meta=$tmp/s/$n.meta
	body=$tmp/s/$n.body
	read -r file line lang markers <"$meta"
	where="$file:$line"
	work=$tmp/w$n
	mkdir -p "$work"
	if has excerpt; then
		from=$(echo "$markers" | sed -E 's/.*excerpt[[:space:]]+([^[:space:]]+).*/\1/')
		if [ ! -f "$src/$from" ]; then
			fail "$where" "an excerpt of $from, which is not in the source tree"
			continue
		fi
		# A line without its // comment and its indentation.
		bare() { sed -E -e 's|[[:space:]]*//.*$||' -e 's/^[[:space:]]+//' -e 's/[[:space:]]+$//' "$1" | grep -v '^$'; }
		# The file's lines once, in a file: grep -q leaving a pipe early
		# would kill the writer (pipefail: a line "missing").
		bare "$src/$from" >"$work/excerpt.lines"
		missing=$(bare "$body" | while IFS= read -r l; do
			grep -qxF -- "$l" "$work/excerpt.lines" || { echo "$l"; break; }
		done)
		if [ -n "$missing" ]; then
			fail "$where" "is not an excerpt of $from: no line there reads: $missing"
			continue
		fi
		counts_excerpt=$((counts_excerpt + 1)); echo "ok   $where (excerpt of $from)"
		continue
	fi
	case $lang in
	c|cpp)
		flags=()
		if has needs; then
			pkg=$(echo "$markers" | sed -E 's/.*needs[[:space:]]+([^[:space:]]+).*/\1/')
			if ! pkg-config --exists "$pkg"; then
				fail "$where" "needs $pkg, which pkg-config does not find (ci/deps.sh installs it)"
				continue
			fi
			read -ra flags <<<"$(pkg-config --cflags --libs "$pkg")"
		fi
		if [ "$lang" = c ]; then
			prog=$work/sample.c
			if has fragment; then wrap_fragment "$body" "$prog"; else cp "$body" "$prog"; fi
			compile=("$cc" "${cflags[@]}" -o "$work/sample" "$prog" ${links[@]+"${links[@]}"} "${flags[@]}" "${ldflags[@]}")
		else
			prog=$work/sample.cpp
			cp "$body" "$prog"
			std=-std=c++17
			has c++20 && std=-std=c++20
			compile=("$cxx" "$std" "${cxxflags[@]}" -o "$work/sample" "$prog" ${links[@]+"${links[@]}"} "${flags[@]}" "${ldflags[@]}")
		fi
		run=1
		has compile-only && run=0
		if [ "$run" = 1 ] && uri=$(offhost "$prog") && [ -n "$uri" ]; then
			fail "$where" "runs against $uri, not this host: mark it <!-- sample: compile-only -->"
			continue
		fi
		localize "$prog"
		if ! "${compile[@]}" >"$work/log" 2>&1; then
			fail "$where" "does not build:"
			sed "s|$prog|$where (sample)|" "$work/log" | head -20 | sed 's/^/    /'
			continue
		fi
		if [ "$run" = 0 ]; then
			counts_built=$((counts_built + 1)); echo "ok   $where ($lang, built)"
			continue
		fi
		status=0
		(cd "$work" && timeout 60 ./sample) >"$work/log" 2>&1 || status=$?
		if [ "$status" -ne 0 ]; then
			fail "$where" "built, but exited $status when run:"
			head -20 "$work/log" | sed 's/^/    /'
			continue
		fi
		counts_run=$((counts_run + 1)); echo "ok   $where ($lang, built and run)"
		;;
	sh|console)
		script=$work/sample.sh
		if [ "$lang" = console ]; then
			# "$ " lines and their backslash continuations.
			awk '/^\$ / { sub(/^\$ /, ""); cmd = 1 } cmd { print; cmd = /\\$/ }' "$body" >"$script"
		else
			cp "$body" "$script"
		fi
		if p=$(repo_paths "$script") && [ -n "$p" ]; then
			fail "$where" "names $p, which is not in the source tree"
			continue
		fi
		if ! bash -n "$script" 2>"$work/log"; then
			fail "$where" "is not valid shell:"
			sed 's/^/    /' "$work/log"
			continue
		fi
		if has syntax-only; then
			counts_syntax=$((counts_syntax + 1)); echo "ok   $where ($lang, syntax only)"
			continue
		fi
		if uri=$(offhost "$script") && [ -n "$uri" ]; then
			fail "$where" "runs against $uri, not this host: mark it <!-- sample: syntax-only -->"
			continue
		fi
		localize "$script"
		# A program of the build a sample runs (build/examples/..., build/bench/...):
		# a sanitizer build makes neither examples nor benchmarks, the plain build both.
		missing=
		for prog in $(grep -oE '(^|[[:space:]])build/[A-Za-z0-9_./-]+' "$script" | sed -E 's/^[[:space:]]//' | sort -u); do
			[ -e "$builddir/${prog#build/}" ] || missing=$prog
		done
		if [ -n "$missing" ] && [ ${#sanitize[@]} -gt 0 ]; then
			counts_syntax=$((counts_syntax + 1))
			echo "ok   $where ($lang, syntax only: a sanitizer build has no $missing)"
			continue
		elif [ -n "$missing" ]; then
			fail "$where" "runs $missing, which this build did not make"
			continue
		fi
		for stub in $(grep -oE '\./[A-Za-z0-9_-]+\.sh' "$script" | sort -u); do
			printf '#!/bin/sh\nexit 0\n' >"$work/$stub"
			chmod +x "$work/$stub"
		done
		ln -s "$builddir" "$work/build"
		redis-cli -p "$port1" flushall >/dev/null 2>&1
		redis-cli -p "$port2" flushall >/dev/null 2>&1
		status=0
		(cd "$work" && PATH="$tmp/bin:$PATH" DLOCK_NODES="redis://127.0.0.1:$port1" \
			timeout 60 bash -e ./sample.sh) >"$work/log" 2>&1 || status=$?
		if [ "$status" -ne 0 ]; then
			fail "$where" "exited $status when run:"
			head -20 "$work/log" | sed 's/^/    /'
			continue
		fi
		counts_run=$((counts_run + 1)); echo "ok   $where ($lang, run)"
		;;
	esac
done

echo "$total samples: $counts_run built and run or run, $counts_built built only, $counts_syntax syntax only, $counts_excerpt excerpts, ${#failed[@]} failed"
if [ "$total" -eq 0 ]; then
	echo "FAIL: no samples found in ${files[*]}"
	exit 1
fi
if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[@]}"
	exit 1
fi
