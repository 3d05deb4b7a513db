# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# examples.sh - the Rust examples (examples/*.rs) against upstream's C programs
# across the rxe pair, built on the host by `make vm-bin` (vm-examples) into /extra/bin/examples.
# The examples use this crate's Rust API (no librdmacm.so at all); the C program on the other
# side loads the variant's librdmacm: upstream's in the upstream run, ours in the ours run. So
# each test checks our Rust API against upstream's C library, and our C library against our Rust
# API, in the same boot.
#
#   example_rping_srv_rxe    examples/rping -s  <->  rping -c -V (upstream's client validates the
#                            data our server RDMA-READ and RDMA-WROTE back)
#   example_rping_cli_rxe    rping -s  <->  examples/rping -c -V (our client validates)
#   example_async_echo_rxe   examples/async_echo server (tokio) serving 7 connections at once:
#                            3 upstream rdma_client processes and the example's own client with 4
#                            connections held open together, every echo compared with what it sent
#   example_rstream_srv_rxe  examples/rstream -b  <->  rstream -s -T v (both verify the byte stream)
#   example_rstream_cli_rxe  rstream -b -T v  <->  examples/rstream -s -T v
#   example_hello_rxe        rdma_server  <->  examples/hello_rdma (README.md's example, as printed)
#   example_udaddy_srv_rxe   examples/udaddy (server, 2 connections)  <->  udaddy -s -c 2
#   example_udaddy_cli_rxe   udaddy (server)  <->  examples/udaddy -s (client)
#   example_udaddy_sync_rxe  udaddy -c 2 (server)  <->  examples/udaddy -s -y -c 2 (synchronous ids)
#   example_mckey_recv_rxe   examples/mckey (receiver, ns1)  <-  mckey -s (UD multicast 239.0.0.1)
#   example_mckey_send_rxe   mckey (receiver, ns1)  <-  examples/mckey -s
#   example_mckey_opts_recv_rxe  examples/mckey -c 2 -C 6 -S 600 (ns1)  <-  mckey -s -o -c 2 ...
#   example_mckey_opts_send_rxe  mckey -c 2 -C 6 -S 600 (ns1)  <-  examples/mckey -s -o -c 2 ...
#   example_mckey_sendonly_rxe  examples/mckey -o beside mckey (both receivers, ns1)  <-  mckey -s
#   example_mckey_refuse_rxe examples/mckey -l and -M refused as rdma-core's mckey is (errno), and -S above the
#                            port's active MTU refused naming the same MTU
#   example_bulk_rxe         examples/bulk alone on rxe0 (loopback): 1 MiB RDMA writes with immediate
#                            data through copying regions and through the program's own Vecs
#                            registered in place (from_buffer, as_mut_slice, into_inner), every
#                            byte checked; a receive and a peer's RDMA write into a region the
#                            device may only read both fail and leave its bytes alone (Rust API
#                            only: both variants run the same program)
#   example_timeouts_rxe     examples/timeouts alone on rxe0 (192.0.2.1, loopback): timed event
#                            and completion waits (None after the time, and a wakeup by what
#                            comes meanwhile), an id dropped while its event is held, listen(0),
#                            an unsignalled send without a completion, immediate data by send
#                            and by RDMA write, an inline send of unregistered bytes (the Rust API only: no librdmacm on either side,
#                            so both variants run the same program)
#
# rping: both sides print the ping data (-v), and ex_pings_match checks that the server's lines
# ("server ping data: X") are the client's ("ping data: X"), one per ping: a side that printed,
# read or wrote something else fails even where the other side's checks would not see it.
# rdma_client checks little by itself (it exits 0 on a flushed receive), so async_echo's server
# prints what it echoed per kind of client (totals: deterministic, compared) and fails on a
# message it could not echo; the example's client verifies every byte.
EX=/extra/bin/examples

# ex_side TAG CMD...: CMD with its stdout kept in /tmp/ex.TAG.out (and printed afterwards, for the
# comparison), then /tmp/ex.TAG.done; returns CMD's status.
ex_side(){ local t=$1 r; shift; rm -f /tmp/ex.$t.out /tmp/ex.$t.done
  "$@" > /tmp/ex.$t.out; r=$?; cat /tmp/ex.$t.out; touch /tmp/ex.$t.done; return $r; }
