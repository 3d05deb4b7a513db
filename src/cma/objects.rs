// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The libibverbs objects an id names (its CQs and completion channels,
//! QP, SRQ, its device's XRC domain) and the handles the C caller hands
//! in ([`Vouched`]): the operations `crate::cma::conn::qp` builds QPs and
//! SRQs with.  With `crate::cma::public` and `crate::cma::alloc` (ids
//! and events built in place) the only modules of `cma` with unsafe code.
//!
//! Why the calls are sound: every pointer handed to `crate::sys::verbs`
//! here is either
//! - a handle field of the public id, which holds NULL or a live object
//!   (the invariant `crate::cma::public` states: only `cma` sets these
//!   fields, to objects the library made or the caller vouched for, and
//!   clears them before the object is destroyed);
//! - an object created here and not yet published ([`NewQp`]);
//! - a handle inside a [`Vouched`] value, which only the C API creates,
//!   under the contract of the export that received it;
//! - an [`Xrcd`], which only [`PubId::open_xrcd`] creates.
#![allow(unsafe_code)]

use super::public::PubId;
use crate::abi::cma::*;
use crate::sys::verbs::{self, Ece, QpAttr, QpInitAttr, QpInitAttrEx, SrqInitAttr, SrqInitAttrEx};
use nix::errno::Errno;
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

/// A value from C holding libibverbs handles (an attribute set, a PD)
/// that the caller promised are NULL or live objects.
#[derive(Clone, Copy)]
pub struct Vouched<T>(T);

impl<T> Vouched<T> {
    /// # Safety
    /// Every libibverbs handle in `v` must be NULL or a live object for as
    /// long as the value (or a copy of it) is used.
    pub unsafe fn new(v: T) -> Vouched<T> {
        Vouched(v)
    }

    /// The value, to read.
    pub fn get(&self) -> &T {
        &self.0
    }

    /// The value, to hand back to C.
    pub fn into_inner(self) -> T {
        self.0
    }
}

/// A caller's open device context (`ibv_gid_reachable`'s first argument):
/// the queries the reachability check makes on it.
impl Vouched<*mut ibv_context> {
    /// The device's number of physical ports.
    pub fn port_count(&self) -> Result<u8, Errno> {
        // SAFETY: a vouched context is open.
        unsafe { verbs::port_count(self.0) }
    }

    /// A port's state and link layer.
    pub fn port_state(&self, port: u8) -> Result<(u32, u8), Errno> {
        // SAFETY: as above.
        unsafe { verbs::port_state(self.0, port) }
    }

    /// The device's node GUID.
    pub fn node_guid(&self) -> u64 {
        // SAFETY: as above.
        unsafe { verbs::node_guid(self.0) }
    }

    /// The interface index behind a port's GID index 0 (0 if unknown).
    pub fn ifindex(&self, port: u8) -> u32 {
        // SAFETY: as above.
        unsafe { verbs::ndev_ifindex(self.0, port, 0) }
    }

    /// GID index 0 of a port.
    pub fn gid0(&self, port: u8) -> Result<[u8; 16], Errno> {
        // SAFETY: as above.
        unsafe { verbs::query_gid(self.0, port, 0) }
    }
}

impl Vouched<QpInitAttr> {
    /// An attribute set that names no handle (PD, CQs, SRQ all NULL): the
    /// QP gets the id's PD and CQs.  Nothing to vouch for.
    pub fn without_handles(cap: verbs::QpCap, qp_type: u32, sq_sig_all: c_int) -> Self {
        Vouched(QpInitAttr { qp_context: null_mut(), send_cq: null_mut(), recv_cq: null_mut(), srq: null_mut(), cap, qp_type, sq_sig_all })
    }
}

impl Vouched<QpInitAttrEx> {
    /// An extended attribute set from a basic one and a PD (the id's when
    /// `pd` is NULL), as `rdma_create_qp` builds it.
    pub fn from_base(b: &Vouched<QpInitAttr>, pd: Vouched<*mut ibv_pd>, id: &PubId) -> Self {
        let mut ex = QpInitAttrEx::zeroed();
        ex.set_base(&b.0);
        ex.comp_mask = verbs::IBV_QP_INIT_ATTR_PD;
        ex.pd = if pd.0.is_null() { id.pd() } else { pd.0 };
        Vouched(ex)
    }

