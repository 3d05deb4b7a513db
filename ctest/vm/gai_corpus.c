/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * gai_corpus - differential corpus for rdma_getaddrinfo/rdma_freeaddrinfo.
 *
 * Runs a fixed list of (node, service, hints) cases and prints, for each,
 * the return value (errno when it is -1) and every field of every result
 * node, byte for byte.  The output depends only on the library and on the
 * host's name-service data, so two libraries run on the same host must
 * print the same text.
 *
 *   gai_corpus            run every case
 *   gai_corpus -l         list the cases only
 *   gai_corpus N...       run only the given case numbers
 *
 * One branch of upstream is undefined: AF_IB conversion (RAI_FAMILY +
 * AF_IB + RAI_NUMERICHOST) of an IPv4 result reads a sockaddr_in6 out of a
 * 16-byte sockaddr_in.  For such results only the well-defined fields of
 * the sockaddr_ib (family, pkey, service id and mask) are printed; the
 * case line says "ipv4->ib" so it is visible in the output.  Likewise the
 * ibacm connect header (only with an ibacm daemon) when the source and
 * destination addresses have different families: upstream copies 16 bytes
 * out of a 16-byte sockaddr_in starting at offset 8.
 */
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <rdma/rdma_cma.h>

#ifndef AF_IB
#define AF_IB 27
#endif
#define SIB_LEN 48

struct hint {
	const char *name;
	int null;
	int flags, family, qp, ps;
	const char *src, *dst; /* "a.b.c.d:port", "[v6]:port", "ib:<hex gid>:sid" */
	size_t route_len;
};

static const struct hint H[] = {
	{ "null", 1, 0, 0, 0, 0, NULL, NULL, 0 },
	{ "zero", 0, 0, 0, 0, 0, NULL, NULL, 0 },
	{ "passive", 0, RAI_PASSIVE, 0, 0, 0, NULL, NULL, 0 },
	{ "numeric", 0, RAI_NUMERICHOST, 0, 0, 0, NULL, NULL, 0 },
	{ "passive|numeric", 0, RAI_PASSIVE | RAI_NUMERICHOST, 0, 0, 0, NULL, NULL, 0 },
	{ "ib-family", 0, RAI_FAMILY | RAI_NUMERICHOST, AF_IB, 0, RDMA_PS_TCP, NULL, NULL, 0 },
	{ "ib-family-passive", 0, RAI_FAMILY | RAI_NUMERICHOST | RAI_PASSIVE, AF_IB, IBV_QPT_UD, RDMA_PS_UDP, NULL, NULL, 0 },
	{ "inet-rc-tcp", 0, 0, AF_INET, IBV_QPT_RC, RDMA_PS_TCP, NULL, NULL, 0 },
	{ "inet6-ud-udp", 0, 0, AF_INET6, IBV_QPT_UD, RDMA_PS_UDP, NULL, NULL, 0 },
	{ "uc-ipoib", 0, 0, 0, IBV_QPT_UC, RDMA_PS_IPOIB, NULL, NULL, 0 },
	{ "xrcsend-ib", 0, 0, 0, IBV_QPT_XRC_SEND, RDMA_PS_IB, NULL, NULL, 0 },
	{ "xrcrecv", 0, 0, 0, IBV_QPT_XRC_RECV, 0, NULL, NULL, 0 },
	{ "raw-unknownps", 0, 0, 0, IBV_QPT_RAW_PACKET, 0x1234, NULL, NULL, 0 },
	{ "ud-ib", 0, 0, 0, IBV_QPT_UD, RDMA_PS_IB, NULL, NULL, 0 },
	{ "ib-nofamilyflag", 0, RAI_NUMERICHOST, AF_IB, 0, 0, NULL, NULL, 0 },
	{ "ib-nonumeric", 0, RAI_FAMILY, AF_IB, 0, RDMA_PS_TCP, NULL, NULL, 0 },
	{ "noroute|unknown", 0, RAI_NOROUTE | 0x4000, 0, 0, 0, NULL, NULL, 0 },
	{ "dns", 0, RAI_DNS, 0, 0, 0, NULL, NULL, 0 },
	{ "inet6-passive-numeric", 0, RAI_PASSIVE | RAI_NUMERICHOST, AF_INET6, 0, 0, NULL, NULL, 0 },
	{ "src4", 0, 0, 0, 0, 0, "192.0.2.1:0", NULL, 0 },
	{ "src6", 0, 0, AF_INET6, 0, 0, "[2001:db8::1]:5000", NULL, 0 },
	{ "unknown-bits", 0, 0x7ffff000, 0, 0, 0, NULL, NULL, 0 },
	{ "bad-family", 0, 0, 12345, 0, 0, NULL, NULL, 0 },
	{ "neg-qp-ps", 0, 0, 0, -1, -1, NULL, NULL, 0 },
};
#define NH (sizeof(H) / sizeof(H[0]))

