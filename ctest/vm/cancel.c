/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * cancel - how C threads end inside the library: pthread_cancel of a thread blocked
 * in each blocking call of librdmacm and of rsockets, a cancel already pending when a thread
 * enters a call, pthread_exit from a signal handler, exit() with threads blocked, and the
 * blocking calls of librspreload (recv, accept, poll on a socket it made an rsocket).
 *
 * Over 800 lines: a case per blocking call of librdmacm, rsockets and librspreload, each
 * a few lines around the runner in cancel.h, kept in one program so that the VM test runs
 * one binary and compares one transcript.
 *
 *   cancel [-n N] [-k LIST] [-K LIST] case...      (cancel.h: the runner, options, output)
 *
 * Everything runs in this process over rxe0 (192.0.2.1, loopback); 192.0.2.100-130 are on the
 * veth subnet and nobody answers ARP for them (a resolution that blocks).  Each case:
 *  - a thread is started in the call and the test waits until it sleeps there (state S for
 *    100 ms, no progress), then cancels it and joins it (5 s): "canceled" is PTHREAD_CANCELED;
 *    "the call returned" means the call came back instead (the cancel was not acted on in it);
 *  - what the thread used is closed or destroyed, and the library is used again: where it is
 *    meaningful the same channel / listener / socket (an event to another thread, a new
 *    connection accepted, data received), otherwise a new id or socket doing the same thing;
 *  - N more runs, then the growth of /proc/self/fd and /proc/self/task (must be +0).
 * Blocking situations:
 *   get_cm_event    rdma_get_cm_event on a channel without events (a second thread waits on
 *                   the channel too and must get the next event)
 *   resolve_addr    synchronous rdma_resolve_addr to an address nobody answers (5000 ms)
 *   create_ep       rdma_create_ep to such an address (its synchronous resolution)
 *   connect         synchronous rdma_connect to a listener that never answers the request
 *   get_request     rdma_get_request on a synchronous listener nobody connects to
 *   accept          synchronous rdma_accept of a request whose peer never establishes (no RTU)
 *   disconnect      synchronous rdma_disconnect whose peer never answers the DREQ
 *   raccept         raccept on a listener nobody connects to
 *   rconnect        rconnect to an rdma_cm listener that never answers the request
 *   rrecv           rrecv on a connected socket without data
 *   rsend           rsend until the peer's buffer is full (the peer never reads)
 *   riowrite        riowrite to the peer's riomap'ed buffer once the peer's receive buffer is
 *                   full (rsend MSG_DONTWAIT until no POLLOUT): it waits for send credits
 *   rpoll rselect repoll_wait   POLLIN on a connected socket without data, no timeout
 *   getaddrinfo_dns rdma_getaddrinfo of a name whose DNS answer takes 2 s (the suite's name
 *                   server), then pthread_testcancel
 * Pending cancels (the cancel is pending when the thread enters the call; then
 * pthread_testcancel): pend_channel pend_create_id pend_bind pend_destroy_id pend_init_qp_attr
 * pend_resolve_addr pend_disconnect pend_getaddrinfo pend_rsocket, with the library used once before; pend_first_channel pend_first_getaddrinfo
 * pend_first_rsocket: the thread's call is the process's first (the library's initialization).
 * The thread must end canceled; whether the call itself returned goes to stderr (upstream acts
 * on the cancel at the first open/read/write inside; ours is to complete the call and end at
 * the next cancellation point: with RDMACM_VARIANT=ours a call canceled inside fails the case).
 * sig_exit: a SIGUSR1 handler calls pthread_exit(42) in a thread blocked in rdma_get_cm_event.
 * exit: exit(0) with threads blocked in rdma_get_cm_event and rrecv and a listening rsocket.
 * pl_accept pl_recv pl_poll: accept/recv/poll under LD_PRELOAD=librspreload (the suite sets
 * it); no TCP connection may be opened (/proc/net/snmp).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include "cancel.h"
#include "common.h"

#define ADDR "192.0.2.1"

static struct sockaddr_in sa4(const char *ip, int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}
#define SA(x) ((struct sockaddr *)&(x))

/* appends "; "-separated text to out */
static void addf(char *o, size_t n, const char *fmt, ...)
{
	size_t l = strlen(o);
	if (l && l + 2 < n)
		strcpy(o + l, "; "), l += 2;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(o + l, n - l, fmt, ap);
	va_end(ap);
}
/* appends WHAT (ok) or "WHAT: failed (ERRNO)"; returns ok */
static int chk(char *o, size_t n, int ok, const char *what)
{
	int e = errno;
	if (ok)
		addf(o, n, "%s", what);
	else
		addf(o, n, "%s: failed (%s)", what, en(e));
	return ok;
}

/* ---- the thread under test ---- */
struct victim {
	pthread_t th;
	volatile pid_t tid;
	volatile long progress;
	void *(*fn)(struct victim *);
	void *arg;
	volatile int ret, err;	/* the call's return and errno, when it returned */
};
static void *victim_main(void *a)
{
	struct victim *v = a;
	v->tid = gettid();
	return v->fn(v);
}
static char tstate(pid_t tid)
{
	char p[64], b[512];
	snprintf(p, sizeof p, "/proc/self/task/%d/stat", tid);
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t r = read(fd, b, sizeof b - 1);
	close(fd);
	if (r <= 0)
		return 0;
	b[r] = 0;
	char *e = strrchr(b, ')');
	return e && e[1] == ' ' ? e[2] : 0;
}
/* starts the thread and waits until it sleeps in its call (state S for 100 ms with no
 * progress); appends the reason and returns 0 when it did not (it returned, or kept running) */
static int start_blocked(struct victim *v, char *o, size_t n)
{
	step("the thread enters the call");
	if (pthread_create(&v->th, NULL, victim_main, v))
		return chk(o, n, 0, "pthread_create");
	for (int i = 0; i < 1000 && !v->tid; i++)
		usleep(1000);
	long last = v->progress;
	int stable = 0;
	for (int t = 0; t < 4000; t += 5) {
		usleep(5000);
		char st = tstate(v->tid);
		if (!st || st == 'Z' || st == 'X') {
			pthread_join(v->th, NULL);
			addf(o, n, "the call returned %d (%s) before the cancel", v->ret, en(v->err));
			return 0;
		}
		long p = v->progress;
		stable = st == 'S' && p == last ? stable + 1 : 0;
		last = p;
		if (stable >= 20)
			return 1;
	}
	addf(o, n, "the thread kept running in the call for 4 s (never slept)");
	return 0;
}
/* cancels (sig 0), signals (sig > 0) or only joins (sig < 0) the thread, within 5 s; appends how it ended; returns 1
 * when it ended with WANT, 0 otherwise, -1 when it did not end (the case must stop) */
static int end_thread(struct victim *v, char *o, size_t n, int sig, void *want)
{
	struct timespec ts;
	void *r;
	step("%s the thread", sig > 0 ? "signal" : sig < 0 ? "join" : "cancel");
	if (sig > 0)
		pthread_kill(v->th, sig);
	else if (!sig)
		pthread_cancel(v->th);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	if (pthread_timedjoin_np(v->th, &r, &ts)) {
		addf(o, n, "the thread did not end within 5 s");
		return -1;
	}
	if (r == PTHREAD_CANCELED)
		addf(o, n, "canceled");
	else if (r == (void *)1)
		addf(o, n, "the call returned %d (%s)", v->ret, en(v->err));
	else
		addf(o, n, "the thread ended with %ld", (long)(intptr_t)r);
	return r == want;
}
static int cancel_thread(struct victim *v, char *o, size_t n)
{
	return end_thread(v, o, n, 0, PTHREAD_CANCELED);
}
/* start_blocked, then cancel_thread: -1 when the thread did not block or did not end */
static int block_cancel(struct victim *v, char *o, size_t n)
{
	return start_blocked(v, o, n) ? cancel_thread(v, o, n) : -1;
}
#define RET(v, x) do { int r_ = (x); (v)->err = r_ < 0 ? errno : 0; (v)->ret = r_; } while (0)

/* ---- librdmacm helpers ---- */
static int join5(pthread_t t)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	return pthread_timedjoin_np(t, NULL, &ts);
}
/* Connections carry no QP; each end announces a QP number of its own (the IB CM rejects a
 * REP whose QP number and device match a connection it knows: STALE_CONN; both ends of these
 * connections are on rxe0) */
