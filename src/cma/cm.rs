// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The CM instance's life cycle ([`Cm`], declared in [`super::base`]): the
//! library's instance ([`global`]), initialisation, event channels and
//! ids (create, destroy, migrate), options, bind, address and route
//! resolution, the kernel's queries, and the device list C borrows
//! (`rdma_get_devices`).
#![deny(unsafe_code)]

use super::alloc;
use super::base::{ChanRef, Channel, Cm, IdPriv, IdRef, Live, Mc, CHANNELS, DEV_LIMITS_SET, IDS};
use super::delivery::{ack_event, get_event};
use super::device::{Devices, SysVerbs, Verbs};
use super::trace::{self, Step};
use crate::abi::cma::*;
use crate::abi::sockaddr::SockAddr;
use crate::abi::ucma as kabi;
use crate::sys::ucma::{self as proto, Kernel, RouteInfo, Ucma};
use nix::errno::Errno;
use once_cell::sync::Lazy;
use parking_lot::Mutex;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

static GLOBAL: Lazy<Cm> = Lazy::new(|| Cm { direct: true, ..Cm::new(Box::new(Kernel::default()), Box::new(SysVerbs::default())) });

/// The library's CM instance.
#[inline]
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

/// Socket address sizes by family, as upstream's `ucma_addrlen`
/// ([`SockAddr::cm_len`], the one rule).
pub fn addr_len(family: i32, af_ib: bool) -> usize {
    SockAddr::cm_len(family, af_ib)
}

impl Cm {
    pub fn new(ucma: Box<dyn Ucma>, verbs: Box<dyn Verbs>) -> Cm {
        Cm {
            ucma,
            verbs,
            direct: false,
            init_lock: Mutex::new(()),
            inited: AtomicBool::new(false),
            af_ib: AtomicBool::new(false),
            devices: Mutex::new(Devices::default()),
            live: Live::default(),
        }
    }

    /// The live channel of this instance C knows by `p`, or EINVAL.
    #[inline]
    pub fn channel(&self, p: *const rdma_event_channel) -> Result<ChanRef, Errno> {
        CHANNELS.get(p as usize).filter(|c| std::ptr::eq(c.cm, self)).ok_or(Errno::EINVAL)
    }

    /// The live id C knows by `p`, or EINVAL: a range, alignment and
    /// state check of the id store ([`crate::sys::slab`]), no table.  The
    /// reference keeps the id in its slot while the caller holds it.
    #[inline]
    pub fn id(&self, p: *const rdma_cm_id) -> Result<IdRef, Errno> {
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

    /// Publishes an id, so that the C boundary and the event loop find it
    /// (its slot was had when it was made: nothing can fail here).
    #[inline]
    fn register_id(&self, p: &IdRef) {
        IDS.publish(p);
    }

    /// Whether the AF_IB-capable command family is in use (after init).
    #[inline]
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
        // (Untraced: the library's own id, not the program's.)
        let Ok(p) = self.create_id_untraced(None, null_mut(), RDMA_PS_IB, IBV_QPT_RC) else { return false };
        let sib = sockaddr_ib {
            sib_family: AF_IB as u16,
            sib_sid: RDMA_IB_IP_PS_TCP.to_be(),
            sib_sid_mask: RDMA_IB_IP_PS_MASK.to_be(),
            ..Default::default()
        };
        let ok = self.bind_inner(&p, SockAddr::from_ib(&sib).as_bytes(), true).is_ok();
        let _ = self.destroy_id_untraced(&p);
        ok
    }

    // --- channels -----------------------------------------------------------

    fn open_channel(&'static self) -> Result<ChanRef, Errno> {
        // The slot first: out of memory, nothing to undo (upstream: ENOMEM).
        let slot = CHANNELS.alloc()?;
        let fd = self.ucma.open()?;
        let ch = alloc::new_channel(slot, fd, self);
        CHANNELS.publish(&ch);
        Ok(ch)
    }

    /// `rdma_create_event_channel`.
    pub fn create_channel(&'static self) -> Result<ChanRef, Errno> {
        self.init()?;
        self.open_channel()
    }

    /// `rdma_destroy_event_channel`: unregisters the channel and closes
    /// its fd (the memory goes with the last reference).
    pub fn destroy_channel(&self, ch: &Channel) {
        if CHANNELS.retire_obj(ch) {
            self.ucma.close(ch.fd());
        }
    }

