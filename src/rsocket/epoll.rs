// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! repoll: epoll-like sets over rsockets and ordinary descriptors.
//!
//! A set is named by the read end of a pipe (so its number is a real
//! descriptor no one else can get) and kept in a table (an [`FdMap`], as
//! the rsockets' own). Members stay in
//! insertion order; deleting one moves the last member into its place, and
//! ready members are reported in that order. The C API reports failures of
//! repoll_ctl and repoll_wait by returning the error number itself, as
//! upstream does; rclose on a set's number frees it (EBUSY while it still
//! has members). Waiting is rpoll over a copy of the members, a short slice
//! at a time, so that changes from other threads take effect meanwhile; no
//! lock is held while it sleeps.
#![deny(unsafe_code)]

use super::fdmap::FdMap;
use nix::errno::Errno;
use parking_lot::Mutex;
use std::ffi::c_int;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;

/// The epoll bits a set passes on to rpoll (same values as the poll bits).
const REPOLL_BITS: u32 = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP) as u32;

/// One set.
pub struct Set {
    /// Write end of the pipe whose read end names the set.
    peer: Mutex<Option<OwnedFd>>,
    /// Members: the descriptor and poll events to watch, and the caller's data.
    members: Mutex<Vec<(libc::pollfd, u64)>>,
}

static SETS: FdMap<Arc<Set>> = FdMap::new();

/// The set named `epfd`, if any.
pub fn find(epfd: c_int) -> Option<Arc<Set>> {
    SETS.get(epfd)
}

/// repoll_create: a new set; `flags` may hold O_CLOEXEC and O_NONBLOCK.
pub fn create(flags: c_int) -> Result<c_int, Errno> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::from_bits_truncate(libc::O_DIRECT | (flags & (libc::O_CLOEXEC | libc::O_NONBLOCK))))?;
    let set = Arc::new(Set { peer: Mutex::new(Some(w)), members: Mutex::new(Vec::new()) });
    let fd = r.into_raw_fd();
    SETS.insert(fd, set);
    Ok(fd)
}

/// rclose on a set's number: None when `fd` names no set; EBUSY while the
/// set has members.
pub fn close(fd: c_int) -> Option<Result<(), Errno>> {
    let set = SETS.get(fd)?;
    // The members' lock is held while the set leaves the table: a member
    // cannot be added meanwhile.
    let m = set.members.lock();
    if !m.is_empty() {
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
    let mut m = set.members.lock();
    let pos = m.iter().position(|(p, _)| p.fd == fd);
    let entry_of = |(events, data): (u32, u64)| (libc::pollfd { fd, events: (events & REPOLL_BITS) as i16, revents: 0 }, data);
    match (op, pos, ev) {
        (Op::Add, Some(_), _) => Err(Errno::EEXIST),
        (Op::Add, None, Some(e)) => {
            m.push(entry_of(e));
            Ok(())
        }
        (Op::Mod | Op::Del, None, _) => Err(Errno::ENOENT),
        (Op::Mod, Some(i), Some(e)) => {
            m[i] = entry_of(e);
            Ok(())
        }
        (Op::Del, Some(i), _) => {
            m.swap_remove(i);
            Ok(())
        }
        _ => Err(Errno::EINVAL),
    }
}

impl Set {
    /// repoll_wait: hands (index, events, data) of up to `max` ready members
    /// to `emit`, in member order; returns how many (0 on timeout).
    pub fn wait(&self, max: usize, timeout: c_int, mut emit: impl FnMut(usize, u32, u64)) -> Result<usize, Errno> {
        if max == 0 {
            return Err(Errno::EINVAL);
        }
        let start = std::time::Instant::now();
        loop {
            let mut fds: Vec<libc::pollfd> = self.members.lock().iter().map(|(p, _)| *p).collect();
            let slice = if timeout == 0 {
                0
            } else {
                let left = if timeout < 0 { 100 } else { timeout as i64 - start.elapsed().as_millis() as i64 };
                if left <= 0 {
                    return Ok(0);
                }
                left.min(100) as c_int
            };
            let n = if fds.is_empty() {
                if slice > 0 {
                    // An empty set sleeps, as a wait the thread's cancellation may end.
                    crate::sys::cancel::wait_poll(&mut [], slice)?;
                }
                0
            } else {
                super::poll(&mut fds, slice)?
            };
            if n > 0 {
                let m = self.members.lock();
                let mut cnt = 0usize;
                for f in fds.iter().filter(|f| f.revents != 0) {
                    // Report only members still in the set with the same descriptor.
                    let Some((_, data)) = m.iter().find(|(p, _)| p.fd == f.fd) else { continue };
                    emit(cnt, (f.revents as u16 as u32) & REPOLL_BITS, *data);
                    cnt += 1;
                    if cnt >= max {
                        break;
                    }
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

    /// The write end of the set's pipe (kept open while the set lives).
    pub fn peer_fd(&self) -> Option<c_int> {
        self.peer.lock().as_ref().map(|f| f.as_raw_fd())
    }
}
