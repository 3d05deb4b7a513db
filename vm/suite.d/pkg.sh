# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# pkg.sh - the Debian package (make deb) in place of upstream's, no LD_LIBRARY_PATH.
#
# pkg_deb_swap, run once per variant, prints on stdout only what the upstream tools print (rping
# over rxe0 loopback, ucmatose across the pair), compared with the upstream run (--cmp); the
# package steps and checks go to stderr and any failed check fails the run:
#   upstream: (re)installs upstream's librdmacm1t64 from the image (/opt/rdma-core/debs) with
#             dpkg -i and runs the tools against the system library: the reference.
#   ours:     dpkg -i librdmacm-rs1 (/extra/bin/debs, from make vm-bin): it must replace
#             librdmacm1t64 (Conflicts + Replaces) while rdmacm-utils, python3-pyverbs & co.
#             stay installed (its Provides), dpkg --audit and apt-get check clean; the tools run
#             with neither LD_LIBRARY_PATH nor LD_PRELOAD, and whichlib, ldd and the rping
#             server's /proc/PID/maps must show librdmacm.so.1 -> the package's file; then back:
#             apt-get install upstream's .deb (apt removes ours), ours again with dpkg -i, and
#             back with dpkg -r --force-depends + dpkg -i (the two ways docs/packaging.md documents). After
#             each way back: librdmacm1t64 installed at the image's version, dpkg --verify clean,
#             no file of ours left, librdmacm.so.1 the image's file again.
# The guest's system library is shared by every later test (the upstream variant uses it), so
# pkg_restore runs after the test whatever happened to it (timeout, kill, failed check),
# outside its timeout, and a library it cannot restore fails the whole run (SUITEERR).
PKG_UP_DEB=$(ls /opt/rdma-core/debs/librdmacm1t64_*.deb 2>/dev/null | head -1)
PKG_UP_VER=$(dpkg-query -W -f '${Version}' librdmacm1t64 2>/dev/null)
PKG_UP_LIB=$(readlink -f /usr/lib/x86_64-linux-gnu/librdmacm.so.1)
export PKG_UP_DEB PKG_UP_VER PKG_UP_LIB

# pkg_state: one line per package of interest, on stderr
PKG_COMMON='
ma=/usr/lib/x86_64-linux-gnu
note(){ echo "pkg: $*" >&2; }
die(){ echo "pkg: FAIL: $*" >&2; exit 1; }
st(){ dpkg-query -W -f "\${Status}" "$1" 2>/dev/null || echo not-installed; }
ver(){ dpkg-query -W -f "\${Version}" "$1" 2>/dev/null; }
sane(){ local a; a=$(dpkg --audit 2>&1); [ -z "$a" ] || die "dpkg --audit: $a"
  apt-get check -q >/dev/null 2>&1 || die "apt-get check: $(apt-get check 2>&1 | tail -3)"
  for p in rdmacm-utils ibverbs-utils python3-pyverbs; do
    [ "$(st $p)" = "install ok installed" ] || die "$p: $(st $p)"; done; }
upstream_back(){ # $1: how
  [ "$(st librdmacm1t64)" = "install ok installed" ] || die "after $1: librdmacm1t64: $(st librdmacm1t64)"
  [ "$(ver librdmacm1t64)" = "$PKG_UP_VER" ] || die "after $1: librdmacm1t64 $(ver librdmacm1t64), image has $PKG_UP_VER"
  dpkg --verify librdmacm1t64 || die "after $1: dpkg --verify librdmacm1t64 reports changed files"
  case $(st librdmacm-rs1) in not-installed|"unknown ok not-installed") ;; *) die "after $1: librdmacm-rs1: $(st librdmacm-rs1)";; esac
  [ "$(readlink -f $ma/librdmacm.so.1)" = "$PKG_UP_LIB" ] || die "after $1: librdmacm.so.1 -> $(readlink -f $ma/librdmacm.so.1)"
  ls $ma/librdmacm.so.1.5.0.* 2>/dev/null && die "after $1: a file of ours is left"
  ldconfig -p | grep -q "librdmacm.so.1 .*=> $ma/librdmacm.so.1$" || die "after $1: ldconfig cache lacks librdmacm.so.1"
  sane; note "after $1: librdmacm1t64 $(ver librdmacm1t64) back, verified, nothing of ours left"; }
