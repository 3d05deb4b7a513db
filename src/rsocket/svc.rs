// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The rsocket service threads: one mechanism ([`Service`]), one instance
//! per kind of work, each one thread per process, started with its first
//! client (upstream runs the same work in its `rs_svc` threads).
//!
//! * Streams ([`STREAMS`], thread "rsocket-svc"): each stream's connection
//!   manager channel (its own, non-blocking, so no connection manager call
//!   ever waits under a stream lock). A listener accepts the requests into
//!   its accept queue, a connecting or accepting stream moves on through
//!   address and route resolution to connected (or to a connect error), a
//!   connected stream notes a disconnect; keepalives are the timed work.
//! * Datagram sockets ([`DATAGRAMS`], thread "rsocket-udp"): each socket's
//!   UDP socket, on which the first datagrams from a peer arrive.
//!
//! A thread sleeps in poll(2) on its clients' descriptors and its own
//! wake-up descriptor, with the earliest timed work as the timeout. When a
//! descriptor is readable it lets that client take what arrived without
//! blocking ([`Client::readable`]); every state change signals the
//! socket's sleepers as any other change does.
//!
//! Registration holds the client and a keeper of the polled descriptor (a
//! stream's id, a datagram socket's UDP socket), so the descriptor stays
//! open while the thread may poll it; [`Service::remove`] returns only once
//! the thread has let go of the client (rclose calls it before it frees
//! what the descriptor belongs to). No socket lock is held while this
//! module's lock is waited for by the thread; callers may hold a socket
//! lock when they call [`Service::add`] or [`Service::kick`] (lock order:
//! socket, then service), not when they call [`Service::remove`].
//!
//! A child of fork(2) has none of its parent's threads: each service's
//! thread, wake-up descriptor and registrations are a
//! `sys::process::PerProcess` value, so the first add
//! in the child makes the child's own (the inherited wake-up descriptor is
//! the same eventfd as the parent's) and the parent's registrations are
//! forgotten, never dropped (that module's policy; the sockets stay alive
//! in their tables). Telling the processes apart costs no system call.
#![deny(unsafe_code)]

use super::verbs::{self, Wake};
use crate::sys::process::PerProcess;
use nix::errno::Errno;
use parking_lot::{Condvar, Mutex};
use std::any::Any;
use std::ffi::c_int;
use std::sync::Arc;
use std::time::Instant;

/// What a service thread serves.
pub trait Client: Send + Sync {
    /// The client's descriptor is readable: take what arrived without
    /// blocking. False once the client is gone (the thread forgets it).
    fn readable(self: Arc<Self>) -> bool;

    /// Timed work due at `now`, if any; when it is next due.
    fn tick(self: Arc<Self>, _now: Instant) -> Option<Instant> {
        None
    }
}

/// A client's identity: the address of what its `Arc` points to.
pub fn key<T: ?Sized>(c: &Arc<T>) -> usize {
    Arc::as_ptr(c) as *const () as usize
}

struct Entry {
    fd: c_int,
    c: Arc<dyn Client>,
    _keep: Arc<dyn Any + Send + Sync>,
}

struct State {
    entries: Vec<Entry>,
    /// Requests for a new snapshot, and the last one the thread took.
    asked: u64,
    seen: u64,
    /// The thread, once started.
    thread: Option<std::thread::ThreadId>,
}

/// A service in one process: its thread's state and wake-up descriptor.
struct Runner {
    st: Mutex<State>,
    cond: Condvar,
    ctl: Wake,
}

/// One service thread and its clients.
pub struct Service {
    name: &'static str,
    runner: PerProcess<Runner>,
}

/// The streams' service.
pub static STREAMS: Service = Service::new("rsocket-svc");
/// The datagram sockets' service.
pub static DATAGRAMS: Service = Service::new("rsocket-udp");

impl Service {
    const fn new(name: &'static str) -> Service {
        Service { name, runner: PerProcess::new() }
    }

    /// Registers client `c` polled on `fd` (kept open by `keep`), starting
    /// this process's thread if needed; a client already registered stays
    /// as it is.
    pub fn add(&'static self, fd: c_int, c: Arc<dyn Client>, keep: Arc<dyn Any + Send + Sync>) -> Result<(), Errno> {
        let r: &'static Runner = self.runner.get_or_try_init(|| -> Result<Runner, Errno> {
            Ok(Runner { st: Mutex::new(State { entries: Vec::new(), asked: 0, seen: 0, thread: None }), cond: Condvar::new(), ctl: Wake::new()? })
        })?;
        let mut st = r.st.lock();
        if st.thread.is_none() {
            let t = crate::sys::process::spawn(self.name, move || r.run()).map_err(|_| Errno::EAGAIN)?;
            st.thread = Some(t.thread().id());
        }
        let k = key(&c);
        if !st.entries.iter().any(|e| key(&e.c) == k) {
            st.entries.push(Entry { fd, c, _keep: keep });
        }
        st.asked += 1;
        r.ctl.signal();
        Ok(())
    }

    /// Wakes the thread to look at its clients again (timed work changed).
    pub fn kick(&self) {
        // No thread in this process yet: nothing to wake.
        let Some(r) = self.runner.get() else { return };
        r.st.lock().asked += 1;
        r.ctl.signal();
    }

    /// Unregisters the client whose [`key`] is `k` and waits until the
    /// thread no longer uses it. The caller holds no socket lock.
    pub fn remove(&self, k: usize) {
        let Some(r) = self.runner.get() else { return };
        let mut st = r.st.lock();
        let before = st.entries.len();
        st.entries.retain(|e| key(&e.c) != k);
        if st.entries.len() == before {
            return;
        }
        st.asked += 1;
        let want = st.asked;
        r.ctl.signal();
        if st.thread == Some(std::thread::current().id()) {
            return;
        }
        while st.seen < want {
            r.cond.wait(&mut st);
        }
    }
}