/* Hints for the cases without node and service. */
static const struct hint HX[] = {
	{ "flags-only", 0, RAI_NOROUTE | RAI_FAMILY | 0x100, AF_INET6, 0, 0, NULL, NULL, 0 },
	{ "dst4", 0, 0, AF_INET, IBV_QPT_RC, RDMA_PS_TCP, NULL, "192.0.2.2:7471", 0 },
	{ "dst6", 0, RAI_NUMERICHOST, AF_INET6, IBV_QPT_UD, RDMA_PS_UDP, NULL, "[2001:db8::2]:7471", 0 },
	{ "src4+dst4", 0, 0, AF_INET, 0, 0, "192.0.2.1:0", "192.0.2.2:7471", 0 },
	{ "src6-only", 0, RAI_PASSIVE, AF_INET6, 0, 0, "[2001:db8::1]:1", NULL, 0 },
	{ "passive-dst", 0, RAI_PASSIVE, AF_INET, 0, 0, NULL, "192.0.2.2:1", 0 },
	{ "dst-ib", 0, 0, AF_IB, IBV_QPT_RC, RDMA_PS_IB, NULL, "ib:fe800000000000000000000000000002:0106000000001d2f", 0 },
	{ "src-ib+dst-ib", 0, 0, AF_IB, 0, RDMA_PS_IB, "ib:fe800000000000000000000000000001:0", "ib:fe800000000000000000000000000002:13f0000000001", 0 },
	{ "route-hint", 0, 0, AF_INET, 0, 0, NULL, "192.0.2.2:7471", 72 },
	{ "weird-qp-ps", 0, 0x40000000, 99, 1234, 5678, NULL, NULL, 0 },
	{ "all-zero", 0, 0, 0, 0, 0, NULL, NULL, 0 },
};
#define NHX (sizeof(HX) / sizeof(HX[0]))

static const char *NODES[] = {
	NULL, "192.0.2.1", "192.0.2.2", "198.51.100.1", "127.0.0.1", "0.0.0.0",
	"::1", "::", "2001:db8::1", "2001:db8::2", "fe80::2%veth0", "fe80::1%1",
	"::ffff:192.0.2.1", "localhost", "nonexistent.invalid", "", "1.2.3",
	"256.1.1.1",
};
#define NNODES (sizeof(NODES) / sizeof(NODES[0]))

static const char *SERVICES[] = {
	NULL, "7471", "0", "65535", "65536", "", "http", "domain",
	"nonexistent-svc", "-1", "12ab", " 80", "99999999999",
};
#define NSERVICES (sizeof(SERVICES) / sizeof(SERVICES[0]))

/* Hint variants combined with every service. */
static const int SVC_HINTS[] = { 0, 1, 2, 4, 7, 8, 5 };
#define NSVC_HINTS (sizeof(SVC_HINTS) / sizeof(SVC_HINTS[0]))
/* Nodes combined with every service. */
static const char *SVC_NODES[] = { NULL, "192.0.2.1", "2001:db8::2" };
#define NSVC_NODES (sizeof(SVC_NODES) / sizeof(SVC_NODES[0]))

