// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A stream's send half ([`SendHalf`]): the send queue's entries, the
//! registered send ring, the peer's credits, the control-message slots and
//! the run of unsignalled sends. The stream's sends reserve here (under the
//! state's lock) and their completions give back here; nothing else
//! changes these counters.
//!
//! Invariants it keeps:
//! * Send-queue entries: `sqe_avail` (free for data messages) plus
//!   `ctrl_max_seqno - ctrl_seqno` (control slots free, of
//!   [`RS_QP_CTRL_SIZE`]) plus the entries posted and not completed is
//!   `sq_size` ([`SendHalf::all_done`]: nothing in flight); a data message
//!   takes one entry, two with [`OPT_MSG_SEND`] (the write and the send
//!   carrying its word), and its completion gives them back.
//! * The ring: `sbuf_bytes_avail <= sbuf_size` are the ring's bytes not
//!   staged or on their way; `ssgl0_off < sbuf_size` is where the next
//!   staging starts, wrapping at `sbuf_size` ([`SendHalf::reserve_stage`]).
//!   The control slots lie past `sbuf_size` in the registered buffer.
//! * Credits: a data message goes only while `sseq_no != sseq_comp` (the
//!   peer bounds our message sequence by its posted receives).
//! * Target: `target_sge` is the entry of the peer-written table
//!   (`RS_SGL_SIZE` entries) the next data message goes into.
//! * Unsignalled sends: the run in `unsig` is given back by the next
//!   signalled request ([`super::signal`]), which takes it here.
#![deny(unsafe_code)]

use super::signal::{self, Unsignalled};
use super::verbs::{RegBuf, Sge};
use super::wire::{msg_data, msg_op, RsSge, IOMAP_ENTRY_SIZE, OPT_MSG_SEND, OP_CTRL, OP_IOMAP_SGL, OP_SGL, RS_SGL_SIZE, RS_SNDLOWAT, WR_MSG_SEND};

pub(super) const RS_OLAP_START_SIZE: u32 = 2048;

pub(super) const RS_MAX_TRANSFER: u32 = 65536;

/// Send-queue entries kept for control messages.
pub(super) const RS_QP_CTRL_SIZE: u32 = 4;

pub(super) const RS_MAX_CTRL_MSG: u32 = 16;

/// The size of a send's next message: `olen` bytes while more than that
/// is left, `olen` doubling up to [`RS_MAX_TRANSFER`] (the first messages
/// go out early, the later ones large); the rest once it fits. `olen`
/// must not be 0 (a send holds 0 only until its first chunk is decided,
/// [`SendHalf::first_chunk`], before it comes here).
pub(super) fn next_chunk(olen: &mut u32, left: usize) -> u32 {
    if (*olen as usize) < left {
        let x = *olen;
        if *olen < RS_MAX_TRANSFER {
            *olen <<= 1;
        }
        x
    } else {
        left as u32
    }
}

/// Send-queue entries a message takes under the connection's options.
#[inline]
fn msg_sqes(opts: u32) -> u32 {
    if opts & OPT_MSG_SEND == 0 {
        1
    } else {
        2
    }
}

/// The send half of one stream (see the module comment for its invariants).
pub(super) struct SendHalf {
    sbuf_size: u32,
    sq_size: u32,
    sq_inline: u32,
    ctrl_seqno: u32,
    ctrl_max_seqno: u32,
    sseq_no: u16,
    sseq_comp: u16,
    target_sge: usize,
    sbuf_bytes_avail: u32,
    ssgl0_off: u32,
    sqe_avail: u32,
    /// Sends posted without a completion, given back with the next
    /// signalled request ([`super::signal`]).
    unsig: Unsignalled,
}

impl SendHalf {
    /// A send half of these sizes, before its endpoint exists.
    pub(super) fn new(sbuf_size: u32, sq_size: u32, sq_inline: u32) -> SendHalf {
        SendHalf {
            sbuf_size,
            sq_size,
            sq_inline,
            ctrl_seqno: 0,
            ctrl_max_seqno: RS_QP_CTRL_SIZE,
            sseq_no: 0,
            sseq_comp: 0,
            target_sge: 0,
            sbuf_bytes_avail: 0,
            ssgl0_off: 0,
            sqe_avail: 0,
            unsig: Unsignalled::default(),
        }
    }

    /// What a stream accepted on a listener takes from the listener's send
    /// half: its sizes and control slots.
    pub(super) fn inherit(&self) -> SendHalf {
        SendHalf { ctrl_max_seqno: self.ctrl_max_seqno, ..SendHalf::new(self.sbuf_size, self.sq_size, self.sq_inline) }
    }

    // ---- sizes (set before the endpoint exists) ---------------------------------------

    #[inline]
    pub(super) fn sbuf_size(&self) -> u32 {
        self.sbuf_size
    }

    #[inline]
    pub(super) fn sq_size(&self) -> u32 {
        self.sq_size
    }

    #[inline]
    pub(super) fn sq_inline(&self) -> u32 {
        self.sq_inline
    }

    pub(super) fn set_sbuf_size(&mut self, v: u32) {
        self.sbuf_size = v;
    }

