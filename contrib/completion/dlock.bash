# SPDX-License-Identifier: BSD-3-Clause
# bash completion for dlock(1): commands, options, option values (--mode,
# files for --password-file and --tls-*), and the command after `run ... --`.
# Installed as share/bash-completion/completions/dlock; needs nothing of the
# bash-completion package (it uses _command_offset when that is there).

_dlock_commands="run acquire release status unlock latch hold wait help"
_dlock_globals="-n --nodes -m --mode -q --quiet -E --conflict-exit-code --timeout
 --watchdog --restart-guard --sync-replicas --sync-aof --sync-timeout --password-file
 --password-env --user --tls-ca --tls-ca-dir --tls-cert --tls-key --tls-server-name
 --tls-insecure --fenced --fair -h --help -V --version"
# Options that take a value (the next word is not a command or NAME).
_dlock_takes_value=" -n --nodes -m --mode -E --conflict-exit-code --timeout --watchdog
 --restart-guard --sync-replicas --sync-aof --sync-timeout --password-file --password-env --user
 --tls-ca --tls-ca-dir --tls-cert --tls-key --tls-server-name -w --wait -l --lease
 --grace -c --permits --owner --interval --label --metrics-textfile "

_dlock_command_options()
{
	case $1 in
	run) echo "-w --wait -l --lease --grace -s --shared -x --exclusive -c --permits --label --metrics-textfile" ;;
	acquire) echo "-w --wait -l --lease --owner -s --shared -x --exclusive --label --metrics-textfile" ;;
	release) echo "--owner -s --shared -x --exclusive" ;;
	status) echo "--json --watch --interval" ;;
	unlock) echo "--force" ;;
	latch) echo "-w --wait --missing-ok" ;;
	hold) echo "-w --wait -l --lease -s --shared -x --exclusive --label --metrics-textfile" ;;
	wait) echo "-w --wait" ;;
	esac
}

_dlock()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
	local i word command="" command_at=0 dashdash=0
	COMPREPLY=()

	# The command: the first word that is neither an option nor its value.
	for ((i = 1; i < COMP_CWORD; i++)); do
		word=${COMP_WORDS[i]}
		if [[ -n $command && $word == -- ]]; then
			dashdash=$i
			break
		fi
		if [[ $_dlock_takes_value == *" $word "* ]]; then
			((i++))
			continue
		fi
		if [[ -z $command && $word != -* ]]; then
			command=$word
			command_at=$i
		fi
	done

	# run NAME -- CMD ...: complete CMD as a command line of its own.
	if ((dashdash > 0)); then
		if declare -F _command_offset >/dev/null; then
			_command_offset $((dashdash + 1))
		elif ((COMP_CWORD == dashdash + 1)); then
			COMPREPLY=($(compgen -c -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi
		return 0
	fi

	case $prev in
	-m | --mode)
		COMPREPLY=($(compgen -W "rlock redlock multilock" -- "$cur"))
		return 0
		;;
	--password-file | --tls-ca | --tls-cert | --tls-key | --metrics-textfile)
		COMPREPLY=($(compgen -f -- "$cur"))
		return 0
		;;
	--tls-ca-dir)
		COMPREPLY=($(compgen -d -- "$cur"))
		return 0
		;;
	--password-env)
		COMPREPLY=($(compgen -v -- "$cur"))
		return 0
		;;
	-w | --wait | -l | --lease | --grace | --timeout | --watchdog | --restart-guard | \
		--sync-timeout)
		COMPREPLY=($(compgen -W "0 250ms 1s 30s 5m 1h" -- "$cur"))
		return 0
		;;
	-n | --nodes)
		COMPREPLY=($(compgen -W "redis:// rediss:// unix:// redis+sentinel:// redis+cluster://" -- "$cur"))
		compopt -o nospace 2>/dev/null
		return 0
		;;
	-E | --conflict-exit-code | --sync-replicas | --sync-aof | -c | --permits | --owner | --user | \
		--tls-server-name)
		return 0
		;;
	esac

	if [[ -z $command ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$_dlock_globals" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$_dlock_commands" -- "$cur"))
		fi
		return 0
	fi
	case $command in
	help)
		((COMP_CWORD == command_at + 1)) &&
			COMPREPLY=($(compgen -W "${_dlock_commands% help}" -- "$cur"))
		return 0
		;;
	latch)
		if ((COMP_CWORD == command_at + 1)) && [[ $cur != -* ]]; then
			COMPREPLY=($(compgen -W "set down count wait" -- "$cur"))
			return 0
		fi
		;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_dlock_command_options "$command") $_dlock_globals" -- "$cur"))
	fi
	return 0
}
complete -F _dlock dlock
