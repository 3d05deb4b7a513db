// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! How a stream's connection is made and kept ([`Connector`]): rconnect's
//! destination, the address and route resolution attempts and their
//! timeouts, whether rconnect waits, and when the next keepalive is due.
//! The connect state machine (in the lifecycle), rfcntl and the keepalive
//! options read and move it through its methods; nothing else touches
//! these fields.
//!
//! Invariants it keeps:
//! * Address and route resolution are tried [`RS_CONN_RETRIES`] + 1
//!   times, the n-th attempt waiting 2^n s (upstream's schedule: about two
//!   minutes in all); a resolution that succeeds starts the count anew
//!   ([`Connector::resolved`]).
//! * `nonblock` (rconnect returns EINPROGRESS instead of waiting) follows
//!   O_NONBLOCK set by rfcntl before the connection only (upstream makes
//!   the connection manager channel non-blocking only there, so a socket
//!   made with SOCK_NONBLOCK alone still connects within the call).
//! * `ka_next` is unset while keepalives are off; once on, it is the time
//!   the next keepalive is due.
#![deny(unsafe_code)]

use std::time::Instant;

/// Address and route resolution attempts after the first (see the module
/// comment).
pub(super) const RS_CONN_RETRIES: u32 = 6;

/// The making and keeping of one stream's connection (see the module
/// comment for its invariants).
#[derive(Default)]
pub(super) struct Connector {
    dst: Vec<u8>,
    retries: u32,
    nonblock: bool,
    ka_next: Option<Instant>,
}

impl Connector {
    /// rconnect's destination.
    pub(super) fn dst(&self) -> &[u8] {
        &self.dst
    }

    pub(super) fn set_dst(&mut self, addr: &[u8]) {
        self.dst = addr.to_vec();
    }

    /// A resolution attempt starts: its timeout in milliseconds.
    pub(super) fn attempt(&mut self) -> i32 {
        let to = 1000 << self.retries;
        self.retries += 1;
        to
    }

    /// A resolution timed out: whether another attempt is due.
    pub(super) fn may_retry(&self) -> bool {
        self.retries <= RS_CONN_RETRIES
    }

    /// A resolution succeeded: the next one has all its attempts.
    pub(super) fn resolved(&mut self) {
        self.retries = 0;
    }

    /// rconnect returns EINPROGRESS instead of waiting.
    #[inline]
    pub(super) fn nonblock(&self) -> bool {
        self.nonblock
    }

    /// rfcntl set or cleared O_NONBLOCK before the connection.
    pub(super) fn set_nonblock(&mut self, on: bool) {
        self.nonblock = on;
    }

    /// When the next keepalive is due, `first` if none was scheduled.
    pub(super) fn keepalive_due(&mut self, first: Instant) -> Instant {
        *self.ka_next.get_or_insert(first)
    }

    /// Schedules the next keepalive (None: keepalives are off).
    pub(super) fn set_keepalive_due(&mut self, at: Option<Instant>) {
        self.ka_next = at;
    }
}