    /// How long a destroy waits for acks before it says which events it
    /// waits for ([`Cm::report_held`]); the wait goes on.
    pub const HELD_REPORT_MS: i32 = 1000;

    // --- ids ------------------------------------------------------------------

    /// `rdma_create_id`: no channel selects synchronous mode.
    pub fn create_id(&'static self, ch: Option<&ChanRef>, context: *mut c_void, ps: rdma_port_space) -> Result<IdRef, Errno> {
        self.create_id_keeping(ch.cloned(), context, ps)
    }

    /// [`create_id`](Self::create_id) with the caller's reference to the
    /// channel, which the new id keeps (no count taken and dropped).
    pub fn create_id_keeping(&'static self, ch: Option<ChanRef>, context: *mut c_void, ps: rdma_port_space) -> Result<IdRef, Errno> {
        self.init()?;
        let qp_type = if ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP { IBV_QPT_UD } else { IBV_QPT_RC };
        self.create_id_owned(ch, context, ps, qp_type)
    }

    /// Creates an id with an explicit QP type (also used by the endpoint
    /// and connection code).
    pub fn create_id_inner(&'static self, ch: Option<&ChanRef>, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type) -> Result<IdRef, Errno> {
        self.create_id_owned(ch.cloned(), context, ps, qp_type)
    }

    #[inline(always)]
    fn create_id_owned(&'static self, ch: Option<ChanRef>, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type) -> Result<IdRef, Errno> {
        if trace::on() {
            return self.create_id_traced(ch, context, ps, qp_type);
        }
        self.create_id_untraced(ch, context, ps, qp_type)
    }

    #[cold]
    #[inline(never)]
    fn create_id_traced(&'static self, ch: Option<ChanRef>, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type) -> Result<IdRef, Errno> {
        trace::create(|| self.create_id_untraced(ch, context, ps, qp_type))
    }

