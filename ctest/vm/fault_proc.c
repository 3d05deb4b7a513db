/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * fault_proc - process-level faults: fork() with live ids, signals interrupting
 * rdma_get_cm_event and a synchronous rdma_resolve_addr (with and without SA_RESTART), and
 * RLIMIT_MEMLOCK too small (as an unprivileged user) for a QP and a memory registration.
 * Each scenario runs in its own child (fork, 60 s alarm: a hang is reported, not waited out) and
 * prints a transcript comparable between the two libraries (--cmp).
 *
 *   fault_proc [scenario...]
 *
 * Test bed addresses: rxe0 192.0.2.1 (root ns) <-> rxe1 192.0.2.2 (ns1); 192.0.2.99 has no
 * neighbour (address resolution runs until its timeout).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include "scenarios.h"
#include <rdma/rdma_verbs.h>
#include "common.h"

static struct sockaddr_in sa4(const char *ip, int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}
static struct sockaddr_in A1, A2, NOWHERE;
#define SA(x) ((struct sockaddr *)&(x))

static int wait_event(struct rdma_event_channel *c, const char *who)
{
	struct rdma_cm_event *e;
	if (rdma_get_cm_event(c, &e)) {
		printf("%s: get_cm_event: %s\n", who, en(errno));
		return -1;
	}
	printf("%s: event %s status %d\n", who, rdma_event_str(e->event), e->status);
	rdma_ack_cm_event(e);
	return 0;
}

/* ---- fork ---- */
static void fork_ids(void)
{
	struct rdma_event_channel *c = rdma_create_event_channel();
	struct rdma_cm_id *id, *sid;
	if (!c || rdma_create_id(c, &id, NULL, RDMA_PS_TCP) || rdma_create_id(NULL, &sid, NULL, RDMA_PS_UDP)) {
		printf("fork: setup: %s\n", en(errno));
		return;
	}
	printf("fork: parent bind before fork: %s\n", rdma_bind_addr(sid, SA(A1)) ? en(errno) : "ok");
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		alarm(30);
		struct rdma_event_channel *cc = rdma_create_event_channel();
		struct rdma_cm_id *cid;
		int r = !cc || rdma_create_id(cc, &cid, NULL, RDMA_PS_TCP);
		printf("fork: child creates its own channel and id: %s\n", r ? en(errno) : "ok");
		if (!r) {
			r = rdma_resolve_addr(cid, SA(A1), SA(A2), 2000);
			printf("fork: child resolve_addr: %s\n", r ? en(errno) : "ok");
			if (!r)
				wait_event(cc, "fork: child");
			rdma_destroy_id(cid);
			rdma_destroy_event_channel(cc);
		}
		fflush(stdout);
		_exit(0);
	}
	int st;
	waitpid(p, &st, 0);
	printf("fork: child exited %s\n", WIFEXITED(st) && !WEXITSTATUS(st) ? "cleanly" : "abnormally");
	int r = rdma_resolve_addr(id, SA(A1), SA(A2), 2000);
	printf("fork: parent resolve_addr after fork: %s\n", r ? en(errno) : "ok");
	if (!r && !wait_event(c, "fork: parent")) {
		r = rdma_resolve_route(id, 2000);
		printf("fork: parent resolve_route: %s\n", r ? en(errno) : "ok");
		if (!r)
			wait_event(c, "fork: parent");
	}
	printf("fork: parent destroy ids: %s\n", rdma_destroy_id(id) || rdma_destroy_id(sid) ? en(errno) : "ok");
	rdma_destroy_event_channel(c);
}

/* ---- signals ---- */
static volatile sig_atomic_t caught;
static void on_alarm(int s)
{
	(void)s;
	caught++;
}
static void handler(int restart)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = restart ? SA_RESTART : 0 };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
}
struct later {
	pthread_t main;
	int ms;
	struct rdma_cm_id *id; /* resolve this one after the signal, if set */
};
static void *signal_later(void *arg)
{
	struct later *l = arg;
	usleep(l->ms * 1000);
	pthread_kill(l->main, SIGUSR1);
	if (l->id) {
		usleep(300 * 1000);
		rdma_resolve_addr(l->id, SA(A1), SA(A2), 2000);
	}
	return NULL;
}
/* rdma_get_cm_event blocked on an empty channel, SIGUSR1 after 300 ms; with SA_RESTART an event
 * arrives 300 ms after the signal (an address resolution started by the helper thread) */
static void signal_event(int restart)
{
	const char *w = restart ? "signal_event_restart" : "signal_event_eintr";
	struct rdma_event_channel *c = rdma_create_event_channel();
	struct rdma_cm_id *id;
	if (!c || rdma_create_id(c, &id, NULL, RDMA_PS_TCP)) {
		printf("%s: setup: %s\n", w, en(errno));
		return;
	}
	handler(restart);
	struct later l = { pthread_self(), 300, restart ? id : NULL };
	pthread_t t;
	pthread_create(&t, NULL, signal_later, &l);
	struct rdma_cm_event *e;
	errno = 0;
	int r = rdma_get_cm_event(c, &e);
	printf("%s: get_cm_event ret=%d errno=%s signal caught=%d%s%s\n", w, r, r ? en(errno) : "0", caught,
	       r ? "" : " event=", r ? "" : rdma_event_str(e->event));
	if (!r)
		rdma_ack_cm_event(e);
	pthread_join(t, NULL);
	if (!restart) {
		/* the channel still works after the interruption */
		r = rdma_resolve_addr(id, SA(A1), SA(A2), 2000);
		printf("%s: resolve after the interruption: %s\n", w, r ? en(errno) : "ok");
		if (!r)
			wait_event(c, w);
	}
	rdma_destroy_id(id);
	rdma_destroy_event_channel(c);
}
static void signal_event_eintr(void) { signal_event(0); }
static void signal_event_restart(void) { signal_event(1); }
/* a synchronous resolve towards an address without a neighbour (runs until its 3 s timeout),
 * SIGUSR1 after 300 ms */