static struct rdma_conn_param cparam(void)
{
	static unsigned qpn;
	struct rdma_conn_param c = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
				     .rnr_retry_count = 7 };
	c.qp_num = ((unsigned)(getpid() & 0x3fff) << 10 | (++qpn & 0x3ff)) & 0xffffff;
	return c;
}
/* the next event of ch within ms, or NULL */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	if (poll(&p, 1, ms) != 1 || rdma_get_cm_event(ch, &e))
		return NULL;
	return e;
}
static void *t_get_event(struct victim *v)
{
	struct rdma_cm_event *e;
	RET(v, rdma_get_cm_event(v->arg, &e));
	if (v->ret == 0) {
		v->ret = e->event;
		rdma_ack_cm_event(e);
	}
	return (void *)1;
}
/* the channel still delivers: another thread blocked in rdma_get_cm_event gets the event of
 * an address resolution on a new id */
static int chan_works(struct rdma_event_channel *ch, char *o, size_t n)
{
	struct victim r = { .fn = t_get_event, .arg = ch, .ret = -1 };
	struct rdma_cm_id *id;
	struct sockaddr_in d = sa4(ADDR, 7);
	struct timespec ts;
	void *x;
	step("the channel: another thread waits for an event");
	if (pthread_create(&r.th, NULL, victim_main, &r))
		return chk(o, n, 0, "pthread_create");
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return chk(o, n, 0, "rdma_create_id on the channel");
	if (rdma_resolve_addr(id, NULL, SA(d), 2000))
		return chk(o, n, 0, "rdma_resolve_addr on the channel");
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	if (pthread_timedjoin_np(r.th, &x, &ts)) {
		addf(o, n, "the channel delivered no event to another thread within 5 s");
		return 0;
	}
	int ok = r.ret == RDMA_CM_EVENT_ADDR_RESOLVED;
	if (ok)
		addf(o, n, "the channel delivers an event to another thread");
	else
		addf(o, n, "the channel gave another thread %d (%s)", r.ret, en(r.err));
	step("rdma_destroy_id of the channel's new id");
	return chk(o, n, !rdma_destroy_id(id), "its id destroyed") && ok;
}
/* a new synchronous id resolves 192.0.2.1 */
static int sync_works(char *o, size_t n)
{
	struct rdma_cm_id *id;
	struct sockaddr_in d = sa4(ADDR, 7);
	step("a new synchronous id resolves");
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return chk(o, n, 0, "a new synchronous id");
	int ok = !rdma_resolve_addr(id, NULL, SA(d), 2000);
	rdma_destroy_id(id);
	return chk(o, n, ok, "a new synchronous id resolves");
}
/* a synchronous listener on 192.0.2.1:port */
static struct rdma_cm_id *sync_listener(int port)
{
	struct rdma_cm_id *l;
	struct sockaddr_in a = sa4(ADDR, port);
	if (rdma_create_id(NULL, &l, NULL, RDMA_PS_TCP))
		return NULL;
	if (rdma_bind_addr(l, SA(a)) || rdma_listen(l, 8)) {
		rdma_destroy_id(l);
		return NULL;
	}
	return l;
}
struct cli {
	int port, establish, ret, err;
	struct rdma_cm_id *id;
};
/* a synchronous client: resolve, connect (no QP), and rdma_establish if asked */
static void *t_client(void *a)
{
	struct cli *c = a;
	struct sockaddr_in d = sa4(ADDR, c->port);
	struct rdma_conn_param cp = cparam();
	c->ret = -1;
	if (rdma_create_id(NULL, &c->id, NULL, RDMA_PS_TCP)) {
		c->err = errno, c->id = NULL;
		return NULL;
	}
	if (rdma_resolve_addr(c->id, NULL, SA(d), 2000) || rdma_resolve_route(c->id, 2000) ||
	    rdma_connect(c->id, &cp) || (c->establish && rdma_establish(c->id))) {
		c->err = errno;
		return NULL;
	}
	c->ret = 0;
	return NULL;
}
/* a connection accepted on the synchronous listener l: *cli the client, *srv the accepted id */
static int sync_conn(struct rdma_cm_id *l, int port, struct rdma_cm_id **cli, struct rdma_cm_id **srv)
{
	struct cli c = { .port = port, .establish = 1 };
	struct rdma_conn_param cp = cparam();
	pthread_t t;
	step("a connection on the listener");
	if (pthread_create(&t, NULL, t_client, &c))
		return -1;
	int r = rdma_get_request(l, srv);
	if (!r && (r = rdma_accept(*srv, &cp)))
		rdma_destroy_id(*srv);
	if (join5(t)) {
		errno = ETIMEDOUT;
		return -1;
	}
	if (c.ret && c.id)
		rdma_destroy_id(c.id);
	if (r || c.ret) {
		errno = r ? errno : c.err;
		if (!r)
			rdma_destroy_id(*srv);
		return -1;
	}
	*cli = c.id;
	return 0;
}
/* the listener accepts a new connection (both ids destroyed afterwards) */
static int conn_works(struct rdma_cm_id *l, int port, char *o, size_t n)
{
	struct rdma_cm_id *c, *s;
	if (sync_conn(l, port, &c, &s))
		return chk(o, n, 0, "the listener accepts a new connection");
	step("rdma_destroy_id of the new connection");
	rdma_destroy_id(c);
	rdma_destroy_id(s);
	return chk(o, n, 1, "the listener accepts a new connection");
}

/* ---- librdmacm cases ---- */
static int c_get_cm_event(char *o, size_t n, int it)
{
	(void)it;
	o[0] = 0;
	step("rdma_create_event_channel");
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch)
		return chk(o, n, 0, "rdma_create_event_channel");
	/* two threads wait on the channel; one is canceled, the other gets the next event */
	struct victim v = { .fn = t_get_event, .arg = ch }, w = { .fn = t_get_event, .arg = ch, .ret = -1 };
	if (!start_blocked(&v, o, n) || !start_blocked(&w, o, n))
		return 0;
	int ok = cancel_thread(&v, o, n);
	if (ok < 0)
		return 0;
	struct rdma_cm_id *id;
	struct sockaddr_in d = sa4(ADDR, 7);
	step("an event for the other waiting thread");
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) || rdma_resolve_addr(id, NULL, SA(d), 2000))
		return chk(o, n, 0, "an id resolving on the channel");
	if (join5(w.th)) {
		addf(o, n, "the other waiting thread got no event within 5 s");
		return 0;
	}
	ok &= w.ret == RDMA_CM_EVENT_ADDR_RESOLVED;
	addf(o, n, w.ret == RDMA_CM_EVENT_ADDR_RESOLVED ? "the other waiting thread got the event" : "the other waiting thread got %d (%s)",
	     w.ret, en(w.err));
	rdma_destroy_id(id);
	ok &= chan_works(ch, o, n);
	step("rdma_destroy_event_channel");
	rdma_destroy_event_channel(ch);
	addf(o, n, "the channel destroyed");
	return ok;
}

