/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * stress_rsocket - rsocket streams shut down and closed while other threads
 * read and poll them.
 *
 * Both ends of every stream live in this one process over rxe0 (192.0.2.1,
 * loopback).  RUNNERS threads (each with its own listener) loop for a
 * bounded time over rounds; a round connects a pair (a = accepted end,
 * b = connecting end) and runs one mode (-M N: only mode N, numbered as listed):
 *   0 plain       rshutdown(a, SHUT_RDWR), rshutdown(b, SHUT_RDWR), rclose both
 *                 (both ends shut down in one process, one thread)
 *   1 local-read  2 readers blocked in rrecv(a) while the runner calls
 *                 rshutdown(a, SHUT_RDWR); both must return (EOF or error);
 *                 then rclose(a), rclose(b)
 *   2 local-poll  the same with a poller in rpoll(a, POLLIN, 1000 ms) loops:
 *                 it must report an event
 *   3 peer-read   2 readers blocked in rrecv(a) while the runner rcloses b
 *   4 peer-poll   a poller on a while the runner rcloses b
 *   5 data        a writer sends 256 kB on b while 2 readers drain a; then
 *                 rshutdown(b, SHUT_WR) (readers see EOF), the byte count must
 *                 match; then rshutdown(a, SHUT_RDWR), rshutdown(b, SHUT_RDWR)
 *                 (both ends in one process), rclose both
 *   6 local-crowd (-X) 2 readers and 2 pollers on a, rshutdown(a, SHUT_RDWR)
 *   7 peer-crowd  (-X) 2 readers and 2 pollers on a, rclose(b)
 *                 (upstream's library hangs here: several threads waiting on
 *                 one rsocket's CQ channel, one stays in ibv_get_cq_event)
 *   8 closerace   (-C) a reader blocked in rrecv(a); the runner calls
 *                 rshutdown(a, SHUT_RDWR) and at once rclose(a) while the
 *                 reader is still on its way out (not legal for upstream's
 *                 library, which frees the socket under the reader)
 * Every call is watched: one that does not return within 30 s (-b),
 * or a run not over after the time bound plus a margin, ends the process
 * with a message naming the stuck operation (exit 3).
 *
 * On a hang the watchdog also has every stuck thread print its stack
 * (backtrace_symbols_fd; symbolize our library's frames with addr2line).
 *
 * stdout is deterministic ("runners=2 modes=6 ok"), counts go to stderr.
 *
 *   stress_rsocket [-r runners] [-s seconds] [-p port] [-a addr] [-X] [-C] [-M mode]
 *                  [-m margin] [-b call-bound]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rsocket.h>
#include "common.h"

#define MAXSLOT 64
#define DATA_BYTES (256 * 1024)

static int op_bound = 30, runners = 2, seconds = 20, margin = 60, port, crowd, closerace, only_mode = -1;
static const char *addr = "192.0.2.1";
static atomic_int failed, hung;
static struct timespec t0;

enum { PLAIN, LOCAL, PEER, DATA, CLOSERACE };
static const struct mode {
	const char *name;
	int action, readers, pollers, extra;
} modes[] = {
	{ "plain", PLAIN, 0, 0, 0 },
	{ "local-read", LOCAL, 2, 0, 0 },
	{ "local-poll", LOCAL, 0, 1, 0 },
	{ "peer-read", PEER, 2, 0, 0 },
	{ "peer-poll", PEER, 0, 1, 0 },
	{ "data", DATA, 0, 0, 0 },
	/* -X: several waiters of different kinds on one socket (upstream hangs, see the report) */
	{ "local-crowd", LOCAL, 2, 2, 'X' },
	{ "peer-crowd", PEER, 2, 2, 'X' },
	/* -C: rclose racing the woken reader (upstream frees the socket under it) */
	{ "closerace", CLOSERACE, 1, 0, 'C' },
};
#define NALL ((int)(sizeof modes / sizeof modes[0]))
static int enabled[NALL], nenabled;

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L;
}

/* ---- watched operations ------------------------------------------------- */

struct slot {
	atomic_int used;
	char who[64];
	const char *_Atomic op;	/* NULL: not in a call */
	atomic_long since;
	pthread_t th;
};
static struct slot slots[MAXSLOT];

static struct slot *slot_get(const char *fmt, ...)
{
	va_list ap;

	for (int i = 0; i < MAXSLOT; i++) {
		int z = 0;

		if (atomic_compare_exchange_strong(&slots[i].used, &z, 1)) {
			va_start(ap, fmt);
			vsnprintf(slots[i].who, sizeof slots[i].who, fmt, ap);
			va_end(ap);
			slots[i].op = NULL;
			slots[i].th = pthread_self();
			return &slots[i];
		}
	}
	fprintf(stderr, "out of slots\n");
	_exit(2);
}

static void slot_put(struct slot *s)
{
	s->op = NULL;
	s->used = 0;
}

static void enter(struct slot *s, const char *op)
{
	s->since = now_ms();
	s->op = op;
}

static void leave(struct slot *s)
{
	s->op = NULL;
}

static void fail(struct slot *s, const char *fmt, ...)
{
	va_list ap;

	if (hung) {
		failed = 1;
		return;
	}
	va_start(ap, fmt);
	vreport(now_ms() / 1000.0, s ? s->who : "main", fmt, ap);
	va_end(ap);
	failed = 1;
}


static void *watchdog(void *arg)
{
	(void)arg;
	for (;;) {
		long t = now_ms();
		int stuck = t > (seconds + margin) * 1000L;

		for (int i = 0; i < MAXSLOT && !stuck; i++)
			if (slots[i].used && slots[i].op && t - slots[i].since > op_bound * 1000L)
				stuck = 1;
		if (stuck) {
			hung = 1;
			flockfile(stderr);
			fprintf(stderr, "WATCHDOG at %.1f s (bound: %d s per call, %d s in all); calls under way:\n",
				t / 1000.0, op_bound, seconds + margin);
			for (int i = 0; i < MAXSLOT; i++)
				if (slots[i].used && slots[i].op)
					fprintf(stderr, "  %s: %s for %.1f s\n", slots[i].who, slots[i].op,
						(t - slots[i].since) / 1000.0);
			funlockfile(stderr);
			for (int i = 0; i < MAXSLOT; i++)
				if (slots[i].used && slots[i].op) {
					fprintf(stderr, "--- stack of %s (in %s):\n", slots[i].who, slots[i].op);
					pthread_kill(slots[i].th, SIGUSR1);
					usleep(300000);
				}
			printf("HANG (watchdog)\n");
			fflush(stdout);
			fflush(stderr);
			_exit(3);
		}
		usleep(250000);
	}
	return NULL;
}

/* ---- stream pairs -------------------------------------------------------- */

struct runner {
	int idx, lis;
	struct sockaddr_in sa;
	pthread_t th;
	long rounds[16], bytes;
};

struct conn_arg {
	struct runner *r;
	int fd, ret, err;
};

static void *connector(void *arg)
{
	struct conn_arg *c = arg;
	struct slot *s = slot_get("runner %d connector", c->r->idx);

	enter(s, "rsocket");
	c->fd = rsocket(AF_INET, SOCK_STREAM, 0);
	c->ret = -1;
	c->err = errno;
	if (c->fd >= 0) {
		enter(s, "rconnect");
		c->ret = rconnect(c->fd, (struct sockaddr *)&c->r->sa, sizeof c->r->sa);
		c->err = errno;
	}
	leave(s);
	slot_put(s);
	return NULL;
}

static int make_pair(struct runner *r, struct slot *s, int *a, int *b)
{
	struct conn_arg c = { .r = r, .fd = -1 };
	pthread_t th;

	pthread_create(&th, NULL, connector, &c);
	enter(s, "raccept");
	*a = raccept(r->lis, NULL, NULL);
	int e = errno;
	leave(s);
	pthread_join(th, NULL);
	if (*a < 0 || c.ret) {
		fail(s, "pair: raccept=%d (%s) rconnect=%d (%s)", *a, *a < 0 ? strerror(e) : "-", c.ret,
		     c.ret ? strerror(c.err) : "-");
		if (*a >= 0)
			rclose(*a);
		if (c.fd >= 0)
			rclose(c.fd);
		return -1;
	}
	*b = c.fd;
	return 0;
}

/* ---- blockers ------------------------------------------------------------ */

enum { READER, POLLER, WRITER };

struct blocker {
	struct runner *r;
	int kind, n, fd;
	atomic_int started;
	long bytes;
	int eof, err, revents;
	pthread_t th;
};

static void *blocker(void *arg)
{
	struct blocker *k = arg;
	static const char *kn[] = { "reader", "poller", "writer" };
	struct slot *s = slot_get("runner %d %s %d", k->r->idx, kn[k->kind], k->n);
	char buf[4096];

	memset(buf, 'x', sizeof buf);
	k->started = 1;
	switch (k->kind) {
	case READER:
		for (;;) {
			enter(s, "rrecv");
			ssize_t n = rrecv(k->fd, buf, sizeof buf, 0);
			int e = errno;

			leave(s);
			if (n > 0) {
				k->bytes += n;
				continue;
			}
			if (n == 0)
				k->eof = 1;
			else
				k->err = e;
			break;
		}
		break;
	case POLLER:
		for (;;) {
			struct pollfd p = { .fd = k->fd, .events = POLLIN };

			enter(s, "rpoll");
			int n = rpoll(&p, 1, 1000);
			int e = errno;

			leave(s);
			if (n < 0) {
				k->err = e;
				break;
			}
			if (n > 0) {
				k->revents = p.revents;
				break;
			}
		}
		break;
	case WRITER:
		while (k->bytes < DATA_BYTES) {
			enter(s, "rsend");
			ssize_t n = rsend(k->fd, buf, sizeof buf, 0);
			int e = errno;

			leave(s);
			if (n <= 0) {
				k->err = n ? e : EPIPE;
				break;
			}
			k->bytes += n;
		}
		break;
	}
	slot_put(s);
	return NULL;
}

static void start(struct blocker *k, struct runner *r, int kind, int n, int fd)
{
	memset(k, 0, sizeof *k);
	k->r = r;
	k->kind = kind;
	k->n = n;
	k->fd = fd;
	pthread_create(&k->th, NULL, blocker, k);
}

/* Lets the blockers get into their calls. */
static void settle(struct blocker *k, int n)
{
	for (int i = 0; i < n; i++)
		while (!k[i].started)
			usleep(1000);
	usleep(50000);
}

static int call(struct slot *s, const char *what, int ret)
{
	leave(s);
	if (ret) {
		fail(s, "%s: %s", what, strerror(errno));
		return -1;
	}
	return 0;
}
#define CALL(s, what, expr) (enter(s, what), call(s, what, (expr)))

/* Readers must have seen EOF or an error, pollers an event or an error. */
static void check_woken(struct slot *s, const char *mode, struct blocker *k, int n)
{
	for (int i = 0; i < n; i++) {
		if (k[i].kind == READER && !k[i].eof && !k[i].err)
			fail(s, "%s: reader %d returned without EOF or error", mode, k[i].n);
		if (k[i].kind == READER && k[i].err && k[i].err != ECONNRESET && k[i].err != ENOTCONN &&
		    k[i].err != EPIPE)
			fail(s, "%s: reader %d: unexpected error %s", mode, k[i].n, strerror(k[i].err));
		if (k[i].kind == POLLER && k[i].err)
			fail(s, "%s: poller %d: rpoll: %s", mode, k[i].n, strerror(k[i].err));
	}
}

static void round_(struct runner *r, struct slot *s, int mode)
{
	const struct mode *m = &modes[mode];
	struct blocker k[4];
	int a, b, nk = 0;

	snprintf(s->who, sizeof s->who, "runner %d (%s)", r->idx, m->name);
	if (make_pair(r, s, &a, &b))
		return;
	switch (m->action) {
	case PLAIN:
		CALL(s, "rshutdown(a, SHUT_RDWR)", rshutdown(a, SHUT_RDWR));
		CALL(s, "rshutdown(b, SHUT_RDWR)", rshutdown(b, SHUT_RDWR));
		CALL(s, "rclose(a)", rclose(a));
		CALL(s, "rclose(b)", rclose(b));
		break;
	case LOCAL:
	case PEER:
		for (int i = 0; i < m->readers; i++)
			start(&k[nk++], r, READER, i, a);
		for (int i = 0; i < m->pollers; i++)
			start(&k[nk++], r, POLLER, i, a);
		settle(k, nk);
		if (m->action == LOCAL)
			CALL(s, "rshutdown(a, SHUT_RDWR) with readers/pollers on a", rshutdown(a, SHUT_RDWR));
		else
			CALL(s, "rclose(b) with readers/pollers on a", rclose(b));
		enter(s, "joining readers/pollers");
		for (int i = 0; i < nk; i++)
			pthread_join(k[i].th, NULL);
		leave(s);
		check_woken(s, m->name, k, nk);
		CALL(s, "rclose(a)", rclose(a));
		if (m->action == LOCAL)
			CALL(s, "rclose(b)", rclose(b));
		break;
	case DATA: {
		long got = 0;

		start(&k[nk++], r, READER, 0, a);
		start(&k[nk++], r, READER, 1, a);
		start(&k[nk++], r, WRITER, 0, b);
		enter(s, "joining writer");
		pthread_join(k[2].th, NULL);
		leave(s);
		if (k[2].err)
			fail(s, "data: writer: %s after %ld bytes", strerror(k[2].err), k[2].bytes);
		CALL(s, "rshutdown(b, SHUT_WR)", rshutdown(b, SHUT_WR));
		enter(s, "joining readers");
		pthread_join(k[0].th, NULL);
		pthread_join(k[1].th, NULL);
		leave(s);
		check_woken(s, "data", k, 2);
		got = k[0].bytes + k[1].bytes;
		if (got != k[2].bytes)
			fail(s, "data: sent %ld bytes, received %ld", k[2].bytes, got);
		r->bytes += got;
		CALL(s, "rshutdown(a, SHUT_RDWR) (both ends in one process)", rshutdown(a, SHUT_RDWR));
		CALL(s, "rshutdown(b, SHUT_RDWR) (both ends in one process)", rshutdown(b, SHUT_RDWR));
		CALL(s, "rclose(a)", rclose(a));
		CALL(s, "rclose(b)", rclose(b));
		break;
	}
	case CLOSERACE:
		start(&k[nk++], r, READER, 0, a);
		settle(k, nk);
		CALL(s, "rshutdown(a, SHUT_RDWR) with a reader on a", rshutdown(a, SHUT_RDWR));
		CALL(s, "rclose(a) while the reader returns", rclose(a));
		enter(s, "joining reader");
		pthread_join(k[0].th, NULL);
		leave(s);
		CALL(s, "rclose(b)", rclose(b));
		break;
	}
	r->rounds[mode]++;
}

static void *runner(void *arg)
{
	struct runner *r = arg;
	struct slot *s = slot_get("runner %d", r->idx);
	for (long i = 0; !failed; i++) {
		round_(r, s, enabled[(i + r->idx) % nenabled]);
		if (now_ms() >= seconds * 1000L && i >= nenabled - 1)
			break;
	}
	slot_put(s);
	return NULL;
}

int main(int argc, char **argv)
{
	struct runner R[8];
	pthread_t wd;
	int c;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	port = 26000 + getpid() % 1000;
	while ((c = getopt(argc, argv, "r:s:p:a:CXM:m:b:")) != -1) {
		switch (c) {
		case 'r': runners = atoi(optarg); break;
		case 's': seconds = atoi(optarg); break;
		case 'p': port = atoi(optarg); break;
		case 'a': addr = optarg; break;
		case 'C': closerace = 1; break;
		case 'X': crowd = 1; break;
		case 'b': op_bound = atoi(optarg); break;
		case 'M': only_mode = atoi(optarg); break;
		case 'm': margin = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: stress_rsocket [-r runners] [-s seconds] [-p port] [-a addr] [-C] [-X] [-M mode] [-m margin] [-b call-bound]\n");
			return 2;
		}
	}
	if (runners < 1 || runners > 8)
		runners = 2;
	for (int m = 0; m < NALL; m++)
		if (only_mode >= 0 ? m == only_mode
				   : !modes[m].extra || (modes[m].extra == 'X' && crowd) || (modes[m].extra == 'C' && closerace))
			enabled[nenabled++] = m;
	if (!nenabled) {
		fprintf(stderr, "no such mode\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	stacks_on_sigusr1();
	pthread_create(&wd, NULL, watchdog, NULL);
	for (int i = 0; i < runners; i++) {
		struct slot *s = slot_get("main (listener %d)", i);

		memset(&R[i], 0, sizeof R[i]);
		R[i].idx = i;
		R[i].sa.sin_family = AF_INET;
		R[i].sa.sin_port = htons(port + i);
		inet_pton(AF_INET, addr, &R[i].sa.sin_addr);
		enter(s, "rsocket/rbind/rlisten");
		R[i].lis = rsocket(AF_INET, SOCK_STREAM, 0);
		if (R[i].lis < 0 || rbind(R[i].lis, (struct sockaddr *)&R[i].sa, sizeof R[i].sa) ||
		    rlisten(R[i].lis, 8)) {
			printf("listener setup failed: %s\n", strerror(errno));
			return 1;
		}
		slot_put(s);
	}
	for (int i = 0; i < runners; i++)
		pthread_create(&R[i].th, NULL, runner, &R[i]);
	for (int i = 0; i < runners; i++)
		pthread_join(R[i].th, NULL);
	long n[NALL] = { 0 }, bytes = 0;

	for (int i = 0; i < runners; i++) {
		struct slot *s = slot_get("main (listener %d)", i);

		CALL(s, "rclose(listener)", rclose(R[i].lis));
		slot_put(s);
		for (int m = 0; m < NALL; m++)
			n[m] += R[i].rounds[m];
		bytes += R[i].bytes;
	}
	fprintf(stderr, "%.1f s: rounds", now_ms() / 1000.0);
	for (int m = 0; m < NALL; m++)
		if (n[m])
			fprintf(stderr, " %s=%ld", modes[m].name, n[m]);
	fprintf(stderr, ", %ld bytes received in data rounds\n", bytes);
	while (hung)
		pause();	/* the watchdog is dumping stacks; it ends the process */
	if (failed) {
		printf("runners=%d FAILED\n", runners);
		return 1;
	}
	printf("runners=%d modes=%d ok\n", runners, nenabled);
	return 0;
}
