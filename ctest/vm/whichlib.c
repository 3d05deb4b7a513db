/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * whichlib - prints every librdmacm object mapped into this process, one
 * "librdmacm <path>" line each (symlinks resolved), and the object that
 * rdma_event_str was bound to.  The VM test bed runs it in each variant's
 * environment before every test (vm/guest/lib.sh, _libcheck) to assert that
 * the loader resolved librdmacm.so.1 to the library the variant claims.
 * Exits 1 when the bound object is not one of the mapped ones.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

int main(void)
{
	char seen[8][PATH_MAX], line[PATH_MAX + 128], real[PATH_MAX];
	int n = 0, i, bound_ok = 0;
	Dl_info info;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f) {
		perror("whichlib: /proc/self/maps");
		return 1;
	}
	while (fgets(line, sizeof line, f)) {
		char *p = strchr(line, '/');

		if (!p || !strstr(p, "/librdmacm"))
			continue;
		p[strcspn(p, "\n")] = 0;
		if (!realpath(p, real))
			snprintf(real, sizeof real, "%s", p);
		for (i = 0; i < n && strcmp(seen[i], real); i++)
			;
		if (i == n && n < 8)
			snprintf(seen[n++], sizeof seen[0], "%s", real);
	}
	fclose(f);
	for (i = 0; i < n; i++)
		printf("librdmacm %s\n", seen[i]);
	if (!dladdr((void *)rdma_event_str, &info) || !info.dli_fname) {
		fprintf(stderr, "whichlib: dladdr(rdma_event_str) failed\n");
		return 1;
	}
	if (!realpath(info.dli_fname, real))
		snprintf(real, sizeof real, "%s", info.dli_fname);
	for (i = 0; i < n; i++)
		bound_ok |= !strcmp(seen[i], real);
	printf("bound %s\n", real);
	return bound_ok ? 0 : 1;
}
