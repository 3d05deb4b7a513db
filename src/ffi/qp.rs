// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Queue pairs, shared receive queues and endpoints.

use super::types::*;
use super::{entry, not_implemented};
use crate::symver;
use std::ffi::c_int;

/// Allocates a QP for an identifier.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_qp(id: *mut rdma_cm_id, pd: *mut ibv_pd, qp_init_attr: *mut ibv_qp_init_attr) -> c_int {
    entry(|| not_implemented("rdma_create_qp"))
}
symver!(rdma_create_qp, "RDMACM_1.0");

/// Allocates a QP with extended attributes.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_qp_ex(id: *mut rdma_cm_id, qp_init_attr: *mut ibv_qp_init_attr_ex) -> c_int {
    entry(|| not_implemented("rdma_create_qp_ex"))
}
symver!(rdma_create_qp_ex, "RDMACM_1.0");

/// Destroys an identifier's QP.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    entry(|| not_implemented("rdma_destroy_qp"))
}
symver!(rdma_destroy_qp, "RDMACM_1.0");

/// Allocates a shared receive queue.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_srq(id: *mut rdma_cm_id, pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> c_int {
    entry(|| not_implemented("rdma_create_srq"))
}
symver!(rdma_create_srq, "RDMACM_1.0");

/// Allocates a shared receive queue with extended attributes.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_srq_ex(id: *mut rdma_cm_id, attr: *mut ibv_srq_init_attr_ex) -> c_int {
    entry(|| not_implemented("rdma_create_srq_ex"))
}
symver!(rdma_create_srq_ex, "RDMACM_1.0");

/// Destroys an identifier's SRQ.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
    entry(|| not_implemented("rdma_destroy_srq"))
}
symver!(rdma_destroy_srq, "RDMACM_1.0");

/// Creates an identifier, resolves it and optionally a QP (synchronous).
#[no_mangle]
pub unsafe extern "C" fn rdma_create_ep(id: *mut *mut rdma_cm_id, res: *mut rdma_addrinfo, pd: *mut ibv_pd, qp_init_attr: *mut ibv_qp_init_attr) -> c_int {
    entry(|| not_implemented("rdma_create_ep"))
}
symver!(rdma_create_ep, "RDMACM_1.0");

/// Destroys an endpoint made by rdma_create_ep.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    entry(|| not_implemented("rdma_destroy_ep"))
}
symver!(rdma_destroy_ep, "RDMACM_1.0");
