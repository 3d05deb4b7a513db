/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * rsocket cases of `make bench`. vm/suite.d/bench.sh starts the listening
 * end in ns1 and the connecting end in the root namespace, both with the same library (upstream's
 * or ours), and takes the connecting end's number.
 *
 *   bench_rsocket pingpong listen|connect ADDR PORT THREADS ROUNDS SIZE
 *       THREADS streams, one thread per stream at each end. The connecting thread sends SIZE
 *       bytes, the listening end's thread sends the same bytes back, ROUNDS times per stream
 *       (after WARMUP untimed round trips; the timed part starts for all threads at once).
 *       Connecting end: "BENCH rs_pingpong<THREADS>_<SIZE>b_ns_per_rt <ns>": wall time over all
 *       round trips of all streams (1e9 / that = aggregate round trips per second).
 *       BENCH_RS_ECHO_DELAY_US=N in the listening end's environment: it waits N us before each
 *       echo, so that the connecting end is asleep in rrecv when the echo comes (the same path
 *       every round trip: the callgrind case counts instructions that way).
 *   bench_rsocket duplex listen|connect ADDR PORT MSGS SIZE
 *       One stream; at each end a sender thread sends MSGS messages of SIZE bytes while a
 *       receiver thread receives the peer's MSGS messages, both on the same rsocket at once
 *       (timed from starting the two threads to both done; the end of stream comes after).
 *       Connecting end: "BENCH rs_duplex_<SIZE/1024>k_us_per_mib <us>": wall time per MiB moved,
 *       both directions counted (1e6 / that = MiB/s).
 *
 * Nothing passes silently: every call is checked; a message or echo must come back with exactly
 * its byte count and content (ping-pong: the whole echo compared with what was sent; duplex:
 * each message's sequence number at its start, its end and at a place that moves with the
 * sequence number); after its last message each end must see end of stream (rrecv 0), not more
 * bytes. Any failure prints "BENCH <case> FAIL <reason>" (on the connecting end; the listening
 * end prints "bench_rsocket: ..." on stderr) and exits 1, and the driver checks both ends' exit
 * status. A watchdog thread ends the process the same way when no message has moved for 30 s,
 * naming how far each stream or thread got; the driver's timeout (exit 124) covers the rest
 * (connecting, the end of stream).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rsocket.h>

#define WARMUP 20
#define MAXTHREADS 64

static int listening;			/* this end accepts (ns1) */
static char case_name[96];
static atomic_int failed;

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* the first failure is reported (as the case's FAIL line on the connecting end); the process
 * then ends, so no thread waits on for a peer that will not answer */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	char why[256];
	va_list ap;
	char *p;

	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	if (atomic_exchange(&failed, 1) == 0) {
		if (listening) {
			fprintf(stderr, "bench_rsocket (listening end): %s FAIL %s\n", case_name, why);
		} else {
			/* the FAIL reason is one word for bench/run.sh */
			for (p = why; *p; p++)
				if (*p == ' ')
					*p = '_';
			printf("BENCH %s FAIL %s\n", case_name, why);
		}
		fflush(stdout);
		fflush(stderr);
	}
	_exit(1);
}

static const char *ename(int e)
{
	const char *s = strerrorname_np(e);

	return s ? s : "?";
}

