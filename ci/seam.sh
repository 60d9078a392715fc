#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The library talks to the network, the name service, the clock and the
# random source only through its seam (src/core/base/sys.h), so a simulator
# can replace them: no file of the library but src/core/base/sys.c calls
# these functions itself. (The CLI is a user of the library, not part of it.)
# A file's own static function of the same name (a namesake) is not a call.
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}"

calls='recv|recvfrom|recvmsg|send|sendto|sendmsg|read|write|socket|connect|getsockopt|setsockopt'
calls+='|getaddrinfo|freeaddrinfo|gethostbyname|poll|ppoll|select|pselect'
calls+='|clock_gettime|gettimeofday|time|getrandom|rand|random|uuid_generate[a-z_]*'
seam=src/core/base/sys.c
# Outside the seam on purpose (core/base/sys.h says why): the loop's own
# eventfd, timerfd and epoll descriptor are read there.
allowed='^src/core/loop/loop(_api)?\.c:[0-9]+:.*\bread\((l->timerfd|io->fd)'
allowed+='|^src/core/loop/loop\.c:[0-9]+:.*\bwrite\(l->wake_fd'

bad=0
while IFS= read -r hit; do
	file=${hit%%:*}
	name=$(printf '%s\n' "$hit" | grep -oE "(^|[^_[:alnum:].>])($calls)\(" | head -1 |
		sed -E 's/^[^_[:alnum:]]?//; s/\($//')
	[ -n "$name" ] || continue
	# A namesake defined in the same file (static void send(...)).
	grep -qE "^static [^=;(]*[[:space:]*]$name\(" "$file" && continue
	printf '%s\n' "$hit" | grep -qE "$allowed" && continue
	echo "ci/seam.sh: $hit" >&2
	echo "ci/seam.sh:   calls $name() itself: go through dlock__sys_get() (src/core/base/sys.h)" >&2
	bad=1
done < <(find src -name '*.c' ! -path 'src/cli/*' ! -path "$seam" -print0 |
	xargs -0 grep -nE "(^|[^_[:alnum:].>])($calls)\(" |
	grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)')

# One wait for descriptors (SPEC §16): the seam's poll is called in one
# place, dlock__loop_wait (src/core/loop/loop.c); an epoll loop waits there
# on its epoll descriptor and epoll_wait only collects (a zero timeout).
waits=$(grep -rnE 'dlock__sys_get\(\)->poll\(' src --include='*.c' | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)' || true)
if [ "$(printf '%s\n' "$waits" | grep -c .)" -ne 1 ] || ! printf '%s\n' "$waits" | grep -q '^src/core/loop/loop\.c:'; then
	echo "ci/seam.sh: the seam's poll must be called once, in src/core/loop/loop.c (dlock__loop_wait):" >&2
	printf '%s\n' "$waits" >&2
	bad=1
fi
if grep -rnE 'epoll_wait\(' src --include='*.c' | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)' | grep -vE 'epoll_wait\([^;]*, 0\)' | grep -q .; then
	echo "ci/seam.sh: an epoll_wait with a timeout waits beside dlock__loop_wait; collect with 0" >&2
	bad=1
fi

[ "$bad" -eq 0 ] && echo "ci/seam.sh: every call to the world goes through the seam; one wait for descriptors"
exit "$bad"
