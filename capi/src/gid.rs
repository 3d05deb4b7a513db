// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! `ibv_gid_reachable`: the Solaris libibverbs extension, brought to Linux.
//! Exported under our own version node `RDMACM_RS_1.0`.  The decision
//! logic is in `rdmacm::internal::gid`; its environment (the caller's device and the
//! kernel's resolution through the connection manager) in
//! `rdmacm::internal::cma::gid_env`.

use super::{entry, nonnull};
use rdmacm::internal::abi::cma::*;
use rdmacm::internal::cma::{self as cm, gid_env::CmGidEnv, objects::Vouched};
use crate::symver;
use std::ffi::{c_int, c_uint};

/// Checks whether a GID can be reached from a local port (0: any port).
///
/// # Safety
/// `context` must be NULL or an open verbs context; `gid` NULL or a readable `union ibv_gid`.
#[no_mangle]
pub unsafe extern "C-unwind" fn ibv_gid_reachable(
    context: *mut ibv_context,
    port: c_uint,
    gid: *mut ibv_gid,
    timeout: c_int,
) -> c_int {
    entry(|| {
        let context = nonnull(context)?;
        // SAFETY: context points to a readable struct ibv_context (C
        // contract); only its device pointer is read. Zeroed memory or a
        // closed context's leftovers have none: EINVAL, not a crash.
        if !unsafe { rdmacm::internal::sys::verbs::context_has_device(context.as_ptr()) } {
            return Err(super::Errno::EINVAL);
        }
        let gid = nonnull(gid)?;
        // SAFETY: gid points to a caller-owned union ibv_gid (16 bytes).
        let raw = unsafe { gid.as_ref().raw };
        // SAFETY: the caller passes an open verbs context (C contract).
        let ctx = unsafe { Vouched::new(context.as_ptr()) };
        rdmacm::internal::gid::gid_reachable(&CmGidEnv::new(cm::global(), ctx), port, &raw, timeout).map(|()| 0)
    })
}
symver!(ibv_gid_reachable, "RDMACM_RS_1.0");
