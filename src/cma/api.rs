// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A safe Rust API of the connection manager for the library's own clients
//! (rsockets and the public Rust API, `crate::api`): an owned [`CmId`]
//! whose methods return `Result<_, Errno>`, and the event channel calls
//! ([`create_channel`], [`get_event`], [`ack_event`]) with the event read
//! out as owned Rust data ([`RawEvent`]).
//!
//! It calls the connection manager's Rust functions directly, never the C
//! exports (no second panic boundary, no errno round trip). Addresses
//! enter as [`SockAddr`] (cut to their family's length here,
//! [`SockAddr::for_cm`]); the parameters are the values of `cma::params`
//! ([`ConnParam`], [`QpCaps`], [`UdParam`]), re-exported. What leaves it
//! is owned Rust data (addresses, private data) or raw verbs handles
//! ([`QpPtrs`], the PD) that stay valid for as long as the `CmId` lives:
//! the QP, its CQ and completion channel are created at most once and
//! destroyed only by `Drop`.

#![deny(unsafe_code)]

use super::objects::Vouched;
use super::base::{Cm, IdRef};
use super::conn;
use super::params;
use crate::abi::cma::{ibv_comp_channel, ibv_cq, ibv_pd, ibv_qp, RDMA_PS_TCP, RDMA_PS_UDP};
use crate::abi::sockaddr::SockAddr;
use crate::abi::ucma::{RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR};
use crate::sys::verbs as cv;
use nix::errno::Errno;
use crate::abi::cma::{ibv_context, IBV_QPT_UD, RDMA_CM_EVENT_CONNECT_REQUEST};
use super::base::{ChanRef, Channel};
use std::ffi::{c_int, c_void};
use std::ptr::{null_mut, NonNull};

/// The values this API takes and reports (defined once, in `cma::params`).
pub use super::params::{ConnParam, QpCaps, UdParam};

/// The join flags of [`CmId::join_multicast_flags`] (`RDMA_MC_JOIN_FLAG_*`).
pub use super::conn::mcast::{JOIN_FLAG_FULLMEMBER, JOIN_FLAG_SENDONLY_FULLMEMBER};

/// The private data must fit the kernel's 8-bit length.
fn checked(param: &ConnParam) -> Result<&ConnParam, Errno> {
    u8::try_from(param.private_data.len()).map_err(|_| Errno::EINVAL)?;
    Ok(param)
}

/// Runs `f` (connect or accept) with `param` checked and as
/// `conn::ConnArgs` (its values as `struct rdma_conn_param`, its private
/// data borrowed); `None` stays `None`: the defaults.
fn with_args<R>(param: Option<&ConnParam>, f: impl FnOnce(Option<&conn::ConnArgs>) -> Result<R, Errno>) -> Result<R, Errno> {
    let Some(c) = param else { return f(None) };
    let c = checked(c)?;
    let values = conn::ConnArgs::values(c);
    f(Some(&conn::ConnArgs { private_data: &c.private_data, param: &values }))
}

/// The verbs objects of an id's QP. The pointers are valid while the
/// [`CmId`] they came from lives (see the module comment); using them is
/// up to the (unsafe) verbs code of the client.
#[derive(Clone, Copy, Debug)]
pub struct QpPtrs {
    pub qp: NonNull<ibv_qp>,
    pub cq: NonNull<ibv_cq>,
    pub channel: NonNull<ibv_comp_channel>,
    pub pd: NonNull<ibv_pd>,
}

/// An owned, synchronous connection manager id (its own event channel).
/// Dropping it destroys its QP (with the CQ and completion channel made by
/// [`CmId::create_rc_qp`]) and the id.
pub struct CmId {
    p: IdRef,
    cm: &'static Cm,
}

impl std::fmt::Debug for CmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmId").field("fd", &self.channel_fd()).finish()
    }
}

impl CmId {
    /// A synchronous id with its own event channel, port space TCP.
    pub fn create_tcp() -> Result<CmId, Errno> {
        Self::create_sync(RDMA_PS_TCP)
    }

    /// A synchronous id with its own event channel, port space UDP (UD QPs:
    /// datagram rsockets).
    pub fn create_udp() -> Result<CmId, Errno> {
        Self::create_sync(RDMA_PS_UDP)
    }

    /// A synchronous id with its own event channel in port space `ps`
    /// (`RDMA_PS_*`).
    pub fn create_sync(ps: u32) -> Result<CmId, Errno> {
        let cm = super::cm::global();
        let p = cm.create_id(None, null_mut(), ps)?;
        Ok(CmId { p, cm })
    }

