// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Multicast memberships of an id: join, leave, and the library's part of
//! MULTICAST_JOIN / MULTICAST_ERROR events (attaching the id's QP to the
//! group).
#![deny(unsafe_code)]

use crate::abi::sockaddr::SockAddr;
use crate::cma::public::CPtr;
use crate::cma::acks::Acks;
use crate::cma::base::{Cm, EventPriv, IdPriv, IdRef};
pub use crate::cma::base::Mc;
use crate::abi::cma::*;
use crate::abi::ucma as kabi;
use nix::errno::Errno;
use parking_lot::Mutex;
use std::ffi::c_void;
use std::sync::Arc;

/// `RDMA_MC_JOIN_FLAG_*`.
pub const JOIN_FLAG_FULLMEMBER: u16 = 0;
pub const JOIN_FLAG_SENDONLY_FULLMEMBER: u16 = 1;
pub const JOIN_FLAG_RESERVED: u32 = 2;

/// `RDMA_CM_JOIN_MC_ATTR_*`.
pub const JOIN_MC_ATTR_ADDRESS: u32 = 1;
pub const JOIN_MC_ATTR_JOIN_FLAGS: u32 = 2;
pub const JOIN_MC_ATTR_RESERVED: u32 = 4;

/// `rdma_join_multicast` / `rdma_join_multicast_ex` after their checks.
pub fn join(cm: &'static Cm, p: &IdRef, addr: SockAddr, join_flags: u16, context: *mut c_void) -> Result<(), Errno> {
    let mc = crate::sys::alloc::try_arc(Mc {
        id: IdRef::downgrade(p),
        context: CPtr(context),
        handle: Mutex::new(0),
        group: Mutex::new((ibv_gid { raw: [0; 16] }, 0)),
        join_flags,
        addr,
        acks: Acks::default(),
    })?;
    cm.register_mc(&mc)?;
    if p.links.lock().mcs.try_reserve(1).is_err() {
        cm.unregister_mc(&mc);
        return Err(Errno::ENOMEM);
    }
    p.links.lock().mcs.insert(0, mc.clone());
    let uid = Arc::as_ptr(&mc) as usize as u64;
    match cm.ucma.join_mcast(p.fd(), p.handle(), uid, &addr, join_flags, !cm.af_ib()) {
        Ok(handle) => {
            *mc.handle.lock() = handle;
            cm.complete(p)
        }
        Err(e) => {
            // The kernel never saw the membership.
            p.links.lock().mcs.retain(|m| !Arc::ptr_eq(m, &mc));
            cm.unregister_mc(&mc);
            Err(e)
        }
    }
}

/// `rdma_leave_multicast` after its checks: waits until every event the
/// kernel reported for the membership has been acked.
pub fn leave(cm: &Cm, p: &IdPriv, addr: SockAddr) -> Result<(), Errno> {
    let mc = {
        let mcs = &mut p.links.lock().mcs;
        let pos = mcs.iter().position(|m| m.addr.storage()[..addr.len()] == *addr.as_bytes()).ok_or(Errno::EADDRNOTAVAIL)?;
        mcs.remove(pos)
    };
    if !p.id.qp().is_null() && mc.join_flags != JOIN_FLAG_SENDONLY_FULLMEMBER {
        let (gid, lid) = *mc.group.lock();
        p.id.qp_detach_mcast(&gid, lid);
    }
    let handle = *mc.handle.lock();
    let r = cm.ucma.leave_mcast(p.fd(), handle);
    // As upstream, the membership is dropped either way.
    cm.unregister_mc(&mc);
    let reported = r?;
    mc.acks.wait(reported)
}

/// Completes a multicast event of membership `mc` of id `p` (the
/// kernel's uid is the membership): the group is recorded and the id's QP
/// attached.  The core has copied the UD parameters.
pub fn process_event(resp: &kabi::EventResp, evt: &mut EventPriv, mc: Arc<Mc>, p: &IdPriv) {
    if resp.event == RDMA_CM_EVENT_MULTICAST_JOIN {
        let ud = evt.event.ud();
        let (gid, lid) = (ud.ah_attr.grh.dgid, ud.ah_attr.dlid);
        *mc.group.lock() = (gid, lid);
        if !p.id.qp().is_null() && mc.join_flags != JOIN_FLAG_SENDONLY_FULLMEMBER {
            if let Err(e) = p.id.qp_attach_mcast(&gid, lid) {
                log::debug!(target: "rdmacm", "attaching the QP to the group failed: {e}");
                evt.event.0.status = -1;
                evt.event.0.event = RDMA_CM_EVENT_MULTICAST_ERROR;
            }
        }
    }
    if resp.event == RDMA_CM_EVENT_MULTICAST_ERROR {
        // Only the context is reported with an error, as upstream.
        evt.event.clear_param();
    }
    evt.event.0.param.ud.private_data = mc.context.0;
    evt.mc = Some(mc);
}
