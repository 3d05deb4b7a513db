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
#include <stdarg.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
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

/* One line "[seconds] who: message" to stderr, whole even when threads
 * report at once (the stress programs' failure reports). */
static inline void vreport(double t, const char *who, const char *fmt, va_list ap)
{
	flockfile(stderr);
	fprintf(stderr, "[%7.2f] %s: ", t, who);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	funlockfile(stderr);
}

/* "FAIL what: errno NAME" on stdout, and the program exits with 1. */
static inline void die_errno(const char *what)
{
	printf("FAIL %s: errno %s\n", what, en(errno));
	exit(1);
}

#ifdef RSOCKET_H
/* An rsocket connecting to *sin: the descriptor (-1: rsocket failed) and
 * rconnect's result in *ret (-1 when there was no rsocket). */
static inline int rs_connected(const struct sockaddr_in *sin, int *ret)
{
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);

	*ret = fd >= 0 ? rconnect(fd, (const struct sockaddr *)sin, sizeof *sin) : -1;
	return fd;
}

/* A listening rsocket on addr:port, its address left in *sin (for the
 * programs' clients); NULL's what, the failing call's name, else. */
static inline int rs_listener(const char *addr, int port, struct sockaddr_in *sin, const char **what)
{
	int lis;

	memset(sin, 0, sizeof *sin);
	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	inet_pton(AF_INET, addr, &sin->sin_addr);
	lis = rsocket(AF_INET, SOCK_STREAM, 0);
	if (lis < 0) {
		*what = "rsocket";
		return -1;
	}
	if (rbind(lis, (struct sockaddr *)sin, sizeof *sin)) {
		*what = "rbind";
		return -1;
	}
	if (rlisten(lis, 4)) {
		*what = "rlisten";
		return -1;
	}
	return lis;
}
#endif

#ifdef RDMA_CMA_H
/* Prints each entry of an rdma_addrinfo list: flags, family, QP type, port
 * space, address lengths, the destination's (else the source's) address
 * and port, the route's length. */
static inline void show_ai_list(const struct rdma_addrinfo *ai)
{
	for (; ai; ai = ai->ai_next) {
		const struct sockaddr *d = ai->ai_dst_addr, *s = ai->ai_src_addr;
		char host[64] = "-";
		int port = 0;

		if (d && d->sa_family == AF_INET) {
			inet_ntop(AF_INET, &((const struct sockaddr_in *)d)->sin_addr, host, sizeof(host));
			port = ntohs(((const struct sockaddr_in *)d)->sin_port);
		} else if (d && d->sa_family == AF_INET6) {
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)d)->sin6_addr, host, sizeof(host));
			port = ntohs(((const struct sockaddr_in6 *)d)->sin6_port);
		} else if (s && s->sa_family == AF_INET) {
			inet_ntop(AF_INET, &((const struct sockaddr_in *)s)->sin_addr, host, sizeof(host));
			port = ntohs(((const struct sockaddr_in *)s)->sin_port);
		}
		printf("  ai flags=%#x family=%d qp_type=%d ps=%#x src_len=%u dst_len=%u addr=%s port=%d route_len=%zu\n",
		       ai->ai_flags, ai->ai_family, ai->ai_qp_type, ai->ai_port_space,
		       ai->ai_src_len, ai->ai_dst_len, host, port, ai->ai_route_len);
	}
}
#endif

#endif
