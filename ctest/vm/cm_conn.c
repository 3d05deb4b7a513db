/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * cm_conn - differential cases for the connection half of the CM: QPs on
 * ids, connect/listen/accept/reject/disconnect, external QPs, UD service
 * ID resolution and its refusal, multicast, the argument checks upstream makes, and ECE
 * from another vendor's peer (a peer in this process that speaks the ucma
 * protocol itself).
 *
 * Over 800 lines: the cases share the transcript's fixtures at the top, and
 * one program prints the one transcript the VM compares between the two
 * libraries.
 *
 * Both sides run in this one process over rxe0 (192.0.2.1, loopback),
 * each on its own event channel.  The transcript prints return values,
 * errno names, events with their statuses and parameters, and the QP
 * states the library leaves behind; QP numbers and ports are masked, so
 * upstream's library and ours must print the same text.
 *
 *   cm_conn [-l] [case ...]     list, or run only the named cases
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_cma_abi.h>
#include "common.h"

#define EV_WAIT_MS 8000
#define ADDR "192.0.2.1"

/* The address setup() listens on and connects to (rxe0 unless changed). */
static const char *pair_addr = ADDR;

static int port_base = 20000;


static void rc(const char *what, int ret)
{
	if (ret)
		printf("  %s = %d errno=%s\n", what, ret, en(errno));
	else
		printf("  %s = 0\n", what);
}

static const char *qps(struct ibv_qp *qp)
{
	static const char *n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (!qp)
		return "none";
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return "query-failed";
	return a.qp_state <= IBV_QPS_ERR ? n[a.qp_state] : "?";
}

static void show_qp(const char *who, struct rdma_cm_id *id)
{
	printf("  %s qp: %s", who, qps(id->qp));
	if (id->qp)
		printf(" type=%d pd=%s srq=%s", id->qp->qp_type, id->qp->pd == id->pd ? "id" : "other",
		       id->qp->srq ? "set" : "NULL");
	printf(" send_cq=%s recv_cq=%s", id->send_cq ? (id->send_cq->cq_context == id ? "lib(ctx=id)" : "lib(ctx?)") : "NULL",
	       id->recv_cq ? (id->recv_cq->cq_context == id ? "lib(ctx=id)" : "lib(ctx?)") : "NULL");
	printf(" channels=%s/%s\n", id->send_cq_channel ? "set" : "NULL", id->recv_cq_channel ? "set" : "NULL");
}

static struct rdma_cm_id *known[8];
static const char *names[8];

static const char *who(struct rdma_cm_id *id)
{
	if (!id)
		return "NULL";
	for (int i = 0; i < 8; i++)
		if (known[i] == id)
			return names[i];
	return "new";
}

static void name(struct rdma_cm_id *id, const char *n)
{
	for (int i = 0; i < 8; i++)
		if (!known[i] || known[i] == id) {
			known[i] = id;
			names[i] = n;
			return;
		}
}

static void forget(struct rdma_cm_id *id)
{
	for (int i = 0; i < 8; i++)
		if (known[i] == id)
			known[i] = NULL;
}

static void show_pd(const void *p, unsigned len)
{
	printf(" pd=\"");
	for (unsigned i = 0; p && i < len; i++) {
		unsigned char c = ((const unsigned char *)p)[i];
		if (c >= 32 && c < 127)
			putchar(c);
		else
			printf("\\x%02x", c);
	}
	printf("\"(%u)", len);
}

static void show_event(struct rdma_cm_event *e)
{
	printf("  event: %s status=%d id=%s listen_id=%s", rdma_event_str(e->event), e->status,
	       who(e->id), who(e->listen_id));
	int ud = e->id && e->id->qp_type == IBV_QPT_UD;
	switch (e->event) {
	case RDMA_CM_EVENT_MULTICAST_JOIN:
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		printf(" context=%p qp_num=0x%x qkey=0x%x global=%u port=%u sl=%u", e->param.ud.private_data,
		       e->param.ud.qp_num, e->param.ud.qkey, e->param.ud.ah_attr.is_global,
		       e->param.ud.ah_attr.port_num, e->param.ud.ah_attr.sl);
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
	case RDMA_CM_EVENT_ESTABLISHED:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		if (ud) {
			show_pd(e->param.ud.private_data, e->param.ud.private_data_len);
			printf(" qp_num=%s qkey=0x%x global=%u port=%u", e->param.ud.qp_num ? "set" : "0",
			       e->param.ud.qkey, e->param.ud.ah_attr.is_global, e->param.ud.ah_attr.port_num);
		} else {
			show_pd(e->param.conn.private_data, e->param.conn.private_data_len);
			printf(" rr=%u id=%u fc=%u retry=%u rnr=%u srq=%u qp_num=%s",
			       e->param.conn.responder_resources, e->param.conn.initiator_depth,
			       e->param.conn.flow_control, e->param.conn.retry_count,
			       e->param.conn.rnr_retry_count, e->param.conn.srq,
			       e->param.conn.qp_num ? "set" : "0");
		}
		break;
	default:
		break;
	}
	printf("\n");
}

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e = NULL;

	if (poll(&p, 1, EV_WAIT_MS) <= 0) {
		printf("  event: none within %d ms\n", EV_WAIT_MS);
		return NULL;
	}
	if (rdma_get_cm_event(ch, &e)) {
		rc("rdma_get_cm_event", -1);
		return NULL;
	}
	show_event(e);
	return e;
}

