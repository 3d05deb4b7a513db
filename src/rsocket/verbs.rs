// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The verbs the rsocket data path uses, behind safe types: every foreign
//! call and raw pointer of the stream code is here.
//!
//! * [`Qp`]: the connection's QP, CQ and completion channel (owned by a
//!   [`CmId`], which it keeps alive); post, poll, arm, read CQ events.
//! * [`RegBuf`]: a zeroed heap buffer registered with the device. It never
//!   moves; it is deregistered before it is freed, and keeps the id (so the
//!   PD) alive. Reads and writes go through bounds-checked copies, never
//!   through Rust references (the device writes into it concurrently).
//! * [`UserMr`]: a caller's buffer registered for riomap (the C contract
//!   keeps it allocated: [`UserBuf::new`] is the one unsafe promise).
//! * [`Sge`]: a scatter entry; only a [`RegBuf`] makes one with a key, so
//!   the device checks every access against a live registration.
//!
//! Most calls go through the C shim (src/verbs_shim.c) because they are
//! static inline in <infiniband/verbs.h>.
// The one place of the rsocket code that may use unsafe (the parent denies it).
#![allow(unsafe_code)]

use crate::cma::api::{CmId, QpCaps, QpPtrs};
use crate::abi::cma::ibv_pd;
use nix::errno::Errno;
use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use crate::sys::rsock::set_nonblock;

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

/// `struct ibv_sge`, made by [`RegBuf::sge`].
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct Sge {
    addr: u64,
    length: u32,
    lkey: u32,
}

impl Sge {
    pub fn addr(&self) -> u64 {
        self.addr
    }
    pub fn length(&self) -> u32 {
        self.length
    }
}