    pub(super) fn set_sq_size(&mut self, v: u32) {
        self.sq_size = v;
    }

    pub(super) fn set_sq_inline(&mut self, v: u32) {
        self.sq_inline = v;
    }

    /// The registered send buffer's length: the ring, and past it the
    /// control slots when control messages do not go inline.
    pub(super) fn sbuf_len(&self) -> u32 {
        if self.sq_inline < RS_MAX_CTRL_MSG {
            self.sbuf_size + RS_MAX_CTRL_MSG * RS_QP_CTRL_SIZE
        } else {
            self.sbuf_size
        }
    }

    /// The endpoint exists: the whole ring and the queue's entries but the
    /// control slots are free.
    pub(super) fn start(&mut self) {
        self.ssgl0_off = 0;
        self.sbuf_bytes_avail = self.sbuf_size;
        self.sqe_avail = self.sq_size - self.ctrl_max_seqno;
        self.unsig = Unsignalled::default();
    }

    // ---- credits and control slots ------------------------------------------------------

    /// The peer's credit: our messages may go up to sequence number `c`.
    #[inline]
    pub(super) fn set_credits(&mut self, c: u16) {
        self.sseq_comp = c;
    }

    #[inline]
    pub(super) fn ctrl_avail(&self) -> bool {
        self.ctrl_seqno != self.ctrl_max_seqno
    }

    #[inline]
    pub(super) fn ctrl2_avail(&self) -> bool {
        ((self.ctrl_seqno.wrapping_add(1)).wrapping_sub(self.ctrl_max_seqno) as i32) < 0
    }

    /// Takes a control slot (the caller saw one free).
    #[inline]
    pub(super) fn take_ctrl(&mut self) {
        self.ctrl_seqno = self.ctrl_seqno.wrapping_add(1);
    }

    /// Where the current control slot's bytes lie in the send buffer (past
    /// the ring: [`SendHalf::sbuf_len`]).
    pub(super) fn ctrl_slot(&self) -> usize {
        (self.sbuf_size + RS_MAX_CTRL_MSG * (self.ctrl_seqno & (RS_QP_CTRL_SIZE - 1))) as usize
    }

    // ---- what can be read off it ----------------------------------------------------------

    /// Send-ring bytes whose writes have not completed, as far as the
    /// completions taken tell (one that has come but waits in the CQ still
    /// counts: a sender that paused without any call on the stream counts
    /// its last writes).
    #[inline]
    pub(super) fn in_flight(&self) -> u32 {
        self.sbuf_size.saturating_sub(self.sbuf_bytes_avail)
    }

    /// Where a send call's chunks start ([`next_chunk`]). Upstream starts
    /// every call at [`RS_OLAP_START_SIZE`] and doubles, so that a peer
    /// waiting for data can copy the first bytes out while the rest is
    /// written. That pays only when the peer is waiting: while at least
    /// that first chunk's worth of our data is still on its way (send-ring
    /// bytes whose writes have not completed yet), the peer has bytes to
    /// take already and the small chunks only add work requests,
    /// completions and wake-ups at both ends (a stream of 64 KiB sends: six
    /// messages each instead of one). Such a call starts at
    /// [`RS_MAX_TRANSFER`]; one on an idle stream, or behind a few small
    /// sends only (a header before its body), ramps up as upstream's. The
    /// peer sees data messages of other lengths, as any sender may send
    /// them (the byte stream is the same).
    #[inline]
    pub(super) fn first_chunk(&self) -> u32 {
        if self.in_flight() >= RS_OLAP_START_SIZE {
            RS_MAX_TRANSFER
        } else {
            RS_OLAP_START_SIZE
        }
    }

    /// The ring's free bytes.
    #[inline]
    pub(super) fn avail_bytes(&self) -> u32 {
        self.sbuf_bytes_avail
    }

    /// The current entry of the peer-written target table `table` (read
    /// once per use: the peer may rewrite it at any time).
    #[inline]
    pub(super) fn target(&self, table: &RegBuf) -> RsSge {
        RsSge::read(table, self.target_sge * 16)
    }

    /// Room for a data message on our side: entries, ring room and a
    /// credit (it goes once the peer's buffer has room too: a target
    /// entry of nonzero length, [`SendHalf::target`]).
    #[inline]
    pub(super) fn has_room(&self, opts: u32) -> bool {
        self.sqe_avail >= msg_sqes(opts) && self.sbuf_bytes_avail >= RS_SNDLOWAT && self.sseq_no != self.sseq_comp
    }

    /// Every send and control message posted has completed.
    pub(super) fn all_done(&self) -> bool {
        (self.ctrl_max_seqno.wrapping_sub(self.ctrl_seqno)).wrapping_add(self.sqe_avail) == self.sq_size
    }

    /// What a poller's readiness sequence reads off the send half: the
    /// credit, the free entries and the free ring bytes.
    #[inline]
    pub(super) fn readiness(&self) -> (u16, u32, u32) {
        (self.sseq_comp, self.sqe_avail, self.sbuf_bytes_avail)
    }

    // ---- reserving ----------------------------------------------------------------------

