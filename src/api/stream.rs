// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rsocket streams as `std::io::Read + Write`, and a listener.

#![deny(unsafe_code)]

use super::addr::{from_sockaddr, to_sockaddr};
use crate::abi::sockaddr::SockAddr;
use super::error::{errno, Error, Result};
use crate::rsocket as rs;
use std::io;
use std::net::{Shutdown, SocketAddr};

fn family(a: &SocketAddr) -> i32 {
    if a.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    }
}

/// An rsocket descriptor, closed on drop.
pub(super) struct Fd(pub(super) i32);

impl Drop for Fd {
    fn drop(&mut self) {
        if let Err(e) = rs::close(self.0) {
            log::debug!(target: "rdmacm", "rclose({}) failed: {e}", self.0);
        }
    }
}

/// A socket address from the bytes rgetpeername/rgetsockname give.
pub(super) fn socket_addr(b: &[u8]) -> Result<SocketAddr> {
    from_sockaddr(&SockAddr::from_prefix(b)).ok_or(Error::from_errno(libc::EAFNOSUPPORT))
}

pub(super) fn new_stream_socket(a: &SocketAddr) -> Result<Fd> {
    Ok(Fd(rs::create(family(a), libc::SOCK_STREAM, 0).map_err(errno)?))
}

/// A connected rsocket stream (`rsocket(SOCK_STREAM)` + `rconnect`): bytes
/// over an RDMA connection, through [`io::Read`] and [`io::Write`].
///
/// ```no_run
/// use std::io::{Read, Write};
/// let mut s = rdmacm::RStream::connect("192.0.2.1:7471".parse().unwrap())?;
/// s.write_all(b"hello")?;
/// let mut answer = [0u8; 5];
/// s.read_exact(&mut answer)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct RStream {
    pub(super) fd: Fd,
}

impl RStream {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> Result<RStream> {
        let fd = new_stream_socket(&addr)?;
        rs::lookup(fd.0).map_err(errno)?.connect(to_sockaddr(&addr).as_bytes()).map_err(errno)?;
        Ok(RStream { fd })
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> Result<SocketAddr> {
        socket_addr(&rs::lookup(self.fd.0).map_err(errno)?.peer_name().map_err(errno)?)
    }

    /// The local address.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        socket_addr(&rs::lookup(self.fd.0).map_err(errno)?.sock_name().map_err(errno)?)
    }

    /// Shuts down reading, writing or both (`rshutdown`).
    pub fn shutdown(&self, how: Shutdown) -> Result<()> {
        let how = match how {
            Shutdown::Read => libc::SHUT_RD,
            Shutdown::Write => libc::SHUT_WR,
            Shutdown::Both => libc::SHUT_RDWR,
        };
        rs::lookup(self.fd.0).map_err(errno)?.shutdown(how).map_err(errno)
    }

    /// The rsocket descriptor (an rsocket number, not a kernel descriptor:
    /// for the C library's `r*` calls only).
    pub fn rsocket_fd(&self) -> i32 {
        self.fd.0
    }
}

impl io::Read for RStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let s = rs::lookup(self.fd.0).map_err(errno)?;
        Ok(s.recv(buf, 0).map_err(errno)?)
    }
}

impl io::Write for RStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let s = rs::lookup(self.fd.0).map_err(errno)?;
        Ok(s.send(buf, 0).map_err(errno)?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl std::fmt::Debug for RStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RStream").field("rsocket", &self.fd.0).field("peer", &self.peer_addr().ok()).finish()
    }
}

/// A listening rsocket (`rsocket` + `rbind` + `rlisten`); [`RListener::accept`]
/// gives the connections.
///
/// ```no_run
/// use std::io::{Read, Write};
/// let l = rdmacm::RListener::bind("0.0.0.0:7471".parse().unwrap(), 8)?;
/// let (mut s, peer) = l.accept()?;
/// let mut b = [0u8; 64];
/// let n = s.read(&mut b)?;
/// s.write_all(&b[..n])?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct RListener {
    pub(super) fd: Fd,
}

impl RListener {
    /// Binds to `addr` and listens with `backlog`.
    pub fn bind(addr: SocketAddr, backlog: i32) -> Result<RListener> {
        let fd = new_stream_socket(&addr)?;
        let s = rs::lookup(fd.0).map_err(errno)?;
        let a = to_sockaddr(&addr);
        s.bind(a.as_bytes(), a.len()).map_err(errno)?;
        s.listen(backlog).map_err(errno)?;
        Ok(RListener { fd })
    }

    /// The next connection (blocks until one comes) and its peer's address.
    pub fn accept(&self) -> Result<(RStream, Option<SocketAddr>)> {
        let (fd, _) = rs::lookup(self.fd.0).map_err(errno)?.accept().map_err(errno)?;
        let s = RStream { fd: Fd(fd) };
        let peer = s.peer_addr().ok();
        Ok((s, peer))
    }

    /// The local address.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        socket_addr(&rs::lookup(self.fd.0).map_err(errno)?.sock_name().map_err(errno)?)
    }
}

impl std::fmt::Debug for RListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RListener").field("rsocket", &self.fd.0).finish()
    }
}
