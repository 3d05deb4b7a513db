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
        self.wait_token()
    }
}

/// Re-locks after a wait on `tok` (whose outcome is `r`), drops this
/// thread's registration and takes the CQ event that woke us, if any: the
/// reader has read it already (and hands the reading on, event or not);
/// a sleeper on the channel reads it now unless a reader is at it.
pub(super) fn after_wait(h: &Handle, tok: &WaitToken, r: &Result<bool, Errno>) -> Result<(), Errno> {
    let mut s = lock(h)?;
    if tok.is_reader() {
        // (never registered: see Stream::sleep_token)
        s.reader_done(r);
    } else {
        s.unregister_me();
        if tok.fd >= 0 {
            s.consume_cq_event();
        }
    }
    Ok(())
}

/// Runs `check` under the lock until it gives an answer (Some), sleeping
/// without the lock in between: `check` returns None when a change must
/// come first (a completion: the CQ is armed before the sleep and `check`
/// runs once more; or an answer the service thread owes). Busy-polls for
/// `polling_time` first, as upstream.
pub(super) fn sleep_until<T>(h: &Handle, check: impl FnMut(&mut Guard<'_>) -> Result<Option<T>, Errno>) -> Result<T, Errno> {
    sleep_until_on(h, Path::State, check)
}

/// [`sleep_until`] holding `path`'s lock (taken before the state's) around
/// every try, never across the sleep.
pub(super) fn sleep_until_on<T>(h: &Handle, path: Path, mut check: impl FnMut(&mut Guard<'_>) -> Result<Option<T>, Errno>) -> Result<T, Errno> {
    let spin = Duration::from_micros(conf::get().polling_time_us as u64);
    let mut start: Option<Instant> = None;
    loop {
        let tok = {
            let _p = lock_path(h, path);
            let mut s = lock(h)?;
            if let Some(v) = check(&mut s)? {
                return Ok(v);
            }
            // (no clock read when there is no spin, as with polling_time 0)
            if !spin.is_zero() && start.get_or_insert_with(Instant::now).elapsed() <= spin {
                None
            } else {
                // Armed only now that the spin is over (as upstream: a
                // completion that comes while spinning costs no event to
                // arm and read); once armed, look once more so that nothing
                // that came before the arming is missed. A sleeper needs the
                // CQ armed when it registers: a check that let go of the
                // state (a copy, `Guard::unlocked`) may have seen another
                // thread read the event and leave the CQ unarmed, so arm and
                // look again until a look ends with the CQ armed.
                loop {
                    if !s.arm() {
                        break Some(s.sleep_token()?);
                    }
                    if let Some(v) = check(&mut s)? {
                        return Ok(v);
                    }
                }
            }
        };
        match tok {
            None => std::hint::spin_loop(),
            Some(tok) => {
                let r = wait(&tok, -1);
                // Unregistered whatever the wait's outcome (a cancelled
                // thread leaves nothing of itself in the stream).
                let a = after_wait(h, &tok, &r);
                drop(tok);
                r?;
                a?;
            }
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
        if s.state & ST_OPENING != 0 {
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
