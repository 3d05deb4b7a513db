/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * epoll_rules - the kernel's epoll rules as a TCP server sees them, printed as a transcript:
 * run once on kernel sockets and kernel epoll, once under librspreload (rsockets in repoll
 * sets); the two transcripts must be the same (vm/suite.d/preload.sh, preload_epoll_rules).
 * A listener, a client and the accepted socket in this one process over 192.0.2.1.
 * Cases: error numbers of epoll_ctl (EEXIST, ENOENT, EBADF, EINVAL, EPERM, EPOLLEXCLUSIVE's
 * EINVAL), level-triggered readiness after a partial read, EPOLLET, EPOLLONESHOT, a closed
 * socket leaving its sets (its number, reused by the next accepted socket, is added afresh
 * and no stale event is reported), two sets watching one socket.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

static struct sockaddr_in sa;

/* "0" for a call that succeeded, else the name of its errno. */
static const char *ren(int r)
{
	return r == 0 ? "0" : en(errno);
}

static void ctl(const char *what, int ep, int op, int fd, unsigned ev, unsigned long long data)
{
	struct epoll_event e;

	memset(&e, 0, sizeof e);
	e.events = ev;
	e.data.u64 = data;
	printf("ctl %-28s -> %s\n", what, ren(epoll_ctl(ep, op, fd, &e)));
}

static void wait_(const char *what, int ep, int timeout)
{
	struct epoll_event evs[8];
	int n, i;

	n = epoll_wait(ep, evs, 8, timeout);
	printf("wait %-27s -> %d", what, n);
	for (i = 0; i < n; i++)
		printf(" {0x%x %llu}", evs[i].events & (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP),
		       (unsigned long long)evs[i].data.u64);
	printf("\n");
}

static int connected(int lis, int *cli)
{
	int acc;

	*cli = socket(AF_INET, SOCK_STREAM, 0);
	if (*cli < 0 || connect(*cli, (struct sockaddr *)&sa, sizeof sa)) {
		printf("FAIL connect: errno %d\n", errno);
		exit(1);
	}
	acc = accept4(lis, NULL, NULL, SOCK_NONBLOCK);
	if (acc < 0) {
		printf("FAIL accept4: errno %d\n", errno);
		exit(1);
	}
	return acc;
}

static void put(int fd, const char *s)
{
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s)) {
		printf("FAIL write: errno %d\n", errno);
		exit(1);
	}
	usleep(200000);
}

static int get(int fd, int n)
{
	char b[256];

	return (int)read(fd, b, n);
}

