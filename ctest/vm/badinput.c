/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * badinput - the bad-input matrix over every export of librdmacm.so.1:
 * NULL for each pointer argument, freed and never-allocated
 * ids/channels/events, wrong-type objects, out-of-range enums and lengths,
 * oversized private data, huge and unterminated strings, double
 * destroy/ack/free.
 *
 * Over 800 lines: the matrix is data (a row per function and case) with a driver per
 * function; one program lists, runs and compares it.
 *
 *   badinput                       run every case: "function<TAB>case<TAB>class<TAB>outcome"
 *   badinput -l                    list the cases
 *   badinput CASE...               run only these ("function:case")
 *   badinput --compare UP OURS     compare two runs: a markdown table on stdout, exit 1 when
 *                                  ours crashed, hung or leaked, or differs from upstream
 *                                  where upstream survived (deviations listed in DEVS below)
 *   badinput --functions           the functions the matrix covers (ctest/badinput/check-rows.sh)
 *
 * Each case runs in its own child (fork) under a 10 s alarm; the library is never touched
 * by the parent.  Outcome: "RET ERRNO" for an int (errno only when RET < 0), "NULL ERRNO" or
 * "ptr" for a pointer, "void" for a void function, or the child's death: "SIGSEGV",
 * "SIGABRT", "TIMEOUT", "EXIT n" (a sanitizer report).  With BADINPUT_LEAKS=1 (the ASan
 * build), the child destroys what its fixtures made and runs LeakSanitizer: " LEAK" is
 * appended when it reports.
 *
 * Classes: S (specified input: ours must give upstream's outcome where upstream survives,
 * an error with EINVAL where it crashes or hangs) and U (undefined in upstream: freed,
 * never-allocated or wrong-type objects, double destroy/ack/free; upstream's outcome is
 * recorded as it is, ours must return its error value with EINVAL, or return from a void
 * function).
 *
 * Addresses of the VM test bed: rxe0 192.0.2.1 (root ns) <-> rxe1 192.0.2.2 (ns1).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include "common.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

struct kase {
	const char *fn, *name;
	char cls;
	void (*run)(void);
};
static struct kase cases[600];
static int ncases;
static void reg(const char *fn, const char *name, char cls, void (*run)(void))
{
	cases[ncases++] = (struct kase){ fn, name, cls, run };
}
/* K(function, case, class) { body }: one case. */
#define K(FN, NAME, CLS)                                                                        \
	static void CAT(k_, __LINE__)(void);                                                    \
	__attribute__((constructor)) static void CAT(r_, __LINE__)(void)                         \
	{                                                                                       \
		reg(#FN, NAME, CLS, CAT(k_, __LINE__));                                         \
	}                                                                                       \
	static void CAT(k_, __LINE__)(void)

/* Justified deviations: ours differs from upstream's surviving outcome, on purpose. */
static const struct { const char *fn, *name, *why; } DEVS[] = {
#include "badinput_devs.h"
	{ NULL, NULL, NULL }
};

/* ---- outcome of the case (written by the child to the parent) ---- */
static char OUT[256];
#define RI(e)                                                                                   \
	do {                                                                                    \
		errno = 0;                                                                      \
		long r_ = (long)(e);                                                            \
		int e_ = errno;                                                                 \
		if (r_ < 0)                                                                     \
			snprintf(OUT, sizeof OUT, "%ld %s", r_, en(e_));                        \
		else                                                                            \
			snprintf(OUT, sizeof OUT, "%ld", r_);                                   \
	} while (0)
/* a file descriptor or count: >= 0 is printed as "ok" (values differ between libraries) */
#define RN(e)                                                                                   \
	do {                                                                                    \
		errno = 0;                                                                      \
		long r_ = (long)(e);                                                            \
		int e_ = errno;                                                                 \
		if (r_ < 0)                                                                     \
			snprintf(OUT, sizeof OUT, "%ld %s", r_, en(e_));                        \
		else                                                                            \
			snprintf(OUT, sizeof OUT, "ok");                                        \
	} while (0)
/* a port (0 is the error value): "0 ERRNO" */
#define RZ(e)                                                                                   \
	do {                                                                                    \
		errno = 0;                                                                      \
		long r_ = (long)(e);                                                            \
		int e_ = errno;                                                                 \
		if (r_ == 0)                                                                    \
			snprintf(OUT, sizeof OUT, "0 %s", en(e_));                              \
		else                                                                            \
			snprintf(OUT, sizeof OUT, "port");                                      \
	} while (0)
#define RP(e)                                                                                   \
	do {                                                                                    \
		errno = 0;                                                                      \
		const void *r_ = (const void *)(e);                                             \
		int e_ = errno;                                                                 \
		if (!r_)                                                                        \
			snprintf(OUT, sizeof OUT, "NULL %s", en(e_));                           \
		else                                                                            \
			snprintf(OUT, sizeof OUT, "ptr");                                       \
	} while (0)
#define RV(e)                                                                                   \
	do {                                                                                    \
		e;                                                                              \
		snprintf(OUT, sizeof OUT, "void");                                              \
	} while (0)
#define RS(e)                                                                                   \
	do {                                                                                    \
		const char *r_ = (e);                                                           \
		snprintf(OUT, sizeof OUT, "\"%s\"", r_ ? r_ : "(null)");                        \
	} while (0)

/* ---- fixtures (made in the child, before the call under test) ---- */
static struct rdma_cm_id *ids[32];
static int nids;
static struct rdma_event_channel *chs[8];
static int nchs;
static struct ibv_pd *pds[4];
static int npds;
static struct rdma_cm_event *evs[4];
static int nevs;
static int socks[8];
static int nsocks;

static void fail(const char *what)
{
	snprintf(OUT, sizeof OUT, "SETUP-FAILED %s %s", what, en(errno));
	printf("%s", OUT);
	fflush(stdout);
	_exit(3);
}
static struct sockaddr_in sa4(const char *ip, int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}
static struct sockaddr_in A1, A2, ANY, MC;
static struct rdma_event_channel *CH(void)
{
	struct rdma_event_channel *c = rdma_create_event_channel();
	if (!c)
		fail("create_event_channel");
	chs[nchs++] = c;
	return c;
}
static struct rdma_cm_id *IDc(struct rdma_event_channel *c, enum rdma_port_space ps)
{
	struct rdma_cm_id *id;
	if (rdma_create_id(c, &id, NULL, ps))
		fail("create_id");
	ids[nids++] = id;
	return id;
}
static struct rdma_cm_id *ID(void) { return IDc(NULL, RDMA_PS_TCP); }
static struct rdma_cm_id *IDA(void) { return IDc(CH(), RDMA_PS_TCP); }
/* a synchronous id bound to rxe0 (id->verbs set) */
static struct rdma_cm_id *IDB(void)
{
	struct rdma_cm_id *id = ID();
	if (rdma_bind_addr(id, (struct sockaddr *)&A1))
		fail("bind");
	return id;
}
/* a synchronous id with address and route resolved to rxe1 */
static struct rdma_cm_id *IDR(void)
{
	struct rdma_cm_id *id = ID();
	if (rdma_resolve_addr(id, (struct sockaddr *)&A1, (struct sockaddr *)&A2, 2000))
		fail("resolve_addr");
	if (rdma_resolve_route(id, 2000))
		fail("resolve_route");
	return id;
}
static struct rdma_cm_id *FREED_ID(void)
{
	struct rdma_cm_id *id;
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		fail("create_id");
	rdma_destroy_id(id);
	return id;
}
/* the test's own allocations (fake objects, long strings), freed by cleanup() */
static void *mine[8];
static int nmine;
static void *zeroed(size_t n)
{
	void *p = calloc(1, n);
	if (!p)
		fail("calloc");
	mine[nmine++] = p;
	return p;
}
/* never allocated by the library: zeroed memory of a generous size */
static struct rdma_cm_id *FAKE_ID(void) { return zeroed(4096); }
static struct rdma_event_channel *FREED_CH(void)
{
	struct rdma_event_channel *c = rdma_create_event_channel();
	if (!c)
		fail("create_event_channel");
	rdma_destroy_event_channel(c);
	return c;
}
static struct rdma_event_channel *FAKE_CH(void)
{
	struct rdma_event_channel *c = zeroed(4096);
	c->fd = -1;
	return c;
}
static struct ibv_pd *PD(struct rdma_cm_id *id)
{
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	if (!pd)
		fail("alloc_pd");
	pds[npds++] = pd;
	return pd;
}
/* an unacked ADDR_RESOLVED event */
static struct rdma_cm_event *EV(void)
{
	struct rdma_cm_id *id = IDA();
	struct rdma_cm_event *e;
	if (rdma_resolve_addr(id, (struct sockaddr *)&A1, (struct sockaddr *)&A2, 2000))
		fail("resolve_addr");
	if (rdma_get_cm_event(id->channel, &e))
		fail("get_cm_event");
	evs[nevs++] = e;
	return e;
}
static int SOCK(void)
{
	int s = rsocket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		fail("rsocket");
	socks[nsocks++] = s;
	return s;
}
static int CLOSED_SOCK(void)
{
	int s = rsocket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		fail("rsocket");
	rclose(s);
	return s;
}
static struct ibv_qp_init_attr QA(void)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	return a;
}
static char *HUGE(size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		fail("malloc");
	mine[nmine++] = s;
	memset(s, 'a', n);
	s[n] = 0;
	return s;
}
/* 4096 non-NUL bytes right before an unmapped page */
static char *UNTERMINATED(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		fail("mmap");
	munmap(m + pg, pg);
	memset(m, 'a', pg);
	return m;
}
static void cleanup(void)
{
	for (int i = 0; i < nevs; i++)
		rdma_ack_cm_event(evs[i]);
	for (int i = nids - 1; i >= 0; i--) {
		if (ids[i]->qp)
			rdma_destroy_qp(ids[i]);
		rdma_destroy_id(ids[i]);
	}
	for (int i = 0; i < npds; i++)
		ibv_dealloc_pd(pds[i]);
	for (int i = 0; i < nchs; i++)
		rdma_destroy_event_channel(chs[i]);
	for (int i = 0; i < nsocks; i++)
		rclose(socks[i]);
	for (int i = 0; i < nmine; i++)
		free(mine[i]);
}

