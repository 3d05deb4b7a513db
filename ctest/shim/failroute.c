/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * failroute.so - an LD_PRELOAD shim for the VM test checker_broken: rdma_resolve_route
 * fails with ENETUNREACH without calling the library, so every program that resolves a
 * route through the exported call fails with the library under it.  rdmacm-rs-check must
 * report those cases of "ours" (given this shim with --env-ours) and exit non-zero.
 */
#include <errno.h>

struct rdma_cm_id;

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	(void)id;
	(void)timeout_ms;
	errno = ENETUNREACH;
	return -1;
}
