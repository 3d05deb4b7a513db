// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Multicast.

use super::cm::id_of as live_id;
use rdmacm::internal::abi::cma::*;
use super::{entry, nonnull, Errno};
use rdmacm::internal::cma::conn::mcast;
use crate::symver;
use rdmacm::internal::abi::sockaddr::SockAddr;
use libc::sockaddr;
use std::ffi::{c_int, c_void};

/// Joins a multicast group.
///
/// # Safety
/// `id` must be NULL or a live id; `addr` NULL or a socket address as
/// large as its family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_join_multicast(id: *mut rdma_cm_id, addr: *mut sockaddr, context: *mut c_void) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        // SAFETY: addr is NULL or a readable socket address.
        let a = unsafe { mc_addr(addr) }.ok_or(Errno::EINVAL)?;
        mcast::join(cm, &p, a, mcast::JOIN_FLAG_FULLMEMBER, context)?;
        Ok(0)
    })
}
symver!(rdma_join_multicast, "RDMACM_1.0");

/// Joins a multicast group with extended attributes.
///
/// # Safety
/// `id` must be NULL or a live id; `mc_join_attr` NULL or valid, its
/// address as for `rdma_join_multicast`.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_join_multicast_ex(id: *mut rdma_cm_id, mc_join_attr: *mut rdma_cm_join_mc_attr_ex, context: *mut c_void) -> c_int {
    entry(|| {
        let (p, cm) = live_id(id)?;
        // SAFETY: a non-NULL attribute set is readable.
        let at = unsafe { nonnull(mc_join_attr)?.as_ref() };
        if at.comp_mask >= mcast::JOIN_MC_ATTR_RESERVED {
            return Err(Errno::EOPNOTSUPP);
        }
        if at.comp_mask & mcast::JOIN_MC_ATTR_ADDRESS == 0 {
            return Err(Errno::EINVAL);
        }
        if at.comp_mask & mcast::JOIN_MC_ATTR_JOIN_FLAGS == 0 || at.join_flags >= mcast::JOIN_FLAG_RESERVED {
            return Err(Errno::EINVAL);
        }
        // SAFETY: the address is NULL or readable.
        let a = unsafe { mc_addr(at.addr) }.ok_or(Errno::EINVAL)?;
        mcast::join(cm, &p, a, at.join_flags as u16, context)?;
        Ok(0)
    })
}
symver!(rdma_join_multicast_ex, "RDMACM_1.1");

/// Leaves a multicast group.
///
/// # Safety
/// `id` must be NULL or a live id; `addr` as for `rdma_join_multicast`.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_leave_multicast(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int {
    entry(|| {
        // SAFETY: addr is NULL or a readable socket address.
        let a = unsafe { mc_addr(addr) }.ok_or(Errno::EINVAL)?;
        let (p, cm) = live_id(id)?;
        mcast::leave(cm, &p, a)?;
        Ok(0)
    })
}
symver!(rdma_leave_multicast, "RDMACM_1.0");

/// A multicast address (upstream's `ucma_addrlen`: None for NULL or an
/// unknown family).
///
/// # Safety
/// `addr` must be NULL or a readable socket address.
unsafe fn mc_addr(addr: *const sockaddr) -> Option<SockAddr> {
    // SAFETY: per the contract, addr is NULL or covers its family's structure.
    unsafe { SockAddr::from_raw_for_cm(addr, true) }.flatten()
}
