// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The system calls of rsockets besides verbs: a datagram rsocket's kernel
//! UDP socket ([`Udp`]) and the epoll set its CQ channels are watched by
//! ([`Epoll`]), O_NONBLOCK on a descriptor ([`set_nonblock`]), and a socket
//! address's bytes ([`storage_bytes`]). The rsocket modules deny unsafe
//! code; what they need of the kernel is here.

use nix::errno::Errno;
use std::ffi::{c_int, c_void};

/// A kernel UDP socket (the addressing side of a datagram rsocket).
pub struct Udp {
    fd: std::os::fd::OwnedFd,
}

fn sockaddr_in(b: &[u8]) -> Result<(libc::sockaddr_storage, libc::socklen_t), Errno> {
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let n = b.len().min(std::mem::size_of::<libc::sockaddr_storage>());
    if n < 2 {
        return Err(Errno::EINVAL);
    }
    // SAFETY: n bytes fit the storage.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), &mut ss as *mut _ as *mut u8, n) };
    Ok((ss, n as libc::socklen_t))
}

/// The first `len` bytes of a socket address (at most the storage's size).
pub fn storage_bytes(ss: &libc::sockaddr_storage, len: libc::socklen_t) -> Vec<u8> {
    let n = (len as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
    // SAFETY: ss is a plain struct of at least n bytes.
    unsafe { std::slice::from_raw_parts(ss as *const _ as *const u8, n) }.to_vec()
}

impl Udp {
    /// socket(domain, SOCK_DGRAM, 0), close-on-exec.
    pub fn new(domain: c_int) -> Result<Udp, Errno> {
        // SAFETY: plain system call.
        let fd = unsafe { libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(Errno::last());
        }
        use std::os::fd::FromRawFd;
        // SAFETY: a fresh descriptor we own.
        Ok(Udp { fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) } })
    }

    pub fn fd(&self) -> c_int {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    /// bind(2) to the socket address in `addr`.
    pub fn bind(&self, addr: &[u8]) -> Result<(), Errno> {
        let (ss, n) = sockaddr_in(addr)?;
        // SAFETY: ss holds n bytes of the address.
        if unsafe { libc::bind(self.fd(), &ss as *const _ as *const libc::sockaddr, n) } < 0 {
            return Err(Errno::last());
        }
        Ok(())
    }

    /// connect(2) to the socket address in `addr`.
    pub fn connect(&self, addr: &[u8]) -> Result<(), Errno> {
        let (ss, n) = sockaddr_in(addr)?;
        // SAFETY: as bind.
        if unsafe { libc::connect(self.fd(), &ss as *const _ as *const libc::sockaddr, n) } < 0 {
            return Err(Errno::last());
        }
        Ok(())
    }

    /// getsockname(2), as the address's bytes.
    pub fn local_addr(&self) -> Result<Vec<u8>, Errno> {
        // SAFETY: zeroed storage is valid.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut n = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: ss has n bytes of room.
        if unsafe { libc::getsockname(self.fd(), &mut ss as *mut _ as *mut libc::sockaddr, &mut n) } < 0 {
            return Err(Errno::last());
        }
        Ok(storage_bytes(&ss, n))
    }

    /// getpeername(2), as the address's bytes.
    pub fn peer_addr(&self) -> Result<Vec<u8>, Errno> {
        // SAFETY: zeroed storage is valid.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut n = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: ss has n bytes of room.
        if unsafe { libc::getpeername(self.fd(), &mut ss as *mut _ as *mut libc::sockaddr, &mut n) } < 0 {
            return Err(Errno::last());
        }
        Ok(storage_bytes(&ss, n))
    }

    /// sendmsg(2) of `parts` in order to `addr`; returns the bytes sent.
    pub fn send_to(&self, parts: &[&[u8]], addr: &[u8], flags: c_int) -> Result<usize, Errno> {
        let (mut ss, n) = sockaddr_in(addr)?;
        let mut iov: Vec<libc::iovec> = parts.iter().map(|p| libc::iovec { iov_base: p.as_ptr() as *mut c_void, iov_len: p.len() }).collect();
        // SAFETY: a zeroed msghdr is valid.
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        m.msg_name = &mut ss as *mut _ as *mut c_void;
        m.msg_namelen = n;
        m.msg_iov = iov.as_mut_ptr();
        m.msg_iovlen = iov.len() as _;
        // SAFETY: the msghdr points at live locals (address, iovecs over
        // the borrowed parts), which the kernel only reads.
        let r = unsafe { libc::sendmsg(self.fd(), &m, flags | libc::MSG_NOSIGNAL) };
        if r < 0 {
            return Err(Errno::last());
        }
        Ok(r as usize)
    }

    /// recvfrom(2) without blocking: the length and the source address.
    pub fn recv_from(&self, buf: &mut [u8]) -> Result<(usize, Vec<u8>), Errno> {
        // SAFETY: zeroed storage is valid.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut n = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: buf and ss are writable for their lengths.
        let r = unsafe { libc::recvfrom(self.fd(), buf.as_mut_ptr() as *mut c_void, buf.len(), libc::MSG_DONTWAIT, &mut ss as *mut _ as *mut libc::sockaddr, &mut n) };
        if r < 0 {
            return Err(Errno::last());
        }
        Ok((r as usize, storage_bytes(&ss, n)))
    }

    /// setsockopt(2) with the option's bytes.
    pub fn setsockopt(&self, level: c_int, name: c_int, val: Option<&[u8]>) -> Result<(), Errno> {
        let (p, n) = match val {
            Some(v) => (v.as_ptr() as *const c_void, v.len() as libc::socklen_t),
            None => (std::ptr::null(), 0),
        };
        // SAFETY: p is NULL or readable for n bytes.
        if unsafe { libc::setsockopt(self.fd(), level, name, p, n) } < 0 {
            return Err(Errno::last());
        }
        Ok(())
    }

    /// getsockopt(2) into a buffer of `room` bytes; returns the bytes and the length the kernel reported.
    pub fn getsockopt(&self, level: c_int, name: c_int, room: usize) -> Result<(Vec<u8>, usize), Errno> {
        let mut v = vec![0u8; room.max(1)];
        let mut n = room as libc::socklen_t;
        // SAFETY: v has room bytes of room.
        if unsafe { libc::getsockopt(self.fd(), level, name, v.as_mut_ptr() as *mut c_void, &mut n) } < 0 {
            return Err(Errno::last());
        }
        v.truncate(room);
        Ok((v, n as usize))
    }
}

