/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * Timing cases of `make bench` (vm/suite.d/bench.sh runs this once per case, alternately
 * with upstream's librdmacm and ours; bench/run.sh turns the rounds into ratios).
 *
 *   bench_resolve gai NAME NODE SERVICE FLAGS FAMILY CALLS   rdma_getaddrinfo + free, ns/call
 *   bench_resolve first                                      the first rdma_getaddrinfo of
 *                                                            this process (numeric IPv4), ns;
 *                                                            its minor and major page faults
 *                                                            as a comment line
 *   bench_resolve ids N DST                                  N synchronous ids: create +
 *                                                            resolve_addr + destroy, ns/id;
 *                                                            then N alive at once: RSS kB/1000 ids
 *                                                            and malloc'ed bytes per id (glibc
 *                                                            mallinfo2: exact, where RSS moves
 *                                                            by pages)
 *   bench_resolve threads T N DST                            the same loop from T threads
 *                                                            (N ids in all), ns/id (wall)
 *   bench_resolve dns NODE DST_SERVICE [PREP]                rdma_resolve_addrinfo of a name:
 *                                                            us until the call returns and
 *                                                            until the event arrives
 *
 * Output: one line per number, "BENCH <case> <value> <unit>"; a case that cannot produce its
 * number prints "BENCH <case> FAIL <reason>" and the program exits 1.  A timing case runs its
 * loop REPS times and reports the median repetition.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netdb.h>
#include <poll.h>
#include <arpa/inet.h>
#include <sys/resource.h>
#include <malloc.h>
#include <rdma/rdma_cma.h>

#ifndef AF_IB
#define AF_IB 27
#endif
#define REPS 5

static int failed;

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static const char *ename(int e)
{
	const char *s = strerrorname_np(e);

	return s ? s : "?";
}

static void fail(const char *name, const char *why)
{
	printf("BENCH %s FAIL %s\n", name, why);
	fflush(stdout);
	failed = 1;
}

static void result(const char *name, double v, const char *unit)
{
	/* a difference that rounds to zero prints as 0, not "-0" */
	if (v < 0 && v > -0.5)
		v = 0;
	printf("BENCH %s %.0f %s\n", name, v, unit);
	fflush(stdout);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *r, int n)
{
	qsort(r, n, sizeof(r[0]), cmp_double);
	return r[n / 2];
}

/* --- rdma_getaddrinfo ------------------------------------------------------------------ */
struct gai_case {
	const char *node, *service;
	int flags, family;
};

static int gai_once(const struct gai_case *c)
{
	struct rdma_addrinfo hints, *res = NULL;
	int ret;

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = c->flags;
	hints.ai_family = c->family;
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_qp_type = IBV_QPT_RC;
	ret = rdma_getaddrinfo(c->node, c->service, &hints, &res);
	if (ret) {
		if (ret != -1 || !errno)
			errno = EHOSTUNREACH;
		return -1;
	}
	if (!res || (!res->ai_dst_addr && !res->ai_src_addr)) {
		errno = ENODATA;
		return -1;
	}
	rdma_freeaddrinfo(res);
	return 0;
}

static int flags_of(const char *s)
{
	int f = 0;

	if (strstr(s, "numeric"))
		f |= RAI_NUMERICHOST;
	if (strstr(s, "passive"))
		f |= RAI_PASSIVE;
	if (strstr(s, "family"))
		f |= RAI_FAMILY;
	return f;
}

static int family_of(const char *s)
{
	return !strcmp(s, "inet") ? AF_INET : !strcmp(s, "inet6") ? AF_INET6 :
	       !strcmp(s, "ib") ? AF_IB : 0;
}

static void bench_gai(char **a)
{
	struct gai_case c = { strcmp(a[1], "-") ? a[1] : NULL, a[2], flags_of(a[3]), family_of(a[4]) };
	int n = atoi(a[5]);
	double r[REPS];

	if (gai_once(&c)) {
		fail(a[0], ename(errno));
		return;
	}
	for (int k = 0; k < REPS; k++) {
		double t0 = now_ns();

		for (int i = 0; i < n; i++)
			if (gai_once(&c)) {
				fail(a[0], ename(errno));
				return;
			}
		r[k] = (now_ns() - t0) / n;
	}
	result(a[0], median(r, REPS), "ns/call");
}

