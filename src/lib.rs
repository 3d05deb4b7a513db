// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rdmacm-rs: the RDMA connection manager of rdma-core's `librdmacm.so.1`,
//! written in Rust.  The shared library itself is built by the
//! `rdmacm-capi` crate (capi/), a client of this one.
//!
//! Four layers, each importing only those below it (see ARCHITECTURE.md;
//! `layers::tests` checks the rule on every `cargo test`):
//! - the C API, in the `rdmacm-capi` crate (capi/src).  Every exported
//!   function lives there, written out in full so that cbindgen sees it,
//!   and goes through one pattern: symbol version, panic boundary, NULL
//!   checks, errno.
//! - the domain: [`cma`] (the connection manager), [`addrinfo`]
//!   (`rdma_getaddrinfo` and the ibacm client), [`rsocket`] (rsockets) and
//!   [`gid`] (`ibv_gid_reachable`'s decision logic).
//! - [`sys`]: system calls (the ucma device, libibverbs, the C shim).
//! - [`abi`]: C data (`#[repr(C)]` mirrors, the kernel ABI).
//!
//! [`logging`] is infrastructure any layer may use.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![allow(non_camel_case_types)]

pub mod abi;
pub mod addrinfo;
pub mod cma;
pub mod explain;
pub mod gid;
pub mod logging;
pub mod rsocket;
pub mod sys;

#[cfg(test)]
mod layers;
