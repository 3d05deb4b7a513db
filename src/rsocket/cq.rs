// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Completions, credits and control messages: posting receives and
//! messages, taking completions off the CQ (data, credits and control
//! messages from the peer; our sends done), handing receive credits back,
//! arming the CQ and reading its events. Nothing here blocks.
#![deny(unsafe_code)]

use nix::errno::Errno;
use std::ffi::c_int;
use super::state::*;
use super::verbs::{self, Data};
use super::recv_half::Grant;
use super::wire::{self, msg_data, msg_op, msg_set, Msg, OP_CTRL};

impl Stream {
    pub(super) fn post_recv(&mut self) -> Result<(), Errno> {
        let (wr, word) = self.rx.next_recv(self.ctl.opts());
        let ep = self.ep.as_deref().expect("rsocket endpoint");
        ep.qp.post_recv(wr, word.map(|off| ep.rbuf.sge(off, RS_MSG_SIZE)))
    }

    // ---- messages -------------------------------------------------------------------

    /// Posts a control message (signalled: it ends the run of unsignalled
    /// sends, [`super::signal`]; a request that fails to post loses the run's
    /// room, as it loses its own, like upstream's).
    pub(super) fn post_msg(&mut self, msg: u32) -> Result<(), Errno> {
        let wr = msg as u64 | self.tx.take_run();
        let qp = &self.ep().qp;
        if self.ctl.opts() & OPT_MSG_SEND == 0 {
            // A zero-length write with immediate.
            qp.post_send(wr, Data::None, verbs::WR_RDMA_WRITE_WITH_IMM, 0, msg, 0, 0)
        } else {
            qp.post_send(wr, Data::Inline(&msg.to_ne_bytes()), verbs::WR_SEND, 0, 0, 0, 0)
        }
    }

    /// Posts a signalled write message under the lock (it ends the run of
    /// unsignalled sends).
    pub(super) fn post_write_msg(&mut self, data: Data<'_>, msg: u32, addr: u64, rkey: u32) -> Result<(), Errno> {
        let run = self.tx.take_run();
        post_write_msg(self.ep(), self.ctl.opts(), data, msg, addr, rkey, Some(run))
    }

    #[inline(never)]
    pub(super) fn send_credits(&mut self) {
        self.tx.take_ctrl();
        let (rbuf, rkey) = {
            let ep = self.ep();
            (ep.rbuf.addr(), ep.rbuf.rkey())
        };
        let credit = self.rx.take_credit(self.ctl.opts(), rbuf, rkey);
        let seq = credit.msg;
        if let Some(Grant { bytes, raddr, rkey: rk }) = credit.grant {
            if self.ctl.opts() & OPT_MSG_SEND != 0 {
                self.tx.take_ctrl();
            }
            let _ = if self.tx.sq_inline() < RS_MAX_CTRL_MSG {
                // The control slots lie past the ring inside the registered send buffer.
                let slot = self.tx.ctrl_slot();
                let one = {
                    let sbuf = &self.ep().sbuf;
                    sbuf.write(slot, &bytes);
                    [sbuf.sge(slot, 16)]
                };
                self.post_write_msg(Data::Reg(&one), seq, raddr, rk)
            } else {
                self.post_write_msg(Data::Inline(&bytes), seq, raddr, rk)
            };
        } else {
            let _ = self.post_msg(seq);
        }
    }

    /// Whether a credit message is due (and can go): half the buffer
    /// consumed, or the peer's sequence numbers half used.
    #[inline]
    pub(super) fn give_credits(&self) -> bool {
        if !self.ctl.connected() {
            return false;
        }
        self.rx.credit_due() && if self.ctl.opts() & OPT_MSG_SEND == 0 { self.tx.ctrl_avail() } else { self.tx.ctrl2_avail() }
    }

    #[inline]
    pub(super) fn update_credits(&mut self) {
        if self.give_credits() {
            self.send_credits();
        }
    }

