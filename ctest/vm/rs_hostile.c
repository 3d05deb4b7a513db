/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * rs_hostile - an rsocket server facing a hostile peer ("a peer must never make us
 * write outside a registered buffer").
 *
 * For each case a forked child is an ordinary rsocket server of the library under test
 * (rlisten, raccept through rpoll, one rsend of 5 bytes, then rrecv until the peer goes quiet,
 * rclose); the parent is the peer, written with the connection manager and verbs directly so
 * that it can break the rsocket protocol: the connection data of the CM private data (version,
 * length, target SGL and receive buffer descriptions) and the messages carried in the immediate
 * data of RDMA writes (op << 29 | value: data lengths beyond the buffer, reserved ops, unknown
 * control values, SGL updates that point nowhere).
 *
 * The server's transcript is printed; the run fails (exit 1) with RDMACM_VARIANT other than
 * upstream when a server or peer child crashed, hung (alarm) or exited non-zero. The
 * upstream run only records upstream's outcomes.
 *
 *   rs_hostile [case...]        (default: all)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>
#include "common.h"

#define ADDR "192.0.2.1"
#define MEM 65536


/* ---- the server: the library under test ---- */
static int server(int port, int ready)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int on = 1, l, s, n, i;
	static char buf[MEM];

	alarm(40);
	inet_pton(AF_INET, ADDR, &a.sin_addr);
	l = rsocket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) ||
	    rbind(l, (struct sockaddr *)&a, sizeof a) || rlisten(l, 4)) {
		printf("  server: listen failed: %s\n", en(errno));
		return 1;
	}
	if (write(ready, "r", 1) != 1)
		return 1;
	struct pollfd p = { .fd = l, .events = POLLIN };
	n = rpoll(&p, 1, 4000);
	if (n <= 0) {
		printf("  server: no connection accepted\n");
		rclose(l);
		return 0;
	}
	s = raccept(l, NULL, NULL);
	if (s < 0) {
		printf("  server: raccept -1 %s\n", en(errno));
		rclose(l);
		return 0;
	}
	printf("  server: accepted\n");
	fprintf(stderr, "server: accepted\n");
	n = rsend(s, "hello", 5, 0);
	printf("  server: rsend %d%s%s\n", n, n < 0 ? " " : "", n < 0 ? en(errno) : "");
	for (i = 0; i < 16; i++) {
		struct pollfd q = { .fd = s, .events = POLLIN };
		n = rpoll(&q, 1, 2500);
		if (n == 0) {
			printf("  server: quiet\n");
			break;
		}
		if (n < 0) {
			printf("  server: rpoll -1 %s\n", en(errno));
			break;
		}
		n = rrecv(s, buf, sizeof buf, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		if (n < 0) {
			printf("  server: rrecv -1 %s\n", en(errno));
			break;
		}
		/* the bytes are not printed (a hostile length may cover stale buffer memory) */
		printf("  server: rrecv %d\n", n);
		if (n == 0)
			break;
	}
	n = rsend(s, "bye", 3, MSG_DONTWAIT);
	printf("  server: rsend after %s\n", n == 3 ? "ok" : "failed");
	fprintf(stderr, "server: closing\n");
	rclose(s);
	rclose(l);
	fprintf(stderr, "server: closed\n");
	return 0;
}

/* ---- the peer: speaks (and breaks) the rsocket protocol by hand ---- */
struct peer {
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	char *mem;
	uint64_t rbuf, target; /* the server's receive buffer and SGL target */
	uint32_t rbuf_key, rbuf_len, target_key;
};

