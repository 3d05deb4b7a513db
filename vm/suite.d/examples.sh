# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# examples.sh - the Rust examples (examples/*.rs, issue 22 item 4) against upstream's C programs
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

# --- README.md's example, as printed there: a client of rdma_server --------------------------
pair --cmp example_hello_rxe 60 "rdma_server" "$EX/hello_rdma"
