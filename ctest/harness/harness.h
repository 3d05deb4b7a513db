/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/* A minimal test harness: CHECK records a failure and goes on; every test
 * file registers its tests in main.c.  The run ends with the line
 * "N passed, N failed". */
#ifndef RDMACM_RS_HARNESS_H
#define RDMACM_RS_HARNESS_H

#include <stdio.h>

extern int harness_failures;

#define CHECK(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
		harness_failures++; \
	} \
} while (0)

#define CHECK_EQ_INT(a, b) do { \
	long long _a = (long long)(a), _b = (long long)(b); \
	if (_a != _b) { \
		fprintf(stderr, "  %s:%d: %s == %lld, expected %s == %lld\n", \
			__FILE__, __LINE__, #a, _a, #b, _b); \
		harness_failures++; \
	} \
} while (0)

void test_symbols(void);
void test_events(void);
void test_addrinfo_free(void);
void test_ports(void);
void test_args(void);
void test_verbs_inline(void);

#endif