static void be64put(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }
static void be32put(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static uint64_t be64get(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }
static uint32_t be32get(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }

/* waits up to 2 s for one send completion; returns its status or -1 */
static int send_comp(struct peer *pr)
{
	struct ibv_wc wc;
	for (int i = 0; i < 2000; i++) {
		int n = ibv_poll_cq(pr->id->send_cq, 1, &wc);
		if (n > 0)
			return wc.status;
		if (n < 0)
			return -1;
		usleep(1000);
	}
	return -1;
}

/* an RDMA write with immediate of len bytes ('A'...) to the server's buffer at off */
static int put(struct peer *pr, uint32_t imm, uint32_t len, uint64_t addr, uint32_t key)
{
	struct ibv_sge sge = { .addr = (uintptr_t)pr->mem, .length = len, .lkey = pr->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = len ? 1 : 0, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				  .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(imm) }, *bad;
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = key;
	if (ibv_post_send(pr->id->qp, &wr, &bad))
		return -1;
	return send_comp(pr);
}
static int put_data(struct peer *pr, uint32_t imm, uint32_t len)
{
	return put(pr, imm, len, pr->rbuf, pr->rbuf_key);
}

static int connect_peer(struct peer *pr, int port, const uint8_t *cd, uint8_t cdlen)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = { .cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1 },
					 .qp_type = IBV_QPT_RC, .sq_sig_all = 1 };
	char ps[16];
	snprintf(ps, sizeof ps, "%d", port);
	if (rdma_getaddrinfo(ADDR, ps, &hints, &res))
		return printf("  peer: getaddrinfo %s\n", en(errno)), -1;
	int r = rdma_create_ep(&pr->id, res, NULL, &attr);
	rdma_freeaddrinfo(res);
	if (r)
		return printf("  peer: create_ep %s\n", en(errno)), -1;
	for (int i = 0; i < 32; i++)
		if (rdma_post_recvv(pr->id, NULL, NULL, 0))
			return printf("  peer: post_recv %s\n", en(errno)), -1;
	struct rdma_conn_param cp = { .private_data = cd, .private_data_len = cdlen, .responder_resources = 1,
				      .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7 };
	fprintf(stderr, "peer: connecting (%u bytes of connection data)\n", cdlen);
	if (rdma_connect(pr->id, &cp)) {
		printf("  peer: rdma_connect -1 %s\n", en(errno));
		return -1;
	}
	const uint8_t *sd = pr->id->event ? pr->id->event->param.conn.private_data : NULL;
	if (!sd || pr->id->event->param.conn.private_data_len < 40 || sd[0] != 1) {
		printf("  peer: connected, no rsocket connection data from the server\n");
		return 0;
	}
	pr->target = be64get(sd + 8);
	pr->target_key = be32get(sd + 16);
	pr->rbuf = be64get(sd + 24);
	pr->rbuf_key = be32get(sd + 32);
	pr->rbuf_len = be32get(sd + 36);
	printf("  peer: connected\n");
	return 0;
}

/* our own connection data: version 1, credits, target SGL and data buffer in pr->mem */
static void conn_data(struct peer *pr, uint8_t *cd, uint8_t version)
{
	memset(cd, 0, 40);
	cd[0] = version;
	cd[2] = 0, cd[3] = 16; /* credits */
	be64put(cd + 8, (uintptr_t)pr->mem + 1024); /* where the server sends SGL updates */
	be32put(cd + 16, pr->mr->rkey);
	be32put(cd + 20, 2);
	be64put(cd + 24, (uintptr_t)pr->mem + 4096); /* where the server writes data */
	be32put(cd + 32, pr->mr->rkey);
	be32put(cd + 36, 8192);
}

#define OP(op, v) ((uint32_t)(op) << 29 | ((v) & 0x1fffffff))

static int peer_case(int c, struct peer *pr, int port)
{
	uint8_t cd[40];
	conn_data(pr, cd, 1);
	switch (c) {
	case 1: /* no connection data at all */
		return connect_peer(pr, port, NULL, 0);
	case 2: /* an unknown protocol version */
		conn_data(pr, cd, 2);
		return connect_peer(pr, port, cd, 40);
	case 3: /* connection data cut short: no buffers described */
		return connect_peer(pr, port, cd, 8);
	case 4: /* a receive buffer that points nowhere, with a huge length */
		be64put(cd + 24, 0xfffffffffffff000ull);
		be32put(cd + 32, 0xdeadbeef);
		be32put(cd + 36, 0xffffffff);
		be64put(cd + 8, 0);
		be32put(cd + 20, 0xffffffff);
		return connect_peer(pr, port, cd, 40);
	}
	if (connect_peer(pr, port, cd, 40) || !pr->rbuf)
		return 0;
	switch (c) {
	case 5: /* data messages whose length exceeds what was written and the buffer itself */
		printf("  peer: write 16, claim 0x1fffffff: status %d\n", put_data(pr, OP(0, 0x1fffffff), 16));
		printf("  peer: write 16, claim rbuf+1: status %d\n", put_data(pr, OP(0, pr->rbuf_len + 1), 16));
		break;
	case 6: /* reserved and unknown ops, unknown control values */
		for (uint32_t op = 1; op < 7; op++)
			printf("  peer: op %u: status %d\n", op, put_data(pr, OP(op, 0x1234567), 4));
		printf("  peer: ctrl 5: status %d\n", put_data(pr, OP(7, 5), 0));
		printf("  peer: ctrl 0x1fffffff: status %d\n", put_data(pr, OP(7, 0x1fffffff), 0));
		printf("  peer: data 16: status %d\n", put_data(pr, OP(0, 16), 16));
		break;
	case 7: { /* an SGL update that points nowhere: the server's next sends go there */
		memset(pr->mem, 0xff, 32);
		printf("  peer: garbage SGL: status %d\n", put(pr, OP(4, 0xffff), 32, pr->target, pr->target_key));
		printf("  peer: data 16: status %d\n", put_data(pr, OP(0, 16), 16));
		break;
	}
	case 8: /* a flood of zero-length data messages (more than the credits we were given) */ {
		int bad = 0;
		for (int i = 0; i < 600 && !bad; i++)
			bad = put_data(pr, OP(0, 0), 0) != 0;
		printf("  peer: flood: %s\n", bad ? "the connection broke" : "all written");
		break;
	}
	}
	return 0;
}