/* Waits for the next event and acks it; returns its type (-1: none). */
static int step(struct rdma_event_channel *ch, struct rdma_cm_id **newid)
{
	struct rdma_cm_event *e = next_event(ch);
	int t;

	if (!e)
		return -1;
	t = e->event;
	if (newid && t == RDMA_CM_EVENT_CONNECT_REQUEST)
		*newid = e->id;
	rdma_ack_cm_event(e);
	return t;
}

static void sa_any(struct sockaddr_storage *s, const char *ip, int port)
{
	memset(s, 0, sizeof *s);
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *s6 = (void *)s;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		inet_pton(AF_INET6, ip, &s6->sin6_addr);
	} else {
		struct sockaddr_in *s4 = (void *)s;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		inet_pton(AF_INET, ip, &s4->sin_addr);
	}
}

static void sa4(struct sockaddr_in *s, const char *ip, int port)
{
	memset(s, 0, sizeof *s);
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	inet_pton(AF_INET, ip, &s->sin_addr);
}

struct pair {
	struct rdma_event_channel *sch, *cch;
	struct rdma_cm_id *listen, *client, *conn;
};

/* A listener on ADDR and a client whose route to it is resolved. */
static int setup(struct pair *p, enum rdma_port_space ps)
{
	struct sockaddr_storage a;
	int port = port_base++;

	memset(p, 0, sizeof *p);
	p->sch = rdma_create_event_channel();
	p->cch = rdma_create_event_channel();
	if (!p->sch || !p->cch || rdma_create_id(p->sch, &p->listen, NULL, ps) ||
	    rdma_create_id(p->cch, &p->client, NULL, ps)) {
		printf("  setup failed: %s\n", en(errno));
		return -1;
	}
	name(p->listen, "listen");
	name(p->client, "client");
	sa_any(&a, pair_addr, port);
	rc("rdma_bind_addr(listen)", rdma_bind_addr(p->listen, (struct sockaddr *)&a));
	rc("rdma_listen", rdma_listen(p->listen, 4));
	rc("rdma_resolve_addr", rdma_resolve_addr(p->client, NULL, (struct sockaddr *)&a, 2000));
	step(p->cch, NULL);
	rc("rdma_resolve_route", rdma_resolve_route(p->client, 2000));
	step(p->cch, NULL);
	return 0;
}

/* Destroys an id (and its QP), if there is one. */
static void drop_id(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	forget(id);
	rdma_destroy_id(id);
}

static void teardown(struct pair *p)
{
	drop_id(p->conn);
	drop_id(p->client);
	drop_id(p->listen);
	rdma_destroy_event_channel(p->sch);
	rdma_destroy_event_channel(p->cch);
}

static struct ibv_qp_init_attr qp_attr(enum ibv_qp_type t)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof a);
	a.qp_type = t;
	a.cap.max_send_wr = 4;
	a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	return a;
}