/// An epoll set over descriptors (a datagram rsocket's CQ channels, a
/// repoll set's ordinary descriptors): one descriptor to sleep on for all
/// of them. Made and used with the system calls themselves, not libc's
/// functions: a preload library (upstream's librspreload) replaces those
/// with ones that call repoll back, which would come here again.
pub struct Epoll {
    fd: std::os::fd::OwnedFd,
}

impl Epoll {
    pub fn new() -> Result<Epoll, Errno> {
        // SAFETY: plain system call.
        let fd = unsafe { libc::syscall(libc::SYS_epoll_create1, libc::c_long::from(libc::EPOLL_CLOEXEC)) } as c_int;
        if fd < 0 {
            return Err(Errno::last());
        }
        use std::os::fd::FromRawFd;
        // SAFETY: a fresh descriptor we own.
        Ok(Epoll { fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) } })
    }

    pub fn fd(&self) -> c_int {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }

    /// Adds `fd` for readability.
    pub fn add(&self, fd: c_int) -> Result<(), Errno> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
        // SAFETY: ev is a valid event; fd is a descriptor the caller keeps open while added.
        if unsafe { epoll_ctl(self.fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(Errno::last());
        }
        Ok(())
    }

    /// epoll_ctl(2) with the caller's operation, events and data (`ev`
    /// None: no event, for EPOLL_CTL_DEL).
    pub fn ctl(&self, op: c_int, fd: c_int, ev: Option<(u32, u64)>) -> Result<(), Errno> {
        let mut e = ev.map(|(events, u64)| libc::epoll_event { events, u64 });
        let p = e.as_mut().map_or(std::ptr::null_mut(), |e| e as *mut libc::epoll_event);
        // SAFETY: p is NULL or a valid event that lives across the call.
        if unsafe { epoll_ctl(self.fd(), op, fd, p) } < 0 {
            return Err(Errno::last());
        }
        Ok(())
    }

    /// epoll_wait(2) without waiting: the ready members' (events, data),
    /// up to `max`.
    pub fn ready(&self, max: usize) -> Result<Vec<(u32, u64)>, Errno> {
        let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; max.clamp(1, 1024)];
        // SAFETY: evs has evs.len() writable entries.
        let n = unsafe {
            libc::syscall(libc::SYS_epoll_pwait, libc::c_long::from(self.fd()), evs.as_mut_ptr(), evs.len() as libc::c_long, 0 as libc::c_long, std::ptr::null::<libc::sigset_t>(), 0 as libc::c_long)
        };
        if n < 0 {
            return Err(Errno::last());
        }
        Ok(evs[..n as usize].iter().map(|e| (e.events, e.u64)).collect())
    }
}

/// The epoll_ctl system call.
///
/// # Safety
/// `ev` is NULL or points to a valid event.
unsafe fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut libc::epoll_event) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { libc::syscall(libc::SYS_epoll_ctl, libc::c_long::from(epfd), libc::c_long::from(op), libc::c_long::from(fd), ev) as c_int }
}

/// Sets or clears O_NONBLOCK on a descriptor the caller owns.
pub fn set_nonblock(fd: c_int, on: bool) -> Result<(), Errno> {
    // SAFETY: fcntl on a descriptor, no memory arguments.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if fl < 0 {
        return Err(Errno::last());
    }
    let nfl = if on { fl | libc::O_NONBLOCK } else { fl & !libc::O_NONBLOCK };
    // SAFETY: as above.
    if nfl != fl && unsafe { libc::fcntl(fd, libc::F_SETFL, nfl) } < 0 {
        return Err(Errno::last());
    }
    Ok(())
}


/// A close-on-exec duplicate of a descriptor the caller holds open (the
/// same open file: the same readiness), owned by the caller.
pub fn dup_cloexec(fd: c_int) -> Result<std::os::fd::OwnedFd, Errno> {
    use std::os::fd::FromRawFd;
    // SAFETY: fcntl on a descriptor, no memory arguments.
    let n = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if n < 0 {
        return Err(Errno::last());
    }
    // SAFETY: `n` is a fresh descriptor that nothing else owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(n) })
}
