// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The connection manager core over the kernel's ucma device: event
//! channels, ids, events, devices, bind, address and route resolution.
//!
//! Layout of the state that C sees:
//! - an event channel is a [`Channel`] whose first field is the public
//!   `struct rdma_event_channel`;
//! - an id is an [`IdPriv`] whose first field is the public
//!   `struct rdma_cm_id` (C gets `&id_priv.id`; we get back by a cast,
//!   container_of style);
//! - an event is an [`EventPriv`] whose first field is the public
//!   `struct rdma_cm_event`, stable in memory until it is acked.
//!
//! The kernel protocol is behind [`crate::sys::ucma::Ucma`] and libibverbs behind
//! [`device::Verbs`], so the whole core runs against test doubles.

pub mod api;
pub mod device;
pub mod ai;
pub mod conn;
pub mod events;


use crate::abi::cma::*;
use crate::abi::ucma as kabi;
use device::{CmDevice, Devices, SysVerbs, Verbs};
use nix::errno::Errno;
use once_cell::sync::Lazy;
use parking_lot::{Condvar, Mutex};
use crate::sys::ucma::{self as proto, Kernel, RawAddr, Ucma};
use std::cell::UnsafeCell;
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::ptr::{self, null_mut};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

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
    /// Kernel id handle -> IdPriv address, for events without a uid.
    handles: Mutex<HashMap<u32, usize>>,
    /// Every live channel, id and unacked event of this instance, so that
    /// the C boundary can reject pointers that are not (or no longer) ours
    /// with EINVAL instead of following them.
    live: Mutex<Live>,
}

#[derive(Default)]
struct Live {
    channels: HashSet<usize>,
    ids: HashSet<usize>,
    events: HashSet<usize>,
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
    pub cm: &'static Cm,
}

/// Connection-related private state, kept for the connection functions.
#[derive(Default)]
pub struct ConnState {
    /// Connect data (AF_IB private-data header), if any.
    pub connect: Vec<u8>,
    pub connect_error: bool,
    pub initiator_depth: u8,
    pub responder_resources: u8,
}

/// The private state of an id; `id` must stay the first field.
#[repr(C)]
pub struct IdPriv {
    /// The public id.  C reads (and a few fields it writes) concurrently,
    /// so it is only ever reached through raw pointers ([`IdPriv::raw`]).
    pub id: UnsafeCell<rdma_cm_id>,
    pub cm: &'static Cm,
    /// The kernel's handle for this id.
    pub handle: u32,
    /// Synchronous mode: the id owns a private channel and every operation
    /// waits for its event.
    pub sync: AtomicBool,
    /// The device the id is bound to (reference held), or NULL.
    pub dev: AtomicPtr<CmDevice>,
    /// Events acked so far, and the condition destroy/migrate wait on.
    completed: Mutex<u32>,
    cond: Condvar,
    pub conn: Mutex<ConnState>,
    /// rdma_resolve_addrinfo state (see [`ai`]).
    pub ai: Mutex<ai::AiSlot>,
}

/// An event handed to C; `event` must stay the first field.
#[repr(C)]
pub struct EventPriv {
    pub event: rdma_cm_event,
    pub private_data: [u8; kabi::RDMA_MAX_PRIVATE_DATA],
    pub id_priv: *mut IdPriv,
    /// The multicast membership of a multicast event (later work).
    pub mc: *mut c_void,
}

fn zeroed_event() -> Box<EventPriv> {
    // SAFETY: EventPriv is plain data (integers, raw pointers, unions of
    // those); all-zero is a valid value.
    Box::new(unsafe { std::mem::zeroed() })
}

/// Socket address sizes by family, as upstream's `ucma_addrlen`.
pub fn addr_len(family: i32, af_ib: bool) -> usize {
    match family {
        libc::AF_INET => std::mem::size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => std::mem::size_of::<libc::sockaddr_in6>(),
        AF_IB if af_ib => std::mem::size_of::<sockaddr_ib>(),
        _ => 0,
    }
}

impl IdPriv {
    /// Recovers the private state from the public id.
    ///
    /// # Safety
    /// `id` must come from [`Cm::create_id`] and not be destroyed.
    pub unsafe fn from_id(id: *mut rdma_cm_id) -> *mut IdPriv {
        id as *mut IdPriv
    }

    /// The public id of `p` (same address).
    pub fn raw(p: *const IdPriv) -> *mut rdma_cm_id {
        p as *mut rdma_cm_id
    }

    /// The fd of the id's current channel.
    ///
    /// # Safety
    /// `p` must be a live id.
    pub unsafe fn fd(p: *const IdPriv) -> i32 {
        // SAFETY: a live id always has a live channel.
        unsafe { (*(*IdPriv::raw(p)).channel).fd }
    }

