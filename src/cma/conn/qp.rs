// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! QPs, SRQs and the CQs the library makes for them, and endpoints
//! (`rdma_create_ep`): the verbs objects of an id, created from attribute
//! sets whose handles (PD, CQs, SRQ, XRC domain) the caller supplies.
//!
//! The one part of the connection code with unsafe code: `crate::sys::verbs`
//! takes these objects as raw pointers, and the caller's handles are only
//! as good as the C caller's promise, so the functions taking them are
//! `unsafe fn`s whose contract the C API states.  Each unsafe block says
//! why the objects it uses are live.
#![allow(unsafe_code)]

use super::{init_qp_attr, EpInfo};
use crate::abi::cma::*;
use crate::abi::ucma as kabi;
use crate::cma::public::CPtr;
use crate::cma::{Cm, IdPriv};
use crate::sys::verbs::{self, *};
use nix::errno::Errno;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::Arc;

/// Moves a new QP of the id's device to INIT.
///
/// # Safety
/// `qp` must be a live QP.
unsafe fn init_conn_qp(cm: &Cm, p: &IdPriv, qp: *mut ibv_qp) -> Result<(), Errno> {
    let mut a = QpAttr { qp_state: IBV_QPS_INIT, ..Default::default() };
    let mask = init_qp_attr(cm, p, &mut a)?;
    // SAFETY: per the contract.
    unsafe { modify_qp(qp, &mut a, mask) }
}

/// Moves a new UD QP of the id's device to RTS.
///
/// # Safety
/// `qp` must be a live QP.
unsafe fn init_ud_qp(cm: &Cm, p: &IdPriv, qp: *mut ibv_qp) -> Result<(), Errno> {
    let mut a = QpAttr { qp_state: IBV_QPS_INIT, ..Default::default() };
    let mask = init_qp_attr(cm, p, &mut a)?;
    // SAFETY: per the contract.
    unsafe {
        modify_qp(qp, &mut a, mask)?;
        a.qp_state = IBV_QPS_RTR;
        modify_qp(qp, &mut a, IBV_QP_STATE)?;
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = 0;
        modify_qp(qp, &mut a, IBV_QP_STATE | IBV_QP_SQ_PSN)
    }
}

// --- CQs, QPs, SRQs ------------------------------------------------------------

/// Destroys the CQs and completion channels the library made for the id
/// (its QP/SRQ must no longer use them).
pub fn destroy_cqs(p: &IdPriv) {
    let id = &p.id;
    if id.qp_type() == IBV_QPT_XRC_RECV && !id.srq().is_null() {
        return;
    }
    // SAFETY: the CQs and channels in the id were created by create_cqs
    // and are destroyed once (the fields are cleared right after).
    unsafe {
        if !id.recv_cq().is_null() {
            destroy_cq(id.recv_cq());
            if !id.send_cq().is_null() && id.send_cq() != id.recv_cq() {
                destroy_cq(id.send_cq());
                id.set_send_cq(null_mut());
            }
            id.set_recv_cq(null_mut());
        }
        if !id.recv_cq_channel().is_null() {
            destroy_comp_channel(id.recv_cq_channel());
            if !id.send_cq_channel().is_null() && id.send_cq_channel() != id.recv_cq_channel() {
                destroy_comp_channel(id.send_cq_channel());
                id.set_send_cq_channel(null_mut());
            }
            id.set_recv_cq_channel(null_mut());
        }
    }
}

/// Creates a receive and/or a send CQ, each with its own completion
/// channel and the id as CQ context (what rdma_get_send_comp and
/// rdma_get_recv_comp expect).
fn create_cqs(p: &IdPriv, send: u32, recv: u32) -> Result<(), Errno> {
    let id = &p.id;
    let ctx = id.verbs();
    // SAFETY: ctx is the id's open device (callers check it is bound).
    let r = unsafe {
        (|| {
            if recv != 0 {
                id.set_recv_cq_channel(create_comp_channel(ctx)?);
                id.set_recv_cq(create_cq(ctx, recv, p.raw() as *mut c_void, id.recv_cq_channel())?);
            }
            if send != 0 {
                id.set_send_cq_channel(create_comp_channel(ctx)?);
                id.set_send_cq(create_cq(ctx, send, p.raw() as *mut c_void, id.send_cq_channel())?);
            }
            Ok(())
        })()
    };
    if r.is_err() {
        // Only what was created above is released.
        destroy_cqs(p);
    }
    r
}