int main(int argc, char **argv)
{
	int lis, cli, acc, cli2, acc2, ep, ep2, file, other, one = 1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons(argc > 1 ? atoi(argv[1]) : 5310);
	inet_pton(AF_INET, "192.0.2.1", &sa.sin_addr);
	lis = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lis, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (lis < 0 || bind(lis, (struct sockaddr *)&sa, sizeof sa) || listen(lis, 4)) {
		printf("FAIL listen: errno %d\n", errno);
		return 1;
	}
	acc = connected(lis, &cli);
	ep = epoll_create1(EPOLL_CLOEXEC);
	ep2 = epoll_create1(0);
	file = open("/etc/hostname", O_RDONLY);
	other = socket(AF_INET, SOCK_STREAM, 0);
	printf("set up: %s\n", ep >= 0 && ep2 >= 0 && file >= 0 && other >= 0 ? "yes" : "no");

	ctl("ADD acc IN", ep, EPOLL_CTL_ADD, acc, EPOLLIN, 1);
	ctl("ADD acc IN again", ep, EPOLL_CTL_ADD, acc, EPOLLIN, 1);
	ctl("MOD a non-member socket", ep, EPOLL_CTL_MOD, other, EPOLLIN, 2);
	ctl("DEL a non-member socket", ep, EPOLL_CTL_DEL, other, 0, 0);
	ctl("ADD -1", ep, EPOLL_CTL_ADD, -1, EPOLLIN, 0);
	ctl("ADD the set to itself", ep, EPOLL_CTL_ADD, ep, EPOLLIN, 0);
	ctl("ADD a regular file", ep, EPOLL_CTL_ADD, file, EPOLLIN, 0);
	ctl("ADD EXCLUSIVE|ONESHOT", ep, EPOLL_CTL_ADD, other, EPOLLIN | EPOLLEXCLUSIVE | EPOLLONESHOT, 2);
	ctl("ADD EXCLUSIVE|RDHUP", ep, EPOLL_CTL_ADD, other, EPOLLIN | EPOLLEXCLUSIVE | EPOLLRDHUP, 2);
	ctl("MOD acc EXCLUSIVE", ep, EPOLL_CTL_MOD, acc, EPOLLIN | EPOLLEXCLUSIVE, 1);
	wait_("idle", ep, 0);

	put(cli, "0123456789");
	wait_("10 bytes", ep, 1000);
	printf("read 3 -> %d\n", get(acc, 3));
	wait_("after a partial read", ep, 1000);
	printf("read the rest -> %d\n", get(acc, 64));
	wait_("drained", ep, 0);

	ctl("MOD acc IN|ET", ep, EPOLL_CTL_MOD, acc, EPOLLIN | EPOLLET, 3);
	put(cli, "abc");
	wait_("ET, new data", ep, 1000);
	wait_("ET, nothing new", ep, 100);
	printf("read 1 -> %d\n", get(acc, 1));
	wait_("ET, after a partial read", ep, 100);
	put(cli, "d");
	wait_("ET, more data", ep, 1000);
	printf("read the rest -> %d\n", get(acc, 64));

	ctl("MOD acc IN|ONESHOT", ep, EPOLL_CTL_MOD, acc, EPOLLIN | EPOLLONESHOT, 4);
	put(cli, "e");
	wait_("ONESHOT, data", ep, 1000);
	wait_("ONESHOT, disarmed", ep, 100);
	ctl("ADD acc (still a member)", ep, EPOLL_CTL_ADD, acc, EPOLLIN, 4);
	ctl("MOD acc IN|ONESHOT again", ep, EPOLL_CTL_MOD, acc, EPOLLIN | EPOLLONESHOT, 5);
	wait_("ONESHOT, re-armed", ep, 1000);
	printf("read -> %d\n", get(acc, 64));

	ctl("MOD acc IN", ep, EPOLL_CTL_MOD, acc, EPOLLIN, 6);
	ctl("ADD acc IN to a second set", ep2, EPOLL_CTL_ADD, acc, EPOLLIN, 7);
	put(cli, "f");
	wait_("first set", ep, 1000);
	wait_("second set", ep2, 1000);
	printf("read -> %d\n", get(acc, 64));

	/* the accepted socket closed: it leaves both sets; the next gets its number */
	close(acc);
	close(cli);
	usleep(200000);
	wait_("acc closed", ep, 100);
	acc2 = connected(lis, &cli2);
	/* (on stderr: under the preload library the numbers come in another order) */
	fprintf(stderr, "next accepted socket has the closed one's number: %s\n", acc2 == acc ? "yes" : "no");
	wait_("new socket, not a member", ep, 100);
	ctl("MOD new socket", ep, EPOLL_CTL_MOD, acc2, EPOLLIN, 8);
	ctl("ADD new socket", ep, EPOLL_CTL_ADD, acc2, EPOLLIN, 8);
	ctl("ADD new socket, second set", ep2, EPOLL_CTL_ADD, acc2, EPOLLIN, 9);
	put(cli2, "g");
	wait_("new socket", ep, 1000);
	wait_("new socket, second set", ep2, 1000);
	close(acc2);
	close(cli2);
	close(lis);
	printf("done\n");
	return 0;
}
