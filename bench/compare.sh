#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/compare.sh - dlock against its floor and against the peers a user
# would pick instead (SPEC §9): Redisson (Java), go-redsync and node-redlock,
# side by side, on the same 5 local redis-servers, in one run.
#
#   1. builds dlock-bench and dlock-contend (cmake), redisson-bench (Maven:
#      Redisson 3.52.0, a shaded jar), redsync-bench (Go: redsync v4 on
#      go-redis v9) and installs node-redlock (npm redlock@4.2.0 + ioredis),
#      all in a temporary folder; if Maven, Go or npm cannot download what it
#      needs, it stops and says which;
#   2. starts 5 redis-servers on free 127.0.0.1 ports;
#   3. uncontended lock+unlock on 1, 3 and 5 servers: dlock-bench scenarios 1
#      and 2 (dlock and its floor), redisson-bench, redsync-bench and
#      node-redlock-bench.js in R rounds in which they take turns (the order
#      rotates every round; samples merged); then dlock-bench scenario 4 and
#      scenario 5 (one server SIGSTOPped) for dlock and node-redlock;
#   4. the contended case: for each of the four, contend.js runs 8 worker
#      processes on one lock on the first server (hand-offs per second, the
#      wait after an unlock: pub/sub against polling);
#   5. prints the markdown report (bench/compare-table.js).
#
# Servers and the temporary folder are removed on exit, whatever happens.
#
# usage: bench/compare.sh [options]
#   --iterations N         lock+unlock pairs per row, over all rounds (default 20000)
#   --rounds R             in R rounds of the four clients taking turns (default 4)
#   --warmup N             warm-up pairs per row and round (default 2000)
#   --jvm-warmup N         Redisson's warm-up pairs per row and round, a fresh JVM
#                          each round (default 10000)
#   --iterations-paused N  pairs for scenario 5, per phase (default 300)
#   --warmup-paused N      warm-up pairs in scenario 5, per phase (default 20)
#   --contend-procs N      worker processes in the contended case (default 8)
#   --contend-duration S   seconds of contention per implementation (default 10),
#                          after --contend-warm S unrecorded (default 3)
#   --contend-hold-us N    µs each holder holds the lock (default 100)
#   --contend-think-us N   µs a worker sleeps after its unlock (default 1000)
#   --bench PATH           a built dlock-bench, dlock-contend beside it
#                          (default: build both in the temp folder)
#   --maven-repo DIR       Maven's local repository, kept (default: in the temp folder)
#   --go-cache DIR         GOMODCACHE and GOCACHE under DIR, kept (default: temp folder)
#   --keep DIR             copy the raw JSON outputs and logs into DIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
iterations=20000
iterations_paused=300
warmup=2000
warmup_paused=20
rounds=4
jvm_warmup=10000
contend_procs=8
contend_duration=10
contend_warm=3
contend_hold_us=100
contend_think_us=1000
bench=${DLOCK_BENCH:-}
bench_given=
maven_repo=
go_cache=
keep=

while [ $# -gt 0 ]; do
	case $1 in
	--iterations) iterations=$2; shift 2 ;;
	--iterations-paused) iterations_paused=$2; shift 2 ;;
	--warmup) warmup=$2; shift 2 ;;
	--warmup-paused) warmup_paused=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--jvm-warmup) jvm_warmup=$2; shift 2 ;;
	--contend-procs) contend_procs=$2; shift 2 ;;
	--contend-duration) contend_duration=$2; shift 2 ;;
	--contend-warm) contend_warm=$2; shift 2 ;;
	--contend-hold-us) contend_hold_us=$2; shift 2 ;;
	--contend-think-us) contend_think_us=$2; shift 2 ;;
	--bench) bench=$2; bench_given=1; shift 2 ;;
	--maven-repo) maven_repo=$2; shift 2 ;;
	--go-cache) go_cache=$2; shift 2 ;;
	--keep) keep=$2; shift 2 ;;
	-h|--help) awk 'NR > 2 && !/^#/ { exit } NR > 2 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
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
# A peer that cannot be built stops the run, named: no table without it.
fail_build() { log "$1 FAILED: $2 (its log follows)"; cat "$3" >&2; exit 1; }
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# --- dlock-bench ------------------------------------------------------------
if [ -z "$bench" ]; then
	log "building dlock-bench in $tmp/build"
	cmake -S "$repo" -B "$tmp/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF >"$tmp/build.log" 2>&1 ||
		{ cat "$tmp/build.log" >&2; exit 1; }
	cmake --build "$tmp/build" --target dlock-bench dlock-contend -j "$(nproc)" \
		>>"$tmp/build.log" 2>&1 ||
		{ cat "$tmp/build.log" >&2; exit 1; }
	bench=$tmp/build/bench/dlock-bench
fi
[ -x "$bench" ] || { log "no dlock-bench at $bench"; exit 1; }
contend_bin=$(dirname "$bench")/dlock-contend
[ -x "$contend_bin" ] || { log "no dlock-contend beside $bench"; exit 1; }

