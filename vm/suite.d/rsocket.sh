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
pair --srv-wait 1 udpong_rxe 60 "$(rs_bg_server /tmp/udpong.done "udpong -b 192.0.2.2")" \
  "$(rs_bg_client /tmp/udpong.done "udpong -s 192.0.2.2 -S 100 -C 100")"

# --- repoll: epoll-like sets over rsockets and a pipe, both ends in one process on rxe0 ---
t --cmp repoll_rxe 60 /extra/bin/repoll
# the same, then rshutdown(SHUT_RDWR) and rclose of the connected pair in the same process
# (REPOLL_CLOSE=1): ours hangs there (known-failures.txt until fixed)
t --cmp repoll_close_rxe 60 env REPOLL_CLOSE=1 /extra/bin/repoll