/* ======================= the cases ======================= */
#define SA(x) ((struct sockaddr *)&(x))

/* --- event channels --- */
K(rdma_create_event_channel, "no arguments (baseline)", 'S') { RP(CH()); }
K(rdma_destroy_event_channel, "NULL", 'S') { RV(rdma_destroy_event_channel(NULL)); }
K(rdma_destroy_event_channel, "freed channel (double destroy)", 'U') { struct rdma_event_channel *c = FREED_CH(); RV(rdma_destroy_event_channel(c)); }
K(rdma_destroy_event_channel, "never-allocated channel", 'U') { struct rdma_event_channel *c = FAKE_CH(); RV(rdma_destroy_event_channel(c)); }
K(rdma_destroy_event_channel, "an id passed as channel", 'U') { struct rdma_cm_id *id = ID(); RV(rdma_destroy_event_channel((void *)id)); }

/* --- ids --- */
K(rdma_create_id, "NULL id out-pointer", 'S') { RI(rdma_create_id(NULL, NULL, NULL, RDMA_PS_TCP)); }
K(rdma_create_id, "port space 0", 'S') { struct rdma_cm_id *id; RI(rdma_create_id(NULL, &id, NULL, 0)); }
K(rdma_create_id, "port space 0x7fffffff", 'S') { struct rdma_cm_id *id; RI(rdma_create_id(NULL, &id, NULL, 0x7fffffff)); }
K(rdma_create_id, "freed channel", 'U') { struct rdma_cm_id *id; RI(rdma_create_id(FREED_CH(), &id, NULL, RDMA_PS_TCP)); }
K(rdma_create_id, "never-allocated channel", 'U') { struct rdma_cm_id *id; RI(rdma_create_id(FAKE_CH(), &id, NULL, RDMA_PS_TCP)); }
K(rdma_create_id, "an id passed as channel", 'U') { struct rdma_cm_id *id; RI(rdma_create_id((void *)ID(), &id, NULL, RDMA_PS_TCP)); }
K(rdma_destroy_id, "NULL", 'S') { RI(rdma_destroy_id(NULL)); }
K(rdma_destroy_id, "freed id (double destroy)", 'U') { RI(rdma_destroy_id(FREED_ID())); }
K(rdma_destroy_id, "never-allocated id", 'U') { RI(rdma_destroy_id(FAKE_ID())); }
K(rdma_destroy_id, "a channel passed as id", 'U') { RI(rdma_destroy_id((void *)CH())); }
K(rdma_migrate_id, "NULL id", 'S') { RI(rdma_migrate_id(NULL, CH())); }
K(rdma_migrate_id, "freed id", 'U') { RI(rdma_migrate_id(FREED_ID(), CH())); }
K(rdma_migrate_id, "freed channel", 'U') { struct rdma_cm_id *id = IDA(); struct rdma_event_channel *c = FREED_CH(); RI(rdma_migrate_id(id, c)); }
K(rdma_migrate_id, "never-allocated channel", 'U') { struct rdma_cm_id *id = IDA(); RI(rdma_migrate_id(id, FAKE_CH())); }
K(rdma_migrate_id, "a channel passed as id", 'U') { RI(rdma_migrate_id((void *)CH(), CH())); }

/* --- bind / resolve --- */
K(rdma_bind_addr, "NULL id", 'S') { RI(rdma_bind_addr(NULL, SA(A1))); }
K(rdma_bind_addr, "NULL address", 'S') { RI(rdma_bind_addr(ID(), NULL)); }
K(rdma_bind_addr, "family 0", 'S') { struct sockaddr_in s = A1; s.sin_family = 0; RI(rdma_bind_addr(ID(), SA(s))); }
K(rdma_bind_addr, "family 0xffff", 'S') { struct sockaddr_storage s = { .ss_family = 0xffff }; RI(rdma_bind_addr(ID(), SA(s))); }
K(rdma_bind_addr, "bind twice", 'S') { struct rdma_cm_id *id = IDB(); RI(rdma_bind_addr(id, SA(A1))); }
K(rdma_bind_addr, "freed id", 'U') { RI(rdma_bind_addr(FREED_ID(), SA(A1))); }
K(rdma_bind_addr, "never-allocated id", 'U') { RI(rdma_bind_addr(FAKE_ID(), SA(A1))); }
K(rdma_bind_addr, "a channel passed as id", 'U') { RI(rdma_bind_addr((void *)CH(), SA(A1))); }
K(rdma_resolve_addr, "NULL id", 'S') { RI(rdma_resolve_addr(NULL, NULL, SA(A2), 2000)); }
K(rdma_resolve_addr, "NULL destination", 'S') { RI(rdma_resolve_addr(ID(), NULL, NULL, 2000)); }
K(rdma_resolve_addr, "NULL source, NULL destination", 'S') { RI(rdma_resolve_addr(ID(), NULL, NULL, 0)); }
K(rdma_resolve_addr, "destination family 0xffff", 'S') { struct sockaddr_storage s = { .ss_family = 0xffff }; RI(rdma_resolve_addr(ID(), NULL, SA(s), 2000)); }
K(rdma_resolve_addr, "source/destination families differ", 'S') { struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 }; RI(rdma_resolve_addr(ID(), SA(s6), SA(A2), 2000)); }
K(rdma_resolve_addr, "timeout -1", 'S') { RI(rdma_resolve_addr(ID(), NULL, SA(A2), -1)); }
K(rdma_resolve_addr, "timeout INT_MIN", 'S') { RI(rdma_resolve_addr(ID(), NULL, SA(A2), (int)0x80000000)); }
K(rdma_resolve_addr, "freed id", 'U') { RI(rdma_resolve_addr(FREED_ID(), NULL, SA(A2), 2000)); }
K(rdma_resolve_addr, "never-allocated id", 'U') { RI(rdma_resolve_addr(FAKE_ID(), NULL, SA(A2), 2000)); }
K(rdma_resolve_addr, "a channel passed as id", 'U') { RI(rdma_resolve_addr((void *)CH(), NULL, SA(A2), 2000)); }
K(rdma_resolve_route, "NULL id", 'S') { RI(rdma_resolve_route(NULL, 2000)); }
K(rdma_resolve_route, "unresolved id", 'S') { RI(rdma_resolve_route(ID(), 2000)); }
K(rdma_resolve_route, "timeout -1 after resolve_addr", 'S') { struct rdma_cm_id *id = ID(); if (rdma_resolve_addr(id, SA(A1), SA(A2), 2000)) fail("resolve_addr"); RI(rdma_resolve_route(id, -1)); }
K(rdma_resolve_route, "freed id", 'U') { RI(rdma_resolve_route(FREED_ID(), 2000)); }
K(rdma_resolve_route, "never-allocated id", 'U') { RI(rdma_resolve_route(FAKE_ID(), 2000)); }
K(rdma_resolve_route, "a channel passed as id", 'U') { RI(rdma_resolve_route((void *)CH(), 2000)); }
K(rdma_get_src_port, "NULL id", 'S') { RZ(rdma_get_src_port(NULL)); }
K(rdma_get_src_port, "fresh id", 'S') { RZ(rdma_get_src_port(ID())); }
K(rdma_get_src_port, "never-allocated id (zeroed: upstream only reads the struct)", 'S') { RZ(rdma_get_src_port(FAKE_ID())); }
K(rdma_get_dst_port, "NULL id", 'S') { RZ(rdma_get_dst_port(NULL)); }
K(rdma_get_dst_port, "fresh id", 'S') { RZ(rdma_get_dst_port(ID())); }
K(rdma_get_dst_port, "never-allocated id (zeroed: upstream only reads the struct)", 'S') { RZ(rdma_get_dst_port(FAKE_ID())); }

