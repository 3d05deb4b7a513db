/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * rsvc - what rsockets do in the background (upstream's service threads),
 * both ends in this process (or a forked child) over rxe0 (192.0.2.1).
 *
 * Over 800 lines: a self-contained case per background duty of rsockets, both ends in
 * this process, sharing the setup helpers below and one transcript.
 *
 *   rsvc same        one thread: rlisten, a blocking rconnect to that
 *                    listener (needs a background accept), raccept, a
 *                    message each way, rshutdown both ends, rclose both.
 *   rsvc nbconnect   non-blocking rconnect: -1/EINPROGRESS, then rpoll
 *                    POLLOUT and SO_ERROR 0; to a port nobody listens on,
 *                    rpoll reports the error and SO_ERROR ECONNREFUSED;
 *                    a blocking one fails in the call.
 *   rsvc nbaccept    a non-blocking listener: raccept -1/EAGAIN while no
 *                    connection is ready; rpoll POLLIN on the listener once
 *                    one is, then raccept returns it (one thread throughout).
 *   rsvc disconnect  a forked peer: a thread blocked in rrecv sees 0 when
 *                    the peer rcloses; then a second connection whose peer
 *                    is killed (SIGKILL): a thread blocked in rpoll(POLLIN)
 *                    sees POLLHUP, and rrecv then returns 0.
 *   rsvc killrecv    a forked peer is killed (SIGKILL) while a thread is
 *                    blocked in rrecv: what the call returns (or that it is
 *                    still blocked 8 s later).
 *   rsvc spin        a forked peer sends a byte every 3 ms; this thread
 *                    blocks in rrecv for each: how many times per call it
 *                    read the clock (a busy poll reads it on every try;
 *                    run with LD_PRELOAD=libclockcount.so). Ours must stop
 *                    spinning on a stream whose spins never find the answer
 *                    (under 1.5 reads per call); upstream's spins every time
 *                    (its run: the reference, printed).
 *   rsvc keepalive   TCP_KEEPIDLE 1 and SO_KEEPALIVE on an idle connection:
 *                    the rxe0 sent-packet counter grows by at least 2 in 3.5 s.
 *   rsvc opts        option and rfcntl values upstream reports.
 *   rsvc conf        the values of a fresh socket (run with tunables in
 *                    /etc/rdma/rsocket: the suite writes them).
 *   rsvc chunks      a forked peer sends 48 messages of 64 KiB back to back
 *                    on one stream (one thread, blocking rsend); this thread
 *                    receives them: rxe0's write-with-immediate receives per
 *                    message (data messages and the credits sent back). Ours
 *                    must send a stream of large sends as 64 KiB messages
 *                    (one data message and two credits, the first send
 *                    ramping: 3.15 on an idle machine). A send that finds
 *                    the sender's earlier writes all completed ramps by
 *                    design, which a loaded host causes now and then (a
 *                    sender descheduled between calls: 3.85 seen on two
 *                    busy cores), so the bound is under 5.0 per message;
 *                    upstream cuts every send into 2, 4, 8, 16, 32, 2 KiB
 *                    (8.00; its run: the reference, printed).
 *   rsvc afib        AF_IB stream rsockets: what rsocket, rbind, rlisten,
 *                    rgetsockname and rconnect give, a datagram AF_IB
 *                    socket, and an AF_INET rsocket connecting to an AF_IB
 *                    listener (a service id in the TCP port space).
 *
 * Deterministic output (compared, upstream vs ours); exit 0 when every step
 * went as expected, 1 on a failure, 3 when a step hung (alarm).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rsocket.h>
#include <rdma/rdma_cma.h>
#include <infiniband/ib.h>
#include <endian.h>
#include "common.h"

#define ADDR "192.0.2.1"

static int failed;


static const char *ev(short r)
{
	static char b[64];

	b[0] = 0;
	if (r & POLLIN) strcat(b, "IN|");
	if (r & POLLOUT) strcat(b, "OUT|");
	if (r & POLLERR) strcat(b, "ERR|");
	if (r & POLLHUP) strcat(b, "HUP|");
	if (r & POLLNVAL) strcat(b, "NVAL|");
	if (b[0]) b[strlen(b) - 1] = 0; else strcpy(b, "0");
	return b;
}

/* Prints a call's outcome; expect >= 0: the value wanted (or -1 with want_errno). */
static void check(const char *what, long ret, long expect, int want_errno)
{
	int e = errno;

	if (ret < 0)
		printf("%s: -1 %s\n", what, en(e));
	else
		printf("%s: %ld\n", what, ret);
	if (ret != expect || (ret < 0 && e != want_errno)) {
		printf("  FAIL (wanted %ld %s)\n", expect, expect < 0 ? en(want_errno) : "");
		failed = 1;
	}
	fflush(stdout);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "HUNG (alarm)\n";
	write(1, m, sizeof m - 1);
	_exit(3);
}

static struct sockaddr_in addr_of(int port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	inet_pton(AF_INET, ADDR, &a.sin_addr);
	return a;
}

static int listener(int port, int nonblock)
{
	struct sockaddr_in a = addr_of(port);
	int l, on = 1;

	l = rsocket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
	if (l < 0) { perror("rsocket"); exit(1); }
	rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
	if (rbind(l, (struct sockaddr *)&a, sizeof a) || rlisten(l, 8)) {
		printf("listen on %d: %s\n", port, en(errno));
		exit(1);
	}
	return l;
}

static int getint(int s, int level, int name)
{
	int v = -12345;
	socklen_t l = sizeof v;

	if (rgetsockopt(s, level, name, &v, &l))
		return -errno;
	return v;
}

/* One thread, both ends: needs the connection accepted in the background. */
static int t_same(void)
{
	struct sockaddr_in a = addr_of(24101);
	int l = listener(24101, 0), c, s;
	char buf[8];

	c = rsocket(AF_INET, SOCK_STREAM, 0);
	check("rconnect (blocking, own listener)", rconnect(c, (struct sockaddr *)&a, sizeof a), 0, 0);
	s = raccept(l, NULL, NULL);
	printf("raccept: %s\n", s >= 0 ? "ok" : en(errno));
	if (s < 0) return 1;
	check("rsend c->s", rsend(c, "ping", 4, 0), 4, 0);
	check("rrecv s", rrecv(s, buf, 4, MSG_WAITALL), 4, 0);
	check("rsend s->c", rsend(s, "pong", 4, 0), 4, 0);
	check("rrecv c", rrecv(c, buf, 4, MSG_WAITALL), 4, 0);
	check("rshutdown c", rshutdown(c, SHUT_RDWR), 0, 0);
	check("rshutdown s", rshutdown(s, SHUT_RDWR), 0, 0);
	check("rrecv s after shutdown", rrecv(s, buf, 4, 0), 0, 0);
	check("rclose c", rclose(c), 0, 0);
	check("rclose s", rclose(s), 0, 0);
	check("rclose l", rclose(l), 0, 0);
	return failed;
}

static int t_nbconnect(void)
{
	struct sockaddr_in a = addr_of(24102), none = addr_of(24109);
	int l = listener(24102, 0), c, s, r, e;
	struct pollfd p;
	char buf[4];

	c = rsocket(AF_INET, SOCK_STREAM, 0);
	check("F_SETFL O_NONBLOCK", rfcntl(c, F_SETFL, O_NONBLOCK), 0, 0);
	check("rconnect (non-blocking)", rconnect(c, (struct sockaddr *)&a, sizeof a), -1, EINPROGRESS);
	p.fd = c; p.events = POLLOUT; p.revents = 0;
	r = rpoll(&p, 1, 10000);
	printf("rpoll POLLOUT: %d %s\n", r, ev(p.revents));
	if (r != 1 || !(p.revents & POLLOUT)) failed = 1;
	check("SO_ERROR", getint(c, SOL_SOCKET, SO_ERROR), 0, 0);
	/* Not tried: rconnect again once connected (upstream returns 0 but
	 * registers the socket with its connect service a second time, and
	 * crashes after rclose: SIGSEGV, rdma-core 65 in this test bed). */
	s = raccept(l, NULL, NULL);
	printf("raccept: %s\n", s >= 0 ? "ok" : en(errno));
	check("rsend", rsend(c, "abc", 3, 0), 3, 0);
	check("rrecv", rrecv(s, buf, 3, MSG_WAITALL), 3, 0);
	rclose(c); rclose(s);

	/* Nobody listens: the connect fails through rpoll and SO_ERROR. */
	c = rsocket(AF_INET, SOCK_STREAM, 0);
	check("F_SETFL O_NONBLOCK", rfcntl(c, F_SETFL, O_NONBLOCK), 0, 0);
	/* Over loopback the rejection may already be there when the library
	 * first looks (both libraries then fail the call with ECONNREFUSED);
	 * usually it is not (EINPROGRESS). Either way it ends the same below. */
	r = rconnect(c, (struct sockaddr *)&none, sizeof none);
	e = errno;
	printf("rconnect (non-blocking, no listener): %s\n",
	       r == -1 && (e == EINPROGRESS || e == ECONNREFUSED) ? "-1 EINPROGRESS or ECONNREFUSED" : "unexpected");
	if (!(r == -1 && (e == EINPROGRESS || e == ECONNREFUSED))) {
		printf("  FAIL: %d %s\n", r, en(e));
		failed = 1;
	}
	p.fd = c; p.events = POLLOUT | POLLIN; p.revents = 0;
	r = rpoll(&p, 1, 30000);
	printf("rpoll: %d %s\n", r, ev(p.revents));
	if (r != 1 || !(p.revents & POLLERR)) failed = 1;
	check("SO_ERROR", getint(c, SOL_SOCKET, SO_ERROR), ECONNREFUSED, 0);
	check("SO_ERROR again (cleared)", getint(c, SOL_SOCKET, SO_ERROR), 0, 0);
	check("rconnect after the failure", rconnect(c, (struct sockaddr *)&none, sizeof none), -1, ENOTCONN);
	rclose(c);

	/* A blocking connect nobody answers fails in the call. */
	c = rsocket(AF_INET, SOCK_STREAM, 0);
	check("rconnect (blocking, no listener)", rconnect(c, (struct sockaddr *)&none, sizeof none), -1, ECONNREFUSED);
	check("SO_ERROR", getint(c, SOL_SOCKET, SO_ERROR), ECONNREFUSED, 0);
	rclose(c);
	rclose(l);
	return failed;
}

static int t_nbaccept(void)
{
	struct sockaddr_in a = addr_of(24103);
	int l = listener(24103, 1), c, s, r;
	struct pollfd p;
	char buf[4];

	check("raccept (nothing ready)", raccept(l, NULL, NULL), -1, EAGAIN);
	p.fd = l; p.events = POLLIN; p.revents = 0;
	check("rpoll listener (nothing ready)", rpoll(&p, 1, 200), 0, 0);
	c = rsocket(AF_INET, SOCK_STREAM, 0);
	rfcntl(c, F_SETFL, O_NONBLOCK);
	check("rconnect (non-blocking)", rconnect(c, (struct sockaddr *)&a, sizeof a), -1, EINPROGRESS);
	/* Poll the listener together with the connecting socket: upstream's
	 * rpoll moves a connect on when it looks at it (its connect service
	 * alone left it pending in 1 of 4 runs here). */
	{
		struct pollfd two[2];
		int i, got = 0;
		short cev = POLLOUT;

		/* At most 100 rounds of up to 100 ms: once the connecting socket
		 * is writable it stays in the set asking for nothing, so each
		 * round waits. */
		for (i = 0; i < 100 && !got; i++) {
			two[0].fd = l; two[0].events = POLLIN; two[0].revents = 0;
			two[1].fd = c; two[1].events = cev; two[1].revents = 0;
			r = rpoll(two, 2, 100);
			got = r > 0 && (two[0].revents & POLLIN);
			if (two[1].revents & POLLOUT)
				cev = 0;
		}
		printf("rpoll listener (with the connecting socket): %s\n", got ? "IN" : "nothing in 10 s");
		if (!got) failed = 1;
	}
	s = raccept(l, NULL, NULL);
	printf("raccept: %s\n", s >= 0 ? "ok" : en(errno));
	if (s < 0) return 1;
	check("raccept (queue empty again)", raccept(l, NULL, NULL), -1, EAGAIN);
	p.fd = c; p.events = POLLOUT; p.revents = 0;
	r = rpoll(&p, 1, 10000);
	printf("rpoll client POLLOUT: %d %s\n", r, ev(p.revents));
	/* The accepted socket is non-blocking too (inherited). */
	rfcntl(s, F_SETFL, 0);
	check("rsend", rsend(c, "xyz", 3, 0), 3, 0);
	check("rrecv (blocking)", rrecv(s, buf, 3, MSG_WAITALL), 3, 0);
	rclose(c); rclose(s); rclose(l);
	return failed;
}

/* rsvc spin: messages the peer sends, and how many of the first are not counted (the
 * stream's spin policy settles in those) */
#define SPIN_MSGS 120
#define SPIN_SKIP 20

/* rsvc wakes: streams (a thread each at both ends), 64-byte round trips on each, and how
 * many of the first are not counted */
#define WAKE_STREAMS 8
#define WAKE_RTS 200
#define WAKE_SKIP 20

/* rsvc chunks: messages of CHUNK_SIZE bytes the peer sends back to back */
#define CHUNK_MSGS 48
#define CHUNK_SIZE 65536

struct reader { int fd; long ret; int err; short revents; int mode; };

static void *reader(void *arg)
{
	struct reader *r = arg;
	char buf[16];

	if (r->mode == 0) {
		r->ret = rrecv(r->fd, buf, sizeof buf, 0);
		r->err = errno;
	} else {
		struct pollfd p = { .fd = r->fd, .events = POLLIN };
		r->ret = rpoll(&p, 1, -1);
		r->err = errno;
		r->revents = p.revents;
	}
	return NULL;
}

/* rsvc wakes: echoes WAKE_RTS messages of 64 bytes on the stream `arg` */
static void *echo(void *arg)
{
	int c = (int)(long)arg, i;
	char m[64];

	for (i = 0; i < WAKE_RTS; i++) {
		if (rrecv(c, m, sizeof m, MSG_WAITALL) != sizeof m ||
		    rsend(c, m, sizeof m, 0) != sizeof m)
			_exit(1);
	}
	return NULL;
}

/* Child: connect, say hello, wait for the go byte on the pipe, then rclose
 * (how == 0) or sleep until killed (how == 1). */
static void peer(int port, int go, int how)
{
	struct sockaddr_in a = addr_of(port);
	char b;
	int c, i;

	for (i = 0; i < 300; i++) {
		c = rsocket(AF_INET, SOCK_STREAM, 0);
		if (!rconnect(c, (struct sockaddr *)&a, sizeof a))
			break;
		rclose(c);
		usleep(100000);
	}
	rsend(c, "h", 1, 0);
	if (read(go, &b, 1) != 1)
		_exit(1);
	if (how == 2) {
		/* rsvc spin: a byte every 3 ms, then wait for the parent's end */
		for (i = 0; i < SPIN_MSGS; i++) {
			usleep(3000);
			if (rsend(c, "s", 1, 0) != 1)
				_exit(1);
		}
		while (read(go, &b, 1) > 0)
			;
		rclose(c);
		_exit(0);
	}
	if (how == 3) {
		/* rsvc wakes: WAKE_STREAMS streams (this the first), each echoed
		 * by its own thread */
		pthread_t t[WAKE_STREAMS];
		long fds[WAKE_STREAMS];

		fds[0] = c;
		for (i = 1; i < WAKE_STREAMS; i++) {
			fds[i] = rsocket(AF_INET, SOCK_STREAM, 0);
			if (rconnect(fds[i], (struct sockaddr *)&a, sizeof a) ||
			    rsend(fds[i], "h", 1, 0) != 1)
				_exit(1);
		}
		for (i = 0; i < WAKE_STREAMS; i++)
			pthread_create(&t[i], NULL, echo, (void *)fds[i]);
		for (i = 0; i < WAKE_STREAMS; i++)
			pthread_join(t[i], NULL);
		while (read(go, &b, 1) > 0)
			;
		for (i = 0; i < WAKE_STREAMS; i++)
			rclose(fds[i]);
		_exit(0);
	}
	if (how == 4) {
		/* rsvc chunks: CHUNK_MSGS messages, each tagged with its number
		 * at its start and its end */
		char *m = malloc(CHUNK_SIZE);

		if (!m)
			_exit(1);
		memset(m, 0x5a, CHUNK_SIZE);
		for (i = 0; i < CHUNK_MSGS; i++) {
			memcpy(m, &i, sizeof i);
			memcpy(m + CHUNK_SIZE - sizeof i, &i, sizeof i);
			if (rsend(c, m, CHUNK_SIZE, 0) != CHUNK_SIZE)
				_exit(1);
		}
		while (read(go, &b, 1) > 0)
			;
		rclose(c);
		_exit(0);
	}
	if (how == 0) {
		rclose(c);
		_exit(0);
	}
	for (;;)
		pause();
}

/* The peers are forked before this process uses rsockets: a child of a
 * process with service threads must not use the parent's library state. */
static pid_t spawn_peer(int port, int how, int *go_w)
{
	int go[2];
	pid_t pid;

	if (pipe(go)) exit(1);
	pid = fork();
	if (pid == 0) {
		close(go[1]);
		peer(port, go[0], how);
	}
	close(go[0]);
	*go_w = go[1];
	return pid;
}

/* Accepts the forked peer's connection on `port` (listener in *l), takes its
 * hello, starts the reader thread `r` on it and lets the peer go on; the
 * accepted socket, or -1. */
static int accept_and_read(int port, int go_w, int *l, struct reader *r, pthread_t *t)
{
	int s;
	char b;

	*l = listener(port, 0);
	s = raccept(*l, NULL, NULL);
	if (s < 0) { printf("raccept: %s\n", en(errno)); return -1; }
	check("rrecv hello", rrecv(s, &b, 1, 0), 1, 0);
	r->fd = s;
	pthread_create(t, NULL, reader, r);
	usleep(300000);		/* the reader is asleep now */
	if (write(go_w, "g", 1) != 1) return -1;
	return s;
}

static int one_disconnect(int port, int how, pid_t pid, int go_w)
{
	int go[2] = { -1, go_w }, l, s, st;
	pthread_t t;
	struct reader r = { .mode = how };
	char b;

	s = accept_and_read(port, go[1], &l, &r, &t);
	if (s < 0) return 1;
	if (how == 1) {
		usleep(100000);
		kill(pid, SIGKILL);
	}
	pthread_join(t, NULL);
	waitpid(pid, &st, 0);
	if (how == 0) {
		errno = r.err;
		check("blocked rrecv when the peer rcloses", r.ret, 0, 0);
	} else {
		printf("blocked rpoll(POLLIN) when the peer is killed: %ld %s\n", r.ret, ev(r.revents));
		if (r.ret != 1 || !(r.revents & POLLHUP)) failed = 1;
		check("rrecv after that", rrecv(s, &b, 1, 0), 0, 0);
	}
	rclose(s);
	rclose(l);
	close(go[1]);
	return failed;
}

static int t_disconnect(void)
{
	int g1, g2;
	pid_t p1 = spawn_peer(24104, 0, &g1), p2 = spawn_peer(24105, 1, &g2);

	one_disconnect(24104, 0, p1, g1);
	one_disconnect(24105, 1, p2, g2);
	return failed;
}

/* rsvc killrecv: a thread blocked in rrecv on a connection whose peer is
 * killed (SIGKILL).  Prints what the call returns, or that it was still
 * blocked 8 s later (the thread is then cancelled: rrecv is a cancellation
 * point).  Ours (RDMACM_VARIANT ours or preload) must return 0, end of
 * stream, as a TCP socket does; upstream's stays blocked (its run is the
 * reference and passes either way). */
static int t_killrecv(void)
{
	const char *v = getenv("RDMACM_VARIANT");
	int ours = v && (!strcmp(v, "ours") || !strcmp(v, "preload"));
	int g, l, s, st, e;
	pid_t pid = spawn_peer(24106, 1, &g);
	struct reader r = { .mode = 0 };
	struct timespec until;
	pthread_t t;
	char b;

	s = accept_and_read(24106, g, &l, &r, &t);
	if (s < 0) return 1;
	usleep(100000);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 8;
	e = pthread_timedjoin_np(t, NULL, &until);
	if (e == ETIMEDOUT) {
		printf("blocked rrecv when the peer is killed: still blocked 8 s later\n");
		pthread_cancel(t);
		pthread_join(t, NULL);
		if (ours)
			failed = 1;
	} else {
		printf("blocked rrecv when the peer is killed: %ld %s\n", r.ret, r.ret < 0 ? en(r.err) : "");
		if (ours && r.ret != 0)
			failed = 1;
		check("rrecv after that", rrecv(s, &b, 1, 0), r.ret < 0 ? -1 : 0, r.ret < 0 ? r.err : 0);
	}
	rclose(s);
	rclose(l);
	close(g);
	return failed;
}

/* One of rxe0's counters (-1 when it cannot be read): sent_pkts; rdma_recvs,
 * its receives of a message with immediate data (rsockets' data messages
 * and credits, at both ends of a connection over rxe0). */
static long rxe0_counter(const char *name)
{
	char path[128];
	FILE *f;
	long v = -1;

	snprintf(path, sizeof path, "/sys/class/infiniband/rxe0/ports/1/hw_counters/%s", name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int t_keepalive(void)
{
	struct sockaddr_in a = addr_of(24106);
	int l = listener(24106, 0), c, s, one = 1;
	long before, after;

	c = rsocket(AF_INET, SOCK_STREAM, 0);
	check("rconnect", rconnect(c, (struct sockaddr *)&a, sizeof a), 0, 0);
	s = raccept(l, NULL, NULL);
	check("TCP_KEEPIDLE 1", rsetsockopt(c, IPPROTO_TCP, TCP_KEEPIDLE, &one, sizeof one), 0, 0);
	check("SO_KEEPALIVE on", rsetsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one), 0, 0);
	check("SO_KEEPALIVE reads", getint(c, SOL_SOCKET, SO_KEEPALIVE), 1, 0);
	check("TCP_KEEPIDLE reads", getint(c, IPPROTO_TCP, TCP_KEEPIDLE), 1, 0);
	before = rxe0_counter("sent_pkts");
	usleep(3500000);
	after = rxe0_counter("sent_pkts");
	printf("keepalive packets sent in 3.5 s >= 2: %s\n", before >= 0 && after - before >= 2 ? "yes" : "no");
	if (!(before >= 0 && after - before >= 2)) {
		fprintf(stderr, "sent_pkts %ld -> %ld\n", before, after);
		failed = 1;
	}
	rclose(c); rclose(s); rclose(l);
	return failed;
}

static void print_fresh(int s, const char *what)
{
	printf("%s: SO_RCVBUF %d SO_SNDBUF %d RDMA_SQSIZE %d RDMA_RQSIZE %d RDMA_INLINE %d RDMA_IOMAPSIZE %d\n", what,
	       getint(s, SOL_SOCKET, SO_RCVBUF), getint(s, SOL_SOCKET, SO_SNDBUF),
	       getint(s, SOL_RDMA, RDMA_SQSIZE), getint(s, SOL_RDMA, RDMA_RQSIZE),
	       getint(s, SOL_RDMA, RDMA_INLINE), getint(s, SOL_RDMA, RDMA_IOMAPSIZE));
}

static int t_conf(void)
{
	int s = rsocket(AF_INET, SOCK_STREAM, 0);

	print_fresh(s, "fresh socket");
	rclose(s);
	return failed;
}

static int t_opts(void)
{
	struct sockaddr_in a = addr_of(24107);
	int l = listener(24107, 0), c, s, v, c6;
	struct linger lg;
	/* rdma-core writes its struct tcp_info whole (280 bytes with current
	 * kernel headers) whatever the length given: room for that. */
	union { struct tcp_info ti; unsigned char room[1024]; } tiu;
	struct tcp_info *tip = &tiu.ti;
	socklen_t len;
	unsigned char route[72 * 4];

	c = rsocket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	print_fresh(c, "fresh socket");
	check("F_GETFD (SOCK_CLOEXEC)", rfcntl(c, F_GETFD), FD_CLOEXEC, 0);
	check("F_SETFD 0", rfcntl(c, F_SETFD, 0), 0, 0);
	check("F_GETFD", rfcntl(c, F_GETFD), 0, 0);
	check("F_GETFL (SOCK_NONBLOCK)", rfcntl(c, F_GETFL), O_NONBLOCK, 0);
	check("F_SETFL 0", rfcntl(c, F_SETFL, 0), 0, 0);
	check("F_GETFL", rfcntl(c, F_GETFL), 0, 0);
	check("TCP_MAXSEG unconnected", getint(c, IPPROTO_TCP, TCP_MAXSEG), 2048, 0);
	check("TCP_KEEPIDLE default", getint(c, IPPROTO_TCP, TCP_KEEPIDLE), 0, 0);
	check("SO_OOBINLINE default", getint(c, SOL_SOCKET, SO_OOBINLINE), 0, 0);
	v = 1;
	check("SO_OOBINLINE set", rsetsockopt(c, SOL_SOCKET, SO_OOBINLINE, &v, sizeof v), 0, 0);
	check("SO_OOBINLINE reads", getint(c, SOL_SOCKET, SO_OOBINLINE), 1, 0);
	len = sizeof lg; memset(&lg, 0x55, sizeof lg);
	check("SO_LINGER get", rgetsockopt(c, SOL_SOCKET, SO_LINGER, &lg, &len), 0, 0);
	printf("  l_onoff %d l_linger %d len %u\n", lg.l_onoff, lg.l_linger, (unsigned)len);
	lg.l_onoff = 0; lg.l_linger = 5;
	check("SO_LINGER off", rsetsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0, 0);
	len = sizeof lg;
	rgetsockopt(c, SOL_SOCKET, SO_LINGER, &lg, &len);
	printf("  l_onoff %d l_linger %d\n", lg.l_onoff, lg.l_linger);
	v = 0x20;
	/* The kernel takes one byte: an int is refused (both libraries), but the value is kept. */
	check("IP_TOS set (int)", rsetsockopt(c, IPPROTO_IP, IP_TOS, &v, sizeof v), -1, EINVAL);
	check("IP_TOS reads", getint(c, IPPROTO_IP, IP_TOS), 0x20, 0);
	v = 1;
	check("TCP_NODELAY set", rsetsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v), 0, 0);
	check("TCP_NODELAY reads", getint(c, IPPROTO_TCP, TCP_NODELAY), 1, 0);
	check("TCP_KEEPCNT reads", getint(c, IPPROTO_TCP, TCP_KEEPCNT), 1, 0);
	check("SO_RCVBUF set 8192", rsetsockopt(c, SOL_SOCKET, SO_RCVBUF, (v = 8192, &v), sizeof v), 0, 0);
	check("SO_RCVBUF reads", getint(c, SOL_SOCKET, SO_RCVBUF), 16384, 0);
	check("SO_SNDBUF set 1000", rsetsockopt(c, SOL_SOCKET, SO_SNDBUF, (v = 1000, &v), sizeof v), 0, 0);
	check("SO_SNDBUF reads (under 2048: 4096)", getint(c, SOL_SOCKET, SO_SNDBUF), 4096, 0);
	check("SO_SNDBUF set 3000", rsetsockopt(c, SOL_SOCKET, SO_SNDBUF, (v = 3000, &v), sizeof v), 0, 0);
	check("SO_SNDBUF reads", getint(c, SOL_SOCKET, SO_SNDBUF), 6000, 0);
	check("SO_SNDBUF set 100", rsetsockopt(c, SOL_SOCKET, SO_SNDBUF, (v = 100, &v), sizeof v), 0, 0);
	check("SO_SNDBUF reads", getint(c, SOL_SOCKET, SO_SNDBUF), 4096, 0);
	check("SO_BROADCAST get", rgetsockopt(c, SOL_SOCKET, SO_BROADCAST, &v, &len), 0, 0);
	len = sizeof v;
	check("SO_DEBUG get", rgetsockopt(c, SOL_SOCKET, SO_DEBUG, &v, &len), -1, ENOTSUP);
	len = sizeof v;
	check("SO_TYPE get", rgetsockopt(c, SOL_SOCKET, SO_TYPE, &v, &len), -1, ENOTSUP);
	check("rconnect", rconnect(c, (struct sockaddr *)&a, sizeof a), 0, 0);
	s = raccept(l, NULL, NULL);
	check("TCP_MAXSEG connected (path MTU)", getint(c, IPPROTO_TCP, TCP_MAXSEG), 1024, 0);
	len = sizeof tiu; memset(&tiu, 0x55, sizeof tiu);
	check("TCP_INFO", rgetsockopt(c, IPPROTO_TCP, TCP_INFO, &tiu, &len), 0, 0);
	printf("  len %u state %u snd_cwnd %u rtt %u\n", (unsigned)len, tip->tcpi_state, tip->tcpi_snd_cwnd, tip->tcpi_rtt);
	len = sizeof route;
	check("RDMA_ROUTE", rgetsockopt(c, SOL_RDMA, RDMA_ROUTE, route, &len), 0, 0);
	printf("  len %u; record 0: reversible_numpath %#x mtu %#x rate %#x lifetime %#x\n", (unsigned)len,
	       route[8 + 49], route[8 + 54], route[8 + 55], route[8 + 56]);
	len = 10;
	check("RDMA_ROUTE, small buffer", rgetsockopt(c, SOL_RDMA, RDMA_ROUTE, route, &len), -1, EINVAL);
	v = 64;
	check("RDMA_SQSIZE once connected", rsetsockopt(c, SOL_RDMA, RDMA_SQSIZE, &v, sizeof v), -1, EINVAL);
	check("accepted: SO_KEEPALIVE", getint(s, SOL_SOCKET, SO_KEEPALIVE), 0, 0);
	check("accepted: F_GETFD", rfcntl(s, F_GETFD), 0, 0);
	rclose(c); rclose(s); rclose(l);

	c6 = rsocket(AF_INET6, SOCK_STREAM, 0);
	check("IPV6_V6ONLY default", getint(c6, IPPROTO_IPV6, IPV6_V6ONLY), 0, 0);
	v = 1;
	check("IPV6_V6ONLY set", rsetsockopt(c6, IPPROTO_IPV6, IPV6_V6ONLY, &v, sizeof v), 0, 0);
	check("IPV6_V6ONLY reads", getint(c6, IPPROTO_IPV6, IPV6_V6ONLY), 1, 0);
	rclose(c6);
	return failed;
}

static struct sockaddr_ib ib_of(int port)
{
	struct sockaddr_ib a;

	memset(&a, 0, sizeof a);
	a.sib_family = AF_IB;
	a.sib_pkey = htons(0xffff);
	if (port) {
		a.sib_sid = htobe64(RDMA_IB_IP_PS_TCP | port);
		a.sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK | 0xffff);
	}
	return a;
}

