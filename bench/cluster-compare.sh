#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/cluster-compare.sh - what Redis Cluster buys and costs dlock: many
# distinct lock names (lock+unlock, no contention) on 1 primary against a
# 3-primary cluster on the same machine, then the cost of a MOVED redirect.
# Prints dlock-cluster-bench's lines: ops/s in all and per primary, p50/p99,
# and the servers' CPU per operation (the fair comparison on one machine,
# where the primaries share its cores).
#
# usage: bench/cluster-compare.sh --bench PATH/TO/dlock-cluster-bench
#          [--threads T] [--seconds S] [--rounds R] [--moved K]
#          [--holds N [--watchdog MS] [--periods P] [--free]]
#   --bench PATH   a built dlock-cluster-bench (cmake --build build --target dlock-cluster-bench)
#   --threads T    client threads (default 8); --seconds S per run (default 5)
#   --rounds R     rounds; single and cluster take turns (default 3)
#   --moved K      MOVED samples (default 200)
#   --holds N      only the renewal row: N watchdog holds on the cluster, P
#                  renewal periods (default 6) of a MS watchdog (default 3000);
#                  --free also times freeing the N handles
# Servers and the temporary folder are removed on exit. Only 127.0.0.1.
set -euo pipefail

bench=
threads=8
seconds=5
rounds=3
moved=200
holds=0
watchdog=3000
periods=6
free=0
while [ $# -gt 0 ]; do
	case $1 in
	--bench) bench=$2; shift 2 ;;
	--threads) threads=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--moved) moved=$2; shift 2 ;;
	--holds) holds=$2; shift 2 ;;
	--watchdog) watchdog=$2; shift 2 ;;
	--periods) periods=$2; shift 2 ;;
	--free) free=1; shift ;;
	-h|--help) sed -n '2,20p' "$0"; exit 0 ;;
	*) echo "cluster-compare.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -x "$bench" ] || { echo "cluster-compare.sh: --bench PATH/TO/dlock-cluster-bench is required" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-cluster-compare.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start PORT [ARGS...]: a redis-server in $tmp/PORT
start() {
	local port=$1
	shift
	mkdir -p "$tmp/$port"
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$tmp/$port" --logfile "$tmp/$port/log" "$@" &
	pids+=($!)
	disown # killed by cleanup without a job notice
	for _ in $(seq 1 100); do
		redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	echo "cluster-compare.sh: redis-server on $port did not start" >&2
	exit 1
}

single=$(free_port)
start "$single"
nodes=()
for _ in 1 2 3; do
	p=$(free_port)
	start "$p" --cluster-enabled yes --cluster-config-file nodes.conf \
		--cluster-port "$(free_port)" --cluster-node-timeout 2000
	nodes+=("127.0.0.1:$p")
done
redis-cli --cluster create "${nodes[@]}" --cluster-yes >"$tmp/create.log" 2>&1
# Every node, not only the first: one still in state fail answers CLUSTERDOWN.
for n in "${nodes[@]}"; do
	for _ in $(seq 1 100); do
		redis-cli -p "${n#*:}" cluster info | grep -q cluster_state:ok && break
		sleep 0.1
	done
done
seeds=$(IFS=,; echo "${nodes[*]}")

if [ "$holds" -gt 0 ]; then
	echo "# $holds watchdog holds, ${watchdog} ms watchdog, $periods renewal periods"
	"$bench" --uri "redis+cluster://$seeds" --servers "$seeds" --threads "$threads" \
		--holds "$holds" --watchdog "$watchdog" --periods "$periods" --free "$free"
	exit 0
fi

echo "# $threads threads, distinct names, ${seconds} s per run, $rounds rounds"
for r in $(seq 1 "$rounds"); do
	"$bench" --uri "redis://127.0.0.1:$single" --servers "127.0.0.1:$single" \
		--threads "$threads" --seconds "$seconds"
	"$bench" --uri "redis+cluster://$seeds" --servers "$seeds" \
		--threads "$threads" --seconds "$seconds"
done
echo "# MOVED: a slot handed to another primary behind the client's back"
"$bench" --uri "redis+cluster://$seeds" --servers "$seeds" --moved "$moved"
