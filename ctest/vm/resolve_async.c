/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * rdma_resolve_addrinfo of names that a slow DNS server answers (vm/suite.d/resolve_addrinfo.sh
 * starts one on 127.0.0.1:53 that answers after 500 ms: A records 192.0.2.2 for any name,
 * NXDOMAIN for names starting with "nx-", and runs this program in a mount namespace whose
 * /etc/resolv.conf and /etc/nsswitch.conf point at it).
 *
 *   resolve_async all NAME NXNAME    every case below
 *   resolve_async destroy N NAME     destroy ids with a lookup in flight (also under ASan)
 *
 * stdout is the same for both libraries (compared, --cmp): return values, errnos, events and
 * results.  Timing goes to stderr, with the checks that differ by design:
 *  - upstream runs the lookup in the caller's thread: an asynchronous id's call blocks for the
 *    whole answer (recorded: "upstream: call blocked N ms"), and a failed lookup fails the call;
 *  - ours (RDMACM_VARIANT=ours, or ibv_gid_reachable present) must return from the call before
 *    the answer (under 100 ms; the server takes 500), with no event queued yet, the event arriving
 *    after the answer (>= 400 ms), and a failed lookup reported as ADDRINFO_ERROR with status
 *    ENOENT.
 * Both libraries: a synchronous id blocks until the answer (>= 400 ms); while the lookup runs,
 * rdma_query_addrinfo says ENOENT and a second rdma_resolve_addrinfo EBUSY (upstream: asked from
 * another thread during the blocking call); destroying ids with a lookup in flight leaves no
 * event behind (an id created afterwards on the same channel, which the kernel gives a freed
 * handle, gets none), no descriptor, and (ours) at most 4 lookup threads; a fork child resolves
 * names on its own while the parent's lookup is in flight; a signal sent to the process while
 * the program's thread blocks it stays pending for that thread (no lookup thread takes it).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include "common.h"
#include "procself.h"

static int ours, failures;
static const char *name, *nxname;

static const char *ename(int e)
{
	const char *n = e > 0 ? strerrorname_np(e) : NULL;
	static __thread char buf[32];

	if (n)
		return n;
	snprintf(buf, sizeof(buf), "%d", e);
	return buf;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void fail(const char *fmt, const char *what, double v)
{
	fprintf(stderr, "FAIL %s: ", what);
	fprintf(stderr, fmt, v);
	fprintf(stderr, "\n");
	failures++;
}

static void hints_for(struct rdma_addrinfo *h)
{
	memset(h, 0, sizeof(*h));
	h->ai_family = AF_INET;
	h->ai_port_space = RDMA_PS_TCP;
	h->ai_qp_type = IBV_QPT_RC;
}

static void query(struct rdma_cm_id *id, const char *what)
{
	struct rdma_addrinfo *res = NULL;
	int ret = rdma_query_addrinfo(id, &res);

	printf("%s: ret=%d", what, ret);
	if (ret)
		printf(" errno=%s", ename(errno));
	printf("\n");
	if (!ret) {
		show_ai_list(res);
		rdma_freeaddrinfo(res);
	}
}

/* The channel's next event within ms milliseconds: its type (and status), or -1. */
static int next_event(struct rdma_event_channel *ch, int ms, int *status)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int type;

	if (poll(&pfd, 1, ms) != 1)
		return -1;
	if (rdma_get_cm_event(ch, &ev))
		return -2;
	type = ev->event;
	*status = ev->status;
	rdma_ack_cm_event(ev);
	return type;
}

/* --- a second thread asks while the lookup runs ---------------------------------------- */
struct probe {
	struct rdma_cm_id *id;
	int q_ret, q_err, r_ret, r_err;
};

static void *probe_main(void *arg)
{
	struct probe *p = arg;
	struct rdma_addrinfo h, *res = NULL;

	usleep(150 * 1000);
	p->q_ret = rdma_query_addrinfo(p->id, &res);
	p->q_err = errno;
	if (!p->q_ret)
		rdma_freeaddrinfo(res);
	hints_for(&h);
	p->r_ret = rdma_resolve_addrinfo(p->id, "192.0.2.1", "7471", &h);
	p->r_err = errno;
	return NULL;
}

