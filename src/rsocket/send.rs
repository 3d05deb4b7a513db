// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The send path: data into the peer's receive buffer by RDMA write with
//! immediate, staged in the registered send ring (or inline), and the
//! riomap descriptors the peer has not seen yet.
#![deny(unsafe_code)]

use nix::errno::Errno;
use std::ffi::c_int;
use super::blocking::run_blocking;
use super::state::*;
use super::verbs::{Data, Sge};
use super::wire::{self, msg_set, RsSge, IOMAP_ENTRY_SIZE, OP_DATA, OP_IOMAP_SGL, RS_SGL_SIZE};

impl Stream {
    /// Sends `length` bytes into the peer's buffer named by `t`, the
    /// current target entry as the caller read it (once: the peer may
    /// rewrite the entry at any time).
    pub(super) fn write_data(&mut self, data: Data<'_>, length: u32, t: RsSge) -> Result<(), Errno> {
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
        self.post_write_msg(data, msg_set(OP_DATA, length), addr, rkey)
    }

    /// Copies `data` into the send ring at the current position; returns the SGEs (1 or 2).
    pub(super) fn stage(&mut self, data: &[u8]) -> ([Sge; 2], usize) {
        let n = data.len() as u32;
        let room = self.sbuf_size - self.ssgl0_off;
        let off = self.ssgl0_off as usize;
        let sbuf = &self.ep().sbuf;
        if n <= room {
            // [ssgl0_off, +n) lies within sbuf_size of the send buffer.
            sbuf.write(off, data);
            let sge = sbuf.sge(off, n);
            self.ssgl0_off = if n < room { self.ssgl0_off + n } else { 0 };
            ([sge, Sge::default()], 1)
        } else {
            // The two pieces fit the end and the start of the send buffer.
            let second = n - room;
            sbuf.write(off, &data[..room as usize]);
            sbuf.write(0, &data[room as usize..]);
            let sges = [sbuf.sge(off, room), sbuf.sge(0, second)];
            self.ssgl0_off = second;
            (sges, 2)
        }
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

    // ---- data -----------------------------------------------------------------------

    /// Sends up to `buf.len()` bytes (never blocks).
    pub fn send(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        self.check_connected()?;
        self.send_iomaps()?;
        let len = buf.len();
        let mut left = len;
        let mut olen = RS_OLAP_START_SIZE;
        let mut off = 0usize;
        let mut res: Result<(), Errno> = Ok(());
        while left > 0 {
            if !self.can_send() {
                if let Err(e) = self.process_cq(Stream::conn_can_send) {
                    res = Err(e);
                    break;
                }
                if self.state & ST_WRITABLE == 0 {
                    res = Err(Errno::ECONNRESET);
                    break;
                }
            }
            let mut xfer = if (olen as usize) < left {
                let x = olen;
                if olen < RS_MAX_TRANSFER {
                    olen <<= 1;
                }
                x
            } else {
                left as u32
            };
            let t = self.target_get(self.target_sge);
            xfer = xfer.min(self.sbuf_bytes_avail).min(t.length);
            let chunk = &buf[off..off + xfer as usize];
            let r = if xfer <= self.sq_inline {
                self.write_data(Data::Inline(chunk), xfer, t)
            } else {
                let (sges, n) = self.stage(chunk);
                self.write_data(Data::Reg(&sges[..n]), xfer, t)
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
}

/// rsend: a blocking send sleeps without holding the socket, so that another thread's
/// rrecv on it keeps going.
pub fn send(h: &Handle, buf: &[u8], flags: c_int) -> Result<usize, Errno> {
    run_blocking(h, flags, |s, done| {
        let n = s.send(&buf[done..])?;
        Ok((n, done + n == buf.len()))
    })
}