/// The device's XRC domain, opened on first use.
fn get_xrcd(cm: &Cm, p: &IdPriv) -> Result<*mut c_void, Errno> {
    let key = p.device().ok_or(Errno::EINVAL)?.key;
    let mut devs = cm.devices.lock();
    let d = devs.find_mut(key).ok_or(Errno::EINVAL)?;
    if d.xrcd.0.is_null() {
        // SAFETY: the device is open while the id references it.
        let x = unsafe { open_xrcd(d.verbs.0) };
        if x.is_null() {
            return Err(last_errno());
        }
        d.xrcd = CPtr(x);
    }
    Ok(d.xrcd.0)
}

/// `rdma_create_qp_ex`.
///
/// # Safety
/// Pointers in `attr` must be valid verbs objects or NULL.
pub unsafe fn create_qp_ex(cm: &Cm, p: &IdPriv, attr: &mut QpInitAttrEx) -> Result<(), Errno> {
    let id = &p.id;
    let (verbs, id_pd) = (id.verbs(), id.pd());
    if !id.qp().is_null() {
        return Err(Errno::EINVAL);
    }
    if attr.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || attr.pd.is_null() {
        attr.comp_mask |= IBV_QP_INIT_ATTR_PD;
        attr.pd = id_pd;
    // SAFETY: a non-NULL PD from the caller is a live PD.
    } else if verbs != unsafe { pd_context(attr.pd) } {
        return Err(Errno::EINVAL);
    }
    // Upstream dereferences the device here; an id without one is EINVAL.
    if verbs.is_null() || attr.pd.is_null() {
        return Err(Errno::EINVAL);
    }
    let (id_send, id_recv, id_srq, qp_type) = (id.send_cq(), id.recv_cq(), id.srq(), id.qp_type());
    if (!id_recv.is_null() && !attr.recv_cq.is_null() && id_recv != attr.recv_cq) || (!id_send.is_null() && !attr.send_cq.is_null() && id_send != attr.send_cq) {
        return Err(Errno::EINVAL);
    }
    if qp_type == IBV_QPT_XRC_RECV && (attr.comp_mask & IBV_QP_INIT_ATTR_XRCD == 0 || attr.xrcd.is_null()) {
        attr.xrcd = get_xrcd(cm, p)?;
        attr.comp_mask |= IBV_QP_INIT_ATTR_XRCD;
    }
    let b = attr;
    let send = if !b.send_cq.is_null() || !id_send.is_null() { 0 } else { b.cap.max_send_wr };
    let recv = if !b.recv_cq.is_null() || !id_recv.is_null() { 0 } else { b.cap.max_recv_wr };
    create_cqs(p, send, recv)?;
    if b.send_cq.is_null() {
        b.send_cq = id.send_cq();
    }
    if b.recv_cq.is_null() {
        b.recv_cq = id.recv_cq();
    }
    if !id_srq.is_null() && b.srq.is_null() {
        b.srq = id_srq;
    }
    // SAFETY: verbs is the id's open device; attr is complete and its
    // handles valid (per the contract, or the id's own).
    let qp = match unsafe { verbs::create_qp_ex(verbs, b) } {
        Ok(qp) => qp,
        Err(e) => {
            // No QP uses the CQs.
            destroy_cqs(p);
            return Err(e);
        }
    };
    // SAFETY: qp is the new, live QP.
    let r = unsafe { init_ece(p, qp).and_then(|_| if qp_type == IBV_QPT_UD { init_ud_qp(cm, p, qp) } else { init_conn_qp(cm, p, qp) }).and_then(|_| set_local_ece(p, qp)) };
    if let Err(e) = r {
        // SAFETY: qp was created above and is not published.
        unsafe { destroy_qp(qp) };
        destroy_cqs(p);
        return Err(e);
    }
    // SAFETY: qp is live.
    id.set_pd(unsafe { qp_srq_pd(qp) }.1);
    id.set_qp(qp);
    Ok(())
}

