// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! repoll: epoll-like sets over rsockets and ordinary descriptors, by the
//! kernel's epoll rules wherever a program can see them.
//!
//! A set is named by the read end of a pipe (so its number is a real
//! descriptor no one else can get) and kept in a table (an [`FdMap`], as
//! the rsockets' own). Its members are of two kinds:
//!
//! * Ordinary descriptors go into a kernel epoll set of the set's own, with
//!   the caller's events and data as they are: the kernel keeps its rules
//!   for them (a member leaves when its open file is closed, whatever
//!   descriptors shared it; EPOLLET, EPOLLONESHOT, EPOLLEXCLUSIVE; EPERM
//!   for a file epoll cannot watch; EBADF for a closed descriptor).
//! * An rsocket is a member by its number and the rsocket it named when it
//!   was added: once that rsocket is closed (rclose, or the preload
//!   library's close of the last descriptor that stood for it) the member
//!   is gone, and a new rsocket that gets the number is not a member (the
//!   stale entry is dropped where it would be seen: the next wait, ctl or
//!   rclose of the set). Its events follow the kernel's rules: level
//!   triggered by default (reported while ready, after a partial read
//!   too); EPOLLONESHOT disarms the member after one report until
//!   EPOLL_CTL_MOD; EPOLLET reports a ready stream once per change of its
//!   readiness sequence ([`Seq`]: a new message, credits or send room, a
//!   queued connection, a change of state) or when an event becomes ready
//!   that was not when last reported; EPOLLEXCLUSIVE is taken on
//!   EPOLL_CTL_ADD (every waiting thread wakes, which the kernel allows)
//!   and refused with EINVAL on EPOLL_CTL_MOD and with EPOLLONESHOT or
//!   EPOLLRDHUP, as the kernel refuses them.
//!
//! Waiting is rpoll over the armed rsocket members and the kernel set's
//! descriptor, a short slice at a time, so that changes from other
//! threads take effect meanwhile; no lock is held while it sleeps. An
//! edge-triggered member that is still ready with nothing new is polled
//! only for the events it does not have: a new message for a stream the
//! program has not read to the end is seen at the next slice (0.1 s) or
//! when anything else wakes the wait. Ready rsockets are reported first,
//! in member order as upstream's (but starting, for a caller that takes
//! fewer than are ready, where the last report stopped, so none starves
//! the others), then the kernel set's ready members.
//!
//! The C API reports failures of repoll_ctl and repoll_wait by returning
//! the error number itself, as upstream does; rclose on a set's number
//! frees it (EBUSY while it still has members, as upstream's).
#![deny(unsafe_code)]

use super::fdmap::FdMap;
use super::poll::{look, Seq};
use super::sock::{self, Sock};
use crate::sys::rsock::Epoll;
use nix::errno::Errno;
use parking_lot::Mutex;
use std::ffi::c_int;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The epoll bits an rsocket member is polled for (same values as the poll bits).
const REPOLL_BITS: u32 = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP) as u32;
const ET: u32 = libc::EPOLLET as u32;
const ONESHOT: u32 = libc::EPOLLONESHOT as u32;
const EXCLUSIVE: u32 = libc::EPOLLEXCLUSIVE as u32;
/// What EPOLLEXCLUSIVE may come with (the kernel's list).
const EXCLUSIVE_OK: u32 = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLWAKEUP | libc::EPOLLET | libc::EPOLLEXCLUSIVE) as u32;
/// Events after which an edge-triggered member is not polled until something changes.
const STUCK: i16 = libc::POLLERR | libc::POLLHUP | libc::POLLNVAL;

/// One rsocket member.
struct Member {
    fd: c_int,
    /// The rsocket `fd` named when it was added.
    sock: Sock,
    events: u32,
    data: u64,
    /// False once an EPOLLONESHOT member has reported, until EPOLL_CTL_MOD.
    armed: bool,
    /// EPOLLET: reported since added or modified, the readiness sequence
    /// then, and the events reported then that have stayed ready since.
    reported: bool,
    seq: Option<Seq>,
    bits: i16,
}

impl Member {
    fn live(&self) -> bool {
        sock::lookup(self.fd).is_ok_and(|s| s.same(&self.sock))
    }
}

/// One set.
pub struct Set {
    /// Write end of the pipe whose read end names the set.
    peer: Mutex<Option<OwnedFd>>,
    /// The ordinary descriptors.
    kernel: Epoll,
    /// The rsockets.
    members: Mutex<Vec<Member>>,
    /// Where the next report starts among the rsockets (turns).
    next: AtomicUsize,
}

static SETS: FdMap<Arc<Set>> = FdMap::new();

/// The set named `epfd`, if any.
pub fn find(epfd: c_int) -> Option<Arc<Set>> {
    SETS.get(epfd)
}

