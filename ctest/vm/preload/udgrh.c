/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * udgrh.c - LD_PRELOAD test shim for the VM test bed (vm/suite.d/rsocket.sh, udpong_*_upgrh):
 * makes upstream's datagram rsockets usable on RoCE so that they can be run against ours.
 *
 * Upstream's rsocket.c gives each UD QP an address handle for its own address, made from
 * the port's LID with no GRH; RoCE ports refuse an AH without a GRH (the kernel returns
 * EINVAL), so on rxe upstream's rconnect fails and its service thread drops what arrives.
 * This shim interposes ibv_create_ah: an AH without a GRH on an Ethernet port gets one
 * addressed to the port's first GID of the family given by UDGRH_FAMILY ("4": an
 * IPv4-mapped GID, default; "6": a global IPv6 GID), i.e. the device itself. Every other
 * AH (all of ours: they always carry a GRH on Ethernet) is passed through unchanged.
 * It logs each rewrite on stderr ("udgrh: ...") so a run shows that it acted.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

typedef struct ibv_ah *(*create_ah_fn)(struct ibv_pd *, struct ibv_ah_attr *);

static int want_gid(const union ibv_gid *g, int v6)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	int is_mapped = !memcmp(g->raw, mapped, 12);

	if (!v6)
		return is_mapped;
	/* global unicast IPv6: not mapped, not link-local, not zero */
	return !is_mapped && !(g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80) && g->raw[0] != 0;
}

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	create_ah_fn real = (create_ah_fn) dlsym(RTLD_NEXT, "ibv_create_ah");
	struct ibv_port_attr pa;
	struct ibv_ah_attr a;
	union ibv_gid g;
	const char *fam = getenv("UDGRH_FAMILY");
	int v6 = fam && !strcmp(fam, "6");
	int i;

	if (!real)
		return NULL;
	if (attr->is_global || ibv_query_port(pd->context, attr->port_num, &pa) ||
	    pa.link_layer != IBV_LINK_LAYER_ETHERNET)
		return real(pd, attr);
	a = *attr;
	for (i = 0; i < 16; i++) {
		if (ibv_query_gid(pd->context, attr->port_num, i, &g) || !want_gid(&g, v6))
			continue;
		a.is_global = 1;
		a.grh.dgid = g;
		a.grh.sgid_index = i;
		a.grh.hop_limit = 64;
		fprintf(stderr, "udgrh: AH without GRH on an Ethernet port: GRH to the port's own GID index %d\n", i);
		return real(pd, &a);
	}
	return real(pd, attr);
}
