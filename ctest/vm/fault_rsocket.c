/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * fault_rsocket - process-level faults on rsockets: fork() with live
 * connections, RLIMIT_MEMLOCK too small for an rsocket's buffers, and a signal interrupting a
 * blocking rpoll and rrecv (with and without SA_RESTART). Each scenario runs in its own child
 * (scenarios.h: fork, 60 s alarm) and prints a transcript compared between the two libraries.
 *
 *   fault_rsocket [scenario...]
 *
 *   fork           a connected pair (both ends in this process, rxe0 192.0.2.1) exchanges
 *                  data; fork(); the child execs this program (own_conn) to make and use its
 *                  own connection (reported through a pipe, so the transcript's order does not
 *                  depend on scheduling) while the parent keeps transferring on its pair;
 *                  afterwards the parent's pair still works. vm/suite.d/fault.sh runs it
 *                  without and with RDMAV_FORK_SAFE=1.
 *   fork_noexec    the same with the child using the library it inherited (vm/suite.d/fault.sh:
 *                  ours must pass, upstream's outcome is only printed; the child's lines reach
 *                  the parent line by line, so a child that hangs still shows how far it got)
 *   memlock0       as nobody with RLIMIT_MEMLOCK 0: rsocket, then rconnect to a listener
 *                  (a root child): the call and errno that fail
 *   memlock64k     the same with a 64 KiB limit (below the default buffers)
 *   rpoll_eintr    a blocking rpoll(POLLIN) on a connected socket, SIGUSR1 after 300 ms, data
 *   rpoll_restart  300 ms after the signal; without / with SA_RESTART: EINTR or the data
 *   rrecv_eintr    the same with a blocking rrecv
 *   rrecv_restart
 *
 * FAULT_RS_TRACE=1 in the environment prints each connection step and transfer call, with
 * the process id, on stderr (for diagnosing a hang).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/rsocket.h>
#include "scenarios.h"
#include "common.h"

static struct sockaddr_in sa4(int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "192.0.2.1", &s.sin_addr);
	return s;
}
#define SA(x) ((struct sockaddr *)&(x))

/* a listener on 192.0.2.1:port; -1 (errno set) on failure */
static int listener(int port)
{
	struct sockaddr_in a = sa4(port);
	int one = 1, l = rsocket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		return -1;
	rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (rbind(l, SA(a), sizeof a) || rlisten(l, 4)) {
		int e = errno;
		rclose(l);
		errno = e;
		return -1;
	}
	return l;
}
struct acc {
	int l, fd, err;
};
static void *acceptor(void *arg)
{
	struct acc *a = arg;
	a->fd = raccept(a->l, NULL, NULL);
	a->err = a->fd < 0 ? errno : 0;
	return NULL;
}
/* a connected pair over rxe0 loopback: *c the connecting end, *s the accepted one.
 * Returns NULL or the name of the step that failed (errno set). */
#define TR(...) do { if (getenv("FAULT_RS_TRACE")) fprintf(stderr, "[%d] " __VA_ARGS__); } while (0)
static const char *conn_pair(int port, int *c, int *s)
{
	struct acc a = { .fd = -1 };
	TR("conn_pair %d\n", getpid(), port);
	pthread_t t;
	struct sockaddr_in d = sa4(port);
	if ((a.l = listener(port)) < 0)
		return "listen";
	TR("listening\n", getpid());
	pthread_create(&t, NULL, acceptor, &a);
	*c = rsocket(AF_INET, SOCK_STREAM, 0);
	int r = *c < 0 ? -1 : rconnect(*c, SA(d), sizeof d);
	int e = errno;
	TR("rconnect %d\n", getpid(), r);
	if (r) /* wake the acceptor */
		rshutdown(a.l, SHUT_RDWR);
	pthread_join(t, NULL);
	TR("joined, accepted %d\n", getpid(), a.fd);
	rclose(a.l);
	TR("listener closed\n", getpid());
	if (*c < 0 || r) {
		if (*c >= 0)
			rclose(*c);
		if (a.fd >= 0)
			rclose(a.fd);
		errno = e;
		return *c < 0 ? "rsocket" : "rconnect";
	}
	if (a.fd < 0) {
		rclose(*c);
		errno = a.err;
		return "raccept";
	}
	*s = a.fd;
	return NULL;
}
/* n bytes from a to b (pattern seeded by seed), verified; NULL or the failing step */
static const char *xfer(int a, int b, size_t n, unsigned seed)
{
	static char out[65536], in[65536];
	for (size_t i = 0; i < n; i++)
		out[i] = (char)(seed * 31 + i * 7);
	for (size_t off = 0; off < n;) {
		ssize_t w = rsend(a, out + off, n - off, 0);
		TR("rsend %zd %s\n", getpid(), w, w < 0 ? strerror(errno) : "");
		if (w <= 0)
			return "rsend";
		for (size_t got = 0; got < (size_t)w;) {
			ssize_t r = rrecv(b, in + off + got, (size_t)w - got, 0);
			TR("rrecv %zd\n", getpid(), r);
			if (r <= 0) {
				if (r == 0)
					errno = 0;
				return "rrecv";
			}
			got += (size_t)r;
		}
		off += (size_t)w;
	}
	if (memcmp(in, out, n)) {
		errno = 0;
		return "compare";
	}
	return NULL;
}

