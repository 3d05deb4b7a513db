// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/*
 * cancel.c - a thread cancelled (or ended by pthread_exit in a signal
 * handler) inside a socket call that librspreload.so interposes must end
 * the way it ends without the library: pthread_join sees PTHREAD_CANCELED
 * (or the handler's value) and the process goes on.
 *
 * Run it with the library preloaded:
 *     LD_PRELOAD=build/lib/rsocket/librspreload.so LD_LIBRARY_PATH=build/lib \
 *         build/ctest/preload-cancel [-a ADDR]
 * Each case runs in a child process of its own, so one that kills its
 * process does not hide the others.  A case either blocks a thread in the
 * call and cancels it from outside, or cancels the thread itself first so
 * that the call's cancellation point acts on entry.
 *
 * Without an RDMA device every socket stays an ordinary one (the library's
 * pass-through path); with RDMAV_FORK_SAFE=1 in the environment the TCP
 * sockets are the library's stand-ins for TCP sockets (fork mode) even
 * then, so the cases also go through its translating paths.  With -a ADDR (an address of a local RDMA device,
 * e.g. rxe's) the TCP cases listen and connect at ADDR, so the library's
 * rsocket path is the one cancelled; the accept cases also check that no
 * descriptor is left behind by the cancelled accept.
 * Exit status 0 when every case passed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *addr = "127.0.0.1";
static int fds[2];             /* the case's pipe or socket pair */
static int lfd = -1;           /* the case's listening socket */
static struct sockaddr_in laddr;
static volatile int entered;   /* the thread is about to make the call */
static volatile int made;      /* socket() returned a descriptor (pending case) */

static void die(const char *what)
{
	perror(what);
	exit(3);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		die("opendir");
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* opendir's own */
}

static void make_pipe(void)
{
	if (pipe(fds))
		die("pipe");
}

static void make_pair(void)
{
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds))
		die("socketpair");
}

/* fds[1] (pipe write end or socket) filled until a write would block */
static void fill(void)
{
	static char buf[65536];
	int fl = fcntl(fds[1], F_GETFL);

	fcntl(fds[1], F_SETFL, fl | O_NONBLOCK);
	while (write(fds[1], buf, sizeof(buf)) > 0 || errno == EINTR)
		;
	if (errno != EAGAIN)
		die("fill");
	fcntl(fds[1], F_SETFL, fl);
}

static void make_listener(void)
{
	socklen_t len = sizeof(laddr);

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	memset(&laddr, 0, sizeof(laddr));
	laddr.sin_family = AF_INET;
	if (inet_pton(AF_INET, addr, &laddr.sin_addr) != 1)
		die("inet_pton");
	if (bind(lfd, (struct sockaddr *)&laddr, sizeof(laddr)) || listen(lfd, 4))
		die("bind/listen");
	if (getsockname(lfd, (struct sockaddr *)&laddr, &len))
		die("getsockname");
}

/* fds[0]: the accepted end of a TCP connection to the listener, fds[1]: the connecting end */
static void make_conn(void)
{
	make_listener();
	fds[1] = socket(AF_INET, SOCK_STREAM, 0);
	if (fds[1] < 0 || connect(fds[1], (struct sockaddr *)&laddr, sizeof(laddr)))
		die("connect");
	fds[0] = accept(lfd, NULL, NULL);
	if (fds[0] < 0)
		die("accept");
}

static char buf[64];

