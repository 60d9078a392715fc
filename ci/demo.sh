#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ci/demo.sh - dlock in 20 seconds: a RedLock over five Redis servers keeps
# four worker processes out of each other's way while servers die.
#
# What it does:
#   1. ci/deps.sh installs what is missing (build tools, hiredis, redis-server ...).
#   2. Builds the `dlock` command into build-demo/ (or $BUILD_DIR).
#   3. Starts five throwaway redis-servers on free loopback ports (no persistence,
#      everything in a temporary directory).
#   4. Runs four workers. Each repeats, for about 12 s, a critical section under
#      one RedLock through `dlock run`: read a counter file, sleep 50-150 ms,
#      write counter+1, logging "begin"/"end" with a timestamp.
#   5. Meanwhile it SIGKILLs server 2 (at ~3 s) and server 4 (at ~6 s) and
#      restarts server 2, empty, at ~9 s. Three of five is still a quorum.
#   6. Prints the timeline and checks: the counter equals the number of
#      sections the workers completed, and no two sections overlapped.
#      PASS exits 0, FAIL exits 1.
#
# The RedLock's restart guard stays on at its default (the watchdog timeout,
# 3 s here): for 3 s after a server starts, its "free" vote does not count
# while another server shows the lock held, because a restarted server has
# forgotten the locks it held. Every server here was started seconds ago, so
# early on all of them are "young"; the guard then only costs an occasional
# retry (a waiter that arrives while the holder's release is half done), and
# server 2 coming back empty at ~9 s is the case it is for. (Here safety does
# not depend on it: server 2 was down for 6 s, far longer than any section,
# so it comes back having forgotten no lock that anyone still holds.)
# DEMO_RESTART_GUARD=MS sets the window (0 = off) to compare.
#
# Non-interactive (no stdin, no terminal). Cleans up on exit: servers and
# workers are killed, the temporary directory is removed.
#
#   ci/demo.sh                      BUILD_DIR=build ci/demo.sh (reuse a build)
set -euo pipefail
exec </dev/null

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
build=${BUILD_DIR:-build-demo}
case $build in /*) ;; *) build=$root/$build ;; esac
jobs=$(nproc 2>/dev/null || echo 2)

NSERVERS=5
NWORKERS=4
WORK_SECONDS=12     # how long the workers keep starting critical sections
LOCK=demo-lock
GUARD_MS=${DEMO_RESTART_GUARD:-} # empty: dlock's default (see the top of this file)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-demo.XXXXXX")
server_pid=()
server_port=()
worker_pid=()
pause_pid=

cleanup() {
	local status=$? p groups
	trap - EXIT INT TERM
	# Each worker leads its own process group: the worker loop, dlock, the section.
	# SIGTERM lets a `dlock run` stop its command and release the lock; give the
	# groups 3 s to go, then SIGKILL what is left.
	for p in "${worker_pid[@]}"; do
		kill -TERM -- "-$p" 2>/dev/null || true
	done
	groups=$(IFS=,; echo "${worker_pid[*]}")
	for _ in $(seq 30); do
		# Gone when nothing but zombies (reaped by whoever inherited them) is left.
		# shellcheck disable=SC2009 # pgrep cannot leave zombies out everywhere
		if [ -z "$groups" ] || ! ps -o stat= -g "$groups" 2>/dev/null | grep -q '^[^Z]'; then
			break
		fi
		sleep 0.1
	done
	for p in "${worker_pid[@]}"; do
		kill -KILL -- "-$p" 2>/dev/null || true
	done
	for p in "${server_pid[@]}"; do
		if [ -n "$p" ]; then kill -KILL "$p" 2>/dev/null || true; fi
	done
	if [ -n "$pause_pid" ]; then kill "$pause_pid" 2>/dev/null || true; fi
	wait 2>/dev/null || true # reap the workers
	rm -rf "$tmp"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# quiet CMD...: run CMD, show its output only if it fails.
quiet() {
	if ! "$@" >"$tmp/quiet.log" 2>&1; then
		cat "$tmp/quiet.log" >&2
		echo "demo: failed: $*" >&2
		exit 1
	fi
}

now() { date +%s.%N; }
event() { echo "$(now) $*" >>"$tmp/events.log"; }

# ---------------------------------------------------------------- setup
echo "== setup"
"$root/ci/deps.sh"
for tool in redis-server redis-cli cmake date setsid; do
	command -v "$tool" >/dev/null || { echo "demo: $tool not found" >&2; exit 1; }
done
if [ -f "$build/CMakeCache.txt" ]; then
	quiet cmake -S "$root" -B "$build"
else
	quiet cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF
fi
quiet cmake --build "$build" -j"$jobs" --target dlock_cli
dlock=$build/dlock
[ -x "$dlock" ] || { echo "demo: $dlock was not built" >&2; exit 1; }
echo "built $dlock ($("$dlock" --version))"

# start_server I PORT: run redis-server I in the background on PORT; 0 when it answers.
start_server() {
	local i=$1 port=$2
	mkdir -p "$tmp/server$i"
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--daemonize no --dir "$tmp/server$i" --logfile "$tmp/server$i/redis.log" \
		>/dev/null 2>&1 &
	server_pid[i]=$!
	# Not a job of this shell: no "Killed" notice when the demo kills it.
	disown "${server_pid[i]}"
	for _ in $(seq 50); do
		# Ours answers (not some other server that already had the port).
		if redis-cli -p "$port" info server 2>/dev/null | grep -q "^process_id:${server_pid[i]}[[:space:]]*$"; then
			server_port[i]=$port
			return 0
		fi
		kill -0 "${server_pid[i]}" 2>/dev/null || break # exited: port taken
		sleep 0.05
	done
	stop_server "$i"
	return 1
}

# stop_server I: SIGKILL server I and wait (at most 2 s) until it is gone.
stop_server() {
	local pid=${server_pid[$1]}
	server_pid[$1]=
	[ -n "$pid" ] || return 0
	kill -KILL "$pid" 2>/dev/null || return 0
	for _ in $(seq 40); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.05
	done
}

for i in $(seq "$NSERVERS"); do
	for _ in $(seq 30); do
		start_server "$i" $((20000 + RANDOM % 20001)) && break
	done
	[ -n "${server_port[i]:-}" ] || { echo "demo: could not start redis-server $i" >&2; exit 1; }
done
nodes=
for i in $(seq "$NSERVERS"); do
	nodes+="${nodes:+,}redis://127.0.0.1:${server_port[i]}"
	echo "started server $i: redis-server on 127.0.0.1:${server_port[i]}"
done

# ---------------------------------------------------------------- the workers
# The critical section: $1 worker id, $2 event log, $3 counter file, $4 sleep.
# (A script for sh -c: expanded by that shell, not by this one.)
# shellcheck disable=SC2016,SC2089
section='echo "$(date +%s.%N) begin $1" >>"$2"
c=$(cat "$3")
sleep "$4"
echo $((c + 1)) >"$3"
echo "$(date +%s.%N) end $1" >>"$2"'

echo 0 >"$tmp/counter"
: >"$tmp/events.log"

# worker ID DEADLINE: critical sections until DEADLINE (epoch ns); the number
# completed goes to worker-ID.count, failures to the event log and worker-ID.err.
worker() {
	local id=$1 deadline=$2 completed=0 status ms
	while [ "$(date +%s%N)" -lt "$deadline" ]; do
		ms=$((50 + RANDOM % 101))
		status=0
		"$dlock" -n "$nodes" --timeout 200 --watchdog 3000 ${GUARD_MS:+--restart-guard "$GUARD_MS"} \
			run --label "worker-$id" -w 20000 "$LOCK" -- \
			sh -c "$section" section "$id" "$tmp/events.log" "$tmp/counter" \
			"0.$(printf %03d "$ms")" 2>>"$tmp/worker-$id.err" || status=$?
		if [ "$status" -eq 0 ]; then
			completed=$((completed + 1))
		else
			event "fail $id $status"
		fi
	done
	echo "$completed" >"$tmp/worker-$id.count"
}
export -f worker event now
# shellcheck disable=SC2090
export dlock nodes tmp section LOCK GUARD_MS

cat <<EOF

== dlock demo
$NWORKERS worker processes share one counter file. Each increments it, over and over, in a
critical section guarded by one RedLock ("$LOCK") over $NSERVERS Redis servers (quorum $((NSERVERS / 2 + 1))).
While they work, two servers are killed (SIGKILL) and one comes back empty. If the lock does its
job, no two sections overlap and no increment is lost. Each section is run by:
  dlock -n <5 servers> --timeout 200 --watchdog 3000${GUARD_MS:+ --restart-guard $GUARD_MS} \\
        run --label worker-N -w 20000 $LOCK -- sh -c '<read counter, sleep 50-150 ms, write counter+1>'

EOF

t0=$(now)
event "start"
deadline=$(( $(date +%s%N) + WORK_SECONDS * 1000000000 ))
for w in $(seq "$NWORKERS"); do
	setsid bash -c 'worker "$@"' worker "$w" "$deadline" &
	worker_pid+=($!)
done

# The chaos: at ~3 s kill server 2, at ~6 s kill server 4, at ~9 s restart server 2.
kill_server() {
	event "down $1 ${server_port[$1]}"
	stop_server "$1"
}
restart_server() {
	local i=$1
	for _ in $(seq 5); do
		start_server "$i" "${server_port[i]}" && { event "up $i ${server_port[i]}"; return; }
		sleep 0.2
	done
	event "noup $i ${server_port[i]}"
}
# pause S: sleep S seconds; a SIGINT or SIGTERM ends the demo at once.
pause() {
	sleep "$1" &
	pause_pid=$!
	wait "$pause_pid" || true
	pause_pid=
}
# Who holds it, as an operator would ask from another shell.
pause 1.5
"$dlock" -n "$nodes" --timeout 200 status "$LOCK" >"$tmp/status-mid.txt" 2>&1 || true
pause 1.5
kill_server 2
pause 3
kill_server 4
pause 3
restart_server 2

# The workers stop starting sections at the deadline; give the last ones time
# to finish, but never hang: a worker still running 30 s later has failed.
status=0
limit=$((SECONDS + WORK_SECONDS + 30))
for p in "${worker_pid[@]}"; do
	while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$limit" ]; do
		sleep 0.1
	done
	if kill -0 "$p" 2>/dev/null; then
		echo "demo: a worker is still running ${WORK_SECONDS}+30 s after the start: stopping it" >&2
		kill -TERM -- "-$p" 2>/dev/null || true
		status=1
	fi
	wait "$p" || status=1
done
worker_pid=()
event "stop"
[ "$status" -eq 0 ] || echo "demo: a worker failed" >&2

# ---------------------------------------------------------------- timeline
# One line per critical section near the server events (and at the start and
# the end); the quiet stretches in between are folded into one line each.
# DEMO_TIMELINE=full shows every section.
echo "== timeline (seconds since the workers started)"
sort -n "$tmp/events.log" | awk -v t0="$t0" -v workers="$NWORKERS" -v servers="$NSERVERS" \
	-v full="${DEMO_TIMELINE:-}" '
	function rel(t,   a, b) {
		split(t, a, "."); split(t0, b, ".")
		return (a[1] - b[1]) + ("0." a[2]) - ("0." b[2])
	}
	function out(t, text) { printf "%9.3f  %s\n", t, text }
	BEGIN { up = servers }
	$2 == "begin" { began[$3] = rel($1) }
	$2 == "end" { ns++; sb[ns] = began[$3]; se[ns] = rel($1); sw[ns] = $3 }
	$2 == "start" { out(rel($1), sprintf("%d workers start; %d of %d servers up", workers, up, servers)) }
	$2 == "stop" { out(rel($1), "all workers done") }
	$2 == "down" || $2 == "up" || $2 == "noup" || $2 == "fail" {
		t = rel($1); ne++; et[ne] = t
		if ($2 == "down")
			out(t, sprintf("** server %d (127.0.0.1:%s) killed (SIGKILL): %d of %d up", $3, $4, --up, servers))
		else if ($2 == "up")
			out(t, sprintf("** server %d (127.0.0.1:%s) restarted, empty: %d of %d up", $3, $4, ++up, servers))
		else if ($2 == "noup")
			out(t, sprintf("** server %d (127.0.0.1:%s) could not be restarted", $3, $4))
		else if (++nfail <= 5)
			out(t, sprintf("!! worker %d: dlock run exited %d", $3, $4))
		else
			lastfail = t
	}
	END {
		if (nfail > 5)
			out(lastfail, sprintf("!! ... and %d more failed dlock runs until here", nfail - 5))
		for (i = 1; i <= ns; i++) {
			# Sections are numbered in the order they ended: one that began
			# before the previous one ended overlapped it.
			ov[i] = i > 1 && sb[i] < se[i - 1]
			show[i] = full != "" || i <= 3 || i > ns - 3 || (ov[i] && ++shown_ov <= 10)
			for (j = 1; j <= ne; j++)
				if (se[i] >= et[j] - 0.3 && sb[i] <= et[j] + 0.3)
					show[i] = 1
		}
		for (i = 1; i <= ns; i++) {
			if (show[i]) {
				out(sb[i], sprintf("worker %d holds the lock (%d ms)%s", sw[i],
					(se[i] - sb[i]) * 1000 + 0.5, ov[i] ? "  !! OVERLAPS the previous section" : ""))
				continue
			}
			for (j = i; j + 1 <= ns && !show[j + 1]; j++)
				;
			split("", by)
			nov = 0
			for (k = i; k <= j; k++) {
				by[sw[k]]++
				nov += ov[k]
			}
			who = ""
			for (w = 1; w <= workers; w++)
				if (by[w] > 0)
					who = who (who == "" ? "" : ", ") sprintf("worker %d x%d", w, by[w])
			out(sb[i], sprintf("   ... %d more sections, %s, until %.3f (%s)", j - i + 1,
				nov ? nov " of them overlapping" : "one at a time", se[j], who))
			i = j
		}
	}
' | sort -s -n

# ---------------------------------------------------------------- the check
echo
echo "== who held it at ~1.5 s (dlock status $LOCK, while the workers ran)"
sed 's/^/  /' "$tmp/status-mid.txt"
echo "== state of the lock afterwards (dlock status $LOCK)"
"$dlock" -n "$nodes" --timeout 200 status "$LOCK" | sed 's/^/  /' || true

echo
echo "== check"
counter=$(cat "$tmp/counter")
completed=0
per_worker=
for w in $(seq "$NWORKERS"); do
	n=$(cat "$tmp/worker-$w.count" 2>/dev/null || echo 0)
	completed=$((completed + n))
	per_worker+="${per_worker:+, }worker $w: $n"
done
failures=$(grep -c ' fail ' "$tmp/events.log" || true)
# Sorted by time, the log must read begin, end, begin, end... with each end
# by the worker of the begin before it.
overlap=$(sort -n "$tmp/events.log" | awk -v t0="$t0" '
	function rel(t,   a, b) {
		split(t, a, "."); split(t0, b, ".")
		return (a[1] - b[1]) + ("0." a[2]) - ("0." b[2])
	}
	$2 == "begin" {
		if (holder != "")
			printf "%.3f: worker %s began while worker %s was inside\n", rel($1), $3, holder
		holder = $3
	}
	$2 == "end" {
		if (holder != $3)
			printf "%.3f: worker %s ended, but %s\n", rel($1), $3,
				holder == "" ? "nobody was inside" : "worker " holder " was inside"
		holder = ""
	}
	END { if (holder != "") printf "the last section, of worker %s, never ended\n", holder }
')

result=PASS
echo "  critical sections completed: $completed ($per_worker)"
echo "  counter file:                $counter"
if [ "$counter" != "$completed" ]; then
	echo "  FAIL: the counter ($counter) is not the number of sections ($completed): increments were lost"
	result=FAIL
fi
if [ -n "$overlap" ]; then
	echo "  FAIL: sections overlapped ($(wc -l <<<"$overlap") violations; the first ones):"
	echo "$overlap" | head -10 | sed 's/^/    /'
	result=FAIL
else
	echo "  no two sections overlapped"
fi
if [ "$failures" -gt 0 ] || [ "$status" -ne 0 ]; then
	echo "  FAIL: $failures dlock run(s) failed; what dlock said (count, message):"
	result=FAIL
elif [ -n "$(cat "$tmp"/worker-*.err 2>/dev/null)" ]; then
	echo "  dlock's warnings meanwhile (count, message):"
fi
cat "$tmp"/worker-*.err 2>/dev/null | sort | uniq -c | sort -rn | head -10 | sed 's/^/    /'
if [ "$completed" -lt 20 ]; then
	echo "  FAIL: only $completed sections completed in ${WORK_SECONDS}s"
	result=FAIL
fi
echo
echo "$result"
[ "$result" = PASS ]