static void name_of(const char *what, int s)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	memset(&ss, 0, sizeof ss);
	if (rgetsockname(s, (struct sockaddr *)&ss, &len))
		printf("%s: -1 %s\n", what, en(errno));
	else
		printf("%s: family %d len %u\n", what, ss.ss_family, (unsigned)len);
}

static int t_afib(void)
{
	struct sockaddr_ib any = ib_of(0), tcp = ib_of(24111), far = ib_of(24112);
	struct sockaddr_in a = addr_of(24111);
	int l, c, s, d, r;
	char buf[8];

	d = rsocket(AF_IB, SOCK_DGRAM, 0);
	check("rsocket AF_IB SOCK_DGRAM", d, -1, EAFNOSUPPORT);
	check("rsocket AF_IB SOCK_STREAM IPPROTO_UDP", rsocket(AF_IB, SOCK_STREAM, IPPROTO_UDP), -1, ENOTSUP);
	l = rsocket(AF_IB, SOCK_STREAM, 0);
	printf("rsocket AF_IB SOCK_STREAM: %s\n", l >= 0 ? "ok" : en(errno));
	if (l < 0) return 1;
	name_of("rgetsockname fresh", l);
	r = rbind(l, (struct sockaddr *)&any, sizeof any);
	printf("rbind AF_IB any, no service id: %s\n", r ? en(errno) : "0");
	rclose(l);

	l = rsocket(AF_IB, SOCK_STREAM, 0);
	check("rbind AF_IB, TCP service id", rbind(l, (struct sockaddr *)&tcp, sizeof tcp), 0, 0);
	name_of("rgetsockname bound", l);
	check("rlisten", rlisten(l, 8), 0, 0);
	/* Over rxe the kernel refuses this request with both libraries (a
	 * reject: ECONNREFUSED); on InfiniBand it reaches the listener. */
	c = rsocket(AF_INET, SOCK_STREAM, 0);
	r = rconnect(c, (struct sockaddr *)&a, sizeof a);
	printf("rconnect AF_INET to the AF_IB listener: %d %s\n", r, r ? en(errno) : "");
	if (!r) {
		s = raccept(l, NULL, NULL);
		printf("raccept: %s\n", s >= 0 ? "ok" : en(errno));
		if (s < 0) return 1;
		name_of("rgetsockname accepted", s);
		check("rsend c->s", rsend(c, "ping", 4, 0), 4, 0);
		check("rrecv s", rrecv(s, buf, 4, MSG_WAITALL), 4, 0);
		check("rsend s->c", rsend(s, "pong", 4, 0), 4, 0);
		check("rrecv c", rrecv(c, buf, 4, MSG_WAITALL), 4, 0);
		rclose(s);
	}
	rclose(c);
	rclose(l);

	/* An AF_IB destination (the any address: the kernel resolves it to a
	 * local device, then finds no route over RoCE). */
	c = rsocket(AF_IB, SOCK_STREAM, 0);
	r = rconnect(c, (struct sockaddr *)&far, sizeof far);
	printf("rconnect AF_IB (blocking): %d %s\n", r, r ? en(errno) : "");
	rclose(c);
	/* Non-blocking: the failure comes in the call or through rpoll and
	 * SO_ERROR, depending on how fast the kernel answered. */
	c = rsocket(AF_IB, SOCK_STREAM, 0);
	check("F_SETFL O_NONBLOCK", rfcntl(c, F_SETFL, O_NONBLOCK), 0, 0);
	r = rconnect(c, (struct sockaddr *)&far, sizeof far);
	if (r == -1 && errno == EINPROGRESS) {
		struct pollfd p = { .fd = c, .events = POLLOUT };

		r = rpoll(&p, 1, 10000);
		printf("rpoll: %d\n", r > 0 ? 1 : r);
		r = getint(c, SOL_SOCKET, SO_ERROR);
		printf("rconnect AF_IB (non-blocking) ends: %s\n", en(r));
	} else {
		printf("rpoll: 1\n");
		printf("rconnect AF_IB (non-blocking) ends: %s\n", r ? en(errno) : "0");
	}
	rclose(c);
	return failed;
}

