#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Run a command (default: the README's test command, ci/test.sh) on a busy
# machine: two CPU-bound processes run beside it for as long as it runs, as
# on a shared CI host. Races that hide on an idle machine show up here.
#
#   ci/load.sh                 # ci/test.sh under load
#   ci/load.sh -r 3            # three times in a row; stops at the first failure
#   HOGS=4 ci/load.sh CMD ...  # any command, with four hogs
#
# The command runs in the current directory. Exits with the command's status
# (the first failing run's, with -r).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
runs=1
if [ "${1:-}" = "-r" ]; then
	runs=${2:?ci/load.sh: -r needs a count}
	shift 2
fi
[ $# -gt 0 ] || set -- "$here/test.sh"
hogs=${HOGS:-2}
pids=()

stop_hogs() {
	[ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
}
trap stop_hogs EXIT

for _ in $(seq "$hogs"); do
	# Busy in a shell loop, never blocking: a plain CPU hog.
	( trap - EXIT; exec nice -n 0 sh -c 'while :; do :; done' ) &
	pids+=($!)
done
echo "ci/load.sh: $hogs CPU hogs running (pids ${pids[*]}); running: $*" >&2

for i in $(seq "$runs"); do
	start=$SECONDS
	if "$@"; then
		echo "ci/load.sh: run $i of $runs passed under load ($((SECONDS - start)) s)" >&2
	else
		status=$?
		echo "ci/load.sh: run $i of $runs FAILED under load (exit $status, $((SECONDS - start)) s)" >&2
		exit "$status"
	fi
done
