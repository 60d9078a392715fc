#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/compare.sh - dlock against its floor and against node-redlock (SPEC §9),
# side by side, on the same 5 local redis-servers, in one run.
#
#   1. installs node-redlock (npm redlock@4.2.0 + ioredis) into a temporary
#      folder;
#   2. starts 5 redis-servers on free 127.0.0.1 ports;
#   3. runs dlock-bench scenarios 1 and 2 (--uris) and node-redlock-bench.js
#      scenario 1 in alternating rounds (samples merged), dlock-bench
#      scenario 4, then dlock-bench scenario 5 and node-redlock-bench.js
#      scenario 5 (one server SIGSTOPped), with the same iteration counts;
#   4. prints one markdown table (bench/compare-table.js), with the CPU split,
#      the scenario-5 detail, the hand-off and the targets.
#
# Servers and the temporary folder are removed on exit, whatever happens.
#
# usage: bench/compare.sh [--iterations N] [--iterations-paused N] [--warmup N]
#                         [--bench PATH/TO/dlock-bench] [--keep DIR]
#   --iterations N         lock+unlock pairs for scenarios 1 and 2 (default 20000)
#   --iterations-paused N  pairs for scenario 5, per phase (default 300)
#   --warmup N             warm-up pairs (default 2000)
#   --warmup-paused N      warm-up pairs in scenario 5, per phase (default 20)
#   --rounds R             scenarios 1 and 2 in R alternating rounds (default 4)
#   --bench PATH           a built dlock-bench (default: build one in the temp folder)
#   --keep DIR             copy the raw JSON outputs and logs into DIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
iterations=20000
iterations_paused=300
warmup=2000
warmup_paused=20
rounds=4
bench=${DLOCK_BENCH:-}
keep=

while [ $# -gt 0 ]; do
	case $1 in
	--iterations) iterations=$2; shift 2 ;;
	--iterations-paused) iterations_paused=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	--warmup-paused) warmup_paused=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--bench) bench=$2; shift 2 ;;
	--keep) keep=$2; shift 2 ;;
	-h|--help) sed -n '2,26p' "$0"; exit 0 ;;
	*) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-compare.XXXXXX")
pids=()
paused=

cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	if [ -n "$paused" ]; then kill -CONT "$paused" 2>/dev/null || true; fi
	for p in "${pids[@]}"; do
		kill -CONT "$p" 2>/dev/null || true
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [ -n "$keep" ] && [ -d "$tmp" ]; then
		mkdir -p "$keep"
		cp "$tmp"/*.json "$tmp"/*.log "$keep"/ 2>/dev/null || true
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

log() { echo "compare.sh: $*" >&2; }

# --- dlock-bench ------------------------------------------------------------
if [ -z "$bench" ]; then
	log "building dlock-bench in $tmp/build"
	cmake -S "$repo" -B "$tmp/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF >"$tmp/build.log" 2>&1 ||
		{ cat "$tmp/build.log" >&2; exit 1; }
	cmake --build "$tmp/build" --target dlock-bench -j "$(nproc)" >>"$tmp/build.log" 2>&1 ||
		{ cat "$tmp/build.log" >&2; exit 1; }
	bench=$tmp/build/bench/dlock-bench
fi
[ -x "$bench" ] || { log "no dlock-bench at $bench"; exit 1; }

# --- node-redlock -----------------------------------------------------------
log "installing redlock@4.2.0 and ioredis into $tmp/node"
mkdir -p "$tmp/node"
(cd "$tmp/node" && npm install --no-audit --no-fund --loglevel=error redlock@4.2.0 ioredis \
	>"$tmp/npm.log" 2>&1) || { cat "$tmp/npm.log" >&2; exit 1; }
export NODE_PATH=$tmp/node/node_modules

# --- 5 redis-servers on free loopback ports --------------------------------
free_port() {
	node -e 'const s = require("net").createServer();
		s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

uris=()
for i in 1 2 3 4 5; do
	ok=
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		mkdir -p "$tmp/redis$i"
		redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
			--daemonize no --protected-mode no --dir "$tmp/redis$i" \
			--logfile "$tmp/redis$i/redis.log" &
		pid=$!
		for _ in $(seq 100); do
			# Our child, not whatever else may have taken the port meanwhile.
			got=$(redis-cli -h 127.0.0.1 -p "$port" info server 2>/dev/null |
				tr -d '\r' | sed -n 's/^process_id://p' || true)
			[ "$got" = "$pid" ] && { ok=1; break; }
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		if [ -n "$ok" ]; then break; fi
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	[ -n "$ok" ] || { log "could not start redis-server"; exit 1; }
	pids+=("$pid")
	uris+=("redis://127.0.0.1:$port")
done
uri_list=$(IFS=,; echo "${uris[*]}")
pause_pid=${pids[4]}
log "servers: $uri_list (scenario 5 pauses pid $pause_pid)"

# --- the runs ---------------------------------------------------------------
# Scenarios 1 and 2 (and node-redlock's 1) run in $rounds rounds of
# iterations/rounds pairs each, dlock-bench and node-redlock-bench.js taking
# turns (who goes first alternates), and the rounds' samples are merged: the
# machine is shared and noisy, and this way both see the same noise.
per_round=$(( (iterations + rounds - 1) / rounds ))
common=(--iterations-paused "$iterations_paused" --warmup "$warmup"
	--warmup-paused "$warmup_paused" --uris "$uri_list" --json)
files=()

run_dlock_12() {
	log "round $1/$rounds: dlock-bench scenarios 1, 2 ($per_round pairs each)"
	"$bench" "${common[@]}" --iterations "$per_round" --scenario 1,2 --samples \
		>"$tmp/dlock-12-r$1.json" 2> >(tee "$tmp/dlock-12-r$1.log" >&2)
	files+=("$tmp/dlock-12-r$1.json")
}
run_node_1() {
	log "round $1/$rounds: node-redlock scenario 1 ($per_round pairs each)"
	node "$here/node-redlock-bench.js" "${common[@]}" --iterations "$per_round" --scenario 1 \
		--samples >"$tmp/node-1-r$1.json" 2> >(tee "$tmp/node-1-r$1.log" >&2)
	files+=("$tmp/node-1-r$1.json")
}
for r in $(seq "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then run_dlock_12 "$r"; run_node_1 "$r"
	else run_node_1 "$r"; run_dlock_12 "$r"; fi
done

log "dlock-bench: scenario 4"
"$bench" "${common[@]}" --iterations "$per_round" --scenario 4 \
	>"$tmp/dlock-4.json" 2> >(tee "$tmp/dlock-4.log" >&2)
files+=("$tmp/dlock-4.json")

log "dlock-bench: scenario 5"
paused=$pause_pid
"$bench" "${common[@]}" --iterations "$per_round" --scenario 5 --pause-pid "$pause_pid" \
	>"$tmp/dlock-5.json" 2> >(tee "$tmp/dlock-5.log" >&2)
files+=("$tmp/dlock-5.json")
sleep 1
log "node-redlock: scenario 5"
node "$here/node-redlock-bench.js" "${common[@]}" --scenario 5 --pause-pid "$pause_pid" \
	>"$tmp/node-5.json" 2> >(tee "$tmp/node-5.log" >&2)
files+=("$tmp/node-5.json")
kill -CONT "$pause_pid" 2>/dev/null || true
paused=

# --- the table --------------------------------------------------------------
git_rev=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo "?")
if [ -n "$(git -C "$repo" status --porcelain -- src include 2>/dev/null || true)" ]; then
	git_rev="$git_rev+uncommitted changes in src/ or include/"
fi
export CMP_DATE=$(date -u '+%Y-%m-%d %H:%M UTC') CMP_NPROC=$(nproc)
export CMP_CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
export CMP_REDIS=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')
export CMP_GIT=$git_rev CMP_ITER=$iterations CMP_ITER_PAUSED=$iterations_paused
export CMP_WARMUP=$warmup CMP_ROUNDS=$rounds CMP_PER_ROUND=$per_round

node "$here/compare-table.js" "${files[@]}"
