// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The verbs calls the rsocket data path makes, through the C shim
//! (src/verbs_shim.c: most of them are static inline in <infiniband/verbs.h>).

use crate::abi::cma::{ibv_comp_channel, ibv_context, ibv_cq, ibv_pd, ibv_qp};
use nix::errno::Errno;
use std::ffi::{c_int, c_void};

/// `IBV_WR_RDMA_WRITE`.
pub const WR_RDMA_WRITE: c_int = 0;
/// `IBV_WR_RDMA_WRITE_WITH_IMM`.
pub const WR_RDMA_WRITE_WITH_IMM: c_int = 1;
/// `IBV_WR_SEND`.
pub const WR_SEND: c_int = 2;
/// `IBV_SEND_INLINE`.
pub const SEND_INLINE: c_int = 8;

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// Opaque `struct ibv_mr`.
#[repr(C)]
pub struct IbvMr {
    _private: [u8; 0],
}

/// cbindgen:ignore
mod sys {
    use super::*;
    extern "C" {
        pub(super) fn rdmacm_shim_rs_post_send(qp: *mut ibv_qp, wr_id: u64, sgl: *mut Sge, nsge: c_int, opcode: c_int, flags: c_int, imm: u32, raddr: u64, rkey: u32) -> c_int;
        pub(super) fn rdmacm_shim_rs_post_recv(qp: *mut ibv_qp, wr_id: u64, sgl: *mut Sge, nsge: c_int) -> c_int;
        pub(super) fn rdmacm_shim_rs_poll_cq(cq: *mut ibv_cq, wr_id: *mut u64, out: *mut u32) -> c_int;
        pub(super) fn rdmacm_shim_rs_req_notify_cq(cq: *mut ibv_cq) -> c_int;
        pub(super) fn rdmacm_shim_rs_get_cq_event(ch: *mut ibv_comp_channel) -> c_int;
        pub(super) fn rdmacm_shim_rs_ack_cq_events(cq: *mut ibv_cq, n: u32);
        pub(super) fn rdmacm_shim_rs_channel_fd(ch: *mut ibv_comp_channel) -> c_int;
        pub(super) fn rdmacm_shim_rs_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, len: usize, remote_write: c_int) -> *mut IbvMr;
        pub(super) fn rdmacm_shim_rs_mr_keys(mr: *mut IbvMr, lkey: *mut u32, rkey: *mut u32);
        pub(super) fn rdmacm_shim_rs_dereg_mr(mr: *mut IbvMr) -> c_int;
        pub(super) fn rdmacm_shim_cm_device_caps(ctx: *mut ibv_context, caps: *mut c_int) -> c_int;
    }
}

/// A verbs return value (0 or an errno value, or -1 with errno) as a Result.
fn check(ret: c_int) -> Result<(), Errno> {
    match ret {
        0 => Ok(()),
        r if r > 0 => Err(Errno::from_raw(r)),
        _ => Err(match Errno::last() {
            Errno::UnknownErrno => Errno::EIO,
            e => e,
        }),
    }
}

/// Posts one send work request.
///
/// # Safety
/// `qp` is a live QP; the SGEs describe registered (or, with inline, readable) memory.
#[allow(clippy::too_many_arguments)]
pub unsafe fn post_send(qp: *mut ibv_qp, wr_id: u64, sgl: &mut [Sge], opcode: c_int, flags: c_int, imm: u32, raddr: u64, rkey: u32) -> Result<(), Errno> {
    let (p, n) = if sgl.is_empty() { (std::ptr::null_mut(), 0) } else { (sgl.as_mut_ptr(), sgl.len() as c_int) };
    // SAFETY: the caller guarantees qp and the memory; the WR is built on the shim's stack.
    check(unsafe { sys::rdmacm_shim_rs_post_send(qp, wr_id, p, n, opcode, flags, imm, raddr, rkey) })
}

/// Posts one receive work request.
///
/// # Safety
/// `qp` is a live QP; the SGEs describe registered memory that outlives the WR.
pub unsafe fn post_recv(qp: *mut ibv_qp, wr_id: u64, sgl: &mut [Sge]) -> Result<(), Errno> {
    let (p, n) = if sgl.is_empty() { (std::ptr::null_mut(), 0) } else { (sgl.as_mut_ptr(), sgl.len() as c_int) };
    // SAFETY: as above.
    check(unsafe { sys::rdmacm_shim_rs_post_recv(qp, wr_id, p, n) })
}

