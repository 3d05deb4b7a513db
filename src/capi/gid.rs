// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! `ibv_gid_reachable`: the Solaris libibverbs extension, brought to Linux.
//! Exported under our own version node `RDMACM_RS_1.0`.  The decision
//! logic is in `core::gid`; this file gives it the real world: the
//! caller's verbs context and the kernel's connection manager (through
//! this library's own `rdma_create_id`/`rdma_resolve_addr`/
//! `rdma_resolve_route` on a synchronous identifier).

use super::cm::{rdma_create_id, rdma_destroy_id, rdma_resolve_addr, rdma_resolve_route};
use crate::abi::cma::*;
use super::{entry, nonnull};
use crate::gid::{GidEnv, PortInfo, Resolved};
use crate::abi::sockaddr::SockAddr;
use crate::symver;
use nix::errno::Errno;
use std::ffi::{c_int, c_uint};
use std::ptr::NonNull;

/// Imports from libibverbs and src/gid_shim.c.
/// cbindgen:ignore
mod sys {
    use crate::abi::cma::{ibv_context, ibv_gid};
    use std::ffi::c_int;

    extern "C" {
        pub(super) fn rdmacm_gid_port_count(ctx: *mut ibv_context, err: *mut c_int) -> c_int;
        pub(super) fn rdmacm_gid_port_info(ctx: *mut ibv_context, port: u8, state: *mut u32, ll: *mut u8) -> c_int;
        pub(super) fn rdmacm_gid_node_guid(ctx: *mut ibv_context) -> u64;
        pub(super) fn rdmacm_gid_ndev_ifindex(ctx: *mut ibv_context, port: u8, index: u32) -> u32;
        pub(super) fn ibv_query_gid(ctx: *mut ibv_context, port: u8, index: c_int, gid: *mut ibv_gid) -> c_int;
    }
}
use sys::*;

/// A synchronous CM identifier, destroyed on drop.
struct SyncId(*mut rdma_cm_id);

impl SyncId {
    fn new(ps: u32) -> Result<SyncId, Errno> {
        let mut id = std::ptr::null_mut();
        // SAFETY: a NULL channel asks for a synchronous identifier; `id` is a
        // valid out-pointer.
        if unsafe { rdma_create_id(std::ptr::null_mut(), &mut id, std::ptr::null_mut(), ps) } != 0 {
            // Not a verdict on the path: the CM itself is unusable.
            let e = last_err();
            log::debug!(target: "rdmacm", "ibv_gid_reachable: cannot create a CM identifier: {e}");
            return Err(if e == Errno::ENOMEM { e } else { Errno::EIO });
        }
        Ok(SyncId(id))
    }
}

impl Drop for SyncId {
    fn drop(&mut self) {
        // SAFETY: self.0 came from rdma_create_id and is destroyed once.
        unsafe { rdma_destroy_id(self.0) };
    }
}

fn last_err() -> Errno {
    match Errno::last() {
        Errno::UnknownErrno => Errno::EIO,
        e => e,
    }
}

/// A socket address in a sockaddr_storage, as rdma_resolve_addr takes it.
fn to_storage(a: &SockAddr) -> libc::sockaddr_storage {
    // SAFETY: all-zero bytes are a valid sockaddr_storage.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let p = &mut st as *mut libc::sockaddr_storage;
    // SAFETY: sockaddr_storage is large and aligned enough for every
    // family's structure.
    unsafe {
        match a {
            SockAddr::V4(s) => *p.cast::<libc::sockaddr_in>() = *s,
            SockAddr::V6(s) => *p.cast::<libc::sockaddr_in6>() = *s,
            SockAddr::Ib(s) => *p.cast::<sockaddr_ib>() = *s,
            SockAddr::Other(f) => st.ss_family = *f,
        }
    }
    st
}

struct VerbsEnv(NonNull<ibv_context>);

impl GidEnv for VerbsEnv {
    fn port_count(&self) -> Result<u8, Errno> {
        let mut err = 0;
        // SAFETY: the caller's context is open; err is a valid out-pointer.
        let n = unsafe { rdmacm_gid_port_count(self.0.as_ptr(), &mut err) };
        if n < 0 {
            return Err(crate::sys::errno_from_raw(err));
        }
        Ok(n.clamp(0, 255) as u8)
    }

