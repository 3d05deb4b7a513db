// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The verbs the rsocket data path uses, behind safe types: every foreign
//! call and raw pointer of the stream code is here.
//!
//! * [`Qp`]: the connection's QP, CQ and completion channel (owned by a
//!   [`CmId`], which it keeps alive); post, poll, arm, read CQ events.
//! * registered memory, in [`mem`]: [`RegBuf`] (the stream's buffers),
//!   [`UserMr`] (riomap's registrations), [`Sge`] (keyed scatter entries).
//!
//! Most calls go through the C shim (src/verbs_shim.c) because they are
//! static inline in <infiniband/verbs.h>.
// The one place of the rsocket code that may use unsafe (the parent denies it).
#![allow(unsafe_code)]

use crate::cma::api::{CmId, QpCaps, QpPtrs};
use nix::errno::Errno;
use std::ffi::c_int;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use crate::sys::rsock::set_nonblock;

mod mem;
pub use mem::{RegBuf, Sge, UserBuf, UserMr};
#[cfg(test)]
pub use mem::TestMem;

/// `IBV_WR_RDMA_WRITE`.
pub const WR_RDMA_WRITE: c_int = 0;
/// `IBV_WR_RDMA_WRITE_WITH_IMM`.
pub const WR_RDMA_WRITE_WITH_IMM: c_int = 1;
/// `IBV_WR_SEND`.
pub const WR_SEND: c_int = 2;
/// `IBV_SEND_INLINE`.
pub const SEND_INLINE: c_int = 8;
/// `IBV_SEND_SIGNALED`: [`Qp::post_send`] sets it unless told
/// [`UNSIGNALLED`] (a stream's QP signals only the sends that ask).
const SEND_SIGNALED: c_int = 2;
/// Ours, for [`Qp::post_send`]: the send goes without a completion of its
/// own (unless it fails); never passed to the device.
pub const UNSIGNALLED: c_int = 1 << 30;

/// What a send work request carries.
pub enum Data<'a> {
    /// Nothing (a zero-length write with immediate).
    None,
    /// Bytes copied by the provider while posting (IBV_SEND_INLINE).
    Inline(&'a [u8]),
    /// Registered memory (the device reads it later, checked by its key).
    Reg(&'a [Sge]),
}

/// cbindgen:ignore
mod sys {
    use crate::abi::cma::{ibv_comp_channel, ibv_cq, ibv_pd, ibv_qp};
    use crate::rsocket::verbs::{IbvAh, Sge, Wc};
    use std::ffi::c_int;
    extern "C" {
        pub(super) fn rdmacm_shim_rs_post_send(qp: *mut ibv_qp, wr_id: u64, sgl: *mut Sge, nsge: c_int, opcode: c_int, flags: c_int, imm: u32, raddr: u64, rkey: u32) -> c_int;
        pub(super) fn rdmacm_shim_rs_post_recv(qp: *mut ibv_qp, wr_id: u64, sgl: *mut Sge, nsge: c_int) -> c_int;
        pub(super) fn rdmacm_shim_rs_poll_cq_n(cq: *mut ibv_cq, n: c_int, out: *mut Wc) -> c_int;
        pub(super) fn rdmacm_shim_rs_req_notify_cq(cq: *mut ibv_cq) -> c_int;
        pub(super) fn rdmacm_shim_rs_get_cq_event(ch: *mut ibv_comp_channel) -> c_int;
        pub(super) fn rdmacm_shim_rs_wait_cq_event(ch: *mut ibv_comp_channel) -> c_int;
        pub(super) fn rdmacm_shim_rs_ack_cq_events(cq: *mut ibv_cq, n: u32);
        pub(super) fn rdmacm_shim_rs_channel_fd(ch: *mut ibv_comp_channel) -> c_int;
        pub(super) fn rdmacm_shim_rs_poll_cq_len(cq: *mut ibv_cq, wr_id: *mut u64, out: *mut u32) -> c_int;
        pub(super) fn rdmacm_shim_rs_post_ud_send(qp: *mut ibv_qp, wr_id: u64, sge: *mut Sge, flags: c_int, ah: *mut IbvAh, qpn: u32, qkey: u32) -> c_int;
        pub(super) fn rdmacm_shim_rs_qp_num(qp: *mut ibv_qp) -> u32;
        #[allow(clippy::too_many_arguments)]
        pub(super) fn rdmacm_shim_rs_create_ah(pd: *mut ibv_pd, port: u8, dgid: *const u8, sgid: *const u8, flow_label: u32, hop_limit: u8, traffic_class: u8, dlid: u16, slid: u16, sl: u8, rate: u8) -> *mut IbvAh;
        pub(super) fn rdmacm_shim_rs_destroy_ah(ah: *mut IbvAh) -> c_int;
    }
}

/// A verbs return value (0 or an errno value, or -1 with errno) as a
/// Result, by the library's one rule.
fn check(ret: c_int) -> Result<(), Errno> {
    crate::sys::verbs::check(ret)
}

/// One work completion (`struct rdmacm_rs_wc` of src/sys/verbs_shim.c: the
/// batch poll writes these directly).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Wc {
    pub wr_id: u64,
    pub status: u32,
    has_imm: u32,
    imm: u32,
    pad: u32,
}

