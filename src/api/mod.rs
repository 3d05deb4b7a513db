// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The public Rust API (re-exported at the crate root): safe, owned types
//! over the connection manager (`crate::cma::api`), rsockets and
//! `rdma_getaddrinfo`. See docs/rust-api.md. The parameter values
//! ([`ConnParam`], [`QpCaps`], [`UdParam`]) are the connection manager's
//! own (`crate::cma::params`), re-exported, not copied.
//!
//! Every file here but `verbs.rs` (the verbs data calls, through the C
//! shim) denies `unsafe`.

#![deny(unsafe_code)]

mod addr;
mod error;
mod event;
mod gai;
mod id;
mod mcast;
mod stream;
mod verbs;

#[cfg(feature = "tokio")]
mod astream;
#[cfg(feature = "tokio")]
pub mod asyncio;

pub use error::{Error, Result};
pub use crate::cma::params::{ConnParam, QpCaps, UdParam};
pub use event::EventKind;
pub use gai::{getaddrinfo, AddrInfo, AddrInfoHints};
pub use id::{Blocking, CmId, Event, EventChannel, IdKey, Mode, OnChannel, PortSpace};
pub use mcast::{Membership, MulticastAddr, QpCreateFlags};
pub use stream::{RListener, RStream};
pub use verbs::{gid_reachable, Access, AddressHandle, MemoryRegion, RegisterBuffer, SendOp, Sge, WcFlags, WcOpcode, WcStatus, WorkCompletion, GRH_LEN};