static const char *names[] = { "", "no connection data", "unknown version", "short connection data",
			       "buffers that point nowhere", "oversized data lengths", "reserved ops and controls",
			       "bad SGL update", "credit flood" };
#define NCASES 8

/* the peer of case c, in its own process: the library's CM calls may hang with a broken peer */
static int peer_run(int c, int port)
{
	struct peer pr = { 0 };
	struct rdma_cm_id *probe;
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP, .ai_flags = RAI_PASSIVE }, *res;

	pr.mem = aligned_alloc(4096, MEM);
	memset(pr.mem, 'A', MEM);
	/* the peer's memory registration needs a PD: that of the rxe device behind ADDR (the
	 * libraries give every id of a device the same one) */
	if (rdma_getaddrinfo(ADDR, NULL, &hints, &res) || rdma_create_ep(&probe, res, NULL, NULL)) {
		printf("  peer: setup %s\n", en(errno));
		return 1;
	}
	rdma_freeaddrinfo(res);
	pr.mr = ibv_reg_mr(probe->pd, pr.mem, MEM, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!pr.mr) {
		printf("  peer: reg_mr %s\n", en(errno));
		return 1;
	}
	peer_case(c, &pr, port);
	usleep(300000);
	fprintf(stderr, "case %d: peer: tearing down\n", c);
	if (pr.id && pr.rbuf)
		rdma_disconnect(pr.id);
	if (pr.id)
		rdma_destroy_ep(pr.id);
	ibv_dereg_mr(pr.mr);
	rdma_destroy_ep(probe);
	free(pr.mem);
	fprintf(stderr, "case %d: peer: done\n", c);
	return 0;
}

/* waits for a child; 1 when it crashed, hung or failed */
static int reap(pid_t pid, const char *who)
{
	int st;
	if (pid <= 0)
		return 0;
	waitpid(pid, &st, 0);
	if (WIFSIGNALED(st)) {
		printf("  %s: killed by SIG%s\n", who, WTERMSIG(st) == SIGALRM ? "ALRM (hang)" : sigabbrev_np(WTERMSIG(st)));
		return 1;
	}
	if (WEXITSTATUS(st)) {
		printf("  %s: exit %d\n", who, WEXITSTATUS(st));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *v = getenv("RDMACM_VARIANT");
	int strict = v && strcmp(v, "upstream"), bad = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	for (int c = 1; c <= NCASES; c++) {
		int want = argc == 1;
		for (int a = 1; a < argc; a++)
			want |= atoi(argv[a]) == c;
		if (!want)
			continue;
		int port = 7600 + c, pp[2];
		printf("case %d: %s\n", c, names[c]);
		if (pipe(pp))
			return 2;
		pid_t pid = fork();
		if (pid == 0) {
			close(pp[0]);
			_exit(server(port, pp[1]));
		}
		close(pp[1]);
		char ch;
		pid_t peer = -1;
		if (read(pp[0], &ch, 1) != 1) {
			printf("  server did not start\n");
			bad = 1;
		} else if ((peer = fork()) == 0) {
			alarm(40);
			_exit(peer_run(c, port));
		}
		close(pp[0]);
		bad |= reap(peer, "peer");
		bad |= reap(pid, "server");
	}
	return strict && bad;
}
