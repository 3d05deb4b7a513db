// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Queue pairs, shared receive queues and endpoints.

use rdmacm::internal::abi::cma::*;
use super::{entry, nonnull, Errno};
use super::cm::{id_in_line, id_of as live_id};
use rdmacm::internal::cma as cm;
use rdmacm::internal::cma::conn;
use rdmacm::internal::cma::objects::Vouched;
use rdmacm::internal::sys::verbs;
use crate::symver;
use rdmacm::internal::abi::sockaddr::SockAddr;
use std::ffi::c_int;

/// Allocates a QP for an identifier.
///
/// # Safety
/// `id` must be NULL or a live id; `qp_init_attr` NULL or a valid
/// `struct ibv_qp_init_attr`; `pd` NULL or a PD of the id's device.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_create_qp(id: *mut rdma_cm_id, pd: *mut ibv_pd, qp_init_attr: *mut ibv_qp_init_attr) -> c_int {
    entry(|| {
        let (p, cm) = id_in_line(id)?;
        let attr = nonnull(qp_init_attr)?.as_ptr() as *mut verbs::QpInitAttr;
        // SAFETY: attr is a valid, writable ibv_qp_init_attr whose handles,
        // like pd, are NULL or live objects (C contract).
        let (pd, mut a) = unsafe { (Vouched::new(pd), Vouched::new(*attr)) };
        let r = conn::create_qp(cm, &p, pd, &mut a);
        // SAFETY: as above (written back whatever the outcome, as before).
        unsafe { *attr = a.into_inner() };
        r?;
        Ok(0)
    })
}
symver!(rdma_create_qp, "RDMACM_1.0");

/// Allocates a QP with extended attributes.
///
/// # Safety
/// `id` must be NULL or a live id; `qp_init_attr` NULL or a valid
/// `struct ibv_qp_init_attr_ex`.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_create_qp_ex(id: *mut rdma_cm_id, qp_init_attr: *mut ibv_qp_init_attr_ex) -> c_int {
    entry(|| {
        let (p, cm) = id_in_line(id)?;
        let attr = nonnull(qp_init_attr)?.as_ptr() as *mut verbs::QpInitAttrEx;
        // SAFETY: attr is a valid, writable ibv_qp_init_attr_ex whose
        // handles are NULL or live objects (C contract).
        let mut a = unsafe { Vouched::new(*attr) };
        let r = conn::create_qp_ex(cm, &p, &mut a);
        // SAFETY: as above (written back whatever the outcome, as before).
        unsafe { *attr = a.into_inner() };
        r?;
        Ok(0)
    })
}
symver!(rdma_create_qp_ex, "RDMACM_1.0");

/// Destroys an identifier's QP.
///
/// # Safety
/// `id` must be NULL or a live id.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    entry(|| {
        // (in line: the id held, the QP and CQs taken off it and destroyed)
        let p = super::held_id(id)?;
        conn::destroy_qp_of(&p);
        Ok(())
    })
}
symver!(rdma_destroy_qp, "RDMACM_1.0");

/// Allocates a shared receive queue.
///
/// # Safety
/// `id` must be NULL or a live id; `attr` NULL or a valid
/// `struct ibv_srq_init_attr`; `pd` NULL or a PD of the id's device.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_create_srq(id: *mut rdma_cm_id, pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        let attr = nonnull(attr)?.as_ptr() as *mut verbs::SrqInitAttr;
        // SAFETY: attr is a valid, writable ibv_srq_init_attr; pd NULL or a
        // live PD (C contract).
        let (pd, mut a) = unsafe { (Vouched::new(pd), Vouched::new(*attr)) };
        let r = conn::create_srq(cm, &p, pd, &mut a);
        // SAFETY: as above.
        unsafe { *attr = a.into_inner() };
        r?;
        Ok(0)
    })
}
symver!(rdma_create_srq, "RDMACM_1.0");

/// Allocates a shared receive queue with extended attributes.
///
/// # Safety
/// `id` must be NULL or a live id; `attr` NULL or a valid
/// `struct ibv_srq_init_attr_ex`.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_create_srq_ex(id: *mut rdma_cm_id, attr: *mut ibv_srq_init_attr_ex) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        let attr = nonnull(attr)?.as_ptr() as *mut verbs::SrqInitAttrEx;
        // SAFETY: attr is a valid, writable ibv_srq_init_attr_ex whose
        // handles are NULL or live objects (C contract).
        let mut a = unsafe { Vouched::new(*attr) };
        let r = conn::create_srq_ex(cm, &p, &mut a);
        // SAFETY: as above.
        unsafe { *attr = a.into_inner() };
        r?;
        Ok(0)
    })
}
symver!(rdma_create_srq_ex, "RDMACM_1.0");