static void case_args(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id, *bound, *sync;
	struct rdma_cm_join_mc_attr_ex mx;
	struct rdma_conn_param cp;
	struct sockaddr_in a, g;
	struct ibv_ece ece;
	struct ibv_qp_attr qa;
	int mask = 0;

	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	rdma_create_id(ch, &bound, NULL, RDMA_PS_TCP);
	rdma_create_id(NULL, &sync, NULL, RDMA_PS_TCP);
	rc("rdma_connect(no qp, no param)", rdma_connect(id, NULL));
	rc("rdma_get_request(async listener)", rdma_get_request(id, &sync));
	rc("rdma_disconnect(unbound)", rdma_disconnect(id));
	rc("rdma_set_local_ece(NULL)", rdma_set_local_ece(id, NULL));
	memset(&ece, 0, sizeof ece);
	rc("rdma_set_local_ece(vendor 0)", rdma_set_local_ece(id, &ece));
	ece.vendor_id = 0x15b3;
	ece.comp_mask = 1;
	rc("rdma_set_local_ece(comp_mask)", rdma_set_local_ece(id, &ece));
	ece.comp_mask = 0;
	ece.options = 5;
	rc("rdma_set_local_ece", rdma_set_local_ece(id, &ece));
	rc("rdma_get_remote_ece(NULL)", rdma_get_remote_ece(id, NULL));
	memset(&ece, 0xff, sizeof ece);
	rc("rdma_get_remote_ece", rdma_get_remote_ece(id, &ece));
	printf("  remote ece: vendor=0x%x options=0x%x comp_mask=%u\n", ece.vendor_id, ece.options, ece.comp_mask);
	rc("rdma_join_multicast(NULL addr)", rdma_join_multicast(id, NULL, NULL));
	memset(&g, 0, sizeof g);
	g.sin_family = AF_UNIX;
	rc("rdma_join_multicast(AF_UNIX)", rdma_join_multicast(id, (struct sockaddr *)&g, NULL));
	sa4(&g, "239.1.2.3", 0);
	memset(&mx, 0, sizeof mx);
	mx.addr = (struct sockaddr *)&g;
	mx.comp_mask = 8;
	rc("rdma_join_multicast_ex(unknown mask)", rdma_join_multicast_ex(id, &mx, NULL));
	mx.comp_mask = RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	rc("rdma_join_multicast_ex(no address)", rdma_join_multicast_ex(id, &mx, NULL));
	mx.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
	rc("rdma_join_multicast_ex(no flags)", rdma_join_multicast_ex(id, &mx, NULL));
	mx.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	mx.join_flags = 2;
	rc("rdma_join_multicast_ex(bad flags)", rdma_join_multicast_ex(id, &mx, NULL));
	rc("rdma_leave_multicast(not joined)", rdma_leave_multicast(id, (struct sockaddr *)&g));
	rc("rdma_leave_multicast(NULL)", rdma_leave_multicast(id, NULL));
	rc("rdma_join_multicast(unbound)", rdma_join_multicast(id, (struct sockaddr *)&g, NULL));

	sa4(&a, ADDR, 0);
	rc("rdma_bind_addr", rdma_bind_addr(bound, (struct sockaddr *)&a));
	memset(&cp, 0, sizeof cp);
	cp.responder_resources = 200;
	cp.initiator_depth = 1;
	rc("rdma_connect(rr above device)", rdma_connect(bound, &cp));
	cp.responder_resources = 255;
	cp.initiator_depth = 255;
	rc("rdma_connect(unresolved)", rdma_connect(bound, &cp));
	rc("rdma_accept(not a request)", rdma_accept(bound, &cp));
	rc("rdma_reject(not a request)", rdma_reject(bound, "x", 1));
	rc("rdma_notify(COMM_EST)", rdma_notify(bound, IBV_EVENT_COMM_EST));
	rc("rdma_establish(no qp)", rdma_establish(bound));
	memset(&qa, 0, sizeof qa);
	qa.qp_state = IBV_QPS_INIT;
	rc("rdma_init_qp_attr(INIT)", rdma_init_qp_attr(bound, &qa, &mask));
	printf("  init attr: mask=0x%x port=%u pkey_index=%u access=0x%x\n", mask, qa.port_num,
	       qa.pkey_index, qa.qp_access_flags);
	qa.qp_state = IBV_QPS_RTR;
	rc("rdma_init_qp_attr(RTR, unconnected)", rdma_init_qp_attr(bound, &qa, &mask));

	struct ibv_qp_init_attr ia = qp_attr(IBV_QPT_RC);
	rc("rdma_create_qp", rdma_create_qp(bound, NULL, &ia));
	printf("  attr after: send_cq=%s recv_cq=%s max_send_wr>=4:%d\n", ia.send_cq ? "set" : "NULL",
	       ia.recv_cq ? "set" : "NULL", ia.cap.max_send_wr >= 4);
	show_qp("bound", bound);
	ia = qp_attr(IBV_QPT_RC);
	rc("rdma_create_qp(again)", rdma_create_qp(bound, NULL, &ia));
	rc("rdma_establish(with qp)", rdma_establish(bound));
	rc("rdma_set_local_ece(with qp)", rdma_set_local_ece(bound, &ece));
	rc("rdma_get_remote_ece(with qp)", rdma_get_remote_ece(bound, &ece));
	rdma_destroy_qp(bound);
	show_qp("bound", bound);

	struct ibv_cq *cq = ibv_create_cq(bound->verbs, 8, NULL, NULL, 0);
	ia = qp_attr(IBV_QPT_RC);
	ia.send_cq = cq;
	rc("rdma_create_qp(own send cq)", rdma_create_qp(bound, NULL, &ia));
	show_qp("bound", bound);
	rdma_destroy_qp(bound);
	ibv_destroy_cq(cq);

	struct ibv_srq_init_attr sa;
	memset(&sa, 0, sizeof sa);
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	rc("rdma_create_srq", rdma_create_srq(bound, NULL, &sa));
	printf("  srq=%s\n", bound->srq ? "set" : "NULL");
	ia = qp_attr(IBV_QPT_RC);
	rc("rdma_create_qp(with srq)", rdma_create_qp(bound, NULL, &ia));
	show_qp("bound", bound);
	rdma_destroy_qp(bound);
	rdma_destroy_srq(bound);
	printf("  srq=%s\n", bound->srq ? "set" : "NULL");

	struct ibv_pd *pd = ibv_alloc_pd(bound->verbs);
	ia = qp_attr(IBV_QPT_RC);
	rc("rdma_create_qp(own pd)", rdma_create_qp(bound, pd, &ia));
	printf("  id pd is the given pd: %d\n", bound->pd == pd);
	rdma_destroy_qp(bound);
	ibv_dealloc_pd(pd);

	rdma_destroy_id(sync);
	rdma_destroy_id(bound);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

static void case_rc(void)
{
	struct pair p;
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr ia;

	if (setup(&p, RDMA_PS_TCP))
		return;
	ia = qp_attr(IBV_QPT_RC);
	rc("rdma_create_qp(client)", rdma_create_qp(p.client, NULL, &ia));
	show_qp("client", p.client);
	memset(&cp, 0, sizeof cp);
	cp.private_data = "hello";
	cp.private_data_len = 6;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 5;
	cp.rnr_retry_count = 6;
	rc("rdma_connect", rdma_connect(p.client, &cp));
	if (step(p.sch, &p.conn) != RDMA_CM_EVENT_CONNECT_REQUEST)
		goto out;
	name(p.conn, "conn");
	printf("  conn: context=%s channel=%s verbs=%s pd=%s port_num=%u\n",
	       p.conn->context == p.listen->context ? "listener's" : "other",
	       p.conn->channel == p.sch ? "listener's" : "other", p.conn->verbs ? "set" : "NULL",
	       p.conn->pd ? "set" : "NULL", p.conn->port_num);
	ia = qp_attr(IBV_QPT_RC);
	rc("rdma_create_qp(conn)", rdma_create_qp(p.conn, NULL, &ia));
	show_qp("conn", p.conn);
	cp.private_data = "world";
	cp.responder_resources = 255;
	cp.initiator_depth = 255;
	rc("rdma_accept", rdma_accept(p.conn, &cp));
	show_qp("conn", p.conn);
	step(p.cch, NULL);
	show_qp("client", p.client);
	step(p.sch, NULL);
	show_qp("conn", p.conn);
	rc("rdma_disconnect(client)", rdma_disconnect(p.client));
	show_qp("client", p.client);
	step(p.sch, NULL);
	show_qp("conn", p.conn);
	rc("rdma_disconnect(conn, after peer)", rdma_disconnect(p.conn));
	show_qp("conn", p.conn);
	step(p.cch, NULL);
out:
	teardown(&p);
}

static void case_reject(int ece)
{
	struct pair p;
	struct ibv_qp_init_attr ia;

	if (setup(&p, RDMA_PS_TCP))
		return;
	ia = qp_attr(IBV_QPT_RC);
	rc("rdma_create_qp(client)", rdma_create_qp(p.client, NULL, &ia));
	rc("rdma_connect", rdma_connect(p.client, NULL));
	if (step(p.sch, &p.conn) != RDMA_CM_EVENT_CONNECT_REQUEST)
		goto out;
	name(p.conn, "conn");
	if (ece)
		rc("rdma_reject_ece", rdma_reject_ece(p.conn, "no", 2));
	else
		rc("rdma_reject", rdma_reject(p.conn, "no", 2));
	step(p.cch, NULL);
	show_qp("client", p.client);
out:
	teardown(&p);
}

static void case_no_listener(void)
{
	struct pair p;
	struct ibv_qp_init_attr ia;

	if (setup(&p, RDMA_PS_TCP))
		return;
	forget(p.listen);
	rdma_destroy_id(p.listen);
	p.listen = NULL;
	ia = qp_attr(IBV_QPT_RC);
	rc("rdma_create_qp(client)", rdma_create_qp(p.client, NULL, &ia));
	rc("rdma_connect", rdma_connect(p.client, NULL));
	step(p.cch, NULL);
	show_qp("client", p.client);
	teardown(&p);
}

static void case_external_qp(void)
{
	struct pair p;
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	int mask;

	if (setup(&p, RDMA_PS_TCP))
		return;
	ia = qp_attr(IBV_QPT_RC);
	ia.send_cq = ia.recv_cq = ibv_create_cq(p.client->verbs, 8, NULL, NULL, 0);
	struct ibv_qp *qp = ibv_create_qp(p.client->pd, &ia);
	memset(&cp, 0, sizeof cp);
	cp.qp_num = qp->qp_num;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	rc("rdma_connect(external qp)", rdma_connect(p.client, &cp));
	if (step(p.sch, &p.conn) != RDMA_CM_EVENT_CONNECT_REQUEST)
		goto out;
	name(p.conn, "conn");
	ia = qp_attr(IBV_QPT_RC);
	rc("rdma_create_qp(conn)", rdma_create_qp(p.conn, NULL, &ia));
	rc("rdma_accept", rdma_accept(p.conn, NULL));
	if (step(p.cch, NULL) != RDMA_CM_EVENT_CONNECT_RESPONSE)
		goto out;
	rc("rdma_get_remote_ece", rdma_get_remote_ece(p.client, &(struct ibv_ece){ 0 }));
	for (int s = IBV_QPS_INIT; s <= IBV_QPS_RTS; s++) {
		memset(&qa, 0, sizeof qa);
		qa.qp_state = s;
		mask = 0;
		rc("rdma_init_qp_attr", rdma_init_qp_attr(p.client, &qa, &mask));
		printf("  state %d: mask=0x%x\n", s, mask);
		rc("ibv_modify_qp", ibv_modify_qp(qp, &qa, mask) ? (errno = EINVAL, -1) : 0);
	}
	printf("  external qp: %s\n", qps(qp));
	rc("rdma_establish", rdma_establish(p.client));
	step(p.sch, NULL);
	show_qp("conn", p.conn);
	rc("rdma_disconnect(conn)", rdma_disconnect(p.conn));
	step(p.cch, NULL);
	rc("rdma_disconnect(client, after peer)", rdma_disconnect(p.client));
	step(p.sch, NULL);
out:
	/* The application's QP uses the shared PD: release it first. */
	if (qp) {
		struct ibv_cq *cq = qp->send_cq;
		ibv_destroy_qp(qp);
		ibv_destroy_cq(cq);
	}
	teardown(&p);
}

/*
 * A UD service request (SIDR), answered by the listener's UD QP or, with
 * `refuse`, refused with data (SIDR reject).
 */
static void ud_request(int refuse)
{
	struct pair p;
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr ia;

	if (setup(&p, RDMA_PS_UDP))
		return;
	ia = qp_attr(IBV_QPT_UD);
	rc("rdma_create_qp(client, UD)", rdma_create_qp(p.client, NULL, &ia));
	show_qp("client", p.client);
	memset(&cp, 0, sizeof cp);
	cp.private_data = "sidr";
	cp.private_data_len = 4;
	rc("rdma_connect(UD)", rdma_connect(p.client, &cp));
	if (step(p.sch, &p.conn) != RDMA_CM_EVENT_CONNECT_REQUEST)
		goto out;
	name(p.conn, "conn");
	if (refuse) {
		rc("rdma_reject(UD)", rdma_reject(p.conn, "nope", 4));
		step(p.cch, NULL);
		show_qp("client", p.client);
		goto out;
	}
	ia = qp_attr(IBV_QPT_UD);
	rc("rdma_create_qp(conn, UD)", rdma_create_qp(p.conn, NULL, &ia));
	show_qp("conn", p.conn);
	memset(&cp, 0, sizeof cp);
	rc("rdma_accept(UD)", rdma_accept(p.conn, &cp));
	step(p.cch, NULL);
	rc("rdma_reject(UD, after accept)", rdma_reject(p.conn, NULL, 0));
out:
	teardown(&p);
}

static void case_ud(void)
{
	ud_request(0);
}

static void case_ud_reject(void)
{
	ud_request(1);
}

static void case_mcast(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct sockaddr_in a, g, g2;
	struct rdma_cm_join_mc_attr_ex mx;
	struct ibv_qp_init_attr ia;

	rdma_create_id(ch, &id, NULL, RDMA_PS_UDP);
	name(id, "mc");
	sa4(&a, ADDR, 0);
	rc("rdma_bind_addr", rdma_bind_addr(id, (struct sockaddr *)&a));
	ia = qp_attr(IBV_QPT_UD);
	rc("rdma_create_qp(UD)", rdma_create_qp(id, NULL, &ia));
	sa4(&g, "239.1.2.3", 0);
	rc("rdma_join_multicast", rdma_join_multicast(id, (struct sockaddr *)&g, (void *)0x77));
	step(ch, NULL);
	sa4(&g2, "239.1.2.4", 0);
	memset(&mx, 0, sizeof mx);
	mx.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	mx.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	mx.addr = (struct sockaddr *)&g2;
	rc("rdma_join_multicast_ex(send-only)", rdma_join_multicast_ex(id, &mx, (void *)0x78));
	step(ch, NULL);
	rc("rdma_leave_multicast", rdma_leave_multicast(id, (struct sockaddr *)&g));
	rc("rdma_leave_multicast(again)", rdma_leave_multicast(id, (struct sockaddr *)&g));
	rc("rdma_leave_multicast(send-only)", rdma_leave_multicast(id, (struct sockaddr *)&g2));
	/* A membership left in place goes with the id (send-only: a QP still
	 * attached to a group could not be destroyed). */
	mx.addr = (struct sockaddr *)&g;
	rc("rdma_join_multicast_ex(send-only, kept)", rdma_join_multicast_ex(id, &mx, NULL));
	step(ch, NULL);
	rdma_destroy_qp(id);
	forget(id);
	rc("rdma_destroy_id(with membership)", rdma_destroy_id(id));
	rdma_destroy_event_channel(ch);
}

static void case_sync_ep(void)
{
	struct rdma_addrinfo hints, *res;
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr ia;

	memset(&hints, 0, sizeof hints);
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_flags = RAI_PASSIVE;
	if (rdma_getaddrinfo(ADDR, "20999", &hints, &res)) {
		printf("  rdma_getaddrinfo failed\n");
		return;
	}
	ia = qp_attr(IBV_QPT_RC);
	rc("rdma_create_ep(passive)", rdma_create_ep(&id, res, NULL, &ia));
	printf("  ep: qp=%s channel=%s\n", id->qp ? "set" : "NULL", id->channel ? "set" : "NULL");
	rc("rdma_listen", rdma_listen(id, 1));
	rdma_destroy_ep(id);
	rdma_freeaddrinfo(res);
	hints.ai_flags = 0;
	if (rdma_getaddrinfo(ADDR, "20998", &hints, &res)) {
		printf("  rdma_getaddrinfo failed\n");
		return;
	}
	ia = qp_attr(IBV_QPT_RC);
	rc("rdma_create_ep(active)", rdma_create_ep(&id, res, NULL, &ia));
	show_qp("ep", id);
	printf("  ep event: %s\n", id->event ? rdma_event_str(id->event->event) : "NULL");
	rc("rdma_connect(sync, no listener)", rdma_connect(id, NULL));
	show_qp("ep", id);
	printf("  ep event: %s status=%d\n", id->event ? rdma_event_str(id->event->event) : "NULL",
	       id->event ? id->event->status : 0);
	rdma_destroy_ep(id);
	rdma_freeaddrinfo(res);
}

/*
 * A peer that speaks the kernel's ucma protocol itself (no librdmacm), so
 * that both libraries meet the same one: it listens or connects with the
 * ECE values it is given, which no librdmacm peer on rxe sends (the
 * requester's vendor is its QP's, none on rxe, and rdma_accept echoes it).
 */
struct raw_peer {
	int fd;
	__u32 id;
};

/* Writes command `c` (a ucma_abi_* value of `size` bytes) with its header. */
static int raw_cmd(int fd, __u32 cmd, void *c, size_t size, __u16 out)
{
	struct ucma_abi_cmd_hdr h = { .cmd = cmd, .in = size - sizeof h, .out = out };

	memcpy(c, &h, sizeof h);
	return write(fd, c, size) == (ssize_t)size ? 0 : -1;
}

/* Opens the ucma device and makes the peer's RC id. */
static int raw_open(struct raw_peer *l)
{
	struct ucma_abi_create_id_resp cr = { 0 };
	struct ucma_abi_create_id c = { .uid = 1, .response = (uintptr_t)&cr, .ps = RDMA_PS_TCP, .qp_type = IBV_QPT_RC };

	l->fd = open("/dev/infiniband/rdma_cm", O_RDWR | O_CLOEXEC);
	if (l->fd < 0 || raw_cmd(l->fd, UCMA_CMD_CREATE_ID, &c, sizeof c, sizeof cr))
		return -1;
	l->id = cr.id;
	return 0;
}

/* The next event of the peer's descriptor (-1: none within EV_WAIT_MS). */
static int raw_event(struct raw_peer *l, struct ucma_abi_event_resp *r)
{
	struct pollfd pf = { .fd = l->fd, .events = POLLIN };
	struct ucma_abi_get_event g = { .response = (uintptr_t)r };

	memset(r, 0, sizeof *r);
	if (poll(&pf, 1, EV_WAIT_MS) <= 0 || raw_cmd(l->fd, UCMA_CMD_GET_EVENT, &g, sizeof g, sizeof *r))
		return -1;
	return 0;
}

/* The peer's connection parameters (no QP of its own: a made-up number). */
static void raw_conn_param(struct ucma_abi_conn_param *cp)
{
	cp->qp_num = 0x1234;
	cp->responder_resources = 1;
	cp->initiator_depth = 1;
	cp->retry_count = 7;
	cp->rnr_retry_count = 7;
	cp->valid = 1;
}

static int raw_listen(struct raw_peer *l, const struct sockaddr_storage *a, socklen_t len)
{
	struct ucma_abi_bind b = { 0 };
	struct ucma_abi_listen ls = { 0 };

	if (raw_open(l))
		return -1;
	b.id = l->id;
	b.addr_size = len;
	memcpy(&b.addr, a, len);
	ls.id = l->id;
	ls.backlog = 4;
	if (raw_cmd(l->fd, UCMA_CMD_BIND, &b, sizeof b, 0) || raw_cmd(l->fd, UCMA_CMD_LISTEN, &ls, sizeof ls, 0))
		return -1;
	return 0;
}

/* Takes the connection request and accepts it with ECE (vendor, attr_mod). */
static int raw_accept_ece(struct raw_peer *l, __u32 vendor, __u32 attr_mod)
{
	struct ucma_abi_event_resp r;
	struct ucma_abi_accept a = { 0 };

	if (raw_event(l, &r))
		return -1;
	printf("  raw peer: %s\n", r.event == RDMA_CM_EVENT_CONNECT_REQUEST ? "connect request" : "other event");
	if (r.event != RDMA_CM_EVENT_CONNECT_REQUEST)
		return -1;
	a.uid = 2;
	a.id = r.id;
	raw_conn_param(&a.conn_param);
	a.ece.vendor_id = vendor;
	a.ece.attr_mod = attr_mod;
	return raw_cmd(l->fd, UCMA_CMD_ACCEPT, &a, sizeof a, 0);
}

/* A raw requester: resolves `dst` and connects with ECE (vendor, attr_mod). */
static int raw_connect_ece(struct raw_peer *l, const struct sockaddr_storage *dst, socklen_t len,
			   __u32 vendor, __u32 attr_mod)
{
	struct ucma_abi_resolve_addr ra = { 0 };
	struct ucma_abi_resolve_route rr = { 0 };
	struct ucma_abi_connect cn = { 0 };
	struct ucma_abi_event_resp r;

	if (raw_open(l))
		return -1;
	ra.id = l->id;
	ra.timeout_ms = 2000;
	ra.dst_size = len;
	memcpy(&ra.dst_addr, dst, len);
	if (raw_cmd(l->fd, UCMA_CMD_RESOLVE_ADDR, &ra, sizeof ra, 0) || raw_event(l, &r) ||
	    r.event != RDMA_CM_EVENT_ADDR_RESOLVED)
		return -1;
	rr.id = l->id;
	rr.timeout_ms = 2000;
	if (raw_cmd(l->fd, UCMA_CMD_RESOLVE_ROUTE, &rr, sizeof rr, 0) || raw_event(l, &r) ||
	    r.event != RDMA_CM_EVENT_ROUTE_RESOLVED)
		return -1;
	cn.id = l->id;
	raw_conn_param(&cn.conn_param);
	cn.ece.vendor_id = vendor;
	cn.ece.attr_mod = attr_mod;
	return raw_cmd(l->fd, UCMA_CMD_CONNECT, &cn, sizeof cn, 0);
}

/* Closes the raw peer (the kernel destroys its ids) and the channel. */
static void raw_end(struct raw_peer *l, struct rdma_event_channel *ch)
{
	if (l->fd >= 0)
		close(l->fd);
	if (ch)
		rdma_destroy_event_channel(ch);
}

static void show_remote_ece(struct rdma_cm_id *id)
{
	struct ibv_ece e;

	memset(&e, 0xa5, sizeof e);
	if (rdma_get_remote_ece(id, &e))
		rc("rdma_get_remote_ece", -1);
	else
		printf("  remote ece: vendor=0x%x options=0x%x comp_mask=%u\n", e.vendor_id, e.options, e.comp_mask);
}

/*
 * A connect answered with another vendor's ECE: with a QP the library
 * refuses the answer (CONNECT_ERROR, status -1, the QP in ERR; and
 * rdma_get_remote_ece refuses an id with a QP); without one it keeps the
 * values for rdma_get_remote_ece.  rxe has no ECE, so the client's own
 * vendor is 0 once it has a QP.
 */
static void case_ece_foreign(int with_qp)
{
	struct raw_peer l = { -1, 0 };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct sockaddr_storage a;
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr ia;
	int port = port_base++;

	sa_any(&a, pair_addr, port);
	if (!ch || raw_listen(&l, &a, sizeof(struct sockaddr_in)) || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		printf("  setup failed: %s\n", en(errno));
		goto out;
	}
	name(id, "client");
	rc("rdma_resolve_addr", rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000));
	step(ch, NULL);
	rc("rdma_resolve_route", rdma_resolve_route(id, 2000));
	step(ch, NULL);
	if (with_qp) {
		ia = qp_attr(IBV_QPT_RC);
		rc("rdma_create_qp(client)", rdma_create_qp(id, NULL, &ia));
	}
	memset(&cp, 0, sizeof cp);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.qp_num = 0x4321;
	rc("rdma_connect", rdma_connect(id, &cp));
	if (raw_accept_ece(&l, 0x2c9, 0x5)) {
		printf("  raw peer: accept failed: %s\n", en(errno));
		goto out;
	}
	step(ch, NULL);
	show_qp("client", id);
	show_remote_ece(id);
out:
	drop_id(id);
	raw_end(&l, ch);
}

