// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A stream's receive half ([`RecvHalf`]): the receive buffer the peer
//! writes into, the messages received and not yet consumed
//! ([`super::wire::Rx`]), the receives posted, and the credits we owe the
//! peer (with where in its table they go). Completions push here, a
//! receive plans and consumes here, and the credit messages are decided
//! here; nothing else changes these fields.
//!
//! Invariants it keeps:
//! * The buffer: `rbuf_size` bytes the peer writes into, in two halves it
//!   gets back one at a time by a credit, once consumed; with
//!   [`OPT_MSG_SEND`] the registered buffer holds `rq_size` message words
//!   past them, one for each receive posted, used round-robin
//!   (`rbuf_msg_index`).
//! * Credits: the peer may send up to sequence number `rseq_comp + rq_size/2`
//!   before it hears from us; a credit is due once half of it is used or
//!   half the buffer consumed ([`RecvHalf::credit_due`]), and it moves
//!   `rseq_comp` on.
//! * The peer's table: `remote_sgl` (`RS_SGL_SIZE` entries) is where
//!   credits for buffer halves go, `remote_sge` the next entry.
#![deny(unsafe_code)]

use super::wire::{self, msg_set, Rx, RxPlan, RsSge, OPT_MSG_SEND, OPT_SWAP_SGL, OP_SGL, WR_RECV};

/// The size of a message word (the send that carries a message's word
/// after its write, OPT_MSG_SEND).
pub(super) const RS_MSG_SIZE: u32 = 4;

/// A credit to send: the message word, and, when a buffer half is free,
/// the descriptor of it and where in the peer's table it goes.
pub(super) struct Credit {
    pub(super) msg: u32,
    pub(super) grant: Option<Grant>,
}

/// A freed buffer half for the peer: the descriptor's bytes, written at
/// (`raddr`, `rkey`) of the peer's table.
pub(super) struct Grant {
    pub(super) bytes: [u8; 16],
    pub(super) raddr: u64,
    pub(super) rkey: u32,
}

/// The receive half of one stream (see the module comment for its
/// invariants).
pub(super) struct RecvHalf {
    rbuf_size: u32,
    rq_size: u32,
    rseq_comp: u16,
    rbuf_msg_index: u32,
    /// The received messages and the receive buffer's position (the
    /// decisions are in [`wire`]).
    rx: Rx,
    remote_sge: u32,
    remote_sgl: RsSge,
}

impl RecvHalf {
    /// A receive half of these sizes, before its endpoint exists.
    pub(super) fn new(rbuf_size: u32, rq_size: u32) -> RecvHalf {
        RecvHalf { rbuf_size, rq_size, rseq_comp: 0, rbuf_msg_index: 0, rx: Rx::default(), remote_sge: 0, remote_sgl: RsSge::default() }
    }

    /// What a stream accepted on a listener takes from the listener's
    /// receive half: its sizes.
    pub(super) fn inherit(&self) -> RecvHalf {
        RecvHalf::new(self.rbuf_size, self.rq_size)
    }

    // ---- sizes (set before the endpoint exists) ---------------------------------------

    #[inline]
    pub(super) fn rbuf_size(&self) -> u32 {
        self.rbuf_size
    }

    #[inline]
    pub(super) fn rq_size(&self) -> u32 {
        self.rq_size
    }

    pub(super) fn set_rbuf_size(&mut self, v: u32) {
        self.rbuf_size = v;
    }

    pub(super) fn set_rq_size(&mut self, v: u32) {
        self.rq_size = v;
    }

    /// The registered receive buffer's length under the connection's
    /// options `opts`: the buffer, and the message words past it.
    pub(super) fn rbuf_len(&self, opts: u32) -> u32 {
        if opts & OPT_MSG_SEND != 0 {
            self.rbuf_size + self.rq_size * RS_MSG_SIZE
        } else {
            self.rbuf_size
        }
    }

    /// The endpoint exists: an empty buffer, the peer's first credits.
    pub(super) fn start(&mut self) {
        self.rx = Rx::new(self.rbuf_size, self.rq_size);
        self.rseq_comp = (self.rq_size >> 1) as u16;
    }

    /// The peer's table for our credits (from its connect data).
    pub(super) fn set_peer_table(&mut self, sgl: RsSge) {
        self.remote_sgl = sgl;
        self.remote_sge = 1;
    }

