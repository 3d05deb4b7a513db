/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * Instructions per call for `make bench`: vm/suite.d/bench.sh runs this under valgrind
 * --tool=callgrind --toggle-collect=measured_<case>, so only what runs inside the measured
 * function (the library call and everything it calls, in libc and the kernel-facing code) is
 * counted.  One call of each kind is made first, outside the measured function, so first-use
 * costs (device list, lazy initialisation) are not part of the per-call figure.
 *
 *   bench_calls CASE N      CASE: gai | create_destroy | get_ack | write_get_ack | event_str |
 *                                 bind | init_qp_attr | rtr_qp_attr | rts_qp_attr | destroy_qp |
 *                                 create_qp | resolve_addr | resolve_route | connect | accept |
 *                                 disconnect | accept_qp | conn_resp_qp
 *
 * get_ack: rdma_get_cm_event + rdma_ack_cm_event of an event written (unmeasured) before;
 * write_get_ack: rdma_write_cm_event + rdma_get_cm_event + rdma_ack_cm_event, all measured.
 * The steps of upstream's cmtime that run in the library alone (the connecting end's view):
 * bind: rdma_bind_addr of a fresh id (created before, destroyed after, both unmeasured) to
 * 192.0.2.1 (rxe0's address), port 0, while another id bound there keeps the device in use (as
 * cmtime's other ids do: the last id of a device to go takes its protection domain with it in
 * both libraries, and the next bind allocates it again); init_qp_attr, rtr_qp_attr, rts_qp_attr: rdma_init_qp_attr
 * for INIT, RTR and RTS on the connecting id of a connection made once before (within this
 * process over rxe0's loopback, no QPs: the numbers cmtime's no-QP test gives, which is what its
 * QP test asks of the library too); destroy_qp: rdma_destroy_qp of a QP that rdma_create_qp made
 * (unmeasured) on that id just before; create_qp: rdma_create_qp (a QP and the CQs the library
 * makes for it) on that id, its QP destroyed (unmeasured) before the next.
 * The connection steps, each on a fresh connecting id taken (unmeasured) through the steps
 * before it, towards a listener on rxe0's address in this process, and the step's events taken
 * (unmeasured) after it: resolve_addr (no source address), resolve_route, connect (the request
 * then rejected), accept (on the request's id; the connection then established and
 * disconnected), disconnect (of an established connection, by the connecting end).
 * With QPs on both ends (each made, unmeasured, by rdma_create_qp before the step): accept_qp
 * (rdma_accept, which moves the accepting end's QP to RTR and RTS before the ACCEPT command),
 * conn_resp_qp (rdma_get_cm_event + rdma_ack_cm_event of the connecting end's connect response,
 * which the library answers inside the get: its QP to RTR and RTS, the kernel's ACCEPT, the
 * event reported as ESTABLISHED).
 *
 * Prints "calls N" on success, then "ns_per_call T": the wall time of the N calls after the
 * first one divided by N, with what runs around them (get_ack's write, the connection steps'
 * preparation) included: the timed form of a case, run without valgrind (bench/ab.sh t_<case>).
 * Exits 1 (with the reason on stderr) when a call fails.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

static struct rdma_event_channel *ch;
static struct rdma_cm_id *evid;
static volatile const char *sink;
/* bind: the fresh id of the next call; the qp_attr and destroy_qp cases: the connection */
static struct rdma_cm_id *fresh, *keeper, *listener, *client, *server;
static struct sockaddr_in here;

static void die(const char *what)
{
	fprintf(stderr, "bench_calls: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int do_gai(void)
{
	struct rdma_addrinfo hints, *res;

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_NUMERICHOST;
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_qp_type = IBV_QPT_RC;
	if (rdma_getaddrinfo("192.0.2.1", "7471", &hints, &res))
		return -1;
	rdma_freeaddrinfo(res);
	return 0;
}

static int do_create_destroy(void)
{
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return -1;
	return rdma_destroy_id(id);
}

static int do_get_ack(void)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev))
		return -1;
	return rdma_ack_cm_event(ev);
}

static int do_write_get_ack(void)
{
	if (rdma_write_cm_event(evid, RDMA_CM_EVENT_USER, 0, 7))
		return -1;
	return do_get_ack();
}

static int do_event_str(void)
{
	sink = rdma_event_str(RDMA_CM_EVENT_ESTABLISHED);
	return 0;
}

