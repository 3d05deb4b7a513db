// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The rsocket service thread: one per process, started with the first
//! rsocket that connects or listens (upstream runs the same work in its
//! listen, connect and keepalive service threads).
//!
//! It sleeps in poll(2) on the connection manager channel of every
//! registered rsocket (each rsocket's id has its own channel, set
//! non-blocking, so no connection manager call ever waits under a stream
//! lock) and on its own wake-up descriptor, with the earliest keepalive as
//! the timeout. When a channel is readable it locks that stream and lets it
//! take its events without blocking ([`super::cm_event`]): a listener
//! accepts the requests into its accept queue, a connecting or accepting
//! stream moves on through address and route resolution to connected (or
//! to a connect error), a connected stream notes a disconnect. Every state
//! change signals the stream's sleepers as any other change does.
//!
//! Registration holds a clone of the stream's id, so the descriptor polled
//! stays open while the thread may poll it; [`remove`] returns only once
//! the thread has let go of the stream (rclose calls it before it frees
//! the id). No stream lock is held while this module's lock is waited for
//! by the thread; callers may hold a stream lock when they call [`add`] or
//! [`kick`] (lock order: stream, then service).
#![deny(unsafe_code)]

use super::verbs::{self, Wake};
use super::Handle;
use crate::cma::api::CmId;
use parking_lot::{Condvar, Mutex};
use std::ffi::c_int;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

struct Entry {
    fd: c_int,
    h: Handle,
    _id: Arc<CmId>,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    /// Requests for a new snapshot, and the last one the thread took.
    asked: u64,
    seen: u64,
    /// The thread's process (a forked child starts its own) and id.
    pid: u32,
    thread: Option<std::thread::ThreadId>,
    /// The thread's wake-up descriptor. A child of fork(2) makes its own:
    /// the inherited one is the same eventfd as the parent's, so either
    /// thread could take the other's wake-ups.
    ctl: Option<Arc<Wake>>,
}

impl State {
    fn signal(&self) {
        if let Some(c) = &self.ctl {
            c.signal();
        }
    }
}

struct Svc {
    st: Mutex<State>,
    cond: Condvar,
}

fn svc() -> &'static Svc {
    static SVC: OnceLock<Svc> = OnceLock::new();
    SVC.get_or_init(|| Svc { st: Mutex::new(State::default()), cond: Condvar::new() })
}

/// Registers a stream (its channel descriptor `fd` and id) with the
/// thread, starting it if needed.
pub fn add(fd: c_int, h: Handle, id: Arc<CmId>) -> Result<(), nix::errno::Errno> {
    let s = svc();
    let mut st = s.st.lock();
    let pid = std::process::id();
    if st.thread.is_none() || st.pid != pid {
        // First use, or a child of fork(2) without the parent's thread.
        // The parent's entries are the parent's thread's: forget them
        // (the stream handles stay alive in the table).
        st.entries.clear();
        st.seen = st.asked;
        let ctl = Arc::new(Wake::new()?);
        let c2 = ctl.clone();
        let t = std::thread::Builder::new().name("rsocket-svc".into()).spawn(move || run(c2)).map_err(|_| nix::errno::Errno::EAGAIN)?;
        st.thread = Some(t.thread().id());
        st.pid = pid;
        st.ctl = Some(ctl);
    }
    if !st.entries.iter().any(|e| Arc::ptr_eq(&e.h, &h)) {
        st.entries.push(Entry { fd, h, _id: id });
    }
    st.asked += 1;
    st.signal();
    Ok(())
}

/// Wakes the thread to look at its streams again (keepalive changes).
pub fn kick() {
    let mut st = svc().st.lock();
    if st.pid != std::process::id() {
        return;
    }
    st.asked += 1;
    st.signal();
}

/// Unregisters a stream and waits until the thread no longer uses it.
/// The caller holds no stream lock.
pub fn remove(h: &Handle) {
    let s = svc();
    let mut st = s.st.lock();
    let before = st.entries.len();
    st.entries.retain(|e| !Arc::ptr_eq(&e.h, h));
    if st.entries.len() == before || st.pid != std::process::id() {
        return;
    }
    st.asked += 1;
    let want = st.asked;
    st.signal();
    if st.thread == Some(std::thread::current().id()) {
        return;
    }
    while st.seen < want {
        s.cond.wait(&mut st);
    }
}

fn run(ctl: Arc<Wake>) {
    let s = svc();
    loop {
        let snap: Vec<(c_int, Handle)> = {
            let mut st = s.st.lock();
            st.seen = st.asked;
            s.cond.notify_all();
            st.entries.iter().map(|e| (e.fd, e.h.clone())).collect()
        };
        // The ids stay open: the entries hold them until remove(), which
        // waits for the next snapshot, taken after this one is dropped.
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        for (_, h) in &snap {
            if let Some(t) = super::keepalive_tick(h, now) {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        let timeout = match next {
            None => -1,
            Some(t) => {
                let d = t.saturating_duration_since(Instant::now());
                d.as_millis().min(i32::MAX as u128) as c_int + if d.subsec_nanos() % 1_000_000 != 0 { 1 } else { 0 }
            }
        };
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(snap.len() + 1);
        fds.push(libc::pollfd { fd: ctl.fd(), events: libc::POLLIN, revents: 0 });
        fds.extend(snap.iter().map(|(fd, _)| libc::pollfd { fd: *fd, events: libc::POLLIN, revents: 0 }));
        if verbs::poll(&mut fds, timeout).is_err() {
            continue;
        }
        if fds[0].revents != 0 {
            ctl.drain();
        }
        let mut gone = Vec::new();
        for (i, (_, h)) in snap.iter().enumerate() {
            if fds[i + 1].revents != 0 && !super::cm_event(h) {
                gone.push(h.clone());
            }
        }
        drop(snap);
        if !gone.is_empty() {
            let mut st = s.st.lock();
            st.entries.retain(|e| !gone.iter().any(|g| Arc::ptr_eq(g, &e.h)));
        }
    }
}