    /// The basic attribute set (what `rdma_create_qp` writes back).
    pub fn base(&self) -> Vouched<QpInitAttr> {
        Vouched(self.0.base())
    }

    /// Uses the id's PD.
    pub fn use_pd_of(&mut self, id: &PubId) {
        self.0.comp_mask |= verbs::IBV_QP_INIT_ATTR_PD;
        self.0.pd = id.pd();
    }

    /// The device context of the PD, NULL without one.
    pub fn pd_context(&self) -> *mut ibv_context {
        if self.0.pd.is_null() {
            return null_mut();
        }
        // SAFETY: a vouched PD is live.
        unsafe { verbs::pd_context(self.0.pd) }
    }

    /// Uses the XRC domain `x`.
    pub fn set_xrcd(&mut self, x: Xrcd) {
        self.0.xrcd = x.0;
        self.0.comp_mask |= verbs::IBV_QP_INIT_ATTR_XRCD;
    }

    /// Adds creation flags (`IBV_QP_CREATE_*`; plain data: the device
    /// judges them).
    pub fn add_create_flags(&mut self, flags: u32) {
        self.0.comp_mask |= verbs::IBV_QP_INIT_ATTR_CREATE_FLAGS;
        self.0.create_flags |= flags;
    }

    /// Fills the CQs and SRQ the caller left NULL with the id's.
    pub fn fill_from(&mut self, id: &PubId) {
        if self.0.send_cq.is_null() {
            self.0.send_cq = id.send_cq();
        }
        if self.0.recv_cq.is_null() {
            self.0.recv_cq = id.recv_cq();
        }
        if !id.srq().is_null() && self.0.srq.is_null() {
            self.0.srq = id.srq();
        }
    }
}

impl Vouched<QpInitAttr> {
    /// Sets the QP type (plain data).
    pub fn set_qp_type(&mut self, t: u32) {
        self.0.qp_type = t;
    }
}

impl Vouched<SrqInitAttrEx> {
    /// An extended SRQ attribute set from a basic one, as `rdma_create_srq`
    /// builds it.
    pub fn from_base(b: &Vouched<SrqInitAttr>, pd: Vouched<*mut ibv_pd>, srq_type: u32) -> Self {
        let mut ex = SrqInitAttrEx::zeroed();
        ex.srq_context = b.0.srq_context;
        ex.attr = b.0.attr;
        ex.comp_mask = verbs::IBV_SRQ_INIT_ATTR_TYPE | verbs::IBV_SRQ_INIT_ATTR_PD;
        ex.srq_type = srq_type;
        ex.pd = pd.0;
        Vouched(ex)
    }

    /// The basic attribute set (what `rdma_create_srq` writes back).
    pub fn base(&self) -> Vouched<SrqInitAttr> {
        Vouched(SrqInitAttr { srq_context: self.0.srq_context, attr: self.0.attr })
    }

    /// Uses the id's PD.
    pub fn use_pd_of(&mut self, id: &PubId) {
        self.0.pd = id.pd();
        self.0.comp_mask |= verbs::IBV_SRQ_INIT_ATTR_PD;
    }

    /// Uses the XRC domain `x`.
    pub fn set_xrcd(&mut self, x: Xrcd) {
        self.0.xrcd = x.0;
    }

    /// Uses the id's receive CQ.
    pub fn use_recv_cq_of(&mut self, id: &PubId) {
        self.0.cq = id.recv_cq();
    }

    /// Sets comp_mask bits (plain data).
    pub fn add_comp_mask(&mut self, bits: u32) {
        self.0.comp_mask |= bits;
    }
}

/// An XRC domain the library opened for a device (closed with its PD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Xrcd(*mut c_void);

// SAFETY: a libibverbs handle, usable from any thread.
unsafe impl Send for Xrcd {}
// SAFETY: as above.
unsafe impl Sync for Xrcd {}

