// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Sends without a completion of their own. A small data message posted
//! with the stream's state locked (inline) may go unsignalled; the next
//! signalled work request of the stream carries in its wr_id how many such
//! sends came before it and how many send-buffer bytes they hold, and its
//! completion gives them back (a reliable connection completes its sends in
//! order). The peer sees the same work requests either way: this only
//! spares the sender a completion, and a sleeping receiver on the same
//! CQ the wake-up it would bring (upstream signals every send).
//!
//! Liveness: a run of unsignalled sends is bounded ([`Unsignalled::may_skip`])
//! so that, with only the run outstanding, a sender still has room for its
//! next message; whenever a sender lacks room, a signalled request is
//! therefore in flight, and its completion (which wakes the sleeper) gives
//! the room back. The run's own sends come back with the next signalled
//! request: a control message (rshutdown's, a credit update), a larger
//! send, or the send that ends the run.
//!
//! A failed request completes whether signalled or not: its completion
//! gives back only itself (the connection is in error by then).
#![deny(unsafe_code)]

/// At most this many unsignalled sends in a row.
pub(super) const MAX_RUN: u32 = 16;

/// Where the covered count and bytes sit in a wr_id: bits 54..61 and 32..53
/// (bits 62 and 63 are the stream's own flags, bits 0..31 the message).
const CNT_SHIFT: u32 = 54;
const CNT_MASK: u64 = 0xFF;
const BYTES_SHIFT: u32 = 32;
const BYTES_MAX: u32 = (1 << 22) - 1;

/// The current run of unsignalled sends: how many, and their bytes.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Unsignalled {
    cnt: u32,
    bytes: u32,
}

impl Unsignalled {
    /// Whether a `len`-byte send may go unsignalled on a stream whose data
    /// sends have `sqes` send-queue entries and `sbuf` send-buffer bytes
    /// and need `lowat` bytes free to go on: the run, this send included,
    /// keeps to [`MAX_RUN`] sends and a quarter of either, and leaves room
    /// for a send when it alone is outstanding.
    pub(super) fn may_skip(&self, len: u32, sqes: u32, sbuf: u32, lowat: u32) -> bool {
        let cnt = self.cnt + 1;
        let Some(bytes) = self.bytes.checked_add(len) else { return false };
        cnt <= MAX_RUN && cnt <= sqes / 4 && bytes <= sbuf / 4 && bytes <= BYTES_MAX && sbuf - bytes >= lowat
    }

    /// Counts a send posted unsignalled (after [`Unsignalled::may_skip`]).
    pub(super) fn skip(&mut self, len: u32) {
        self.cnt += 1;
        self.bytes += len;
    }

    /// Ends the run: the bits for the wr_id of the signalled request posted
    /// next, whose completion gives the run back.
    pub(super) fn take(&mut self) -> u64 {
        let w = (u64::from(self.cnt) << CNT_SHIFT) | (u64::from(self.bytes) << BYTES_SHIFT);
        *self = Unsignalled::default();
        w
    }
}

/// What the successful completion of the request `wr_id` gives back
/// besides itself: (sends, bytes) of the run it ended.
#[inline]
pub(super) fn covered(wr_id: u64) -> (u32, u32) {
    (((wr_id >> CNT_SHIFT) & CNT_MASK) as u32, ((wr_id >> BYTES_SHIFT) as u32) & BYTES_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_comes_back_whole_with_the_request_that_ends_it() {
        let mut u = Unsignalled::default();
        for len in [64, 1, 300] {
            assert!(u.may_skip(len, 384, 131072, 2048));
            u.skip(len);
        }
        let w = u.take();
        assert_eq!(covered(w | 0x1234 | 1 << 62), (3, 365));
        assert_eq!(u, Unsignalled::default());
        assert_eq!(covered(u.take()), (0, 0));
    }

    #[test]
    fn runs_stay_short() {
        let mut u = Unsignalled::default();
        while u.may_skip(8, 384, 131072, 2048) {
            u.skip(8);
        }
        assert_eq!(covered(u.take()).0, MAX_RUN);
        // a quarter of a small send queue
        while u.may_skip(8, 16, 131072, 2048) {
            u.skip(8);
        }
        assert_eq!(covered(u.take()).0, 4);
        // a quarter of the send buffer
        while u.may_skip(1000, 384, 8192, 2048) {
            u.skip(1000);
        }
        assert_eq!(covered(u.take()), (2, 2000));
        // too small a buffer to leave a sender room: never
        assert!(!u.may_skip(1, 384, 2048, 2048));
        assert!(!u.may_skip(u32::MAX, 384, u32::MAX, 0));
    }

    #[test]
    fn the_largest_run_fits_its_bits() {
        let mut u = Unsignalled::default();
        while u.may_skip(BYTES_MAX / 16, 1 << 16, u32::MAX, 0) {
            u.skip(BYTES_MAX / 16);
        }
        let (c, b) = covered(u.take());
        assert_eq!((c, b), (16, BYTES_MAX / 16 * 16));
    }
}