/* --- events --- */
K(rdma_get_cm_event, "NULL channel", 'S') { struct rdma_cm_event *e; RI(rdma_get_cm_event(NULL, &e)); }
K(rdma_get_cm_event, "NULL event out-pointer", 'S') { RI(rdma_get_cm_event(CH(), NULL)); }
K(rdma_get_cm_event, "freed channel", 'U') { struct rdma_cm_event *e; RI(rdma_get_cm_event(FREED_CH(), &e)); }
K(rdma_get_cm_event, "never-allocated channel", 'U') { struct rdma_cm_event *e; RI(rdma_get_cm_event(FAKE_CH(), &e)); }
K(rdma_get_cm_event, "an id passed as channel", 'U') { struct rdma_cm_event *e; RI(rdma_get_cm_event((void *)ID(), &e)); }
K(rdma_get_cm_event, "nonblocking channel, nothing pending", 'S') { struct rdma_event_channel *c = CH(); struct rdma_cm_event *e; fcntl(c->fd, F_SETFL, O_NONBLOCK); RI(rdma_get_cm_event(c, &e)); }
K(rdma_ack_cm_event, "NULL", 'S') { RI(rdma_ack_cm_event(NULL)); }
K(rdma_ack_cm_event, "baseline", 'S') { struct rdma_cm_event *e = EV(); nevs--; RI(rdma_ack_cm_event(e)); }
K(rdma_ack_cm_event, "double ack", 'U') { struct rdma_cm_event *e = EV(); nevs--; rdma_ack_cm_event(e); RI(rdma_ack_cm_event(e)); }
K(rdma_ack_cm_event, "never-allocated event", 'U') { RI(rdma_ack_cm_event(zeroed(4096))); }
K(rdma_ack_cm_event, "an id passed as event", 'U') { RI(rdma_ack_cm_event((void *)ID())); }
K(rdma_event_str, "-1", 'S') { RS(rdma_event_str(-1)); }
K(rdma_event_str, "INT_MAX", 'S') { RS(rdma_event_str(0x7fffffff)); }
K(rdma_write_cm_event, "NULL id", 'S') { RI(rdma_write_cm_event(NULL, RDMA_CM_EVENT_ESTABLISHED, 0, 0)); }
K(rdma_write_cm_event, "synchronous id (no channel)", 'S') { RI(rdma_write_cm_event(ID(), RDMA_CM_EVENT_ESTABLISHED, 0, 0)); }
K(rdma_write_cm_event, "event type -1", 'S') { RI(rdma_write_cm_event(IDA(), -1, 0, 0)); }
K(rdma_write_cm_event, "event type 1000", 'S') { RI(rdma_write_cm_event(IDA(), 1000, 0, 0)); }
K(rdma_write_cm_event, "freed id", 'U') { RI(rdma_write_cm_event(FREED_ID(), RDMA_CM_EVENT_ESTABLISHED, 0, 0)); }
K(rdma_write_cm_event, "never-allocated id", 'U') { RI(rdma_write_cm_event(FAKE_ID(), RDMA_CM_EVENT_ESTABLISHED, 0, 0)); }
K(rdma_notify, "NULL id", 'S') { RI(rdma_notify(NULL, IBV_EVENT_COMM_EST)); }
K(rdma_notify, "fresh id", 'S') { RI(rdma_notify(ID(), IBV_EVENT_COMM_EST)); }
K(rdma_notify, "event -1", 'S') { RI(rdma_notify(ID(), -1)); }
K(rdma_notify, "freed id", 'U') { RI(rdma_notify(FREED_ID(), IBV_EVENT_COMM_EST)); }
K(rdma_notify, "never-allocated id", 'U') { RI(rdma_notify(FAKE_ID(), IBV_EVENT_COMM_EST)); }

/* --- options --- */
K(rdma_set_option, "NULL id", 'S') { uint8_t v = 0; RI(rdma_set_option(NULL, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &v, 1)); }
K(rdma_set_option, "NULL value", 'S') { RI(rdma_set_option(ID(), RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, NULL, 1)); }
K(rdma_set_option, "length 0", 'S') { uint8_t v = 0; RI(rdma_set_option(ID(), RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &v, 0)); }
K(rdma_set_option, "length 2^31", 'S') { uint8_t v[8] = { 0 }; RI(rdma_set_option(ID(), RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, v, (size_t)1 << 31)); }
K(rdma_set_option, "length SIZE_MAX", 'S') { uint8_t v[8] = { 0 }; RI(rdma_set_option(ID(), RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, v, (size_t)-1)); }
K(rdma_set_option, "level -1", 'S') { int v = 0; RI(rdma_set_option(ID(), -1, 0, &v, sizeof v)); }
K(rdma_set_option, "option 9999", 'S') { int v = 0; RI(rdma_set_option(ID(), RDMA_OPTION_ID, 9999, &v, sizeof v)); }
K(rdma_set_option, "IB path, length 1", 'S') { uint8_t v = 0; RI(rdma_set_option(ID(), RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &v, 1)); }
K(rdma_set_option, "freed id", 'U') { uint8_t v = 0; RI(rdma_set_option(FREED_ID(), RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &v, 1)); }
K(rdma_set_option, "never-allocated id", 'U') { uint8_t v = 0; RI(rdma_set_option(FAKE_ID(), RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &v, 1)); }

