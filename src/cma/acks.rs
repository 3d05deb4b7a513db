// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The count of acked events an id or a multicast membership waits on
//! ([`Acks`]).
#![deny(unsafe_code)]

use nix::errno::Errno;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::Arc;

/// A count of acked events and the wait for a number of them (an id's, a
/// multicast membership's: upstream's `events_completed` and `cond`).
///
/// The count is atomic, so that counting an ack takes no lock unless
/// someone waits (one lock per ack was most of what acking
/// cost).  A waiter announces itself (`waiters`) and registers its
/// thread's wake-up descriptor under the lock before it reads the count;
/// an adder adds before it reads `waiters` (both sequentially consistent):
/// either the waiter sees the new count, or the adder sees the waiter and
/// signals it under the lock, after the registration.  The wait is a
/// cancellation point ([`crate::sys::cancel`]): a cancelled thread leaves
/// no registration behind.
#[derive(Default)]
pub struct Acks {
    n: AtomicU32,
    /// A destroy of the id was interrupted (its thread cancelled) after
    /// the kernel's part: 1 + the count it waits for; 0 otherwise.
    pending: AtomicU32,
    /// Threads in [`wait_with`](Self::wait_with).
    waiters: AtomicU16,
    lock: Mutex<()>,
}

/// The threads waiting for acks: the count's address and the thread's
/// wake-up descriptor (one list for all counts keeps every id small:
/// waiting for acks is rare).
static ACK_WAITERS: Mutex<Vec<(usize, Arc<crate::sys::wake::Wake>)>> = Mutex::new(Vec::new());

impl Acks {
    /// Counts one acked event.
    #[inline]
    pub fn add(&self) {
        self.n.fetch_add(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) != 0 {
            self.wake_waiters();
        }
    }

    /// Signals the threads waiting on this count (see [`add`](Self::add)).
    #[cold]
    #[inline(never)]
    fn wake_waiters(&self) {
        let _g = self.lock.lock();
        let me = self as *const Acks as usize;
        ACK_WAITERS.lock().iter().filter(|(a, _)| *a == me).for_each(|(_, w)| w.signal());
    }

    /// Runs `f` under the count's lock, then waits until `reported`
    /// events have been acked, without the lock.  ECANCELED when the
    /// thread was cancelled in the wait (`f` has run).
    pub fn wait_with(&self, reported: u32, f: impl FnOnce()) -> Result<(), Errno> {
        self.wait_inner(reported, f, None)
    }

    /// Whether `reported` events have been acked.
    #[inline]
    pub fn reached(&self, reported: u32) -> bool {
        self.n.load(Ordering::SeqCst) >= reported
    }

    /// Waits as [`wait`](Self::wait) does; when `after_ms` have passed with
    /// events still unacked, calls `slow(acked)` once (the wait goes on).
    #[inline]
    pub fn wait_reporting(&self, reported: u32, after_ms: i32, slow: &mut dyn FnMut(u32)) -> Result<(), Errno> {
        if self.n.load(Ordering::SeqCst) >= reported {
            return Ok(());
        }
        self.wait_inner(reported, || (), Some((after_ms, slow)))
    }

    fn wait_inner(&self, reported: u32, f: impl FnOnce(), mut slow: Option<(i32, &mut dyn FnMut(u32))>) -> Result<(), Errno> {
        // The thread's wake-up descriptor first, should it be needed
        // (made once per thread): a failure to make it changes nothing.
        let wake = if self.n.load(Ordering::SeqCst) < reported { Some(crate::sys::wake::mine()?) } else { None };
        let me = self as *const Acks as usize;
        let wake = {
            let _g = self.lock.lock();
            f();
            if self.n.load(Ordering::SeqCst) >= reported {
                return Ok(());
            }
            let Some(wake) = wake else {
                // Not short before, short now: impossible (the count only grows).
                return Ok(());
            };
            self.waiters.fetch_add(1, Ordering::SeqCst);
            ACK_WAITERS.lock().push((me, wake.clone()));
            wake
        };
        let mut r = Ok(());
        while self.n.load(Ordering::SeqCst) < reported {
            let mut p = [libc::pollfd { fd: wake.fd(), events: libc::POLLIN, revents: 0 }];
            match crate::sys::cancel::wait_poll(&mut p, slow.as_ref().map_or(-1, |s| s.0)) {
                Ok(0) => {
                    if let Some((_, report)) = slow.take() {
                        report(self.n.load(Ordering::SeqCst));
                    }
                }
                Ok(_) => wake.drain(),
                Err(Errno::EINTR) => {}
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        let _g = self.lock.lock();
        let mut w = ACK_WAITERS.lock();
        if let Some(i) = w.iter().position(|(a, x)| *a == me && Arc::ptr_eq(x, &wake)) {
            w.swap_remove(i);
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Waits until `reported` events have been acked (see [`wait_with`](Self::wait_with)).
    #[inline]
    pub fn wait(&self, reported: u32) -> Result<(), Errno> {
        if self.n.load(Ordering::SeqCst) >= reported {
            return Ok(());
        }
        self.wait_with(reported, || ())
    }

    /// The count an interrupted destroy waits for, if one was interrupted.
    pub(super) fn pending(&self) -> Option<u32> {
        match self.pending.load(Ordering::Acquire) {
            0 => None,
            n => Some(n - 1),
        }
    }

    pub(super) fn set_pending(&self, reported: u32) {
        self.pending.store(reported.saturating_add(1), Ordering::Release);
    }
}