/// What a send work request carries.
pub enum Data<'a> {
    /// Nothing (a zero-length write with immediate).
    None,
    /// Bytes copied by the provider while posting (IBV_SEND_INLINE).
    Inline(&'a [u8]),
    /// Registered memory (the device reads it later, checked by its key).
    Reg(&'a [Sge]),
}

/// Opaque `struct ibv_mr`.
#[repr(C)]
struct IbvMr {
    _private: [u8; 0],
}

/// cbindgen:ignore
mod sys {
    use crate::abi::cma::{ibv_comp_channel, ibv_cq, ibv_pd, ibv_qp};
    use crate::rsocket::verbs::{IbvAh, IbvMr, Sge, Wc};
    use std::ffi::{c_int, c_void};
    extern "C" {
        pub(super) fn rdmacm_shim_rs_post_send(qp: *mut ibv_qp, wr_id: u64, sgl: *mut Sge, nsge: c_int, opcode: c_int, flags: c_int, imm: u32, raddr: u64, rkey: u32) -> c_int;
        pub(super) fn rdmacm_shim_rs_post_recv(qp: *mut ibv_qp, wr_id: u64, sgl: *mut Sge, nsge: c_int) -> c_int;
        pub(super) fn rdmacm_shim_rs_poll_cq_n(cq: *mut ibv_cq, n: c_int, out: *mut Wc) -> c_int;
        pub(super) fn rdmacm_shim_rs_req_notify_cq(cq: *mut ibv_cq) -> c_int;
        pub(super) fn rdmacm_shim_rs_get_cq_event(ch: *mut ibv_comp_channel) -> c_int;
        pub(super) fn rdmacm_shim_rs_wait_cq_event(ch: *mut ibv_comp_channel) -> c_int;
        pub(super) fn rdmacm_shim_rs_ack_cq_events(cq: *mut ibv_cq, n: u32);
        pub(super) fn rdmacm_shim_rs_channel_fd(ch: *mut ibv_comp_channel) -> c_int;
        pub(super) fn rdmacm_shim_rs_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, len: usize, remote_write: c_int) -> *mut IbvMr;
        pub(super) fn rdmacm_shim_rs_mr_keys(mr: *mut IbvMr, lkey: *mut u32, rkey: *mut u32);
        pub(super) fn rdmacm_shim_rs_dereg_mr(mr: *mut IbvMr) -> c_int;
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
use super::fake::{FakeData, FakeMr, FakeQp};

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
            QpKind::Fake(f) => {
                let (addr, len) = (b.ptr as u64, b.len);
                let mem = Arc::new(RawMem { ptr: b.ptr, len: b.len, _keep: b.keep });
                let mr = f.reg(mem, addr, remote_write);
                Ok(UserMr { rkey: mr.key(), reg: Reg::Fake(mr), addr, len })
            }
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
        // SAFETY: the PD is live (we hold the id); UserBuf's contract keeps
        // the memory allocated until the returned registration is dropped.
        let (mr, _, rkey) = unsafe { reg_mr(self.p.pd, b.ptr, b.len, remote_write)? };
        Ok(UserMr { reg: Reg::Real { _id: self.id.clone(), mr }, rkey, addr: b.ptr as u64, len: b.len })
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
        let got = id.create_ud_qp(cqe, caps)?;
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

/// # Safety
/// `pd` is live; `[addr, addr+len)` stays allocated until the MR is deregistered.
unsafe fn reg_mr(pd: NonNull<ibv_pd>, addr: *mut u8, len: usize, remote_write: bool) -> Result<(NonNull<IbvMr>, u32, u32), Errno> {
    // SAFETY: the caller's contract.
    let mr = unsafe { sys::rdmacm_shim_rs_reg_mr(pd.as_ptr(), addr as *mut c_void, len, remote_write as c_int) };
    let Some(mr) = NonNull::new(mr) else {
        return Err(match Errno::last() {
            Errno::UnknownErrno => Errno::ENOMEM,
            e => e,
        });
    };
    let (mut l, mut r) = (0u32, 0u32);
    // SAFETY: mr was just created.
    unsafe { sys::rdmacm_shim_rs_mr_keys(mr.as_ptr(), &mut l, &mut r) };
    Ok((mr, l, r))
}

/// A zeroed allocation of whole pages covering `len` bytes (freed with free()).
fn page_alloc(len: usize) -> Result<NonNull<u8>, Errno> {
    // SAFETY: sysconf has no memory arguments.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    };
    let total = len.div_ceil(page).checked_mul(page).ok_or(Errno::ENOMEM)?;
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: p is a valid out pointer; page is a power of two multiple of the pointer size.
    if unsafe { libc::posix_memalign(&mut p, page, total) } != 0 || p.is_null() {
        return Err(Errno::ENOMEM);
    }
    // SAFETY: p holds total bytes just allocated.
    unsafe { std::ptr::write_bytes(p as *mut u8, 0, total) };
    NonNull::new(p as *mut u8).ok_or(Errno::ENOMEM)
}

/// A registered, zeroed heap buffer (see the module comment).
pub struct RegBuf {
    reg: Reg,
    ptr: NonNull<u8>,
    len: usize,
    lkey: u32,
    rkey: u32,
}

/// A memory registration: a real MR (which keeps the id, so the PD,
/// alive) or, in unit tests, one on a fake fabric.
enum Reg {
    Real { _id: Arc<CmId>, mr: NonNull<IbvMr> },
    #[cfg(test)]
    Fake(FakeMr),
}

impl Reg {
    /// Deregisters; called exactly once, by the owner's Drop, before the
    /// memory may go.
    fn release(&self) {
        match self {
            // SAFETY: the MR came from reg_mr and is deregistered once.
            Reg::Real { mr, .. } => unsafe {
                sys::rdmacm_shim_rs_dereg_mr(mr.as_ptr());
            },
            #[cfg(test)]
            Reg::Fake(m) => m.release(),
        }
    }
}

// SAFETY: the buffer and its MR are owned by this value; access goes
// through bounds-checked raw copies, never through Rust references.
unsafe impl Send for RegBuf {}
// SAFETY: as the device writes into a registered buffer while we read
// other parts of it, a stream's sender, receiver and completion handler
// copy into and out of disjoint regions at once: the sender owns the
// send-ring space it reserved under the stream's lock until its write
// completes, the receiver owns received bytes until it consumes them, the
// control slots belong to whoever holds the stream's lock. Every access is
// a bounds-checked raw copy (no reference to the memory is ever made), so
// even a peer that breaks the protocol gets garbage, never memory outside
// the buffer.
unsafe impl Sync for RegBuf {}

impl RegBuf {
    fn new(id: &Arc<CmId>, pd: NonNull<ibv_pd>, len: usize, remote_write: bool) -> Result<RegBuf, Errno> {
        let len = len.max(1);
        // Whole pages, page-aligned (as upstream): with RDMAV_FORK_SAFE set,
        // libibverbs marks the registered pages MADV_DONTFORK, which must not
        // take heap data of others into a child's hole.
        let ptr = page_alloc(len)?;
        // SAFETY: the PD is live (we hold the id); the buffer stays until
        // Drop, which deregisters first.
        match unsafe { reg_mr(pd, ptr.as_ptr(), len, remote_write) } {
            Ok((mr, lkey, rkey)) => Ok(RegBuf { reg: Reg::Real { _id: id.clone(), mr }, ptr, len, lkey, rkey }),
            Err(e) => {
                // SAFETY: from posix_memalign above, never registered.
                unsafe { libc::free(ptr.as_ptr() as *mut c_void) };
                Err(e)
            }
        }
    }

    /// The buffer's address as the peer uses it in RDMA writes.
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        false
    }
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    #[inline]
    fn range(&self, off: usize, n: usize) -> *mut u8 {
        assert!(off.checked_add(n).is_some_and(|e| e <= self.len), "RegBuf access out of bounds");
        self.ptr.as_ptr().wrapping_add(off)
    }

    /// A keyed scatter entry for `[off, off+len)`.
    pub fn sge(&self, off: usize, len: u32) -> Sge {
        let p = self.range(off, len as usize);
        Sge { addr: p as u64, length: len, lkey: self.lkey }
    }

    /// Copies `data` into the buffer at `off`.
    pub fn write(&self, off: usize, data: &[u8]) {
        let p = self.range(off, data.len());
        // SAFETY: in bounds (checked); the buffer is ours; no Rust reference
        // to it exists.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
    }

    /// Copies from the buffer at `off` into `out`.
    pub fn read(&self, off: usize, out: &mut [u8]) {
        let p = self.range(off, out.len());
        // SAFETY: in bounds; the device may write concurrently into other
        // parts (what it wrote before the completion we saw is visible).
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
    }

    /// The 16 bytes at `off`, read once (the peer may rewrite them).
    #[inline]
    pub fn read16(&self, off: usize) -> [u8; 16] {
        let p = self.range(off, 16);
        if p as usize % 8 == 0 {
            // SAFETY: in bounds and 8-aligned (table entries are): two
            // volatile 8-byte loads (a volatile byte array is read byte by byte).
            let (a, b) = unsafe { (std::ptr::read_volatile(p as *const u64), std::ptr::read_volatile(p.wrapping_add(8) as *const u64)) };
            let mut out = [0u8; 16];
            out[..8].copy_from_slice(&a.to_ne_bytes());
            out[8..].copy_from_slice(&b.to_ne_bytes());
            out
        } else {
            // SAFETY: in bounds; a volatile read of 16 plain bytes (align 1).
            unsafe { std::ptr::read_volatile(p as *const [u8; 16]) }
        }
    }

    /// A native-endian u64 at `off`, read once (the peer may rewrite it).
    #[inline]
    pub fn read_u64(&self, off: usize) -> u64 {
        let p = self.range(off, 8);
        if p as usize % 8 == 0 {
            // SAFETY: in bounds and aligned: one volatile load.
            unsafe { std::ptr::read_volatile(p as *const u64) }
        } else {
            // SAFETY: in bounds; a volatile read of 8 plain bytes (align 1).
            u64::from_ne_bytes(unsafe { std::ptr::read_volatile(p as *const [u8; 8]) })
        }
    }

    /// A native-endian u32 at `off`, read once.
    #[inline]
    pub fn read_u32(&self, off: usize) -> u32 {
        let p = self.range(off, 4);
        if p as usize % 4 == 0 {
            // SAFETY: in bounds and aligned: one volatile load.
            unsafe { std::ptr::read_volatile(p as *const u32) }
        } else {
            // SAFETY: in bounds; a volatile read of 4 plain bytes (align 1).
            u32::from_ne_bytes(unsafe { std::ptr::read_volatile(p as *const [u8; 4]) })
        }
    }

    #[inline]
    pub fn write_u64(&self, off: usize, v: u64) {
        let p = self.range(off, 8);
        if p as usize % 8 == 0 {
            // SAFETY: in bounds and aligned: one volatile store.
            unsafe { std::ptr::write_volatile(p as *mut u64, v) }
        } else {
            // SAFETY: in bounds; a volatile write of 8 plain bytes.
            unsafe { std::ptr::write_volatile(p as *mut [u8; 8], v.to_ne_bytes()) }
        }
    }

    #[inline]
    pub fn write_u32(&self, off: usize, v: u32) {
        let p = self.range(off, 4);
        if p as usize % 4 == 0 {
            // SAFETY: in bounds and aligned: one volatile store.
            unsafe { std::ptr::write_volatile(p as *mut u32, v) }
        } else {
            // SAFETY: in bounds; a volatile write of 4 plain bytes.
            unsafe { std::ptr::write_volatile(p as *mut [u8; 4], v.to_ne_bytes()) }
        }
    }
}

// The stream protocol's decisions ([`super::wire`]) read received bytes
// and peer-written tables through this (bounds asserted as above).
impl super::wire::Buf for RegBuf {
    fn read(&self, off: usize, out: &mut [u8]) {
        RegBuf::read(self, off, out)
    }
    fn read_u32(&self, off: usize) -> u32 {
        RegBuf::read_u32(self, off)
    }
    fn read_u64(&self, off: usize) -> u64 {
        RegBuf::read_u64(self, off)
    }
    #[inline]
    fn read16(&self, off: usize) -> [u8; 16] {
        RegBuf::read16(self, off)
    }
}

impl Drop for RegBuf {
    fn drop(&mut self) {
        // The MR covers our buffer; after it is gone the device cannot
        // touch the memory, which is then freed once.
        self.reg.release();
        // SAFETY: from posix_memalign (page_alloc), freed once, no longer registered.
        unsafe { libc::free(self.ptr.as_ptr() as *mut c_void) };
    }
}

/// A caller's buffer handed to riomap.
pub struct UserBuf {
    ptr: *mut u8,
    len: usize,
    /// Unit tests: what keeps the memory allocated (see [`TestMem`]).
    #[cfg(test)]
    keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl UserBuf {
    /// # Safety
    /// `[ptr, ptr+len)` is memory of the caller that stays allocated until
    /// the registration made of it is dropped (riounmap or rclose); the
    /// peer may write into it.
    pub unsafe fn new(ptr: *mut u8, len: usize) -> UserBuf {
        UserBuf {
            ptr,
            len,
            #[cfg(test)]
            keep: None,
        }
    }

    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A riomap registration; Drop deregisters it.
pub struct UserMr {
    reg: Reg,
    rkey: u32,
    addr: u64,
    len: usize,
}

// SAFETY: owned registration handle; libibverbs MRs may be used from any thread.
unsafe impl Send for UserMr {}

impl UserMr {
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    pub fn addr(&self) -> u64 {
        self.addr
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for UserMr {
    fn drop(&mut self) {
        self.reg.release();
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

/// Registered memory as the fake fabric reaches it (unit tests): raw,
/// bounds-checked copies, as the device's DMA would make.
#[cfg(test)]
struct RawMem {
    ptr: *mut u8,
    len: usize,
    /// Keeps a test's riomap memory allocated while registered.
    _keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

// SAFETY: plain memory reached only through bounds-checked raw copies
// (as a device reaches it), from any thread.
#[cfg(test)]
unsafe impl Send for RawMem {}
// SAFETY: as above; concurrent copies into disjoint parts are what a
// device does to registered memory.
#[cfg(test)]
unsafe impl Sync for RawMem {}

#[cfg(test)]
impl super::fake::Mem for RawMem {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, off: usize, out: &mut [u8]) {
        assert!(off.checked_add(out.len()).is_some_and(|e| e <= self.len), "fake DMA out of bounds");
        // SAFETY: in bounds; the fabric uses a registration only while it
        // is registered, and its owner deregisters before freeing.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.wrapping_add(off), out.as_mut_ptr(), out.len()) };
    }
    fn write(&self, off: usize, data: &[u8]) {
        assert!(off.checked_add(data.len()).is_some_and(|e| e <= self.len), "fake DMA out of bounds");
        // SAFETY: as in read.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.wrapping_add(off), data.len()) };
    }
}

#[cfg(test)]
impl RegBuf {
    /// A zeroed page allocation registered on a fake fabric.
    fn new_fake(q: &FakeQp, len: usize, remote_write: bool) -> Result<RegBuf, Errno> {
        let len = len.max(1);
        let ptr = page_alloc(len)?;
        let mem = Arc::new(RawMem { ptr: ptr.as_ptr(), len, _keep: None });
        let mr = q.reg(mem, ptr.as_ptr() as u64, remote_write);
        let key = mr.key();
        Ok(RegBuf { reg: Reg::Fake(mr), ptr, len, lkey: key, rkey: key })
    }
}

/// Page-allocated memory a unit test hands to riomap (the registration
/// keeps it allocated too) and reads back.
#[cfg(test)]
pub struct TestMem(Arc<TestPages>);

#[cfg(test)]
struct TestPages {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: owned memory reached only through raw copies.
#[cfg(test)]
unsafe impl Send for TestPages {}
// SAFETY: as above.
#[cfg(test)]
unsafe impl Sync for TestPages {}

#[cfg(test)]
impl Drop for TestPages {
    fn drop(&mut self) {
        // SAFETY: from page_alloc, freed once (nothing registers it any more:
        // a registration holds this value alive).
        unsafe { libc::free(self.ptr.as_ptr() as *mut c_void) };
    }
}

#[cfg(test)]
impl TestMem {
    pub fn new(len: usize) -> TestMem {
        TestMem(Arc::new(TestPages { ptr: page_alloc(len).expect("alloc"), len }))
    }
    pub fn user_buf(&self) -> UserBuf {
        UserBuf { ptr: self.0.ptr.as_ptr(), len: self.0.len, keep: Some(self.0.clone()) }
    }
    pub fn bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.0.len];
        // SAFETY: the allocation holds len bytes; the fabric writes only
        // while a copy is made under its lock, and these are plain bytes.
        unsafe { std::ptr::copy_nonoverlapping(self.0.ptr.as_ptr(), v.as_mut_ptr(), v.len()) };
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Registered buffers own whole pages (fork safety with RDMAV_FORK_SAFE:
    /// libibverbs marks the pages of a registration MADV_DONTFORK, which must
    /// not cover anyone else's heap data), and start zeroed.
    #[test]
    fn buffers_are_whole_zeroed_pages() {
        // SAFETY: sysconf has no memory arguments.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        for len in [1usize, 32, page - 1, page, page + 1, 3 * page + 5] {
            let p = page_alloc(len).expect("alloc");
            assert_eq!(p.as_ptr() as usize % page, 0, "len {len}: not page-aligned");
            let total = len.div_ceil(page) * page;
            // SAFETY: page_alloc returned `total` bytes.
            let s = unsafe { std::slice::from_raw_parts(p.as_ptr(), total) };
            assert!(s.iter().all(|b| *b == 0), "len {len}: not zeroed");
            // SAFETY: from posix_memalign.
            unsafe { libc::free(p.as_ptr() as *mut c_void) };
        }
    }
}
