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
# --table: a row keyed by a 0.x name also covers the 1.0 name its third
# cell declares (function, field, opaque type), and nothing else it mentions.
if ! python3 - "$check" <<'EOF'
import importlib.util, sys
spec = importlib.util.spec_from_file_location('api_rules', sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
rows = m.table_rows("""
| `dlock_x_try` | function | `int dlock_x_acquire(dlock_x *x, const char *owner)` | R5 |
| `dlock_x_options.ud` | field | `void *userdata` | R12 |
| `dlock_y` | struct | opaque `typedef struct dlock_z dlock_z;` | R16 |
| `dlock_x_unlock_as` | function | removed: dlock_x_release() takes the owner | R5 |
""")
want = {'dlock_x_try', 'dlock_x_acquire', 'dlock_x_options.ud', 'dlock_x_options.userdata',
        'dlock_y', 'dlock_z', 'dlock_x_unlock_as'}
sys.exit(0 if rows == want else print(sorted(rows ^ want)) or 1)
EOF
then
	echo "api-rules: --table rows are not as expected" >&2
	bad=1
fi
[ $bad -eq 0 ] && echo "api-rules: both fixtures as expected"
exit $bad
