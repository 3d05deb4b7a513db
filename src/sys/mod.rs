// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! System calls: every foreign call of the library.  The ucma device (its
//! typed command protocol and the kernel transport behind the [`ucma::Ucma`]
//! trait) and libibverbs (with the C shim for its `static inline`
//! functions).  Imports only [`crate::abi`].

pub mod ucma;
pub mod verbs;

/// libc's text for a `getaddrinfo` error code (`EAI_*`).
pub fn gai_strerror(code: std::ffi::c_int) -> String {
    // SAFETY: gai_strerror returns a static NUL-terminated string for any
    // code (a generic text for unknown ones).
    unsafe { std::ffi::CStr::from_ptr(libc::gai_strerror(code)) }.to_string_lossy().into_owned()
}
