/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * rdmacm-rs: convenience wrappers that combine an rdma_cm_id with the
 * verbs calls on its QP, CQs and PD.  Everything here is an inline
 * function compiled into the application (none of it is exported by
 * librdmacm.so.1); the functions read struct rdma_cm_id fields directly.
 *
 * Written by hand: cbindgen generates prototypes, not inline bodies.
 */
#ifndef RDMA_VERBS_H
#define RDMA_VERBS_H

#include <assert.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Turns a verbs return code (0 or a positive errno) into 0 or -1/errno. */
static inline int rdma_seterrno(int ret)
{
	if (ret == 0)
		return 0;
	errno = ret;
	return -1;
}

int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
		    struct ibv_srq_init_attr *attr);
int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr);
void rdma_destroy_srq(struct rdma_cm_id *id);

/* Memory registration on the identifier's protection domain. */
static inline struct ibv_mr *
rdma_reg_msgs(struct rdma_cm_id *id, void *addr, size_t length)
{
	return ibv_reg_mr(id->pd, addr, length, IBV_ACCESS_LOCAL_WRITE);
}

static inline struct ibv_mr *
rdma_reg_read(struct rdma_cm_id *id, void *addr, size_t length)
{
	return ibv_reg_mr(id->pd, addr, length,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
}

static inline struct ibv_mr *
rdma_reg_write(struct rdma_cm_id *id, void *addr, size_t length)
{
	return ibv_reg_mr(id->pd, addr, length,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
}

static inline int rdma_dereg_mr(struct ibv_mr *mr)
{
	return rdma_seterrno(ibv_dereg_mr(mr));
}

/* Posts a receive on the identifier's SRQ if it has one, else on its QP. */
static inline int
rdma_post_recvv(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl,
		int nsge)
{
	struct ibv_recv_wr wr, *bad;

	wr.wr_id = (uintptr_t)context;
	wr.next = NULL;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	return rdma_seterrno(id->srq ? ibv_post_srq_recv(id->srq, &wr, &bad)
				     : ibv_post_recv(id->qp, &wr, &bad));
}

/* Builds and posts one send-queue work request (send, read or write). */
static inline int
__rdma_rs_post_wr(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl,
		  int nsge, int flags, enum ibv_wr_opcode opcode,
		  uint64_t remote_addr, uint32_t rkey)
{
	struct ibv_send_wr wr, *bad;

	wr.wr_id = (uintptr_t)context;
	wr.next = NULL;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.opcode = opcode;
	wr.send_flags = flags;
	wr.wr.rdma.remote_addr = remote_addr;
	wr.wr.rdma.rkey = rkey;
	return rdma_seterrno(ibv_post_send(id->qp, &wr, &bad));
}

static inline int
rdma_post_sendv(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl,
		int nsge, int flags)
{
	return __rdma_rs_post_wr(id, context, sgl, nsge, flags, IBV_WR_SEND, 0, 0);
}

static inline int
rdma_post_readv(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl,
		int nsge, int flags, uint64_t remote_addr, uint32_t rkey)
{
	return __rdma_rs_post_wr(id, context, sgl, nsge, flags,
				 IBV_WR_RDMA_READ, remote_addr, rkey);
}

static inline int
rdma_post_writev(struct rdma_cm_id *id, void *context, struct ibv_sge *sgl,
		 int nsge, int flags, uint64_t remote_addr, uint32_t rkey)
{
	return __rdma_rs_post_wr(id, context, sgl, nsge, flags,
				 IBV_WR_RDMA_WRITE, remote_addr, rkey);
}

/* A single scatter/gather entry; mr may be NULL for inline sends. */
static inline struct ibv_sge
__rdma_rs_sge(void *addr, size_t length, struct ibv_mr *mr)
{
	struct ibv_sge sge;

	sge.addr = (uint64_t)(uintptr_t)addr;
	sge.length = (uint32_t)length;
	sge.lkey = mr ? mr->lkey : 0;
	return sge;
}

static inline int
rdma_post_recv(struct rdma_cm_id *id, void *context, void *addr,
	       size_t length, struct ibv_mr *mr)
{
	struct ibv_sge sge;

	/* The buffer must lie inside the registered region. */
	assert((uint8_t *)addr >= (uint8_t *)mr->addr &&
	       (uint8_t *)addr + length <= (uint8_t *)mr->addr + mr->length);
	sge = __rdma_rs_sge(addr, length, mr);
	return rdma_post_recvv(id, context, &sge, 1);
}

static inline int
rdma_post_send(struct rdma_cm_id *id, void *context, void *addr,
	       size_t length, struct ibv_mr *mr, int flags)
{
	struct ibv_sge sge = __rdma_rs_sge(addr, length, mr);

	return rdma_post_sendv(id, context, &sge, 1, flags);
}

static inline int
rdma_post_read(struct rdma_cm_id *id, void *context, void *addr,
	       size_t length, struct ibv_mr *mr, int flags,
	       uint64_t remote_addr, uint32_t rkey)
{
	struct ibv_sge sge = __rdma_rs_sge(addr, length, mr);

	return rdma_post_readv(id, context, &sge, 1, flags, remote_addr, rkey);
}

static inline int
rdma_post_write(struct rdma_cm_id *id, void *context, void *addr,
		size_t length, struct ibv_mr *mr, int flags,
		uint64_t remote_addr, uint32_t rkey)
{
	struct ibv_sge sge = __rdma_rs_sge(addr, length, mr);

	return rdma_post_writev(id, context, &sge, 1, flags, remote_addr, rkey);
}

/* Sends one datagram to (ah, remote_qpn) with the UDP port space Q_Key. */
static inline int
rdma_post_ud_send(struct rdma_cm_id *id, void *context, void *addr,
		  size_t length, struct ibv_mr *mr, int flags,
		  struct ibv_ah *ah, uint32_t remote_qpn)
{
	struct ibv_sge sge = __rdma_rs_sge(addr, length, mr);
	struct ibv_send_wr wr, *bad;

	wr.wr_id = (uintptr_t)context;
	wr.next = NULL;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = flags;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = remote_qpn;
	wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
	return rdma_seterrno(ibv_post_send(id->qp, &wr, &bad));
}

/*
 * Waits for one completion on cq: polls, arms the CQ, polls again to close
 * the race with a completion that arrived before arming, then blocks on the
 * completion channel.  The library creates its CQs with the identifier as
 * their context, which the assertion relies on.
 */
static inline int
__rdma_rs_get_comp(struct rdma_cm_id *id, struct ibv_cq *cq,
		   struct ibv_comp_channel *channel, struct ibv_wc *wc)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int ret;

	for (;;) {
		ret = ibv_poll_cq(cq, 1, wc);
		if (ret)
			break;
		ret = ibv_req_notify_cq(cq, 0);
		if (ret)
			return rdma_seterrno(ret);
		ret = ibv_poll_cq(cq, 1, wc);
		if (ret)
			break;
		ret = ibv_get_cq_event(channel, &ev_cq, &ev_ctx);
		if (ret)
			return ret;
		assert(ev_cq == cq && ev_ctx == id);
		(void)ev_ctx;
		ibv_ack_cq_events(cq, 1);
	}
	return ret < 0 ? rdma_seterrno(ret) : ret;
}

static inline int
rdma_get_send_comp(struct rdma_cm_id *id, struct ibv_wc *wc)
{
	return __rdma_rs_get_comp(id, id->send_cq, id->send_cq_channel, wc);
}

static inline int
rdma_get_recv_comp(struct rdma_cm_id *id, struct ibv_wc *wc)
{
	return __rdma_rs_get_comp(id, id->recv_cq, id->recv_cq_channel, wc);
}

#ifdef __cplusplus
}
#endif

#endif /* RDMA_VERBS_H */
