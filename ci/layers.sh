#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The layers only look down: core <- single <- multilock <- redlock <- cli.
# Fails when a file includes a header of a layer above its own, or when the
# CLI includes anything but the public headers and its own.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

layers=(core single multilock redlock cli)
rank() { local i; for i in "${!layers[@]}"; do [ "${layers[$i]}" = "$1" ] && echo "$i" && return; done; echo 99; }

bad=0
for dir in src/*/; do
	layer=$(basename "$dir")
	mine=$(rank "$layer")
	while IFS=: read -r file line inc; do
		target=${inc#*\"}
		target=${target%%/*}
		if [ "$layer" = cli ]; then
			# The CLI is a user of the library: public headers and its own only.
			case $inc in *'"dlock.h"'* | *'"dlock/'* | *'<dlock'*) continue ;; esac
			[ -e "src/cli/$(echo "$inc" | sed 's/.*"\(.*\)".*/\1/')" ] && continue
			echo "ci/layers.sh: $file:$line: the CLI includes an internal header: $inc" >&2
			bad=1
			continue
		fi
		[ "$target" = dlock ] && continue
		theirs=$(rank "$target")
		if [ "$theirs" -gt "$mine" ]; then
			echo "ci/layers.sh: $file:$line: $layer includes $target (a layer above): $inc" >&2
			bad=1
		fi
	done < <(grep -rHn --include='*.[ch]' '^#include "' "$dir")
done
[ "$bad" -eq 0 ] && echo "ci/layers.sh: every include looks down (core <- single <- multilock <- redlock <- cli)"
exit "$bad"
