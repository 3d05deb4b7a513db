// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Async use with tokio (feature `tokio`): an event stream over the event
//! channel's descriptor ([`AsyncEventChannel`], on
//! `tokio::io::unix::AsyncFd`; the descriptor is made non-blocking, and
//! the `AsyncFd` owns what it watches: a duplicate of it), and
//! ids whose resolve, connect, accept and disconnect are `async`
//! ([`AsyncCmId`]: each has a channel of its own, so the event a call
//! awaits is its own). An `AsyncCmId`'s calls have the names, arguments and
//! results of a blocking [`CmId`]'s, awaited.
//!
//! Rsocket streams whose reads and writes are awaited
//! ([`AsyncRStream`]: `tokio::io::AsyncRead + AsyncWrite`) and their
//! listener ([`AsyncRListener`]).
//!
//! Must be used inside a tokio runtime with I/O enabled.
//!
//! ```no_run
//! # async fn f() -> rdmacm::Result<()> {
//! use rdmacm::asyncio::AsyncCmId;
//! use rdmacm::{ConnParam, PortSpace, QpCaps};
//! use std::time::Duration;
//! let id = AsyncCmId::new(PortSpace::Tcp)?;
//! id.resolve_addr(None, "192.0.2.1:7471".parse().unwrap(), Duration::from_secs(2)).await?;
//! id.resolve_route(Duration::from_secs(2)).await?;
//! id.id().create_qp(QpCaps::default())?;
//! id.connect(&ConnParam::default()).await?;
//! let answer = id.peer_private_data();
//! # Ok(()) }
//! ```

#![deny(unsafe_code)]

pub use super::astream::{AsyncRListener, AsyncRStream};
use super::error::{Error, Result};
use super::event::EventKind;
use crate::cma::params::{ConnParam, UdParam};
use super::id::{CmId, Event, EventChannel, OnChannel, PortSpace};
use super::verbs::WorkCompletion;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::io::unix::AsyncFd;

/// A descriptor watched for readability: a duplicate of a channel's
/// descriptor (the same open file), owned by the `AsyncFd`
/// (`sys::reactor::watch`), so the registration never outlives what it
/// names.
type Watched = AsyncFd<OwnedFd>;

/// Runs `f` when `afd` is readable, until it stops failing with EAGAIN.
async fn when_readable<T>(afd: &Watched, mut f: impl FnMut() -> Result<T>) -> Result<T> {
    loop {
        let mut guard = afd.readable().await.map_err(io_error)?;
        match f() {
            Err(e) if e.errno() == libc::EAGAIN => guard.clear_ready(),
            r => return r,
        }
    }
}

fn io_error(e: std::io::Error) -> Error {
    Error::from_errno(e.raw_os_error().unwrap_or(libc::EIO))
}

/// An [`EventChannel`] whose events are awaited.
pub struct AsyncEventChannel {
    // First: deregistered (and its duplicate closed) before the channel.
    afd: Watched,
    ch: EventChannel,
}

impl AsyncEventChannel {
    /// Opens a channel and registers its (now non-blocking) descriptor
    /// with the current tokio runtime.
    pub fn new() -> Result<AsyncEventChannel> {
        AsyncEventChannel::from_channel(EventChannel::new()?)
    }

    /// Makes `ch` async (sets it non-blocking).
    pub fn from_channel(ch: EventChannel) -> Result<AsyncEventChannel> {
        ch.set_nonblocking(true)?;
        let afd = crate::sys::reactor::watch(ch.as_fd()).map_err(io_error)?;
        Ok(AsyncEventChannel { afd, ch })
    }

    /// The next event.
    pub async fn next_event(&self) -> Result<Event<'_>> {
        when_readable(&self.afd, || self.ch.get_event()).await
    }

    /// The channel (to create ids on it, [`EventChannel::create_id`]).
    pub fn channel(&self) -> &EventChannel {
        &self.ch
    }
}

impl std::fmt::Debug for AsyncEventChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncEventChannel").field("fd", &self.ch.as_raw_fd()).finish()
    }
}

