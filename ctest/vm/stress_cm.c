/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * stress_cm - a concurrency stress test of the connection manager.
 *
 * One process over rxe0 (192.0.2.1, loopback):
 *  - a listener thread on its own event channel accepts every connection
 *    request (QP on the new id, rdma_accept) and, once the connection is
 *    disconnected, destroys the QP and the id;
 *  - NTHREADS workers loop for a bounded time over: create an id, resolve
 *    address and route to the listener, create a QP, connect, disconnect,
 *    destroy QP and id.  Even workers use one shared event channel, odd
 *    workers are synchronous (NULL channel, private to the id);
 *  - an event thread gets the events of the shared channel, hands each one
 *    to the worker that owns the id, and only then acks it, so workers
 *    reach rdma_destroy_id while the id's last event is still unacked
 *    (rdma_destroy_id must wait for the ack, and nothing may touch the id
 *    after it returns).  Iteration kinds vary what is in flight when the id
 *    is destroyed: a full connection, a disconnect whose DISCONNECTED event
 *    is not waited for, a route resolution not waited for, a bare id.
 *  - a watchdog ends the process with a message naming every thread's
 *    current operation if the run is not over after the time bound plus a
 *    margin, so a hang is a clear failure.
 *
 * stdout is deterministic ("threads=16 ok" ...), counts go to stderr.
 *
 *   stress_cm [-t threads] [-s seconds] [-p port] [-a addr] [-m margin]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include "common.h"

#define MAXT 64
#define EV_WAIT_MS 15000	/* one event of a worker (TCG is slow) */

static int nthreads = 16, seconds = 20, margin = 90, port;
static const char *addr = "192.0.2.1";
static struct sockaddr_in dst;
static atomic_int stop, failed, hung;
static struct timespec t0;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
}

struct worker {
	int idx;
	int sync;			/* NULL channel */
	pthread_t th;
	const char *_Atomic op;	/* what the thread is doing (for the watchdog) */
	/* mailbox (shared-channel workers): events of the current id */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rdma_cm_id *cur;
	int evq[16], evn;
	/* counts */
	long iters, connects, kinds[4], errors;
	atomic_int done;
};

static struct worker W[MAXT];
static pthread_t ev_th, lis_th;
static struct rdma_event_channel *shared;
static const char *_Atomic ev_op = "start", *_Atomic lis_op = "start";
static atomic_long ev_count, ev_stale, lis_accepts, lis_destroys, lis_errors;

static void fail(struct worker *w, const char *fmt, ...)
{
	char who[32];
	va_list ap;

	if (hung) {
		failed = 1;
		return;
	}
	snprintf(who, sizeof who, "%s%d", w ? "worker " : "main", w ? w->idx : 0);
	va_start(ap, fmt);
	vreport(now(), who, fmt, ap);
	va_end(ap);
	if (w)
		w->errors++;
	failed = 1;
}

/* ---- watchdog ---------------------------------------------------------- */


static void dump(const char *who, int i, pthread_t th)
{
	fprintf(stderr, "--- stack of %s %d:\n", who, i);
	pthread_kill(th, SIGUSR1);
	usleep(300000);
}

static void *watchdog(void *arg)
{
	(void)arg;
	while (now() < seconds + margin)
		sleep(1);
	hung = 1;
	flockfile(stderr);
	fprintf(stderr, "WATCHDOG: not finished %d s after the %d s bound; threads:\n", margin, seconds);
	fprintf(stderr, "  listener: %s\n  event thread: %s\n", lis_op, ev_op);
	for (int i = 0; i < nthreads; i++)
		fprintf(stderr, "  worker %d (%s): %s\n", i, W[i].sync ? "sync" : "shared", W[i].done ? "done" : W[i].op);
	funlockfile(stderr);
	dump("listener", 0, lis_th);
	dump("event thread", 0, ev_th);
	for (int i = 0; i < nthreads; i++)
		if (!W[i].done)
			dump("worker", i, W[i].th);
	printf("HANG (watchdog)\n");
	fflush(stdout);
	fflush(stderr);
	_exit(3);
	return NULL;
}

/* ---- event thread (shared channel) ------------------------------------- */

static atomic_int ev_stop;

