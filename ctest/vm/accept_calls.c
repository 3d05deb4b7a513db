/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * accept_calls - what a server does between accept and its first byte, printed as a
 * transcript: run once on kernel sockets, once under librspreload; the two transcripts must
 * be the same (vm/suite.d/preload.sh, preload_accept_calls). A listener, a client and the
 * accepted socket in this one process over 192.0.2.1:PORT (argv[1]; argv[2] another address).
 * Cases, on the accepted socket ("acc") and the connected one ("con"): accept4's
 * SOCK_NONBLOCK and SOCK_CLOEXEC, fcntl's F_GETFL/F_SETFL and F_GETFD, ioctl(FIONBIO) on and
 * off (a receive without data then fails with EAGAIN, or waits), the options a server
 * queries (SO_TYPE, SO_DOMAIN, SO_PROTOCOL, SO_ERROR, SO_KEEPALIVE, TCP_NODELAY, the buffer
 * sizes; an option a socket does not know: 0 or ENOPROTOOPT), getsockname/getpeername,
 * sendfile from a file (with an offset and at the file's position), shutdown(SHUT_WR) and the
 * peer's end of file, data both ways after it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

/* "0" for a call that succeeded, else the name of its errno. */
static const char *ren(int r)
{
	return r >= 0 ? "0" : en(errno);
}

static void fail(const char *what)
{
	printf("FAIL %s: errno %d\n", what, errno);
	exit(1);
}

static void flags(const char *who, int fd)
{
	int fl = fcntl(fd, F_GETFL), fd_fl = fcntl(fd, F_GETFD);

	printf("%s fcntl: nonblock %d cloexec %d\n", who, fl >= 0 && (fl & O_NONBLOCK) != 0,
	       fd_fl >= 0 && (fd_fl & FD_CLOEXEC) != 0);
}

/* a receive with no data waiting: EAGAIN when non-blocking; a blocking one is shown not to
 * return with poll (no readiness) instead of waiting in it */
static void empty_recv(const char *who, int fd)
{
	char c;
	int fl = fcntl(fd, F_GETFL);
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (fl & O_NONBLOCK)
		printf("%s recv without data -> %s\n", who, ren((int)recv(fd, &c, 1, 0)));
	else
		printf("%s poll without data -> %d\n", who, poll(&p, 1, 100));
}

static void opt_int(const char *who, int fd, int level, int name, const char *nm, int exact)
{
	int v = -1, r;
	socklen_t l = sizeof v;

	r = getsockopt(fd, level, name, &v, &l);
	if (r)
		printf("%s getsockopt %s -> %s\n", who, nm, ren(r));
	else if (exact)
		printf("%s getsockopt %s -> %d (len %u)\n", who, nm, v, (unsigned)l);
	else
		printf("%s getsockopt %s -> %s (len %u)\n", who, nm, v > 0 ? "positive" : "not positive",
		       (unsigned)l);
}

static void opts(const char *who, int fd)
{
	int one = 1, v = -1, r;
	socklen_t l = sizeof v;

	opt_int(who, fd, SOL_SOCKET, SO_TYPE, "SO_TYPE", 1);
	opt_int(who, fd, SOL_SOCKET, SO_DOMAIN, "SO_DOMAIN", 1);
	opt_int(who, fd, SOL_SOCKET, SO_PROTOCOL, "SO_PROTOCOL", 1);
	opt_int(who, fd, SOL_SOCKET, SO_ERROR, "SO_ERROR", 1);
	opt_int(who, fd, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", 1);
	opt_int(who, fd, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", 1);
	opt_int(who, fd, SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF", 0);
	opt_int(who, fd, SOL_SOCKET, SO_SNDBUF, "SO_SNDBUF", 0);
	printf("%s setsockopt TCP_NODELAY 1 -> %s\n", who,
	       ren(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one)));
	opt_int(who, fd, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", 1);
	printf("%s setsockopt SO_KEEPALIVE 1 -> %s\n", who,
	       ren(setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one)));
	opt_int(who, fd, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", 1);
	/* one a socket may not know: the kernel answers it, rsockets do not; either way the
	 * caller sees an answer or ENOPROTOOPT, never another error */
	r = getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, &l);
	printf("%s getsockopt SO_RCVLOWAT -> %s\n", who,
	       r == 0 || errno == ENOPROTOOPT ? "answered or ENOPROTOOPT" : ren(r));
}

static void names(int acc, int con, int port)
{
	struct sockaddr_in al, ap, cl, cp;
	socklen_t l1 = sizeof al, l2 = sizeof ap, l3 = sizeof cl, l4 = sizeof cp;
	int r1 = getsockname(acc, (struct sockaddr *)&al, &l1);
	int r2 = getpeername(acc, (struct sockaddr *)&ap, &l2);
	int r3 = getsockname(con, (struct sockaddr *)&cl, &l3);
	int r4 = getpeername(con, (struct sockaddr *)&cp, &l4);
	char a[INET_ADDRSTRLEN] = "?", b[INET_ADDRSTRLEN] = "?";

	printf("names -> %d %d %d %d, lengths %u %u %u %u\n", r1, r2, r3, r4, (unsigned)l1,
	       (unsigned)l2, (unsigned)l3, (unsigned)l4);
	inet_ntop(AF_INET, &al.sin_addr, a, sizeof a);
	inet_ntop(AF_INET, &ap.sin_addr, b, sizeof b);
	printf("acc local %s:%s peer %s, family %d\n", a, ntohs(al.sin_port) == port ? "PORT" : "other",
	       b, al.sin_family);
	printf("acc local == con peer: %s; acc peer == con local: %s\n",
	       al.sin_addr.s_addr == cp.sin_addr.s_addr && al.sin_port == cp.sin_port ? "yes" : "no",
	       ap.sin_addr.s_addr == cl.sin_addr.s_addr && ap.sin_port == cl.sin_port ? "yes" : "no");
}

/* reads exactly n bytes (blocking socket) into b */
static size_t read_all(int fd, char *b, size_t n)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		r = read(fd, b + got, n - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

#define FILE_LEN 300000

/* sendfile of n bytes to acc in pieces of at most 50,000 (each read at con before the next,
 * so neither side's buffer need hold more), from *off or (off NULL) the file's position */
static size_t send_piecewise(int acc, int con, int f, off_t *off, size_t n, char *back)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		r = sendfile(acc, f, off, n - got < 50000 ? n - got : 50000);
		if (r < 0)
			fail("sendfile");
		if (r == 0 || read_all(con, back + got, (size_t)r) != (size_t)r)
			break;
		got += (size_t)r;
	}
	return got;
}

static void send_file(int acc, int con)
{
	static char data[FILE_LEN], back[FILE_LEN];
	char path[] = "/tmp/accept_calls.XXXXXX";
	int f = mkstemp(path), i;
	off_t off = 1000;
	size_t got;

	if (f < 0)
		fail("mkstemp");
	unlink(path);
	for (i = 0; i < FILE_LEN; i++)
		data[i] = (char)(i * 7 + i / 251);
	if (write(f, data, FILE_LEN) != FILE_LEN)
		fail("write file");
	/* with an offset: bytes 1000..100999; the file position stays */
	got = send_piecewise(acc, con, f, &off, 100000, back);
	printf("sendfile offset: %zu bytes, offset now %lld, file position %lld, data %s\n", got,
	       (long long)off, (long long)lseek(f, 0, SEEK_CUR),
	       got == 100000 && !memcmp(back, data + 1000, 100000) ? "same" : "differs");
	/* at the file's position: from 5000 to the end (the last call meets the end of file) */
	lseek(f, 5000, SEEK_SET);
	got = send_piecewise(acc, con, f, NULL, FILE_LEN, back);
	printf("sendfile position: %zu bytes, file position %lld, data %s\n", got,
	       (long long)lseek(f, 0, SEEK_CUR),
	       got == FILE_LEN - 5000 && !memcmp(back, data + 5000, FILE_LEN - 5000) ? "same" : "differs");
	close(f);
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa;
	int lis, con, acc, on = 1, off = 0, fl;
	char buf[64];
	int port = argc > 1 ? atoi(argv[1]) : 5320;

	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	inet_pton(AF_INET, argc > 2 ? argv[2] : "192.0.2.1", &sa.sin_addr);
	lis = socket(AF_INET, SOCK_STREAM, 0);
	if (lis < 0 || bind(lis, (struct sockaddr *)&sa, sizeof sa) || listen(lis, 4))
		fail("listen");
	opt_int("lis", lis, SOL_SOCKET, SO_TYPE, "SO_TYPE", 1);
	con = socket(AF_INET, SOCK_STREAM, 0);
	if (con < 0 || connect(con, (struct sockaddr *)&sa, sizeof sa))
		fail("connect");
	flags("con", con);
	acc = accept4(lis, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (acc < 0)
		fail("accept4");
	printf("accept4(SOCK_NONBLOCK|SOCK_CLOEXEC)\n");
	flags("acc", acc);
	empty_recv("acc", acc);
	/* fcntl: back to blocking */
	fl = fcntl(acc, F_GETFL);
	printf("acc fcntl F_SETFL without O_NONBLOCK -> %s\n", ren(fcntl(acc, F_SETFL, fl & ~O_NONBLOCK)));
	flags("acc", acc);
	empty_recv("acc", acc);
	/* ioctl(FIONBIO) on, then off, on both sockets */
	printf("acc ioctl FIONBIO 1 -> %s\n", ren(ioctl(acc, FIONBIO, &on)));
	flags("acc", acc);
	empty_recv("acc", acc);
	printf("acc ioctl FIONBIO 0 -> %s\n", ren(ioctl(acc, FIONBIO, &off)));
	flags("acc", acc);
	printf("con ioctl FIONBIO 1 -> %s\n", ren(ioctl(con, FIONBIO, &on)));
	flags("con", con);
	empty_recv("con", con);
	printf("con ioctl FIONBIO 0 -> %s\n", ren(ioctl(con, FIONBIO, &off)));
	flags("con", con);
	/* FD_CLOEXEC stays the program descriptor's */
	printf("con ioctl FIOCLEX -> %s\n", ren(ioctl(con, FIOCLEX)));
	flags("con", con);
	printf("con fcntl F_SETFD 0 -> %s\n", ren(fcntl(con, F_SETFD, 0)));
	flags("con", con);
	opts("acc", acc);
	opts("con", con);
	names(acc, con, port);
	/* the first bytes: con to acc, then acc to con */
	if (write(con, "hello", 5) != 5)
		fail("write con");
	printf("acc read -> %zu bytes\n", read_all(acc, buf, 5));
	if (write(acc, "world!", 6) != 6)
		fail("write acc");
	printf("con read -> %zu bytes\n", read_all(con, buf, 6));
	send_file(acc, con);
	/* shutdown: con stops writing; acc sees the end of file and still writes to con */
	printf("con shutdown SHUT_WR -> %s\n", ren(shutdown(con, SHUT_WR)));
	printf("acc read after the peer's shutdown -> %zd\n", read(acc, buf, sizeof buf));
	printf("acc write after the peer's shutdown -> %zd\n", write(acc, "late", 4));
	printf("con read -> %zu bytes\n", read_all(con, buf, 4));
	printf("acc shutdown SHUT_RDWR -> %s\n", ren(shutdown(acc, SHUT_RDWR)));
	printf("con read after the peer's shutdown -> %zd\n", read(con, buf, sizeof buf));
	close(acc);
	close(con);
	close(lis);
	printf("done\n");
	return 0;
}
