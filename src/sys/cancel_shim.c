/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * Thread cancellation and pthread_exit() inside the library's blocking
 * waits (src/sys/cancel.rs says how the pieces fit; ARCHITECTURE.md why).
 *
 * glibc ends a cancelled thread, or one that calls pthread_exit() from a
 * signal handler, with a forced unwind.  Rust frames must not be unwound
 * that way (RFC 2945: undefined for frames with destructors or
 * catch_unwind), so a wait of ours never lets the unwind reach the Rust
 * code that called it: each wait registers a cancellation scope here, with
 * the same public entry points (__sigsetjmp, __pthread_register_cancel,
 * __pthread_unregister_cancel, __pthread_unwind_next) that <pthread.h>'s
 * pthread_cleanup_push() expands to in C code built without exceptions.
 * When the unwind reaches the scope, glibc jumps back into it, exactly as
 * it does to run a C cleanup handler.  Instead of handing the unwind on at
 * once, the wait keeps a copy of the scope and returns ECANCELED: the Rust
 * code unwinds its own stack by returning (locks released, registrations
 * undone, memory freed), and the exported function, once nothing of ours
 * is left on the stack but its own frame, hands the unwind on with
 * rdmacm_rs_cancel_resume().  The thread then ends as it would have in a
 * C library: pthread_join() sees PTHREAD_CANCELED (or the value given to
 * pthread_exit()), and the caller's own cleanup handlers run.
 *
 * Everything here is per thread, but for one process-wide count of threads
 * that hold a caught cancellation, so that the common case (none) costs the
 * exported functions one load.
 *
 * The library's code runs with cancellation disabled (rdmacm_rs_nocancel_*)
 * or makes no cancellation point at all; the waits below are the only
 * places where a cancellation is acted on, and they act on it in the state
 * the caller of the exported function had (enabled or disabled).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* Threads that caught a cancellation and have not handed it on yet. */
atomic_int rdmacm_rs_cancel_inflight;

struct cstate {
	int depth;	/* nested rdmacm_rs_nocancel_enter() */
	int outer;	/* the caller's cancel state, when depth > 0 */
	int caught;	/* a wait caught a cancellation or thread exit */
	int open;	/* inside a wait's window with cancellation enabled */
};

/* Read and written twice per exported call: the initial-exec model makes
 * each access one instruction instead of a call into the dynamic loader
 * (__tls_get_addr).  Sixteen bytes of the static TLS that glibc keeps
 * spare for libraries loaded by dlopen(). */
static __thread struct cstate cs __attribute__((tls_model("initial-exec")));
/* The scope a cancellation was caught in (used only then). */
static __thread __pthread_unwind_buf_t cs_resume;

/* Disables cancellation for the library's own work; returns the state to
 * give back to rdmacm_rs_nocancel_leave(). */
int rdmacm_rs_nocancel_enter(void)
{
	int old = PTHREAD_CANCEL_ENABLE;

	/* Inside a guard cancellation is disabled already (a wait enables it
	 * only for its own system call, and a signal handler that runs in
	 * that window takes the full path): no call into libc. */
	if (cs.depth > 0 && !cs.open) {
		cs.depth++;
		return PTHREAD_CANCEL_DISABLE;
	}
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	if (cs.depth++ == 0)
		cs.outer = old;
	return old;
}

void rdmacm_rs_nocancel_leave(int old)
{
	if (cs.depth > 0)
		cs.depth--;
	/* A caught cancellation keeps the thread uncancellable until it is
	 * handed on: nothing else may start another unwind meanwhile. */
	if (!cs.caught && old == PTHREAD_CANCEL_ENABLE)
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
}

/* The jump back into a scope: take the scope off the thread's list, keep
 * a copy for the resume, and make sure nothing acts on the cancellation
 * again while the Rust code returns. */
static void caught(__pthread_unwind_buf_t *buf)
{
	__pthread_unregister_cancel(buf);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	cs.open = 0;
	/* glibc before 2.41 switches to asynchronous cancellation inside
	 * its system call wrappers; the jump leaves it that way. */
	pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, NULL);
	memcpy(&cs_resume, buf, sizeof(*buf));
	if (!cs.caught) {
		cs.caught = 1;
		atomic_fetch_add(&rdmacm_rs_cancel_inflight, 1);
	}
}

/* Whether the wait may act on a cancellation: in the caller's state.
 * Inside rdmacm_rs_nocancel_enter() the library disabled it, so it is
 * enabled around the wait when the caller had it enabled; otherwise the
 * current state is the caller's. */
#define WAIT(call, type)						\
	do {								\
		__pthread_unwind_buf_t buf;				\
		int enable = cs.depth > 0 &&				\
			     cs.outer == PTHREAD_CANCEL_ENABLE;		\
		type r;							\
		if (cs.caught) {					\
			errno = ECANCELED;				\
			return -1;					\
		}							\
		if (__builtin_expect(__sigsetjmp_cancel(buf.__cancel_jmp_buf, 0), 0)) { \
			caught(&buf);					\
			errno = ECANCELED;				\
			return -1;					\
		}							\
		__pthread_register_cancel(&buf);			\
		if (enable) {						\
			cs.open = 1;					\
			pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL); \
		}							\
		r = call;						\
		/* (neither call below sets errno: a failure's stays) */ \
		if (enable) {						\
			pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL); \
			cs.open = 0;					\
		}							\
		__pthread_unregister_cancel(&buf);			\
		return r;						\
	} while (0)

/* poll(2) as a cancellation point of ours: -1/ECANCELED when the thread
 * was cancelled (or left by pthread_exit from a signal handler) in it. */
int rdmacm_rs_wait_poll(struct pollfd *fds, nfds_t n, int timeout)
{
	WAIT(poll(fds, n, timeout), int);
}

/* write(2) that may block in the kernel (the ucma device's GET_EVENT). */
ssize_t rdmacm_rs_wait_write(int fd, const void *b, size_t len)
{
	WAIT(write(fd, b, len), ssize_t);
}

/* A blocking read of a verbs completion channel (ibv_get_cq_event, which
 * returns -1 and sets errno on failure) as a cancellation point of ours.
 * The unwind of a cancellation in it passes through libibverbs' C frames
 * to the scope here.  The event's CQ and context are not needed: each
 * channel of ours serves one CQ. */
int rdmacm_rs_wait_cq_event(struct ibv_comp_channel *ch)
{
	struct ibv_cq *cq;
	void *ctx;

	WAIT(ibv_get_cq_event(ch, &cq, &ctx), int);
}

/* Whether this thread caught a cancellation that is still to be handed on. */
int rdmacm_rs_cancel_caught(void)
{
	return cs.caught;
}

/* Hands the caught cancellation (or thread exit) on to the scopes of the
 * caller: the thread's unwind continues from here and never returns.  Only
 * called from an exported function's own frame, once nothing of the
 * library's is left on the stack above the caller's. */
void rdmacm_rs_cancel_resume(void)
{
	cs.caught = 0;
	cs.depth = 0;
	atomic_fetch_sub(&rdmacm_rs_cancel_inflight, 1);
	__pthread_unwind_next(&cs_resume);
}
