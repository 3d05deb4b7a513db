// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The connection half of the CM, over the CM core (`crate::cma`):
//! QPs and SRQs bound to ids, endpoints, connect/listen/accept/reject,
//! disconnect, ECE, the library's part of connection events, multicast.
//!
//! Behaviour follows upstream's cma.c: the library moves the QP through
//! INIT (at creation), RTR and RTS (on accept, or on the connect response,
//! after which it sends the kernel's ACCEPT on the active side) and to the
//! error state on reject or disconnect (InfiniBand; SQD on iWARP).

pub mod mcast;
#[cfg(test)]
mod tests;
use crate::sys::verbs;

use crate::cma::device::CmDevice;
use crate::sys::ucma::RawAddr;
use crate::cma::{self as cm, Channel, Cm, EventPriv, IdPriv};
use crate::abi::cma::*;
use crate::abi::ucma as kabi;
use nix::errno::Errno;
use once_cell::sync::Lazy;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::sync::atomic::Ordering;
use verbs::*;

/// "As much as the device allows" in `rdma_conn_param`.
pub const RDMA_MAX_RESP_RES: u8 = 0xFF;
pub const RDMA_MAX_INIT_DEPTH: u8 = 0xFF;

/// The IBTA reject reason "vendor option not supported" (rdma_reject_ece).
pub const REJ_VENDOR_OPTION_NOT_SUPPORTED: u8 = 35;

/// Per-id state of the connection code that the core does not keep.
#[derive(Default)]
pub struct Ext {
    pub local_ece: (u32, u32),
    pub remote_ece: (u32, u32),
    /// The QP attributes a passive endpoint creates each request's QP with.
    pub qp_init_attr: Option<QpInitAttr>,
    /// Multicast memberships (boxed `mcast::Mc`, as addresses).
    pub mcs: Vec<usize>,
}

// SAFETY: QpInitAttr holds C pointers that are only copied, never followed
// here; the table is behind a mutex.
unsafe impl Send for Ext {}

static EXT: Lazy<Mutex<HashMap<usize, Ext>>> = Lazy::new(|| Mutex::new(HashMap::new()));

/// Runs `f` on the connection state of `p` (created on first use).
pub fn with_ext<R>(p: *const IdPriv, f: impl FnOnce(&mut Ext) -> R) -> R {
    let mut t = EXT.lock();
    f(t.entry(p as usize).or_default())
}

/// Drops the connection state of an id that is being freed (memberships
/// left in place are released with it, as the kernel drops them too).
pub fn forget_id(p: *const IdPriv) {
    let ext = EXT.lock().remove(&(p as usize));
    if let Some(ext) = ext {
        for mc in ext.mcs {
            // SAFETY: each entry is a boxed Mc owned by the id's list.
            unsafe { mcast::free(mc as *mut mcast::Mc) };
        }
    }
}

fn raw(p: *const IdPriv) -> *mut rdma_cm_id {
    IdPriv::raw(p)
}

/// The device an id is bound to, if any.
///
/// # Safety
/// `p` must be a live id.
unsafe fn device<'a>(p: *const IdPriv) -> Option<&'a CmDevice> {
    // SAFETY: p is live; a bound device stays alive while referenced.
    unsafe { (*p).dev.load(Ordering::Acquire).as_ref() }
}

// --- QP attributes -------------------------------------------------------------

/// `rdma_init_qp_attr`: the kernel's attributes for `attr.qp_state`.
///
/// # Safety
/// `p` must be a live id.
pub unsafe fn init_qp_attr(cm: &Cm, p: *mut IdPriv, attr: &mut QpAttr) -> Result<c_int, Errno> {
    // SAFETY: p is live.
    let (fd, h) = unsafe { (IdPriv::fd(p), (*p).handle) };
    let k = cm.ucma.init_qp_attr(fd, h, attr.qp_state)?;
    copy_qp_attr_from_kern(attr, &k);
    Ok(k.qp_attr_mask as c_int)
}

unsafe fn modify_qp_rtr(cm: &Cm, p: *mut IdPriv, resp_res: u8) -> Result<(), Errno> {
    // SAFETY: p is live.
    let qp = unsafe { (*raw(p)).qp };
    if qp.is_null() {
        return Ok(());
    }
    let mut a = QpAttr { qp_state: IBV_QPS_INIT, ..Default::default() };
    // SAFETY: p is live; qp is its QP.
    unsafe {
        let mask = init_qp_attr(cm, p, &mut a)?;
        modify_qp(qp, &mut a, mask)?;
    }
    a.qp_state = IBV_QPS_RTR;
    // SAFETY: p is live.
    let mut mask = unsafe { init_qp_attr(cm, p, &mut a)? };
    // Older kernels report RoCE-only attribute bits for InfiniBand ports.
    // SAFETY: p is live.
    let port = unsafe { (*raw(p)).port_num } as usize;
    // SAFETY: p is live.
    if let Some(d) = unsafe { device(p) } {
        if port >= 1 && d.link_layers.get(port - 1) == Some(&IBV_LINK_LAYER_INFINIBAND) {
            mask &= !0x00e0_0000;
        }
    }
    if resp_res != RDMA_MAX_RESP_RES {
        a.max_dest_rd_atomic = resp_res;
    }
    // SAFETY: qp is the id's live QP.
    unsafe { modify_qp(qp, &mut a, mask) }
}

