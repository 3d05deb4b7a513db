// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A safe Rust API of the connection manager for the library's own clients
//! (rsockets): an owned [`CmId`] whose methods return `Result<_, Errno>`.
//!
//! It calls the core functions of `cm` and `conn` directly, never the C
//! exports (no second panic boundary, no errno round trip). The raw
//! pointers stay inside this file; what leaves it is owned Rust data
//! (addresses, private data) or raw verbs handles ([`QpPtrs`], the PD)
//! that stay valid for as long as the `CmId` lives: the QP, its CQ and
//! completion channel are created at most once and destroyed only by
//! `Drop`.

use super::{Cm, IdPriv};
use crate::cma::conn;
use crate::sys::verbs as cv;
use crate::abi::cma::{ibv_comp_channel, ibv_context, ibv_cq, ibv_pd, ibv_qp, rdma_cm_id, rdma_conn_param, RDMA_PS_TCP};
use crate::abi::ucma::{RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR};
use nix::errno::Errno;
use std::ffi::{c_int, c_void};
use std::ptr::{null, null_mut, NonNull};

/// Connection parameters (`struct rdma_conn_param` without pointers).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnParam {
    pub private_data: Vec<u8>,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

impl ConnParam {
    /// The C view; borrows `self.private_data`.
    fn raw(&self) -> Result<rdma_conn_param, Errno> {
        let len = u8::try_from(self.private_data.len()).map_err(|_| Errno::EINVAL)?;
        Ok(rdma_conn_param {
            private_data: if len == 0 { null() } else { self.private_data.as_ptr() as *const c_void },
            private_data_len: len,
            responder_resources: self.responder_resources,
            initiator_depth: self.initiator_depth,
            flow_control: self.flow_control,
            retry_count: self.retry_count,
            rnr_retry_count: self.rnr_retry_count,
            srq: self.srq,
            qp_num: self.qp_num,
        })
    }

    /// Copies a C view (its private data included).
    ///
    /// # Safety
    /// `c.private_data` is NULL or readable for `c.private_data_len` bytes.
    unsafe fn from_raw(c: &rdma_conn_param) -> ConnParam {
        let private_data = if c.private_data.is_null() || c.private_data_len == 0 {
            Vec::new()
        } else {
            // SAFETY: the caller's contract.
            unsafe { std::slice::from_raw_parts(c.private_data as *const u8, c.private_data_len as usize) }.to_vec()
        };
        ConnParam {
            private_data,
            responder_resources: c.responder_resources,
            initiator_depth: c.initiator_depth,
            flow_control: c.flow_control,
            retry_count: c.retry_count,
            rnr_retry_count: c.rnr_retry_count,
            srq: c.srq,
            qp_num: c.qp_num,
        }
    }
}

/// Capacities of a QP (asked for, and what the device granted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCaps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
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
    p: NonNull<IdPriv>,
    cm: &'static Cm,
}

// SAFETY: the core's functions may be called from any thread (they
// serialize on the core's own locks, as librdmacm's do); the pointer is
// owned by this value and freed only by Drop.
unsafe impl Send for CmId {}
// SAFETY: as above: every method goes through the core, which is safe to
// call concurrently on one id the same way the C API is.
unsafe impl Sync for CmId {}

impl std::fmt::Debug for CmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmId").field("fd", &self.channel_fd()).finish()
    }
}

impl CmId {
    /// A synchronous id with its own event channel, port space TCP.
    pub fn create_tcp() -> Result<CmId, Errno> {
        let cm = super::global();
        // SAFETY: a NULL channel asks for a private (synchronous) channel.
        let p = unsafe { cm.create_id(null_mut(), null_mut(), RDMA_PS_TCP)? };
        Ok(CmId { p: NonNull::new(p).ok_or(Errno::ENOMEM)?, cm })
    }

    fn p(&self) -> *mut IdPriv {
        self.p.as_ptr()
    }

    fn id(&self) -> *mut rdma_cm_id {
        IdPriv::raw(self.p())
    }

    /// The descriptor of the id's event channel.
    pub fn channel_fd(&self) -> c_int {
        // SAFETY: the id is live; a synchronous id always has its channel.
        unsafe { IdPriv::fd(self.p()) }
    }

    /// Sets the family of the (still unbound) source address, so that it
    /// reads back as an empty address of that family.
    pub fn set_src_family(&self, family: c_int) {
        // SAFETY: the id is live; a plain field write of the public struct
        // (no other thread knows the id yet: this is done right after create).
        unsafe { (*self.id()).route.addr.src.addr.sa_family = family as libc::sa_family_t };
    }

    /// `rdma_bind_addr`. `addr` holds a socket address of its family
    /// (longer is fine; shorter gives EINVAL).
    pub fn bind(&self, addr: &[u8]) -> Result<(), Errno> {
        let a = self.addr(addr)?;
        // SAFETY: the id is live.
        unsafe { self.cm.bind(self.p(), Some(a)) }
    }

