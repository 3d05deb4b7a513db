// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! librspreload.so: load it with LD_PRELOAD and the sockets an unmodified
//! program opens become rsockets (RDMA), with no change to the program.
//!
//! The library defines the socket calls (socket, bind, listen, accept,
//! connect, read/write and friends, poll, select, epoll_*, close, dup*,
//! fcntl, sendfile, ...).  A socket it takes over is shown to the program
//! as a stand-in descriptor (`fdmap`); every call on such a descriptor goes
//! to the rsocket API of librdmacm.so.1, every other call to libc's own
//! function.  Behaviour follows upstream's librspreload (rdma-core's
//! librdmacm/preload.c); where this one differs, man/rspreload.7 says so.
//!
//! Every exported function runs its body through [`boundary`]: a panic (a
//! bug) never unwinds into C, it becomes the function's error value with
//! errno EIO.  On the way back, errno is what the forwarded call set.

#![deny(unsafe_op_in_unsafe_fn)]

mod calls;
mod config;
mod fdmap;
#[cfg(not(test))]
mod interpose;

use std::panic::{catch_unwind, AssertUnwindSafe};

/// The panic boundary of every export (see the crate comment).
pub(crate) fn boundary<R>(fail: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            calls::set_errno(libc::EIO);
            fail
        }
    }
}
