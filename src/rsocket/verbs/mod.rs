// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The verbs the rsocket data path uses, behind safe types, over the
//! library's one verbs data path (`crate::sys::verbs::data`, shared with
//! the Rust API): the raw pointers of the stream code stay there.
//!
//! * [`Qp`]: the connection's QP, CQ and completion channel (owned by a
//!   [`CmId`], which it keeps alive); post, poll, arm, read CQ events.
//! * registered memory, in [`mem`]: [`RegBuf`] (the stream's buffers),
//!   [`UserMr`] (riomap's registrations), [`Sge`] (keyed scatter entries).
// The one place of the rsocket code that may use unsafe (the parent denies
// it): vouching for the id's verbs objects, and registered memory (mem).
#![allow(unsafe_code)]

use crate::cma::api::{CmId, QpCaps};
use crate::sys::verbs::data::{self as dp, DataQp};
use nix::errno::Errno;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use crate::sys::rsock::set_nonblock;

mod mem;
pub use mem::{RegBuf, Sge, UserBuf, UserMr};
#[cfg(test)]
pub use mem::TestMem;

pub use dp::{Data, SEND_INLINE, WR_RDMA_WRITE, WR_RDMA_WRITE_WITH_IMM, WR_SEND};
/// `IBV_SEND_SIGNALED`: [`Qp::post_send`] sets it unless told
/// [`UNSIGNALLED`] (a stream's QP signals only the sends that ask).
use dp::SEND_SIGNALED;
/// Ours, for [`Qp::post_send`]: the send goes without a completion of its
/// own (unless it fails); never passed to the device.
pub const UNSIGNALLED: c_int = 1 << 30;

/// One work completion as a stream's batch poll reads it.
pub use dp::IbvWc as Wc;

/// Completions one poll takes at most ([`Qp::poll_many`]).
pub use dp::POLL_BATCH;

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
    q: DataQp,
    chan_fd: c_int,
    /// The channel is in blocking mode (see [`Qp::set_channel_blocking`]).
    chan_blocking: AtomicBool,
    /// CQ events read but not acknowledged yet (acked in batches, and
    /// before the CQ can go away: see Drop). Atomic: a stream's QP is
    /// shared by its sender and receiver (see `StreamCell`).
    unacked: AtomicU32,
    ack_batch: u32,
}

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
                            *t = (g.addr(), g.length(), g.lkey());
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
            QpKind::Fake(f) => f.post_recv(wr_id, sge.map(|g| (g.addr(), g.length(), g.lkey()))),
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

/// The id's verbs objects, vouched for: the id (which the caller keeps in
/// the same `RealQp`) destroys them only when it goes.
fn data_qp(id: &CmId) -> Result<DataQp, Errno> {
    let p = id.qp_ptrs().ok_or(Errno::EINVAL)?;
    // SAFETY: the QP, CQ, channel and PD of the id, live while it lives
    // (crate::cma::api); the RealQp holding this value holds the id, and
    // every registration and AH made through it holds the id too.
    Ok(unsafe { DataQp::new(p.qp, p.cq, p.channel, p.pd) })
}

impl RealQp {
    /// A QP over the id's objects, its channel non-blocking.
    fn over(id: &Arc<CmId>, caps: QpCaps) -> Result<RealQp, Errno> {
        let q = data_qp(id)?;
        let chan_fd = q.channel_fd();
        set_nonblock(chan_fd, true)?;
        Ok(RealQp { id: id.clone(), q, chan_fd, chan_blocking: AtomicBool::new(false), unacked: AtomicU32::new(0), ack_batch: (caps.max_send_wr + caps.max_recv_wr).max(1) })
    }