/// `rdma_create_qp`: `attr` is read and written back (the capabilities
/// and CQs the QP got).
///
/// # Safety
/// `pd` and the pointers in `attr` must be valid verbs objects or NULL.
pub unsafe fn create_qp(cm: &Cm, p: &IdPriv, pd: *mut ibv_pd, attr: &mut QpInitAttr) -> Result<(), Errno> {
    let mut ex = QpInitAttrEx::zeroed();
    ex.set_base(attr);
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = if pd.is_null() { p.id.pd() } else { pd };
    // SAFETY: forwarded contract.
    let r = unsafe { create_qp_ex(cm, p, &mut ex) };
    *attr = ex.base();
    r
}

/// `rdma_destroy_qp`.
pub fn destroy_qp_of(p: &IdPriv) {
    let qp = p.id.qp();
    // Unpublished first: the connection code no longer reaches it.
    p.id.set_qp(null_mut());
    if !qp.is_null() {
        // SAFETY: qp was the id's live QP and is destroyed once.
        unsafe { destroy_qp(qp) };
    }
    destroy_cqs(p);
}

/// The QP of a new connection of a synchronous passive endpoint, created
/// with the attributes `rdma_create_ep` kept and the listener's PD.
pub fn create_request_qp(cm: &Cm, np: &IdPriv, lp: &IdPriv) -> Result<(), Errno> {
    let attr = lp.conn.lock().qp_init_attr;
    if let Some(mut a) = attr {
        // SAFETY: the attributes are the caller's of rdma_create_ep, whose
        // contract keeps their handles valid while the endpoint lives; the
        // PD is the listener's (NULL or its device's, or the caller's).
        unsafe { create_qp(cm, np, lp.id.pd(), &mut a)? };
    }
    Ok(())
}

/// `rdma_create_srq_ex`.
///
/// # Safety
/// Pointers in `attr` must be valid verbs objects or NULL.
pub unsafe fn create_srq_ex(cm: &Cm, p: &IdPriv, attr: &mut SrqInitAttrEx) -> Result<(), Errno> {
    let id = &p.id;
    if attr.comp_mask & IBV_SRQ_INIT_ATTR_TYPE == 0 {
        return Err(Errno::EINVAL);
    }
    let (verbs, id_pd) = (id.verbs(), id.pd());
    if attr.comp_mask & IBV_SRQ_INIT_ATTR_PD == 0 || attr.pd.is_null() {
        attr.pd = id_pd;
        attr.comp_mask |= IBV_SRQ_INIT_ATTR_PD;
    }
    if verbs.is_null() {
        return Err(Errno::EINVAL);
    }
    if attr.srq_type == IBV_SRQT_XRC {
        if attr.comp_mask & IBV_SRQ_INIT_ATTR_XRCD == 0 || attr.xrcd.is_null() {
            attr.xrcd = get_xrcd(cm, p)?;
        }
        if attr.comp_mask & IBV_SRQ_INIT_ATTR_CQ == 0 || attr.cq.is_null() {
            create_cqs(p, 0, attr.attr.max_wr)?;
            attr.cq = id.recv_cq();
        }
        attr.comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
    }
    // SAFETY: verbs is the id's open device; attr's handles are valid.
    match unsafe { verbs::create_srq_ex(verbs, attr) } {
        Ok(srq) => {
            if id.pd().is_null() {
                id.set_pd(attr.pd);
            }
            id.set_srq(srq);
            Ok(())
        }
        Err(e) => {
            // Nothing uses the CQs.
            destroy_cqs(p);
            Err(e)
        }
    }
}

/// `rdma_create_srq`.
///
/// # Safety
/// `pd` and the pointers in `attr` must be valid verbs objects or NULL.
pub unsafe fn create_srq(cm: &Cm, p: &IdPriv, pd: *mut ibv_pd, attr: &mut SrqInitAttr) -> Result<(), Errno> {
    let mut ex = SrqInitAttrEx::zeroed();
    ex.srq_context = attr.srq_context;
    ex.attr = attr.attr;
    ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
    ex.srq_type = if p.id.qp_type() == IBV_QPT_XRC_RECV { IBV_SRQT_XRC } else { IBV_SRQT_BASIC };
    ex.pd = pd;
    // SAFETY: forwarded contract.
    let r = unsafe { create_srq_ex(cm, p, &mut ex) };
    *attr = SrqInitAttr { srq_context: ex.srq_context, attr: ex.attr };
    r
}