    fn port_info(&self, port: u8) -> Result<PortInfo, Errno> {
        let (mut state, mut link_layer) = (0u32, 0u8);
        // SAFETY: open context, valid out-pointers.
        let r = unsafe { rdmacm_gid_port_info(self.0.as_ptr(), port, &mut state, &mut link_layer) };
        if r != 0 {
            return Err(crate::sys::errno_from_raw(r));
        }
        Ok(PortInfo { state, link_layer })
    }

    fn node_guid(&self) -> u64 {
        // SAFETY: open context.
        unsafe { rdmacm_gid_node_guid(self.0.as_ptr()) }
    }

    fn ifindex(&self, port: u8) -> u32 {
        // SAFETY: open context; an invalid index only yields 0.
        unsafe { rdmacm_gid_ndev_ifindex(self.0.as_ptr(), port, 0) }
    }

    fn resolve_ip(&self, dst: &SockAddr, timeout_ms: i32) -> Result<Resolved, Errno> {
        let id = SyncId::new(RDMA_PS_TCP)?;
        let mut storage = to_storage(dst);
        // SAFETY: id is a live synchronous identifier; storage holds a
        // complete socket address of dst's family.
        let r = unsafe {
            rdma_resolve_addr(id.0, std::ptr::null_mut(), (&mut storage as *mut libc::sockaddr_storage).cast(), timeout_ms)
        };
        if r != 0 {
            return Err(last_err());
        }
        // SAFETY: after a successful resolution the identifier's verbs and
        // port_num fields describe the device the kernel picked.
        let (verbs, port) = unsafe { ((*id.0).verbs, (*id.0).port_num) };
        if verbs.is_null() {
            return Err(Errno::ENODEV);
        }
        // SAFETY: verbs is the library's own open context for that device.
        let node_guid = unsafe { rdmacm_gid_node_guid(verbs) };
        Ok(Resolved { node_guid, port })
    }

    fn resolve_ib_path(&self, port: u8, dgid: &[u8; 16], timeout_ms: i32) -> Result<(), Errno> {
        let mut sgid = ibv_gid { raw: [0; 16] };
        // SAFETY: open context, valid out-pointer.
        if unsafe { ibv_query_gid(self.0.as_ptr(), port, 0, &mut sgid) } != 0 {
            return Err(Errno::EIO);
        }
        let ib = |gid: [u8; 16]| sockaddr_ib {
            sib_family: AF_IB as u16,
            sib_pkey: 0xffffu16.to_be(),
            sib_addr: ib_addr { sib_raw: gid },
            ..Default::default()
        };
        // SAFETY: reading the raw bytes of a POD union.
        let mut src = ib(unsafe { sgid.raw });
        let mut dst = ib(*dgid);
        let id = SyncId::new(RDMA_PS_IB)?;
        // SAFETY: live identifier; both addresses are complete sockaddr_ib.
        let r = unsafe { rdma_resolve_addr(id.0, (&mut src as *mut sockaddr_ib).cast(), (&mut dst as *mut sockaddr_ib).cast(), timeout_ms) };
        if r != 0 {
            return Err(last_err());
        }
        // SAFETY: live identifier with a resolved address.
        if unsafe { rdma_resolve_route(id.0, timeout_ms) } != 0 {
            return Err(last_err());
        }
        Ok(())
    }
}

/// Checks whether a GID can be reached from a local port (0: any port).
///
/// # Safety
/// `context` must be NULL or an open verbs context; `gid` NULL or a readable `union ibv_gid`.
#[no_mangle]
pub unsafe extern "C" fn ibv_gid_reachable(
    context: *mut ibv_context,
    port: c_uint,
    gid: *mut ibv_gid,
    timeout: c_int,
) -> c_int {
    entry(|| {
        let context = nonnull(context)?;
        let gid = nonnull(gid)?;
        // SAFETY: gid points to a caller-owned union ibv_gid (16 bytes).
        let raw = unsafe { gid.as_ref().raw };
        crate::gid::gid_reachable(&VerbsEnv(context), port, &raw, timeout).map(|()| 0)
    })
}
symver!(ibv_gid_reachable, "RDMACM_RS_1.0");