static void *t_resolve(struct victim *v)
{
	struct rdma_cm_id *id = v->arg;
	struct sockaddr_in d = sa4((char *)id->context, 7);
	RET(v, rdma_resolve_addr(id, NULL, SA(d), 5000));
	return (void *)1;
}
static int c_resolve_addr(char *o, size_t n, int it)
{
	char ip[32];
	struct rdma_cm_id *id;
	o[0] = 0;
	snprintf(ip, sizeof ip, "192.0.2.%d", 100 + it % 20);
	step("rdma_create_id (synchronous)");
	if (rdma_create_id(NULL, &id, ip, RDMA_PS_TCP))
		return chk(o, n, 0, "rdma_create_id");
	struct victim v = { .fn = t_resolve, .arg = id };
	int ok = block_cancel(&v, o, n);
	if (ok < 0)
		return 0;
	step("rdma_destroy_id of the id");
	ok &= chk(o, n, !rdma_destroy_id(id), "the id destroyed");
	ok &= sync_works(o, n);
	return ok;
}

static struct rdma_addrinfo *ep_res;
static void *t_create_ep(struct victim *v)
{
	struct rdma_cm_id *id;
	RET(v, rdma_create_ep(&id, ep_res, NULL, NULL));
	if (!v->ret)
		rdma_destroy_ep(id);
	return (void *)1;
}
static int c_create_ep(char *o, size_t n, int it)
{
	char ip[32];
	struct rdma_addrinfo h = { .ai_port_space = RDMA_PS_TCP };
	o[0] = 0;
	snprintf(ip, sizeof ip, "192.0.2.%d", 120 + it % 10);
	step("rdma_getaddrinfo");
	if (rdma_getaddrinfo(ip, "7", &h, &ep_res))
		return chk(o, n, 0, "rdma_getaddrinfo");
	struct victim v = { .fn = t_create_ep };
	int ok = block_cancel(&v, o, n);
	if (ok < 0)
		return 0;
	step("rdma_freeaddrinfo");
	rdma_freeaddrinfo(ep_res);
	ok &= sync_works(o, n);
	return ok;
}

static void *t_connect(struct victim *v)
{
	struct rdma_conn_param cp = cparam();
	RET(v, rdma_connect(v->arg, &cp));
	return (void *)1;
}
/* an rdma_cm listener on an event channel that is only read after the cancel */
struct raw_listener {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
};
static int raw_listen(struct raw_listener *r, int port)
{
	struct sockaddr_in a = sa4(ADDR, port);
	if (!(r->ch = rdma_create_event_channel()))
		return -1;
	if (rdma_create_id(r->ch, &r->id, NULL, RDMA_PS_TCP) || rdma_bind_addr(r->id, SA(a)) || rdma_listen(r->id, 8))
		return -1;
	return 0;
}
/* the request that waited at the raw listener is rejected; the listener destroyed */
static int raw_reject(struct raw_listener *r, char *o, size_t n)
{
	step("the waiting request rejected at the listener");
	struct rdma_cm_event *e = next_event(r->ch, 5000);
	int ok = e && e->event == RDMA_CM_EVENT_CONNECT_REQUEST;
	if (ok) {
		struct rdma_cm_id *c = e->id;
		rdma_reject(c, NULL, 0);
		rdma_ack_cm_event(e);
		rdma_destroy_id(c);
	} else if (e) {
		rdma_ack_cm_event(e);
	}
	chk(o, n, ok, "the listener got the request");
	rdma_destroy_id(r->id);
	rdma_destroy_event_channel(r->ch);
	return ok;
}
static struct rdma_cm_id *lis_connect;
static int c_connect(char *o, size_t n, int it)
{
	struct raw_listener r;
	struct rdma_cm_id *id;
	struct sockaddr_in d = sa4(ADDR, 7701);
	(void)it;
	o[0] = 0;
	step("listeners");
	if (raw_listen(&r, 7701))
		return chk(o, n, 0, "the listener that never answers");
	if (!lis_connect && !(lis_connect = sync_listener(7702)))
		return chk(o, n, 0, "a synchronous listener");
	step("rdma_create_id, resolve (synchronous)");
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) || rdma_resolve_addr(id, NULL, SA(d), 2000) ||
	    rdma_resolve_route(id, 2000))
		return chk(o, n, 0, "a resolved synchronous id");
	struct victim v = { .fn = t_connect, .arg = id };
	int ok = block_cancel(&v, o, n);
	if (ok < 0)
		return 0;
	step("rdma_destroy_id of the id");
	ok &= chk(o, n, !rdma_destroy_id(id), "the id destroyed");
	ok &= raw_reject(&r, o, n);
	ok &= conn_works(lis_connect, 7702, o, n);
	return ok;
}

static void *t_get_request(struct victim *v)
{
	struct rdma_cm_id *id;
	RET(v, rdma_get_request(v->arg, &id));
	if (!v->ret)
		rdma_destroy_id(id);
	return (void *)1;
}
static struct rdma_cm_id *lis_get_request;
static int c_get_request(char *o, size_t n, int it)
{
	(void)it;
	o[0] = 0;
	step("a synchronous listener");
	if (!lis_get_request && !(lis_get_request = sync_listener(7711)))
		return chk(o, n, 0, "a synchronous listener");
	struct victim v = { .fn = t_get_request, .arg = lis_get_request };
	int ok = block_cancel(&v, o, n);
	if (ok < 0)
		return 0;
	ok &= conn_works(lis_get_request, 7711, o, n);
	return ok;
}

static void *t_accept(struct victim *v)
{
	struct rdma_conn_param cp = cparam();
	RET(v, rdma_accept(v->arg, &cp));
	return (void *)1;
}
static struct rdma_cm_id *lis_accept;
static int c_accept(char *o, size_t n, int it)
{
	struct cli c = { .port = 7721, .establish = 0 };
	struct rdma_cm_id *req;
	pthread_t t;
	(void)it;
	o[0] = 0;
	step("a synchronous listener");
	if (!lis_accept && !(lis_accept = sync_listener(7721)))
		return chk(o, n, 0, "a synchronous listener");
	step("a request from a client that will not establish");
	if (pthread_create(&t, NULL, t_client, &c))
		return chk(o, n, 0, "pthread_create");
	if (rdma_get_request(lis_accept, &req))
		return chk(o, n, 0, "rdma_get_request");
	struct victim v = { .fn = t_accept, .arg = req };
	int ok = block_cancel(&v, o, n);
	if (ok < 0)
		return 0;
	step("the client's rdma_connect");
	if (join5(t) || c.ret)
		return chk(o, n, 0, "the client's rdma_connect");
	step("rdma_destroy_id of the request and the client");
	ok &= chk(o, n, !rdma_destroy_id(req), "the request's id destroyed");
	rdma_destroy_id(c.id);
	ok &= conn_works(lis_accept, 7721, o, n);
	return ok;
}