/* --- QPs, SRQs --- */
K(rdma_create_qp, "NULL id", 'S') { struct ibv_qp_init_attr a = QA(); RI(rdma_create_qp(NULL, NULL, &a)); }
K(rdma_create_qp, "NULL attributes", 'S') { struct rdma_cm_id *id = IDB(); RI(rdma_create_qp(id, PD(id), NULL)); }
K(rdma_create_qp, "unbound id (no device), NULL pd", 'S') { struct ibv_qp_init_attr a = QA(); RI(rdma_create_qp(ID(), NULL, &a)); }
K(rdma_create_qp, "qp type 0x7fff", 'S') { struct rdma_cm_id *id = IDB(); struct ibv_qp_init_attr a = QA(); a.qp_type = 0x7fff; RI(rdma_create_qp(id, PD(id), &a)); }
K(rdma_create_qp, "max_send_wr 2^30", 'S') { struct rdma_cm_id *id = IDB(); struct ibv_qp_init_attr a = QA(); a.cap.max_send_wr = 1u << 30; RI(rdma_create_qp(id, PD(id), &a)); }
K(rdma_create_qp, "max_send_sge 2^30", 'S') { struct rdma_cm_id *id = IDB(); struct ibv_qp_init_attr a = QA(); a.cap.max_send_sge = 1u << 30; RI(rdma_create_qp(id, PD(id), &a)); }
K(rdma_create_qp, "twice on one id", 'S') { struct rdma_cm_id *id = IDB(); struct ibv_pd *pd = PD(id); struct ibv_qp_init_attr a = QA(); if (rdma_create_qp(id, pd, &a)) fail("create_qp"); a = QA(); RI(rdma_create_qp(id, pd, &a)); }
K(rdma_create_qp, "freed id", 'U') { struct ibv_qp_init_attr a = QA(); RI(rdma_create_qp(FREED_ID(), NULL, &a)); }
K(rdma_create_qp, "never-allocated id", 'U') { struct ibv_qp_init_attr a = QA(); RI(rdma_create_qp(FAKE_ID(), NULL, &a)); }
K(rdma_create_qp_ex, "NULL id", 'S') { struct ibv_qp_init_attr_ex a = { 0 }; RI(rdma_create_qp_ex(NULL, &a)); }
K(rdma_create_qp_ex, "NULL attributes", 'S') { RI(rdma_create_qp_ex(IDB(), NULL)); }
K(rdma_create_qp_ex, "comp_mask without pd", 'S') { struct ibv_qp_init_attr_ex a = { .qp_type = IBV_QPT_RC, .cap = { 4, 4, 1, 1, 0 } }; RI(rdma_create_qp_ex(IDB(), &a)); }
K(rdma_create_qp_ex, "comp_mask all bits", 'S') { struct rdma_cm_id *id = IDB(); struct ibv_qp_init_attr_ex a = { .qp_type = IBV_QPT_RC, .cap = { 4, 4, 1, 1, 0 }, .comp_mask = 0xffffffff, .pd = PD(id) }; RI(rdma_create_qp_ex(id, &a)); }
K(rdma_create_qp_ex, "freed id", 'U') { struct ibv_qp_init_attr_ex a = { 0 }; RI(rdma_create_qp_ex(FREED_ID(), &a)); }
K(rdma_destroy_qp, "NULL id", 'S') { RV(rdma_destroy_qp(NULL)); }
K(rdma_destroy_qp, "id without QP", 'S') { RV(rdma_destroy_qp(ID())); }
K(rdma_destroy_qp, "twice", 'S') { struct rdma_cm_id *id = IDB(); struct ibv_qp_init_attr a = QA(); if (rdma_create_qp(id, PD(id), &a)) fail("create_qp"); rdma_destroy_qp(id); RV(rdma_destroy_qp(id)); }
K(rdma_destroy_qp, "freed id", 'U') { RV(rdma_destroy_qp(FREED_ID())); }
K(rdma_destroy_qp, "never-allocated id", 'U') { RV(rdma_destroy_qp(FAKE_ID())); }
K(rdma_create_srq, "NULL id", 'S') { struct ibv_srq_init_attr a = { .attr = { 4, 1, 0 } }; RI(rdma_create_srq(NULL, NULL, &a)); }
K(rdma_create_srq, "NULL attributes", 'S') { struct rdma_cm_id *id = IDB(); RI(rdma_create_srq(id, PD(id), NULL)); }
K(rdma_create_srq, "unbound id", 'S') { struct ibv_srq_init_attr a = { .attr = { 4, 1, 0 } }; RI(rdma_create_srq(ID(), NULL, &a)); }
K(rdma_create_srq, "max_wr 2^31", 'S') { struct rdma_cm_id *id = IDB(); struct ibv_srq_init_attr a = { .attr = { 1u << 31, 1, 0 } }; RI(rdma_create_srq(id, PD(id), &a)); }
K(rdma_create_srq, "freed id", 'U') { struct ibv_srq_init_attr a = { .attr = { 4, 1, 0 } }; RI(rdma_create_srq(FREED_ID(), NULL, &a)); }
K(rdma_create_srq_ex, "NULL id", 'S') { struct ibv_srq_init_attr_ex a = { 0 }; RI(rdma_create_srq_ex(NULL, &a)); }
K(rdma_create_srq_ex, "NULL attributes", 'S') { RI(rdma_create_srq_ex(IDB(), NULL)); }
K(rdma_create_srq_ex, "srq type 0x7fff", 'S') { struct rdma_cm_id *id = IDB(); struct ibv_srq_init_attr_ex a = { .attr = { 4, 1, 0 }, .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD, .srq_type = 0x7fff, .pd = PD(id) }; RI(rdma_create_srq_ex(id, &a)); }
K(rdma_create_srq_ex, "freed id", 'U') { struct ibv_srq_init_attr_ex a = { 0 }; RI(rdma_create_srq_ex(FREED_ID(), &a)); }
K(rdma_destroy_srq, "NULL id", 'S') { RV(rdma_destroy_srq(NULL)); }
K(rdma_destroy_srq, "id without SRQ", 'S') { RV(rdma_destroy_srq(ID())); }
K(rdma_destroy_srq, "freed id", 'U') { RV(rdma_destroy_srq(FREED_ID())); }
K(rdma_init_qp_attr, "NULL id", 'S') { struct ibv_qp_attr a; int m; RI(rdma_init_qp_attr(NULL, &a, &m)); }
K(rdma_init_qp_attr, "NULL attributes", 'S') { int m; RI(rdma_init_qp_attr(IDR(), NULL, &m)); }
K(rdma_init_qp_attr, "NULL mask", 'S') { struct ibv_qp_attr a; RI(rdma_init_qp_attr(IDR(), &a, NULL)); }
K(rdma_init_qp_attr, "fresh id", 'S') { struct ibv_qp_attr a; int m; RI(rdma_init_qp_attr(ID(), &a, &m)); }
K(rdma_init_qp_attr, "freed id", 'U') { struct ibv_qp_attr a; int m; RI(rdma_init_qp_attr(FREED_ID(), &a, &m)); }

/* --- connections --- */
K(rdma_connect, "NULL id", 'S') { RI(rdma_connect(NULL, NULL)); }
K(rdma_connect, "unresolved id", 'S') { RI(rdma_connect(ID(), NULL)); }
K(rdma_connect, "private data length 255, NULL data", 'S') { struct rdma_conn_param p = { .private_data_len = 255, .responder_resources = 1, .initiator_depth = 1 }; RI(rdma_connect(IDR(), &p)); }
K(rdma_connect, "private data length 255 (over the 56-byte limit)", 'S') { static char b[255]; struct rdma_conn_param p = { .private_data = b, .private_data_len = 255, .responder_resources = 1, .initiator_depth = 1 }; RI(rdma_connect(IDR(), &p)); }
K(rdma_connect, "responder_resources 255", 'S') { struct rdma_conn_param p = { .responder_resources = 255, .initiator_depth = 255, .retry_count = 255, .rnr_retry_count = 255 }; RI(rdma_connect(IDR(), &p)); }
K(rdma_connect, "freed id", 'U') { RI(rdma_connect(FREED_ID(), NULL)); }
K(rdma_connect, "never-allocated id", 'U') { RI(rdma_connect(FAKE_ID(), NULL)); }
K(rdma_connect, "a channel passed as id", 'U') { RI(rdma_connect((void *)CH(), NULL)); }
K(rdma_establish, "NULL id", 'S') { RI(rdma_establish(NULL)); }
K(rdma_establish, "fresh id", 'S') { RI(rdma_establish(ID())); }
K(rdma_establish, "freed id", 'U') { RI(rdma_establish(FREED_ID())); }
K(rdma_listen, "NULL id", 'S') { RI(rdma_listen(NULL, 1)); }
K(rdma_listen, "unbound id", 'S') { RI(rdma_listen(ID(), 1)); }
K(rdma_listen, "backlog -1", 'S') { RI(rdma_listen(IDB(), -1)); }
K(rdma_listen, "backlog INT_MAX", 'S') { RI(rdma_listen(IDB(), 0x7fffffff)); }
K(rdma_listen, "freed id", 'U') { RI(rdma_listen(FREED_ID(), 1)); }
K(rdma_listen, "never-allocated id", 'U') { RI(rdma_listen(FAKE_ID(), 1)); }
K(rdma_get_request, "NULL listen id", 'S') { struct rdma_cm_id *id; RI(rdma_get_request(NULL, &id)); }
K(rdma_get_request, "NULL out-pointer", 'S') { struct rdma_cm_id *l = IDB(); if (rdma_listen(l, 1)) fail("listen"); RI(rdma_get_request(l, NULL)); }
K(rdma_get_request, "not listening", 'S') { struct rdma_cm_id *id; RI(rdma_get_request(ID(), &id)); }
K(rdma_get_request, "freed id", 'U') { struct rdma_cm_id *id; RI(rdma_get_request(FREED_ID(), &id)); }
K(rdma_accept, "NULL id", 'S') { RI(rdma_accept(NULL, NULL)); }
K(rdma_accept, "fresh id", 'S') { RI(rdma_accept(ID(), NULL)); }
K(rdma_accept, "private data length 255, NULL data", 'S') { struct rdma_conn_param p = { .private_data_len = 255 }; RI(rdma_accept(ID(), &p)); }
K(rdma_accept, "freed id", 'U') { RI(rdma_accept(FREED_ID(), NULL)); }
K(rdma_accept, "never-allocated id", 'U') { RI(rdma_accept(FAKE_ID(), NULL)); }
K(rdma_reject, "NULL id", 'S') { RI(rdma_reject(NULL, NULL, 0)); }
K(rdma_reject, "fresh id", 'S') { RI(rdma_reject(ID(), NULL, 0)); }
K(rdma_reject, "length 255, NULL data", 'S') { RI(rdma_reject(ID(), NULL, 255)); }
K(rdma_reject, "length 255 (oversized private data)", 'S') { static char b[255]; RI(rdma_reject(ID(), b, 255)); }
K(rdma_reject, "freed id", 'U') { RI(rdma_reject(FREED_ID(), NULL, 0)); }
K(rdma_reject, "never-allocated id", 'U') { RI(rdma_reject(FAKE_ID(), NULL, 0)); }
K(rdma_reject_ece, "NULL id", 'S') { RI(rdma_reject_ece(NULL, NULL, 0)); }
K(rdma_reject_ece, "fresh id, length 255, NULL data", 'S') { RI(rdma_reject_ece(ID(), NULL, 255)); }
K(rdma_reject_ece, "freed id", 'U') { RI(rdma_reject_ece(FREED_ID(), NULL, 0)); }
K(rdma_disconnect, "NULL id", 'S') { RI(rdma_disconnect(NULL)); }
K(rdma_disconnect, "fresh id", 'S') { RI(rdma_disconnect(ID())); }
K(rdma_disconnect, "freed id", 'U') { RI(rdma_disconnect(FREED_ID())); }
K(rdma_disconnect, "never-allocated id", 'U') { RI(rdma_disconnect(FAKE_ID())); }
K(rdma_set_local_ece, "NULL id", 'S') { struct ibv_ece e = { 0 }; RI(rdma_set_local_ece(NULL, &e)); }
K(rdma_set_local_ece, "NULL ece", 'S') { RI(rdma_set_local_ece(ID(), NULL)); }
K(rdma_set_local_ece, "vendor id 0", 'S') { struct ibv_ece e = { 0 }; RI(rdma_set_local_ece(ID(), &e)); }
K(rdma_set_local_ece, "freed id", 'U') { struct ibv_ece e = { .vendor_id = 1 }; RI(rdma_set_local_ece(FREED_ID(), &e)); }
K(rdma_get_remote_ece, "NULL id", 'S') { struct ibv_ece e; RI(rdma_get_remote_ece(NULL, &e)); }
K(rdma_get_remote_ece, "NULL ece", 'S') { RI(rdma_get_remote_ece(ID(), NULL)); }
K(rdma_get_remote_ece, "fresh id", 'S') { struct ibv_ece e; RI(rdma_get_remote_ece(ID(), &e)); }
K(rdma_get_remote_ece, "freed id", 'U') { struct ibv_ece e; RI(rdma_get_remote_ece(FREED_ID(), &e)); }

