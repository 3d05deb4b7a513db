// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The connection manager core over the kernel's ucma device: event
//! channels, ids, events, devices, bind, address and route resolution.
//!
//! Objects C holds, and how the C API gets them back:
//! - an event channel is a [`Channel`] whose first field is the public
//!   `struct rdma_event_channel`;
//! - an id is an [`IdPriv`] whose first field is the public
//!   `struct rdma_cm_id` (C gets its address; container_of style);
//! - an event is an [`EventPriv`] whose first field is the public
//!   `struct rdma_cm_event`, stable in memory until it is acked.
//!
//! Each lives in a slot of its type's store ([`crate::sys::slab`],
//! `base::IDS`, `base::CHANNELS`, `base::EVENTS`): [`Cm::channel`],
//! [`Cm::id`] and [`ack_event`] check the address C holds against the
//! store (range, alignment, the slot's state word) and take a counted
//! reference ([`IdRef`], [`ChanRef`]) valid for as long as the caller
//! keeps it; destroy retires the object (no longer found) and its slot
//! goes with the last reference.
//! Everything upstream keeps in `struct cma_id_private` is in [`IdPriv`];
//! the fields of the public structs are reached only through
//! [`public`].  The modules here with unsafe code are [`public`],
//! [`objects`] (the verbs objects an id holds) and [`alloc`] (ids and
//! events built in place).
//!
//! The kernel protocol is behind [`crate::sys::ucma::Ucma`] and libibverbs behind
//! [`device::Verbs`], so the whole core runs against test doubles.
//!
//! This file only declares the modules and re-exports what the rest of
//! the crate and the C API name (`cma::Cm`, `cma::get_event`, ...): no
//! submodule names it (`src/layers.rs` checks it).
//! The objects are declared together in [`base`] (they point at each
//! other); each one's behaviour is a module of its own: [`cm`] (the CM's
//! life cycle: init, channels, ids, bind, resolution, queries, devices),
//! [`channel`], [`id`] (and [`Held`]), [`delivery`] (reading and acking
//! events), [`acks`], [`conn`] (connections, QPs, multicast), [`ai`]
//! (`rdma_resolve_addrinfo`), [`trace`] (the opt-in trail of every step
//! and event, docs/trace.md). The values the CM shares with its clients
//! (connection and UD parameters, QP capacities) are defined once, in
//! [`params`]; the internal Rust API the library's own clients use is
//! [`api`].
#![deny(unsafe_code)]

pub mod acks;
pub mod ai;
pub mod ai_worker;
pub mod alloc;
pub mod api;
pub mod base;
pub mod channel;
pub mod cm;
pub mod conn;
pub mod delivery;
pub mod device;
pub mod events;
pub mod gid_env;
pub mod id;
pub mod objects;
pub mod params;
pub mod public;
pub mod registry;
pub mod trace;

pub use acks::Acks;
pub use base::{ChanRef, Channel, Cm, ConnState, EventPriv, IdPriv, IdRef, Links};
pub use cm::{addr_len, af_ib_supported, free_devices, get_devices, global, init};
pub use delivery::{ack_event, get_event, Getting, Got, Taken};
pub use id::Held;

#[cfg(test)]
mod tests;
