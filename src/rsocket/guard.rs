// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Locking a stream and waiting on it.
//!
//! A stream is one parking_lot mutex ([`Handle`]); [`lock`] and
//! [`lock_any`] give a [`Guard`]. A guard dropped while its thread unwinds
//! marks the stream broken (later calls fail with EIO). A thread about to
//! sleep registers its wake-up descriptor with the stream under the lock
//! ([`WaitToken`]), with what it waits for; whoever changes the stream
//! (the guard's `changed` bits: send room, data; `dirty`: anything else)
//! signals the sleepers waiting for that when the guard goes. [`wait`] takes a
//! token, not a stream: no lock can be held across it, and debug builds
//! check that the calling thread holds no stream guard at all.
#![deny(unsafe_code)]

use nix::errno::Errno;
use std::ffi::c_int;
use std::sync::Arc;
use super::state::{Ep, Handle, Stream, WANTS_ALL};
use super::verbs::Wake;
use crate::cma::api::CmId;
use crate::sys::wake;
use parking_lot::MutexGuard;
use std::cell::Cell;

thread_local! {
    /// Stream guards the current thread holds (for the no-lock-across-wait rule).
    static HELD: Cell<u32> = const { Cell::new(0) };
}

/// How many stream guards the calling thread holds: a blocking wait
/// requires none (debug builds assert it before every sleep). Counted in
/// debug builds only: release builds answer 0 and spend no thread-local
/// access per lock (in a shared library each is a call into ld.so).
pub fn guards_held() -> u32 {
    HELD.with(|c| c.get())
}

/// Counts a guard taken (+1) or let go (-1), in debug builds.
#[inline(always)]
fn count_held(up: bool) {
    if cfg!(debug_assertions) {
        HELD.with(|c| c.set(if up { c.get() + 1 } else { c.get().saturating_sub(1) }));
    }
}

/// A locked stream. Dropped during a panic, it marks the stream broken.
pub struct Guard<'a> {
    g: MutexGuard<'a, Stream>,
}

impl Drop for Guard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.g.ctl.set_broken();
            self.g.sleepers.touch();
        }
        self.g.flush_wakes();
        count_held(false);
    }
}

impl std::ops::Deref for Guard<'_> {
    type Target = Stream;
    fn deref(&self) -> &Stream {
        &self.g
    }
}

impl std::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut Stream {
        &mut self.g
    }
}

impl Guard<'_> {
    /// Runs `f` with the stream's state unlocked, then locks it again: a
    /// send or receive copies its bytes and posts there, holding only its
    /// path lock ([`lock_path`]), so that the other direction and the
    /// completion handling go on meanwhile. Sleepers are signalled first
    /// of what changed so far. `f` must not wait (it still runs under the
    /// path lock). The stream may have been closed meanwhile: the caller
    /// looks at `closed` again.
    pub fn unlocked<T>(&mut self, f: impl FnOnce() -> T) -> T {
        self.g.flush_wakes();
        self.g.unlocks = self.g.unlocks.wrapping_add(1);
        MutexGuard::unlocked(&mut self.g, f)
    }

    /// After [`Guard::unlocked`]: EBADF or EIO when the stream was closed
    /// or broken meanwhile.
    pub fn still_usable(&self) -> Result<(), Errno> {
        usable(self)
    }
}

/// The path lock a call holds around its steps on a stream (see
/// [`super::state::StreamCell`]); counted as a guard (none may be held
/// across a wait).
pub struct PathGuard<'a> {
    _g: Option<MutexGuard<'a, ()>>,
}

impl Drop for PathGuard<'_> {
    fn drop(&mut self) {
        if self._g.is_some() {
            count_held(false);
        }
    }
}

/// Which path lock a blocking call takes before the stream's state.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Path {
    /// None: the call only works on the state.
    State,
    /// The send path (rsend, riowrite).
    Send,
    /// The receive path (rrecv).
    Recv,
}

/// Takes `path`'s lock on `h` (nothing for [`Path::State`]).
pub fn lock_path(h: &Handle, path: Path) -> PathGuard<'_> {
    let g = match path {
        Path::State => None,
        Path::Send => Some(h.slock.lock()),
        Path::Recv => Some(h.rlock.lock()),
    };
    if g.is_some() {
        count_held(true);
    }
    PathGuard { _g: g }
}

fn usable(s: &Stream) -> Result<(), Errno> {
    if s.ctl.closed() {
        Err(Errno::EBADF)
    } else if s.ctl.broken() {
        Err(Errno::EIO)
    } else {
        Ok(())
    }
}

/// Locks a stream whatever its condition (rclose).
#[inline]
pub fn lock_any(h: &Handle) -> Guard<'_> {
    let g = h.s.lock();
    count_held(true);
    Guard { g }
}

/// Locks a stream that is usable: EBADF once closed, EIO once broken.
#[inline]
pub fn lock(h: &Handle) -> Result<Guard<'_>, Errno> {
    let g = lock_any(h);
    usable(&g)?;
    Ok(g)
}

/// What a blocked call sleeps on: the stream's CQ channel once connected
/// (none before) and this thread's wake-up descriptor, registered with the
/// stream. The id clone keeps the channel open until the sleeper is done.
pub struct WaitToken {
    pub(super) fd: c_int,
    /// This thread's wake-up descriptor, registered with the stream (none
    /// for the reader, whom only the CQ's event wakes).
    pub(super) wake: Option<Arc<Wake>>,
    /// The stream's reader sleeps in reading the CQ channel itself (one
    /// system call, as upstream) and holds the endpoint while it does.
    pub(super) read: Option<Arc<Ep>>,
    _id: Option<Arc<CmId>>,
}

