/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * cm_resolve - differential cases for the CM core: event channels, ids,
 * devices, bind, address and route resolution.
 *
 * Over 800 lines: about seventy short cases in one table sharing the fixtures at the top;
 * one program prints the one transcript the VM compares between the two libraries.
 *
 * Every case runs through whichever librdmacm is loaded and prints a
 * transcript: return values, errno names, events, statuses and the id
 * fields C programs read.  Pointers are printed as set/NULL and the
 * ephemeral source port as '*', so two libraries on the same VM boot must
 * print the same text.
 *
 *   cm_resolve [-l] [case ...]     list, or run only the named cases
 *
 * The case "removal" runs only when named: it creates a veth pair and an
 * rxe device "rxerm" on it, binds ids to it, deletes it with
 * "rdma link delete" under the live ids, and removes the veth pair.
 *
 * Addresses of the test bed: rxe0 192.0.2.1 / 2001:db8::1 (root ns) <->
 * rxe1 192.0.2.2 / 2001:db8::2 (ns1); siw0 198.51.100.1 (root ns).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>
#include "common.h"

#ifndef AF_IB
#define AF_IB 27
#endif

#define EV_WAIT_MS 8000


static void rc(const char *what, int ret)
{
	if (ret)
		printf("  %s = %d errno=%s\n", what, ret, en(errno));
	else
		printf("  %s = 0\n", what);
}

static void fmt_addr(const struct sockaddr *sa, char *out, size_t n, int mask_port)
{
	char a[INET6_ADDRSTRLEN + 16];
	switch (sa->sa_family) {
	case AF_INET: {
		const struct sockaddr_in *s = (const void *)sa;
		inet_ntop(AF_INET, &s->sin_addr, a, sizeof a);
		if (mask_port && s->sin_port)
			snprintf(out, n, "%s:*", a);
		else
			snprintf(out, n, "%s:%u", a, ntohs(s->sin_port));
		break;
	}
	case AF_INET6: {
		const struct sockaddr_in6 *s = (const void *)sa;
		inet_ntop(AF_INET6, &s->sin6_addr, a, sizeof a);
		if (IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr))
			snprintf(a, sizeof a, "fe80::(masked)");
		if (mask_port && s->sin6_port)
			snprintf(out, n, "[%s%%%s]:*", a, s->sin6_scope_id ? "if" : "0");
		else
			snprintf(out, n, "[%s%%%s]:%u", a, s->sin6_scope_id ? "if" : "0", ntohs(s->sin6_port));
		break;
	}
	case AF_IB: {
		const struct sockaddr_ib *s = (const void *)sa;
		inet_ntop(AF_INET6, &s->sib_addr, a, sizeof a);
		unsigned long long sid = be64toh(s->sib_sid);
		if (mask_port && (sid & 0xffff))
			snprintf(out, n, "ib<%s pkey=0x%x sid=0x%llx:*>", a, ntohs(s->sib_pkey), sid >> 16);
		else
			snprintf(out, n, "ib<%s pkey=0x%x sid=0x%llx>", a, ntohs(s->sib_pkey), sid);
		break;
	}
	default:
		snprintf(out, n, "family%d", sa->sa_family);
	}
}

static const char *gidstr(const union ibv_gid *g, char *b, size_t n)
{
	inet_ntop(AF_INET6, g->raw, b, n);
	if (g->raw[0] == 0xfe && g->raw[1] == 0x80)
		snprintf(b, n, "fe80::(masked)");
	return b;
}

static void show_id(struct rdma_cm_id *id)
{
	char s[128], d[128], g1[64], g2[64];
	fmt_addr(rdma_get_local_addr(id), s, sizeof s, 1);
	fmt_addr(rdma_get_peer_addr(id), d, sizeof d, 0);
	printf("  id: dev=%s port_num=%u ps=0x%x qp_type=%d pd=%s qp=%s\n",
	       id->verbs ? ibv_get_device_name(id->verbs->device) : "NULL", id->port_num,
	       id->ps, id->qp_type, id->pd ? "set" : "NULL", id->qp ? "set" : "NULL");
	printf("  id: src=%s dst=%s src_port=%s dst_port=%u\n", s, d,
	       rdma_get_src_port(id) ? "*" : "0", ntohs(rdma_get_dst_port(id)));
	printf("  id: sgid=%s dgid=%s pkey=0x%x num_paths=%d path_rec=%s\n",
	       gidstr(&id->route.addr.addr.ibaddr.sgid, g1, sizeof g1),
	       gidstr(&id->route.addr.addr.ibaddr.dgid, g2, sizeof g2),
	       ntohs(id->route.addr.addr.ibaddr.pkey), id->route.num_paths,
	       id->route.path_rec ? "set" : "NULL");
	for (int i = 0; i < id->route.num_paths && id->route.path_rec; i++) {
		struct ibv_sa_path_rec *p = &id->route.path_rec[i];
		printf("  path[%d]: dgid=%s sgid=%s dlid=%u slid=%u hop=%u tclass=%u pkey=0x%x sl=%u mtu=%u/%u rate=%u/%u plt=%u/%u pref=%u rev=%d nump=%u\n",
		       i, gidstr(&p->dgid, g1, sizeof g1), gidstr(&p->sgid, g2, sizeof g2),
		       ntohs(p->dlid), ntohs(p->slid), p->hop_limit, p->traffic_class,
		       ntohs(p->pkey), p->sl, p->mtu_selector, p->mtu, p->rate_selector,
		       p->rate, p->packet_life_time_selector, p->packet_life_time,
		       p->preference, p->reversible, p->numb_path);
	}
}

