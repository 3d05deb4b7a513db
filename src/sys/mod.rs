// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Foreign calls: every `extern` block of the library (the C API's crate
//! aside) and the wrappers the rest of it calls instead.  The domain calls
//! a foreign function directly only for memory whose owner needs libc's
//! allocator (`cma::public`: path records C may `free()`;
//! `rsocket::verbs::mem`: page-aligned registered buffers) and through
//! nix's safe wrappers (`pipe2` and `close` in `rsocket::epoll`, `fcntl`
//! in `api::id`).  The ucma device (its
//! typed command protocol and the kernel transport behind the [`ucma::Ucma`]
//! trait), libibverbs (with the C shim for its `static inline`
//! functions: the connection manager's calls in [`verbs`], and
//! [`verbs::data`], the one data path of the Rust API and rsockets:
//! posts, polls, registrations, address handles), libc's name service ([`netdb`]: getaddrinfo behind an owning
//! list) and the few socket and environment calls std does not offer
//! safely ([`unix`]: send without SIGPIPE, `secure_getenv`), and the global
//! allocator ([`alloc`]: libc malloc, fallible `Arc`/`Box`), type-stable
//! slots for the objects C knows by address ([`slab`]), and the fork
//! generation with values kept per process ([`process`]), the trace
//! file of the CM's steps ([`trace`]), and (feature `tokio`) a
//! descriptor's I/O-safe registration with tokio ([`reactor`]).  Imports only
//! [`crate::abi`].

pub mod alloc;
pub mod cancel;
pub mod env;
pub mod netdb;
pub mod netlink;
pub mod process;
#[cfg(feature = "tokio")]
pub mod reactor;
use nix::errno::Errno;
use std::ffi::c_int;

pub mod rsock;
pub mod slab;
pub mod rtnl;
pub mod trace;
pub mod ucma;
pub mod unix;
pub mod verbs;
pub mod wake;

/// The errno of a failed foreign call, by the one rule the library
/// applies to every system and libibverbs call that reports failure:
///
/// * a function returning `int` failed when it returned non-zero: a
///   positive value is the errno itself (libibverbs' own convention); a
///   negative one (a system call's -1, some providers' -1) means "see
///   errno";
/// * a constructor failed when it returned NULL: see errno;
/// * "see errno" with errno unset (0) reads as EIO, so that a failure is
///   never reported as success.
pub fn errno_of(ret: c_int) -> Errno {
    if ret > 0 {
        errno_from_raw(ret)
    } else {
        last_errno()
    }
}

thread_local! {
    /// The raw value behind the last [`Errno::UnknownErrno`] this thread
    /// made: an errno the kernel reports that `Errno` has no name for
    /// (ENOTSUPP, 524, from a multicast join on rxe, for one).
    static UNLISTED: std::cell::Cell<c_int> = const { std::cell::Cell::new(0) };
}

/// An errno value as `Errno`, for every value a kernel or library hands
/// back: 0 reads as EIO (a failure is never reported as success); a value
/// `Errno` cannot name becomes `UnknownErrno` and is kept for
/// [`take_unlisted`], so the C API still reports the kernel's very number,
/// as upstream does.  Every `Errno` made from a foreign number goes through
/// here.
pub fn errno_from_raw(raw: c_int) -> Errno {
    if raw == 0 {
        return Errno::EIO;
    }
    let e = Errno::from_raw(raw);
    if e == Errno::UnknownErrno {
        keep_unlisted(raw);
    }
    e
}

/// Out of line and cold: inlined, the thread-local's address (a call into
/// ld.so in a shared library) was computed on entry to every function
/// that might fail this way, failure or not.
#[cold]
#[inline(never)]
fn keep_unlisted(raw: c_int) {
    UNLISTED.with(|u| u.set(raw));
}

/// The raw errno behind the `UnknownErrno` this thread made last (EIO if
/// none), cleared.
pub fn take_unlisted() -> c_int {
    match UNLISTED.with(|u| u.replace(0)) {
        0 => libc::EIO,
        raw => raw,
    }
}

/// The calling thread's errno after a failed foreign call (EIO if unset).
/// Out of line and cold: every caller is on a failure path, and its
/// success path keeps only what it needs (no errno location, no spill).
#[cold]
#[inline(never)]
pub fn last_errno() -> Errno {
    errno_from_raw(Errno::last_raw())
}

/// libc's text for a `getaddrinfo` error code (`EAI_*`).
pub fn gai_strerror(code: c_int) -> String {
    // SAFETY: gai_strerror returns a static NUL-terminated string for any
    // code (a generic text for unknown ones).
    unsafe { std::ffi::CStr::from_ptr(libc::gai_strerror(code)) }.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An errno `Errno` cannot name (the kernel's ENOTSUPP, 524) survives
    /// the trip to the C API; 0 never reads as success.
    #[test]
    fn unlisted_errno_values_survive() {
        assert_eq!(errno_from_raw(libc::ENODEV), Errno::ENODEV);
        assert_eq!(errno_from_raw(0), Errno::EIO);
        assert_eq!(errno_from_raw(524), Errno::UnknownErrno);
        assert_eq!(take_unlisted(), 524);
        assert_eq!(take_unlisted(), libc::EIO, "taken once");
        assert_eq!(errno_of(524), Errno::UnknownErrno);
        // The trip through the C boundary: rdmacm-capi's
        // `unlisted_errno_values_reach_c`.
    }
}
