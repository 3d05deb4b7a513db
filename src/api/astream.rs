// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Async rsocket streams (feature `tokio`): [`AsyncRStream`]
//! (`tokio::io::AsyncRead + AsyncWrite`) and [`AsyncRListener`].
//!
//! An rsocket is not a kernel socket: what makes it ready is its
//! completion channel (data, credits, send room) and the library's
//! service thread (connect, accept, disconnect, rclose). Each stream is
//! non-blocking; an operation that would block (EAGAIN, or EINPROGRESS
//! for a connect) registers a wake-up descriptor of its own with the
//! stream, arms the CQ and looks once more (as rpoll does, so nothing that
//! comes meanwhile is missed), then awaits readability of the wake-up
//! descriptor and of the CQ channel (duplicates owned by tokio's
//! `AsyncFd`s), takes the CQ's event and tries again. Reading and writing
//! wait apart (each has its own descriptors and registration), so the
//! halves of `tokio::io::split` can run in different tasks.

#![deny(unsafe_code)]

use super::addr::to_sockaddr;
use super::error::{errno, Error, Result};
use super::stream::{new_stream_socket, socket_addr, Fd, RListener, RStream};
use crate::rsocket::poll::Waiter;
use crate::rsocket::{self as rs, Sock};
use nix::errno::Errno;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

type Watched = AsyncFd<OwnedFd>;

/// Tries of an operation within one poll before it yields to the
/// scheduler (a stream that reports ready while its operation still
/// would block must not hold the thread).
const TRIES: usize = 64;

fn io_err(e: Errno) -> io::Error {
    io::Error::from(errno(e))
}

/// Makes an rsocket non-blocking (rfcntl O_NONBLOCK: calls return EAGAIN,
/// a connect EINPROGRESS, the CQ channel does not block).
fn set_nonblocking(s: &Sock) -> Result<()> {
    let fl = s.fcntl(libc::F_GETFL, 0).map_err(errno)?;
    if fl & libc::O_NONBLOCK == 0 {
        s.fcntl(libc::F_SETFL, fl | libc::O_NONBLOCK).map_err(errno)?;
    }
    Ok(())
}

/// One direction's waiting: a wake-up registration with the stream and
/// the descriptors tokio watches for it.
struct Side {
    // The registrations go first (deregistered, their duplicates closed).
    cq: Option<Watched>,
    wake: Watched,
    waiter: Waiter,
}

impl Side {
    fn new() -> Result<Side> {
        let waiter = Waiter::new().map_err(errno)?;
        let wake = crate::sys::reactor::watch_owned(waiter.wake_fd().map_err(errno)?).map_err(io_to_error)?;
        Ok(Side { cq: None, wake, waiter })
    }

    /// Ready when some of `events` are (rpoll's events, POLLERR and
    /// POLLHUP always included); otherwise registered, armed and waiting.
    fn poll_ready(&mut self, cx: &mut Context<'_>, s: &Sock, events: i16) -> Poll<io::Result<i16>> {
        loop {
            let rev = self.waiter.arm(s, events).map_err(io_err)?;
            if rev != 0 {
                return Poll::Ready(Ok(rev));
            }
            if self.cq.is_none() {
                if let Some(fd) = self.waiter.cq_channel(s).map_err(io_err)? {
                    self.cq = Some(crate::sys::reactor::watch_owned(fd)?);
                }
            }
            let mut woke = false;
            let mut cq_readable = false;
            if let Some(cq) = &self.cq {
                if let Poll::Ready(g) = cq.poll_read_ready(cx) {
                    g?.clear_ready();
                    woke = true;
                    cq_readable = true;
                }
            }
            if let Poll::Ready(g) = self.wake.poll_read_ready(cx) {
                g?.clear_ready();
                woke = true;
            }
            if !woke {
                // Both wakers registered: a change signals the wake-up
                // descriptor, a completion raises a CQ event.
                return Poll::Pending;
            }
            // (readiness cleared before the descriptors are read: a
            // signal that comes meanwhile is reported again)
            self.waiter.done(s, cq_readable);
        }
    }

