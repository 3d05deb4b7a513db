// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The receive path: data out of the receive buffer the peer writes into.
#![deny(unsafe_code)]

use nix::errno::Errno;
use std::ffi::c_int;
use super::blocking::run_blocking;
use super::state::*;

impl Stream {
    /// Receives up to `buf.len()` bytes (0 at end of stream; never blocks).
    pub fn recv(&mut self, buf: &mut [u8], flags: c_int) -> Result<usize, Errno> {
        self.check_connected()?;
        let len = buf.len();
        let mut left = len;
        let mut off = 0usize;
        let mut res: Result<(), Errno> = Ok(());
        loop {
            if !self.have_rdata() {
                if let Err(e) = self.process_cq(Stream::conn_have_rdata) {
                    res = Err(e);
                    break;
                }
            }
            if flags & libc::MSG_PEEK != 0 {
                left = len - self.peek(buf);
                break;
            }
            if let Some(ep) = self.ep.as_ref() {
                let n = self.rx.read(&ep.rbuf, &mut buf[off..]);
                left -= n;
                off += n;
            }
            if !(left > 0 && flags & libc::MSG_WAITALL != 0 && self.state & ST_READABLE != 0) {
                break;
            }
        }
        match res {
            Err(e) if left == len => Err(e),
            _ => Ok(len - left),
        }
    }

    pub(super) fn peek(&self, buf: &mut [u8]) -> usize {
        self.rx.peek(&self.ep().rbuf, buf)
    }
}

/// rrecv: as [`super::send::send`], sleeping without holding the socket.
pub fn recv(h: &Handle, buf: &mut [u8], flags: c_int) -> Result<usize, Errno> {
    let len = buf.len();
    let waitall = flags & libc::MSG_WAITALL != 0 && flags & libc::MSG_PEEK == 0;
    let inner = (flags & !libc::MSG_WAITALL) | libc::MSG_DONTWAIT;
    run_blocking(h, flags, |s, done| {
        let n = s.recv(&mut buf[done..], inner)?;
        Ok((n, n == 0 || done + n == len || !waitall))
    })
}