# ex_pings_match SERVER_TAG CLIENT_TAG COUNT: once the server side is done (10 s at most), its
# "server ping data: X" lines equal the client's "ping data: X" lines, and there are COUNT.
ex_pings_match(){ local i n
  for i in $(seq 100); do [ -e /tmp/ex.$1.done ] && break; sleep 0.1; done
  [ -e /tmp/ex.$1.done ] || { echo "ex_pings_match: the server side did not finish" >&2; return 1; }
  n=$(grep -c '^ping data: ' /tmp/ex.$2.out)
  [ "$n" = "$3" ] || { echo "ex_pings_match: the client printed $n pings, expected $3" >&2; return 1; }
  # (files, not <(...): the guest has no /dev/fd)
  sed -n 's/^server ping data: /ping data: /p' /tmp/ex.$1.out > /tmp/ex.$1.pings
  grep '^ping data: ' /tmp/ex.$2.out > /tmp/ex.$2.pings
  diff /tmp/ex.$1.pings /tmp/ex.$2.pings >&2 ||
    { echo "ex_pings_match: server and client printed different ping data" >&2; return 1; }; }
# ex_echo_clients N ADDR CMD...: N upstream rdma_client processes against ADDR started together
# with CMD (the example's client); waits for all, prints their outputs in order.
ex_echo_clients(){ local n=$1 a=$2 i r=0 p=(); shift 2
  for i in $(seq "$n"); do rdma_client -s "$a" > /tmp/ex.echo.rc.$i 2>&1 & p+=($!); done
  "$@" || r=1
  for i in $(seq "$n"); do wait "${p[$((i-1))]}" || { echo "rdma_client $i failed" >&2; r=1; }; cat /tmp/ex.echo.rc.$i; done
  return $r; }
export -f ex_side ex_pings_match ex_echo_clients

# --- rping: the protocol of rdma-core's rping (addr/rkey/len adverts, RDMA READ, RDMA WRITE) ---
pair --cmp example_rping_srv_rxe 60 "ex_side rps $EX/rping -s -a 192.0.2.2 -C 5 -v" \
  "ex_side rpc rping -c -I 192.0.2.1 -a 192.0.2.2 -C 5 -v -V && ex_pings_match rps rpc 5"
pair --cmp example_rping_cli_rxe 60 "ex_side rps rping -s -a 192.0.2.2 -S 1000 -C 5 -v" \
  "ex_side rpc $EX/rping -c -I 192.0.2.1 -a 192.0.2.2 -S 1000 -C 5 -v -V && ex_pings_match rps rpc 5"

# --- async_echo: one tokio server, several clients at once ---------------------------------
pair --cmp example_async_echo_rxe 60 "$EX/async_echo server -b 192.0.2.2 -n 7" \
  "ex_echo_clients 3 192.0.2.2 $EX/async_echo client -s 192.0.2.2 -c 4 -m 8"

# --- rstream: std::io::Read + Write over an rsocket stream, rstream's protocol ---------------
pair example_rstream_srv_rxe 60 "$EX/rstream -b 192.0.2.2 -S 65536 -C 8 -T v" \
                                "rstream -s 192.0.2.2 -S 65536 -C 8 -T v"
pair example_rstream_cli_rxe 60 "rstream -b 192.0.2.2 -S 1000 -C 50 -T v" \
                                "$EX/rstream -s 192.0.2.2 -S 1000 -C 50 -T v"

# --- timeouts: the Rust API's timed waits and send signalling, one process, rxe0 loopback -----
t --cmp example_timeouts_rxe 60 $EX/timeouts -a 192.0.2.1

# --- bulk: zero-copy registration (the program's Vecs) against copying regions, rxe0 loopback ---
t --cmp --filter 's/: [0-9.]* us per transfer$/: (time)/' example_bulk_rxe 120 \
  bash -c "$EX/bulk -a 192.0.2.1 -S 1048576 -C 4 -V --copy && $EX/bulk -a 192.0.2.1 -S 1048576 -C 4 -V -P"

# --- README.md's example, as printed there: a client of rdma_server --------------------------
pair --cmp example_hello_rxe 60 "rdma_server" "$EX/hello_rdma"

