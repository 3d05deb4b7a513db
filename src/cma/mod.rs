// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The connection manager core over the kernel's ucma device: event
//! channels, ids, events, devices, bind, address and route resolution.
//!
//! Objects C holds, and how the C API gets them back:
//! - an event channel is an `Arc<`[`Channel`]`>` whose first field is the
//!   public `struct rdma_event_channel`;
//! - an id is an `Arc<`[`IdPriv`]`>` whose first field is the public
//!   `struct rdma_cm_id` (C gets its address; container_of style);
//! - an event is a `Box<`[`EventPriv`]`>` whose first field is the public
//!   `struct rdma_cm_event`, stable in memory until it is acked.
//!
//! [`Cm`] keeps every live channel, id and unacked event in a registry
//! keyed by the address C holds ([`Cm::channel`], [`Cm::id`],
//! [`ack_event`]): a C pointer becomes an `Arc` clone taken under the
//! registry lock, valid for as long as the caller keeps it, and destroy
//! removes the registry's reference (the memory goes with the last one).
//! Everything upstream keeps in `struct cma_id_private` is in [`IdPriv`];
//! the fields of the public structs are reached only through
//! [`public`], the one module here with unsafe code.
//!
//! The kernel protocol is behind [`crate::sys::ucma::Ucma`] and libibverbs behind
//! [`device::Verbs`], so the whole core runs against test doubles.
#![deny(unsafe_code)]

pub mod api;
pub mod device;
pub mod ai;
pub mod ai_worker;
pub mod conn;
pub mod events;
pub mod gid_env;
pub mod objects;
pub mod public;
pub mod registry;


use crate::abi::cma::*;
use crate::abi::ucma as kabi;
use conn::mcast::Mc;
use device::{DevRef, Devices, SysVerbs, Verbs};
use nix::errno::Errno;
use once_cell::sync::Lazy;
use parking_lot::Mutex;
use public::{PubEvent, PubId};
use crate::abi::sockaddr::SockAddr;
use crate::sys::alloc;
use crate::sys::ucma::{self as proto, Kernel, Ucma};
use registry::Live;
use std::ffi::c_void;
use std::ptr::{self, null_mut};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU16, AtomicU32, Ordering};
use std::sync::Arc;

/// One CM instance: a kernel transport, a verbs library and their state.
/// The library uses [`global()`]; tests build their own over doubles.
pub struct Cm {
    pub ucma: Box<dyn Ucma>,
    pub verbs: Box<dyn Verbs>,
    init_lock: Mutex<()>,
    inited: AtomicBool,
    af_ib: AtomicBool,
    /// The device list (also the lock upstream calls `mut`).
    pub devices: Mutex<Devices>,
    /// Every live channel, id, unacked event and multicast membership of
    /// this instance, by the address C (or the kernel) knows it by
    /// (sharded: independent ids take different locks).
    live: Live,
}


static GLOBAL: Lazy<Cm> = Lazy::new(|| Cm::new(Box::new(Kernel::default()), Box::new(SysVerbs::default())));

/// The library's CM instance.
pub fn global() -> &'static Cm {
    &GLOBAL
}

/// Whether the kernel accepts AF_IB addresses (the AF_IB-capable command
/// family is in use).  Initialises the CM on first use (ABI check, device
/// list, probe); false when that fails (no kernel support, no devices).
pub fn af_ib_supported() -> bool {
    let cm = global();
    cm.init().is_ok() && cm.af_ib.load(Ordering::Acquire)
}

/// Upstream's `ucma_init` for the library's instance: EPERM when the
/// kernel's ucma ABI is not 3..4, ENODEV when libibverbs lists no device.
/// Idempotent once it has succeeded.
pub fn init() -> Result<(), Errno> {
    global().init()
}

/// `struct rdma_event_channel` and what the library keeps with it.
#[repr(C)]
pub struct Channel {
    pub ch: rdma_event_channel,
    /// Threads in [`get_event`] on the channel (it fits the padding after
    /// `ch`): one alone may look before it blocks, see
    /// [`Ucma::wait_event_into`](crate::sys::ucma::Ucma::wait_event_into).
    readers: std::sync::atomic::AtomicU32,
    pub cm: &'static Cm,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Channel(fd {})", self.ch.fd)
    }
}

impl Channel {
    /// The channel's ucma file descriptor.
    pub fn fd(&self) -> i32 {
        self.ch.fd
    }

    /// The address C knows the channel by.
    pub fn raw(&self) -> *mut rdma_event_channel {
        &self.ch as *const rdma_event_channel as *mut rdma_event_channel
    }
}

/// Connection-related private state, kept for the connection functions.
#[derive(Default)]
pub struct ConnState {
    /// Connect data (AF_IB private-data header), if any.  (A boxed
    /// slice: 8 bytes fewer than a `Vec` in every id, issue 10.)
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
    handle: AtomicU32,
    /// The fd of `links.channel` (read by every command without taking
    /// the lock; replaced together with it).
    fd: AtomicI32,
    /// Synchronous mode: the id owns a private channel and every operation
    /// waits for its event.
    pub sync: AtomicBool,
    /// A call panicked while it held the id ([`Held`]): its state may be
    /// half-updated, so later calls refuse it (EIO); destroy still frees it.
    broken: AtomicBool,
    /// The id's channel and device, under one lock (fields ordered so that
    /// the small ones share words: memory per id, issue 10).
    links: Mutex<Links>,
    /// Events acked so far, which destroy and migrate wait on.
    acks: Acks,
    pub conn: Mutex<ConnState>,
    /// Multicast memberships, newest first.
    pub mcs: Mutex<Vec<Arc<Mc>>>,
    /// rdma_resolve_addrinfo state (see [`ai`]).
    pub ai: Mutex<ai::AiSlot>,
}

