#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-static.sh - librdmacm.a, the static library (make static), as a user gets it:
#   ctest/check-static.sh install           make install into a scratch DESTDIR, then the checks
#   ctest/check-static.sh tree ROOT LIBDIR  the checks on an installed tree (an unpacked .deb, an
#                                           rpm --root): ROOT$LIBDIR/librdmacm.a, its .pc
#   ctest/check-static.sh deb DEBDIR        the checks on the unpacked librdmacm-rs-dev package
#   ctest/check-static.sh build SRC OUT     make install into a scratch DESTDIR, then link the C
#                                           program SRC statically against librdmacm.a into OUT
#                                           (the VM test pkg_static_link runs OUT)
# The checks:
#   - the archive defines every export of abi/rdmacm.symbols and carries no versioned symbol
#     (`f@@RDMACM_1.x`: GNU ld refuses an archive with both `f` and its .symver alias);
#   - librdmacm.pc's Libs.private names every native library rustc says the archive needs
#     ($B/lib/librdmacm.a.native-libs; -lgcc_s and -lc excepted: the C compiler driver adds
#     them itself, and -lgcc_s would break `cc -static`);
#   - a C program linked with `pkg-config --static --libs librdmacm`, -lrdmacm taken from the
#     archive (-lrdmacm), has no NEEDED librdmacm, defines our
#     ibv_gid_reachable, and runs with no librdmacm mapped (/proc/self/maps): rdma_event_str and
#     a numeric rdma_getaddrinfo (no RDMA device needed);
#   - the same program linked fully static (cc -static, libibverbs.a and libnl's archives from
#     the system) runs too.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-$top/build}
fail(){ echo "check-static: $*" >&2; exit 1; }
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT

install_scratch(){ # make install into $W/root (PREFIX=/usr, LIBDIR=/usr/lib/static-test)
    make -s -C "$top" install-lib install-dev DESTDIR="$W/root" PREFIX=/usr LIBDIR=/usr/lib/static-test > "$W/install.log" 2>&1 ||
        { cat "$W/install.log" >&2; fail "make install-lib install-dev failed"; }
    ROOT=$W/root LIBDIR=/usr/lib/static-test
}

pcflags(){ # --cflags/--libs ... against the tree
    PKG_CONFIG_SYSROOT_DIR="$ROOT" PKG_CONFIG_PATH="$ROOT$LIBDIR/pkgconfig" pkg-config "$@" librdmacm
}

# -lrdmacm from the archive, everything else as pkg-config --static says
static_libs(){ pcflags --static --libs | sed 's/\(^\| \)-lrdmacm\( \|$\)/ -Wl,-Bstatic -lrdmacm -Wl,-Bdynamic /'; }

link_static(){ # SRC OUT [extra cc flags]
    local src=$1 out=$2; shift 2
    # shellcheck disable=SC2046
    cc -Wall -Wextra -Werror -O1 -g "$@" $(pcflags --cflags) -o "$out" "$src" $(static_libs)
    readelf -d "$out" > "$W/dyn.txt"; nm "$out" > "$W/prog-nm.txt"   # (no grep -q in a pipe: pipefail)
    grep -q 'NEEDED.*librdmacm' "$W/dyn.txt" && fail "$out: NEEDED librdmacm: $(grep librdmacm "$W/dyn.txt")"
    grep -q ' T ibv_gid_reachable$' "$W/prog-nm.txt" || fail "$out: our ibv_gid_reachable is not linked in"
    return 0
}

