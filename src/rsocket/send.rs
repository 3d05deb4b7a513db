// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The send path: data into the peer's receive buffer by RDMA write with
//! immediate, staged in the registered send ring (or inline), and the
//! riomap descriptors the peer has not seen yet.
#![deny(unsafe_code)]

use nix::errno::Errno;
use std::ffi::c_int;
use super::blocking::run_blocking;
use super::cq::post_write_msg;
use super::guard::{lock, lock_path, Guard, Path};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use super::state::*;
use super::send_half::Staged;
use super::verbs::Data;
use super::wire::{msg_set, OP_DATA};

impl Stream {
    /// Room for a data message, taking completions when there is none yet
    /// (EWOULDBLOCK when they bring none).
    #[inline]
    pub(super) fn wait_can_send(&mut self) -> Result<(), Errno> {
        if self.can_send() {
            Ok(())
        } else {
            self.take_send_room()
        }
    }

    #[inline(never)]
    fn take_send_room(&mut self) -> Result<(), Errno> {
        self.process_cq(Stream::conn_can_send)?;
        if !self.ctl.writable() {
            return Err(Errno::ECONNRESET);
        }
        Ok(())
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
/// chunk, [`super::send_half::SendHalf::first_chunk`]): it keeps growing across the call's
/// sleeps, as upstream's does (a send that waited for room mid-message
/// does not start again from small chunks).
fn send_some(s: &mut Guard<'_>, buf: &[u8], olen: &mut u32) -> Result<usize, Errno> {
    s.check_connected()?;
    if *olen == 0 {
        // Decided once per call, before it takes any completion or waits
        // for room: what was on its way when the call came.
        *olen = s.tx.first_chunk();
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
        let Some(ep) = s.ep.as_ref() else {
            res = Err(Errno::ENOTCONN);
            break;
        };
        let t = s.tx.target(&ep.target);
        let xfer = next_chunk(olen, left).min(s.tx.avail_bytes()).min(t.length);
        let chunk = &buf[off..off + xfer as usize];
        let r = if xfer <= s.tx.sq_inline() {
            // Inline (a few bytes, carried in the work request): posted
            // with the state locked, as a small receive copies; less work
            // than letting go of the lock and taking it again. Unsignalled
            // while the run allows ([`super::signal`]).
            let st = &mut **s;
            let ep = st.ep.as_deref().expect("rsocket endpoint");
            let (addr, rkey) = st.tx.reserve_data(st.ctl.opts(), xfer, t, &ep.target);
            let run = st.tx.inline_run(st.ctl.opts(), xfer);
            post_write_msg(ep, st.ctl.opts(), Data::Inline(chunk), msg_set(OP_DATA, xfer), addr, rkey, run)
        } else {
            let st = &mut **s;
            let ep = st.ep.as_ref().expect("rsocket endpoint");
            let stage = st.tx.reserve_stage(xfer);
            let (addr, rkey) = st.tx.reserve_data(st.ctl.opts(), xfer, t, &ep.target);
            let w = Write { ep: Arc::clone(ep), opts: st.ctl.opts(), addr, rkey, stage, run: st.tx.take_run() };
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
/// rrecv on it keeps going. A send that goes whole in one inline message
/// with room for it already there takes [`send_inline_now`]; the others the
/// blocking loop ([`run_blocking`]).
pub fn send(h: &Handle, buf: &[u8], flags: c_int) -> Result<usize, Errno> {
    if let Some(r) = send_inline_now(h, buf) {
        return r;
    }
    let mut olen = 0;
    run_blocking(h, Path::Send, flags, |s, done| {
        let n = send_some(s, &buf[done..], &mut olen)?;
        Ok((n, done + n == buf.len()))
    })
}

/// The common small send without the blocking loop: the whole of `buf` in
/// one inline message, with room for it on both sides already (no
/// completion to take, no riomap descriptor owed, nothing to wait for). It
/// takes the same steps, under the same locks, as the general path's first
/// try ([`send_some`]) would; None, having changed nothing, when any of its
/// conditions does not hold (the general path then starts from the
/// beginning and answers as it always does).
#[inline]
fn send_inline_now(h: &Handle, buf: &[u8]) -> Option<Result<usize, Errno>> {
    let len = buf.len();
    // A send longer than the inline size never goes this way: it is left
    // to the general path before any lock is taken (it would take them
    // twice else, and meet the stream's receiver on them).
    let hint = h.inline_hint.load(Ordering::Relaxed);
    if len == 0 || len > hint as usize {
        return None;
    }
    let _p = lock_path(h, Path::Send);
    let mut g = lock(h).ok()?;
    let st = &mut *g;
    if st.ctl.state() & ST_OPENING != 0 || st.check_connected().is_err() || !st.can_send() || st.iomaps.next_unsent().is_some() {
        return None;
    }
    let ep = st.ep.as_deref()?;
    // (with the endpoint, the inline size is the QP's and stays so)
    if hint != st.tx.sq_inline() {
        h.inline_hint.store(st.tx.sq_inline(), Ordering::Relaxed);
    }
    let t = st.tx.target(&ep.target);
    let mut olen = st.tx.first_chunk();
    let xfer = next_chunk(&mut olen, len).min(st.tx.avail_bytes()).min(t.length);
    if xfer as usize != len || xfer > st.tx.sq_inline() {
        return None;
    }
    let opts = st.ctl.opts();
    let (addr, rkey) = st.tx.reserve_data(opts, xfer, t, &ep.target);
    let run = st.tx.inline_run(opts, xfer);
    let r = post_write_msg(ep, opts, Data::Inline(buf), msg_set(OP_DATA, xfer), addr, rkey, run);
    // As every blocked call's end (the reader's hand-off, when owed).
    st.leave();
    Some(r.map(|()| len))
}
