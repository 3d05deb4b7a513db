// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Who sleeps on a stream and what wakes them ([`Sleepers`]): the threads'
//! wake-up descriptors registered with what each waits for, what changed
//! under the current guard, and who reads the CQ channel. The guard, the
//! completions and the blocking calls go through its methods; nothing
//! else touches these fields.
//!
//! Invariants it keeps:
//! * Nobody sleeps on a change it waits for and has not seen: a change is
//!   noted (`changed` for send room or data, `dirty` for anything else)
//!   under the stream's lock, and [`Sleepers::flush`] signals the
//!   sleepers waiting for it before the lock goes.
//! * A registration is woken once and dropped when signalled; a thread
//!   never signals itself (it is awake and looks itself).
//! * One reader at most sleeps in reading the CQ channel (`reader`); when
//!   it is back and leaves without sleeping again (`handoff`), every
//!   sleeper looks again, one of whom reads next.
#![deny(unsafe_code)]

use std::sync::Arc;
use crate::sys::wake::{self, Wake};

/// A sleeper waits for room to send (send completions, credits).
pub const WANTS_SEND: u8 = 1;
/// A sleeper waits for data to receive.
pub const WANTS_RECV: u8 = 2;
/// A sleeper waits for any change (rpoll, connection and shutdown waits).
pub const WANTS_ALL: u8 = 0xff;

/// The sleepers of one stream (see the module comment for its invariants).
#[derive(Default)]
pub(super) struct Sleepers {
    /// The wake-up descriptors of the threads sleeping on the stream, each
    /// with the changes it waits for ([`WANTS_SEND`], [`WANTS_RECV`],
    /// [`WANTS_ALL`]).
    list: Vec<(Arc<Wake>, u8)>,
    /// Changed under the current guard: every sleeper is signalled when
    /// the guard goes.
    dirty: bool,
    /// Completions taken under the current guard changed what a sender
    /// ([`WANTS_SEND`]: send room, credits) or a receiver ([`WANTS_RECV`]:
    /// data) waits for: the sleepers waiting for that are signalled when
    /// the guard goes (`dirty` signals every sleeper).
    changed: u8,
    /// A thread sleeps in reading the CQ channel (blocking mode; see
    /// `blocking::sleep_until_on`): nobody else reads it meanwhile, and the
    /// other sleepers wait on their wake-up descriptors alone.
    reader: bool,
    /// The channel's reader is back from its read and nobody reads it
    /// since: the thread that was the reader hands the reading on (signals
    /// every sleeper, one of whom reads next) when it leaves without
    /// sleeping again ([`super::blocking::sleep_until_on`]).
    handoff: bool,
}

impl Sleepers {
    /// Something changed that any sleeper may wait for.
    #[inline]
    pub(super) fn touch(&mut self) {
        self.dirty = true;
    }

    /// Something changed that the sleepers in `wants` wait for.
    #[inline]
    pub(super) fn changed(&mut self, wants: u8) {
        self.changed |= wants;
    }

    /// Signals every sleeper registered by another thread (they look again).
    #[inline]
    pub(super) fn wake_all(&mut self) {
        if !self.list.is_empty() {
            self.wake_registered(WANTS_ALL);
        }
    }

    /// When the guard goes (or lets go of the lock): signals the sleepers
    /// that wait for what changed under it (`changed`), or every sleeper
    /// after any other change (`dirty`).
    #[inline]
    pub(super) fn flush(&mut self) {
        let what = if self.dirty { WANTS_ALL } else { self.changed };
        if what != 0 {
            self.dirty = false;
            self.changed = 0;
            if !self.list.is_empty() {
                self.wake_registered(what);
            }
        }
    }

    #[inline(never)]
    fn wake_registered(&mut self, what: u8) {
        self.list.retain(|(w, wants)| {
            if wants & what == 0 || wake::is_mine(w) {
                true
            } else {
                w.signal();
                false
            }
        });
    }

    /// Registers `wake`, woken by the changes in `wants` (added to what it
    /// waits for already).
    pub(super) fn register(&mut self, wake: &Arc<Wake>, wants: u8) {
        match self.list.iter_mut().find(|(w, _)| Arc::ptr_eq(w, wake)) {
            Some(e) => e.1 |= wants,
            None => self.list.push((wake.clone(), wants)),
        }
    }

    /// Drops `wake`'s registration.
    pub(super) fn unregister(&mut self, wake: &Arc<Wake>) {
        self.list.retain(|(w, _)| !Arc::ptr_eq(w, wake));
    }

    /// Drops this thread's registration (it is awake and looks itself).
    pub(super) fn unregister_me(&mut self) {
        if self.list.is_empty() {
            return;
        }
        self.list.retain(|(w, _)| !wake::is_mine(w));
    }

    // ---- the channel's reader ----------------------------------------------------------

    /// A sleeper on a blocking channel: true when it becomes the reader
    /// (nobody reads yet), false when another thread reads already.
    /// Somebody reads the channel from now on: no hand-off is owed.
    pub(super) fn become_reader(&mut self) -> bool {
        self.handoff = false;
        if self.reader {
            return false;
        }
        self.reader = true;
        true
    }

    /// Whether a thread sleeps in reading the channel.
    #[inline]
    pub(super) fn reading(&self) -> bool {
        self.reader
    }

    /// The reader is back from its read: nobody reads the channel now; it
    /// owes the hand-off unless it reads again.
    pub(super) fn reader_back(&mut self) {
        self.reader = false;
        self.handoff = true;
    }

    /// A blocked call is over: when the hand-off is owed, every sleeper
    /// looks again (one of them reads next).
    #[inline]
    pub(super) fn leave(&mut self) {
        if self.handoff {
            self.handoff = false;
            self.dirty = true;
        }
    }
}

#[cfg(test)]
impl Sleepers {
    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}