    /// Takes the completions off the CQ (in batches: [`verbs::POLL_BATCH`]
    /// per call into the provider) and applies them; reposts a receive for
    /// each one consumed while connected. Returns how many it took.
    /// An empty CQ (most looks of a blocked call) costs the provider's
    /// poll and no more.
    #[inline]
    pub(super) fn poll_cq(&mut self) -> Result<usize, Errno> {
        // (no endpoint: nothing to take, and no receive to repost)
        let n = match &self.ep {
            Some(ep) => ep.qp.poll_many(&mut self.wcs)?,
            None => 0,
        };
        if n == 0 {
            return Ok(0);
        }
        self.apply_polled(n)
    }

    /// [`Stream::poll_cq`] once its first poll took `first` completions
    /// (more than none) into `wcs`.
    #[inline(never)]
    fn apply_polled(&mut self, first: usize) -> Result<usize, Errno> {
        let mut rcnt = 0u32;
        let mut taken = 0usize;
        // A disconnect from the peer ends the taking (the rest of the batch
        // is applied still: nothing the peer sent comes after it).
        let mut ended = false;
        let mut n = first;
        while !ended {
            if n == 0 {
                n = match &self.ep {
                    Some(ep) => ep.qp.poll_many(&mut self.wcs)?,
                    None => 0,
                };
                if n == 0 {
                    break;
                }
            }
            taken += n;
            // Others sleeping on the stream may wait for what this changes
            // (apply_wc notes what with the sleepers: send room, data, or any change).
            for i in 0..n {
                let wc = self.wcs[i];
                ended |= self.apply_wc(&wc, &mut rcnt);
            }
            if n < verbs::POLL_BATCH {
                // The CQ was empty after these: a completion that comes
                // now is taken by the next poll.
                break;
            }
            n = 0;
        }
        if ended {
            return Ok(taken);
        }
        if self.ctl.connected() {
            for _ in 0..rcnt {
                if let Err(e) = self.post_recv() {
                    self.ctl.fail(ST_ERROR, e as c_int);
                    self.sleepers.touch();
                    return Err(e);
                }
            }
        }
        Ok(taken)
    }

    /// Applies one completion (a receive counts in `rcnt`, to be reposted);
    /// true when the peer's disconnect ended the stream.
    #[inline]
    fn apply_wc(&mut self, wc: &verbs::Wc, rcnt: &mut u32) -> bool {
        if wc.wr_id & WR_RECV != 0 {
            if wc.status != 0 {
                // (flushed: the connection is going; every sleeper looks)
                self.sleepers.touch();
                return false;
            }
            *rcnt += 1;
            let msg = match wc.imm() {
                Some(m) => m,
                None => {
                    // The word of the message's slot (rq_size words past rbuf_size).
                    let idx = (wc.wr_id as u32) as usize;
                    self.ep().rbuf.read_u32(self.rx.word_off(idx))
                }
            };
            match wire::decode(msg) {
                Msg::Credits(c) => {
                    self.tx.set_credits(c);
                    self.sleepers.changed(WANTS_SEND);
                }
                Msg::Write => {}
                Msg::Ctrl(d) => {
                    self.sleepers.touch();
                    if d == CTRL_DISCONNECT {
                        self.ctl.set_state(ST_DISCONNECTED);
                        return true;
                    } else if d == CTRL_SHUTDOWN && self.ctl.shut_read() {
                        return true;
                    }
                }
                Msg::Data { op, len } => {
                    self.rx.push(op, len);
                    self.sleepers.changed(WANTS_RECV);
                }
            }
        } else {
            // Send room, control slots or (a failure) the state.
            self.sleepers.changed(WANTS_SEND);
            self.tx.complete(wc.wr_id, wc.status == 0);
            let data = wc.wr_id as u32;
            if msg_op(data) == OP_CTRL && msg_data(data) == CTRL_DISCONNECT {
                self.ctl.set_state(ST_DISCONNECTED);
                self.sleepers.touch();
            }
            if wc.status != 0 {
                self.sleepers.touch();
                if self.ctl.connected() {
                    self.ctl.fail(ST_ERROR, libc::EIO);
                }
            }
        }
        false
    }

