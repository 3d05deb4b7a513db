/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * cancel_dl - librdmacm loaded and unloaded in a loop, as UCX and libfabric load their rdmacm
 * modules.  Not linked with librdmacm: each cycle dlopen()s "librdmacm.so.1" (the
 * variant's, through LD_LIBRARY_PATH), uses it, dlclose()s it.
 *
 *   cancel_dl [-u|-U] [-n N] [-k LIST] [-K LIST] case...  (cancel.h: runner, options, output)
 *
 *   dl_plain    an event channel and an id on it resolving 192.0.2.1 (its event read)
 *   dl_rsocket  rsocket, rbind, rlisten, rclose (a listening rsocket: the service thread)
 *   dl_rsconn   an rsocket connection over rxe0 (192.0.2.1) in this process, a byte over it,
 *               both ends and the listener closed
 *   dl_resolve  rdma_resolve_addrinfo of "localhost" on an asynchronous id (ours: a name
 *               lookup thread), its event, rdma_query_addrinfo
 * The first line says the calls worked; the xN line (N more cycles) the descriptor and thread
 * growth.  Whether the library was unloaded by dlclose (dlopen(RTLD_NOLOAD) finds it no more)
 * goes to stderr, or with -u / -U into the lines (-u: a run fails when it stayed loaded; -U:
 * when it was unloaded, for a library linked -z nodelete); with either the test waits up to 1 s
 * before dlclose for the threads the cycle started to end.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include "cancel.h"

#define LIB "librdmacm.so.1"
static int unload_mode;

static struct {
	void *h;
	struct rdma_event_channel *(*create_event_channel)(void);
	void (*destroy_event_channel)(struct rdma_event_channel *);
	int (*create_id)(struct rdma_event_channel *, struct rdma_cm_id **, void *, enum rdma_port_space);
	int (*destroy_id)(struct rdma_cm_id *);
	int (*resolve_addr)(struct rdma_cm_id *, struct sockaddr *, struct sockaddr *, int);
	int (*get_cm_event)(struct rdma_event_channel *, struct rdma_cm_event **);
	int (*ack_cm_event)(struct rdma_cm_event *);
	int (*resolve_addrinfo)(struct rdma_cm_id *, const char *, const char *, const struct rdma_addrinfo *);
	int (*query_addrinfo)(struct rdma_cm_id *, struct rdma_addrinfo **);
	void (*freeaddrinfo)(struct rdma_addrinfo *);
	int (*rsocket)(int, int, int);
	int (*rbind)(int, const struct sockaddr *, socklen_t);
	int (*rlisten)(int, int);
	int (*raccept)(int, struct sockaddr *, socklen_t *);
	int (*rconnect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*rsend)(int, const void *, size_t, int);
	ssize_t (*rrecv)(int, void *, size_t, int);
	int (*rsetsockopt)(int, int, int, const void *, socklen_t);
	int (*rclose)(int);
} L;

static struct sockaddr_in sa4(int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "192.0.2.1", &s.sin_addr);
	return s;
}
#define SA(x) ((struct sockaddr *)&(x))

static int load(char *o, size_t n)
{
	step("dlopen");
	if (!(L.h = dlopen(LIB, RTLD_NOW | RTLD_LOCAL))) {
		snprintf(o, n, "dlopen: %s", dlerror());
		return 0;
	}
#define S(f, name) (*(void **)&L.f = dlsym(L.h, name))
	S(create_event_channel, "rdma_create_event_channel");
	S(destroy_event_channel, "rdma_destroy_event_channel");
	S(create_id, "rdma_create_id");
	S(destroy_id, "rdma_destroy_id");
	S(resolve_addr, "rdma_resolve_addr");
	S(get_cm_event, "rdma_get_cm_event");
	S(ack_cm_event, "rdma_ack_cm_event");
	S(resolve_addrinfo, "rdma_resolve_addrinfo");
	S(query_addrinfo, "rdma_query_addrinfo");
	S(freeaddrinfo, "rdma_freeaddrinfo");
	S(rsocket, "rsocket");
	S(rbind, "rbind");
	S(rlisten, "rlisten");
	S(raccept, "raccept");
	S(rconnect, "rconnect");
	S(rsend, "rsend");
	S(rrecv, "rrecv");
	S(rsetsockopt, "rsetsockopt");
	S(rclose, "rclose");
#undef S
	return 1;
}

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	if (poll(&p, 1, ms) != 1 || L.get_cm_event(ch, &e))
		return NULL;
	return e;
}

static int use_plain(char *o, size_t n)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct sockaddr_in d = sa4(7);
	step("channel, id, rdma_resolve_addr");
	if (!(ch = L.create_event_channel()) || L.create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    L.resolve_addr(id, NULL, SA(d), 2000)) {
		snprintf(o, n, "channel/id/resolve: %s", strerrorname_np(errno));
		return 0;
	}
	struct rdma_cm_event *e = next_event(ch, 5000);
	int ok = e && e->event == RDMA_CM_EVENT_ADDR_RESOLVED;
	if (e)
		L.ack_cm_event(e);
	L.destroy_id(id);
	L.destroy_event_channel(ch);
	snprintf(o, n, "%s", ok ? "an id on a channel resolved" : "no ADDR_RESOLVED event");
	return ok;
}

