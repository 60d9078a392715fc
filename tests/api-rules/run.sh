#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The checker ci/api-rules.sh on two fixtures: good/ follows every rule it
# checks and must pass silently; bad/ breaks each of them (R1..R17) and must
# fail with exactly the lines of bad/expected.txt.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
check=$here/../../ci/api_rules.py
bad=0

if ! out=$(python3 "$check" check "$here/good" 2>/dev/null) || [ -n "$out" ]; then
	echo "api-rules: good/ should pass, got:" >&2
	echo "$out" >&2
	bad=1
fi
if out=$(python3 "$check" check "$here/bad" 2>/dev/null); then
	echo "api-rules: bad/ should fail, it passed" >&2
	bad=1
elif ! diff -u "$here/bad/expected.txt" <(echo "$out") >&2; then
	echo "api-rules: bad/ did not give bad/expected.txt (above: - expected, + got)" >&2
	bad=1
fi
for r in $(seq 1 17); do
	grep -q ": R$r: " "$here/bad/expected.txt" || { echo "api-rules: no breach of R$r in bad/" >&2; bad=1; }
done
[ $bad -eq 0 ] && echo "api-rules: both fixtures as expected"
exit $bad
