/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * libibverbs accessors for ibv_gid_reachable (src/core/gid.rs).  Each one
 * wraps a static inline verbs call or reads a struct field; hidden
 * visibility keeps them out of the library's exports.
 */
#include <string.h>
#include <infiniband/verbs.h>

/* Number of physical ports, or -1 with the verbs error in *err. */
int rdmacm_gid_port_count(struct ibv_context *ctx, int *err)
{
	struct ibv_device_attr attr;

	*err = ibv_query_device(ctx, &attr);
	return *err ? -1 : attr.phys_port_cnt;
}

/* State and link layer of a port; returns 0 or a verbs error. */
int rdmacm_gid_port_info(struct ibv_context *ctx, uint8_t port,
			 uint32_t *state, uint8_t *link_layer)
{
	struct ibv_port_attr attr;
	int ret;

	memset(&attr, 0, sizeof(attr));
	ret = ibv_query_port(ctx, port, &attr);
	if (ret)
		return ret;
	*state = attr.state;
	*link_layer = attr.link_layer;
	return 0;
}

/* The node GUID (network byte order) of the device behind a context. */
uint64_t rdmacm_gid_node_guid(struct ibv_context *ctx)
{
	return ibv_get_device_guid(ctx->device);
}

/* The network device index bound to a GID table entry (RoCE), or 0. */
uint32_t rdmacm_gid_ndev_ifindex(struct ibv_context *ctx, uint8_t port,
				 uint32_t index)
{
	struct ibv_gid_entry entry;

	if (ibv_query_gid_ex(ctx, port, index, &entry, 0))
		return 0;
	return entry.ndev_ifindex;
}
