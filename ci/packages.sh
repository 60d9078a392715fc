#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Build dlock's Debian packages and use them as a user would:
#   1. a Release build in $BUILD_DIR/pkg (default build-ci/pkg) with prefix /usr and Debian's
#      hardening flags (dpkg-buildflags), then `cpack -G DEB`: libdlock<SOVERSION>, libdlock-dev
#      and dlock, in $BUILD_DIR/pkg/packages
#   2. each package's contents (dpkg-deb -c) and control fields: the library only in
#      libdlock<SOVERSION> (which depends on neither libuv nor libevent), headers, .so link,
#      static library, dlock.pc, the CMake package and the event-loop adapters (libdlock-uv.a,
#      libdlock-libevent.a, dlock-uv.pc, dlock-libevent.pc) only in libdlock-dev, the command,
#      man page and completion only in dlock
#   3. lintian, when installed: no errors
#   4. dpkg -i all three (as root); hello_lock.c built with `cc $(pkg-config --cflags --libs
#      dlock)` and uv_teardown.c with `cc $(pkg-config --cflags --libs dlock-uv)` against the
#      installed copy and run against a redis-server started on a free 127.0.0.1 port; `dlock --version`, `dlock run` against the same server, `man -w dlock`
#   5. dpkg --purge all three: the machine is left as it was (the run refuses to start when
#      any of them is installed already, and purges them on any exit)
#
#   ci/packages.sh [--build-only]   (--build-only: steps 1-3, no root needed)
#
# Runs one at a time on a machine (a lock file): dpkg is machine-wide.
set -euo pipefail
exec </dev/null

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
build=${BUILD_DIR:-build-ci}
case $build in /*) ;; *) build=$root/$build ;; esac
pkgbuild=$build/pkg
jobs=$(nproc 2>/dev/null || echo 2)
build_only=0
case ${1-} in
--build-only) build_only=1 ;;
'') ;;
*) echo "usage: ci/packages.sh [--build-only]" >&2; exit 2 ;;
esac

version=$(sed -n 's/^project(dlock VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
soversion=$(sed -n 's/^set(DLOCK_SOVERSION \([0-9]*\))/\1/p' "$root/CMakeLists.txt")
[ -n "$version" ] && [ -n "$soversion" ] || {
	echo "packages: no project(dlock VERSION ...) or set(DLOCK_SOVERSION ...) in CMakeLists.txt" >&2
	exit 1
}
lib=libdlock$soversion
packages=("$lib" libdlock-dev dlock)

step() { printf '\n--- packages: %s\n' "$*"; }
fail() {
	echo "packages: $*" >&2
	exit 1
}

for tool in cmake cpack dpkg dpkg-deb dpkg-buildflags dpkg-shlibdeps; do
	command -v "$tool" >/dev/null || fail "$tool not found (Debian: cmake, dpkg-dev; ci/deps.sh installs them)"
done

# libdlock-dev ships the adapters: their loop libraries must be here to build them.
for m in libuv libevent; do
	pkg-config --exists "$m" || fail "pkg-config finds no $m: libdlock-dev would lack its adapter (Debian: libuv1-dev libevent-dev; ci/deps.sh installs them)"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-packages.XXXXXX")
redis_pid=
installed_here=0
as_root=()

cleanup() {
	local status=$?
	if [ -n "$redis_pid" ]; then
		kill -KILL "$redis_pid" 2>/dev/null || true
		wait "$redis_pid" 2>/dev/null || true
	fi
	if [ "$installed_here" = 1 ]; then
		step "purging ${packages[*]} (on exit)"
		${as_root[@]+"${as_root[@]}"} dpkg --purge "${packages[@]}" >/dev/null || status=1
	fi
	rm -rf "$tmp"
	exit "$status"
}
trap cleanup EXIT

# quiet CMD...: run CMD, show its output only if it fails.
quiet() {
	if ! "$@" >"$tmp/quiet.log" 2>&1; then
		cat "$tmp/quiet.log" >&2
		fail "failed: $*"
	fi
}

step "building the packages in $pkgbuild"
# Debian's flags, with the hardening it gives its own packages (CMake reads
# CFLAGS and LDFLAGS, not CPPFLAGS: _FORTIFY_SOURCE goes into CFLAGS).
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
CFLAGS="$(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CFLAGS)" \
	LDFLAGS="$(dpkg-buildflags --get LDFLAGS)" \
	quiet cmake -S "$root" -B "$pkgbuild" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
	-DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_TLS=ON
quiet cmake --build "$pkgbuild" -j"$jobs"
rm -rf "$pkgbuild/packages"
(cd "$pkgbuild" && quiet cpack -G DEB)

arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
libdir=/usr/lib/$triplet
declare -A deb
for p in "${packages[@]}"; do
	deb[$p]=$pkgbuild/packages/${p}_${version}_$arch.deb
	[ -f "${deb[$p]}" ] || fail "cpack made no ${deb[$p]##*/}: $(ls "$pkgbuild/packages")"
	echo "packages: ${deb[$p]##*/} ($(stat -c %s "${deb[$p]}") bytes)"
