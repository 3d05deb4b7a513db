// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The connection half of the CM, over the CM's objects (`crate::cma::base`):
//! QPs and SRQs bound to ids, endpoints, connect/listen/accept/reject,
//! disconnect, ECE, the library's part of connection events, multicast.
//!
//! Behaviour follows upstream's cma.c: the library moves the QP through
//! INIT (at creation), RTR and RTS (on accept, or on the connect response,
//! after which it sends the kernel's ACCEPT on the active side) and to the
//! error state on reject or disconnect (InfiniBand; SQD on iWARP).
//!
//! The verbs objects of an id (QP, SRQ, CQs) and endpoints are made in
//! [`qp`]; the operations on the id's QP go through `crate::cma::public`.
//!
//! The event reader (`crate::cma::delivery`) hands connection events to
//! [`process_event`], and synchronous calls here wait for their events
//! through the objects' methods (`Cm::complete`, `Channel::get_event`,
//! `Cm::ack_event`): the two call each other at run time, but this module
//! does not import the reader.
#![deny(unsafe_code)]

pub mod mcast;
pub mod qp;
#[cfg(test)]
mod tests;

pub use qp::{init_qp_attr, init_qp_attr_kernel, EpInfo, create_ep, create_qp, create_qp_ex, create_srq, create_srq_ex, destroy_cqs, destroy_ep, destroy_qp_of, destroy_srq_of};
use crate::sys::verbs::{Ece, QpAttr, IBV_LINK_LAYER_INFINIBAND, IBV_QPS_ERR, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD, IBV_TRANSPORT_IB, IBV_TRANSPORT_IWARP};
use crate::cma::base::{ChanRef, Cm, ConnState, EventPriv, IdPriv, IdRef};
use crate::cma::params::ConnParam;
use crate::cma::trace;
use crate::sys::cancel::NoCancel;
use crate::abi::cma::*;
use crate::abi::ucma as kabi;
use nix::errno::Errno;
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::sync::atomic::Ordering;

/// "As much as the device allows" in `rdma_conn_param`.
pub const RDMA_MAX_RESP_RES: u8 = 0xFF;
pub const RDMA_MAX_INIT_DEPTH: u8 = 0xFF;

/// The IBTA reject reason "vendor option not supported" (rdma_reject_ece).
pub const REJ_VENDOR_OPTION_NOT_SUPPORTED: u8 = 35;

// --- QP attributes (`rdma_init_qp_attr` is in [`qp`]) ---------------------------

#[inline(always)]
fn modify_qp_rtr(nc: &NoCancel, cm: &Cm, p: &IdPriv, resp_res: u8) -> Result<(), Errno> {
    if p.id.qp().is_null() {
        return Ok(());
    }
    qp_to_rtr(nc, cm, p, resp_res)
}

/// The id's QP to INIT and RTR.  Verbs calls: the caller's guard (`_nc`)
/// keeps any cancellation from acting inside them, whichever export made
/// them (rdma_accept and rdma_get_cm_event run without the exports' guard).
fn qp_to_rtr(_nc: &NoCancel, cm: &Cm, p: &IdPriv, resp_res: u8) -> Result<(), Errno> {
    let mut a = QpAttr { qp_state: IBV_QPS_INIT, ..Default::default() };
    let mask = init_qp_attr(cm, p, &mut a)?;
    p.id.modify_qp(&mut a, mask)?;
    a.qp_state = IBV_QPS_RTR;
    let mut mask = init_qp_attr(cm, p, &mut a)?;
    // Older kernels report RoCE-only attribute bits for InfiniBand ports.
    if p.port_link_layer(p.id.port_num()) == Some(IBV_LINK_LAYER_INFINIBAND) {
        mask &= !0x00e0_0000;
    }
    if resp_res != RDMA_MAX_RESP_RES {
        a.max_dest_rd_atomic = resp_res;
    }
    p.id.modify_qp(&mut a, mask)
}

#[inline(always)]
fn modify_qp_rts(nc: &NoCancel, cm: &Cm, p: &IdPriv, init_depth: u8) -> Result<(), Errno> {
    if p.id.qp().is_null() {
        return Ok(());
    }
    qp_to_rts(nc, cm, p, init_depth)
}