unsafe fn modify_qp_rts(cm: &Cm, p: *mut IdPriv, init_depth: u8) -> Result<(), Errno> {
    // SAFETY: p is live.
    let qp = unsafe { (*raw(p)).qp };
    if qp.is_null() {
        return Ok(());
    }
    let mut a = QpAttr { qp_state: IBV_QPS_RTS, ..Default::default() };
    // SAFETY: p is live.
    let mask = unsafe { init_qp_attr(cm, p, &mut a)? };
    if init_depth != RDMA_MAX_INIT_DEPTH {
        a.max_rd_atomic = init_depth;
    }
    // SAFETY: qp is the id's live QP.
    unsafe { modify_qp(qp, &mut a, mask) }
}

unsafe fn modify_qp_to(p: *mut IdPriv, state: u32) -> Result<(), Errno> {
    // SAFETY: p is live.
    let qp = unsafe { (*raw(p)).qp };
    if qp.is_null() {
        return Ok(());
    }
    // SAFETY: qp is the id's live QP.
    unsafe { modify_state(qp, state) }
}

/// Moves the id's QP (if any) to the error state.
///
/// # Safety
/// `p` must be a live id.
pub unsafe fn modify_qp_err(p: *mut IdPriv) -> Result<(), Errno> {
    // SAFETY: forwarded contract.
    unsafe { modify_qp_to(p, IBV_QPS_ERR) }
}

unsafe fn init_conn_qp(cm: &Cm, p: *mut IdPriv, qp: *mut ibv_qp) -> Result<(), Errno> {
    let mut a = QpAttr { qp_state: IBV_QPS_INIT, ..Default::default() };
    // SAFETY: p is live; qp is a new QP of its device.
    unsafe {
        let mask = init_qp_attr(cm, p, &mut a)?;
        modify_qp(qp, &mut a, mask)
    }
}

unsafe fn init_ud_qp(cm: &Cm, p: *mut IdPriv, qp: *mut ibv_qp) -> Result<(), Errno> {
    let mut a = QpAttr { qp_state: IBV_QPS_INIT, ..Default::default() };
    // SAFETY: p is live; qp is a new QP of its device.
    unsafe {
        let mask = init_qp_attr(cm, p, &mut a)?;
        modify_qp(qp, &mut a, mask)?;
        a.qp_state = IBV_QPS_RTR;
        modify_qp(qp, &mut a, IBV_QP_STATE)?;
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = 0;
        modify_qp(qp, &mut a, IBV_QP_STATE | IBV_QP_SQ_PSN)
    }
}

// --- CQs, QPs, SRQs ------------------------------------------------------------

/// Destroys the CQs and completion channels the library made for the id.
///
/// # Safety
/// `p` must be a live id; its QP/SRQ no longer uses the CQs.
pub unsafe fn destroy_cqs(p: *mut IdPriv) {
    let id = raw(p);
    // SAFETY: p is live; the CQs and channels were created by create_cqs.
    unsafe {
        if (*id).qp_type == IBV_QPT_XRC_RECV && !(*id).srq.is_null() {
            return;
        }
        if !(*id).recv_cq.is_null() {
            destroy_cq((*id).recv_cq);
            if !(*id).send_cq.is_null() && (*id).send_cq != (*id).recv_cq {
                destroy_cq((*id).send_cq);
                (*id).send_cq = null_mut();
            }
            (*id).recv_cq = null_mut();
        }
        if !(*id).recv_cq_channel.is_null() {
            destroy_comp_channel((*id).recv_cq_channel);
            if !(*id).send_cq_channel.is_null() && (*id).send_cq_channel != (*id).recv_cq_channel {
                destroy_comp_channel((*id).send_cq_channel);
                (*id).send_cq_channel = null_mut();
            }
            (*id).recv_cq_channel = null_mut();
        }
    }
}

/// Creates a receive and/or a send CQ, each with its own completion
/// channel and the id as CQ context (what rdma_get_send_comp and
/// rdma_get_recv_comp expect).
unsafe fn create_cqs(p: *mut IdPriv, send: u32, recv: u32) -> Result<(), Errno> {
    let id = raw(p);
    // SAFETY: p is live; verbs is its open device.
    let r = unsafe {
        (|| {
            let ctx = (*id).verbs;
            if recv != 0 {
                (*id).recv_cq_channel = create_comp_channel(ctx)?;
                (*id).recv_cq = create_cq(ctx, recv, id as *mut c_void, (*id).recv_cq_channel)?;
            }
            if send != 0 {
                (*id).send_cq_channel = create_comp_channel(ctx)?;
                (*id).send_cq = create_cq(ctx, send, id as *mut c_void, (*id).send_cq_channel)?;
            }
            Ok(())
        })()
    };
    if r.is_err() {
        // SAFETY: only what was created above is released.
        unsafe { destroy_cqs(p) };
    }
    r
}

/// The device's XRC domain, opened on first use.
unsafe fn get_xrcd(cm: &Cm, p: *mut IdPriv) -> Result<*mut c_void, Errno> {
    let _g = cm.devices.lock();
    // SAFETY: p is live.
    let d = unsafe { (*p).dev.load(Ordering::Acquire) };
    if d.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: d is a live device, modified under the device list lock.
    unsafe {
        if (*d).xrcd == 0 {
            let x = open_xrcd((*d).verbs);
            if x.is_null() {
                return Err(Errno::last());
            }
            (*d).xrcd = x as usize;
        }
        Ok((*d).xrcd as *mut c_void)
    }
}

