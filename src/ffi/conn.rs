// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Connection establishment and teardown, ECE.

use super::types::*;
use super::{entry, not_implemented};
use crate::symver;
use std::ffi::{c_int, c_void};

/// Initiates a connection request.
#[no_mangle]
pub unsafe extern "C" fn rdma_connect(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    entry(|| not_implemented("rdma_connect"))
}
symver!(rdma_connect, "RDMACM_1.0");

/// Listens for incoming connection requests.
#[no_mangle]
pub unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    entry(|| not_implemented("rdma_listen"))
}
symver!(rdma_listen, "RDMACM_1.0");

/// Accepts a connection request.
#[no_mangle]
pub unsafe extern "C" fn rdma_accept(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    entry(|| not_implemented("rdma_accept"))
}
symver!(rdma_accept, "RDMACM_1.0");

/// Rejects a connection request.
#[no_mangle]
pub unsafe extern "C" fn rdma_reject(id: *mut rdma_cm_id, private_data: *const c_void, private_data_len: u8) -> c_int {
    entry(|| not_implemented("rdma_reject"))
}
symver!(rdma_reject, "RDMACM_1.0");

/// Rejects a connection request, reporting unsupported ECE.
#[no_mangle]
pub unsafe extern "C" fn rdma_reject_ece(id: *mut rdma_cm_id, private_data: *const c_void, private_data_len: u8) -> c_int {
    entry(|| not_implemented("rdma_reject_ece"))
}
symver!(rdma_reject_ece, "RDMACM_1.3");

/// Tells the CM of a QP event.
#[no_mangle]
pub unsafe extern "C" fn rdma_notify(id: *mut rdma_cm_id, event: ibv_event_type) -> c_int {
    entry(|| not_implemented("rdma_notify"))
}
symver!(rdma_notify, "RDMACM_1.0");

/// Disconnects a connection.
#[no_mangle]
pub unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    entry(|| not_implemented("rdma_disconnect"))
}
symver!(rdma_disconnect, "RDMACM_1.0");

/// Retrieves the next connection request (synchronous listeners).
#[no_mangle]
pub unsafe extern "C" fn rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> c_int {
    entry(|| not_implemented("rdma_get_request"))
}
symver!(rdma_get_request, "RDMACM_1.0");

/// Completes an active connection set up with an external QP.
#[no_mangle]
pub unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    entry(|| not_implemented("rdma_establish"))
}
symver!(rdma_establish, "RDMACM_1.2");

/// Returns the QP attributes for the identifier's state.
#[no_mangle]
pub unsafe extern "C" fn rdma_init_qp_attr(id: *mut rdma_cm_id, qp_attr: *mut ibv_qp_attr, qp_attr_mask: *mut c_int) -> c_int {
    entry(|| not_implemented("rdma_init_qp_attr"))
}
symver!(rdma_init_qp_attr, "RDMACM_1.2");

/// Sets the local ECE options.
#[no_mangle]
pub unsafe extern "C" fn rdma_set_local_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    entry(|| not_implemented("rdma_set_local_ece"))
}
symver!(rdma_set_local_ece, "RDMACM_1.3");

/// Returns the remote ECE options.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_remote_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    entry(|| not_implemented("rdma_get_remote_ece"))
}
symver!(rdma_get_remote_ece, "RDMACM_1.3");
