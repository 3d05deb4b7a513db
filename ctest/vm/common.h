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

#include <execinfo.h>
#include <signal.h>
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

/* SIGUSR1: the thread that takes it prints its own stack to stderr (raw
 * addresses; symbolize the library's frames with addr2line). */
static inline void stack_handler(int sig)
{
	void *b[48];
	int n = backtrace(b, 48);

	(void)sig;
	backtrace_symbols_fd(b, n, 2);
}

/* Installs stack_handler for SIGUSR1 (a watchdog sends it to a stuck
 * thread). libgcc_s is loaded here, not in the handler. */
static inline void stacks_on_sigusr1(void)
{
	void *b[2];

	backtrace(b, 2);
	signal(SIGUSR1, stack_handler);
}

#endif
