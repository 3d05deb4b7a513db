// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! System calls: every foreign call of the library.  The ucma device (its
//! typed command protocol and the kernel transport behind the [`ucma::Ucma`]
//! trait), libibverbs (with the C shim for its `static inline`
//! functions), libc's name service ([`netdb`]: getaddrinfo behind an owning
//! list) and the few socket and environment calls std does not offer
//! safely ([`unix`]: send without SIGPIPE, `secure_getenv`).  Imports only
//! [`crate::abi`].

pub mod netdb;
use nix::errno::Errno;
use std::ffi::c_int;

pub mod ucma;
pub mod unix;
pub mod verbs;

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
        Errno::from_raw(ret)
    } else {
        last_errno()
    }
}

/// The calling thread's errno after a failed foreign call (EIO if unset).
pub fn last_errno() -> Errno {
    match Errno::last() {
        Errno::UnknownErrno => Errno::EIO,
        e => e,
    }
}

/// libc's text for a `getaddrinfo` error code (`EAI_*`).
pub fn gai_strerror(code: c_int) -> String {
    // SAFETY: gai_strerror returns a static NUL-terminated string for any
    // code (a generic text for unknown ones).
    unsafe { std::ffi::CStr::from_ptr(libc::gai_strerror(code)) }.to_string_lossy().into_owned()
}