static void show_event(struct rdma_cm_event *e, struct rdma_cm_id *want)
{
	printf("  event: %s status=%d id=%s listen_id=%s pdlen=%u\n", rdma_event_str(e->event),
	       e->status, e->id == want ? "same" : (e->id ? "other" : "NULL"),
	       e->listen_id ? "set" : "NULL", e->param.conn.private_data_len);
}

/* Waits for one event (bounded), prints it and returns it unacked. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, struct rdma_cm_id *id)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e = NULL;
	int r = poll(&p, 1, EV_WAIT_MS);
	if (r <= 0) {
		printf("  event: none within %d ms\n", EV_WAIT_MS);
		return NULL;
	}
	r = rdma_get_cm_event(ch, &e);
	if (r) {
		rc("rdma_get_cm_event", r);
		return NULL;
	}
	show_event(e, id);
	return e;
}

static void sa4(struct sockaddr_in *s, const char *ip, int port)
{
	memset(s, 0, sizeof *s);
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	inet_pton(AF_INET, ip, &s->sin_addr);
}

static void sa6(struct sockaddr_in6 *s, const char *ip, int port)
{
	memset(s, 0, sizeof *s);
	s->sin6_family = AF_INET6;
	s->sin6_port = htons(port);
	inet_pton(AF_INET6, ip, &s->sin6_addr);
}

/* Async resolution of dst (and src), then the route; prints everything. */
static void async_resolve(struct sockaddr *src, struct sockaddr *bind_to, struct sockaddr *dst,
			  int timeout, int route, enum rdma_port_space ps)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct rdma_cm_event *e;
	int r;

	if (!ch) {
		rc("rdma_create_event_channel", -1);
		return;
	}
	r = rdma_create_id(ch, &id, (void *)0x1234, ps);
	rc("rdma_create_id", r);
	if (r)
		goto out;
	printf("  id: channel=%s context=%s event=%s\n", id->channel == ch ? "same" : "other",
	       id->context == (void *)0x1234 ? "same" : "other", id->event ? "set" : "NULL");
	if (bind_to) {
		rc("rdma_bind_addr", rdma_bind_addr(id, bind_to));
		show_id(id);
	}
	r = rdma_resolve_addr(id, src, dst, timeout);
	rc("rdma_resolve_addr", r);
	if (!r) {
		e = next_event(ch, id);
		if (e) {
			int ok = e->event == RDMA_CM_EVENT_ADDR_RESOLVED;
			show_id(id);
			rc("rdma_ack_cm_event", rdma_ack_cm_event(e));
			if (ok && route) {
				r = rdma_resolve_route(id, 2000);
				rc("rdma_resolve_route", r);
				if (!r && (e = next_event(ch, id))) {
					show_id(id);
					rc("rdma_ack_cm_event", rdma_ack_cm_event(e));
				}
			}
		}
	}
	rc("rdma_destroy_id", rdma_destroy_id(id));
out:
	rdma_destroy_event_channel(ch);
}

/* The same through a synchronous id (NULL channel). */
static void sync_resolve(struct sockaddr *src, struct sockaddr *dst, int timeout, int route)
{
	struct rdma_cm_id *id = NULL;
	int r = rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP);

	rc("rdma_create_id(sync)", r);
	if (r)
		return;
	printf("  id: channel=%s event=%s\n", id->channel ? "set" : "NULL", id->event ? "set" : "NULL");
	r = rdma_resolve_addr(id, src, dst, timeout);
	rc("rdma_resolve_addr", r);
	if (id->event)
		show_event(id->event, id);
	show_id(id);
	if (!r && route) {
		r = rdma_resolve_route(id, 2000);
		rc("rdma_resolve_route", r);
		if (id->event)
			show_event(id->event, id);
		show_id(id);
	}
	rc("rdma_destroy_id", rdma_destroy_id(id));
}