struct kase {
	const char *node, *service;
	const struct hint *h;
	int sa; /* RAI_SA case: extra flags */
};

#define MAXCASES 2048
static struct kase cases[MAXCASES];
static int ncases;

static void add(const char *node, const char *service, const struct hint *h)
{
	if (ncases < MAXCASES)
		cases[ncases++] = (struct kase){ node, service, h, 0 };
}

static const struct hint SA[] = {
	{ "sa", 0, RAI_SA, 0, 0, 0, NULL, NULL, 0 },
	{ "sa|dns", 0, RAI_SA | RAI_DNS, 0, 0, 0, NULL, NULL, 0 },
	{ "sa|passive", 0, RAI_SA | RAI_PASSIVE, AF_IB, 0, RDMA_PS_IB, NULL, NULL, 0 },
	{ "unknown|sa", 0, 0x7ffff000 | RAI_SA, 0, 0, 0, NULL, NULL, 0 },
};

static void build(void)
{
	size_t i, j;

	/* every node with every hint variant, service "7471" */
	for (i = 0; i < NNODES; i++)
		for (j = 0; j < NH; j++)
			add(NODES[i], "7471", &H[j]);
	/* services */
	for (i = 0; i < NSVC_NODES; i++)
		for (j = 0; j < NSERVICES; j++) {
			size_t k;
			for (k = 0; k < NSVC_HINTS; k++) {
				if (!SVC_NODES[i] && !SERVICES[j] && k == 0)
					continue; /* the all-NULL case is below */
				add(SVC_NODES[i], SERVICES[j], &H[SVC_HINTS[k]]);
			}
		}
	/* nodes without a service, a few hints */
	for (i = 1; i < NNODES; i++) {
		add(NODES[i], NULL, &H[1]);
		add(NODES[i], NULL, &H[3]);
	}
	/* neither node nor service */
	for (j = 0; j < NHX; j++)
		add(NULL, NULL, &HX[j]);
	add(NULL, NULL, &H[0]); /* all NULL: EINVAL */
	/* RAI_SA */
	for (j = 0; j < sizeof(SA) / sizeof(SA[0]); j++) {
		add(NULL, "1", &SA[j]);
		add(NULL, "0x1000000000000001", &SA[j]);
		add("192.0.2.1", "1", &SA[j]);
		add(NULL, NULL, &SA[j]);
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return 0;
}

/* Builds a socket address from the little notation of the tables. */
static socklen_t mkaddr(const char *s, struct sockaddr_storage *ss)
{
	char buf[128], *p;

	memset(ss, 0, sizeof(*ss));
	snprintf(buf, sizeof(buf), "%s", s);
	if (!strncmp(buf, "ib:", 3)) {
		uint8_t *b = (uint8_t *)ss;
		uint16_t fam = AF_IB, pkey = htons(0xffff);
		uint64_t sid, mask = ~0ULL;
		int i;

		memcpy(b, &fam, 2);
		memcpy(b + 2, &pkey, 2);
		for (i = 0; i < 16; i++)
			b[8 + i] = (uint8_t)(hexval(buf[3 + 2 * i]) << 4 | hexval(buf[4 + 2 * i]));
		sid = strtoull(buf + 3 + 33, NULL, 16);
		sid = htobe64(sid);
		memcpy(b + 24, &sid, 8);
		memcpy(b + 32, &mask, 8);
		return SIB_LEN;
	}
	if (buf[0] == '[') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		p = strchr(buf, ']');
		*p = 0;
		a->sin6_family = AF_INET6;
		inet_pton(AF_INET6, buf + 1, &a->sin6_addr);
		a->sin6_port = htons((uint16_t)atoi(p + 2));
		return sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		p = strchr(buf, ':');
		*p = 0;
		a->sin_family = AF_INET;
		inet_pton(AF_INET, buf, &a->sin_addr);
		a->sin_port = htons((uint16_t)atoi(p + 1));
		return sizeof(*a);
	}
}