    /// The id's port number (0 before it has a device).
    pub fn port_num(&self) -> u8 {
        self.p.id.port_num()
    }

    /// The descriptor of the id's event channel.
    pub fn channel_fd(&self) -> c_int {
        self.p.fd()
    }

    /// Sets the family of the (still unbound) source address, so that it
    /// reads back as an empty address of that family.
    pub fn set_src_family(&self, family: c_int) {
        self.p.id.set_src(&(family as libc::sa_family_t).to_ne_bytes());
    }

    /// `rdma_bind_addr`. `addr` holds a socket address of its family
    /// (longer is fine; shorter gives EINVAL).
    pub fn bind(&self, addr: &SockAddr) -> Result<(), Errno> {
        let a = self.addr(addr)?;
        self.cm.bind_addr(&self.p, Some(&a))
    }

    /// A socket address as the connection manager takes it
    /// ([`SockAddr::for_cm`]: its family's length, EINVAL when shorter).
    fn addr(&self, a: &SockAddr) -> Result<SockAddr, Errno> {
        SockAddr::for_cm(a.as_bytes(), self.cm.af_ib()).ok_or(Errno::EINVAL)
    }

    /// `rdma_listen`.
    pub fn listen(&self, backlog: c_int) -> Result<(), Errno> {
        conn::listen(self.cm, &self.p, backlog)
    }

    /// `rdma_resolve_addr` (synchronous: returns once resolved).
    pub fn resolve_addr(&self, dst: &SockAddr, timeout_ms: i32) -> Result<(), Errno> {
        let a = self.addr(dst)?;
        self.cm.resolve_addr(&self.p, None, Some(a), timeout_ms)
    }

    /// `rdma_resolve_route` (synchronous).
    pub fn resolve_route(&self, timeout_ms: i32) -> Result<(), Errno> {
        self.cm.resolve_route(&self.p, timeout_ms)
    }

    /// `rdma_connect` (synchronous): returns the private data of the
    /// peer's answer.
    pub fn connect(&self, param: &ConnParam) -> Result<Vec<u8>, Errno> {
        self.connect_with(Some(param))?;
        Ok(self.parked_param().map(|c| c.private_data).unwrap_or_default())
    }

    /// The parameters of the event a synchronous call left on the id
    /// (valid until the id's next synchronous call or destroy acks it).
    fn parked_param(&self) -> Option<ConnParam> {
        let ev = self.p.id.event();
        if ev.is_null() {
            return None;
        }
        let (c, data) = self.cm.event_conn(ev)?;
        Some(conn::conn_param_from_c(&c, data))
    }

    /// `rdma_get_request`: the next connection request of this (listening)
    /// id, as a new id and the request's parameters. Blocks unless the
    /// channel is readable.
    pub fn get_request(&self) -> Result<(CmId, ConnParam), Errno> {
        let p = conn::get_request(self.cm, &self.p)?;
        let n = CmId { p, cm: self.cm };
        let param = n.parked_param().ok_or(Errno::EINVAL)?;
        Ok((n, param))
    }

    /// `rdma_accept`.
    pub fn accept(&self, param: &ConnParam) -> Result<(), Errno> {
        self.accept_with(Some(param))
    }

    /// `rdma_reject` without private data.
    pub fn reject(&self) -> Result<(), Errno> {
        conn::reject(self.cm, &self.p, &[], 0)
    }

    /// `rdma_disconnect` (synchronous: waits for the DISCONNECTED event).
    pub fn disconnect(&self) -> Result<(), Errno> {
        conn::disconnect(self.cm, &self.p)
    }

    /// Stops the QP without a disconnect request (error state on
    /// InfiniBand/RoCE, SQD on iWARP): posted work is flushed. The
    /// kernel disconnects when the id is destroyed.
    pub fn stop_qp(&self) -> Result<(), Errno> {
        conn::stop_qp(&self.p)
    }

    /// `rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR)`.
    pub fn set_reuseaddr(&self, on: c_int) -> Result<(), Errno> {
        let mut v = on;
        self.cm.set_option(&self.p, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &mut v as *mut c_int as *mut c_void, std::mem::size_of::<c_int>())
    }

    /// The source address (all zero but the family before bind/resolve).
    pub fn local_addr(&self) -> libc::sockaddr_storage {
        self.p.id.src_storage()
    }

    /// The destination address.
    pub fn peer_addr(&self) -> libc::sockaddr_storage {
        self.p.id.dst_storage()
    }

    /// Whether the id has a device (bound to one, resolved, or a request).
    pub fn has_device(&self) -> bool {
        !self.p.id.verbs().is_null()
    }

