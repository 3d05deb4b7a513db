/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * storm_cycles - connect/disconnect cycles of the CM alone, watching for growth
 * (vm/suite.d/storm.sh).
 *
 *   storm_cycles CYCLES [SAMPLES]
 *
 * Both ends in this process and one thread, over rxe0 loopback (192.0.2.1): a listening id on
 * one event channel, the connecting ids on another. Each cycle: rdma_create_id,
 * rdma_resolve_addr, rdma_resolve_route, rdma_connect without a QP (a made-up QP number, as
 * cmtime -m does), the listener's CONNECT_REQUEST accepted the same way, ESTABLISHED at both
 * ends, rdma_disconnect by the client, DISCONNECTED at the server, which answers with its
 * rdma_disconnect, DISCONNECTED at the client, both ids destroyed. Every
 * event is waited for at most 10 s (a failure names the cycle and the step).
 * SAMPLES times (default 10) at equal cycle counts it prints the open descriptors (entries of
 * /proc/self/fd), the resident set (VmRSS) and the threads (/proc/self/task):
 *   CYCLES n=<cycles> fds=<n> rss_kb=<n> threads=<n> us_per_cycle=<n>
 * The first sample ends the warm-up; every later one must stay within it: descriptors and
 * threads no growth at all, RSS at most 1024 kB above it.
 * Last line: CYCLES done=<n> us_per_cycle=<mean> max_cycle_us=<n> fds=<first>-><last>
 *   rss_kb=<first>-><last> threads=<first>-><last>
 * Exit status: 0 = every cycle worked and nothing grew; 1 = a cycle failed or something grew.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include "procself.h"

#define ADDR "192.0.2.1"
#define PORT 7593
#define WAIT_MS 10000
#define RSS_TOL_KB 1024

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* the next event on CH, which must be WANT (for ID when ID is not NULL); its id in *GOT */
static int expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want, struct rdma_cm_id *id,
		  struct rdma_cm_id **got, long cycle, const char *end)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int r;
	r = poll(&p, 1, WAIT_MS);
	if (r <= 0) {
		printf("CYCLES FAIL cycle %ld: %s waited %d ms for %s (poll %d)\n", cycle, end, WAIT_MS,
		       rdma_event_str(want), r);
		return -1;
	}
	if (rdma_get_cm_event(ch, &ev)) {
		printf("CYCLES FAIL cycle %ld: %s rdma_get_cm_event: %s\n", cycle, end, strerror(errno));
		return -1;
	}
	if (ev->event != want || (id && ev->id != id)) {
		printf("CYCLES FAIL cycle %ld: %s wanted %s, got %s status %d\n", cycle, end,
		       rdma_event_str(want), rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		return -1;
	}
	if (got)
		*got = ev->id;
	rdma_ack_cm_event(ev);
	return 0;
}

#define CHECK(call, what) do { if (call) { printf("CYCLES FAIL cycle %ld: %s: %s\n", i, what, strerror(errno)); return 1; } } while (0)

