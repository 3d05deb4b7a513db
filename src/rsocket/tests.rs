// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Unit tests of the stream's locking rules, rpoll and rsocket's arguments.

use super::blocking::after_wait;
use super::guard::*;
use super::poll::poll;
use super::sock::{close, create, lookup, Sock};
use super::state::*;
use super::verbs;
use super::wire::*;
use nix::errno::Errno;
use parking_lot::Mutex;
use std::sync::Arc;

#[test]
fn message_words() {
    let m = msg_set(OP_SGL, 0x1234);
    assert_eq!(m, 0x8000_1234);
    assert_eq!(msg_op(m), OP_SGL);
    assert_eq!(msg_data(m), 0x1234);
    assert_eq!(msg_op(msg_set(OP_CTRL, CTRL_SHUTDOWN)), OP_CTRL);
    assert_eq!(msg_data(msg_set(OP_DATA, 0x3FFF_FFFF)), 0x1FFF_FFFF);
}

#[test]
fn iomap_size_scale() {
    assert_eq!(value_to_scale(0, 8), 0);
    assert_eq!(value_to_scale(128, 8), 128);
    assert_eq!(scale_to_value(value_to_scale(4096, 8), 8), 4096);
}

#[test]
fn bad_socket_arguments() {
    assert_eq!(create(libc::AF_UNIX, libc::SOCK_STREAM, 0).err(), Some(Errno::ENOTSUP));
    assert_eq!(create(libc::AF_INET, libc::SOCK_SEQPACKET, 0).err(), Some(Errno::ENOTSUP));
    assert_eq!(create(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_UDP).err(), Some(Errno::ENOTSUP));
    assert_eq!(create(libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_TCP).err(), Some(Errno::ENOTSUP));
    assert_eq!(create(libc::AF_UNIX, libc::SOCK_DGRAM, 0).err(), Some(Errno::ENOTSUP));
    // SOCK_DGRAM is a datagram rsocket (its UDP socket's number).
    let d = create(libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_UDP).expect("dgram rsocket");
    assert!(matches!(lookup(d), Ok(Sock::Dgram(_))));
    close(d).expect("close");
    assert_eq!(lookup(-1).err(), Some(Errno::EBADF));
    assert_eq!(close(-1).err(), Some(Errno::EBADF));
}

#[test]
fn rpoll_on_ordinary_descriptors() {
    let (r, w) = nix::unistd::pipe().expect("pipe");
    use std::os::fd::AsRawFd;
    let mut p = [libc::pollfd { fd: r.as_raw_fd(), events: libc::POLLIN, revents: 0 }, libc::pollfd { fd: w.as_raw_fd(), events: libc::POLLOUT, revents: 0 }];
    assert_eq!(poll(&mut p, 0), Ok(1));
    assert_eq!(p[1].revents, libc::POLLOUT);
    p[1].events = 0;
    assert_eq!(poll(&mut p, 20), Ok(0));
    assert_eq!(nix::unistd::write(&w, b"x"), Ok(1));
    assert_eq!(poll(&mut p, -1), Ok(1));
    assert_eq!(p[0].revents, libc::POLLIN);
}

/// A stream without an id (what rclose leaves), for the locking rules.
fn bare() -> Handle {
    Arc::new(Mutex::new(Stream::fresh(None, -1, libc::AF_INET)))
}

fn token(h: &Handle) -> WaitToken {
    lock(h).expect("usable").wait_token().expect("eventfd")
}

/// The no-lock-across-wait rule, checked: a wait while this thread
/// holds a stream guard is a bug (debug builds panic).
#[test]
#[cfg(debug_assertions)]
fn wait_refuses_a_held_lock() {
    let h = bare();
    let tok = token(&h);
    assert_eq!(wait(&tok, 0), Ok(false));
    let g = lock(&h).expect("usable");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wait(&tok, 0)));
    assert!(r.is_err(), "wait must refuse to run with a stream guard held");
    drop(g);
    assert_eq!(guards_held(), 0);
    assert_eq!(wait(&tok, 0), Ok(false));
}

/// A panic while a stream is locked marks it broken: later calls fail
/// with EIO instead of using half-updated state; rclose still frees it.
#[test]
fn panic_under_the_lock_breaks_the_stream() {
    let h = bare();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut s = lock(&h).expect("usable");
        s.state = ST_CONNECTING;
        panic!("in the middle of an update");
    }));
    assert!(r.is_err());
    assert_eq!(lock(&h).err(), Some(Errno::EIO));
    assert_eq!(guards_held(), 0);
    lock_any(&h).destroy();
    assert_eq!(lock(&h).err(), Some(Errno::EBADF));
}

/// A thread sleeping on a stream wakes when the stream is closed and
/// sees EBADF when it re-locks (what rrecv/rsend/rpoll sleepers do).
#[test]
fn close_wakes_a_sleeper() {
    let h = bare();
    let h2 = h.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        // The sleeper registers itself (its own wake-up descriptor).
        let tok = token(&h2);
        tx.send(()).expect("registered");
        let woke = wait(&tok, 10_000);
        (woke, after_wait(&h2))
    });
    rx.recv().expect("sleeper");
    std::thread::sleep(std::time::Duration::from_millis(50));
    let start = std::time::Instant::now();
    lock_any(&h).destroy();
    let (woke, again) = t.join().expect("sleeper");
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(woke, Ok(false));
    assert_eq!(again, Err(Errno::EBADF));
}

/// The exact hand-off: a change made under another thread's guard (a
/// completion processed, a CQ event consumed) wakes a registered
/// sleeper at once; a change by the sleeper's own thread does not
/// signal itself.
#[test]
fn a_change_wakes_the_other_sleepers() {
    let h = bare();
    let h2 = h.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let tok = token(&h2);
        tx.send(()).expect("registered");
        let start = std::time::Instant::now();
        let woke = wait(&tok, 10_000);
        (woke, start.elapsed(), lock(&h2).map(|mut s| {
            s.unregister_me();
            s.sleepers.len()
        }))
    });
    rx.recv().expect("sleeper");
    std::thread::sleep(std::time::Duration::from_millis(50));
    {
        let mut s = lock(&h).expect("usable");
        // An unchanged stream signals nobody.
        assert_eq!(s.sleepers.len(), 1);
        drop(s);
        std::thread::sleep(std::time::Duration::from_millis(50));
        s = lock(&h).expect("usable");
        assert_eq!(s.sleepers.len(), 1, "a guard without a change must not wake sleepers");
        s.dirty = true;
    }
    let (woke, slept, left) = t.join().expect("sleeper");
    assert_eq!(woke, Ok(false));
    assert!(slept < std::time::Duration::from_secs(5), "the sleeper must wake at once, slept {slept:?}");
    assert_eq!(left, Ok(0));
    // Our own change does not wake ourselves.
    let tok = token(&h);
    lock(&h).expect("usable").dirty = true;
    assert_eq!(wait(&tok, 0), Ok(false));
    let mut p = [libc::pollfd { fd: tok.wake.fd(), events: libc::POLLIN, revents: 0 }];
    assert_eq!(verbs::poll(&mut p, 0), Ok(0));
}
