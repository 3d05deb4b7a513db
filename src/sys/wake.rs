// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Wake-up descriptors: an eventfd a sleeping thread waits on and whoever
//! changes what it waits for signals (rsocket streams and datagram
//! sockets, an id's acked-event count).  Signalling and draining make no
//! cancellation point (see [`super::cancel`]): they run on hot paths
//! without a guard.

use super::cancel::raw;
use nix::errno::Errno;
use std::cell::RefCell;
use std::ffi::c_int;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

/// One eventfd, non-blocking and close-on-exec.
pub struct Wake {
    fd: OwnedFd,
}

impl Wake {
    pub fn new() -> Result<Wake, Errno> {
        // SAFETY: plain system call.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(Errno::last());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Wake { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Makes the descriptor readable (it stays so until drained).
    pub fn signal(&self) {
        // SAFETY: an 8-byte write of a local value to our eventfd.
        let _ = unsafe { raw::write(self.fd.as_raw_fd(), &1u64.to_ne_bytes()) };
    }

    pub fn fd(&self) -> c_int {
        self.fd.as_raw_fd()
    }

    /// Resets the descriptor (never blocks: the eventfd is non-blocking).
    pub fn drain(&self) {
        let mut b = [0u8; 8];
        let _ = raw::read(self.fd.as_raw_fd(), &mut b);
    }
}

thread_local! {
    /// This thread's wake-up descriptor (made on its first sleep) and the
    /// process it was made in: the thread that calls fork(2) continues in
    /// the child with a copy of this, the same eventfd as the parent's
    /// thread, so the child makes its own.
    static MINE: RefCell<Option<(u32, Arc<Wake>)>> = const { RefCell::new(None) };
}

/// The calling thread's wake-up descriptor.
pub fn mine() -> Result<Arc<Wake>, Errno> {
    let pid = std::process::id();
    MINE.with(|w| {
        let mut w = w.borrow_mut();
        if let Some((p, x)) = &*w {
            if *p == pid {
                return Ok(x.clone());
            }
        }
        let x = Arc::new(Wake::new()?);
        *w = Some((pid, x.clone()));
        Ok(x)
    })
}

/// Whether `x` is the calling thread's wake-up descriptor.
pub fn is_mine(x: &Arc<Wake>) -> bool {
    MINE.with(|w| w.borrow().as_ref().is_some_and(|(_, m)| Arc::ptr_eq(m, x)))
}