int main(int argc, char **argv)
{
	long cycles = argc > 1 ? atol(argv[1]) : 2000, samples = argc > 2 ? atol(argv[2]) : 10;
	struct rdma_event_channel *sch, *cch;
	struct rdma_cm_id *listen_id, *cid, *sid;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	struct rdma_conn_param cp;
	long i, every, fds0 = -1, rss0 = -1, thr0 = -1, fds = 0, rss = 0, thr = 0;
	double t0, tc, sum = 0, max = 0, tlast;
	int bad = 0;

	if (cycles < 1 || samples < 2 || cycles / samples < 1) {
		fprintf(stderr, "usage: storm_cycles CYCLES [SAMPLES]\n");
		return 2;
	}
	every = cycles / samples;
	setvbuf(stdout, NULL, _IOLBF, 0);
	inet_pton(AF_INET, ADDR, &sa.sin_addr);
	sch = rdma_create_event_channel();
	cch = rdma_create_event_channel();
	if (!sch || !cch || rdma_create_id(sch, &listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listen_id, (struct sockaddr *)&sa) || rdma_listen(listen_id, 0)) {
		printf("CYCLES FAIL setup: %s\n", strerror(errno));
		return 1;
	}
	memset(&cp, 0, sizeof cp);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	t0 = tlast = now_us();
	for (i = 1; i <= cycles; i++) {
		tc = now_us();
		CHECK(rdma_create_id(cch, &cid, NULL, RDMA_PS_TCP), "rdma_create_id");
		CHECK(rdma_resolve_addr(cid, NULL, (struct sockaddr *)&sa, 2000), "rdma_resolve_addr");
		if (expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED, cid, NULL, i, "client"))
			return 1;
		CHECK(rdma_resolve_route(cid, 2000), "rdma_resolve_route");
		if (expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED, cid, NULL, i, "client"))
			return 1;
		cp.qp_num = 1000 + (i & 0xffff);
		CHECK(rdma_connect(cid, &cp), "rdma_connect");
		if (expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL, &sid, i, "server"))
			return 1;
		cp.qp_num = 2000 + (i & 0xffff);
		CHECK(rdma_accept(sid, &cp), "rdma_accept");
		/* without a QP the active side gets CONNECT_RESPONSE and sends the RTU itself */
		if (expect(cch, RDMA_CM_EVENT_CONNECT_RESPONSE, cid, NULL, i, "client"))
			return 1;
		CHECK(rdma_establish(cid), "rdma_establish");
		if (expect(sch, RDMA_CM_EVENT_ESTABLISHED, sid, NULL, i, "server"))
			return 1;
		/* the client's DREQ; the server answers with its own rdma_disconnect (the DREP) once
		 * it sees DISCONNECTED, as cmtime's server does */
		CHECK(rdma_disconnect(cid), "rdma_disconnect");
		if (expect(sch, RDMA_CM_EVENT_DISCONNECTED, sid, NULL, i, "server"))
			return 1;
		CHECK(rdma_disconnect(sid), "rdma_disconnect server");
		if (expect(cch, RDMA_CM_EVENT_DISCONNECTED, cid, NULL, i, "client"))
			return 1;
		CHECK(rdma_destroy_id(sid), "rdma_destroy_id server");
		CHECK(rdma_destroy_id(cid), "rdma_destroy_id client");
		tc = now_us() - tc;
		sum += tc;
		if (tc > max)
			max = tc;
		if (i % every == 0) {
			double t = now_us();
			fds = proc_fds();
			rss = rss_kb();
			thr = proc_threads(NULL);
			printf("CYCLES n=%ld fds=%ld rss_kb=%ld threads=%ld us_per_cycle=%.0f\n", i, fds, rss, thr,
			       (t - tlast) / every);
			tlast = t;
			if (fds0 < 0) {
				fds0 = fds;
				rss0 = rss;
				thr0 = thr;
			} else {
				if (fds > fds0) {
					printf("CYCLES GROWTH fds %ld -> %ld at cycle %ld\n", fds0, fds, i);
					bad = 1;
				}
				if (thr > thr0) {
					printf("CYCLES GROWTH threads %ld -> %ld at cycle %ld\n", thr0, thr, i);
					bad = 1;
				}
				if (rss > rss0 + RSS_TOL_KB) {
					printf("CYCLES GROWTH rss_kb %ld -> %ld at cycle %ld\n", rss0, rss, i);
					bad = 1;
				}
			}
		}
	}
	printf("CYCLES done=%ld us_per_cycle=%.0f max_cycle_us=%.0f wall_s=%.1f fds=%ld->%ld rss_kb=%ld->%ld threads=%ld->%ld\n",
	       cycles, sum / cycles, max, (now_us() - t0) / 1e6, fds0, fds, rss0, rss, thr0, thr);
	rdma_destroy_id(listen_id);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
	return bad;
}
