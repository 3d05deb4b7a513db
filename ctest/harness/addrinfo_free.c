/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/* rdma_freeaddrinfo releases chains that C code built or extended with its
 * own malloc'd members (ASan/LeakSanitizer report anything left). */
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include "harness.h"

static struct rdma_addrinfo *node(int full)
{
	struct rdma_addrinfo *ai = calloc(1, sizeof(*ai));

	if (!ai)
		abort();
	if (full) {
		ai->ai_src_addr = calloc(1, sizeof(struct sockaddr_in6));
		ai->ai_src_len = sizeof(struct sockaddr_in6);
		ai->ai_dst_addr = calloc(1, sizeof(struct sockaddr_in));
		ai->ai_dst_len = sizeof(struct sockaddr_in);
		ai->ai_src_canonname = strdup("src.example");
		ai->ai_dst_canonname = strdup("dst.example");
		ai->ai_route = malloc(72);
		ai->ai_route_len = 72;
		ai->ai_connect = malloc(36);
		ai->ai_connect_len = 36;
	}
	return ai;
}

void test_addrinfo_free(void)
{
	struct rdma_addrinfo *head;

	rdma_freeaddrinfo(NULL);
	rdma_freeaddrinfo(node(0));
	rdma_freeaddrinfo(node(1));
	head = node(1);
	head->ai_next = node(0);
	head->ai_next->ai_next = node(1);
	rdma_freeaddrinfo(head);
	CHECK(1);
}
