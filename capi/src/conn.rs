// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Connection establishment and teardown, ECE.

use super::cm::{id_in_line, id_of as live_id};
use rdmacm::internal::abi::cma::*;
use super::{entry, entry_hot_on_id, nonnull};
use rdmacm::internal::cma::conn;
use rdmacm::internal::cma::conn::ConnArgs;
use rdmacm::internal::sys::verbs;
use crate::symver;
use std::ffi::{c_int, c_void};

/// Reads an optional `rdma_conn_param` where the caller keeps it: its
/// values, and its private data (cut at what a command holds).
///
/// # Safety
/// `p` must be NULL or readable, its private data NULL or
/// `private_data_len` readable bytes, both for `'a`.
#[inline(always)]
unsafe fn args<'a>(p: *const rdma_conn_param) -> Option<ConnArgs<'a>> {
    // SAFETY: per the contract.
    let c = unsafe { p.as_ref() }?;
    let n = (c.private_data_len as usize).min(rdmacm::internal::abi::ucma::RDMA_MAX_PRIVATE_DATA);
    let private_data: &[u8] = if c.private_data.is_null() || n == 0 {
        &[]
    } else {
        // SAFETY: per the contract (n <= private_data_len).
        unsafe { std::slice::from_raw_parts(c.private_data as *const u8, n) }
    };
    Some(ConnArgs { private_data, param: c })
}

/// Reads optional private data.
///
/// # Safety
/// `data` must be NULL or `len` readable bytes.
unsafe fn private_bytes<'a>(data: *const c_void, len: u8) -> &'a [u8] {
    if data.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: per the contract.
        unsafe { std::slice::from_raw_parts(data as *const u8, len as usize) }
    }
}

/// Initiates a connection request.
///
/// # Safety
/// `id` must be NULL or a live id; `conn_param` NULL or valid (its private
/// data readable).
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_connect(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    // (one system call without libc's cancellation point and no verbs
    // call; a synchronous id's wait is the library's and its event's
    // processing takes the guard itself: see `entry_hot`)
    entry_hot_on_id(|| {
        let (p, cm) = id_in_line(id)?;
        // SAFETY: conn_param per the contract.
        let c = unsafe { args(conn_param) };
        conn::connect(cm, &p, c.as_ref())?;
        Ok(0)
    })
}
symver!(rdma_connect, "RDMACM_1.0");

/// Listens for incoming connection requests.
///
/// # Safety
/// `id` must be NULL or a live id.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        conn::listen(cm, &p, backlog)?;
        Ok(0)
    })
}
symver!(rdma_listen, "RDMACM_1.0");

/// Accepts a connection request.
///
/// # Safety
/// `id` must be NULL or a live id; `conn_param` NULL or valid.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_accept(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    // (as rdma_connect; the QP's transitions take the guard themselves:
    // see `entry_hot`)
    entry_hot_on_id(|| {
        let (p, cm) = id_in_line(id)?;
        // SAFETY: conn_param per the contract.
        let c = unsafe { args(conn_param) };
        conn::accept(cm, &p, c.as_ref())?;
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
pub unsafe extern "C-unwind" fn rdma_reject(id: *mut rdma_cm_id, private_data: *const c_void, private_data_len: u8) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        // SAFETY: private data per the contract.
        conn::reject(cm, &p, unsafe { private_bytes(private_data, private_data_len) }, 0)?;
        Ok(0)
    })
}
symver!(rdma_reject, "RDMACM_1.0");

/// Rejects a connection request, reporting unsupported ECE.
///
/// # Safety
/// As `rdma_reject`.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_reject_ece(id: *mut rdma_cm_id, private_data: *const c_void, private_data_len: u8) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        // SAFETY: private data per the contract.
        conn::reject(cm, &p, unsafe { private_bytes(private_data, private_data_len) }, conn::REJ_VENDOR_OPTION_NOT_SUPPORTED)?;
        Ok(0)
    })
}
symver!(rdma_reject_ece, "RDMACM_1.3");

/// Tells the CM of a QP event.
///
/// # Safety
/// `id` must be NULL or a live id.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_notify(id: *mut rdma_cm_id, event: ibv_event_type) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        conn::notify(cm, &p, event)?;
        Ok(0)
    })
}
symver!(rdma_notify, "RDMACM_1.0");

/// Disconnects a connection.
///
/// # Safety
/// `id` must be NULL or a live id.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    // (one system call without libc's cancellation point; the QP's
    // transition takes the guard itself: see `entry_hot`)
    entry_hot_on_id(|| {
        let (p, cm) = id_in_line(id)?;
        conn::disconnect(cm, &p)?;
        Ok(0)
    })
}
symver!(rdma_disconnect, "RDMACM_1.0");

/// Retrieves the next connection request (synchronous listeners).
///
/// # Safety
/// `listen` must be NULL or a live id; `id` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> c_int {
    entry(|| {
        let (p, cm) = live_id(listen)?;
        let out = nonnull(id)?;
        let new = conn::get_request(cm, &p)?;
        // SAFETY: out is writable.
        unsafe { *out.as_ptr() = new.raw() };
        Ok(0)
    })
}
symver!(rdma_get_request, "RDMACM_1.0");

/// Completes an active connection set up with an external QP.
///
/// # Safety
/// `id` must be NULL or a live id.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        conn::establish(cm, &p)?;
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
pub unsafe extern "C-unwind" fn rdma_init_qp_attr(id: *mut rdma_cm_id, qp_attr: *mut ibv_qp_attr, qp_attr_mask: *mut c_int) -> c_int {
    // (one system call without libc's cancellation point, and a copy: no
    // guard needed, see `entry_hot`; nothing but EINVAL before the id is
    // found live: `entry_hot_on_id`)
    entry_hot_on_id(|| {
        // (the id's fd and handle, read without holding the id: what a
        // concurrent rdma_destroy_id can do to the call, see peek_id; NULL
        // is no id's address: EINVAL there.  The C API's ids are the
        // library's own instance's, whose transport is the kernel: the
        // command is made directly.)
        let (fd, handle) = rdmacm::internal::cma::alloc::peek_id(id)?;
        let attr = nonnull(qp_attr)?.as_ptr() as *mut verbs::QpAttr;
        let mask = nonnull(qp_attr_mask)?;
        // SAFETY: attr is a valid, writable ibv_qp_attr.
        let m = conn::init_qp_attr_kernel(fd, handle, unsafe { &mut *attr })?;
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
pub unsafe extern "C-unwind" fn rdma_set_local_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    entry(|| {
        let (p, _) = live_id(id)?;
        let e = nonnull(ece)?.as_ptr() as *const verbs::Ece;
        // SAFETY: e is readable.
        conn::set_local_ece_param(&p, unsafe { &*e })?;
        Ok(0)
    })
}
symver!(rdma_set_local_ece, "RDMACM_1.3");

/// Returns the remote ECE options.
///
/// # Safety
/// `id` must be NULL or a live id; `ece` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_get_remote_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    entry(|| {
        let (p, _) = live_id(id)?;
        let out = nonnull(ece)?.as_ptr() as *mut verbs::Ece;
        let e = conn::get_remote_ece(&p)?;
        // SAFETY: out is writable.
        unsafe { *out = e };
        Ok(0)
    })
}
symver!(rdma_get_remote_ece, "RDMACM_1.3");