/* --- (a) asynchronous id, a name answered after 500 ms ----------------------------------- */
static void async_name(struct rdma_event_channel *ch)
{
	struct rdma_addrinfo h;
	struct rdma_cm_id *id;
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct probe pr = { 0 };
	pthread_t t;
	double t0, t1, t2;
	int ret, ev, st = 0, queued;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		printf("async: create_id: %s\n", ename(errno));
		failures++;
		return;
	}
	pr.id = id;
	hints_for(&h);
	pthread_create(&t, NULL, probe_main, &pr);
	t0 = now_ms();
	ret = rdma_resolve_addrinfo(id, name, "7471", &h);
	t1 = now_ms();
	queued = poll(&pfd, 1, 0);
	printf("async resolve of a name: ret=%d%s%s\n", ret, ret ? " errno=" : "", ret ? ename(errno) : "");
	fprintf(stderr, "async resolve: call returned after %.3f ms, event %squeued at return\n", t1 - t0, queued ? "" : "not ");
	if (ours && t1 - t0 >= 100)
		fail("call took %.1f ms (the answer takes 500)", "async resolve", t1 - t0);
	if (ours && queued)
		fail("event already queued when the call returned (%.0f)", "async resolve", 0);
	if (!ours)
		fprintf(stderr, "upstream: call blocked %.0f ms\n", t1 - t0);
	pthread_join(t, NULL);
	printf("  while the lookup runs: query ret=%d errno=%s, resolve again ret=%d errno=%s\n",
	       pr.q_ret, pr.q_ret ? ename(pr.q_err) : "-", pr.r_ret, pr.r_ret ? ename(pr.r_err) : "-");
	ev = next_event(ch, 10000, &st);
	t2 = now_ms();
	printf("  event %s status=%d\n", ev >= 0 ? rdma_event_str(ev) : "(none within 10 s)", st);
	fprintf(stderr, "async resolve: event after %.0f ms\n", t2 - t0);
	if (ours && t2 - t0 < 400)
		fail("event after %.0f ms, before the answer", "async resolve", t2 - t0);
	query(id, "  query");
	query(id, "  query again");
	rdma_destroy_id(id);
}

/* --- (a'') a signal sent to the process after a name lookup ----------------------------------- */
static volatile pid_t handled_on;

static void on_usr1(int sig)
{
	(void)sig;
	handled_on = gettid();
}

/* Ours has a lookup thread now (idle, kept 10 s), upstream none.  The program blocks SIGUSR1 in
 * its thread and sends it to the process: it must stay pending for the program (no thread of the
 * library takes it) and be handled in the program's thread once unblocked. */
static void signal_after_lookup(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigset_t usr1, old;
	struct timespec ts = { 0, 200 * 1000 * 1000 };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, &old);
	kill(getpid(), SIGUSR1);
	nanosleep(&ts, NULL);
	printf("signal to the process, blocked in the program's thread: %s\n",
	       handled_on ? "handled by another thread" : "pending");
	if (handled_on) {
		fprintf(stderr, "signal: handled in thread %d, not the program's\n", (int)handled_on);
		failures++;
	}
	handled_on = 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	printf("  after unblocking: %s\n", handled_on == gettid() ? "handled in the program's thread" :
	       handled_on ? "handled by another thread" : "not handled");
	signal(SIGUSR1, SIG_DFL);
}

