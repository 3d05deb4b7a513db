/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * Instructions per call for `make bench`: vm/suite.d/bench.sh runs this under valgrind
 * --tool=callgrind --toggle-collect=measured_<case>, so only what runs inside the measured
 * function (the library call and everything it calls, in libc and the kernel-facing code) is
 * counted.  One call of each kind is made first, outside the measured function, so first-use
 * costs (device list, lazy initialisation) are not part of the per-call figure.
 *
 *   bench_calls CASE N      CASE: gai | create_destroy | get_ack | write_get_ack | event_str
 *
 * get_ack: rdma_get_cm_event + rdma_ack_cm_event of an event written (unmeasured) before;
 * write_get_ack: rdma_write_cm_event + rdma_get_cm_event + rdma_ack_cm_event, all measured.
 *
 * Prints "calls N" on success; exits 1 (with the reason on stderr) when a call fails.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

static struct rdma_event_channel *ch;
static struct rdma_cm_id *evid;
static volatile const char *sink;

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

/* what callgrind counts: one call each (noinline: the symbol must exist for --toggle-collect) */
__attribute__((noinline)) static int measured_gai(void) { return do_gai(); }
__attribute__((noinline)) static int measured_create_destroy(void) { return do_create_destroy(); }
__attribute__((noinline)) static int measured_get_ack(void) { return do_get_ack(); }
__attribute__((noinline)) static int measured_write_get_ack(void) { return do_write_get_ack(); }
__attribute__((noinline)) static int measured_event_str(void) { return do_event_str(); }

int main(int argc, char **argv)
{
	int (*fn)(void), (*warm)(void);
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
	else {
		fprintf(stderr, "usage: bench_calls gai|create_destroy|get_ack|write_get_ack|event_str N\n");
		return 2;
	}
	get_ack = fn == measured_get_ack;
	write_get_ack = fn == measured_write_get_ack;
	if (fn == measured_create_destroy || get_ack || write_get_ack) {
		ch = rdma_create_event_channel();
		if (!ch)
			die("rdma_create_event_channel");
	}
	if ((get_ack || write_get_ack) && rdma_create_id(ch, &evid, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	for (int i = 0; i <= n; i++) {    /* i == 0: the unmeasured first call */
		if (get_ack && rdma_write_cm_event(evid, RDMA_CM_EVENT_USER, 0, i))
			die("rdma_write_cm_event");
		if (i == 0 ? warm() : fn())
			die(c);
	}
	if (evid)
		rdma_destroy_id(evid);
	if (ch)
		rdma_destroy_event_channel(ch);
	printf("calls %d\n", n);
	return 0;
}