impl Wc {
    /// (The fake fabric's completions; the real ones come from the shim.)
    #[cfg(test)]
    pub fn new(wr_id: u64, status: u32, imm: Option<u32>) -> Wc {
        Wc { wr_id, status, has_imm: imm.is_some() as u32, imm: imm.unwrap_or(0), pad: 0 }
    }

    /// The immediate data, if it carries any.
    #[inline]
    pub fn imm(&self) -> Option<u32> {
        if self.has_imm != 0 {
            Some(self.imm)
        } else {
            None
        }
    }
}

// The shim's struct rdmacm_rs_wc (it asserts the same of its side).
const _: () = assert!(std::mem::size_of::<Wc>() == 24 && std::mem::offset_of!(Wc, status) == 8 && std::mem::offset_of!(Wc, has_imm) == 12 && std::mem::offset_of!(Wc, imm) == 16);

/// Completions one poll takes at most ([`Qp::poll_many`]).
pub const POLL_BATCH: usize = 8;

/// The connection's QP, CQ and (non-blocking) completion channel: a real
/// one, or in unit tests one end of a fake fabric (see [`super::fake`];
/// that arm exists only with `cfg(test)`, so the library's `Qp` is the
/// real one alone and every match below has one arm).
pub struct Qp(QpKind);

enum QpKind {
    Real(RealQp),
    #[cfg(test)]
    Fake(super::fake::FakeQp),
}

/// A real QP.
struct RealQp {
    /// Keeps the QP, CQ and channel alive (the id destroys them).
    id: Arc<CmId>,
    p: QpPtrs,
    chan_fd: c_int,
    /// The channel is in blocking mode (see [`Qp::set_channel_blocking`]).
    chan_blocking: AtomicBool,
    /// CQ events read but not acknowledged yet (acked in batches, and
    /// before the CQ can go away: see Drop). Atomic: a stream's QP is
    /// shared by its sender and receiver (see `StreamCell`).
    unacked: AtomicU32,
    ack_batch: u32,
}

// SAFETY: the handles are used only through &self/&mut self of this owner;
// libibverbs objects may be used from any thread.
unsafe impl Send for RealQp {}
// SAFETY: a stream's sender and receiver post at the same time, and one of
// them polls the CQ, as upstream's threads do: libibverbs makes
// ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq and
// reading the completion channel safe from several threads (the provider
// locks its queues); the only field that changes, `unacked`, is atomic.
unsafe impl Sync for RealQp {}

#[cfg(test)]
use super::fake::{FakeData, FakeQp};

impl Qp {
    /// Creates the id's RC QP (see [`CmId::create_rc_qp`]) and makes its
    /// completion channel non-blocking, so that reading an event never
    /// sleeps: waiting is the caller's business, on [`Qp::channel_fd`].
    pub fn new(id: &Arc<CmId>, cqe: u32, caps: QpCaps) -> Result<(Qp, QpCaps), Errno> {
        RealQp::create_rc(id, cqe, caps)
    }

