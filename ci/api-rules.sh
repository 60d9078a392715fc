#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ci/api-rules.sh - the public headers against the API rules of
# docs/api-rules.md, those a machine can check (the rule numbers are the
# document's).
#
#   ci/api-rules.sh               print every violation, one a line as
#                                 file:line: Rn: what; exit 1 if there is one
#   ci/api-rules.sh --inventory   every public symbol (functions, types,
#                                 struct fields, enum constants, macros):
#                                 kind, name, file:line, declaration (TSV)
#   ci/api-rules.sh --table DOC   every public symbol DOC's table has no row
#                                 for (docs/api-1.0.md); exit 1 if any
#
# Reads include/dlock.h, include/dlock/*.h and cmake/version.h.in (the
# installed dlock/version.h); dlock.hpp follows the C names and is not read.
# Needs python3 (ci/deps.sh installs it).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case ${1:-} in
--inventory) exec python3 "$root/ci/api_rules.py" inventory "$root" ;;
--table) exec python3 "$root/ci/api_rules.py" table-check "${2:?DOC}" "$root" ;;
"") exec python3 "$root/ci/api_rules.py" check "$root" ;;
*) sed -n '3,17p' "$0" >&2; exit 2 ;;
esac
