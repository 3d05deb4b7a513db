# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# resolve_addrinfo.sh - rdma_resolve_addrinfo / rdma_query_addrinfo / rdma_write_cm_event
# (ctest/vm/resolve_addrinfo.c): the transcript must be identical with upstream and ours.
# A missing binary is not skipped: the test runs and fails (make vm-bin builds them all).
t --cmp resolve_addrinfo 120 /extra/bin/resolve_addrinfo

# rdma_resolve_addrinfo of names a slow DNS server answers (ctest/vm/resolve_async.c): a server
# on 127.0.0.1:53 that answers every query after $1 seconds (A queries: 192.0.2.2; names whose
# first label starts with "nx-": NXDOMAIN; anything else: no records), and the program in a
# private mount namespace whose /etc/hosts, nsswitch.conf (files dns) and resolv.conf point at
# it, so nothing else in the guest sees them.  Touches $2 once it listens.
RA_DNS_PY='
import socket, struct, sys, threading, time
delay = float(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
open(sys.argv[2], "w").close()
def answer(q, a):
    time.sleep(delay)
    i = 12
    while i < len(q) and q[i]:
        i += q[i] + 1
    qtype = struct.unpack(">H", q[i + 1:i + 3])[0]
    nx = q[13:16] == b"nx-"
    ans = b""
    if qtype == 1 and not nx:
        ans = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton("192.0.2.2")
    s.sendto(q[:2] + struct.pack(">HHHHH", 0x8183 if nx else 0x8180, 1, 1 if ans else 0, 0, 0) + q[12:i + 5] + ans, a)
while True:
    q, a = s.recvfrom(512)
    threading.Thread(target=answer, args=(q, a), daemon=True).start()
'
export RA_DNS_PY
# ra_slow_dns CMD...: CMD with the slow server (500 ms) as the only name server
ra_slow_dns(){ local d=/tmp/ra-etc r=/tmp/ra-dns.ready s i rc
  mkdir -p $d; rm -f $r
  printf '127.0.0.1 localhost\n::1 localhost\n' > $d/hosts
  printf 'hosts: files dns\n' > $d/nsswitch.conf
  printf 'nameserver 127.0.0.1\noptions timeout:5 attempts:1\n' > $d/resolv.conf
  for i in hosts nsswitch.conf resolv.conf; do [ -e /etc/$i ] || : > /etc/$i; done
  python3 -c "$RA_DNS_PY" 0.5 $r & s=$!
  for i in $(seq 100); do [ -e $r ] && break; kill -0 $s 2>/dev/null || break; sleep 0.1; done
  if [ ! -e $r ]; then echo "the DNS server did not start" >&2; kill $s 2>/dev/null; wait $s 2>/dev/null; return 1; fi
  unshare -m bash -c 'for f in hosts nsswitch.conf resolv.conf; do mount --bind '$d'/$f /etc/$f || exit 97; done; exec "$@"' ra "$@"; rc=$?
  kill $s 2>/dev/null; wait $s 2>/dev/null; return $rc; }
export -f ra_slow_dns
# The asynchronous call returns before the answer and the event brings the result (ours; upstream
# blocks, recorded on stderr), errors as ADDRINFO_ERROR, sync ids unchanged, destroy with a lookup
# in flight, fork: stdout compared.
t --cmp resolve_async 180 bash -c 'ra_slow_dns /extra/bin/resolve_async all ra-slow.test nx-ra-slow.test'
# Ids destroyed with a lookup in flight (before it starts, while it runs, after it ended) under
# AddressSanitizer/LeakSanitizer: no leak, no use after free, no event afterwards.
t resolve_async_leaks 300 bash -c '
  ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 ra_slow_dns /extra/bin/resolve_async_asan destroy 20 ra-slow.test > /tmp/resolve_async_asan.out 2> /tmp/resolve_async_asan.err; rc=$?
  cat /tmp/resolve_async_asan.out
  if grep -q "ERROR: \(Leak\|Address\)Sanitizer" /tmp/resolve_async_asan.err; then cat /tmp/resolve_async_asan.err >&2; exit 1; fi
  echo "no sanitizer reports (rc=$rc)"; exit $rc'
