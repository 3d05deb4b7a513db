// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! `ibv_gid_reachable`: the Solaris libibverbs extension, brought to Linux.
//! Exported under our own version node `RDMACM_RS_1.0`.

use super::types::*;
use super::{entry, not_implemented};
use crate::symver;
use std::ffi::{c_int, c_uint};

/// Checks whether a GID can be reached from a local port.
#[no_mangle]
pub unsafe extern "C" fn ibv_gid_reachable(
    context: *mut ibv_context,
    port: c_uint,
    gid: *mut ibv_gid,
    timeout: c_int,
) -> c_int {
    entry(|| not_implemented("ibv_gid_reachable"))
}
symver!(ibv_gid_reachable, "RDMACM_RS_1.0");