    /// The device's max_qp_wr (0xFFFE when unknown), or EINVAL without a device.
    pub fn max_qp_wr(&self) -> Result<u32, Errno> {
        if !self.has_device() {
            return Err(Errno::EINVAL);
        }
        let n = match self.p.device() {
            Some(d) => self.cm.devices.lock().find_mut(d.key).map_or(0, |d| d.max_qpsize),
            None => 0,
        };
        Ok(if n <= 0 { 0xFFFE } else { n as u32 })
    }

    /// Whether the device is iWARP (no immediate data).
    pub fn is_iwarp(&self) -> bool {
        self.has_device() && self.p.id.transport_type() == cv::IBV_TRANSPORT_IWARP
    }

    /// Creates the id's RC QP over one CQ of `cqe` entries shared by both
    /// directions, with its own completion channel; with `sig_all` every
    /// send is signalled, without it only those posted with
    /// `IBV_SEND_SIGNALED` (and failed ones). Once only.
    /// Returns the capacities the device granted.
    pub fn create_rc_qp(&self, cqe: u32, caps: QpCaps, sig_all: bool) -> Result<QpCaps, Errno> {
        self.create_qp_of(crate::abi::cma::IBV_QPT_RC, cqe, caps, sig_all, 0)
    }

    /// As [`CmId::create_rc_qp`], a UD QP (port space UDP: the connection
    /// manager moves it to RTS with the UDP qkey).
    pub fn create_ud_qp(&self, cqe: u32, caps: QpCaps, sig_all: bool) -> Result<QpCaps, Errno> {
        self.create_qp_of(crate::abi::cma::IBV_QPT_UD, cqe, caps, sig_all, 0)
    }

    /// As [`CmId::create_rc_qp`] or [`CmId::create_ud_qp`] (by the id's
    /// QP type), with creation flags (`IBV_QP_CREATE_*`, as
    /// `rdma_create_qp_ex` passes them: the device may refuse them).
    pub fn create_qp_flags(&self, cqe: u32, caps: QpCaps, sig_all: bool, create_flags: u32) -> Result<QpCaps, Errno> {
        let t = if self.is_ud() { crate::abi::cma::IBV_QPT_UD } else { crate::abi::cma::IBV_QPT_RC };
        self.create_qp_of(t, cqe, caps, sig_all, create_flags)
    }

    fn create_qp_of(&self, qp_type: crate::abi::cma::ibv_qp_type, cqe: u32, caps: QpCaps, sig_all: bool, create_flags: u32) -> Result<QpCaps, Errno> {
        if !self.has_device() || !self.p.id.qp().is_null() {
            return Err(Errno::EINVAL);
        }
        self.p.id.create_shared_cq(cqe)?;
        let cap = params::qp_cap_of(caps);
        // No handles of our own: the QP gets the id's PD and its shared CQ.
        let attr = Vouched::without_handles(cap, qp_type, c_int::from(sig_all));
        let mut ex = Vouched::<cv::QpInitAttrEx>::from_base(&attr, self.p.id.pd_handle(), &self.p.id);
        if create_flags != 0 {
            ex.add_create_flags(create_flags);
        }
        if let Err(e) = conn::qp::create_qp_ex(self.cm, &self.p, &mut ex) {
            // Only the CQ and its channel exist.
            conn::qp::destroy_qp_of(&self.p);
            return Err(e);
        }
        Ok(params::qp_caps_of(&ex.get().cap))
    }

    /// The QP made by [`CmId::create_rc_qp`], its CQ, channel and PD.
    pub fn qp_ptrs(&self) -> Option<QpPtrs> {
        let id = &self.p.id;
        Some(QpPtrs {
            qp: NonNull::new(id.qp())?,
            cq: NonNull::new(id.recv_cq())?,
            channel: NonNull::new(id.recv_cq_channel())?,
            pd: NonNull::new(id.pd())?,
        })
    }
}

/// Non-blocking use of a synchronous id (rsockets' service model): with
/// the id's channel descriptor set O_NONBLOCK, the synchronous calls above
/// return EAGAIN once the request is issued, and [`CmId::complete`] picks
/// up the answer later (upstream's `ucma_complete` on such an id).
impl CmId {
    /// Acks the parked event and parks the next one (EAGAIN when none is
    /// queued on a non-blocking channel); its status as an errno.
    pub fn complete(&self) -> Result<(), Errno> {
        self.cm.complete(&self.p)
    }