/* --- multicast --- */
K(rdma_join_multicast, "NULL id", 'S') { RI(rdma_join_multicast(NULL, SA(MC), NULL)); }
K(rdma_join_multicast, "NULL address", 'S') { RI(rdma_join_multicast(IDB(), NULL, NULL)); }
K(rdma_join_multicast, "address family 0xffff", 'S') { struct sockaddr_storage s = { .ss_family = 0xffff }; RI(rdma_join_multicast(IDB(), SA(s), NULL)); }
K(rdma_join_multicast, "freed id", 'U') { RI(rdma_join_multicast(FREED_ID(), SA(MC), NULL)); }
K(rdma_join_multicast, "never-allocated id", 'U') { RI(rdma_join_multicast(FAKE_ID(), SA(MC), NULL)); }
K(rdma_join_multicast_ex, "NULL id", 'S') { struct rdma_cm_join_mc_attr_ex a = { .comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, .join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER, .addr = SA(MC) }; RI(rdma_join_multicast_ex(NULL, &a, NULL)); }
K(rdma_join_multicast_ex, "NULL attributes", 'S') { RI(rdma_join_multicast_ex(IDB(), NULL, NULL)); }
K(rdma_join_multicast_ex, "NULL address in attributes", 'S') { struct rdma_cm_join_mc_attr_ex a = { .comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, .join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER }; RI(rdma_join_multicast_ex(IDB(), &a, NULL)); }
K(rdma_join_multicast_ex, "comp_mask 0", 'S') { struct rdma_cm_join_mc_attr_ex a = { .addr = SA(MC) }; RI(rdma_join_multicast_ex(IDB(), &a, NULL)); }
K(rdma_join_multicast_ex, "comp_mask all bits", 'S') { struct rdma_cm_join_mc_attr_ex a = { .comp_mask = 0xffffffff, .join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER, .addr = SA(MC) }; RI(rdma_join_multicast_ex(IDB(), &a, NULL)); }
K(rdma_join_multicast_ex, "join flags 0x7fffffff", 'S') { struct rdma_cm_join_mc_attr_ex a = { .comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, .join_flags = 0x7fffffff, .addr = SA(MC) }; RI(rdma_join_multicast_ex(IDB(), &a, NULL)); }
K(rdma_join_multicast_ex, "freed id", 'U') { struct rdma_cm_join_mc_attr_ex a = { .comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, .join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER, .addr = SA(MC) }; RI(rdma_join_multicast_ex(FREED_ID(), &a, NULL)); }
K(rdma_leave_multicast, "NULL id", 'S') { RI(rdma_leave_multicast(NULL, SA(MC))); }
K(rdma_leave_multicast, "NULL address", 'S') { RI(rdma_leave_multicast(IDB(), NULL)); }
K(rdma_leave_multicast, "group never joined", 'S') { RI(rdma_leave_multicast(IDB(), SA(MC))); }
K(rdma_leave_multicast, "freed id", 'U') { RI(rdma_leave_multicast(FREED_ID(), SA(MC))); }

/* --- devices --- */
K(rdma_get_devices, "NULL count", 'S') { struct ibv_context **l = rdma_get_devices(NULL); RP(l); if (l) rdma_free_devices(l); }
K(rdma_free_devices, "NULL", 'S') { RV(rdma_free_devices(NULL)); }
K(rdma_free_devices, "twice", 'U') { struct ibv_context **l = rdma_get_devices(NULL); if (!l) fail("get_devices"); rdma_free_devices(l); RV(rdma_free_devices(l)); }
K(rdma_free_devices, "never-allocated list", 'U') { RV(rdma_free_devices(zeroed(64))); }

/* --- rdma_getaddrinfo and friends --- */
K(rdma_getaddrinfo, "NULL node and service", 'S') { struct rdma_addrinfo *r = NULL; RI(rdma_getaddrinfo(NULL, NULL, NULL, &r)); if (r) rdma_freeaddrinfo(r); }
K(rdma_getaddrinfo, "NULL result pointer", 'S') { RI(rdma_getaddrinfo("192.0.2.1", "7471", NULL, NULL)); }
K(rdma_getaddrinfo, "node of 1 MiB", 'S') { struct rdma_addrinfo *r = NULL; RI(rdma_getaddrinfo(HUGE(1 << 20), "7471", NULL, &r)); if (r) rdma_freeaddrinfo(r); }
K(rdma_getaddrinfo, "service of 1 MiB", 'S') { struct rdma_addrinfo *r = NULL; RI(rdma_getaddrinfo("192.0.2.1", HUGE(1 << 20), NULL, &r)); if (r) rdma_freeaddrinfo(r); }
K(rdma_getaddrinfo, "unterminated node", 'S') { struct rdma_addrinfo *r = NULL; RI(rdma_getaddrinfo(UNTERMINATED(), "7471", NULL, &r)); if (r) rdma_freeaddrinfo(r); }
K(rdma_getaddrinfo, "hints family 0xffff", 'S') { struct rdma_addrinfo h = { .ai_family = 0xffff }, *r = NULL; RI(rdma_getaddrinfo("192.0.2.1", NULL, &h, &r)); if (r) rdma_freeaddrinfo(r); }
K(rdma_getaddrinfo, "hints port space 0x7fff", 'S') { struct rdma_addrinfo h = { .ai_port_space = 0x7fff }, *r = NULL; RI(rdma_getaddrinfo("192.0.2.1", NULL, &h, &r)); if (r) rdma_freeaddrinfo(r); }
K(rdma_getaddrinfo, "hints flags all bits", 'S') { struct rdma_addrinfo h = { .ai_flags = -1 }, *r = NULL; RI(rdma_getaddrinfo("192.0.2.1", NULL, &h, &r)); if (r) rdma_freeaddrinfo(r); }
K(rdma_getaddrinfo, "hints source address length 2^30", 'S') { struct rdma_addrinfo h = { .ai_flags = 0, .ai_src_addr = SA(A1), .ai_src_len = 1u << 30 }, *r = NULL; RI(rdma_getaddrinfo("192.0.2.2", NULL, &h, &r)); if (r) rdma_freeaddrinfo(r); }
K(rdma_freeaddrinfo, "NULL", 'S') { RV(rdma_freeaddrinfo(NULL)); }
K(rdma_freeaddrinfo, "twice", 'U') { struct rdma_addrinfo *r; if (rdma_getaddrinfo("192.0.2.1", "7471", NULL, &r)) fail("getaddrinfo"); rdma_freeaddrinfo(r); RV(rdma_freeaddrinfo(r)); }
K(rdma_resolve_addrinfo, "NULL id", 'S') { RI(rdma_resolve_addrinfo(NULL, "192.0.2.2", "7471", NULL)); }
K(rdma_resolve_addrinfo, "NULL node and service", 'S') { RI(rdma_resolve_addrinfo(IDA(), NULL, NULL, NULL)); }
K(rdma_resolve_addrinfo, "synchronous id", 'S') { RI(rdma_resolve_addrinfo(ID(), "192.0.2.2", "7471", NULL)); }
K(rdma_resolve_addrinfo, "node of 1 MiB", 'S') { RI(rdma_resolve_addrinfo(IDA(), HUGE(1 << 20), "7471", NULL)); }
K(rdma_resolve_addrinfo, "freed id", 'U') { RI(rdma_resolve_addrinfo(FREED_ID(), "192.0.2.2", "7471", NULL)); }
K(rdma_query_addrinfo, "NULL id", 'S') { struct rdma_addrinfo *r; RI(rdma_query_addrinfo(NULL, &r)); }
K(rdma_query_addrinfo, "NULL out-pointer", 'S') { RI(rdma_query_addrinfo(IDA(), NULL)); }
K(rdma_query_addrinfo, "nothing resolved", 'S') { struct rdma_addrinfo *r; RI(rdma_query_addrinfo(IDA(), &r)); }
K(rdma_query_addrinfo, "freed id", 'U') { struct rdma_addrinfo *r; RI(rdma_query_addrinfo(FREED_ID(), &r)); }

