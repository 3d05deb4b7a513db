// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! One rsocket, whatever its kind, and the one table of rsocket numbers.
//!
//! An rsocket number is looked up once per call ([`lookup`]) in one
//! [`FdMap`] (indexed: no process-wide lock on the data path) and yields a
//! [`Sock`]: a stream or a datagram socket. Every call of the C API is a
//! method of [`Sock`]; the kinds' differences (a datagram socket does not
//! listen, has no peer mappings, reports the source of what it received)
//! are decided here, not at the C boundary.
//!
//! A stream accepted by a listener enters the table when raccept hands
//! its number out; until then it belongs to its listener (and goes with
//! it when the listener is closed).
#![deny(unsafe_code)]

use super::dgram;
use super::fdmap::FdMap;
use super::verbs::UserBuf;
use super::guard::{lock, lock_any};
use super::lifecycle as stream;
use super::iomap;
use super::recv;
use super::send;
use super::stream_opts;
use super::options::OptOut;
use super::state::Handle;
use crate::abi::cma::AF_IB;
use crate::sys::rsock;
use nix::errno::Errno;
use std::ffi::c_int;
use std::sync::Arc;

/// An rsocket: a stream or a datagram socket.
#[derive(Clone)]
pub enum Sock {
    Stream(Handle),
    Dgram(dgram::Handle),
}

static TABLE: FdMap<Sock> = FdMap::new();

/// The rsocket behind a number, or EBADF.
#[inline]
pub fn lookup(fd: c_int) -> Result<Sock, Errno> {
    TABLE.get(fd).ok_or(Errno::EBADF)
}

/// Whether `fd` is one of our rsockets.
pub fn is_rsocket(fd: c_int) -> bool {
    TABLE.contains(fd)
}

/// rsocket(2): a stream (SOCK_STREAM, TCP) or a datagram socket
/// (SOCK_DGRAM, UDP) of `domain`; returns its number.
pub fn create(domain: c_int, type_: c_int, protocol: c_int) -> Result<c_int, Errno> {
    let st = type_ & !(libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK);
    if !matches!(domain, libc::AF_INET | libc::AF_INET6 | AF_IB) {
        return Err(Errno::ENOTSUP);
    }
    let (fd, s) = if st == libc::SOCK_DGRAM && (protocol == 0 || protocol == libc::IPPROTO_UDP) {
        // AF_IB: the UDP socket cannot be made (EAFNOSUPPORT), as upstream's.
        let (fd, h) = dgram::create(domain, type_)?;
        (fd, Sock::Dgram(h))
    } else if st == libc::SOCK_STREAM && (protocol == 0 || protocol == libc::IPPROTO_TCP) {
        let (fd, h) = stream::create_stream(domain, type_)?;
        (fd, Sock::Stream(h))
    } else {
        return Err(Errno::ENOTSUP);
    };
    TABLE.insert(fd, s);
    Ok(fd)
}

/// Enters `s` under number `fd` (tests: streams over the fake fabric).
#[cfg(test)]
pub(super) fn insert(fd: c_int, s: Sock) {
    TABLE.insert(fd, s);
}

/// rclose: the socket leaves the table (EBADF when another thread's rclose
/// of the same number took it first) and is freed. Threads still sleeping
/// in a call on it wake up and fail with EBADF.
pub fn close(fd: c_int) -> Result<(), Errno> {
    let s = lookup(fd)?;
    match &s {
        Sock::Stream(h) => stream::close_begin(h),
        Sock::Dgram(h) => dgram::close_begin(h)?,
    }
    if TABLE.remove_if(fd, |t| t.same(&s)).is_none() {
        return Err(Errno::EBADF);
    }
    match &s {
        Sock::Stream(h) => stream::close_end(h),
        Sock::Dgram(h) => dgram::close_end(h),
    }
    Ok(())
}

/// Where a received message came from, for rrecvfrom.
pub struct Source {
    pub addr: Vec<u8>,
    /// The caller's length becomes the bytes copied (a datagram's source,
    /// as upstream's rrecvfrom), not the address's size (a stream's peer,
    /// as getpeername).
    pub len_copied: bool,
}

