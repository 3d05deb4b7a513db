/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/* rdma_get_src_port / rdma_get_dst_port read struct rdma_cm_id fields the
 * way upstream does, for every family. */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include <infiniband/ib.h>
#include "harness.h"

void test_ports(void)
{
	struct rdma_cm_id id;
	struct sockaddr_ib *sib;

	memset(&id, 0, sizeof(id));
	CHECK_EQ_INT(rdma_get_src_port(&id), 0);
	CHECK_EQ_INT(rdma_get_dst_port(&id), 0);

	id.route.addr.src_sin.sin_family = AF_INET;
	id.route.addr.src_sin.sin_port = htons(7471);
	id.route.addr.dst_sin6.sin6_family = AF_INET6;
	id.route.addr.dst_sin6.sin6_port = htons(18515);
	CHECK_EQ_INT(ntohs(rdma_get_src_port(&id)), 7471);
	CHECK_EQ_INT(ntohs(rdma_get_dst_port(&id)), 18515);
	CHECK(rdma_get_local_addr(&id)->sa_family == AF_INET);
	CHECK(rdma_get_peer_addr(&id)->sa_family == AF_INET6);

	sib = (struct sockaddr_ib *)&id.route.addr.dst_storage;
	memset(sib, 0, sizeof(*sib));
	sib->sib_family = AF_IB;
	sib->sib_sid = htobe64(RDMA_IB_IP_PS_TCP | 0xbeef);
	CHECK_EQ_INT(ntohs(rdma_get_dst_port(&id)), 0xbeef);
}