    /// Runs `op` until it does not fail with EAGAIN, waiting for `events`
    /// in between.
    fn poll_op<T>(&mut self, cx: &mut Context<'_>, s: &Sock, events: i16, mut op: impl FnMut() -> std::result::Result<T, Errno>) -> Poll<io::Result<T>> {
        for _ in 0..TRIES {
            match op() {
                Err(Errno::EAGAIN) => {}
                r => return Poll::Ready(r.map_err(io_err)),
            }
            ready!(self.poll_ready(cx, s, events))?;
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Leaves the stream (a registration outliving the waiter would only
    /// hold its descriptor until the next change).
    fn leave(&self, s: &Sock) {
        self.waiter.done(s, false);
    }
}

fn io_to_error(e: io::Error) -> Error {
    Error::from_errno(e.raw_os_error().unwrap_or(libc::EIO))
}

/// A connected rsocket stream whose reads and writes are awaited:
/// `tokio::io::AsyncRead + AsyncWrite` over an RDMA connection (what
/// hyper, tokio-util codecs and `tokio::io::copy` take). Must be used
/// inside a tokio runtime with I/O enabled.
///
/// ```no_run
/// # async fn f() -> rdmacm::Result<()> {
/// use rdmacm::asyncio::AsyncRStream;
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
/// let mut s = AsyncRStream::connect("192.0.2.1:7471".parse().unwrap()).await?;
/// s.write_all(b"hello").await?;
/// let mut answer = [0u8; 5];
/// s.read_exact(&mut answer).await?;
/// # Ok(()) }
/// ```
///
/// `poll_shutdown` (and dropping the stream, which closes it) is
/// rshutdown: it returns once the sends in flight have completed, which
/// the device reports without waiting for the peer's program.
pub struct AsyncRStream {
    // Fields drop in order: the registrations, then the rsocket (rclose).
    rd: Side,
    wr: Side,
    shut: bool,
    sock: Sock,
    fd: Fd,
}

impl AsyncRStream {
    fn with(fd: Fd) -> Result<AsyncRStream> {
        let sock = rs::lookup(fd.0).map_err(errno)?;
        set_nonblocking(&sock)?;
        Ok(AsyncRStream { rd: Side::new()?, wr: Side::new()?, shut: false, sock, fd })
    }

    /// Connects to `addr`, awaiting the connection.
    pub async fn connect(addr: SocketAddr) -> Result<AsyncRStream> {
        // Non-blocking before rconnect: the connect returns EINPROGRESS
        // and the service thread carries it on.
        let mut s = AsyncRStream::with(new_stream_socket(&addr)?)?;
        match s.sock.connect(to_sockaddr(&addr).as_bytes()) {
            Ok(()) => return Ok(s),
            Err(Errno::EINPROGRESS) => {}
            Err(e) => return Err(errno(e)),
        }
        let AsyncRStream { wr, sock, .. } = &mut s;
        let rev = poll_fn(|cx| wr.poll_ready(cx, sock, libc::POLLOUT)).await.map_err(io_to_error)?;
        if rev & libc::POLLERR != 0 {
            let out = sock.getsockopt(libc::SOL_SOCKET, libc::SO_ERROR, 4).map_err(errno)?;
            let e = out.bytes.get(..4).map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
            return Err(Error::from_errno(if e != 0 { e } else { libc::ECONNREFUSED }));
        }
        Ok(s)
    }

    /// Makes a connected [`RStream`] async (non-blocking from now on).
    pub fn from_std(s: RStream) -> Result<AsyncRStream> {
        AsyncRStream::with(s.fd)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> Result<SocketAddr> {
        socket_addr(&self.sock.peer_name().map_err(errno)?)
    }

    /// The local address.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        socket_addr(&self.sock.sock_name().map_err(errno)?)
    }

    /// The rsocket descriptor (an rsocket number, not a kernel descriptor).
    pub fn rsocket_fd(&self) -> i32 {
        self.fd.0
    }
}

impl AsyncRead for AsyncRStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let sock = &this.sock;
        let dst = buf.initialize_unfilled();
        let n = ready!(this.rd.poll_op(cx, sock, libc::POLLIN, || sock.recv(dst, 0)))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for AsyncRStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let sock = &this.sock;
        this.wr.poll_op(cx, sock, libc::POLLOUT, || sock.send(buf, 0))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // A send is posted when it returns: nothing is buffered here.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.shut {
            this.shut = true;
            this.sock.shutdown(libc::SHUT_WR).map_err(io_err)?;
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for AsyncRStream {
    fn drop(&mut self) {
        self.rd.leave(&self.sock);
        self.wr.leave(&self.sock);
    }
}

impl std::fmt::Debug for AsyncRStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncRStream").field("rsocket", &self.fd.0).field("peer", &self.peer_addr().ok()).finish()
    }
}

/// A listening rsocket whose connections are awaited
/// ([`AsyncRListener::accept`]).
///
/// ```no_run
/// # async fn f() -> rdmacm::Result<()> {
/// use rdmacm::asyncio::AsyncRListener;
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
/// let mut l = AsyncRListener::bind("0.0.0.0:7471".parse().unwrap(), 8)?;
/// let (mut s, _peer) = l.accept().await?;
/// let mut b = [0u8; 64];
/// let n = s.read(&mut b).await?;
/// s.write_all(&b[..n]).await?;
/// # Ok(()) }
/// ```
pub struct AsyncRListener {
    side: Side,
    sock: Sock,
    fd: Fd,
}

impl AsyncRListener {
    /// Binds to `addr` and listens with `backlog`.
    pub fn bind(addr: SocketAddr, backlog: i32) -> Result<AsyncRListener> {
        AsyncRListener::from_std(RListener::bind(addr, backlog)?)
    }

