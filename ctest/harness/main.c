/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
#include <string.h>
#include "harness.h"

int harness_failures;

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
	{ "symbols", test_symbols },
	{ "events", test_events },
	{ "addrinfo_free", test_addrinfo_free },
	{ "ports", test_ports },
	{ "args", test_args },
	{ "verbs_inline", test_verbs_inline },
};

int main(int argc, char **argv)
{
	unsigned passed = 0, failed = 0;

	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		int before = harness_failures;

		if (argc > 1 && strcmp(argv[1], tests[i].name))
			continue;
		tests[i].fn();
		if (harness_failures == before) {
			printf("PASS %s\n", tests[i].name);
			passed++;
		} else {
			printf("FAIL %s\n", tests[i].name);
			failed++;
		}
	}
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
