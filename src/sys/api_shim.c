// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/* The verbs data calls of the public Rust API (src/api/verbs.rs): the
 * functions <infiniband/verbs.h> has as static inline (post, poll, notify),
 * flattened to plain arguments so that Rust needs no mirror of
 * struct ibv_send_wr or struct ibv_wc.  What rsockets' shims
 * (verbs_shim.c, rdmacm_shim_rs_*) already do the same way - RC posts,
 * receives, memory keys and deregistration, the channel's descriptor - the
 * API calls there. */

#include <endian.h>
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

int rdmacm_shim_api_post_ud_send(struct ibv_qp *qp, uint64_t wr_id,
				 struct ibv_sge *sgl, int nsge, int send_flags,
				 struct ibv_ah *ah, uint32_t remote_qpn,
				 uint32_t remote_qkey)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_SEND;
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

struct ibv_ah *rdmacm_shim_api_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	return ibv_create_ah(pd, attr);
}

int rdmacm_shim_api_destroy_ah(struct ibv_ah *ah)
{
	return ibv_destroy_ah(ah);
}