static void *t_disconnect(struct victim *v)
{
	RET(v, rdma_disconnect(v->arg));
	return (void *)1;
}
static struct rdma_cm_id *lis_disconnect;
static int c_disconnect(char *o, size_t n, int it)
{
	struct rdma_cm_id *c, *s;
	(void)it;
	o[0] = 0;
	step("a synchronous listener");
	if (!lis_disconnect && !(lis_disconnect = sync_listener(7731)))
		return chk(o, n, 0, "a synchronous listener");
	if (sync_conn(lis_disconnect, 7731, &c, &s))
		return chk(o, n, 0, "a connection");
	struct victim v = { .fn = t_disconnect, .arg = c };
	int ok = block_cancel(&v, o, n);
	if (ok < 0)
		return 0;
	step("rdma_destroy_id of both ends");
	ok &= chk(o, n, !rdma_destroy_id(c), "the id destroyed");
	rdma_destroy_id(s);
	ok &= conn_works(lis_disconnect, 7731, o, n);
	return ok;
}

/* ---- sockets: the rsocket calls, or libc's (the pl_* cases, run under LD_PRELOAD=librspreload,
 * which makes their sockets rsockets) ---- */
struct sockapi {
	int rdma;		/* the rsocket calls */
	const char *pfx;	/* "r" or "": the calls' names in the steps and lines */
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*close)(int);
};
/* (glibc declares these with transparent unions: plain prototypes for the table) */
static int l_bind(int s, const struct sockaddr *a, socklen_t l) { return bind(s, a, l); }
static int l_accept(int s, struct sockaddr *a, socklen_t *l) { return accept(s, a, l); }
static int l_connect(int s, const struct sockaddr *a, socklen_t l) { return connect(s, a, l); }
static const struct sockapi RS = { 1, "r", rsocket, rbind, rlisten, raccept, rconnect, rsend, rrecv, rpoll, rsetsockopt, rclose };
static const struct sockapi PL = { 0, "", socket, l_bind, listen, l_accept, l_connect, send, recv, poll, setsockopt, close };

static void sk_opts(const struct sockapi *a, int fd)
{
	int one = 1;
	a->setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (a->rdma)
		a->setsockopt(fd, SOL_RDMA, RDMA_IOMAPSIZE, &one, sizeof one);
}
static int listener(const struct sockapi *a, int port)
{
	struct sockaddr_in sa = sa4(ADDR, port);
	int l = a->socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		return -1;
	sk_opts(a, l);
	if (a->bind(l, SA(sa), sizeof sa) || a->listen(l, 8)) {
		int e = errno;
		a->close(l);
		errno = e;
		return -1;
	}
	return l;
}
struct scli {
	const struct sockapi *a;
	int port, fd, ret, err;
};
static void *t_sconnect(void *arg)
{
	struct scli *c = arg;
	struct sockaddr_in d = sa4(ADDR, c->port);
	c->ret = -1;
	if ((c->fd = c->a->socket(AF_INET, SOCK_STREAM, 0)) < 0) {
		c->err = errno;
		return NULL;
	}
	sk_opts(c->a, c->fd);
	if ((c->ret = c->a->connect(c->fd, SA(d), sizeof d)))
		c->err = errno;
	return NULL;
}
/* a connected pair through listener l on port: *c connecting end, *s accepted end */
static int sk_pair(const struct sockapi *a, int l, int port, int *c, int *s)
{
	struct scli cl = { .a = a, .port = port, .fd = -1 };
	pthread_t t;
	step("a connection (%s calls)", a->rdma ? "rsocket" : "preloaded socket");
	if (pthread_create(&t, NULL, t_sconnect, &cl))
		return -1;
	*s = a->accept(l, NULL, NULL);
	int e = errno;
	if (join5(t)) {
		errno = ETIMEDOUT;
		return -1;
	}
	if (*s < 0 || cl.ret) {
		if (cl.fd >= 0)
			a->close(cl.fd);
		if (*s >= 0)
			a->close(*s);
		errno = *s < 0 ? e : cl.err;
		return -1;
	}
	*c = cl.fd;
	return 0;
}
/* one byte from x to y */
static int xchg(const struct sockapi *a, int x, int y)
{
	char b = 'x';
	step("a byte over the connection");
	return a->send(x, &b, 1, 0) == 1 && a->recv(y, &b, 1, 0) == 1 && b == 'x';
}
/* the listener still works: a new connection, a byte over it, both closed */
static int works(const struct sockapi *a, int l, int port, const char *what, char *o, size_t n)
{
	int c, s;
	if (sk_pair(a, l, port, &c, &s))
		return chk(o, n, 0, what);
	int ok = xchg(a, c, s);
	step("%sclose of the new connection", a->pfx);
	ok &= !a->close(c) & !a->close(s);
	return chk(o, n, ok, what);
}
/* close of both ends of the pair the thread used */
static int close2(const struct sockapi *a, int x, int y, char *o, size_t n)
{
	step("%sclose of the socket the thread used", a->pfx);
	int ok = !a->close(x);
	step("%sclose of its peer", a->pfx);
	ok &= !a->close(y);
	return chk(o, n, ok, "both ends closed");
}
/* TCP connections opened in this network namespace so far (/proc/net/snmp) */
static int tcp_opens(void)
{
	FILE *f = fopen("/proc/net/snmp", "r");
	char h[1024], v[1024];
	int r = -1;
	if (!f)
		return -1;
	while (fgets(h, sizeof h, f) && fgets(v, sizeof v, f)) {
		if (strncmp(h, "Tcp:", 4))
			continue;
		char *hs, *vs, *ht = strtok_r(h, " \n", &hs), *vt = strtok_r(v, " \n", &vs);
		r = 0;
		while (ht && vt) {
			if (!strcmp(ht, "ActiveOpens") || !strcmp(ht, "PassiveOpens"))
				r += atoi(vt);
			ht = strtok_r(NULL, " \n", &hs);
			vt = strtok_r(NULL, " \n", &vs);
		}
		break;
	}
	fclose(f);
	return r;
}
/* libc's calls: only under librspreload, and no TCP connection may be opened meanwhile */
static int pl_begin(const struct sockapi *a, int *t0, char *o, size_t n)
{
	const char *p = getenv("LD_PRELOAD");
	*t0 = tcp_opens();
	if (a->rdma || (p && strstr(p, "librspreload")))
		return 1;
	addf(o, n, "not run under LD_PRELOAD=librspreload");
	return 0;
}
static int pl_end(const struct sockapi *a, int t0, char *o, size_t n)
{
	int t = tcp_opens() - t0;
	if (a->rdma || !t)
		return 1;
	addf(o, n, "%d TCP connection(s) opened: not over RDMA", t);
	return 0;
}

/* ---- socket cases ---- */
struct sockarg {
	const struct sockapi *a;
	int fd;
};
static void *t_sk_accept(struct victim *v)
{
	struct sockarg *x = v->arg;
	RET(v, x->a->accept(x->fd, NULL, NULL));
	if (v->ret >= 0)
		x->a->close(v->ret);
	return (void *)1;
}
/* the start every socket case shares: the preload check, the listener (made once per case and
 * kept across runs), and with c and s a connection on it (c the connecting end); 0 on failure */