    /// Reads the CQ event if one is waiting (never blocks): after a wait on
    /// [`Stream::wait_fd`]. Not while the stream's reader sleeps in reading
    /// the channel (the event is its).
    pub fn consume_cq_event(&mut self) {
        if !self.cq_armed || self.sleepers.reading() || !self.ctl.connected() {
            return;
        }
        let Some(ep) = self.ep.as_ref() else { return };
        match ep.qp.get_cq_event() {
            Ok(()) => {
                // The CQ is no longer armed: other sleepers must look again
                // (and re-arm) instead of sleeping on a channel that stays quiet.
                self.cq_armed = false;
                self.sleepers.touch();
            }
            Err(Errno::EAGAIN) | Err(Errno::EINTR) => {}
            Err(_) => {
                self.ctl.set_state(ST_ERROR);
                self.sleepers.touch();
            }
        }
    }

    /// The reader is back from its read of the channel (`r`: what the read
    /// gave): with an event the CQ is no longer armed. Nobody reads the
    /// channel now: this thread either reads it again (it sleeps again) or
    /// hands the reading on when it leaves ([`super::sleepers::Sleepers::leave`]). With an
    /// event, the other sleepers are woken at once, before this thread
    /// takes the completions, as upstream's waiters all wake with the
    /// reader's event: a sleeper the completions concern wakes while they
    /// are taken instead of after (the duplex bench, a sender and a
    /// receiver on one stream: faster in 9 of 10 paired runs).
    pub(super) fn reader_done(&mut self, r: &Result<bool, Errno>) {
        self.sleepers.reader_back();
        match r {
            Ok(_) => {
                self.cq_armed = false;
                self.sleepers.touch();
                self.flush_wakes();
            }
            Err(Errno::EINTR) | Err(Errno::ECANCELED) | Err(Errno::EAGAIN) => {}
            Err(_) => {
                self.sleepers.touch();
                if self.ctl.connected() {
                    self.ctl.set_state(ST_ERROR);
                }
            }
        }
    }

    /// Processes completions until `test` holds; never blocks: EWOULDBLOCK
    /// when it does not hold yet (callers sleep without the lock and retry).
    pub(super) fn process_cq(&mut self, test: impl Fn(&Stream) -> bool) -> Result<(), Errno> {
        self.update_credits();
        let r = self.poll_cq();
        let out = if test(self) {
            Ok(())
        } else if let Err(e) = r {
            Err(e)
        } else {
            Err(Errno::EWOULDBLOCK)
        };
        self.update_credits();
        out
    }

    /// Arms the CQ before a sleep; true when it was not armed yet (the
    /// caller then looks at the CQ once more before sleeping).
    pub fn arm(&mut self) -> bool {
        if self.ctl.connected() && !self.cq_armed {
            if let Some(ep) = &self.ep {
                let _ = ep.qp.req_notify();
                self.cq_armed = true;
                return true;
            }
        }
        false
    }
}

/// Posts an RDMA write of `data` to (`addr`, `rkey`) carrying the message
/// word `msg`: as the write's immediate, or (OPT_MSG_SEND, iWARP) in a
/// send that follows it. Needs no stream: a send posts its data with the
/// stream's state unlocked. `run`: signalled, ending the run of
/// unsignalled sends it names ([`signal::Unsignalled::take`]), or None:
/// unsignalled (a write with immediate only).
pub(super) fn post_write_msg(ep: &Ep, opts: u32, data: Data<'_>, msg: u32, addr: u64, rkey: u32, run: Option<u64>) -> Result<(), Errno> {
    let qp = &ep.qp;
    let (wr, flags) = match run {
        Some(bits) => (msg as u64 | bits, 0),
        None => (msg as u64, verbs::UNSIGNALLED),
    };
    if opts & OPT_MSG_SEND == 0 {
        qp.post_send(wr, data, verbs::WR_RDMA_WRITE_WITH_IMM, flags, msg, addr, rkey)
    } else {
        qp.post_send(wr, data, verbs::WR_RDMA_WRITE, 0, 0, addr, rkey)?;
        let wr = msg_set(msg_op(msg), 0) as u64 | WR_MSG_SEND;
        qp.post_send(wr, Data::Inline(&msg.to_ne_bytes()), verbs::WR_SEND, 0, 0, 0, 0)
    }
}
