/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * clockcount.c - LD_PRELOAD test shim for the VM test bed (vm/suite.d/rsocket.sh,
 * rsvc_spin_rxe): counts each thread's calls of clock_gettime(). A busy poll of either
 * library reads the clock on every try (upstream's rs_get_comp, our sleep_until_on), so the
 * count of a thread blocked in rrecv shows whether it spun before it slept.
 * clockcount_mine() gives the calling thread's count (the test finds it with dlsym).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static __thread unsigned long mine;

int clock_gettime(clockid_t id, struct timespec *ts)
{
	static clock_gettime_fn real;

	if (!real)
		real = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
	mine++;
	return real(id, ts);
}

unsigned long clockcount_mine(void)
{
	return mine;
}
