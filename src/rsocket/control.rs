// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A stream's connection control ([`Control`]): where the connection
//! stands (the connect steps, connected with its readable and writable
//! directions, disconnected, in error), the error SO_ERROR reports, the
//! connection's option bits, and whether the stream is closed or broken.
//! The lifecycle, the completions and the calls read and move it through
//! its methods; nothing else touches these fields.
//!
//! Invariants it keeps:
//! * A direction is open only on a connected stream: [`ST_READABLE`] and
//!   [`ST_WRITABLE`] come with [`ST_CONNECTED`]; shutting the last open
//!   direction leaves the stream disconnected ([`Control::shut_read`]).
//! * `closed` (rclose has run: every later call fails with EBADF) and
//!   `broken` (a call panicked holding the lock: EIO) are final.
//! * `err` is the error a failed connection leaves for SO_ERROR, read
//!   once ([`Control::take_err`]).
//! * `opts` ([`super::wire::OPT_MSG_SEND`], [`super::wire::OPT_SWAP_SGL`])
//!   is set while the connection is made and fixed once it is.
#![deny(unsafe_code)]

use std::ffi::c_int;

// Socket states (bit sets, as the peer never sees them any layout works;
// these follow the obvious scheme).
pub(super) const ST_INIT: u32 = 0;

pub(super) const ST_BOUND: u32 = 0x1;

pub(super) const ST_LISTENING: u32 = 0x2;

// Opening: the service thread moves the socket on as answers arrive.
pub(super) const ST_OPENING: u32 = 0x4;

pub(super) const ST_RESOLVING_ADDR: u32 = ST_OPENING | 0x10;

pub(super) const ST_RESOLVING_ROUTE: u32 = ST_OPENING | 0x20;

pub(super) const ST_CONNECTING: u32 = ST_OPENING | 0x40;

pub(super) const ST_ACCEPTING: u32 = ST_OPENING | 0x80;

pub(super) const ST_CONNECTED: u32 = 0x100;

pub(super) const ST_WRITABLE: u32 = 0x200;

pub(super) const ST_READABLE: u32 = 0x400;

pub(super) const ST_CONNECT_RDWR: u32 = ST_CONNECTED | ST_READABLE | ST_WRITABLE;

pub(super) const ST_CONNECT_ERROR: u32 = 0x800;

pub(super) const ST_DISCONNECTED: u32 = 0x1000;

pub(super) const ST_ERROR: u32 = 0x2000;

/// The connection control of one stream (see the module comment for its
/// invariants).
#[derive(Default)]
pub(super) struct Control {
    state: u32,
    err: c_int,
    opts: u32,
    closed: bool,
    broken: bool,
}

impl Control {
    /// The state ([`ST_INIT`] and the other `ST_` values).
    #[inline]
    pub(super) fn state(&self) -> u32 {
        self.state
    }

    /// Moves to state `st`.
    #[inline]
    pub(super) fn set_state(&mut self, st: u32) {
        self.state = st;
    }

    #[inline]
    pub(super) fn connected(&self) -> bool {
        self.state & ST_CONNECTED != 0
    }

    #[inline]
    pub(super) fn readable(&self) -> bool {
        self.state & ST_READABLE != 0
    }

    #[inline]
    pub(super) fn writable(&self) -> bool {
        self.state & ST_WRITABLE != 0
    }

    /// Closes the directions in `bits` ([`ST_READABLE`], [`ST_WRITABLE`]).
    #[inline]
    pub(super) fn shut(&mut self, bits: u32) {
        self.state &= !bits;
    }

    /// The peer will send no more: the read direction closes, and with the
    /// write direction closed already the stream is disconnected (true).
    pub(super) fn shut_read(&mut self) -> bool {
        if self.writable() {
            self.state &= !ST_READABLE;
            false
        } else {
            self.state = ST_DISCONNECTED;
            true
        }
    }

    /// The connection failed with `e` (SO_ERROR reports it).
    #[inline]
    pub(super) fn fail(&mut self, st: u32, e: c_int) {
        self.state = st;
        self.err = e;
    }

    #[inline]
    pub(super) fn err(&self) -> c_int {
        self.err
    }

    /// SO_ERROR: the error, cleared.
    pub(super) fn take_err(&mut self) -> c_int {
        std::mem::take(&mut self.err)
    }

    /// The connection's option bits.
    #[inline]
    pub(super) fn opts(&self) -> u32 {
        self.opts
    }

    /// Sets option bits `o` (while the connection is made).
    pub(super) fn set_opt(&mut self, o: u32) {
        self.opts |= o;
    }

    #[inline]
    pub(super) fn closed(&self) -> bool {
        self.closed
    }

    /// rclose has run.
    pub(super) fn close(&mut self) {
        self.closed = true;
    }

    #[inline]
    pub(super) fn broken(&self) -> bool {
        self.broken
    }

    /// A call panicked holding the lock.
    pub(super) fn set_broken(&mut self) {
        self.broken = true;
    }
}
