# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# resolve_addrinfo.sh - rdma_resolve_addrinfo / rdma_query_addrinfo / rdma_write_cm_event
# (ctest/vm/resolve_addrinfo.c): the transcript must be identical with upstream and ours.
# A missing binary is not skipped: the test runs and fails (make vm-bin builds them all).
t --cmp resolve_addrinfo 120 /extra/bin/resolve_addrinfo
