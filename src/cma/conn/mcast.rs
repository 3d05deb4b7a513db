// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Multicast memberships of an id: join, leave, and the library's part of
//! MULTICAST_JOIN / MULTICAST_ERROR events (attaching the id's QP to the
//! group).

use super::{raw, verbs, with_ext};
use crate::sys::ucma::RawAddr;
use crate::cma::{addr_len, Cm, EventPriv, IdPriv};
use crate::abi::cma::*;
use crate::abi::ucma as kabi;
use nix::errno::Errno;
use parking_lot::{Condvar, Mutex};
use std::ffi::c_void;

/// `RDMA_MC_JOIN_FLAG_*`.
pub const JOIN_FLAG_FULLMEMBER: u16 = 0;
pub const JOIN_FLAG_SENDONLY_FULLMEMBER: u16 = 1;
pub const JOIN_FLAG_RESERVED: u32 = 2;

/// `RDMA_CM_JOIN_MC_ATTR_*`.
pub const JOIN_MC_ATTR_ADDRESS: u32 = 1;
pub const JOIN_MC_ATTR_JOIN_FLAGS: u32 = 2;
pub const JOIN_MC_ATTR_RESERVED: u32 = 4;

/// One membership; its address is the uid the kernel reports events with.
pub struct Mc {
    pub id_priv: *mut IdPriv,
    pub context: *mut c_void,
    /// The kernel's handle (set once JOIN returns).
    pub handle: Mutex<u32>,
    /// Group GID and LID from the join event.
    pub group: Mutex<(ibv_gid, u16)>,
    pub join_flags: u16,
    pub addr: RawAddr,
    completed: Mutex<u32>,
    cond: Condvar,
}

/// Frees a membership.
///
/// # Safety
/// `mc` must be a boxed [`Mc`] no event refers to anymore.
pub unsafe fn free(mc: *mut Mc) {
    // SAFETY: per the contract.
    drop(unsafe { Box::from_raw(mc) });
}

/// Counts an acked multicast event (called by the core's ack).
///
/// # Safety
/// `mc` must be the live membership of an unacked event.
pub unsafe fn complete(mc: *mut c_void) {
    // SAFETY: per the contract.
    let mc = unsafe { &*(mc as *const Mc) };
    let mut n = mc.completed.lock();
    *n += 1;
    mc.cond.notify_all();
}

/// The length of a multicast address (upstream's `ucma_addrlen`: 0 for
/// NULL or an unknown family).
///
/// # Safety
/// `addr` must be NULL or a readable socket address.
pub unsafe fn mc_addr(addr: *const libc::sockaddr) -> Option<RawAddr> {
    if addr.is_null() {
        return None;
    }
    // SAFETY: addr points to at least a sockaddr header.
    let len = addr_len(unsafe { (*addr).sa_family } as i32, true);
    if len == 0 {
        return None;
    }
    // SAFETY: len bytes are readable for this family.
    Some(RawAddr::from_slice(unsafe { std::slice::from_raw_parts(addr as *const u8, len) }))
}

/// `rdma_join_multicast` / `rdma_join_multicast_ex` after their checks.
///
/// # Safety
/// `p` must be a live id.
pub unsafe fn join(cm: &'static Cm, p: *mut IdPriv, addr: RawAddr, join_flags: u16, context: *mut c_void) -> Result<(), Errno> {
    let mc = Box::into_raw(Box::new(Mc {
        id_priv: p,
        context,
        handle: Mutex::new(0),
        // SAFETY: a GID is 16 plain bytes.
        group: Mutex::new((unsafe { std::mem::zeroed() }, 0)),
        join_flags,
        addr,
        completed: Mutex::new(0),
        cond: Condvar::new(),
    }));
    with_ext(p, |x| x.mcs.insert(0, mc as usize));
    // SAFETY: p is live.
    let (fd, h) = unsafe { (IdPriv::fd(p), (*p).handle) };
    match cm.ucma.join_mcast(fd, h, mc as usize as u64, &addr, join_flags, !cm.af_ib()) {
        Ok(handle) => {
            // SAFETY: mc stays alive while listed.
            unsafe { *(*mc).handle.lock() = handle };
            // SAFETY: p is live.
            unsafe { cm.complete(p) }
        }
        Err(e) => {
            with_ext(p, |x| x.mcs.retain(|m| *m != mc as usize));
            // SAFETY: the kernel never saw mc.
            unsafe { free(mc) };
            Err(e)
        }
    }
}