# --- Redisson (Maven) and go-redsync (Go) -----------------------------------
log "building redisson-bench with Maven (Redisson, from Maven Central)"
cp -r "$here/redisson-bench" "$tmp/redisson-bench"
rm -rf "$tmp/redisson-bench/target"
(cd "$tmp/redisson-bench" && mvn -q -B -Dmaven.repo.local="${maven_repo:-$tmp/m2}" package \
	>"$tmp/maven.log" 2>&1) ||
	fail_build "Maven" "could not download Redisson or build redisson-bench" "$tmp/maven.log"
jar=$tmp/redisson-bench/target/redisson-bench.jar

log "building redsync-bench with Go (redsync, go-redis, from the Go module proxy)"
cp -r "$here/redsync-bench" "$tmp/redsync-bench"
# -modcacherw: a module cache that rm -rf can remove.
(cd "$tmp/redsync-bench" && GOFLAGS="-mod=mod -modcacherw" GOPATH="${go_cache:-$tmp/go}/path" \
	GOMODCACHE="${go_cache:-$tmp/go}/mod" GOCACHE="${go_cache:-$tmp/go}/build" \
	go build -o "$tmp/redsync-bench/redsync-bench" . >"$tmp/go.log" 2>&1) ||
	fail_build "Go" "could not download redsync/go-redis or build redsync-bench" "$tmp/go.log"
redsync=$tmp/redsync-bench/redsync-bench

# --- node-redlock -----------------------------------------------------------
log "installing redlock@4.2.0 and ioredis into $tmp/node"
mkdir -p "$tmp/node"
(cd "$tmp/node" && npm install --no-audit --no-fund --loglevel=error redlock@4.2.0 ioredis \
	>"$tmp/npm.log" 2>&1) ||
	fail_build "npm" "could not install redlock@4.2.0 and ioredis" "$tmp/npm.log"
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
# The uncontended rows run in $rounds rounds of iterations/rounds pairs each,
# the four clients taking turns (the order rotates every round), and the
# rounds' samples are merged: the machine is shared and noisy, and this way
# all of them see the same noise.
per_round=$(( (iterations + rounds - 1) / rounds ))
common=(--iterations-paused "$iterations_paused" --warmup "$warmup"
	--warmup-paused "$warmup_paused" --uris "$uri_list" --json)
files=()

run_one() { # name round command...
	local name=$1 r=$2
	shift 2
	log "round $r/$rounds: $name ($per_round pairs per row)"
	"$@" >"$tmp/$name-r$r.json" 2> >(tee "$tmp/$name-r$r.log" >&2)
	files+=("$tmp/$name-r$r.json")
}
run_dlock() { run_one dlock-12 "$1" "$bench" "${common[@]}" --iterations "$per_round" \
	--scenario 1,2 --samples; }
run_node() { run_one node-1 "$1" node "$here/node-redlock-bench.js" "${common[@]}" \
	--iterations "$per_round" --scenario 1 --samples; }
run_redisson() { run_one redisson-1 "$1" java -jar "$jar" --uris "$uri_list" \
	--iterations "$per_round" --jvm-warmup "$jvm_warmup" --json --samples; }
run_redsync() { run_one redsync-1 "$1" "$redsync" -uris "$uri_list" -iterations "$per_round" \
	-warmup "$warmup" -json -samples; }
order=(run_dlock run_node run_redisson run_redsync)
for r in $(seq "$rounds"); do
	for i in 0 1 2 3; do "${order[$(( (i + r - 1) % 4 ))]}" "$r"; done
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

# --- the contended case -----------------------------------------------------
# Same server, same worker loop and the same merge for all four.
contend() { # impl warm-up-pairs worker-command...
	local impl=$1 warm=$2
	shift 2
	log "contended: $impl, $contend_procs processes, $contend_duration s"
	node "$here/contend.js" --impl "$impl" --uri "${uris[0]}" --procs "$contend_procs" \
		--duration "$contend_duration" --warm-s "$contend_warm" --hold-us "$contend_hold_us" \
		--think-us "$contend_think_us" --warmup "$warm" -- "$@" \
		>"$tmp/contend-$impl.json" 2> >(tee "$tmp/contend-$impl.log" >&2)
	files+=("$tmp/contend-$impl.json")
}
contend dlock "$warmup" "$contend_bin"
contend redisson "$jvm_warmup" java -jar "$jar" --contend-worker
contend redsync "$warmup" "$redsync" -contend-worker
contend node-redlock "$warmup" node "$here/node-redlock-contend.js"

# --- the table --------------------------------------------------------------
git_rev=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo "?")
if [ -n "$bench_given" ]; then
	git_rev="$git_rev, but dlock-bench from --bench $bench"
elif [ -n "$(git -C "$repo" status --porcelain -- src include 2>/dev/null || true)" ]; then
	git_rev="$git_rev+uncommitted changes in src/ or include/"
fi
export CMP_DATE=$(date -u '+%Y-%m-%d %H:%M UTC') CMP_NPROC=$(nproc)
export CMP_CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
export CMP_REDIS=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')
export CMP_GIT=$git_rev CMP_ITER=$iterations CMP_ITER_PAUSED=$iterations_paused
export CMP_WARMUP=$warmup CMP_ROUNDS=$rounds CMP_PER_ROUND=$per_round
export CMP_JVM_WARMUP=$jvm_warmup CMP_LOAD_BEFORE=$load_before
export CMP_LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

node "$here/compare-table.js" "${files[@]}"
