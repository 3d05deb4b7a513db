// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A descriptor registered with tokio's reactor (feature `tokio`), I/O-safe:
//! the `AsyncFd` owns what it watches.

use std::os::fd::{BorrowedFd, OwnedFd};
use tokio::io::unix::AsyncFd;

/// A duplicate of `fd` (`F_DUPFD_CLOEXEC`: the same open file, so the same
/// readiness and the same `O_NONBLOCK`) registered with the current tokio
/// runtime.  The `AsyncFd` owns the duplicate: it stays open, naming that
/// file, for as long as the registration, whatever becomes of `fd`.
pub fn watch(fd: BorrowedFd<'_>) -> std::io::Result<AsyncFd<OwnedFd>> {
    watch_owned(fd.try_clone_to_owned()?)
}

/// `own` registered with the current tokio runtime, for readability; the
/// `AsyncFd` owns it.
pub fn watch_owned(own: OwnedFd) -> std::io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: `register` needs the descriptor `own.as_raw_fd()` returns
    // to be open, to name the same open file and to be returned by every
    // call, until the AsyncFd is dropped (it deregisters, then drops the
    // inner value) or gives it back: the AsyncFd owns `own`, an OwnedFd,
    // which is open until dropped and always returns its one descriptor.
    unsafe { AsyncFd::register(own) }.map_err(|e| e.into_parts().1)
}
