/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * Micro-benchmarks of the address-resolution calls, run in the VM once with
 * upstream's librdmacm and once with ours (bench/run.sh computes the
 * ratios).  Each case runs ROUNDS rounds of N calls; the median round is
 * reported as "BENCH <case> <ns per call> <calls per round>".  A case whose
 * call fails is reported as "BENCH <case> FAIL <errno name>".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#define ROUNDS 5

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

typedef int (*bench_fn)(const void *arg);

static void run(const char *name, bench_fn fn, const void *arg, int n)
{
	double r[ROUNDS];

	if (fn(arg)) {
		printf("BENCH %s FAIL %s\n", name, strerrorname_np(errno) ? strerrorname_np(errno) : "?");
		return;
	}
	for (int k = 0; k < ROUNDS; k++) {
		double t0 = now_ns();

		for (int i = 0; i < n; i++)
			if (fn(arg)) {
				printf("BENCH %s FAIL %s\n", name, strerrorname_np(errno));
				return;
			}
		r[k] = (now_ns() - t0) / n;
	}
	qsort(r, ROUNDS, sizeof(r[0]), cmp_double);
	printf("BENCH %s %.0f %d\n", name, r[ROUNDS / 2], n);
	fflush(stdout);
}

struct gai_case {
	const char *node, *service;
	int flags, family;
};

static int do_getaddrinfo(const void *arg)
{
	const struct gai_case *c = arg;
	struct rdma_addrinfo hints, *res;
	int ret;

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = c->flags;
	hints.ai_family = c->family;
	hints.ai_port_space = RDMA_PS_TCP;
	ret = rdma_getaddrinfo(c->node, c->service, &hints, &res);
	if (ret) {
		if (ret != -1)
			errno = EHOSTUNREACH;
		return -1;
	}
	rdma_freeaddrinfo(res);
	return 0;
}

static int do_resolve(const void *arg)
{
	const char *ip = arg;
	struct sockaddr_in sin;
	struct rdma_cm_id *id;
	int ret;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	inet_pton(AF_INET, ip, &sin.sin_addr);
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return -1;
	ret = rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000);
	if (!ret)
		ret = rdma_resolve_route(id, 2000);
	rdma_destroy_id(id);
	return ret;
}

static int do_create_destroy(const void *arg)
{
	struct rdma_event_channel *ch = (struct rdma_event_channel *)arg;
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return -1;
	return rdma_destroy_id(id);
}

static int do_event_str(const void *arg)
{
	(void)arg;
	return rdma_event_str(RDMA_CM_EVENT_ESTABLISHED)[0] == 'R' ? 0 : -1;
}

int main(void)
{
	static const struct gai_case v4 = { "192.0.2.2", "7471", RAI_NUMERICHOST, AF_INET };
	static const struct gai_case v6 = { "2001:db8::2", "7471", RAI_NUMERICHOST, AF_INET6 };
	static const struct gai_case passive = { NULL, "7471", RAI_PASSIVE, AF_INET };
	static const struct gai_case name = { "localhost", "7471", 0, 0 };
	struct rdma_event_channel *ch = rdma_create_event_channel();

	run("getaddrinfo_numeric_v4", do_getaddrinfo, &v4, 2000);
	run("getaddrinfo_numeric_v6", do_getaddrinfo, &v6, 2000);
	run("getaddrinfo_passive", do_getaddrinfo, &passive, 2000);
	run("getaddrinfo_localhost", do_getaddrinfo, &name, 500);
	run("event_str", do_event_str, NULL, 100000);
	if (ch) {
		run("create_destroy_id", do_create_destroy, ch, 500);
		rdma_destroy_event_channel(ch);
	} else {
		printf("BENCH create_destroy_id FAIL %s\n", strerrorname_np(errno));
	}
	run("resolve_addr_route_sync", do_resolve, "192.0.2.2", 50);
	return 0;
}
