// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The blocking calls' one shape: run a non-blocking step under the lock;
//! when it would block, register, drop the lock, sleep ([`super::guard::wait`]),
//! re-lock and try again. Busy-polls for `polling_time` first, as upstream.
#![deny(unsafe_code)]

use nix::errno::Errno;
use std::ffi::c_int;
use super::conf;
use super::guard::{lock, lock_path, wait, Guard, Path, WaitToken};
use super::state::*;
use std::time::{Duration, Instant};

impl Stream {
    /// Arms the CQ (if not yet) and returns what a blocked call sleeps on.
    pub(super) fn prepare_wait(&mut self) -> Result<WaitToken, Errno> {
        self.arm();
        self.wait_token(WANTS_ALL)
    }

    /// A blocked call is over (answered or failed) with the locks held:
    /// when this thread read the channel's last event and nobody has read
    /// it since, the reading is handed on: every sleeper looks again (one
    /// of them reads next, re-arming the CQ first).
    #[inline]
    pub(super) fn leave(&mut self) {
        self.sleepers.leave();
    }
}

/// Re-locks after a wait on `tok` (whose outcome is `r`) and finishes it
/// ([`finish_wait`]).
#[cfg(test)]
pub(super) fn after_wait(h: &Handle, tok: &WaitToken, r: &Result<bool, Errno>) -> Result<(), Errno> {
    let mut s = lock(h)?;
    finish_wait(&mut s, tok, r);
    Ok(())
}

/// After a wait on `tok` (whose outcome is `r`), under the lock: drops
/// this thread's registration and takes the CQ event that woke us, if
/// any: the reader has read it already (and hands the reading on, event
/// or not); a sleeper on the channel reads it now unless a reader is at it.
#[inline]
pub(super) fn finish_wait(s: &mut Stream, tok: &WaitToken, r: &Result<bool, Errno>) {
    if tok.is_reader() {
        // (never registered: see Stream::sleep_token)
        s.reader_done(r);
    } else {
        s.unregister_me();
        if tok.fd >= 0 {
            s.consume_cq_event();
        }
    }
}

