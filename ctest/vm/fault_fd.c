/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * fault_fd - file-descriptor exhaustion (faults): RLIMIT_NOFILE lowered while creating
 * event channels, synchronous ids (each has its own channel), rsockets, and before the library's
 * first call. Every scenario runs in its own child (fork, 60 s alarm) and prints a transcript
 * comparable between the two libraries (--cmp): the errno of the first failure, and whether the
 * library is usable again once descriptors are freed. How many objects fit under the limit
 * depends on how many descriptors each library keeps for itself, so the count goes to stderr.
 *
 *   fault_fd [scenario...]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include "scenarios.h"
#include <rdma/rsocket.h>
#include "common.h"

#define MAXOBJ 4096

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own descriptor */
}
static void limit(rlim_t n)
{
	struct rlimit r;
	getrlimit(RLIMIT_NOFILE, &r);
	r.rlim_cur = n;
	if (setrlimit(RLIMIT_NOFILE, &r))
		perror("setrlimit");
}
static void unlimit(void)
{
	struct rlimit r;
	getrlimit(RLIMIT_NOFILE, &r);
	r.rlim_cur = r.rlim_max > 1024 ? 1024 : r.rlim_max;
	setrlimit(RLIMIT_NOFILE, &r);
}

static struct rdma_event_channel *chs[MAXOBJ];
static struct rdma_cm_id *ids[MAXOBJ];
static int socks[MAXOBJ];

static void channels(void)
{
	/* warm the library up (devices opened), then allow 32 more descriptors */
	rdma_destroy_event_channel(rdma_create_event_channel());
	limit(open_fds() + 32);
	int n = 0;
	errno = 0;
	while (n < MAXOBJ && (chs[n] = rdma_create_event_channel()))
		n++;
	printf("channels: created some=%s, then NULL errno=%s\n", n > 0 ? "yes" : "no", en(errno));
	fprintf(stderr, "channels: %d created under a limit of 32 free descriptors\n", n);
	for (int i = 0; i < n; i++)
		rdma_destroy_event_channel(chs[i]);
	struct rdma_event_channel *c = rdma_create_event_channel();
	printf("channels: after freeing them: %s\n", c ? "ok" : en(errno));
	if (c)
		rdma_destroy_event_channel(c);
}
static void sync_ids(void)
{
	struct rdma_cm_id *id;
	if (!rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		rdma_destroy_id(id);
	limit(open_fds() + 32);
	int n = 0, r = 0;
	errno = 0;
	while (n < MAXOBJ && !(r = rdma_create_id(NULL, &ids[n], NULL, RDMA_PS_TCP)))
		n++;
	printf("sync_ids: created some=%s, then ret=%d errno=%s\n", n > 0 ? "yes" : "no", r, en(errno));
	fprintf(stderr, "sync_ids: %d created\n", n);
	for (int i = 0; i < n; i++)
		rdma_destroy_id(ids[i]);
	r = rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP);
	printf("sync_ids: after freeing them: %s\n", r ? en(errno) : "ok");
	/* and a usable one: bind it to rxe0 */
	if (!r) {
		struct sockaddr_in a = { .sin_family = AF_INET };
		inet_pton(AF_INET, "192.0.2.1", &a.sin_addr);
		r = rdma_bind_addr(id, (struct sockaddr *)&a);
		printf("sync_ids: bind after recovery: %s\n", r ? en(errno) : "ok");
		rdma_destroy_id(id);
	}
}
static void async_ids(void)
{
	struct rdma_event_channel *c = rdma_create_event_channel();
	if (!c) {
		printf("async_ids: channel: %s\n", en(errno));
		return;
	}
	limit(open_fds());
	int n = 0, r = 0;
	while (n < 256 && !(r = rdma_create_id(c, &ids[n], NULL, RDMA_PS_TCP)))
		n++;
	printf("async_ids: with no free descriptor, %d of 256 ids on one channel%s%s\n", n, r ? ", then errno=" : "",
	       r ? en(errno) : "");
	for (int i = 0; i < n; i++)
		rdma_destroy_id(ids[i]);
	unlimit();
	rdma_destroy_event_channel(c);
}
static void first_call(void)
{
	/* no free descriptor before the library's first call */
	limit(open_fds());
	struct rdma_event_channel *c = rdma_create_event_channel();
	printf("first_call: no free descriptor: %s\n", c ? "ok" : en(errno));
	if (c)
		rdma_destroy_event_channel(c);
	unlimit();
	c = rdma_create_event_channel();
	printf("first_call: limit restored: %s\n", c ? "ok" : en(errno));
	if (c)
		rdma_destroy_event_channel(c);
}
static void getaddrinfo_nofd(void)
{
	struct rdma_addrinfo *r = NULL, h = { .ai_flags = RAI_NUMERICHOST };
	/* the library initialised first (with no descriptor at the first call, both fail: first_call) */
	rdma_destroy_event_channel(rdma_create_event_channel());
	limit(open_fds());
	errno = 0;
	int ret = rdma_getaddrinfo("192.0.2.2", "7471", &h, &r);
	printf("getaddrinfo: no free descriptor: ret=%d errno=%s\n", ret, ret ? en(errno) : "0");
	if (!ret)
		rdma_freeaddrinfo(r);
	unlimit();
	r = NULL;
	ret = rdma_getaddrinfo("192.0.2.2", "7471", &h, &r);
	printf("getaddrinfo: limit restored: ret=%d\n", ret);
	if (!ret)
		rdma_freeaddrinfo(r);
}
static void rsockets(void)
{
	int s = rsocket(AF_INET, SOCK_STREAM, 0);
	if (s >= 0)
		rclose(s);
	limit(open_fds() + 16);
	int n = 0;
	errno = 0;
	while (n < MAXOBJ && (socks[n] = rsocket(AF_INET, SOCK_STREAM, 0)) >= 0)
		n++;
	printf("rsockets: created some=%s, then -1 errno=%s\n", n > 0 ? "yes" : "no", en(errno));
	fprintf(stderr, "rsockets: %d created\n", n);
	for (int i = 0; i < n; i++)
		rclose(socks[i]);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	printf("rsockets: after closing them: %s\n", s >= 0 ? "ok" : en(errno));
	if (s >= 0)
		rclose(s);
}

static const struct scenario scen[] = { { "first_call", first_call }, { "channels", channels }, { "sync_ids", sync_ids },
	     { "async_ids", async_ids }, { "getaddrinfo", getaddrinfo_nofd }, { "rsockets", rsockets } };

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	return run_scenarios(scen, sizeof scen / sizeof scen[0], argc, argv);
}