/* rsvc spin: see the top comment. */
static int t_spin(void)
{
	const char *v = getenv("RDMACM_VARIANT");
	int ours = v && !strcmp(v, "ours");
	unsigned long (*mine)(void) = (unsigned long (*)(void))dlsym(RTLD_DEFAULT, "clockcount_mine");
	unsigned long c0 = 0, c1;
	int g, l, s, i, st;
	pid_t pid;
	double per;
	char b;

	if (!mine) {
		printf("rsvc spin: run it with LD_PRELOAD=libclockcount.so\n");
		return 1;
	}
	pid = spawn_peer(24107, 2, &g);
	l = listener(24107, 0);
	s = raccept(l, NULL, NULL);
	if (s < 0) { printf("raccept: %s\n", en(errno)); return 1; }
	check("rrecv hello", rrecv(s, &b, 1, 0), 1, 0);
	if (write(g, "g", 1) != 1) return 1;
	for (i = 0; i < SPIN_MSGS; i++) {
		if (i == SPIN_SKIP)
			c0 = mine();
		if (rrecv(s, &b, 1, 0) != 1) {
			printf("rrecv of message %d: %s\n", i, en(errno));
			failed = 1;
			break;
		}
	}
	c1 = mine();
	per = (double)(c1 - c0) / (SPIN_MSGS - SPIN_SKIP);
	printf("clock reads per blocked rrecv (messages %d-%d, one every 3 ms): %.2f\n", SPIN_SKIP, SPIN_MSGS - 1, per);
	if (ours && per >= 1.5)
		failed = 1;
	close(g);
	waitpid(pid, &st, 0);
	rclose(s);
	rclose(l);
	return failed;
}