/// The error an unexpected or failed event stands for.
fn event_error(ev: &Event<'_>) -> Error {
    if ev.status() < 0 {
        return Error::from_errno(-ev.status());
    }
    Error::from_errno(match ev.kind() {
        EventKind::Rejected => libc::ECONNREFUSED,
        EventKind::Unreachable => libc::ENETUNREACH,
        EventKind::AddrError | EventKind::RouteError => libc::EHOSTUNREACH,
        EventKind::ConnectError => libc::ECONNABORTED,
        EventKind::Disconnected => libc::ECONNRESET,
        EventKind::DeviceRemoval => libc::ENODEV,
        _ => libc::EPROTO,
    })
}

/// An id with a channel of its own, whose calls are awaited: the calls of
/// a blocking [`CmId`], with the same names, arguments and results. Its
/// data path is the [`CmId`]'s ([`AsyncCmId::id`]: post and poll);
/// [`AsyncCmId::wait_cq`] awaits a completion.
pub struct AsyncCmId {
    // First: deregistered (and its duplicate closed) before the id and its
    // completion channel go.
    cq: OnceLock<Watched>,
    // Then the id, before its channel.
    id: CmId<OnChannel>,
    ch: AsyncEventChannel,
    /// The peer's answer to the last awaited connect or accept: its
    /// private data and UD parameters.
    answer: parking_lot::Mutex<(Vec<u8>, Option<UdParam>)>,
}

impl std::fmt::Debug for AsyncCmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncCmId").field("id", &self.id).finish()
    }
}

impl AsyncCmId {
    /// A new id on a new channel of its own.
    pub fn new(ps: PortSpace) -> Result<AsyncCmId> {
        let ch = AsyncEventChannel::new()?;
        let id = ch.channel().create_id(ps)?;
        Ok(AsyncCmId::from_parts(id, ch))
    }

    fn from_parts(id: CmId<OnChannel>, ch: AsyncEventChannel) -> AsyncCmId {
        AsyncCmId { cq: OnceLock::new(), id, ch, answer: parking_lot::Mutex::new((Vec::new(), None)) }
    }

    /// The id (addresses, QP, data path).
    pub fn id(&self) -> &CmId<OnChannel> {
        &self.id
    }

    /// Waits for the id's next event and requires it to be `want`; keeps
    /// its private data and UD parameters when it is an answer.
    async fn expect(&self, want: EventKind) -> Result<()> {
        let ev = self.ch.next_event().await?;
        if ev.kind() == want && ev.status() == 0 {
            if want == EventKind::Established {
                *self.answer.lock() = (ev.private_data().to_vec(), ev.ud_param());
            }
            return Ok(());
        }
        Err(event_error(&ev))
    }

    /// [`CmId::resolve_addr`], awaited.
    pub async fn resolve_addr(&self, src: Option<SocketAddr>, dst: SocketAddr, timeout: Duration) -> Result<()> {
        self.id.resolve_addr(src, dst, timeout)?;
        self.expect(EventKind::AddrResolved).await
    }

    /// [`CmId::resolve_route`], awaited.
    pub async fn resolve_route(&self, timeout: Duration) -> Result<()> {
        self.id.resolve_route(timeout)?;
        self.expect(EventKind::RouteResolved).await
    }

    /// [`CmId::connect`], awaited until established (the peer's answer:
    /// [`AsyncCmId::peer_private_data`], [`AsyncCmId::peer_ud_param`]).
    pub async fn connect(&self, param: &ConnParam) -> Result<()> {
        self.id.connect(param)?;
        self.expect(EventKind::Established).await
    }

    /// [`CmId::bind_addr`].
    pub fn bind_addr(&self, addr: SocketAddr) -> Result<()> {
        self.id.bind_addr(addr)
    }

    /// [`CmId::listen`].
    pub fn listen(&self, backlog: i32) -> Result<()> {
        self.id.listen(backlog)
    }

    /// The private data of the peer's answer to the last awaited
    /// [`AsyncCmId::connect`] (as [`CmId::peer_private_data`]); empty
    /// before one.
    pub fn peer_private_data(&self) -> Vec<u8> {
        self.answer.lock().0.clone()
    }