/// What an id reports to and is bound to.
pub struct Links {
    /// The channel the id reports to (`id.channel` is its address).
    channel: Arc<Channel>,
    /// The device the id is bound to (reference held), if any: shared
    /// with every id on the device.
    dev: Option<Arc<DevRef>>,
}

/// An id held by one call of the C API.  The policy for a panic (always a
/// bug) while a call holds an id: the C API reports EIO, and the id is
/// marked broken when the unwinding drops this guard, so that no later
/// call runs on state the panic may have left half-updated (parking_lot
/// locks have no poisoning to do it for us).  Destroying the id still
/// works and frees it.
pub struct Held(Arc<IdPriv>);

impl std::ops::Deref for Held {
    type Target = Arc<IdPriv>;
    fn deref(&self) -> &Arc<IdPriv> {
        &self.0
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if std::thread::panicking() {
            log::error!(target: "rdmacm", "a call panicked while holding an id: the id is unusable from now on (EIO) but for destroy");
            self.0.broken.store(true, Ordering::Release);
        }
    }
}

/// An event handed to C; `event` must stay the first field.
#[repr(C)]
pub struct EventPriv {
    pub event: PubEvent,
    pub private_data: [u8; kabi::RDMA_MAX_PRIVATE_DATA],
    /// The id whose event this is (for a connection request, the
    /// listener): acking counts it as completed there.
    pub id_priv: Option<Arc<IdPriv>>,
    /// The multicast membership of a multicast event.
    pub mc: Option<Arc<Mc>>,
}

/// What the caller of [`get_event`] learns besides the event's address.
#[derive(Clone, Copy, Debug)]
pub struct Got {
    /// The address C receives (`struct rdma_cm_event *`).
    pub ptr: *mut rdma_cm_event,
    pub event: u32,
    pub status: i32,
    /// `event->id`.
    pub id: *mut rdma_cm_id,
}

impl EventPriv {
    /// Back to a new event's state (all zero, no id, no membership).
    fn reset(&mut self) {
        self.id_priv = None;
        self.mc = None;
        self.event = PubEvent::zeroed();
        self.private_data = [0; kabi::RDMA_MAX_PRIVATE_DATA];
    }
}

/// Socket address sizes by family, as upstream's `ucma_addrlen`
/// ([`SockAddr::cm_len`], the one rule).
pub fn addr_len(family: i32, af_ib: bool) -> usize {
    SockAddr::cm_len(family, af_ib)
}

impl std::fmt::Debug for IdPriv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IdPriv({:p}, handle {})", self.raw(), self.handle())
    }
}

impl IdPriv {
    /// The public id's address (what C holds).
    pub fn raw(&self) -> *mut rdma_cm_id {
        self.id.as_ptr()
    }

    /// The address the kernel knows the id by (its uid).
    pub fn uid(&self) -> u64 {
        self as *const IdPriv as usize as u64
    }

    /// The kernel's handle.
    pub fn handle(&self) -> u32 {
        self.handle.load(Ordering::Acquire)
    }

    /// The fd of the id's current channel.
    pub fn fd(&self) -> i32 {
        self.fd.load(Ordering::Acquire)
    }

    /// The id's current channel.
    pub fn channel(&self) -> Arc<Channel> {
        self.links.lock().channel.clone()
    }

    /// The device the id is bound to, if any.
    pub fn device(&self) -> Option<Arc<DevRef>> {
        self.links.lock().dev.clone()
    }

    /// Holds the id for one call: EIO if an earlier call panicked while
    /// holding it (see [`Held`]).
    pub fn hold(self: Arc<Self>) -> Result<Held, Errno> {
        if self.broken.load(Ordering::Acquire) {
            return Err(Errno::EIO);
        }
        Ok(Held(self))
    }

    /// Holds the id to destroy it: a broken id may still be destroyed.
    pub fn hold_to_destroy(self: Arc<Self>) -> Held {
        Held(self)
    }

    pub(crate) fn complete_event(&self) {
        self.acks.add();
    }
}

/// A count of acked events and the wait for a number of them (an id's, a
/// multicast membership's: upstream's `events_completed` and `cond`).
///
/// The count is atomic, so that counting an ack takes no lock unless
/// someone waits (issue 10: one lock per ack was most of what acking
/// cost).  A waiter announces itself (`waiters`) and registers its
/// thread's wake-up descriptor under the lock before it reads the count;
/// an adder adds before it reads `waiters` (both sequentially consistent):
/// either the waiter sees the new count, or the adder sees the waiter and
/// signals it under the lock, after the registration.  The wait is a
/// cancellation point ([`crate::sys::cancel`]): a cancelled thread leaves
/// no registration behind.
#[derive(Default)]
pub struct Acks {
    n: AtomicU32,
    /// A destroy of the id was interrupted (its thread cancelled) after
    /// the kernel's part: 1 + the count it waits for; 0 otherwise.
    pending: AtomicU32,
    /// Threads in [`wait_with`](Self::wait_with).
    waiters: AtomicU16,
    lock: Mutex<()>,
}

/// The threads waiting for acks: the count's address and the thread's
/// wake-up descriptor (one list for all counts keeps every id small:
/// waiting for acks is rare).
static ACK_WAITERS: Mutex<Vec<(usize, Arc<crate::sys::wake::Wake>)>> = Mutex::new(Vec::new());