/* exactly len bytes, or die */
static void send_all(int fd, const void *buf, size_t len, const char *what)
{
	size_t done = 0;
	ptrdiff_t n;

	while (done < len) {
		n = rsend(fd, (const char *)buf + done, len - done, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("%s: rsend %zu bytes returned %td (%s) after %zu", what, len - done, n,
			    n < 0 ? ename(errno) : "no error", done);
		if ((size_t)n > len - done)
			die("%s: rsend of %zu bytes reported %td", what, len - done, n);
		done += n;
	}
}

/* exactly len bytes, or die (end of stream before them included) */
static void recv_all(int fd, void *buf, size_t len, const char *what)
{
	size_t done = 0;
	ptrdiff_t n;

	while (done < len) {
		n = rrecv(fd, (char *)buf + done, len - done, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("%s: rrecv returned -1 (%s) after %zu of %zu bytes", what, ename(errno), done, len);
		if (n == 0)
			die("%s: end of stream after %zu of %zu bytes", what, done, len);
		if ((size_t)n > len - done)
			die("%s: rrecv of %zu bytes reported %td", what, len - done, n);
		done += n;
	}
}

/* after the last message: the peer's end of stream, and not one byte more */
static void expect_eof(int fd, const char *what)
{
	char c;
	ptrdiff_t n;

	do
		n = rrecv(fd, &c, 1, 0);
	while (n < 0 && errno == EINTR);
	if (n != 0)
		die("%s: after the last message rrecv returned %td (%s), not end of stream", what, n,
		    n < 0 ? ename(errno) : "extra bytes");
}

static struct sockaddr_in addr_of(const char *ip, const char *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	char *end;
	long p = strtol(port, &end, 10);

	if (*end || p <= 0 || p > 65535 || inet_pton(AF_INET, ip, &a.sin_addr) != 1)
		die("bad address %s port %s", ip, port);
	a.sin_port = htons(p);
	return a;
}

static int lfd = -1;			/* the listening end's listener */

static void listen_on(struct sockaddr_in *a, int backlog)
{
	int one = 1;

	lfd = rsocket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		die("rsocket: %s", ename(errno));
	if (rsetsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one))
		die("rsetsockopt SO_REUSEADDR: %s", ename(errno));
	if (rbind(lfd, (struct sockaddr *)a, sizeof *a))
		die("rbind: %s", ename(errno));
	if (rlisten(lfd, backlog))
		die("rlisten: %s", ename(errno));
}

static int accept_one(void)
{
	int fd = raccept(lfd, NULL, NULL);

	if (fd < 0)
		die("raccept: %s", ename(errno));
	return fd;
}

static int connect_to(struct sockaddr_in *a)
{
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		die("rsocket: %s", ename(errno));
	if (rconnect(fd, (struct sockaddr *)a, sizeof *a))
		die("rconnect: %s", ename(errno));
	return fd;
}

static void close_stream(int fd, const char *what)
{
	if (rclose(fd))
		die("%s: rclose: %s", what, ename(errno));
}

/* ---- where the time went: this process's CPU and switches, and the whole VM's CPU ---- */

struct usage {
	struct rusage ru;
	unsigned long long cpu[8];	/* /proc/stat "cpu": user nice system idle iowait irq softirq steal */
};

static void usage_now(struct usage *u)
{
	FILE *f = fopen("/proc/stat", "r");

	memset(u, 0, sizeof *u);
	getrusage(RUSAGE_SELF, &u->ru);
	if (f) {
		if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &u->cpu[0], &u->cpu[1], &u->cpu[2],
			   &u->cpu[3], &u->cpu[4], &u->cpu[5], &u->cpu[6], &u->cpu[7]) != 8)
			memset(u->cpu, 0, sizeof u->cpu);
		fclose(f);
	}
}

static double tv_us(struct timeval a, struct timeval b)
{
	return (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_usec - a.tv_usec);
}

/* a comment line per end: per round trip (or message), this process's user and system CPU and
 * its voluntary and involuntary switches; at the connecting end also the VM's CPU shares over
 * the timed part (both ends run in it) */
static void usage_report(const char *end, const struct usage *a, const struct usage *b, double n)
{
	unsigned long long d[8], tot = 0;
	int i;

	printf("# %s %s end per unit: user %.1f us, sys %.1f us, vcsw %.2f, ivcsw %.2f\n", case_name, end,
	       tv_us(a->ru.ru_utime, b->ru.ru_utime) / n, tv_us(a->ru.ru_stime, b->ru.ru_stime) / n,
	       (b->ru.ru_nvcsw - a->ru.ru_nvcsw) / n, (b->ru.ru_nivcsw - a->ru.ru_nivcsw) / n);
	for (i = 0; i < 8; i++)
		tot += d[i] = b->cpu[i] - a->cpu[i];
	if (tot && !listening)
		printf("# %s VM cpu: user %.0f%% system %.0f%% idle %.0f%% irq %.0f%% softirq %.0f%%\n", case_name,
		       100.0 * (d[0] + d[1]) / tot, 100.0 * d[2] / tot, 100.0 * (d[3] + d[4]) / tot, 100.0 * d[5] / tot,
		       100.0 * d[6] / tot);
	fflush(stdout);
}

/* ---- the watchdog: a stream that stops moving is reported with where each thread stood ---- */

#define STALL_S 30
static atomic_long prog[MAXTHREADS];	/* pingpong: round trips per stream; duplex: [0] sent, [1] received */
static int nprog;
static atomic_int done_moving;

static void *watchdog(void *arg)
{
	long last = -1, sum;
	int i, still = 0;
	char where[512];
	size_t n;

	(void)arg;
	while (!atomic_load(&done_moving)) {
		sleep(1);
		for (sum = 0, i = 0; i < nprog; i++)
			sum += atomic_load(&prog[i]);
		still = sum == last ? still + 1 : 0;
		last = sum;
		if (still >= STALL_S && !atomic_load(&done_moving)) {
			for (n = 0, i = 0; i < nprog && n < sizeof where - 24; i++)
				n += snprintf(where + n, sizeof where - n, "%s%ld", i ? "," : "", atomic_load(&prog[i]));
			die("no progress for %d s; %s %s", STALL_S,
			    nprog == 2 ? "messages sent,received:" : "round trips per stream:", where);
		}
	}
	return NULL;
}

