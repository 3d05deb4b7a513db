// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! QPs, SRQs and the CQs the library makes for them, and endpoints
//! (`rdma_create_ep`): the verbs objects of an id, created from attribute
//! sets whose handles (PD, CQs, SRQ, XRC domain) the caller supplies as
//! [`Vouched`] values.  The libibverbs calls themselves are in
//! `crate::cma::objects`.
#![deny(unsafe_code)]

use crate::abi::cma::*;
use crate::abi::sockaddr::SockAddr;
use crate::abi::ucma as kabi;
use crate::cma::base::{Cm, IdPriv, IdRef};
use crate::cma::objects::{NewQp, Vouched, Xrcd};
use crate::cma::public::CPtr;
use crate::cma::trace::{self, Step};
use crate::sys::verbs::*;
use nix::errno::Errno;
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

/// `rdma_init_qp_attr`: the kernel's attributes for `attr.qp_state`.
pub fn init_qp_attr(cm: &Cm, p: &IdPriv, attr: &mut QpAttr) -> Result<c_int, Errno> {
    init_qp_attr_on(cm, p.fd(), p.handle(), attr)
}

/// [`init_qp_attr`] of the id whose channel's fd and handle are `fd` and
/// `handle`.
#[inline]
pub fn init_qp_attr_on(cm: &Cm, fd: i32, handle: u32, attr: &mut QpAttr) -> Result<c_int, Errno> {
    if cm.direct {
        return init_qp_attr_kernel(fd, handle, attr);
    }
    // (the kernel writes its answer here: no copy of it)
    let mut k = kabi::UverbsQpAttr::default();
    cm.ucma.init_qp_attr_into(fd, handle, attr.qp_state, &mut k)?;
    copy_qp_attr_from_kern(attr, &k);
    Ok(k.qp_attr_mask as c_int)
}

/// [`init_qp_attr_on`] of the library's own instance, whose transport is
/// the kernel's (`Cm::direct`): the C API's `rdma_init_qp_attr` in line,
/// on the fd and handle [`crate::cma::alloc::peek_id`] read, the command
/// built where it is written and the kernel's answer written in the
/// caller's frame.
#[inline(always)]
pub fn init_qp_attr_kernel(fd: i32, handle: u32, attr: &mut QpAttr) -> Result<c_int, Errno> {
    let mut k = kabi::UverbsQpAttr::default();
    crate::sys::ucma::init_qp_attr(fd, handle, attr.qp_state, &mut k)?;
    copy_qp_attr_from_kern(attr, &k);
    Ok(k.qp_attr_mask as c_int)
}

/// What `rdma_create_ep` takes from the caller's `rdma_addrinfo` (the C
/// API copies it out).
#[derive(Clone, Debug, Default)]
pub struct EpInfo {
    pub passive: bool,
    pub port_space: u32,
    pub qp_type: u32,
    /// At the `rdma_addrinfo`'s lengths (the kernel checks them).
    pub src: Option<SockAddr>,
    pub dst: Option<SockAddr>,
    /// `ai_route` and `ai_route_len` (path records for
    /// RDMA_OPTION_IB_PATH), handed to the kernel as they are.
    pub route: CPtr<c_void>,
    pub route_len: usize,
    /// `ai_connect` (connect data), if any.
    pub connect: Vec<u8>,
}

/// Moves a new QP of the id's device to INIT.
fn init_conn_qp(cm: &Cm, p: &IdPriv, qp: &NewQp) -> Result<(), Errno> {
    let mut a = QpAttr { qp_state: IBV_QPS_INIT, ..Default::default() };
    let mask = init_qp_attr(cm, p, &mut a)?;
    qp.modify(&mut a, mask)
}

/// Moves a new UD QP of the id's device to RTS.
fn init_ud_qp(cm: &Cm, p: &IdPriv, qp: &NewQp) -> Result<(), Errno> {
    let mut a = QpAttr { qp_state: IBV_QPS_INIT, ..Default::default() };
    let mask = init_qp_attr(cm, p, &mut a)?;
    qp.modify(&mut a, mask)?;
    a.qp_state = IBV_QPS_RTR;
    qp.modify(&mut a, IBV_QP_STATE)?;
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    qp.modify(&mut a, IBV_QP_STATE | IBV_QP_SQ_PSN)
}

// --- CQs, QPs, SRQs ------------------------------------------------------------

/// Destroys the CQs and completion channels the library made for the id
/// (its QP/SRQ must no longer use them).
#[inline]
pub fn destroy_cqs(p: &IdPriv) {
    p.id.destroy_cqs();
}

/// Creates a receive and/or a send CQ, each with its own completion
/// channel and the id as CQ context.
fn create_cqs(p: &IdPriv, send: u32, recv: u32) -> Result<(), Errno> {
    p.id.create_cqs(send, recv)
}

