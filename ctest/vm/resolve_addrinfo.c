/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * rdma_resolve_addrinfo / rdma_query_addrinfo / rdma_write_cm_event through
 * whichever librdmacm is loaded; prints a deterministic transcript that
 * must be identical with upstream's library and ours.
 *
 * Where upstream leaves errno == -1 or a negative EAI_* code (its
 * "return ERR(ret)" with ret already -1), the transcript prints
 * "errno=(upstream: not an errno)" for both libraries, and the run with
 * ours (which sets a real errno there, by design) additionally checks on
 * stderr that the errno is the expected positive value.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include "common.h"

static int ours, failures;

static const char *ename(int e)
{
	const char *n = e > 0 ? strerrorname_np(e) : NULL;
	static char buf[32];

	if (n)
		return n;
	snprintf(buf, sizeof(buf), "%d", e);
	return buf;
}

/* Runs the call, then reads errno (C leaves argument order unspecified). */
#define SHOW(what, call) do { int _r = (call); show_ret(what, _r, errno); } while (0)

static void show_ret(const char *what, int ret, int err)
{
	printf("%s: ret=%d", what, ret);
	if (ret)
		printf(" errno=%s", ename(err));
	printf("\n");
}

/* A call where upstream's errno is not an errno; ours must give want (for
 * a name lookup, EAGAIN is as good: the VM has no name server to ask; want
 * 0: any real errno). */
static void show_ret_bug(const char *what, int ret, int err, int want)
{
	printf("%s: ret=%d%s\n", what, ret, ret ? " errno=(upstream: not an errno)" : "");
	if (ours && ret && (want ? err != want && !(want == ENOENT && err == EAGAIN) : err <= 0)) {
		fprintf(stderr, "FAIL %s: errno %s, expected %s\n", what, ename(err), ename(want));
		failures++;
	}
}

static void next_event(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev)) {
		printf("  get_cm_event: errno=%s\n", ename(errno));
		return;
	}
	printf("  event %s status=%d", rdma_event_str(ev->event), ev->status);
	if (ev->event == RDMA_CM_EVENT_USER)
		printf(" arg=%#llx", (unsigned long long)ev->param.arg);
	printf("\n");
	rdma_ack_cm_event(ev);
}

/*
 * A name to look up on an id with a channel: upstream fails the call; ours looks names up on
 * a worker thread, so the call returns 0 and the failure comes as ADDRINFO_ERROR with the
 * errno as status (src/cma/ai.rs).  The transcript says "failed" for both; ours must give
 * ENOENT (EAGAIN: the VM has no name server to ask).
 */
static void unknown_name(struct rdma_event_channel *ch, int ret, int err)
{
	struct rdma_cm_event *ev;
	int event = -1, status = 0;

	if (!ret && !rdma_get_cm_event(ch, &ev)) {
		event = ev->event;
		status = ev->status;
		rdma_ack_cm_event(ev);
	}
	printf("resolve unknown name: %s\n", ret || event == RDMA_CM_EVENT_ADDRINFO_ERROR ? "failed" : "did not fail");
	if (ours && (ret ? err != ENOENT && err != EAGAIN :
		     event != RDMA_CM_EVENT_ADDRINFO_ERROR || (status != ENOENT && status != EAGAIN))) {
		fprintf(stderr, "FAIL resolve unknown name: ret %d errno %s event %d status %d\n", ret, ename(err), event, status);
		failures++;
	}
}

static void query(struct rdma_cm_id *id, const char *what)
{
	struct rdma_addrinfo *res = NULL;
	int ret = rdma_query_addrinfo(id, &res);

	show_ret(what, ret, errno);
	if (!ret) {
		show_ai_list(res);
		rdma_freeaddrinfo(res);
	}
}

