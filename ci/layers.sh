#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The layers only look down: core <- single <- multilock <- redlock <- cli,
# and inside core: base <- loop <- net <- topology <- mux <- drive, a folder each;
# the event-loop adapters (src/adapters) sit above the public API, as cli.
# Fails when a file includes a header of a layer above its own, when the
# CLI or an adapter includes anything but the public headers and its own,
# or when a core file stands outside the inner layers' folders.
set -euo pipefail
# The tree to check: the argument, or this repository.
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}"

layers=(core single multilock redlock cli)
inner=(base loop net topology mux drive)
rank() { # rank NAME LAYER...: NAME's place in the list, 99 when absent
	local name=$1 i=0 l
	shift
	for l in "$@"; do [ "$l" = "$name" ] && echo "$i" && return; i=$((i + 1)); done
	echo 99
}

bad=0
fail() { echo "ci/layers.sh: $*" >&2; bad=1; }

# Inside core: a file includes its own folder's headers or those below it.
check_core() { # FILE LINE INCLUDE
	local file=$1 line=$2 inc=$3 mine theirs path
	mine=${file#src/core/}
	mine=${mine%%/*}
	path=${inc#*\"}
	path=${path%\"*}
	case $path in core/*) ;; *) return ;; esac
	theirs=${path#core/}
	theirs=${theirs%%/*}
	if [ "$(rank "$theirs" "${inner[@]}")" -eq 99 ]; then
		fail "$file:$line: core includes a header outside ${inner[*]}: $inc"
	elif [ "$(rank "$theirs" "${inner[@]}")" -gt "$(rank "$mine" "${inner[@]}")" ]; then
		fail "$file:$line: core/$mine includes core/$theirs (an inner layer above): $inc"
	fi
}

for f in src/core/*.[ch]; do
	[ -e "$f" ] && fail "$f: a core file belongs in one of src/core/{$(IFS=,; echo "${inner[*]}")}/"
done
for f in src/core/*/; do
	[ "$(rank "$(basename "$f")" "${inner[@]}")" -eq 99 ] &&
		fail "$f: not an inner layer of core (${inner[*]})"
done

for dir in src/*/; do
	layer=$(basename "$dir")
	mine=$(rank "$layer" "${layers[@]}")
	while IFS=: read -r file line inc; do
		target=${inc#*\"}
		target=${target%%/*}
		if [ "$layer" = cli ] || [ "$layer" = adapters ]; then
			# The CLI and the event-loop adapters are users of the library:
			# public headers and their own only.
			case $inc in *'"dlock.h"'* | *'"dlock/'* | *'<dlock'*) continue ;; esac
			[ -e "src/$layer/$(echo "$inc" | sed 's/.*"\(.*\)".*/\1/')" ] && continue
			fail "$file:$line: ${layer/cli/the CLI} includes an internal header: $inc"
			continue
		fi
		[ "$layer" = core ] && check_core "$file" "$line" "$inc"
		[ "$target" = dlock ] && continue
		theirs=$(rank "$target" "${layers[@]}")
		if [ "$theirs" -gt "$mine" ]; then
			fail "$file:$line: $layer includes $target (a layer above): $inc"
		fi
	done < <(grep -rHn --include='*.[ch]' '^#include "' "$dir" || true)
done
[ "$bad" -eq 0 ] && echo "ci/layers.sh: every include looks down (core <- single <- multilock <- redlock <- cli; adapters and cli use the public headers; inside core: base <- loop <- net <- topology <- mux <- drive)"
exit "$bad"
