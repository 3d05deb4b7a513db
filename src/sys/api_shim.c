// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/* The verbs data calls of the public Rust API (src/api/verbs.rs): the
 * functions <infiniband/verbs.h> has as static inline (post, poll, notify),
 * flattened to plain arguments so that Rust needs no mirror of
 * struct ibv_send_wr or struct ibv_wc.  What rsockets' shims
 * (verbs_shim.c, rdmacm_shim_rs_*) already do the same way - RC posts,
 * receives, memory keys and deregistration, the channel's descriptor - the
 * API calls there. */

#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <string.h>

/* One work completion, as the Rust side reads it. */
struct rdmacm_api_wc {
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

/* A UD send (IBV_WR_SEND, or IBV_WR_SEND_WITH_IMM when with_imm) to
 * remote_qpn behind ah.  imm_host is the immediate data in host order: it
 * goes on the wire big-endian (imm_data is __be32), so a C peer reads it
 * back with be32toh and our poll below hands it over in host order. */
int rdmacm_shim_api_post_ud_send(struct ibv_qp *qp, uint64_t wr_id,
				 struct ibv_sge *sgl, int nsge, int send_flags,
				 struct ibv_ah *ah, uint32_t remote_qpn,
				 uint32_t remote_qkey, int with_imm,
				 uint32_t imm_host)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
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

/* Up to n (at most 16) completions into out: their count, or <0. */
int rdmacm_shim_api_poll_cq(struct ibv_cq *cq, struct rdmacm_api_wc *out, int n)
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

int rdmacm_shim_api_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return ibv_req_notify_cq(cq, solicited_only);
}

/* Blocks (unless the channel is non-blocking) for the next CQ event and
 * acknowledges it at once, so that destroying the CQ never waits. */
int rdmacm_shim_api_get_cq_event(struct ibv_comp_channel *ch)
{
	struct ibv_cq *cq;
	void *ctx;
	int ret = ibv_get_cq_event(ch, &cq, &ctx);

	if (ret == 0)
		ibv_ack_cq_events(cq, 1);
	return ret;
}

struct ibv_mr *rdmacm_shim_api_reg_mr(struct ibv_pd *pd, void *addr,
				      size_t len, int access)
{
	return ibv_reg_mr(pd, addr, len, access);
}

/* The address vector back to the sender of a received UD datagram
 * (libibverbs' ibv_init_ah_from_wc): from the completion's fields and the
 * 40 bytes the receive buffer starts with (the GRH, or on RoCEv2 over IPv4
 * the IP header in its last 20 bytes).  0, or -1 with errno. */
int rdmacm_shim_api_init_ah_from_wc(struct ibv_context *ctx, uint8_t port_num,
				    const struct rdmacm_api_wc *w,
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

/* The QP's qkey (ibv_query_qp with IBV_QP_QKEY): 0, or an errno value. */
int rdmacm_shim_api_query_qkey(struct ibv_qp *qp, uint32_t *qkey)
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

struct ibv_ah *rdmacm_shim_api_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	return ibv_create_ah(pd, attr);
}

int rdmacm_shim_api_destroy_ah(struct ibv_ah *ah)
{
	return ibv_destroy_ah(ah);
}
