#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# `make install` into a temporary DESTDIR, then compile and link a C program
# with `pkg-config --cflags --libs librdmacm` against the installed copy,
# run it against the installed library (also with the installed librspreload.so preloaded),
# and `make uninstall` again. Nothing of the build machine's paths may be in an installed file: not the source tree, not cargo's home, not the
# scratch DESTDIR (pkg-config file, RPATH/RUNPATH, panic locations and debug info of the
# library); the Debian package is checked the same way (ctest/check-deb.sh).
set -eu
top=$(pwd)
dest=$(mktemp -d); trap 'rm -rf "$dest"' EXIT
prefix=/opt/rdmacm-rs-test
libdir=$prefix/lib64
make -s install DESTDIR="$dest" PREFIX=$prefix LIBDIR=$libdir >/dev/null
for f in $libdir/librdmacm.so.1 $libdir/librdmacm.so $prefix/include/rdma/rdma_cma.h \
         $prefix/include/rdma/rsocket.h $prefix/include/infiniband/gid_reachable.h \
         $prefix/include/rdma/rdma_cma_abi.h $prefix/include/infiniband/acm.h \
         $prefix/include/rdma/rdma_verbs.h $prefix/include/infiniband/ib.h \
         $prefix/share/man/man7/rdma_cm.7 $libdir/pkgconfig/librdmacm.pc; do
    [ -e "$dest$f" ] || { echo "check-install: $f missing" >&2; exit 1; }
done
ls "$dest$libdir"/librdmacm.so.1.5.* >/dev/null
# the library without its debug information, which is in .debug/<name>.debug, named by the
# library's .gnu_debuglink
so=$(ls "$dest$libdir"/librdmacm.so.1.5.*)
dbg=$dest$libdir/.debug/$(basename "$so").debug
! readelf -SW "$so" | grep -q '\.debug_info' || { echo "check-install: $(basename "$so") still has its debug information" >&2; exit 1; }
readelf -SW "$dbg" 2>/dev/null | grep -q '\.debug_info' || { echo "check-install: $dbg missing or without debug information" >&2; exit 1; }
readelf -p .gnu_debuglink "$so" 2>/dev/null | grep -q "$(basename "$dbg")" || { echo "check-install: $(basename "$so") names no $(basename "$dbg") in .gnu_debuglink" >&2; exit 1; }
# the resolution explainer, its man page and schemas; it runs without any RDMA device; the
# checker and its page
for f in $prefix/bin/rdma-resolve $prefix/share/man/man1/rdma-resolve.1 $prefix/share/rdmacm-rs/rdma-resolve.schema.json \
         $prefix/share/rdmacm-rs/rdmacm-trace.schema.json $prefix/bin/rdmacm-rs-check $prefix/share/man/man1/rdmacm-rs-check.1; do
    [ -e "$dest$f" ] || { echo "check-install: $f missing" >&2; exit 1; }
done
"$dest$prefix/bin/rdma-resolve" --version | grep -q '^rdma-resolve ' || { echo "check-install: rdma-resolve --version failed" >&2; exit 1; }
"$dest$prefix/bin/rdmacm-rs-check" --version | grep -q '^rdmacm-rs-check ' || { echo "check-install: rdmacm-rs-check --version failed" >&2; exit 1; }
n3=$(ls "$top"/man/*.3 2>/dev/null | wc -l)
[ "$(ls "$dest$prefix"/share/man/man3/*.3 2>/dev/null | wc -l)" = "$n3" ] ||
    { echo "check-install: man pages not installed" >&2; exit 1; }

n7=$(ls "$top"/man/*.7 | wc -l)
[ "$(ls "$dest$prefix"/share/man/man7/*.7 2>/dev/null | wc -l)" = "$n7" ] ||
    { echo "check-install: man7 pages not installed" >&2; exit 1; }

# No path of the build machine in any installed file.
ctest/check-no-build-paths.sh "$dest" "$dest$prefix"

export PKG_CONFIG_PATH="$dest$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$dest"
flags=$(pkg-config --cflags --libs librdmacm)
case "$flags" in *"$dest$prefix/include"*"-lrdmacm"*) ;; *)
    echo "check-install: unexpected pkg-config output: $flags" >&2; exit 1;; esac
# Version in upstream's form: 1.<ABI minor>.<rdma-core release>.<its minor> (1.5.65.0)
v=$(pkg-config --modversion librdmacm)
echo "$v" | grep -qE '^1\.5\.[0-9]+\.[0-9]+$' || { echo "check-install: pkg-config Version '$v' is not 1.5.<release>.<minor>" >&2; exit 1; }
cat > "$dest/prog.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <rdma/rdma_cma.h>
int main(void)
{
	struct rdma_cm_id id;
	memset(&id, 0, sizeof(id));
	printf("%s %u\n", rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), (unsigned)rdma_get_src_port(&id));
	return 0;
}
C
cc -Wall -Wextra -Werror -o "$dest/prog" "$dest/prog.c" $flags
out=$(LD_LIBRARY_PATH="$dest$libdir" "$dest/prog")
[ "$out" = "RDMA_CM_EVENT_ESTABLISHED 0" ] || { echo "check-install: program printed '$out'" >&2; exit 1; }
LD_LIBRARY_PATH="$dest$libdir" ldd "$dest/prog" | grep -q "librdmacm.so.1 => $dest$libdir/librdmacm.so.1" ||
    { echo "check-install: program did not load the installed library" >&2; exit 1; }
objdump -T "$dest/prog" | grep -q 'RDMACM_1.0.*rdma_event_str' ||
    { echo "check-install: program did not record RDMACM_1.0" >&2; exit 1; }

# librspreload.so at upstream's path (no SONAME, .so.1 and .so.1.0.0 links), preloadable
# into the same program, its librdmacm.so.1 resolved to the installed one
rsp=$dest$libdir/rsocket/librspreload.so
[ -f "$rsp" ] && [ "$(readlink "$rsp.1")" = librspreload.so ] && [ "$(readlink "$rsp.1.0.0")" = librspreload.so ] ||
    { echo "check-install: $libdir/rsocket/librspreload.so or its links missing" >&2; exit 1; }
! readelf -d "$rsp" | grep -q SONAME || { echo "check-install: librspreload.so has a SONAME" >&2; exit 1; }
objdump -T "$rsp" | grep -q ' socket$' || { echo "check-install: librspreload.so does not export socket" >&2; exit 1; }
out=$(LD_PRELOAD="$rsp" LD_LIBRARY_PATH="$dest$libdir" "$dest/prog")
[ "$out" = "RDMA_CM_EVENT_ESTABLISHED 0" ] || { echo "check-install: preloaded program printed '$out'" >&2; exit 1; }
LD_LIBRARY_PATH="$dest$libdir" ldd "$rsp" | grep -q "librdmacm.so.1 => $dest$libdir/librdmacm.so.1" ||
    { echo "check-install: librspreload.so did not load the installed librdmacm" >&2; exit 1; }

make -s uninstall DESTDIR="$dest" PREFIX=$prefix LIBDIR=$libdir >/dev/null
left=$(find "$dest$prefix" -type f -o -type l | head -5)
[ -z "$left" ] || { echo "check-install: uninstall left: $left" >&2; exit 1; }
echo "check-install: install, pkg-config build, run and uninstall OK"
