// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/* N rdma_getaddrinfo lookups, each result freed with rdma_freeaddrinfo, for
 * bench/gai-callgrind.sh and bench/gai-name-callgrind.sh (RC, TCP port
 * space, service "7471").  Usage: gai_callgrind N [NODE]
 *   without NODE: the cheap path, the numeric "192.0.2.1" under
 *   RAI_NUMERICHOST;
 *   with NODE: a name (make bench's gai_hosts_name: "bench-peer.test" from
 *   /etc/hosts), no flags, AF_INET. */
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	const char *node = argc > 2 ? argv[2] : "192.0.2.1";
	struct rdma_addrinfo hints, *res;

	memset(&hints, 0, sizeof(hints));
	if (argc > 2)
		hints.ai_family = AF_INET;
	else
		hints.ai_flags = RAI_NUMERICHOST;
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