'
PKG_SWAP=$PKG_COMMON'
set -o pipefail
unset LD_LIBRARY_PATH LD_PRELOAD
[ -n "$PKG_UP_DEB" ] || die "no upstream package in /opt/rdma-core/debs"
want=$PKG_UP_LIB
tools(){ # the upstream tools against the system library; $1: the file librdmacm.so.1 must be
  local w s p
  w=$(/extra/bin/whichlib) || die "whichlib: $w"
  [ "$(echo "$w" | sed -n "s/^librdmacm //p")" = "$1" ] || die "whichlib: $w (expected $1)"
  [ "$(ldd "$(command -v rping)" | awk "/librdmacm/{print \$3}" | xargs readlink -f)" = "$1" ] || die "ldd rping: $(ldd "$(command -v rping)" | grep rdmacm)"
  rping -s -a 192.0.2.1 -C 3 -v > /tmp/pkg.srv.out 2>/tmp/pkg.srv.err & p=$!
  for _ in $(seq 50); do rdma res show cm_id 2>/dev/null | grep -q LISTEN && break; sleep 0.1; done
  grep -q "librdmacm" /proc/$p/maps || die "rping server: no librdmacm mapped"
  [ "$(awk "/librdmacm/{print \$6}" /proc/$p/maps | sort -u | xargs readlink -f)" = "$1" ] || die "rping server maps: $(grep rdmacm /proc/$p/maps | head -1)"
  note "loaded: whichlib, ldd and /proc/$p/maps agree on $1"
  rping -c -a 192.0.2.1 -C 3 -v || die "rping client failed"
  wait $p || die "rping server failed: $(cat /tmp/pkg.srv.err)"
  echo "--- rping server"; cat /tmp/pkg.srv.out
  ip netns exec ns1 ucmatose > /tmp/pkg.srv.out 2>/tmp/pkg.srv.err & p=$!
  for _ in $(seq 50); do ip netns exec ns1 rdma res show cm_id 2>/dev/null | grep -q LISTEN && break; sleep 0.1; done
  ucmatose -s 192.0.2.2 -b 192.0.2.1 || die "ucmatose client failed"
  wait $p || die "ucmatose server failed: $(cat /tmp/pkg.srv.err)"
  echo "--- ucmatose server"; cat /tmp/pkg.srv.out; }
case $RDMACM_VARIANT in
upstream)
  dpkg -i "$PKG_UP_DEB" >&2 || die "dpkg -i $PKG_UP_DEB"
  upstream_back "dpkg -i of upstream"
  tools "$want";;
ours)
  ours=$(ls /extra/bin/debs/librdmacm-rs1_*.deb) || die "no librdmacm-rs1 package in /extra/bin/debs (make vm-bin)"
  sane
  note "dpkg -i $(basename $ours)"
  dpkg -i "$ours" >&2 || die "dpkg -i $ours"
  [ "$(st librdmacm-rs1)" = "install ok installed" ] || die "librdmacm-rs1: $(st librdmacm-rs1)"
  case $(st librdmacm1t64) in not-installed|"unknown ok not-installed"|"deinstall ok config-files") ;; *) die "librdmacm1t64 still: $(st librdmacm1t64)";; esac
  sane
  mine=$(readlink -f $ma/librdmacm.so.1)
  [ "$(dpkg -S "$mine" 2>/dev/null | cut -d: -f1)" = librdmacm-rs1 ] || die "librdmacm.so.1 -> $mine is not from librdmacm-rs1"
  grep -qa RDMACM_RS_1.0 "$mine" && grep -qa ibv_gid_reachable "$mine" || die "$mine lacks ibv_gid_reachable@RDMACM_RS_1.0: not ours"
  note "librdmacm-rs1 $(ver librdmacm-rs1) replaced librdmacm1t64; reverse dependencies kept; librdmacm.so.1 -> $mine"
  tools "$mine"
  note "way back 1: apt-get install $PKG_UP_DEB"
  apt-get install -y -q --allow-downgrades "$PKG_UP_DEB" >&2 || die "apt-get install of the upstream package"
  upstream_back "apt-get install"
  note "dpkg -i $(basename $ours) again"
  dpkg -i "$ours" >&2 || die "dpkg -i $ours (second time)"
  [ "$(st librdmacm-rs1)" = "install ok installed" ] || die "librdmacm-rs1 (second time): $(st librdmacm-rs1)"
  note "way back 2: dpkg -r --force-depends librdmacm-rs1; dpkg -i $PKG_UP_DEB"
  dpkg -r --force-depends librdmacm-rs1 >&2 2>&1 || die "dpkg -r librdmacm-rs1"
  dpkg -i "$PKG_UP_DEB" >&2 || die "dpkg -i $PKG_UP_DEB"
  upstream_back "dpkg -r + dpkg -i";;
