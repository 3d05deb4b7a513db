/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/* scenarios.h - the fault programs' runner (fault_fd.c, fault_proc.c): each scenario named on
 * the command line (all without arguments) runs in its own child under a 60 s alarm; a child
 * killed by a signal (SIGALRM: a hang) or exiting non-zero is reported and fails the run. */
/* (the includer defines _GNU_SOURCE: sigabbrev_np) */
#ifndef RDMACM_RS_SCENARIOS_H
#define RDMACM_RS_SCENARIOS_H
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct scenario {
	const char *name;
	void (*fn)(void);
};

static int run_scenarios(const struct scenario *scen, size_t n, int argc, char **argv)
{
	int fail = 0;
	for (size_t i = 0; i < n; i++) {
		int want = argc == 1;
		for (int a = 1; a < argc; a++)
			want |= !strcmp(argv[a], scen[i].name);
		if (!want)
			continue;
		fflush(stdout);
		pid_t p = fork();
		if (p == 0) {
			alarm(60);
			scen[i].fn();
			fflush(stdout);
			_exit(0);
		}
		int st;
		waitpid(p, &st, 0);
		if (WIFSIGNALED(st)) {
			printf("%s: child killed by SIG%s\n", scen[i].name,
			       WTERMSIG(st) == SIGALRM ? "ALRM (hang)" : sigabbrev_np(WTERMSIG(st)));
			fail = 1;
		} else if (WEXITSTATUS(st)) {
			printf("%s: child exit %d\n", scen[i].name, WEXITSTATUS(st));
			fail = 1;
		}
	}
	return fail;
}
#endif