impl Xrcd {
    /// The handle's address (for `Verbs::close_xrcd`).
    pub fn addr(self) -> usize {
        self.0 as usize
    }
}

/// A QP created for an id and not published in `id->qp` yet: set it up,
/// then [`PubId::publish_qp`] or [`NewQp::destroy`].
pub struct NewQp(*mut ibv_qp);

impl NewQp {
    /// `ibv_modify_qp`.
    pub fn modify(&self, attr: &mut QpAttr, mask: c_int) -> Result<(), Errno> {
        // SAFETY: a new QP is live until destroyed or published.
        unsafe { verbs::modify_qp(self.0, attr, mask) }
    }

    /// `ibv_query_ece` (true: the provider has no ECE).
    pub fn query_ece(&self) -> Result<(Ece, bool), Errno> {
        // SAFETY: as in modify.
        unsafe { verbs::query_ece(self.0) }
    }

    /// `ibv_set_ece`.
    pub fn set_ece(&self, e: Ece) -> Result<(), Errno> {
        // SAFETY: as in modify.
        unsafe { verbs::set_ece(self.0, e) }
    }

    /// Destroys the QP.
    pub fn destroy(self) {
        // SAFETY: as in modify; the handle is consumed.
        unsafe { verbs::destroy_qp(self.0) };
    }
}

impl PubId {
    /// Creates a receive and/or a send CQ (sizes 0: none), each with its own
    /// completion channel and the public id as CQ context (what
    /// rdma_get_send_comp and rdma_get_recv_comp expect), on the id's
    /// device.  On failure what was made is released
    /// ([`PubId::destroy_cqs`]).
    pub fn create_cqs(&self, send: u32, recv: u32) -> Result<(), Errno> {
        let cq_context = self.as_ptr() as *mut c_void;
        let ctx = self.verbs();
        if ctx.is_null() && (send != 0 || recv != 0) {
            return Err(Errno::EINVAL);
        }
        // SAFETY: ctx is the id's open device (id->verbs invariant); the
        // channels passed to create_cq were just created on it.
        let r = unsafe {
            (|| {
                if recv != 0 {
                    self.set_recv_cq_channel(verbs::create_comp_channel(ctx)?);
                    self.set_recv_cq(verbs::create_cq(ctx, recv, cq_context, self.recv_cq_channel())?);
                }
                if send != 0 {
                    self.set_send_cq_channel(verbs::create_comp_channel(ctx)?);
                    self.set_send_cq(verbs::create_cq(ctx, send, cq_context, self.send_cq_channel())?);
                }
                Ok(())
            })()
        };
        if r.is_err() {
            self.destroy_cqs();
        }
        r
    }

    /// One CQ of `cqe` entries with one completion channel, published as
    /// both the send and the receive CQ of the id (the rsocket layout; the
    /// id's QP, created next, uses it both ways).  EINVAL when the id has
    /// no device or already has CQs.
    pub fn create_shared_cq(&self, cqe: u32) -> Result<(), Errno> {
        let ctx = self.verbs();
        if ctx.is_null() || !self.recv_cq().is_null() || !self.send_cq().is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: ctx is the id's open device (id->verbs invariant); the
        // channel handed to create_cq was just created on it and is
        // destroyed here if the CQ cannot be made.
        unsafe {
            let ch = verbs::create_comp_channel(ctx)?;
            let cq = match verbs::create_cq(ctx, cqe, self.as_ptr() as *mut c_void, ch) {
                Ok(cq) => cq,
                Err(e) => {
                    verbs::destroy_comp_channel(ch);
                    return Err(e);
                }
            };
            self.set_recv_cq_channel(ch);
            self.set_send_cq_channel(ch);
            self.set_recv_cq(cq);
            self.set_send_cq(cq);
        }
        Ok(())
    }

