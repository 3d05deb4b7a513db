// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/* LD_PRELOAD for bench/gai-name-callgrind.sh: upstream's librdmacm refuses
 * every rdma_getaddrinfo on a host without an RDMA device (its first-use
 * set-up wants one), so this hands it a device list of one placeholder that
 * is never opened (a name lookup does not touch a device).  For counting
 * instructions on a device-less host only. */
#include <stdint.h>
#include <stdlib.h>

struct ibv_device;
static char placeholder[4096];

struct ibv_device **ibv_get_device_list(int *n)
{
	struct ibv_device **l = calloc(2, sizeof(*l));

	if (!l)
		return NULL;
	l[0] = (struct ibv_device *)placeholder;
	if (n)
		*n = 1;
	return l;
}

void ibv_free_device_list(struct ibv_device **l)
{
	free(l);
}

uint64_t ibv_get_device_guid(struct ibv_device *d)
{
	(void)d;
	return 1;
}

int ibv_get_device_index(struct ibv_device *d)
{
	(void)d;
	return -1;
}
