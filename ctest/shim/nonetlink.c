/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * nonetlink.so - an LD_PRELOAD shim for the VM test kmod_sysfs_fallback: socket() of
 * AF_NETLINK/NETLINK_RDMA fails with EPROTONOSUPPORT, as on a kernel without RDMA netlink
 * (before 5.3), so both librdmacm implementations (and libibverbs) take their sysfs paths.
 * Every other socket() goes to libc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/netlink.h>
#include <sys/socket.h>

int socket(int domain, int type, int protocol)
{
	static int (*real)(int, int, int);

	if (domain == AF_NETLINK && protocol == NETLINK_RDMA) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	if (!real)
		real = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
	return real(domain, type, protocol);
}