/* ---- cases ---------------------------------------------------------------- */

static void c_devices(void)
{
	int n = -1;
	struct ibv_context **l = rdma_get_devices(&n);
	printf("  rdma_get_devices: %s n=%d\n", l ? "list" : "NULL", n);
	for (int i = 0; l && l[i]; i++)
		printf("  dev[%d]=%s\n", i, ibv_get_device_name(l[i]->device));
	if (l) {
		struct ibv_context **l2 = rdma_get_devices(NULL);
		printf("  second list: %s same_ctx=%s\n", l2 ? "list" : "NULL",
		       l2 && l2[0] == l[0] ? "yes" : "no");
		if (l2)
			rdma_free_devices(l2);
		rdma_free_devices(l);
	}
}

static void c_channel(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	printf("  channel=%s fd=%s\n", ch ? "set" : "NULL", ch && ch->fd >= 0 ? "ok" : "bad");
	if (ch)
		rdma_destroy_event_channel(ch);
}

static void c_v4(void)
{
	struct sockaddr_in d;
	sa4(&d, "192.0.2.2", 7471);
	async_resolve(NULL, NULL, (void *)&d, 2000, 1, RDMA_PS_TCP);
}

static void c_v4_udp(void)
{
	struct sockaddr_in d;
	sa4(&d, "192.0.2.2", 7174);
	async_resolve(NULL, NULL, (void *)&d, 2000, 1, RDMA_PS_UDP);
}

static void c_v4_ipoib(void)
{
	struct sockaddr_in d;
	sa4(&d, "192.0.2.2", 0);
	async_resolve(NULL, NULL, (void *)&d, 2000, 1, RDMA_PS_IPOIB);
}

static void c_v6(void)
{
	struct sockaddr_in6 d;
	sa6(&d, "2001:db8::2", 7471);
	async_resolve(NULL, NULL, (void *)&d, 2000, 1, RDMA_PS_TCP);
}

static void c_src(void)
{
	struct sockaddr_in s, d;
	sa4(&s, "192.0.2.1", 0);
	sa4(&d, "192.0.2.2", 7471);
	async_resolve((void *)&s, NULL, (void *)&d, 2000, 1, RDMA_PS_TCP);
}

static void c_src_port(void)
{
	struct sockaddr_in s, d;
	sa4(&s, "192.0.2.1", 40123);
	sa4(&d, "192.0.2.2", 7471);
	async_resolve((void *)&s, NULL, (void *)&d, 2000, 0, RDMA_PS_TCP);
}

static void c_bound(void)
{
	struct sockaddr_in b, d;
	sa4(&b, "192.0.2.1", 0);
	sa4(&d, "192.0.2.2", 7471);
	async_resolve(NULL, (void *)&b, (void *)&d, 2000, 1, RDMA_PS_TCP);
}

static void c_bound6(void)
{
	struct sockaddr_in6 b, d;
	sa6(&b, "2001:db8::1", 0);
	sa6(&d, "2001:db8::2", 7471);
	async_resolve(NULL, (void *)&b, (void *)&d, 2000, 1, RDMA_PS_TCP);
}

static void c_wildcard(void)
{
	struct sockaddr_in b, d;
	sa4(&b, "0.0.0.0", 0);
	sa4(&d, "192.0.2.2", 7471);
	async_resolve(NULL, (void *)&b, (void *)&d, 2000, 1, RDMA_PS_TCP);
}

static void c_wildcard6(void)
{
	struct sockaddr_in6 b, d;
	sa6(&b, "::", 0);
	sa6(&d, "2001:db8::2", 7471);
	async_resolve(NULL, (void *)&b, (void *)&d, 2000, 1, RDMA_PS_TCP);
}

static void c_loop(void)
{
	struct sockaddr_in d;
	sa4(&d, "192.0.2.1", 7471);
	async_resolve(NULL, NULL, (void *)&d, 2000, 1, RDMA_PS_TCP);
}

static void c_siw(void)
{
	struct sockaddr_in d;
	sa4(&d, "198.51.100.1", 7471);
	async_resolve(NULL, NULL, (void *)&d, 2000, 1, RDMA_PS_TCP);
}

static void c_siw_bound(void)
{
	struct sockaddr_in b, d;
	sa4(&b, "198.51.100.1", 0);
	sa4(&d, "198.51.100.1", 7471);
	async_resolve(NULL, (void *)&b, (void *)&d, 2000, 1, RDMA_PS_TCP);
}

static void c_no_neigh(void)
{
	struct sockaddr_in d;
	sa4(&d, "192.0.2.99", 7471);
	async_resolve(NULL, NULL, (void *)&d, 1000, 0, RDMA_PS_TCP);
}

