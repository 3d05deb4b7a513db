// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Connection establishment and teardown, ECE.

use super::qp::live_id;
use crate::abi::cma::*;
use super::{entry, nonnull};
use crate::cma::conn;
use crate::sys::verbs;
use crate::symver;
use std::ffi::{c_int, c_void};

/// Reads an optional `rdma_conn_param`.
///
/// # Safety
/// `p` must be NULL or readable.
unsafe fn param<'a>(p: *mut rdma_conn_param) -> Option<&'a rdma_conn_param> {
    // SAFETY: per the contract.
    unsafe { p.as_ref() }
}

/// Initiates a connection request.
///
/// # Safety
/// `id` must be NULL or a live id; `conn_param` NULL or valid (its private
/// data readable).
#[no_mangle]
pub unsafe extern "C" fn rdma_connect(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        // SAFETY: p is live; conn_param per the contract.
        unsafe { conn::connect(cm, p, param(conn_param))? };
        Ok(0)
    })
}
symver!(rdma_connect, "RDMACM_1.0");

/// Listens for incoming connection requests.
///
/// # Safety
/// `id` must be NULL or a live id.
#[no_mangle]
pub unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        // SAFETY: p is live.
        unsafe { conn::listen(cm, p, backlog)? };
        Ok(0)
    })
}
symver!(rdma_listen, "RDMACM_1.0");

/// Accepts a connection request.
///
/// # Safety
/// `id` must be NULL or a live id; `conn_param` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn rdma_accept(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        // SAFETY: p is live; conn_param per the contract.
        unsafe { conn::accept(cm, p, param(conn_param))? };
        Ok(0)
    })
}
symver!(rdma_accept, "RDMACM_1.0");

/// Rejects a connection request.
///
/// # Safety
/// `id` must be NULL or a live id; `private_data` NULL or
/// `private_data_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rdma_reject(id: *mut rdma_cm_id, private_data: *const c_void, private_data_len: u8) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        // SAFETY: p is live; private data per the contract.
        unsafe { conn::reject(cm, p, private_data, private_data_len, 0)? };
        Ok(0)
    })
}
symver!(rdma_reject, "RDMACM_1.0");

/// Rejects a connection request, reporting unsupported ECE.
///
/// # Safety
/// As `rdma_reject`.
#[no_mangle]
pub unsafe extern "C" fn rdma_reject_ece(id: *mut rdma_cm_id, private_data: *const c_void, private_data_len: u8) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        // SAFETY: p is live; private data per the contract.
        unsafe { conn::reject(cm, p, private_data, private_data_len, conn::REJ_VENDOR_OPTION_NOT_SUPPORTED)? };
        Ok(0)
    })
}
symver!(rdma_reject_ece, "RDMACM_1.3");

/// Tells the CM of a QP event.
///
/// # Safety
/// `id` must be NULL or a live id.
#[no_mangle]
pub unsafe extern "C" fn rdma_notify(id: *mut rdma_cm_id, event: ibv_event_type) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        // SAFETY: p is live.
        unsafe { conn::notify(cm, p, event)? };
        Ok(0)
    })
}
symver!(rdma_notify, "RDMACM_1.0");

/// Disconnects a connection.
///
/// # Safety
/// `id` must be NULL or a live id.
#[no_mangle]
pub unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        // SAFETY: p is live.
        unsafe { conn::disconnect(cm, p)? };
        Ok(0)
    })
}
symver!(rdma_disconnect, "RDMACM_1.0");

/// Retrieves the next connection request (synchronous listeners).
///
/// # Safety
/// `listen` must be NULL or a live id; `id` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> c_int {
    entry(|| {
        let (p, cm) = live_id(listen)?;
        let out = nonnull(id)?;
        // SAFETY: p is live.
        let new = unsafe { conn::get_request(cm, p)? };
        // SAFETY: out is writable.
        unsafe { *out.as_ptr() = new };
        Ok(0)
    })
}
symver!(rdma_get_request, "RDMACM_1.0");

/// Completes an active connection set up with an external QP.
///
/// # Safety
/// `id` must be NULL or a live id.
#[no_mangle]
pub unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        // SAFETY: p is live.
        unsafe { conn::establish(cm, p)? };
        Ok(0)
    })
}
symver!(rdma_establish, "RDMACM_1.2");

/// Returns the QP attributes for the identifier's state.
///
/// # Safety
/// `id` must be NULL or a live id; `qp_attr` NULL or a valid
/// `struct ibv_qp_attr` (its `qp_state` set); `qp_attr_mask` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_init_qp_attr(id: *mut rdma_cm_id, qp_attr: *mut ibv_qp_attr, qp_attr_mask: *mut c_int) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        let attr = nonnull(qp_attr)?.as_ptr() as *mut verbs::QpAttr;
        let mask = nonnull(qp_attr_mask)?;
        // SAFETY: p is live; attr is a valid, writable ibv_qp_attr.
        let m = unsafe { conn::init_qp_attr(cm, p, &mut *attr)? };
        // SAFETY: mask is writable.
        unsafe { *mask.as_ptr() = m };
        Ok(0)
    })
}
symver!(rdma_init_qp_attr, "RDMACM_1.2");

/// Sets the local ECE options.
///
/// # Safety
/// `id` must be NULL or a live id; `ece` NULL or a valid `struct ibv_ece`.
#[no_mangle]
pub unsafe extern "C" fn rdma_set_local_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    entry(|| {
        let (p, _) = live_id(id)?;
        let e = nonnull(ece)?.as_ptr() as *const verbs::Ece;
        // SAFETY: p is live; e is readable.
        unsafe { conn::set_local_ece_param(p, &*e)? };
        Ok(0)
    })
}
symver!(rdma_set_local_ece, "RDMACM_1.3");

/// Returns the remote ECE options.
///
/// # Safety
/// `id` must be NULL or a live id; `ece` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_remote_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    entry(|| {
        let (p, _) = live_id(id)?;
        let out = nonnull(ece)?.as_ptr() as *mut verbs::Ece;
        // SAFETY: p is live.
        let e = unsafe { conn::get_remote_ece(p)? };
        // SAFETY: out is writable.
        unsafe { *out = e };
        Ok(0)
    })
}
symver!(rdma_get_remote_ece, "RDMACM_1.3");
