// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The connection half of the CM, over the CM core (`crate::cma`):
//! QPs and SRQs bound to ids, endpoints, connect/listen/accept/reject,
//! disconnect, ECE, the library's part of connection events, multicast.
//!
//! Behaviour follows upstream's cma.c: the library moves the QP through
//! INIT (at creation), RTR and RTS (on accept, or on the connect response,
//! after which it sends the kernel's ACCEPT on the active side) and to the
//! error state on reject or disconnect (InfiniBand; SQD on iWARP).
//!
//! The unsafe code left here is the libibverbs calls on the id's verbs
//! objects (QP, CQs, completion channels, SRQ): `crate::sys::verbs` takes
//! them as raw pointers; each call says why the object is live.
#![allow(unsafe_code)]

pub mod mcast;
#[cfg(test)]
mod tests;
use crate::sys::verbs;

use crate::sys::ucma::RawAddr;
use crate::cma::public::CPtr;
use crate::cma::{self as cm, Channel, Cm, EventPriv, IdPriv};
use crate::abi::cma::*;
use crate::abi::ucma as kabi;
use nix::errno::Errno;
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use verbs::*;

/// "As much as the device allows" in `rdma_conn_param`.
pub const RDMA_MAX_RESP_RES: u8 = 0xFF;
pub const RDMA_MAX_INIT_DEPTH: u8 = 0xFF;

/// The IBTA reject reason "vendor option not supported" (rdma_reject_ece).
pub const REJ_VENDOR_OPTION_NOT_SUPPORTED: u8 = 35;

// --- QP attributes -------------------------------------------------------------

/// `rdma_init_qp_attr`: the kernel's attributes for `attr.qp_state`.
pub fn init_qp_attr(cm: &Cm, p: &IdPriv, attr: &mut QpAttr) -> Result<c_int, Errno> {
    let k = cm.ucma.init_qp_attr(p.fd(), p.handle(), attr.qp_state)?;
    copy_qp_attr_from_kern(attr, &k);
    Ok(k.qp_attr_mask as c_int)
}

fn modify_qp_rtr(cm: &Cm, p: &IdPriv, resp_res: u8) -> Result<(), Errno> {
    let qp = p.id.qp();
    if qp.is_null() {
        return Ok(());
    }
    let mut a = QpAttr { qp_state: IBV_QPS_INIT, ..Default::default() };
    let mask = init_qp_attr(cm, p, &mut a)?;
    // SAFETY: qp is the id's live QP (id->qp is set only by create_qp_ex
    // and cleared when the QP is destroyed).
    unsafe { modify_qp(qp, &mut a, mask)? };
    a.qp_state = IBV_QPS_RTR;
    let mut mask = init_qp_attr(cm, p, &mut a)?;
    // Older kernels report RoCE-only attribute bits for InfiniBand ports.
    let port = p.id.port_num() as usize;
    if let Some(d) = p.device() {
        if port >= 1 && d.link_layers.get(port - 1) == Some(&IBV_LINK_LAYER_INFINIBAND) {
            mask &= !0x00e0_0000;
        }
    }
    if resp_res != RDMA_MAX_RESP_RES {
        a.max_dest_rd_atomic = resp_res;
    }
    // SAFETY: as above.
    unsafe { modify_qp(qp, &mut a, mask) }
}

fn modify_qp_rts(cm: &Cm, p: &IdPriv, init_depth: u8) -> Result<(), Errno> {
    let qp = p.id.qp();
    if qp.is_null() {
        return Ok(());
    }
    let mut a = QpAttr { qp_state: IBV_QPS_RTS, ..Default::default() };
    let mask = init_qp_attr(cm, p, &mut a)?;
    if init_depth != RDMA_MAX_INIT_DEPTH {
        a.max_rd_atomic = init_depth;
    }
    // SAFETY: qp is the id's live QP (see modify_qp_rtr).
    unsafe { modify_qp(qp, &mut a, mask) }
}

fn modify_qp_to(p: &IdPriv, state: u32) -> Result<(), Errno> {
    let qp = p.id.qp();
    if qp.is_null() {
        return Ok(());
    }
    // SAFETY: qp is the id's live QP (see modify_qp_rtr).
    unsafe { modify_state(qp, state) }
}