static void c_no_route(void)
{
	struct sockaddr_in d;
	sa4(&d, "203.0.113.1", 7471);
	async_resolve(NULL, NULL, (void *)&d, 1000, 0, RDMA_PS_TCP);
}

static void c_no_route6(void)
{
	struct sockaddr_in6 d;
	sa6(&d, "2001:db8:ffff::1", 7471);
	async_resolve(NULL, NULL, (void *)&d, 1000, 0, RDMA_PS_TCP);
}

static void c_mismatch(void)
{
	struct sockaddr_in s;
	struct sockaddr_in6 d;
	sa4(&s, "192.0.2.1", 0);
	sa6(&d, "2001:db8::2", 7471);
	async_resolve((void *)&s, NULL, (void *)&d, 1000, 0, RDMA_PS_TCP);
}

static void c_mismatch_bound(void)
{
	struct sockaddr_in b;
	struct sockaddr_in6 d;
	sa4(&b, "192.0.2.1", 0);
	sa6(&d, "2001:db8::2", 7471);
	async_resolve(NULL, (void *)&b, (void *)&d, 1000, 0, RDMA_PS_TCP);
}

static void c_linklocal(void)
{
	/* The link-local address of the interface that carries 192.0.2.1. */
	struct ifaddrs *ifa, *i;
	char ifname[IF_NAMESIZE] = "";
	struct sockaddr_in6 d;
	int found = 0;

	if (getifaddrs(&ifa)) {
		printf("  getifaddrs failed\n");
		return;
	}
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == inet_addr("192.0.2.1"))
			snprintf(ifname, sizeof ifname, "%s", i->ifa_name);
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET6 && !strcmp(i->ifa_name, ifname) &&
		    IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr)) {
			memcpy(&d, i->ifa_addr, sizeof d);
			found = 1;
		}
	freeifaddrs(ifa);
	if (!found) {
		printf("  no link-local address on the 192.0.2.1 interface\n");
		return;
	}
	d.sin6_port = htons(7471);
	d.sin6_scope_id = if_nametoindex(ifname);
	async_resolve(NULL, NULL, (void *)&d, 2000, 1, RDMA_PS_TCP);
	/* Without a scope the kernel cannot pick the interface. */
	d.sin6_scope_id = 0;
	async_resolve(NULL, NULL, (void *)&d, 1000, 0, RDMA_PS_TCP);
}

static void c_af_ib(void)
{
	struct sockaddr_ib s, d;
	struct ibv_context **l = rdma_get_devices(NULL);
	union ibv_gid gid;

	memset(&s, 0, sizeof s);
	memset(&d, 0, sizeof d);
	s.sib_family = d.sib_family = AF_IB;
	d.sib_pkey = htons(0xffff);
	d.sib_sid = htobe64(RDMA_IB_IP_PS_TCP | 7471);
	d.sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK);
	if (l && l[0] && !ibv_query_gid(l[0], 1, 1, &gid))
		memcpy(&d.sib_addr, gid.raw, 16);
	if (l)
		rdma_free_devices(l);
	printf("  (dst: GID index 1 of the first device)\n");
	async_resolve(NULL, NULL, (void *)&d, 1000, 1, RDMA_PS_IB);
	printf("  (bound AF_IB wildcard)\n");
	async_resolve(NULL, (void *)&s, (void *)&d, 1000, 1, RDMA_PS_IB);
}

static void c_sync(void)
{
	struct sockaddr_in d;
	struct sockaddr_in6 d6;
	sa4(&d, "192.0.2.2", 7471);
	sync_resolve(NULL, (void *)&d, 2000, 1);
	sa6(&d6, "2001:db8::2", 7471);
	sync_resolve(NULL, (void *)&d6, 2000, 1);
}

static void c_sync_errors(void)
{
	struct sockaddr_in d, s;
	sa4(&d, "192.0.2.99", 7471);
	sync_resolve(NULL, (void *)&d, 1000, 0);
	sa4(&d, "203.0.113.1", 7471);
	sync_resolve(NULL, (void *)&d, 1000, 0);
	sa4(&s, "198.51.100.1", 0);
	sa4(&d, "192.0.2.2", 7471);
	printf("  (source on siw0, destination behind rxe0)\n");
	sync_resolve((void *)&s, (void *)&d, 1000, 1);
}

