#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/compare.sh - dlock against its floor and against the peers a user
# would pick instead (SPEC §9): Redisson (Java), go-redsync and node-redlock,
# side by side, on the same 5 local redis-servers, in one run.
#
#   1. builds dlock-bench, dlock-contend and dlock-herd (cmake),
#      redisson-bench (Maven: Redisson 3.52.0, a shaded jar), redsync-bench
#      (Go: redsync v4 on go-redis v9) and installs node-redlock (npm
#      redlock@4.2.0 + ioredis),
#      all in a temporary folder; if Maven, Go or npm cannot download what it
#      needs, it stops and says which;
#   2. starts 5 redis-servers on free 127.0.0.1 ports;
#   3. uncontended lock+unlock on 1, 3 and 5 servers: dlock-bench scenarios 1
#      and 2 (dlock through its blocking calls, dlock through its asynchronous
#      ones - one pair in flight on a dlock_loop, as node-redlock's promises -
#      and its floor), redisson-bench, redsync-bench and
#      node-redlock-bench.js in R rounds in which they take turns (the order
#      rotates every round; samples merged); then dlock-bench scenario 4 and
#      scenario 5 (one server SIGSTOPped) for dlock and node-redlock;
#   4. the contended case: for each of the four and each count of waiters
#      (--contend-waiters, default 8, 64 and 512), contend.js runs that many
#      waiters on one lock on the first server (hand-offs per second, the
#      wait after an unlock: pub/sub against polling, client and server CPU
#      per acquisition, waiters that never got the lock). dlock and redsync
#      run one process per waiter (a few MB each); node-redlock (~40 MB a
#      process) runs at most --contend-node-procs processes, several async
#      waiters each with a connection of its own, and Redisson (a JVM a
#      process) at most --contend-redisson-procs JVMs, several threads each on
#      one RedissonClient, as an application would;
#   5. the crash case: a holder SIGKILLed while --crash-waiters waiters wait
#      (time to the next holder, acquire attempts in the first ms after the
#      lease expired, by MONITOR): dlock-herd --crash for dlock, crash.js
#      with the same workers and spread as the contended case for the peers;
#   6. prints the markdown report (bench/compare-table.js), with the targets.
#
# A dlock waiter that never got the lock in a contended window (a lost
# wake-up) is reported as such and makes compare.sh exit 3 after the report.
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
#   --contend-waiters LIST waiters in the contended case, comma-separated
#                          (default 8,64,512; --contend-procs N: the same, one count)
#   --contend-node-procs P node-redlock processes at most (default 64)
#   --contend-redisson-procs P  Redisson JVMs at most (default 8)
#   --contend-duration S   seconds of contention per implementation and count
#                          (default 10), after --contend-warm S unrecorded (default 3)
#   --contend-hold-us N    µs each holder holds the lock (default 100)
#   --contend-think-us N   µs a worker sleeps after its unlock (default 1000)
#   --crash-waiters N      waiters in the crash case (default 64; 0: no crash case)
#   --crash-ttl-ms N       the killed holder's lease (default 1000)
#   --bench PATH           a built dlock-bench, dlock-contend and dlock-herd beside it
#                          (default: build them in the temp folder)
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
contend_waiters=8,64,512
contend_node_procs=64
contend_redisson_procs=8
crash_waiters=64
crash_ttl_ms=1000
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
	--contend-procs|--contend-waiters) contend_waiters=$2; shift 2 ;;
	--contend-node-procs) contend_node_procs=$2; shift 2 ;;
	--contend-redisson-procs) contend_redisson_procs=$2; shift 2 ;;
	--crash-waiters) crash_waiters=$2; shift 2 ;;
	--crash-ttl-ms) crash_ttl_ms=$2; shift 2 ;;
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
	cmake --build "$tmp/build" --target dlock-bench dlock-contend dlock-herd -j "$(nproc)" \
		>>"$tmp/build.log" 2>&1 ||
		{ cat "$tmp/build.log" >&2; exit 1; }
	bench=$tmp/build/bench/dlock-bench
fi
[ -x "$bench" ] || { log "no dlock-bench at $bench"; exit 1; }
contend_bin=$(dirname "$bench")/dlock-contend
[ -x "$contend_bin" ] || { log "no dlock-contend beside $bench"; exit 1; }
herd_bin=$(dirname "$bench")/dlock-herd
[ "$crash_waiters" -eq 0 ] || [ -x "$herd_bin" ] || { log "no dlock-herd beside $bench"; exit 1; }
IFS=, read -r -a waiter_counts <<<"$contend_waiters"
for w in "${waiter_counts[@]}"; do
	[[ $w =~ ^[1-9][0-9]*$ ]] || { log "--contend-waiters: $contend_waiters?"; exit 2; }