/* rsvc wakes: one pinging thread per stream; its sleeps (voluntary
 * switches) per round trip from round trip WAKE_SKIP on. */
struct pinger { int fd; double per; int bad; };

static void *ping(void *arg)
{
	struct pinger *p = arg;
	struct rusage u0 = { 0 }, u1;
	char m[64] = { 0 }, e[64];
	int i;

	for (i = 0; i < WAKE_RTS; i++) {
		if (i == WAKE_SKIP)
			getrusage(RUSAGE_THREAD, &u0);
		m[0] = (char)i;
		if (rsend(p->fd, m, sizeof m, 0) != sizeof m ||
		    rrecv(p->fd, e, sizeof e, MSG_WAITALL) != sizeof e || e[0] != m[0]) {
			printf("round trip %d: %s\n", i, en(errno));
			p->bad = 1;
			return NULL;
		}
	}
	getrusage(RUSAGE_THREAD, &u1);
	p->per = (double)(u1.ru_nvcsw - u0.ru_nvcsw) / (WAKE_RTS - WAKE_SKIP);
	return NULL;
}

/* rsvc wakes: how often a thread that sends and then waits for the echo
 * sleeps per round trip, WAKE_STREAMS such streams at once (the streams'
 * work delays each other's completions, as in `make bench`'s ping-pong).
 * When every send is signalled its completion, coming after the thread
 * fell asleep, wakes it before the echo does (upstream: about 1.8 sleeps);
 * ours signals a run of small sends once (src/rsocket/signal.rs), so the
 * echo is the one wake-up (about 1). */
