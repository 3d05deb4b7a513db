// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! repoll's rules, the kernel's epoll rules, over streams on the fake
//! fabric entered in the table of rsocket numbers, and over pipes (which
//! go to the kernel's own set): a closed rsocket leaves every set and its
//! number can be added again, EPOLLONESHOT, EPOLLET, EPOLLEXCLUSIVE,
//! level-triggered readiness after a partial read, several sets on one
//! stream; and the same error numbers for an rsocket as the kernel gives
//! for a pipe.
#![deny(unsafe_code)]

use super::epoll::{self, Op};
use super::recv::recv;
use super::send::send;
use super::sock::{self, Sock};
use super::state::Handle;
use super::tests_proto::{pair, NB};
use nix::errno::Errno;
use std::ffi::c_int;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;
const ET: u32 = libc::EPOLLET as u32;
const ONESHOT: u32 = libc::EPOLLONESHOT as u32;
const EXCL: u32 = libc::EPOLLEXCLUSIVE as u32;

/// A number no one else gets while the test holds it (an open /dev/null).
fn number() -> OwnedFd {
    OwnedFd::from(std::fs::File::open("/dev/null").expect("open /dev/null"))
}

/// A connected pair; `a` entered as rsocket number `n`.
fn entered(n: &OwnedFd) -> (Handle, Handle) {
    let (a, b) = pair();
    sock::insert(n.as_raw_fd(), Sock::Stream(a.clone()));
    (a, b)
}

struct Set(c_int);

impl Drop for Set {
    fn drop(&mut self) {
        let _ = epoll::close(self.0);
    }
}

fn set() -> Set {
    Set(epoll::create(libc::O_CLOEXEC).expect("repoll_create"))
}

impl Set {
    fn ctl(&self, op: Op, fd: c_int, events: u32, data: u64) -> Result<(), Errno> {
        epoll::ctl(self.0, op, fd, Some((events, data)))
    }

    /// (events, data) reported by one wait of up to `timeout` ms.
    fn wait(&self, timeout: c_int) -> Vec<(u32, u64)> {
        let mut out = vec![(0, 0); 8];
        let n = epoll::find(self.0).expect("set").wait(8, timeout, |i, e, d| out[i] = (e, d)).expect("wait");
        out.truncate(n);
        out
    }
}

fn sendx(h: &Handle, b: &[u8]) {
    assert_eq!(send(h, b, NB), Ok(b.len()));
}

fn recvn(h: &Handle, n: usize) -> usize {
    let mut buf = vec![0u8; n];
    recv(h, &mut buf, NB).unwrap_or(0)
}

/// The kernel drops a closed descriptor from every set: a closed rsocket
/// is no member any more (no report, ENOENT), the set closes (no EBUSY),
/// and a new rsocket with the same number is added afresh, not EEXIST.
#[test]
fn a_closed_rsocket_leaves_every_set() {
    let n = number();
    let fd = n.as_raw_fd();
    let (a, b) = entered(&n);
    let (s1, s2) = (set(), set());
    s1.ctl(Op::Add, fd, IN, 1).expect("add");
    s2.ctl(Op::Add, fd, IN, 2).expect("add");
    sendx(&b, b"x");
    assert_eq!(s1.wait(0), vec![(IN, 1)]);
    sock::close(fd).expect("rclose");
    drop(a);
    assert_eq!(s1.wait(0), vec![]);
    // The number is an ordinary file now (the test's /dev/null): the
    // kernel's answer for it.
    assert_eq!(epoll::ctl(s2.0, Op::Del, fd, None), Err(Errno::EPERM));
    // The number comes back for a new rsocket: a member of neither set.
    let (c, d) = entered(&n);
    assert_eq!(s1.ctl(Op::Mod, fd, IN, 3), Err(Errno::ENOENT));
    assert_eq!(epoll::ctl(s2.0, Op::Del, fd, None), Err(Errno::ENOENT));
    s1.ctl(Op::Add, fd, IN, 3).expect("the reused number is added afresh");
    sendx(&d, b"y");
    assert_eq!(s1.wait(0), vec![(IN, 3)]);
    assert_eq!(s2.wait(0), vec![]);
    assert_eq!(epoll::close(s2.0), Some(Ok(())));
    std::mem::forget(s2);
    sock::close(fd).expect("rclose");
    drop(c);
    assert_eq!(epoll::close(s1.0), Some(Ok(())));
    std::mem::forget(s1);
}

