// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The objects of the connection manager, declared together: the CM
//! instance ([`Cm`]) with its live objects ([`Live`]), event
//! channels ([`Channel`]), ids ([`IdPriv`] with [`Links`], [`ConnState`]
//! and [`AiSlot`]), events ([`EventPriv`]) and multicast memberships
//! ([`Mc`]).
//!
//! They point at each other (a channel knows its CM; the CM keeps every
//! channel, id, event and membership; an id keeps its channel and its
//! memberships; a membership and an event know their id), so each in a
//! file of its own would make their modules name each other in a circle.
//! What they do is in modules of their own, which name this one and not
//! each other: [`super::cm`] (the CM's life cycle, ids, channels,
//! resolution), [`super::channel`], [`super::id`], [`super::delivery`]
//! (events), [`super::conn::mcast`]; [`super::alloc`] builds ids and
//! events in place.  Fields private before the split are `pub(super)`:
//! visible in `cma` and its submodules, as they were.
#![deny(unsafe_code)]

use super::acks::Acks;
use super::device::{DevRef, Devices, Verbs};
use super::objects;
use super::public::{CPtr, PubEvent, PubId};
use super::registry::Sharded;
use crate::abi::cma::*;
use crate::abi::sockaddr::SockAddr;
use crate::abi::ucma as kabi;
use crate::addrinfo::Rai;
use crate::sys::ucma::Ucma;
use parking_lot::Mutex;
use std::ffi::c_void;
use crate::sys::slab::{Ref, Slab, Slabbed};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32};
use std::sync::Arc;

/// One CM instance: a kernel transport, a verbs library and their state.
/// The library uses [`global()`](super::cm::global); tests build their own over doubles.
pub struct Cm {
    pub ucma: Box<dyn Ucma>,
    pub verbs: Box<dyn Verbs>,
    /// `ucma` is the kernel's ([`crate::sys::ucma::Kernel`]): the event
    /// calls make its commands directly ([`crate::sys::ucma::wait_event`],
    /// [`crate::sys::ucma::write_event`]), not through the trait object.
    pub(crate) direct: bool,
    pub(super) init_lock: Mutex<()>,
    pub(super) inited: AtomicBool,
    pub(super) af_ib: AtomicBool,
    /// The device list (also the lock upstream calls `mut`).
    pub devices: Mutex<Devices>,
    /// The live ids, unacked events and multicast memberships of this
    /// instance, by the address C (or the kernel) knows them by.
    pub(super) live: Live,
}

/// The live ids, unacked events and multicast memberships of a CM
/// instance, by the address C (or the kernel) knows them by.  Each set
/// changes by single insertions and removals.  There is no map by kernel
/// handle: only events of old kernels without a uid need one, and they
/// search `ids` ([`Ids::find`]) instead of every id paying for a
/// second entry.
#[derive(Default)]
pub struct Live {
    /// The ids: the process's one [`IDS`] store (see [`Ids`]); the
    /// channels are in [`CHANNELS`], each knowing its instance.
    pub ids: Ids,
    /// The unacked events: the process's one [`EVENTS`] store.
    pub events: Events,
    /// Membership address (the uid of its kernel events) -> membership.
    pub mcs: Sharded<Arc<Mc>>,
}

/// An id held: the id stays in its slot while one exists (what `Arc` is
/// for an object on the heap).
pub type IdRef = Ref<IdPriv>;
/// A reference to an id that does not keep it.
pub type IdWeak = crate::sys::slab::Weak<IdPriv>;

/// Most ids alive at once in a process (a bound of the store's slot
/// numbers, not a reservation: the store maps segments as ids are made).
pub const MAX_IDS: usize = 1 << 29;

/// Every id of the process, in type-stable slots ([`crate::sys::slab`]):
/// the address C holds is checked by a range, an alignment and the slot's
/// state word, without a table.
pub static IDS: Slab<IdPriv> = Slab::new(MAX_IDS);

impl Slabbed for IdPriv {
    fn slab() -> &'static Slab<IdPriv> {
        &IDS
    }
}

