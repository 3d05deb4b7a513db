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

/* The port's active MTU as the IBV_MTU_* value (1..5), or -errno when it
 * cannot be queried. */
int rdmacm_shim_port_active_mtu(struct ibv_context *ctx, uint8_t port)
{
	struct ibv_port_attr attr;
	int ret = ibv_query_port(ctx, port, &attr);

	if (ret)
		return ret > 0 ? -ret : ret;
	return attr.active_mtu;
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
#define CONN_LAYOUT_N 47
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
		offsetof(struct ibv_device, transport_type),
		offsetof(struct ibv_context, device),
		offsetof(struct ibv_context, ops.poll_cq),
		offsetof(struct ibv_context, ops.req_notify_cq),
		offsetof(struct ibv_context, ops.post_send),
		offsetof(struct ibv_context, ops.post_recv),
		offsetof(struct ibv_cq, context),
		sizeof(struct ibv_wc),
		offsetof(struct ibv_wc, imm_data),
		offsetof(struct ibv_wc, wc_flags),
		offsetof(struct ibv_wc, slid),
		offsetof(struct ibv_wc, dlid_path_bits),
		sizeof(struct ibv_send_wr),
		offsetof(struct ibv_send_wr, imm_data),
		offsetof(struct ibv_send_wr, wr.rdma.remote_addr),
		offsetof(struct ibv_send_wr, wr.rdma.rkey),
		offsetof(struct ibv_send_wr, qp_type.xrc.remote_srqn),
		sizeof(struct ibv_recv_wr),
		offsetof(struct ibv_recv_wr, num_sge),
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

/* The device of a verbs context (NULL in memory that is no open context,
 * such as zeroed memory: ibv_gid_reachable's argument check). */
struct ibv_device *rdmacm_shim_context_device(struct ibv_context *ctx)
{
	return ctx->device;
}

/* --- the data path (src/sys/verbs/data.rs): the Rust API and rsockets --- */

#include <endian.h>
#include <errno.h>
#include <string.h>

/* A UD send (IBV_WR_SEND, or IBV_WR_SEND_WITH_IMM when with_imm) to
 * remote_qpn behind ah, immediate data in host order (it goes on the wire
 * big-endian). */
int rdmacm_shim_post_ud_send(struct ibv_qp *qp, uint64_t wr_id,
			     struct ibv_sge *sgl, int nsge, int send_flags,
			     struct ibv_ah *ah, uint32_t remote_qpn,
			     uint32_t remote_qkey, int with_imm,
			     uint32_t imm_host)
{
	struct ibv_send_wr wr = {0}, *bad;

	wr.wr_id = wr_id;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.opcode = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	if (with_imm)
		wr.imm_data = htobe32(imm_host);
	wr.send_flags = send_flags;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = remote_qpn;
	wr.wr.ud.remote_qkey = remote_qkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* One work completion with every field a client reads. */
struct rdmacm_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm_host;	/* immediate data, host order (valid with IBV_WC_WITH_IMM) */
	uint32_t wc_flags;
	uint32_t qp_num;
	uint32_t src_qp;
	uint16_t slid;
	uint16_t pkey_index;
	uint8_t sl;
	uint8_t dlid_path_bits;
};
/* Wc in src/sys/verbs/data.rs mirrors it */
_Static_assert(sizeof(struct rdmacm_wc) == 48 && offsetof(struct rdmacm_wc, slid) == 40,
	       "struct rdmacm_wc changed: change Wc in src/sys/verbs/data.rs too");

/* Up to n (at most 16) completions into out: their count, or <0. */
int rdmacm_shim_poll_cq(struct ibv_cq *cq, struct rdmacm_wc *out, int n)
{
	struct ibv_wc wc[16];
	int i, got;

	if (n > 16)
		n = 16;
	got = ibv_poll_cq(cq, n, wc);
	for (i = 0; i < got; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].wr_id = wc[i].wr_id;
		out[i].status = wc[i].status;
		out[i].opcode = wc[i].opcode;
		out[i].vendor_err = wc[i].vendor_err;
		out[i].byte_len = wc[i].byte_len;
		out[i].imm_host = be32toh(wc[i].imm_data);
		out[i].wc_flags = wc[i].wc_flags;
		out[i].qp_num = wc[i].qp_num;
		out[i].src_qp = wc[i].src_qp;
		out[i].slid = wc[i].slid;
		out[i].pkey_index = wc[i].pkey_index;
		out[i].sl = wc[i].sl;
		out[i].dlid_path_bits = wc[i].dlid_path_bits;
	}
	return got;
}