done

step "contents (dpkg-deb -c): each file in its one package"
# files P: the package's regular files and links, one path a line (no ./).
files() { dpkg-deb --fsys-tarfile "${deb[$1]}" | tar -t | sed 's|^\./||; /\/$/d' | sort; }
# expect_only P PATTERN...: P holds exactly the files the extended regexes match, each
# pattern matching at least one.
expect_only() {
	local p=$1 list pattern
	shift
	list=$(files "$p")
	for pattern in "$@"; do
		grep -qE "^($pattern)$" <<<"$list" || fail "$p: nothing matches $pattern in: $list"
	done
	local extra
	extra=$(grep -vE "^($(IFS='|'; echo "$*"))$" <<<"$list" || true)
	[ -z "$extra" ] || fail "$p: does not belong in it: $extra"
	echo "packages: $p: $(wc -l <<<"$list") files, each expected"
}
v=${version//./\\.}
expect_only "$lib" "usr/lib/$triplet/libdlock\.so\.$v" "usr/lib/$triplet/libdlock\.so\.$soversion" \
	"usr/share/doc/$lib/(copyright|changelog\.gz)"
expect_only libdlock-dev 'usr/include/dlock\.h' 'usr/include/dlock\.hpp' 'usr/include/dlock/lock\.h' \
	'usr/include/dlock/uv\.h' 'usr/include/dlock/libevent\.h' 'usr/include/dlock/version\.h' \
	'usr/include/dlock/[a-z_]+\.h' 'usr/include/dlock/cpp/lock\.hpp' 'usr/include/dlock/cpp/[a-z_]+\.hpp' \
	"usr/lib/$triplet/libdlock\.so" "usr/lib/$triplet/libdlock\.a" "usr/lib/$triplet/pkgconfig/dlock\.pc" \
	"usr/lib/$triplet/libdlock-uv\.a" "usr/lib/$triplet/libdlock-libevent\.a" \
	"usr/lib/$triplet/pkgconfig/dlock-uv\.pc" "usr/lib/$triplet/pkgconfig/dlock-libevent\.pc" \
	"usr/lib/$triplet/cmake/dlock/dlock-uvTargets\.cmake" "usr/lib/$triplet/cmake/dlock/dlock-libeventTargets\.cmake" \
	"usr/lib/$triplet/cmake/dlock/dlockConfig\.cmake" "usr/lib/$triplet/cmake/dlock/[A-Za-z-]+\.cmake" \
	'usr/share/doc/libdlock-dev/(copyright|changelog\.gz)'
expect_only dlock usr/bin/dlock usr/share/man/man1/dlock\.1\.gz usr/share/bash-completion/completions/dlock \
	usr/share/zsh/site-functions/_dlock 'usr/share/doc/dlock/(copyright|changelog\.gz)'
# Every file `cmake --install` installs is in one of them: an install rule
# without a component (or with a new one) would leave its file out of all.
DESTDIR=$tmp/all quiet cmake --install "$pkgbuild"
all=$(cd "$tmp/all" && find . ! -type d | sed 's|^\./||; s|\(share/man/.*\.[1-9]\)$|\1.gz|' | sort)
packed=$(for p in "${packages[@]}"; do files "$p"; done | grep -v '^usr/share/doc/' | sort)
[ "$all" = "$packed" ] || fail "installed but in no package (<) or packed but not installed (>):
$(diff <(echo "$all") <(echo "$packed") | grep '^[<>]')"
echo "packages: every installed file is in one package ($(wc -l <<<"$all") files)"
# The library's soname link and the -dev's unversioned one.
grep -q "libdlock\.so\.$soversion -> libdlock\.so\.$v\$" <<<"$(dpkg-deb -c "${deb[$lib]}")" ||
	fail "$lib: libdlock.so.$soversion is not a link to libdlock.so.$version"
grep -q "libdlock\.so -> libdlock\.so\.$soversion\$" <<<"$(dpkg-deb -c "${deb[libdlock-dev]}")" ||
	fail "libdlock-dev: libdlock.so is not a link to libdlock.so.$soversion"

step "control fields"
# field P NAME: the control field NAME of package P.
field() { dpkg-deb -f "${deb[$1]}" "$2"; }
for p in "${packages[@]}"; do
	[ "$(field "$p" Version)" = "$version" ] || fail "$p: Version $(field "$p" Version), not $version"
	[ "$(field "$p" Architecture)" = "$arch" ] || fail "$p: Architecture $(field "$p" Architecture)"
	for f in Maintainer Section Description; do
		[ -n "$(field "$p" "$f")" ] || fail "$p: no $f field"
	done
	echo "packages: $p: Depends: $(field "$p" Depends)"
done
grep -q "^libdlock $soversion $lib (>= $v)\$" <<<"$(dpkg-deb --ctrl-tarfile "${deb[$lib]}" | tar -xO ./shlibs)" ||
	fail "$lib: no shlibs line for libdlock $soversion"
grep -qx 'activate-noawait ldconfig' <<<"$(dpkg-deb --ctrl-tarfile "${deb[$lib]}" | tar -xO ./triggers)" ||
	fail "$lib: no ldconfig trigger"
field "$lib" Depends | grep -q 'libhiredis' || fail "$lib: Depends names no hiredis (dpkg-shlibdeps)"
! field "$lib" Depends | grep -qE 'libuv|libevent' ||
	fail "$lib: Depends names a loop library ($(field "$lib" Depends)): libdlock.so must link neither"
field libdlock-dev Depends | grep -q "^$lib (= $v)" || fail "libdlock-dev: does not depend on $lib (= $version)"
field dlock Depends | grep -q "$lib (= $v)" || fail "dlock: does not depend on $lib (= $version)"

step "lintian"
if command -v lintian >/dev/null; then
	# Errors fail the run; warnings are shown (CPack's postinst and postrm
	# call ldconfig beside the trigger: maintscript-calls-ldconfig).
	lintian --tag-display-limit 0 "${deb[@]}" | tee "$tmp/lintian.log" || true
	! grep -q '^E:' "$tmp/lintian.log" || fail "lintian reports errors"
	echo "packages: lintian: no errors"
else
	echo "packages: lintian is not installed (Debian: lintian): not run"
fi

if [ "$build_only" = 1 ]; then
	step "built in $pkgbuild/packages (--build-only: not installed)"
	exit 0
fi

step "installing with dpkg -i"
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null && sudo -n true 2>/dev/null ||
		fail "dpkg -i needs root (or passwordless sudo); --build-only builds and checks without it"
	as_root=(sudo -n)
fi
# One run at a time: a second would install over this one's packages.
exec 9>/tmp/dlock-packages.lock
flock -w 900 9 || fail "another ci/packages.sh has held the lock for 15 minutes"
for p in "${packages[@]}"; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q ' installed$'; then
		fail "$p is installed already; this run would replace it and then remove it (dpkg --purge ${packages[*]} first)"
	fi
done
installed_here=1
export DEBIAN_FRONTEND=noninteractive
if ! ${as_root[@]+"${as_root[@]}"} dpkg -i "${deb[@]}" >"$tmp/dpkg.log" 2>&1; then
	# Dependencies missing: apt installs them (it may need the network).
	cat "$tmp/dpkg.log"
	${as_root[@]+"${as_root[@]}"} apt-get install -f -y --no-install-recommends
fi
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status} ${Version}\n' "$p" | grep -qx "install ok installed $v" ||
		fail "$p: not installed: $(dpkg-query -W -f='${Status} ${Version}' "$p" 2>&1)"
