/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * cancel.h - the runner shared by cancel.c and cancel_dl.c (how C threads end).
 *
 * Every case named on the command line runs in its own forked child.  The child re-arms a
 * watchdog (alarm) at every step, so a hang costs one step's time (STEP_S seconds, longer than
 * any wait inside a step), never the suite's; the first run of a case whose failure is tolerated
 * in this variant (-k/-K naming the whole case) is known to hang there, so its watchdog is
 * STEP_KNOWN_S; the step it is in lives in a shared page, so the
 * parent can say where a child that died or hung was.  A case prints two lines on stdout:
 *
 *   NAME: <first run: how the thread ended, what was still usable>
 *   NAME xN: <N more runs: all ended as the first, descriptor and thread growth>
 *
 * and the parent prints them itself when the child was killed (HANG = the watchdog, or the
 * signal that killed it, e.g. SIGABRT, with the step).
 *
 * Options (before the case names):
 *   -n N      repeated runs for the growth check (default 10; 0: first run only)
 *   -k LIST   comma-separated lines known broken in upstream's code: NAME (both lines) or
 *             NAME.x (the repeat line only).  Printed with a leading "~ " (the suite filters
 *             them out of the upstream/ours comparison); a failure there is tolerated when
 *             RDMACM_VARIANT=upstream and counted otherwise.
 *   -K LIST   the same, tolerated in every variant (upstream's code in both variants, e.g.
 *             upstream's librspreload over our librdmacm).
 * A failure is marked "[FAIL]" (counted: exit 1) or "[FAIL, tolerated]" at the end of its line.
 * Information that differs between the libraries by design goes to stderr.
 */
#ifndef RDMACM_RS_CANCEL_H
#define RDMACM_RS_CANCEL_H
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "procself.h"

#define STEP_S 8
#define STEP_KNOWN_S 3

struct cshared {
	char step[128];
	int phase;		/* 0: first run, 1: repeats, 2: done */
	int counted;		/* failures that count */
	int tolerated;		/* failures tolerated (-k/-K) */
	double exit_at;		/* the exit case: when exit() was called (CLOCK_MONOTONIC, s) */
};
static struct cshared *sh;
static int reps = 10;
static const char *known_up = "", *known_all = "";
static int is_upstream;
static int step_s = STEP_S;	/* the watchdog's time for the steps to come */

static double mono_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* the current step (for the parent's report); re-arms the watchdog */
static void step(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(sh->step, sizeof sh->step, fmt, ap);
	va_end(ap);
	alarm(step_s);
}

/* LIST (comma-separated) has NAME or, for a repeat line, NAME.x */
static int listed(const char *list, const char *name, int repeat)
{
	char key[96];
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == n && !strncmp(p, name, n))
			return 1;
		if (repeat) {
			snprintf(key, sizeof key, "%s.x", name);
			if (l == strlen(key) && !strncmp(p, key, l))
				return 1;
		}
		p = e ? e + 1 : NULL;
	}
	return 0;
}

/* a failure of NAME's line (repeat: the xN line) is tolerated in this variant (-K, or -k upstream) */
static int tolerated(const char *name, int repeat)
{
	return listed(known_all, name, repeat) || (is_upstream && listed(known_up, name, repeat));
}

/* prints one result line of case NAME (repeat: the xN line) */
static void line(const char *name, int repeat, int ok, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	int nc = listed(known_all, name, repeat) || listed(known_up, name, repeat);
	int tol = tolerated(name, repeat);
	char rn[16] = "";
	if (repeat)
		snprintf(rn, sizeof rn, " x%d", reps);
	printf("%s%s%s: %s%s\n", nc ? "~ " : "", name, rn, text, ok ? "" : tol ? " [FAIL, tolerated]" : " [FAIL]");
	fflush(stdout);
	if (!ok) {
		if (tol)
			sh->tolerated++;
		else
			sh->counted++;
	}
}

/* the descriptors and threads open now (for naming what grew) */
#define SNAP_MAX 512
struct snap {
	int n, id[SNAP_MAX];
};
static void snap_dir(const char *d, struct snap *s)
{
	DIR *dp = opendir(d);
	struct dirent *e;
	s->n = 0;
	while (dp && (e = readdir(dp)))
		if (e->d_name[0] != '.' && s->n < SNAP_MAX)
			s->id[s->n++] = atoi(e->d_name);
	if (dp)
		closedir(dp);
}
/* prints (stderr) what is in d now and was not in s: descriptors' targets, threads' names */
static void snap_new(const char *name, const char *d, const struct snap *s)
{
	struct snap now;
	char p[128], t[256];
	int shown = 0;
	snap_dir(d, &now);
	for (int i = 0; i < now.n && shown < 8; i++) {
		int old = 0;
		for (int j = 0; j < s->n; j++)
			old |= s->id[j] == now.id[i];
		if (old)
			continue;
		ssize_t l;
		if (!strcmp(d, "/proc/self/fd")) {
			snprintf(p, sizeof p, "%s/%d", d, now.id[i]);
			l = readlink(p, t, sizeof t - 1);
		} else {
			snprintf(p, sizeof p, "%s/%d/comm", d, now.id[i]);
			FILE *f = fopen(p, "r");
			l = f && fgets(t, sizeof t, f) ? (ssize_t)strcspn(t, "\n") : -1;
			if (f)
				fclose(f);
		}
		t[l > 0 ? l : 0] = 0;
		fprintf(stderr, "%s: new %s %d: %s\n", name, d + 11, now.id[i], t);
		shown++;
	}
}
/* the growth since (fd0, th0): waits up to 1 s for threads and descriptors that go away on
 * their own (a library's thread ending after its last user) */