/// `rdma_destroy_srq`.
pub fn destroy_srq_of(p: &IdPriv) {
    // SAFETY: id->srq is NULL or the id's live SRQ, destroyed once
    // (cleared below).
    unsafe { destroy_srq(p.id.srq()) };
    p.id.set_srq(null_mut());
    destroy_cqs(p);
}


/// # Safety
/// `qp` must be a live QP.
unsafe fn init_ece(p: &IdPriv, qp: *mut ibv_qp) -> Result<(), Errno> {
    // SAFETY: per the contract.
    let (e, _) = unsafe { query_ece(qp)? };
    let remote = {
        let mut c = p.conn.lock();
        c.local_ece = (e.vendor_id, e.options);
        c.remote_ece
    };
    if remote.0 == 0 {
        return Ok(());
    }
    let want = if remote.0 != e.vendor_id { Ece { vendor_id: e.vendor_id, options: 0, comp_mask: 0 } } else { Ece { vendor_id: remote.0, options: remote.1, comp_mask: 0 } };
    // SAFETY: per the contract.
    unsafe { set_ece(qp, want) }
}

/// # Safety
/// `qp` must be a live QP.
unsafe fn set_local_ece(p: &IdPriv, qp: *mut ibv_qp) -> Result<(), Errno> {
    if p.conn.lock().remote_ece.0 == 0 {
        return Ok(());
    }
    // SAFETY: per the contract.
    let (e, _) = unsafe { query_ece(qp)? };
    p.conn.lock().local_ece.1 = e.options;
    Ok(())
}


// --- endpoints ---------------------------------------------------------------------

/// `rdma_create_ep`.
///
/// # Safety
/// `pd` must be NULL or a live PD; the handles in `attr` valid or NULL.
pub unsafe fn create_ep(cm: &'static Cm, res: &EpInfo, pd: *mut ibv_pd, attr: Option<&mut QpInitAttr>) -> Result<Arc<IdPriv>, Errno> {
    cm.init()?;
    let p = cm.create_id_inner(None, null_mut(), res.port_space, res.qp_type)?;
    // SAFETY: forwarded contract.
    match unsafe { setup_ep(cm, &p, res, pd, attr) } {
        Ok(()) => Ok(p),
        Err(e) => {
            destroy_ep(cm, &p);
            Err(e)
        }
    }
}

/// # Safety
/// As [`create_ep`].
unsafe fn setup_ep(cm: &'static Cm, p: &IdPriv, res: &EpInfo, pd: *mut ibv_pd, attr: Option<&mut QpInitAttr>) -> Result<(), Errno> {
    if res.passive {
        cm.bind(p, res.src)?;
        if !pd.is_null() {
            p.id.set_pd(pd);
        }
        if let Some(attr) = attr {
            let mut a = *attr;
            a.qp_type = res.qp_type;
            p.conn.lock().qp_init_attr = Some(a);
        }
        return Ok(());
    }
    // Synchronous: each call waits for its event.
    cm.resolve_addr(p, res.src, res.dst, 2000)?;
    if res.route_len > 0 {
        // The kernel reads the records (EFAULT when unreadable).
        cm.set_option(p, kabi::RDMA_OPTION_IB, kabi::RDMA_OPTION_IB_PATH, res.route.0, res.route_len)?;
        cm.complete(p)?;
    } else {
        cm.resolve_route(p, 2000)?;
    }
    if let Some(attr) = attr {
        attr.qp_type = res.qp_type;
        // SAFETY: forwarded contract.
        unsafe { create_qp(cm, p, pd, attr)? };
    }
    if !res.connect.is_empty() {
        p.conn.lock().connect = res.connect.clone();
    }
    Ok(())
}

/// `rdma_destroy_ep`.
pub fn destroy_ep(cm: &Cm, p: &Arc<IdPriv>) {
    if !p.id.qp().is_null() {
        destroy_qp_of(p);
    }
    if !p.id.srq().is_null() {
        destroy_srq_of(p);
    }
    p.conn.lock().qp_init_attr = None;
    let _ = cm.destroy_id(p);
}

