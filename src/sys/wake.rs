// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Wake-up descriptors: an eventfd a sleeping thread waits on and whoever
//! changes what it waits for signals (rsocket streams and datagram
//! sockets, an id's acked-event count).  Signalling and draining make no
//! cancellation point (see [`super::cancel`]): they run on hot paths
//! without a guard.

use super::cancel::raw;
use super::process::generation;
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
    /// fork generation of the process it was made in: the thread that
    /// calls fork(2) continues in the child with a copy of this, the
    /// parent's thread's eventfd, so the child makes its own.  The
    /// parent's is forgotten, never dropped (the policy of
    /// [`super::process`]): it stays open in the child, close-on-exec.
    static MINE: RefCell<Option<(u64, Arc<Wake>)>> = const { RefCell::new(None) };
}

/// The calling thread's wake-up descriptor.
pub fn mine() -> Result<Arc<Wake>, Errno> {
    let g = generation();
    MINE.with(|w| {
        let mut w = w.borrow_mut();
        if let Some((made, x)) = &*w {
            if *made == g {
                return Ok(x.clone());
            }
        }
        let x = Arc::new(Wake::new()?);
        std::mem::forget(w.replace((g, x.clone())));
        Ok(x)
    })
}

/// Whether `x` is the calling thread's wake-up descriptor (in this
/// process: in a fork child, the parent's thread's is not).
pub fn is_mine(x: &Arc<Wake>) -> bool {
    let g = generation();
    MINE.with(|w| w.borrow().as_ref().is_some_and(|(made, m)| *made == g && Arc::ptr_eq(m, x)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread that forks gets a descriptor of its own in the child:
    /// the inherited one (the parent's thread's eventfd) is not its.
    #[test]
    fn fork_child_thread_makes_its_own() {
        let parent = mine().unwrap();
        assert!(Arc::ptr_eq(&parent, &mine().unwrap()));
        assert!(is_mine(&parent));
        // SAFETY: the child only touches this thread's cell, makes an
        // eventfd and leaves by _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let mut bad = 0;
            if is_mine(&parent) {
                bad |= 1;
            }
            match mine() {
                Ok(w) if !Arc::ptr_eq(&w, &parent) && is_mine(&w) && Arc::ptr_eq(&w, &mine().unwrap()) => {}
                _ => bad |= 2,
            }
            // SAFETY: leaves the child without running the test harness.
            unsafe { libc::_exit(bad) };
        }
        let mut st = 0;
        // SAFETY: waits for our own child; `st` is a local.
        assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
        assert!(libc::WIFEXITED(st), "status {st:#x}");
        assert_eq!(libc::WEXITSTATUS(st), 0, "child's failed checks (bits: 1 parent's is mine, 2 own descriptor)");
        assert!(is_mine(&parent), "the parent's is untouched");
    }
}
