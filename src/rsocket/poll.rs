// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rpoll over a mix of rsockets (streams and datagram sockets) and
//! ordinary descriptors.
#![deny(unsafe_code)]

use nix::errno::Errno;
use std::ffi::c_int;
use super::conf;
use super::dgram;
use super::guard::{guards_held, lock, WaitToken};
use super::sock::{self, Sock};
use super::state::*;
use super::verbs;
use crate::sys::rsock;
use crate::sys::wake::{self, Wake};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Stream {
    /// rpoll's view: the ready events among `events`, processing completions
    /// first (as upstream reports them).
    pub fn poll_events(&mut self, events: i16) -> i16 {
        if self.ctl.state() == ST_LISTENING {
            return if self.lq.has_queued() { libc::POLLIN & events } else { 0 };
        }
        let was_connected = self.ctl.connected() || self.ctl.state() == ST_DISCONNECTED || self.ctl.state() & ST_ERROR != 0;
        if was_connected && self.ep.is_some() {
            let _ = self.process_cq(Stream::poll_all);
            let mut rev = 0i16;
            if events & libc::POLLIN != 0 && self.conn_have_rdata() {
                rev |= libc::POLLIN;
            }
            if events & libc::POLLOUT != 0 && self.can_send() {
                rev |= libc::POLLOUT;
            }
            if !self.ctl.connected() {
                rev |= if self.ctl.state() == ST_DISCONNECTED { libc::POLLHUP } else { libc::POLLERR };
            }
            return rev;
        }
        if self.ctl.state() == ST_CONNECT_ERROR {
            return (events & (libc::POLLIN | libc::POLLOUT)) | libc::POLLERR;
        }
        // Unconnected, or opening (the service thread signals the outcome).
        0
    }
}

/// What an edge-triggered repoll member of a stream compares between two
/// looks: it changes with every data message received, credit or send
/// room given back, connection queued for raccept and change of state,
/// and not when the program reads or takes a connection. Read off fields
/// the stream keeps anyway: nothing on the data path counts for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seq([u32; 6]);

impl Stream {
    fn readiness_seq(&self) -> Seq {
        let (credit, sqes, bytes) = self.tx.readiness();
        Seq([self.ctl.state(), u32::from(self.rx.arrived()), self.lq.accepts(), u32::from(credit), sqes, bytes])
    }
}

/// One rsocket's ready events among `events` (as rpoll sees them) and,
/// for a stream, its readiness sequence ([`Seq`]; None for a datagram
/// socket, whose changes are seen only as changes of its events).
pub fn look(s: &Sock, events: i16) -> (i16, Option<Seq>) {
    match s {
        Sock::Stream(h) => match lock(h) {
            Ok(mut g) => {
                let rev = g.poll_events(events);
                (rev, Some(g.readiness_seq()))
            }
            Err(Errno::EBADF) => (libc::POLLNVAL, None),
            Err(_) => (libc::POLLERR, None),
        },
        Sock::Dgram(d) => (dgram::poll_events(d, events), None),
    }
}

/// rpoll over a mix of rsockets and ordinary descriptors: busy-polls for
/// `polling_time`, then sleeps on the rsockets' CQ channels, this thread's
/// wake-up descriptor (registered with each rsocket) and the ordinary
/// descriptors, at most `wake_up_interval` at a time, as upstream.
pub fn poll(fds: &mut [libc::pollfd], timeout: c_int) -> Result<c_int, Errno> {
    let start = Instant::now();
    let c = conf::get();
    let spin = Duration::from_micros(c.polling_time_us as u64);
    loop {
        let n = check_fds(fds)?;
        if n > 0 || timeout == 0 {
            return Ok(n);
        }
        if start.elapsed() > spin {
            break;
        }
        std::hint::spin_loop();
    }
    loop {
        // Arm and register, then look once more so that nothing that
        // arrived meanwhile is missed.
        let wake = wake::mine()?;
        let mut rfds: Vec<libc::pollfd> = Vec::with_capacity(fds.len() + 1);
        let mut slots: Vec<Option<(Handle, WaitToken)>> = Vec::with_capacity(fds.len());
        let mut dslots: Vec<Option<dgram::PollSlot>> = Vec::with_capacity(fds.len());
        for f in fds.iter() {
            let sk = if f.fd < 0 { None } else { sock::lookup(f.fd).ok() };
            let (tok, ds) = match sk {
                Some(Sock::Stream(h)) => {
                    let tok = lock(&h).ok().and_then(|mut s| s.prepare_wait().ok());
                    (tok.map(|t| (h, t)), None)
                }
                Some(Sock::Dgram(d)) => (None, dgram::prepare_wait(&d)),
                None => (None, None),
            };
            match (&tok, &ds) {
                (Some((_, t)), _) => rfds.push(libc::pollfd { fd: t.fd, events: libc::POLLIN, revents: 0 }),
                (None, Some(d)) => rfds.push(libc::pollfd { fd: d.fd(), events: libc::POLLIN, revents: 0 }),
                (None, None) => rfds.push(*f),
            }
            slots.push(tok);
            dslots.push(ds);
        }
        rfds.push(libc::pollfd { fd: wake.fd(), events: libc::POLLIN, revents: 0 });
        let n = check_fds(fds)?;
        if n > 0 {
            unregister_all(&slots);
            dslots.iter().flatten().for_each(|d| d.done(false));
            return Ok(n);
        }
        let slice = if c.wake_up_interval_ms > 0 { c.wake_up_interval_ms } else { -1 };
        let wait_ms = if timeout < 0 {
            slice
        } else {
            let left = timeout as i64 - start.elapsed().as_millis() as i64;
            if left <= 0 {
                unregister_all(&slots);
                dslots.iter().flatten().for_each(|d| d.done(false));
                return Ok(0);
            }
            if slice < 0 {
                left as c_int
            } else {
                (left as c_int).min(slice)
            }
        };
        debug_assert_eq!(guards_held(), 0, "rsocket: blocking wait with a stream lock held");
        let r = crate::sys::cancel::wait_poll(&mut rfds, wait_ms);
        if rfds.last().is_some_and(|p| p.revents != 0) {
            wake.drain();
        }
        for (i, d) in dslots.iter().enumerate() {
            if let Some(d) = d {
                d.done(rfds[i].revents & libc::POLLIN != 0);
            }
        }
        for (i, slot) in slots.iter().enumerate() {
            if let Some((h, _)) = slot {
                if let Ok(mut s) = lock(h) {
                    s.unregister_me();
                    if rfds[i].revents & libc::POLLIN != 0 {
                        s.consume_cq_event();
                    }
                }
            }
        }
        r?;
    }
}