    /// The remote end a UD id's awaited [`AsyncCmId::connect`] resolved
    /// (as [`CmId::peer_ud_param`]); `None` on other ids.
    pub fn peer_ud_param(&self) -> Option<UdParam> {
        self.answer.lock().1
    }

    /// [`CmId::reject`].
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        self.id.reject(private_data)
    }

    /// The next connection request of this listening id: the new
    /// connection's id (on a channel of its own) and the request's
    /// parameters. Accept it with [`AsyncCmId::accept`] or refuse it with
    /// [`AsyncCmId::reject`].
    pub async fn get_request(&self) -> Result<(AsyncCmId, ConnParam)> {
        loop {
            let mut ev = self.ch.next_event().await?;
            if ev.kind() != EventKind::ConnectRequest {
                // Events of earlier connections' ids before they moved.
                continue;
            }
            let param = ev.conn_param().unwrap_or_default();
            let Some(id) = ev.take_request() else { continue };
            drop(ev);
            let ch = AsyncEventChannel::new()?;
            id.migrate(ch.channel())?;
            return Ok((AsyncCmId::from_parts(id, ch), param));
        }
    }

    /// [`CmId::accept`], awaited until established.
    pub async fn accept(&self, param: &ConnParam) -> Result<()> {
        self.id.accept(param)?;
        self.expect(EventKind::Established).await
    }

    /// [`CmId::disconnect`], awaited until disconnected.
    pub async fn disconnect(&self) -> Result<()> {
        self.id.disconnect()?;
        self.expect(EventKind::Disconnected).await
    }

    /// The next completion of the id's CQ (after [`CmId::create_qp`]),
    /// awaited on its completion channel: polls, arms the CQ, polls again,
    /// then waits for the channel to be readable. Cancel-safe: a
    /// completion is taken only when it is returned (the future may be
    /// dropped at its wait, in a `select!` say, and nothing is lost).
    pub async fn wait_cq(&self) -> Result<WorkCompletion> {
        let afd = match self.cq.get() {
            Some(a) => a,
            None => {
                self.id.set_cq_nonblocking(true)?;
                let a = crate::sys::reactor::watch(self.id.cq_channel()?).map_err(io_error)?;
                // Another task may have set it meanwhile: theirs is kept.
                let _ = self.cq.set(a);
                self.cq.get().expect("set just above")
            }
        };
        let mut one = [WorkCompletion::EMPTY];
        loop {
            if self.id.poll_cq(&mut one)? == 1 {
                return Ok(one[0]);
            }
            self.id.req_notify_cq()?;
            if self.id.poll_cq(&mut one)? == 1 {
                return Ok(one[0]);
            }
            when_readable(afd, || self.id.get_cq_event()).await?;
        }
    }

    /// The id's next event, whatever it is (a peer's disconnect, say).
    pub async fn next_event(&self) -> Result<Event<'_>> {
        self.ch.next_event().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap()
    }

    /// The readiness loop the event stream uses: a read that would block
    /// (EAGAIN) waits for readability and is retried, without spinning.
    #[test]
    fn readiness_retries_after_eagain() {
        rt().block_on(async {
            let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
            a.set_nonblocking(true).unwrap();
            let afd = crate::sys::reactor::watch(a.as_fd()).unwrap();
            let mut calls = 0;
            let writer = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                b.write_all(b"x").unwrap();
                b
            });
            let got = when_readable(&afd, || {
                calls += 1;
                let mut buf = [0u8; 1];
                match std::io::Read::read(&mut &a, &mut buf) {
                    Ok(n) => Ok(buf[..n].to_vec()),
                    Err(e) => Err(Error::from_errno(e.raw_os_error().unwrap())),
                }
            })
            .await
            .unwrap();
            assert_eq!(got, b"x");
            assert!(calls <= 3, "{calls} reads: readiness was not awaited");
            drop(writer.join().unwrap());
        });
    }

    #[test]
    fn event_errors() {
        // Without a device a channel cannot be opened: the error is a value.
        let r = rt().block_on(async { AsyncEventChannel::new().map(drop) });
        if let Err(e) = r {
            assert_ne!(e.errno(), 0);
        }
    }
}
