// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Queue pairs, shared receive queues and endpoints.

use crate::abi::cma::*;
use super::{entry, nonnull, Errno};
use crate::cma::{self as cm, Cm, IdPriv};
use crate::cma::conn;
use crate::sys::verbs;
use crate::symver;
use std::ffi::c_int;

/// The private state behind a C id: EINVAL for NULL and for pointers that
/// are not live ids of the library (never dereferenced then).
pub(crate) fn live_id(id: *mut rdma_cm_id) -> Result<(*mut IdPriv, &'static Cm), Errno> {
    let id = nonnull(id)?;
    // SAFETY: only a cast (container_of); checked before any use.
    let p = unsafe { IdPriv::from_id(id.as_ptr()) };
    let cm = cm::global();
    if !cm.id_is_live(p) {
        return Err(Errno::EINVAL);
    }
    Ok((p, cm))
}

/// Allocates a QP for an identifier.
///
/// # Safety
/// `id` must be NULL or a live id; `qp_init_attr` NULL or a valid
/// `struct ibv_qp_init_attr`; `pd` NULL or a PD of the id's device.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_qp(id: *mut rdma_cm_id, pd: *mut ibv_pd, qp_init_attr: *mut ibv_qp_init_attr) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        let attr = nonnull(qp_init_attr)?.as_ptr() as *mut verbs::QpInitAttr;
        // SAFETY: p is live; attr is a valid ibv_qp_init_attr.
        unsafe { conn::create_qp(cm, p, pd, attr)? };
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
pub unsafe extern "C" fn rdma_create_qp_ex(id: *mut rdma_cm_id, qp_init_attr: *mut ibv_qp_init_attr_ex) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        let attr = nonnull(qp_init_attr)?.as_ptr() as *mut verbs::QpInitAttrEx;
        // SAFETY: p is live; attr is a valid, writable ibv_qp_init_attr_ex.
        unsafe { conn::create_qp_ex(cm, p, &mut *attr)? };
        Ok(0)
    })
}
symver!(rdma_create_qp_ex, "RDMACM_1.0");

/// Destroys an identifier's QP.
///
/// # Safety
/// `id` must be NULL or a live id.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    entry(|| {
        let (p, _) = live_id(id)?;
        // SAFETY: p is live.
        unsafe { conn::destroy_qp_of(p) };
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
pub unsafe extern "C" fn rdma_create_srq(id: *mut rdma_cm_id, pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        let attr = nonnull(attr)?.as_ptr() as *mut verbs::SrqInitAttr;
        // SAFETY: p is live; attr is valid.
        unsafe { conn::create_srq(cm, p, pd, attr)? };
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
pub unsafe extern "C" fn rdma_create_srq_ex(id: *mut rdma_cm_id, attr: *mut ibv_srq_init_attr_ex) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        let attr = nonnull(attr)?.as_ptr() as *mut verbs::SrqInitAttrEx;
        // SAFETY: p is live; attr is valid and writable.
        unsafe { conn::create_srq_ex(cm, p, &mut *attr)? };
        Ok(0)
    })
}
symver!(rdma_create_srq_ex, "RDMACM_1.0");

/// Destroys an identifier's SRQ.
///
/// # Safety
/// `id` must be NULL or a live id.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
    entry(|| {
        let (p, _) = live_id(id)?;
        // SAFETY: p is live.
        unsafe { conn::destroy_srq_of(p) };
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
pub unsafe extern "C" fn rdma_create_ep(id: *mut *mut rdma_cm_id, res: *mut rdma_addrinfo, pd: *mut ibv_pd, qp_init_attr: *mut ibv_qp_init_attr) -> c_int {
    entry(|| {
        let out = nonnull(id)?;
        let res = nonnull(res)?;
        // SAFETY: res is a valid rdma_addrinfo; the rest per the contract.
        let p = unsafe { conn::create_ep(cm::global(), res.as_ref(), pd, qp_init_attr as *mut verbs::QpInitAttr)? };
        // SAFETY: out is writable.
        unsafe { *out.as_ptr() = IdPriv::raw(p) };
        Ok(0)
    })
}
symver!(rdma_create_ep, "RDMACM_1.0");

/// Destroys an endpoint made by rdma_create_ep.
///
/// # Safety
/// `id` must be NULL or a live id; it is freed.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    entry(|| {
        let (p, cm) = live_id(id)?;
        // SAFETY: p is live.
        unsafe { conn::destroy_ep(cm, p) };
        Ok(())
    })
}
symver!(rdma_destroy_ep, "RDMACM_1.0");
