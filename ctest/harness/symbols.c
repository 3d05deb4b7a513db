/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/* Every function resolves through the dynamic linker under its upstream
 * version, as a program linked against upstream would ask for it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

void test_symbols(void)
{
	const char *path = getenv("RDMACM_SYMBOLS");
	char line[256];
	unsigned n = 0;
	void *lib = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_LOCAL);
	FILE *f;

	CHECK(lib != NULL);
	if (!lib)
		return;
	f = fopen(path ? path : "abi/rdmacm.symbols", "r");
	if (!f) {
		/* Outside the source tree (the VM): check a few by hand. */
		CHECK(dlvsym(lib, "rdma_getaddrinfo", "RDMACM_1.0") != NULL);
		CHECK(dlvsym(lib, "rdma_join_multicast_ex", "RDMACM_1.1") != NULL);
		CHECK(dlvsym(lib, "rdma_establish", "RDMACM_1.2") != NULL);
		CHECK(dlvsym(lib, "rdma_get_remote_ece", "RDMACM_1.3") != NULL);
		dlclose(lib);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char *ver;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		line[strcspn(line, "\n")] = 0;
		ver = strstr(line, "@@");
		CHECK(ver != NULL);
		if (!ver)
			continue;
		*ver = 0;
		ver += 2;
		if (!dlvsym(lib, line, ver)) {
			fprintf(stderr, "  %s@@%s not found\n", line, ver);
			harness_failures++;
		}
		n++;
	}
	fclose(f);
	CHECK_EQ_INT(n, 75);
	dlclose(lib);
}