int rdmacm_shim_channel_fd(struct ibv_comp_channel *ch)
{
	return ch->fd;
}

uint32_t rdmacm_shim_qp_num(struct ibv_qp *qp)
{
	return qp->qp_num;
}

/* The QP's qkey (ibv_query_qp with IBV_QP_QKEY): 0, or an errno value. */
int rdmacm_shim_query_qkey(struct ibv_qp *qp, uint32_t *qkey)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	int ret;

	memset(&attr, 0, sizeof(attr));
	ret = ibv_query_qp(qp, &attr, IBV_QP_QKEY, &init);
	if (ret == 0)
		*qkey = attr.qkey;
	return ret;
}

struct ibv_mr *rdmacm_shim_reg_mr(struct ibv_pd *pd, void *addr,
				  size_t len, int access)
{
	return ibv_reg_mr(pd, addr, len, access);
}

void rdmacm_shim_mr_keys(struct ibv_mr *mr, uint32_t *lkey, uint32_t *rkey)
{
	*lkey = mr->lkey;
	*rkey = mr->rkey;
}

int rdmacm_shim_dereg_mr(struct ibv_mr *mr)
{
	return ibv_dereg_mr(mr);
}

struct ibv_ah *rdmacm_shim_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	return ibv_create_ah(pd, attr);
}

/* An address handle from a resolved path record's fields (host order).
 * The GRH is used when the path leaves the subnet (hop_limit > 1) and
 * always on an Ethernet link (RoCE needs it); the source GID's index is
 * looked up among the port's first 16 entries (0 when not found). */
struct ibv_ah *rdmacm_shim_create_ah_from_path(struct ibv_pd *pd, uint8_t port,
					       const uint8_t *dgid, const uint8_t *sgid,
					       uint32_t flow_label, uint8_t hop_limit,
					       uint8_t traffic_class, uint16_t dlid,
					       uint16_t slid, uint8_t sl, uint8_t rate)
{
	struct ibv_port_attr pattr;
	struct ibv_ah_attr attr;
	union ibv_gid gid;
	int i, eth = 0;
	uint8_t bits = 0x7f;

	memset(&attr, 0, sizeof attr);
	if (!ibv_query_port(pd->context, port, &pattr)) {
		bits = (uint8_t) ((1 << pattr.lmc) - 1);
		eth = pattr.link_layer == IBV_LINK_LAYER_ETHERNET;
	}
	if (hop_limit > 1 || eth) {
		attr.is_global = 1;
		memcpy(attr.grh.dgid.raw, dgid, 16);
		attr.grh.flow_label = flow_label;
		attr.grh.hop_limit = hop_limit;
		attr.grh.traffic_class = traffic_class;
		for (i = 0; i < 16; i++) {
			if (!ibv_query_gid(pd->context, port, i, &gid) &&
			    !memcmp(gid.raw, sgid, 16)) {
				attr.grh.sgid_index = i;
				break;
			}
		}
	}
	attr.dlid = dlid;
	attr.sl = sl;
	attr.src_path_bits = slid & bits;
	attr.static_rate = rate;
	attr.port_num = port;
	return ibv_create_ah(pd, &attr);
}

int rdmacm_shim_destroy_ah(struct ibv_ah *ah)
{
	return ibv_destroy_ah(ah);
}

/* The address vector back to the sender of a received UD datagram
 * (libibverbs' ibv_init_ah_from_wc): from the completion's fields and the
 * 40 bytes the receive buffer starts with (the GRH, or on RoCEv2 over IPv4
 * the IP header in its last 20 bytes).  0, or -1 with errno. */
int rdmacm_shim_init_ah_from_wc(struct ibv_context *ctx, uint8_t port_num,
				const struct rdmacm_wc *w,
				const void *grh40, struct ibv_ah_attr *out)
{
	struct ibv_wc wc;
	struct ibv_grh grh;

	_Static_assert(sizeof(struct ibv_grh) == 40, "the GRH is 40 bytes");
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr_id;
	wc.status = w->status;
	wc.opcode = w->opcode;
	wc.byte_len = w->byte_len;
	wc.imm_data = htobe32(w->imm_host);
	wc.wc_flags = w->wc_flags;
	wc.qp_num = w->qp_num;
	wc.src_qp = w->src_qp;
	wc.slid = w->slid;
	wc.pkey_index = w->pkey_index;
	wc.sl = w->sl;
	wc.dlid_path_bits = w->dlid_path_bits;
	memcpy(&grh, grh40, sizeof(grh));
	errno = 0;
	return ibv_init_ah_from_wc(ctx, port_num, &wc, &grh, out) ? -1 : 0;
}