/* ---- fork with live rsockets ---- */
/* the child's own connection: 50 transfers of 8 KiB on a pair of its own (port 7522) */
static void own_conn(FILE *o)
{
	int cc, cs;
	const char *g = conn_pair(7522, &cc, &cs);
	if (g) {
		fprintf(o, "fork: child's own connection: %s %s\n", g, en(errno));
		return;
	}
	fprintf(o, "fork: child's own connection: ok\n");
	int bad = 0;
	for (int i = 0; i < 50 && !bad; i++)
		if ((g = xfer(cc, cs, 8192, 100 + i)))
			bad = 1, fprintf(o, "fork: child transfer %d: %s %s\n", i, g, en(errno));
	if (!bad)
		fprintf(o, "fork: child 50 transfers of 8 KiB: ok\n");
	fprintf(o, "fork: child rclose: %s\n", rclose(cc) || rclose(cs) ? en(errno) : "ok");
}
static void own_conn_stdout(void) { own_conn(stdout); }
/* do_exec: the child execs this program (scenario own_conn) for its connection, the usual
 * fork+exec; without it the child uses the library it inherited (fork_noexec: on kernel 7.2 /
 * rdma-core 65 upstream's scenario process is killed by SIGSEGV in most runs, with and without
 * RDMAV_FORK_SAFE; ours opens the child's own verbs context at its first bind: on the parent's,
 * whose uverbs descriptor the kernel refuses write(2) commands on from another process's
 * credentials, the child's first rsend fails with EACCES and its rclose hangs.
 * docs/behaviour.md, Faults.) */
static void rs_fork_impl(int do_exec)
{
	int c, s;
	const char *f = conn_pair(7521, &c, &s);
	if (f) {
		printf("fork: parent pair: %s %s\n", f, en(errno));
		return;
	}
	f = xfer(c, s, 4096, 1);
	printf("fork: parent transfer before fork: %s%s%s\n", f ? f : "ok", f ? " " : "", f ? en(errno) : "");
	int pfd[2];
	if (pipe(pfd))
		return;
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the scenario (it holds a port) */
		alarm(40);
		close(pfd[0]);
		if (do_exec) {
			dup2(pfd[1], 1);
			execl("/proc/self/exe", "fault_rsocket", "own_conn", (char *)NULL);
			_exit(127);
		}
		FILE *o = fdopen(pfd[1], "w");
		setvbuf(o, NULL, _IOLBF, 0); /* each line reaches the parent even if the child hangs */
		own_conn(o);
		fclose(o);
		_exit(0);
	}
	close(pfd[1]);
	/* the parent keeps transferring while the child works */
	int bad = 0, i;
	for (i = 0; i < 200 && !bad; i++)
		if ((f = xfer(c, s, 4096, 2 + i)))
			bad = 1;
	if (bad)
		printf("fork: parent transfer %d while the child runs: %s %s\n", i - 1, f, en(errno));
	else
		printf("fork: parent 200 transfers of 4 KiB while the child runs: ok\n");
	char line[256];
	FILE *in = fdopen(pfd[0], "r");
	while (fgets(line, sizeof line, in))
		fputs(line, stdout);
	fclose(in);
	int st;
	waitpid(p, &st, 0);
	printf("fork: child exited %s\n", WIFEXITED(st) && !WEXITSTATUS(st) ? "cleanly" : "abnormally");
	f = xfer(s, c, 65536, 999);
	printf("fork: parent transfer after the child exited: %s%s%s\n", f ? f : "ok", f ? " " : "", f ? en(errno) : "");
	printf("fork: parent rclose: %s\n", rclose(c) || rclose(s) ? en(errno) : "ok");
}

