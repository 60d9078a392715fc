#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ci/layers.sh on small trees: it passes a tree whose includes look down,
# names the file, line and layers of an include that looks up (between
# core's inner layers too) and of a core file outside the inner folders,
# and passes this repository.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
check=$here/ci/layers.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

# A tree with one file per layer, each including the one below it.
tree() {
	rm -rf "$tmp/t"
	mkdir -p "$tmp/t/src/core"/{base,loop,net,topology,mux,drive} "$tmp/t/src"/{single,multilock,redlock,cli,adapters}
	echo '#include "dlock/errors.h"' > "$tmp/t/src/core/base/error.c"
	echo '#include "core/base/error.h"' > "$tmp/t/src/core/loop/loop.c"
	echo '#include "core/loop/loop.h"' > "$tmp/t/src/core/net/conn.c"
	echo '#include "core/net/conn.h"' > "$tmp/t/src/core/topology/cluster.c"
	echo '#include "core/topology/cluster.h"' > "$tmp/t/src/core/mux/mux.c"
	printf '#include "core/mux/mux.h"\n#include "core/drive/client.h"\n' \
		> "$tmp/t/src/core/drive/client.c"
	echo '#include "core/drive/client.h"' > "$tmp/t/src/single/rlock.c"
	echo '#include "dlock.h"' > "$tmp/t/src/cli/main.c"
	echo '#include "dlock/uv.h"' > "$tmp/t/src/adapters/uv.c"
}

# expect CASE STATUS TEXT: ci/layers.sh on the tree exits STATUS and says TEXT.
expect() {
	local out rc
	out=$("$check" "${4:-$tmp/t}" 2>&1)
	rc=$?
	if [ "$rc" -ne "$2" ] || ! grep -qF -- "$3" <<<"$out"; then
		echo "FAIL $1: exit $rc (want $2), output:"
		echo "$out"
		failed=1
	else
		echo "ok   $1"
	fi
}

tree
expect "a tree that looks down passes and prints the order" 0 \
	"inside core: base <- loop <- net <- topology <- mux <- drive"

tree
echo '#include "core/drive/client.h"' >> "$tmp/t/src/core/net/conn.c"
expect "net including drive fails" 1 \
	'src/core/net/conn.c:2: core/net includes core/drive (an inner layer above): #include "core/drive/client.h"'

tree
echo '#include "core/drive/client.h"' >> "$tmp/t/src/core/topology/cluster.c"
expect "topology including drive fails" 1 \
	'src/core/topology/cluster.c:2: core/topology includes core/drive (an inner layer above)'

tree
echo '#include "core/drive/client.h"' >> "$tmp/t/src/core/mux/mux.c"
expect "mux including drive fails" 1 \
	'src/core/mux/mux.c:2: core/mux includes core/drive (an inner layer above): #include "core/drive/client.h"'

tree
echo '#include "core/mux/mux.h"' >> "$tmp/t/src/core/topology/cluster.c"
expect "topology including mux fails" 1 \
	'src/core/topology/cluster.c:2: core/topology includes core/mux (an inner layer above)'

tree
echo '#include "core/net/conn.h"' >> "$tmp/t/src/core/loop/loop.c"
expect "loop including net fails" 1 \
	'src/core/loop/loop.c:2: core/loop includes core/net (an inner layer above)'

tree
echo '#include "core/base/error.h"' > "$tmp/t/src/core/loop.c"
expect "a core file outside the inner folders fails" 1 \
	"src/core/loop.c: a core file belongs in one of src/core/{base,loop,net,topology,mux,drive}/"

tree
echo '#include "core/client.h"' >> "$tmp/t/src/core/drive/client.c"
expect "an include of core/ without a folder fails" 1 \
	'src/core/drive/client.c:3: core includes a header outside base loop net topology mux drive: #include "core/client.h"'

tree
echo '#include "single/rlock.h"' >> "$tmp/t/src/core/drive/client.c"
expect "core including single still fails" 1 \
	'src/core/drive/client.c:3: core includes single (a layer above)'

tree
echo '#include "core/loop/loop.h"' >> "$tmp/t/src/adapters/uv.c"
expect "an adapter including a core header fails" 1 \
	'src/adapters/uv.c:2: adapters includes an internal header: #include "core/loop/loop.h"'

tree
echo '#include "single/lock_internal.h"' >> "$tmp/t/src/cli/main.c"
expect "the CLI including an internal header fails" 1 \
	'src/cli/main.c:2: the CLI includes an internal header: #include "single/lock_internal.h"'

expect "this repository passes" 0 "every include looks down" "$here"
exit "$failed"
