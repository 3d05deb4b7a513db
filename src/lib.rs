// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rdmacm-rs: a drop-in replacement for rdma-core's `librdmacm.so.1`.
//!
//! Layout:
//! - [`ffi`]: the C boundary.  Every exported function lives there, written
//!   out in full so that cbindgen sees it, and goes through one pattern:
//!   symbol version, panic boundary, NULL checks, errno.
//! - [`core`]: the safe core.  It knows nothing of C pointers.
//! - [`kabi`]: raw kernel ABI structures (ucma commands and events).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![allow(non_camel_case_types)]

pub mod core;
pub mod ffi;
pub mod kabi;
pub mod logging;