# --- mckey: UD multicast (join, the join event's AH/qpn/qkey, UD sends and receives, leave) ---
# With suite.sh's tricks (MCK_SRV, MCK_CLI): rxe does not join the IPv4 group itself, so the
# receiver side adds 239.0.0.1 to veth1 (autojoin) once the receiver's join shows (its multicast
# MAC on veth1), and the sender starts after that (+2 s). On the rare exchange whose datagrams
# all get lost on this rxe, the sender resends while the receiver is still waiting (stderr; at
# most 3 times). A receiver that never gets its datagrams fails: ours by its own -t, upstream's
# (which waits forever) by the sender side's check after the resends.
# ex_mck_srv CMD...: the receiver CMD in ns1 and the group address on veth1 once it joined
# (suite.sh's mck_recv_join).
ex_mck_srv(){ local r; mck_recv_join /tmp/ex_mck_srv.out "$@"; wait $MCK_PID; r=$?
  cat /tmp/ex_mck_srv.out; ip addr del 239.0.0.1/32 dev veth1; return $r; }
# ex_mck_cli RECEIVER_PATTERN CMD...: once the group address is on ns1's veth1 (+2 s), the
# sender CMD; resends while a process matching RECEIVER_PATTERN (pgrep -f) still runs 4 s
# later; fails if it still runs after the last resend.
ex_mck_cli(){ local pat=$1 r k i; shift
  for i in $(seq 200); do ip -n ns1 addr show dev veth1 | grep -q 239.0.0.1/32 && break; sleep 0.1; done
  sleep 2; "$@"; r=$?
  for k in 1 2 3 4; do [ $r = 0 ] || return $r; sleep 4; pgrep -f "$pat" > /dev/null || return 0
    [ $k = 4 ] && { echo "ex_mck_cli: the receiver never got the datagrams" >&2; return 1; }
    echo "receiver still waiting: resend $k" >&2; "$@" >&2; r=$?; done; }
export -f ex_mck_srv ex_mck_cli
pair --cmp --srv-wait 0 example_mckey_recv_rxe 60 "ex_mck_srv $EX/mckey -m 239.0.0.1 -b 192.0.2.2 -t 30" \
  "ex_mck_cli '^$EX/mckey -m 239.0.0.1 -b 192.0.2.2' stdbuf -oL mckey -m 239.0.0.1 -s -b 192.0.2.1"
# (upstream's receiver exits 0 also after a failed join, without waiting for data: its join line
# is required)
pair --cmp --srv-wait 0 example_mckey_send_rxe 60 \
  "ex_side mks ex_mck_srv stdbuf -oL mckey -m 239.0.0.1 -b 192.0.2.2 && grep -q '^mckey: joined dgid' /tmp/ex.mks.out" \
  "ex_mck_cli '^mckey -m 239.0.0.1 -b 192.0.2.2' $EX/mckey -m 239.0.0.1 -s -b 192.0.2.1 -w 1"

# mckey's options, both ways: -o (send-only full members: the sender's QPs are not attached, no
# IGMP join), -c 2 (two ids on each side, each joining; each receiving id gets -C datagrams),
# -C 6 -S 600.
pair --cmp --srv-wait 0 example_mckey_opts_recv_rxe 60 "ex_mck_srv $EX/mckey -m 239.0.0.1 -b 192.0.2.2 -c 2 -C 6 -S 600 -t 30" \
  "ex_mck_cli '^$EX/mckey -m 239.0.0.1 -b 192.0.2.2' stdbuf -oL mckey -m 239.0.0.1 -s -o -c 2 -C 6 -S 600 -b 192.0.2.1"
pair --cmp --srv-wait 0 example_mckey_opts_send_rxe 60 \
  "ex_side mks ex_mck_srv stdbuf -oL mckey -m 239.0.0.1 -b 192.0.2.2 -c 2 -C 6 -S 600 && [ \$(grep -c '^mckey: joined dgid' /tmp/ex.mks.out) = 2 ]" \
  "ex_mck_cli '^mckey -m 239.0.0.1 -b 192.0.2.2' $EX/mckey -m 239.0.0.1 -s -o -c 2 -C 6 -S 600 -b 192.0.2.1 -w 1"
# -o's meaning, seen from a receiving host: ours joins as a send-only full member (-o) beside
# upstream's full member in ns1; the full member gets the sender's datagrams (so they arrived),
# ours gets none (its QP is not attached) and says so after -t.
ex_mck_sendonly(){ local r
  timeout 25 /extra/bin/examples/mckey -m 239.0.0.1 -b 192.0.2.2 -o -C 3 -t 15 > /tmp/ex.mcso.out 2>&1 & local so=$!
  for r in $(seq 100); do grep -q '^mckey: joined' /tmp/ex.mcso.out && break; sleep 0.1; done
  ex_mck_srv stdbuf -oL mckey -m 239.0.0.1 -b 192.0.2.2 -C 3; r=$?
  wait $so; cat /tmp/ex.mcso.out
  [ $r = 0 ] && grep -q '^mckey: failed: id 0: 0 of 3 datagrams within 15s$' /tmp/ex.mcso.out; }
