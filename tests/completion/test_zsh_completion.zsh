#!/usr/bin/env zsh
# SPDX-License-Identifier: BSD-3-Clause
# The zsh completion (contrib/completion/_dlock), in an interactive zsh on a
# pseudo-terminal: each line is typed with a TAB, and what the line became
# is written out by a widget bound to ^O.
# Usage: test_zsh_completion.zsh CONTRIB_COMPLETION_DIR
emulate -L zsh
zmodload zsh/zpty || { print "zsh/zpty missing"; exit 1 }
dir=${1:?the completion directory}
out=$(mktemp) || exit 1
typeset -A want
want=(
	'dlock ru'            'dlock run '
	'dlock run --fa'      'dlock run --fair '
	'dlock hold --le'     'dlock hold --lease='
	'dlock status --j'    'dlock status --json '
	'dlock --mode re'     'dlock --mode redlock '
	'dlock latch d'       'dlock latch down '
	'dlock help wa'       'dlock help wait '
	'dlock -q --conf'     'dlock -q --conflict-exit-code='
)
lines=(${(k)want})
zpty z zsh -f -i
zpty -w z "PS1='> '; fpath=(${(q)dir} \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z "show() { print -r -- \"\$BUFFER\" >> ${(q)out}; BUFFER=; }; zle -N show; bindkey '^O' show"
for line in $lines; do
	zpty -w -n z "$line"$'\t\C-o'
done
for ((i = 0; i < 300 && $(wc -l < $out) < $#lines; i++)); do
	sleep 0.1
done
zpty -d z
got=("${(@f)$(<$out)}")
rm -f $out
fail=0
for ((i = 1; i <= $#lines; i++)); do
	if [[ $got[i] != $want[$lines[i]] ]]; then
		print -r -- "FAIL: '$lines[i]<TAB>' gave '$got[i]', expected '$want[$lines[i]]'"
		fail=1
	else
		print -r -- "ok: '$lines[i]<TAB>' -> '$got[i]'"
	fi
done
exit $fail