/// The device's XRC domain, opened on first use.
fn get_xrcd(cm: &Cm, p: &IdPriv) -> Result<Xrcd, Errno> {
    let key = p.device().ok_or(Errno::EINVAL)?.key;
    let mut devs = cm.devices.lock();
    let d = devs.find_mut(key).ok_or(Errno::EINVAL)?;
    if let Some(x) = d.xrcd {
        return Ok(x);
    }
    // The id's device context is the device's.
    let x = p.id.open_xrcd()?;
    d.xrcd = Some(x);
    Ok(x)
}

/// `rdma_create_qp_ex`.
pub fn create_qp_ex(cm: &Cm, p: &IdPriv, attr: &mut Vouched<QpInitAttrEx>) -> Result<(), Errno> {
    if trace::on() {
        return create_qp_ex_traced(cm, p, attr);
    }
    create_qp_ex_untraced(cm, p, attr)
}

#[cold]
#[inline(never)]
fn create_qp_ex_traced(cm: &Cm, p: &IdPriv, attr: &mut Vouched<QpInitAttrEx>) -> Result<(), Errno> {
    trace::call(p, Step::CreateQp, || create_qp_ex_untraced(cm, p, attr))
}

#[inline(always)]
fn create_qp_ex_untraced(cm: &Cm, p: &IdPriv, attr: &mut Vouched<QpInitAttrEx>) -> Result<(), Errno> {
    let id = &p.id;
    let verbs = id.verbs();
    if !id.qp().is_null() {
        return Err(Errno::EINVAL);
    }
    let a = attr.get();
    if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
        attr.use_pd_of(id);
    } else if verbs != attr.pd_context() {
        return Err(Errno::EINVAL);
    }
    // Upstream dereferences the device here; an id without one is EINVAL.
    if verbs.is_null() || attr.get().pd.is_null() {
        return Err(Errno::EINVAL);
    }
    let (id_send, id_recv, qp_type) = (id.send_cq(), id.recv_cq(), id.qp_type());
    let a = attr.get();
    if (!id_recv.is_null() && !a.recv_cq.is_null() && id_recv != a.recv_cq) || (!id_send.is_null() && !a.send_cq.is_null() && id_send != a.send_cq) {
        return Err(Errno::EINVAL);
    }
    if qp_type == IBV_QPT_XRC_RECV && (a.comp_mask & IBV_QP_INIT_ATTR_XRCD == 0 || a.xrcd.is_null()) {
        attr.set_xrcd(get_xrcd(cm, p)?);
    }
    let a = attr.get();
    let send = if !a.send_cq.is_null() || !id_send.is_null() { 0 } else { a.cap.max_send_wr };
    let recv = if !a.recv_cq.is_null() || !id_recv.is_null() { 0 } else { a.cap.max_recv_wr };
    create_cqs(p, send, recv)?;
    attr.fill_from(id);
    let qp = match id.create_qp(attr) {
        Ok(qp) => qp,
        Err(e) => {
            // No QP uses the CQs.
            destroy_cqs(p);
            return Err(e);
        }
    };
    let r = init_ece(p, &qp).and_then(|remote| {
        if qp_type == IBV_QPT_UD { init_ud_qp(cm, p, &qp) } else { init_conn_qp(cm, p, &qp) }?;
        set_local_ece(p, &qp, remote)
    });
    if let Err(e) = r {
        // The QP is not published.
        qp.destroy();
        destroy_cqs(p);
        return Err(e);
    }
    id.publish_qp(qp);
    Ok(())
}

/// `rdma_create_qp`: `attr` is read and written back (the capabilities
/// and CQs the QP got); a NULL `pd` means the id's.
pub fn create_qp(cm: &Cm, p: &IdPriv, pd: Vouched<*mut ibv_pd>, attr: &mut Vouched<QpInitAttr>) -> Result<(), Errno> {
    let mut ex = Vouched::<QpInitAttrEx>::from_base(attr, pd, &p.id);
    let r = create_qp_ex(cm, p, &mut ex);
    *attr = ex.base();
    r
}

/// `rdma_destroy_qp` (in line in the C API's export: no frame of its own).
#[inline]
pub fn destroy_qp_of(p: &IdPriv) {
    // Unpublished first: the connection code no longer reaches it.
    p.id.destroy_qp();
    destroy_cqs(p);
}

/// The QP of a new connection of a synchronous passive endpoint, created
/// with the attributes `rdma_create_ep` kept and the listener's PD.
pub fn create_request_qp(cm: &Cm, np: &IdPriv, lp: &IdPriv) -> Result<(), Errno> {
    let attr = lp.conn.lock().qp_init_attr.as_deref().copied();
    if let Some(mut a) = attr {
        create_qp(cm, np, lp.id.pd_handle(), &mut a)?;
    }
    Ok(())
}