static int sk_begin(const struct sockapi *a, int *lis, int port, int *t0, int *c, int *s, char *o, size_t n)
{
	o[0] = 0;
	if (!pl_begin(a, t0, o, n))
		return 0;
	step("%slisten", a->pfx);
	if (*lis < 0 && (*lis = listener(a, port)) < 0)
		return chk(o, n, 0, "listen");
	if (c && sk_pair(a, *lis, port, c, s))
		return chk(o, n, 0, "a connection");
	return 1;
}
static int accept_case(const struct sockapi *a, int *lis, int port, char *o, size_t n)
{
	int t0;
	if (!sk_begin(a, lis, port, &t0, NULL, NULL, o, n))
		return 0;
	struct sockarg x = { a, *lis };
	struct victim v = { .fn = t_sk_accept, .arg = &x };
	int ok = block_cancel(&v, o, n);
	if (ok < 0)
		return 0;
	ok &= works(a, *lis, port, "the same listener accepts a new connection", o, n);
	return ok & pl_end(a, t0, o, n);
}
static int lis_raccept = -1, lis_pl_accept = -1;
static int c_raccept(char *o, size_t n, int it) { (void)it; return accept_case(&RS, &lis_raccept, 7801, o, n); }
static int c_pl_accept(char *o, size_t n, int it) { (void)it; return accept_case(&PL, &lis_pl_accept, 7921, o, n); }

static void *t_rconnect(struct victim *v)
{
	struct sockaddr_in d = sa4(ADDR, 7811);
	RET(v, rconnect((int)(intptr_t)v->arg, SA(d), sizeof d));
	return (void *)1;
}
static int lis_rconnect = -1;
static int c_rconnect(char *o, size_t n, int it)
{
	struct raw_listener r;
	(void)it;
	o[0] = 0;
	step("listeners");
	if (raw_listen(&r, 7811))
		return chk(o, n, 0, "the listener that never answers");
	if (lis_rconnect < 0 && (lis_rconnect = listener(&RS, 7812)) < 0)
		return chk(o, n, 0, "rlisten");
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return chk(o, n, 0, "rsocket");
	struct victim v = { .fn = t_rconnect, .arg = (void *)(intptr_t)fd };
	int ok = block_cancel(&v, o, n);
	if (ok < 0)
		return 0;
	step("rclose of the socket the thread used");
	ok &= chk(o, n, !rclose(fd), "the socket closed");
	ok &= raw_reject(&r, o, n);
	ok &= works(&RS, lis_rconnect, 7812, "a new socket connects", o, n);
	return ok;
}

static void *t_sk_recv(struct victim *v)
{
	struct sockarg *x = v->arg;
	char b[16];
	RET(v, (int)x->a->recv(x->fd, b, sizeof b, 0));
	return (void *)1;
}
static int recv_case(const struct sockapi *a, int *lis, int port, char *o, size_t n)
{
	int c, s, t0;
	if (!sk_begin(a, lis, port, &t0, &c, &s, o, n))
		return 0;
	struct sockarg x = { a, s };
	struct victim v = { .fn = t_sk_recv, .arg = &x };
	int ok = block_cancel(&v, o, n);
	if (ok < 0)
		return 0;
	ok &= chk(o, n, xchg(a, c, s), "the same socket receives");
	ok &= close2(a, s, c, o, n);
	return ok & pl_end(a, t0, o, n);
}
static int lis_rrecv = -1, lis_pl_recv = -1;
static int c_rrecv(char *o, size_t n, int it) { (void)it; return recv_case(&RS, &lis_rrecv, 7821, o, n); }
static int c_pl_recv(char *o, size_t n, int it) { (void)it; return recv_case(&PL, &lis_pl_recv, 7922, o, n); }

static char big[65536];
static void *t_rsend(struct victim *v)
{
	int fd = (int)(intptr_t)v->arg;
	for (;;) {
		ssize_t r = rsend(fd, big, sizeof big, 0);
		if (r <= 0) {
			RET(v, (int)r);
			return (void *)1;
		}
		v->progress++;
	}
}
/* fills the peer's receive buffer: non-blocking rsend until POLLOUT stays away for 300 ms */
static int fill(int fd)
{
	step("fill the peer's receive buffer");
	for (int i = 0; i < 4096; i++) {
		if (rsend(fd, big, sizeof big, MSG_DONTWAIT) > 0)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int r = rpoll(&p, 1, 300);
		if (r == 0)
			return 0;
		if (r < 0)
			return -1;
	}
	errno = ENOBUFS;
	return -1;
}
static char iobuf[65536];
static void *t_riowrite(struct victim *v)
{
	int fd = (int)(intptr_t)v->arg;
	for (off_t off = 0;; off = (off + 4096) % (sizeof iobuf - 4096)) {
		size_t r = riowrite(fd, big, 4096, off, 0);
		if (r != 4096) {
			RET(v, (int)r);
			return (void *)1;
		}
		v->progress++;
	}
}
/* rsend (riow 0) or riowrite (riow 1) on a connection whose peer never reads */
static int writer_case(int riow, int *lis, int port, char *o, size_t n)
{
	int c, s;
	char x;
	o[0] = 0;
	step("rlisten");
	if (*lis < 0 && (*lis = listener(&RS, port)) < 0)
		return chk(o, n, 0, "rlisten");
	if (sk_pair(&RS, *lis, port, &c, &s))
		return chk(o, n, 0, "a connection");
	if (riow) {
		step("riomap on the receiver, its mapping sent");
		if (riomap(s, iobuf, sizeof iobuf, PROT_WRITE, 0, 0) != 0)
			return chk(o, n, 0, "riomap");
		if (rsend(s, "m", 1, 0) != 1 || rrecv(c, &x, 1, 0) != 1)
			return chk(o, n, 0, "the mapping sent");
		/* riowrite needs the same send credits as rsend: without room at the peer it waits */
		if (fill(c))
			return chk(o, n, 0, "the peer's buffer filled");
	}
	struct victim v = { .fn = riow ? t_riowrite : t_rsend, .arg = (void *)(intptr_t)c };
	int ok = block_cancel(&v, o, n);
	if (ok < 0)
		return 0;
	if (riow) {
		step("riounmap");
		riounmap(s, iobuf, sizeof iobuf);
	}
	ok &= close2(&RS, c, s, o, n);
	ok &= works(&RS, *lis, port, "a new connection carries data", o, n);
	return ok;
}
static int lis_rsend = -1, lis_riowrite = -1;
static int c_rsend(char *o, size_t n, int it) { (void)it; return writer_case(0, &lis_rsend, 7831, o, n); }
static int c_riowrite(char *o, size_t n, int it) { (void)it; return writer_case(1, &lis_riowrite, 7841, o, n); }