    /// Creates the id's UD QP (see [`CmId::create_ud_qp`]) over one CQ
    /// with a non-blocking completion channel, and arms the CQ.
    pub fn new_ud(id: &Arc<CmId>, cqe: u32, caps: QpCaps) -> Result<(Qp, QpCaps), Errno> {
        RealQp::create_ud(id, cqe, caps)
    }

    /// A QP over one end of a fake fabric (unit tests).
    #[cfg(test)]
    pub fn fake(q: FakeQp) -> Qp {
        Qp(QpKind::Fake(q))
    }

    /// The fake end under this QP, if it is one (unit tests).
    #[cfg(test)]
    pub fn as_fake(&self) -> Option<&FakeQp> {
        match &self.0 {
            QpKind::Fake(f) => Some(f),
            QpKind::Real(_) => None,
        }
    }

    /// Moves the QP to error (rdma_disconnect's effect on it): its posted
    /// receives flush, which wakes whoever sleeps on the CQ.
    pub fn stop(&self) -> Result<(), Errno> {
        match &self.0 {
            QpKind::Real(q) => q.stop(),
            #[cfg(test)]
            QpKind::Fake(f) => {
                f.stop();
                Ok(())
            }
        }
    }

    /// The completion channel's descriptor (readable when an armed CQ got
    /// a completion).
    pub fn channel_fd(&self) -> c_int {
        match &self.0 {
            QpKind::Real(q) => q.channel_fd(),
            #[cfg(test)]
            QpKind::Fake(f) => f.channel_fd(),
        }
    }

    /// Posts one send work request, signalled unless `flags` has
    /// [`UNSIGNALLED`].
    #[allow(clippy::too_many_arguments)]
    pub fn post_send(&self, wr_id: u64, data: Data<'_>, opcode: c_int, flags: c_int, imm: u32, raddr: u64, rkey: u32) -> Result<(), Errno> {
        let flags = if flags & UNSIGNALLED != 0 { flags & !UNSIGNALLED } else { flags | SEND_SIGNALED };
        match &self.0 {
            QpKind::Real(q) => q.post_send(wr_id, data, opcode, flags, imm, raddr, rkey),
            #[cfg(test)]
            QpKind::Fake(f) => {
                let mut two = [(0u64, 0u32, 0u32); 2];
                let d = match data {
                    Data::None => FakeData::None,
                    Data::Inline(b) => FakeData::Inline(b),
                    Data::Reg(s) => {
                        if s.len() > 2 {
                            return Err(Errno::EINVAL);
                        }
                        for (t, g) in two.iter_mut().zip(s) {
                            *t = (g.addr, g.length, g.lkey);
                        }
                        FakeData::Sges(&two[..s.len()])
                    }
                };
                f.post_send(wr_id, d, opcode, flags & SEND_SIGNALED != 0, imm, raddr, rkey)
            }
        }
    }

    /// Posts one receive work request (no SGE: only immediate data).
    pub fn post_recv(&self, wr_id: u64, sge: Option<Sge>) -> Result<(), Errno> {
        match &self.0 {
            QpKind::Real(q) => q.post_recv(wr_id, sge),
            #[cfg(test)]
            QpKind::Fake(f) => f.post_recv(wr_id, sge.map(|g| (g.addr, g.length, g.lkey))),
        }
    }

    /// Polls up to [`POLL_BATCH`] completions into `out` in one call;
    /// returns how many (0: the CQ is empty). Fewer than asked for means
    /// the CQ was empty after them.
    pub fn poll_many(&self, out: &mut [Wc; POLL_BATCH]) -> Result<usize, Errno> {
        match &self.0 {
            QpKind::Real(q) => q.poll_many(out),
            #[cfg(test)]
            QpKind::Fake(f) => {
                let mut n = 0;
                while n < POLL_BATCH {
                    let Some(w) = f.poll() else { break };
                    out[n] = Wc::new(w.wr_id, w.status, w.imm);
                    n += 1;
                }
                Ok(n)
            }
        }
    }

