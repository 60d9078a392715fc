#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The bash completion (contrib/completion/dlock.bash), sourced into a plain
# bash: what COMPREPLY holds for a few command lines.
# Usage: test_bash_completion.sh CONTRIB_COMPLETION_DIR
set -u
dir=${1:?the completion directory}
fail=0

# The replies for "WORDS...", sorted, unique, on one line: the last word is
# the one being completed.
replies() {
	bash --norc --noprofile -c '
		source "$1" || exit 2
		read -r -a COMP_WORDS <<<"$2"
		[[ $2 == *" " ]] && COMP_WORDS+=("")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		_dlock dlock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
		printf "%s\n" "${COMPREPLY[@]}" | sort -u | tr "\n" " " | sed "s/ $//"
	' _ "$dir/dlock.bash" "$1"
}

# expect "WORDS..." "WANTED REPLY"
expect() {
	local line=$1 want=$2 got
	got=$(replies "$line")
	if [[ $got != "$want" ]]; then
		echo "FAIL: '$line<TAB>' gave '$got', expected '$want'"
		fail=1
	else
		echo "ok: '$line<TAB>' -> '$got'"
	fi
}

expect "dlock r" "release run"
expect "dlock h" "help hold"
expect "dlock run --fa" "--fair"
expect "dlock --mode r" "redlock rlock"
expect "dlock -n redis://a --timeout 1s w" "wait"
expect "dlock hold --le" "--lease"
expect "dlock status --j" "--json"
expect "dlock latch " "count down set wait"
expect "dlock help ru" "run"
expect "dlock -q --qu" "--quiet"
expect "dlock --conflict" "--conflict-exit-code"
# after `--`, the command to run: a command name
got=$(replies "dlock run -w 1s job -- tru")
if [[ " $got " != *" true "* ]]; then
	echo "FAIL: 'dlock run -w 1s job -- tru<TAB>' gave '$got', expected true among them"
	fail=1
fi
exit $fail
