/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * Thin C shim over libibverbs.  Several verbs entry points are static
 * inline functions in <infiniband/verbs.h> (they dispatch through the
 * provider's ops table), so Rust cannot call them through the dynamic
 * symbol table.  Each wrapper here does one call and nothing else; all
 * logic stays in Rust.  Symbols are hidden (-fvisibility=hidden), so none
 * of them is exported from librdmacm.so.1.
 */
#include <infiniband/verbs.h>

int rdmacm_shim_query_port(struct ibv_context *ctx, uint8_t port,
			   struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}

size_t rdmacm_shim_port_attr_size(void)
{
	return sizeof(struct ibv_port_attr);
}