/// repoll_create: a new set; `flags` may hold O_CLOEXEC and O_NONBLOCK.
pub fn create(flags: c_int) -> Result<c_int, Errno> {
    let kernel = Epoll::new()?;
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::from_bits_truncate(libc::O_DIRECT | (flags & (libc::O_CLOEXEC | libc::O_NONBLOCK))))?;
    let set = Arc::new(Set { peer: Mutex::new(Some(w)), kernel, members: Mutex::new(Vec::new()), next: AtomicUsize::new(0) });
    let fd = r.into_raw_fd();
    SETS.insert(fd, set);
    Ok(fd)
}

/// rclose on a set's number: None when `fd` names no set; EBUSY while the
/// set has rsocket members.
pub fn close(fd: c_int) -> Option<Result<(), Errno>> {
    let set = SETS.get(fd)?;
    // The members' lock is held while the set leaves the table: a member
    // cannot be added meanwhile.
    let mut m = set.members.lock();
    m.retain(Member::live);
    if !m.is_empty() || set.kernel_members() {
        return Some(Err(Errno::EBUSY));
    }
    SETS.remove_if(fd, |t| Arc::ptr_eq(t, &set))?;
    drop(m);
    // Both ends of the pipe belong to the set, which is now out of the table.
    drop(set.peer.lock().take());
    Some(nix::unistd::close(fd))
}

/// The repoll_ctl operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Add,
    Mod,
    Del,
    Other,
}

impl Op {
    pub fn from_c(op: c_int) -> Op {
        match op {
            libc::EPOLL_CTL_ADD => Op::Add,
            libc::EPOLL_CTL_MOD => Op::Mod,
            libc::EPOLL_CTL_DEL => Op::Del,
            _ => Op::Other,
        }
    }

    fn to_c(self) -> c_int {
        match self {
            Op::Add => libc::EPOLL_CTL_ADD,
            Op::Mod => libc::EPOLL_CTL_MOD,
            Op::Del => libc::EPOLL_CTL_DEL,
            Op::Other => -1,
        }
    }
}

/// repoll_ctl. `ev` is the caller's (events, data), None for a NULL event.
pub fn ctl(epfd: c_int, op: Op, fd: c_int, ev: Option<(u32, u64)>) -> Result<(), Errno> {
    if fd < 0 {
        return Err(Errno::EBADF);
    }
    if fd == epfd {
        return Err(Errno::EINVAL);
    }
    let set = find(epfd).ok_or(Errno::EINVAL)?;
    let ev = if op == Op::Del { None } else { Some(ev.ok_or(Errno::EFAULT)?) };
    if let Some((events, _)) = ev {
        if events & EXCLUSIVE != 0 && (op == Op::Mod || events & !EXCLUSIVE_OK != 0) {
            return Err(Errno::EINVAL);
        }
    }
    let mut m = set.members.lock();
    let mut pos = m.iter().position(|x| x.fd == fd);
    if let Some(i) = pos {
        if !m[i].live() {
            // The rsocket it named is closed: it left the set then.
            m.swap_remove(i);
            pos = None;
        }
    }
    let Some(i) = pos else {
        return match sock::lookup(fd) {
            Ok(s) => match (op, ev) {
                (Op::Add, Some((events, data))) => {
                    m.push(Member { fd, sock: s, events, data, armed: true, reported: false, seq: None, bits: 0 });
                    Ok(())
                }
                (Op::Mod | Op::Del, _) => Err(Errno::ENOENT),
                _ => Err(Errno::EINVAL),
            },
            // Not an rsocket: the kernel's set and rules.
            Err(_) => set.kernel.ctl(op.to_c(), fd, ev),
        };
    };
    match (op, ev) {
        (Op::Add, _) => Err(Errno::EEXIST),
        (Op::Mod, Some((events, data))) => {
            // A member added with EPOLLEXCLUSIVE cannot be changed (the kernel's rule).
            if m[i].events & EXCLUSIVE != 0 {
                return Err(Errno::EINVAL);
            }
            let x = &mut m[i];
            (x.events, x.data, x.armed, x.reported, x.seq, x.bits) = (events, data, true, false, None, 0);
            Ok(())
        }
        (Op::Del, _) => {
            m.swap_remove(i);
            Ok(())
        }
        _ => Err(Errno::EINVAL),
    }
}

/// An armed rsocket member as one wait sees it.
struct Look {
    fd: c_int,
    sock: Sock,
    events: i16,
    et: bool,
    /// EPOLLET: ready with something new before any poll.
    due: bool,
    /// EPOLLET: the reported events still ready.
    bits: i16,
}