/* --- endpoints --- */
K(rdma_create_ep, "NULL id out-pointer", 'S') { struct rdma_addrinfo *r; if (rdma_getaddrinfo("192.0.2.1", "7471", NULL, &r)) fail("getaddrinfo"); RI(rdma_create_ep(NULL, r, NULL, NULL)); rdma_freeaddrinfo(r); }
K(rdma_create_ep, "NULL addrinfo", 'S') { struct rdma_cm_id *id; RI(rdma_create_ep(&id, NULL, NULL, NULL)); }
K(rdma_create_ep, "addrinfo with port space 0x7fff", 'S') { struct rdma_addrinfo a = { .ai_port_space = 0x7fff, .ai_family = AF_INET, .ai_src_addr = SA(A1), .ai_src_len = sizeof A1, .ai_flags = RAI_PASSIVE }; struct rdma_cm_id *id; RI(rdma_create_ep(&id, &a, NULL, NULL)); }
K(rdma_create_ep, "addrinfo without addresses", 'S') { struct rdma_addrinfo a = { .ai_port_space = RDMA_PS_TCP, .ai_family = AF_INET }; struct rdma_cm_id *id; RI(rdma_create_ep(&id, &a, NULL, NULL)); }
K(rdma_create_ep, "source length 2^30", 'S') { struct rdma_addrinfo a = { .ai_port_space = RDMA_PS_TCP, .ai_family = AF_INET, .ai_src_addr = SA(A1), .ai_src_len = 1u << 30, .ai_flags = RAI_PASSIVE }; struct rdma_cm_id *id; RI(rdma_create_ep(&id, &a, NULL, NULL)); }
K(rdma_destroy_ep, "NULL", 'S') { RV(rdma_destroy_ep(NULL)); }
K(rdma_destroy_ep, "freed id", 'U') { RV(rdma_destroy_ep(FREED_ID())); }
K(rdma_destroy_ep, "never-allocated id", 'U') { RV(rdma_destroy_ep(FAKE_ID())); }

/* --- ibv_gid_reachable (ours only; upstream has no such export) --- */
static int (*gid_reachable(void))(struct ibv_context *, unsigned, union ibv_gid *, int)
{
	return (int (*)(struct ibv_context *, unsigned, union ibv_gid *, int))dlsym(RTLD_DEFAULT, "ibv_gid_reachable");
}
#define GR(...)                                                                                  \
	do {                                                                                     \
		int (*f_)(struct ibv_context *, unsigned, union ibv_gid *, int) = gid_reachable(); \
		if (!f_)                                                                         \
			snprintf(OUT, sizeof OUT, "absent");                                     \
		else                                                                             \
			RI(f_(__VA_ARGS__));                                                     \
	} while (0)
K(ibv_gid_reachable, "NULL context", 'S') { union ibv_gid g = { 0 }; GR(NULL, 1, &g, 100); }
K(ibv_gid_reachable, "NULL gid", 'S') { GR(IDB()->verbs, 1, NULL, 100); }
K(ibv_gid_reachable, "port 0", 'S') { union ibv_gid g = { 0 }; GR(IDB()->verbs, 0, &g, 100); }
K(ibv_gid_reachable, "port 4096", 'S') { union ibv_gid g = { 0 }; GR(IDB()->verbs, 4096, &g, 100); }
K(ibv_gid_reachable, "timeout -5", 'S') { union ibv_gid g = { 0 }; GR(IDB()->verbs, 1, &g, -5); }
K(ibv_gid_reachable, "never-allocated context", 'U') { union ibv_gid g = { 0 }; GR(zeroed(4096), 1, &g, 100); }