static void hex(const char *what, const void *p, size_t len)
{
	const uint8_t *b = p;
	size_t i;

	printf("    %s[%zu]=", what, len);
	if (!p) {
		printf("NULL\n");
		return;
	}
	for (i = 0; i < len; i++)
		printf("%02x", b[i]);
	printf("\n");
}

/* Only the well-defined fields of a sockaddr_ib made from IPv4. */
static void sib_masked(const char *what, const void *p, size_t len)
{
	const uint8_t *b = p;

	printf("    %s[%zu]=", what, len);
	if (!p || len < SIB_LEN) {
		printf("%s\n", p ? "short" : "NULL");
		return;
	}
	printf("fam=%02x%02x pkey=%02x%02x sid=", b[0], b[1], b[2], b[3]);
	for (int i = 24; i < 32; i++)
		printf("%02x", b[i]);
	printf(" mask=");
	for (int i = 32; i < 40; i++)
		printf("%02x", b[i]);
	printf(" (gid/flowinfo/scope not compared)\n");
}

/*
 * The ibacm connect header of an AF_IB entry copies the IP addresses of the
 * entry after it with the size of that entry's family; when source and
 * destination families differ, upstream reads past the shorter address.
 */
static int mixed_families(const struct rdma_addrinfo *ip)
{
	if (!ip)
		return 0;
	if (ip->ai_src_addr && ip->ai_src_addr->sa_family != ip->ai_family)
		return 1;
	if (ip->ai_dst_addr && ip->ai_dst_addr->sa_family != ip->ai_family)
		return 1;
	return !ip->ai_src_addr || !ip->ai_dst_addr;
}

/* Whether upstream's AF_IB conversion would read an IPv4 address. */
static int ipv4_to_ib(const struct kase *k)
{
	const struct hint *h = k->h;
	struct addrinfo ai, *res;
	int ib;

	if (h->null || !((h->flags & RAI_FAMILY) && h->family == AF_IB &&
			 (h->flags & RAI_NUMERICHOST)))
		return 0;
	if (!k->node && !k->service)
		return 0;
	memset(&ai, 0, sizeof(ai));
	ai.ai_flags = AI_NUMERICHOST | ((h->flags & RAI_PASSIVE) ? AI_PASSIVE : 0);
	ai.ai_socktype = h->qp == IBV_QPT_UD ? SOCK_DGRAM : 0;
	ai.ai_protocol = h->ps == RDMA_PS_TCP ? IPPROTO_TCP : h->ps == RDMA_PS_UDP ? IPPROTO_UDP : 0;
	if (getaddrinfo(k->node, k->service, &ai, &res))
		return 0;
	ib = res->ai_family == AF_INET;
	freeaddrinfo(res);
	return ib;
}