static void bench_first(void)
{
	struct gai_case c = { "192.0.2.2", "7471", RAI_NUMERICHOST, AF_INET };
	struct rusage r0, r1;
	double t0, t1;

	getrusage(RUSAGE_SELF, &r0);
	t0 = now_ns();
	if (gai_once(&c)) {
		fail("gai_first_call", ename(errno));
		return;
	}
	t1 = now_ns();
	getrusage(RUSAGE_SELF, &r1);
	/* the page faults the call took (library text and data touched for the first time) */
	printf("# gai_first_call minflt %ld majflt %ld\n", r1.ru_minflt - r0.ru_minflt, r1.ru_majflt - r0.ru_majflt);
	result("gai_first_call", t1 - t0, "ns");
}

/* --- synchronous ids ------------------------------------------------------------------- */
static struct sockaddr_in dst;

static int id_open(struct rdma_cm_id **id)
{
	if (rdma_create_id(NULL, id, NULL, RDMA_PS_TCP))
		return -1;
	if (rdma_resolve_addr(*id, NULL, (struct sockaddr *)&dst, 2000)) {
		int e = errno;

		rdma_destroy_id(*id);
		errno = e;
		return -1;
	}
	return 0;
}

static int id_cycle(void)
{
	struct rdma_cm_id *id;

	if (id_open(&id))
		return -1;
	return rdma_destroy_id(id);
}

static long rss_kb(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &res) != 2)
		res = -1;
	fclose(f);
	return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void set_dst(const char *ip)
{
	memset(&dst, 0, sizeof(dst));
	dst.sin_family = AF_INET;
	inet_pton(AF_INET, ip, &dst.sin_addr);
}

static void raise_nofile(int n)
{
	struct rlimit rl = { n + 1024, n + 1024 };

	/* upstream opens one ucma file per synchronous id */
	if (setrlimit(RLIMIT_NOFILE, &rl))
		perror("setrlimit");
}

static void bench_ids(int n, const char *ip)
{
	struct rdma_cm_id **ids = calloc(n, sizeof(*ids));
	double t0;
	long r0, r1;
	size_t h0, h1;
	int i;

	set_dst(ip);
	raise_nofile(n);
	if (!ids || id_cycle()) {    /* warm-up: devices opened, first-use costs paid */
		fail("ids_sync_ns_per_id", ename(errno));
		fail("ids_rss_kb_per_1000", ename(errno));
		return;
	}
	t0 = now_ns();
	for (i = 0; i < n; i++)
		if (id_cycle()) {
			fail("ids_sync_ns_per_id", ename(errno));
			break;
		}
	if (i == n)
		result("ids_sync_ns_per_id", (now_ns() - t0) / n, "ns/id");
	r0 = rss_kb();
	h0 = mallinfo2().uordblks;
	for (i = 0; i < n; i++)
		if (id_open(&ids[i])) {
			char why[64];

			snprintf(why, sizeof(why), "%s_after_%d_ids", ename(errno), i);
			fail("ids_rss_kb_per_1000", why);
			break;
		}
	r1 = rss_kb();
	h1 = mallinfo2().uordblks;
	if (i == n) {
		result("ids_rss_kb_per_1000", (double)(r1 - r0) * 1000 / n, "kB/1000ids");
		result("ids_heap_bytes_per_id", ((double)h1 - (double)h0) / n, "B/id");
	}
	while (i-- > 0)
		rdma_destroy_id(ids[i]);
	free(ids);
}

struct thr {
	pthread_t t;
	int n, err;
};

static void *thr_main(void *arg)
{
	struct thr *t = arg;

	for (int i = 0; i < t->n; i++)
		if (id_cycle()) {
			t->err = errno ? errno : EIO;
			break;
		}
	return NULL;
}