/* --- rsockets --- */
K(rsocket, "domain 9999", 'S') { RN(rsocket(9999, SOCK_STREAM, 0)); }
K(rsocket, "type 9999", 'S') { RN(rsocket(AF_INET, 9999, 0)); }
K(rsocket, "protocol 9999", 'S') { RN(rsocket(AF_INET, SOCK_STREAM, 9999)); }
K(rbind, "NULL address", 'S') { RI(rbind(SOCK(), NULL, sizeof A1)); }
K(rbind, "address length 0", 'S') { RI(rbind(SOCK(), SA(A1), 0)); }
K(rbind, "address length 2^30", 'S') { RI(rbind(SOCK(), SA(A1), 1u << 30)); }
K(rbind, "never-allocated socket 12345", 'S') { RI(rbind(12345, SA(A1), sizeof A1)); }
K(rbind, "closed socket", 'S') { RI(rbind(CLOSED_SOCK(), SA(A1), sizeof A1)); }
K(rbind, "socket -1", 'S') { RI(rbind(-1, SA(A1), sizeof A1)); }
K(rlisten, "unbound socket", 'S') { RI(rlisten(SOCK(), 1)); }
K(rlisten, "socket -1", 'S') { RI(rlisten(-1, 1)); }
K(rlisten, "never-allocated socket 12345", 'S') { RI(rlisten(12345, 1)); }
K(raccept, "not listening", 'S') { struct sockaddr_in a; socklen_t l = sizeof a; int s = SOCK(); rfcntl(s, F_SETFL, O_NONBLOCK); RN(raccept(s, SA(a), &l)); }
K(raccept, "address without length", 'S') { struct sockaddr_in a; int s = SOCK(); rfcntl(s, F_SETFL, O_NONBLOCK); RN(raccept(s, SA(a), NULL)); }
K(raccept, "socket -1", 'S') { RN(raccept(-1, NULL, NULL)); }
K(raccept, "never-allocated socket 12345", 'S') { RN(raccept(12345, NULL, NULL)); }
K(rconnect, "NULL address", 'S') { RI(rconnect(SOCK(), NULL, sizeof A2)); }
K(rconnect, "address length 0", 'S') { RI(rconnect(SOCK(), SA(A2), 0)); }
K(rconnect, "family 0xffff", 'S') { struct sockaddr_storage s = { .ss_family = 0xffff }; RI(rconnect(SOCK(), SA(s), sizeof s)); }
K(rconnect, "socket -1", 'S') { RI(rconnect(-1, SA(A2), sizeof A2)); }
K(rconnect, "never-allocated socket 12345", 'S') { RI(rconnect(12345, SA(A2), sizeof A2)); }
K(rshutdown, "how 99", 'S') { RI(rshutdown(SOCK(), 99)); }
K(rshutdown, "socket -1", 'S') { RI(rshutdown(-1, SHUT_RDWR)); }
K(rshutdown, "never-allocated socket 12345", 'S') { RI(rshutdown(12345, SHUT_RDWR)); }
K(rclose, "socket -1", 'S') { RI(rclose(-1)); }
K(rclose, "never-allocated socket 12345", 'S') { RI(rclose(12345)); }
K(rclose, "twice", 'S') { RI(rclose(CLOSED_SOCK())); }
K(rrecv, "NULL buffer, length 16", 'S') { int s = SOCK(); RI(rrecv(s, NULL, 16, MSG_DONTWAIT)); }
K(rrecv, "socket -1", 'S') { char b[4]; RI(rrecv(-1, b, sizeof b, 0)); }
K(rrecv, "never-allocated socket 12345", 'S') { char b[4]; RI(rrecv(12345, b, sizeof b, 0)); }
K(rrecvfrom, "socket -1", 'S') { char b[4]; RI(rrecvfrom(-1, b, sizeof b, 0, NULL, NULL)); }
K(rrecvfrom, "unconnected socket", 'S') { char b[4]; RI(rrecvfrom(SOCK(), b, sizeof b, MSG_DONTWAIT, NULL, NULL)); }
K(rrecvmsg, "NULL msghdr", 'S') { RI(rrecvmsg(SOCK(), NULL, MSG_DONTWAIT)); }
K(rrecvmsg, "socket -1", 'S') { struct msghdr m = { 0 }; RI(rrecvmsg(-1, &m, 0)); }
K(rsend, "unconnected socket", 'S') { char b[4] = { 0 }; RI(rsend(SOCK(), b, sizeof b, MSG_DONTWAIT)); }
K(rsend, "NULL buffer, length SIZE_MAX", 'S') { RI(rsend(SOCK(), NULL, (size_t)-1, MSG_DONTWAIT)); }
K(rsend, "socket -1", 'S') { char b[4] = { 0 }; RI(rsend(-1, b, sizeof b, 0)); }
K(rsend, "never-allocated socket 12345", 'S') { char b[4] = { 0 }; RI(rsend(12345, b, sizeof b, 0)); }
K(rsendto, "socket -1", 'S') { char b[4] = { 0 }; RI(rsendto(-1, b, sizeof b, 0, SA(A2), sizeof A2)); }
K(rsendto, "unconnected socket, NULL address", 'S') { char b[4] = { 0 }; RI(rsendto(SOCK(), b, sizeof b, MSG_DONTWAIT, NULL, 0)); }
K(rsendmsg, "NULL msghdr", 'S') { RI(rsendmsg(SOCK(), NULL, MSG_DONTWAIT)); }
K(rsendmsg, "socket -1", 'S') { struct msghdr m = { 0 }; RI(rsendmsg(-1, &m, 0)); }
K(rread, "socket -1", 'S') { char b[4]; RI(rread(-1, b, sizeof b)); }
K(rread, "never-allocated socket 12345", 'S') { char b[4]; RI(rread(12345, b, sizeof b)); }
K(rreadv, "NULL iovec, count 1", 'S') { int s = SOCK(); rfcntl(s, F_SETFL, O_NONBLOCK); RI(rreadv(s, NULL, 1)); }
K(rreadv, "count -1", 'S') { struct iovec v = { 0 }; int s = SOCK(); rfcntl(s, F_SETFL, O_NONBLOCK); RI(rreadv(s, &v, -1)); }
K(rreadv, "socket -1", 'S') { struct iovec v = { 0 }; RI(rreadv(-1, &v, 1)); }
K(rwrite, "socket -1", 'S') { char b[4] = { 0 }; RI(rwrite(-1, b, sizeof b)); }
K(rwrite, "unconnected socket", 'S') { char b[4] = { 0 }; int s = SOCK(); rfcntl(s, F_SETFL, O_NONBLOCK); RI(rwrite(s, b, sizeof b)); }
K(rwritev, "NULL iovec, count 1", 'S') { int s = SOCK(); rfcntl(s, F_SETFL, O_NONBLOCK); RI(rwritev(s, NULL, 1)); }
K(rwritev, "count -1", 'S') { struct iovec v = { 0 }; int s = SOCK(); rfcntl(s, F_SETFL, O_NONBLOCK); RI(rwritev(s, &v, -1)); }
K(rwritev, "socket -1", 'S') { struct iovec v = { 0 }; RI(rwritev(-1, &v, 1)); }
K(rpoll, "NULL fds, count 0", 'S') { RI(rpoll(NULL, 0, 0)); }
K(rpoll, "NULL fds, count 1", 'S') { RI(rpoll(NULL, 1, 0)); }
K(rpoll, "fd -1", 'S') { struct pollfd p = { .fd = -1, .events = POLLIN }; RI(rpoll(&p, 1, 0)); }
K(rpoll, "never-allocated socket 12345", 'S') { struct pollfd p = { .fd = 12345, .events = POLLIN }; RI(rpoll(&p, 1, 0)); }
K(rpoll, "count 2^30", 'S') { struct pollfd p = { .fd = -1 }; RI(rpoll(&p, 1u << 30, 0)); }
K(rselect, "nfds -1", 'S') { struct timeval t = { 0 }; RI(rselect(-1, NULL, NULL, NULL, &t)); }
K(rselect, "nfds 0, NULL sets", 'S') { struct timeval t = { 0 }; RI(rselect(0, NULL, NULL, NULL, &t)); }
K(rselect, "nfds 2^20, NULL sets", 'S') { struct timeval t = { 0 }; RI(rselect(1 << 20, NULL, NULL, NULL, &t)); }
K(rgetpeername, "NULL length", 'S') { struct sockaddr_in a; RI(rgetpeername(SOCK(), SA(a), NULL)); }
K(rgetpeername, "unconnected", 'S') { struct sockaddr_in a; socklen_t l = sizeof a; RI(rgetpeername(SOCK(), SA(a), &l)); }
K(rgetpeername, "socket -1", 'S') { struct sockaddr_in a; socklen_t l = sizeof a; RI(rgetpeername(-1, SA(a), &l)); }
K(rgetsockname, "NULL length", 'S') { struct sockaddr_in a; RI(rgetsockname(SOCK(), SA(a), NULL)); }
K(rgetsockname, "length 0", 'S') { struct sockaddr_in a; socklen_t l = 0; RI(rgetsockname(SOCK(), SA(a), &l)); }
K(rgetsockname, "socket -1", 'S') { struct sockaddr_in a; socklen_t l = sizeof a; RI(rgetsockname(-1, SA(a), &l)); }
K(rsetsockopt, "NULL value", 'S') { RI(rsetsockopt(SOCK(), SOL_SOCKET, SO_RCVBUF, NULL, sizeof(int))); }
K(rsetsockopt, "length 0", 'S') { int v = 1; RI(rsetsockopt(SOCK(), SOL_SOCKET, SO_RCVBUF, &v, 0)); }
K(rsetsockopt, "level 9999", 'S') { int v = 1; RI(rsetsockopt(SOCK(), 9999, 1, &v, sizeof v)); }
K(rsetsockopt, "SOL_SOCKET option 9999", 'S') { int v = 1; RI(rsetsockopt(SOCK(), SOL_SOCKET, 9999, &v, sizeof v)); }
K(rsetsockopt, "socket -1", 'S') { int v = 1; RI(rsetsockopt(-1, SOL_SOCKET, SO_RCVBUF, &v, sizeof v)); }
K(rgetsockopt, "NULL length", 'S') { int v; RI(rgetsockopt(SOCK(), SOL_SOCKET, SO_RCVBUF, &v, NULL)); }
K(rgetsockopt, "NULL value", 'S') { socklen_t l = sizeof(int); RI(rgetsockopt(SOCK(), SOL_SOCKET, SO_RCVBUF, NULL, &l)); }
K(rgetsockopt, "level 9999", 'S') { int v; socklen_t l = sizeof v; RI(rgetsockopt(SOCK(), 9999, 1, &v, &l)); }
K(rgetsockopt, "socket -1", 'S') { int v; socklen_t l = sizeof v; RI(rgetsockopt(-1, SOL_SOCKET, SO_RCVBUF, &v, &l)); }
K(rfcntl, "command 9999", 'S') { RI(rfcntl(SOCK(), 9999, 0)); }
K(rfcntl, "socket -1", 'S') { RI(rfcntl(-1, F_GETFL)); }
K(rfcntl, "never-allocated socket 12345", 'S') { RI(rfcntl(12345, F_GETFL)); }
K(riomap, "unconnected socket", 'S') { static char b[4096]; RI(riomap(SOCK(), b, sizeof b, PROT_WRITE, 0, -1)); }
K(riomap, "NULL buffer", 'S') { RI(riomap(SOCK(), NULL, 4096, PROT_WRITE, 0, -1)); }
K(riomap, "socket -1", 'S') { static char b[4096]; RI(riomap(-1, b, sizeof b, PROT_WRITE, 0, -1)); }
K(riounmap, "never mapped", 'S') { static char b[4096]; RI(riounmap(SOCK(), b, sizeof b)); }
K(riounmap, "socket -1", 'S') { static char b[4096]; RI(riounmap(-1, b, sizeof b)); }
K(riowrite, "unconnected socket", 'S') { char b[4] = { 0 }; RI(riowrite(SOCK(), b, sizeof b, 0, 0)); }
K(riowrite, "socket -1", 'S') { char b[4] = { 0 }; RI(riowrite(-1, b, sizeof b, 0, 0)); }
K(repoll_create, "size 0", 'S') { RN(repoll_create(0)); }
K(repoll_create, "size -1", 'S') { RN(repoll_create(-1)); }
K(repoll_ctl, "epfd -1", 'S') { struct epoll_event e = { .events = EPOLLIN }; RI(repoll_ctl(-1, EPOLL_CTL_ADD, SOCK(), &e)); }
K(repoll_ctl, "op 99", 'S') { struct epoll_event e = { .events = EPOLLIN }; int ep = repoll_create(1); RI(repoll_ctl(ep, 99, SOCK(), &e)); }
K(repoll_ctl, "NULL event on add", 'S') { int ep = repoll_create(1); RI(repoll_ctl(ep, EPOLL_CTL_ADD, SOCK(), NULL)); }
K(repoll_ctl, "fd -1", 'S') { struct epoll_event e = { .events = EPOLLIN }; int ep = repoll_create(1); RI(repoll_ctl(ep, EPOLL_CTL_ADD, -1, &e)); }
K(repoll_wait, "epfd -1", 'S') { struct epoll_event e; RI(repoll_wait(-1, &e, 1, 0)); }
K(repoll_wait, "NULL events", 'S') { int ep = repoll_create(1); RI(repoll_wait(ep, NULL, 1, 0)); }
K(repoll_wait, "maxevents 0", 'S') { struct epoll_event e; int ep = repoll_create(1); RI(repoll_wait(ep, &e, 0, 0)); }
K(repoll_wait, "maxevents -1", 'S') { struct epoll_event e; int ep = repoll_create(1); RI(repoll_wait(ep, &e, -1, 0)); }

