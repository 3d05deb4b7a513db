// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Unit tests of the stream's locking rules, rpoll and rsocket's arguments.
#![deny(unsafe_code)]

use super::blocking::after_wait;
use super::guard::*;
use super::stream_opts::{fcntl, getsockopt, setsockopt};
use super::lifecycle::{accept, close_begin, close_end};
use std::ffi::c_int;
use super::poll::poll;
use super::sock::{close, create, lookup, Sock};
use super::state::*;
use super::verbs;
use super::wire::*;
use nix::errno::Errno;
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
    new_handle(Stream::fresh(None, -1, libc::AF_INET))
}

fn token(h: &Handle) -> WaitToken {
    lock(h).expect("usable").wait_token(WANTS_ALL).expect("eventfd")
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
        s.ctl.set_state(ST_CONNECTING);
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
        let again = after_wait(&h2, &tok, &woke);
        (woke, again)
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
        s.sleepers.touch();
    }
    let (woke, slept, left) = t.join().expect("sleeper");
    assert_eq!(woke, Ok(false));
    assert!(slept < std::time::Duration::from_secs(5), "the sleeper must wake at once, slept {slept:?}");
    assert_eq!(left, Ok(0));
    // Our own change does not wake ourselves.
    let tok = token(&h);
    lock(&h).expect("usable").sleepers.touch();
    assert_eq!(wait(&tok, 0), Ok(false));
    let mut p = [libc::pollfd { fd: tok.wake.as_ref().expect("registered").fd(), events: libc::POLLIN, revents: 0 }];
    assert_eq!(verbs::poll(&mut p, 0), Ok(0));
}

/// Completions wake only the sleepers that wait for what they changed: a
/// sender's room does not wake a receiver, data does not wake a sender;
/// any other change wakes both.
#[test]
fn completions_wake_the_sleepers_waiting_for_them() {
    let h = bare();
    let sleeper = |wants: u8| {
        let h2 = h.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let tok = lock(&h2).expect("usable").wait_token(wants).expect("eventfd");
            tx.send(()).expect("registered");
            let woke = wait(&tok, 10_000);
            lock(&h2).expect("usable").unregister_me();
            woke
        });
        rx.recv().expect("registered");
        t
    };
    let sender = sleeper(WANTS_SEND);
    let receiver = sleeper(WANTS_RECV);
    lock(&h).expect("usable").sleepers.changed(WANTS_SEND);
    assert_eq!(sender.join().expect("sender"), Ok(false));
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(!receiver.is_finished(), "send room must not wake a receiver");
    assert_eq!(lock(&h).expect("usable").sleepers.len(), 1);
    lock(&h).expect("usable").sleepers.changed(WANTS_RECV);
    assert_eq!(receiver.join().expect("receiver"), Ok(false));
    // Any other change (dirty) wakes every sleeper.
    let sender = sleeper(WANTS_SEND);
    let receiver = sleeper(WANTS_RECV);
    lock(&h).expect("usable").sleepers.touch();
    assert_eq!(sender.join().expect("sender"), Ok(false));
    assert_eq!(receiver.join().expect("receiver"), Ok(false));
    assert!(lock(&h).expect("usable").sleepers.is_empty());
}

// ---- the stream's state without a transport ------------------------------------------

fn connected() -> Stream {
    let mut s = Stream::fresh(None, -1, libc::AF_INET);
    s.ctl.set_state(ST_CONNECT_RDWR);
    s
}

