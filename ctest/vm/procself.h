/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * procself.h - what a VM test program counts of itself under /proc/self, for its growth checks
 * (soak, storm_cycles, the cancellation runner, resolve_async): the descriptors it has open and
 * its threads.
 */
#ifndef RDMACM_RS_VM_PROCSELF_H
#define RDMACM_RS_VM_PROCSELF_H
#include <dirent.h>
#include <stdio.h>
#include <string.h>

/* The entries of a /proc directory; -1 when it cannot be opened. */
static inline int proc_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The descriptors open now, without the one the count opens to read them. */
static inline int proc_fds(void)
{
	int n = proc_entries("/proc/self/fd");
	return n < 0 ? n : n - 1;
}

/* The threads that are not on their way out. A thread whose stat flags carry PF_EXITING has
 * ended for the process, and pthread_join may already have returned for it (the kernel wakes the
 * joiner before it reaps the task), but it stays listed under /proc/self/task until the kernel
 * reaps it, which under an emulated CPU can outlast a sample. Those are not counted; *exiting
 * (when not NULL) says how many there were. */
#define PROC_PF_EXITING 0x4ul
static inline int proc_threads(int *exiting)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0, x = 0;
	if (exiting)
		*exiting = 0;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char p[300], l[512];
		snprintf(p, sizeof p, "/proc/self/task/%s/stat", e->d_name);
		FILE *f = fopen(p, "r");
		if (!f)
			continue; /* reaped since the directory was read */
		size_t len = fread(l, 1, sizeof l - 1, f);
		fclose(f);
		l[len] = 0;
		/* after the command's closing parenthesis: state ppid pgrp session tty_nr tpgid flags */
		char *r = strrchr(l, ')');
		unsigned long flags = 0;
		if (r && sscanf(r + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) == 1 && (flags & PROC_PF_EXITING))
			x++;
		else
			n++;
	}
	closedir(d);
	if (exiting)
		*exiting = x;
	return n;
}
#endif
