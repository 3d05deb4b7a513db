# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# resolve_addrinfo.sh - rdma_resolve_addrinfo / rdma_query_addrinfo / rdma_write_cm_event
# (ctest/vm/resolve_addrinfo.c): the transcript must be identical with upstream and ours.
# A missing binary is not skipped: the test runs and fails (make vm-bin builds them all).
t --cmp resolve_addrinfo 120 /extra/bin/resolve_addrinfo

# rdma_resolve_addrinfo of names a slow DNS server answers (ctest/vm/resolve_async.c): the
# server of vm/guest/slow_dns.py (answers after 500 ms; "nx-" names: NXDOMAIN), and the program
# in a private mount namespace whose /etc/hosts, nsswitch.conf (files dns) and resolv.conf point
# at it, so nothing else in the guest sees them.
# ra_slow_dns CMD...: CMD with the slow server (500 ms) as the only name server
ra_slow_dns(){ local d=/tmp/ra-etc r=/tmp/ra-dns.ready s i rc
  mkdir -p $d; rm -f $r
  printf '127.0.0.1 localhost\n::1 localhost\n' > $d/hosts
  printf 'hosts: files dns\n' > $d/nsswitch.conf
  printf 'nameserver 127.0.0.1\noptions timeout:5 attempts:1\n' > $d/resolv.conf
  for i in hosts nsswitch.conf resolv.conf; do [ -e /etc/$i ] || : > /etc/$i; done
  python3 /extra/vm/guest/slow_dns.py 0.5 $r & s=$!
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