    /// Arms the CQ for the next completion.
    pub fn req_notify(&self) -> Result<(), Errno> {
        match &self.0 {
            QpKind::Real(q) => q.req_notify(),
            #[cfg(test)]
            QpKind::Fake(f) => {
                f.req_notify();
                Ok(())
            }
        }
    }

    /// Reads one CQ event if there is one (EAGAIN otherwise; never blocks,
    /// whatever the channel's mode).
    pub fn get_cq_event(&self) -> Result<(), Errno> {
        match &self.0 {
            QpKind::Real(q) => q.get_cq_event(),
            #[cfg(test)]
            QpKind::Fake(f) => f.get_cq_event(),
        }
    }

    /// Sleeps in reading one CQ event (one system call, as upstream's
    /// blocked calls): only on a channel in blocking mode, and by one
    /// thread at a time (the stream's reader). A cancellation of the thread
    /// in it comes back as ECANCELED (see `crate::sys::cancel`).
    pub fn wait_cq_event(&self) -> Result<(), Errno> {
        match &self.0 {
            QpKind::Real(q) => q.wait_cq_event(),
            #[cfg(test)]
            QpKind::Fake(f) => f.wait_cq_event(),
        }
    }

    /// Puts the completion channel in blocking mode (a reader may then
    /// sleep in [`Qp::wait_cq_event`]) or back in non-blocking mode.
    pub fn set_channel_blocking(&self, on: bool) -> Result<(), Errno> {
        match &self.0 {
            QpKind::Real(q) => q.set_channel_blocking(on),
            #[cfg(test)]
            QpKind::Fake(f) => {
                f.set_channel_blocking(on);
                Ok(())
            }
        }
    }

    /// Whether the completion channel is in blocking mode.
    pub fn channel_blocking(&self) -> bool {
        match &self.0 {
            QpKind::Real(q) => q.chan_blocking.load(Ordering::Acquire),
            #[cfg(test)]
            QpKind::Fake(f) => f.channel_blocking(),
        }
    }

    /// Registers a zeroed buffer of `len` bytes (local write, plus remote
    /// write when asked) on the id's PD.
    pub fn reg_buf(&self, len: usize, remote_write: bool) -> Result<RegBuf, Errno> {
        match &self.0 {
            QpKind::Real(q) => q.reg_buf(len, remote_write),
            #[cfg(test)]
            QpKind::Fake(f) => RegBuf::new_fake(f, len, remote_write),
        }
    }

    /// Registers a caller's buffer for riomap.
    pub fn reg_user(&self, b: UserBuf, remote_write: bool) -> Result<UserMr, Errno> {
        match &self.0 {
            QpKind::Real(q) => q.reg_user(b, remote_write),
            #[cfg(test)]
            QpKind::Fake(f) => Ok(UserMr::new_fake(f, b, remote_write)),
        }
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        match &self.0 {
            QpKind::Real(q) => q.qp_num(),
            #[cfg(test)]
            QpKind::Fake(_) => 0,
        }
    }

    /// Polls one completion with its length.
    pub fn poll_len(&self) -> Result<Option<UdWc>, Errno> {
        match &self.0 {
            QpKind::Real(q) => q.poll_len(),
            #[cfg(test)]
            QpKind::Fake(_) => Err(Errno::ENOSYS),
        }
    }

    /// Posts a send of `sge` (registered memory of this QP's PD) to the
    /// QP `qpn` behind `ah`, with the UDP port space's qkey.
    pub fn post_ud_send(&self, wr_id: u64, sge: Sge, inline: bool, ah: &Ah, qpn: u32) -> Result<(), Errno> {
        match &self.0 {
            QpKind::Real(q) => q.post_ud_send(wr_id, sge, inline, ah, qpn),
            #[cfg(test)]
            QpKind::Fake(_) => Err(Errno::ENOSYS),
        }
    }

    /// An address handle on this QP's PD and port for a resolved path.
    pub fn create_ah(&self, path: &crate::abi::cma::ibv_sa_path_rec) -> Result<Ah, Errno> {
        match &self.0 {
            QpKind::Real(q) => q.create_ah(path),
            #[cfg(test)]
            QpKind::Fake(_) => Err(Errno::ENOSYS),
        }
    }
}