    pub(crate) fn complete_event(&self) {
        let mut n = self.completed.lock();
        *n += 1;
        self.cond.notify_all();
    }

    fn wait_completed(&self, reported: u32) {
        let mut n = self.completed.lock();
        while *n < reported {
            self.cond.wait(&mut n);
        }
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
            handles: Mutex::new(HashMap::new()),
            live: Mutex::new(Live::default()),
        }
    }

    /// Whether `p` is a live channel of this instance.
    pub fn channel_is_live(&self, p: *const Channel) -> bool {
        self.live.lock().channels.contains(&(p as usize))
    }

    /// Whether `p` is a live id of this instance.
    pub fn id_is_live(&self, p: *const IdPriv) -> bool {
        self.live.lock().ids.contains(&(p as usize))
    }

    /// Whether `p` is an event of this instance not acked yet.
    pub fn event_is_live(&self, p: *const EventPriv) -> bool {
        self.live.lock().events.contains(&(p as usize))
    }

    /// Registers an id created outside [`Cm::create_id_inner`] (for
    /// example, one the connection code makes for a connection request),
    /// so that the C boundary accepts it.
    pub fn register_id(&self, p: *mut IdPriv) {
        self.live.lock().ids.insert(p as usize);
    }

    /// Whether the AF_IB-capable command family is in use (after init).
    pub fn af_ib(&self) -> bool {
        self.af_ib.load(Ordering::Acquire)
    }

    /// One-time initialisation: ABI version (EPERM outside 3..4), device
    /// list (ENODEV when empty), AF_IB probe.  Retried until it succeeds.
    pub fn init(&'static self) -> Result<(), Errno> {
        if self.inited.load(Ordering::Acquire) {
            return Ok(());
        }
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
        let af_ib = std::env::var_os("RDMACM_RS_FORCE_LEGACY_UCMA").is_none() && self.probe_af_ib();
        log::debug!(target: "rdmacm", "ucma ABI {abi}, AF_IB support {af_ib}");
        self.af_ib.store(af_ib, Ordering::Release);
        self.inited.store(true, Ordering::Release);
        Ok(())
    }

    /// Creates a synchronous IB-port-space id and binds an AF_IB wildcard
    /// address: the kernel's answer tells which command family to use.
    fn probe_af_ib(&'static self) -> bool {
        let Ok(p) = self.create_id_inner(null_mut(), null_mut(), RDMA_PS_IB, IBV_QPT_RC) else { return false };
        let sib = sockaddr_ib {
            sib_family: AF_IB as u16,
            sib_sid: RDMA_IB_IP_PS_TCP.to_be(),
            sib_sid_mask: RDMA_IB_IP_PS_MASK.to_be(),
            ..Default::default()
        };
        // SAFETY: sockaddr_ib is plain data of 48 bytes.
        let bytes = unsafe { std::slice::from_raw_parts(&sib as *const _ as *const u8, std::mem::size_of::<sockaddr_ib>()) };
        // SAFETY: p was just created and is destroyed right after.
        let ok = unsafe { self.bind_inner(p, &RawAddr::from_slice(bytes), true) }.is_ok();
        // SAFETY: as above.
        let _ = unsafe { self.destroy_id(p) };
        ok
    }

    // --- channels -----------------------------------------------------------

    fn open_channel(&'static self) -> Result<*mut Channel, Errno> {
        let fd = self.ucma.open()?;
        let p = Box::into_raw(Box::new(Channel { ch: rdma_event_channel { fd }, cm: self }));
        self.live.lock().channels.insert(p as usize);
        Ok(p)
    }

    /// `rdma_create_event_channel`.
    pub fn create_channel(&'static self) -> Result<*mut Channel, Errno> {
        self.init()?;
        self.open_channel()
    }

    /// `rdma_destroy_event_channel`.
    ///
    /// # Safety
    /// `ch` must come from [`Cm::create_channel`] and have no ids left.
    pub unsafe fn destroy_channel(ch: *mut Channel) {
        // SAFETY: per the contract, ch is a live boxed Channel we own now.
        let ch = unsafe { Box::from_raw(ch) };
        ch.cm.live.lock().channels.remove(&(&*ch as *const Channel as usize));
        ch.cm.ucma.close(ch.ch.fd);
    }

    // --- ids ------------------------------------------------------------------

    /// `rdma_create_id`: a NULL channel selects synchronous mode.
    ///
    /// # Safety
    /// `ch` must be NULL or a live channel.
    pub unsafe fn create_id(&'static self, ch: *mut Channel, context: *mut c_void, ps: rdma_port_space) -> Result<*mut IdPriv, Errno> {
        self.init()?;
        let qp_type = if ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP { IBV_QPT_UD } else { IBV_QPT_RC };
        self.create_id_inner(ch, context, ps, qp_type)
    }

    /// Creates an id with an explicit QP type (also used by the endpoint
    /// and connection code).
    pub fn create_id_inner(&'static self, ch: *mut Channel, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type) -> Result<*mut IdPriv, Errno> {
        let (ch, sync) = if ch.is_null() { (self.open_channel()?, true) } else { (ch, false) };
        let p = self.new_id_priv(ch, context, ps, qp_type, u32::MAX, sync);
        // SAFETY: ch is live (ours or the caller's).
        let fd = unsafe { (*ch).ch.fd };
        match self.ucma.create_id(fd, p as usize as u64, ps as u16, qp_type as u8) {
            Ok(h) => {
                // SAFETY: p is not shared yet.
                unsafe { (*p).handle = h };
                self.handles.lock().insert(h, p as usize);
                self.register_id(p);
                Ok(p)
            }
            Err(e) => {
                // SAFETY: p was never published.
                unsafe { self.free_id(p) };
                Err(e)
            }
        }
    }

    /// An id for a kernel id that already exists (the new connection of a
    /// connection request), on channel `ch`.
    ///
    /// # Safety
    /// `ch` must be a live channel; `handle` a kernel id of it.
    pub unsafe fn adopt_id(&'static self, ch: *mut Channel, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type, handle: u32) -> *mut IdPriv {
        let p = self.new_id_priv(ch, context, ps, qp_type, handle, false);
        self.handles.lock().insert(handle, p as usize);
        self.register_id(p);
        p
    }

    /// A new, unregistered id on channel `ch`: the public part zeroed (as
    /// upstream's calloc) but for the fields the caller chose.
    fn new_id_priv(&'static self, ch: *mut Channel, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type, handle: u32, sync: bool) -> *mut IdPriv {
        // SAFETY: rdma_cm_id is plain data (pointers, integers, unions of
        // those); all-zero is its initial state.
        let mut id: rdma_cm_id = unsafe { std::mem::zeroed() };
        id.context = context;
        id.ps = ps;
        id.qp_type = qp_type;
        id.channel = ch as *mut rdma_event_channel;
        Box::into_raw(Box::new(IdPriv {
            id: UnsafeCell::new(id),
            cm: self,
            handle,
            sync: AtomicBool::new(sync),
            dev: AtomicPtr::new(null_mut()),
            completed: Mutex::new(0),
            cond: Condvar::new(),
            conn: Mutex::new(ConnState::default()),
            ai: Mutex::new(ai::AiSlot::default()),
        }))
    }

    unsafe fn free_id(&self, p: *mut IdPriv) {
        // SAFETY: the caller hands over a live id nobody else uses anymore.
        let b = unsafe { Box::from_raw(p) };
        self.live.lock().ids.remove(&(p as usize));
        crate::cma::conn::forget_id(p);
        {
            let mut h = self.handles.lock();
            if h.get(&b.handle) == Some(&(p as usize)) {
                h.remove(&b.handle);
            }
        }
        let dev = b.dev.load(Ordering::Acquire);
        if !dev.is_null() {
            self.devices.lock().put(&*self.verbs, dev);
        }
        let id = b.id.get();
        // SAFETY: we own the id now.
        let (path_rec, channel) = unsafe { ((*id).route.path_rec, (*id).channel) };
        if !path_rec.is_null() {
            // SAFETY: path_rec is always allocated with libc malloc.
            unsafe { libc::free(path_rec as *mut c_void) };
        }
        if b.sync.load(Ordering::Acquire) {
            // SAFETY: a synchronous id owns its channel.
            unsafe { Cm::destroy_channel(channel as *mut Channel) };
        }
    }

    /// `rdma_destroy_id`: waits until every event reported for the id has
    /// been acked (a parked synchronous event is acked here).
    ///
    /// # Safety
    /// `p` must be a live id; it is freed on success.
    pub unsafe fn destroy_id(&self, p: *mut IdPriv) -> Result<(), Errno> {
        // SAFETY: p is live.
        let reported = self.ucma.destroy_id(unsafe { IdPriv::fd(p) }, unsafe { (*p).handle })?;
        // SAFETY: p is live; the parked event belongs to it.
        let ev = unsafe { (*IdPriv::raw(p)).event };
        if !ev.is_null() {
            // SAFETY: ev is an unacked event of this id.
            unsafe {
                (*IdPriv::raw(p)).event = null_mut();
                ack_event((*p).cm, ev as *mut EventPriv);
            }
        }
        // SAFETY: p is live until free_id.
        unsafe { (*p).wait_completed(reported) };
        // SAFETY: no event of p is outstanding anymore.
        unsafe { self.free_id(p) };
        Ok(())
    }

    /// `rdma_migrate_id`: moves the id to `ch`, or to a new private channel
    /// (synchronous mode) when `ch` is NULL.
    ///
    /// # Safety
    /// `p` must be a live id, `ch` NULL or a live channel.
    pub unsafe fn migrate_id(&'static self, p: *mut IdPriv, ch: *mut Channel) -> Result<(), Errno> {
        // SAFETY: p is live.
        let idp = unsafe { &*p };
        let was_sync = idp.sync.load(Ordering::Acquire);
        if was_sync && ch.is_null() {
            return Err(Errno::EINVAL);
        }
        let (ch, new_sync) = if ch.is_null() { (self.open_channel()?, true) } else { (ch, false) };
        // SAFETY: p and ch are live.
        let (old_fd, new_fd) = unsafe { (IdPriv::fd(p), (*ch).ch.fd) };
        let reported = match self.ucma.migrate_id(new_fd, idp.handle, old_fd) {
            Ok(n) => n,
            Err(e) => {
                if new_sync {
                    // SAFETY: the channel was opened above and is unused.
                    unsafe { Cm::destroy_channel(ch) };
                }
                return Err(e);
            }
        };
        if was_sync {
            // SAFETY: p is live; the old channel is its own.
            unsafe {
                let ev = (*IdPriv::raw(p)).event;
                if !ev.is_null() {
                    (*IdPriv::raw(p)).event = null_mut();
                    ack_event((*p).cm, ev as *mut EventPriv);
                }
                Cm::destroy_channel((*IdPriv::raw(p)).channel as *mut Channel);
            }
        }
        let mut n = idp.completed.lock();
        idp.sync.store(new_sync, Ordering::Release);
        // SAFETY: p is live; the channel pointer is replaced under the
        // id's lock, as upstream.
        unsafe { (*IdPriv::raw(p)).channel = ch as *mut rdma_event_channel };
        while *n < reported {
            idp.cond.wait(&mut n);
        }
        Ok(())
    }

    /// `rdma_set_option`.
    ///
    /// # Safety
    /// `p` must be a live id; `optval` is handed to the kernel, which
    /// validates it (EFAULT when unreadable).
    pub unsafe fn set_option(&self, p: *mut IdPriv, level: i32, optname: i32, optval: *mut c_void, optlen: usize) -> Result<(), Errno> {
        // SAFETY: p is live.
        let (fd, h) = unsafe { (IdPriv::fd(p), (*p).handle) };
        self.ucma.set_option(fd, h, level as u32, optname as u32, optval, optlen as u32)
    }

    /// `rdma_write_cm_event`: only user events may be queued.
    ///
    /// # Safety
    /// `p` must be a live id.
    pub unsafe fn write_cm_event(&self, p: *mut IdPriv, event: u32, status: i32, arg: u64) -> Result<(), Errno> {
        if event != RDMA_CM_EVENT_USER {
            return Err(Errno::EINVAL);
        }
        // SAFETY: p is live.
        let (fd, h) = unsafe { (IdPriv::fd(p), (*p).handle) };
        self.ucma.write_cm_event(fd, h, event, status, arg)
    }

    // --- addresses --------------------------------------------------------------

    /// Reads a C socket address: `None` for NULL, an empty address (len 0)
    /// for a family the CM does not take.
    ///
    /// # Safety
    /// `sa` must be NULL or point to a socket address at least as large as
    /// its family's structure.
    pub unsafe fn read_addr(&self, sa: *const libc::sockaddr) -> Option<RawAddr> {
        if sa.is_null() {
            return None;
        }
        // SAFETY: sa points to at least a sockaddr header.
        let fam = unsafe { (*sa).sa_family } as i32;
        let len = addr_len(fam, self.af_ib());
        // SAFETY: per the contract, len bytes are readable for this family.
        let b = unsafe { std::slice::from_raw_parts(sa as *const u8, len) };
        Some(RawAddr::from_slice(b))
    }

    /// `rdma_bind_addr`.
    ///
    /// # Safety
    /// `p` must be a live id.
    pub unsafe fn bind(&self, p: *mut IdPriv, addr: Option<RawAddr>) -> Result<(), Errno> {
        let addr = addr.filter(|a| a.len > 0).ok_or(Errno::EINVAL)?;
        // SAFETY: forwarded contract.
        unsafe { self.bind_inner(p, &addr, self.af_ib()) }
    }

    unsafe fn bind_inner(&self, p: *mut IdPriv, addr: &RawAddr, af_ib: bool) -> Result<(), Errno> {
        // SAFETY: p is live.
        let (fd, h) = unsafe { (IdPriv::fd(p), (*p).handle) };
        if af_ib {
            self.ucma.bind(fd, h, addr)?;
            // SAFETY: p is live.
            unsafe {
                self.query_addr(p)?;
                self.query_gid(p)
            }
        } else {
            self.ucma.bind_ip(fd, h, addr)?;
            // SAFETY: p is live.
            unsafe { self.query_route(p) }
        }
    }

    /// `rdma_resolve_addr`.
    ///
    /// # Safety
    /// `p` must be a live id.
    pub unsafe fn resolve_addr(&'static self, p: *mut IdPriv, src: Option<RawAddr>, dst: Option<RawAddr>, timeout_ms: i32) -> Result<(), Errno> {
        let dst = dst.filter(|a| a.len > 0).ok_or(Errno::EINVAL)?;
        if matches!(src, Some(s) if s.len == 0) {
            return Err(Errno::EINVAL);
        }
        // SAFETY: p is live.
        let (fd, h) = unsafe { (IdPriv::fd(p), (*p).handle) };
        if self.af_ib() {
            self.ucma.resolve_addr(fd, h, src.as_ref(), &dst, timeout_ms as u32)?;
        } else {
            self.ucma.resolve_ip(fd, h, src.as_ref(), &dst, timeout_ms as u32)?;
        }
        // SAFETY: p is live; the destination union holds 128 bytes.
        unsafe { copy_into(&mut (*IdPriv::raw(p)).route.addr.dst, dst.as_slice()) };
        // SAFETY: p is live.
        unsafe { self.complete(p) }
    }

    /// `rdma_resolve_route`.
    ///
    /// # Safety
    /// `p` must be a live id.
    pub unsafe fn resolve_route(&'static self, p: *mut IdPriv, timeout_ms: i32) -> Result<(), Errno> {
        // SAFETY: p is live.
        let (fd, h) = unsafe { (IdPriv::fd(p), (*p).handle) };
        // Upstream first asks ibacm for a route on InfiniBand devices; without
        // an ibacm answer it falls back to the kernel, which is what we do.
        self.ucma.resolve_route(fd, h, timeout_ms as u32)?;
        // SAFETY: p is live.
        unsafe { self.complete(p) }
    }

    /// In synchronous mode, acks the parked event, waits for the next one,
    /// parks it in `id->event` and turns its status into the errno.
    ///
    /// # Safety
    /// `p` must be a live id.
    pub unsafe fn complete(&'static self, p: *mut IdPriv) -> Result<(), Errno> {
        let id = IdPriv::raw(p);
        // SAFETY: p is live.
        if !unsafe { (*p).sync.load(Ordering::Acquire) } {
            return Ok(());
        }
        // SAFETY: p is live; the parked event is an unacked event of this id.
        unsafe {
            let ev = (*id).event as *mut EventPriv;
            if !ev.is_null() {
                (*id).event = null_mut();
                ack_event((*p).cm, ev);
            }
        }
        // SAFETY: a synchronous id's channel is its own live Channel.
        let ev = unsafe { get_event((*id).channel as *mut Channel) }?;
        // SAFETY: p is live.
        unsafe { (*id).event = ev as *mut rdma_cm_event };
        // SAFETY: ev is a live event.
        let (kind, status) = unsafe { ((*ev).event.event, (*ev).event.status) };
        if status == 0 {
            Ok(())
        } else if kind == RDMA_CM_EVENT_REJECTED {
            Err(Errno::ECONNREFUSED)
        } else if status < 0 {
            Err(Errno::from_raw(status.wrapping_neg()))
        } else {
            Err(Errno::from_raw(status))
        }
    }

    // --- queries ----------------------------------------------------------------

    unsafe fn attach_device(&self, p: *mut IdPriv, guid: u64, index: Option<u32>) -> Result<(), Errno> {
        let d = self.devices.lock().get(&*self.verbs, guid, index)?;
        // SAFETY: p is live; d is a live device we hold a reference on
        // (read under no lock: verbs and pd do not change while referenced).
        unsafe {
            (*p).dev.store(d, Ordering::Release);
            (*IdPriv::raw(p)).verbs = (*d).verbs;
            (*IdPriv::raw(p)).pd = (*d).pd;
        }
        Ok(())
    }

    pub(crate) unsafe fn query_addr(&self, p: *mut IdPriv) -> Result<(), Errno> {
        // SAFETY: p is live.
        let a = self.ucma.query_addr(unsafe { IdPriv::fd(p) }, unsafe { (*p).handle })?;
        // SAFETY: p is live; the unions hold 128 bytes each.
        unsafe {
            copy_into(&mut (*IdPriv::raw(p)).route.addr.src, a.src.as_slice());
            copy_into(&mut (*IdPriv::raw(p)).route.addr.dst, a.dst.as_slice());
        }
        // SAFETY: p is live.
        if unsafe { (*p).dev.load(Ordering::Acquire) }.is_null() && a.node_guid != 0 {
            // SAFETY: p is live.
            unsafe {
                self.attach_device(p, a.node_guid, a.ibdev_index)?;
                (*IdPriv::raw(p)).port_num = a.port_num;
                (*IdPriv::raw(p)).route.addr.addr.ibaddr.pkey = a.pkey;
            }
        }
        Ok(())
    }

    pub(crate) unsafe fn query_gid(&self, p: *mut IdPriv) -> Result<(), Errno> {
        // SAFETY: p is live.
        let a = self.ucma.query_gid(unsafe { IdPriv::fd(p) }, unsafe { (*p).handle })?;
        let mut sgid = [0u8; 16];
        let mut dgid = [0u8; 16];
        // The GIDs are the sib_addr of the two sockaddr_ib (offset 8).
        sgid.copy_from_slice(&a.src.bytes[8..24]);
        dgid.copy_from_slice(&a.dst.bytes[8..24]);
        // SAFETY: p is live.
        unsafe {
            (*IdPriv::raw(p)).route.addr.addr.ibaddr.sgid.raw = sgid;
            (*IdPriv::raw(p)).route.addr.addr.ibaddr.dgid.raw = dgid;
        }
        Ok(())
    }

    unsafe fn set_paths(&self, p: *mut IdPriv, recs: &[ibv_sa_path_rec]) -> Result<(), Errno> {
        if recs.is_empty() {
            return Ok(());
        }
        let size = std::mem::size_of_val(recs);
        // SAFETY: plain allocation; C may read (never free) it.
        let buf = unsafe { libc::malloc(size) } as *mut ibv_sa_path_rec;
        if buf.is_null() {
            return Err(Errno::ENOMEM);
        }
        // SAFETY: buf holds recs.len() records; p is live; a previous
        // array (a repeated resolution) came from malloc too.
        unsafe {
            ptr::copy_nonoverlapping(recs.as_ptr(), buf, recs.len());
            let old = (*IdPriv::raw(p)).route.path_rec;
            (*IdPriv::raw(p)).route.path_rec = buf;
            (*IdPriv::raw(p)).route.num_paths = recs.len() as i32;
            if !old.is_null() {
                libc::free(old as *mut c_void);
            }
        }
        Ok(())
    }

    pub(crate) unsafe fn query_path(&self, p: *mut IdPriv) -> Result<(), Errno> {
        // SAFETY: p is live.
        let paths = self.ucma.query_path(unsafe { IdPriv::fd(p) }, unsafe { (*p).handle })?;
        let recs: Vec<ibv_sa_path_rec> = paths.iter().map(proto::path_from_data).collect();
        // SAFETY: p is live.
        unsafe { self.set_paths(p, &recs) }
    }

    pub(crate) unsafe fn query_route(&self, p: *mut IdPriv) -> Result<(), Errno> {
        // SAFETY: p is live.
        let r = self.ucma.query_route(unsafe { IdPriv::fd(p) }, unsafe { (*p).handle })?;
        let recs: Vec<ibv_sa_path_rec> = r.paths[..r.num_paths as usize].iter().map(proto::path_from_kern).collect();
        // SAFETY: p is live.
        unsafe {
            self.set_paths(p, &recs)?;
            (*IdPriv::raw(p)).route.addr.addr.ibaddr.sgid.raw = r.paths[0].sgid;
            (*IdPriv::raw(p)).route.addr.addr.ibaddr.dgid.raw = r.paths[0].dgid;
            (*IdPriv::raw(p)).route.addr.addr.ibaddr.pkey = r.paths[0].pkey;
            copy_into(&mut (*IdPriv::raw(p)).route.addr.src, &r.src.bytes[..28]);
            copy_into(&mut (*IdPriv::raw(p)).route.addr.dst, &r.dst.bytes[..28]);
            if (*p).dev.load(Ordering::Acquire).is_null() && r.node_guid != 0 {
                self.attach_device(p, r.node_guid, r.ibdev_index)?;
                (*IdPriv::raw(p)).port_num = r.port_num;
            }
        }
        Ok(())
    }

    // --- events -------------------------------------------------------------------

    unsafe fn process_addr_resolved(&self, p: *mut IdPriv, evt: &mut EventPriv) {
        // SAFETY: p is live (it has an event outstanding).
        let r = unsafe {
            if self.af_ib() {
                self.query_addr(p).and_then(|_| {
                    if (*IdPriv::raw(p)).verbs.is_null() {
                        Err(Errno::ENODEV)
                    } else if self.verbs.transport_is_ib((*IdPriv::raw(p)).verbs as usize) {
                        self.query_gid(p)
                    } else {
                        Ok(())
                    }
                })
            } else {
                self.query_route(p).and_then(|_| if (*IdPriv::raw(p)).verbs.is_null() { Err(Errno::ENODEV) } else { Ok(()) })
            }
        };
        evt.event.status = 0;
        if let Err(e) = r {
            // Upstream stores its helpers' -1 here, not the errno.
            log::debug!(target: "rdmacm", "address resolved, but querying it failed: {e}");
            evt.event.status = -1;
            evt.event.event = RDMA_CM_EVENT_ADDR_ERROR;
        }
    }

    unsafe fn process_route_resolved(&self, p: *mut IdPriv, evt: &mut EventPriv) {
        // SAFETY: p is live.
        let verbs = unsafe { (*IdPriv::raw(p)).verbs } as usize;
        if !self.verbs.transport_is_ib(verbs) {
            return;
        }
        // SAFETY: p is live.
        let r = unsafe {
            if self.af_ib() {
                self.query_path(p)
            } else {
                self.query_route(p)
            }
        };
        evt.event.status = 0;
        if let Err(e) = r {
            log::debug!(target: "rdmacm", "route resolved, but querying it failed: {e}");
            evt.event.status = -1;
            evt.event.event = RDMA_CM_EVENT_ROUTE_ERROR;
        }
    }

    fn lookup(&self, handle: u32) -> Option<*mut IdPriv> {
        self.handles.lock().get(&handle).map(|&a| a as *mut IdPriv)
    }
}