    /// A socket address as the core reads it (its family's length).
    fn addr(&self, b: &[u8]) -> Result<crate::sys::ucma::RawAddr, Errno> {
        if b.len() < 2 {
            return Err(Errno::EINVAL);
        }
        let fam = u16::from_ne_bytes([b[0], b[1]]) as i32;
        let len = super::addr_len(fam, self.cm.af_ib());
        if b.len() < len {
            return Err(Errno::EINVAL);
        }
        Ok(crate::sys::ucma::RawAddr::from_slice(&b[..len]))
    }

    /// `rdma_listen`.
    pub fn listen(&self, backlog: c_int) -> Result<(), Errno> {
        // SAFETY: the id is live.
        unsafe { conn::listen(self.cm, self.p(), backlog) }
    }

    /// `rdma_resolve_addr` (synchronous: returns once resolved).
    pub fn resolve_addr(&self, dst: &[u8], timeout_ms: i32) -> Result<(), Errno> {
        let a = self.addr(dst)?;
        // SAFETY: the id is live.
        unsafe { self.cm.resolve_addr(self.p(), None, Some(a), timeout_ms) }
    }

    /// `rdma_resolve_route` (synchronous).
    pub fn resolve_route(&self, timeout_ms: i32) -> Result<(), Errno> {
        // SAFETY: the id is live.
        unsafe { self.cm.resolve_route(self.p(), timeout_ms) }
    }

    /// `rdma_connect` (synchronous): returns the private data of the
    /// peer's answer.
    pub fn connect(&self, param: &ConnParam) -> Result<Vec<u8>, Errno> {
        let raw = param.raw()?;
        // SAFETY: the id is live; raw borrows param, which outlives the call.
        unsafe { conn::connect(self.cm, self.p(), Some(&raw))? };
        Ok(self.parked_param().map(|c| c.private_data).unwrap_or_default())
    }

    /// The parameters of the event a synchronous call left on the id.
    fn parked_param(&self) -> Option<ConnParam> {
        // SAFETY: the id is live; a parked event stays valid until the id
        // acks it (the next synchronous call or destroy).
        unsafe {
            let ev = (*self.id()).event;
            if ev.is_null() {
                return None;
            }
            Some(ConnParam::from_raw(&(*ev).param.conn))
        }
    }

    /// `rdma_get_request`: the next connection request of this (listening)
    /// id, as a new id and the request's parameters. Blocks unless the
    /// channel is readable.
    pub fn get_request(&self) -> Result<(CmId, ConnParam), Errno> {
        // SAFETY: the id is live.
        let nid = unsafe { conn::get_request(self.cm, self.p())? };
        // SAFETY: a request's new id is live and ours from here on.
        let p = unsafe { IdPriv::from_id(nid) };
        let n = CmId { p: NonNull::new(p).ok_or(Errno::EINVAL)?, cm: self.cm };
        let param = n.parked_param().ok_or(Errno::EINVAL)?;
        Ok((n, param))
    }

    /// `rdma_accept`.
    pub fn accept(&self, param: &ConnParam) -> Result<(), Errno> {
        let raw = param.raw()?;
        // SAFETY: the id is live; raw borrows param.
        unsafe { conn::accept(self.cm, self.p(), Some(&raw)) }
    }

    /// `rdma_reject` without private data.
    pub fn reject(&self) -> Result<(), Errno> {
        // SAFETY: the id is live; no private data.
        unsafe { conn::reject(self.cm, self.p(), null(), 0, 0) }
    }

    /// `rdma_disconnect` (synchronous: waits for the DISCONNECTED event).
    pub fn disconnect(&self) -> Result<(), Errno> {
        // SAFETY: the id is live.
        unsafe { conn::disconnect(self.cm, self.p()) }
    }

    /// Stops the QP without a disconnect request (error state on
    /// InfiniBand/RoCE, SQD on iWARP): posted work is flushed. The
    /// kernel disconnects when the id is destroyed.
    pub fn stop_qp(&self) -> Result<(), Errno> {
        // SAFETY: the id is live.
        unsafe { conn::stop_qp(self.p()) }
    }

    /// `rdma_set_option(RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR)`.
    pub fn set_reuseaddr(&self, on: c_int) -> Result<(), Errno> {
        let mut v = on;
        // SAFETY: the id is live; v is a readable int of the given size.
        unsafe { self.cm.set_option(self.p(), RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &mut v as *mut c_int as *mut c_void, std::mem::size_of::<c_int>()) }
    }

    /// The source address (all zero but the family before bind/resolve).
    pub fn local_addr(&self) -> libc::sockaddr_storage {
        // SAFETY: the id is live; the union is plain data.
        unsafe { (*self.id()).route.addr.src.storage }
    }