static void *event_thread(void *arg)
{
	unsigned seed = 1;

	(void)arg;
	while (!ev_stop) {
		struct pollfd p = { .fd = shared->fd, .events = POLLIN };
		struct rdma_cm_event *e;

		ev_op = "poll";
		if (poll(&p, 1, 100) <= 0)
			continue;
		ev_op = "rdma_get_cm_event";
		if (rdma_get_cm_event(shared, &e)) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			fail(NULL, "event thread: rdma_get_cm_event: %s", strerror(errno));
			break;
		}
		ev_count++;
		struct worker *w = e->id->context;
		int delivered = 0;

		ev_op = "deliver";
		pthread_mutex_lock(&w->mu);
		if (w->cur == e->id && w->evn < 16) {
			w->evq[w->evn++] = e->event;
			delivered = 1;
			pthread_cond_signal(&w->cv);
		}
		pthread_mutex_unlock(&w->mu);
		if (!delivered)
			ev_stale++;
		/* the owner may be in rdma_destroy_id(e->id) by now: it must wait for this
		 * ack; every other event is acked late, to widen that window */
		if (delivered && (rand_r(&seed) & 1))
			usleep(rand_r(&seed) % 500);
		ev_op = "rdma_ack_cm_event";
		if (rdma_ack_cm_event(e))
			fail(NULL, "event thread: rdma_ack_cm_event: %s", strerror(errno));
	}
	ev_op = "done";
	return NULL;
}

/* Waits for the next event of w's current id (shared channel); -1 on timeout. */
static int wait_event(struct worker *w)
{
	struct timespec ts;
	int ev = -1;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += EV_WAIT_MS / 1000;
	pthread_mutex_lock(&w->mu);
	while (!w->evn)
		if (pthread_cond_timedwait(&w->cv, &w->mu, &ts))
			break;
	if (w->evn) {
		ev = w->evq[0];
		memmove(w->evq, w->evq + 1, --w->evn * sizeof w->evq[0]);
	}
	pthread_mutex_unlock(&w->mu);
	return ev;
}

static int expect(struct worker *w, int want, const char *what)
{
	int ev = wait_event(w);

	if (ev != want) {
		if (ev < 0)
			fail(w, "%s: no event within %d ms (want %s)", what, EV_WAIT_MS, rdma_event_str(want));
		else
			fail(w, "%s: event %s (want %s)", what, rdma_event_str(ev), rdma_event_str(want));
		return -1;
	}
	return 0;
}

static void set_cur(struct worker *w, struct rdma_cm_id *id)
{
	pthread_mutex_lock(&w->mu);
	w->cur = id;
	w->evn = 0;
	pthread_mutex_unlock(&w->mu);
}

/* ---- workers ------------------------------------------------------------ */

static struct ibv_qp_init_attr qp_attr(void)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof a);
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 2;
	a.cap.max_recv_wr = 2;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	return a;
}

static int setop(struct worker *w, const char *op)
{
	w->op = op;
	return 0;
}

