# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# resolve_addrinfo.sh - rdma_resolve_addrinfo / rdma_query_addrinfo / rdma_write_cm_event
# (ctest/vm/resolve_addrinfo.c): the transcript must be identical with upstream and ours.
if [ -x /extra/bin/resolve_addrinfo ]; then
  t --cmp resolve_addrinfo 120 /extra/bin/resolve_addrinfo
else
  skip resolve_addrinfo "no /extra/bin/resolve_addrinfo (make vm-bin not run on the host)"
fi