done
echo "packages: installed ${packages[*]} $version"

step "building examples/hello_lock.c with pkg-config against the installed copy"
# Only the system's pkg-config directories, and only the system's copy of dlock.
unset PKG_CONFIG_PATH LD_LIBRARY_PATH
[ "$(pkg-config --modversion dlock)" = "$version" ] || fail "pkg-config --modversion dlock: $(pkg-config --modversion dlock)"
[ "$(pkg-config --variable=libdir dlock)" = "$libdir" ] ||
	fail "pkg-config finds a dlock.pc outside the package: libdir $(pkg-config --variable=libdir dlock)"
echo "pkg-config --cflags --libs dlock: $(pkg-config --cflags --libs dlock)"
# shellcheck disable=SC2046  # word splitting of the flags is intended
cc -std=c99 -Wall -Wextra -Werror -o "$tmp/hello_lock" "$root/examples/hello_lock.c" \
	$(pkg-config --cflags --libs dlock)
# (With a merged /usr, ldd may name it /lib/<triplet>: the same file.)
loaded=$(ldd "$tmp/hello_lock" | sed -n "s/^[[:space:]]*libdlock\.so\.$soversion => \([^ ]*\) .*/\1/p")
[ -n "$loaded" ] && [ "$(readlink -f "$loaded")" = "$(readlink -f "$libdir/libdlock.so.$soversion")" ] ||
	fail "hello_lock does not load $libdir/libdlock.so.$soversion: $(ldd "$tmp/hello_lock")"