static void *t_read(void *a) { (void)a; entered = 1; read(fds[0], buf, 1); return NULL; }
static void *t_readv(void *a)
{
	struct iovec v = { buf, 1 };
	(void)a; entered = 1; readv(fds[0], &v, 1); return NULL;
}
static void *t_recv(void *a) { (void)a; entered = 1; recv(fds[0], buf, 1, 0); return NULL; }
static void *t_recvfrom(void *a) { (void)a; entered = 1; recvfrom(fds[0], buf, 1, 0, NULL, NULL); return NULL; }
static void *t_recvmsg(void *a)
{
	struct iovec v = { buf, 1 };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	(void)a; entered = 1; recvmsg(fds[0], &m, 0); return NULL;
}
static void *t_write(void *a) { (void)a; entered = 1; write(fds[1], buf, sizeof(buf)); return NULL; }
static void *t_writev(void *a)
{
	struct iovec v = { buf, sizeof(buf) };
	(void)a; entered = 1; writev(fds[1], &v, 1); return NULL;
}
static void *t_send(void *a) { (void)a; entered = 1; send(fds[1], buf, sizeof(buf), 0); return NULL; }
static void *t_sendto(void *a) { (void)a; entered = 1; sendto(fds[1], buf, sizeof(buf), 0, NULL, 0); return NULL; }
static void *t_sendmsg(void *a)
{
	struct iovec v = { buf, sizeof(buf) };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	(void)a; entered = 1; sendmsg(fds[1], &m, 0); return NULL;
}
static void *t_poll(void *a)
{
	struct pollfd p = { fds[0], POLLIN, 0 };
	(void)a; entered = 1; poll(&p, 1, -1); return NULL;
}
static void *t_poll_many(void *a)
{
	/* more entries than fit in a small fixed array; one of them is the
	 * listening socket, so with -a the rsocket path polls them */
	static struct pollfd p[300];
	(void)a;
	for (int i = 0; i < 300; i++)
		p[i] = (struct pollfd){ i % 2 ? fds[0] : lfd, POLLIN, 0 };
	entered = 1; poll(p, 300, -1); return NULL;
}
static void *t_select(void *a)
{
	fd_set r;
	(void)a; FD_ZERO(&r); FD_SET(fds[0], &r); FD_SET(lfd, &r);
	entered = 1; select((fds[0] > lfd ? fds[0] : lfd) + 1, &r, NULL, NULL, NULL); return NULL;
}
static void *t_epoll_wait(void *a)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	int ep = epoll_create1(0);
	(void)a;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev))
		die("epoll");
	entered = 1; epoll_wait(ep, &out, 1, -1); return NULL;
}
static void *t_epoll_pwait(void *a)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	sigset_t m;
	int ep = epoll_create1(0);
	(void)a; sigemptyset(&m);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev))
		die("epoll");
	entered = 1; epoll_pwait(ep, &out, 1, -1, &m); return NULL;
}
static void *t_accept(void *a) { (void)a; entered = 1; accept(lfd, NULL, NULL); return NULL; }
static void *t_accept4(void *a) { (void)a; entered = 1; accept4(lfd, NULL, NULL, SOCK_CLOEXEC); return NULL; }
static void *t_lockw(void *a)
{
	/* a lock held through another open file description of the same file */
	struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	(void)a; entered = 1; fcntl(fds[1], F_OFD_SETLKW, &l); return NULL;
}

/* pending cancellation: the call's cancellation point acts on entry (the
 * C library's does; pthread_testcancel after it ends the thread all the
 * same where an rsocket call has none: what counts is that the process
 * lives) */
static void *t_close_pending(void *a)
{
	(void)a; pthread_cancel(pthread_self()); entered = 1; close(fds[0]); pthread_testcancel(); return NULL;
}
static void *t_connect_pending(void *a)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	(void)a;
	if (s < 0)
		die("socket");
	pthread_cancel(pthread_self()); entered = 1;
	connect(s, (struct sockaddr *)&laddr, sizeof(laddr)); pthread_testcancel(); return NULL;
}
static void *t_send_pending(void *a)
{
	(void)a; pthread_cancel(pthread_self()); entered = 1; send(fds[1], buf, 1, 0); pthread_testcancel(); return NULL;
}
static void *t_close_socket_pending(void *a)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	(void)a;
	if (s < 0)
		die("socket");
	pthread_cancel(pthread_self()); entered = 1; close(s); pthread_testcancel(); return NULL;
}
/* socket() is no cancellation point: it returns, the next read acts */
static void *t_socket_pending(void *a)
{
	(void)a; pthread_cancel(pthread_self()); entered = 1;
	made = socket(AF_INET, SOCK_STREAM, 0) >= 0;
	read(fds[0], buf, 1); return NULL;
}

static void on_usr1(int sig) { (void)sig; pthread_exit((void *)42); }

struct test {
	const char *name;
	void (*setup)(void);
	void *(*fn)(void *);
	int how; /* 0 cancel from outside, 1 the thread cancels itself, 2 signal + pthread_exit */
	int fdcheck;
};

static void setup_read(void) { make_pipe(); }
static void setup_sock(void) { make_pair(); }
static void setup_full_pipe(void) { make_pipe(); fill(); }
static void setup_full_sock(void) { make_pair(); fill(); }
static void setup_listen(void) { make_pipe(); make_listener(); }
static void setup_conn(void) { make_conn(); }
static void setup_lock(void)
{
	char path[] = "/tmp/preload-cancel-XXXXXX";
	struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

	fds[0] = mkstemp(path);
	if (fds[0] < 0)
		die("mkstemp");
	fds[1] = open(path, O_RDWR);
	unlink(path);
	if (fds[1] < 0 || fcntl(fds[0], F_OFD_SETLK, &l))
		die("lock");
}

