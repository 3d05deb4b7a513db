/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * soak - connect/transfer/disconnect cycles for a while, watching for growth.
 *
 *   soak SECONDS [SAMPLES]
 *
 * Both ends in this process over rxe0 loopback (192.0.2.1). Each cycle:
 *   1. an rdma_cm connection with QPs: synchronous ids (rdma_create_ep with QP attributes; a
 *      server thread in rdma_get_request/rdma_accept), a 4 KiB message each way through
 *      registered buffers (rdma_post_send/recv, completions polled), deregistration, and the
 *      client's rdma_destroy_ep disconnects (the server waits for DISCONNECTED, at most 10 s,
 *      then destroys its end);
 *   2. an rsocket stream: rconnect to a listener served by a thread, 64 KiB each way,
 *      verified, rclose both ends.
 * SAMPLES times (default 10) at equal intervals it prints the open descriptors (entries of
 * /proc/self/fd), the resident set (VmRSS) and the threads (/proc/self/task, less any that
 * are exiting: joined or not, such a thread has ended and only waits to be reaped):
 *   SOAK t=<s> cycles=<n> fds=<n> rss_kb=<n> threads=<n>[ (and <n> exiting, not counted)]
 * The first sample ends the warm-up (lazy initialisation: device contexts, service threads);
 * later samples are measured against it:
 *   fds and threads: the last sample no higher (a count above it at an earlier sample that is
 *   back by the last is printed, not failed: a thread that comes and goes is not a leak);
 *   upstream's rsocket service threads are joined when their last socket closes, and one so
 *   joined can still be listed at a sample, exiting: it is printed and not counted;
 *   RSS: every sample at most 2048 kB above it.
 * A leak of one descriptor or thread per cycle fails at the last sample; an RSS leak of ~1 kB
 * per cycle does within a few intervals (thousands of cycles).
 * Exit status: 0 = every cycle worked and nothing grew; 1 = a cycle failed (the step and
 * errno are printed) or something grew (named).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include "procself.h"

#define ADDR "192.0.2.1"
#define CM_PORT "7591"
#define RS_PORT 7592
#define MSG 4096
#define RS_BYTES 65536
#define RSS_TOL_KB 2048

static volatile int stop;
/* connections the server threads have finished tearing down: the client waits for them before
 * a sample, so that no sample sees a connection half closed */
static volatile long cm_done, rs_done;
/* a step that takes longer than this is reported (a stall is not a failure: only growth is) */
#define SLOW_MS 5000
static double now(void);
static void step(const char *what, long cycle, double t0)
{
	double ms = (now() - t0) * 1000;
	if (ms > SLOW_MS)
		printf("SOAK slow: cycle %ld %s took %.0f ms\n", cycle, what, ms);
}
static char fail_msg[256];
static void fail(const char *what)
{
	if (!fail_msg[0])
		snprintf(fail_msg, sizeof fail_msg, "%s: %s", what, strerrorname_np(errno) ? strerrorname_np(errno) : "?");
	stop = 1;
}