pub(super) fn unregister_all(slots: &[Option<(Handle, WaitToken)>]) {
    for (h, _) in slots.iter().flatten() {
        if let Ok(mut s) = lock(h) {
            s.unregister_me();
        }
    }
}

pub(super) fn check_fds(fds: &mut [libc::pollfd]) -> Result<c_int, Errno> {
    let mut n = 0;
    for f in fds.iter_mut() {
        f.revents = 0;
        if f.fd < 0 {
            continue;
        }
        // The table's lock ends with the lookup: no socket is locked under it.
        match sock::lookup(f.fd).ok() {
            Some(Sock::Stream(h)) => {
                f.revents = match lock(&h) {
                    Ok(mut s) => s.poll_events(f.events),
                    Err(Errno::EBADF) => libc::POLLNVAL,
                    Err(_) => libc::POLLERR,
                };
            }
            Some(Sock::Dgram(d)) => f.revents = dgram::poll_events(&d, f.events),
            None => {
                let mut p = [libc::pollfd { fd: f.fd, events: f.events, revents: 0 }];
                if verbs::poll(&mut p, 0).unwrap_or(0) > 0 {
                    f.revents = p[0].revents;
                }
            }
        }
        if f.revents != 0 {
            n += 1;
        }
    }
    Ok(n)
}

/// A waiter on one stream that is not a thread (an async task): a
/// wake-up descriptor of its own, registered with the stream as a
/// sleeper's is, so that whoever changes the stream (a completion taken by
/// another caller, the service thread's connect, accept or disconnect,
/// rclose) signals it. Non-blocking throughout: the caller waits, on
/// [`Waiter::wake_fd`] and on the stream's CQ channel ([`Waiter::cq_channel`]),
/// as rpoll waits on its thread's descriptor and the channels.
///
/// The order that loses no wake-up, as rpoll's: [`Waiter::arm`] (arm the
/// CQ, look, register) before the wait, [`Waiter::done`] after it (and
/// then try the operation again).
pub struct Waiter {
    wake: Arc<Wake>,
}

impl Waiter {
    pub fn new() -> Result<Waiter, Errno> {
        Ok(Waiter { wake: Arc::new(Wake::new()?) })
    }

    /// A duplicate of the wake-up descriptor (readable once signalled,
    /// until [`Waiter::done`]).
    pub fn wake_fd(&self) -> Result<OwnedFd, Errno> {
        rsock::dup_cloexec(self.wake.fd())
    }

    /// A duplicate of the stream's CQ channel once it is connected (None
    /// before: the service thread signals the changes until then). Its
    /// events are taken by [`Waiter::done`].
    pub fn cq_channel(&self, s: &Sock) -> Result<Option<OwnedFd>, Errno> {
        let Sock::Stream(h) = s else { return Err(Errno::ENOTSUP) };
        let g = lock(h)?;
        match g.wait_fd() {
            fd if fd >= 0 => rsock::dup_cloexec(fd).map(Some),
            _ => Ok(None),
        }
    }

    /// Arms the CQ, looks (rpoll's view: completions taken first) and,
    /// when none of `events` is ready, registers this waiter for any
    /// change, all under the stream's lock: a change after the look
    /// signals the wake-up descriptor, a completion raises a CQ event.
    /// The ready events (0: wait).
    pub fn arm(&self, s: &Sock, events: i16) -> Result<i16, Errno> {
        let Sock::Stream(h) = s else { return Err(Errno::ENOTSUP) };
        let mut g = lock(h)?;
        g.arm();
        let rev = g.poll_events(events);
        // What the look changed goes to the other sleepers now, not to
        // this one (it is about to look again anyway).
        g.flush_wakes();
        if rev == 0 {
            g.sleepers.register(&self.wake, WANTS_ALL);
        }
        Ok(rev)
    }

    /// After a wake-up: resets the wake-up descriptor, drops the
    /// registration and, when the CQ channel was readable, takes its event
    /// (the CQ is armed again by the next [`Waiter::arm`]).
    pub fn done(&self, s: &Sock, cq_readable: bool) {
        self.wake.drain();
        let Sock::Stream(h) = s else { return };
        if let Ok(mut g) = lock(h) {
            g.sleepers.unregister(&self.wake);
            if cq_readable {
                g.consume_cq_event();
            }
        }
    }
}