impl RealQp {
    /// Creates the id's RC QP (see [`CmId::create_rc_qp`]) and makes its
    /// completion channel non-blocking, so that reading an event never
    /// sleeps: waiting is the caller's business, on [`Qp::channel_fd`].
    fn create_rc(id: &Arc<CmId>, cqe: u32, caps: QpCaps) -> Result<(Qp, QpCaps), Errno> {
        let got = id.create_rc_qp(cqe, caps, false)?;
        let p = id.qp_ptrs().ok_or(Errno::EINVAL)?;
        // SAFETY: the channel is live while the id lives (we hold it).
        let chan_fd = unsafe { sys::rdmacm_shim_rs_channel_fd(p.channel.as_ptr()) };
        set_nonblock(chan_fd, true)?;
        Ok((Qp(QpKind::Real(RealQp { id: id.clone(), p, chan_fd, chan_blocking: AtomicBool::new(false), unacked: AtomicU32::new(0), ack_batch: (caps.max_send_wr + caps.max_recv_wr).max(1) })), got))
    }

    /// Moves the QP to error (its posted receives flush).
    fn stop(&self) -> Result<(), Errno> {
        self.id.stop_qp()
    }

    /// The completion channel's descriptor (readable when an armed CQ got
    /// a completion).
    pub fn channel_fd(&self) -> c_int {
        self.chan_fd
    }

    /// Posts one send work request.
    #[allow(clippy::too_many_arguments)]
    pub fn post_send(&self, wr_id: u64, data: Data<'_>, opcode: c_int, flags: c_int, imm: u32, raddr: u64, rkey: u32) -> Result<(), Errno> {
        let mut one = [Sge::default()];
        let mut two = [Sge::default(); 2];
        let (p, n, flags) = match data {
            Data::None => (std::ptr::null_mut(), 0, flags & !SEND_INLINE),
            Data::Inline(b) => {
                one[0] = Sge { addr: b.as_ptr() as u64, length: u32::try_from(b.len()).map_err(|_| Errno::EINVAL)?, lkey: 0 };
                (one.as_mut_ptr(), 1, flags | SEND_INLINE)
            }
            Data::Reg(s) => {
                if s.len() > 2 {
                    return Err(Errno::EINVAL);
                }
                two[..s.len()].copy_from_slice(s);
                (two.as_mut_ptr(), s.len() as c_int, flags & !SEND_INLINE)
            }
        };
        // SAFETY: the QP is live (we hold its id). Inline bytes are borrowed
        // for the call and copied by the provider before it returns; keyed
        // SGEs are checked by the device against their registration.
        check(unsafe { sys::rdmacm_shim_rs_post_send(self.p.qp.as_ptr(), wr_id, p, n, opcode, flags, imm, raddr, rkey) })
    }

    /// Posts one receive work request (no SGE: only immediate data).
    pub fn post_recv(&self, wr_id: u64, sge: Option<Sge>) -> Result<(), Errno> {
        let mut s = [sge.unwrap_or_default()];
        let (p, n) = if sge.is_some() { (s.as_mut_ptr(), 1) } else { (std::ptr::null_mut(), 0) };
        // SAFETY: the QP is live; a keyed SGE is checked by the device.
        check(unsafe { sys::rdmacm_shim_rs_post_recv(self.p.qp.as_ptr(), wr_id, p, n) })
    }

    /// See [`Qp::poll_many`].
    pub fn poll_many(&self, out: &mut [Wc; POLL_BATCH]) -> Result<usize, Errno> {
        // SAFETY: the CQ is live; `out` holds POLL_BATCH entries of the
        // shim's struct (Wc is its mirror), which it fills up to the count
        // it returns.
        let r = unsafe { sys::rdmacm_shim_rs_poll_cq_n(self.p.cq.as_ptr(), POLL_BATCH as c_int, out.as_mut_ptr()) };
        if r < 0 {
            return Err(Errno::EIO);
        }
        Ok((r as usize).min(POLL_BATCH))
    }

    /// Arms the CQ for the next completion.
    pub fn req_notify(&self) -> Result<(), Errno> {
        // SAFETY: the CQ is live.
        check(unsafe { sys::rdmacm_shim_rs_req_notify_cq(self.p.cq.as_ptr()) })
    }