/// An event channel held (see [`IdRef`]).
pub type ChanRef = Ref<Channel>;

/// Most event channels open at once in a process (a synchronous id has
/// one of its own).
pub const MAX_CHANNELS: usize = 1 << 29;

/// Every event channel of the process, in type-stable slots (as [`IDS`]).
pub static CHANNELS: Slab<Channel> = Slab::new(MAX_CHANNELS);

impl Slabbed for Channel {
    fn slab() -> &'static Slab<Channel> {
        &CHANNELS
    }
}

/// Most events handed out and not yet acked at once in a process.
pub const MAX_EVENTS: usize = 1 << 29;

/// Every event handed out and not yet acked, in type-stable slots (as
/// [`IDS`]); an event being built is owned by its reader and not `LIVE`.
pub static EVENTS: Slab<EventPriv> = Slab::new(MAX_EVENTS);

impl Slabbed for EventPriv {
    fn slab() -> &'static Slab<EventPriv> {
        &EVENTS
    }
}

/// The unacked events, as a CM instance sees them: the process's
/// [`EVENTS`].
#[derive(Default)]
pub struct Events;

impl Events {
    /// Runs `f` on the unacked event at `addr` (held meanwhile).
    pub fn with<R>(&self, addr: usize, f: impl FnOnce(&EventPriv) -> R) -> Option<R> {
        EVENTS.get(addr).map(|e| f(&e))
    }
    /// Whether `addr` is an unacked event.
    pub fn contains(&self, addr: usize) -> bool {
        EVENTS.contains(addr)
    }
    /// Calls `f` on every unacked event (rare reports, not lookups).
    pub fn for_each(&self, mut f: impl FnMut(&EventPriv)) {
        EVENTS.for_each(|e| f(e))
    }
}

/// The live ids, as a CM instance sees them: the process's [`IDS`] (one
/// store for every instance: the library has one, tests build several
/// over doubles and tell theirs apart by the id's channel).
#[derive(Default)]
pub struct Ids;

impl Ids {
    /// The live id at `addr`, held.
    #[inline]
    pub fn get(&self, addr: usize) -> Option<IdRef> {
        IDS.get(addr)
    }
    /// The first live id `pred` accepts (a search of every slot: for the
    /// rare lookups by something other than the address).
    pub fn find(&self, pred: impl FnMut(&IdPriv) -> bool) -> Option<IdRef> {
        IDS.find(pred)
    }
}

/// `struct rdma_event_channel` and what the library keeps with it.
#[repr(C)]
pub struct Channel {
    pub ch: rdma_event_channel,
    /// How many [`get_event`](super::delivery::get_event) calls on the
    /// channel have come back from the kernel's read (wrapping): a destroy
    /// that lets a reader take a queued event first
    /// ([`Cm::let_reader_take`]) watches it change.  (It fits the padding
    /// after `ch`.)
    pub(super) waits_done: std::sync::atomic::AtomicU32,
    /// The thread ([`crate::sys::trace::thread_key`]) that last called
    /// [`get_event`](super::delivery::get_event) on the channel (0:
    /// none, or one a destroy found not reading).
    pub(super) reader: std::sync::atomic::AtomicUsize,
    pub cm: &'static Cm,
}

/// Connection-related private state, kept for the connection functions.
#[derive(Default)]
pub struct ConnState {
    /// Connect data (AF_IB private-data header), if any.  (A boxed
    /// slice: 8 bytes fewer than a `Vec` in every id.)
    pub connect: Box<[u8]>,
    pub connect_error: bool,
    pub initiator_depth: u8,
    pub responder_resources: u8,
    /// ECE (vendor id, options) of this side and of the peer.
    pub local_ece: (u32, u32),
    pub remote_ece: (u32, u32),
    /// The QP attributes a passive endpoint creates each request's QP with.
    /// (Boxed: only passive endpoints have one; it would otherwise make
    /// every id larger.)
    pub qp_init_attr: Option<Box<objects::Vouched<crate::sys::verbs::QpInitAttr>>>,
    /// rdma_listen succeeded: rdma_get_request may wait for a request
    /// (on any other id it would wait forever).
    pub listening: bool,
}