    /// The type of the parked event (`RDMA_CM_EVENT_*`), if any.
    pub fn parked_event(&self) -> Option<u32> {
        let ev = self.p.id.event();
        if ev.is_null() {
            return None;
        }
        self.cm.live.events.with(ev as usize, |e| e.event.0.event)
    }

    /// The UD parameters of the parked event (a synchronous UD id's
    /// connect answer), if it is a UD id's event.
    pub fn parked_ud(&self) -> Option<UdParam> {
        let ev = self.p.id.event();
        if ev.is_null() || !self.is_ud() {
            return None;
        }
        self.cm.live.events.with(ev as usize, |e| read_ud(e).0)
    }

    /// The private data of the parked event (empty when none).
    pub fn parked_private_data(&self) -> Vec<u8> {
        self.parked_param().map(|c| c.private_data).unwrap_or_default()
    }

    /// `rdma_set_option` with the value's bytes (the kernel reads them).
    pub fn set_option_bytes(&self, level: c_int, name: c_int, val: &[u8]) -> Result<(), Errno> {
        self.cm.set_option(&self.p, level, name, val.as_ptr() as *mut c_void, val.len())
    }

    /// The id's resolved paths, as the kernel reports them (none before
    /// the route is resolved).
    pub fn route_paths(&self) -> Vec<crate::abi::cma::ibv_sa_path_rec> {
        match self.cm.ucma.query_route(self.p.fd(), self.p.handle()) {
            Ok(r) => r.paths[..(r.num_paths as usize).min(r.paths.len())].iter().map(crate::sys::ucma::path_from_kern).collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// Event channels and asynchronous ids (the public Rust API's model: many
/// ids report to one channel, every call returns once issued).
impl CmId {
    /// An asynchronous id reporting to `ch`, of port space `ps`
    /// (`RDMA_PS_*`).
    pub fn create_on(ch: &ChanRef, ps: u32) -> Result<CmId, Errno> {
        let cm = super::cm::global();
        let p = cm.create_id(Some(ch), null_mut(), ps)?;
        Ok(CmId { p, cm })
    }

    /// The library's unique number of the id (what [`RawEvent::id_uid`]
    /// names).
    pub fn uid(&self) -> u64 {
        self.p.uid()
    }

    /// The port space (`RDMA_PS_*`).
    pub fn port_space(&self) -> u32 {
        self.p.id.ps()
    }

    /// Whether the id's QP type is UD.
    pub fn is_ud(&self) -> bool {
        self.p.id.qp_type() == IBV_QPT_UD
    }

    /// `rdma_resolve_addr` with an optional source address.
    pub fn resolve_addr_from(&self, src: Option<&SockAddr>, dst: &SockAddr, timeout_ms: i32) -> Result<(), Errno> {
        let s = match src {
            Some(b) => Some(self.addr(b)?),
            None => None,
        };
        let d = self.addr(dst)?;
        self.cm.resolve_addr(&self.p, s, Some(d), timeout_ms)
    }

    /// `rdma_connect` without waiting for (or reading) an answer: on an
    /// asynchronous id the answer comes as an event. `None`: the defaults.
    pub fn connect_with(&self, param: Option<&ConnParam>) -> Result<(), Errno> {
        with_args(param, |a| conn::connect(self.cm, &self.p, a))
    }

    /// `rdma_accept`, `None`: the defaults.
    pub fn accept_with(&self, param: Option<&ConnParam>) -> Result<(), Errno> {
        with_args(param, |a| conn::accept(self.cm, &self.p, a))
    }

    /// `rdma_reject` with private data (at most 255 bytes).
    pub fn reject_with(&self, data: &[u8]) -> Result<(), Errno> {
        u8::try_from(data.len()).map_err(|_| Errno::EINVAL)?;
        conn::reject(self.cm, &self.p, data, 0)
    }

    /// `rdma_join_multicast` (full member) of the group at `addr`.
    pub fn join_multicast(&self, addr: &SockAddr) -> Result<(), Errno> {
        self.join_multicast_flags(addr, conn::mcast::JOIN_FLAG_FULLMEMBER)
    }

    /// `rdma_join_multicast_ex` of the group at `addr` with join flags
    /// `RDMA_MC_JOIN_FLAG_*` (EINVAL for any other value).
    pub fn join_multicast_flags(&self, addr: &SockAddr, join_flags: u16) -> Result<(), Errno> {
        if u32::from(join_flags) >= conn::mcast::JOIN_FLAG_RESERVED {
            return Err(Errno::EINVAL);
        }
        let a = self.addr(addr)?;
        conn::mcast::join(self.cm, &self.p, a, join_flags, null_mut())
    }

    /// `rdma_leave_multicast`.
    pub fn leave_multicast(&self, addr: &SockAddr) -> Result<(), Errno> {
        let a = self.addr(addr)?;
        conn::mcast::leave(self.cm, &self.p, a)
    }

    /// `rdma_migrate_id` to another channel.
    pub fn migrate(&self, ch: &ChanRef) -> Result<(), Errno> {
        self.cm.migrate_id(&self.p, Some(ch))
    }

    /// The QP's number, once the id has a QP.
    pub fn qp_num(&self) -> Option<u32> {
        self.p.id.qp_num_srq().map(|(n, _)| n)
    }

    /// The PD of the id's device (`None` before the id has a device).
    pub fn pd_ptr(&self) -> Option<NonNull<ibv_pd>> {
        NonNull::new(self.p.id.pd())
    }

    /// The verbs context of the id's device (null without one). Valid
    /// while the id lives and keeps its device.
    pub fn verbs_context(&self) -> *mut ibv_context {
        self.p.id.verbs()
    }
}

/// A new event channel of the library's connection manager.
pub fn create_channel() -> Result<ChanRef, Errno> {
    super::cm::global().create_channel()
}

/// Closes a channel (every id on it must be gone).
pub fn destroy_channel(ch: &Channel) {
    super::cm::global().destroy_channel(ch)
}

/// An event read out of the library's event record as owned data. The
/// record stays unacknowledged until [`ack_event`] with [`RawEvent::key`].
pub struct RawEvent {
    /// The event record's address (what C knows it by).
    pub key: usize,
    /// `RDMA_CM_EVENT_*` as the library reports it.
    pub event: u32,
    /// The status (0 or a negative errno value, or a reject reason).
    pub status: i32,
    /// [`CmId::uid`] of the id the event is for (for a connection request,
    /// the listening id).
    pub id_uid: u64,
    /// A connection request's new id (owned from here on).
    pub request: Option<CmId>,
    /// Connection parameters (connected port spaces), with private data.
    pub conn: Option<ConnParam>,
    /// UD parameters (UD ids) and the private data.
    pub ud: Option<(UdParam, Vec<u8>)>,
}

/// Blocks for the channel's next event (EAGAIN at once on a non-blocking
/// channel without one) and reads it out.
pub fn get_event(ch: &Channel) -> Result<RawEvent, Errno> {
    let cm = super::cm::global();
    let got = super::delivery::get_event(ch)?;
    let key = got.ptr as usize;
    let read = cm.live.events.with(key, |e| {
        let ev = &e.event.0;
        let listener = (ev.event == RDMA_CM_EVENT_CONNECT_REQUEST).then_some(ev.listen_id);
        (ev.id, listener, e.id_priv.as_ref().map(|p| (p.uid(), p.id.qp_type() == IBV_QPT_UD)))
    });
    let Some((id_ptr, listener, owner)) = read else {
        return Err(Errno::EINVAL);
    };
    let (mut id_uid, mut ud) = owner.unwrap_or((0, false));
    let mut request = None;
    if listener.is_some() {
        // The event holds the listener; its `id` is the new connection.
        if let Ok(p) = cm.id(id_ptr) {
            ud = p.id.qp_type() == IBV_QPT_UD;
            request = Some(CmId { p, cm });
        }
    } else if let Ok(p) = cm.id(id_ptr) {
        id_uid = p.uid();
    }
    let (conn, udp) = if ud {
        (None, cm.live.events.with(key, read_ud))
    } else {
        (cm.event_conn(got.ptr).map(|(c, data)| conn::conn_param_from_c(&c, data)), None)
    };
    Ok(RawEvent { key, event: got.event, status: got.status, id_uid, request, conn, ud: udp })
}

/// The UD parameters of an event and its private data.
fn read_ud(e: &super::base::EventPriv) -> (UdParam, Vec<u8>) {
    let u = e.event.ud();
    let n = (u.private_data_len as usize).min(e.private_data.len());
    let data = if u.private_data.is_null() { Vec::new() } else { e.private_data[..n].to_vec() };
    (UdParam::from_c(&u), data)
}

/// Acknowledges (releases) an event read by [`get_event`].
pub fn ack_event(key: usize) {
    super::delivery::ack_event(super::cm::global(), key as *mut crate::abi::cma::rdma_cm_event);
}

impl Drop for CmId {
    fn drop(&mut self) {
        // Its QP, CQ and channel go first.
        conn::qp::destroy_qp_of(&self.p);
        if let Err(e) = self.cm.destroy_id(&self.p) {
            log::warn!("rdma_destroy_id of an rsocket id failed: {e}");
        }
    }
}