/* --- (a') asynchronous id, a name the server says does not exist ---------------------------- */
static void async_nxname(struct rdma_event_channel *ch)
{
	struct rdma_addrinfo h;
	struct rdma_cm_id *id;
	int ret, err, ev = -1, st = 0;
	double t0;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		printf("async nx: create_id: %s\n", ename(errno));
		failures++;
		return;
	}
	hints_for(&h);
	errno = 0;
	t0 = now_ms();
	ret = rdma_resolve_addrinfo(id, nxname, "7471", &h);
	err = errno;
	/* the second lookup of the process: ours has a worker thread already */
	fprintf(stderr, "async unknown name: call returned after %.3f ms\n", now_ms() - t0);
	if (!ret)
		ev = next_event(ch, 10000, &st);
	/* upstream fails the call; ours reports ADDRINFO_ERROR */
	printf("async resolve of an unknown name: %s\n",
	       ret || ev == RDMA_CM_EVENT_ADDRINFO_ERROR ? "failed" : "did not fail");
	fprintf(stderr, "async unknown name: ret=%d errno=%d event=%s status=%d\n", ret, err,
		ev >= 0 ? rdma_event_str(ev) : "-", st);
	if (ours && (ret || ev != RDMA_CM_EVENT_ADDRINFO_ERROR || st != ENOENT))
		fail("ours: expected ret 0, then ADDRINFO_ERROR status ENOENT (ret %.0f)", "async unknown name", ret);
	query(id, "  query after the failure");
	hints_for(&h);
	h.ai_flags = RAI_NUMERICHOST;
	ret = rdma_resolve_addrinfo(id, "192.0.2.2", "7471", &h);
	printf("  resolve a literal after the failure: ret=%d%s%s\n", ret, ret ? " errno=" : "", ret ? ename(errno) : "");
	if (!ret) {
		ev = next_event(ch, 10000, &st);
		printf("  event %s status=%d\n", ev >= 0 ? rdma_event_str(ev) : "(none)", st);
		query(id, "  query");
	}
	rdma_destroy_id(id);
}

/* --- (c) synchronous id: blocks as before --------------------------------------------------- */
static void sync_name(void)
{
	struct rdma_addrinfo h;
	struct rdma_cm_id *sid;
	double t0, t1;
	int ret;

	if (rdma_create_id(NULL, &sid, NULL, RDMA_PS_TCP)) {
		printf("sync: create_id: %s\n", ename(errno));
		failures++;
		return;
	}
	hints_for(&h);
	t0 = now_ms();
	ret = rdma_resolve_addrinfo(sid, name, "7471", &h);
	t1 = now_ms();
	printf("sync resolve of a name: ret=%d%s%s\n", ret, ret ? " errno=" : "", ret ? ename(errno) : "");
	if (!ret && sid->event)
		printf("  parked event %s status=%d\n", rdma_event_str(sid->event->event), sid->event->status);
	fprintf(stderr, "sync resolve: call returned after %.0f ms\n", t1 - t0);
	if (t1 - t0 < 400)
		fail("call returned after %.0f ms, before the answer", "sync resolve", t1 - t0);
	query(sid, "  sync query");
	errno = 0;
	ret = rdma_resolve_addrinfo(sid, nxname, "7471", &h);
	printf("sync resolve of an unknown name: ret=%d\n", ret);
	fprintf(stderr, "sync unknown name: errno=%d\n", errno);
	if (ours && ret && errno != ENOENT)
		fail("errno %.0f, expected ENOENT", "sync unknown name", errno);
	query(sid, "  sync query after the failure");
	rdma_destroy_id(sid);
}