/// `rdma_create_srq_ex`.
pub fn create_srq_ex(cm: &Cm, p: &IdPriv, attr: &mut Vouched<SrqInitAttrEx>) -> Result<(), Errno> {
    let id = &p.id;
    let a = attr.get();
    if a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE == 0 {
        return Err(Errno::EINVAL);
    }
    if a.comp_mask & IBV_SRQ_INIT_ATTR_PD == 0 || a.pd.is_null() {
        attr.use_pd_of(id);
    }
    if id.verbs().is_null() {
        return Err(Errno::EINVAL);
    }
    if attr.get().srq_type == IBV_SRQT_XRC {
        let a = attr.get();
        if a.comp_mask & IBV_SRQ_INIT_ATTR_XRCD == 0 || a.xrcd.is_null() {
            attr.set_xrcd(get_xrcd(cm, p)?);
        }
        let a = attr.get();
        if a.comp_mask & IBV_SRQ_INIT_ATTR_CQ == 0 || a.cq.is_null() {
            create_cqs(p, 0, a.attr.max_wr)?;
            attr.use_recv_cq_of(id);
        }
        attr.add_comp_mask(IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ);
    }
    id.create_srq(attr).inspect_err(|_| {
        // Nothing uses the CQs.
        destroy_cqs(p);
    })
}

/// `rdma_create_srq`: `attr` is read and written back; a NULL `pd` means
/// the id's.
pub fn create_srq(cm: &Cm, p: &IdPriv, pd: Vouched<*mut ibv_pd>, attr: &mut Vouched<SrqInitAttr>) -> Result<(), Errno> {
    let srq_type = if p.id.qp_type() == IBV_QPT_XRC_RECV { IBV_SRQT_XRC } else { IBV_SRQT_BASIC };
    let mut ex = Vouched::<SrqInitAttrEx>::from_base(attr, pd, srq_type);
    let r = create_srq_ex(cm, p, &mut ex);
    *attr = ex.base();
    r
}

/// `rdma_destroy_srq`.
pub fn destroy_srq_of(p: &IdPriv) {
    p.id.destroy_srq();
    destroy_cqs(p);
}

// --- ECE -------------------------------------------------------------------------

/// The new QP's ECE: the provider's values become the id's local ones,
/// and a QP made for a request that carried ECE is told the peer's (its
/// vendor's options, or none from another vendor).  Returns whether the
/// id has the peer's ECE (a request's), for [`set_local_ece`].
fn init_ece(p: &IdPriv, qp: &NewQp) -> Result<bool, Errno> {
    let (e, _) = qp.query_ece()?;
    let remote = {
        let mut c = p.conn.lock();
        c.local_ece = (e.vendor_id, e.options);
        c.remote_ece
    };
    if remote.0 == 0 {
        return Ok(false);
    }
    let want = if remote.0 != e.vendor_id { Ece { vendor_id: e.vendor_id, options: 0, comp_mask: 0 } } else { Ece { vendor_id: remote.0, options: remote.1, comp_mask: 0 } };
    qp.set_ece(want)?;
    Ok(true)
}

/// Once the QP is in INIT: the options the provider settled on are the
/// id's local ones, when the peer sent ECE (`has_remote`: what
/// [`init_ece`] read under the same hold as the local values, once for
/// both steps of the call).
fn set_local_ece(p: &IdPriv, qp: &NewQp, has_remote: bool) -> Result<(), Errno> {
    if !has_remote {
        return Ok(());
    }
    let (e, _) = qp.query_ece()?;
    p.conn.lock().local_ece.1 = e.options;
    Ok(())
}

// --- endpoints ---------------------------------------------------------------------

/// `rdma_create_ep`: `pd` NULL or a PD, `attr` (written back) optional.
pub fn create_ep(cm: &'static Cm, res: &EpInfo, pd: Vouched<*mut ibv_pd>, attr: Option<&mut Vouched<QpInitAttr>>) -> Result<IdRef, Errno> {
    cm.init()?;
    let p = cm.create_id_inner(None, null_mut(), res.port_space, res.qp_type)?;
    match setup_ep(cm, &p, res, pd, attr) {
        Ok(()) => Ok(p),
        Err(e) => {
            destroy_ep(cm, &p);
            Err(e)
        }
    }
}

fn setup_ep(cm: &'static Cm, p: &IdPriv, res: &EpInfo, pd: Vouched<*mut ibv_pd>, attr: Option<&mut Vouched<QpInitAttr>>) -> Result<(), Errno> {
    if res.passive {
        cm.bind(p, res.src)?;
        if !pd.get().is_null() {
            p.id.set_pd(pd.into_inner());
        }
        if let Some(attr) = attr {
            let mut a = *attr;
            a.set_qp_type(res.qp_type);
            p.conn.lock().qp_init_attr = Some(Box::new(a));
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
        attr.set_qp_type(res.qp_type);
        create_qp(cm, p, pd, attr)?;
    }
    if !res.connect.is_empty() {
        p.conn.lock().connect = res.connect.as_slice().into();
    }
    Ok(())
}

/// `rdma_destroy_ep`.
pub fn destroy_ep(cm: &Cm, p: &IdRef) {
    if !p.id.qp().is_null() {
        destroy_qp_of(p);
    }
    if !p.id.srq().is_null() {
        destroy_srq_of(p);
    }
    p.conn.lock().qp_init_attr = None;
    let _ = cm.destroy_id(p);
}