static int t_wakes(void)
{
	const char *v = getenv("RDMACM_VARIANT");
	int ours = v && !strcmp(v, "ours");
	struct pinger p[WAKE_STREAMS] = { { 0 } };
	pthread_t t[WAKE_STREAMS];
	int g, l, i, st;
	pid_t pid;
	double per = 0;
	char b;

	pid = spawn_peer(24108, 3, &g);
	l = listener(24108, 0);
	for (i = 0; i < WAKE_STREAMS; i++) {
		p[i].fd = raccept(l, NULL, NULL);
		if (p[i].fd < 0) { printf("raccept: %s\n", en(errno)); return 1; }
		if (rrecv(p[i].fd, &b, 1, 0) != 1) { printf("rrecv hello: %s\n", en(errno)); return 1; }
		/* after the first stream the peer connects the others */
		if (i == 0 && write(g, "g", 1) != 1) return 1;
	}
	for (i = 0; i < WAKE_STREAMS; i++)
		pthread_create(&t[i], NULL, ping, &p[i]);
	for (i = 0; i < WAKE_STREAMS; i++) {
		pthread_join(t[i], NULL);
		failed |= p[i].bad;
		per += p[i].per / WAKE_STREAMS;
	}
	printf("sleeps per 64-byte round trip (%d streams, round trips %d-%d): %.2f\n", WAKE_STREAMS, WAKE_SKIP, WAKE_RTS - 1, per);
	if (ours && per >= 1.4)
		failed = 1;
	close(g);
	waitpid(pid, &st, 0);
	for (i = 0; i < WAKE_STREAMS; i++)
		rclose(p[i].fd);
	rclose(l);
	return failed;
}