static void signal_resolve(int restart)
{
	const char *w = restart ? "signal_resolve_restart" : "signal_resolve_eintr";
	struct rdma_cm_id *id;
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP)) {
		printf("%s: setup: %s\n", w, en(errno));
		return;
	}
	handler(restart);
	struct later l = { pthread_self(), 300, NULL };
	pthread_t t;
	pthread_create(&t, NULL, signal_later, &l);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	errno = 0;
	int r = rdma_resolve_addr(id, SA(A1), SA(NOWHERE), 3000);
	int err = errno;
	clock_gettime(CLOCK_MONOTONIC, &b);
	long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	printf("%s: resolve_addr ret=%d errno=%s signal caught=%d returned %s\n", w, r, r ? en(err) : "0", caught,
	       ms < 2000 ? "early (before the resolution timeout)" : "after the resolution timeout");
	pthread_join(t, NULL);
	/* the id is still usable: a resolution that succeeds (after a possibly pending one ends) */
	for (int i = 0; i < 10; i++) {
		r = rdma_resolve_addr(id, SA(A1), SA(A2), 2000);
		if (!r || errno != EINVAL)
			break;
		usleep(500 * 1000);
	}
	printf("%s: resolve afterwards: %s\n", w, r ? en(errno) : "ok");
	rdma_destroy_id(id);
}
static void signal_resolve_eintr(void) { signal_resolve(0); }
static void signal_resolve_restart(void) { signal_resolve(1); }

/* ---- RLIMIT_MEMLOCK ---- */
static void memlock(void)
{
	struct rdma_cm_id *id;
	struct rlimit r = { 0, 0 };
	/* an unprivileged user (root's CAP_IPC_LOCK ignores the limit) with no lockable memory */
	if (setrlimit(RLIMIT_MEMLOCK, &r) || setgid(65534) || setuid(65534)) {
		printf("memlock: setup: %s\n", en(errno));
		return;
	}
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP)) {
		printf("memlock: create_id: %s\n", en(errno));
		return;
	}
	if (rdma_bind_addr(id, SA(A1))) {
		printf("memlock: bind: %s\n", en(errno));
		rdma_destroy_id(id);
		return;
	}
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1 } };
	int q = rdma_create_qp(id, pd, &a);
	printf("memlock: create_qp with RLIMIT_MEMLOCK 0: %s\n", q ? en(errno) : "ok");
	static char buf[1 << 16];
	struct ibv_mr *mr = rdma_reg_msgs(id, buf, sizeof buf);
	printf("memlock: rdma_reg_msgs 64 KiB: %s\n", mr ? "ok" : en(errno));
	if (mr)
		ibv_dereg_mr(mr);
	if (!q)
		rdma_destroy_qp(id);
	printf("memlock: destroy_id: %s\n", rdma_destroy_id(id) ? en(errno) : "ok");
	if (pd)
		ibv_dealloc_pd(pd);
}

/* ---- the basic calls, for runs with the kernel module unloaded (vm/suite.d/fault.sh) ---- */
static void basic(void)
{
	struct rdma_event_channel *c = rdma_create_event_channel();
	printf("basic: create_event_channel: %s\n", c ? "ok" : en(errno));
	struct rdma_cm_id *id;
	int r = rdma_create_id(c, &id, NULL, RDMA_PS_TCP);
	printf("basic: create_id: %s\n", r ? en(errno) : "ok");
	if (!r) {
		printf("basic: bind_addr: %s\n", rdma_bind_addr(id, SA(A1)) ? en(errno) : "ok");
		rdma_destroy_id(id);
	}
	int n = -1;
	struct ibv_context **l = rdma_get_devices(&n);
	printf("basic: get_devices: %s\n", l ? (n > 0 ? "some" : "none") : en(errno));
	if (l)
		rdma_free_devices(l);
	if (c)
		rdma_destroy_event_channel(c);
}

static const struct scenario scen[] = { { "basic", basic },
	     { "fork", fork_ids },
	     { "signal_event_eintr", signal_event_eintr },
	     { "signal_event_restart", signal_event_restart },
	     { "signal_resolve_eintr", signal_resolve_eintr },
	     { "signal_resolve_restart", signal_resolve_restart },
	     { "memlock", memlock } };

int main(int argc, char **argv)
{
	A1 = sa4("192.0.2.1", 0);
	A2 = sa4("192.0.2.2", 7471);
	NOWHERE = sa4("192.0.2.99", 7471);
	setvbuf(stdout, NULL, _IOLBF, 0);
	return run_scenarios(scen, sizeof scen / sizeof scen[0], argc, argv);
}
