// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/* The name path of rdma_getaddrinfo, for bench/gai-name-callgrind.sh: N
 * lookups of a name from /etc/hosts (make bench's gai_hosts_name:
 * "bench-peer.test", "7471", no flags, AF_INET, RC, TCP port space), each
 * result freed with rdma_freeaddrinfo.  Usage: gai_name_callgrind N [NODE] */
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	const char *node = argc > 2 ? argv[2] : "bench-peer.test";
	struct rdma_addrinfo hints, *res;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_qp_type = IBV_QPT_RC;
	for (int i = 0; i < n; i++) {
		int r = rdma_getaddrinfo(node, "7471", &hints, &res);

		if (r) {
			fprintf(stderr, "rdma_getaddrinfo: %d\n", r);
			return 1;
		}
		rdma_freeaddrinfo(res);
	}
	return 0;
}