/* rsvc chunks: a stream of large sends goes as large messages (see the
 * header); counted from the go byte to the last message received. */
static int t_chunks(void)
{
	const char *v = getenv("RDMACM_VARIANT");
	int ours = v && !strcmp(v, "ours");
	char *m = malloc(CHUNK_SIZE), b;
	int g, l, s, i, st, a, z;
	long r0, r1;
	double per;
	pid_t pid;

	if (!m)
		return 1;
	pid = spawn_peer(24109, 4, &g);
	l = listener(24109, 0);
	s = raccept(l, NULL, NULL);
	if (s < 0) { printf("raccept: %s\n", en(errno)); return 1; }
	if (rrecv(s, &b, 1, 0) != 1) { printf("rrecv hello: %s\n", en(errno)); return 1; }
	r0 = rxe0_counter("rdma_recvs");
	if (write(g, "g", 1) != 1)
		return 1;
	for (i = 0; i < CHUNK_MSGS; i++) {
		if (rrecv(s, m, CHUNK_SIZE, MSG_WAITALL) != CHUNK_SIZE) {
			printf("rrecv of message %d: %s\n", i, en(errno));
			failed = 1;
			break;
		}
		memcpy(&a, m, sizeof a);
		memcpy(&z, m + CHUNK_SIZE - sizeof z, sizeof z);
		if (a != i || z != i || m[CHUNK_SIZE / 2] != 0x5a) {
			printf("message %d arrived as %d..%d\n", i, a, z);
			failed = 1;
			break;
		}
	}
	r1 = rxe0_counter("rdma_recvs");
	if (r0 < 0 || r1 < 0) {
		printf("rxe0 has no rdma_recvs counter\n");
		failed = 1;
	}
	per = (double)(r1 - r0) / CHUNK_MSGS;
	printf("rxe0 receives with immediate data per 64 KiB message (%d sent back to back): %.2f\n", CHUNK_MSGS, per);
	if (ours && per >= 5.0)
		failed = 1;
	close(g);
	waitpid(pid, &st, 0);
	rclose(s);
	rclose(l);
	free(m);
	return failed;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, on_alarm);
	signal(SIGPIPE, SIG_IGN);
	alarm(50);
	if (!strcmp(m, "same")) return t_same();
	if (!strcmp(m, "nbconnect")) return t_nbconnect();
	if (!strcmp(m, "nbaccept")) return t_nbaccept();
	if (!strcmp(m, "disconnect")) return t_disconnect();
	if (!strcmp(m, "killrecv")) return t_killrecv();
	if (!strcmp(m, "keepalive")) return t_keepalive();
	if (!strcmp(m, "opts")) return t_opts();
	if (!strcmp(m, "conf")) return t_conf();
	if (!strcmp(m, "afib")) return t_afib();
	if (!strcmp(m, "spin")) return t_spin();
	if (!strcmp(m, "wakes")) return t_wakes();
	if (!strcmp(m, "chunks")) return t_chunks();
	fprintf(stderr, "usage: rsvc same|nbconnect|nbaccept|disconnect|killrecv|spin|wakes|chunks|keepalive|opts|conf|afib\n");
	return 2;
}
