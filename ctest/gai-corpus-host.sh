#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# gai-corpus-host.sh - the rdma_getaddrinfo corpus (ctest/vm/gai_corpus.c) against OUR library
# on this host, compared with upstream's output recorded in the VM test bed
# (ctest/data/gai_corpus.expected: root netns; gai_corpus.ns1.expected: netns ns1).
#
# Upstream itself cannot run this on a host without an RDMA device: it fails every lookup
# with ENODEV.  Ours translates addresses without a device, so the output must equal the
# recorded upstream output.  The only inputs that depend on the machine rather than on the
# library are its name service (/etc/hosts, nsswitch, the resolver), its interfaces (a
# "veth0" with ifindex 10 for fe80::2%veth0) and its configured addresses (AI_ADDRCONFIG).
# Instead of allowing those cases to differ, each run happens in a private network and mount
# namespace (unshare -n -m, so root) that reproduces the guest exactly: the guest's /etc
# files (ctest/data/vm-etc/), its veth interfaces, indexes and addresses, no reachable DNS
# server. Nothing is masked: every case must be byte-identical, and the number of cases must
# equal the corpus' own count (gai_corpus -l), so a shortened expected file fails.
#
#   ctest/gai-corpus-host.sh [--asan] [--valgrind]
# Environment: B (build dir, default build), CC.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}; CC=${CC:-cc}
ETC=ctest/data/vm-etc
BIN=$B/ctest/gai_corpus
mkdir -p "$B/ctest"
[ -e "$B/lib/librdmacm.so.1" ] || { echo "gai-corpus-host: $B/lib/librdmacm.so.1 missing (make lib)"; exit 1; }
[ "$(id -u)" = 0 ] && command -v unshare >/dev/null ||
  { echo "gai-corpus-host: needs root and unshare(1) to reproduce the VM's network namespaces"; exit 1; }
$CC -Wall -Wextra -Werror -O1 -g -Iinclude -o "$BIN" ctest/vm/gai_corpus.c -L"$B/lib" -lrdmacm -libverbs

# vm_ns root|ns1 CMD...: CMD in a private netns + mount ns set up like the guest's namespace
vm_ns(){ local which=$1; shift
  unshare -n -m bash -c '
    set -e; etc=$1 which=$2; shift 2
    for f in hosts nsswitch.conf resolv.conf host.conf gai.conf; do
      [ -e /etc/$f ] || touch /etc/$f; mount --bind "$etc/$f" /etc/$f; done
    ip link set lo up
    # the peers get other names: the guest has each end in a different namespace
    if [ "$which" = root ]; then
      ip link add veth0 index 10 type veth peer name peer0
      ip link add veth2 index 12 type veth peer name peer2
      ip addr add 192.0.2.1/24 dev veth0; ip addr add 2001:db8::1/64 dev veth0 nodad
      ip addr add 198.51.100.1/24 dev veth2; up="veth0 veth2 peer0 peer2"
    else
      ip link add veth1 index 11 type veth peer name peer1
      ip link add veth3 index 13 type veth peer name peer3
      ip addr add 192.0.2.2/24 dev veth1; ip addr add 2001:db8::2/64 dev veth1 nodad
      ip addr add 198.51.100.2/24 dev veth3; up="veth1 veth3 peer1 peer3"
    fi
    for i in $up; do ip link set $i up; done
    exec "$@"' vm_ns "$PWD/$ETC" "$which" "$@"; }

want=$("$BIN" -l | wc -l)
bad=0
for ns in root ns1; do
  exp=ctest/data/gai_corpus.expected; [ $ns = ns1 ] && exp=ctest/data/gai_corpus.ns1.expected
  out=$B/ctest/gai_corpus.host.$ns.out
  vm_ns $ns env LD_LIBRARY_PATH="$PWD/$B/lib" "$BIN" > "$out"
  ne=$(grep -c '^case [0-9]*: ' "$exp" || true); no=$(grep -c '^case [0-9]*: ' "$out" || true)
  if [ "$ne" != "$want" ] || [ "$no" != "$want" ]; then
    echo "gai corpus ($ns): case counts differ: corpus $want, $exp $ne, ours $no"; bad=$((bad+1)); fi
  if ! diff -u "$exp" "$out" > "$out.diff"; then
    echo "gai corpus ($ns): ours differs from upstream's recording ($exp):"; head -40 "$out.diff"; bad=$((bad+1))
  else
    echo "gai corpus ($ns netns reproduced on the host): $no of $want cases identical to upstream's VM recording"
  fi
done
tail -n 2 "$B/ctest/gai_corpus.host.root.out" | grep -q '^custom chain freed' || { echo "custom-chain free test missing"; bad=$((bad+1)); }

OUT=$B/ctest/gai_corpus.host.root.out
for opt in "$@"; do case $opt in
  --asan)
    $CC -Wall -Wextra -Werror -g -fsanitize=address,undefined -fno-omit-frame-pointer -Iinclude \
        -o "$B/ctest/gai_corpus_asan" ctest/vm/gai_corpus.c -L"$B/lib" -lrdmacm -libverbs
    vm_ns root env LD_LIBRARY_PATH="$PWD/$B/lib" ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 \
        "$B/ctest/gai_corpus_asan" > "$B/ctest/gai_corpus.asan.out"
    cmp -s "$B/ctest/gai_corpus.asan.out" "$OUT" || { echo "ASan run printed different results"; bad=$((bad+1)); }
    echo "gai corpus under ASan/UBSan/LSan: clean";;
  --valgrind)
    vm_ns root env LD_LIBRARY_PATH="$PWD/$B/lib" valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect \
        --error-exitcode=9 "$BIN" > "$B/ctest/gai_corpus.vg.out"
    cmp -s "$B/ctest/gai_corpus.vg.out" "$OUT" || { echo "valgrind run printed different results"; bad=$((bad+1)); }
    echo "gai corpus under valgrind: clean";;
  *) echo "unknown option $opt"; exit 2;;
esac; done
[ $bad = 0 ]
