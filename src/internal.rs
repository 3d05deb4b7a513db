// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The library's inner layers, for its own clients only: the C API crate
//! (`rdmacm-capi`), `rdma-resolve` and the fuzz targets.
//!
//! **Not API.** Nothing here is covered by semantic versioning or by the
//! listing of the public surface (api/rdmacm.api); it is C-shaped (raw
//! pointers, C structures) and changes with the C library.  Rust programs
//! use the crate's root items (`EventChannel`, `CmId`, ...) instead.

// The files stay where they are (src/abi, src/cma, ...): the layering check
// (src/layers.rs) and every `crate::cma::...` path inside the crate are
// unchanged; lib.rs re-exports them crate-wide.
#![allow(missing_docs)]
// Not rendered (doc(hidden)): its prose links are written for readers of
// the source (`cargo doc --document-private-items` resolves them).
#![allow(rustdoc::broken_intra_doc_links, rustdoc::private_intra_doc_links)]

#[path = "abi/mod.rs"]
pub mod abi;
#[path = "addrinfo/mod.rs"]
pub mod addrinfo;
#[path = "cma/mod.rs"]
pub mod cma;
#[path = "explain/mod.rs"]
pub mod explain;
#[path = "gid/mod.rs"]
pub mod gid;
#[path = "logging.rs"]
pub mod logging;
#[path = "rsocket/mod.rs"]
pub mod rsocket;
#[path = "sys/mod.rs"]
pub mod sys;
