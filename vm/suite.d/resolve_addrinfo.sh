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
ra_slow_dns(){ slow_dns_run 0.5 "$@"; }
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