/// Moves the id's QP (if any) to the error state.
pub fn modify_qp_err(p: &IdPriv) -> Result<(), Errno> {
    modify_qp_to(p, IBV_QPS_ERR)
}

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
    if !qp.is_null() {
        // SAFETY: id->qp is the id's live QP, destroyed once (cleared below).
        unsafe { destroy_qp(qp) };
    }
    p.id.set_qp(null_mut());
    destroy_cqs(p);
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

// --- ECE -------------------------------------------------------------------------

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

/// `rdma_set_local_ece` (after the NULL checks).
pub fn set_local_ece_param(p: &IdPriv, e: &Ece) -> Result<(), Errno> {
    if !p.id.qp().is_null() || e.vendor_id == 0 || e.comp_mask != 0 {
        return Err(Errno::EINVAL);
    }
    p.conn.lock().local_ece = (e.vendor_id, e.options);
    Ok(())
}

/// `rdma_get_remote_ece` (after the NULL checks).
pub fn get_remote_ece(p: &IdPriv) -> Result<Ece, Errno> {
    if !p.id.qp().is_null() {
        return Err(Errno::EINVAL);
    }
    let (v, o) = p.conn.lock().remote_ece;
    Ok(Ece { vendor_id: v, options: o, comp_mask: 0 })
}

// --- connection -------------------------------------------------------------------