enum pollkind { K_POLL, K_RSELECT, K_REPOLL };
struct pollarg {
	const struct sockapi *a;
	int fd, ep;
	enum pollkind k;
};
static int poll_once(struct pollarg *p, int timeout)
{
	if (p->k == K_POLL) {
		struct pollfd f = { .fd = p->fd, .events = POLLIN };
		int r = p->a->poll(&f, 1, timeout);
		return r == 1 && (f.revents & POLLIN) ? 1 : r < 0 ? -1 : 0;
	} else if (p->k == K_RSELECT) {
		fd_set rs;
		struct timeval tv = { .tv_sec = timeout / 1000, .tv_usec = timeout % 1000 * 1000 };
		FD_ZERO(&rs);
		FD_SET(p->fd, &rs);
		int r = rselect(p->fd + 1, &rs, NULL, NULL, timeout < 0 ? NULL : &tv);
		return r == 1 && FD_ISSET(p->fd, &rs) ? 1 : r < 0 ? -1 : 0;
	} else {
		struct epoll_event e;
		int r = repoll_wait(p->ep, &e, 1, timeout);
		return r == 1 && (e.events & EPOLLIN) ? 1 : r < 0 ? -1 : 0;
	}
}
static void *t_poll(struct victim *v)
{
	RET(v, poll_once(v->arg, -1));
	return (void *)1;
}
static int poll_case(enum pollkind k, const struct sockapi *a, int *lis, int port, char *o, size_t n)
{
	int c, s, t0;
	char name[16];
	snprintf(name, sizeof name, "%s", k == K_POLL ? (a->rdma ? "rpoll" : "poll") : k == K_RSELECT ? "rselect" : "repoll_wait");
	if (!sk_begin(a, lis, port, &t0, &c, &s, o, n))
		return 0;
	struct pollarg p = { .a = a, .fd = s, .ep = -1, .k = k };
	if (k == K_REPOLL) {
		struct epoll_event e = { .events = EPOLLIN, .data.fd = s };
		step("repoll_create, repoll_ctl");
		if ((p.ep = repoll_create(1)) < 0 || repoll_ctl(p.ep, EPOLL_CTL_ADD, s, &e))
			return chk(o, n, 0, "repoll_create/repoll_ctl");
	}
	struct victim v = { .fn = t_poll, .arg = &p };
	int ok = block_cancel(&v, o, n);
	if (ok < 0)
		return 0;
	step("a byte to the socket");
	char x = 'y', what[64];
	if (a->send(c, &x, 1, 0) != 1)
		return chk(o, n, 0, "send to the socket");
	step("%s again on the same socket", name);
	snprintf(what, sizeof what, "%s again on the same socket sees POLLIN", name);
	ok &= chk(o, n, poll_once(&p, 5000) == 1, what);
	step("%srecv", a->pfx);
	ok &= chk(o, n, a->recv(s, &x, 1, 0) == 1 && x == 'y', "the byte received");
	if (p.ep >= 0) { /* (upstream's rclose of a set with members returns EBUSY) */
		step("repoll_ctl DEL, rclose of the repoll set");
		ok &= chk(o, n, !repoll_ctl(p.ep, EPOLL_CTL_DEL, s, NULL) && !rclose(p.ep), "the repoll set emptied and closed");
	}
	ok &= close2(a, s, c, o, n);
	return ok & pl_end(a, t0, o, n);
}
static int lis_poll[4] = { -1, -1, -1, -1 };
static int c_rpoll(char *o, size_t n, int it) { (void)it; return poll_case(K_POLL, &RS, &lis_poll[0], 7851, o, n); }
static int c_rselect(char *o, size_t n, int it) { (void)it; return poll_case(K_RSELECT, &RS, &lis_poll[1], 7852, o, n); }
static int c_repoll_wait(char *o, size_t n, int it) { (void)it; return poll_case(K_REPOLL, &RS, &lis_poll[2], 7853, o, n); }
static int c_pl_poll(char *o, size_t n, int it) { (void)it; return poll_case(K_POLL, &PL, &lis_poll[3], 7923, o, n); }

/* ---- pending cancels ---- */
static void pend_self(void)
{
	int old;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	pthread_cancel(pthread_self());
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
}
static volatile int pend_returned;
static void *volatile pend_obj;
static volatile int pend_ret = -1;
static struct rdma_event_channel *pend_ch;
static struct rdma_cm_id *pend_id;
/* the calls a thread makes with a cancel pending: each records what it returned */
static void p_channel(void)
{
	pend_obj = rdma_create_event_channel();
}
static void p_create_id(void)
{
	struct rdma_cm_id *id;
	pend_ret = rdma_create_id(pend_ch, &id, NULL, RDMA_PS_TCP);
	if (!pend_ret)
		pend_obj = id;
}
static void p_bind(void)
{
	struct sockaddr_in a = sa4(ADDR, 7901);
	pend_ret = rdma_bind_addr(pend_id, SA(a));
}
static void p_destroy_id(void)
{
	pend_ret = rdma_destroy_id(pend_id);
}
static void p_init_qp_attr(void)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_INIT };
	int mask;
	pend_ret = rdma_init_qp_attr(pend_id, &qa, &mask);
}
static void p_resolve_addr(void)
{
	struct sockaddr_in d = sa4(ADDR, 7904);
	pend_ret = rdma_resolve_addr(pend_id, NULL, SA(d), 2000);
}
static void p_disconnect(void)
{
	pend_ret = rdma_disconnect(pend_id);
}
static struct rdma_addrinfo *pend_rai;
static void p_getaddrinfo(void)
{
	struct rdma_addrinfo h = { .ai_port_space = RDMA_PS_TCP }, *res;
	pend_ret = rdma_getaddrinfo(ADDR, "7902", &h, &res);
	if (!pend_ret)
		pend_rai = res;
}
static void p_rsocket(void)
{
	pend_ret = rsocket(AF_INET, SOCK_STREAM, 0);
}
/* the thread: a cancel made pending, the call, then a cancellation point */
static void (*pend_call)(void);
static void *t_pend(struct victim *v)
{
	(void)v;
	pend_self();
	pend_call();
	pend_returned = 1;
	pthread_testcancel();
	return (void *)1;
}
static int pend_first = -1;
/* the library used once before (pend_X); pend_first_X: the thread's call is the first */
static void init_cm(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (ch)
		rdma_destroy_event_channel(ch);
}
static void init_rs(void)
{
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);
	if (fd >= 0)
		rclose(fd);
}
/* runs fn in a thread that has a cancel pending; appends how it ended; the call's return goes
 * to stderr (first run, and any run that differs from it) */
