#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Redisson peer of the interop tests (tests/interop/CMakeLists.txt runs it).
#   redisson.sh build VERSION PEER_DIR MAVEN_REPO   build the peer against that Redisson
#   redisson.sh run PEER_DIR TEST [ARGS...]          run a test with that peer
# The build downloads Redisson from Maven Central into MAVEN_REPO (inside the
# build folder). When it cannot, this fails and says so: the interop tests
# are never counted as passed without the real Redisson.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

build() {
	local version=$1 dir=$2 repo=$3
	mkdir -p "$dir" "$repo"
	local log=$dir/maven.log
	# One Maven at a time in one local repository (ctest may run both
	# versions' builds at once).
	if ! flock "$repo/.lock" mvn -B -e -f "$here/redisson/pom.xml" -Dmaven.repo.local="$repo" \
		-Dredisson.version="$version" -Dpeer.build.dir="$dir" package >"$log" 2>&1; then
		tail -40 "$log" >&2
		echo >&2
		if grep -qE 'Could not (resolve|transfer)|Unknown host|Connect(ion)? (refused|timed out)|Network is unreachable' "$log"; then
			echo "redisson.sh: Maven could not download Redisson $version from Maven Central" \
				"(https://repo.maven.apache.org): the interop tests need it and cannot run" \
				"without it. Full log: $log" >&2
		else
			echo "redisson.sh: building the Redisson $version peer failed. Full log: $log" >&2
		fi
		exit 1
	fi
	[ -s "$dir/classpath.txt" ] || { echo "redisson.sh: Maven wrote no $dir/classpath.txt" >&2; exit 1; }
	echo "redisson.sh: peer for Redisson $version built in $dir"
}

run() {
	local dir=$1
	shift
	[ -s "$dir/classpath.txt" ] || {
		echo "redisson.sh: no peer in $dir: its build (the interop_redisson_*_peer test) failed" >&2
		exit 1
	}
	DLOCK_REDISSON_CLASSPATH="$dir/redisson-peer-1.jar:$(cat "$dir/classpath.txt")"
	export DLOCK_REDISSON_CLASSPATH
	exec "$@"
}

case ${1:-} in
build) shift; build "$@" ;;
run) shift; run "$@" ;;
*) echo "usage: redisson.sh build VERSION PEER_DIR MAVEN_REPO | run PEER_DIR TEST [ARGS...]" >&2; exit 2 ;;
esac