fn valid_param(p: &IdPriv, param: Option<&ConnParamIn>) -> Result<(), Errno> {
    if p.id.ps() != RDMA_PS_TCP {
        return Ok(());
    }
    if p.id.qp().is_null() && param.is_none() {
        return Err(Errno::EINVAL);
    }
    let Some(param) = param else { return Ok(()) };
    let Some(d) = p.device() else { return Err(Errno::EINVAL) };
    if param.responder_resources != RDMA_MAX_RESP_RES && param.responder_resources > d.max_responder_resources {
        return Err(Errno::EINVAL);
    }
    if param.initiator_depth != RDMA_MAX_INIT_DEPTH && param.initiator_depth > d.max_initiator_depth {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// The caller's `rdma_conn_param`, its private data copied (the C API
/// reads it).
#[derive(Clone, Debug, Default)]
pub struct ConnParamIn {
    pub private_data: Vec<u8>,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// The kernel's connection parameters: the id's pending connect data (an
/// AF_IB header from rdma_getaddrinfo) followed by the caller's.
fn conn_param_to_kern(p: &IdPriv, src: Option<&ConnParamIn>, qp_num: u32, srq: u8) -> kabi::ConnParam {
    let conn = p.conn.lock();
    let mut k = kabi::ConnParam { qp_num, srq, responder_resources: conn.responder_resources, initiator_depth: conn.initiator_depth, valid: 1, ..Default::default() };
    let mut len = conn.connect.len().min(kabi::RDMA_MAX_PRIVATE_DATA);
    k.private_data[..len].copy_from_slice(&conn.connect[..len]);
    match src {
        Some(s) => {
            k.flow_control = s.flow_control;
            k.retry_count = s.retry_count;
            k.rnr_retry_count = s.rnr_retry_count;
            let n = s.private_data.len().min(kabi::RDMA_MAX_PRIVATE_DATA - len);
            k.private_data[len..len + n].copy_from_slice(&s.private_data[..n]);
            len += n;
        }
        None => {
            k.retry_count = 7;
            k.rnr_retry_count = 7;
        }
    }
    k.private_data_len = len.min(u8::MAX as usize) as u8;
    k
}

/// The QP number and SRQ flag the kernel announces: the id's QP if it has
/// one, else the caller's values.
fn qp_num_srq(p: &IdPriv, param: Option<&ConnParamIn>) -> Option<(u32, u8)> {
    let qp = p.id.qp();
    if !qp.is_null() {
        // SAFETY: qp is the id's live QP.
        return Some(unsafe { (qp_num(qp), qp_srq_pd(qp).0 as u8) });
    }
    param.map(|c| (c.qp_num, c.srq))
}

/// `rdma_connect`.
pub fn connect(cm: &'static Cm, p: &IdPriv, param: Option<&ConnParamIn>) -> Result<(), Errno> {
    valid_param(p, param)?;
    let d = p.device().ok_or(Errno::EINVAL)?;
    {
        let mut c = p.conn.lock();
        c.initiator_depth = match param {
            Some(c) if c.initiator_depth != RDMA_MAX_INIT_DEPTH => c.initiator_depth,
            _ => d.max_initiator_depth,
        };
        c.responder_resources = match param {
            Some(c) if c.responder_resources != RDMA_MAX_RESP_RES => c.responder_resources,
            _ => d.max_responder_resources,
        };
    }
    let (qpn, srq) = qp_num_srq(p, param).unwrap_or((0, 0));
    let k = conn_param_to_kern(p, param, qpn, srq);
    let (v, o) = p.conn.lock().local_ece;
    cm.ucma.connect(p.fd(), p.handle(), &k, kabi::Ece { vendor_id: v, attr_mod: o })?;
    p.conn.lock().connect.clear();
    cm.complete(p)
}

/// `rdma_listen`.
pub fn listen(cm: &'static Cm, p: &IdPriv, backlog: c_int) -> Result<(), Errno> {
    cm.ucma.listen(p.fd(), p.handle(), backlog as u32)?;
    // The listener's address after LISTEN.
    if cm.af_ib() {
        cm.query_addr(p)
    } else {
        cm.query_route(p)
    }
}

/// `rdma_accept`.
pub fn accept(cm: &'static Cm, p: &IdPriv, param: Option<&ConnParamIn>) -> Result<(), Errno> {
    // Upstream reads the caller's parameters when the id has no QP.
    let (qpn, srq) = qp_num_srq(p, param).ok_or(Errno::EINVAL)?;
    valid_param(p, param)?;
    let d = p.device().ok_or(Errno::EINVAL)?;
    let (init_depth, resp_res) = {
        let mut c = p.conn.lock();
        c.initiator_depth = match param {
            Some(x) if x.initiator_depth != RDMA_MAX_INIT_DEPTH => x.initiator_depth,
            _ => c.initiator_depth.min(d.max_initiator_depth),
        };
        c.responder_resources = match param {
            Some(x) if x.responder_resources != RDMA_MAX_RESP_RES => x.responder_resources,
            _ => c.responder_resources.min(d.max_responder_resources),
        };
        (c.initiator_depth, c.responder_resources)
    };
    let ud = p.id.qp_type() == IBV_QPT_UD;
    if !ud {
        modify_qp_rtr(cm, p, resp_res)?;
        modify_qp_rts(cm, p, init_depth)?;
    }
    let k = conn_param_to_kern(p, param, qpn, srq);
    let ((rv, _), (_, lo)) = {
        let c = p.conn.lock();
        (c.remote_ece, c.local_ece)
    };
    if let Err(e) = cm.ucma.accept(p.fd(), p.handle(), p.uid(), &k, kabi::Ece { vendor_id: rv, attr_mod: lo }) {
        let _ = modify_qp_err(p);
        return Err(e);
    }
    if ud {
        if p.sync.load(Ordering::Acquire) {
            let ev = p.id.event();
            if !ev.is_null() {
                p.id.set_event(null_mut());
                cm::ack_event(cm, ev);
            }
        }
        return Ok(());
    }
    cm.complete(p)
}

/// `rdma_reject` / `rdma_reject_ece`.
pub fn reject(cm: &Cm, p: &IdPriv, data: &[u8], reason: u8) -> Result<(), Errno> {
    cm.ucma.reject(p.fd(), p.handle(), reason, data)
}

/// `rdma_notify`.
pub fn notify(cm: &Cm, p: &IdPriv, event: u32) -> Result<(), Errno> {
    cm.ucma.notify(p.fd(), p.handle(), event)
}

/// Stops the QP before a disconnect: error state on InfiniBand/RoCE,
/// SQD on iWARP.
fn shutdown(p: &IdPriv) -> Result<(), Errno> {
    // SAFETY: id->verbs is NULL or the id's open device.
    match unsafe { transport_type(p.id.verbs()) } {
        IBV_TRANSPORT_IB => modify_qp_to(p, IBV_QPS_ERR),
        IBV_TRANSPORT_IWARP => modify_qp_to(p, IBV_QPS_SQD),
        _ => Err(Errno::EINVAL),
    }
}

/// `rdma_disconnect`.
pub fn disconnect(cm: &'static Cm, p: &IdPriv) -> Result<(), Errno> {
    shutdown(p)?;
    cm.ucma.disconnect(p.fd(), p.handle())?;
    cm.complete(p)
}

/// The active side's answer to a connect response: QP to RTR and RTS,
/// then the kernel's ACCEPT (which sends the RTU).
fn process_conn_resp(cm: &Cm, p: &IdPriv) -> Result<(), Errno> {
    let r = modify_qp_rtr(cm, p, RDMA_MAX_RESP_RES).and_then(|_| modify_qp_rts(cm, p, RDMA_MAX_INIT_DEPTH)).and_then(|_| cm.ucma.accept(p.fd(), p.handle(), 0, &kabi::ConnParam::default(), kabi::Ece::default()));
    if r.is_err() {
        let _ = modify_qp_err(p);
    }
    r
}

/// The connect response with ECE; the error is the event status upstream
/// reports: -1 from its own helpers, a positive errno from the ECE verbs.
fn process_conn_resp_ece(cm: &Cm, p: &IdPriv, ece: kabi::Ece) -> Result<(), c_int> {
    let local = p.conn.lock().local_ece;
    let mut want = Ece { vendor_id: ece.vendor_id, options: ece.attr_mod, comp_mask: 0 };
    if ece.vendor_id == 0 {
        want = Ece { vendor_id: local.0, options: 0, comp_mask: 0 };
    } else if ece.vendor_id != local.0 {
        let _ = modify_qp_err(p);
        return Err(-1);
    }
    p.conn.lock().remote_ece.0 = ece.vendor_id;
    // The caller checked that the id has a QP.
    let qp = p.id.qp();
    // SAFETY: qp is the id's live QP.
    unsafe { set_ece(qp, want) }.map_err(|e| e as c_int)?;
    process_conn_resp(cm, p).map_err(|_| -1)?;
    // SAFETY: qp is the id's live QP.
    match unsafe { query_ece(qp) } {
        Ok((e, unsupported)) => {
            p.conn.lock().local_ece.1 = if unsupported { 0 } else { e.options };
            Ok(())
        }
        Err(e) => {
            let _ = modify_qp_err(p);
            Err(e as c_int)
        }
    }
}

/// `rdma_establish`.
pub fn establish(cm: &Cm, p: &IdPriv) -> Result<(), Errno> {
    if !p.id.qp().is_null() {
        return Err(Errno::EINVAL);
    }
    process_conn_resp(cm, p)
}

/// `rdma_get_request`: the next connection request of a synchronous
/// listener; the new id carries the request event in `id->event`.
pub fn get_request(cm: &'static Cm, lp: &IdPriv) -> Result<Arc<IdPriv>, Errno> {
    if !lp.sync.load(Ordering::Acquire) {
        return Err(Errno::EINVAL);
    }
    let ev = lp.id.event();
    if !ev.is_null() {
        lp.id.set_event(null_mut());
        cm::ack_event(cm, ev);
    }
    let got = cm::get_event(&lp.channel())?;
    let r = (|| {
        if got.event == RDMA_CM_EVENT_REJECTED {
            return Err(Errno::ECONNREFUSED);
        }
        if got.status != 0 {
            return Err(Errno::from_raw(got.status.wrapping_neg()));
        }
        if got.event != RDMA_CM_EVENT_CONNECT_REQUEST {
            return Err(Errno::EINVAL);
        }
        let np = cm.id(got.id)?;
        let attr = lp.conn.lock().qp_init_attr;
        if let Some(mut a) = attr {
            // SAFETY: the attributes were the caller's of rdma_create_ep
            // (valid handles or NULL); the PD is the listener's.
            unsafe { create_qp(cm, &np, lp.id.pd(), &mut a)? };
        }
        Ok(np)
    })();
    match r {
        Ok(np) => {
            np.id.set_event(got.ptr);
            Ok(np)
        }
        Err(err) => {
            lp.id.set_event(got.ptr);
            Err(err)
        }
    }
}

// --- endpoints ---------------------------------------------------------------------

/// What `rdma_create_ep` takes from the caller's `rdma_addrinfo` (the C
/// API copies it out).
#[derive(Clone, Debug, Default)]
pub struct EpInfo {
    pub passive: bool,
    pub port_space: u32,
    pub qp_type: u32,
    pub src: Option<RawAddr>,
    pub dst: Option<RawAddr>,
    /// `ai_route` and `ai_route_len` (path records for
    /// RDMA_OPTION_IB_PATH), handed to the kernel as they are.
    pub route: CPtr<c_void>,
    pub route_len: usize,
    /// `ai_connect` (connect data), if any.
    pub connect: Vec<u8>,
}

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

// --- events ---------------------------------------------------------------------------

/// What the event loop does with an event after [`process_event`].
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Hand it to the caller.
    Deliver,
    /// Drop it: count it as completed for `evt.id_priv` and read the next.
    Retry,
}

fn copy_conn_param(evt: &mut EventPriv, src: &kabi::ConnParam) {
    let len = src.private_data_len as usize;
    evt.private_data[..len].copy_from_slice(&src.private_data[..len]);
    evt.event.0.param.conn = rdma_conn_param {
        private_data: if len > 0 { evt.private_data.as_ptr() as *const c_void } else { std::ptr::null() },
        private_data_len: src.private_data_len,
        responder_resources: src.responder_resources,
        initiator_depth: src.initiator_depth,
        flow_control: src.flow_control,
        retry_count: src.retry_count,
        rnr_retry_count: src.rnr_retry_count,
        srq: src.srq,
        qp_num: src.qp_num,
    };
}

/// The library's part of connection events, after the core decoded the
/// event and copied its parameters by the id's QP type (`evt.id_priv` is
/// the id the kernel reported: the listener for a connection request).
pub fn process_event(cm: &'static Cm, resp: &kabi::EventResp, evt: &mut EventPriv) -> Step {
    let Some(p) = evt.id_priv.clone() else { return Step::Deliver };
    match resp.event {
        RDMA_CM_EVENT_CONNECT_REQUEST => match process_conn_req(cm, &p, resp.id, resp.ece, evt) {
            Ok(()) => Step::Deliver,
            Err(e) => {
                log::debug!(target: "rdmacm", "dropping a connection request: {e}");
                Step::Retry
            }
        },
        RDMA_CM_EVENT_CONNECT_RESPONSE => {
            copy_conn_param(evt, resp.conn());
            if p.id.qp().is_null() {
                p.conn.lock().remote_ece = (resp.ece.vendor_id, resp.ece.attr_mod);
            } else {
                match process_conn_resp_ece(cm, &p, resp.ece) {
                    Ok(()) => {
                        evt.event.0.status = 0;
                        evt.event.0.event = RDMA_CM_EVENT_ESTABLISHED;
                    }
                    Err(status) => {
                        log::debug!(target: "rdmacm", "connect response: completing the connection failed ({status})");
                        evt.event.0.status = status;
                        evt.event.0.event = RDMA_CM_EVENT_CONNECT_ERROR;
                        p.conn.lock().connect_error = true;
                    }
                }
            }
            Step::Deliver
        }
        RDMA_CM_EVENT_REJECTED | RDMA_CM_EVENT_DISCONNECTED => {
            if p.conn.lock().connect_error {
                return Step::Retry;
            }
            copy_conn_param(evt, resp.conn());
            if resp.event == RDMA_CM_EVENT_REJECTED {
                let _ = modify_qp_err(&p);
            }
            Step::Deliver
        }
        _ => Step::Deliver,
    }
}

fn process_conn_req(cm: &'static Cm, lp: &IdPriv, handle: u32, ece: kabi::Ece, evt: &mut EventPriv) -> Result<(), Errno> {
    let lid = &lp.id;
    let ch: Arc<Channel> = lp.channel();
    let np = cm.adopt_id(ch, lid.context(), lid.ps(), lid.qp_type(), handle);
    evt.event.0.listen_id = lp.raw();
    evt.event.0.id = np.raw();
    // The connection parameters were copied into the event.
    let param = evt.event.conn();
    {
        let mut c = np.conn.lock();
        c.initiator_depth = param.initiator_depth;
        c.responder_resources = param.responder_resources;
        c.remote_ece = (ece.vendor_id, ece.attr_mod);
    }
    let r = (|| {
        if lp.sync.load(Ordering::Acquire) {
            cm.migrate_id(&np, None)?;
        }
        // Address, GID and path of the new connection's id.
        if !cm.af_ib() {
            return cm.query_route(&np);
        }
        cm.query_addr(&np)?;
        cm.query_gid(&np)?;
        cm.query_path(&np)
    })();
    if let Err(e) = r {
        // np is not published yet.
        let _ = cm.destroy_id(&np);
        return Err(e);
    }
    Ok(())
}