/// A stream's address as the bytes rgetpeername/rgetsockname report: a
/// sockaddr_in for AF_INET, else as large as a sockaddr_in6.
fn storage_bytes(a: &libc::sockaddr_storage) -> Vec<u8> {
    let full = match c_int::from(a.ss_family) {
        libc::AF_INET => std::mem::size_of::<libc::sockaddr_in>(),
        _ => std::mem::size_of::<libc::sockaddr_in6>(),
    };
    rsock::storage_bytes(a, full as libc::socklen_t)
}

impl Sock {
    /// Whether both are the same rsocket.
    pub fn same(&self, o: &Sock) -> bool {
        match (self, o) {
            (Sock::Stream(a), Sock::Stream(b)) => Arc::ptr_eq(a, b),
            (Sock::Dgram(a), Sock::Dgram(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    pub fn is_stream(&self) -> bool {
        matches!(self, Sock::Stream(_))
    }

    /// rbind: `addr` holds a socket address of its family, `addrlen` the
    /// caller's length (a datagram socket's kernel socket takes no more).
    pub fn bind(&self, addr: &[u8], addrlen: usize) -> Result<(), Errno> {
        match self {
            Sock::Stream(h) => lock(h)?.bind(addr),
            Sock::Dgram(d) => dgram::bind(d, &addr[..addr.len().min(addrlen)]),
        }
    }

    /// rlisten: a datagram socket does not listen (ENOTSUP; upstream's
    /// rlisten passes the rdma_cm id it does not have on and crashes).
    pub fn listen(&self, backlog: c_int) -> Result<(), Errno> {
        match self {
            Sock::Stream(h) => stream::listen(h, backlog),
            Sock::Dgram(_) => Err(Errno::ENOTSUP),
        }
    }

    /// raccept: the accepted stream, now in the table, and its number. A
    /// datagram socket is never listening: EBADF, as upstream.
    pub fn accept(&self) -> Result<(c_int, Sock), Errno> {
        match self {
            Sock::Stream(h) => {
                let n = stream::accept(h)?;
                let fd = lock_any(&n).fd();
                let s = Sock::Stream(n);
                TABLE.insert(fd, s.clone());
                Ok((fd, s))
            }
            Sock::Dgram(_) => Err(Errno::EBADF),
        }
    }

    /// rconnect: a stream connects; a datagram socket makes `addr` its
    /// default destination.
    pub fn connect(&self, addr: &[u8]) -> Result<(), Errno> {
        match self {
            Sock::Stream(h) => stream::connect(h, addr),
            Sock::Dgram(d) => dgram::connect(d, addr),
        }
    }

    /// rshutdown: a datagram socket is never connected: upstream's
    /// rshutdown does nothing to it and returns 0 (whatever `how`).
    pub fn shutdown(&self, how: c_int) -> Result<(), Errno> {
        match self {
            Sock::Stream(h) => stream::shutdown(h, how),
            Sock::Dgram(_) => Ok(()),
        }
    }

    /// rrecv/rread.
    #[inline]
    pub fn recv(&self, buf: &mut [u8], flags: c_int) -> Result<usize, Errno> {
        match self {
            Sock::Stream(h) => recv::recv(h, buf, flags),
            Sock::Dgram(d) => Ok(dgram::recv_from(d, buf, flags)?.0),
        }
    }

    /// rrecvfrom: the bytes received and, when `want_src`, where they came
    /// from (a stream's peer only when it received something).
    pub fn recv_from(&self, buf: &mut [u8], flags: c_int, want_src: bool) -> Result<(usize, Option<Source>), Errno> {
        match self {
            Sock::Stream(h) => {
                let n = recv::recv(h, buf, flags)?;
                let src = if n > 0 && want_src { Some(Source { addr: storage_bytes(&lock(h)?.peer_addr()?), len_copied: false }) } else { None };
                Ok((n, src))
            }
            Sock::Dgram(d) => {
                let (n, addr) = dgram::recv_from(d, buf, flags)?;
                Ok((n, want_src.then_some(Source { addr, len_copied: true })))
            }
        }
    }

    /// rsend/rwrite.
    #[inline]
    pub fn send(&self, buf: &[u8], flags: c_int) -> Result<usize, Errno> {
        match self {
            Sock::Stream(h) => send::send(h, buf, flags),
            Sock::Dgram(d) => dgram::send_to(d, buf, flags, None),
        }
    }

    /// rsendto: a datagram socket sends to `to` (None: its default
    /// destination); a stream is connected and takes no address (EISCONN).
    pub fn send_to(&self, buf: &[u8], flags: c_int, to: Option<&[u8]>) -> Result<usize, Errno> {
        match (self, to) {
            (Sock::Stream(_), Some(_)) => Err(Errno::EISCONN),
            (Sock::Stream(h), None) => send::send(h, buf, flags),
            (Sock::Dgram(d), to) => dgram::send_to(d, buf, flags, to),
        }
    }

    /// rsendmsg/rwritev: a stream sends the pieces in order and stops at
    /// the first short send; a datagram socket sends them as one datagram.
    pub fn sendv(&self, bufs: &[&[u8]], flags: c_int) -> Result<usize, Errno> {
        match self {
            Sock::Stream(h) => {
                let mut total = 0usize;
                for b in bufs {
                    match send::send(h, b, flags) {
                        Ok(n) => {
                            total += n;
                            if n < b.len() {
                                break;
                            }
                        }
                        Err(e) if total == 0 => return Err(e),
                        Err(_) => break,
                    }
                }
                Ok(total)
            }
            Sock::Dgram(d) => dgram::send_to(d, &bufs.concat(), flags, None),
        }
    }

    /// rgetpeername's address.
    pub fn peer_name(&self) -> Result<Vec<u8>, Errno> {
        match self {
            Sock::Stream(h) => Ok(storage_bytes(&lock(h)?.peer_addr()?)),
            Sock::Dgram(d) => dgram::peer_addr(d),
        }
    }

    /// rgetsockname's address.
    pub fn sock_name(&self) -> Result<Vec<u8>, Errno> {
        match self {
            Sock::Stream(h) => Ok(storage_bytes(&lock(h)?.local_addr()?)),
            Sock::Dgram(d) => dgram::local_addr(d),
        }
    }

    /// rsetsockopt (`opt` None for a NULL value).
    pub fn setsockopt(&self, level: c_int, name: c_int, opt: Option<&[u8]>) -> Result<(), Errno> {
        match self {
            Sock::Stream(h) => stream_opts::setsockopt(h, level, name, opt),
            Sock::Dgram(d) => dgram::setsockopt(d, level, name, opt),
        }
    }

    /// rgetsockopt; `room` is the caller's buffer size.
    pub fn getsockopt(&self, level: c_int, name: c_int, room: usize) -> Result<OptOut, Errno> {
        match self {
            Sock::Stream(h) => stream_opts::getsockopt(h, level, name, room),
            Sock::Dgram(d) => dgram::getsockopt(d, level, name, room),
        }
    }

    /// rfcntl.
    pub fn fcntl(&self, cmd: c_int, arg: c_int) -> Result<c_int, Errno> {
        match self {
            Sock::Stream(h) => stream_opts::fcntl(h, cmd, arg),
            Sock::Dgram(d) => dgram::fcntl(d, cmd, arg),
        }
    }

    /// riomap. A datagram socket has no protection domain for a mapping:
    /// EINVAL (upstream reads it through the rdma_cm id it lacks and crashes).
    pub fn iomap(&self, buf: UserBuf, prot: c_int, offset: i64) -> Result<i64, Errno> {
        match self {
            Sock::Stream(h) => lock(h)?.iomap(buf, prot, offset),
            Sock::Dgram(_) => Err(Errno::EINVAL),
        }
    }

    /// riounmap. Nothing is ever mapped on a datagram socket: EINVAL, as upstream.
    pub fn iounmap(&self, addr: u64, len: usize) -> Result<(), Errno> {
        match self {
            Sock::Stream(h) => lock(h)?.iounmap(addr, len),
            Sock::Dgram(_) => Err(Errno::EINVAL),
        }
    }

    /// riowrite of `buf` (the caller's buffer, or why it is none). A
    /// datagram socket has no peer mappings: 0 bytes written, as upstream,
    /// whatever the buffer.
    pub fn iowrite(&self, buf: Result<&[u8], Errno>, offset: u64, flags: c_int) -> Result<usize, Errno> {
        match self {
            Sock::Stream(h) => iomap::iowrite(h, buf?, offset, flags),
            Sock::Dgram(_) => Ok(0),
        }
    }
}