    /// Takes a message's sequence number, entries and `bytes` of the ring
    /// (the caller saw [`SendHalf::has_room`]).
    #[inline]
    pub(super) fn reserve_msg(&mut self, opts: u32, bytes: u32) {
        self.sseq_no = self.sseq_no.wrapping_add(1);
        self.sqe_avail -= msg_sqes(opts);
        self.sbuf_bytes_avail -= bytes;
    }

    /// Takes the send credit, send-buffer space and target space of a
    /// `length`-byte data message into the peer's buffer named by `t`, the
    /// current target entry as the caller read it (once: the peer may
    /// rewrite the entry at any time) from `table`; returns where the data
    /// goes.
    #[inline(always)]
    pub(super) fn reserve_data(&mut self, opts: u32, length: u32, t: RsSge, table: &RegBuf) -> (u64, u32) {
        self.reserve_msg(opts, length);
        let i = self.target_sge;
        let (addr, rkey) = (t.addr, t.key);
        let t = t.advance(length);
        table.write_u64(i * 16, t.addr);
        table.write_u32(i * 16 + 8, t.key);
        table.write_u32(i * 16 + 12, t.length);
        if t.length == 0 {
            self.target_sge = (i + 1) % RS_SGL_SIZE as usize;
        }
        (addr, rkey)
    }

    /// Takes an entry and `bytes` of the ring for a direct write (riowrite:
    /// no credit, no target entry).
    #[inline]
    pub(super) fn reserve_write(&mut self, bytes: u32) {
        self.sqe_avail -= 1;
        self.sbuf_bytes_avail -= bytes;
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

    /// Copies `data` into the send ring `sbuf` at the current position;
    /// returns the SGEs (1 or 2).
    pub(super) fn stage(&mut self, sbuf: &RegBuf, data: &[u8]) -> ([Sge; 2], usize) {
        let st = self.reserve_stage(data.len() as u32);
        st.fill(sbuf, data)
    }

    /// Ends the run of unsignalled sends: the bits for the wr_id of the
    /// signalled request posted next ([`Unsignalled::take`]).
    #[inline]
    pub(super) fn take_run(&mut self) -> u64 {
        self.unsig.take()
    }

    /// How an inline data message of `len` bytes goes: None unsignalled
    /// (counted in the run), or signalled ending the run it names.
    #[inline]
    pub(super) fn inline_run(&mut self, opts: u32, len: u32) -> Option<u64> {
        if opts & OPT_MSG_SEND == 0 && self.unsig.may_skip(len, self.sq_size - RS_QP_CTRL_SIZE, self.sbuf_size, RS_SNDLOWAT) {
            self.unsig.skip(len);
            None
        } else {
            Some(self.unsig.take())
        }
    }

    // ---- completions ----------------------------------------------------------------------

    /// Gives back what the completed send `wr_id` held (`ok`: it succeeded;
    /// a failed one gives back only itself).
    #[inline]
    pub(super) fn complete(&mut self, wr_id: u64, ok: bool) {
        if ok {
            // The unsignalled sends before it are done too.
            let (n, bytes) = signal::covered(wr_id);
            self.sqe_avail += n;
            self.sbuf_bytes_avail += bytes;
        }
        let data = wr_id as u32;
        match msg_op(data) {
            OP_SGL | OP_CTRL => self.ctrl_max_seqno = self.ctrl_max_seqno.wrapping_add(1),
            OP_IOMAP_SGL => {
                self.sqe_avail += 1;
                if wr_id & WR_MSG_SEND == 0 {
                    self.sbuf_bytes_avail += IOMAP_ENTRY_SIZE;
                }
            }
            _ => {
                self.sqe_avail += 1;
                self.sbuf_bytes_avail += msg_data(data);
            }
        }
    }
}

/// The counters as unit tests read and set them.
#[cfg(test)]
impl SendHalf {
    pub(super) fn sseq_no(&self) -> u16 {
        self.sseq_no
    }

    pub(super) fn sseq_comp(&self) -> u16 {
        self.sseq_comp
    }

    pub(super) fn sqe_avail(&self) -> u32 {
        self.sqe_avail
    }

    pub(super) fn ssgl0_off(&self) -> u32 {
        self.ssgl0_off
    }

    pub(super) fn ctrl_seqno(&self) -> u32 {
        self.ctrl_seqno
    }

    pub(super) fn ctrl_max_seqno(&self) -> u32 {
        self.ctrl_max_seqno
    }

    pub(super) fn set_seq(&mut self, no: u16, comp: u16) {
        self.sseq_no = no;
        self.sseq_comp = comp;
    }

    pub(super) fn set_ssgl0_off(&mut self, v: u32) {
        self.ssgl0_off = v;
    }

    pub(super) fn set_ctrl(&mut self, seqno: u32, max_seqno: u32) {
        self.ctrl_seqno = seqno;
        self.ctrl_max_seqno = max_seqno;
    }

    pub(super) fn set_sqe_avail(&mut self, v: u32) {
        self.sqe_avail = v;
    }
}

/// Send-ring space taken by [`SendHalf::reserve_stage`]: from `off`,
/// `room` bytes before the ring's end, the rest from its start.
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