    /// Makes a listening [`RListener`] async (non-blocking from now on).
    pub fn from_std(l: RListener) -> Result<AsyncRListener> {
        let sock = rs::lookup(l.fd.0).map_err(errno)?;
        set_nonblocking(&sock)?;
        Ok(AsyncRListener { side: Side::new()?, sock, fd: l.fd })
    }

    /// The next connection and its peer's address. The connection may
    /// still be completing its handshake: its first read or write awaits
    /// that.
    pub async fn accept(&mut self) -> Result<(AsyncRStream, Option<SocketAddr>)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// [`AsyncRListener::accept`] as a poll function.
    pub fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<Result<(AsyncRStream, Option<SocketAddr>)>> {
        let sock = &self.sock;
        let (fd, _) = match ready!(self.side.poll_op(cx, sock, libc::POLLIN, || sock.accept())) {
            Ok(x) => x,
            Err(e) => return Poll::Ready(Err(io_to_error(e))),
        };
        let r = AsyncRStream::with(Fd(fd)).map(|s| {
            let peer = s.peer_addr().ok();
            (s, peer)
        });
        Poll::Ready(r)
    }

    /// The local address.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        socket_addr(&self.sock.sock_name().map_err(errno)?)
    }
}

impl Drop for AsyncRListener {
    fn drop(&mut self) {
        self.side.leave(&self.sock);
    }
}

