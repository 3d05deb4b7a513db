// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! System calls: every foreign call of the library.  The ucma device (its
//! typed command protocol and the kernel transport behind the [`ucma::Ucma`]
//! trait), libibverbs (with the C shim for its `static inline`
//! functions), libc's name service ([`netdb`]: getaddrinfo behind an owning
//! list) and the few socket and environment calls std does not offer
//! safely ([`unix`]: send without SIGPIPE, `secure_getenv`).  Imports only
//! [`crate::abi`].

pub mod netdb;
pub mod ucma;
pub mod unix;
pub mod verbs;
