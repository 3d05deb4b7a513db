/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * whichlib - which librdmacm this process loaded, by path and by content.
 * Prints every librdmacm object mapped into the process, one "librdmacm <path>" line each
 * (symlinks resolved), then, for the object rdma_event_str was bound to:
 *   bound <path>
 *   buildid <hex>|none        its GNU build-id, read from its PT_NOTE segments in memory
 *   rs_symbol yes|no          whether it exports ibv_gid_reachable@RDMACM_RS_1.0, our own
 *                             version node (upstream's library has neither)
 * The VM test bed runs it in each variant's environment before every test (vm/guest/lib.sh,
 * _libcheck): the "ours" variants must load a library with our symbol and the build-id of the
 * library `make lib` built, the "upstream" variant one with neither; a copy of upstream's
 * library put where ours should be is caught by content, whatever its path.
 * Exits 1 when the bound object is not one of the mapped ones.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

struct find {
	const char *path;	/* realpath of the object */
	char id[128];		/* hex build-id, "" if none */
};

static int note_id(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find *f = arg;
	char real[PATH_MAX];
	int i;

	(void)size;
	if (!info->dlpi_name || !*info->dlpi_name || !realpath(info->dlpi_name, real) ||
	    strcmp(real, f->path))
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;

		if (ph->p_type != PT_NOTE)
			continue;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const void *)p;
			const char *name = p + sizeof(*n);
			const unsigned char *desc = (const void *)(name + ((n->n_namesz + 3) & ~3u));

			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
			    n->n_descsz * 2 < sizeof(f->id)) {
				unsigned j;

				for (j = 0; j < n->n_descsz; j++)
					sprintf(f->id + 2 * j, "%02x", desc[j]);
				return 1;
			}
			p = (const char *)desc + ((n->n_descsz + 3) & ~3u);
		}
	}
	return 1;
}

int main(void)
{
	char seen[8][PATH_MAX], line[PATH_MAX + 128], real[PATH_MAX];
	int n = 0, i, bound_ok = 0;
	struct find f = { .path = real, .id = "" };
	void *h, *sym = NULL;
	Dl_info info;
	FILE *fp = fopen("/proc/self/maps", "r");

	if (!fp) {
		perror("whichlib: /proc/self/maps");
		return 1;
	}
	while (fgets(line, sizeof line, fp)) {
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
	fclose(fp);
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
	dl_iterate_phdr(note_id, &f);
	printf("buildid %s\n", f.id[0] ? f.id : "none");
	/* the symbol must be defined by the bound object itself */
	h = dlopen(real, RTLD_LAZY | RTLD_NOLOAD);
	if (h) {
		Dl_info si;

		sym = dlvsym(h, "ibv_gid_reachable", "RDMACM_RS_1.0");
		if (sym && (!dladdr(sym, &si) || !si.dli_fname || !realpath(si.dli_fname, line) ||
			    strcmp(line, real)))
			sym = NULL;
		dlclose(h);
	}
	printf("rs_symbol %s\n", sym ? "yes" : "no");
	return bound_ok ? 0 : 1;
}