    #[inline(always)]
    fn create_id_untraced(&'static self, ch: Option<ChanRef>, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type) -> Result<IdRef, Errno> {
        let (ch, sync) = match ch {
            Some(c) => (c, false),
            None => (self.open_channel()?, true),
        };
        let slot = match IDS.alloc() {
            Ok(s) => s,
            Err(e) => {
                if sync {
                    self.destroy_channel(&ch);
                }
                return Err(e);
            }
        };
        let fd = ch.fd();
        let p = alloc::new_id(slot, ch, context, ps, qp_type, u32::MAX, sync);
        match self.ucma.create_id(fd, p.uid(), ps as u16, qp_type as u8) {
            Ok(h) => {
                p.handle.store(h, Ordering::Release);
                self.register_id(&p);
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
    pub fn adopt_id(&'static self, ch: ChanRef, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type, handle: u32) -> Result<IdRef, Errno> {
        let p = self.new_id_priv(ch, context, ps, qp_type, handle, false)?;
        self.register_id(&p);
        Ok(p)
    }

    /// A new, unregistered id on channel `ch`.
    fn new_id_priv(&'static self, ch: ChanRef, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type, handle: u32, sync: bool) -> Result<IdRef, Errno> {
        alloc::try_new_id(ch, context, ps, qp_type, handle, sync)
    }

    /// Releases what an id holds and retires it (lookups no longer find
    /// it); its slot goes with the last reference.
    fn free_id(&self, p: &IdRef) {
        IDS.retire(p);
        // What the id holds, in one visit of its lock.
        let (mcs, dev) = {
            let mut g = p.links.lock();
            (if g.mcs.is_empty() { None } else { Some(std::mem::take(&mut g.mcs)) }, g.dev.take())
        };
        // Memberships left in place are released with the id, as the
        // kernel drops them too.
        for mc in mcs.iter().flatten() {
            self.live.mcs.remove(Arc::as_ptr(mc) as usize);
        }
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
    #[inline]
    fn ack_parked(&self, p: &IdPriv) {
        let ev = p.id.event();
        if !ev.is_null() {
            self.ack_parked_event(p, ev);
        }
    }

    /// [`ack_parked`](Self::ack_parked) of a parked event (out of line:
    /// only synchronous ids park events).
    #[cold]
    #[inline(never)]
    fn ack_parked_event(&self, p: &IdPriv, ev: *mut rdma_cm_event) {
        p.id.set_event(null_mut());
        ack_event(self, ev);
    }

    /// `rdma_destroy_id`: waits until every event reported for the id has
    /// been acked (a parked synchronous event is acked here).
    /// A thread cancelled in that wait ends without freeing the id (the
    /// kernel's id is gone): a later `rdma_destroy_id` of it waits again
    /// and frees it.
    pub fn destroy_id(&self, p: &IdRef) -> Result<(), Errno> {
        if trace::on() {
            return self.destroy_id_traced(p);
        }
        self.destroy_id_untraced(p)
    }

    #[cold]
    #[inline(never)]
    fn destroy_id_traced(&self, p: &IdRef) -> Result<(), Errno> {
        trace::call(p, Step::DestroyId, || self.destroy_id_untraced(p))
    }

    #[inline(always)]
    fn destroy_id_untraced(&self, p: &IdRef) -> Result<(), Errno> {
        let reported = match p.acks.pending() {
            Some(n) => n,
            None => {
                // A name lookup still running queues no event for the id from here on.
                self.cancel_addrinfo(p);
                self.let_reader_take(p);
                let n = self.ucma.destroy_id(p.fd(), p.handle())?;
                self.ack_parked(p);
                n
            }
        };
        if !p.acks.reached(reported) {
            self.wait_acks(p, reported)?;
        }
        self.free_id(p);
        Ok(())
    }

    /// The destroy's wait for the acks of `reported` events, not all
    /// acked yet; after [`Self::HELD_REPORT_MS`] it says which are held.
    /// Out of line: most destroys find every event acked.
    #[cold]
    #[inline(never)]
    fn wait_acks(&self, p: &IdRef, reported: u32) -> Result<(), Errno> {
        let r = p.acks.wait_reporting(reported, Self::HELD_REPORT_MS, &mut |acked| self.report_held(p, reported, acked));
        if r.is_err() {
            p.acks.set_pending(reported);
        }
        r
    }

    /// Says (debug log at warn level, trace) that a destroy of `p` has
    /// waited [`HELD_REPORT_MS`] for events still unacked, which ones, and
    /// whether the destroying thread holds one (then only another thread's
    /// ack ends the wait).
    #[cold]
    fn report_held(&self, p: &IdPriv, reported: u32, acked: u32) {
        let me = crate::sys::trace::thread_key();
        let mut held: Vec<(u32, i32, bool)> = Vec::new();
        self.live.events.for_each(|e| {
            if e.id_priv.as_deref().is_some_and(|q| std::ptr::eq(q, p)) {
                held.push((e.event.0.event, e.event.0.status, e.holder == me));
            }
        });
        let missing = reported.saturating_sub(acked);
        let names: Vec<String> = held.iter().map(|(ev, st, mine)| format!("{} (status {st}{})", trace::event_step(*ev), if *mine { ", held by this thread" } else { "" })).collect();
        let mine = held.iter().any(|h| h.2);
        log::warn!(
            target: "rdmacm",
            "rdma_destroy_id: id {:p} (handle {}, trace id {}) has waited {} ms for {missing} unacked event(s): {}{}",
            p.raw(),
            p.handle(),
            trace::id_number(p),
            Self::HELD_REPORT_MS,
            if names.is_empty() { "none found unacked".to_string() } else { names.join(", ") },
            if mine { "; this thread holds one, so only an rdma_ack_cm_event by another thread ends the wait" } else { "; it waits until they are acked" }
        );
        trace::held(p, Self::HELD_REPORT_MS as u64, missing, &held);
    }

    /// `rdma_migrate_id`: moves the id to `ch`, or to a new private channel
    /// (synchronous mode) when `ch` is None.
    pub fn migrate_id(&'static self, p: &IdRef, ch: Option<&ChanRef>) -> Result<(), Errno> {
        let was_sync = p.sync.load(Ordering::Acquire);
        if was_sync && ch.is_none() {
            return Err(Errno::EINVAL);
        }
        let (ch, new_sync) = match ch {
            Some(c) => (c.clone(), false),
            None => (self.open_channel()?, true),
        };
        self.let_reader_take(p);
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

    /// Whether the transport is the kernel's ucma device (the library's
    /// own instance): the C API's `rdma_get_cm_event` then makes its wait
    /// itself ([`crate::sys::ucma::wait_event_unwinding`]).
    #[inline(always)]
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// `rdma_write_cm_event`: only user events may be queued.
    #[inline]
    pub fn write_cm_event(&self, p: &IdPriv, event: u32, status: i32, arg: u64) -> Result<(), Errno> {
        if event != RDMA_CM_EVENT_USER {
            return Err(Errno::EINVAL);
        }
        if self.direct {
            return crate::sys::ucma::write_event(p.fd(), p.handle(), event, status, arg);
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
        self.bind_addr(p, addr.as_ref())
    }

    /// [`Cm::bind`] of an address the caller keeps (no copy of it).
    #[inline]
    pub fn bind_addr(&self, p: &IdPriv, addr: Option<&SockAddr>) -> Result<(), Errno> {
        // (no address, or an empty one: EINVAL, as bind_bytes refuses it;
        // the bind out of line: only the export has it in line)
        let addr = addr.map_or(&[][..], SockAddr::as_bytes);
        if addr.is_empty() {
            return Err(Errno::EINVAL);
        }
        self.bind_inner(p, addr, self.af_ib())
    }

    /// [`Cm::bind`] of an address's bytes where the caller keeps them, at
    /// the connection manager's length for their family
    /// ([`SockAddr::raw_for_cm`]), `af_ib` being [`Cm::af_ib`]: the BIND
    /// command is built from them directly.
    /// In line in its caller (`rdma_bind_addr`: one frame for the export,
    /// the three commands and the device's attachment).
    #[inline(always)]
    pub fn bind_bytes(&self, p: &IdPriv, addr: &[u8], af_ib: bool) -> Result<(), Errno> {
        if addr.is_empty() {
            return Err(Errno::EINVAL);
        }
        self.bind_here(p, addr, af_ib)
    }

    /// [`Cm::bind_bytes`] out of line, for the library's other binds.
    fn bind_inner(&self, p: &IdPriv, addr: &[u8], af_ib: bool) -> Result<(), Errno> {
        self.bind_here(p, addr, af_ib)
    }

    #[inline(always)]
    fn bind_here(&self, p: &IdPriv, addr: &[u8], af_ib: bool) -> Result<(), Errno> {
        let (fd, h) = (p.fd(), p.handle());
        if log::max_level() >= log::LevelFilter::Debug {
            log_bind(h, af_ib);
        }
        if af_ib {
            if self.direct {
                crate::sys::ucma::bind(fd, h, addr)?;
            } else {
                self.ucma.bind(fd, h, addr)?;
            }
            // (the two answers read into one buffer, one after the other)
            let mut buf = MaybeUninit::uninit();
            self.query_addr_into(p, &mut buf)?;
            self.query_gid_into(p, &mut buf)
        } else {
            self.ucma.bind_ip(fd, h, addr)?;
            self.query_route(p)
        }
    }

    /// `rdma_resolve_addr`.
    /// (Addresses at their own length, as for [`Cm::bind`]; `None` for
    /// the destination, or an empty address, is EINVAL; no source is
    /// `None`.)
    pub fn resolve_addr(&'static self, p: &IdPriv, src: Option<SockAddr>, dst: Option<SockAddr>, timeout_ms: i32) -> Result<(), Errno> {
        let dst = dst.ok_or(Errno::EINVAL)?;
        let src = match &src {
            Some(s) if s.is_empty() => return Err(Errno::EINVAL),
            Some(s) => s.as_bytes(),
            None => &[],
        };
        self.resolve_addr_bytes(p, src, dst.as_bytes(), timeout_ms)
    }

    /// [`Cm::resolve_addr`] of the addresses' bytes as the caller holds
    /// them (`rdma_resolve_addr`'s, not copied): an empty destination is
    /// EINVAL, an empty source is none.
    #[inline(always)]
    pub fn resolve_addr_bytes(&'static self, p: &IdPriv, src: &[u8], dst: &[u8], timeout_ms: i32) -> Result<(), Errno> {
        if trace::on() {
            return self.resolve_addr_traced(p, src, dst, timeout_ms);
        }
        self.resolve_addr_untraced(p, src, dst, timeout_ms)
    }

    #[cold]
    #[inline(never)]
    fn resolve_addr_traced(&'static self, p: &IdPriv, src: &[u8], dst: &[u8], timeout_ms: i32) -> Result<(), Errno> {
        trace::call(p, Step::ResolveAddr, || self.resolve_addr_untraced(p, src, dst, timeout_ms))
    }

    #[inline(always)]
    fn resolve_addr_untraced(&'static self, p: &IdPriv, src: &[u8], dst: &[u8], timeout_ms: i32) -> Result<(), Errno> {
        if dst.is_empty() {
            return Err(Errno::EINVAL);
        }
        let (fd, h) = (p.fd(), p.handle());
        if log::max_level() >= log::LevelFilter::Debug {
            log_resolve_addr(h, self.af_ib(), timeout_ms);
        }
        if self.af_ib() {
            if self.direct {
                crate::sys::ucma::resolve_addr(fd, h, src, dst, timeout_ms as u32)?;
            } else {
                self.ucma.resolve_addr(fd, h, src, dst, timeout_ms as u32)?;
            }
        } else {
            self.ucma.resolve_ip(fd, h, src, dst, timeout_ms as u32)?;
        }
        p.id.set_dst(dst);
        self.complete(p)
    }

    /// `rdma_resolve_route`.
    pub fn resolve_route(&'static self, p: &IdPriv, timeout_ms: i32) -> Result<(), Errno> {
        if trace::on() {
            return self.resolve_route_traced(p, timeout_ms);
        }
        self.resolve_route_untraced(p, timeout_ms)
    }

    #[cold]
    #[inline(never)]
    fn resolve_route_traced(&'static self, p: &IdPriv, timeout_ms: i32) -> Result<(), Errno> {
        trace::call(p, Step::ResolveRoute, || self.resolve_route_untraced(p, timeout_ms))
    }

    #[inline(always)]
    fn resolve_route_untraced(&'static self, p: &IdPriv, timeout_ms: i32) -> Result<(), Errno> {
        // Upstream first asks ibacm for a route on InfiniBand devices; without
        // an ibacm answer it falls back to the kernel, which is what we do.
        log::debug!(target: "rdmacm", "resolve_route: id {} RESOLVE_ROUTE command to the kernel (no ibacm), timeout {timeout_ms} ms", p.handle());
        self.ucma.resolve_route(p.fd(), p.handle(), timeout_ms as u32)?;
        self.complete(p)
    }

    /// In synchronous mode, acks the parked event, waits for the next one,
    /// parks it in `id->event` and turns its status into the errno.
    /// (In line: an asynchronous id's check is one load.)
    #[inline(always)]
    pub fn complete(&'static self, p: &IdPriv) -> Result<(), Errno> {
        if !p.sync.load(Ordering::Acquire) {
            return Ok(());
        }
        self.complete_sync(p)
    }

    fn complete_sync(&'static self, p: &IdPriv) -> Result<(), Errno> {
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

    /// Binds the id to the device the kernel chose, unless it has one;
    /// whether it did.  The id's lock is taken once, the device list's
    /// inside it (the order everywhere: no path takes an id's lock while
    /// holding the device list's).  In line: a device already in use here
    /// is found and referenced without a call ([`Devices::get`]).
    #[inline(always)]
    fn attach_device(&self, p: &IdPriv, guid: u64, index: Option<u32>) -> Result<bool, Errno> {
        let mut g = p.links.lock();
        let links = &mut *g;
        if links.dev.is_some() {
            return Ok(false);
        }
        if log::max_level() >= log::LevelFilter::Debug {
            log_attach(p.handle(), guid, index);
        }
        let d = self.devices.lock().get(&*self.verbs, guid, index)?;
        p.id.set_verbs(d.verbs.0);
        p.id.set_pd(d.pd.0);
        p.dev_limits.store(DEV_LIMITS_SET | (d.max_initiator_depth as u32) << 8 | d.max_responder_resources as u32, Ordering::Release);
        links.dev = Some(d);
        Ok(true)
    }

    /// QUERY ADDR or QUERY GID (`option`) into `buf`: the kernel's command
    /// made in line for the library's own instance, else the transport's.
    #[inline(always)]
    fn query_answer<'r>(&self, p: &IdPriv, option: u32, buf: &'r mut MaybeUninit<kabi::QueryAddrResp>) -> Result<&'r kabi::QueryAddrResp, Errno> {
        if self.direct {
            crate::sys::ucma::query_into(p.fd(), p.handle(), option, buf)
        } else {
            self.ucma.query_into(p.fd(), p.handle(), option, buf)
        }
    }

    pub(crate) fn query_addr(&self, p: &IdPriv) -> Result<(), Errno> {
        self.query_addr_into(p, &mut MaybeUninit::uninit())
    }

    /// [`Cm::query_addr`] with the answer read into the caller's buffer.
    #[inline(always)]
    fn query_addr_into(&self, p: &IdPriv, buf: &mut MaybeUninit<kabi::QueryAddrResp>) -> Result<(), Errno> {
        // (the answer read where the kernel wrote it: the addresses are
        // copied once, into the id)
        let a = self.query_answer(p, kabi::QUERY_ADDR, buf)?;
        p.id.set_src(a.src());
        p.id.set_dst(a.dst());
        if a.node_guid != 0 && self.attach_device(p, a.node_guid, a.device_index())? {
            p.id.set_port_num(a.port_num);
            p.id.set_pkey(a.pkey);
        }
        Ok(())
    }

    pub(crate) fn query_gid(&self, p: &IdPriv) -> Result<(), Errno> {
        self.query_gid_into(p, &mut MaybeUninit::uninit())
    }

    /// [`Cm::query_gid`] with the answer read into the caller's buffer.
    #[inline(always)]
    fn query_gid_into(&self, p: &IdPriv, buf: &mut MaybeUninit<kabi::QueryAddrResp>) -> Result<(), Errno> {
        let a = self.query_answer(p, kabi::QUERY_GID, buf)?;
        // The GIDs are the sib_addr of the two sockaddr_ib.
        let (sgid, dgid) = a.gids();
        p.id.set_gids(sgid, dgid);
        Ok(())
    }

    pub(crate) fn query_path(&self, p: &IdPriv) -> Result<(), Errno> {
        let paths = self.ucma.query_path(p.fd(), p.handle())?;
        let recs: Vec<ibv_sa_path_rec> = paths.iter().map(proto::path_from_data).collect();
        p.id.set_paths(&recs)
    }

    /// What the kernel reports about an id's route (its QUERY_ROUTE
    /// answer: device, port, addresses, path records), read without
    /// changing the id (the explainer's view of a resolved id).
    pub fn route_of(&self, p: &IdPriv) -> Result<RouteInfo, Errno> {
        self.ucma.query_route(p.fd(), p.handle())
    }

    pub(crate) fn query_route(&self, p: &IdPriv) -> Result<(), Errno> {
        let r = self.ucma.query_route(p.fd(), p.handle());
        let r = match &r {
            Ok(r) => r,
            Err(e) => return Err(*e),
        };
        let recs: Vec<ibv_sa_path_rec> = r.paths[..r.num_paths as usize].iter().map(proto::path_from_kern).collect();
        p.id.set_paths(&recs)?;
        p.id.set_gids(r.paths[0].sgid, r.paths[0].dgid);
        p.id.set_pkey(r.paths[0].pkey);
        // sockaddr_in6-sized, whatever the family, as upstream copies them.
        p.id.set_src(r.src.as_bytes());
        p.id.set_dst(r.dst.as_bytes());
        if r.node_guid != 0 && self.attach_device(p, r.node_guid, r.ibdev_index)? {
            p.id.set_port_num(r.port_num);
        }
        Ok(())
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

/// The bind's debug line (out of line: the formatting is not in the
/// bind's frame).
#[cold]
#[inline(never)]
fn log_bind(h: u32, af_ib: bool) {
    log::debug!(target: "rdmacm", "bind: id {h} {} command to the kernel", if af_ib { "BIND (AF_IB-capable)" } else { "BIND_IP (legacy)" });
}

/// `rdma_resolve_addr`'s debug line (out of line, as [`log_bind`]).
#[cold]
#[inline(never)]
fn log_resolve_addr(h: u32, af_ib: bool, timeout_ms: i32) {
    log::debug!(target: "rdmacm", "resolve_addr: id {h} {} command to the kernel, timeout {timeout_ms} ms", if af_ib { "RESOLVE_ADDR (AF_IB-capable)" } else { "RESOLVE_IP (legacy)" });
}

/// The device attachment's debug line (out of line, as [`log_bind`]).
#[cold]
#[inline(never)]
fn log_attach(h: u32, guid: u64, index: Option<u32>) {
    log::debug!(target: "rdmacm", "device: id {h} takes the device the kernel chose, node GUID {:016x}, kernel index {index:?}", u64::from_be(guid));
}