/// Ordinary descriptors are the kernel's: a closed one leaves the set
/// (its number added again is a new member), one still open through a dup
/// stays, and a regular file is refused with EPERM.
#[test]
fn ordinary_descriptors_follow_the_kernel() {
    let s = set();
    let (r, w) = nix::unistd::pipe().expect("pipe");
    let fd = r.as_raw_fd();
    s.ctl(Op::Add, fd, IN, 7).expect("add");
    assert_eq!(s.ctl(Op::Add, fd, IN, 7), Err(Errno::EEXIST));
    let dup = nix::unistd::dup(fd).expect("dup");
    drop(r);
    assert_eq!(nix::unistd::write(&w, b"x"), Ok(1));
    // The open file is still open (through the dup): still a member.
    assert_eq!(s.wait(0), vec![(IN, 7)]);
    nix::unistd::close(dup).expect("close");
    assert_eq!(s.wait(0), vec![]);
    let (r2, w2) = nix::unistd::pipe().expect("pipe");
    s.ctl(Op::Add, r2.as_raw_fd(), IN, 8).expect("a new pipe is added afresh");
    assert_eq!(nix::unistd::write(&w2, b"x"), Ok(1));
    assert_eq!(s.wait(0), vec![(IN, 8)]);
    let f = number();
    assert_eq!(s.ctl(Op::Add, f.as_raw_fd(), IN, 9), Err(Errno::EPERM));
    assert_eq!(s.ctl(Op::Add, 1 << 20, IN, 9), Err(Errno::EBADF));
}

/// Level-triggered: reported while ready, after a partial read too.
#[test]
fn level_triggered_after_a_partial_read() {
    let n = number();
    let (a, b) = entered(&n);
    let s = set();
    s.ctl(Op::Add, n.as_raw_fd(), IN, 1).expect("add");
    assert_eq!(s.wait(0), vec![]);
    sendx(&b, b"0123456789");
    assert_eq!(s.wait(0), vec![(IN, 1)]);
    assert_eq!(recvn(&a, 3), 3);
    assert_eq!(s.wait(0), vec![(IN, 1)]);
    assert_eq!(s.wait(0), vec![(IN, 1)]);
    assert_eq!(recvn(&a, 64), 7);
    assert_eq!(s.wait(0), vec![]);
    sock::close(n.as_raw_fd()).expect("rclose");
}

/// EPOLLONESHOT: one report, then nothing until EPOLL_CTL_MOD re-arms it.
#[test]
fn oneshot_disarms_until_mod() {
    let n = number();
    let fd = n.as_raw_fd();
    let (_a, b) = entered(&n);
    let s = set();
    s.ctl(Op::Add, fd, IN | ONESHOT, 1).expect("add");
    sendx(&b, b"x");
    assert_eq!(s.wait(0), vec![(IN, 1)]);
    assert_eq!(s.wait(0), vec![], "a disarmed member reports nothing");
    let t = Instant::now();
    assert_eq!(s.wait(30), vec![]);
    assert!(t.elapsed().as_millis() >= 25);
    // Still a member: EEXIST, and MOD re-arms it.
    assert_eq!(s.ctl(Op::Add, fd, IN, 1), Err(Errno::EEXIST));
    s.ctl(Op::Mod, fd, IN | ONESHOT, 2).expect("mod");
    assert_eq!(s.wait(0), vec![(IN, 2)]);
    assert_eq!(s.wait(0), vec![]);
    sock::close(fd).expect("rclose");
}

/// EPOLLET: reported once per new readiness (a new message while still
/// readable is new; a partial read is not), and a wait on a member that
/// is ready with nothing new sleeps its timeout instead of returning.
#[test]
fn edge_triggered_reports_each_new_arrival_once() {
    let n = number();
    let fd = n.as_raw_fd();
    let (a, b) = entered(&n);
    let s = set();
    s.ctl(Op::Add, fd, IN | OUT | ET, 1).expect("add");
    // Writable at once: one report.
    assert_eq!(s.wait(0), vec![(OUT, 1)]);
    assert_eq!(s.wait(0), vec![]);
    sendx(&b, b"0123456789");
    assert_eq!(s.wait(0), vec![(IN | OUT, 1)]);
    assert_eq!(s.wait(0), vec![]);
    let t = Instant::now();
    assert_eq!(s.wait(40), vec![]);
    assert!(t.elapsed().as_millis() >= 35, "a ready member with nothing new must not end the wait");
    assert_eq!(recvn(&a, 3), 3);
    assert_eq!(s.wait(0), vec![], "a partial read is no new readiness");
    // A new message while the stream is still readable is reported.
    sendx(&b, b"abc");
    assert_eq!(s.wait(0).len(), 1);
    assert_eq!(s.wait(0), vec![]);
    // Read to the end; a message that comes before the next wait is new.
    assert_eq!(recvn(&a, 64), 10);
    sendx(&b, b"z");
    assert_eq!(s.wait(0).len(), 1);
    // MOD starts afresh: what is ready is reported again.
    s.ctl(Op::Mod, fd, IN | ET, 2).expect("mod");
    assert_eq!(s.wait(0), vec![(IN, 2)]);
    assert_eq!(s.wait(0), vec![]);
    sock::close(fd).expect("rclose");
}