impl std::fmt::Debug for AsyncRListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncRListener").field("rsocket", &self.fd.0).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::os::fd::AsRawFd;
    use std::sync::mpsc;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Two async streams connected over the fake fabric (8 KiB buffers,
    /// 16 credits: a large transfer waits for room and credits many
    /// times), and the numbers they hold (open files nobody else gets).
    fn pair() -> (AsyncRStream, AsyncRStream, [File; 2]) {
        let n = [File::open("/dev/null").unwrap(), File::open("/dev/null").unwrap()];
        rs::fake_pair(n[0].as_raw_fd(), n[1].as_raw_fd());
        let a = AsyncRStream::with(Fd(n[0].as_raw_fd())).unwrap();
        let b = AsyncRStream::with(Fd(n[1].as_raw_fd())).unwrap();
        (a, b, n)
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add((i >> 11) as u8)).collect()
    }

    /// Runs `f` in a current-thread runtime on a thread of its own; fails
    /// after `secs` (a lost wake-up hangs).
    fn within<T: Send + 'static>(secs: u64, f: impl FnOnce(&tokio::runtime::Runtime) -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
            let _ = tx.send(f(&rt));
        });
        rx.recv_timeout(Duration::from_secs(secs)).expect("timed out (a lost wake-up) or panicked")
    }

    /// 1 MiB each way at once, writer and reader of each stream in tasks
    /// of their own (the halves of `tokio::io::split`), on one thread:
    /// every wait (room, credits, data) is woken by the peer's progress
    /// alone.
    #[test]
    fn both_ways_at_once_in_split_halves() {
        within(60, |rt| {
            rt.block_on(async {
                let (a, b, _n) = pair();
                let data = pattern(1 << 20);
                let (mut ar, mut aw) = tokio::io::split(a);
                let (mut br, mut bw) = tokio::io::split(b);
                let d1 = data.clone();
                let w1 = tokio::spawn(async move {
                    aw.write_all(&d1).await.unwrap();
                    aw
                });
                let d2 = data.clone();
                let w2 = tokio::spawn(async move {
                    bw.write_all(&d2).await.unwrap();
                    bw
                });
                let r1 = tokio::spawn(async move {
                    let mut got = vec![0u8; 1 << 20];
                    br.read_exact(&mut got).await.unwrap();
                    got
                });
                let r2 = tokio::spawn(async move {
                    let mut got = vec![0u8; 1 << 20];
                    ar.read_exact(&mut got).await.unwrap();
                    got
                });
                assert!(r1.await.unwrap() == data, "a -> b");
                assert!(r2.await.unwrap() == data, "b -> a");
                drop((w1.await.unwrap(), w2.await.unwrap()));
            })
        });
    }

    /// A read that waits for data sent later from another thread (a
    /// blocking rsend on the peer): the CQ's event wakes it.
    #[test]
    fn a_waiting_read_wakes_on_data() {
        within(30, |rt| {
            rt.block_on(async {
                let (mut a, b, _n) = pair();
                let peer = b.sock.clone();
                let t = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(100));
                    peer.send(b"late", 0).unwrap()
                });
                let mut got = [0u8; 4];
                a.read_exact(&mut got).await.unwrap();
                assert_eq!(&got, b"late");
                assert_eq!(t.join().unwrap(), 4);
                drop(b);
            })
        });
    }

    /// The registration of arm-then-check: once a waiter has looked and
    /// found nothing, a change another thread makes to the stream (here
    /// rfcntl's) signals its wake-up descriptor; `done` resets it.
    #[test]
    fn a_change_by_another_thread_signals_the_registered_waiter() {
        use std::io::Read;
        let n = [File::open("/dev/null").unwrap(), File::open("/dev/null").unwrap()];
        rs::fake_pair(n[0].as_raw_fd(), n[1].as_raw_fd());
        let s = rs::lookup(n[0].as_raw_fd()).unwrap();
        let w = Waiter::new().unwrap();
        // (the duplicate shares the eventfd's O_NONBLOCK: a read tells
        // whether it was signalled, and resets it)
        let mut wake = File::from(w.wake_fd().unwrap());
        let signalled = |f: &mut File| f.read(&mut [0u8; 8]).is_ok();
        assert_eq!(w.arm(&s, libc::POLLIN).unwrap(), 0, "no data yet");
        assert!(!signalled(&mut wake), "signalled before any change");
        let other = s.clone();
        std::thread::spawn(move || other.fcntl(libc::F_SETFL, libc::O_NONBLOCK).unwrap()).join().unwrap();
        assert!(signalled(&mut wake), "the change did not signal the registered waiter");
        w.done(&s, false);
        std::thread::spawn({
            let other = s.clone();
            move || other.fcntl(libc::F_SETFL, 0).unwrap()
        })
        .join()
        .unwrap();
        assert!(!signalled(&mut wake), "signalled after done (no longer registered)");
        rs::close(n[0].as_raw_fd()).unwrap();
        rs::close(n[1].as_raw_fd()).unwrap();
    }

    /// The peer's shutdown ends the reader's stream (0 bytes), after the
    /// data sent before it.
    #[test]
    fn shutdown_is_end_of_stream() {
        within(30, |rt| {
            rt.block_on(async {
                let (mut a, mut b, _n) = pair();
                b.write_all(b"last words").await.unwrap();
                b.shutdown().await.unwrap();
                let mut got = Vec::new();
                a.read_to_end(&mut got).await.unwrap();
                assert_eq!(got, b"last words");
            })
        });
    }
}