static void start_watchdog(int n)
{
	pthread_t th;
	int e;

	nprog = n;
	if ((e = pthread_create(&th, NULL, watchdog, NULL)))
		die("pthread_create: %s", ename(e));
	pthread_detach(th);
}

/* ---- pingpong ---- */

static pthread_barrier_t start, stop;
static long rounds;
static size_t size;
static long echo_delay_us;	/* BENCH_RS_ECHO_DELAY_US, listening end */

struct pp {
	int fd, idx;
	pthread_t th;
};

/* the connecting end's message for a round: stream, round and byte position in every byte */
static void fill(unsigned char *b, size_t len, int idx, long round)
{
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = (unsigned char)(idx * 31 + round * 7 + i);
}

/* one round trip; not inlined: make bench counts its instructions under callgrind
 * (--toggle-collect=pp_round) */
__attribute__((noinline)) void pp_round(struct pp *p, unsigned char *out, unsigned char *in, long r);
__attribute__((noinline)) void pp_round(struct pp *p, unsigned char *out, unsigned char *in, long r)
{
	if (listening) {
		recv_all(p->fd, in, size, "pingpong receive");
		if (echo_delay_us)
			usleep(echo_delay_us);
		send_all(p->fd, in, size, "pingpong echo");
	} else {
		fill(out, size, p->idx, r);
		send_all(p->fd, out, size, "pingpong send");
		recv_all(p->fd, in, size, "pingpong receive echo");
		if (memcmp(out, in, size))
			die("stream %d round %ld: the echo differs from what was sent", p->idx, r);
	}
}

static void *pp_thread(void *arg)
{
	struct pp *p = arg;
	unsigned char *out = malloc(size), *in = malloc(size);
	long r;

	if (!out || !in)
		die("malloc");
	for (r = 0; r < WARMUP; r++) {
		pp_round(p, out, in, -1 - r);
		atomic_fetch_add(&prog[p->idx], 1);
	}
	pthread_barrier_wait(&start);
	for (r = 0; r < rounds; r++) {
		pp_round(p, out, in, r);
		atomic_fetch_add(&prog[p->idx], 1);
	}
	pthread_barrier_wait(&stop);
	if (listening) {
		expect_eof(p->fd, "pingpong");
	} else {
		/* our end first: the peer then sees end of stream */
		if (rshutdown(p->fd, SHUT_WR))
			die("rshutdown: %s", ename(errno));
		expect_eof(p->fd, "pingpong");
	}
	close_stream(p->fd, "pingpong");
	free(out);
	free(in);
	return NULL;
}

static int pingpong(struct sockaddr_in *a, int threads)
{
	struct pp *pp = calloc(threads, sizeof *pp);
	struct usage u0, u1;
	double t0, t1;
	int i, e;

	if (!pp)
		die("calloc");
	if (pthread_barrier_init(&start, NULL, threads + 1) || pthread_barrier_init(&stop, NULL, threads + 1))
		die("pthread_barrier_init");
	/* every stream connected before any round trip */
	if (listening)
		listen_on(a, threads);
	for (i = 0; i < threads; i++) {
		pp[i].idx = i;
		pp[i].fd = listening ? accept_one() : connect_to(a);
	}
	start_watchdog(threads);
	for (i = 0; i < threads; i++)
		if ((e = pthread_create(&pp[i].th, NULL, pp_thread, &pp[i])))
			die("pthread_create: %s", ename(e));
	pthread_barrier_wait(&start);
	usage_now(&u0);
	t0 = now_ns();
	pthread_barrier_wait(&stop);
	t1 = now_ns();
	usage_now(&u1);
	usage_report(listening ? "listening" : "connecting", &u0, &u1, (double)threads * rounds);
	atomic_store(&done_moving, 1);
	for (i = 0; i < threads; i++)
		pthread_join(pp[i].th, NULL);
	if (listening) {
		close_stream(lfd, "listener");
	} else {
		double n = (double)threads * rounds;

		printf("# %s: %d streams x %ld round trips of %zu bytes in %.0f ms: %.0f round trips/s in all\n",
		       case_name, threads, rounds, size, (t1 - t0) / 1e6, n / ((t1 - t0) / 1e9));
		printf("BENCH %s %.0f ns/rt\n", case_name, (t1 - t0) / n);
	}
	free(pp);
	return 0;
}

/* ---- duplex ---- */

static int dfd;
static long msgs;

/* a message carries its sequence number (from this end's direction) at its start, at its end and
 * at a place that moves with it; the receiver checks the three */
static uint64_t tag(long seq, int from_listener)
{
	return ((uint64_t)seq << 1 | (uint64_t)from_listener) * 0x9e3779b97f4a7c15ull;
}
static size_t mid(long seq)
{
	return (8 + (size_t)seq * 520) % (size - 16) / 8 * 8 + 8;
}

