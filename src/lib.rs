// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The RDMA connection manager, written in Rust: a safe Rust API, and the
//! library behind rdmacm-rs's drop-in `librdmacm.so.1` (built by the
//! `rdmacm-capi` crate, a client of this one).
//!
//! Nothing here needs `unsafe` from a caller. The pieces (see
//! docs/rust-api.md for a walk through them):
//!
//! * [`EventChannel`] and [`CmId`]: channels, ids and their ownership (an id
//!   holds its channel open; an [`Event`] borrows its channel and is
//!   acknowledged when dropped; a connection request yields an owned id).
//!   Ids are asynchronous (made on a channel) or synchronous ([`CmId::new`]).
//! * Resolution ([`CmId::resolve_addr`], [`CmId::resolve_route`]), connect,
//!   accept, reject and disconnect with private data as slices, UD and
//!   multicast ([`CmId::join_multicast`], [`UdParam`], an answer to a UD
//!   datagram: [`AddressHandle::from_wc`]).
//! * A QP on an id ([`CmId::create_qp`]) and the data calls of
//!   `rdma_verbs.h`: [`MemoryRegion`], [`CmId::post_send`],
//!   [`CmId::post_recv`], [`CmId::poll_cq`], [`CmId::wait_cq`].
//! * [`getaddrinfo`] returning owned values, [`gid_reachable`].
//! * rsocket streams: [`RStream`] (`std::io::Read + Write`), [`RListener`].
//! * Feature `tokio`: `asyncio`, an event stream on `AsyncFd` and async
//!   resolve, connect and accept.
//! * One error type, [`Error`], carrying the errno.
//!
//! A client that sends one message:
//!
//! ```no_run
//! use rdmacm::{Access, CmId, ConnParam, MemoryRegion, PortSpace, QpCaps, SendOp};
//! use std::time::Duration;
//!
//! fn main() -> rdmacm::Result<()> {
//!     let id = CmId::new(PortSpace::Tcp)?; // synchronous: each call waits
//!     id.resolve_addr(None, "192.0.2.1:7471".parse().unwrap(), Duration::from_secs(2))?;
//!     id.resolve_route(Duration::from_secs(2))?;
//!     id.create_qp(QpCaps::default())?;
//!     id.connect(&ConnParam::default())?;
//!     let mut mr = MemoryRegion::new(&id, 64, Access::LOCAL_WRITE)?;
//!     mr.write(0, b"hello")?;
//!     id.post_send(1, &[mr.sge(0..5)?], SendOp::Send, true)?;
//!     let wc = id.wait_cq()?;
//!     assert!(wc.is_ok());
//!     id.disconnect()
//! }
//! ```
//!
//! An event cannot outlive the channel it borrows:
//!
//! ```compile_fail
//! fn leak() -> rdmacm::Result<rdmacm::Event<'static>> {
//!     let ch = rdmacm::EventChannel::new()?;
//!     ch.get_event() // error: returns a value referencing a local
//! }
//! ```
//!
//! Inside, four layers, each importing only those below it (see
//! ARCHITECTURE.md; `layers::tests` checks the rule on every `cargo test`):
//! the public API (src/api) and the C API (the `rdmacm-capi` crate, through
//! the doc-hidden `internal` module, which is not API); the domain (`cma`,
//! `addrinfo`, `rsocket`, `gid`, `explain`); `sys` (system calls,
//! libibverbs, the C shims); `abi` (C data).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![allow(non_camel_case_types)]
#![deny(missing_docs)]

mod api;

pub use api::{
    getaddrinfo, gid_reachable, Access, AddrInfo, AddrInfoHints, AddressHandle, Blocking, CmId, ConnParam, Error, Event, EventChannel, EventKind, IdKey, Membership, MemoryRegion, Mode, MulticastAddr, OnChannel, PortSpace, QpCaps, QpCreateFlags,
    RegisterBuffer, RListener, RStream, Result, SendOp, Sge, UdParam, WcFlags, WcOpcode, WcStatus, WorkCompletion, GRH_LEN,
};

#[cfg(feature = "tokio")]
pub use api::asyncio;

#[doc(hidden)]
pub mod internal;

// The layers keep their paths inside the crate (`crate::cma::...`).
pub(crate) use internal::{abi, addrinfo, cma, gid, logging, rsocket, sys};

#[cfg(test)]
mod layers;
