/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
#include <string.h>
#include <rdma/rdma_cma.h>
#include "harness.h"

void test_events(void)
{
	static const char *const names[] = {
		"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR",
		"RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR",
		"RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
		"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE",
		"RDMA_CM_EVENT_REJECTED", "RDMA_CM_EVENT_ESTABLISHED",
		"RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
		"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR",
		"RDMA_CM_EVENT_ADDR_CHANGE", "RDMA_CM_EVENT_TIMEWAIT_EXIT",
		"RDMA_CM_EVENT_ADDRINFO_RESOLVED", "RDMA_CM_EVENT_ADDRINFO_ERROR",
	};

	for (int i = 0; i < 18; i++) {
		const char *s = rdma_event_str((enum rdma_cm_event_type)i);

		CHECK(s != NULL && strcmp(s, names[i]) == 0);
	}
	/* Upstream names neither RDMA_CM_EVENT_USER (18) nor _INTERNAL (19). */
	CHECK(strcmp(rdma_event_str((enum rdma_cm_event_type)18), "UNKNOWN EVENT") == 0);
	CHECK(strcmp(rdma_event_str((enum rdma_cm_event_type)19), "UNKNOWN EVENT") == 0);
	CHECK(strcmp(rdma_event_str((enum rdma_cm_event_type)20), "UNKNOWN EVENT") == 0);
	CHECK(strcmp(rdma_event_str((enum rdma_cm_event_type)-1), "UNKNOWN EVENT") == 0);
	CHECK(strcmp(rdma_event_str((enum rdma_cm_event_type)0x7fffffff), "UNKNOWN EVENT") == 0);
}