/* the previous call's id destroyed, a new one made */
static void new_fresh(void)
{
	if (fresh)
		rdma_destroy_id(fresh);
	if (rdma_create_id(ch, &fresh, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
}

static int do_bind(void)
{
	return rdma_bind_addr(fresh, (struct sockaddr *)&here);
}

/* the next event on ch, which must be WANT (acked; its id returned) */
static struct rdma_cm_id *expect(enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event");
	if (ev->event != want) {
		fprintf(stderr, "bench_calls: event %s (status %d), not %s\n", rdma_event_str(ev->event),
			ev->status, rdma_event_str(want));
		exit(1);
	}
	id = ev->id;
	rdma_ack_cm_event(ev);
	return id;
}

/* the listener's address */
static struct sockaddr_in to;

/* the listener on rxe0's address */
static void listen_here(void)
{
	if (rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_bind_addr(listener, (struct sockaddr *)&here) || rdma_listen(listener, 1))
		die("rdma_bind_addr/rdma_listen");
	to = here;
	to.sin_port = rdma_get_src_port(listener);
}

/* conn_param for a connection without QPs (QP number QPN) */
static struct rdma_conn_param *param(uint32_t qpn)
{
	static struct rdma_conn_param cp;

	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.qp_num = qpn;
	return &cp;
}

/* the measured calls of the connection cases */
static int do_resolve_addr(void) { return rdma_resolve_addr(client, NULL, (struct sockaddr *)&to, 2000); }
static int do_resolve_route(void) { return rdma_resolve_route(client, 2000); }
static int do_connect(void) { return rdma_connect(client, param(0x100)); }
static int do_accept(void) { return rdma_accept(server, param(0x101)); }
static int do_disconnect(void) { return rdma_disconnect(client); }
static int do_conn_resp_qp(void);

/* The connecting id's steps, each with its events taken.  client_fresh: the previous call's ids
 * destroyed, a new connecting id made. */
static void client_fresh(void)
{
	if (server && server->qp)
		rdma_destroy_qp(server);
	if (client && client->qp)
		rdma_destroy_qp(client);
	if (server)
		rdma_destroy_id(server);
	server = NULL;
	if (client)
		rdma_destroy_id(client);
	if (rdma_create_id(ch, &client, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
}

static void addr_resolved(void) { expect(RDMA_CM_EVENT_ADDR_RESOLVED); }
static void route_resolved(void) { expect(RDMA_CM_EVENT_ROUTE_RESOLVED); }

static void to_addr(void)
{
	client_fresh();
	if (do_resolve_addr())
		die("rdma_resolve_addr");
	addr_resolved();
}

static void to_route(void)
{
	to_addr();
	if (do_resolve_route())
		die("rdma_resolve_route");
	route_resolved();
}

static void requested(void) { server = expect(RDMA_CM_EVENT_CONNECT_REQUEST); }

static void to_request(void)
{
	to_route();
	if (do_connect())
		die("rdma_connect");
	requested();
}

/* after connect: the request rejected, the connecting end told */
static void rejected(void)
{
	requested();
	if (rdma_reject(server, NULL, 0))
		die("rdma_reject");
	expect(RDMA_CM_EVENT_REJECTED);
}

static void accepted(void)
{
	expect(RDMA_CM_EVENT_CONNECT_RESPONSE);
	if (rdma_establish(client))
		die("rdma_establish");
	expect(RDMA_CM_EVENT_ESTABLISHED);
}

/* after the connecting end's rdma_disconnect: both ends told (the listening end's own
 * rdma_disconnect answers the request, so that the connecting end's comes without a timeout) */
static void disconnected(void)
{
	for (int seen = 0; seen != 3;) {
		struct rdma_cm_id *id = expect(RDMA_CM_EVENT_DISCONNECTED);

		if (id == server) {
			seen |= 1;
			if (rdma_disconnect(server))
				die("rdma_disconnect (listening end)");
		} else {
			seen |= 2;
		}
	}
}

/* after accept: the connection established, then disconnected */
static void accepted_then_closed(void)
{
	accepted();
	if (do_disconnect())
		die("rdma_disconnect");
	disconnected();
}

static void to_established(void)
{
	to_request();
	if (do_accept())
		die("rdma_accept");
	accepted();
}

static int qp_on(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	return rdma_create_qp(id, NULL, &a);
}

/* with QPs on both ends: the request arrived at the listening end */
static void to_request_qp(void)
{
	to_route();
	if (qp_on(client))
		die("rdma_create_qp (connecting end)");
	if (do_connect())
		die("rdma_connect");
	requested();
	if (qp_on(server))
		die("rdma_create_qp (listening end)");
}

/* with QPs: the connection accepted, the connecting end's response not yet taken */
static void to_response_qp(void)
{
	to_request_qp();
	if (do_accept())
		die("rdma_accept");
}

/* with QPs: the listening end's ESTABLISHED taken (conn_resp_qp's measured get took the
 * connecting end's), then disconnected */
static void established_then_closed_qp(void)
{
	expect(RDMA_CM_EVENT_ESTABLISHED);
	if (do_disconnect())
		die("rdma_disconnect");
	disconnected();
}

/* with QPs, after accept: both ends' ESTABLISHED taken, then disconnected */
static void accepted_then_closed_qp(void)
{
	expect(RDMA_CM_EVENT_ESTABLISHED);
	established_then_closed_qp();
}

/* the connecting end's response, which the library turns into ESTABLISHED */
static int do_conn_resp_qp(void)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev))
		return -1;
	if (ev->event != RDMA_CM_EVENT_ESTABLISHED || ev->id != client) {
		fprintf(stderr, "bench_calls: event %s (status %d) of %s, not the connecting end's ESTABLISHED\n",
			rdma_event_str(ev->event), ev->status, ev->id == client ? "the connecting end" : "another id");
		exit(1);
	}
	return rdma_ack_cm_event(ev);
}

/* a connection within this process over rxe0's loopback, without QPs (as cmtime's no-QP test) */
static void connect_pair(void)
{
	listen_here();
	to_established();
}


static int qp_attr(enum ibv_qp_state state)
{
	struct ibv_qp_attr attr;
	int mask;

	attr.qp_state = state;
	return rdma_init_qp_attr(client, &attr, &mask);
}

static int do_init_qp_attr(void) { return qp_attr(IBV_QPS_INIT); }
static int do_rtr_qp_attr(void) { return qp_attr(IBV_QPS_RTR); }
static int do_rts_qp_attr(void) { return qp_attr(IBV_QPS_RTS); }

static int do_create_qp(void) { return qp_on(client); }

static void new_qp(void)
{
	if (do_create_qp())
		die("rdma_create_qp");
}

static int do_destroy_qp(void)
{
	rdma_destroy_qp(client);
	return 0;
}

/* before create_qp: the QP of the call before destroyed */
static void no_qp(void)
{
	if (client->qp)
		rdma_destroy_qp(client);
}

/* what callgrind counts: one call each (noinline: the symbol must exist for --toggle-collect) */
__attribute__((noinline)) static int measured_gai(void) { return do_gai(); }
__attribute__((noinline)) static int measured_create_destroy(void) { return do_create_destroy(); }
__attribute__((noinline)) static int measured_get_ack(void) { return do_get_ack(); }
__attribute__((noinline)) static int measured_write_get_ack(void) { return do_write_get_ack(); }
__attribute__((noinline)) static int measured_event_str(void) { return do_event_str(); }
__attribute__((noinline)) static int measured_bind(void) { return do_bind(); }
__attribute__((noinline)) static int measured_init_qp_attr(void) { return do_init_qp_attr(); }
__attribute__((noinline)) static int measured_rtr_qp_attr(void) { return do_rtr_qp_attr(); }
__attribute__((noinline)) static int measured_rts_qp_attr(void) { return do_rts_qp_attr(); }
__attribute__((noinline)) static int measured_destroy_qp(void) { return do_destroy_qp(); }
__attribute__((noinline)) static int measured_create_qp(void) { return do_create_qp(); }
__attribute__((noinline)) static int measured_resolve_addr(void) { return do_resolve_addr(); }
__attribute__((noinline)) static int measured_resolve_route(void) { return do_resolve_route(); }
__attribute__((noinline)) static int measured_connect(void) { return do_connect(); }
__attribute__((noinline)) static int measured_accept(void) { return do_accept(); }
__attribute__((noinline)) static int measured_disconnect(void) { return do_disconnect(); }
__attribute__((noinline)) static int measured_accept_qp(void) { return do_accept(); }
__attribute__((noinline)) static int measured_conn_resp_qp(void) { return do_conn_resp_qp(); }

int main(int argc, char **argv)
{
	int (*fn)(void), (*warm)(void);
	void (*prep)(void) = NULL;    /* before each call, unmeasured */
	void (*post)(void) = NULL;    /* after each call, unmeasured */
	struct timespec t0 = { 0 }, t1;
	int conn = 0, lis = 0;
	const char *c = argc == 3 ? argv[1] : "";
	int n = argc == 3 ? atoi(argv[2]) : 0;
	int get_ack, write_get_ack;

	if (!strcmp(c, "gai"))
		fn = measured_gai, warm = do_gai;
	else if (!strcmp(c, "create_destroy"))
		fn = measured_create_destroy, warm = do_create_destroy;
	else if (!strcmp(c, "get_ack"))
		fn = measured_get_ack, warm = do_get_ack;
	else if (!strcmp(c, "write_get_ack"))
		fn = measured_write_get_ack, warm = do_write_get_ack;
	else if (!strcmp(c, "event_str"))
		fn = measured_event_str, warm = do_event_str;
	else if (!strcmp(c, "bind"))
		fn = measured_bind, warm = do_bind, prep = new_fresh;
	else if (!strcmp(c, "init_qp_attr"))
		fn = measured_init_qp_attr, warm = do_init_qp_attr, conn = 1;
	else if (!strcmp(c, "rtr_qp_attr"))
		fn = measured_rtr_qp_attr, warm = do_rtr_qp_attr, conn = 1;
	else if (!strcmp(c, "rts_qp_attr"))
		fn = measured_rts_qp_attr, warm = do_rts_qp_attr, conn = 1;
	else if (!strcmp(c, "destroy_qp"))
		fn = measured_destroy_qp, warm = do_destroy_qp, prep = new_qp, conn = 1;
	else if (!strcmp(c, "create_qp"))
		fn = measured_create_qp, warm = do_create_qp, prep = no_qp, conn = 1;
	else if (!strcmp(c, "resolve_addr"))
		fn = measured_resolve_addr, warm = do_resolve_addr, prep = client_fresh, post = addr_resolved, lis = 1;
	else if (!strcmp(c, "resolve_route"))
		fn = measured_resolve_route, warm = do_resolve_route, prep = to_addr, post = route_resolved, lis = 1;
	else if (!strcmp(c, "connect"))
		fn = measured_connect, warm = do_connect, prep = to_route, post = rejected, lis = 1;
	else if (!strcmp(c, "accept"))
		fn = measured_accept, warm = do_accept, prep = to_request, post = accepted_then_closed, lis = 1;
	else if (!strcmp(c, "disconnect"))
		fn = measured_disconnect, warm = do_disconnect, prep = to_established, post = disconnected, lis = 1;
	else if (!strcmp(c, "accept_qp"))
		fn = measured_accept_qp, warm = do_accept, prep = to_request_qp, post = accepted_then_closed_qp, lis = 1;
	else if (!strcmp(c, "conn_resp_qp"))
		fn = measured_conn_resp_qp, warm = do_conn_resp_qp, prep = to_response_qp, post = established_then_closed_qp, lis = 1;
	else {
		fprintf(stderr, "usage: bench_calls gai|create_destroy|get_ack|write_get_ack|event_str|"
			"bind|init_qp_attr|rtr_qp_attr|rts_qp_attr|destroy_qp|create_qp|resolve_addr|"
			"resolve_route|connect|accept|disconnect|accept_qp|conn_resp_qp N\n");
		return 2;
	}
	get_ack = fn == measured_get_ack;
	write_get_ack = fn == measured_write_get_ack;
	here.sin_family = AF_INET;
	inet_pton(AF_INET, "192.0.2.1", &here.sin_addr);
	if (fn == measured_create_destroy || get_ack || write_get_ack || prep || conn) {
		ch = rdma_create_event_channel();
		if (!ch)
			die("rdma_create_event_channel");
	}
	if ((get_ack || write_get_ack) && rdma_create_id(ch, &evid, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (conn)
		connect_pair();
	if (lis)
		listen_here();
	if (prep == new_fresh &&
	    (rdma_create_id(ch, &keeper, NULL, RDMA_PS_TCP) || rdma_bind_addr(keeper, (struct sockaddr *)&here)))
		die("rdma_create_id/rdma_bind_addr");
	for (int i = 0; i <= n; i++) {    /* i == 0: the unmeasured first call */
		if (i == 1)
			clock_gettime(CLOCK_MONOTONIC, &t0);
		if (get_ack && rdma_write_cm_event(evid, RDMA_CM_EVENT_USER, 0, i))
			die("rdma_write_cm_event");
		if (prep)
			prep();
		if (i == 0 ? warm() : fn())
			die(c);
		if (post)
			post();
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (client && client->qp)
		rdma_destroy_qp(client);
	if (server && server->qp)
		rdma_destroy_qp(server);
	if (evid)
		rdma_destroy_id(evid);
	for (int i = 0; i < 5; i++) {
		struct rdma_cm_id *id = i == 0 ? client : i == 1 ? server : i == 2 ? listener : i == 3 ? fresh : keeper;

		if (id)
			rdma_destroy_id(id);
	}
	if (ch)
		rdma_destroy_event_channel(ch);
	printf("calls %d\n", n);
	if (n > 0)
		printf("ns_per_call %.0f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
	return 0;
}