/// The private state of an id (upstream's `struct cma_id_private`); `id`
/// must stay the first field.
#[repr(C)]
pub struct IdPriv {
    /// The public id C reads (through [`PubId`]'s accessors only).
    pub id: PubId,
    /// The kernel's handle for this id.
    pub(super) handle: AtomicU32,
    /// The fd of `links.channel` (read by every command without taking
    /// the lock; replaced together with it).
    pub(super) fd: AtomicI32,
    /// Synchronous mode: the id owns a private channel and every operation
    /// waits for its event.
    pub sync: AtomicBool,
    /// A call panicked while it held the id ([`Held`]): its state may be
    /// half-updated, so later calls refuse it (EIO); destroy still frees it.
    pub(super) broken: AtomicBool,
    /// The bound device's limits, kept where connect and accept read them
    /// without the links' lock: 0 while the id has no device, else
    /// [`DEV_LIMITS_SET`] with the largest initiator depth in bits 8-15
    /// and the largest responder resources in bits 0-7.  Stored once,
    /// when the device is attached (it never changes after).
    pub(super) dev_limits: AtomicU32,
    /// The id's channel, device and multicast memberships, under one lock
    /// (fields ordered so that the small ones share words: memory per id;
    /// one lock for what a destroy releases).
    pub(super) links: Mutex<Links>,
    /// Events acked so far, which destroy and migrate wait on.
    pub(super) acks: Acks,
    pub conn: Mutex<ConnState>,
    /// rdma_resolve_addrinfo state (see [`super::ai`]).
    pub ai: Mutex<AiSlot>,
}

/// What an id reports to, is bound to and has joined.
pub struct Links {
    /// The channel the id reports to (`id.channel` is its address).
    pub(super) channel: ChanRef,
    /// The device the id is bound to (reference held), if any: shared
    /// with every id on the device.
    pub(super) dev: Option<Arc<DevRef>>,
    /// Multicast memberships, newest first.
    pub mcs: Vec<Arc<Mc>>,
}

/// [`IdPriv::dev_limits`]' mark of an id with a device.
pub(super) const DEV_LIMITS_SET: u32 = 1 << 16;

/// An event handed to C; `event` must stay the first field.
#[repr(C)]
pub struct EventPriv {
    pub event: PubEvent,
    pub private_data: [u8; kabi::RDMA_MAX_PRIVATE_DATA],
    /// The id whose event this is (for a connection request, the
    /// listener): acking counts it as completed there.
    pub id_priv: Option<IdRef>,
    /// The multicast membership of a multicast event.
    pub mc: Option<Arc<Mc>>,
    /// The thread that got the event ([`crate::sys::trace::thread_key`]):
    /// a destroy that waits for the event's ack says whether it holds it.
    pub(super) holder: usize,
}

/// One membership (upstream's `struct cma_multicast`); its address is the
/// uid the kernel reports its events with.
pub struct Mc {
    /// The id it belongs to (which lists it).
    pub id: IdWeak,
    /// The caller's context, handed back in events.
    pub context: CPtr<c_void>,
    /// The kernel's handle (set once JOIN returns).
    pub handle: Mutex<u32>,
    /// Group GID and LID from the join event.
    pub group: Mutex<(ibv_gid, u16)>,
    pub join_flags: u16,
    pub addr: SockAddr,
    /// Its acked events, which leave waits on.
    pub acks: Acks,
}

/// Per-id state of an address translation.
#[derive(Default)]
pub struct AiSlot {
    /// A translation was started and not yet handed over (or failed).
    pub resolving: bool,
    /// The finished translation, until `rdma_query_addrinfo` takes it
    /// (boxed: most ids never have one).
    pub resolved: Option<Box<Vec<Rai>>>,
    /// The ticket of the name lookup running on a worker for this id (0:
    /// none).  The worker delivers its result only while the ticket is
    /// still here; destroying the id takes it away.
    /// (32 bits: fits the slot's padding; an id has at most one lookup.)
    pub pending: u32,
}
