// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The interposed functions.  Each one looks its descriptor up in the
//! table and forwards the call to the rsocket API (`rs`) or to libc
//! (`real`).  Raw pointers from the program are passed on untouched: the
//! function forwarded to has the same contract as the one the program
//! called.
//!
//! The exports by concern: `sockets` (socket, bind, listen, accept,
//! connect, shutdown, the names and the options), `data` (the data calls
//! and sendfile), `poll` (poll, select and epoll), `descriptors` (close,
//! dup, fcntl, ioctl, fstat) and `fortify` (the checking variants of
//! _FORTIFY_SOURCE).  Below them: `stand_in` (where a call goes, and a
//! stand-in's making, adoption and closing), `fork` (fork mode's switch to
//! an rsocket, and what a child made by fork(2) inherits), `options` (the
//! socket options carried to an rsocket or from it) and `setup` (the
//! configuration, the trace lines).
//!
//! Cancellation.  A thread cancelled while it waits in one of these calls
//! (pthread_cancel), or ended by a signal handler that calls pthread_exit,
//! ends with a forced unwind that starts inside the call forwarded to, in
//! libc or in librdmacm, and passes through the export on its way out.
//! Rust lets it pass only frames of an unwinding ABI ("C-unwind", "Rust")
//! that hold no value with a destructor and no pending catch_unwind (RFC
//! 2945's plain old frames).  So every export is `extern "C-unwind"` and
//! has up to three steps:
//!
//! 1. the plan: the table lookup, and for a stand-in whatever must be
//!    ready before the call (accept's placeholder, poll's translated
//!    list), under [`boundary`](crate::boundary), handed back as plain data;
//! 2. the forwarded call, from the export's own frame, which then holds
//!    only plain data: no catch_unwind, no destructor (`inside` marks the
//!    thread without a guard value; what waits with the call, such as the
//!    placeholder and the buffer, is held by the thread, see `held`);
//! 3. the rest, under [`boundary`](crate::boundary) again (adopting the
//!    accepted rsocket, copying poll's results back).
//!
//! The library's own work in steps 1 and 3 never reaches a cancellation
//! point that may act, or the forced unwind would start inside
//! catch_unwind: it uses system calls that are none (the placeholder is
//! opened and closed with raw openat/close), or runs with cancellation
//! disabled (`quiet`: configuration, librdmacm calls, closing stand-ins,
//! fork mode's switch).
//!
//! Where the C library's function is a cancellation point (accept,
//! connect, the data calls, poll, select, epoll_wait, close, fcntl's
//! F_SETLKW), the rsocket call forwarded to runs with the thread's
//! cancellation as the program set it; where it is none (socket, bind,
//! listen, shutdown, the socket options and names, fcntl's other
//! commands, epoll_create, epoll_ctl, sendfile), with cancellation
//! disabled (`inside_nocancel`): a thread is not ended where it could not
//! be without this library.  For a descriptor that is not in the table,
//! an export is the lookup and libc's call, nothing more: the lookup
//! cannot panic and needs no boundary.

#![allow(clippy::missing_safety_doc)]

mod data;
mod descriptors;
mod fork;
mod fortify;
mod options;
mod poll;
mod setup;
mod sockets;
mod stand_in;