static void growth(int fd0, int th0, int *dfd, int *dth)
{
	for (int i = 0; i < 100; i++) {
		*dfd = proc_fds() - fd0;
		*dth = proc_threads(NULL) - th0;
		if (*dfd <= 0 && *dth <= 0)
			return;
		usleep(10000);
	}
}

/* A case: one run writes what happened into out and returns 1 when everything was as required.
 * repeatable: the xN line is printed (runs 2..N+1 with the growth check). */
struct ccase {
	const char *name;
	int (*run)(char *out, size_t n, int iter);
	int repeatable;
};

/* the child's body for one case */
static void run_case(const struct ccase *c)
{
	char out[400];
	sh->phase = 0;
	/* a first run known to fail here ends at a shorter watchdog (its line is left out of the
	 * comparison); a case named NAME.x only is known to fail in its repeats, never here */
	if (tolerated(c->name, 0))
		step_s = STEP_KNOWN_S;
	step("first run");
	int ok = c->run(out, sizeof out, 0);
	step_s = STEP_S;
	line(c->name, 0, ok, "%s", out);
	if (!c->repeatable || reps <= 0)
		return;
	sh->phase = 1;
	if (!ok) {
		line(c->name, 1, 0, "not run (the first run failed)");
		sh->phase = 2;
		return;
	}
	static struct snap fds0, tasks0;
	snap_dir("/proc/self/fd", &fds0);
	snap_dir("/proc/self/task", &tasks0);
	/* (a thread just joined and still listed is not counted: proc_threads) */
	int fd0 = proc_fds(), th0 = proc_threads(NULL), i, dfd, dth;
	for (i = 1; i <= reps; i++) {
		step("run %d", i + 1);
		if (!c->run(out, sizeof out, i))
			break;
	}
	if (i <= reps) {
		line(c->name, 1, 0, "run %d: %s", i + 1, out);
		sh->phase = 2;
		return;
	}
	step("growth");
	growth(fd0, th0, &dfd, &dth);
	if (dfd > 0)
		snap_new(c->name, "/proc/self/fd", &fds0);
	if (dth > 0)
		snap_new(c->name, "/proc/self/task", &tasks0);
	line(c->name, 1, dfd <= 0 && dth <= 0, "all as the first, fds %+d, threads %+d", dfd, dth);
	sh->phase = 2;
}

/* runs the named cases (argv after the options); returns the exit status */
static int run_cases(const struct ccase *cs, size_t ncs, int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "n:k:K:")) != -1) {
		switch (opt) {
		case 'n': reps = atoi(optarg); break;
		case 'k': known_up = optarg; break;
		case 'K': known_all = optarg; break;
		default: return 2;
		}
	}
	const char *v = getenv("RDMACM_VARIANT");
	is_upstream = v && !strcmp(v, "upstream");
	if (optind >= argc) {
		fprintf(stderr, "usage: %s [-n N] [-k LIST] [-K LIST] case...\ncases:", argv[0]);
		for (size_t i = 0; i < ncs; i++)
			fprintf(stderr, " %s", cs[i].name);
		fprintf(stderr, "\n");
		return 2;
	}
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	int counted = 0;
	for (int a = optind; a < argc; a++) {
		const struct ccase *c = NULL;
		for (size_t i = 0; i < ncs; i++)
			if (!strcmp(cs[i].name, argv[a]))
				c = &cs[i];
		if (!c) {
			printf("%s: no such case [FAIL]\n", argv[a]);
			counted++;
			continue;
		}
		memset(sh, 0, sizeof *sh);
		double t0 = mono_s();
		fflush(stdout);
		fflush(stderr);
		pid_t p = fork();
		if (p == 0) {
			run_case(c);
			fflush(stdout);
			fflush(stderr);
			_exit(0);
		}
		int st;
		waitpid(p, &st, 0);
		if (WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st))) {
			char how[192];
			if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
				snprintf(how, sizeof how, "HANG in %s", sh->step);
			else if (WIFSIGNALED(st))
				snprintf(how, sizeof how, "killed by SIG%s in %s", sigabbrev_np(WTERMSIG(st)), sh->step);
			else
				snprintf(how, sizeof how, "child exit %d in %s", WEXITSTATUS(st), sh->step);
			if (sh->phase == 0) {
				line(c->name, 0, 0, "%s", how);
				if (c->repeatable && reps > 0)
					line(c->name, 1, 0, "not run (the first run failed)");
			} else if (sh->phase == 1) {
				line(c->name, 1, 0, "%s", how);
			} else {
				printf("%s: after its lines: %s [FAIL]\n", c->name, how);
				sh->counted++;
			}
		}
		fprintf(stderr, "%s: %.1f s\n", c->name, mono_s() - t0);
		counted += sh->counted;
	}
	return counted ? 1 : 0;
}
#endif