static int check(struct worker *w, const char *name, int ret)
{
	if (ret) {
		fail(w, "%s: %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

#define CALL(w, name, expr) (setop(w, name) || check(w, name, (expr)))

/*
 * One iteration; kind:
 *  0  connect, disconnect, wait for DISCONNECTED, destroy
 *  1  connect, disconnect, destroy at once (async: DISCONNECTED not waited for)
 *  2  resolve address, start route resolution, destroy at once
 *  3  create and destroy a bare id
 */
static void iteration(struct worker *w, int kind)
{
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr qa = qp_attr();
	struct rdma_conn_param cp;

	if (CALL(w, "rdma_create_id", rdma_create_id(w->sync ? NULL : shared, &id, w, RDMA_PS_TCP)))
		return;
	if (!w->sync)
		set_cur(w, id);
	if (kind == 3)
		goto destroy;
	if (CALL(w, "rdma_resolve_addr", rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 5000)))
		goto destroy;
	if (!w->sync && (setop(w, "wait ADDR_RESOLVED") || expect(w, RDMA_CM_EVENT_ADDR_RESOLVED, "resolve_addr")))
		goto destroy;
	if (CALL(w, "rdma_resolve_route", rdma_resolve_route(id, 5000)))
		goto destroy;
	if (kind == 2)
		goto destroy;
	if (!w->sync && (setop(w, "wait ROUTE_RESOLVED") || expect(w, RDMA_CM_EVENT_ROUTE_RESOLVED, "resolve_route")))
		goto destroy;
	if (CALL(w, "rdma_create_qp", rdma_create_qp(id, NULL, &qa)))
		goto destroy;
	memset(&cp, 0, sizeof cp);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (CALL(w, "rdma_connect", rdma_connect(id, &cp)))
		goto destroy_qp;
	if (!w->sync && (setop(w, "wait ESTABLISHED") || expect(w, RDMA_CM_EVENT_ESTABLISHED, "connect")))
		goto destroy_qp;
	w->connects++;
	if (CALL(w, "rdma_disconnect", rdma_disconnect(id)))
		goto destroy_qp;
	if (!w->sync && kind == 0) {
		w->op = "wait DISCONNECTED";
		expect(w, RDMA_CM_EVENT_DISCONNECTED, "disconnect");
	}
destroy_qp:
	w->op = "rdma_destroy_qp";
	rdma_destroy_qp(id);
destroy:
	/* the event thread may hold an unacked event of this id right now */
	if (!w->sync)
		set_cur(w, NULL);
	(void)CALL(w, "rdma_destroy_id", rdma_destroy_id(id));
	w->kinds[kind]++;
}

static void *worker(void *arg)
{
	struct worker *w = arg;
	/* mostly full connections; the other kinds interleaved */
	static const int kinds[] = { 0, 1, 0, 2, 1, 3 };

	for (long i = 0; !stop && !failed; i++) {
		iteration(w, kinds[(i + w->idx) % 6]);
		w->iters++;
		if (now() >= seconds)
			break;
	}
	w->op = "done";
	w->done = 1;
	return NULL;
}

/* ---- listener ----------------------------------------------------------- */

static struct rdma_cm_id *conns[4096];
static atomic_int nconns;

static void conn_add(struct rdma_cm_id *id)
{
	if (nconns < 4096)
		conns[nconns++] = id;
}

static int conn_del(struct rdma_cm_id *id)
{
	for (int i = 0; i < nconns; i++)
		if (conns[i] == id) {
			conns[i] = conns[--nconns];
			return 1;
		}
	return 0;
}

static void server_destroy(struct rdma_cm_id *id)
{
	if (!conn_del(id))
		return;
	lis_op = "rdma_destroy_qp(server)";
	rdma_destroy_qp(id);
	lis_op = "rdma_destroy_id(server)";
	if (rdma_destroy_id(id))
		fail(NULL, "listener: rdma_destroy_id: %s", strerror(errno));
	lis_destroys++;
}

static atomic_int lis_stop;
static struct rdma_event_channel *lch;
static struct rdma_cm_id *lid;

static void *listener(void *arg)
{
	(void)arg;
	while (!lis_stop) {
		struct pollfd p = { .fd = lch->fd, .events = POLLIN };
		struct rdma_cm_event *e;

		lis_op = "poll";
		if (poll(&p, 1, 100) <= 0)
			continue;
		lis_op = "rdma_get_cm_event";
		if (rdma_get_cm_event(lch, &e)) {
			fail(NULL, "listener: rdma_get_cm_event: %s", strerror(errno));
			break;
		}
		struct rdma_cm_id *id = e->id;
		int ev = e->event, destroy = 0;

		switch (ev) {
		case RDMA_CM_EVENT_CONNECT_REQUEST: {
			struct ibv_qp_init_attr qa = qp_attr();
			struct rdma_conn_param cp;

			conn_add(id);
			memset(&cp, 0, sizeof cp);
			cp.responder_resources = 1;
			cp.initiator_depth = 1;
			cp.rnr_retry_count = 7;
			lis_op = "rdma_create_qp(server)";
			if (rdma_create_qp(id, NULL, &qa)) {
				fail(NULL, "listener: rdma_create_qp: %s", strerror(errno));
				destroy = 1;
				break;
			}
			lis_op = "rdma_accept";
			if (rdma_accept(id, &cp)) {
				fail(NULL, "listener: rdma_accept: %s", strerror(errno));
				destroy = 1;
				break;
			}
			lis_accepts++;
			break;
		}
		case RDMA_CM_EVENT_ESTABLISHED:
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			destroy = 1;
			break;
		default:
			/* CONNECT_ERROR, UNREACHABLE, REJECTED ...: the client gave up */
			lis_errors++;
			flockfile(stderr);
			fprintf(stderr, "[%7.2f] listener: event %s status %d\n", now(), rdma_event_str(ev), e->status);
			funlockfile(stderr);
			destroy = id != lid;
			break;
		}
		lis_op = "rdma_ack_cm_event(listener)";
		rdma_ack_cm_event(e);
		if (destroy)
			server_destroy(id);
	}
	lis_op = "done";
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t wd;
	struct sockaddr_in la;
	int c;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	port = 24000 + getpid() % 1000;
	while ((c = getopt(argc, argv, "t:s:p:a:m:")) != -1) {
		switch (c) {
		case 't': nthreads = atoi(optarg); break;
		case 's': seconds = atoi(optarg); break;
		case 'p': port = atoi(optarg); break;
		case 'a': addr = optarg; break;
		case 'm': margin = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: stress_cm [-t threads] [-s seconds] [-p port] [-a addr] [-m margin]\n");
			return 2;
		}
	}
	if (nthreads < 1 || nthreads > MAXT)
		nthreads = 16;
	setvbuf(stdout, NULL, _IOLBF, 0);
	stacks_on_sigusr1();
	pthread_create(&wd, NULL, watchdog, NULL);

	memset(&dst, 0, sizeof dst);
	dst.sin_family = AF_INET;
	dst.sin_port = htons(port);
	inet_pton(AF_INET, addr, &dst.sin_addr);
	la = dst;

	lch = rdma_create_event_channel();
	shared = rdma_create_event_channel();
	if (!lch || !shared || rdma_create_id(lch, &lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(lid, (struct sockaddr *)&la) || rdma_listen(lid, 128)) {
		printf("setup failed: %s\n", strerror(errno));
		return 1;
	}
	pthread_create(&lis_th, NULL, listener, NULL);
	pthread_create(&ev_th, NULL, event_thread, NULL);
	for (int i = 0; i < nthreads; i++) {
		W[i].idx = i;
		W[i].sync = i & 1;
		W[i].op = "start";
		pthread_mutex_init(&W[i].mu, NULL);
		pthread_cond_init(&W[i].cv, NULL);
		pthread_create(&W[i].th, NULL, worker, &W[i]);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(W[i].th, NULL);
	ev_stop = 1;
	pthread_join(ev_th, NULL);
	/* the listener drains the disconnections still under way (bounded) */
	for (double t = now(); nconns && now() < t + 30;)
		usleep(100000);
	lis_stop = 1;
	pthread_join(lis_th, NULL);
	int left = nconns;

	while (nconns)
		server_destroy(conns[0]);
	if (rdma_destroy_id(lid))
		fail(NULL, "rdma_destroy_id(listener): %s", strerror(errno));
	rdma_destroy_event_channel(shared);
	rdma_destroy_event_channel(lch);

	long it = 0, co = 0, er = 0, k[4] = { 0 };

	for (int i = 0; i < nthreads; i++) {
		it += W[i].iters;
		co += W[i].connects;
		er += W[i].errors;
		for (int j = 0; j < 4; j++)
			k[j] += W[i].kinds[j];
	}
	fprintf(stderr, "%.1f s: iterations=%ld connections=%ld kinds=%ld/%ld/%ld/%ld errors=%ld "
		"shared-channel events=%ld (to a destroyed/next id: %ld) server accepts=%ld destroys=%ld "
		"server error events=%ld server ids left after 30 s=%d\n",
		now(), it, co, k[0], k[1], k[2], k[3], er, (long)ev_count, (long)ev_stale,
		(long)lis_accepts, (long)lis_destroys, (long)lis_errors, left);
	if (it < nthreads) {
		fail(NULL, "fewer iterations than threads");
	}
	while (hung)
		pause();	/* the watchdog is dumping stacks; it ends the process */
	if (failed) {
		printf("threads=%d FAILED\n", nthreads);
		return 1;
	}
	printf("threads=%d ok\n", nthreads);
	return 0;
}
