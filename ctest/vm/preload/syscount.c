/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * syscount.c - LD_PRELOAD diagnostic for `bench/ab.sh -w syscount`: counts the system calls a
 * process makes through libc's wrappers (what both librdmacm variants and libibverbs call):
 * read and write by the kind of descriptor (eventfd, the CQ's completion channel
 * "infinibandevent", the verbs device "uverbs"), ioctl, poll, sched_yield, futex through
 * syscall(), and sem_wait / sem_post (upstream's locks sleep in them). Unlike strace it does
 * not stop the process at each call, so the threads keep their timing. A library's own system
 * calls (ours makes its blocking reads and polls directly, as cancellation points) are not seen
 * one by one: /proc/self/io's syscr and syscw count every read- and write-class call, and
 * getrusage the context switches. At exit it appends one line "syscount NAME=COUNT ..." to the
 * file named by SYSCOUNT_FILE.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { C_READ_EV, C_READ_CH, C_READ_OTHER, C_WRITE_EV, C_WRITE_VERBS, C_WRITE_OTHER, C_IOCTL, C_POLL,
       C_YIELD, C_FUTEX, C_SEM_WAIT, C_SEM_POST, C_N };
static const char *const names[C_N] = { "read_eventfd", "read_channel", "read_other", "write_eventfd",
	"write_verbs", "write_other", "ioctl", "poll", "sched_yield", "futex", "sem_wait", "sem_post" };
static unsigned long counts[C_N];

/* the kind of each descriptor, looked up on its first read or write: 0 unknown, 1 eventfd,
 * 2 completion channel, 3 verbs device, 4 other */
#define MAXFD 4096
static unsigned char kind[MAXFD];

static int fd_kind(int fd)
{
	char p[64], t[128];
	ssize_t n;
	int k;

	if (fd < 0 || fd >= MAXFD)
		return 4;
	k = __atomic_load_n(&kind[fd], __ATOMIC_RELAXED);
	if (k)
		return k;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	n = readlink(p, t, sizeof(t) - 1);
	t[n > 0 ? n : 0] = 0;
	k = strstr(t, "eventfd") ? 1 : strstr(t, "infinibandevent") ? 2 : strstr(t, "uverbs") ? 3 : 4;
	__atomic_store_n(&kind[fd], k, __ATOMIC_RELAXED);
	return k;
}

static void count(int c)
{
	__atomic_fetch_add(&counts[c], 1, __ATOMIC_RELAXED);
}

#define REAL(ret, name, ...) \
	static ret (*real)(__VA_ARGS__); \
	if (!real) \
		real = (ret (*)(__VA_ARGS__))dlsym(RTLD_NEXT, name)

ssize_t read(int fd, void *b, size_t n)
{
	REAL(ssize_t, "read", int, void *, size_t);
	int k = fd_kind(fd);

	count(k == 1 ? C_READ_EV : k == 2 ? C_READ_CH : C_READ_OTHER);
	return real(fd, b, n);
}

ssize_t write(int fd, const void *b, size_t n)
{
	REAL(ssize_t, "write", int, const void *, size_t);
	int k = fd_kind(fd);

	count(k == 1 ? C_WRITE_EV : k == 3 ? C_WRITE_VERBS : C_WRITE_OTHER);
	return real(fd, b, n);
}

int ioctl(int fd, unsigned long req, ...)
{
	REAL(int, "ioctl", int, unsigned long, void *);
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	count(C_IOCTL);
	return real(fd, req, arg);
}

int poll(struct pollfd *f, nfds_t n, int t)
{
	REAL(int, "poll", struct pollfd *, nfds_t, int);

	count(C_POLL);
	return real(f, n, t);
}

int sched_yield(void)
{
	REAL(int, "sched_yield", void);

	count(C_YIELD);
	return real();
}

long syscall(long nr, ...)
{
	REAL(long, "syscall", long, long, long, long, long, long, long);
	va_list ap;
	long a[6];
	int i;

	va_start(ap, nr);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (nr == SYS_futex)
		count(C_FUTEX);
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int sem_wait(sem_t *s)
{
	REAL(int, "sem_wait", sem_t *);

	count(C_SEM_WAIT);
	return real(s);
}

int sem_post(sem_t *s)
{
	REAL(int, "sem_post", sem_t *);

	count(C_SEM_POST);
	return real(s);
}

__attribute__((destructor)) static void report(void)
{
	const char *f = getenv("SYSCOUNT_FILE");
	char line[1024];
	int i, n, fd;

	if (!f)
		return;
	n = snprintf(line, sizeof(line), "syscount");
	for (i = 0; i < C_N; i++)
		n += snprintf(line + n, sizeof(line) - n, " %s=%lu", names[i], counts[i]);
	{
		char io[512];
		struct rusage ru;
		long cr = -1, cw = -1;
		ssize_t m;

		fd = open("/proc/self/io", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			m = syscall(SYS_read, fd, io, sizeof(io) - 1);
			io[m > 0 ? m : 0] = 0;
			close(fd);
			if (strstr(io, "syscr:"))
				cr = atol(strstr(io, "syscr:") + 6);
			if (strstr(io, "syscw:"))
				cw = atol(strstr(io, "syscw:") + 6);
		}
		getrusage(RUSAGE_SELF, &ru);
		n += snprintf(line + n, sizeof(line) - n, " syscr=%ld syscw=%ld vcsw=%ld ivcsw=%ld utime_us=%ld stime_us=%ld",
			      cr, cw, ru.ru_nvcsw, ru.ru_nivcsw, ru.ru_utime.tv_sec * 1000000L + ru.ru_utime.tv_usec,
			      ru.ru_stime.tv_sec * 1000000L + ru.ru_stime.tv_usec);
	}
	n += snprintf(line + n, sizeof(line) - n, "\n");
	fd = open(f, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (syscall(SYS_write, fd, line, n) < 0)
			n = 0;
		close(fd);
	}
}