/// One work completion.
pub struct Wc {
    pub wr_id: u64,
    pub status: u32,
    pub imm: Option<u32>,
}

/// Polls one completion.
///
/// # Safety
/// `cq` is a live CQ.
pub unsafe fn poll_cq(cq: *mut ibv_cq) -> Result<Option<Wc>, Errno> {
    let mut wr_id = 0u64;
    let mut out = [0u32; 3];
    // SAFETY: cq is live; the out pointers are valid locals.
    let r = unsafe { sys::rdmacm_shim_rs_poll_cq(cq, &mut wr_id, out.as_mut_ptr()) };
    match r {
        0 => Ok(None),
        r if r < 0 => Err(Errno::EIO),
        _ => Ok(Some(Wc { wr_id, status: out[0], imm: if out[1] != 0 { Some(out[2]) } else { None } })),
    }
}

/// Arms the CQ for the next completion.
///
/// # Safety
/// `cq` is a live CQ.
pub unsafe fn req_notify(cq: *mut ibv_cq) -> Result<(), Errno> {
    // SAFETY: cq is live.
    check(unsafe { sys::rdmacm_shim_rs_req_notify_cq(cq) })
}

/// Reads one completion event from the channel (blocks unless the fd is readable).
///
/// # Safety
/// `ch` is a live completion channel.
pub unsafe fn get_cq_event(ch: *mut ibv_comp_channel) -> Result<(), Errno> {
    // SAFETY: ch is live.
    check(unsafe { sys::rdmacm_shim_rs_get_cq_event(ch) })
}

/// Acknowledges `n` completion events.
///
/// # Safety
/// `cq` is a live CQ and `n` events were read from its channel.
pub unsafe fn ack_cq_events(cq: *mut ibv_cq, n: u32) {
    // SAFETY: as above.
    unsafe { sys::rdmacm_shim_rs_ack_cq_events(cq, n) }
}

/// The file descriptor of a completion channel.
///
/// # Safety
/// `ch` is a live completion channel.
pub unsafe fn channel_fd(ch: *mut ibv_comp_channel) -> c_int {
    // SAFETY: ch is live.
    unsafe { sys::rdmacm_shim_rs_channel_fd(ch) }
}

/// Registers memory (local write, plus remote write when asked); returns the MR and its keys.
///
/// # Safety
/// `pd` is live; `[addr, addr+len)` stays allocated until the MR is deregistered.
pub unsafe fn reg_mr(pd: *mut ibv_pd, addr: *mut u8, len: usize, remote_write: bool) -> Result<(*mut IbvMr, u32, u32), Errno> {
    // SAFETY: as above.
    let mr = unsafe { sys::rdmacm_shim_rs_reg_mr(pd, addr as *mut c_void, len, remote_write as c_int) };
    if mr.is_null() {
        return Err(match Errno::last() {
            Errno::UnknownErrno => Errno::ENOMEM,
            e => e,
        });
    }
    let (mut l, mut r) = (0u32, 0u32);
    // SAFETY: mr was just created.
    unsafe { sys::rdmacm_shim_rs_mr_keys(mr, &mut l, &mut r) };
    Ok((mr, l, r))
}

/// Deregisters an MR (null is ignored).
///
/// # Safety
/// `mr` came from [`reg_mr`] and is no longer used by posted work.
pub unsafe fn dereg_mr(mr: *mut IbvMr) {
    if !mr.is_null() {
        // SAFETY: as above.
        unsafe { sys::rdmacm_shim_rs_dereg_mr(mr) };
    }
}

/// The device's max_qp_wr, or 0xFFFE when it cannot be queried.
///
/// # Safety
/// `ctx` is an open device.
pub unsafe fn max_qp_wr(ctx: *mut ibv_context) -> u32 {
    let mut caps = [0 as c_int; 4];
    // SAFETY: ctx is open; caps holds the 4 ints the shim writes.
    if unsafe { sys::rdmacm_shim_cm_device_caps(ctx, caps.as_mut_ptr()) } != 0 || caps[1] <= 0 {
        return 0xFFFE;
    }
    caps[1] as u32
}
