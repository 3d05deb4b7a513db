#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# demo.sh - runs in the guest (vmtest=demo): the same RDMA CM operations through upstream's
# librdmacm and through ours, printed one after the other, clearly labelled. Output goes to the
# console and to /host/demo.txt (tee in guest/init). Nothing here judges pass/fail: it shows what happens.
# (init pipes this script's output into /host/demo.txt, which the host prints)
OURS=/extra/ours/lib; N1="ip netns exec ns1"
LIBS=(upstream); [ -e $OURS/librdmacm.so.1 ] && LIBS+=(ours)
venv(){ [ "$1" = ours ] && echo "LD_LIBRARY_PATH=$OURS" || echo "RDMACM_VARIANT=upstream"; }
hr(){ printf '%s\n' "================================================================================"; }
run1(){ # label lib timeout cmd
  local label=$1 lib=$2 to=$3; shift 3
  echo "---- [$lib] $label"; echo "\$ $*"
  timeout -k 3 "$to" env $(venv "$lib") bash -c "$*" 2>&1 | sed 's/^/    /'
  echo "    (exit ${PIPESTATUS[0]})"
}
runpair(){ # label lib timeout server client
  local label=$1 lib=$2 to=$3 p
  echo "---- [$lib] $label"; echo "\$ [ns1] $4"; echo "\$ $5"
  timeout -k 3 "$to" $N1 env $(venv "$lib") bash -c "$4" > /tmp/srv.txt 2>&1 & p=$!
  sleep 2
  timeout -k 3 "$to" env $(venv "$lib") bash -c "$5" 2>&1 | sed 's/^/    client: /'
  echo "    client exit ${PIPESTATUS[0]}"
  sleep 1; kill -0 $p 2>/dev/null && { pkill -TERM -P $p; }
  wait $p; local src=$?; sed 's/^/    server: /' /tmp/srv.txt; echo "    server exit $src"
}
hr; echo "rdmacm-rs demo: kernel $(uname -r), rdma-core $(dpkg-query -W -f '${Version}' librdmacm1t64)"
rdma link show | sed 's/^/  /'
echo "topology: rxe0 192.0.2.1 (root ns) <-veth-> rxe1 192.0.2.2 (netns ns1); siw0 198.51.100.1"
[ ${#LIBS[@]} = 2 ] || echo "NOTE: our library was not shipped (build/lib/librdmacm.so.1 missing): upstream only"
for lib in "${LIBS[@]}"; do
  hr; echo "#### librdmacm: $lib"; hr
  run1 "which librdmacm is loaded" "$lib" 20 \
    "LD_DEBUG=libs rping -h 2>&1 | grep -m1 -E 'calling init: .*librdmacm' || ldd /usr/bin/rping | grep rdmacm"
  run1 "rdma_getaddrinfo (via pyverbs AddrInfo), passive and active" "$lib" 30 \
    "python3 /extra/vm/guest/demo_getaddrinfo.py"
  runpair "rping: rdma_resolve_addr, rdma_resolve_route, connect, 3 pings (events shown by -d)" "$lib" 30 \
    "rping -s -a 192.0.2.2 -C 3 -v" "rping -c -d -I 192.0.2.1 -a 192.0.2.2 -C 3 -v"
  runpair "rdma_server / rdma_client: rdma_getaddrinfo + rdma_create_ep + connect + send/recv" "$lib" 30 \
    "rdma_server" "rdma_client -s 192.0.2.2"
  runpair "ucmatose: connection setup and data transfer" "$lib" 30 \
    "ucmatose" "ucmatose -s 192.0.2.2 -b 192.0.2.1"
done
# rdma-resolve (issue 13): the upstream tools' bare error, then the same destination explained
RR=/extra/bin/rdma-resolve
if [ -x $RR ]; then
  hr; echo "#### rdma-resolve: why a destination does (not) resolve"; hr
  run1 "upstream's rping, nobody at 192.0.2.9: the bare error" upstream 20 "rping -c -a 192.0.2.9 -C 1"
  run1 "rdma-resolve explains the same destination" ours 20 "$RR -t 2000 192.0.2.9"
  run1 "upstream's rping in ns1 to 198.51.100.1 (routed via veth3, no RDMA device): the bare error" upstream 20 \
    "ip netns exec ns1 rping -c -a 198.51.100.1 -C 1"
  run1 "rdma-resolve explains it" ours 20 "ip netns exec ns1 $RR 198.51.100.1"
  run1 "rdma-resolve on a reachable destination (rxe1 across the pair)" ours 20 "$RR 192.0.2.2"
  run1 "rdma-resolve -v: the library's decisions, one line each (stderr)" ours 20 "$RR -v 192.0.2.2 2>&1 >/dev/null | sed 's/^rdmacm-rs\[[0-9]*\] //'"
else
  echo "NOTE: /extra/bin/rdma-resolve missing (make vm-bin): rdma-resolve part skipped"
fi
hr; echo "end of demo"