export -f ex_mck_sendonly
pair --cmp --srv-wait 0 example_mckey_sendonly_rxe 90 ex_mck_sendonly \
  "ex_mck_cli '^mckey -m 239.0.0.1 -b 192.0.2.2' stdbuf -oL mckey -m 239.0.0.1 -s -C 3 -b 192.0.2.1"
# Refusals on rxe, rdma-core's mckey (the variant's library) beside ours, the same errno: -l (a
# QP that blocks its own multicast loopback: rxe takes no QP creation flag) and -M (a group by
# its GID, AF_IB: RoCEv2 joins only IPv4 groups). ex_mck_refusal OPT...: runs both with OPT,
# prints the C program's perror text for the failed step and ours' errno as text; fails unless
# both failed and the texts agree.
ex_mck_refusal(){ local c r e t
  timeout 20 mckey "$@" > /tmp/ex.mckr.out 2> /tmp/ex.mckr.err; c=$?
  timeout 20 /extra/bin/examples/mckey "$@" -t 1 > /tmp/ex.mckr.rs 2>&1; r=$?
  cat /tmp/ex.mckr.err /tmp/ex.mckr.rs >&2
  t=$(sed -n 's/^mckey: \(unable to create QP\|failure joining\): //p' /tmp/ex.mckr.err | head -1)
  e=$(sed -n 's/^mckey: failed: .*(errno \([0-9]*\))$/\1/p' /tmp/ex.mckr.rs)
  echo "mckey $*: C: ${t:-no refusal} (rc $c); Rust: errno ${e:-none} (rc $r)"
  [ -n "$t" ] && [ -n "$e" ] && [ "$r" != 0 ] && [ "$t" = "$(python3 -c "import os; print(os.strerror($e))")" ]; }
export -f ex_mck_refusal
# -S above the port's active MTU: rdma-core's mckey says so and joins nothing; ours refuses the
# same size and names the same MTU (the Rust API's CmId::active_mtu).
ex_mck_mtu(){ local c r
  timeout 20 mckey -m 239.0.0.1 -b 192.0.2.1 -S 5000 -C 1 > /tmp/ex.mckm.out 2>&1
  timeout 20 /extra/bin/examples/mckey -m 239.0.0.1 -b 192.0.2.1 -S 5000 -C 1 -t 1 > /tmp/ex.mckm.rs 2>&1; r=$?
  cat /tmp/ex.mckm.out /tmp/ex.mckm.rs >&2
  c=$(sed -n 's/.*message_size 5000 is larger than active mtu \([0-9]*\).*/\1/p' /tmp/ex.mckm.out | head -1)
  echo "mckey -S 5000: C: active mtu ${c:-no refusal}; Rust: $(sed -n 's/.*message size 5000 is larger than active mtu \([0-9]*\).*/active mtu \1/p' /tmp/ex.mckm.rs) (rc $r)"
  [ -n "$c" ] && [ "$r" != 0 ] && grep -q "message size 5000 is larger than active mtu $c\$" /tmp/ex.mckm.rs; }
export -f ex_mck_mtu
t --cmp example_mckey_refuse_rxe 60 bash -c "ex_mck_refusal -m 239.0.0.1 -b 192.0.2.1 -l -C 1 && ex_mck_refusal -M ff0e::db8:1 -b 192.0.2.1 -C 1 && ex_mck_mtu"

# --- udaddy: UD "connects" (service ID resolution), datagrams carrying the sender's QP number as
# immediate data, the server's answer from the first datagram's completion and GRH ---------------
# Our side checks each datagram (length, immediate data = source QP, on the client the reply's
# GRH source = the server); upstream's side checks nothing but waits for all its datagrams, so a
# wrong QP number or byte order in our sends leaves it waiting (the pair's timeout fails it).
pair --cmp example_udaddy_srv_rxe 60 "$EX/udaddy -b 192.0.2.2 -c 2 -T 20" \
  "udaddy -s 192.0.2.2 -b 192.0.2.1 -c 2"
pair --cmp example_udaddy_cli_rxe 60 "udaddy" "$EX/udaddy -s 192.0.2.2 -b 192.0.2.1 -T 20"
pair --cmp example_udaddy_sync_rxe 60 "udaddy -c 2" "$EX/udaddy -s 192.0.2.2 -b 192.0.2.1 -y -c 2 -T 20"
