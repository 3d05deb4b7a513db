// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rdma_getaddrinfo / rdma_freeaddrinfo core.

use crate::ffi::types::rdma_addrinfo;

/// Frees a whole `rdma_addrinfo` chain and every member, with libc `free`.
///
/// # Safety
/// `res` must be NULL or the head of a chain whose nodes and members were
/// all allocated with libc malloc (as this library and upstream's do) and
/// are not used afterwards.
pub unsafe fn free_list(mut res: *mut rdma_addrinfo) {
    while !res.is_null() {
        // SAFETY: per the contract, res is a live malloc'd node; we read its
        // members, free them (free(NULL) is a no-op) and then the node.
        unsafe {
            let node = res;
            res = (*node).ai_next;
            libc::free((*node).ai_connect);
            libc::free((*node).ai_route);
            libc::free((*node).ai_src_canonname.cast());
            libc::free((*node).ai_dst_canonname.cast());
            libc::free((*node).ai_src_addr.cast());
            libc::free((*node).ai_dst_addr.cast());
            libc::free(node.cast());
        }
    }
}