int main(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_addrinfo hints;
	struct rdma_cm_id *id, *sid;
	int ret;

	ours = dlsym(RTLD_DEFAULT, "ibv_gid_reachable") != NULL;
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		printf("setup failed: %s\n", ename(errno));
		return 1;
	}

	errno = 0;
	SHOW("resolve NULL id", rdma_resolve_addrinfo(NULL, "192.0.2.2", "7471", NULL));
	SHOW("query NULL id", rdma_query_addrinfo(NULL, NULL));
	SHOW("query NULL info", rdma_query_addrinfo(id, NULL));
	query(id, "query before resolve");

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_NUMERICHOST;
	hints.ai_port_space = RDMA_PS_TCP;
	ret = rdma_resolve_addrinfo(id, "192.0.2.2", "7471", &hints);
	show_ret("resolve numeric v4", ret, errno);
	if (!ret)
		next_event(ch);
	SHOW("resolve again before query", rdma_resolve_addrinfo(id, "192.0.2.2", "7471", &hints));
	query(id, "query");
	query(id, "query twice");

	ret = rdma_resolve_addrinfo(id, NULL, "7471", NULL);
	show_ret("resolve NULL hints, service only", ret, errno);
	if (!ret)
		next_event(ch);
	query(id, "query");

	hints.ai_flags = RAI_PASSIVE;
	hints.ai_family = AF_INET6;
	ret = rdma_resolve_addrinfo(id, "2001:db8::1", "18515", &hints);
	show_ret("resolve passive v6", ret, errno);
	if (!ret)
		next_event(ch);
	query(id, "query");

	hints.ai_family = 0;
	hints.ai_flags = RAI_SA | RAI_DNS;
	SHOW("resolve SA|DNS", rdma_resolve_addrinfo(id, NULL, "1", &hints));
	hints.ai_flags = RAI_SA;
	SHOW("resolve SA with node", rdma_resolve_addrinfo(id, "192.0.2.2", "1", &hints));
	errno = 0;
	ret = rdma_resolve_addrinfo(id, NULL, NULL, &hints);
	show_ret_bug("resolve SA without service", ret, errno, EINVAL);
	query(id, "query after failures");

	/* The kernel's IB service resolution on a RoCE-only machine. */
	ret = rdma_resolve_addrinfo(id, NULL, "0x1234", &hints);
	show_ret_bug("resolve SA service on RoCE", ret, errno, 0);
	if (!ret) {
		next_event(ch);
		query(id, "query SA");
	}

	hints.ai_flags = 0;
	errno = 0;
	ret = rdma_resolve_addrinfo(id, "no-such-host.invalid", "7471", &hints);
	unknown_name(ch, ret, errno);
	ret = rdma_resolve_addrinfo(id, "192.0.2.2", "no-such-service", &hints);
	show_ret_bug("resolve unknown service", ret, errno, ENOENT);

	/* User events and what the library refuses to queue. */
	SHOW("write USER", rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 7, 0x1122334455ULL));
	next_event(ch);
	SHOW("write INTERNAL", rdma_write_cm_event(id, RDMA_CM_EVENT_INTERNAL, 0, 16));
	SHOW("write ESTABLISHED", rdma_write_cm_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, 0));

	/* Synchronous id: the call returns once the result is there. */
	if (rdma_create_id(NULL, &sid, NULL, RDMA_PS_UDP) == 0) {
		memset(&hints, 0, sizeof(hints));
		hints.ai_flags = RAI_NUMERICHOST;
		hints.ai_port_space = RDMA_PS_UDP;
		ret = rdma_resolve_addrinfo(sid, "192.0.2.1", "7174", &hints);
		show_ret("sync resolve", ret, errno);
		if (!ret && sid->event)
			printf("  parked event %s status=%d\n", rdma_event_str(sid->event->event), sid->event->status);
		query(sid, "sync query");
		/* Destroying an id with an unqueried result frees it (valgrind). */
		rdma_resolve_addrinfo(sid, "192.0.2.2", "7174", &hints);
		SHOW("destroy sync id", rdma_destroy_id(sid));
	}

	/* A pending result dies with its id too. */
	rdma_resolve_addrinfo(id, "192.0.2.2", "7471", NULL);
	next_event(ch);
	SHOW("destroy id", rdma_destroy_id(id));
	rdma_destroy_event_channel(ch);
	if (ours)
		fprintf(stderr, "resolve_addrinfo: %d errno check(s) failed\n", failures);
	return failures ? 1 : 0;
}