/* ---- RLIMIT_MEMLOCK too small ---- */
static void rs_memlock(const char *w, rlim_t lim)
{
	int port = lim ? 7524 : 7523, rdy[2];
	if (pipe(rdy))
		return;
	fflush(stdout);
	pid_t srv = fork();
	if (srv == 0) { /* root: not limited */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);
		int l = listener(port);
		char ok = l < 0 ? 'n' : 'y';
		if (write(rdy[1], &ok, 1) != 1 || l < 0)
			_exit(1);
		for (;;) {
			int fd = raccept(l, NULL, NULL);
			if (fd < 0)
				_exit(0);
			char b[4096];
			while (rrecv(fd, b, sizeof b, 0) > 0)
				;
			rclose(fd);
		}
	}
	char ok = 'n';
	if (read(rdy[0], &ok, 1) != 1 || ok != 'y') {
		printf("%s: listener: failed\n", w);
		kill(srv, SIGKILL);
		waitpid(srv, NULL, 0);
		return;
	}
	/* the client in its own process: once it is nobody it could not stop the root server */
	fflush(stdout);
	pid_t cli = fork();
	if (cli == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		struct rlimit r = { lim, lim };
		if (setrlimit(RLIMIT_MEMLOCK, &r) || setgid(65534) || setuid(65534)) {
			printf("%s: setup: %s\n", w, en(errno));
			_exit(1);
		}
		int fd = rsocket(AF_INET, SOCK_STREAM, 0);
		printf("%s: rsocket: %s\n", w, fd < 0 ? en(errno) : "ok");
		if (fd >= 0) {
			struct sockaddr_in d = sa4(port);
			errno = 0;
			int c = rconnect(fd, SA(d), sizeof d);
			printf("%s: rconnect ret=%d errno=%s\n", w, c, c ? en(errno) : "0");
			if (!c) {
				ssize_t n = rsend(fd, "x", 1, 0);
				printf("%s: rsend: %s\n", w, n == 1 ? "ok" : en(errno));
			}
			printf("%s: rclose: %s\n", w, rclose(fd) ? en(errno) : "ok");
		}
		/* a second attempt behaves the same (no state left behind by the failure) */
		fd = rsocket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0) {
			struct sockaddr_in d = sa4(port);
			errno = 0;
			int c = rconnect(fd, SA(d), sizeof d);
			printf("%s: second rconnect ret=%d errno=%s\n", w, c, c ? en(errno) : "0");
			rclose(fd);
		}
		fflush(stdout);
		_exit(0);
	}
	int st;
	waitpid(cli, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		printf("%s: client process ended abnormally\n", w);
	kill(srv, SIGKILL);
	waitpid(srv, NULL, 0);
}
static void rs_memlock0(void) { rs_memlock("memlock0", 0); }
static void rs_memlock64k(void) { rs_memlock("memlock64k", 64 * 1024); }

/* ---- signals ---- */
static volatile sig_atomic_t caught;
static void on_usr1(int sig)
{
	(void)sig;
	caught++;
}
struct later {
	pthread_t main;
	int peer;
};
static void *signal_then_send(void *arg)
{
	struct later *l = arg;
	usleep(300 * 1000);
	pthread_kill(l->main, SIGUSR1);
	usleep(300 * 1000);
	rsend(l->peer, "z", 1, 0);
	return NULL;
}
static void rs_signal(int use_rpoll, int restart)
{
	char w[32];
	snprintf(w, sizeof w, "%s_%s", use_rpoll ? "rpoll" : "rrecv", restart ? "restart" : "eintr");
	int c, s;
	const char *f = conn_pair(7525 + use_rpoll * 2 + restart, &c, &s);
	if (f) {
		printf("%s: pair: %s %s\n", w, f, en(errno));
		return;
	}
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = restart ? SA_RESTART : 0 };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	struct later l = { pthread_self(), c };
	pthread_t t;
	pthread_create(&t, NULL, signal_then_send, &l);
	char b[8];
	errno = 0;
	if (use_rpoll) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		int r = rpoll(&p, 1, 10000);
		printf("%s: rpoll ret=%d errno=%s revents=%s signal caught=%d\n", w, r, r < 0 ? en(errno) : "0",
		       r > 0 ? (p.revents & POLLIN ? "IN" : "other") : "-", caught);
	} else {
		ssize_t r = rrecv(s, b, sizeof b, 0);
		printf("%s: rrecv ret=%zd errno=%s signal caught=%d\n", w, r, r < 0 ? en(errno) : "0", caught);
		if (r == 1) {
			pthread_join(t, NULL);
			goto done;
		}
	}
	pthread_join(t, NULL);
	/* the socket still works: the byte sent after the signal arrives */
	ssize_t r = rrecv(s, b, sizeof b, 0);
	printf("%s: rrecv afterwards: %s\n", w, r == 1 && b[0] == 'z' ? "the byte" : r < 0 ? en(errno) : "other");
done:
	f = xfer(c, s, 4096, 7);
	printf("%s: transfer afterwards: %s\n", w, f ? f : "ok");
	printf("%s: rclose: %s\n", w, rclose(c) || rclose(s) ? en(errno) : "ok");
}
static void rpoll_eintr(void) { rs_signal(1, 0); }
static void rpoll_restart(void) { rs_signal(1, 1); }
static void rrecv_eintr(void) { rs_signal(0, 0); }
static void rrecv_restart(void) { rs_signal(0, 1); }

static void rs_fork(void) { rs_fork_impl(1); }
static void rs_fork_noexec(void) { rs_fork_impl(0); }
static const struct scenario scen[] = { { "fork", rs_fork },
	     { "own_conn", own_conn_stdout },
	     { "memlock0", rs_memlock0 },
	     { "memlock64k", rs_memlock64k },
	     { "rpoll_eintr", rpoll_eintr },
	     { "rpoll_restart", rpoll_restart },
	     { "rrecv_eintr", rrecv_eintr },
	     { "rrecv_restart", rrecv_restart },
	     { "fork_noexec", rs_fork_noexec } };

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	return run_scenarios(scen, sizeof scen / sizeof scen[0], argc, argv);
}