/* ======================= running ======================= */
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

static void run_one(const struct kase *k)
{
	int p[2];
	if (pipe(p))
		exit(2);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], 1);
		alarm(10);
		OUT[0] = 0;
		k->run();
		if (getenv("BADINPUT_LEAKS")) {
			cleanup();
			if (__lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check())
				strncat(OUT, " LEAK", sizeof OUT - strlen(OUT) - 1);
		}
		if (write(1, OUT, strlen(OUT)) < 0)
			_exit(2);
		_exit(0);
	}
	close(p[1]);
	char buf[256] = { 0 };
	size_t n = 0;
	ssize_t r;
	while (n < sizeof buf - 1 && (r = read(p[0], buf + n, sizeof buf - 1 - n)) > 0)
		n += r;
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	char res[300];
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
		snprintf(res, sizeof res, "TIMEOUT");
	else if (WIFSIGNALED(st))
		snprintf(res, sizeof res, "SIG%s", sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
	else if (WEXITSTATUS(st) != 0 && strncmp(buf, "SETUP-FAILED", 12))
		snprintf(res, sizeof res, "EXIT %d", WEXITSTATUS(st));
	else
		snprintf(res, sizeof res, "%s", buf);
	printf("%s\t%s\t%c\t%s\n", k->fn, k->name, k->cls, res);
}

static int by_name(const void *a, const void *b)
{
	const struct kase *x = a, *y = b;
	int c = strcmp(x->fn, y->fn);
	return c ? c : strcmp(x->name, y->name);
}

/* ---- --compare ---- */
struct row {
	char fn[64], name[128], cls, out[256];
};
static int load(const char *path, struct row *rows, int max)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		exit(2);
	}
	char line[600];
	int n = 0;
	while (n < max && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		char *fn = strtok(line, "\t"), *name = strtok(NULL, "\t"), *cls = strtok(NULL, "\t"), *out = strtok(NULL, "");
		if (!fn || !name || !cls || !out)
			continue;
		snprintf(rows[n].fn, sizeof rows[n].fn, "%s", fn);
		snprintf(rows[n].name, sizeof rows[n].name, "%s", name);
		rows[n].cls = cls[0];
		snprintf(rows[n].out, sizeof rows[n].out, "%s", out);
		n++;
	}
	fclose(f);
	return n;
}
static int died(const char *o)
{
	return !strncmp(o, "SIG", 3) || !strcmp(o, "TIMEOUT") || !strncmp(o, "EXIT", 4) || !strncmp(o, "SETUP", 5) ||
	       strstr(o, "LEAK");
}
/* an error return with EINVAL ("-1 EINVAL", "NULL EINVAL", "0 EINVAL" for a port, "22" for the
 * rsockets calls that return the error number itself), or a void function's return */
static int einval(const char *o)
{
	const char *sp = strchr(o, ' ');
	return !strcmp(o, "void") || !strcmp(o, "22") || (sp && !strcmp(sp + 1, "EINVAL"));
}
static const char *dev(const char *fn, const char *name)
{
	for (int i = 0; DEVS[i].fn; i++)
		if (!strcmp(DEVS[i].fn, fn) && !strcmp(DEVS[i].name, name))
			return DEVS[i].why;
	return NULL;
}
static struct row U[700], O[700];
static int compare(const char *up, const char *ours)
{
	int nu = load(up, U, 700), no = load(ours, O, 700), bad = 0, nfn = 0;
	int crash_up = 0, crash_ours = 0, same = 0, ndev = 0;
	const char *last = "";
	for (int i = 0; i < no; i++)
		if (strcmp(O[i].fn, last))
			nfn++, last = O[i].fn;
	printf("| function | case | class | upstream | ours | verdict |\n|---|---|---|---|---|---|\n");
	for (int i = 0; i < no; i++) {
		struct row *o = &O[i], *u = NULL;
		for (int j = 0; j < nu; j++)
			if (!strcmp(U[j].fn, o->fn) && !strcmp(U[j].name, o->name))
				u = &U[j];
		const char *uo = u ? u->out : "(not run)";
		const char *why = dev(o->fn, o->name), *verdict;
		static char vb[400];
		int ok;
		if (u && died(uo))
			crash_up++;
		if (died(o->out)) {
			crash_ours++;
			ok = 0;
			verdict = "FAIL: ours crashed, hung or leaked";
		} else if (o->cls == 'U') {
			ok = einval(o->out);
			verdict = ok ? "ok (undefined in upstream; ours EINVAL)" : "FAIL: expected EINVAL";
		} else if (!u) {
			ok = 0;
			verdict = "FAIL: no upstream outcome";
		} else if (!strcmp(uo, "absent")) {
			ok = 1;
			verdict = "ours only (upstream has no such export)";
		} else if (died(uo)) {
			ok = einval(o->out);
			verdict = ok ? "ok (upstream crashes; ours EINVAL)" : "FAIL: expected EINVAL";
		} else {
			ok = !strcmp(uo, o->out);
			if (ok)
				same++;
			verdict = ok ? "same" : "FAIL: differs from upstream";
		}
		if (!ok && why && (!died(o->out) || ((!strncmp(o->out, "SIG", 3) || !strncmp(o->out, "EXIT", 4)) && !strncmp(why, "inherent", 8)))) {
			snprintf(vb, sizeof vb, "deviation: %s", why);
			verdict = vb;
			ok = 1;
			ndev++;
		}
		if (!ok)
			bad++;
		printf("| `%s` | %s | %c | %s | %s | %s |\n", o->fn, o->name, o->cls, uo, o->out, verdict);
	}
	printf("\n%d cases over %d functions: %d identical to upstream, %d where upstream crashed or hung, "
	       "%d justified deviations, %d crashes/hangs/leaks of ours (inherent ones are among the deviations), %d failures\n",
	       no, nfn, same, crash_up, ndev, crash_ours, bad);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	qsort(cases, ncases, sizeof cases[0], by_name);
	if (argc == 4 && !strcmp(argv[1], "--compare"))
		return compare(argv[2], argv[3]);
	if (argc == 2 && !strcmp(argv[1], "--functions")) {
		for (int i = 0; i < ncases; i++)
			if (!i || strcmp(cases[i].fn, cases[i - 1].fn))
				printf("%s\n", cases[i].fn);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "-l")) {
		for (int i = 0; i < ncases; i++)
			printf("%s:%s\n", cases[i].fn, cases[i].name);
		return 0;
	}
	A1 = sa4("192.0.2.1", 0);
	A2 = sa4("192.0.2.2", 7471);
	ANY = sa4("0.0.0.0", 0);
	MC = sa4("239.0.0.7", 0);
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < ncases; i++) {
		if (argc > 1) {
			int want = 0;
			char full[256];
			snprintf(full, sizeof full, "%s:%s", cases[i].fn, cases[i].name);
			for (int a = 1; a < argc; a++)
				want |= !strcmp(argv[a], full) || !strcmp(argv[a], cases[i].fn);
			if (!want)
				continue;
		}
		run_one(&cases[i]);
	}
	return 0;
}