/// Runs `check` under the lock until it gives an answer (Some), sleeping
/// without the lock in between: `check` returns None when a change must
/// come first (a completion: the CQ is armed before the sleep and `check`
/// runs once more; or an answer the service thread owes). Busy-polls for
/// at most `polling_time` first, as upstream, while the stream's spins pay
/// off ([`super::spin`]).
pub(super) fn sleep_until<T>(h: &Handle, check: impl FnMut(&mut Guard<'_>) -> Result<Option<T>, Errno>) -> Result<T, Errno> {
    sleep_until_on(h, Path::State, check)
}

/// Where a blocked call stands with its busy poll.
#[derive(Clone, Copy)]
enum Spin {
    /// Not decided: no check has failed yet.
    Start,
    /// Busy-polling since then.
    Since(Instant),
    /// Over (or skipped): the call arms the CQ and sleeps.
    Over,
}

/// What one try under the locks decided.
enum Step<T> {
    /// The call's answer.
    Done(T),
    /// Spin once more (None) or sleep on the token.
    Wait(Option<WaitToken>),
}

/// [`sleep_until`] holding `path`'s lock (taken before the state's) around
/// every try, never across the sleep.
pub(super) fn sleep_until_on<T>(h: &Handle, path: Path, mut check: impl FnMut(&mut Guard<'_>) -> Result<Option<T>, Errno>) -> Result<T, Errno> {
    let mut spin = Spin::Start;
    // The last sleep's token and outcome: finished under the next try's
    // locks (one locking less per sleep). Unregistered whatever the
    // outcome: a cancelled thread leaves nothing of itself in the stream.
    let mut woke: Option<(WaitToken, Result<bool, Errno>)> = None;
    // What wakes this call when another thread takes its completions.
    let wants = match path {
        Path::Send => WANTS_SEND,
        Path::Recv => WANTS_RECV,
        Path::State => WANTS_ALL,
    };
    loop {
        let tok = {
            let _p = lock_path(h, path);
            let mut s = lock(h)?;
            // Every way out passes leave() (the reader's hand-off).
            match try_once(&mut s, &mut woke, &mut spin, path, wants, &mut check) {
                Ok(Step::Wait(tok)) => tok,
                Ok(Step::Done(v)) => {
                    s.leave();
                    return Ok(v);
                }
                Err(e) => {
                    s.leave();
                    return Err(e);
                }
            }
        };
        match tok {
            None => std::hint::spin_loop(),
            Some(tok) => {
                let r = wait(&tok, -1);
                woke = Some((tok, r));
            }
        }
    }
}

/// The busy poll's limit (`polling_time`), read only by a call that has
/// to wait.
fn spin_limit() -> Duration {
    Duration::from_micros(conf::get().polling_time_us as u64)
}

/// One try of [`sleep_until_on`] under its locks: finishes the last sleep,
/// runs `check`, and when that has no answer decides between spinning
/// once more and sleeping (arming the CQ and registering first).
fn try_once<T>(
    s: &mut Guard<'_>,
    woke: &mut Option<(WaitToken, Result<bool, Errno>)>,
    spin: &mut Spin,
    path: Path,
    wants: u8,
    check: &mut impl FnMut(&mut Guard<'_>) -> Result<Option<T>, Errno>,
) -> Result<Step<T>, Errno> {
    if let Some((tok, r)) = woke.take() {
        finish_wait(s, &tok, &r);
        r?;
    }
    let unlocks = s.unlocks;
    if let Some(v) = check(s)? {
        if let Spin::Since(_) = spin {
            s.spin.hit();
        }
        return Ok(Step::Done(v));
    }
    *spin = match *spin {
        // (no clock read when there is no spin, as with polling_time 0)
        Spin::Start if !spin_limit().is_zero() && s.spin.begin() => Spin::Since(Instant::now()),
        Spin::Since(t0) if t0.elapsed() > spin_limit() => {
            s.spin.miss();
            Spin::Over
        }
        Spin::Since(t0) => Spin::Since(t0),
        Spin::Start | Spin::Over => Spin::Over,
    };
    if let Spin::Since(_) = spin {
        return Ok(Step::Wait(None));
    }
    // Armed only now that the spin is over (as upstream: a completion that
    // comes while spinning costs no event to arm and read); once armed,
    // look once more so that nothing that came before the arming is
    // missed. A sleeper needs the CQ armed when it registers: a check that
    // let go of the state (a copy, `Guard::unlocked`) may have seen another
    // thread read the event and leave the CQ unarmed, so arm and look again
    // until a look ends with the CQ armed. A send's or receive's look
    // (`check` is a function of the stream's state and its CQ) that kept
    // the state locked throughout needs no second look when the CQ, once
    // armed, has nothing more: nothing it looked at has changed since.
    let mut quiet = path != Path::State && s.unlocks == unlocks;
    loop {
        if !s.arm() {
            return Ok(Step::Wait(Some(s.sleep_token(wants)?)));
        }
        if quiet && matches!(s.poll_cq(), Ok(0)) {
            return Ok(Step::Wait(Some(s.sleep_token(wants)?)));
        }
        quiet = false;
        if let Some(v) = check(s)? {
            return Ok(Step::Done(v));
        }
    }
}

/// Processes completions until `test` holds, sleeping without the lock in
/// between (blocking even on a non-blocking socket, as rshutdown does).
pub(super) fn wait_until(h: &Handle, test: fn(&Stream) -> bool) -> Result<(), Errno> {
    sleep_until(h, |s| match s.process_cq(test) {
        Ok(()) => Ok(Some(())),
        Err(Errno::EWOULDBLOCK) => Ok(None),
        Err(e) => Err(e),
    })
}

/// The common shape of rsend, rrecv and riowrite: `op` runs without
/// blocking under `path`'s lock and the state's (which it may let go of
/// while it copies: [`Guard::unlocked`]) and returns the bytes it moved and whether the
/// call is finished; a blocking call that would block (EAGAIN) sleeps
/// without the lock and tries again. `done` counts the bytes moved so far.
/// On a socket still opening, a blocking call first waits for the
/// connection; a non-blocking one returns EAGAIN, as upstream.
pub(super) fn run_blocking(h: &Handle, path: Path, flags: c_int, mut op: impl FnMut(&mut Guard<'_>, usize) -> Result<(usize, bool), Errno>) -> Result<usize, Errno> {
    let mut done = 0usize;
    let r = sleep_until_on(h, path, |s| {
        let nb = s.nonblocking() || flags & libc::MSG_DONTWAIT != 0;
        if s.ctl.state() & ST_OPENING != 0 {
            return if nb { Err(Errno::EAGAIN) } else { Ok(None) };
        }
        loop {
            match op(s, done) {
                Ok((n, fin)) => {
                    done += n;
                    if fin || nb {
                        return Ok(Some(()));
                    }
                    // Progress: try again at once; only an EAGAIN sleeps.
                }
                // Sleeps (sleep_until_on arms the CQ once its spin is over).
                Err(Errno::EAGAIN) if !nb && s.is_connected_state() => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    });
    match r {
        Ok(()) => Ok(done),
        Err(e) if done > 0 => {
            let _ = e;
            Ok(done)
        }
        Err(e) => Err(e),
    }
}