static void c_sync_twice(void)
{
	struct rdma_cm_id *id = NULL;
	struct sockaddr_in d;
	sa4(&d, "192.0.2.2", 7471);
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP)) {
		rc("rdma_create_id(sync)", -1);
		return;
	}
	rc("rdma_resolve_addr", rdma_resolve_addr(id, NULL, (void *)&d, 2000));
	rc("rdma_resolve_addr(again)", rdma_resolve_addr(id, NULL, (void *)&d, 2000));
	if (id->event)
		show_event(id->event, id);
	rc("rdma_resolve_route", rdma_resolve_route(id, 2000));
	rc("rdma_resolve_route(again)", rdma_resolve_route(id, 2000));
	if (id->event)
		show_event(id->event, id);
	show_id(id);
	rc("rdma_destroy_id", rdma_destroy_id(id));
}

static void c_bad_args(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct rdma_cm_event *e;
	struct sockaddr_in d;
	struct sockaddr_storage junk;
	uint8_t tos = 32;
	int v;

	if (!ch) {
		rc("rdma_create_event_channel", -1);
		return;
	}
	rc("rdma_create_id(ps=0x9999)", rdma_create_id(ch, &id, NULL, 0x9999));
	rc("rdma_create_id(ps=0)", rdma_create_id(ch, &id, NULL, 0));
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		rc("rdma_create_id", -1);
		rdma_destroy_event_channel(ch);
		return;
	}
	memset(&junk, 0, sizeof junk);
	junk.ss_family = AF_UNIX;
	rc("rdma_bind_addr(AF_UNIX)", rdma_bind_addr(id, (void *)&junk));
	rc("rdma_bind_addr(NULL)", rdma_bind_addr(id, NULL));
	junk.ss_family = 0xffff;
	rc("rdma_bind_addr(family 0xffff)", rdma_bind_addr(id, (void *)&junk));
	rc("rdma_resolve_addr(dst NULL)", rdma_resolve_addr(id, NULL, NULL, 1000));
	rc("rdma_resolve_addr(dst AF_UNSPEC)", rdma_resolve_addr(id, NULL, (void *)&junk, 1000));
	sa4(&d, "192.0.2.2", 1);
	junk.ss_family = AF_UNIX;
	rc("rdma_resolve_addr(src AF_UNIX)", rdma_resolve_addr(id, (void *)&junk, (void *)&d, 1000));
	sa4(&d, "192.0.2.77", 1);
	rc("rdma_bind_addr(foreign address)", rdma_bind_addr(id, (void *)&d));
	sa4(&d, "192.0.2.1", 0);
	rc("rdma_bind_addr(192.0.2.1)", rdma_bind_addr(id, (void *)&d));
	rc("rdma_bind_addr(again)", rdma_bind_addr(id, (void *)&d));
	rc("rdma_set_option(TOS)", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos));
	rc("rdma_set_option(TOS, short)", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 0));
	v = 1;
	rc("rdma_set_option(REUSEADDR after bind)", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof v));
	rc("rdma_set_option(AFONLY after bind)", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof v));
	rc("rdma_set_option(ACK_TIMEOUT)", rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &tos, sizeof tos));
	rc("rdma_set_option(level 99)", rdma_set_option(id, 99, 0, &v, sizeof v));
	rc("rdma_set_option(name 99)", rdma_set_option(id, RDMA_OPTION_ID, 99, &v, sizeof v));
	rc("rdma_set_option(IB_PATH, empty)", rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &v, 0));
	rc("rdma_ack_cm_event(NULL)", rdma_ack_cm_event(NULL));
	rc("rdma_get_cm_event(event NULL)", rdma_get_cm_event(ch, NULL));
	rc("rdma_write_cm_event(ADDR_RESOLVED)", rdma_write_cm_event(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0, 0));
	rc("rdma_write_cm_event(USER)", rdma_write_cm_event(id, RDMA_CM_EVENT_USER, -5, 0x1122334455667788ULL));
	if ((e = next_event(ch, id))) {
		printf("  user arg=0x%llx\n", (unsigned long long)e->param.arg);
		rdma_ack_cm_event(e);
	}
	printf("  rdma_event_str(99)=%s rdma_event_str(-1)=%s\n", rdma_event_str(99), rdma_event_str(-1));
	rc("rdma_destroy_id", rdma_destroy_id(id));
	rdma_destroy_event_channel(ch);
}

static void c_port_spaces(void)
{
	static const int ps[] = { RDMA_PS_IPOIB, RDMA_PS_TCP, RDMA_PS_UDP, RDMA_PS_IB };
	for (unsigned i = 0; i < sizeof ps / sizeof ps[0]; i++) {
		struct rdma_cm_id *id = NULL;
		int r = rdma_create_id(NULL, &id, NULL, ps[i]);
		printf("  ps=0x%x: ret=%d", ps[i], r);
		if (!r) {
			printf(" qp_type=%d ps=0x%x sync_channel=%s\n", id->qp_type, id->ps,
			       id->channel ? "set" : "NULL");
			rdma_destroy_id(id);
		} else {
			printf(" errno=%s\n", en(errno));
		}
	}
}