static void bench_threads(int nt, int n, const char *ip)
{
	struct thr th[64];
	char name[64];
	double t0;
	int err = 0;

	snprintf(name, sizeof(name), "ids_threads_%d_ns_per_id", nt);
	set_dst(ip);
	raise_nofile(n);
	if (nt < 1 || nt > 64 || id_cycle()) {
		fail(name, nt < 1 || nt > 64 ? "bad_thread_count" : ename(errno));
		return;
	}
	t0 = now_ns();
	for (int i = 0; i < nt; i++) {
		th[i].n = n / nt;
		th[i].err = 0;
		if (pthread_create(&th[i].t, NULL, thr_main, &th[i])) {
			fail(name, "pthread_create");
			exit(1);
		}
	}
	for (int i = 0; i < nt; i++) {
		pthread_join(th[i].t, NULL);
		if (th[i].err)
			err = th[i].err;
	}
	if (err)
		fail(name, ename(err));
	else
		result(name, (now_ns() - t0) / (n / nt * nt), "ns/id");
}

/* --- rdma_resolve_addrinfo against a slow DNS server ------------------------------------ */
static void *no_op(void *arg)
{
	return arg;
}

/* What the process has done before the timed call (bench/ab.sh's dns cases): "thread" started
 * and joined a thread, "libc" asked libc's getaddrinfo for the node as a literal, "resolve" made
 * the same call on another id (whose event it took). */
static void dns_prep(const char *prep, struct rdma_event_channel *ch, const char *node, const char *service,
		     struct rdma_addrinfo *hints)
{
	if (!strcmp(prep, "thread")) {
		pthread_t t;

		if (!pthread_create(&t, NULL, no_op, NULL))
			pthread_join(t, NULL);
	} else if (!strcmp(prep, "libc")) {
		struct addrinfo h = { .ai_flags = AI_NUMERICHOST }, *res;

		if (!getaddrinfo(node, NULL, &h, &res))
			freeaddrinfo(res);
	} else if (!strcmp(prep, "resolve")) {
		struct rdma_cm_event *ev;
		struct rdma_cm_id *id;

		if (!rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
			if (!rdma_resolve_addrinfo(id, node, service, hints) && !rdma_get_cm_event(ch, &ev))
				rdma_ack_cm_event(ev);
			rdma_destroy_id(id);
		}
	}
}

static void bench_dns(const char *node, const char *service, const char *prep)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_addrinfo hints;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct pollfd pfd;
	double t0, t1, t2;
	int ret;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		fail("dns_call_returns_us", ename(errno));
		fail("dns_event_arrives_us", ename(errno));
		return;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_qp_type = IBV_QPT_RC;
	if (prep)
		dns_prep(prep, ch, node, service, &hints);
	t0 = now_ns();
	ret = rdma_resolve_addrinfo(id, node, service, &hints);
	t1 = now_ns();
	if (ret) {
		fail("dns_call_returns_us", ename(errno));
		fail("dns_event_arrives_us", "no_call");
		return;
	}
	result("dns_call_returns_us", (t1 - t0) / 1000, "us");
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 10000) != 1) {
		fail("dns_event_arrives_us", "no_event_within_10s");
		return;
	}
	ret = rdma_get_cm_event(ch, &ev);
	t2 = now_ns();
	if (ret) {
		fail("dns_event_arrives_us", ename(errno));
		return;
	}
	if (ev->event != RDMA_CM_EVENT_ADDRINFO_RESOLVED) {
		char why[80];

		snprintf(why, sizeof(why), "event_%s_status_%d", rdma_event_str(ev->event), ev->status);
		for (char *p = why; *p; p++)
			if (*p == ' ')
				*p = '_';
		fail("dns_event_arrives_us", why);
	} else {
		result("dns_event_arrives_us", (t2 - t0) / 1000, "us");
	}
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";

	if (!strcmp(m, "gai") && argc == 8)
		bench_gai(argv + 2);
	else if (!strcmp(m, "first"))
		bench_first();
	else if (!strcmp(m, "ids") && argc == 4)
		bench_ids(atoi(argv[2]), argv[3]);
	else if (!strcmp(m, "threads") && argc == 5)
		bench_threads(atoi(argv[2]), atoi(argv[3]), argv[4]);
	else if (!strcmp(m, "dns") && (argc == 4 || argc == 5))
		bench_dns(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
	else {
		fprintf(stderr, "usage: see the comment at the top of ctest/vm/bench_resolve.c\n");
		return 2;
	}
	return failed;
}