static int listener(int port)
{
	struct sockaddr_in a = sa4(port);
	int one = 1, l = L.rsocket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		return -1;
	L.rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (L.rbind(l, SA(a), sizeof a) || L.rlisten(l, 8)) {
		L.rclose(l);
		return -1;
	}
	return l;
}
static int use_rsocket(char *o, size_t n)
{
	step("rsocket, rbind, rlisten, rclose");
	int l = listener(7951);
	if (l < 0) {
		snprintf(o, n, "listening rsocket: %s", strerrorname_np(errno));
		return 0;
	}
	int ok = !L.rclose(l);
	snprintf(o, n, "%s", ok ? "a listening rsocket closed" : "rclose failed");
	return ok;
}

static int cli_fd = -1, cli_ret = -1;
static void *t_cli(void *a)
{
	struct sockaddr_in d = sa4(7952);
	(void)a;
	cli_ret = -1;
	if ((cli_fd = L.rsocket(AF_INET, SOCK_STREAM, 0)) >= 0)
		cli_ret = L.rconnect(cli_fd, SA(d), sizeof d);
	return NULL;
}
static int use_rsconn(char *o, size_t n)
{
	pthread_t t;
	char x = 'x';
	step("an rsocket connection");
	int l = listener(7952);
	if (l < 0) {
		snprintf(o, n, "listening rsocket: %s", strerrorname_np(errno));
		return 0;
	}
	pthread_create(&t, NULL, t_cli, NULL);
	int s = L.raccept(l, NULL, NULL);
	pthread_join(t, NULL);
	int ok = s >= 0 && !cli_ret;
	step("a byte over it");
	ok = ok && L.rsend(cli_fd, &x, 1, 0) == 1 && L.rrecv(s, &x, 1, 0) == 1;
	step("rclose");
	if (s >= 0)
		ok &= !L.rclose(s);
	if (cli_fd >= 0)
		ok &= !L.rclose(cli_fd);
	ok &= !L.rclose(l);
	snprintf(o, n, "%s", ok ? "an rsocket connection carried a byte, closed" : "the rsocket connection failed");
	return ok;
}

static int use_resolve(char *o, size_t n)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_addrinfo *ai;
	if (!L.resolve_addrinfo) {
		snprintf(o, n, "no rdma_resolve_addrinfo in this library");
		return 1;
	}
	step("rdma_resolve_addrinfo");
	if (!(ch = L.create_event_channel()) || L.create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    L.resolve_addrinfo(id, "localhost", "7", NULL)) {
		snprintf(o, n, "channel/id/rdma_resolve_addrinfo: %s", strerrorname_np(errno));
		return 0;
	}
	struct rdma_cm_event *e = next_event(ch, 5000);
	int ok = e && e->event == RDMA_CM_EVENT_ADDRINFO_RESOLVED;
	if (e)
		L.ack_cm_event(e);
	if (ok && !L.query_addrinfo(id, &ai))
		L.freeaddrinfo(ai);
	L.destroy_id(id);
	L.destroy_event_channel(ch);
	snprintf(o, n, "%s", ok ? "a name resolved (ADDRINFO_RESOLVED)" : "no ADDRINFO_RESOLVED event");
	return ok;
}

/* one cycle: dlopen, use, dlclose, and whether it was unloaded */
static int cycle(const char *name, int (*use)(char *, size_t), char *o, size_t n, int it)
{
	static int first_unloaded = -1;
	int th0 = proc_threads(NULL);
	if (!load(o, n))
		return 0;
	int ok = use(o, n);
	int gone = 1;
	if (unload_mode) {
		step("the cycle's threads end");
		int i;
		for (i = 0; i < 100 && proc_threads(NULL) > th0; i++)
			usleep(10000);
		gone = proc_threads(NULL) <= th0;
	}
	step("dlclose");
	dlclose(L.h);
	memset(&L, 0, sizeof L);
	step("dlopen(RTLD_NOLOAD)");
	void *h = dlopen(LIB, RTLD_NOW | RTLD_NOLOAD);
	int unloaded = !h;
	if (h)
		dlclose(h);
	if (it == 0 || unloaded != first_unloaded)
		fprintf(stderr, "%s: cycle %d: %s after dlclose%s\n", name, it + 1,
			unloaded ? "unloaded" : "still loaded", gone ? "" : " (its threads still ran 1 s after the use)");
	if (it == 0)
		first_unloaded = unloaded;
	if (unload_mode) {
		size_t l = strlen(o);
		snprintf(o + l, n - l, "; %s after dlclose", unloaded ? "unloaded" : "still loaded");
		/* -u: dlclose must unload it; -U: it must stay (a NODELETE library) */
		ok &= unload_mode == 1 ? unloaded : !unloaded;
	}
	return ok;
}
static int c_plain(char *o, size_t n, int it) { return cycle("dl_plain", use_plain, o, n, it); }
static int c_rsocket(char *o, size_t n, int it) { return cycle("dl_rsocket", use_rsocket, o, n, it); }
static int c_rsconn(char *o, size_t n, int it) { return cycle("dl_rsconn", use_rsconn, o, n, it); }
static int c_resolve(char *o, size_t n, int it) { return cycle("dl_resolve", use_resolve, o, n, it); }

static const struct ccase cases[] = {
	{ "dl_plain", c_plain, 1 },
	{ "dl_rsocket", c_rsocket, 1 },
	{ "dl_rsconn", c_rsconn, 1 },
	{ "dl_resolve", c_resolve, 1 },
};

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "-u") || !strcmp(argv[1], "-U"))) {
		unload_mode = argv[1][1] == 'u' ? 1 : 2;
		argv[1] = argv[0];
		argv++, argc--;
	}
	return run_cases(cases, sizeof cases / sizeof cases[0], argc, argv);
}