/// rshutdown's state changes and the control message each sends (the
/// peer sees CTRL_SHUTDOWN for a half close while it may still send to us,
/// CTRL_DISCONNECT once neither direction is left).
#[test]
fn shutdown_states_and_messages() {
    let mut s = connected();
    assert_eq!(s.shutdown_begin(libc::SHUT_WR), Some(CTRL_SHUTDOWN));
    assert_eq!(s.ctl.state(), ST_CONNECTED | ST_READABLE);
    assert_eq!(s.shutdown_begin(libc::SHUT_RD), Some(CTRL_DISCONNECT));
    assert_eq!(s.ctl.state(), ST_CONNECTED);

    let mut s = connected();
    assert_eq!(s.shutdown_begin(libc::SHUT_RD), None, "still writable: nothing to tell the peer");
    assert_eq!(s.ctl.state(), ST_CONNECTED | ST_WRITABLE);
    assert_eq!(s.shutdown_begin(libc::SHUT_WR), Some(CTRL_DISCONNECT));

    let mut s = connected();
    assert_eq!(s.shutdown_begin(libc::SHUT_RDWR), Some(CTRL_DISCONNECT));
    assert_eq!(s.ctl.state() & (ST_READABLE | ST_WRITABLE), 0);

    // Not connected: no change, no message.
    let mut s = Stream::fresh(None, -1, libc::AF_INET);
    s.ctl.set_state(ST_BOUND);
    assert_eq!(s.shutdown_begin(libc::SHUT_RDWR), None);
    assert_eq!(s.ctl.state(), ST_BOUND);
}

/// Keepalive scheduling: nothing without SO_KEEPALIVE; with it, the next
/// time is `keepalive_time` after the last one, and a stream that is not
/// connected (or has no QP) sends nothing but stays scheduled.
#[test]
fn keepalive_schedule() {
    let now = std::time::Instant::now();
    let sec = std::time::Duration::from_secs(1);
    let mut s = connected();
    assert_eq!(s.keepalive_tick(now), None);
    s.so.keepalive = true;
    s.so.keepalive_time = 5;
    assert_eq!(s.keepalive_tick(now), Some(now + 5 * sec));
    assert_eq!(s.keepalive_tick(now + 4 * sec), Some(now + 5 * sec), "not due yet");
    let seq = s.tx.ctrl_seqno();
    assert_eq!(s.keepalive_tick(now + 5 * sec), Some(now + 10 * sec));
    assert_eq!(s.tx.ctrl_seqno(), seq, "no QP: no control message counted");
}

/// The control-message window: `ctrl_avail` while fewer than the window
/// are outstanding, `ctrl2_avail` for two (credits by send on iWARP),
/// across the counters' wrap.
#[test]
fn control_window_across_the_wrap() {
    let mut s = connected();
    let seqno = u32::MAX - 1;
    s.tx.set_ctrl(seqno, seqno.wrapping_add(RS_QP_CTRL_SIZE));
    assert!(s.ctrl_avail() && s.tx.ctrl2_avail());
    for _ in 0..RS_QP_CTRL_SIZE - 1 {
        s.tx.take_ctrl();
    }
    assert!(s.ctrl_avail(), "one slot left");
    assert!(!s.tx.ctrl2_avail(), "not two");
    s.tx.take_ctrl();
    assert!(!s.ctrl_avail());
    // All sends done: every control slot and send queue entry is back.
    s.tx.set_sq_size(16);
    s.tx.set_sqe_avail(16 - RS_QP_CTRL_SIZE);
    let seqno = s.tx.ctrl_seqno();
    s.tx.set_ctrl(seqno, seqno.wrapping_add(RS_QP_CTRL_SIZE));
    assert!(s.all_sends_done());
    s.tx.set_sqe_avail(16 - RS_QP_CTRL_SIZE - 1);
    assert!(!s.all_sends_done());
    s.ctl.set_state(ST_DISCONNECTED);
    assert!(s.all_sends_done(), "a stream no longer connected has nothing in flight");
}

/// raccept: EBADF unless listening, EAGAIN on an empty non-blocking
/// listener, else the queued connection first in, first out.
#[test]
fn accept_queue() {
    let l = bare();
    assert_eq!(accept(&l).err(), Some(Errno::EBADF));
    {
        let mut g = lock(&l).expect("usable");
        g.ctl.set_state(ST_LISTENING);
        g.fs_flags = libc::O_NONBLOCK;
    }
    assert_eq!(accept(&l).err(), Some(Errno::EAGAIN));
    let (a, b) = (bare(), bare());
    {
        let mut g = lock(&l).expect("usable");
        g.lq.queue(a.clone());
        g.lq.queue(b.clone());
    }
    assert!(Arc::ptr_eq(&accept(&l).expect("queued"), &a));
    assert!(Arc::ptr_eq(&accept(&l).expect("queued"), &b));
    assert_eq!(accept(&l).err(), Some(Errno::EAGAIN));
}

