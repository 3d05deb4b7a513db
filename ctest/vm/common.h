/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * What the VM test programs share. Each program defines _GNU_SOURCE before
 * its first include (strerrorname_np) and includes this after its system
 * headers.
 */
#ifndef RDMACM_RS_VM_COMMON_H
#define RDMACM_RS_VM_COMMON_H

#ifndef _GNU_SOURCE
#error "define _GNU_SOURCE before the first include"
#endif

#include <stdio.h>
#include <string.h>

/* The symbolic name of an errno value, as the programs print it: "0" for
 * none, the E-name glibc knows, else "errno=N". One buffer per thread for
 * the last. */
static inline const char *en(int e)
{
	static __thread char b[32];
	const char *n;

	if (e == 0)
		return "0";
	n = strerrorname_np(e);
	if (n)
		return n;
	snprintf(b, sizeof b, "errno=%d", e);
	return b;
}

#endif
