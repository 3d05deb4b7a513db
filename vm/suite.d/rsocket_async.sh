# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# rsocket_async.sh - the Rust API's async rsocket streams (rdmacm::asyncio::AsyncRStream,
# AsyncRListener; examples built by `make vm-bin` into /extra/bin/examples) against unmodified
# TCP programs under upstream's librspreload.so (the guest's rdma-core package), across the rxe
# pair. The preload library runs over the variant's librdmacm (upstream's in the upstream run,
# ours in the ours run); the example's side is this crate's rsockets in both.
#
#   example_rhttp_curl_rxe     examples/rhttp (hyper's HTTP/1.1 server on AsyncRStream, ns1)
#                              serving a 1 MB random file; curl under librspreload fetches it 3
#                              times on one keep-alive connection, then 3 curls at once once
#                              each; every copy compared with the file
#   example_async_rstream_rxe  socat under librspreload as an echo server (PIPE, ns1);
#                              examples/async_rstream writes 60000 bytes and reads the echo at
#                              once (the stream's halves in two tasks), every byte compared
#
# Both must be RDMA's: no TCP connection opened and at most a few TCP segments sent in either
# namespace (/proc/net/snmp: ActiveOpens + PassiveOpens, OutSegs), and rxe0 received at least
# the data's size in 1024-byte packets. Uses suite.d/preload.sh's helpers (/tmp/pl_lib.sh).
EXA=/extra/bin/examples
PLA_UP=$(dpkg -L librdmacm1t64 2>/dev/null | grep '/rsocket/librspreload\.so$' | head -1)
PLA_UP=${PLA_UP:-/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so}
cat > /tmp/ex_async_lib.sh <<'EOF'
# helpers of suite.d/rsocket_async.sh, sourced by its test commands (after /tmp/pl_lib.sh)
rxe_rcvd(){ cat /sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_pkts; }
# tcp_flat WHO OPENS0 SEGS0: no TCP connection opened and fewer than 10 TCP segments sent in
# this namespace since the snapshots
tcp_flat(){ local t=$(( $(tcp_opens) - $2 )) s=$(( $(tcp_segs) - $3 ))
  echo "$1: $t TCP connections opened, $s TCP segments sent"
  [ "$t" = 0 ] && [ "$s" -lt 10 ] || { echo "FAIL: $1: TCP carried traffic: not over RDMA" >&2; return 1; }; }
# ex_bg CMD...: CMD in the background, stopped (TERM) when this shell is (the pair stops a
# server's shell, not its children: a server left running would answer the next variant's
# client); CMD's status
ex_bg(){ "$@" & local p=$! r; trap "pkill -TERM -P $p 2>/dev/null; kill $p 2>/dev/null" TERM; wait $p; r=$?; trap - TERM; return $r; }
EOF

# --- hyper over RDMA, curl under librspreload ------------------------------------------------
cat > /tmp/ex_rhttp_cli.sh <<'EOF'
# ex_rhttp_cli.sh PRELOAD: the curl side (root namespace)
. /tmp/pl_lib.sh; . /tmp/ex_async_lib.sh; L=$1; B=/tmp/ex_rhttp.body; C=/tmp/ex_rhttp_c
rm -rf $C; mkdir -p $C; pl_lib $L || exit 1
u=http://192.0.2.2:8088
W=$(hang_limit 40 $L); get(){ pl_watch $W env LD_PRELOAD=$L curl -sS --max-time $((W - 5)) "$@"; }
r0=$(rxe_rcvd); t0=$(tcp_opens); s0=$(tcp_segs)
get -o $C/k1 $u/1 -o $C/k2 $u/2 -o $C/k3 $u/3 || { echo "FAIL: curl, one connection" >&2; exit 1; }
for k in 1 2 3; do get -o $C/p$k $u/p$k & done; wait
n=0; for f in k1 k2 k3 p1 p2 p3; do cmp -s $B $C/$f && n=$((n + 1)); done
echo "client: $n of 6 copies of the $(stat -c %s $B)-byte file intact"
[ $n = 6 ] || { echo "FAIL: curl fetched $n intact copies of 6" >&2; exit 1; }
r=$(( $(rxe_rcvd) - r0 )); echo "rxe0 received $r packets" >&2
tcp_flat client $t0 $s0 && [ $r -ge $((6 * 1000000 / 1024)) ] ||
  { echo "FAIL: rxe0 received only $r packets for 6 MB" >&2; exit 1; }
EOF
pair --srv-wait 10 example_rhttp_curl_rxe 120 \
  ". /tmp/pl_lib.sh; . /tmp/ex_async_lib.sh; head -c 1000000 /dev/urandom > /tmp/ex_rhttp.body
   t0=\$(tcp_opens); s0=\$(tcp_segs)
   ex_bg $EXA/rhttp -b 192.0.2.2 -p 8088 -f /tmp/ex_rhttp.body -c 4 -t 110; r=\$?
   tcp_flat server \$t0 \$s0 && exit \$r" \
  "bash /tmp/ex_rhttp_cli.sh $PLA_UP"

# --- an async client of socat (echo) under librspreload --------------------------------------
# 60000 bytes: socat's PIPE is one pipe of 64 KiB that socat both fills and drains, with
# blocking writes: more data in flight than that blocks socat in write(2) on its own pipe for
# good (seen with 1 MB: socat in anon_pipe_write). socat stays up to its -t after the end of
# the stream, and was once seen long after it under upstream's pair (its main thread spinning
# in user space): the server side stops it a second after the client is done and says so
# (stderr), judging only its TCP counters. The client reads back as many bytes as it sent.
pair --srv-wait 10 example_async_rstream_rxe 90 \
  ". /tmp/pl_lib.sh; . /tmp/ex_async_lib.sh; pl_lib $PLA_UP || exit 1; t0=\$(tcp_opens); s0=\$(tcp_segs)
   rm -f /tmp/ex_ars.done; LD_PRELOAD=$PLA_UP socat -t 5 TCP-LISTEN:7472,bind=192.0.2.2,reuseaddr PIPE & p=\$!
   trap \"kill \$p\" TERM
   for i in \$(seq 800); do [ -e /tmp/ex_ars.done ] && break; kill -0 \$p 2>/dev/null || break; sleep 0.1; done
   sleep 1; kill -0 \$p 2>/dev/null && { echo 'server: socat still running after the client ended: stopped' >&2; kill \$p; }
   wait \$p; tcp_flat server \$t0 \$s0" \
  ". /tmp/pl_lib.sh; . /tmp/ex_async_lib.sh; r0=\$(rxe_rcvd); t0=\$(tcp_opens); s0=\$(tcp_segs)
   $EXA/async_rstream -s 192.0.2.2 -p 7472 -S 60000 -t 75; r=\$?; touch /tmp/ex_ars.done
   p=\$(( \$(rxe_rcvd) - r0 )); echo \"rxe0 received \$p packets\" >&2
   tcp_flat client \$t0 \$s0 && [ \$p -ge 58 ] && exit \$r"