checks(){
    local a=$ROOT$LIBDIR/librdmacm.a n missing
    [ -f "$a" ] || fail "no $LIBDIR/librdmacm.a in $ROOT"
    nm "$a" 2>/dev/null > "$W/nm.txt" || true
    n=$(grep -c '@' "$W/nm.txt" || true)
    [ "$n" = 0 ] || fail "librdmacm.a carries $n versioned symbols, e.g. $(grep -m1 '@' "$W/nm.txt")"
    missing=$(grep -v '^#' "$top/abi/rdmacm.symbols" | sed 's/@.*//' | sort -u |
              while read -r s; do grep -q " T $s\$" "$W/nm.txt" || echo "$s"; done)
    [ -z "$missing" ] || fail "librdmacm.a does not define: $(echo $missing)"
    if [ -s "$B/lib/librdmacm.a.native-libs" ]; then
        local priv l; priv=" $(pcflags --static --libs) "
        for l in $(cat "$B/lib/librdmacm.a.native-libs"); do
            case $l in -lgcc_s|-lc) continue;; esac
            [[ $priv == *" $l "* ]] || fail "pkg-config --static --libs ($priv) lacks $l, which rustc says librdmacm.a needs"
        done
    else fail "$B/lib/librdmacm.a.native-libs missing (make static)"; fi

    cat > "$W/p.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <infiniband/gid_reachable.h>
int main(void)
{
	struct rdma_addrinfo hints, *res = NULL;
	int (*volatile reach)(struct ibv_context *, unsigned int, union ibv_gid *, int) = ibv_gid_reachable;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int rc;

	if (!f) { perror("maps"); return 1; }
	while (fgets(line, sizeof line, f))
		if (strstr(line, "librdmacm")) { printf("librdmacm mapped: %s", line); return 1; }
	fclose(f);
	memset(&hints, 0, sizeof hints);
	hints.ai_flags = RAI_NUMERICHOST;
	hints.ai_port_space = RDMA_PS_TCP;
	rc = rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res);
	printf("%s getaddrinfo=%d family=%d gid_reachable=%s\n", rdma_event_str(RDMA_CM_EVENT_ESTABLISHED),
	       rc, res && res->ai_dst_addr ? res->ai_dst_addr->sa_family : -1,
	       reach ? "linked" : "missing");
	if (res)
		rdma_freeaddrinfo(res);
	return rc;
}
C
    local want="RDMA_CM_EVENT_ESTABLISHED getaddrinfo=0 family=2 gid_reachable=linked" out
    link_static "$W/p.c" "$W/p"
    out=$(env -u LD_LIBRARY_PATH -u LD_PRELOAD "$W/p") || fail "the program linked with -Wl,-Bstatic -lrdmacm failed: $out"
    [ "$out" = "$want" ] || fail "the program linked with -Wl,-Bstatic -lrdmacm printed '$out'"
    # fully static: libibverbs.a and libnl's archives (libibverbs-dev); glibc warns about NSS
    # functions libnl uses, which this program does not call
    # shellcheck disable=SC2046
    cc -static -Wall -Wextra -Werror -O1 $(pcflags --cflags) -o "$W/p-static" "$W/p.c" $(pcflags --static --libs) 2> "$W/static.err" ||
        fail "cc -static with pkg-config --static --libs failed: $(grep -v 'warning: Using' "$W/static.err" | head -5)"
    readelf -d "$W/p-static" > "$W/dyn.txt" 2>&1 || true
    grep -q NEEDED "$W/dyn.txt" && fail "cc -static made a dynamic program"
    out=$("$W/p-static") || fail "the fully static program failed: $out"
    [ "$out" = "$want" ] || fail "the fully static program printed '$out'"
    echo "check-static: $LIBDIR/librdmacm.a ($(du -h "$a" | cut -f1)): every export, no versioned symbol, Libs.private complete;" \
         "linked -Wl,-Bstatic -lrdmacm and cc -static, both run with no librdmacm.so ($want)"
}

case ${1:-} in
install) install_scratch; checks;;
tree)    ROOT=$2 LIBDIR=$3; checks;;
deb)     ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
         for d in "$2"/librdmacm-rs-dev_*.deb "$2"/librdmacm-rs1_*.deb; do dpkg-deb -x "$d" "$W/root"; done
         ROOT=$W/root LIBDIR=/usr/lib/$ma; checks;;
build)   install_scratch; link_static "$2" "$3.tmp" -Wno-unused-parameter; mv -f "$3.tmp" "$3"
         echo "check-static: $3 linked statically against librdmacm.a (no NEEDED librdmacm)";;
*)       sed -n '3,9p' "$0" | sed 's/^# //'; exit 2;;
esac
