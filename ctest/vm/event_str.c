/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * event_str - prints rdma_event_str() of every rdma_cm_event_type value and of a few values
 * outside the enumeration; the VM test bed diffs upstream's output and ours (--cmp).
 */
#include <stdio.h>
#include <rdma/rdma_cma.h>

int main(void)
{
	int e;

	for (e = -1; e <= RDMA_CM_EVENT_INTERNAL + 2; e++)
		printf("%d %s\n", e, rdma_event_str((enum rdma_cm_event_type)e));
	printf("%d %s\n", 1000, rdma_event_str((enum rdma_cm_event_type)1000));
	return 0;
}