*) die "RDMACM_VARIANT=$RDMACM_VARIANT: this test has no preload variant";;
esac'

# pkg_restore: upstream's package back, whatever the test left; fails the run if it cannot.
pkg_restore(){ local out
  out=$(bash -c "$PKG_COMMON"'
    ok=1; [ "$(st librdmacm1t64)" = "install ok installed" ] && [ "$(ver librdmacm1t64)" = "$PKG_UP_VER" ] &&
      [ "$(readlink -f $ma/librdmacm.so.1)" = "$PKG_UP_LIB" ] && dpkg --verify librdmacm1t64 &&
      case $(st librdmacm-rs1) in not-installed|"unknown ok not-installed") true;; *) false;; esac || ok=0
    if [ $ok = 0 ]; then
      note "restore: librdmacm1t64 $(st librdmacm1t64), librdmacm-rs1 $(st librdmacm-rs1): reinstalling upstream"
      dpkg -r --force-depends librdmacm-rs1 >&2 2>&1
      dpkg -i "$PKG_UP_DEB" >&2 2>&1
      dpkg --configure -a >&2 2>&1
    fi
    upstream_back restore' 2>&1); local rc=$?
  echo "$out" | sed 's/^/@@pkg_restore: /'
  if [ $rc != 0 ]; then
    if declare -F suiteerr >/dev/null; then suiteerr ./suite.d/pkg.sh "upstream's librdmacm1t64 could not be restored: later tests would not run upstream's library: $(echo $out)"
    else echo "SUITEERR ./suite.d/pkg.sh upstream's librdmacm1t64 not restored" >> "$RES/results.txt"; fi
  fi; }

if _selected pkg_deb_swap; then
  t --cmp pkg_deb_swap 300 bash -c "$PKG_SWAP"
  pkg_restore
fi

# pkg_static_link: cm_conn linked statically against librdmacm.a (make vm-bin: make install,
# pkg-config --static, -Wl,-Bstatic -lrdmacm; ctest/check-static.sh build) runs the cases rc
# (rdma_resolve_addr, rdma_resolve_route, connect, accept, disconnect over rxe0) and sync_ep
# (rdma_getaddrinfo, rdma_create_ep, connect on synchronous ids) with no librdmacm.so loaded:
# ldd lists none, the loader's LD_DEBUG=libs trace looks none up, the binary holds our
# ibv_gid_reachable. Its transcript is compared with upstream's library running the same cases
# in the dynamically linked cm_conn (the upstream variant).
t --cmp pkg_static_link 120 bash -c '
case $RDMACM_VARIANT in
upstream) exec /extra/bin/cm_conn rc sync_ep;;
*) p=/extra/bin/cm_conn_static
   [ -x $p ] || { echo "no $p (make vm-bin)" >&2; exit 1; }
   ldd $p > /tmp/static.ldd 2>&1; if grep librdmacm /tmp/static.ldd >&2; then echo "$p: ldd lists librdmacm" >&2; exit 1; fi
   grep -q ibv_gid_reachable $p || { echo "$p: no ibv_gid_reachable in it: not linked with our archive" >&2; exit 1; }
   env -u LD_LIBRARY_PATH -u LD_PRELOAD LD_DEBUG=libs $p rc sync_ep 2> /tmp/static.err; rc=$?
   if grep -i "librdmacm" /tmp/static.err >&2; then echo "$p: librdmacm looked up at run time" >&2; exit 1; fi
   grep -v "^ *[0-9]*:" /tmp/static.err >&2; exit $rc;;
esac'
