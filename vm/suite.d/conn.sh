# conn.sh - the connection half of the CM: QPs on ids, connect/listen/accept/reject/disconnect,
# external QPs with rdma_establish, UD service ID resolution, multicast, endpoints, and the
# argument checks upstream makes. ctest/vm/cm_conn.c, built into /extra/bin/cm_conn, runs both
# sides in one process over rxe0 (loopback) and prints a transcript with QP numbers and ports
# masked; the host diffs upstream's and ours (--cmp).
if [ -x /extra/bin/cm_conn ]; then
  t --cmp cm_conn 300 /extra/bin/cm_conn
else
  skip cm_conn "no /extra/bin/cm_conn (make vm-bin not run on the host)"
fi