    /// The destination address.
    pub fn peer_addr(&self) -> libc::sockaddr_storage {
        // SAFETY: as above.
        unsafe { (*self.id()).route.addr.dst.storage }
    }

    fn context(&self) -> Option<*mut ibv_context> {
        // SAFETY: the id is live; verbs is set once the id has a device.
        let ctx = unsafe { (*self.id()).verbs };
        (!ctx.is_null()).then_some(ctx)
    }

    /// Whether the id has a device (bound to one, resolved, or a request).
    pub fn has_device(&self) -> bool {
        self.context().is_some()
    }

    /// The device's max_qp_wr (0xFFFE when unknown), or EINVAL without a device.
    pub fn max_qp_wr(&self) -> Result<u32, Errno> {
        self.context().ok_or(Errno::EINVAL)?;
        // SAFETY: the id is live; its device entry stays while the id holds it.
        let n = unsafe {
            let d = (*self.p()).dev.load(std::sync::atomic::Ordering::Acquire);
            if d.is_null() {
                0
            } else {
                (*d).max_qpsize
            }
        };
        Ok(if n <= 0 { 0xFFFE } else { n as u32 })
    }

    /// Whether the device is iWARP (no immediate data).
    pub fn is_iwarp(&self) -> bool {
        // SAFETY: ctx is the id's open device.
        self.context().is_some_and(|ctx| unsafe { cv::transport_type(ctx) } == cv::IBV_TRANSPORT_IWARP)
    }

    /// Creates the id's RC QP over one CQ of `cqe` entries shared by both
    /// directions, with its own completion channel, every send signalled.
    /// Once only.
    /// Returns the capacities the device granted.
    pub fn create_rc_qp(&self, cqe: u32, caps: QpCaps) -> Result<QpCaps, Errno> {
        let id = self.id();
        let ctx = self.context().ok_or(Errno::EINVAL)?;
        // SAFETY: the id is live.
        if unsafe { !(*id).qp.is_null() || !(*id).recv_cq.is_null() } {
            return Err(Errno::EINVAL);
        }
        // SAFETY: ctx is open; the channel and CQ are handed to the id,
        // which destroys them with its QP (conn::destroy_qp_of).
        unsafe {
            let ch = cv::create_comp_channel(ctx)?;
            let cq = match cv::create_cq(ctx, cqe, id as *mut c_void, ch) {
                Ok(cq) => cq,
                Err(e) => {
                    cv::destroy_comp_channel(ch);
                    return Err(e);
                }
            };
            (*id).recv_cq_channel = ch;
            (*id).send_cq_channel = ch;
            (*id).recv_cq = cq;
            (*id).send_cq = cq;
        }
        let mut attr = cv::QpInitAttr {
            qp_context: null_mut(),
            // SAFETY: the id is live.
            send_cq: unsafe { (*id).send_cq },
            // SAFETY: the id is live.
            recv_cq: unsafe { (*id).recv_cq },
            srq: null_mut(),
            cap: cv::QpCap { max_send_wr: caps.max_send_wr, max_recv_wr: caps.max_recv_wr, max_send_sge: caps.max_send_sge, max_recv_sge: caps.max_recv_sge, max_inline_data: caps.max_inline_data },
            qp_type: 2, // IBV_QPT_RC
            sq_sig_all: 1,
        };
        // SAFETY: the id is live; attr is a valid ibv_qp_init_attr mirror.
        let r = unsafe { conn::create_qp(self.cm, self.p(), null_mut(), &mut attr) };
        if let Err(e) = r {
            // SAFETY: the id is live; only its CQ and channel exist.
            unsafe { conn::destroy_qp_of(self.p()) };
            return Err(e);
        }
        let c = attr.cap;
        Ok(QpCaps { max_send_wr: c.max_send_wr, max_recv_wr: c.max_recv_wr, max_send_sge: c.max_send_sge, max_recv_sge: c.max_recv_sge, max_inline_data: c.max_inline_data })
    }

    /// The QP made by [`CmId::create_rc_qp`], its CQ, channel and PD.
    pub fn qp_ptrs(&self) -> Option<QpPtrs> {
        let id = self.id();
        // SAFETY: the id is live; plain reads of its public fields.
        unsafe {
            Some(QpPtrs {
                qp: NonNull::new((*id).qp)?,
                cq: NonNull::new((*id).recv_cq)?,
                channel: NonNull::new((*id).recv_cq_channel)?,
                pd: NonNull::new((*id).pd)?,
            })
        }
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: we own the live id; nothing else uses it any more (every
        // user holds this value). Its QP, CQ and channel go first.
        unsafe {
            conn::destroy_qp_of(self.p());
            if let Err(e) = self.cm.destroy_id(self.p()) {
                log::warn!("rdma_destroy_id of an rsocket id failed: {e}");
            }
        }
    }
}
