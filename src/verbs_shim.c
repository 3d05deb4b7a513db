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

/* --- connection code (src/core/conn/verbs.rs) --- */

#include <fcntl.h>
#include <stddef.h>

struct ibv_qp *rdmacm_shim_create_qp_ex(struct ibv_context *ctx,
					struct ibv_qp_init_attr_ex *attr)
{
	return ibv_create_qp_ex(ctx, attr);
}

struct ibv_srq *rdmacm_shim_create_srq_ex(struct ibv_context *ctx,
					  struct ibv_srq_init_attr_ex *attr)
{
	return ibv_create_srq_ex(ctx, attr);
}

/* A process-private XRC domain (no file), as the CM uses for XRC ids. */
struct ibv_xrcd *rdmacm_shim_open_xrcd(struct ibv_context *ctx)
{
	struct ibv_xrcd_init_attr attr = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};

	return ibv_open_xrcd(ctx, &attr);
}

/* Sizes and offsets of the verbs structures mirrored in Rust, in the
 * order of rust_layout(); returns how many were written. */
#define CONN_LAYOUT_N 28
size_t rdmacm_shim_conn_layout(size_t *out, size_t n)
{
	const size_t v[CONN_LAYOUT_N] = {
		sizeof(struct ibv_qp_init_attr),
		offsetof(struct ibv_qp_init_attr, cap),
		offsetof(struct ibv_qp_init_attr, qp_type),
		sizeof(struct ibv_qp_init_attr_ex),
		offsetof(struct ibv_qp_init_attr_ex, comp_mask),
		offsetof(struct ibv_qp_init_attr_ex, pd),
		offsetof(struct ibv_qp_init_attr_ex, xrcd),
		offsetof(struct ibv_qp_init_attr_ex, source_qpn),
		offsetof(struct ibv_qp_init_attr_ex, send_ops_flags),
		sizeof(struct ibv_srq_init_attr),
		sizeof(struct ibv_srq_init_attr_ex),
		offsetof(struct ibv_srq_init_attr_ex, comp_mask),
		offsetof(struct ibv_srq_init_attr_ex, srq_type),
		offsetof(struct ibv_srq_init_attr_ex, pd),
		offsetof(struct ibv_srq_init_attr_ex, xrcd),
		offsetof(struct ibv_srq_init_attr_ex, cq),
		offsetof(struct ibv_qp, pd),
		offsetof(struct ibv_qp, srq),
		offsetof(struct ibv_qp, qp_num),
		sizeof(struct ibv_qp_attr),
		offsetof(struct ibv_qp_attr, cap),
		offsetof(struct ibv_qp_attr, ah_attr),
		offsetof(struct ibv_qp_attr, pkey_index),
		offsetof(struct ibv_qp_attr, max_rd_atomic),
		offsetof(struct ibv_qp_attr, max_dest_rd_atomic),
		offsetof(struct ibv_qp_attr, port_num),
		offsetof(struct ibv_qp_attr, rate_limit),
		sizeof(struct ibv_ece),
	};
	size_t i;

	for (i = 0; i < n && i < CONN_LAYOUT_N; i++)
		out[i] = v[i];
	return i;
}

int rdmacm_shim_close_xrcd(struct ibv_xrcd *xrcd)
{
	return ibv_close_xrcd(xrcd);
}