/* --- (b) destroy ids with a lookup in flight ----------------------------------------------- */
static int destroy_in_flight(int n)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id, *sentinel;
	struct rdma_addrinfo h;
	int fds0, fds1, thr_max = 0, ev, st = 0, bad = 0;

	if (!ch) {
		printf("destroy: channel: %s\n", ename(errno));
		return 1;
	}
	fds0 = proc_fds();
	hints_for(&h);
	for (int i = 0; i < n; i++) {
		int thr;

		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
			printf("destroy: create_id %d: %s\n", i, ename(errno));
			return 1;
		}
		if (rdma_resolve_addrinfo(id, name, "7471", &h))
			bad++;
		/* destroy before the lookup starts, while it runs, and after it ended */
		if (i % 3)
			usleep((i * 97 % 700) * 1000);
		if (rdma_destroy_id(id))
			bad++;
		thr = proc_threads(NULL);
		if (thr > thr_max)
			thr_max = thr;
	}
	/* A new id on the channel (the kernel hands out a freed handle): no lookup of a
	 * destroyed id may report to it, once every lookup has had the time to end. */
	if (rdma_create_id(ch, &sentinel, NULL, RDMA_PS_TCP)) {
		printf("destroy: sentinel: %s\n", ename(errno));
		return 1;
	}
	ev = next_event(ch, 2500, &st);
	rdma_destroy_id(sentinel);
	fds1 = proc_fds();
	printf("destroy %d ids with a lookup in flight: %s; event afterwards: %s; descriptors %s\n", n,
	       bad ? "calls failed" : "ok", ev == -1 ? "none" : rdma_event_str(ev),
	       fds1 == fds0 ? "unchanged" : "changed");
	fprintf(stderr, "destroy: fds %d -> %d, at most %d threads\n", fds0, fds1, thr_max);
	if (ours && thr_max > 1 + 4 + 1)
		fail("%.0f threads: more than 4 lookup threads", "destroy", thr_max);
	rdma_destroy_event_channel(ch);
	return bad || ev != -1 || fds1 != fds0;
}

/* --- fork: the child's lookups run on the child's own threads ------------------------------- */
static void fork_child(struct rdma_event_channel *ch)
{
	struct rdma_addrinfo h;
	struct rdma_cm_id *id;
	int ret, status = 0, ev, st = 0;
	pid_t pid;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		printf("fork: create_id: %s\n", ename(errno));
		failures++;
		return;
	}
	hints_for(&h);
	ret = rdma_resolve_addrinfo(id, name, "7471", &h);
	printf("fork: parent resolve before fork: ret=%d\n", ret);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct rdma_event_channel *cc;
		struct rdma_cm_id *cid;

		alarm(30);
		cc = rdma_create_event_channel();
		if (!cc || rdma_create_id(cc, &cid, NULL, RDMA_PS_TCP)) {
			printf("fork: child setup: %s\n", ename(errno));
			_exit(1);
		}
		ret = rdma_resolve_addrinfo(cid, name, "7471", &h);
		ev = next_event(cc, 10000, &st);
		printf("fork: child resolve: ret=%d event %s status=%d\n", ret,
		       ev >= 0 ? rdma_event_str(ev) : "(none within 10 s)", st);
		query(cid, "  child query");
		fflush(stdout);
		rdma_destroy_id(cid);
		rdma_destroy_event_channel(cc);
		_exit(ev == RDMA_CM_EVENT_ADDRINFO_RESOLVED ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	printf("fork: child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	ev = next_event(ch, 10000, &st);
	printf("fork: parent event %s status=%d\n", ev >= 0 ? rdma_event_str(ev) : "(none within 10 s)", st);
	query(id, "  parent query");
	rdma_destroy_id(id);
	if (status)
		failures++;
}

int main(int argc, char **argv)
{
	const char *v = getenv("RDMACM_VARIANT");
	const char *m = argc > 1 ? argv[1] : "";
	struct rdma_event_channel *ch;

	ours = v ? !strcmp(v, "ours") : dlsym(RTLD_DEFAULT, "ibv_gid_reachable") != NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(m, "destroy") && argc == 4) {
		name = argv[3];
		return destroy_in_flight(atoi(argv[2]));
	}
	if (strcmp(m, "all") || argc != 4) {
		fprintf(stderr, "usage: resolve_async all NAME NXNAME | destroy N NAME\n");
		return 2;
	}
	name = argv[2];
	nxname = argv[3];
	ch = rdma_create_event_channel();
	if (!ch) {
		printf("channel: %s\n", ename(errno));
		return 1;
	}
	async_name(ch);
	signal_after_lookup();
	async_nxname(ch);
	sync_name();
	failures += destroy_in_flight(10);
	fork_child(ch);
	rdma_destroy_event_channel(ch);
	fprintf(stderr, "resolve_async: %d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