/// Copies an address into one of `struct rdma_addr`'s unions.
fn copy_into(dst: &mut rdma_sockaddr, b: &[u8]) {
    let n = b.len().min(std::mem::size_of::<rdma_sockaddr>());
    // SAFETY: the union is 128 bytes of plain data; n is within it.
    unsafe { ptr::copy_nonoverlapping(b.as_ptr(), dst as *mut rdma_sockaddr as *mut u8, n) };
}

fn copy_conn(evt: &mut EventPriv, src: &kabi::ConnParam) {
    let len = src.private_data_len;
    let pd = if len > 0 {
        evt.private_data[..len as usize].copy_from_slice(&src.private_data[..len as usize]);
        evt.private_data.as_ptr() as *const c_void
    } else {
        ptr::null()
    };
    evt.event.param.conn = rdma_conn_param {
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
    evt.event.param.ud = rdma_ud_param {
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
/// the library's part of it (address and route queries, parameters).
///
/// # Safety
/// `ch` must be a live channel.
pub unsafe fn get_event(ch: *mut Channel) -> Result<*mut EventPriv, Errno> {
    // SAFETY: ch is live.
    let (cm, fd) = unsafe { ((*ch).cm, (*ch).ch.fd) };
    cm.init()?;
    loop {
        let resp = cm.ucma.get_event(fd)?;
        let mut evt = zeroed_event();
        evt.event.event = resp.event;
        let mcast = matches!(resp.event, RDMA_CM_EVENT_MULTICAST_JOIN | RDMA_CM_EVENT_MULTICAST_ERROR);
        let p: *mut IdPriv = if mcast && resp.uid != 0 {
            // The uid of a multicast event is the membership.
            // SAFETY: the kernel reports memberships we made and not freed.
            unsafe { crate::cma::conn::mcast::owner(resp.uid) }
        } else if resp.uid != 0 {
            resp.uid as usize as *mut IdPriv
        } else {
            // Old kernels could report uid 0; find the id by handle.
            let Some(p) = cm.lookup(resp.id) else {
                log::debug!(target: "rdmacm", "discarding an event for an unknown id {}", resp.id);
                continue;
            };
            if resp.event != RDMA_CM_EVENT_ESTABLISHED {
                // SAFETY: p is a live id (registered).
                unsafe { (*p).complete_event() };
                continue;
            }
            p
        };
        evt.id_priv = p;
        // The kernel reports ids we created and have not freed (destroy
        // waits for every reported event to be acked).
        evt.event.id = IdPriv::raw(p);
        evt.event.status = resp.status as i32;
        // SAFETY: p is live.
        let ud = unsafe { (*IdPriv::raw(p)).qp_type } == IBV_QPT_UD;
        match resp.event {
            RDMA_CM_EVENT_ADDR_RESOLVED => {
                // SAFETY: p is live and has this event outstanding.
                unsafe { cm.process_addr_resolved(p, &mut evt) }
            }
            RDMA_CM_EVENT_ROUTE_RESOLVED => {
                // SAFETY: p is live and has this event outstanding.
                unsafe { cm.process_route_resolved(p, &mut evt) }
            }
            RDMA_CM_EVENT_USER => {
                // SAFETY: arg32 covers the first 8 bytes of the union.
                let a = unsafe { resp.param.arg32 };
                evt.event.param.arg = (a[0] as u64) | ((a[1] as u64) << 32);
            }
            RDMA_CM_EVENT_INTERNAL => {
                // The library's own events: the only one is the end of a
                // DNS rdma_resolve_addrinfo, which reads as ADDRINFO_RESOLVED.
                // SAFETY: arg32 covers the first 8 bytes of the union.
                let a = unsafe { resp.param.arg32 };
                let arg = (a[0] as u64) | ((a[1] as u64) << 32);
                if arg != u64::from(RDMA_CM_EVENT_ADDRINFO_RESOLVED) {
                    // SAFETY: p is live; the event is consumed here.
                    unsafe { (*p).complete_event() };
                    return Err(Errno::EBADE);
                }
                evt.event.event = RDMA_CM_EVENT_ADDRINFO_RESOLVED;
                // SAFETY: p is live and has this event outstanding.
                unsafe { cm.process_addrinfo_resolved(p, &mut evt) }
            }
            RDMA_CM_EVENT_ADDRINFO_RESOLVED => {
                // SAFETY: p is live and has this event outstanding.
                unsafe { cm.process_addrinfo_resolved(p, &mut evt) }
            }
            RDMA_CM_EVENT_ADDRINFO_ERROR => {
                // SAFETY: p is live.
                unsafe { cm.process_addrinfo_error(p) }
            }
            _ => {
                // Connection, multicast and removal events: parameters as
                // the kernel reports them, by the id's QP type; the
                // connection code (crate::cma::conn) completes them below.
                // SAFETY: the union members are plain data.
                unsafe {
                    if ud {
                        copy_ud(&mut evt, &resp.param.ud);
                    } else {
                        copy_conn(&mut evt, &resp.param.conn);
                    }
                }
            }
        }
        if mcast && resp.uid != 0 {
            // SAFETY: resp.uid is a live membership (above).
            unsafe { crate::cma::conn::mcast::process_event(&resp, &mut evt) };
        } else {
            // SAFETY: p is live and has this event outstanding.
            let step = unsafe { crate::cma::conn::process_event(cm, &resp, &mut evt) };
            if step == crate::cma::conn::Step::Retry {
                // SAFETY: evt.id_priv is live (the id the kernel reported).
                unsafe { (*evt.id_priv).complete_event() };
                continue;
            }
        }
        let ev = Box::into_raw(evt);
        cm.live.lock().events.insert(ev as usize);
        return Ok(ev);
    }
}

/// `rdma_ack_cm_event`: releases an event and counts it as completed.
/// Returns false, touching nothing, when `ev` is not an unacked event of
/// `cm` (a double ack, or an event the caller already released).
///
/// # Safety
/// `ev` may be any pointer; it is only dereferenced when registered.
pub unsafe fn ack_event(cm: &Cm, ev: *mut EventPriv) -> bool {
    if !cm.live.lock().events.remove(&(ev as usize)) {
        return false;
    }
    // SAFETY: ev was registered by get_event and is removed from the set
    // above exactly once, so we own the box now.
    let evt = unsafe { Box::from_raw(ev) };
    if !evt.mc.is_null() {
        // SAFETY: a membership outlives its unacked events.
        unsafe { crate::cma::conn::mcast::complete(evt.mc) };
    }
    if !evt.id_priv.is_null() {
        // SAFETY: the id cannot be freed while this event is unacked.
        unsafe { (*evt.id_priv).complete_event() };
    }
    true
}

/// `rdma_get_devices`: a malloc'ed NULL-terminated array of the open
/// device contexts (each holds a reference until `rdma_free_devices`).
pub fn get_devices(cm: &'static Cm) -> Result<(*mut *mut ibv_context, usize), Errno> {
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
    let live: Vec<&mut Box<CmDevice>> = devs.list.iter_mut().filter(|d| !d.dead).collect();
    let n = live.len();
    // SAFETY: plain allocation of n + 1 pointers, freed by rdma_free_devices
    // (or by the caller with free()).
    let arr = unsafe { libc::malloc((n + 1) * std::mem::size_of::<*mut ibv_context>()) } as *mut *mut ibv_context;
    if arr.is_null() {
        return Err(Errno::ENOMEM);
    }
    for (i, d) in live.into_iter().enumerate() {
        // SAFETY: i < n, within the allocation.
        unsafe { *arr.add(i) = d.verbs };
        d.refcnt += 1;
    }
    // SAFETY: index n is the terminator slot.
    unsafe { *arr.add(n) = null_mut() };
    Ok((arr, n))
}

/// `rdma_free_devices`.
///
/// # Safety
/// `list` must come from [`get_devices`].
pub unsafe fn free_devices(cm: &'static Cm, list: *mut *mut ibv_context) {
    let mut devs = cm.devices.lock();
    let mut i = 0;
    loop {
        // SAFETY: the list is NULL-terminated.
        let ctx = unsafe { *list.add(i) };
        if ctx.is_null() {
            break;
        }
        let hit = devs.list.iter_mut().find(|d| d.verbs == ctx).map(|d| {
            d.refcnt = d.refcnt.saturating_sub(1);
            (d.dead && d.refcnt == 0, d.dev)
        });
        if let Some((true, dev)) = hit {
            devs.remove(&*cm.verbs, dev);
        }
        i += 1;
    }
    drop(devs);
    // SAFETY: the array came from libc malloc.
    unsafe { libc::free(list as *mut c_void) };
}

#[cfg(test)]
mod tests;
