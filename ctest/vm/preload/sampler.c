// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/*
 * A sampling profiler for the VM, which has no perf: LD_PRELOAD it and set
 * RDMACM_SAMPLER=FILE. SIGPROF on the process's CPU time (user and system,
 * at the kernel's tick) records the interrupted user-mode address; at exit
 * the addresses go to FILE as "PC <hex> <count>" lines, followed by the
 * executable mappings as "MAP <line of /proc/self/maps>". A sample taken
 * while the thread was in a system call shows the address after its
 * syscall instruction: bench/sampler-report.py tells those (kernel time)
 * from the rest (user time) and names the functions. Used by the opt-in
 * bench section rs_prof_duplex (vm/suite.d/bench.sh).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>

#define MAX_SAMPLES (1u << 20)
static unsigned long pcs[MAX_SAMPLES];
static atomic_uint taken;

static void on_prof(int sig, siginfo_t *si, void *uc)
{
	unsigned i = atomic_fetch_add(&taken, 1);

	(void)sig;
	(void)si;
	if (i < MAX_SAMPLES)
		pcs[i] = (unsigned long)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
}

__attribute__((constructor)) static void sampler_start(void)
{
	struct sigaction sa;
	/* the shortest interval: the kernel rounds it up to its tick */
	struct itimerval it = { { 0, 100 }, { 0, 100 } };

	if (!secure_getenv("RDMACM_SAMPLER"))
		return;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_prof;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGPROF, &sa, NULL);
	setitimer(ITIMER_PROF, &it, NULL);
}

static int by_address(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

__attribute__((destructor)) static void sampler_stop(void)
{
	const char *path = secure_getenv("RDMACM_SAMPLER");
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	unsigned n, i, j;
	char line[512];
	FILE *o, *m;

	if (!path)
		return;
	setitimer(ITIMER_PROF, &off, NULL);
	n = atomic_load(&taken);
	if (n > MAX_SAMPLES)
		n = MAX_SAMPLES;
	qsort(pcs, n, sizeof *pcs, by_address);
	o = fopen(path, "w");
	if (!o)
		return;
	fprintf(o, "SAMPLES %u\n", n);
	for (i = 0; i < n; i = j) {
		for (j = i; j < n && pcs[j] == pcs[i]; j++)
			;
		fprintf(o, "PC %lx %u\n", pcs[i], j - i);
	}
	m = fopen("/proc/self/maps", "r");
	while (m && fgets(line, sizeof line, m))
		if (strstr(line, " r-xp "))
			fprintf(o, "MAP %s", line);
	if (m)
		fclose(m);
	fclose(o);
}