/// The id's QP to RTS (the guard as for [`qp_to_rtr`]).
fn qp_to_rts(_nc: &NoCancel, cm: &Cm, p: &IdPriv, init_depth: u8) -> Result<(), Errno> {
    let mut a = QpAttr { qp_state: IBV_QPS_RTS, ..Default::default() };
    let mask = init_qp_attr(cm, p, &mut a)?;
    if init_depth != RDMA_MAX_INIT_DEPTH {
        a.max_rd_atomic = init_depth;
    }
    p.id.modify_qp(&mut a, mask)
}

#[inline(always)]
fn modify_qp_to(p: &IdPriv, state: u32) -> Result<(), Errno> {
    if p.id.qp().is_null() {
        return Ok(());
    }
    qp_to(p, state)
}

fn qp_to(p: &IdPriv, state: u32) -> Result<(), Errno> {
    // A verbs call: no cancellation acts inside it, whichever export
    // made it (rdma_disconnect and rdma_accept run without the exports'
    // guard).
    let _nc = crate::sys::cancel::NoCancel::new();
    p.id.modify_qp_state(state)
}

/// Moves the id's QP (if any) to the error state.
pub fn modify_qp_err(p: &IdPriv) -> Result<(), Errno> {
    modify_qp_to(p, IBV_QPS_ERR)
}

// --- ECE -------------------------------------------------------------------------

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

/// A `$ty` with the value fields `struct rdma_conn_param` and [`ConnParam`]
/// share taken from `$c`, the others given: the one list of those fields,
/// for the conversions both ways.
macro_rules! conn_values {
    ($ty:ident { $($f:ident $(: $v:expr)?),* } from $c:expr) => {
        $ty {
            $($f $(: $v)?,)*
            responder_resources: $c.responder_resources,
            initiator_depth: $c.initiator_depth,
            flow_control: $c.flow_control,
            retry_count: $c.retry_count,
            rnr_retry_count: $c.rnr_retry_count,
            srq: $c.srq,
            qp_num: $c.qp_num,
        }
    };
}

/// The connection parameters `connect` and `accept` read: the values of
/// a `struct rdma_conn_param` with the private data borrowed apart, so
/// that the C API hands on the caller's structure and bytes where they are
/// (no copy, no conversion, no allocation) and the Rust API its
/// [`ConnParam`]'s ([`ConnArgs::values`]).
#[derive(Clone, Copy)]
pub struct ConnArgs<'a> {
    /// The private data to send (`param.private_data` is not read).
    pub private_data: &'a [u8],
    /// The values (its `private_data` and `private_data_len` are not read).
    pub param: &'a rdma_conn_param,
}

impl ConnArgs<'_> {
    /// A [`ConnParam`]'s values as `struct rdma_conn_param` (no private
    /// data: it goes apart, as [`ConnArgs::private_data`]).
    pub fn values(c: &ConnParam) -> rdma_conn_param {
        conn_values!(rdma_conn_param { private_data: std::ptr::null(), private_data_len: 0 } from c)
    }
}