    /// Reads one CQ event if there is one (EAGAIN otherwise; never blocks:
    /// on a blocking channel it looks first).
    pub fn get_cq_event(&self) -> Result<(), Errno> {
        if self.chan_blocking.load(Ordering::Acquire) && !crate::sys::cancel::raw::readable(self.chan_fd) {
            return Err(Errno::EAGAIN);
        }
        // SAFETY: the channel is live (we hold its id); non-blocking, or
        // readable and read by the one thread its stream lets read it.
        check(unsafe { sys::rdmacm_shim_rs_get_cq_event(self.p.channel.as_ptr()) })?;
        self.count_event();
        Ok(())
    }

    /// Sleeps in reading one CQ event (see [`Qp::wait_cq_event`]).
    fn wait_cq_event(&self) -> Result<(), Errno> {
        // SAFETY: the channel is live (we hold its id); the shim reads one
        // event into its own locals.
        check(unsafe { sys::rdmacm_shim_rs_wait_cq_event(self.p.channel.as_ptr()) })?;
        self.count_event();
        Ok(())
    }

    fn set_channel_blocking(&self, on: bool) -> Result<(), Errno> {
        if self.chan_blocking.load(Ordering::Acquire) != on {
            set_nonblock(self.chan_fd, !on)?;
            self.chan_blocking.store(on, Ordering::Release);
        }
        Ok(())
    }

    /// One more event read: acknowledged in batches.
    fn count_event(&self) {
        if self.unacked.fetch_add(1, Ordering::AcqRel) + 1 >= self.ack_batch {
            self.ack();
        }
    }

    /// Acknowledges the events read so far (each exactly once: the count
    /// is taken out atomically).
    fn ack(&self) {
        let n = self.unacked.swap(0, Ordering::AcqRel);
        if n > 0 {
            // SAFETY: the n events were read from this CQ's channel.
            unsafe { sys::rdmacm_shim_rs_ack_cq_events(self.p.cq.as_ptr(), n) };
        }
    }

    /// Registers a zeroed buffer of `len` bytes (local write, plus remote
    /// write when asked) on the id's PD.
    pub fn reg_buf(&self, len: usize, remote_write: bool) -> Result<RegBuf, Errno> {
        RegBuf::new(&self.id, self.p.pd, len, remote_write)
    }

    /// Registers a caller's buffer for riomap.
    pub fn reg_user(&self, b: UserBuf, remote_write: bool) -> Result<UserMr, Errno> {
        UserMr::new(&self.id, self.p.pd, b, remote_write)
    }
}

/// One completion of a UD QP: its length and direction too.
pub struct UdWc {
    pub wr_id: u64,
    pub status: u32,
    pub byte_len: u32,
    pub recv: bool,
}

/// `RDMA_UDP_QKEY`: the qkey of the UDP port space.
pub const UDP_QKEY: u32 = 0x0123_4567;

/// The datagram side of [`Qp`]: a UD QP of a port-space-UDP id.
impl RealQp {
    /// Creates the id's UD QP (see [`CmId::create_ud_qp`]) over one CQ
    /// with a non-blocking completion channel, and arms the CQ (so that
    /// the first completion makes the channel readable).
    fn create_ud(id: &Arc<CmId>, cqe: u32, caps: QpCaps) -> Result<(Qp, QpCaps), Errno> {
        let got = id.create_ud_qp(cqe, caps, true)?;
        let p = id.qp_ptrs().ok_or(Errno::EINVAL)?;
        // SAFETY: the channel is live while the id lives (we hold it).
        let chan_fd = unsafe { sys::rdmacm_shim_rs_channel_fd(p.channel.as_ptr()) };
        set_nonblock(chan_fd, true)?;
        let q = RealQp { id: id.clone(), p, chan_fd, chan_blocking: AtomicBool::new(false), unacked: AtomicU32::new(0), ack_batch: (caps.max_send_wr + caps.max_recv_wr).max(1) };
        q.req_notify()?;
        Ok((Qp(QpKind::Real(q)), got))
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: the QP is live (we hold its id); reads one field.
        unsafe { sys::rdmacm_shim_rs_qp_num(self.p.qp.as_ptr()) }
    }