/// rclose of a listener closes the connections nobody accepted, queued
/// or still completing (they belong to the listener until raccept).
#[test]
fn close_takes_the_unaccepted_connections() {
    let l = bare();
    let (q, p) = (bare(), bare());
    {
        let mut g = lock(&l).expect("usable");
        g.ctl.set_state(ST_LISTENING);
        g.lq.queue(q.clone());
        g.lq.pending(p.clone());
    }
    close_begin(&l);
    close_end(&l);
    assert_eq!(lock(&l).err(), Some(Errno::EBADF));
    assert_eq!(lock(&q).err(), Some(Errno::EBADF), "a queued connection goes with its listener");
    assert_eq!(lock(&p).err(), Some(Errno::EBADF), "so does one still being accepted");
}

/// rfcntl: O_NONBLOCK set before the connection makes rconnect return
/// EINPROGRESS (upstream makes the CM channel non-blocking only there);
/// set afterwards it does not; the values read back as stored.
#[test]
fn fcntl_nonblocking_connect() {
    let h = bare();
    assert_eq!(fcntl(&h, libc::F_SETFL, libc::O_NONBLOCK | libc::O_APPEND), Ok(0));
    assert_eq!(fcntl(&h, libc::F_GETFL, 0), Ok(libc::O_NONBLOCK | libc::O_APPEND));
    assert!(lock(&h).expect("usable").conn.nonblock());
    assert_eq!(fcntl(&h, libc::F_SETFL, 0), Ok(0));
    assert!(!lock(&h).expect("usable").conn.nonblock());
    lock(&h).expect("usable").ctl.set_state(ST_CONNECT_RDWR);
    assert_eq!(fcntl(&h, libc::F_SETFL, libc::O_NONBLOCK), Ok(0));
    assert!(!lock(&h).expect("usable").conn.nonblock(), "a connected stream's connect mode is settled");
    assert_eq!(fcntl(&h, libc::F_SETFD, libc::FD_CLOEXEC), Ok(0));
    assert_eq!(fcntl(&h, libc::F_GETFD, 0), Ok(libc::FD_CLOEXEC));
    assert_eq!(fcntl(&h, libc::F_DUPFD, 0).err(), Some(Errno::ENOTSUP));
}

/// rsetsockopt on a stream without a connection manager id: the values
/// kept for rgetsockopt, SOL_RDMA sizes only before the QP exists, the
/// send buffer's floor, TCP_KEEPIDLE's range.
#[test]
fn stream_option_values() {
    let h = bare();
    let int = |v: c_int| v.to_ne_bytes();
    assert_eq!(setsockopt(&h, libc::SOL_SOCKET, libc::SO_SNDBUF, Some(&int(100))), Ok(()));
    assert_eq!(lock(&h).expect("usable").tx.sbuf_size(), RS_SNDLOWAT << 1, "below the low-water mark: its double");
    assert_eq!(setsockopt(&h, libc::SOL_SOCKET, libc::SO_RCVBUF, Some(&int(8192))), Ok(()));
    assert_eq!(lock(&h).expect("usable").rx.rbuf_size(), 16384);
    assert_eq!(setsockopt(&h, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, Some(&int(0))), Err(Errno::EINVAL));
    assert_eq!(setsockopt(&h, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, Some(&int(9))), Ok(()));
    assert_eq!(setsockopt(&h, libc::SOL_SOCKET, libc::SO_LINGER, Some(&[0u8; 8])), Ok(()));
    assert_eq!(setsockopt(&h, super::options::SOL_RDMA, super::options::RDMA_SQSIZE, Some(&int(100_000))), Ok(()));
    assert_eq!(lock(&h).expect("usable").tx.sq_size(), RS_QP_MAX_SIZE);
    assert_eq!(setsockopt(&h, super::options::SOL_RDMA, super::options::RDMA_IOMAPSIZE, Some(&int(1000))), Ok(()));
    // Kept in its 8-bit scaled form, as upstream: 1000 reads back as 768.
    assert_eq!(lock(&h).expect("usable").iomaps.target_size(), 768);
    let get = |level, name| getsockopt(&h, level, name, 64).map(|o| o.bytes);
    assert_eq!(get(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), Ok(int(9).to_vec()));
    assert_eq!(get(libc::SOL_SOCKET, libc::SO_LINGER), Ok([0u8; 8].to_vec()), "l_onoff off as set");
    lock(&h).expect("usable").ctl.set_state(ST_CONNECTING);
    assert_eq!(setsockopt(&h, super::options::SOL_RDMA, super::options::RDMA_RQSIZE, Some(&int(64))), Err(Errno::EINVAL), "too late once opening");
    assert_eq!(setsockopt(&h, libc::SOL_SOCKET, libc::SO_BROADCAST, Some(&int(1))), Err(Errno::ENOTSUP));
}

