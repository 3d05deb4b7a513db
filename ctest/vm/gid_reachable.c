/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * ibv_gid_reachable against the kernel's own answer.
 *
 * For every local port and a set of targets (reachable, no neighbour, no
 * route, behind another device), the program first asks the loaded
 * librdmacm to resolve the target's IP address (rdma_resolve_addr on a
 * synchronous id) and prints that transcript: it must be identical with
 * upstream's library and ours.  Then, when the loaded library provides
 * ibv_gid_reachable (ours does; upstream has no such call), it checks
 * that the call agrees with the transcript: 0 exactly when the address
 * resolves through this very device and port, else -1/ENXIO; and it
 * checks the argument errors.  Disagreements go to stderr and fail the run.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

typedef int (*gid_reachable_fn)(struct ibv_context *, unsigned int, union ibv_gid *, int);

static const char *const targets[] = {
	"192.0.2.2", "192.0.2.1", "192.0.2.99", "198.51.100.2", "203.0.113.1",
	"2001:db8::2", "2001:db8::99",
};

static int failures;

static int to_gid(const char *ip, union ibv_gid *gid, struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(gid, 0, sizeof(*gid));
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, ip, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		gid->raw[10] = gid->raw[11] = 0xff;
		memcpy(&gid->raw[12], &sin->sin_addr, 4);
		return 0;
	}
	if (inet_pton(AF_INET6, ip, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		memcpy(gid->raw, &sin6->sin6_addr, 16);
		return 0;
	}
	return -1;
}

/* The kernel's answer through the loaded librdmacm: 0 and the device and
 * port it picked, or -1 and errno. */
static int oracle(struct sockaddr *dst, uint64_t *guid, int *port)
{
	struct rdma_cm_id *id;
	int ret, err;

	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return -1;
	ret = rdma_resolve_addr(id, NULL, dst, 1000);
	err = errno;
	if (!ret) {
		*guid = id->verbs ? ibv_get_device_guid(id->verbs->device) : 0;
		*port = id->port_num;
	}
	rdma_destroy_id(id);
	errno = err;
	return ret;
}

int main(void)
{
	gid_reachable_fn gid_reachable = (gid_reachable_fn)dlsym(RTLD_DEFAULT, "ibv_gid_reachable");
	struct ibv_device **devs;
	int ndev;

	devs = ibv_get_device_list(&ndev);
	if (!devs || !ndev) {
		printf("no RDMA devices\n");
		return 1;
	}
	for (size_t t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
		struct sockaddr_storage ss;
		union ibv_gid gid;
		uint64_t guid = 0;
		int port = 0, ret, err;

		to_gid(targets[t], &gid, &ss);
		ret = oracle((struct sockaddr *)&ss, &guid, &port);
		err = errno;
		if (ret)
			printf("%-14s resolve: error %s\n", targets[t], strerrorname_np(err));
		else
			printf("%-14s resolve: port %d\n", targets[t], port);
		if (!gid_reachable)
			continue;
		for (int d = 0; d < ndev; d++) {
			struct ibv_context *ctx = ibv_open_device(devs[d]);
			int want, got, got_err;

			if (!ctx)
				continue;
			want = !ret && guid == ibv_get_device_guid(devs[d]) && port == 1;
			errno = 0;
			got = gid_reachable(ctx, 1, &gid, 1000);
			got_err = errno;
			if ((got == 0) != want || (got && got_err != ENXIO)) {
				fprintf(stderr, "MISMATCH %s on %s port 1: ibv_gid_reachable=%d errno=%s, kernel says %s\n",
					targets[t], ibv_get_device_name(devs[d]), got,
					strerrorname_np(got_err), want ? "reachable" : "not through this port");
				failures++;
			}
			got = gid_reachable(ctx, 0, &gid, 0);
			if (!want && got == 0 && ret) {
				fprintf(stderr, "MISMATCH %s on %s port 0: reachable, kernel failed\n",
					targets[t], ibv_get_device_name(devs[d]));
				failures++;
			}
			ibv_close_device(ctx);
		}
	}
	if (gid_reachable) {
		struct ibv_context *ctx = ibv_open_device(devs[0]);
		union ibv_gid gid;

		memset(&gid, 0, sizeof(gid));
		errno = 0;
		if (gid_reachable(NULL, 1, &gid, 0) != -1 || errno != EINVAL)
			failures++, fprintf(stderr, "MISMATCH NULL context\n");
		errno = 0;
		if (gid_reachable(ctx, 1, NULL, 0) != -1 || errno != EINVAL)
			failures++, fprintf(stderr, "MISMATCH NULL gid\n");
		errno = 0;
		if (gid_reachable(ctx, 200, &gid, 0) != -1 || errno != EINVAL)
			failures++, fprintf(stderr, "MISMATCH port out of range\n");
		errno = 0;
		if (gid_reachable(ctx, 1, &gid, -5) != -1 || errno != EINVAL)
			failures++, fprintf(stderr, "MISMATCH negative timeout\n");
		ibv_close_device(ctx);
		fprintf(stderr, "ibv_gid_reachable: %d disagreement(s) with the kernel\n", failures);
	} else {
		/* the test bed names the library each run must have loaded */
		const char *v = getenv("RDMACM_VARIANT");

		fprintf(stderr, "ibv_gid_reachable: not provided by this librdmacm (upstream)\n");
		if (v && strcmp(v, "upstream")) {
			fprintf(stderr, "FAIL: RDMACM_VARIANT=%s but ibv_gid_reachable is missing: not our library\n", v);
			failures++;
		}
	}
	ibv_free_device_list(devs);
	return failures ? 1 : 0;
}