    /// Creates the id's RC QP (see [`CmId::create_rc_qp`]) and makes its
    /// completion channel non-blocking, so that reading an event never
    /// sleeps: waiting is the caller's business, on [`Qp::channel_fd`].
    fn create_rc(id: &Arc<CmId>, cqe: u32, caps: QpCaps) -> Result<(Qp, QpCaps), Errno> {
        let got = id.create_rc_qp(cqe, caps, false)?;
        Ok((Qp(QpKind::Real(RealQp::over(id, caps)?)), got))
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
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn post_send(&self, wr_id: u64, data: Data<'_>, opcode: c_int, flags: c_int, imm: u32, raddr: u64, rkey: u32) -> Result<(), Errno> {
        self.q.post_send(wr_id, data, opcode, flags, imm, raddr, rkey)
    }

    /// Posts one receive work request (no SGE: only immediate data).
    #[inline]
    pub fn post_recv(&self, wr_id: u64, sge: Option<Sge>) -> Result<(), Errno> {
        match sge {
            Some(g) => self.q.post_recv(wr_id, &[g]),
            None => self.q.post_recv(wr_id, &[]),
        }
    }

    /// See [`Qp::poll_many`].
    #[inline]
    pub fn poll_many(&self, out: &mut [Wc; POLL_BATCH]) -> Result<usize, Errno> {
        self.q.poll_batch(out)
    }

    /// Arms the CQ for the next completion.
    pub fn req_notify(&self) -> Result<(), Errno> {
        self.q.req_notify(false)
    }

    /// Reads one CQ event if there is one (EAGAIN otherwise; never blocks:
    /// on a blocking channel it looks first).
    pub fn get_cq_event(&self) -> Result<(), Errno> {
        if self.chan_blocking.load(Ordering::Acquire) && !crate::sys::cancel::raw::readable(self.chan_fd) {
            return Err(Errno::EAGAIN);
        }
        // Non-blocking, or readable and read by the one thread its stream
        // lets read it.
        self.q.get_cq_event()?;
        self.count_event();
        Ok(())
    }

    /// Sleeps in reading one CQ event (see [`Qp::wait_cq_event`]).
    fn wait_cq_event(&self) -> Result<(), Errno> {
        self.q.wait_cq_event()?;
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
            self.q.ack_cq_events(n);
        }
    }

    /// Registers a zeroed buffer of `len` bytes (local write, plus remote
    /// write when asked) on the id's PD.
    pub fn reg_buf(&self, len: usize, remote_write: bool) -> Result<RegBuf, Errno> {
        RegBuf::new(&self.id, &self.q, len, remote_write)
    }

    /// Registers a caller's buffer for riomap.
    pub fn reg_user(&self, b: UserBuf, remote_write: bool) -> Result<UserMr, Errno> {
        UserMr::new(&self.id, &self.q, b, remote_write)
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
        let q = RealQp::over(id, caps)?;
        q.req_notify()?;
        Ok((Qp(QpKind::Real(q)), got))
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        self.q.qp_num()
    }

    /// Polls one completion with its length.
    pub fn poll_len(&self) -> Result<Option<UdWc>, Errno> {
        let mut one = [dp::Wc::default()];
        match self.q.poll(&mut one).map_err(|_| Errno::EIO)? {
            0 => Ok(None),
            _ => Ok(Some(UdWc { wr_id: one[0].wr_id, status: one[0].status, byte_len: one[0].byte_len, recv: one[0].opcode & WC_RECV != 0 })),
        }
    }

    /// Posts a send of `sge` (registered memory of this QP's PD) to the
    /// QP `qpn` behind `ah`, with the UDP port space's qkey.
    pub fn post_ud_send(&self, wr_id: u64, sge: Sge, inline: bool, ah: &Ah, qpn: u32) -> Result<(), Errno> {
        let flags = if inline { SEND_INLINE } else { 0 };
        self.q.post_ud_send(wr_id, &[sge], flags, &ah.ah, qpn, UDP_QKEY, None)
    }

    /// An address handle on this QP's PD and port for a resolved path.
    pub fn create_ah(&self, path: &crate::abi::cma::ibv_sa_path_rec) -> Result<Ah, Errno> {
        let ah = self.q.create_ah_from_path(self.id.port_num(), path)?;
        Ok(Ah { ah, _id: self.id.clone() })
    }
}

/// `IBV_WC_RECV`: the receive opcodes have this bit.
const WC_RECV: u32 = 128;

/// An address handle; keeps the id (so the PD) alive; dropping it
/// destroys the handle, then releases the id.
pub struct Ah {
    ah: dp::Ah,
    _id: Arc<CmId>,
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

/// The 16 bytes of a GID: `sys`'s.
pub use crate::sys::verbs::gid_bytes;

/// poll(2) over `fds` without a cancellation point (the service threads'
/// sleeps, rpoll's look at ordinary descriptors): `sys`'s.
pub use crate::sys::cancel::raw::poll;