impl Set {
    /// repoll_wait: hands (index, events, data) of up to `max` ready members
    /// to `emit`; returns how many (0 on timeout).
    pub fn wait(&self, max: usize, timeout: c_int, mut emit: impl FnMut(usize, u32, u64)) -> Result<usize, Errno> {
        if max == 0 {
            return Err(Errno::EINVAL);
        }
        let start = std::time::Instant::now();
        loop {
            let mut looks = self.armed();
            let mut fds: Vec<libc::pollfd> = Vec::with_capacity(looks.len() + 1);
            let mut due = false;
            for l in looks.iter_mut() {
                let mut f = libc::pollfd { fd: l.fd, events: l.events, revents: 0 };
                if l.et {
                    let m = self.members.lock();
                    let Some(x) = m.iter().find(|x| x.fd == l.fd && x.sock.same(&l.sock)) else {
                        f.fd = -1;
                        fds.push(f);
                        continue;
                    };
                    if x.reported {
                        let (rev, seq) = look(&l.sock, l.events);
                        l.bits = x.bits & rev;
                        if rev != 0 && (seq != x.seq || rev & !x.bits != 0) {
                            l.due = true;
                            due = true;
                        } else {
                            // Polled only for what it does not have.
                            f.events &= !l.bits;
                            if f.events == 0 || l.bits & STUCK != 0 {
                                f.fd = -1;
                            }
                        }
                    }
                }
                fds.push(f);
            }
            fds.push(libc::pollfd { fd: self.kernel.fd(), events: libc::POLLIN, revents: 0 });
            let slice = if timeout == 0 || due {
                0
            } else {
                let left = if timeout < 0 { 100 } else { timeout as i64 - start.elapsed().as_millis() as i64 };
                if left <= 0 {
                    return Ok(0);
                }
                left.min(100) as c_int
            };
            let n = super::poll(&mut fds, slice)?;
            if n > 0 || due {
                let mut cnt = self.report(&looks, &fds, max, 0, &mut emit);
                if fds.last().is_some_and(|f| f.revents != 0) && cnt < max {
                    cnt += self.kernel_events(max - cnt, cnt, &mut emit)?;
                }
                if cnt > 0 {
                    return Ok(cnt);
                }
            }
            if timeout == 0 {
                return Ok(0);
            }
        }
    }

    /// The armed rsocket members, from where the last report stopped (the
    /// closed ones leave the set here).
    fn armed(&self) -> Vec<Look> {
        let mut m = self.members.lock();
        m.retain(Member::live);
        let n = m.len();
        let first = if n == 0 { 0 } else { self.next.load(Ordering::Relaxed) % n };
        (0..n)
            .map(|k| &m[(first + k) % n])
            .filter(|x| x.armed)
            .map(|x| Look { fd: x.fd, sock: x.sock.clone(), events: (x.events & REPOLL_BITS) as i16, et: x.events & ET != 0, due: false, bits: 0 })
            .collect()
    }

    /// Reports the ready rsockets among `looks` (polled as `fds`), up to
    /// `room`, numbered from `base`.
    fn report(&self, looks: &[Look], fds: &[libc::pollfd], room: usize, base: usize, emit: &mut impl FnMut(usize, u32, u64)) -> usize {
        let mut m = self.members.lock();
        let mut cnt = 0usize;
        // With room for every ready member the next wait starts at the
        // first member again (upstream's order).
        self.next.store(0, Ordering::Relaxed);
        for (l, f) in looks.iter().zip(fds) {
            if cnt >= room {
                break;
            }
            if f.revents == 0 && !l.due {
                continue;
            }
            // Only members still in the set, for the same rsocket, and armed.
            let Some(i) = m.iter().position(|x| x.fd == l.fd && x.sock.same(&l.sock)) else { continue };
            let x = &mut m[i];
            if !x.armed {
                continue;
            }
            let mut rev = f.revents;
            if x.events & ET != 0 {
                let (now, seq) = look(&x.sock, (x.events & REPOLL_BITS) as i16);
                let bits = if x.reported { x.bits & now } else { 0 };
                if now == 0 || (x.reported && seq == x.seq && now & !bits == 0) {
                    x.bits = bits;
                    continue;
                }
                (rev, x.reported, x.seq, x.bits) = (now, true, seq, now);
            }
            if x.events & ONESHOT != 0 {
                x.armed = false;
            }
            emit(base + cnt, (rev as u16 as u32) & REPOLL_BITS, x.data);
            cnt += 1;
            if cnt == room {
                self.next.store(i + 1, Ordering::Relaxed);
            }
        }
        cnt
    }

    /// Reports up to `room` ready members of the kernel's set, numbered from `base`.
    fn kernel_events(&self, room: usize, base: usize, emit: &mut impl FnMut(usize, u32, u64)) -> Result<usize, Errno> {
        if room == 0 {
            return Ok(0);
        }
        let evs = self.kernel.ready(room)?;
        for (k, (events, data)) in evs.iter().enumerate() {
            emit(base + k, *events, *data);
        }
        Ok(evs.len())
    }

    /// Whether the kernel's set has members (its descriptor's fdinfo lists
    /// one `tfd:` line per member; a descriptor closed since it was added
    /// is gone from it, as from the set).
    fn kernel_members(&self) -> bool {
        std::fs::read_to_string(format!("/proc/self/fdinfo/{}", self.kernel.fd())).is_ok_and(|t| t.lines().any(|l| l.starts_with("tfd:")))
    }

    /// The write end of the set's pipe (kept open while the set lives).
    pub fn peer_fd(&self) -> Option<c_int> {
        self.peer.lock().as_ref().map(|f| f.as_raw_fd())
    }
}