    /// The half of the buffer the peer writes into first.
    pub(super) fn half(&self) -> u32 {
        self.rx.half()
    }

    // ---- receives posted and completed ----------------------------------------------------

    /// The wr_id of the next receive and, with [`OPT_MSG_SEND`], the
    /// offset of its message word in the registered buffer (the next word,
    /// round-robin).
    #[inline]
    pub(super) fn next_recv(&mut self, opts: u32) -> (u64, Option<usize>) {
        if opts & OPT_MSG_SEND == 0 {
            return (WR_RECV, None);
        }
        let off = (self.rbuf_size + self.rbuf_msg_index * RS_MSG_SIZE) as usize;
        let wr = WR_RECV | self.rbuf_msg_index as u64;
        self.rbuf_msg_index += 1;
        if self.rbuf_msg_index == self.rq_size {
            self.rbuf_msg_index = 0;
        }
        (wr, Some(off))
    }

    /// Where the message word of receive `idx` (its wr_id's low bits) lies.
    #[inline]
    pub(super) fn word_off(&self, idx: usize) -> usize {
        self.rbuf_size as usize + idx * RS_MSG_SIZE as usize
    }

    /// A data message of `len` bytes (op `op`) has arrived.
    #[inline]
    pub(super) fn push(&mut self, op: u32, len: u32) {
        self.rx.push(op, len);
    }

    // ---- what can be read off it ----------------------------------------------------------

    #[inline]
    pub(super) fn has_data(&self) -> bool {
        self.rx.has_data()
    }

    /// Data messages arrived (wrapping): what a poller's readiness
    /// sequence reads off the receive half.
    #[inline]
    pub(super) fn arrived(&self) -> u16 {
        self.rx.arrived()
    }

    // ---- a receive ------------------------------------------------------------------------

    /// What a read of up to `max` bytes takes ([`Rx::plan`]).
    #[inline]
    pub(super) fn plan(&self, max: usize) -> RxPlan {
        self.rx.plan(max)
    }

    /// The buffer's size, as [`wire::copy_planned`] needs it.
    #[inline]
    pub(super) fn size(&self) -> u32 {
        self.rx.size()
    }

    /// The planned bytes are read: they count toward the next credit.
    #[inline]
    pub(super) fn consume(&mut self, plan: &RxPlan) {
        self.rx.consume(plan);
    }

    // ---- credits --------------------------------------------------------------------------

    /// A credit message is due: half the buffer consumed, or the peer's
    /// sequence numbers half used (whether it can go is the send half's:
    /// a control slot).
    #[inline]
    pub(super) fn credit_due(&self) -> bool {
        self.rx.can_grant() || (self.rx.seq_no.wrapping_sub(self.rseq_comp) as i16) >= 0
    }

    /// Takes the credit due (the caller has its control slot): the peer's
    /// next sequence window, and a freed half of the buffer (at `rbuf`,
    /// key `rkey`) if there is one, for the peer's table entry it goes to.
    pub(super) fn take_credit(&mut self, opts: u32, rbuf: u64, rkey: u32) -> Credit {
        self.rseq_comp = self.rx.seq_no.wrapping_add((self.rq_size >> 1) as u16);
        let msg = msg_set(OP_SGL, (self.rx.seq_no as u32).wrapping_add(self.rq_size) & 0xFFFF);
        let grant = self.rx.grant().map(|(free, half)| {
            let mut sge = RsSge { addr: rbuf + free as u64, key: rkey, length: half };
            if opts & OPT_SWAP_SGL != 0 {
                sge = sge.swapped();
            }
            let raddr = wire::table_addr(self.remote_sgl.addr, self.remote_sge, 16);
            self.remote_sge = wire::next_sge(self.remote_sge, self.remote_sgl.length);
            Grant { bytes: sge.bytes(), raddr, rkey: self.remote_sgl.key }
        });
        Credit { msg, grant }
    }
}

/// The fields as unit tests read and set them.
#[cfg(test)]
impl RecvHalf {
    pub(super) fn buf(&self) -> &Rx {
        &self.rx
    }

    pub(super) fn rseq_comp(&self) -> u16 {
        self.rseq_comp
    }

    pub(super) fn set_seq(&mut self, seq_no: u16, comp: u16) {
        self.rx.seq_no = seq_no;
        self.rseq_comp = comp;
    }
}