static int pend_run(const char *name, void (*call)(void), int it, char *o, size_t n)
{
	struct victim v = { .fn = t_pend };
	pend_call = call;
	pend_returned = 0;
	pend_obj = NULL;
	pend_rai = NULL;
	pend_ret = -1;
	step("a thread with a cancel pending enters the call");
	if (pthread_create(&v.th, NULL, victim_main, &v))
		return chk(o, n, 0, "pthread_create");
	int ok = end_thread(&v, o, n, -1, PTHREAD_CANCELED);
	if (ok < 0)
		return -1;
	if (it == 0 || pend_returned != pend_first)
		fprintf(stderr, "%s: run %d: the call %s\n", name, it + 1,
			pend_returned ? "returned, the thread ended at pthread_testcancel" : "did not return (canceled inside)");
	if (it == 0)
		pend_first = pend_returned;
	/* ours completes the call (no cancellation point acts inside the library): one that was
	 * canceled inside is a failure there (upstream's line would differ, so the runs differ) */
	const char *var = getenv("RDMACM_VARIANT");
	if (!pend_returned && var && !strcmp(var, "ours")) {
		addf(o, n, "the call did not return (ours: canceled inside the library)");
		ok = 0;
	}
	return ok;
}
static int pend_channel(const char *name, char *o, size_t n, int it)
{
	o[0] = 0;
	int ok = pend_run(name, p_channel, it, o, n);
	if (ok < 0)
		return 0;
	step("rdma_destroy_event_channel of what it made");
	if (pend_obj)
		rdma_destroy_event_channel(pend_obj);
	step("a new channel");
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch)
		return chk(o, n, 0, "a new channel");
	ok &= chan_works(ch, o, n);
	rdma_destroy_event_channel(ch);
	return ok;
}
static int c_pend_create_id(char *o, size_t n, int it)
{
	o[0] = 0;
	step("rdma_create_event_channel");
	if (!(pend_ch = rdma_create_event_channel()))
		return chk(o, n, 0, "rdma_create_event_channel");
	int ok = pend_run("pend_create_id", p_create_id, it, o, n);
	if (ok < 0)
		return 0;
	step("rdma_destroy_id of what it made");
	if (pend_obj)
		rdma_destroy_id(pend_obj);
	ok &= chan_works(pend_ch, o, n);
	rdma_destroy_event_channel(pend_ch);
	return ok;
}
/* binding a new id to 192.0.2.1:7901 works (the port is free again) */
static int bind_works(char *o, size_t n)
{
	struct rdma_cm_id *id;
	struct sockaddr_in a = sa4(ADDR, 7901);
	step("a new id binds the same port");
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return chk(o, n, 0, "a new id");
	int ok = !rdma_bind_addr(id, SA(a));
	rdma_destroy_id(id);
	return chk(o, n, ok, "a new id binds the same port");
}
/* pend_id: a new synchronous id, bound to 192.0.2.1:7901 with BIND; 0 when that failed */
static int new_pend_id(char *o, size_t n, int bind)
{
	struct sockaddr_in a = sa4(ADDR, 7901);
	o[0] = 0;
	step(bind ? "rdma_create_id, rdma_bind_addr" : "rdma_create_id");
	if (rdma_create_id(NULL, &pend_id, NULL, RDMA_PS_TCP))
		return chk(o, n, 0, bind ? "a bound id" : "rdma_create_id");
	if (bind && rdma_bind_addr(pend_id, SA(a)))
		return chk(o, n, 0, "a bound id");
	return 1;
}
/* CALL with a cancel pending on pend_id (new_pend_id), then the id destroyed and the port bound again */
static int pend_on_id(const char *name, void (*call)(void), int bind, char *o, size_t n, int it)
{
	if (!new_pend_id(o, n, bind))
		return 0;
	int ok = pend_run(name, call, it, o, n);
	if (ok < 0)
		return 0;
	step("rdma_destroy_id of the id");
	ok &= chk(o, n, !rdma_destroy_id(pend_id), "the id destroyed");
	ok &= bind_works(o, n);
	return ok;
}
static int c_pend_bind(char *o, size_t n, int it) { return pend_on_id("pend_bind", p_bind, 0, o, n, it); }
static int c_pend_destroy_id(char *o, size_t n, int it)
{
	if (!new_pend_id(o, n, 1))
		return 0;
	int ok = pend_run("pend_destroy_id", p_destroy_id, it, o, n);
	if (ok < 0)
		return 0;
	if (!pend_returned) { /* (not in the line: whether the call returned differs by design) */
		step("rdma_destroy_id again (the thread's did not return)");
		if (rdma_destroy_id(pend_id))
			ok = chk(o, n, 0, "destroyed by another thread");
	}
	ok &= bind_works(o, n);
	return ok;
}
/* rdma_init_qp_attr (INIT) of an id bound to the device's address */
static int c_pend_init_qp_attr(char *o, size_t n, int it)
{
	return pend_on_id("pend_init_qp_attr", p_init_qp_attr, 1, o, n, it);
}
/* rdma_resolve_addr on an asynchronous id (the command only: no wait), then the id and its
 * channel destroyed and a synchronous id's rdma_resolve_addr */
static int c_pend_resolve_addr(char *o, size_t n, int it)
{
	struct rdma_cm_id *id;
	struct sockaddr_in d = sa4(ADDR, 7904);
	o[0] = 0;
	step("rdma_create_event_channel, rdma_create_id");
	if (!(pend_ch = rdma_create_event_channel()) || rdma_create_id(pend_ch, &pend_id, NULL, RDMA_PS_TCP))
		return chk(o, n, 0, "an asynchronous id");
	int ok = pend_run("pend_resolve_addr", p_resolve_addr, it, o, n);
	if (ok < 0)
		return 0;
	step("rdma_destroy_id, rdma_destroy_event_channel");
	ok &= chk(o, n, !rdma_destroy_id(pend_id), "the id destroyed");
	rdma_destroy_event_channel(pend_ch);
	step("a synchronous id's rdma_resolve_addr");
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return chk(o, n, 0, "rdma_create_id");
	ok &= chk(o, n, !rdma_resolve_addr(id, NULL, SA(d), 2000), "rdma_resolve_addr works");
	rdma_destroy_id(id);
	return ok;
}
/* rdma_disconnect of a bound id with a QP (not connected: the kernel refuses the command, after
 * the QP's move to the error state, a verbs call) */
static int c_pend_disconnect(char *o, size_t n, int it)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	if (!new_pend_id(o, n, 1))
		return 0;
	step("rdma_create_qp");
	if (rdma_create_qp(pend_id, NULL, &a))
		return chk(o, n, 0, "rdma_create_qp");
	int ok = pend_run("pend_disconnect", p_disconnect, it, o, n);
	if (ok < 0)
		return 0;
	step("rdma_destroy_qp, rdma_destroy_id");
	rdma_destroy_qp(pend_id);
	ok &= chk(o, n, !rdma_destroy_id(pend_id), "the id destroyed");
	ok &= bind_works(o, n);
	return ok;
}
static int pend_getaddrinfo(const char *name, char *o, size_t n, int it)
{
	struct rdma_addrinfo h = { .ai_port_space = RDMA_PS_TCP }, *res;
	o[0] = 0;
	int ok = pend_run(name, p_getaddrinfo, it, o, n);
	if (ok < 0)
		return 0;
	step("rdma_freeaddrinfo of what it made");
	if (pend_rai)
		rdma_freeaddrinfo(pend_rai);
	step("rdma_getaddrinfo again");
	int r = rdma_getaddrinfo(ADDR, "7902", &h, &res);
	if (!r)
		rdma_freeaddrinfo(res);
	ok &= chk(o, n, !r, "rdma_getaddrinfo works");
	return ok;
}
static int lis_pend_rsocket = -1;
static int pend_rsocket(const char *name, char *o, size_t n, int it)
{
	o[0] = 0;
	int ok = pend_run(name, p_rsocket, it, o, n);
	if (ok < 0)
		return 0;
	step("rclose of what it made");
	if (pend_returned && pend_ret >= 0 && rclose(pend_ret))
		ok = chk(o, n, 0, "its socket closed");
	step("rlisten");
	if (lis_pend_rsocket < 0 && (lis_pend_rsocket = listener(&RS, 7903)) < 0)
		return chk(o, n, 0, "rlisten");
	ok &= works(&RS, lis_pend_rsocket, 7903, "a new connection carries data", o, n);
	return ok;
}

