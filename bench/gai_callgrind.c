// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/* The cheap path of rdma_getaddrinfo, for bench/gai-callgrind.sh: N numeric
 * lookups ("192.0.2.1", "7471", RAI_NUMERICHOST, RC, TCP port space), each
 * result freed with rdma_freeaddrinfo.  Usage: gai_callgrind N */
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	struct rdma_addrinfo hints, *res;

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_NUMERICHOST;
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_qp_type = IBV_QPT_RC;
	for (int i = 0; i < n; i++) {
		int r = rdma_getaddrinfo("192.0.2.1", "7471", &hints, &res);

		if (r) {
			fprintf(stderr, "rdma_getaddrinfo: %d\n", r);
			return 1;
		}
		rdma_freeaddrinfo(res);
	}
	return 0;
}