/// EINVAL when the caller's initiator depth or responder resources
/// exceed the device's `(max_initiator_depth, max_responder_resources)`
/// (the "as much as the device takes" values aside).
#[inline(always)]
fn within_limits(param: &rdma_conn_param, (max_init, max_resp): (u8, u8)) -> Result<(), Errno> {
    if param.responder_resources != RDMA_MAX_RESP_RES && param.responder_resources > max_resp {
        return Err(Errno::EINVAL);
    }
    if param.initiator_depth != RDMA_MAX_INIT_DEPTH && param.initiator_depth > max_init {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// The caller's `struct rdma_conn_param` (a connection event's, or one
/// given to connect or accept) as the connection manager takes it, with
/// its private data (copied by the caller, or empty when the bytes are
/// handed on apart: [`ConnArgs`]). The one conversion from the C
/// structure to [`ConnParam`].
pub fn conn_param_from_c(c: &rdma_conn_param, private_data: Vec<u8>) -> ConnParam {
    conn_values!(ConnParam { private_data } from c)
}

/// The kernel's connection parameters, written into a zeroed `k` where
/// it is (a command's): the id's pending connect data (an AF_IB header
/// from rdma_getaddrinfo) followed by the caller's.
#[inline(always)]
fn fill_conn_param(k: &mut kabi::ConnParam, conn: &ConnState, src: Option<&ConnArgs>, qp_num: u32, srq: u8) {
    k.qp_num = qp_num;
    k.srq = srq;
    k.responder_resources = conn.responder_resources;
    k.initiator_depth = conn.initiator_depth;
    k.valid = 1;
    match src {
        Some(s) => {
            k.flow_control = s.param.flow_control;
            k.retry_count = s.param.retry_count;
            k.rnr_retry_count = s.param.rnr_retry_count;
        }
        None => {
            k.retry_count = 7;
            k.rnr_retry_count = 7;
        }
    }
    k.private_data_len = join_private_data(&mut k.private_data, &conn.connect, src.map(|s| s.private_data));
}

/// Fills the command's private data: `connect` (an AF_IB header from
/// rdma_getaddrinfo, see `addrinfo::ib_hdr`) then the caller's bytes, cut
/// at what the length field holds (255 bytes); returns that length, the
/// number of bytes written (a kept command's scrub relies on it:
/// `sys::ucma::with_connect_command`).
pub fn join_private_data(out: &mut [u8; kabi::RDMA_MAX_PRIVATE_DATA], connect: &[u8], user: Option<&[u8]>) -> u8 {
    if connect.is_empty() && user.is_none_or(|u| u.is_empty()) {
        // (the common call: no connect data, no private data)
        return 0;
    }
    let out = &mut out[..u8::MAX as usize];
    // (empty parts copy nothing: no call of memcpy for them)
    let mut len = connect.len().min(out.len());
    if len > 0 {
        out[..len].copy_from_slice(&connect[..len]);
    }
    if let Some(u) = user {
        let n = u.len().min(out.len() - len);
        if n > 0 {
            out[len..len + n].copy_from_slice(&u[..n]);
        }
        len += n;
    }
    len as u8
}

/// The QP number and SRQ flag the kernel announces: the id's QP if it has
/// one, else the caller's values.
fn qp_num_srq(p: &IdPriv, param: Option<&ConnArgs>) -> Option<(u32, u8)> {
    if let Some((num, srq)) = p.id.qp_num_srq() {
        return Some((num, srq as u8));
    }
    param.map(|c| (c.param.qp_num, c.param.srq))
}

/// `rdma_connect`.
pub fn connect(cm: &'static Cm, p: &IdPriv, param: Option<&ConnArgs>) -> Result<(), Errno> {
    if trace::on() {
        return connect_traced(cm, p, param);
    }
    connect_untraced(cm, p, param)
}

#[cold]
#[inline(never)]
fn connect_traced(cm: &'static Cm, p: &IdPriv, param: Option<&ConnArgs>) -> Result<(), Errno> {
    trace::call(p, trace::Step::Connect, || connect_untraced(cm, p, param))
}

#[inline(always)]
fn connect_untraced(cm: &'static Cm, p: &IdPriv, param: Option<&ConnArgs>) -> Result<(), Errno> {
    // (the parameters' checks, upstream's ucma_valid_param, with the
    // device's limits read once: an id without a device is EINVAL either
    // way)
    let lim = p.device_limits().ok_or(Errno::EINVAL)?;
    if p.id.ps() == RDMA_PS_TCP {
        match param {
            Some(c) => within_limits(c.param, lim)?,
            None if p.id.qp().is_null() => return Err(Errno::EINVAL),
            None => {}
        }
    }
    let (qpn, srq) = qp_num_srq(p, param).unwrap_or((0, 0));
    // The command filled where it is sent from, under one hold of the
    // connection state.
    let had_connect = crate::sys::ucma::with_connect_command(
        p.handle(),
        #[inline(always)]
        |c| {
            let had_connect = {
                let mut conn = p.conn.lock();
                conn.initiator_depth = match param {
                    Some(c) if c.param.initiator_depth != RDMA_MAX_INIT_DEPTH => c.param.initiator_depth,
                    _ => lim.0,
                };
                conn.responder_resources = match param {
                    Some(c) if c.param.responder_resources != RDMA_MAX_RESP_RES => c.param.responder_resources,
                    _ => lim.1,
                };
                fill_conn_param(&mut c.body.conn_param, &conn, param, qpn, srq);
                let (v, o) = conn.local_ece;
                c.body.ece = kabi::Ece { vendor_id: v, attr_mod: o };
                !conn.connect.is_empty()
            };
            if cm.direct {
                crate::sys::ucma::send(p.fd(), c)?;
            } else {
                cm.ucma.connect(p.fd(), p.handle(), &c.body.conn_param, c.body.ece)?;
            }
            Ok::<_, Errno>(had_connect)
        },
    )?;
    // The connect data went with the command.
    if had_connect {
        p.conn.lock().connect = Box::default();
    }
    cm.complete(p)
}

/// `rdma_listen`.
pub fn listen(cm: &'static Cm, p: &IdPriv, backlog: c_int) -> Result<(), Errno> {
    if trace::on() {
        return listen_traced(cm, p, backlog);
    }
    listen_untraced(cm, p, backlog)
}

#[cold]
#[inline(never)]
fn listen_traced(cm: &'static Cm, p: &IdPriv, backlog: c_int) -> Result<(), Errno> {
    trace::call(p, trace::Step::Listen, || listen_untraced(cm, p, backlog))
}

#[inline(always)]
fn listen_untraced(cm: &'static Cm, p: &IdPriv, backlog: c_int) -> Result<(), Errno> {
    cm.ucma.listen(p.fd(), p.handle(), backlog as u32)?;
    p.conn.lock().listening = true;
    // The listener's address after LISTEN.
    if cm.af_ib() {
        cm.query_addr(p)
    } else {
        cm.query_route(p)
    }
}

/// `rdma_accept`.
pub fn accept(cm: &'static Cm, p: &IdPriv, param: Option<&ConnArgs>) -> Result<(), Errno> {
    if trace::on() {
        return accept_traced(cm, p, param);
    }
    accept_untraced(cm, p, param)
}

#[cold]
#[inline(never)]
fn accept_traced(cm: &'static Cm, p: &IdPriv, param: Option<&ConnArgs>) -> Result<(), Errno> {
    trace::call(p, trace::Step::Accept, || accept_untraced(cm, p, param))
}

#[inline(always)]
fn accept_untraced(cm: &'static Cm, p: &IdPriv, param: Option<&ConnArgs>) -> Result<(), Errno> {
    // Upstream reads the caller's parameters when the id has no QP.
    let (qpn, srq) = qp_num_srq(p, param).ok_or(Errno::EINVAL)?;
    // (the parameters' checks, as in connect; no QP and no parameters
    // failed just above)
    let lim = p.device_limits();
    if let (RDMA_PS_TCP, Some(c)) = (p.id.ps(), param) {
        within_limits(c.param, lim.ok_or(Errno::EINVAL)?)?;
    }
    let lim = lim.ok_or(Errno::EINVAL)?;
    // The command filled where it is sent from, under one hold of the
    // connection state (the QP's transitions below change none of it).
    let ud = p.id.qp_type() == IBV_QPT_UD;
    crate::sys::ucma::with_accept_command(
        p.handle(),
        p.uid(),
        #[inline(always)]
        |c| {
            let (init_depth, resp_res) = {
                let mut conn = p.conn.lock();
                conn.initiator_depth = match param {
                    Some(x) if x.param.initiator_depth != RDMA_MAX_INIT_DEPTH => x.param.initiator_depth,
                    _ => conn.initiator_depth.min(lim.0),
                };
                conn.responder_resources = match param {
                    Some(x) if x.param.responder_resources != RDMA_MAX_RESP_RES => x.param.responder_resources,
                    _ => conn.responder_resources.min(lim.1),
                };
                fill_conn_param(&mut c.body.conn_param, &conn, param, qpn, srq);
                c.body.ece = kabi::Ece { vendor_id: conn.remote_ece.0, attr_mod: conn.local_ece.1 };
                (conn.initiator_depth, conn.responder_resources)
            };
            if !ud && !p.id.qp().is_null() {
                // One guard for both transitions.
                let nc = NoCancel::new();
                qp_to_rtr(&nc, cm, p, resp_res)?;
                qp_to_rts(&nc, cm, p, init_depth)?;
            }
            let sent = if cm.direct { crate::sys::ucma::send(p.fd(), c) } else { cm.ucma.accept(p.fd(), p.handle(), p.uid(), &c.body.conn_param, c.body.ece) };
            if sent.is_err() {
                let _ = modify_qp_err(p);
            }
            sent
        },
    )?;
    if ud {
        if p.sync.load(Ordering::Acquire) {
            let ev = p.id.event();
            if !ev.is_null() {
                p.id.set_event(null_mut());
                cm.ack_event(ev);
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
#[inline(always)]
fn shutdown(p: &IdPriv) -> Result<(), Errno> {
    match p.id.transport_type() {
        IBV_TRANSPORT_IB => modify_qp_to(p, IBV_QPS_ERR),
        IBV_TRANSPORT_IWARP => modify_qp_to(p, IBV_QPS_SQD),
        _ => Err(Errno::EINVAL),
    }
}

/// Stops the QP (as [`disconnect`] does first) without asking the peer to
/// disconnect: for rsockets, whose peer learns of it in-band.
pub(crate) fn stop_qp(p: &IdPriv) -> Result<(), Errno> {
    shutdown(p)
}

/// `rdma_disconnect` (in line in its export: one frame less).
#[inline(always)]
pub fn disconnect(cm: &'static Cm, p: &IdPriv) -> Result<(), Errno> {
    if trace::on() {
        return disconnect_traced(cm, p);
    }
    disconnect_untraced(cm, p)
}

#[cold]
#[inline(never)]
fn disconnect_traced(cm: &'static Cm, p: &IdPriv) -> Result<(), Errno> {
    trace::call(p, trace::Step::Disconnect, || disconnect_untraced(cm, p))
}

#[inline(always)]
fn disconnect_untraced(cm: &'static Cm, p: &IdPriv) -> Result<(), Errno> {
    shutdown(p)?;
    if cm.direct {
        crate::sys::ucma::disconnect(p.fd(), p.handle())?;
    } else {
        cm.ucma.disconnect(p.fd(), p.handle())?;
    }
    cm.complete(p)
}

/// The active side's answer to a connect response: QP to RTR and RTS,
/// then the kernel's ACCEPT (which sends the RTU).
fn process_conn_resp(nc: &NoCancel, cm: &Cm, p: &IdPriv) -> Result<(), Errno> {
    let r = modify_qp_rtr(nc, cm, p, RDMA_MAX_RESP_RES).and_then(|_| modify_qp_rts(nc, cm, p, RDMA_MAX_INIT_DEPTH)).and_then(|_| send_rtu(cm, p));
    if r.is_err() {
        let _ = modify_qp_err(p);
    }
    r
}

/// The kernel's ACCEPT of the active side (no parameters: the kernel
/// sends the RTU), built where it is sent for the library's own instance.
fn send_rtu(cm: &Cm, p: &IdPriv) -> Result<(), Errno> {
    if cm.direct {
        crate::sys::ucma::with_accept_command(p.handle(), 0, |c| crate::sys::ucma::send(p.fd(), c))
    } else {
        cm.ucma.accept(p.fd(), p.handle(), 0, &kabi::ConnParam::default(), kabi::Ece::default())
    }
}

/// The connect response with ECE; the error is the event status upstream
/// reports: -1 from its own helpers, a positive errno from the ECE verbs.
fn process_conn_resp_ece(nc: &NoCancel, cm: &Cm, p: &IdPriv, ece: kabi::Ece) -> Result<(), c_int> {
    // (one hold of the connection state: the local vendor read, the
    // peer's kept when it matches or the peer sent none)
    let (local_vendor, matched) = {
        let mut c = p.conn.lock();
        let v = c.local_ece.0;
        let matched = ece.vendor_id == 0 || ece.vendor_id == v;
        if matched {
            c.remote_ece.0 = ece.vendor_id;
        }
        (v, matched)
    };
    if !matched {
        let _ = modify_qp_err(p);
        return Err(-1);
    }
    let want = if ece.vendor_id == 0 { Ece { vendor_id: local_vendor, options: 0, comp_mask: 0 } } else { Ece { vendor_id: ece.vendor_id, options: ece.attr_mod, comp_mask: 0 } };
    // The caller checked that the id has a QP.
    p.id.qp_set_ece(want).map_err(|e| e as c_int)?;
    process_conn_resp(nc, cm, p).map_err(|_| -1)?;
    match p.id.qp_query_ece() {
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
    // (no QP: no verbs call; the guard is the token the path asks for)
    process_conn_resp(&NoCancel::new(), cm, p)
}

/// `rdma_get_request`: the next connection request of a synchronous
/// listener; the new id carries the request event in `id->event`.
pub fn get_request(cm: &'static Cm, lp: &IdPriv) -> Result<IdRef, Errno> {
    // Upstream waits forever on an id that does not listen: EINVAL.
    if !lp.sync.load(Ordering::Acquire) || !lp.conn.lock().listening {
        return Err(Errno::EINVAL);
    }
    let ev = lp.id.event();
    if !ev.is_null() {
        lp.id.set_event(null_mut());
        cm.ack_event(ev);
    }
    let got = lp.channel().get_event()?;
    let r = (|| {
        if got.event == RDMA_CM_EVENT_REJECTED {
            return Err(Errno::ECONNREFUSED);
        }
        if got.status != 0 {
            return Err(crate::sys::errno_from_raw(got.status.wrapping_neg()));
        }
        if got.event != RDMA_CM_EVENT_CONNECT_REQUEST {
            return Err(Errno::EINVAL);
        }
        let np = cm.id(got.id)?;
        qp::create_request_qp(cm, &np, lp)?;
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

// --- events ---------------------------------------------------------------------------

/// What the event loop does with an event after [`process_event`].
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Hand it to the caller.
    Deliver,
    /// Drop it: count it as completed for `evt.id_priv` and read the next.
    Retry,
}

/// An event's `param.conn` from the kernel's, its private data copied into
/// the event (delivery.rs uses it for the events it completes itself).
pub(crate) fn copy_conn_param(evt: &mut EventPriv, src: &kabi::ConnParam) {
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

/// Whether [`process_event`] has a part in events of kind `event`.
#[inline(always)]
pub fn has_step(event: u32) -> bool {
    matches!(event, RDMA_CM_EVENT_CONNECT_REQUEST | RDMA_CM_EVENT_CONNECT_RESPONSE | RDMA_CM_EVENT_REJECTED | RDMA_CM_EVENT_DISCONNECTED)
}

/// The library's part of connection events, after the core decoded the
/// event and copied its parameters by the id's QP type (`evt.id_priv` is
/// the id the kernel reported: the listener for a connection request).
#[inline]
pub fn process_event(cm: &'static Cm, resp: &kabi::EventResp, evt: &mut EventPriv) -> Step {
    // Only these events have a part here (the others, user events say,
    // cost a comparison, not a call).
    if !has_step(resp.event) {
        return Step::Deliver;
    }
    // These may make verbs calls (QP transitions, a passive side's QP) on
    // rdma_get_cm_event's path, which runs without the exports' guard: no
    // cancellation acts inside them.
    let nc = NoCancel::new();
    process_conn_event(&nc, cm, resp, evt)
}

fn process_conn_event(nc: &NoCancel, cm: &'static Cm, resp: &kabi::EventResp, evt: &mut EventPriv) -> Step {
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
                match process_conn_resp_ece(nc, cm, &p, resp.ece) {
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
    let ch: ChanRef = lp.channel();
    let np = match cm.adopt_id(ch, lid.context(), lid.ps(), lid.qp_type(), handle) {
        Ok(np) => np,
        Err(e) => {
            // Out of memory: the kernel's new id goes, as upstream drops
            // a request it cannot take.
            let _ = cm.ucma.destroy_id(lp.fd(), handle);
            return Err(e);
        }
    };
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