/// Destroys an identifier's SRQ.
///
/// # Safety
/// `id` must be NULL or a live id.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
    entry(|| {
        let (p, _) = live_id(id)?;
        conn::destroy_srq_of(&p);
        Ok(())
    })
}
symver!(rdma_destroy_srq, "RDMACM_1.0");

/// Creates an identifier, resolves it and optionally a QP (synchronous).
///
/// # Safety
/// `id` must be NULL or writable; `res` NULL or a valid `rdma_addrinfo`;
/// `pd` NULL or a live PD; `qp_init_attr` NULL or a valid
/// `struct ibv_qp_init_attr`.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_create_ep(id: *mut *mut rdma_cm_id, res: *mut rdma_addrinfo, pd: *mut ibv_pd, qp_init_attr: *mut ibv_qp_init_attr) -> c_int {
    entry(|| {
        let out = nonnull(id)?;
        let res = nonnull(res)?;
        // No socket address is longer than sockaddr_storage: a longer
        // length is a lie that would read past the caller's address.
        // SAFETY: res is a valid rdma_addrinfo.
        let (sl, dl) = unsafe { (res.as_ref().ai_src_len, res.as_ref().ai_dst_len) };
        if sl as usize > std::mem::size_of::<libc::sockaddr_storage>() || dl as usize > std::mem::size_of::<libc::sockaddr_storage>() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: res is a valid rdma_addrinfo.
        let info = unsafe { ep_info(res.as_ref()) };
        let attr_ptr = qp_init_attr as *mut verbs::QpInitAttr;
        // SAFETY: qp_init_attr is NULL or a valid, writable attribute set
        // whose handles, like pd, are NULL or live objects (C contract).
        let (pd, mut attr) = unsafe { (Vouched::new(pd), attr_ptr.as_ref().map(|a| Vouched::new(*a))) };
        let r = conn::create_ep(cm::global(), &info, pd, attr.as_mut());
        if let Some(a) = attr {
            // SAFETY: as above.
            unsafe { *attr_ptr = a.into_inner() };
        }
        let p = r?;
        // SAFETY: out is writable.
        unsafe { *out.as_ptr() = p.raw() };
        Ok(0)
    })
}
symver!(rdma_create_ep, "RDMACM_1.0");

/// Destroys an endpoint made by rdma_create_ep.
///
/// # Safety
/// `id` must be NULL or a live id; it is freed.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    entry(|| {
        let (p, cm) = super::cm::id_to_destroy(id)?;
        conn::destroy_ep(cm, &p);
        Ok(())
    })
}
symver!(rdma_destroy_ep, "RDMACM_1.0");

/// Copies what rdma_create_ep needs out of an `rdma_addrinfo`.
///
/// # Safety
/// `res`'s address, route and connect pointers must be NULL or cover
/// their lengths.
unsafe fn ep_info(res: &rdma_addrinfo) -> conn::EpInfo {
    // SAFETY: per the contract.
    let bytes = |p: *const u8, len: usize| if p.is_null() || len == 0 { Vec::new() } else { unsafe { std::slice::from_raw_parts(p, len) }.to_vec() };
    // The rdma_addrinfo's own lengths (the first 128 bytes of a longer one).
    let addr = |a: *const libc::sockaddr, len: u32| (!a.is_null()).then(|| SockAddr::from_prefix(&bytes(a as *const u8, len as usize)));
    conn::EpInfo {
        passive: res.ai_flags & RAI_PASSIVE != 0,
        port_space: res.ai_port_space as u32,
        qp_type: res.ai_qp_type as u32,
        src: addr(res.ai_src_addr, res.ai_src_len),
        dst: addr(res.ai_dst_addr, res.ai_dst_len),
        route: rdmacm::internal::cma::public::CPtr(res.ai_route),
        route_len: res.ai_route_len,
        connect: bytes(res.ai_connect as *const u8, res.ai_connect_len),
    }
}