/*
 * A connection request carrying another vendor's ECE, from a raw
 * requester: the library keeps the requester's values
 * (rdma_get_remote_ece on the new id), and its accept answers with the
 * requester's vendor and the local options: with a QP those rxe reports
 * (none), without one those rdma_set_local_ece gave.  The raw peer prints
 * what the answer carried and completes the connection (its ACCEPT sends
 * the RTU).
 */
static void case_ece_foreign_req(int with_qp)
{
	struct raw_peer l = { -1, 0 };
	struct ucma_abi_event_resp r;
	struct ucma_abi_accept rtu = { 0 };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *listen = NULL, *conn = NULL;
	struct sockaddr_storage a;
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr ia;
	struct ibv_ece mine = { .vendor_id = 0x2c9, .options = 0x7 };
	int port = port_base++;

	sa_any(&a, pair_addr, port);
	if (!ch || rdma_create_id(ch, &listen, NULL, RDMA_PS_TCP)) {
		printf("  setup failed: %s\n", en(errno));
		goto out;
	}
	name(listen, "listen");
	rc("rdma_bind_addr(listen)", rdma_bind_addr(listen, (struct sockaddr *)&a));
	rc("rdma_listen", rdma_listen(listen, 4));
	if (raw_connect_ece(&l, &a, sizeof(struct sockaddr_in), 0x2c9, 0x5)) {
		printf("  raw peer: connect failed: %s\n", en(errno));
		goto out;
	}
	if (step(ch, &conn) != RDMA_CM_EVENT_CONNECT_REQUEST)
		goto out;
	name(conn, "conn");
	show_remote_ece(conn);
	memset(&cp, 0, sizeof cp);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	if (with_qp) {
		ia = qp_attr(IBV_QPT_RC);
		rc("rdma_create_qp(conn)", rdma_create_qp(conn, NULL, &ia));
	} else {
		rc("rdma_set_local_ece", rdma_set_local_ece(conn, &mine));
		cp.qp_num = 0x4321;
	}
	rc("rdma_accept", rdma_accept(conn, &cp));
	show_qp("conn", conn);
	if (raw_event(&l, &r)) {
		printf("  raw peer: no event\n");
		goto out;
	}
	printf("  raw peer: %s status=%d ece vendor=0x%x attr_mod=0x%x\n", rdma_event_str(r.event), (int)r.status,
	       r.ece.vendor_id, r.ece.attr_mod);
	rtu.id = l.id;
	if (raw_cmd(l.fd, UCMA_CMD_ACCEPT, &rtu, sizeof rtu, 0))
		printf("  raw peer: RTU failed: %s\n", en(errno));
	step(ch, NULL);
	show_qp("conn", conn);
out:
	drop_id(conn);
	drop_id(listen);
	raw_end(&l, ch);
}

