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
//! The library's own work in an exported function (anything beyond a
//! table lookup) runs through `boundary` (below): a panic (a bug) never unwinds
//! into C, it becomes the function's error value with errno EIO.  The call
//! forwarded to runs outside it, in the export's own frame, so that a
//! thread cancelled there ends as it would without this library (see
//! `interpose`).  On the way back, errno is what the forwarded call set.
//!
//! Every `unsafe` block says why it holds in a `// SAFETY:` comment:
//! clippy's `undocumented_unsafe_blocks` is an error here, so any clippy
//! run over the crate (`make check-msrv` runs one) fails on a block
//! without one.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
// The exports (`interpose`, `split`) are left out of the unit-test build:
// they would replace the test harness's own socket calls.  What only they
// use looks unused there.
#![cfg_attr(test, allow(dead_code))]

mod calls;
mod config;
mod fdmap;
mod held;
#[cfg(not(test))]
mod interpose;
#[cfg(not(test))]
mod split;

use std::panic::{catch_unwind, AssertUnwindSafe};

/// The panic boundary of every export (see the crate comment).  Never
/// inlined, so that its catch_unwind stays out of the export's own frame,
/// the frame a forced unwind passes when the thread ends in the forwarded
/// call.
#[inline(never)]
pub(crate) fn boundary<R>(fail: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            calls::set_errno(libc::EIO);
            fail
        }
    }
}
