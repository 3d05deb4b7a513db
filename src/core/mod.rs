// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The safe core.  Nothing here takes a raw C pointer except the few
//! functions marked `unsafe` that turn C structures into Rust values.

pub mod acm;
pub mod addrinfo;
pub mod cm;
pub mod conn;
pub mod events;
pub mod gid;
pub mod rsocket;
pub mod sockaddr;