static void c_unacked(void)
{
	/* An event queued in the kernel but never fetched: destroy must not wait. */
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct sockaddr_in d;
	struct pollfd p = { .fd = ch ? ch->fd : -1, .events = POLLIN };

	sa4(&d, "192.0.2.2", 7471);
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		rc("setup", -1);
		return;
	}
	rc("rdma_resolve_addr", rdma_resolve_addr(id, NULL, (void *)&d, 2000));
	printf("  poll: %d\n", poll(&p, 1, EV_WAIT_MS));
	rc("rdma_destroy_id(event queued)", rdma_destroy_id(id));
	p.revents = 0;
	printf("  poll after destroy: %d\n", poll(&p, 1, 100));
	rdma_destroy_event_channel(ch);
}

struct acker {
	struct rdma_cm_event *e;
	volatile int acked;
};

static void *ack_later(void *arg)
{
	struct acker *a = arg;
	usleep(300 * 1000);
	a->acked = 1;
	rdma_ack_cm_event(a->e);
	return NULL;
}

static void c_destroy_waits(void)
{
	/* A fetched event not acked yet: destroy waits for the ack. */
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct sockaddr_in d;
	struct acker a = { 0 };
	pthread_t t;

	sa4(&d, "192.0.2.2", 7471);
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		rc("setup", -1);
		return;
	}
	rc("rdma_resolve_addr", rdma_resolve_addr(id, NULL, (void *)&d, 2000));
	a.e = next_event(ch, id);
	if (!a.e)
		return;
	pthread_create(&t, NULL, ack_later, &a);
	rc("rdma_destroy_id", rdma_destroy_id(id));
	printf("  destroy returned %s the ack\n", a.acked ? "after" : "BEFORE");
	pthread_join(t, NULL);
	rdma_destroy_event_channel(ch);
}

static void c_migrate(void)
{
	struct rdma_event_channel *c1 = rdma_create_event_channel();
	struct rdma_event_channel *c2 = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct rdma_cm_event *e;
	struct sockaddr_in d;

	sa4(&d, "192.0.2.2", 7471);
	if (!c1 || !c2 || rdma_create_id(c1, &id, NULL, RDMA_PS_TCP)) {
		rc("setup", -1);
		return;
	}
	rc("rdma_migrate_id(c2)", rdma_migrate_id(id, c2));
	printf("  channel=%s\n", id->channel == c2 ? "c2" : "other");
	rc("rdma_resolve_addr", rdma_resolve_addr(id, NULL, (void *)&d, 2000));
	if ((e = next_event(c2, id)))
		rdma_ack_cm_event(e);
	rc("rdma_migrate_id(NULL)", rdma_migrate_id(id, NULL));
	printf("  channel=%s\n", id->channel == c1 ? "c1" : id->channel == c2 ? "c2" : "private");
	rc("rdma_migrate_id(NULL again)", rdma_migrate_id(id, NULL));
	rc("rdma_resolve_route(sync now)", rdma_resolve_route(id, 2000));
	if (id->event)
		show_event(id->event, id);
	rc("rdma_migrate_id(c1)", rdma_migrate_id(id, c1));
	printf("  channel=%s event=%s\n", id->channel == c1 ? "c1" : "other", id->event ? "set" : "NULL");
	rc("rdma_destroy_id", rdma_destroy_id(id));
	rdma_destroy_event_channel(c1);
	rdma_destroy_event_channel(c2);
}

static void c_many(void)
{
	/* 100 ids on one channel, resolved together (cmtime's pattern). */
	enum { N = 100 };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id[N];
	struct sockaddr_in d;
	int counts[RDMA_CM_EVENT_USER + 1] = { 0 }, fail = 0;

	sa4(&d, "192.0.2.2", 7471);
	if (!ch) {
		rc("setup", -1);
		return;
	}
	for (int i = 0; i < N; i++) {
		fail |= rdma_create_id(ch, &id[i], (void *)(uintptr_t)i, RDMA_PS_TCP);
		fail |= rdma_resolve_addr(id[i], NULL, (void *)&d, 2000);
	}
	for (int i = 0; i < N; i++) {
		struct rdma_cm_event *e;
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };
		if (poll(&p, 1, EV_WAIT_MS) <= 0 || rdma_get_cm_event(ch, &e)) {
			fail = 1;
			break;
		}
		if (e->event <= RDMA_CM_EVENT_USER)
			counts[e->event]++;
		if ((uintptr_t)e->id->context >= N || e->id != id[(uintptr_t)e->id->context])
			fail = 1;
		rdma_ack_cm_event(e);
	}
	printf("  fail=%d addr_resolved=%d addr_error=%d\n", fail, counts[RDMA_CM_EVENT_ADDR_RESOLVED],
	       counts[RDMA_CM_EVENT_ADDR_ERROR]);
	for (int i = 0; i < N; i++)
		fail |= rdma_destroy_id(id[i]);
	printf("  destroyed fail=%d\n", fail);
	rdma_destroy_event_channel(ch);
}