    /// Polls one completion with its length.
    pub fn poll_len(&self) -> Result<Option<UdWc>, Errno> {
        let mut wr_id = 0u64;
        let mut out = [0u32; 3];
        // SAFETY: the CQ is live; the out pointers are valid locals (3 words).
        let r = unsafe { sys::rdmacm_shim_rs_poll_cq_len(self.p.cq.as_ptr(), &mut wr_id, out.as_mut_ptr()) };
        match r {
            0 => Ok(None),
            r if r < 0 => Err(Errno::EIO),
            _ => Ok(Some(UdWc { wr_id, status: out[0], byte_len: out[1], recv: out[2] != 0 })),
        }
    }

    /// Posts a send of `sge` (registered memory of this QP's PD) to the
    /// QP `qpn` behind `ah`, with the UDP port space's qkey.
    pub fn post_ud_send(&self, wr_id: u64, sge: Sge, inline: bool, ah: &Ah, qpn: u32) -> Result<(), Errno> {
        let mut s = [sge];
        let flags = if inline { SEND_INLINE } else { 0 };
        // SAFETY: the QP and the AH are live (we hold the id, the caller
        // the AH); the SGE is keyed (checked by the device) or, inline,
        // copied by the provider before the call returns.
        check(unsafe { sys::rdmacm_shim_rs_post_ud_send(self.p.qp.as_ptr(), wr_id, s.as_mut_ptr(), flags, ah.ah.as_ptr(), qpn, UDP_QKEY) })
    }

    /// An address handle on this QP's PD and port for a resolved path.
    pub fn create_ah(&self, path: &crate::abi::cma::ibv_sa_path_rec) -> Result<Ah, Errno> {
        let dgid = gid_bytes(&path.dgid);
        let sgid = gid_bytes(&path.sgid);
        // SAFETY: the PD is live (we hold the id); the GIDs are 16-byte locals.
        let ah = unsafe {
            sys::rdmacm_shim_rs_create_ah(
                self.p.pd.as_ptr(),
                self.id.port_num(),
                dgid.as_ptr(),
                sgid.as_ptr(),
                u32::from_be(path.flow_label),
                path.hop_limit,
                path.traffic_class,
                u16::from_be(path.dlid),
                u16::from_be(path.slid),
                path.sl,
                path.rate,
            )
        };
        let ah = NonNull::new(ah).ok_or_else(|| match Errno::last() {
            Errno::UnknownErrno => Errno::ENOMEM,
            e => e,
        })?;
        Ok(Ah { _id: self.id.clone(), ah })
    }
}

/// Opaque `struct ibv_ah`.
#[repr(C)]
pub struct IbvAh {
    _private: [u8; 0],
}

/// An address handle; keeps the id (so the PD) alive; Drop destroys it.
pub struct Ah {
    _id: Arc<CmId>,
    ah: NonNull<IbvAh>,
}

// SAFETY: an owned handle; libibverbs AHs may be used from any thread.
unsafe impl Send for Ah {}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: created by rdmacm_shim_rs_create_ah, destroyed once.
        unsafe { sys::rdmacm_shim_rs_destroy_ah(self.ah.as_ptr()) };
    }
}

impl Drop for RealQp {
    fn drop(&mut self) {
        // Destroying a CQ waits for its events to be acknowledged.
        self.ack();
    }
}

/// The wake-up descriptors of sleeping threads live in `sys` (no
/// cancellation point on their hot paths).
pub use crate::sys::wake::Wake;

/// The 16 bytes of a GID.
pub fn gid_bytes(g: &crate::abi::cma::ibv_gid) -> [u8; 16] {
    // SAFETY: every member of the union is 16 bytes of plain data; any bit
    // pattern is a valid byte array.
    unsafe { g.raw }
}

/// poll(2) over `fds` without a cancellation point (the service threads'
/// sleeps, rpoll's look at ordinary descriptors): `sys`'s.
pub use crate::sys::cancel::raw::poll;
