// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The receive path: data out of the receive buffer the peer writes into.
//!
//! Under the receive path's lock a call plans its read under the state's
//! lock ([`super::wire::Rx::plan`]), copies the bytes out with that lock
//! released (they stay its own: the peer gets them back only with a
//! credit, after they are consumed), then consumes them under the lock
//! again. A send on the stream goes on meanwhile. A small read (up to
//! [`COPY_LOCKED_MAX`] bytes) copies with the lock held: less work than
//! letting go of it.
#![deny(unsafe_code)]

use nix::errno::Errno;
use std::ffi::c_int;
use super::blocking::run_blocking;
use super::guard::{Guard, Path};
use super::state::*;
use super::wire::copy_planned;

/// Received bytes up to this many are copied out with the state locked.
const COPY_LOCKED_MAX: usize = 1024;

/// Receives up to `buf.len()` bytes (0 at end of stream; never blocks).
fn recv_some(s: &mut Guard<'_>, buf: &mut [u8], flags: c_int) -> Result<usize, Errno> {
    s.check_connected()?;
    let len = buf.len();
    let mut left = len;
    let mut off = 0usize;
    let mut res: Result<(), Errno> = Ok(());
    loop {
        if !s.have_rdata() {
            if let Err(e) = s.process_cq(Stream::conn_have_rdata) {
                res = Err(e);
                break;
            }
        }
        let Some(ep) = s.ep.as_ref() else { break };
        let peek = flags & libc::MSG_PEEK != 0;
        let plan = s.rx.plan(if peek { len } else { left });
        if plan.n > 0 {
            let size = s.rx.size();
            let out = if peek { &mut buf[..] } else { &mut buf[off..] };
            if plan.n <= COPY_LOCKED_MAX {
                // A few bytes: copied under the lock, cheaper than letting
                // go of it and taking it again.
                copy_planned(size, &ep.rbuf, &plan, out);
            } else {
                let ep = ep.clone();
                s.unlocked(|| copy_planned(size, &ep.rbuf, &plan, out));
                if let Err(e) = s.still_usable() {
                    res = Err(e);
                    break;
                }
            }
        }
        if peek {
            left = len - plan.n;
            break;
        }
        s.rx.consume(&plan);
        left -= plan.n;
        off += plan.n;
        if !(left > 0 && flags & libc::MSG_WAITALL != 0 && s.ctl.readable()) {
            break;
        }
    }
    // What was consumed may be owed to the peer now (half the buffer, or
    // the sequence window): sent before the call returns. Upstream's rrecv
    // leaves it to the next call that looks at the CQ (its next rrecv that
    // finds no data, a blocked rsend, rpoll); sending it here gives the
    // peer's sender its room back sooner and puts the same credit messages
    // on the wire (the duplex bench counts them: as many as upstream's).
    if left < len && flags & libc::MSG_PEEK == 0 {
        s.update_credits();
    }
    match res {
        Err(e) if left == len => Err(e),
        _ => Ok(len - left),
    }
}

/// rrecv: as [`super::send::send`], sleeping without holding the socket.
pub fn recv(h: &Handle, buf: &mut [u8], flags: c_int) -> Result<usize, Errno> {
    let len = buf.len();
    let waitall = flags & libc::MSG_WAITALL != 0 && flags & libc::MSG_PEEK == 0;
    let inner = (flags & !libc::MSG_WAITALL) | libc::MSG_DONTWAIT;
    run_blocking(h, Path::Recv, flags, |s, done| {
        let n = recv_some(s, &mut buf[done..], inner)?;
        Ok((n, n == 0 || done + n == len || !waitall))
    })
}
