/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * rclose_wait - an rsocket closed while another thread sleeps on it.
 *
 * Two connected pairs run in this one process over rxe0 (192.0.2.1,
 * loopback).  Case 1: a thread blocks in rrecv on an accepted rsocket that
 * never gets data; the main thread rcloses that rsocket.  Case 2: a thread
 * blocks in rpoll(POLLIN, no timeout) on a client rsocket; the main thread
 * rcloses it.  The sleeper must come back (within 10 s) instead of hanging
 * or touching freed state; what it returns is printed.  Exit 0 when both
 * sleepers came back, 2 when one hung.
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
#include <rdma/rsocket.h>
#include "common.h"

#define ADDR "192.0.2.1"
#define PORT 23457

static struct sockaddr_in sin_addr;
static int cli = -1, cli_ret = -1;


static void *client(void *arg)
{
	(void)arg;
	cli = rs_connected(&sin_addr, &cli_ret);
	return NULL;
}

/* A connected pair: *a accepted on lis, *c the client. */
static void pair(int lis, int *a, int *c)
{
	pthread_t th;

	cli = -1;
	cli_ret = -1;
	if (pthread_create(&th, NULL, client, NULL))
		die_errno("pthread_create");
	*a = raccept(lis, NULL, NULL);
	if (*a < 0)
		die_errno("raccept");
	pthread_join(th, NULL);
	if (cli < 0 || cli_ret)
		die_errno("rconnect");
	*c = cli;
}

static int target;
static long ret;
static int err;
static short revents;

static void *do_rrecv(void *arg)
{
	char buf[16];

	(void)arg;
	ret = rrecv(target, buf, sizeof buf, 0);
	err = ret < 0 ? errno : 0;
	return NULL;
}

static void *do_rpoll(void *arg)
{
	struct pollfd p = { .fd = target, .events = POLLIN };

	(void)arg;
	ret = rpoll(&p, 1, -1);
	err = ret < 0 ? errno : 0;
	revents = p.revents;
	return NULL;
}

/* Runs fn on fd in a thread, rcloses fd after 300 ms, waits 10 s for the thread. */
static int sleeper(const char *what, void *(*fn)(void *), int fd)
{
	struct timespec ts;
	pthread_t th;
	int r;

	target = fd;
	ret = -2;
	err = 0;
	revents = 0;
	if (pthread_create(&th, NULL, fn, NULL))
		die_errno("pthread_create");
	usleep(300 * 1000);
	r = rclose(fd);
	printf("%s: rclose -> %d\n", what, r);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	if (pthread_timedjoin_np(th, NULL, &ts)) {
		printf("%s: the sleeper did not come back within 10 s\n", what);
		return 0;
	}
	if (fn == do_rpoll)
		printf("%s: rpoll -> %ld errno %s revents 0x%x\n", what, ret, en(err), revents);
	else
		printf("%s: rrecv -> %ld errno %s\n", what, ret, en(err));
	return 1;
}

int main(void)
{
	int lis, a1, c1, a2, c2, ok = 1;
	const char *what;

	setvbuf(stdout, NULL, _IOLBF, 0);
	lis = rs_listener(ADDR, PORT, &sin_addr, &what);
	if (lis < 0)
		die_errno(what);
	pair(lis, &a1, &c1);
	pair(lis, &a2, &c2);
	printf("connected\n");

	ok &= sleeper("rrecv on the accepted side", do_rrecv, a1);
	ok &= sleeper("rpoll on the client side", do_rpoll, c2);
	if (!ok) {
		fflush(stdout);
		_exit(2);
	}
	printf("done\n");
	fflush(stdout);
	/* The other ends are left to process exit. */
	_exit(0);
}