/// `rdma_create_qp_ex`.
///
/// # Safety
/// `p` must be a live id; pointers in `attr` valid verbs objects or NULL.
pub unsafe fn create_qp_ex(cm: &Cm, p: *mut IdPriv, attr: &mut QpInitAttrEx) -> Result<(), Errno> {
    let id = raw(p);
    // SAFETY: p is live.
    let (cur_qp, verbs, id_pd) = unsafe { ((*id).qp, (*id).verbs, (*id).pd) };
    if !cur_qp.is_null() {
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
    // SAFETY: p is live.
    let (id_send, id_recv, id_srq, qp_type) = unsafe { ((*id).send_cq, (*id).recv_cq, (*id).srq, (*id).qp_type) };
    if (!id_recv.is_null() && !attr.recv_cq.is_null() && id_recv != attr.recv_cq) || (!id_send.is_null() && !attr.send_cq.is_null() && id_send != attr.send_cq) {
        return Err(Errno::EINVAL);
    }
    if qp_type == IBV_QPT_XRC_RECV && (attr.comp_mask & IBV_QP_INIT_ATTR_XRCD == 0 || attr.xrcd.is_null()) {
        // SAFETY: p is live.
        attr.xrcd = unsafe { get_xrcd(cm, p)? };
        attr.comp_mask |= IBV_QP_INIT_ATTR_XRCD;
    }
    let b = attr;
    let send = if !b.send_cq.is_null() || !id_send.is_null() { 0 } else { b.cap.max_send_wr };
    let recv = if !b.recv_cq.is_null() || !id_recv.is_null() { 0 } else { b.cap.max_recv_wr };
    // SAFETY: p is live and bound to a device.
    unsafe { create_cqs(p, send, recv)? };
    // SAFETY: p is live.
    unsafe {
        if b.send_cq.is_null() {
            b.send_cq = (*id).send_cq;
        }
        if b.recv_cq.is_null() {
            b.recv_cq = (*id).recv_cq;
        }
        if !id_srq.is_null() && b.srq.is_null() {
            b.srq = id_srq;
        }
    }
    // SAFETY: verbs is the id's open device; attr is complete.
    let qp = match unsafe { verbs::create_qp_ex(verbs, b) } {
        Ok(qp) => qp,
        Err(e) => {
            // SAFETY: p is live; no QP uses the CQs.
            unsafe { destroy_cqs(p) };
            return Err(e);
        }
    };
    // SAFETY: p is live; qp is the new QP.
    let r = unsafe {
        init_ece(p, qp).and_then(|_| if qp_type == IBV_QPT_UD { init_ud_qp(cm, p, qp) } else { init_conn_qp(cm, p, qp) }).and_then(|_| set_local_ece(p, qp))
    };
    if let Err(e) = r {
        // SAFETY: qp was created above and is not published.
        unsafe {
            destroy_qp(qp);
            destroy_cqs(p);
        }
        return Err(e);
    }
    // SAFETY: p is live; qp is live.
    unsafe {
        (*id).pd = qp_srq_pd(qp).1;
        (*id).qp = qp;
    }
    Ok(())
}

/// `rdma_create_qp`: `attr` is read and written back (the capabilities
/// and CQs the QP got).
///
/// # Safety
/// `p` must be a live id, `attr` a valid `ibv_qp_init_attr`.
pub unsafe fn create_qp(cm: &Cm, p: *mut IdPriv, pd: *mut ibv_pd, attr: *mut QpInitAttr) -> Result<(), Errno> {
    // SAFETY: QpInitAttrEx is plain data; all-zero is valid.
    let mut ex: QpInitAttrEx = unsafe { std::mem::zeroed() };
    // SAFETY: attr is a readable ibv_qp_init_attr.
    ex.set_base(unsafe { &*attr });
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    // SAFETY: p is live.
    ex.pd = if pd.is_null() { unsafe { (*raw(p)).pd } } else { pd };
    // SAFETY: forwarded contract.
    let r = unsafe { create_qp_ex(cm, p, &mut ex) };
    // SAFETY: attr is writable.
    unsafe { *attr = ex.base() };
    r
}

/// `rdma_destroy_qp`.
///
/// # Safety
/// `p` must be a live id.
pub unsafe fn destroy_qp_of(p: *mut IdPriv) {
    let id = raw(p);
    // SAFETY: p is live; its QP is the library's to destroy on request.
    unsafe {
        if !(*id).qp.is_null() {
            destroy_qp((*id).qp);
        }
        (*id).qp = null_mut();
        destroy_cqs(p);
    }
}

/// `rdma_create_srq_ex`.
///
/// # Safety
/// `p` must be a live id; pointers in `attr` valid verbs objects or NULL.
pub unsafe fn create_srq_ex(cm: &Cm, p: *mut IdPriv, attr: &mut SrqInitAttrEx) -> Result<(), Errno> {
    let id = raw(p);
    if attr.comp_mask & IBV_SRQ_INIT_ATTR_TYPE == 0 {
        return Err(Errno::EINVAL);
    }
    // SAFETY: p is live.
    let (verbs, id_pd) = unsafe { ((*id).verbs, (*id).pd) };
    if attr.comp_mask & IBV_SRQ_INIT_ATTR_PD == 0 || attr.pd.is_null() {
        attr.pd = id_pd;
        attr.comp_mask |= IBV_SRQ_INIT_ATTR_PD;
    }
    if verbs.is_null() {
        return Err(Errno::EINVAL);
    }
    if attr.srq_type == IBV_SRQT_XRC {
        if attr.comp_mask & IBV_SRQ_INIT_ATTR_XRCD == 0 || attr.xrcd.is_null() {
            // SAFETY: p is live.
            attr.xrcd = unsafe { get_xrcd(cm, p)? };
        }
        if attr.comp_mask & IBV_SRQ_INIT_ATTR_CQ == 0 || attr.cq.is_null() {
            // SAFETY: p is live and bound.
            unsafe { create_cqs(p, 0, attr.attr.max_wr)? };
            // SAFETY: p is live.
            attr.cq = unsafe { (*id).recv_cq };
        }
        attr.comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
    }
    // SAFETY: verbs is the id's open device.
    match unsafe { verbs::create_srq_ex(verbs, attr) } {
        Ok(srq) => {
            // SAFETY: p is live.
            unsafe {
                if (*id).pd.is_null() {
                    (*id).pd = attr.pd;
                }
                (*id).srq = srq;
            }
            Ok(())
        }
        Err(e) => {
            // SAFETY: p is live; nothing uses the CQs.
            unsafe { destroy_cqs(p) };
            Err(e)
        }
    }
}

/// `rdma_create_srq`.
///
/// # Safety
/// `p` must be a live id, `attr` a valid `ibv_srq_init_attr`.
pub unsafe fn create_srq(cm: &Cm, p: *mut IdPriv, pd: *mut ibv_pd, attr: *mut SrqInitAttr) -> Result<(), Errno> {
    // SAFETY: SrqInitAttrEx is plain data; all-zero is valid.
    let mut ex: SrqInitAttrEx = unsafe { std::mem::zeroed() };
    // SAFETY: attr is readable.
    let a = unsafe { *attr };
    ex.srq_context = a.srq_context;
    ex.attr = a.attr;
    ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
    // SAFETY: p is live.
    ex.srq_type = if unsafe { (*raw(p)).qp_type } == IBV_QPT_XRC_RECV { IBV_SRQT_XRC } else { IBV_SRQT_BASIC };
    ex.pd = pd;
    // SAFETY: forwarded contract.
    let r = unsafe { create_srq_ex(cm, p, &mut ex) };
    // SAFETY: attr is writable.
    unsafe { *attr = SrqInitAttr { srq_context: ex.srq_context, attr: ex.attr } };
    r
}

/// `rdma_destroy_srq`.
///
/// # Safety
/// `p` must be a live id.
pub unsafe fn destroy_srq_of(p: *mut IdPriv) {
    let id = raw(p);
    // SAFETY: p is live.
    unsafe {
        destroy_srq((*id).srq);
        (*id).srq = null_mut();
        destroy_cqs(p);
    }
}

// --- ECE -------------------------------------------------------------------------

unsafe fn init_ece(p: *mut IdPriv, qp: *mut ibv_qp) -> Result<(), Errno> {
    // SAFETY: qp is live.
    let (e, _) = unsafe { query_ece(qp)? };
    let remote = with_ext(p, |x| {
        x.local_ece = (e.vendor_id, e.options);
        x.remote_ece
    });
    if remote.0 == 0 {
        return Ok(());
    }
    let want = if remote.0 != e.vendor_id { Ece { vendor_id: e.vendor_id, options: 0, comp_mask: 0 } } else { Ece { vendor_id: remote.0, options: remote.1, comp_mask: 0 } };
    // SAFETY: qp is live.
    unsafe { set_ece(qp, want) }
}

unsafe fn set_local_ece(p: *mut IdPriv, qp: *mut ibv_qp) -> Result<(), Errno> {
    if with_ext(p, |x| x.remote_ece.0) == 0 {
        return Ok(());
    }
    // SAFETY: qp is live.
    let (e, _) = unsafe { query_ece(qp)? };
    with_ext(p, |x| x.local_ece.1 = e.options);
    Ok(())
}

/// `rdma_set_local_ece` (after the NULL checks).
///
/// # Safety
/// `p` must be a live id.
pub unsafe fn set_local_ece_param(p: *mut IdPriv, e: &Ece) -> Result<(), Errno> {
    // SAFETY: p is live.
    if !unsafe { (*raw(p)).qp }.is_null() || e.vendor_id == 0 || e.comp_mask != 0 {
        return Err(Errno::EINVAL);
    }
    with_ext(p, |x| x.local_ece = (e.vendor_id, e.options));
    Ok(())
}

/// `rdma_get_remote_ece` (after the NULL checks).
///
/// # Safety
/// `p` must be a live id.
pub unsafe fn get_remote_ece(p: *mut IdPriv) -> Result<Ece, Errno> {
    // SAFETY: p is live.
    if !unsafe { (*raw(p)).qp }.is_null() {
        return Err(Errno::EINVAL);
    }
    let (v, o) = with_ext(p, |x| x.remote_ece);
    Ok(Ece { vendor_id: v, options: o, comp_mask: 0 })
}

// --- connection -------------------------------------------------------------------

unsafe fn valid_param(p: *mut IdPriv, param: Option<&rdma_conn_param>) -> Result<(), Errno> {
    let id = raw(p);
    // SAFETY: p is live.
    if unsafe { (*id).ps } != RDMA_PS_TCP {
        return Ok(());
    }
    // SAFETY: p is live.
    if unsafe { (*id).qp }.is_null() && param.is_none() {
        return Err(Errno::EINVAL);
    }
    let Some(param) = param else { return Ok(()) };
    // SAFETY: p is live.
    let Some(d) = (unsafe { device(p) }) else { return Err(Errno::EINVAL) };
    if param.responder_resources != RDMA_MAX_RESP_RES && param.responder_resources > d.max_responder_resources {
        return Err(Errno::EINVAL);
    }
    if param.initiator_depth != RDMA_MAX_INIT_DEPTH && param.initiator_depth > d.max_initiator_depth {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// The kernel's connection parameters: the id's pending connect data (an
/// AF_IB header from rdma_getaddrinfo) followed by the caller's.
unsafe fn conn_param_to_kern(p: *mut IdPriv, src: Option<&rdma_conn_param>, qp_num: u32, srq: u8) -> kabi::ConnParam {
    // SAFETY: p is live.
    let conn = unsafe { (*p).conn.lock() };
    let mut k = kabi::ConnParam { qp_num, srq, responder_resources: conn.responder_resources, initiator_depth: conn.initiator_depth, valid: 1, ..Default::default() };
    let mut len = conn.connect.len().min(kabi::RDMA_MAX_PRIVATE_DATA);
    k.private_data[..len].copy_from_slice(&conn.connect[..len]);
    match src {
        Some(s) => {
            k.flow_control = s.flow_control;
            k.retry_count = s.retry_count;
            k.rnr_retry_count = s.rnr_retry_count;
            if !s.private_data.is_null() && s.private_data_len > 0 {
                let n = (s.private_data_len as usize).min(kabi::RDMA_MAX_PRIVATE_DATA - len);
                // SAFETY: the caller's private data holds private_data_len bytes.
                let b = unsafe { std::slice::from_raw_parts(s.private_data as *const u8, n) };
                k.private_data[len..len + n].copy_from_slice(b);
                len += n;
            }
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
unsafe fn qp_num_srq(p: *mut IdPriv, param: Option<&rdma_conn_param>) -> Option<(u32, u8)> {
    // SAFETY: p is live.
    let qp = unsafe { (*raw(p)).qp };
    if !qp.is_null() {
        // SAFETY: qp is live.
        return Some(unsafe { (qp_num(qp), qp_srq_pd(qp).0 as u8) });
    }
    param.map(|c| (c.qp_num, c.srq))
}

/// `rdma_connect`.
///
/// # Safety
/// `p` must be a live id; `param` the caller's (valid private data).
pub unsafe fn connect(cm: &'static Cm, p: *mut IdPriv, param: Option<&rdma_conn_param>) -> Result<(), Errno> {
    // SAFETY: p is live.
    unsafe { valid_param(p, param)? };
    // SAFETY: p is live.
    let d = unsafe { device(p) }.ok_or(Errno::EINVAL)?;
    {
        // SAFETY: p is live.
        let mut c = unsafe { (*p).conn.lock() };
        c.initiator_depth = match param {
            Some(c) if c.initiator_depth != RDMA_MAX_INIT_DEPTH => c.initiator_depth,
            _ => d.max_initiator_depth,
        };
        c.responder_resources = match param {
            Some(c) if c.responder_resources != RDMA_MAX_RESP_RES => c.responder_resources,
            _ => d.max_responder_resources,
        };
    }
    // SAFETY: p is live.
    let (qpn, srq) = unsafe { qp_num_srq(p, param) }.unwrap_or((0, 0));
    // SAFETY: p is live; param's private data is the caller's.
    let k = unsafe { conn_param_to_kern(p, param, qpn, srq) };
    let (v, o) = with_ext(p, |x| x.local_ece);
    // SAFETY: p is live.
    let (fd, h) = unsafe { (IdPriv::fd(p), (*p).handle) };
    cm.ucma.connect(fd, h, &k, kabi::Ece { vendor_id: v, attr_mod: o })?;
    // SAFETY: p is live.
    unsafe { (*p).conn.lock().connect.clear() };
    // SAFETY: p is live.
    unsafe { cm.complete(p) }
}

/// `rdma_listen`.
///
/// # Safety
/// `p` must be a live id.
pub unsafe fn listen(cm: &'static Cm, p: *mut IdPriv, backlog: c_int) -> Result<(), Errno> {
    // SAFETY: p is live.
    let (fd, h) = unsafe { (IdPriv::fd(p), (*p).handle) };
    cm.ucma.listen(fd, h, backlog as u32)?;
    // SAFETY: p is live.
    unsafe { hooks::query_after_listen(cm, p) }
}

/// `rdma_accept`.
///
/// # Safety
/// `p` must be a live id; `param` the caller's.
pub unsafe fn accept(cm: &'static Cm, p: *mut IdPriv, param: Option<&rdma_conn_param>) -> Result<(), Errno> {
    // Upstream reads the caller's parameters when the id has no QP.
    // SAFETY: p is live.
    let (qpn, srq) = unsafe { qp_num_srq(p, param) }.ok_or(Errno::EINVAL)?;
    // SAFETY: p is live.
    unsafe { valid_param(p, param)? };
    // SAFETY: p is live.
    let d = unsafe { device(p) }.ok_or(Errno::EINVAL)?;
    let (init_depth, resp_res) = {
        // SAFETY: p is live.
        let mut c = unsafe { (*p).conn.lock() };
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
    // SAFETY: p is live.
    let ud = unsafe { (*raw(p)).qp_type } == IBV_QPT_UD;
    if !ud {
        // SAFETY: p is live.
        unsafe {
            modify_qp_rtr(cm, p, resp_res)?;
            modify_qp_rts(cm, p, init_depth)?;
        }
    }
    // SAFETY: p is live.
    let k = unsafe { conn_param_to_kern(p, param, qpn, srq) };
    let ((rv, _), (_, lo)) = with_ext(p, |x| (x.remote_ece, x.local_ece));
    // SAFETY: p is live.
    let (fd, h) = unsafe { (IdPriv::fd(p), (*p).handle) };
    if let Err(e) = cm.ucma.accept(fd, h, p as usize as u64, &k, kabi::Ece { vendor_id: rv, attr_mod: lo }) {
        // SAFETY: p is live.
        let _ = unsafe { modify_qp_err(p) };
        return Err(e);
    }
    if ud {
        // SAFETY: p is live; a parked event is an unacked event of it.
        unsafe {
            if (*p).sync.load(Ordering::Acquire) && !(*raw(p)).event.is_null() {
                let ev = (*raw(p)).event as *mut EventPriv;
                (*raw(p)).event = null_mut();
                cm::ack_event(cm, ev);
            }
        }
        return Ok(());
    }
    // SAFETY: p is live.
    unsafe { cm.complete(p) }
}

/// `rdma_reject` / `rdma_reject_ece`.
///
/// # Safety
/// `p` must be a live id; `data` NULL or `len` readable bytes.
pub unsafe fn reject(cm: &Cm, p: *mut IdPriv, data: *const c_void, len: u8, reason: u8) -> Result<(), Errno> {
    let pd: &[u8] = if data.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: per the contract.
        unsafe { std::slice::from_raw_parts(data as *const u8, len as usize) }
    };
    // SAFETY: p is live.
    let (fd, h) = unsafe { (IdPriv::fd(p), (*p).handle) };
    cm.ucma.reject(fd, h, reason, pd)
}

/// `rdma_notify`.
///
/// # Safety
/// `p` must be a live id.
pub unsafe fn notify(cm: &Cm, p: *mut IdPriv, event: u32) -> Result<(), Errno> {
    // SAFETY: p is live.
    let (fd, h) = unsafe { (IdPriv::fd(p), (*p).handle) };
    cm.ucma.notify(fd, h, event)
}

/// Stops the QP before a disconnect: error state on InfiniBand/RoCE,
/// SQD on iWARP.
unsafe fn shutdown(p: *mut IdPriv) -> Result<(), Errno> {
    // SAFETY: p is live; verbs is NULL or its open device.
    match unsafe { transport_type((*raw(p)).verbs) } {
        // SAFETY: p is live.
        IBV_TRANSPORT_IB => unsafe { modify_qp_to(p, IBV_QPS_ERR) },
        // SAFETY: p is live.
        IBV_TRANSPORT_IWARP => unsafe { modify_qp_to(p, IBV_QPS_SQD) },
        _ => Err(Errno::EINVAL),
    }
}

/// Stops the QP (as [`disconnect`] does first) without asking the peer to
/// disconnect: for rsockets, whose peer learns of it in-band.
///
/// # Safety
/// `p` must be a live id.
pub(crate) unsafe fn stop_qp(p: *mut IdPriv) -> Result<(), Errno> {
    // SAFETY: forwarded contract.
    unsafe { shutdown(p) }
}

/// `rdma_disconnect`.
///
/// # Safety
/// `p` must be a live id.
pub unsafe fn disconnect(cm: &'static Cm, p: *mut IdPriv) -> Result<(), Errno> {
    // SAFETY: p is live.
    unsafe { shutdown(p)? };
    // SAFETY: p is live.
    let (fd, h) = unsafe { (IdPriv::fd(p), (*p).handle) };
    cm.ucma.disconnect(fd, h)?;
    // SAFETY: p is live.
    unsafe { cm.complete(p) }
}

/// The active side's answer to a connect response: QP to RTR and RTS,
/// then the kernel's ACCEPT (which sends the RTU).
unsafe fn process_conn_resp(cm: &Cm, p: *mut IdPriv) -> Result<(), Errno> {
    // SAFETY: p is live.
    let r = unsafe {
        modify_qp_rtr(cm, p, RDMA_MAX_RESP_RES).and_then(|_| modify_qp_rts(cm, p, RDMA_MAX_INIT_DEPTH)).and_then(|_| cm.ucma.accept(IdPriv::fd(p), (*p).handle, 0, &kabi::ConnParam::default(), kabi::Ece::default()))
    };
    if r.is_err() {
        // SAFETY: p is live.
        let _ = unsafe { modify_qp_err(p) };
    }
    r
}

/// The connect response with ECE; the error is the event status upstream
/// reports: -1 from its own helpers, a positive errno from the ECE verbs.
unsafe fn process_conn_resp_ece(cm: &Cm, p: *mut IdPriv, ece: kabi::Ece) -> Result<(), c_int> {
    let local = with_ext(p, |x| x.local_ece);
    let mut want = Ece { vendor_id: ece.vendor_id, options: ece.attr_mod, comp_mask: 0 };
    if ece.vendor_id == 0 {
        want = Ece { vendor_id: local.0, options: 0, comp_mask: 0 };
    } else if ece.vendor_id != local.0 {
        // SAFETY: p is live.
        let _ = unsafe { modify_qp_err(p) };
        return Err(-1);
    }
    with_ext(p, |x| x.remote_ece.0 = ece.vendor_id);
    // SAFETY: p is live and has a QP (checked by the caller).
    let qp = unsafe { (*raw(p)).qp };
    // SAFETY: qp is live.
    unsafe { set_ece(qp, want) }.map_err(|e| e as c_int)?;
    // SAFETY: p is live.
    unsafe { process_conn_resp(cm, p) }.map_err(|_| -1)?;
    // SAFETY: qp is live.
    match unsafe { query_ece(qp) } {
        Ok((e, unsupported)) => {
            with_ext(p, |x| x.local_ece.1 = if unsupported { 0 } else { e.options });
            Ok(())
        }
        Err(e) => {
            // SAFETY: p is live.
            let _ = unsafe { modify_qp_err(p) };
            Err(e as c_int)
        }
    }
}

/// `rdma_establish`.
///
/// # Safety
/// `p` must be a live id.
pub unsafe fn establish(cm: &Cm, p: *mut IdPriv) -> Result<(), Errno> {
    // SAFETY: p is live.
    if !unsafe { (*raw(p)).qp }.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: p is live.
    unsafe { process_conn_resp(cm, p) }
}

/// `rdma_get_request`: the next connection request of a synchronous
/// listener; the new id carries the request event in `id->event`.
///
/// # Safety
/// `lp` must be a live id.
pub unsafe fn get_request(cm: &'static Cm, lp: *mut IdPriv) -> Result<*mut rdma_cm_id, Errno> {
    let lid = raw(lp);
    // SAFETY: lp is live.
    if !unsafe { (*lp).sync.load(Ordering::Acquire) } {
        return Err(Errno::EINVAL);
    }
    // SAFETY: lp is live; its parked event is unacked.
    unsafe {
        let ev = (*lid).event as *mut EventPriv;
        if !ev.is_null() {
            (*lid).event = null_mut();
            cm::ack_event(cm, ev);
        }
    }
    // SAFETY: a synchronous id's channel is its own live Channel.
    let ev = unsafe { cm::get_event((*lid).channel as *mut Channel)? };
    // SAFETY: ev is a live event.
    let e = unsafe { &(*ev).event };
    let r = (|| {
        if e.event == RDMA_CM_EVENT_REJECTED {
            return Err(Errno::ECONNREFUSED);
        }
        if e.status != 0 {
            return Err(Errno::from_raw(e.status.wrapping_neg()));
        }
        if e.event != RDMA_CM_EVENT_CONNECT_REQUEST {
            return Err(Errno::EINVAL);
        }
        if let Some(mut a) = with_ext(lp, |x| x.qp_init_attr) {
            // SAFETY: e.id is the new live id; lp is live.
            unsafe { create_qp(cm, IdPriv::from_id(e.id), (*lid).pd, &mut a)? };
        }
        Ok(e.id)
    })();
    match r {
        Ok(id) => {
            // SAFETY: id is the new live id.
            unsafe { (*id).event = ev as *mut rdma_cm_event };
            Ok(id)
        }
        Err(err) => {
            // SAFETY: lp is live.
            unsafe { (*lid).event = ev as *mut rdma_cm_event };
            Err(err)
        }
    }
}

// --- endpoints ---------------------------------------------------------------------

fn addr_of(a: *const libc::sockaddr, len: u32) -> Option<RawAddr> {
    if a.is_null() {
        return None;
    }
    // SAFETY: rdma_addrinfo promises len readable bytes at a.
    Some(RawAddr::from_slice(unsafe { std::slice::from_raw_parts(a as *const u8, len as usize) }))
}

/// `rdma_create_ep`.
///
/// # Safety
/// `res` must be a valid `rdma_addrinfo`; `pd` NULL or a live PD; `attr`
/// NULL or a valid `ibv_qp_init_attr`.
pub unsafe fn create_ep(cm: &'static Cm, res: &rdma_addrinfo, pd: *mut ibv_pd, attr: *mut QpInitAttr) -> Result<*mut IdPriv, Errno> {
    cm.init()?;
    let p = cm.create_id_inner(null_mut(), null_mut(), res.ai_port_space as u32, res.ai_qp_type as u32)?;
    // SAFETY: p is the new live id, attr as per the contract.
    let r = unsafe { setup_ep(cm, p, res, pd, attr) };
    match r {
        Ok(()) => Ok(p),
        Err(e) => {
            // SAFETY: p is live and unpublished.
            unsafe { destroy_ep(cm, p) };
            Err(e)
        }
    }
}

unsafe fn setup_ep(cm: &'static Cm, p: *mut IdPriv, res: &rdma_addrinfo, pd: *mut ibv_pd, attr: *mut QpInitAttr) -> Result<(), Errno> {
    let src = addr_of(res.ai_src_addr, res.ai_src_len);
    if res.ai_flags & RAI_PASSIVE != 0 {
        // SAFETY: p is live.
        unsafe { cm.bind(p, src)? };
        if !pd.is_null() {
            // SAFETY: p is live.
            unsafe { (*raw(p)).pd = pd };
        }
        if !attr.is_null() {
            // SAFETY: attr is readable.
            let mut a = unsafe { *attr };
            a.qp_type = res.ai_qp_type as u32;
            with_ext(p, |x| x.qp_init_attr = Some(a));
        }
        return Ok(());
    }
    let dst = addr_of(res.ai_dst_addr, res.ai_dst_len);
    // SAFETY: p is live (synchronous: each call waits for its event).
    unsafe {
        cm.resolve_addr(p, src, dst, 2000)?;
        if res.ai_route_len > 0 {
            cm.set_option(p, kabi::RDMA_OPTION_IB, kabi::RDMA_OPTION_IB_PATH, res.ai_route, res.ai_route_len)?;
            cm.complete(p)?;
        } else {
            cm.resolve_route(p, 2000)?;
        }
    }
    if !attr.is_null() {
        // SAFETY: attr is writable.
        unsafe {
            (*attr).qp_type = res.ai_qp_type as u32;
            create_qp(cm, p, pd, attr)?;
        }
    }
    if res.ai_connect_len > 0 && !res.ai_connect.is_null() {
        // SAFETY: rdma_addrinfo promises ai_connect_len bytes.
        let b = unsafe { std::slice::from_raw_parts(res.ai_connect as *const u8, res.ai_connect_len) };
        // SAFETY: p is live.
        unsafe { (*p).conn.lock().connect = b.to_vec() };
    }
    Ok(())
}

/// `rdma_destroy_ep`.
///
/// # Safety
/// `p` must be a live id; it is freed.
pub unsafe fn destroy_ep(cm: &Cm, p: *mut IdPriv) {
    // SAFETY: p is live.
    unsafe {
        if !(*raw(p)).qp.is_null() {
            destroy_qp_of(p);
        }
        if !(*raw(p)).srq.is_null() {
            destroy_srq_of(p);
        }
    }
    with_ext(p, |x| x.qp_init_attr = None);
    // SAFETY: p is live; it is freed here.
    let _ = unsafe { cm.destroy_id(p) };
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
    evt.event.param.conn = rdma_conn_param {
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
///
/// # Safety
/// `evt.id_priv` must be a live id with this event outstanding.
pub unsafe fn process_event(cm: &'static Cm, resp: &kabi::EventResp, evt: &mut EventPriv) -> Step {
    let p = evt.id_priv;
    match resp.event {
        RDMA_CM_EVENT_CONNECT_REQUEST => {
            // SAFETY: p is the live listener.
            match unsafe { process_conn_req(cm, p, resp.id, resp.ece, evt) } {
                Ok(()) => Step::Deliver,
                Err(e) => {
                    log::debug!(target: "rdmacm", "dropping a connection request: {e}");
                    Step::Retry
                }
            }
        }
        RDMA_CM_EVENT_CONNECT_RESPONSE => {
            // SAFETY: the union member is plain data.
            copy_conn_param(evt, unsafe { &resp.param.conn });
            // SAFETY: p is live.
            if unsafe { (*raw(p)).qp }.is_null() {
                with_ext(p, |x| x.remote_ece = (resp.ece.vendor_id, resp.ece.attr_mod));
            } else {
                // SAFETY: p is live with a QP.
                match unsafe { process_conn_resp_ece(cm, p, resp.ece) } {
                    Ok(()) => {
                        evt.event.status = 0;
                        evt.event.event = RDMA_CM_EVENT_ESTABLISHED;
                    }
                    Err(status) => {
                        log::debug!(target: "rdmacm", "connect response: completing the connection failed ({status})");
                        evt.event.status = status;
                        evt.event.event = RDMA_CM_EVENT_CONNECT_ERROR;
                        // SAFETY: p is live.
                        unsafe { (*p).conn.lock().connect_error = true };
                    }
                }
            }
            Step::Deliver
        }
        RDMA_CM_EVENT_REJECTED | RDMA_CM_EVENT_DISCONNECTED => {
            // SAFETY: p is live.
            if unsafe { (*p).conn.lock().connect_error } {
                return Step::Retry;
            }
            // SAFETY: the union member is plain data.
            copy_conn_param(evt, unsafe { &resp.param.conn });
            if resp.event == RDMA_CM_EVENT_REJECTED {
                // SAFETY: p is live.
                let _ = unsafe { modify_qp_err(p) };
            }
            Step::Deliver
        }
        _ => Step::Deliver,
    }
}

unsafe fn process_conn_req(cm: &'static Cm, lp: *mut IdPriv, handle: u32, ece: kabi::Ece, evt: &mut EventPriv) -> Result<(), Errno> {
    let lid = raw(lp);
    // SAFETY: lp is live.
    let (ch, ctx, ps, qp_type, sync) = unsafe { ((*lid).channel as *mut Channel, (*lid).context, (*lid).ps, (*lid).qp_type, (*lp).sync.load(Ordering::Acquire)) };
    // SAFETY: ch is the listener's live channel; handle is the kernel's new id.
    let np = unsafe { hooks::adopt_id(cm, ch, ctx, ps, qp_type, handle)? };
    evt.event.listen_id = lid;
    evt.event.id = raw(np);
    // SAFETY: the connection parameters were copied into the event.
    let (init, resp) = unsafe { (evt.event.param.conn.initiator_depth, evt.event.param.conn.responder_resources) };
    {
        // SAFETY: np is live.
        let mut c = unsafe { (*np).conn.lock() };
        c.initiator_depth = init;
        c.responder_resources = resp;
    }
    with_ext(np, |x| x.remote_ece = (ece.vendor_id, ece.attr_mod));
    // SAFETY: np is live and not yet published.
    let r = unsafe {
        (|| {
            if sync {
                cm.migrate_id(np, null_mut())?;
            }
            hooks::query_req_info(cm, np)
        })()
    };
    if let Err(e) = r {
        // SAFETY: np is live and unpublished.
        let _ = unsafe { cm.destroy_id(np) };
        return Err(e);
    }
    Ok(())
}

/// Connection points into the CM core.
mod hooks {
    use super::*;

    /// An id for a kernel id that already exists (a connection request).
    pub(super) unsafe fn adopt_id(cm: &'static Cm, ch: *mut Channel, ctx: *mut c_void, ps: u32, qp_type: u32, handle: u32) -> Result<*mut IdPriv, Errno> {
        // SAFETY: forwarded contract.
        Ok(unsafe { cm.adopt_id(ch, ctx, ps, qp_type, handle) })
    }

    /// Address, GID and path of a new connection's id.
    pub(super) unsafe fn query_req_info(cm: &'static Cm, p: *mut IdPriv) -> Result<(), Errno> {
        // SAFETY: p is live.
        unsafe {
            if !cm.af_ib() {
                return cm.query_route(p);
            }
            cm.query_addr(p)?;
            cm.query_gid(p)?;
            cm.query_path(p)
        }
    }

    /// The listener's address after LISTEN.
    pub(super) unsafe fn query_after_listen(cm: &'static Cm, p: *mut IdPriv) -> Result<(), Errno> {
        // SAFETY: p is live.
        unsafe {
            if cm.af_ib() {
                cm.query_addr(p)
            } else {
                cm.query_route(p)
            }
        }
    }
}
