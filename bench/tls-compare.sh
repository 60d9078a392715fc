#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/tls-compare.sh - what TLS costs dlock: lock+unlock over rediss:// against
# redis:// on the same 5 local redis-servers (each listens on a plain and a
# TLS port, with certificates made here by openssl), dlock-bench scenario 1
# (1, 3 and 5 servers) in alternating rounds, p50 and p99 side by side.
#
# usage: bench/tls-compare.sh --bench PATH/TO/dlock-bench [--iterations N] [--rounds R]
#   --bench PATH      a built dlock-bench (cmake --build build --target dlock-bench)
#   --iterations N    pairs per row and round (default 5000)
#   --rounds R        rounds; plain and TLS take turns (default 4)
# Servers and the temporary folder are removed on exit. Only 127.0.0.1.
set -euo pipefail

bench=
iterations=5000
rounds=4
while [ $# -gt 0 ]; do
	case $1 in
	--bench) bench=$2; shift 2 ;;
	--iterations) iterations=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	-h|--help) sed -n '2,13p' "$0"; exit 0 ;;
	*) echo "tls-compare.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -x "$bench" ] || { echo "tls-compare.sh: --bench PATH/TO/dlock-bench is required" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-tls-compare.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# --- certificates -----------------------------------------------------------
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${ec[@]}" -keyout "$tmp/ca.key" -out "$tmp/ca.crt" -days 2 \
	-subj /CN=dlock-bench-ca 2>/dev/null
openssl req "${ec[@]}" -keyout "$tmp/server.key" -out "$tmp/server.csr" -subj /CN=localhost \
	2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$tmp/ext"
openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" \
	-CAcreateserial -out "$tmp/server.crt" -days 2 -extfile "$tmp/ext" 2>/dev/null

# --- 5 servers, each on a plain and a TLS port ------------------------------
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
plain=() tls=()
for i in 1 2 3 4 5; do
	port=$(free_port) tport=$(free_port)
	mkdir -p "$tmp/r$i"
	redis-server --port "$port" --tls-port "$tport" --bind 127.0.0.1 --save "" \
		--appendonly no --dir "$tmp/r$i" --logfile "$tmp/r$i/log" \
		--tls-cert-file "$tmp/server.crt" --tls-key-file "$tmp/server.key" \
		--tls-ca-cert-file "$tmp/ca.crt" --tls-auth-clients no &
	pids+=($!)
	for _ in $(seq 100); do
		redis-cli -p "$port" ping >/dev/null 2>&1 && break
		sleep 0.05
	done
	plain+=("redis://127.0.0.1:$port")
	tls+=("rediss://127.0.0.1:$tport")
done
plain_uris=$(IFS=,; echo "${plain[*]}")
tls_uris=$(IFS=,; echo "${tls[*]}")

# --- the rounds ---------------------------------------------------------------
run() { # kind uris round
	"$bench" --scenario 1 --iterations "$iterations" --warmup 1000 --uris "$2" \
		--tls-ca "$tmp/ca.crt" --json >"$tmp/$1-$3.json" 2>"$tmp/$1-$3.log" ||
		{ cat "$tmp/$1-$3.log" >&2; exit 1; }
}
for r in $(seq "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then run plain "$plain_uris" "$r"; run tls "$tls_uris" "$r"
	else run tls "$tls_uris" "$r"; run plain "$plain_uris" "$r"; fi
done

# --- the table: median over rounds of each row's p50 and p99 -----------------
python3 - "$tmp" "$rounds" <<'EOF'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for kind in ("plain", "tls"):
    for r in range(1, rounds + 1):
        for res in json.load(open(f"{tmp}/{kind}-{r}.json"))["results"]:
            if res["scenario"] != 1 or res["impl"] != "dlock":
                continue
            d = rows.setdefault(res["servers"], {}).setdefault(kind, {"p50": [], "p99": []})
            d["p50"].append(res["p50_us"])
            d["p99"].append(res["p99_us"])
print("| servers | plain p50 µs | TLS p50 µs | TLS/plain p50 | plain p99 µs | TLS p99 µs |")
print("|---|---:|---:|---:|---:|---:|")
for n in sorted(rows):
    p, t = rows[n]["plain"], rows[n]["tls"]
    pm, tm = statistics.median(p["p50"]), statistics.median(t["p50"])
    print(f"| {n} | {pm:.1f} | {tm:.1f} | {tm / pm:.2f} | "
          f"{statistics.median(p['p99']):.1f} | {statistics.median(t['p99']):.1f} |")
EOF