/* ---- device removal (explicit only: changes the devices of the VM) ---------- */


static void c_timeouts(void)
{
	struct rdma_cm_id *id = NULL;
	struct sockaddr_in d;

	sa4(&d, "192.0.2.2", 7471);
	for (int t = -1; t <= 0; t++) {
		if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP)) {
			rc("rdma_create_id(sync)", -1);
			return;
		}
		printf("  timeout %d:\n", t);
		rc("rdma_resolve_addr", rdma_resolve_addr(id, NULL, (void *)&d, t));
		if (id->event)
			show_event(id->event, id);
		rc("rdma_resolve_route", rdma_resolve_route(id, t));
		if (id->event)
			show_event(id->event, id);
		rc("rdma_destroy_id", rdma_destroy_id(id));
	}
}

static void c_nonblock(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct rdma_cm_event *e = NULL;
	struct sockaddr_in d;
	int r;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		rc("setup", -1);
		return;
	}
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	r = rdma_get_cm_event(ch, &e);
	rc("rdma_get_cm_event(empty, non-blocking)", r);
	sa4(&d, "192.0.2.2", 7471);
	rc("rdma_resolve_addr", rdma_resolve_addr(id, NULL, (void *)&d, 2000));
	if ((e = next_event(ch, id)))
		rc("rdma_ack_cm_event", rdma_ack_cm_event(e));
	rc("rdma_destroy_id", rdma_destroy_id(id));
	rdma_destroy_event_channel(ch);
}

static void *sync_worker(void *arg)
{
	int *fails = arg;
	struct sockaddr_in d;

	sa4(&d, "192.0.2.2", 7471);
	for (int i = 0; i < 10; i++) {
		struct rdma_cm_id *id = NULL;
		if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP)) {
			(*fails)++;
			continue;
		}
		if (rdma_resolve_addr(id, NULL, (void *)&d, 2000) || !id->verbs ||
		    rdma_resolve_route(id, 2000) || id->event->event != RDMA_CM_EVENT_ROUTE_RESOLVED)
			(*fails)++;
		if (rdma_destroy_id(id))
			(*fails)++;
	}
	return NULL;
}

static void c_threads(void)
{
	/* Four threads resolving synchronous ids at once. */
	pthread_t t[4];
	int fails[4] = { 0 }, sum = 0;

	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, sync_worker, &fails[i]);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		sum += fails[i];
	}
	printf("  40 synchronous resolutions on 4 threads: %d failures\n", sum);
}

static int has_dev(const char *name, int *n)
{
	struct ibv_context **l = rdma_get_devices(n);
	int found = 0;
	for (int i = 0; l && l[i]; i++)
		found |= !strcmp(ibv_get_device_name(l[i]->device), name);
	if (l)
		rdma_free_devices(l);
	return found;
}

