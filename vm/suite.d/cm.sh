# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# cm.sh - the CM core (event channels, ids, devices, bind, address and route
# resolution). ctest/vm/cm_resolve.c, built into /extra/bin/cm_resolve, prints a deterministic
# transcript (ephemeral ports, link-local addresses and pointers masked); the host diffs
# upstream's and ours (--cmp). Cases use rxe0<->rxe1 (192.0.2.0/24, 2001:db8::/64) and siw0.
# cm_resolve_legacy runs the non-AF_IB cases with our library forced onto the legacy ucma
# command family (BIND_IP/RESOLVE_IP/QUERY_ROUTE; RDMACM_RS_FORCE_LEGACY_UCMA is a test hook
# that upstream ignores), which the AF_IB-capable kernel of the VM would otherwise never see.
# The two families report different RoCE/iWARP GIDs, pkeys and path-record details (LIDs,
# preference, numb_path): those fields are masked in that comparison only.
# A missing binary is not skipped: the test runs and fails (make vm-bin builds them all).
t --cmp cm_resolve 300 /extra/bin/cm_resolve
t --cmp --filter 's/ sgid=[^ ]* dgid=[^ ]* pkey=0x[0-9a-f]* num_paths/ sgid=? dgid=? pkey=? num_paths/; s/dlid=[0-9]* slid=[0-9]*/dlid=? slid=?/; s/pref=[0-9]* rev=\([0-9]*\) nump=[0-9]*/pref=? rev=\1 nump=?/' \
  cm_resolve_legacy 300 env RDMACM_RS_FORCE_LEGACY_UCMA=1 /extra/bin/cm_resolve devices channel \
  port_spaces v4 v4_udp v6 src src_port bound bound6 wildcard wildcard6 loopback siw siw_bound no_neigh \
  no_route no_route6 mismatch mismatch_bound linklocal sync sync_errors sync_twice bad_args unacked \
  destroy_waits migrate many

# cmtime's resolution phases with our library on the active side: the
# passive side is always upstream's (env -u LD_LIBRARY_PATH), the client runs with the variant.
# Passes when all 100 ids went through create id, bind, resolve addr and resolve route, i.e.
# when cmtime reached "Creating QPs"; later phases (QPs, connect) belong to later work.
t cmtime_resolve_rxe 120 bash -c '
  env -u LD_LIBRARY_PATH ip netns exec ns1 cmtime -b 192.0.2.2 -C 192.0.2.2 -L -c 100 >/dev/null 2>&1 & s=$!
  for i in $(seq 50); do rdma res show cm_id 2>/dev/null | grep -q LISTEN && break; sleep 0.2; done; sleep 0.3
  timeout 60 stdbuf -oL -eL cmtime -b 192.0.2.1 -C 192.0.2.2 -c 100 > /tmp/cmtime_resolve.out 2>&1; c=$?
  echo "client rc=$c"; cat /tmp/cmtime_resolve.out
  for i in $(seq 50); do kill -0 $s 2>/dev/null || break; sleep 0.2; done
  kill $s 2>/dev/null && echo "server still running 10 s after the client: stopped"; wait $s; r=$?; echo "server rc=$r"
  grep -q "Creating QPs" /tmp/cmtime_resolve.out && [ $c = 0 ] && [ $r = 0 ]'

# rdma_destroy_id / rdma_migrate_id of an id whose event is queued while another thread, its poll
# having reported the channel readable, is on its way to read it (ctest/vm/destroy_queued.c, a
# non-blocking channel; rping's client hangs in this window now and then). ours: the call lets
# that thread take the event first (docs/behaviour.md). upstream: the event goes with the id (or
# to the other channel) and the reader gets EAGAIN; a run where main was descheduled past the
# reader's 10 ms pause is reported, not failed (the event then reaches the reader there too).
t destroy_queued_rxe 60 bash -c '
  ok=1; for m in destroy migrate; do
    /extra/bin/destroy_queued 192.0.2.2 $m > /tmp/dq.$m 2>&1; r=$?; echo "== $m (exit $r)"; cat /tmp/dq.$m
    [ $r = 0 ] || { echo "FAIL: $m: exit $r"; ok=0; continue; }
    if [ "$RDMACM_VARIANT" = upstream ]; then
      grep -qx "reader got EAGAIN" /tmp/dq.$m || grep -qx "reader got RDMA_CM_EVENT_ADDR_RESOLVED of B" /tmp/dq.$m || { echo "FAIL: $m: no outcome"; ok=0; }
      grep -qx "reader got EAGAIN" /tmp/dq.$m || echo "note: $m: the reader was not overtaken in this run"
    else
      grep -qx "reader got RDMA_CM_EVENT_ADDR_RESOLVED of B" /tmp/dq.$m || { echo "FAIL: $m: the reader did not get its event"; ok=0; }
    fi
  done; [ $ok = 1 ]'

# Removing a device under live ids: cm_resolve's "removal" case adds an rxe device on
# a private veth pair, resolves/binds ids on it, runs "rdma link delete" under them, and checks
# the DEVICE_REMOVAL events, that destroy does not hang and that the deletion completes. It
# touches no other device of the test bed.
t --cmp cm_removal 120 /extra/bin/cm_resolve removal

# The resolution cases and the device removal under AddressSanitizer/LeakSanitizer
# (cm_resolve_asan, static runtime): destroying ids with unacked events and removing a device
# under live ids must neither hang (the timeout) nor leak or touch freed memory.
for c in "" removal; do
  t cm_resolve_leaks${c:+_$c} 300 bash -c '
    ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 /extra/bin/cm_resolve_asan '"$c"' > /dev/null 2> /tmp/cm_resolve_asan.err; rc=$?
    if grep -q "ERROR: \(Leak\|Address\)Sanitizer" /tmp/cm_resolve_asan.err; then cat /tmp/cm_resolve_asan.err >&2; exit 1; fi
    echo "no sanitizer reports (rc=$rc)"; exit $rc'
done

# rdma_event_str of every event type and of values outside the enumeration (ctest/vm/event_str.c)
t --cmp event_str 30 /extra/bin/event_str
