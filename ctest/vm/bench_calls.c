/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * Instructions per call for `make bench`: vm/suite.d/bench.sh runs this under valgrind
 * --tool=callgrind --toggle-collect=measured_<case>, so only what runs inside the measured
 * function (the library call and everything it calls, in libc and the kernel-facing code) is
 * counted.  One call of each kind is made first, outside the measured function, so first-use
 * costs (device list, lazy initialisation) are not part of the per-call figure.
 *
 *   bench_calls CASE N      CASE: gai | create_destroy | get_ack | write_get_ack | event_str |
 *                                 bind | init_qp_attr | rtr_qp_attr | rts_qp_attr | destroy_qp
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
 * (unmeasured) on that id just before.
 *
 * Prints "calls N" on success; exits 1 (with the reason on stderr) when a call fails.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* a connection within this process over rxe0's loopback, without QPs (as cmtime's no-QP test) */
static void connect_pair(void)
{
	struct rdma_conn_param cp;
	struct sockaddr_in to = here;

	if (rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP) || rdma_create_id(ch, &client, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_bind_addr(listener, (struct sockaddr *)&here) || rdma_listen(listener, 1))
		die("rdma_bind_addr/rdma_listen");
	to.sin_port = rdma_get_src_port(listener);
	if (rdma_resolve_addr(client, NULL, (struct sockaddr *)&to, 2000))
		die("rdma_resolve_addr");
	expect(RDMA_CM_EVENT_ADDR_RESOLVED);
	if (rdma_resolve_route(client, 2000))
		die("rdma_resolve_route");
	expect(RDMA_CM_EVENT_ROUTE_RESOLVED);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.qp_num = 0x100;
	if (rdma_connect(client, &cp))
		die("rdma_connect");
	server = expect(RDMA_CM_EVENT_CONNECT_REQUEST);
	cp.qp_num = 0x101;
	if (rdma_accept(server, &cp))
		die("rdma_accept");
	expect(RDMA_CM_EVENT_CONNECT_RESPONSE);
	if (rdma_establish(client))
		die("rdma_establish");
	expect(RDMA_CM_EVENT_ESTABLISHED);
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

static void new_qp(void)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	if (rdma_create_qp(client, NULL, &a))
		die("rdma_create_qp");
}

static int do_destroy_qp(void)
{
	rdma_destroy_qp(client);
	return 0;
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

int main(int argc, char **argv)
{
	int (*fn)(void), (*warm)(void);
	void (*prep)(void) = NULL;    /* before each call, unmeasured */
	int conn = 0;
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
	else {
		fprintf(stderr, "usage: bench_calls gai|create_destroy|get_ack|write_get_ack|event_str|"
			"bind|init_qp_attr|rtr_qp_attr|rts_qp_attr|destroy_qp N\n");
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
	if (prep == new_fresh &&
	    (rdma_create_id(ch, &keeper, NULL, RDMA_PS_TCP) || rdma_bind_addr(keeper, (struct sockaddr *)&here)))
		die("rdma_create_id/rdma_bind_addr");
	for (int i = 0; i <= n; i++) {    /* i == 0: the unmeasured first call */
		if (get_ack && rdma_write_cm_event(evid, RDMA_CM_EVENT_USER, 0, i))
			die("rdma_write_cm_event");
		if (prep)
			prep();
		if (i == 0 ? warm() : fn())
			die(c);
	}
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
	return 0;
}
