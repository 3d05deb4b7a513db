/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/*
 * A blocking write(2) that glibc's forced unwind (a cancellation, or
 * pthread_exit() from a signal handler) may leave through, for the waits
 * whose callers up to C are plain frames (src/sys/cancel.rs,
 * write_unwinding).
 *
 * Built with -fexceptions: pthread_cleanup_push() then registers nothing
 * at run time; the unwinder finds the cleanup in this function's unwind
 * tables, runs it as it passes, and goes on into the caller's frames.
 * Without an unwind the wait costs no more than the write itself.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>

#ifndef __EXCEPTIONS
#error "cleanup_shim.c must be built with -fexceptions"
#endif

ssize_t rdmacm_rs_write_cleanup(int fd, const void *b, size_t len,
				void (*cleanup)(void *), void *arg)
{
	ssize_t r;

	pthread_cleanup_push(cleanup, arg);
	r = write(fd, b, len);
	pthread_cleanup_pop(0);
	return r;
}
