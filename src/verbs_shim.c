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

/* --- CM core (src/core/cm/device.rs) --- */

/* caps[0] = physical port count, caps[1] = max_qp_wr,
 * caps[2] = max_qp_init_rd_atom, caps[3] = max_qp_rd_atom. */
int rdmacm_shim_cm_device_caps(struct ibv_context *ctx, int *caps)
{
	struct ibv_device_attr attr;
	int ret = ibv_query_device(ctx, &attr);

	if (ret)
		return ret;
	caps[0] = attr.phys_port_cnt;
	caps[1] = attr.max_qp_wr;
	caps[2] = attr.max_qp_init_rd_atom;
	caps[3] = attr.max_qp_rd_atom;
	return 0;
}

/* The port's link layer, 0 (unspecified) if it cannot be queried. */
int rdmacm_shim_cm_link_layer(struct ibv_context *ctx, uint8_t port)
{
	struct ibv_port_attr attr;

	if (ibv_query_port(ctx, port, &attr))
		return 0;
	return attr.link_layer;
}

int rdmacm_shim_cm_transport_type(struct ibv_context *ctx)
{
	return ctx->device->transport_type;
}

/* Number of physical ports of an open device, or -1 (rdma_getaddrinfo
 * RAI_SA port walk). */
int rdmacm_shim_phys_port_cnt(struct ibv_context *ctx)
{
	struct ibv_device_attr attr;

	if (ibv_query_device(ctx, &attr))
		return -1;
	return attr.phys_port_cnt;
}

/* 1 when the port has an InfiniBand link layer and is ACTIVE or better,
 * 0 when not, -1 when it cannot be queried. */
int rdmacm_shim_port_ib_active(struct ibv_context *ctx, uint8_t port)
{
	struct ibv_port_attr attr;

	if (ibv_query_port(ctx, port, &attr))
		return -1;
	return attr.link_layer == IBV_LINK_LAYER_INFINIBAND &&
	       attr.state >= IBV_PORT_ACTIVE;
}