static void *dx_sender(void *arg)
{
	unsigned char *b = calloc(1, size);
	long s;
	uint64_t t;

	(void)arg;
	if (!b)
		die("calloc");
	for (s = 0; s < msgs; s++) {
		t = tag(s, listening);
		memset(b + mid(s - 1 < 0 ? 0 : s - 1), 0, 8);
		memcpy(b, &t, 8);
		memcpy(b + mid(s), &t, 8);
		memcpy(b + size - 8, &t, 8);
		send_all(dfd, b, size, "duplex send");
		atomic_fetch_add(&prog[0], 1);
	}
	free(b);
	return NULL;
}

static void *dx_receiver(void *arg)
{
	unsigned char *b = malloc(size);
	long s;
	uint64_t want, a, m, z;

	(void)arg;
	if (!b)
		die("malloc");
	for (s = 0; s < msgs; s++) {
		recv_all(dfd, b, size, "duplex receive");
		want = tag(s, !listening);
		memcpy(&a, b, 8);
		memcpy(&m, b + mid(s), 8);
		memcpy(&z, b + size - 8, 8);
		if (a != want || m != want || z != want)
			die("duplex: message %ld arrived with the wrong content (start %s, middle %s, end %s)", s,
			    a == want ? "ok" : "bad", m == want ? "ok" : "bad", z == want ? "ok" : "bad");
		atomic_fetch_add(&prog[1], 1);
	}
	free(b);
	return NULL;
}

static int duplex(struct sockaddr_in *a)
{
	pthread_t snd, rcv;
	struct usage u0, u1;
	double t0, t1;
	int e;

	if (size < 64 || size % 8)
		die("duplex: SIZE must be a multiple of 8, at least 64");
	if (listening) {
		listen_on(a, 1);
		dfd = accept_one();
	} else {
		dfd = connect_to(a);
	}
	start_watchdog(2);
	usage_now(&u0);
	t0 = now_ns();
	if ((e = pthread_create(&rcv, NULL, dx_receiver, NULL)) || (e = pthread_create(&snd, NULL, dx_sender, NULL)))
		die("pthread_create: %s", ename(e));
	pthread_join(snd, NULL);
	pthread_join(rcv, NULL);
	t1 = now_ns();
	usage_now(&u1);
	/* per message sent (and one received) */
	usage_report(listening ? "listening" : "connecting", &u0, &u1, (double)msgs);
	atomic_store(&done_moving, 1);
	/* the end of stream after both threads are done (one thread per socket again) */
	if (rshutdown(dfd, SHUT_WR))
		die("duplex: rshutdown(SHUT_WR): %s", ename(errno));
	expect_eof(dfd, "duplex");
	close_stream(dfd, "duplex");
	if (listening) {
		close_stream(lfd, "listener");
	} else {
		double mib = 2.0 * msgs * size / 1048576.0;

		printf("# %s: %ld messages of %zu bytes each way at once in %.0f ms: %.1f MiB/s both directions\n",
		       case_name, msgs, size, (t1 - t0) / 1e6, mib / ((t1 - t0) / 1e9));
		printf("BENCH %s %.1f us/MiB\n", case_name, (t1 - t0) / 1e3 / mib);
	}
	return 0;
}

static long num(const char *s, long lo, long hi)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || v < lo || v > hi)
		die("bad number %s (%ld..%ld)", s, lo, hi);
	return v;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 3)
		listening = !strcmp(argv[2], "listen");
	if (argc == 8 && !strcmp(argv[1], "pingpong") && (listening || !strcmp(argv[2], "connect"))) {
		int threads;

		threads = num(argv[5], 1, MAXTHREADS);
		snprintf(case_name, sizeof case_name, "rs_pingpong%d_%sb_ns_per_rt", threads, argv[7]);
		rounds = num(argv[6], 1, 100000000);
		size = num(argv[7], 1, 1 << 20);
		if (listening && getenv("BENCH_RS_ECHO_DELAY_US"))
			echo_delay_us = num(getenv("BENCH_RS_ECHO_DELAY_US"), 0, 1000000);
		a = addr_of(argv[3], argv[4]);
		return pingpong(&a, threads);
	}
	if (argc == 7 && !strcmp(argv[1], "duplex") && (listening || !strcmp(argv[2], "connect"))) {
		size = num(argv[6], 64, 1 << 24);
		snprintf(case_name, sizeof case_name, "rs_duplex_%zuk_us_per_mib", size / 1024);
		msgs = num(argv[5], 1, 100000000);
		a = addr_of(argv[3], argv[4]);
		return duplex(&a);
	}
	fprintf(stderr, "usage: bench_rsocket pingpong listen|connect ADDR PORT THREADS ROUNDS SIZE\n"
			"       bench_rsocket duplex listen|connect ADDR PORT MSGS SIZE\n");
	return 2;
}