/* ---- rdma_cm with QPs ---- */
static struct rdma_cm_id *cm_listen;
static int wait_comp(struct rdma_cm_id *id, int send)
{
	struct ibv_wc wc;
	int r = send ? rdma_get_send_comp(id, &wc) : rdma_get_recv_comp(id, &wc);
	return r <= 0 || wc.status != IBV_WC_SUCCESS ? -1 : 0;
}
static void *cm_server(void *arg)
{
	(void)arg;
	static char rbuf[MSG], sbuf[MSG];
	while (!stop) {
		struct rdma_cm_id *id;
		if (rdma_get_request(cm_listen, &id)) {
			if (!stop)
				fail("server rdma_get_request");
			break;
		}
		struct ibv_mr *rmr = rdma_reg_msgs(id, rbuf, MSG), *smr = rmr ? rdma_reg_msgs(id, sbuf, MSG) : NULL;
		if (!smr) {
			fail("server rdma_reg_msgs");
		} else if (rdma_post_recv(id, NULL, rbuf, MSG, rmr) || rdma_accept(id, NULL)) {
			fail("server post_recv/accept");
		} else if (wait_comp(id, 0)) {
			fail("server recv completion");
		} else {
			memcpy(sbuf, rbuf, MSG);
			if (rdma_post_send(id, NULL, sbuf, MSG, smr, IBV_SEND_SIGNALED) || wait_comp(id, 1))
				fail("server send");
		}
		/* the client disconnects first; then ours */
		/* at most 10 s: under TCG the kernel's CM occasionally loses the disconnect (seen with
		 * both libraries: the client's destroy then takes ~78 s, the DREQ's retries); that is
		 * reported as a stall, not waited for, since the soak looks for growth */
		struct rdma_cm_event *e;
		struct pollfd pf = { .fd = id->channel->fd, .events = POLLIN };
		if (!stop && poll(&pf, 1, 10000) == 1 && rdma_get_cm_event(id->channel, &e) == 0)
			rdma_ack_cm_event(e);
		else if (!stop)
			printf("SOAK slow: server saw no DISCONNECTED within 10 s (cycle %ld)\n", cm_done);
		if (smr)
			rdma_dereg_mr(smr);
		if (rmr)
			rdma_dereg_mr(rmr);
		rdma_destroy_ep(id);
		__atomic_add_fetch(&cm_done, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}
static struct rdma_addrinfo *cm_ai;
static int cm_cycle(unsigned seed)
{
	double t = now();
	static char sbuf[MSG], rbuf[MSG];
	struct ibv_qp_init_attr a = { .cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
				      .sq_sig_all = 1 };
	struct rdma_cm_id *id;
	if (rdma_create_ep(&id, cm_ai, NULL, &a)) {
		fail("client rdma_create_ep");
		return -1;
	}
	step("rdma_create_ep", seed, t);
	t = now();
	for (int i = 0; i < MSG; i++)
		sbuf[i] = (char)(seed + i);
	struct ibv_mr *rmr = rdma_reg_msgs(id, rbuf, MSG), *smr = rmr ? rdma_reg_msgs(id, sbuf, MSG) : NULL;
	int ok = 0;
	if (!smr)
		fail("client rdma_reg_msgs");
	else if (rdma_post_recv(id, NULL, rbuf, MSG, rmr) || rdma_connect(id, NULL))
		fail("client post_recv/connect");
	else if (step("rdma_connect", seed, t), 0)
		;
	else if (rdma_post_send(id, NULL, sbuf, MSG, smr, 0) || wait_comp(id, 1))
		fail("client send");
	else if (wait_comp(id, 0))
		fail("client recv completion");
	else if (memcmp(sbuf, rbuf, MSG))
		errno = 0, fail("client compare");
	else
		ok = 1;
	/* no rdma_disconnect: on a synchronous id it waits for the DISCONNECTED event, and under
	 * TCG the kernel's CM occasionally gets no DREP (seen with both libraries: ETIMEDOUT after
	 * ~78 s, the DREQ's retries); destroying the connected id disconnects it without waiting */
	t = now();
	if (smr)
		rdma_dereg_mr(smr);
	if (rmr)
		rdma_dereg_mr(rmr);
	rdma_destroy_ep(id);
	step("rdma_destroy_ep (disconnects)", seed, t);
	return ok ? 0 : -1;
}

/* ---- rsockets ---- */
static int rs_listen_fd = -1;
static void *rs_server(void *arg)
{
	(void)arg;
	static char b[RS_BYTES];
	while (!stop) {
		int fd = raccept(rs_listen_fd, NULL, NULL);
		if (fd < 0) {
			if (!stop)
				fail("rs raccept");
			break;
		}
		/* echo RS_BYTES back */
		size_t got = 0;
		while (got < RS_BYTES) {
			ssize_t r = rrecv(fd, b + got, RS_BYTES - got, 0);
			if (r <= 0)
				break;
			got += (size_t)r;
		}
		for (size_t off = 0; off < got;) {
			ssize_t w = rsend(fd, b + off, got - off, 0);
			if (w <= 0)
				break;
			off += (size_t)w;
		}
		/* until the client closes */
		while (rrecv(fd, b, 1, 0) > 0)
			;
		rclose(fd);
		__atomic_add_fetch(&rs_done, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}
static int rs_cycle(unsigned seed)
{
	static char out[RS_BYTES], in[RS_BYTES];
	struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons(RS_PORT) };
	inet_pton(AF_INET, ADDR, &d.sin_addr);
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0) {
		fail("rs rsocket");
		return -1;
	}
	double t = now();
	if (rconnect(fd, (struct sockaddr *)&d, sizeof d)) {
		fail("rs rconnect");
		rclose(fd);
		return -1;
	}
	step("rconnect", seed, t);
	t = now();
	for (int i = 0; i < RS_BYTES; i++)
		out[i] = (char)(seed * 13 + i);
	int ok = 1;
	for (size_t off = 0; ok && off < RS_BYTES;) {
		ssize_t w = rsend(fd, out + off, RS_BYTES - off, 0);
		if (w <= 0)
			fail("rs rsend"), ok = 0;
		else
			off += (size_t)w;
	}
	for (size_t got = 0; ok && got < RS_BYTES;) {
		ssize_t r = rrecv(fd, in + got, RS_BYTES - got, 0);
		if (r <= 0)
			fail("rs rrecv"), ok = 0;
		else
			got += (size_t)r;
	}
	if (ok && memcmp(in, out, RS_BYTES))
		errno = 0, fail("rs compare"), ok = 0;
	step("rsocket transfer", seed, t);
	t = now();
	if (rclose(fd))
		fail("rs rclose"), ok = 0;
	step("rclose", seed, t);
	return ok ? 0 : -1;
}

/* ---- sampling ---- */
static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char l[128];
	long v = -1;
	while (f && fgets(l, sizeof l, f))
		if (!strncmp(l, "VmRSS:", 6))
			v = atol(l + 6);
	if (f)
		fclose(f);
	return v;
}
static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 60, samples = argc > 2 ? atoi(argv[2]) : 10;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (secs <= 0 || samples < 2) {
		fprintf(stderr, "usage: soak SECONDS [SAMPLES>=2]\n");
		return 2;
	}
	struct rdma_addrinfo h = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *pai;
	struct ibv_qp_init_attr a = { .cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1 },
				      .sq_sig_all = 1 };
	if (rdma_getaddrinfo(ADDR, CM_PORT, &h, &pai) || rdma_create_ep(&cm_listen, pai, NULL, &a) ||
	    rdma_listen(cm_listen, 16)) {
		perror("soak: cm listener");
		return 1;
	}
	rdma_freeaddrinfo(pai);
	h.ai_flags = 0;
	if (rdma_getaddrinfo(ADDR, CM_PORT, &h, &cm_ai)) {
		perror("soak: rdma_getaddrinfo");
		return 1;
	}
	struct sockaddr_in la = { .sin_family = AF_INET, .sin_port = htons(RS_PORT) };
	inet_pton(AF_INET, ADDR, &la.sin_addr);
	int one = 1;
	rs_listen_fd = rsocket(AF_INET, SOCK_STREAM, 0);
	if (rs_listen_fd < 0 || rsetsockopt(rs_listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    rbind(rs_listen_fd, (struct sockaddr *)&la, sizeof la) || rlisten(rs_listen_fd, 16)) {
		perror("soak: rsocket listener");
		return 1;
	}
	pthread_t ct, rt;
	pthread_create(&ct, NULL, cm_server, NULL);
	pthread_create(&rt, NULL, rs_server, NULL);

	printf("SOAK plan: %d s, %d samples, tolerance after the first sample: fds +0, threads +0, rss +%d kB\n",
	       secs, samples, RSS_TOL_KB);
	double t0 = now(), interval = (double)secs / samples;
	long cycles = 0, base_rss = 0;
	int base_fds = 0, base_thr = 0, grew = 0, last_fds = 0, last_thr = 0;
	for (int s = 1; s <= samples && !stop; s++) {
		while (!stop && now() - t0 < s * interval) {
			if (cm_cycle((unsigned)cycles) || rs_cycle((unsigned)cycles))
				break;
			cycles++;
			double tw = now();
			while ((__atomic_load_n(&cm_done, __ATOMIC_SEQ_CST) < cycles ||
				__atomic_load_n(&rs_done, __ATOMIC_SEQ_CST) < cycles) && now() - tw < 180)
				usleep(1000);
			if (now() - tw >= 180) {
				static char m[128];
				snprintf(m, sizeof m, "the server threads did not finish within 180 s (cm %ld, rsocket %ld of %ld)",
					 cm_done, rs_done, cycles);
				errno = 0;
				fail(m);
			}
			step("server teardown", cycles - 1, tw);
		}
		if (stop)
			break;
		int exiting, fds = proc_fds(), thr = proc_threads(&exiting);
		long rss = rss_kb();
		printf("SOAK t=%.0f cycles=%ld fds=%d rss_kb=%ld threads=%d", now() - t0, cycles, fds, rss, thr);
		if (exiting)
			printf(" (and %d exiting, not counted)", exiting);
		printf("\n");
		last_fds = fds, last_thr = thr;
		if (s == 1) {
			base_fds = fds, base_rss = rss, base_thr = thr;
			continue;
		}
		if (fds > base_fds)
			printf("SOAK above the baseline: fds %d -> %d\n", base_fds, fds);
		if (thr > base_thr)
			printf("SOAK above the baseline: threads %d -> %d\n", base_thr, thr);
		if (rss > base_rss + RSS_TOL_KB)
			printf("SOAK growth: rss %ld kB -> %ld kB (tolerance %d kB)\n", base_rss, rss, RSS_TOL_KB), grew = 1;
	}
	if (last_fds > base_fds)
		printf("SOAK growth: fds %d -> %d at the last sample\n", base_fds, last_fds), grew = 1;
	if (last_thr > base_thr)
		printf("SOAK growth: threads %d -> %d at the last sample\n", base_thr, last_thr), grew = 1;
	if (fail_msg[0]) {
		printf("SOAK cycle %ld failed: %s\n", cycles, fail_msg);
		fflush(stdout);
		_exit(1); /* the server threads may be blocked: do not wait for them */
	}
	printf("SOAK %s: %ld cycles in %.0f s\n", grew ? "FAIL (growth)" : "ok", cycles, now() - t0);
	fflush(stdout);
	_exit(grew);
}
