/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/* Arguments that upstream rejects before touching any device. */
#include <errno.h>
#include <rdma/rdma_cma.h>
#include "harness.h"

void test_args(void)
{
	struct rdma_addrinfo *res = (struct rdma_addrinfo *)1;

	errno = 0;
	CHECK_EQ_INT(rdma_getaddrinfo(NULL, NULL, NULL, &res), -1);
	CHECK_EQ_INT(errno, EINVAL);
}