static void case_ece_foreign_req_qp(void)
{
	case_ece_foreign_req(1);
}

static void case_ece_foreign_req_noqp(void)
{
	case_ece_foreign_req(0);
}

static void case_ece_foreign_qp(void)
{
	case_ece_foreign(1);
}

static void case_ece_foreign_noqp(void)
{
	case_ece_foreign(0);
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{ "args", case_args },
	{ "rc", case_rc },
	{ "reject", NULL },
	{ "reject_ece", NULL },
	{ "no_listener", case_no_listener },
	{ "external_qp", case_external_qp },
	{ "ud", case_ud },
	{ "ud_reject", case_ud_reject },
	{ "mcast", case_mcast },
	{ "sync_ep", case_sync_ep },
	{ "ece_foreign_qp", case_ece_foreign_qp },
	{ "ece_foreign_noqp", case_ece_foreign_noqp },
	{ "ece_foreign_req_qp", case_ece_foreign_req_qp },
	{ "ece_foreign_req_noqp", case_ece_foreign_req_noqp },
	{ "rc_v6", NULL },
	{ "rc_siw", NULL },
	{ "reject_siw", NULL },
};

static void run(int i)
{
	printf("== %s\n", cases[i].name);
	if (!strcmp(cases[i].name, "reject"))
		case_reject(0);
	else if (!strcmp(cases[i].name, "reject_ece"))
		case_reject(1);
	else if (!strcmp(cases[i].name, "rc_v6")) {
		pair_addr = "2001:db8::1";
		case_rc();
		pair_addr = ADDR;
	} else if (!strcmp(cases[i].name, "rc_siw")) {
		pair_addr = "198.51.100.1";
		case_rc();
		pair_addr = ADDR;
	} else if (!strcmp(cases[i].name, "reject_siw")) {
		pair_addr = "198.51.100.1";
		case_reject(0);
		pair_addr = ADDR;
	}
	else
		cases[i].fn();
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int n = sizeof cases / sizeof cases[0];

	setvbuf(stdout, NULL, _IOLBF, 0);
	port_base += (getpid() % 500) * 10;
	if (argc > 1 && !strcmp(argv[1], "-l")) {
		for (int i = 0; i < n; i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		int want = argc == 1;
		for (int j = 1; j < argc; j++)
			want |= !strcmp(argv[j], cases[i].name);
		if (want)
			run(i);
	}
	return 0;
}