impl Acks {
    /// Counts one acked event.
    pub fn add(&self) {
        self.n.fetch_add(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) != 0 {
            let _g = self.lock.lock();
            let me = self as *const Acks as usize;
            ACK_WAITERS.lock().iter().filter(|(a, _)| *a == me).for_each(|(_, w)| w.signal());
        }
    }

    /// Runs `f` under the count's lock, then waits until `reported`
    /// events have been acked, without the lock.  ECANCELED when the
    /// thread was cancelled in the wait (`f` has run).
    pub fn wait_with(&self, reported: u32, f: impl FnOnce()) -> Result<(), Errno> {
        // The thread's wake-up descriptor first, should it be needed
        // (made once per thread): a failure to make it changes nothing.
        let wake = if self.n.load(Ordering::SeqCst) < reported { Some(crate::sys::wake::mine()?) } else { None };
        let me = self as *const Acks as usize;
        let wake = {
            let _g = self.lock.lock();
            f();
            if self.n.load(Ordering::SeqCst) >= reported {
                return Ok(());
            }
            let Some(wake) = wake else {
                // Not short before, short now: impossible (the count only grows).
                return Ok(());
            };
            self.waiters.fetch_add(1, Ordering::SeqCst);
            ACK_WAITERS.lock().push((me, wake.clone()));
            wake
        };
        let mut r = Ok(());
        while self.n.load(Ordering::SeqCst) < reported {
            let mut p = [libc::pollfd { fd: wake.fd(), events: libc::POLLIN, revents: 0 }];
            match crate::sys::cancel::wait_poll(&mut p, -1) {
                Ok(_) => wake.drain(),
                Err(Errno::EINTR) => {}
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        let _g = self.lock.lock();
        let mut w = ACK_WAITERS.lock();
        if let Some(i) = w.iter().position(|(a, x)| *a == me && Arc::ptr_eq(x, &wake)) {
            w.swap_remove(i);
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Waits until `reported` events have been acked (see [`wait_with`](Self::wait_with)).
    #[inline]
    pub fn wait(&self, reported: u32) -> Result<(), Errno> {
        if self.n.load(Ordering::SeqCst) >= reported {
            return Ok(());
        }
        self.wait_with(reported, || ())
    }

    /// The count an interrupted destroy waits for, if one was interrupted.
    fn pending(&self) -> Option<u32> {
        match self.pending.load(Ordering::Acquire) {
            0 => None,
            n => Some(n - 1),
        }
    }

    fn set_pending(&self, reported: u32) {
        self.pending.store(reported.saturating_add(1), Ordering::Release);
    }
}

impl Cm {
    pub fn new(ucma: Box<dyn Ucma>, verbs: Box<dyn Verbs>) -> Cm {
        Cm {
            ucma,
            verbs,
            init_lock: Mutex::new(()),
            inited: AtomicBool::new(false),
            af_ib: AtomicBool::new(false),
            devices: Mutex::new(Devices::default()),
            live: Live::default(),
        }
    }

    /// The live channel of this instance C knows by `p`, or EINVAL.
    #[inline]
    pub fn channel(&self, p: *const rdma_event_channel) -> Result<Arc<Channel>, Errno> {
        self.live.channels.get(p as usize).ok_or(Errno::EINVAL)
    }

    /// The live id of this instance C knows by `p`, or EINVAL.  The clone
    /// keeps the id's memory valid while the caller holds it.
    #[inline]
    pub fn id(&self, p: *const rdma_cm_id) -> Result<Arc<IdPriv>, Errno> {
        self.live.ids.get(p as usize).ok_or(Errno::EINVAL)
    }

    /// The connection parameters of an unacked event of this instance (a
    /// synchronous call's parked event, `id->event`) and a copy of its
    /// private data; None for an event that is not ours or not live.
    pub fn event_conn(&self, p: *const rdma_cm_event) -> Option<(rdma_conn_param, Vec<u8>)> {
        self.live.events.with(p as usize, |e| {
            let c = e.event.conn();
            let n = (c.private_data_len as usize).min(e.private_data.len());
            let data = if c.private_data.is_null() { Vec::new() } else { e.private_data[..n].to_vec() };
            (c, data)
        })
    }

    /// Whether `p` is an event of this instance not acked yet.
    pub fn event_is_live(&self, p: *const rdma_cm_event) -> bool {
        self.live.events.contains(p as usize)
    }

    /// Registers an id, so that the C boundary and the event loop find it;
    /// ENOMEM when memory is short.
    #[inline]
    fn register_id(&self, p: &Arc<IdPriv>) -> Result<(), Errno> {
        // A new id (also an adopted one: a new allocation too).
        self.live.ids.insert_new(p.clone())
    }

    /// Whether the AF_IB-capable command family is in use (after init).
    pub fn af_ib(&self) -> bool {
        self.af_ib.load(Ordering::Acquire)
    }

    /// One-time initialisation: ABI version (EPERM outside 3..4), device
    /// list (ENODEV when empty), AF_IB probe.  Retried until it succeeds.
    #[inline]
    pub fn init(&'static self) -> Result<(), Errno> {
        if self.inited.load(Ordering::Acquire) {
            return Ok(());
        }
        self.init_slow()
    }

    #[cold]
    #[inline(never)]
    fn init_slow(&'static self) -> Result<(), Errno> {
        // First use reads sysfs and netlink: no cancellation acts in it.
        let _nc = crate::sys::cancel::NoCancel::new();
        let _g = self.init_lock.lock();
        if self.inited.load(Ordering::Acquire) {
            return Ok(());
        }
        let abi = self.ucma.abi_version().unwrap_or(kabi::UCMA_MAX_ABI);
        if !(kabi::UCMA_MIN_ABI..=kabi::UCMA_MAX_ABI).contains(&abi) {
            log::debug!(target: "rdmacm", "ucma ABI version {abi} not supported");
            return Err(Errno::EPERM);
        }
        self.devices.lock().sync(&*self.verbs)?;
        // RDMACM_RS_FORCE_LEGACY_UCMA (a test hook) keeps the legacy
        // command family even on kernels that take AF_IB.
        let af_ib = crate::sys::env::var(c"RDMACM_RS_FORCE_LEGACY_UCMA").is_none() && self.probe_af_ib();
        log::debug!(target: "rdmacm", "ucma ABI {abi}, AF_IB support {af_ib}");
        self.af_ib.store(af_ib, Ordering::Release);
        self.inited.store(true, Ordering::Release);
        Ok(())
    }

    /// Creates a synchronous IB-port-space id and binds an AF_IB wildcard
    /// address: the kernel's answer tells which command family to use.
    fn probe_af_ib(&'static self) -> bool {
        let Ok(p) = self.create_id_inner(None, null_mut(), RDMA_PS_IB, IBV_QPT_RC) else { return false };
        let sib = sockaddr_ib {
            sib_family: AF_IB as u16,
            sib_sid: RDMA_IB_IP_PS_TCP.to_be(),
            sib_sid_mask: RDMA_IB_IP_PS_MASK.to_be(),
            ..Default::default()
        };
        let ok = self.bind_inner(&p, &SockAddr::from_ib(&sib), true).is_ok();
        let _ = self.destroy_id(&p);
        ok
    }

    // --- channels -----------------------------------------------------------

    fn open_channel(&'static self) -> Result<Arc<Channel>, Errno> {
        let fd = self.ucma.open()?;
        // Out of memory, the descriptor goes back (upstream: ENOMEM).
        let ch = match alloc::try_arc(Channel { ch: rdma_event_channel { fd }, readers: Default::default(), cm: self }) {
            Ok(ch) => ch,
            Err(e) => {
                self.ucma.close(fd);
                return Err(e);
            }
        };
        if let Err(e) = self.live.channels.insert(ch.clone()) {
            self.ucma.close(fd);
            return Err(e);
        }
        Ok(ch)
    }

    /// `rdma_create_event_channel`.
    pub fn create_channel(&'static self) -> Result<Arc<Channel>, Errno> {
        self.init()?;
        self.open_channel()
    }

    /// `rdma_destroy_event_channel`: unregisters the channel and closes
    /// its fd (the memory goes with the last reference).
    pub fn destroy_channel(&self, ch: &Channel) {
        if self.live.channels.remove(ch.raw() as usize).is_some() {
            self.ucma.close(ch.fd());
        }
    }

    // --- ids ------------------------------------------------------------------

    /// `rdma_create_id`: no channel selects synchronous mode.
    pub fn create_id(&'static self, ch: Option<&Arc<Channel>>, context: *mut c_void, ps: rdma_port_space) -> Result<Arc<IdPriv>, Errno> {
        self.init()?;
        let qp_type = if ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP { IBV_QPT_UD } else { IBV_QPT_RC };
        self.create_id_inner(ch, context, ps, qp_type)
    }

    /// Creates an id with an explicit QP type (also used by the endpoint
    /// and connection code).
    pub fn create_id_inner(&'static self, ch: Option<&Arc<Channel>>, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type) -> Result<Arc<IdPriv>, Errno> {
        let opened;
        let (ch, sync) = match ch {
            Some(c) => (c, false),
            None => {
                opened = self.open_channel()?;
                (&opened, true)
            }
        };
        let p = match self.new_id_priv(ch.clone(), context, ps, qp_type, u32::MAX, sync) {
            Ok(p) => p,
            Err(e) => {
                if sync {
                    self.destroy_channel(&ch);
                }
                return Err(e);
            }
        };
        match self.ucma.create_id(ch.fd(), p.uid(), ps as u16, qp_type as u8) {
            Ok(h) => {
                p.handle.store(h, Ordering::Release);
                if let Err(e) = self.register_id(&p) {
                    // Not published: the kernel id goes, then ours.
                    let _ = self.ucma.destroy_id(ch.fd(), h);
                    self.free_id(&p);
                    return Err(e);
                }
                Ok(p)
            }
            Err(e) => {
                self.free_id(&p);
                Err(e)
            }
        }
    }

    /// An id for a kernel id that already exists (the new connection of a
    /// connection request), on channel `ch`.
    /// ENOMEM when memory is short (the caller still owns the kernel id).
    pub fn adopt_id(&'static self, ch: Arc<Channel>, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type, handle: u32) -> Result<Arc<IdPriv>, Errno> {
        let p = self.new_id_priv(ch, context, ps, qp_type, handle, false)?;
        if let Err(e) = self.register_id(&p) {
            self.free_id(&p);
            return Err(e);
        }
        Ok(p)
    }

    /// A new, unregistered id on channel `ch`.
    fn new_id_priv(&'static self, ch: Arc<Channel>, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type, handle: u32, sync: bool) -> Result<Arc<IdPriv>, Errno> {
        public::try_new_id(ch, context, ps, qp_type, handle, sync)
    }

    /// Releases what an id holds and unregisters it; the memory goes with
    /// the last `Arc`.
    fn free_id(&self, p: &Arc<IdPriv>) {
        let mcs: Option<Vec<Arc<Mc>>> = {
            let mut g = p.mcs.lock();
            if g.is_empty() { None } else { Some(std::mem::take(&mut *g)) }
        };
        self.live.ids.remove(p.raw() as usize);
        // Memberships left in place are released with the id, as the
        // kernel drops them too.
        for mc in mcs.iter().flatten() {
            self.live.mcs.remove(Arc::as_ptr(mc) as usize);
        }
        let dev = p.links.lock().dev.take();
        if let Some(d) = dev {
            self.devices.lock().put(&*self.verbs, d.key);
        }
        p.id.free_paths();
        if p.sync.load(Ordering::Acquire) {
            // A synchronous id owns its channel.
            self.destroy_channel(&p.channel());
        }
    }

    /// Acks the event parked in a synchronous id's `id->event`, if any.
    fn ack_parked(&self, p: &IdPriv) {
        let ev = p.id.event();
        if !ev.is_null() {
            p.id.set_event(null_mut());
            ack_event(self, ev);
        }
    }

    /// `rdma_destroy_id`: waits until every event reported for the id has
    /// been acked (a parked synchronous event is acked here).
    /// A thread cancelled in that wait ends without freeing the id (the
    /// kernel's id is gone): a later `rdma_destroy_id` of it waits again
    /// and frees it.
    pub fn destroy_id(&self, p: &Arc<IdPriv>) -> Result<(), Errno> {
        let reported = match p.acks.pending() {
            Some(n) => n,
            None => {
                // A name lookup still running queues no event for the id from here on.
                self.cancel_addrinfo(p);
                let n = self.ucma.destroy_id(p.fd(), p.handle())?;
                self.ack_parked(p);
                n
            }
        };
        if let Err(e) = p.acks.wait(reported) {
            p.acks.set_pending(reported);
            return Err(e);
        }
        self.free_id(p);
        Ok(())
    }

    /// `rdma_migrate_id`: moves the id to `ch`, or to a new private channel
    /// (synchronous mode) when `ch` is None.
    pub fn migrate_id(&'static self, p: &Arc<IdPriv>, ch: Option<&Arc<Channel>>) -> Result<(), Errno> {
        let was_sync = p.sync.load(Ordering::Acquire);
        if was_sync && ch.is_none() {
            return Err(Errno::EINVAL);
        }
        let (ch, new_sync) = match ch {
            Some(c) => (c.clone(), false),
            None => (self.open_channel()?, true),
        };
        let reported = match self.ucma.migrate_id(ch.fd(), p.handle(), p.fd()) {
            Ok(n) => n,
            Err(e) => {
                if new_sync {
                    // The channel was opened above and is unused.
                    self.destroy_channel(&ch);
                }
                return Err(e);
            }
        };
        if was_sync {
            self.ack_parked(p);
            self.destroy_channel(&p.channel());
        }
        // The channel is replaced under the id's lock, as upstream.
        p.acks.wait_with(reported, || {
            p.sync.store(new_sync, Ordering::Release);
            p.id.set_channel(ch.raw());
            p.fd.store(ch.fd(), Ordering::Release);
            p.links.lock().channel = ch;
        })
    }

    /// `rdma_set_option`: `optval` is handed to the kernel, which
    /// validates it (EFAULT when unreadable).
    pub fn set_option(&self, p: &IdPriv, level: i32, optname: i32, optval: *mut c_void, optlen: usize) -> Result<(), Errno> {
        self.ucma.set_option(p.fd(), p.handle(), level as u32, optname as u32, optval, optlen as u32)
    }

    /// `rdma_write_cm_event`: only user events may be queued.
    pub fn write_cm_event(&self, p: &IdPriv, event: u32, status: i32, arg: u64) -> Result<(), Errno> {
        if event != RDMA_CM_EVENT_USER {
            return Err(Errno::EINVAL);
        }
        self.ucma.write_cm_event(p.fd(), p.handle(), event, status, arg)
    }

    // --- addresses --------------------------------------------------------------

    /// `rdma_bind_addr`.
    ///
    /// The address goes to the kernel at its own length: callers starting
    /// from a socket address cut it with [`SockAddr::for_cm`] first;
    /// `rdma_create_ep` passes its `rdma_addrinfo`'s length, as upstream.
    pub fn bind(&self, p: &IdPriv, addr: Option<SockAddr>) -> Result<(), Errno> {
        let addr = addr.filter(|a| !a.is_empty()).ok_or(Errno::EINVAL)?;
        self.bind_inner(p, &addr, self.af_ib())
    }

    fn bind_inner(&self, p: &IdPriv, addr: &SockAddr, af_ib: bool) -> Result<(), Errno> {
        let (fd, h) = (p.fd(), p.handle());
        log::debug!(target: "rdmacm", "bind: id {h} {} command to the kernel", if af_ib { "BIND (AF_IB-capable)" } else { "BIND_IP (legacy)" });
        if af_ib {
            self.ucma.bind(fd, h, addr)?;
            self.query_addr(p)?;
            self.query_gid(p)
        } else {
            self.ucma.bind_ip(fd, h, addr)?;
            self.query_route(p)
        }
    }

    /// `rdma_resolve_addr`.
    /// (Addresses at their own length, as for [`Cm::bind`].)
    pub fn resolve_addr(&'static self, p: &IdPriv, src: Option<SockAddr>, dst: Option<SockAddr>, timeout_ms: i32) -> Result<(), Errno> {
        let dst = dst.filter(|a| !a.is_empty()).ok_or(Errno::EINVAL)?;
        if matches!(src, Some(s) if s.is_empty()) {
            return Err(Errno::EINVAL);
        }
        let (fd, h) = (p.fd(), p.handle());
        log::debug!(target: "rdmacm", "resolve_addr: id {h} {} command to the kernel, timeout {timeout_ms} ms", if self.af_ib() { "RESOLVE_ADDR (AF_IB-capable)" } else { "RESOLVE_IP (legacy)" });
        if self.af_ib() {
            self.ucma.resolve_addr(fd, h, src.as_ref(), &dst, timeout_ms as u32)?;
        } else {
            self.ucma.resolve_ip(fd, h, src.as_ref(), &dst, timeout_ms as u32)?;
        }
        p.id.set_dst(dst.as_bytes());
        self.complete(p)
    }

    /// `rdma_resolve_route`.
    pub fn resolve_route(&'static self, p: &IdPriv, timeout_ms: i32) -> Result<(), Errno> {
        // Upstream first asks ibacm for a route on InfiniBand devices; without
        // an ibacm answer it falls back to the kernel, which is what we do.
        log::debug!(target: "rdmacm", "resolve_route: id {} RESOLVE_ROUTE command to the kernel (no ibacm), timeout {timeout_ms} ms", p.handle());
        self.ucma.resolve_route(p.fd(), p.handle(), timeout_ms as u32)?;
        self.complete(p)
    }

    /// In synchronous mode, acks the parked event, waits for the next one,
    /// parks it in `id->event` and turns its status into the errno.
    pub fn complete(&'static self, p: &IdPriv) -> Result<(), Errno> {
        if !p.sync.load(Ordering::Acquire) {
            return Ok(());
        }
        self.ack_parked(p);
        let got = get_event(&p.channel())?;
        p.id.set_event(got.ptr);
        if got.status == 0 {
            Ok(())
        } else if got.event == RDMA_CM_EVENT_REJECTED {
            Err(Errno::ECONNREFUSED)
        } else if got.status < 0 {
            Err(crate::sys::errno_from_raw(got.status.wrapping_neg()))
        } else {
            Err(crate::sys::errno_from_raw(got.status))
        }
    }

    // --- queries ----------------------------------------------------------------

    fn attach_device(&self, p: &IdPriv, guid: u64, index: Option<u32>) -> Result<(), Errno> {
        log::debug!(target: "rdmacm", "device: id {} takes the device the kernel chose, node GUID {:016x}, kernel index {index:?}", p.handle(), u64::from_be(guid));
        let d = self.devices.lock().get(&*self.verbs, guid, index)?;
        p.id.set_verbs(d.verbs.0);
        p.id.set_pd(d.pd.0);
        p.links.lock().dev = Some(d);
        Ok(())
    }

    pub(crate) fn query_addr(&self, p: &IdPriv) -> Result<(), Errno> {
        let a = self.ucma.query_addr(p.fd(), p.handle())?;
        p.id.set_src(a.src.as_bytes());
        p.id.set_dst(a.dst.as_bytes());
        if p.links.lock().dev.is_none() && a.node_guid != 0 {
            self.attach_device(p, a.node_guid, a.ibdev_index)?;
            p.id.set_port_num(a.port_num);
            p.id.set_pkey(a.pkey);
        }
        Ok(())
    }

    pub(crate) fn query_gid(&self, p: &IdPriv) -> Result<(), Errno> {
        let a = self.ucma.query_gid(p.fd(), p.handle())?;
        // The GIDs are the sib_addr of the two sockaddr_ib.
        p.id.set_gids(a.src.ib_image().sib_addr.sib_raw, a.dst.ib_image().sib_addr.sib_raw);
        Ok(())
    }

    pub(crate) fn query_path(&self, p: &IdPriv) -> Result<(), Errno> {
        let paths = self.ucma.query_path(p.fd(), p.handle())?;
        let recs: Vec<ibv_sa_path_rec> = paths.iter().map(proto::path_from_data).collect();
        p.id.set_paths(&recs)
    }

    pub(crate) fn query_route(&self, p: &IdPriv) -> Result<(), Errno> {
        let r = self.ucma.query_route(p.fd(), p.handle())?;
        let recs: Vec<ibv_sa_path_rec> = r.paths[..r.num_paths as usize].iter().map(proto::path_from_kern).collect();
        p.id.set_paths(&recs)?;
        p.id.set_gids(r.paths[0].sgid, r.paths[0].dgid);
        p.id.set_pkey(r.paths[0].pkey);
        // sockaddr_in6-sized, whatever the family, as upstream copies them.
        p.id.set_src(r.src.as_bytes());
        p.id.set_dst(r.dst.as_bytes());
        if p.links.lock().dev.is_none() && r.node_guid != 0 {
            self.attach_device(p, r.node_guid, r.ibdev_index)?;
            p.id.set_port_num(r.port_num);
        }
        Ok(())
    }

    // --- events -------------------------------------------------------------------

    fn process_addr_resolved(&self, p: &IdPriv, evt: &mut EventPriv) {
        let r = if self.af_ib() {
            self.query_addr(p).and_then(|_| {
                if p.id.verbs().is_null() {
                    Err(Errno::ENODEV)
                } else if self.verbs.transport_is_ib(p.id.verbs() as usize) {
                    self.query_gid(p)
                } else {
                    Ok(())
                }
            })
        } else {
            self.query_route(p).and_then(|_| if p.id.verbs().is_null() { Err(Errno::ENODEV) } else { Ok(()) })
        };
        evt.event.0.status = 0;
        if let Err(e) = r {
            // Upstream stores its helpers' -1 here, not the errno.
            log::debug!(target: "rdmacm", "address resolved, but querying it failed: {e}");
            evt.event.0.status = -1;
            evt.event.0.event = RDMA_CM_EVENT_ADDR_ERROR;
        }
    }

    fn process_route_resolved(&self, p: &IdPriv, evt: &mut EventPriv) {
        if !self.verbs.transport_is_ib(p.id.verbs() as usize) {
            return;
        }
        let r = if self.af_ib() { self.query_path(p) } else { self.query_route(p) };
        evt.event.0.status = 0;
        if let Err(e) = r {
            log::debug!(target: "rdmacm", "route resolved, but querying it failed: {e}");
            evt.event.0.status = -1;
            evt.event.0.event = RDMA_CM_EVENT_ROUTE_ERROR;
        }
    }

    /// The live id the kernel reports by `uid` (its address) or, for old
    /// kernels' uid 0, by handle.
    fn reported_id(&self, uid: u64, handle: u32) -> Option<Arc<IdPriv>> {
        if uid != 0 {
            self.live.ids.get(uid as usize)
        } else {
            // Rare (a bug of old kernels): searched, not indexed (see Live).
            self.live.ids.find(|p| p.handle() == handle)
        }
    }

    /// The live membership the kernel reports by `uid` (its address).
    fn reported_mc(&self, uid: u64) -> Option<Arc<Mc>> {
        self.live.mcs.get(uid as usize)
    }

    /// Registers a membership so that its events find it (ENOMEM when
    /// memory is short).
    pub(crate) fn register_mc(&self, mc: &Arc<Mc>) -> Result<(), Errno> {
        self.live.mcs.insert(mc.clone())
    }

    /// Unregisters a membership.
    pub(crate) fn unregister_mc(&self, mc: &Arc<Mc>) {
        self.live.mcs.remove(Arc::as_ptr(mc) as usize);
    }
}

fn copy_conn(evt: &mut EventPriv, src: &kabi::ConnParam) {
    let len = src.private_data_len;
    let pd = if len > 0 {
        evt.private_data[..len as usize].copy_from_slice(&src.private_data[..len as usize]);
        evt.private_data.as_ptr() as *const c_void
    } else {
        ptr::null()
    };
    evt.event.0.param.conn = rdma_conn_param {
        private_data: pd,
        private_data_len: len,
        responder_resources: src.responder_resources,
        initiator_depth: src.initiator_depth,
        flow_control: src.flow_control,
        retry_count: src.retry_count,
        rnr_retry_count: src.rnr_retry_count,
        srq: src.srq,
        qp_num: src.qp_num,
    };
}

fn copy_ud(evt: &mut EventPriv, src: &kabi::UdParam) {
    let len = src.private_data_len;
    let pd = if len > 0 {
        evt.private_data[..len as usize].copy_from_slice(&src.private_data[..len as usize]);
        evt.private_data.as_ptr() as *const c_void
    } else {
        ptr::null()
    };
    let a = &src.ah_attr;
    evt.event.0.param.ud = rdma_ud_param {
        private_data: pd,
        private_data_len: len,
        ah_attr: ibv_ah_attr {
            grh: ibv_global_route {
                dgid: ibv_gid { raw: a.grh.dgid },
                flow_label: a.grh.flow_label,
                sgid_index: a.grh.sgid_index,
                hop_limit: a.grh.hop_limit,
                traffic_class: a.grh.traffic_class,
            },
            dlid: a.dlid,
            sl: a.sl,
            src_path_bits: a.src_path_bits,
            static_rate: a.static_rate,
            is_global: a.is_global,
            port_num: a.port_num,
        },
        qp_num: src.qp_num,
        qkey: src.qkey,
    };
}

/// `rdma_get_cm_event`: blocks for the channel's next event and completes
/// the library's part of it (address and route queries, parameters).  No
/// lock is held while the kernel read blocks.
pub fn get_event(ch: &Channel) -> Result<Got, Errno> {
    let (cm, fd) = (ch.cm, ch.fd());
    cm.init()?;
    // Zeroed once, as upstream: the kernel writes all of it for each event.
    let mut resp = kabi::EventResp::default();
    // The event's memory, and room for it in the registry, before the
    // kernel hands the event over: out of memory, the call fails with
    // ENOMEM and the event stays queued in the kernel (as upstream, which
    // allocates its event first).
    let mut evt = public::try_new_event()?;
    cm.live.events.reserve_for(&evt.event.0 as *const rdma_cm_event as usize)?;
    let mut first = true;
    loop {
        // The wait for the kernel's next event: a cancellation of the
        // thread is acted on there (ECANCELED; the event stays queued).
        let alone = ch.readers.fetch_add(1, Ordering::Relaxed) == 0;
        let r = cm.ucma.wait_event_into(fd, &mut resp, alone);
        ch.readers.fetch_sub(1, Ordering::Relaxed);
        r?;
        // A new event is clean; one left by a discarded event is cleared
        // (upstream clears its event before each read).
        if !first {
            evt.reset();
        }
        first = false;
        evt.event.0.event = resp.event;
        let mcast = matches!(resp.event, RDMA_CM_EVENT_MULTICAST_JOIN | RDMA_CM_EVENT_MULTICAST_ERROR);
        let mc = if mcast && resp.uid != 0 { cm.reported_mc(resp.uid) } else { None };
        let p: Arc<IdPriv> = if mcast && resp.uid != 0 {
            // The uid of a multicast event is the membership.
            let Some(p) = mc.as_ref().and_then(|m| m.id.upgrade()) else {
                log::debug!(target: "rdmacm", "discarding an event for an unknown membership");
                continue;
            };
            p
        } else if resp.uid != 0 {
            let Some(p) = cm.reported_id(resp.uid, resp.id) else {
                log::debug!(target: "rdmacm", "discarding an event for an unknown id {}", resp.id);
                continue;
            };
            p
        } else {
            // Old kernels could report uid 0; find the id by handle.
            let Some(p) = cm.reported_id(0, resp.id) else {
                log::debug!(target: "rdmacm", "discarding an event for an unknown id {}", resp.id);
                continue;
            };
            if resp.event != RDMA_CM_EVENT_ESTABLISHED {
                p.complete_event();
                continue;
            }
            p
        };
        // The kernel reports ids we created and have not freed (destroy
        // waits for every reported event to be acked).
        evt.event.0.id = p.raw();
        evt.event.0.status = resp.status as i32;
        let ud = p.id.qp_type() == IBV_QPT_UD;
        match resp.event {
            RDMA_CM_EVENT_ADDR_RESOLVED => cm.process_addr_resolved(&p, &mut evt),
            RDMA_CM_EVENT_ROUTE_RESOLVED => cm.process_route_resolved(&p, &mut evt),
            RDMA_CM_EVENT_USER => evt.event.0.param.arg = resp.arg(),
            RDMA_CM_EVENT_INTERNAL => {
                // The library's own events: the end of a DNS
                // rdma_resolve_addrinfo, which reads as ADDRINFO_RESOLVED,
                // or (a worker's lookup that failed, see ai) ADDRINFO_ERROR.
                if resp.arg() == u64::from(RDMA_CM_EVENT_ADDRINFO_ERROR) {
                    evt.event.0.event = RDMA_CM_EVENT_ADDRINFO_ERROR;
                    cm.process_addrinfo_error(&p);
                } else if resp.arg() != u64::from(RDMA_CM_EVENT_ADDRINFO_RESOLVED) {
                    p.complete_event();
                    return Err(Errno::EBADE);
                } else {
                    evt.event.0.event = RDMA_CM_EVENT_ADDRINFO_RESOLVED;
                    cm.process_addrinfo_resolved(&p, &mut evt)
                }
            }
            RDMA_CM_EVENT_ADDRINFO_RESOLVED => cm.process_addrinfo_resolved(&p, &mut evt),
            RDMA_CM_EVENT_ADDRINFO_ERROR => cm.process_addrinfo_error(&p),
            _ => {
                // Connection, multicast and removal events: parameters as
                // the kernel reports them, by the id's QP type; the
                // connection code (crate::cma::conn) completes them below.
                if ud {
                    copy_ud(&mut evt, resp.ud());
                } else {
                    copy_conn(&mut evt, resp.conn());
                }
            }
        }
        // The event holds the id from here on (the connection code reads
        // it there); `p` borrows it.
        let step = if let Some(mc) = mc {
            let _nc = crate::sys::cancel::NoCancel::new();
            conn::mcast::process_event(&resp, &mut evt, mc, &p);
            evt.id_priv = Some(p);
            conn::Step::Deliver
        } else {
            evt.id_priv = Some(p);
            conn::process_event(cm, &resp, &mut evt)
        };
        let p: &IdPriv = evt.id_priv.as_deref().expect("set just above");
        if step == conn::Step::Retry {
            p.complete_event();
            continue;
        }
        log::debug!(target: "rdmacm", "event {} status {} on id {} (kernel: {} status {})", events::event_name(evt.event.0.event).to_string_lossy(), evt.event.0.status, p.handle(), events::event_name(resp.event).to_string_lossy(), resp.status);
        let got = Got { ptr: &evt.event.0 as *const rdma_cm_event as *mut rdma_cm_event, event: evt.event.0.event, status: evt.event.0.status, id: evt.event.0.id };
        if let Err((e, evt)) = cm.live.events.try_insert_new(evt) {
            // The room reserved above was taken by another thread and
            // memory is short: the event cannot be handed out.
            log::debug!(target: "rdmacm", "dropping an event: {e}");
            if let Some(p) = &evt.id_priv {
                p.complete_event();
            }
            return Err(e);
        }
        return Ok(got);
    }
}

/// `rdma_ack_cm_event`: releases an event and counts it as completed.
/// Returns false, touching nothing, when `ev` is not an unacked event of
/// `cm` (a double ack, or an event the caller already released).
pub fn ack_event(cm: &Cm, ev: *mut rdma_cm_event) -> bool {
    let Some(evt) = cm.live.events.remove(ev as usize) else { return false };
    if let Some(mc) = &evt.mc {
        mc.acks.add();
    }
    if let Some(p) = &evt.id_priv {
        p.complete_event();
    }
    true
}

/// `rdma_get_devices`: the open device contexts (each holds a reference
/// until [`free_devices`]).
pub fn get_devices(cm: &'static Cm) -> Result<Vec<*mut ibv_context>, Errno> {
    cm.init()?;
    let mut devs = cm.devices.lock();
    devs.sync(&*cm.verbs)?;
    for d in devs.list.iter_mut() {
        if d.dead {
            continue;
        }
        if Devices::open(&*cm.verbs, d).is_err() {
            d.dead = true;
        }
    }
    Ok(devs
        .list
        .iter_mut()
        .filter(|d| !d.dead)
        .map(|d| {
            d.refcnt += 1;
            d.verbs.0
        })
        .collect())
}

/// `rdma_free_devices`: drops the references of a list from
/// [`get_devices`].
pub fn free_devices(cm: &'static Cm, list: &[*mut ibv_context]) {
    let mut devs = cm.devices.lock();
    for &ctx in list {
        let hit = devs.list.iter_mut().find(|d| d.verbs.0 == ctx).map(|d| {
            d.refcnt = d.refcnt.saturating_sub(1);
            (d.dead && d.refcnt == 0, d.dev)
        });
        if let Some((true, dev)) = hit {
            devs.remove(&*cm.verbs, dev);
        }
    }
}

#[cfg(test)]
mod tests;
