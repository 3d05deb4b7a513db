/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/* rxe_stall: soft-RoCE's own stall, made on purpose, for the test bed's
 * recognition of it (vm/guest/lib.sh, _rxe_stall; test rxe_stall_detect).
 *
 * The server accepts, then moves its QP to ERR itself; the client, once
 * connected (retry count 7, rdma_connect's default: rxe retries without
 * end), sends 16 bytes and waits on its completion channel for the send's
 * completion, which never comes: the server's QP answers nothing.  Two
 * seconds after its QP went to ERR the server disconnects (its DREQ puts
 * the client's cm_id in DISCONNECT) and waits there.  Both ends wait until
 * they are killed: that is the state a stalled run is in when rdma_server
 * and rdma_client meet the race for real (the ACK of the client's last
 * message kept from leaving by the server's disconnect).  With -g the
 * server destroys its QP instead of moving it to ERR: the client's peer QP
 * is gone, as when the peer's program has ended (upstream's rcopy once).
 *
 *   rxe_stall -s            server, port 7473 on every address
 *   rxe_stall -g            server whose QP is gone
 *   rxe_stall -c ADDRESS    client
 * Prints one line per step ("server: QP in ERR" or "server: QP destroyed",
 * "server: disconnecting",
 * "client: waiting for the send's completion"); exits 1 when a step fails.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

static int fail(const char *what)
{
	perror(what);
	return 1;
}

int main(int argc, char **argv)
{
	struct rdma_addrinfo hints, *res;
	struct ibv_qp_init_attr attr;
	struct rdma_cm_id *lid, *id;
	struct ibv_wc wc;
	char buf[16] = "stall";
	int gone = argc == 2 && !strcmp(argv[1], "-g");
	int server = gone || (argc == 2 && !strcmp(argv[1], "-s"));

	if (!server && (argc != 3 || strcmp(argv[1], "-c"))) {
		fprintf(stderr, "usage: rxe_stall -s | -g | -c ADDRESS\n");
		return 2;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_port_space = RDMA_PS_TCP;
	if (server)
		hints.ai_flags = RAI_PASSIVE;
	if (rdma_getaddrinfo(server ? NULL : argv[2], "7473", &hints, &res))
		return fail("rdma_getaddrinfo");
	memset(&attr, 0, sizeof attr);
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	attr.cap.max_inline_data = 16;
	attr.sq_sig_all = 1;
	if (rdma_create_ep(server ? &lid : &id, res, NULL, &attr))
		return fail("rdma_create_ep");
	if (server) {
		struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };

		if (rdma_listen(lid, 0))
			return fail("rdma_listen");
		if (rdma_get_request(lid, &id))
			return fail("rdma_get_request");
		if (rdma_accept(id, NULL))
			return fail("rdma_accept");
		if (gone) {
			rdma_destroy_qp(id);
			printf("server: QP destroyed\n");
		} else {
			if (ibv_modify_qp(id->qp, &err, IBV_QP_STATE))
				return fail("ibv_modify_qp");
			printf("server: QP in ERR\n");
		}
		fflush(stdout);
		sleep(2);
		printf("server: disconnecting\n");
		fflush(stdout);
		rdma_disconnect(id);
		return 0;
	}
	if (rdma_connect(id, NULL))
		return fail("rdma_connect");
	sleep(1);
	if (rdma_post_send(id, NULL, buf, sizeof buf, NULL, IBV_SEND_INLINE))
		return fail("rdma_post_send");
	printf("client: waiting for the send's completion\n");
	fflush(stdout);
	while (rdma_get_send_comp(id, &wc) == 0)
		;
	printf("client: completion, status %d\n", wc.status);
	return 0;
}