impl WaitToken {
    /// Whether this token's sleeper is the stream's reader (see
    /// [`Stream::sleep_token`]).
    pub fn is_reader(&self) -> bool {
        self.read.is_some()
    }
}

/// Sleeps until the token's descriptor is readable, the thread is woken
/// (a change of the stream, rclose), or `timeout_ms` passes (-1: no limit).
/// Returns whether the descriptor is readable. Takes no stream: no lock can
/// be held across it, and debug builds check that the calling thread holds
/// no stream guard at all.
pub fn wait(tok: &WaitToken, timeout_ms: c_int) -> Result<bool, Errno> {
    debug_assert_eq!(guards_held(), 0, "rsocket: blocking wait with a stream lock held");
    if let Some(ep) = &tok.read {
        // The reader: one blocking read of the channel, which the kernel
        // restarts after a handler with SA_RESTART, as upstream's.
        debug_assert!(timeout_ms < 0, "rsocket: the reader's sleep has no timeout");
        ep.qp.wait_cq_event()?;
        return Ok(true);
    }
    wait_polled(tok, timeout_ms)
}

/// [`wait`] for a sleeper that is not the reader: poll(2) on the token's
/// descriptor and this thread's wake-up descriptor.
#[inline(never)]
fn wait_polled(tok: &WaitToken, timeout_ms: c_int) -> Result<bool, Errno> {
    let wfd = tok.wake.as_ref().map_or(-1, |w| w.fd());
    let mut p = [libc::pollfd { fd: tok.fd, events: libc::POLLIN, revents: 0 }, libc::pollfd { fd: wfd, events: libc::POLLIN, revents: 0 }];
    // Upstream blocks in read(2) here (the CQ or CM channel), which the
    // kernel restarts after a handler with SA_RESTART: poll(2) never is, so
    // an unbounded wait restarts itself then (rpoll does not come here: it
    // returns EINTR, as upstream's poll-based rpoll).
    loop {
        // A cancellation of the thread is acted on here (and only here):
        // ECANCELED, which the export turns back into the thread's end.
        match crate::sys::cancel::wait_poll(&mut p, timeout_ms) {
            Err(Errno::EINTR) if timeout_ms < 0 && crate::sys::unix::handlers_restart() => continue,
            r => {
                r?;
                break;
            }
        }
    }
    // Reset before the caller looks again: a change after this wakes us
    // on the next sleep.
    if p[1].revents != 0 {
        if let Some(w) = &tok.wake {
            w.drain();
        }
    }
    Ok(p[0].revents != 0)
}

impl Stream {
    /// Signals every sleeper registered by another thread (they look again).
    #[inline]
    pub(super) fn wake_sleepers(&mut self) {
        self.sleepers.wake_all();
    }

    /// When the guard goes (or lets go of the lock): signals the sleepers
    /// that wait for what changed under it ([`super::sleepers::Sleepers::flush`]).
    #[inline]
    pub(super) fn flush_wakes(&mut self) {
        self.sleepers.flush();
    }

    /// Drops this thread's registration (it is awake and looks itself).
    pub(super) fn unregister_me(&mut self) {
        self.sleepers.unregister_me();
    }

    /// What a blocking call sleeps on (see [`wait`]); registers this
    /// thread as a sleeper of the stream, woken by the changes in `wants`
    /// ([`WANTS_ALL`] unless the call waits only for send room or data).
    pub(super) fn wait_token(&mut self, wants: u8) -> Result<WaitToken, Errno> {
        // A sleeper on a connected stream is woken by the CQ's event: the
        // CQ must be armed when it registers (see blocking::sleep_until_on).
        debug_assert!(!self.ctl.connected() || self.ep.is_none() || self.cq_armed, "rsocket: a sleeper registers with the CQ unarmed");
        let wake = wake::mine()?;
        self.sleepers.register(&wake, wants);
        Ok(WaitToken { fd: self.wait_fd(), wake: Some(wake), read: None, _id: self.cm.clone() })
    }

    /// What a blocked call (not rpoll) sleeps on, with the CQ armed. On a
    /// connected stream whose channel blocks (a blocking socket), the first
    /// sleeper becomes the stream's reader: it sleeps in reading the
    /// channel, as upstream's one waiter does, and is woken only by the
    /// CQ's event (every change that must wake it posts or flushes work
    /// requests: a control message, a stopped QP). The others sleep on their
    /// wake-up descriptors alone, woken by the reader's event
    /// ([`Stream::reader_done`]), by completions that concern them (`wants`)
    /// or by the reader's hand-off when its call is over
    /// ([`super::sleepers::Sleepers::leave`]). Otherwise as [`Stream::wait_token`], woken
    /// by any change.
    pub(super) fn sleep_token(&mut self, wants: u8) -> Result<WaitToken, Errno> {
        let blocking = self.ctl.connected() && self.cq_armed && self.ep.as_ref().is_some_and(|ep| ep.qp.channel_blocking());
        if !blocking {
            return self.wait_token(WANTS_ALL);
        }
        // Somebody reads the channel from now on: no hand-off is owed.
        if !self.sleepers.become_reader() {
            let mut t = self.wait_token(wants)?;
            t.fd = -1;
            return Ok(t);
        }
        // (the endpoint's QP holds the id, and with it the channel)
        Ok(WaitToken { fd: -1, wake: None, read: self.ep.clone(), _id: None })
    }
}