done

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
# Same server, same worker loop and the same merge for all four; see the
# header for how the waiters are spread over processes.
lost_wakeup=
contend() { # impl waiters max-procs(0: one per waiter) warm-up-pairs worker-command...
	local impl=$1 w=$2 maxp=$3 warm=$4 rc=0
	shift 4
	local procs=$w extra=()
	if [ "$maxp" -gt 0 ] && [ "$maxp" -lt "$w" ]; then procs=$maxp; fi
	# The peers' locks are no queues (redsync and node-redlock poll;
	# Redisson's RLock is not fair): a starved waiter is counted, not fatal.
	[ "$impl" = dlock ] || extra=(--starve-ok)
	log "contended: $impl, $w waiters in $procs processes, $contend_duration s"
	node "$here/contend.js" --impl "$impl" --uri "${uris[0]}" --waiters "$w" --max-procs "$maxp" \
		--duration "$contend_duration" --warm-s "$contend_warm" --hold-us "$contend_hold_us" \
		--think-us "$contend_think_us" --warmup "$warm" "${extra[@]}" -- "$@" \
		>"$tmp/contend-$impl-$w.json" 2> >(tee "$tmp/contend-$impl-$w.log" >&2) || rc=$?
	# 3: the JSON is there, but a waiter never got the lock: go on, say so.
	[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { log "contend.js $impl $w failed ($rc)"; exit 1; }
	[ "$rc" -eq 0 ] || lost_wakeup="$lost_wakeup $w"
	files+=("$tmp/contend-$impl-$w.json")
}
# Warm-up pairs per process: the 8-process figure's total, spread (at least 50).
warm_for() { local p=$1; echo $(( warmup * 8 / p > 50 ? warmup * 8 / p : 50 )); }
min() { echo $(( $1 < $2 ? $1 : $2 )); }
for w in "${waiter_counts[@]}"; do
	contend dlock "$w" 0 "$(warm_for "$w")" "$contend_bin"
	# One JVM per process; every JVM gets the whole JIT warm-up.
	contend redisson "$w" "$contend_redisson_procs" "$jvm_warmup" java -jar "$jar" --contend-worker
	contend redsync "$w" 0 "$(warm_for "$w")" "$redsync" -contend-worker
	contend node-redlock "$w" "$contend_node_procs" \
		"$(warm_for "$(min "$w" "$contend_node_procs")")" node "$here/node-redlock-contend.js"
done

# --- the crash case ---------------------------------------------------------
crash() { # impl max-procs worker-command...
	local impl=$1 maxp=$2
	shift 2
	log "crash: $impl, holder SIGKILLed, $crash_waiters waiters, lease $crash_ttl_ms ms"
	node "$here/crash.js" --impl "$impl" --uri "${uris[0]}" --waiters "$crash_waiters" \
		--max-procs "$maxp" --ttl-ms "$crash_ttl_ms" --warmup 100 -- "$@" \
		>"$tmp/crash-$impl.json" 2> >(tee "$tmp/crash-$impl.log" >&2) ||
		{ log "crash.js $impl failed"; exit 1; }
	files+=("$tmp/crash-$impl.json")
}
if [ "$crash_waiters" -gt 0 ]; then
	log "crash: dlock-herd, holder SIGKILLed, $crash_waiters waiters, lease $crash_ttl_ms ms"
	"$herd_bin" --uri "${uris[0]}" --crash --json --waiters "$crash_waiters" \
		--ttl-ms "$crash_ttl_ms" --name "crash:$$" \
		>"$tmp/herd-crash.json" 2> >(tee "$tmp/herd-crash.log" >&2)
	files+=("$tmp/herd-crash.json")
	crash redisson "$contend_redisson_procs" java -jar "$jar" --contend-worker
	crash redsync 0 "$redsync" -contend-worker
	crash node-redlock "$contend_node_procs" node "$here/node-redlock-contend.js"
fi

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
export CMP_CONTEND_WARM=$contend_warm
export CMP_CONTEND_SPREAD="node-redlock at most $contend_node_procs processes, Redisson at most \
$contend_redisson_procs JVMs"

node "$here/compare-table.js" "${files[@]}"
if [ -n "$lost_wakeup" ]; then
	log "dlock: a waiter never got the lock in the contended window with$lost_wakeup" \
		"waiters (see above)"
	exit 3
fi