/// Runs `f` on another thread; its result if it finishes within `ms`.
fn within<T: Send + 'static>(ms: u64, f: impl FnOnce() -> T + Send + 'static) -> (Option<T>, std::thread::JoinHandle<()>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    (rx.recv_timeout(std::time::Duration::from_millis(ms)).ok(), t)
}

/// With `held`'s path lock taken (a call copying its bytes holds only
/// that), `op` on the same stream still runs to its answer (ENOTCONN on a
/// bare stream) instead of waiting.
fn other_path_goes_on(held: Path, op: fn(&Handle) -> Result<usize, Errno>, what: &str) {
    let h = bare();
    let g = lock_path(&h, held);
    let h2 = h.clone();
    let (got, t) = within(2000, move || op(&h2));
    drop(g);
    t.join().expect("join");
    assert_eq!(got, Some(Err(Errno::ENOTCONN)), "{what}");
}

/// A receive copying its bytes holds only the receive path's lock (the
/// state's is released around the copy): a send goes on meanwhile; and the
/// other way round.
#[test]
fn a_receive_in_progress_does_not_block_a_send() {
    other_path_goes_on(Path::Recv, |h| super::send::send(h, b"x", libc::MSG_DONTWAIT), "send waited for the receive path's lock");
    other_path_goes_on(Path::Send, |h| super::recv::recv(h, &mut [0u8; 4], libc::MSG_DONTWAIT), "receive waited for the send path's lock");
}

/// Two sends on one stream take turns (their messages go out in the order
/// their credits were taken): a send waits for the one in progress.
#[test]
fn sends_on_one_stream_take_turns() {
    let h = bare();
    let held = lock_path(&h, Path::Send);
    let h2 = h.clone();
    let (got, t) = within(300, move || super::send::send(&h2, b"x", libc::MSG_DONTWAIT));
    assert_eq!(got, None, "a second send ran beside the one in progress");
    drop(held);
    t.join().expect("join");
    let h3 = h.clone();
    let held = lock_path(&h, Path::Recv);
    let (got, t) = within(300, move || super::recv::recv(&h3, &mut [0u8; 4], libc::MSG_DONTWAIT));
    assert_eq!(got, None, "a second receive ran beside the one in progress");
    drop(held);
    t.join().expect("join");
}

/// The state is free while a path's copy runs ([`Guard::unlocked`]), and
/// locked again after it; a close meanwhile is seen.
#[test]
fn a_copy_runs_with_the_state_unlocked() {
    let h = bare();
    let mut g = lock(&h).expect("usable");
    let h2 = h.clone();
    g.unlocked(|| {
        let (got, t) = within(2000, move || lock(&h2).map(|mut s| s.ctl.close()).is_ok());
        t.join().expect("join");
        assert_eq!(got, Some(true), "the state stayed locked during the copy");
    });
    assert!(h.s.try_lock().is_none(), "not locked again after the copy");
    assert_eq!(g.still_usable(), Err(Errno::EBADF), "a close during the copy went unseen");
}