/// A new message wakes a wait that sleeps on a drained edge-triggered member.
#[test]
fn edge_triggered_wait_wakes_on_new_data() {
    let n = number();
    let fd = n.as_raw_fd();
    let (a, b) = entered(&n);
    let s = set();
    s.ctl(Op::Add, fd, IN | ET, 1).expect("add");
    sendx(&b, b"x");
    assert_eq!(s.wait(0), vec![(IN, 1)]);
    assert_eq!(recvn(&a, 64), 1);
    let b2 = b.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(30));
        sendx(&b2, b"y");
    });
    let start = Instant::now();
    assert_eq!(s.wait(5000), vec![(IN, 1)]);
    assert!(start.elapsed().as_millis() < 2000);
    t.join().expect("sender");
    sock::close(fd).expect("rclose");
}

/// EPOLLEXCLUSIVE: taken on ADD, EINVAL on MOD and with EPOLLONESHOT; the
/// same answers for an rsocket as the kernel's for a pipe.
#[test]
fn exclusive_as_the_kernel() {
    let n = number();
    let fd = n.as_raw_fd();
    let (_a, b) = entered(&n);
    let (r, _w) = nix::unistd::pipe().expect("pipe");
    let p = r.as_raw_fd();
    let s = set();
    for target in [fd, p] {
        assert_eq!(s.ctl(Op::Add, target, IN | EXCL | ONESHOT, 1), Err(Errno::EINVAL), "fd {target}");
        assert_eq!(s.ctl(Op::Add, target, IN | EXCL | libc::EPOLLRDHUP as u32, 1), Err(Errno::EINVAL), "fd {target}");
        assert_eq!(s.ctl(Op::Add, target, IN | EXCL, 1), Ok(()), "fd {target}");
        assert_eq!(s.ctl(Op::Mod, target, IN | EXCL, 1), Err(Errno::EINVAL), "fd {target}");
        assert_eq!(s.ctl(Op::Mod, target, IN, 1), Err(Errno::EINVAL), "fd {target}");
        assert_eq!(s.ctl(Op::Add, target, IN, 1), Err(Errno::EEXIST), "fd {target}");
        assert_eq!(epoll::ctl(s.0, Op::Del, target, None), Ok(()), "fd {target}");
        assert_eq!(epoll::ctl(s.0, Op::Del, target, None), Err(Errno::ENOENT), "fd {target}");
        assert_eq!(s.ctl(Op::Mod, target, IN, 1), Err(Errno::ENOENT), "fd {target}");
    }
    s.ctl(Op::Add, fd, IN | EXCL, 4).expect("add");
    sendx(&b, b"x");
    assert_eq!(s.wait(0), vec![(IN, 4)]);
    sock::close(fd).expect("rclose");
}

/// Several sets on one stream report independently, each by its own rules.
#[test]
fn many_sets_on_one_stream() {
    let n = number();
    let fd = n.as_raw_fd();
    let (_a, b) = entered(&n);
    let (lt, et, one) = (set(), set(), set());
    lt.ctl(Op::Add, fd, IN, 1).expect("add");
    et.ctl(Op::Add, fd, IN | ET, 2).expect("add");
    one.ctl(Op::Add, fd, IN | ONESHOT, 3).expect("add");
    sendx(&b, b"x");
    assert_eq!(one.wait(0), vec![(IN, 3)]);
    assert_eq!(et.wait(0), vec![(IN, 2)]);
    for _ in 0..2 {
        assert_eq!(lt.wait(0), vec![(IN, 1)]);
        assert_eq!(et.wait(0), vec![]);
        assert_eq!(one.wait(0), vec![]);
    }
    // Waits in two threads at once both see a new message.
    let fds = [lt.0, et.0];
    let hs: Vec<_> = fds
        .iter()
        .map(|&ep| {
            std::thread::spawn(move || {
                let mut got = 0u64;
                epoll::find(ep).expect("set").wait(1, 5000, |_, _, d| got = d).expect("wait");
                got
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(20));
    sendx(&b, b"y");
    let got: Vec<u64> = hs.into_iter().map(|h| h.join().expect("waiter")).collect();
    assert_eq!(got, vec![1, 2]);
    sock::close(fd).expect("rclose");
}

/// Ready members take turns when the caller takes fewer than are ready.
#[test]
fn ready_members_take_turns() {
    let nums: Vec<OwnedFd> = (0..3).map(|_| number()).collect();
    let s = set();
    let mut keep = Vec::new();
    for (k, n) in nums.iter().enumerate() {
        let (a, b) = entered(n);
        s.ctl(Op::Add, n.as_raw_fd(), IN, k as u64).expect("add");
        sendx(&b, b"x");
        keep.push((a, b));
    }
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..3 {
        let mut d = u64::MAX;
        epoll::find(s.0).expect("set").wait(1, 0, |_, _, x| d = x).expect("wait");
        seen.insert(d);
    }
    assert_eq!(seen.len(), 3, "one member reported over and over: {seen:?}");
    for n in &nums {
        sock::close(n.as_raw_fd()).expect("rclose");
    }
}