/// `rdma_leave_multicast` after its checks: waits until every event the
/// kernel reported for the membership has been acked.
///
/// # Safety
/// `p` must be a live id.
pub unsafe fn leave(cm: &Cm, p: *mut IdPriv, addr: RawAddr) -> Result<(), Errno> {
    let found = with_ext(p, |x| {
        let pos = x.mcs.iter().position(|&m| {
            // SAFETY: listed memberships are alive.
            let a = unsafe { &(*(m as *const Mc)).addr };
            a.bytes[..addr.len] == addr.bytes[..addr.len]
        })?;
        Some(x.mcs.remove(pos))
    });
    let mc = found.ok_or(Errno::EADDRNOTAVAIL)? as *mut Mc;
    // SAFETY: mc is ours now (unlisted); p is live.
    unsafe {
        let qp = (*raw(p)).qp;
        if !qp.is_null() && (*mc).join_flags != JOIN_FLAG_SENDONLY_FULLMEMBER {
            let (gid, lid) = *(*mc).group.lock();
            verbs::detach_mcast(qp, &gid, lid);
        }
    }
    // SAFETY: p is live; mc is ours.
    let r = unsafe { cm.ucma.leave_mcast(IdPriv::fd(p), *(*mc).handle.lock()) };
    match r {
        Ok(reported) => {
            // SAFETY: mc is alive until freed below.
            let m = unsafe { &*mc };
            let mut n = m.completed.lock();
            while *n < reported {
                m.cond.wait(&mut n);
            }
            drop(n);
            // SAFETY: every event of mc has been acked.
            unsafe { free(mc) };
            Ok(())
        }
        Err(e) => {
            // SAFETY: as upstream, the membership is dropped either way.
            unsafe { free(mc) };
            Err(e)
        }
    }
}

/// Points a multicast event at its membership and id (the kernel's uid is
/// the membership) and completes a join: the group is recorded and the
/// id's QP attached.  The core has copied the UD parameters.
///
/// # Safety
/// `resp.uid` must be a live membership of this library.
pub unsafe fn process_event(resp: &kabi::EventResp, evt: &mut EventPriv) {
    let mc = resp.uid as usize as *mut Mc;
    evt.mc = mc as *mut c_void;
    // SAFETY: per the contract.
    let m = unsafe { &*mc };
    evt.id_priv = m.id_priv;
    evt.event.id = raw(m.id_priv);
    if resp.event == RDMA_CM_EVENT_MULTICAST_JOIN {
        // SAFETY: the UD parameters were copied into the event.
        let (gid, lid) = unsafe { (evt.event.param.ud.ah_attr.grh.dgid, evt.event.param.ud.ah_attr.dlid) };
        *m.group.lock() = (gid, lid);
        // SAFETY: the id is live while it has memberships.
        let qp = unsafe { (*raw(m.id_priv)).qp };
        if !qp.is_null() && m.join_flags != JOIN_FLAG_SENDONLY_FULLMEMBER {
            // SAFETY: qp is the id's live QP.
            if let Err(e) = unsafe { verbs::attach_mcast(qp, &gid, lid) } {
                log::debug!(target: "rdmacm", "attaching the QP to the group failed: {e}");
                evt.event.status = -1;
                evt.event.event = RDMA_CM_EVENT_MULTICAST_ERROR;
            }
        }
    }
    if resp.event == RDMA_CM_EVENT_MULTICAST_ERROR {
        // Only the context is reported with an error, as upstream.
        // SAFETY: the parameter union is plain data; all-zero is valid.
        evt.event.param = unsafe { std::mem::zeroed() };
    }
    evt.event.param.ud.private_data = m.context;
}

/// The id a membership belongs to (the kernel's uid of a multicast event).
///
/// # Safety
/// `uid` must be a live membership of this library.
pub unsafe fn owner(uid: u64) -> *mut IdPriv {
    // SAFETY: per the contract.
    unsafe { (*(uid as usize as *const Mc)).id_priv }
}
