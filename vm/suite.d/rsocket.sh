# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# rsocket.sh - rsockets (the socket-like API over RDMA) with upstream's tools: rstream
# (send/recv, blocking / nonblocking / rpoll), riostream (riomap + riowrite), rcopy (file copy
# over a stream), udpong (SOCK_DGRAM rsockets). Short sizes and counts: these measure
# correctness, not speed, so there is no --cmp (the tools print timings).
# The *_x_upsrv / *_x_upcli tests run one side always on upstream's library (env -u
# LD_LIBRARY_PATH), so the "ours" run checks that our wire protocol interoperates with
# upstream's rsockets in both directions.

# Servers of rcopy and udpong loop forever: run one in the background until the client has
# finished (it touches a marker), fail if it died on its own, stop it otherwise.
# rs_bg_server MARKER 'CMD'
rs_bg_server(){ printf '%s' "rm -f $1; $2 & p=\$!
  for i in \$(seq 600); do [ -e $1 ] && break; kill -0 \$p 2>/dev/null || break; sleep 0.1; done
  if ! kill -0 \$p 2>/dev/null; then wait \$p; r=\$?; echo \"server exited early: \$r\" >&2; exit 1; fi
  kill \$p; wait \$p; exit 0"; }
# rs_bg_client MARKER 'CMD'
rs_bg_client(){ printf '%s' "$2; r=\$?; touch $1; exit \$r"; }
UPSTREAM_ONLY_ENV="env -u LD_LIBRARY_PATH -u LD_PRELOAD"

# --- rstream: send/recv over a stream rsocket (default: nonblocking calls, spinning) ---
pair rstream_rxe            60 "rstream -b 192.0.2.2 -S 1000 -C 100" \
                               "rstream -s 192.0.2.2 -S 1000 -C 100"
pair rstream_rxe_block      60 "rstream -b 192.0.2.2 -S 4096 -C 50 -T b" \
                               "rstream -s 192.0.2.2 -S 4096 -C 50 -T b"
# Not run: rstream -T a (rpoll before every call) is flaky with upstream itself here: in 2 of 4
# runs upstream's client exited 16 with no message after the server finished the transfer (ours
# passed 2 of 2 in the same boots); a ratchet cannot hold a test upstream fails at random.
pair rstream_rxe_verify     60 "rstream -b 192.0.2.2 -S 100000 -C 10 -T v" \
                               "rstream -s 192.0.2.2 -S 100000 -C 10 -T v"
# a 4 kB socket buffer: many credit updates (receive-buffer halves handed back) per transfer
pair rstream_rxe_smallbuf   60 "rstream -b 192.0.2.2 -S 65536 -C 20 -B 4096 -T v" \
                               "rstream -s 192.0.2.2 -S 65536 -C 20 -B 4096 -T v"
pair rstream_rxe_smallbuf_x_upsrv 60 "$UPSTREAM_ONLY_ENV rstream -b 192.0.2.2 -S 65536 -C 20 -B 4096 -T v" \
                               "rstream -s 192.0.2.2 -S 65536 -C 20 -B 4096 -T v"
pair rstream_rxe_ipv6       60 "rstream -b 2001:db8::2 -S 1000 -C 100" \
                               "rstream -s 2001:db8::2 -S 1000 -C 100"
pair rstream_rxe_x_upsrv    60 "$UPSTREAM_ONLY_ENV rstream -b 192.0.2.2 -S 1000 -C 100 -T v" \
                               "rstream -s 192.0.2.2 -S 1000 -C 100 -T v"
pair rstream_rxe_x_upcli    60 "rstream -b 192.0.2.2 -S 1000 -C 100 -T v" \
                               "$UPSTREAM_ONLY_ENV rstream -s 192.0.2.2 -S 1000 -C 100 -T v"
pair0 rstream_siw           60 "rstream -b 198.51.100.1 -S 1000 -C 100" \
                               "rstream -s 198.51.100.1 -S 1000 -C 100"

# --- riostream: riomap on the receiver, riowrite on the sender ---
pair riostream_rxe          60 "riostream -b 192.0.2.2 -S 1000 -C 100" \
                               "riostream -s 192.0.2.2 -S 1000 -C 100"
pair riostream_rxe_verify   60 "riostream -b 192.0.2.2 -S 100000 -C 10 -T v" \
                               "riostream -s 192.0.2.2 -S 100000 -C 10 -T v"
pair riostream_rxe_x_upsrv  60 "$UPSTREAM_ONLY_ENV riostream -b 192.0.2.2 -S 1000 -C 100 -T v" \
                               "riostream -s 192.0.2.2 -S 1000 -C 100 -T v"
pair riostream_rxe_x_upcli  60 "riostream -b 192.0.2.2 -S 1000 -C 100 -T v" \
                               "$UPSTREAM_ONLY_ENV riostream -s 192.0.2.2 -S 1000 -C 100 -T v"
pair0 riostream_siw         60 "riostream -b 198.51.100.1 -S 1000 -C 100" \
                               "riostream -s 198.51.100.1 -S 1000 -C 100"

# --- rcopy: copy a 300 kB file to the server (the server loops forever: see rs_bg_server) ---
RCOPY_SRC=/tmp/rcopy_src RCOPY_DST=/tmp/rcopy_dst
pair rcopy_rxe              60 "$(rs_bg_server /tmp/rcopy.done "rm -f $RCOPY_DST; rcopy")" \
  "$(rs_bg_client /tmp/rcopy.done "head -c 300000 /dev/urandom > $RCOPY_SRC && rcopy $RCOPY_SRC 192.0.2.2:$RCOPY_DST && cmp $RCOPY_SRC $RCOPY_DST")"
pair rcopy_rxe_x_upsrv      60 "$(rs_bg_server /tmp/rcopy.done "rm -f $RCOPY_DST; $UPSTREAM_ONLY_ENV rcopy")" \
  "$(rs_bg_client /tmp/rcopy.done "head -c 300000 /dev/urandom > $RCOPY_SRC && rcopy $RCOPY_SRC 192.0.2.2:$RCOPY_DST && cmp $RCOPY_SRC $RCOPY_DST")"

# --- udpong: SOCK_DGRAM rsockets (UD QPs); the server loops forever ---
# Upstream's library fails all of these on this bed (upstream-failures.txt): it makes an
# address handle without a GRH for its QP's own address, which RoCE refuses. Ours passes.
pair --srv-wait 1 udpong_rxe 60 "$(rs_bg_server /tmp/udpong.done "udpong -b 192.0.2.2")" \
  "$(rs_bg_client /tmp/udpong.done "udpong -s 192.0.2.2 -S 100 -C 100")"
# both ends on rxe0 (loopback), blocking calls (-T b: rrecv sleeps), and the server in
# rpoll before every call (-T a)
pair0 --srv-wait 1 udpong_rxe_loop 60 "$(rs_bg_server /tmp/udpong.done "udpong -b 192.0.2.1")" \
  "$(rs_bg_client /tmp/udpong.done "udpong -s 192.0.2.1 -S 100 -C 100")"
pair --srv-wait 1 udpong_rxe_block 60 "$(rs_bg_server /tmp/udpong.done "udpong -b 192.0.2.2 -T b")" \
  "$(rs_bg_client /tmp/udpong.done "udpong -s 192.0.2.2 -S 500 -C 200 -T b")"
pair --srv-wait 1 udpong_rxe_async 60 "$(rs_bg_server /tmp/udpong.done "udpong -b 192.0.2.2 -T a")" \
  "$(rs_bg_client /tmp/udpong.done "udpong -s 192.0.2.2 -S 100 -C 100")"
# Upstream's library runs here with the test shim /extra/bin/libudgrh.so (ctest/vm/preload/
# udgrh.c) preloaded: it gives the GRH-less address handle upstream makes for its own QP a GRH
# to the device's own IPv4 GID (and logs "udgrh:" on stderr); every other AH, and all of ours,
# pass unchanged. So upstream's udpong passes, and each side can be upstream's against ours:
# x_upsrv runs the server always on upstream's library, x_upcli the client.
UDGRH="LD_PRELOAD=/extra/bin/libudgrh.so"
pair --srv-wait 1 udpong_rxe_upgrh 60 "$(rs_bg_server /tmp/udpong.done "env $UDGRH udpong -b 192.0.2.2")" \
  "$(rs_bg_client /tmp/udpong.done "env $UDGRH udpong -s 192.0.2.2 -S 100 -C 100")"
pair --srv-wait 1 udpong_rxe_upgrh_x_upsrv 60 "$(rs_bg_server /tmp/udpong.done "$UPSTREAM_ONLY_ENV $UDGRH udpong -b 192.0.2.2")" \
  "$(rs_bg_client /tmp/udpong.done "env $UDGRH udpong -s 192.0.2.2 -S 100 -C 100")"
pair --srv-wait 1 udpong_rxe_upgrh_x_upcli 60 "$(rs_bg_server /tmp/udpong.done "env $UDGRH udpong -b 192.0.2.2")" \
  "$(rs_bg_client /tmp/udpong.done "$UPSTREAM_ONLY_ENV $UDGRH udpong -s 192.0.2.2 -S 100 -C 100")"
# Echo mode (-T e: the server answers every datagram; the client resends after 1 ms without
# the answer, and then resends whatever it last received, so every resend leaves a stale
# datagram bouncing between the two ends for the rest of the run). 20 transfers: with 100
# on this TCG bed the load of those bouncing datagrams times out upstream's library itself
# now and then (seen: first try TIMEOUT, retry PASS in 14.6 s) as it did ours once, so a
# count of 100 would make the test a coin toss for either library. With the shim for
# upstream; x_upsrv/x_upcli mixed.
pair --srv-wait 1 udpong_rxe_upgrh_echo 60 "$(rs_bg_server /tmp/udpong.done "env $UDGRH udpong -b 192.0.2.2")" \
  "$(rs_bg_client /tmp/udpong.done "env $UDGRH udpong -s 192.0.2.2 -S 100 -C 20 -T e")"
pair --srv-wait 1 udpong_rxe_upgrh_echo_x_upsrv 60 "$(rs_bg_server /tmp/udpong.done "$UPSTREAM_ONLY_ENV $UDGRH udpong -b 192.0.2.2")" \
  "$(rs_bg_client /tmp/udpong.done "env $UDGRH udpong -s 192.0.2.2 -S 100 -C 20 -T e")"
pair --srv-wait 1 udpong_rxe_upgrh_echo_x_upcli 60 "$(rs_bg_server /tmp/udpong.done "env $UDGRH udpong -b 192.0.2.2")" \
  "$(rs_bg_client /tmp/udpong.done "$UPSTREAM_ONLY_ENV $UDGRH udpong -s 192.0.2.2 -S 100 -C 20 -T e")"
# without the shim (upstream-failures.txt: upstream cannot run on RoCE)
pair --srv-wait 1 udpong_rxe_echo 60 "$(rs_bg_server /tmp/udpong.done "udpong -b 192.0.2.2")" \
  "$(rs_bg_client /tmp/udpong.done "udpong -s 192.0.2.2 -S 100 -C 20 -T e")"
pair --srv-wait 1 udpong_rxe_ipv6 60 "$(rs_bg_server /tmp/udpong.done "udpong -b 2001:db8::2")" \
  "$(rs_bg_client /tmp/udpong.done "udpong -s 2001:db8::2 -S 100 -C 100")"

# --- datagram rsockets, API cases (ctest/vm/rs_dgram_api.c, one process on rxe0): rlisten/
# raccept/rshutdown, rsetsockopt/rgetsockopt values, rpoll and repoll readiness. With the
# udgrh shim for upstream's library (see above); ours never makes the AH it changes ---
t --cmp rs_dgram_api_rxe 60 env $UDGRH /extra/bin/rs_dgram_api

# --- repoll: epoll-like sets over rsockets and a pipe, both ends in one process on rxe0 ---
t --cmp repoll_rxe 60 /extra/bin/repoll

# --- rshutdown with both ends in one process (used to hang with ours), and rclose while another
# thread sleeps in rrecv / rpoll on the same rsocket (the sleeper must come back). No --cmp for
# rclose_wait: what the sleeper reports depends on timing with either library (rpoll saw
# POLLIN|POLLHUP in 3 runs of each, and POLLNVAL once with upstream's) ---
t --cmp repoll_close_rxe 60 env REPOLL_CLOSE=1 /extra/bin/repoll
t rclose_wait_rxe 60 /extra/bin/rclose_wait

# --- the service model (ctest/vm/rsvc.c; both ends in one process, or a forked peer, on rxe0) ---
# same: one thread connects (blocking) to its own listener, accepts, exchanges, shuts both ends
# down; nbconnect: EINPROGRESS + rpoll + SO_ERROR (also a refused connect); nbaccept: raccept
# EAGAIN until a connection is queued; disconnect: a blocked rrecv sees the peer's rclose, a
# blocked rpoll sees POLLHUP when the peer is killed; keepalive: TCP_KEEPIDLE 1 sends packets
# on an idle connection; opts: option and rfcntl values; afib: AF_IB rsockets (what rsocket, rbind,
# rgetsockname, rlisten and rconnect give; over rxe the kernel refuses AF_IB connections).
for m in same nbconnect nbaccept disconnect keepalive opts afib; do
  t --cmp rsvc_${m}_rxe 60 /extra/bin/rsvc $m
done
# The /etc/rdma/rsocket tunables (written for this test, removed after it).
RS_CONF_SET='mkdir -p /etc/rdma/rsocket && cd /etc/rdma/rsocket && echo 100 > sqsize_default && echo 50 > rqsize_default && echo 32 > inline_default && echo 65536 > mem_default && echo 1000 > wmem_default && echo 200 > iomap_size && echo 0 > polling_time && echo 50 > wake_up_interval'
RS_CONF_CLR='rm -f /etc/rdma/rsocket/sqsize_default /etc/rdma/rsocket/rqsize_default /etc/rdma/rsocket/inline_default /etc/rdma/rsocket/mem_default /etc/rdma/rsocket/wmem_default /etc/rdma/rsocket/iomap_size /etc/rdma/rsocket/polling_time /etc/rdma/rsocket/wake_up_interval'
# killrecv: not compared: upstream's blocked rrecv stays blocked when the peer is killed, ours
# returns 0 (end of stream); the program fails for ours only (RDMACM_VARIANT)
t rsvc_killrecv_rxe 60 /extra/bin/rsvc killrecv
# spin: not compared (the counts vary from run to run): clock reads per blocked rrecv with the
# peer sending every 3 ms (a busy poll reads the clock on every try). Ours stops spinning on a
# stream whose spins never find the answer (src/rsocket/spin.rs); upstream's spins for
# polling_time before every sleep (its run: the reference, printed); fails for ours only
t rsvc_spin_rxe 60 env LD_PRELOAD=/extra/bin/libclockcount.so /extra/bin/rsvc spin
# wakes: not compared (counts vary): sleeps per 64-byte round trip of the thread that sends and
# waits for the echo. Every signalled send's completion wakes a receiver sleeping on the CQ
# (upstream signals all); ours signals a run of small sends once (src/rsocket/signal.rs), so
# the echo is the one wake-up; fails for ours only (1.4 or more)
t rsvc_wakes_rxe 60 /extra/bin/rsvc wakes
# chunks: not compared (counts vary): write-with-immediate receives on rxe0 per 64 KiB message
# of a stream of sends. Ours sends a send that comes behind data still in flight as 64 KiB
# messages (Stream::first_chunk); upstream ramps every send up from 2 KiB (its run: the
# reference, printed); fails for ours only (5.0 or more: 3.15 idle, up to 3.85 seen under load,
# when a descheduled sender finds its writes completed and ramps, as an idle stream does)
t rsvc_chunks_rxe 60 /extra/bin/rsvc chunks
t --cmp rsvc_conf_rxe 60 bash -c "$RS_CONF_SET && /extra/bin/rsvc conf; r=\$?; $RS_CONF_CLR; exit \$r"
# rstream's non-blocking mode (-T n: O_NONBLOCK before rconnect, so EINPROGRESS + rpoll +
# SO_ERROR on the client, and raccept/rsend/rrecv with MSG_DONTWAIT) and its async mode with
# it on the server (-T a: rpoll before every call, raccept after POLLIN on the listener). Not
# on the client: its last rpoll sees the server's close and rstream then exits 16 (POLLHUP),
# with upstream's library as with ours.
pair rstream_rxe_nonblock   60 "rstream -b 192.0.2.2 -S 4096 -C 100 -T n -T v" \
                               "rstream -s 192.0.2.2 -S 4096 -C 100 -T n -T v"
pair rstream_rxe_async_srv  60 "rstream -b 192.0.2.2 -S 4096 -C 100 -T a -T n -T v" \
                               "rstream -s 192.0.2.2 -S 4096 -C 100 -T n -T v"
pair rstream_rxe_nonblock_x_upsrv 60 "$UPSTREAM_ONLY_ENV rstream -b 192.0.2.2 -S 4096 -C 100 -T n -T v" \
                               "rstream -s 192.0.2.2 -S 4096 -C 100 -T n -T v"
pair rstream_rxe_nonblock_x_upcli 60 "rstream -b 192.0.2.2 -S 4096 -C 100 -T n -T v" \
                               "$UPSTREAM_ONLY_ENV rstream -s 192.0.2.2 -S 4096 -C 100 -T n -T v"
