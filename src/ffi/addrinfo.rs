// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Address translation: rdma_getaddrinfo, rdma_freeaddrinfo and the
//! asynchronous rdma_resolve_addrinfo / rdma_query_addrinfo.

use super::types::*;
use super::{entry, not_implemented};
use crate::symver;
use std::ffi::{c_char, c_int};

/// Translates a node and service into RDMA addresses and route data.
#[no_mangle]
pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    entry(|| not_implemented("rdma_getaddrinfo"))
}
symver!(rdma_getaddrinfo, "RDMACM_1.0");

/// Frees a list returned by rdma_getaddrinfo or rdma_query_addrinfo.
#[no_mangle]
pub unsafe extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    entry(|| {
        // SAFETY: the caller hands us a list that it got from this library
        // (or built itself with malloc'd members); every node and member is
        // released with free(), as upstream does.
        unsafe { crate::core::addrinfo::free_list(res) };
        Ok(())
    })
}
symver!(rdma_freeaddrinfo, "RDMACM_1.0");

/// Starts an asynchronous address translation on an identifier.
#[no_mangle]
pub unsafe extern "C" fn rdma_resolve_addrinfo(
    id: *mut rdma_cm_id,
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
) -> c_int {
    entry(|| not_implemented("rdma_resolve_addrinfo"))
}
symver!(rdma_resolve_addrinfo, "RDMACM_1.4");

/// Hands over the result of a completed rdma_resolve_addrinfo.
#[no_mangle]
pub unsafe extern "C" fn rdma_query_addrinfo(
    id: *mut rdma_cm_id,
    info: *mut *mut rdma_addrinfo,
) -> c_int {
    entry(|| not_implemented("rdma_query_addrinfo"))
}
symver!(rdma_query_addrinfo, "RDMACM_1.4");