static void run(int n)
{
	const struct kase *k = &cases[n];
	const struct hint *h = k->h;
	struct rdma_addrinfo hints, *res = (struct rdma_addrinfo *)&hints, *r;
	struct sockaddr_storage src, dst;
	uint8_t route[72];
	int ret, err, i, masked = ipv4_to_ib(k);

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = h->flags;
	hints.ai_family = h->family;
	hints.ai_qp_type = h->qp;
	hints.ai_port_space = h->ps;
	if (h->src) {
		hints.ai_src_len = mkaddr(h->src, &src);
		hints.ai_src_addr = (struct sockaddr *)&src;
	}
	if (h->dst) {
		hints.ai_dst_len = mkaddr(h->dst, &dst);
		hints.ai_dst_addr = (struct sockaddr *)&dst;
	}
	if (h->route_len) {
		memset(route, 0x5a, sizeof(route));
		hints.ai_route = route;
		hints.ai_route_len = h->route_len;
	}
	printf("case %d: node=%s%s%s service=%s%s%s hints=%s%s\n", n,
	       k->node ? "\"" : "", k->node ? k->node : "NULL", k->node ? "\"" : "",
	       k->service ? "\"" : "", k->service ? k->service : "NULL", k->service ? "\"" : "",
	       h->name, masked ? " ipv4->ib" : "");
	errno = 0;
	ret = rdma_getaddrinfo(k->node, k->service, h->null ? NULL : &hints, &res);
	err = errno;
	if (ret == -1) {
		printf("  ret=-1 errno=%d (%s)\n", err, strerror(err));
	} else if (ret) {
		printf("  ret=%d (EAI: %s)\n", ret, gai_strerror(ret));
	} else {
		printf("  ret=0\n");
	}
	if (ret) {
		if (res != (struct rdma_addrinfo *)&hints)
			printf("  res changed on failure\n");
		return;
	}
	for (r = res, i = 0; r; r = r->ai_next, i++) {
		printf("  [%d] flags=%#x family=%d qp_type=%d port_space=%#x\n", i,
		       (unsigned)r->ai_flags, r->ai_family, r->ai_qp_type,
		       (unsigned)r->ai_port_space);
		if (masked && r->ai_family == AF_IB) {
			sib_masked("src", r->ai_src_addr, r->ai_src_len);
			sib_masked("dst", r->ai_dst_addr, r->ai_dst_len);
		} else {
			hex("src", r->ai_src_addr, r->ai_src_len);
			hex("dst", r->ai_dst_addr, r->ai_dst_len);
		}
		printf("    src_canonname=%s dst_canonname=%s\n",
		       r->ai_src_canonname ? r->ai_src_canonname : "NULL",
		       r->ai_dst_canonname ? r->ai_dst_canonname : "NULL");
		if (masked && r->ai_route)
			/* ibacm was asked with the undefined GID */
			printf("    route[%zu]=(from the undefined GID, not compared)\n", r->ai_route_len);
		else
			hex("route", r->ai_route, r->ai_route_len);
		if (r->ai_connect && mixed_families(r->ai_next))
			printf("    connect[%zu]=%02x%02x (addresses of mixed families, not compared)\n",
			       r->ai_connect_len, ((uint8_t *)r->ai_connect)[0],
			       ((uint8_t *)r->ai_connect)[1]);
		else
			hex("connect", r->ai_connect, r->ai_connect_len);
	}
	rdma_freeaddrinfo(res);
}

/* rdma_freeaddrinfo on a chain built by the caller with malloc. */
static void custom_free(void)
{
	struct rdma_addrinfo *head = NULL, *n;
	int i;

	for (i = 0; i < 3; i++) {
		n = calloc(1, sizeof(*n));
		if (!n)
			exit(2);
		n->ai_src_addr = malloc(16);
		n->ai_dst_addr = malloc(28);
		n->ai_src_canonname = strdup("src");
		n->ai_dst_canonname = strdup("dst");
		n->ai_route = malloc(72);
		n->ai_connect = malloc(36);
		n->ai_next = head;
		head = n;
	}
	rdma_freeaddrinfo(head);
	rdma_freeaddrinfo(NULL);
	printf("custom chain freed\n");
}

int main(int argc, char **argv)
{
	int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	build();
	if (argc > 1 && !strcmp(argv[1], "-l")) {
		for (i = 0; i < ncases; i++)
			printf("%d %s %s %s\n", i, cases[i].node ? cases[i].node : "NULL",
			       cases[i].service ? cases[i].service : "NULL", cases[i].h->name);
		return 0;
	}
	if (argc > 1) {
		for (i = 1; i < argc; i++) {
			int n = atoi(argv[i]);
			if (n >= 0 && n < ncases)
				run(n);
		}
		return 0;
	}
	for (i = 0; i < ncases; i++)
		run(i);
	custom_free();
	printf("%d cases\n", ncases);
	return 0;
}