static void c_removal(void)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *a = NULL, *b = NULL, *s = NULL;
	struct rdma_cm_event *e, *evs[4];
	struct sockaddr_in d;
	int n, nev = 0, r, status;
	pid_t pid;

	/* The library is initialised before the device exists: it must find it later. */
	printf("  rxerm listed before it exists=%d\n", has_dev("rxerm", &n));
	r = system("ip link add vrm0 type veth peer name vrm1 && ip addr add 10.99.0.1/24 dev vrm0 && "
		   "ip link set vrm0 up && ip link set vrm1 up && rdma link add rxerm type rxe netdev vrm0");
	printf("  setup rc=%d\n", r);
	if (r)
		return;
	printf("  rxerm listed=%d\n", has_dev("rxerm", &n));
	ch = rdma_create_event_channel();
	sa4(&d, "10.99.0.1", 7471);
	rc("rdma_create_id(a)", rdma_create_id(ch, &a, (void *)1, RDMA_PS_TCP));
	rc("rdma_resolve_addr(a)", rdma_resolve_addr(a, NULL, (void *)&d, 2000));
	if ((e = next_event(ch, a)))
		rdma_ack_cm_event(e);
	rc("rdma_create_id(b)", rdma_create_id(ch, &b, (void *)2, RDMA_PS_UDP));
	rc("rdma_bind_addr(b)", rdma_bind_addr(b, (void *)&d));
	rc("rdma_create_id(sync)", rdma_create_id(NULL, &s, (void *)3, RDMA_PS_TCP));
	rc("rdma_resolve_addr(sync)", rdma_resolve_addr(s, NULL, (void *)&d, 2000));
	printf("  devs: a=%s b=%s sync=%s\n", a->verbs ? ibv_get_device_name(a->verbs->device) : "NULL",
	       b->verbs ? ibv_get_device_name(b->verbs->device) : "NULL",
	       s->verbs ? ibv_get_device_name(s->verbs->device) : "NULL");

	pid = fork();
	if (pid == 0) {
		execlp("rdma", "rdma", "link", "delete", "rxerm", (char *)NULL);
		_exit(127);
	}
	/* Up to two removal events (a, b), in whatever order the kernel sends them. */
	for (;;) {
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };
		if (nev == 2 || poll(&p, 1, 5000) <= 0)
			break;
		if (rdma_get_cm_event(ch, &evs[nev]))
			break;
		nev++;
	}
	if (nev == 2 && evs[0]->id->context > evs[1]->id->context) {
		e = evs[0];
		evs[0] = evs[1];
		evs[1] = e;
	}
	printf("  removal events: %d\n", nev);
	for (int i = 0; i < nev; i++) {
		printf("  event: %s status=%d id=%s\n", rdma_event_str(evs[i]->event), evs[i]->status,
		       evs[i]->id == a ? "a" : evs[i]->id == b ? "b" : "other");
		rdma_ack_cm_event(evs[i]);
	}
	rc("rdma_destroy_id(a)", rdma_destroy_id(a));
	rc("rdma_destroy_id(b)", rdma_destroy_id(b));
	rc("rdma_destroy_id(sync)", rdma_destroy_id(s));
	/* Listing the devices again lets the library drop the removed one. */
	printf("  rxerm listed after removal=%d\n", has_dev("rxerm", &n));
	for (int i = 0; i < 100; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			printf("  rdma link delete: exited %d\n", WEXITSTATUS(status));
			pid = 0;
			break;
		}
		usleep(100 * 1000);
	}
	if (pid) {
		printf("  rdma link delete: still blocked after 10 s\n");
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	printf("  rxerm listed at the end=%d\n", has_dev("rxerm", &n));
	rdma_destroy_event_channel(ch);
	r = system("ip link del vrm0");
	printf("  cleanup rc=%d\n", r);
}

struct tcase {
	const char *name;
	void (*fn)(void);
	int explicit_only;
};

static const struct tcase cases[] = {
	{ "devices", c_devices, 0 },
	{ "channel", c_channel, 0 },
	{ "port_spaces", c_port_spaces, 0 },
	{ "v4", c_v4, 0 },
	{ "v4_udp", c_v4_udp, 0 },
	{ "v4_ipoib", c_v4_ipoib, 0 },
	{ "v6", c_v6, 0 },
	{ "src", c_src, 0 },
	{ "src_port", c_src_port, 0 },
	{ "bound", c_bound, 0 },
	{ "bound6", c_bound6, 0 },
	{ "wildcard", c_wildcard, 0 },
	{ "wildcard6", c_wildcard6, 0 },
	{ "loopback", c_loop, 0 },
	{ "siw", c_siw, 0 },
	{ "siw_bound", c_siw_bound, 0 },
	{ "no_neigh", c_no_neigh, 0 },
	{ "no_route", c_no_route, 0 },
	{ "no_route6", c_no_route6, 0 },
	{ "mismatch", c_mismatch, 0 },
	{ "mismatch_bound", c_mismatch_bound, 0 },
	{ "linklocal", c_linklocal, 0 },
	{ "af_ib", c_af_ib, 0 },
	{ "sync", c_sync, 0 },
	{ "sync_errors", c_sync_errors, 0 },
	{ "sync_twice", c_sync_twice, 0 },
	{ "bad_args", c_bad_args, 0 },
	{ "unacked", c_unacked, 0 },
	{ "destroy_waits", c_destroy_waits, 0 },
	{ "migrate", c_migrate, 0 },
	{ "many", c_many, 0 },
	{ "timeouts", c_timeouts, 0 },
	{ "nonblock", c_nonblock, 0 },
	{ "threads", c_threads, 0 },
	{ "removal", c_removal, 1 },
};

int main(int argc, char **argv)
{
	int n = sizeof cases / sizeof cases[0];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "-l")) {
		for (int i = 0; i < n; i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		int run = argc == 1 && !cases[i].explicit_only;
		for (int a = 1; a < argc; a++)
			run |= !strcmp(argv[a], cases[i].name);
		if (!run)
			continue;
		printf("== %s\n", cases[i].name);
		cases[i].fn();
	}
	return 0;
}
