# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# conn.sh - the connection half of the CM: QPs on ids, connect/listen/accept/reject/disconnect,
# external QPs with rdma_establish, UD service ID resolution and its refusal, multicast,
# endpoints, the argument checks upstream makes, and ECE from another vendor's peer (a connect
# answered with it, a request carrying it; that peer is in the same process and speaks the ucma
# protocol itself, as no librdmacm peer on rxe sends a vendor). ctest/vm/cm_conn.c, built into
# /extra/bin/cm_conn, runs both sides in one process over rxe0 (loopback) and prints a
# transcript with QP numbers and ports masked; the host diffs upstream's and ours (--cmp).
# A missing binary is not skipped: the test runs and fails (make vm-bin builds them all).
t --cmp cm_conn 300 /extra/bin/cm_conn

# The same cases under AddressSanitizer/LeakSanitizer (cm_conn_asan, static runtime): no leak
# and no memory error may be reported. Upstream leaks the membership of an id destroyed while
# still joined (the "mcast" case), so with upstream's library leaks from that case are
# suppressed; ours frees the membership with the id and is checked without suppressions.
t cm_conn_leaks 300 bash -c '
    opts=detect_leaks=1:fast_unwind_on_malloc=0
    case "$LD_LIBRARY_PATH$LD_PRELOAD" in *ours*) ;; *)
      echo "leak:case_mcast" > /tmp/cm_conn_lsan.supp; export LSAN_OPTIONS=suppressions=/tmp/cm_conn_lsan.supp;; esac
    ASAN_OPTIONS=$opts /extra/bin/cm_conn_asan > /dev/null 2> /tmp/cm_conn_asan.err; rc=$?
    if grep -q "ERROR: \(Leak\|Address\)Sanitizer" /tmp/cm_conn_asan.err; then cat /tmp/cm_conn_asan.err >&2; exit 1; fi
    echo "no sanitizer reports (rc=$rc)"; exit $rc'