    /// Destroys the CQs and completion channels of the id (its QP/SRQ must
    /// no longer use them); an XRC receive id with an SRQ keeps them.
    #[inline]
    pub fn destroy_cqs(&self) {
        if self.qp_type() == IBV_QPT_XRC_RECV && !self.srq().is_null() {
            return;
        }
        let (rcq, scq) = (self.recv_cq(), self.send_cq());
        if !rcq.is_null() {
            self.set_recv_cq(null_mut());
            // SAFETY: the id's CQs (invariant), destroyed once: the fields
            // are cleared first.
            unsafe { verbs::destroy_cq(rcq) };
            if !scq.is_null() && scq != rcq {
                self.set_send_cq(null_mut());
                // SAFETY: as above.
                unsafe { verbs::destroy_cq(scq) };
            }
        }
        let (rch, sch) = (self.recv_cq_channel(), self.send_cq_channel());
        if !rch.is_null() {
            self.set_recv_cq_channel(null_mut());
            // SAFETY: as above, for the completion channels (their CQs are
            // gone).
            unsafe { verbs::destroy_comp_channel(rch) };
            if !sch.is_null() && sch != rch {
                self.set_send_cq_channel(null_mut());
                // SAFETY: as above.
                unsafe { verbs::destroy_comp_channel(sch) };
            }
        }
    }

    /// The node GUID of the id's device (ENODEV without one).
    pub fn node_guid(&self) -> Result<u64, Errno> {
        let ctx = self.verbs();
        if ctx.is_null() {
            return Err(Errno::ENODEV);
        }
        // SAFETY: ctx is the id's open device (invariant).
        Ok(unsafe { verbs::node_guid(ctx) })
    }

    /// Opens an XRC domain on the id's device.
    pub fn open_xrcd(&self) -> Result<Xrcd, Errno> {
        let ctx = self.verbs();
        if ctx.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: ctx is the id's open device (invariant).
        let x = unsafe { verbs::open_xrcd(ctx) };
        if x.is_null() {
            Err(verbs::last_errno())
        } else {
            Ok(Xrcd(x))
        }
    }

    /// The id's PD, as a handle an attribute set may carry.
    pub fn pd_handle(&self) -> Vouched<*mut ibv_pd> {
        // id->pd is NULL or live (invariant).
        Vouched(self.pd())
    }

    /// Creates a QP on the id's device (EINVAL without one).
    pub fn create_qp(&self, attr: &mut Vouched<QpInitAttrEx>) -> Result<NewQp, Errno> {
        let ctx = self.verbs();
        if ctx.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: ctx is the id's open device; the attribute set's handles
        // are vouched for or the id's own.
        unsafe { verbs::create_qp_ex(ctx, &mut attr.0) }.map(NewQp)
    }

    /// Publishes a set-up QP in `id->qp` (and its PD in `id->pd`).
    pub fn publish_qp(&self, q: NewQp) {
        // SAFETY: a new QP is live.
        self.set_pd(unsafe { verbs::qp_srq_pd(q.0) }.1);
        self.set_qp(q.0);
    }

    /// Unpublishes and destroys the id's QP, if any.
    #[inline]
    pub fn destroy_qp(&self) {
        let qp = self.qp();
        self.set_qp(null_mut());
        if !qp.is_null() {
            // SAFETY: it was the id's live QP (invariant) and is destroyed
            // once: the field is cleared first.
            unsafe { verbs::destroy_qp(qp) };
        }
    }

    /// Creates an SRQ on the id's device (EINVAL without one) and
    /// publishes it in `id->srq` (and its PD in `id->pd` if unset).
    pub fn create_srq(&self, attr: &mut Vouched<SrqInitAttrEx>) -> Result<(), Errno> {
        let ctx = self.verbs();
        if ctx.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: as in create_qp.
        let srq = unsafe { verbs::create_srq_ex(ctx, &mut attr.0) }?;
        if self.pd().is_null() {
            self.set_pd(attr.0.pd);
        }
        self.set_srq(srq);
        Ok(())
    }

    /// Unpublishes and destroys the id's SRQ, if any.
    pub fn destroy_srq(&self) {
        let srq = self.srq();
        self.set_srq(null_mut());
        // SAFETY: as in destroy_qp (destroy_srq ignores NULL).
        unsafe { verbs::destroy_srq(srq) };
    }
}
