#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# demo.sh - runs in the guest (vmtest=demo): the same RDMA CM operations through upstream's
# librdmacm and through ours, printed one after the other, clearly labelled. Output goes to the
# console and to /host/demo.txt (tee in guest/init). Nothing here judges pass/fail: it shows what
# happens. Each step is also recorded for the host's closing summary (vm/testbed.sh demo) in
# /host/demo-steps.txt, one tab-separated line per run: id, library, outcome, how the two
# libraries' runs are compared (exit: the exit statuses; out: exit statuses and output; lib: the
# library each loaded; explain: not compared, upstream's bare error beside rdma-resolve's
# explanation), label; the outputs of "out" steps go to /host/demo-out/ID.LIB.
OURS=/extra/ours/lib; N1="ip netns exec ns1"
LIBS=(upstream); [ -e $OURS/librdmacm.so.1 ] && LIBS+=(ours)
venv(){ [ "$1" = ours ] && echo "LD_LIBRARY_PATH=$OURS" || echo "RDMACM_VARIANT=upstream"; }
hr(){ printf '%s\n' "================================================================================"; }
H=/host; mountpoint -q $H || H=/tmp
STEPS=$H/demo-steps.txt; SOUT=$H/demo-out; rm -rf "$STEPS" "$SOUT"; mkdir -p "$SOUT"
step(){ printf '%s\t%s\t%s\t%s\t%s\n' "$@" >> "$STEPS"; }   # id lib outcome kind label
run1(){ # id kind label lib timeout cmd  (SHOW=...: the heading in the transcript, if not label)
  local id=$1 kind=$2 label=$3 lib=$4 to=$5 rc; shift 5
  echo "---- [$lib] ${SHOW:-$label}"; echo "\$ $*"
  timeout -k 3 "$to" env $(venv "$lib") bash -c "$*" > "$SOUT/$id.$lib" 2>&1; rc=$?
  sed 's/^/    /' "$SOUT/$id.$lib"; echo "    (exit $rc)"
  local outcome="exit $rc"
  [ "$kind" = lib ] && outcome="$(grep -o '/[^ ]*librdmacm[^ ]*' "$SOUT/$id.$lib" | head -1) (exit $rc)"
  step "$id" "$lib" "$outcome" "$kind" "$label"
}
runpair(){ # id label lib timeout server client  (SHOW=...: as for run1)
  local id=$1 label=$2 lib=$3 to=$4 p rc src
  echo "---- [$lib] ${SHOW:-$label}"; echo "\$ [ns1] $5"; echo "\$ $6"
  timeout -k 3 "$to" $N1 env $(venv "$lib") bash -c "$5" > /tmp/srv.txt 2>&1 & p=$!
  sleep 2
  timeout -k 3 "$to" env $(venv "$lib") bash -c "$6" > /tmp/cli.txt 2>&1; rc=$?
  sed 's/^/    client: /' /tmp/cli.txt; echo "    client exit $rc"
  sleep 1; kill -0 $p 2>/dev/null && { pkill -TERM -P $p; }
  wait $p; src=$?; sed 's/^/    server: /' /tmp/srv.txt; echo "    server exit $src"
  step "$id" "$lib" "client $rc, server $src" exit "$label"
}
hr; echo "rdmacm-rs demo: kernel $(uname -r), rdma-core $(dpkg-query -W -f '${Version}' librdmacm1t64)"
rdma link show | sed 's/^/  /'
echo "topology: rxe0 192.0.2.1 (root ns) <-veth-> rxe1 192.0.2.2 (netns ns1); siw0 198.51.100.1"
[ ${#LIBS[@]} = 2 ] || echo "NOTE: our library was not shipped (build/lib/librdmacm.so.1 missing): upstream only"
for lib in "${LIBS[@]}"; do
  hr; echo "#### librdmacm: $lib"; hr
  run1 loaded lib "which librdmacm is loaded" "$lib" 20 \
    "LD_DEBUG=libs rping -h 2>&1 | grep -m1 -E 'calling init: .*librdmacm' || ldd /usr/bin/rping | grep rdmacm"
  SHOW="rdma_getaddrinfo (via pyverbs AddrInfo), passive and active" \
  run1 getaddrinfo out "rdma_getaddrinfo, 4 cases (pyverbs)" "$lib" 30 \
    "python3 /extra/vm/guest/demo_getaddrinfo.py"
  SHOW="rping: rdma_resolve_addr, rdma_resolve_route, connect, 3 pings (events shown by -d)" \
  runpair rping "rping: resolve, connect, 3 pings" "$lib" 30 \
    "rping -s -a 192.0.2.2 -C 3 -v" "rping -c -d -I 192.0.2.1 -a 192.0.2.2 -C 3 -v"
  SHOW="rdma_server / rdma_client: rdma_getaddrinfo + rdma_create_ep + connect + send/recv" \
  runpair rdma_server_client "rdma_server / rdma_client" "$lib" 30 \
    "rdma_server" "rdma_client -s 192.0.2.2"
  SHOW="ucmatose: connection setup and data transfer" \
  runpair ucmatose "ucmatose: connect, transfer" "$lib" 30 \
    "ucmatose" "ucmatose -s 192.0.2.2 -b 192.0.2.1"
done
# rdma-resolve: the upstream tools' bare error, then the same destination explained
RR=/extra/bin/rdma-resolve
if [ -x $RR ]; then
  hr; echo "#### rdma-resolve: why a destination does (not) resolve"; hr
  SHOW="upstream's rping, nobody at 192.0.2.9: the bare error" \
  run1 unreachable explain "192.0.2.9 (no one): rping | rdma-resolve" upstream 20 "rping -c -a 192.0.2.9 -C 1"
  SHOW="rdma-resolve explains the same destination" \
  run1 unreachable explain "192.0.2.9 (no one): rping | rdma-resolve" ours 20 "$RR -t 2000 192.0.2.9"
  SHOW="upstream's rping in ns1 to 198.51.100.1 (routed via veth3, no RDMA device): the bare error" \
  run1 no_device explain "198.51.100.1 (no dev): rping | rdma-resolve" upstream 20 \
    "ip netns exec ns1 rping -c -a 198.51.100.1 -C 1"
  SHOW="rdma-resolve explains it" \
  run1 no_device explain "198.51.100.1 (no dev): rping | rdma-resolve" ours 20 "ip netns exec ns1 $RR 198.51.100.1"
  SHOW="rdma-resolve on a reachable destination (rxe1 across the pair)" \
  run1 reachable explain "rdma-resolve 192.0.2.2 (reachable)" ours 20 "$RR 192.0.2.2"
  SHOW="rdma-resolve -v: the library's decisions, one line each (stderr)" \
  run1 trace explain "rdma-resolve -v 192.0.2.2 (trace)" ours 20 "$RR -v 192.0.2.2 2>&1 >/dev/null | sed 's/^rdmacm-rs\[[0-9]*\] //'"
else
  echo "NOTE: /extra/bin/rdma-resolve missing (make vm-bin): rdma-resolve part skipped"
fi
hr; echo "end of demo"
