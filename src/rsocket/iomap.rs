// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! riomap, riounmap and riowrite: the caller's buffers registered for the
//! peer's direct writes, and direct writes into the peer's.
#![deny(unsafe_code)]

use nix::errno::Errno;
use std::ffi::c_int;
use super::blocking::run_blocking;
use super::guard::Path;
use super::state::*;
use super::verbs::{self, Data, UserBuf};
use super::wire::{self, msg_set, RsSge, IOMAP_ENTRY_SIZE, OP_IOMAP_SGL, OP_WRITE};

impl Stream {
    /// riomap: registers the caller's buffer; with PROT_WRITE the peer may riowrite into it.
    pub fn iomap(&mut self, buf: UserBuf, prot: c_int, offset: i64) -> Result<i64, Errno> {
        let (addr, len) = (buf.addr(), buf.len());
        if self.ep.is_none() || prot & !libc::PROT_WRITE != 0 || len > u32::MAX as usize {
            return Err(Errno::EINVAL);
        }
        let write = prot & libc::PROT_WRITE != 0;
        let index = if write { self.iomaps.free_slot()? } else { -1 };
        let mr = self.ep().qp.reg_user(buf, write)?;
        let offset = if offset == -1 { addr as i64 } else { offset };
        self.iomaps.add(offset as u64, mr, index);
        Ok(offset)
    }

    /// riounmap (a write the peer may still target fails on its side).
    pub fn iounmap(&mut self, addr: u64, len: usize) -> Result<(), Errno> {
        self.iomaps.remove(addr, len)
    }

    /// An entry of the peer-written mapping table covering `offset`.
    pub(super) fn find_iomap(&self, offset: u64) -> Option<(u64, RsSge)> {
        self.iomaps.find(&self.ep().target, offset)
    }

    /// Writes the riomap registrations the peer has not seen into its table.
    #[inline]
    pub(super) fn send_iomaps(&mut self) -> Result<(), Errno> {
        if self.iomaps.next_unsent().is_none() {
            return Ok(());
        }
        self.send_unsent_iomaps()
    }

    #[inline(never)]
    fn send_unsent_iomaps(&mut self) -> Result<(), Errno> {
        while let Some(pos) = self.iomaps.next_unsent() {
            self.wait_can_send()?;
            let e = self.iomaps.entry(pos, self.ctl.opts() & OPT_SWAP_SGL != 0);
            self.tx.reserve_msg(self.ctl.opts(), IOMAP_ENTRY_SIZE);
            let msg = msg_set(OP_IOMAP_SGL, e.index);
            let r = if self.tx.sq_inline() >= IOMAP_ENTRY_SIZE {
                self.post_write_msg(Data::Inline(&e.bytes), msg, e.raddr, e.rkey)
            } else {
                let ep = self.ep_arc().clone();
                let (sges, n) = self.tx.stage(&ep.sbuf, &e.bytes);
                self.post_write_msg(Data::Reg(&sges[..n]), msg, e.raddr, e.rkey)
            };
            self.iomaps.mark_sent(pos);
            r?;
        }
        Ok(())
    }

    /// riowrite: RDMA-writes `buf` at `offset` of the peer's riomap'ed
    /// buffer; `olen`, the call's next chunk size, grows across its sleeps.
    pub fn iowrite(&mut self, buf: &[u8], mut offset: u64, olen: &mut u32) -> Result<usize, Errno> {
        self.check_connected()?;
        self.send_iomaps()?;
        let count = buf.len();
        let mut left = count;
        let mut off = 0usize;
        let mut res: Result<(), Errno> = Ok(());
        let mut iom: Option<(u64, RsSge)> = None;
        while left > 0 {
            match iom {
                Some((o, e)) if wire::iomap_covers(o, &e, offset) => {}
                _ => {
                    iom = self.find_iomap(offset);
                }
            }
            let Some((ioff, isge)) = iom else { break };
            if let Err(e) = self.wait_can_send() {
                res = Err(e);
                break;
            }
            let (raddr, room) = wire::iomap_target(ioff, &isge, offset);
            let xfer = next_chunk(olen, left).min(self.tx.avail_bytes()).min(room);
            let chunk = &buf[off..off + xfer as usize];
            self.tx.reserve_write(xfer);
            // Signalled, posted with the state locked: it ends the run of
            // unsignalled sends ([`super::signal`]).
            let wr = msg_set(OP_WRITE, xfer) as u64 | self.tx.take_run();
            let r = if xfer <= self.tx.sq_inline() {
                self.ep().qp.post_send(wr, Data::Inline(chunk), verbs::WR_RDMA_WRITE, 0, 0, raddr, isge.key)
            } else {
                // The staged copy lives in the registered send ring until completion.
                let ep = self.ep.as_deref().expect("rsocket endpoint");
                let (sges, n) = self.tx.stage(&ep.sbuf, chunk);
                ep.qp.post_send(wr, Data::Reg(&sges[..n]), verbs::WR_RDMA_WRITE, 0, 0, raddr, isge.key)
            };
            if let Err(e) = r {
                res = Err(e);
                break;
            }
            left -= xfer as usize;
            off += xfer as usize;
            offset += xfer as u64;
        }
        match res {
            Err(e) if left == count => Err(e),
            _ => Ok(count - left),
        }
    }
}

/// riowrite, sleeping without holding the socket when it blocks.
pub fn iowrite(h: &Handle, buf: &[u8], offset: u64, flags: c_int) -> Result<usize, Errno> {
    let mut olen = RS_OLAP_START_SIZE;
    run_blocking(h, Path::Send, flags, |s, done| {
        let n = s.iowrite(&buf[done..], offset + done as u64, &mut olen)?;
        Ok((n, (n == 0 && !buf.is_empty()) || done + n == buf.len()))
    })
}
