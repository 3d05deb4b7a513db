/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/* rdma/rdma_verbs.h compiles (with either header set) and its error
 * convention matches: 0 stays 0, a positive verbs error becomes -1/errno. */
#include <errno.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include "harness.h"

void test_verbs_inline(void)
{
	/* Taking the addresses forces every inline helper to compile. */
	void *fns[] = {
		(void *)rdma_reg_msgs, (void *)rdma_reg_read, (void *)rdma_reg_write,
		(void *)rdma_dereg_mr, (void *)rdma_post_recvv, (void *)rdma_post_sendv,
		(void *)rdma_post_readv, (void *)rdma_post_writev, (void *)rdma_post_recv,
		(void *)rdma_post_send, (void *)rdma_post_read, (void *)rdma_post_write,
		(void *)rdma_post_ud_send, (void *)rdma_get_send_comp,
		(void *)rdma_get_recv_comp, (void *)rsocket, (void *)riowrite,
	};

	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		CHECK(fns[i] != NULL);
	errno = 0;
	CHECK_EQ_INT(rdma_seterrno(0), 0);
	CHECK_EQ_INT(errno, 0);
	CHECK_EQ_INT(rdma_seterrno(ENOMEM), -1);
	CHECK_EQ_INT(errno, ENOMEM);
}