impl Runner {
    fn run(&self) {
        let ctl = &self.ctl;
        loop {
            let snap: Vec<(c_int, Arc<dyn Client>)> = {
                let mut st = self.st.lock();
                st.seen = st.asked;
                self.cond.notify_all();
                st.entries.iter().map(|e| (e.fd, e.c.clone())).collect()
            };
            // The descriptors stay open: the entries keep them until
            // remove(), which waits for the next snapshot, taken after this
            // one is dropped.
            let now = Instant::now();
            let mut next: Option<Instant> = None;
            for (_, c) in &snap {
                if let Some(t) = c.clone().tick(now) {
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
            for (i, (_, c)) in snap.iter().enumerate() {
                if fds[i + 1].revents != 0 && !c.clone().readable() {
                    gone.push(key(c));
                }
            }
            drop(snap);
            if !gone.is_empty() {
                let mut st = self.st.lock();
                st.entries.retain(|e| !gone.contains(&key(&e.c)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    static TEST: Service = Service::new("rsocket-svc-test");

    /// A client over a pipe: counts its wake-ups, drains the pipe, and is
    /// gone after `lives` of them.
    struct Pipe {
        r: OwnedFd,
        seen: AtomicUsize,
        lives: usize,
        ticks: AtomicUsize,
    }

    impl Client for Pipe {
        fn readable(self: Arc<Self>) -> bool {
            let mut b = [0u8; 16];
            let _ = nix::unistd::read(self.r.as_raw_fd(), &mut b);
            self.seen.fetch_add(1, Ordering::SeqCst) + 1 < self.lives
        }

        fn tick(self: Arc<Self>, now: Instant) -> Option<Instant> {
            self.ticks.fetch_add(1, Ordering::SeqCst);
            Some(now + Duration::from_millis(20))
        }
    }

    fn until(what: impl Fn() -> bool) -> bool {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if what() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// The mechanism: a readable descriptor reaches its client; a client
    /// that says it is gone is forgotten; timed work runs at its time; a
    /// removed client is let go before remove returns.
    #[test]
    fn clients_are_served_and_let_go() {
        let (r, w) = nix::unistd::pipe().expect("pipe");
        let fd = r.as_raw_fd();
        let c = Arc::new(Pipe { r, seen: AtomicUsize::new(0), lives: 2, ticks: AtomicUsize::new(0) });
        TEST.add(fd, c.clone(), Arc::new(())).expect("add");
        assert_eq!(nix::unistd::write(&w, b"x"), Ok(1));
        assert!(until(|| c.seen.load(Ordering::SeqCst) == 1), "the first byte reaches the client");
        // Timed work: about every 20 ms while registered.
        let t0 = c.ticks.load(Ordering::SeqCst);
        assert!(until(|| c.ticks.load(Ordering::SeqCst) >= t0 + 3), "ticks");
        assert_eq!(nix::unistd::write(&w, b"y"), Ok(1));
        assert!(until(|| c.seen.load(Ordering::SeqCst) == 2));
        // Gone after its second wake-up: the service drops its reference.
        assert!(until(|| Arc::strong_count(&c) == 1), "a gone client is forgotten");
        assert_eq!(nix::unistd::write(&w, b"z"), Ok(1));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(c.seen.load(Ordering::SeqCst), 2);

        // remove: returns once the thread holds the client no more.
        let (r2, _w2) = nix::unistd::pipe().expect("pipe");
        let fd2 = r2.as_raw_fd();
        let d = Arc::new(Pipe { r: r2, seen: AtomicUsize::new(0), lives: usize::MAX, ticks: AtomicUsize::new(0) });
        TEST.add(fd2, d.clone(), Arc::new(())).expect("add");
        assert!(until(|| d.ticks.load(Ordering::SeqCst) > 0), "registered");
        TEST.remove(key(&d));
        assert_eq!(Arc::strong_count(&d), 1, "remove returned while the thread still held the client");
    }
}
