#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every exit status the `dlock` command can return (the EXIT_* numbers and
# _exit() calls in src/cli) is listed in dlock(1)'s EXIT STATUS, in numeric
# order, and in `dlock --help`; and the two list the same numbers.
#   test_exit_status.sh DLOCK_BINARY SOURCE_DIR
set -uo pipefail
dlock=$1
src=$2
man=$src/doc/dlock.1
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# The source's codes: #define EXIT_X N, _exit(N) and the ternaries inside _exit().
source_codes=$( {
	grep -ho '#define EXIT_[A-Z_]* [0-9]*' "$src"/src/cli/*.[ch] | awk '{ print $3 }'
	grep -ho '_exit([^;]*' "$src"/src/cli/*.c | grep -o '[0-9][0-9]*'
} | sort -nu)
[ -n "$source_codes" ] || fail "no exit codes found in $src/src/cli"

# The man page's: each ".B N" (or ".B 128+N") tag of the EXIT STATUS section, in order.
man_list=$(sed -n '/^\.SH EXIT STATUS/,/^\.SH /p' "$man" | awk '
	prev == ".TP" && $1 == ".B" { sub(/\+N$/, "", $2); print $2 } { prev = $0 }')
[ -n "$man_list" ] || fail "no entries under EXIT STATUS in $man"
sorted=$(printf '%s\n' $man_list | sort -n)
[ "$man_list" = "$sorted" ] || fail "EXIT STATUS is not in numeric order: $(echo $man_list)"
dups=$(printf '%s\n' $man_list | uniq -d)
[ -z "$dups" ] || fail "EXIT STATUS lists $(echo $dups) twice"

# --help's: the numbers of its "Exit status:" paragraph that say what they mean.
help=$("$dlock" --help) || fail "dlock --help exited $?"
para=$(printf '%s\n' "$help" | sed -n '/^Exit status:/,/^$/p' | tr '\n' ' ')
[ -n "$para" ] || fail "dlock --help has no \"Exit status:\" paragraph"
help_list=$(printf '%s\n' "$para" | grep -oE '(^|[;.:] )[0-9]+(\+N)? ' | grep -oE '[0-9]+' | sort -nu)

for code in $source_codes; do
	printf '%s\n' $man_list | grep -qx "$code" || fail "exit $code (src/cli) is not in dlock(1) EXIT STATUS"
	printf '%s\n' $help_list | grep -qx "$code" || fail "exit $code (src/cli) is not in dlock --help"
done
for code in $help_list; do
	printf '%s\n' $man_list | grep -qx "$code" || fail "exit $code of dlock --help is not in dlock(1)"
done
for code in $man_list; do
	printf '%s\n' $help_list | grep -qx "$code" || fail "exit $code of dlock(1) is not in dlock --help"
done
[ "$failed" = 0 ] && echo "ok: exit statuses $(echo $man_list) in order, in both"
exit $failed
