/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/* setuid_env: loads the librdmacm named by argv[1] (an absolute path: the
 * loader ignores LD_LIBRARY_PATH in a setuid program) and calls one export,
 * rdma_create_event_channel, so that the library's one-time set-up (which
 * reads the environment and may open a log file) runs.  Prints
 * "called: <ok|errno>" so the caller knows the library was reached.
 * Used by ctest/setuid-env.sh. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s /abs/path/librdmacm.so.1\n", argv[0]);
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 2;
	}
	void *(*create)(void) = (void *(*)(void))dlsym(h, "rdma_create_event_channel");
	void (*destroy)(void *) = (void (*)(void *))dlsym(h, "rdma_destroy_event_channel");
	if (!create || !destroy) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return 2;
	}
	errno = 0;
	void *ch = create();
	if (ch) {
		printf("called: ok\n");
		destroy(ch);
	} else {
		printf("called: %s\n", strerror(errno));
	}
	return 0;
}