echo "packages: hello_lock loads $loaded"

step "building examples/uv_teardown.c with pkg-config dlock-uv against the installed copy"
[ "$(pkg-config --variable=libdir dlock-uv)" = "$libdir" ] ||
	fail "pkg-config finds a dlock-uv.pc outside the package: libdir $(pkg-config --variable=libdir dlock-uv)"
echo "pkg-config --cflags --libs dlock-uv: $(pkg-config --cflags --libs dlock-uv)"
# shellcheck disable=SC2046  # word splitting of the flags is intended
cc -std=c99 -Wall -Wextra -Werror -o "$tmp/uv_teardown" "$root/examples/uv_teardown.c" \
	$(pkg-config --cflags --libs dlock-uv)
nm "$tmp/uv_teardown" | grep -q ' T dlock_uv_new$' || fail "uv_teardown has no dlock_uv_new from libdlock-uv.a"
ldd "$tmp/uv_teardown" | grep -q "libdlock\.so\.$soversion => " || fail "uv_teardown does not load libdlock.so.$soversion"

step "running them against a redis-server on a free 127.0.0.1 port"
for _ in $(seq 30); do
	port=$((20000 + RANDOM % 20001))
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
		--dir "$tmp" --logfile "$tmp/redis.log" >/dev/null 2>&1 &
	redis_pid=$!
	for _ in $(seq 100); do
		# Ours answers (not some other server that already had the port).
		redis-cli -p "$port" info server 2>/dev/null | grep -q "^process_id:$redis_pid[[:space:]]*$" && break 2
		kill -0 "$redis_pid" 2>/dev/null || break # exited: the port was taken
		sleep 0.05
	done
	kill -KILL "$redis_pid" 2>/dev/null || true
	wait "$redis_pid" 2>/dev/null || true
	redis_pid=
done
[ -n "$redis_pid" ] || fail "could not start redis-server on a free port"
node=redis://127.0.0.1:$port
echo "packages: redis-server on $node"

out=$(timeout 30 "$tmp/hello_lock" "$node" 2>&1) || fail "hello_lock $node: $out"
grep -q 'released "hello"' <<<"$out" || fail "hello_lock $node: $out"
echo "hello_lock: $out"
out=$(timeout 60 "$tmp/uv_teardown" "$node" 2>&1) || fail "uv_teardown $node: $out"
grep -q 'torn down from a dlock callback' <<<"$out" || fail "uv_teardown $node: $out"
echo "$out"
[ "$(command -v dlock)" = /usr/bin/dlock ] || fail "dlock is $(command -v dlock), not /usr/bin/dlock"
[ "$(dlock --version)" = "dlock $version" ] || fail "dlock --version: $(dlock --version)"
echo "dlock --version: $(dlock --version)"
out=$(timeout 30 dlock -n "$node" run packages-check -- echo ran-under-lock 2>&1) || fail "dlock run: $out"
[ "$out" = ran-under-lock ] || fail "dlock run: $out"
echo "dlock run: $out"
[ "$(man -w dlock)" = /usr/share/man/man1/dlock.1.gz ] || fail "man -w dlock: $(man -w dlock 2>&1)"
echo "man -w dlock: $(man -w dlock)"

step "purging ${packages[*]}"
${as_root[@]+"${as_root[@]}"} dpkg --purge "${packages[@]}" >/dev/null
installed_here=0
for p in "${packages[@]}"; do
	! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q ' installed$' || fail "$p is still installed"
done
for f in "$libdir/libdlock.so.$soversion" "$libdir/pkgconfig/dlock.pc" "$libdir/libdlock-uv.a" /usr/include/dlock.h /usr/bin/dlock \
	/usr/share/man/man1/dlock.1.gz; do
	[ ! -e "$f" ] || fail "$f is left after dpkg --purge"
done
step "passed"
