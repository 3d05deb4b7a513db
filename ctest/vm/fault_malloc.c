/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * fault_malloc - allocation failure at every allocation of an operation (faults).
 * This program defines malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign and
 * free itself (forwarding to glibc's __libc_* functions), so every allocation of the process,
 * librdmacm's and libibverbs' included, passes through it; an "armed" thread fails its k-th
 * allocation with ENOMEM (once). For each operation and each k = 1, 2, ... until the operation
 * completes without reaching allocation k, a child process (fork, 30 s alarm):
 *   1. runs the operation once and undoes it (warm-up: one-time set-up is not a leak),
 *   2. notes the bytes in use (mallinfo2), arms allocation k, runs the operation,
 *   3. undoes whatever succeeded, compares the bytes in use (a leak: more than before),
 *   4. runs the operation again unarmed: it must succeed (state usable afterwards).
 * Operations: rdma_getaddrinfo, rdma_create_id, rdma_create_qp, the event path
 * (rdma_get_cm_event + rdma_ack_cm_event of an ADDR_RESOLVED event; a failure reported as an
 * ADDR_ERROR event instead counts as a clean error, as upstream does it).
 * Prints one line per injected failure and a summary per operation; exits 1 when, with
 * RDMACM_VARIANT=ours (or preload), any injected failure crashed, hung, leaked, succeeded
 * silently with a NULL result, or left the library unusable. The upstream run only records.
 *
 *   fault_malloc [operation...]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include "common.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static __thread long countdown; /* 0: not armed */
static __thread int injected;
static int fail_now(void)
{
	if (countdown > 0 && --countdown == 0) {
		injected = 1;
		errno = ENOMEM;
		return 1;
	}
	return 0;
}
void *malloc(size_t n) { return fail_now() ? NULL : __libc_malloc(n); }
void *calloc(size_t a, size_t b) { return fail_now() ? NULL : __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return fail_now() ? NULL : __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *memalign(size_t al, size_t n) { return fail_now() ? NULL : __libc_memalign(al, n); }
void *aligned_alloc(size_t al, size_t n) { return memalign(al, n); }
int posix_memalign(void **out, size_t al, size_t n)
{
	if (fail_now())
		return ENOMEM;
	void *p = __libc_memalign(al, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

static struct sockaddr_in A1, A2;
#define SA(x) ((struct sockaddr *)&(x))

/* ---- operations: run() returns 0 or the errno; undo() releases what run() made ---- */
struct op {
	const char *name;
	int (*prep)(void); /* fixtures, not armed */
	int (*run)(void);
	void (*undo)(void);
	void (*unprep)(void);
};
static struct rdma_addrinfo *res;
static int gai_run(void)
{
	struct rdma_addrinfo h = { .ai_port_space = RDMA_PS_TCP };
	res = NULL;
	int r = rdma_getaddrinfo("192.0.2.2", "7471", &h, &res);
	if (r)
		return errno ? errno : -r;
	return res ? 0 : -1000; /* success without a result */
}
static void gai_undo(void)
{
	if (res)
		rdma_freeaddrinfo(res);
	res = NULL;
}
static struct rdma_event_channel *ch;
static struct rdma_cm_id *id;
static int ch_prep(void)
{
	ch = rdma_create_event_channel();
	return ch ? 0 : errno;
}
static void ch_unprep(void)
{
	rdma_destroy_event_channel(ch);
}
static int id_run(void)
{
	id = NULL;
	return rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ? errno : id ? 0 : -1000;
}
static void id_undo(void)
{
	if (id)
		rdma_destroy_id(id);
	id = NULL;
}
static struct ibv_pd *pd;
static int qp_prep(void)
{
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) || rdma_bind_addr(id, SA(A1)))
		return errno;
	pd = ibv_alloc_pd(id->verbs);
	return pd ? 0 : errno;
}
static int qp_run(void)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	return rdma_create_qp(id, pd, &a) ? errno : id->qp ? 0 : -1000;
}
static void qp_undo(void)
{
	if (id->qp)
		rdma_destroy_qp(id);
}
static void qp_unprep(void)
{
	rdma_destroy_id(id);
	ibv_dealloc_pd(pd);
}
static int ev_prep(void)
{
	if (ch_prep() || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return errno;
	return 0;
}
static struct rdma_cm_event *ev;
static int ev_run(void)
{
	/* the resolution is started unarmed by ev_start; the event is fetched and acked armed */
	ev = NULL;
	if (rdma_get_cm_event(ch, &ev))
		return errno;
	if (!ev)
		return -1000;
	int r = ev->event == RDMA_CM_EVENT_ADDR_RESOLVED ? 0 : -1001;
	rdma_ack_cm_event(ev);
	ev = NULL;
	return r;
}
static void ev_undo(void)
{
	if (ev)
		rdma_ack_cm_event(ev);
	ev = NULL;
	/* a new id for the next round (an id resolves its address once) */
	rdma_destroy_id(id);
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
}
static void ev_unprep(void)
{
	rdma_destroy_id(id);
	ch_unprep();
}
static int ev_start(void)
{
	return rdma_resolve_addr(id, SA(A1), SA(A2), 2000) ? errno : 0;
}

static const struct op ops[] = {
	{ "rdma_getaddrinfo", NULL, gai_run, gai_undo, NULL },
	{ "rdma_create_id", ch_prep, id_run, id_undo, ch_unprep },
	{ "rdma_create_qp", qp_prep, qp_run, qp_undo, qp_unprep },
	{ "event_path", ev_prep, ev_run, ev_undo, ev_unprep },
};

/* child: 0 = the operation completed before allocation k; 1 = failure injected, all fine;
 * 2 = leak; 3 = unusable afterwards; 4 = success reported without a result; 5 = setup failed */
static int child(const struct op *o, long k, char *line, size_t len)
{
	int start = o->run == ev_run;
	if (o->prep && o->prep())
		return snprintf(line, len, "setup failed: %s", en(errno)), 5;
	if (start && ev_start())
		return snprintf(line, len, "setup failed: %s", en(errno)), 5;
	int r = o->run(); /* warm-up */
	o->undo();
	if (r)
		return snprintf(line, len, "warm-up failed: %s", r > 0 ? en(r) : "no result"), 5;
	if (start && ev_start())
		return snprintf(line, len, "setup failed: %s", en(errno)), 5;
	size_t before = mallinfo2().uordblks;
	countdown = k;
	injected = 0;
	r = o->run();
	countdown = 0;
	if (!injected) {
		o->undo();
		return snprintf(line, len, "completed within %ld allocations", k - 1), 0;
	}
	o->undo();
	size_t after = mallinfo2().uordblks;
	int st = 1;
	char what[64];
	snprintf(what, sizeof what, "%s",
		 r == 0 ? "ok (recovered)" : r > 0 ? en(r) : r == -1001 ? "reported as an error event" : "success without a result");
	if (r == -1000)
		st = 4;
	long leak = (long)after - (long)before;
	if (st == 1 && leak > 0)
		st = 2;
	if (start && ev_start())
		return snprintf(line, len, "%s; restart failed: %s", what, en(errno)), 3;
	int again = o->run();
	o->undo();
	if (st == 1 && again)
		st = 3;
	snprintf(line, len, "%s, %ld bytes more in use, again: %s", what, leak, again ? en(again > 0 ? again : 0) : "ok");
	return st;
}

int main(int argc, char **argv)
{
	const char *v = getenv("RDMACM_VARIANT");
	int strict = v && strcmp(v, "upstream"), bad = 0;
	inet_pton(AF_INET, "192.0.2.1", &A1.sin_addr);
	A1.sin_family = AF_INET;
	A2 = A1;
	inet_pton(AF_INET, "192.0.2.2", &A2.sin_addr);
	A2.sin_port = htons(7471);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		const struct op *o = &ops[i];
		int want = argc == 1;
		for (int a = 1; a < argc; a++)
			want |= !strcmp(argv[a], o->name);
		if (!want)
			continue;
		int n = 0, crashes = 0, leaks = 0, unusable = 0, clean = 0, silent = 0;
		for (long k = 1; k < 5000; k++) {
			int p[2];
			if (pipe(p))
				return 2;
			pid_t pid = fork();
			if (pid == 0) {
				close(p[0]);
				alarm(30);
				char line[256];
				int st = child(o, k, line, sizeof line);
				if (write(p[1], line, strlen(line)) < 0)
					_exit(99);
				_exit(st);
			}
			close(p[1]);
			char line[257] = { 0 };
			ssize_t got = 0, r;
			while (got < 256 && (r = read(p[0], line + got, 256 - got)) > 0)
				got += r;
			close(p[0]);
			int st;
			waitpid(pid, &st, 0);
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
				printf("%s: %s\n", o->name, line);
				break;
			}
			n++;
			if (WIFSIGNALED(st)) {
				crashes++;
				printf("%s: allocation %ld: SIG%s\n", o->name, k,
				       WTERMSIG(st) == SIGALRM ? "ALRM (hang)" : sigabbrev_np(WTERMSIG(st)));
				continue;
			}
			switch (WEXITSTATUS(st)) {
			case 1: clean++; break;
			case 2: leaks++; break;
			case 3: unusable++; break;
			case 4: silent++; break;
			default:
				printf("%s: allocation %ld: %s (exit %d)\n", o->name, k, line, WEXITSTATUS(st));
				crashes++;
				continue;
			}
			printf("%s: allocation %ld: %s\n", o->name, k, line);
			if (WEXITSTATUS(st) == 5)
				break;
		}
		printf("%s: %d failures injected: %d clean errors, %d crashes or hangs, %d leaks, %d unusable afterwards, %d "
		       "successes without a result\n",
		       o->name, n, clean, crashes, leaks, unusable, silent);
		bad |= crashes || leaks || unusable || silent;
	}
	return strict && bad;
}
