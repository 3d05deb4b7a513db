// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Address translation: rdma_getaddrinfo, rdma_freeaddrinfo and the
//! asynchronous rdma_resolve_addrinfo / rdma_query_addrinfo.

use crate::abi::cma::*;
use super::{entry, Errno};
use crate::symver;
use std::ffi::{c_char, c_int, CStr};

// Returns 0 and a list in `*res` (free it with rdma_freeaddrinfo), -1 with
// errno, or, unchanged, the non-zero `EAI_*` value of libc's getaddrinfo
// (errno untouched), exactly as upstream.
/// Translates a node and service into RDMA addresses and route data.
///
/// # Safety
/// `node` and `service` must be NULL or NUL-terminated strings; `hints` NULL or a readable
/// `rdma_addrinfo` whose address and route pointers cover their lengths; `res` writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    entry(|| {
        use crate::addrinfo::{self as ai, GaiError, Hints};
        // SAFETY: node and service are NULL or NUL-terminated strings (the
        // C contract); they are only read during this call.
        let (node, service) = unsafe {
            (
                (!node.is_null()).then(|| CStr::from_ptr(node)),
                (!service.is_null()).then(|| CStr::from_ptr(service)),
            )
        };
        // SAFETY: hints is NULL or a readable rdma_addrinfo whose address
        // and route pointers are readable for their lengths.
        let h = unsafe { Hints::from_c(hints) };
        if node.is_none() && service.is_none() && h.null {
            return Err(Errno::EINVAL);
        }
        if res.is_null() {
            // Upstream would write through NULL; we refuse instead.
            log::debug!(target: "rdmacm", "rdma_getaddrinfo: res is NULL (EINVAL)");
            return Err(Errno::EINVAL);
        }
        match ai::getaddrinfo(node, service, &h, &crate::cma::ai::CmaBackend) {
            Ok(list) => {
                let head = ai::to_c_list(&list)?;
                // SAFETY: res is non-NULL and writable (C contract).
                unsafe { *res = head };
                Ok(0)
            }
            Err(GaiError::Sys(e)) => Err(e),
            Err(GaiError::Eai(code)) => Ok(code),
        }
    })
}
symver!(rdma_getaddrinfo, "RDMACM_1.0");

/// Frees a list returned by rdma_getaddrinfo or rdma_query_addrinfo.
///
/// # Safety
/// `res` must be NULL or a list whose nodes and members were allocated with malloc and
/// are not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    entry(|| {
        // SAFETY: the caller hands us a list that it got from this library
        // (or built itself with malloc'd members); every node and member is
        // released with free(), as upstream does.
        unsafe { crate::addrinfo::free_list(res) };
        Ok(())
    })
}
symver!(rdma_freeaddrinfo, "RDMACM_1.0");

/// Starts an asynchronous address translation on an identifier.
///
/// # Safety
/// As rdma_getaddrinfo for `node`, `service` and `hints`; `id` NULL or an id of this library.
#[no_mangle]
pub unsafe extern "C" fn rdma_resolve_addrinfo(
    id: *mut rdma_cm_id,
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
) -> c_int {
    entry(|| {
        // Checked against the library's table before any use.
        let (p, cm) = super::cm::id_of(id)?;
        // SAFETY: node and service are NULL or NUL-terminated strings, read
        // during this call only; hints is NULL or a readable rdma_addrinfo
        // whose address and route pointers cover their lengths.
        let (node, service, h) = unsafe {
            (
                (!node.is_null()).then(|| CStr::from_ptr(node)),
                (!service.is_null()).then(|| CStr::from_ptr(service)),
                crate::addrinfo::Hints::from_c(hints),
            )
        };
        cm.resolve_addrinfo(&p, node, service, &h)?;
        Ok(0)
    })
}
symver!(rdma_resolve_addrinfo, "RDMACM_1.4");

/// Hands over the result of a completed rdma_resolve_addrinfo.
///
/// # Safety
/// `id` must be NULL or an id of this library; `info` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rdma_query_addrinfo(
    id: *mut rdma_cm_id,
    info: *mut *mut rdma_addrinfo,
) -> c_int {
    entry(|| {
        let info = super::nonnull(info)?;
        // Checked against the library's table before use.
        let (p, cm) = super::cm::id_of(id)?;
        let list = cm.query_addrinfo(&p)?;
        let head = crate::addrinfo::to_c_list(&list)?;
        // SAFETY: info is non-NULL and writable (C contract).
        unsafe { *info.as_ptr() = head };
        Ok(0)
    })
}
symver!(rdma_query_addrinfo, "RDMACM_1.4");
