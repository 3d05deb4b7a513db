#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-deb.sh DEBDIR: what `make deb` built (without installing it on this machine: the VM
# test suite.d/pkg.sh installs it into the guest in place of upstream's).
#   librdmacm-rs1: librdmacm.so.1 -> the real file in the multiarch libdir, exactly the exports
#     of abi/rdmacm.symbols (ctest/check-symbols.sh), a symbols file listing each of them and
#     every version node, Provides/Conflicts/Replaces librdmacm1t64 and librdmacm1 at
#     UPSTREAM_LEVEL;
#   librdmacm-rs-dev: the headers, librdmacm.so, librdmacm.pc (Version 1.5.<level>, libdir the
#     multiarch one) and every page of man/; a program compiles and links with its pkg-config
#     flags;
#   no package holds a path of the build machine, or an RPATH (ctest/check-no-build-paths.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
D=${1:-build/deb}
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
level=$(sed -n 's/^UPSTREAM_LEVEL := //p' Makefile)
lib=$(ls "$D"/librdmacm-rs1_*.deb) dev=$(ls "$D"/librdmacm-rs-dev_*.deb)
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
fail(){ echo "check-deb: $*" >&2; exit 1; }
field(){ dpkg-deb -f "$1" "$2"; }

dpkg-deb -x "$lib" "$W/lib"; dpkg-deb -e "$lib" "$W/lib.ctl"
dpkg-deb -x "$dev" "$W/dev"
L=$W/lib/usr/lib/$ma
[ -L "$L/librdmacm.so.1" ] && [ -f "$(readlink -f "$L/librdmacm.so.1")" ] || fail "no librdmacm.so.1 link in /usr/lib/$ma"
[ "$(objdump -p "$L/librdmacm.so.1" | awk '/SONAME/{print $2}')" = librdmacm.so.1 ] || fail "SONAME is not librdmacm.so.1"
ctest/check-symbols.sh "$L/librdmacm.so.1" abi/rdmacm.symbols
for s in $(grep -v '^#' abi/rdmacm.symbols | sed 's/@@/@/'); do
    grep -q "^ $s " "$W/lib.ctl/symbols" || fail "symbols file lacks $s"
done
for n in $(grep -v '^#' abi/rdmacm.symbols | sed 's/.*@@//' | sort -u); do
    grep -q "^ $n@$n " "$W/lib.ctl/symbols" || fail "symbols file lacks the version node $n"
done
head -1 "$W/lib.ctl/symbols" | grep -qx 'librdmacm.so.1 librdmacm-rs1 #MINVER#' || fail "symbols file header: $(head -1 "$W/lib.ctl/symbols")"
for f in Provides Conflicts Replaces; do
    v=$(field "$lib" $f)
    for p in librdmacm1t64 librdmacm1; do
        case $f in Provides) want="$p (= $level)";; *) want=$p;; esac
        [[ ", $v," == *", $want,"* ]] || fail "librdmacm-rs1 $f: '$v' lacks '$want'"
    done
done
[ "$(field "$lib" Multi-Arch)" = same ] || fail "librdmacm-rs1 is not Multi-Arch: same"
[[ "$(field "$dev" Provides)" == "librdmacm-dev (= $level)" ]] || fail "librdmacm-rs-dev Provides: $(field "$dev" Provides)"
[[ "$(field "$dev" Conflicts)" == librdmacm-dev ]] && [[ "$(field "$dev" Replaces)" == librdmacm-dev ]] ||
    fail "librdmacm-rs-dev does not conflict with/replace librdmacm-dev"

for h in rdma/rdma_cma.h rdma/rdma_cma_abi.h rdma/rdma_verbs.h rdma/rsocket.h infiniband/ib.h infiniband/gid_reachable.h; do
    cmp -s "include/$h" "$W/dev/usr/include/$h" || fail "-dev: $h missing or not ours"
done
[ "$(readlink "$W/dev/usr/lib/$ma/librdmacm.so")" = librdmacm.so.1 ] || fail "-dev: librdmacm.so is not a link to librdmacm.so.1"
pc=$W/dev/usr/lib/$ma/pkgconfig/librdmacm.pc
grep -qx "Version: 1.5.$level" "$pc" || fail "pkg-config $(grep Version "$pc")"
grep -qx "libdir=/usr/lib/$ma" "$pc" || fail "pkg-config $(grep libdir= "$pc")"
for m in man/*.3 man/*.7; do
    s=${m##*.}; [ -e "$W/dev/usr/share/man/man$s/$(basename "$m").gz" ] || fail "-dev lacks the page $(basename "$m")"
done
# compile and link against the unpacked -dev + library
cp -a "$L"/librdmacm.so.1* "$W/dev/usr/lib/$ma/"
printf '#include <rdma/rdma_cma.h>\n#include <rdma/rdma_verbs.h>\n#include <rdma/rdma_cma_abi.h>\nint main(void){return rdma_event_str(RDMA_CM_EVENT_USER) == 0 || UCMA_CMD_WRITE_CM_EVENT != 24;}\n' > "$W/p.c"
flags=$(PKG_CONFIG_SYSROOT_DIR="$W/dev" PKG_CONFIG_PATH="$W/dev/usr/lib/$ma/pkgconfig" pkg-config --cflags --libs librdmacm)
cc -Wall -Werror -o "$W/p" "$W/p.c" $flags
LD_LIBRARY_PATH="$W/dev/usr/lib/$ma" "$W/p" || fail "the program built against the package failed"

for d in "$D"/*.deb; do
    dpkg-deb -x "$d" "$W/all"
done
ctest/check-no-build-paths.sh "$D" "$W/all"
echo "check-deb: $(cd "$D" && ls *.deb | tr '\n' ' '): contents, symbols, relations, pkg-config and man pages as expected"
