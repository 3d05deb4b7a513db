// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The send path: data into the peer's receive buffer by RDMA write with
//! immediate, staged in the registered send ring (or inline), and the
//! riomap descriptors the peer has not seen yet.
#![deny(unsafe_code)]

use nix::errno::Errno;
use std::ffi::c_int;
use super::blocking::run_blocking;
use super::cq::post_write_msg;
use super::guard::{Guard, Path};
use std::sync::Arc;
use super::state::*;
use super::verbs::{Data, RegBuf, Sge};
use super::wire::{self, msg_set, RsSge, IOMAP_ENTRY_SIZE, OP_DATA, OP_IOMAP_SGL, RS_SGL_SIZE};

impl Stream {
    /// Takes the send credit, send-buffer space and target space of a
    /// `length`-byte data message into the peer's buffer named by `t`, the
    /// current target entry as the caller read it (once: the peer may
    /// rewrite the entry at any time); returns where the data goes.
    pub(super) fn reserve_data(&mut self, length: u32, t: RsSge) -> (u64, u32) {
        self.sseq_no = self.sseq_no.wrapping_add(1);
        self.sqe_avail -= 1;
        if self.opts & OPT_MSG_SEND != 0 {
            self.sqe_avail -= 1;
        }
        self.sbuf_bytes_avail -= length;
        let i = self.target_sge;
        let (addr, rkey) = (t.addr, t.key);
        let t = t.advance(length);
        self.target_set(i, t);
        if t.length == 0 {
            self.target_sge = (i + 1) % RS_SGL_SIZE as usize;
        }
        (addr, rkey)
    }

    /// Takes the next `n` bytes of the send ring (in one or two pieces, at
    /// its end and its start); the caller fills them ([`Staged::fill`]).
    pub(super) fn reserve_stage(&mut self, n: u32) -> Staged {
        let room = self.sbuf_size - self.ssgl0_off;
        let off = self.ssgl0_off;
        if n <= room {
            self.ssgl0_off = if n < room { self.ssgl0_off + n } else { 0 };
        } else {
            self.ssgl0_off = n - room;
        }
        Staged { off, room }
    }

    /// Copies `data` into the send ring at the current position; returns the SGEs (1 or 2).
    pub(super) fn stage(&mut self, data: &[u8]) -> ([Sge; 2], usize) {
        let st = self.reserve_stage(data.len() as u32);
        st.fill(&self.ep().sbuf, data)
    }

    pub(super) fn wait_can_send(&mut self) -> Result<(), Errno> {
        if !self.can_send() {
            self.process_cq(Stream::conn_can_send)?;
            if self.state & ST_WRITABLE == 0 {
                return Err(Errno::ECONNRESET);
            }
        }
        Ok(())
    }

    /// Writes the riomap registrations the peer has not seen into its table.
    pub(super) fn send_iomaps(&mut self) -> Result<(), Errno> {
        while let Some(pos) = self.iomaps.iter().position(|m| !m.sent) {
            self.wait_can_send()?;
            let (offset, addr, rkey, len, index) = {
                let m = &self.iomaps[pos];
                (m.offset, m.mr.addr(), m.mr.rkey(), m.mr.len() as u32, m.index as u32)
            };
            let mut e = [0u8; IOMAP_ENTRY_SIZE as usize];
            if self.opts & OPT_SWAP_SGL == 0 {
                e[0..8].copy_from_slice(&offset.to_ne_bytes());
                e[8..16].copy_from_slice(&addr.to_ne_bytes());
                e[16..20].copy_from_slice(&rkey.to_ne_bytes());
                e[20..24].copy_from_slice(&len.to_ne_bytes());
            } else {
                e[0..8].copy_from_slice(&offset.swap_bytes().to_ne_bytes());
                e[8..16].copy_from_slice(&addr.swap_bytes().to_ne_bytes());
                e[16..20].copy_from_slice(&rkey.swap_bytes().to_ne_bytes());
                e[20..24].copy_from_slice(&len.swap_bytes().to_ne_bytes());
            }
            self.sseq_no = self.sseq_no.wrapping_add(1);
            self.sqe_avail -= 1;
            if self.opts & OPT_MSG_SEND != 0 {
                self.sqe_avail -= 1;
            }
            self.sbuf_bytes_avail -= IOMAP_ENTRY_SIZE;
            let raddr = wire::table_addr(self.remote_iomap.addr, index, IOMAP_ENTRY_SIZE);
            let rk = self.remote_iomap.key;
            let msg = msg_set(OP_IOMAP_SGL, index);
            let r = if self.sq_inline >= IOMAP_ENTRY_SIZE {
                self.post_write_msg(Data::Inline(&e), msg, raddr, rk)
            } else {
                let (sges, n) = self.stage(&e);
                self.post_write_msg(Data::Reg(&sges[..n]), msg, raddr, rk)
            };
            self.iomaps[pos].sent = true;
            r?;
        }
        Ok(())
    }

}