static const struct test tests[] = {
	{ "read", setup_read, t_read, 0, 0 },
	{ "readv", setup_read, t_readv, 0, 0 },
	{ "recv", setup_sock, t_recv, 0, 0 },
	{ "recvfrom", setup_sock, t_recvfrom, 0, 0 },
	{ "recvmsg", setup_sock, t_recvmsg, 0, 0 },
	{ "recv-tcp", setup_conn, t_recv, 0, 0 },
	{ "write", setup_full_pipe, t_write, 0, 0 },
	{ "writev", setup_full_pipe, t_writev, 0, 0 },
	{ "send", setup_full_sock, t_send, 0, 0 },
	{ "sendto", setup_full_sock, t_sendto, 0, 0 },
	{ "sendmsg", setup_full_sock, t_sendmsg, 0, 0 },
	{ "poll", setup_read, t_poll, 0, 0 },
	{ "poll-300", setup_listen, t_poll_many, 0, 0 },
	{ "select", setup_listen, t_select, 0, 0 },
	{ "epoll_wait", setup_read, t_epoll_wait, 0, 0 },
	{ "epoll_pwait", setup_read, t_epoll_pwait, 0, 0 },
	{ "accept", setup_listen, t_accept, 0, 1 },
	{ "accept4", setup_listen, t_accept4, 0, 1 },
	{ "fcntl-F_OFD_SETLKW", setup_lock, t_lockw, 0, 0 },
	{ "close-pending", setup_read, t_close_pending, 1, 0 },
	{ "close-socket-pending", setup_read, t_close_socket_pending, 1, 0 },
	{ "connect-pending", setup_listen, t_connect_pending, 1, 0 },
	{ "send-pending", setup_sock, t_send_pending, 1, 0 },
	{ "socket-pending", setup_read, t_socket_pending, 1, 0 },
	{ "read-sigexit", setup_read, t_read, 2, 0 },
	{ "accept-sigexit", setup_listen, t_accept, 2, 1 },
};

static int run(const struct test *t)
{
	struct timespec ms1 = { 0, 1000 * 1000 }, ms50 = { 0, 50 * 1000 * 1000 };
	pthread_t th;
	void *res;
	int before;

	signal(SIGUSR1, on_usr1);
	alarm(10); /* a case that hangs fails */
	t->setup();
	before = count_fds();
	if (pthread_create(&th, NULL, t->fn, NULL))
		die("pthread_create");
	while (!entered)
		nanosleep(&ms1, NULL);
	/* time to block in the call; a cancellation that comes earlier is
	 * pending and acts when the call begins, the same path */
	nanosleep(&ms50, NULL);
	if (t->how == 0)
		pthread_cancel(th);
	else if (t->how == 2)
		pthread_kill(th, SIGUSR1);
	if (pthread_join(th, &res))
		die("pthread_join");
	if (res != (t->how == 2 ? (void *)42 : PTHREAD_CANCELED)) {
		printf("%-20s FAIL: joined with %p\n", t->name, res);
		return 1;
	}
	if (t->fn == t_socket_pending && !made) {
		printf("%-20s FAIL: socket() did not return a descriptor\n", t->name);
		return 1;
	}
	if (t->fdcheck && count_fds() != before) {
		printf("%-20s FAIL: %d descriptor(s) left behind\n", t->name, count_fds() - before);
		return 1;
	}
	printf("%-20s ok (%s)\n", t->name, t->how == 2 ? "pthread_exit from a signal handler" : "PTHREAD_CANCELED");
	return 0;
}

int main(int argc, char **argv)
{
	int failed = 0;

	if (argc == 3 && !strcmp(argv[1], "-a"))
		addr = argv[2];
	else if (argc != 1) {
		fprintf(stderr, "usage: %s [-a ADDR]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		pid_t pid = fork();
		int st;

		if (pid < 0)
			die("fork");
		if (pid == 0)
			_exit(run(&tests[i]));
		if (waitpid(pid, &st, 0) != pid)
			die("waitpid");
		if (WIFSIGNALED(st))
			printf("%-20s FAIL: process killed by signal %d (%s)\n", tests[i].name, WTERMSIG(st), strsignal(WTERMSIG(st)));
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			failed++;
	}
	printf("%d of %zu cases failed\n", failed, sizeof(tests) / sizeof(tests[0]));
	return failed != 0;
}