static int c_pend_channel(char *o, size_t n, int it)
{
	if (!it)
		init_cm();
	return pend_channel("pend_channel", o, n, it);
}
static int c_pend_first_channel(char *o, size_t n, int it) { return pend_channel("pend_first_channel", o, n, it); }
static int c_pend_getaddrinfo(char *o, size_t n, int it)
{
	if (!it)
		init_cm();
	return pend_getaddrinfo("pend_getaddrinfo", o, n, it);
}
static int c_pend_first_getaddrinfo(char *o, size_t n, int it)
{
	return pend_getaddrinfo("pend_first_getaddrinfo", o, n, it);
}
static int c_pend_rsocket(char *o, size_t n, int it)
{
	if (!it)
		init_rs();
	return pend_rsocket("pend_rsocket", o, n, it);
}
static int c_pend_first_rsocket(char *o, size_t n, int it) { return pend_rsocket("pend_first_rsocket", o, n, it); }

/* ---- a name lookup (DNS) in rdma_getaddrinfo: vm/suite.d/cancel.sh runs this case with a
 * name server that answers after 2 s.  The thread calls pthread_testcancel after the call, so
 * a library that lets the lookup finish first ends it canceled too; how long after the cancel
 * it ended goes to stderr. ---- */
static void *t_gai_dns(struct victim *v)
{
	struct rdma_addrinfo h = { .ai_port_space = RDMA_PS_TCP }, *res;
	RET(v, rdma_getaddrinfo("slow.cancel.test", "7471", &h, &res));
	if (!v->ret)
		rdma_freeaddrinfo(res);
	pthread_testcancel();
	return (void *)1;
}
static int c_getaddrinfo_dns(char *o, size_t n, int it)
{
	struct rdma_addrinfo h = { .ai_port_space = RDMA_PS_TCP }, *res;
	o[0] = 0;
	struct victim v = { .fn = t_gai_dns };
	if (!start_blocked(&v, o, n))
		return 0;
	double t0 = mono_s();
	int ok = cancel_thread(&v, o, n);
	if (ok < 0)
		return 0;
	if (it == 0)
		fprintf(stderr, "getaddrinfo_dns: the thread ended %.0f ms after the cancel\n", (mono_s() - t0) * 1e3);
	step("rdma_getaddrinfo of an address");
	int r = rdma_getaddrinfo(ADDR, "7471", &h, &res);
	if (!r)
		rdma_freeaddrinfo(res);
	ok &= chk(o, n, !r, "rdma_getaddrinfo works");
	return ok;
}

/* ---- pthread_exit from a signal handler ---- */
static void on_usr1(int sig)
{
	(void)sig;
	pthread_exit((void *)42);
}
static int c_sig_exit(char *o, size_t n, int it)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	(void)it;
	o[0] = 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	step("rdma_create_event_channel");
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch)
		return chk(o, n, 0, "rdma_create_event_channel");
	struct victim v = { .fn = t_get_event, .arg = ch };
	if (!start_blocked(&v, o, n))
		return 0;
	int ok = end_thread(&v, o, n, SIGUSR1, (void *)42);
	if (ok < 0)
		return 0;
	ok &= chan_works(ch, o, n);
	step("rdma_destroy_event_channel");
	rdma_destroy_event_channel(ch);
	addf(o, n, "the channel destroyed");
	return ok;
}

/* ---- exit() with threads blocked in the library ---- */
static int c_exit(char *o, size_t n, int it)
{
	(void)it;
	o[0] = 0;
	step("a process that exits with threads in the library");
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		int l, c, s;
		alarm(30);
		struct rdma_event_channel *ch = rdma_create_event_channel();
		struct sockarg x = { &RS, -1 };
		struct victim a = { .fn = t_get_event, .arg = ch }, b = { .fn = t_sk_recv, .arg = &x };
		char tmp[256] = "";
		if (!ch || (l = listener(&RS, 7911)) < 0 || sk_pair(&RS, l, 7911, &c, &s))
			_exit(10);
		x.fd = s;
		if (!start_blocked(&a, tmp, sizeof tmp) || !start_blocked(&b, tmp, sizeof tmp))
			_exit(11);
		alarm(30);
		sh->exit_at = mono_s();
		exit(0);
	}
	int st = 0, r = 0;
	for (int i = 0; i < 600 && !(r = waitpid(p, &st, WNOHANG)); i++) /* (within the step's 8 s) */
		usleep(10000);
	if (!r) {
		kill(p, SIGKILL);
		waitpid(p, &st, 0);
		addf(o, n, "the process still ran 6 s after it began (its exit(0) hangs)");
		return 0;
	}
	double took = sh->exit_at ? mono_s() - sh->exit_at : -1;
	if (WIFSIGNALED(st)) {
		addf(o, n, "killed by SIG%s", sigabbrev_np(WTERMSIG(st)));
		return 0;
	}
	if (WEXITSTATUS(st) != 0 || took < 0) {
		addf(o, n, "exit status %d (setup: 10 connection, 11 a thread did not block)", WEXITSTATUS(st));
		return 0;
	}
	fprintf(stderr, "exit: the process ended %.3f s after exit(0)\n", took);
	addf(o, n, "exit(0) with threads in rdma_get_cm_event and rrecv, a listening rsocket: status 0%s",
	     took < 3 ? " within 3 s" : " after more than 3 s");
	return took < 3;
}

static const struct ccase cases[] = {
	{ "get_cm_event", c_get_cm_event, 1 },
	{ "resolve_addr", c_resolve_addr, 1 },
	{ "create_ep", c_create_ep, 1 },
	{ "connect", c_connect, 1 },
	{ "get_request", c_get_request, 1 },
	{ "accept", c_accept, 1 },
	{ "disconnect", c_disconnect, 1 },
	{ "raccept", c_raccept, 1 },
	{ "rconnect", c_rconnect, 1 },
	{ "rrecv", c_rrecv, 1 },
	{ "rsend", c_rsend, 1 },
	{ "riowrite", c_riowrite, 1 },
	{ "rpoll", c_rpoll, 1 },
	{ "rselect", c_rselect, 1 },
	{ "repoll_wait", c_repoll_wait, 1 },
	{ "pend_channel", c_pend_channel, 1 },
	{ "pend_create_id", c_pend_create_id, 1 },
	{ "pend_bind", c_pend_bind, 1 },
	{ "pend_destroy_id", c_pend_destroy_id, 1 },
	{ "pend_init_qp_attr", c_pend_init_qp_attr, 1 },
	{ "pend_resolve_addr", c_pend_resolve_addr, 1 },
	{ "pend_disconnect", c_pend_disconnect, 1 },
	{ "pend_getaddrinfo", c_pend_getaddrinfo, 1 },
	{ "pend_rsocket", c_pend_rsocket, 1 },
	{ "pend_first_channel", c_pend_first_channel, 1 },
	{ "pend_first_getaddrinfo", c_pend_first_getaddrinfo, 1 },
	{ "pend_first_rsocket", c_pend_first_rsocket, 1 },
	{ "getaddrinfo_dns", c_getaddrinfo_dns, 1 },
	{ "sig_exit", c_sig_exit, 1 },
	{ "exit", c_exit, 0 },
	{ "pl_accept", c_pl_accept, 1 },
	{ "pl_recv", c_pl_recv, 1 },
	{ "pl_poll", c_pl_poll, 1 },
};

int main(int argc, char **argv)
{
	return run_cases(cases, sizeof cases / sizeof cases[0], argc, argv);
}