/// Send-ring space taken by [`Stream::reserve_stage`]: from `off`, `room`
/// bytes before the ring's end, the rest from its start.
#[derive(Clone, Copy)]
pub(super) struct Staged {
    off: u32,
    room: u32,
}

impl Staged {
    /// Copies `data` into the space (the bytes are the sender's until the
    /// write completes); returns the SGEs (1 or 2).
    pub(super) fn fill(&self, sbuf: &RegBuf, data: &[u8]) -> ([Sge; 2], usize) {
        let n = data.len() as u32;
        let off = self.off as usize;
        if n <= self.room {
            // [off, +n) lies within sbuf_size of the send buffer.
            sbuf.write(off, data);
            ([sbuf.sge(off, n), Sge::default()], 1)
        } else {
            // The two pieces fit the end and the start of the send buffer.
            let room = self.room as usize;
            sbuf.write(off, &data[..room]);
            sbuf.write(0, &data[room..]);
            ([sbuf.sge(off, self.room), sbuf.sge(0, n - self.room)], 2)
        }
    }
}

/// One data message staged in the send ring: reserved under the state
/// lock, copied and posted without it.
struct Write {
    ep: Arc<Ep>,
    opts: u32,
    addr: u64,
    rkey: u32,
    stage: Staged,
    /// The run of unsignalled sends it ends (taken with the state locked:
    /// they were posted before it, and a control message posted while
    /// this write is copied finds no run to end).
    run: u64,
}

impl Write {
    /// Copies `chunk` into its staged space and posts it (signalled).
    fn post(&self, chunk: &[u8]) -> Result<(), Errno> {
        let msg = msg_set(OP_DATA, chunk.len() as u32);
        let (sges, n) = self.stage.fill(&self.ep.sbuf, chunk);
        post_write_msg(&self.ep, self.opts, Data::Reg(&sges[..n]), msg, self.addr, self.rkey, Some(self.run))
    }
}

/// Sends up to `buf.len()` bytes (never blocks), under the send path's
/// lock: the credits and space are taken under the state's lock, the
/// bytes copied and posted with it released, so a receive on the stream
/// goes on meanwhile (a chunk small enough to go inline is posted with
/// the state locked).
/// `olen` is the call's next chunk size ([`next_chunk`]; 0 until its first
/// chunk, [`Stream::first_chunk`]): it keeps growing across the call's
/// sleeps, as upstream's does (a send that waited for room mid-message
/// does not start again from small chunks).
fn send_some(s: &mut Guard<'_>, buf: &[u8], olen: &mut u32) -> Result<usize, Errno> {
    s.check_connected()?;
    if *olen == 0 {
        // Decided once per call, before it takes any completion or waits
        // for room: what was on its way when the call came.
        *olen = s.first_chunk();
    }
    s.send_iomaps()?;
    let len = buf.len();
    let mut left = len;
    let mut off = 0usize;
    let mut res: Result<(), Errno> = Ok(());
    while left > 0 {
        if let Err(e) = s.wait_can_send() {
            res = Err(e);
            break;
        }
        let t = s.target_get(s.target_sge);
        let xfer = next_chunk(olen, left).min(s.sbuf_bytes_avail).min(t.length);
        if s.ep.is_none() {
            res = Err(Errno::ENOTCONN);
            break;
        }
        let chunk = &buf[off..off + xfer as usize];
        let r = if xfer <= s.sq_inline {
            // Inline (a few bytes, carried in the work request): posted
            // with the state locked, as a small receive copies; less work
            // than letting go of the lock and taking it again. Unsignalled
            // while the run allows ([`super::signal`]).
            let (addr, rkey) = s.reserve_data(xfer, t);
            let run = if s.opts & OPT_MSG_SEND == 0 && s.unsig.may_skip(xfer, s.sq_size - RS_QP_CTRL_SIZE, s.sbuf_size, RS_SNDLOWAT) {
                s.unsig.skip(xfer);
                None
            } else {
                Some(s.unsig.take())
            };
            post_write_msg(s.ep(), s.opts, Data::Inline(chunk), msg_set(OP_DATA, xfer), addr, rkey, run)
        } else {
            let stage = s.reserve_stage(xfer);
            let (addr, rkey) = s.reserve_data(xfer, t);
            let w = Write { ep: Arc::clone(s.ep_arc()), opts: s.opts, addr, rkey, stage, run: s.unsig.take() };
            s.unlocked(|| w.post(chunk)).and_then(|()| s.still_usable())
        };
        if let Err(e) = r {
            res = Err(e);
            break;
        }
        left -= xfer as usize;
        off += xfer as usize;
    }
    match res {
        Err(e) if left == len => Err(e),
        _ => Ok(len - left),
    }
}

/// rsend: a blocking send sleeps without holding the socket, so that another thread's
/// rrecv on it keeps going.
pub fn send(h: &Handle, buf: &[u8], flags: c_int) -> Result<usize, Errno> {
    let mut olen = 0;
    run_blocking(h, Path::Send, flags, |s, done| {
        let n = send_some(s, &buf[done..], &mut olen)?;
        Ok((n, done + n == buf.len()))
    })
}
