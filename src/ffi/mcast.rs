// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Multicast.

use super::types::*;
use super::{entry, not_implemented};
use crate::symver;
use libc::sockaddr;
use std::ffi::{c_int, c_void};

/// Joins a multicast group.
#[no_mangle]
pub unsafe extern "C" fn rdma_join_multicast(id: *mut rdma_cm_id, addr: *mut sockaddr, context: *mut c_void) -> c_int {
    entry(|| not_implemented("rdma_join_multicast"))
}
symver!(rdma_join_multicast, "RDMACM_1.0");

/// Joins a multicast group with extended attributes.
#[no_mangle]
pub unsafe extern "C" fn rdma_join_multicast_ex(id: *mut rdma_cm_id, mc_join_attr: *mut rdma_cm_join_mc_attr_ex, context: *mut c_void) -> c_int {
    entry(|| not_implemented("rdma_join_multicast_ex"))
}
symver!(rdma_join_multicast_ex, "RDMACM_1.1");

/// Leaves a multicast group.
#[no_mangle]
pub unsafe extern "C" fn rdma_leave_multicast(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int {
    entry(|| not_implemented("rdma_leave_multicast"))
}
symver!(rdma_leave_multicast, "RDMACM_1.0");
