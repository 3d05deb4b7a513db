# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# gid.sh - ibv_gid_reachable (ctest/vm/gid_reachable.c) against the kernel's own answer.
# stdout is the rdma_resolve_addr transcript of every target (identical with upstream and
# ours: --cmp); with ours the program also checks ibv_gid_reachable against it and fails
# on any disagreement. Upstream has no ibv_gid_reachable: its run checks the transcript only; a run whose
# RDMACM_VARIANT says ours or preload fails when the symbol is missing.
# A missing binary is not skipped: the test runs and fails (make vm-bin builds them all).
t --cmp gid_reachable 300 /extra/bin/gid_reachable
