// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Event channels and ids, with their ownership rules.
//!
//! * An [`EventChannel`] is open while it or any [`CmId`] made on it lives:
//!   every id holds its channel (the choice of "holds it alive" over a
//!   lifetime parameter, so that ids can be stored and moved freely).
//! * An [`Event`] borrows its channel and is acknowledged when dropped; it
//!   holds the id it is for, so an id dropped while one of its events is
//!   held is destroyed when the last such event is dropped (never a wait
//!   for an acknowledgement the waiting thread itself owes).
//! * A connection request's id is owned ([`Event::take_request`]).
//! * An id's mode is in its type: [`CmId<Blocking>`](CmId) (the default:
//!   [`CmId::new`], each call waits for its outcome) or
//!   [`CmId<OnChannel>`](CmId) ([`EventChannel::create_id`], outcomes come
//!   as events). What only one mode can do is only on that mode's type.

#![deny(unsafe_code)]

use super::addr::{from_storage, to_sockaddr};
use super::error::{errno, Result};
use super::event::EventKind;
use crate::cma::params::{ConnParam, UdParam};
use crate::cma::api::RawEvent;
use crate::abi::cma::{RDMA_PS_IB, RDMA_PS_IPOIB, RDMA_PS_TCP, RDMA_PS_UDP};
use crate::cma::api as capi;
use crate::cma::ChanRef;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// A port space (`enum rdma_port_space`): the kind of QP an id serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortSpace {
    /// Reliable connected QPs (`RDMA_PS_TCP`).
    Tcp,
    /// Unreliable datagram QPs (`RDMA_PS_UDP`).
    Udp,
    /// Any QP type, by the connect (`RDMA_PS_IB`).
    Ib,
    /// IP over InfiniBand (`RDMA_PS_IPOIB`).
    Ipoib,
}

impl PortSpace {
    pub(crate) fn raw(self) -> u32 {
        match self {
            PortSpace::Tcp => RDMA_PS_TCP,
            PortSpace::Udp => RDMA_PS_UDP,
            PortSpace::Ib => RDMA_PS_IB,
            PortSpace::Ipoib => RDMA_PS_IPOIB,
        }
    }
}

/// What an event names its id by: compare [`Event::id_key`] with
/// [`CmId::key`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdKey(pub(crate) u64);

/// The channel itself; closed when the last owner (the [`EventChannel`]
/// or one of its ids) goes.
pub(crate) struct ChanInner {
    pub(crate) ch: ChanRef,
    /// Its descriptor's blocking mode (see [`NbMode`]).
    nb: NbMode,
    /// The ids reporting to it, by [`CmId::key`]: what an event holds of
    /// the id it is for (see [`Event`]).
    ids: parking_lot::Mutex<HashMap<u64, Weak<IdInner>>>,
}

impl ChanInner {
    fn new(ch: ChanRef) -> ChanInner {
        ChanInner { ch, nb: NbMode::default(), ids: Default::default() }
    }

    /// The live id of key `uid` on this channel, if any (not one being
    /// dropped).
    fn id(&self, uid: u64) -> Option<Arc<IdInner>> {
        self.ids.lock().get(&uid).and_then(Weak::upgrade)
    }
}

impl Drop for ChanInner {
    fn drop(&mut self) {
        capi::destroy_channel(&self.ch);
    }
}

/// An event channel (`struct rdma_event_channel`): the events of the ids
/// made on it, read with [`EventChannel::get_event`] or, with a timeout,
/// [`EventChannel::get_event_timeout`]. Its descriptor
/// ([`AsFd`](std::os::fd::AsFd), [`AsRawFd`]) may be polled: it is
/// readable while an event is queued.
///
/// ```no_run
/// use rdmacm::{EventChannel, EventKind, PortSpace};
/// use std::time::Duration;
/// # fn main() -> rdmacm::Result<()> {
/// let ch = EventChannel::new()?;
/// let id = ch.create_id(PortSpace::Tcp)?;
/// id.resolve_addr(None, "192.0.2.1:7471".parse().unwrap(), Duration::from_secs(2))?;
/// let ev = ch.get_event()?;
/// assert!(ev.is_for(&id));
/// assert_eq!(ev.kind(), EventKind::AddrResolved);
/// # Ok(()) }
/// ```
pub struct EventChannel {
    pub(crate) inner: Arc<ChanInner>,
}

impl EventChannel {
    /// Opens a channel (`rdma_create_event_channel`).
    pub fn new() -> Result<EventChannel> {
        let ch = capi::create_channel().map_err(errno)?;
        Ok(EventChannel { inner: Arc::new(ChanInner::new(ch)) })
    }

    /// A new id reporting to this channel (`rdma_create_id`). Its calls
    /// return once issued; their outcome comes as an event.
    pub fn create_id(&self, ps: PortSpace) -> Result<CmId<OnChannel>> {
        let id = capi::CmId::create_on(&self.inner.ch, ps.raw()).map_err(errno)?;
        Ok(CmId::from_parts(id, Some(self.inner.clone())))
    }

    /// The next event (`rdma_get_cm_event`): blocks until one comes, or
    /// fails with `EAGAIN` at once when the channel is non-blocking
    /// ([`EventChannel::set_nonblocking`]) and none is queued.
    pub fn get_event(&self) -> Result<Event<'_>> {
        let nb = &self.inner.nb;
        loop {
            match capi::get_event(&self.inner.ch) {
                Ok(raw) => return Ok(Event::new(self, raw)),
                // The descriptor is non-blocking for a timed wait, not for
                // the caller: wait for the next event.
                Err(nix::errno::Errno::EAGAIN) if !nb.user() => {
                    wait_readable(self.as_raw_fd(), None)?;
                }
                Err(e) => return Err(errno(e)),
            }
        }
    }

    /// The next event, waiting at most `timeout` for it: `Ok(None)` when
    /// none came in that time (`Duration::ZERO`: only a queued event).
    /// The first call makes the descriptor non-blocking for good (the
    /// wait is a `poll` of it); [`EventChannel::get_event`] still blocks
    /// unless [`EventChannel::set_nonblocking`] says otherwise. Several
    /// threads may wait on one channel: each event goes to one of them.
    ///
    /// ```no_run
    /// # fn f(ch: &rdmacm::EventChannel) -> rdmacm::Result<()> {
    /// use std::time::Duration;
    /// match ch.get_event_timeout(Duration::from_millis(500))? {
    ///     Some(ev) => println!("{}", ev.kind()),
    ///     None => println!("no event in 500 ms"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn get_event_timeout(&self, timeout: Duration) -> Result<Option<Event<'_>>> {
        let deadline = Instant::now().checked_add(timeout);
        let fd = self.as_raw_fd();
        self.inner.nb.for_timed_waits(fd)?;
        loop {
            match capi::get_event(&self.inner.ch) {
                Ok(raw) => return Ok(Some(Event::new(self, raw))),
                Err(nix::errno::Errno::EAGAIN) => {
                    if !wait_readable(fd, deadline)? {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(errno(e)),
            }
        }
    }

    /// Makes [`EventChannel::get_event`] non-blocking (or blocking again).
    pub fn set_nonblocking(&self, on: bool) -> Result<()> {
        self.inner.nb.set_user(self.as_raw_fd(), on)
    }
}

impl AsRawFd for EventChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.ch.fd()
    }
}

impl std::fmt::Debug for EventChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventChannel").field("fd", &self.as_raw_fd()).finish()
    }
}

/// A connection manager id (`struct rdma_cm_id`): one endpoint, its
/// addresses, route, connection and QP. Dropping it destroys its QP and
/// the id (after every event reported for it has been dropped).
///
/// The mode is a type parameter:
///
/// * `CmId<Blocking>`, written `CmId`, made by [`CmId::new`] (and
///   [`CmId::get_request`]): synchronous, with a private channel; every
///   call waits for its own outcome. Only this mode has
///   [`CmId::get_request`], [`CmId::peer_private_data`] and
///   [`CmId::peer_ud_param`] (the outcome the call waited for).
/// * `CmId<OnChannel>`, made by [`EventChannel::create_id`] (and
///   [`Event::take_request`]): asynchronous; every call returns once
///   issued and its outcome is an event of the channel, which carries the
///   private data and UD parameters. Only this mode has
///   [`CmId::migrate`] (to another channel).
///
/// Everything else (addresses, resolution, connect, accept, reject,
/// disconnect, multicast, the QP and its data path) is the same for both.
///
/// A method of the other mode does not compile:
///
/// ```compile_fail
/// # fn f(ch: &rdmacm::EventChannel) -> rdmacm::Result<()> {
/// let id = ch.create_id(rdmacm::PortSpace::Tcp)?;
/// let (conn, _) = id.get_request()?; // only a blocking id waits for a request
/// # Ok(()) }
/// ```
///
/// A synchronous client:
///
/// ```no_run
/// use rdmacm::{CmId, ConnParam, PortSpace, QpCaps};
/// use std::time::Duration;
/// # fn main() -> rdmacm::Result<()> {
/// let id = CmId::new(PortSpace::Tcp)?;
/// id.resolve_addr(None, "192.0.2.1:7471".parse().unwrap(), Duration::from_secs(2))?;
/// id.resolve_route(Duration::from_secs(2))?;
/// id.create_qp(QpCaps::default())?;
/// id.connect(&ConnParam::default())?;
/// println!("server said {:?}", id.peer_private_data());
/// # Ok(()) }
/// ```
pub struct CmId<M: Mode = Blocking> {
    pub(crate) id: Arc<IdInner>,
    // The mode, without owning one (a function pointer type: Send and
    // Sync whatever the marker).
    mode: PhantomData<fn() -> M>,
}

mod sealed {
    pub trait Sealed {}
}

/// The mode of a [`CmId`]: [`Blocking`] or [`OnChannel`]. Sealed: the
/// library defines both and no other.
pub trait Mode: sealed::Sealed + 'static {}

/// The mode of an id whose calls wait for their outcome ([`CmId::new`]).
#[derive(Debug)]
pub enum Blocking {}

/// The mode of an id whose outcomes are events of a channel
/// ([`EventChannel::create_id`]).
#[derive(Debug)]
pub enum OnChannel {}

impl sealed::Sealed for Blocking {}
impl sealed::Sealed for OnChannel {}
impl Mode for Blocking {}
impl Mode for OnChannel {}

/// An id and the channel it holds open. Memory regions and address
/// handles hold it too (their PD is the id's device's), so the id, and
/// then its channel, go when the last of them goes.
pub(crate) struct IdInner {
    id: capi::CmId,
    /// The completion channel's blocking mode (see [`NbMode`]).
    pub(crate) cq_nb: NbMode,
    // After `id`: the id is destroyed before its channel may close.
    chan: parking_lot::Mutex<Option<Arc<ChanInner>>>,
}

impl Drop for IdInner {
    fn drop(&mut self) {
        // Off its channel's list (then the fields go: the id, then the
        // channel it held).
        if let Some(c) = self.chan.get_mut() {
            c.ids.lock().remove(&self.id.uid());
        }
    }
}

impl std::ops::Deref for IdInner {
    type Target = capi::CmId;
    fn deref(&self) -> &capi::CmId {
        &self.id
    }
}

impl<M: Mode> std::fmt::Debug for CmId<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmId").field("key", &self.key()).field("local", &self.local_addr()).field("peer", &self.peer_addr()).finish()
    }
}

/// The blocking mode of a descriptor the library reads (an event channel,
/// a completion channel): what the caller asked for, and whether a timed
/// wait made the descriptor itself non-blocking (then for good: a blocking
/// read of another thread may be under way, and it must not block past a
/// timed waiter's deadline; the blocking calls wait with `poll` instead).
#[derive(Default)]
pub(crate) struct NbMode {
    /// The caller's `set_nonblocking(true)`.
    user: AtomicBool,
    /// O_NONBLOCK set for timed waits.
    timed: AtomicBool,
}

impl NbMode {
    /// Whether the caller asked for non-blocking calls.
    pub(crate) fn user(&self) -> bool {
        self.user.load(Ordering::Relaxed)
    }

    /// The caller's choice; the descriptor follows it unless timed waits
    /// keep it non-blocking.
    pub(crate) fn set_user(&self, fd: RawFd, on: bool) -> Result<()> {
        self.user.store(on, Ordering::Relaxed);
        if self.timed.load(Ordering::Relaxed) {
            return Ok(());
        }
        set_nonblocking(fd, on)
    }

    /// Makes the descriptor non-blocking for timed waits (once).
    pub(crate) fn for_timed_waits(&self, fd: RawFd) -> Result<()> {
        if !self.timed.load(Ordering::Relaxed) {
            set_nonblocking(fd, true)?;
            self.timed.store(true, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Waits until `fd` is readable (or reports an error or hang-up, which the
/// read that follows gives) or `deadline` passes (`None`: never); whether
/// it is ready. A signal's interruption is waited through.
pub(crate) fn wait_readable(fd: RawFd, deadline: Option<Instant>) -> Result<bool> {
    loop {
        let ms = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                // Rounded up: a wait never ends before the deadline.
                let ms = left.as_nanos().div_ceil(1_000_000);
                ms.min(i32::MAX as u128) as i32
            }
        };
        let mut p = [libc::pollfd { fd, events: libc::POLLIN, revents: 0 }];
        match crate::sys::cancel::wait_poll(&mut p, ms) {
            Ok(0) if ms == 0 => return Ok(false),
            Ok(0) => {}
            Ok(_) => return Ok(true),
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(errno(e)),
        }
    }
}

/// Sets or clears O_NONBLOCK on a descriptor the caller owns.
pub(crate) fn set_nonblocking(fd: RawFd, on: bool) -> Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let fl = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL).map_err(errno)?);
    let nf = if on { fl | OFlag::O_NONBLOCK } else { fl - OFlag::O_NONBLOCK };
    if nf != fl {
        fcntl(fd, FcntlArg::F_SETFL(nf)).map_err(errno)?;
    }
    Ok(())
}

fn ms(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

impl<M: Mode> CmId<M> {
    pub(crate) fn from_parts(id: capi::CmId, chan: Option<Arc<ChanInner>>) -> CmId<M> {
        let uid = id.uid();
        let inner = Arc::new(IdInner { id, cq_nb: NbMode::default(), chan: parking_lot::Mutex::new(chan.clone()) });
        if let Some(c) = chan {
            c.ids.lock().insert(uid, Arc::downgrade(&inner));
        }
        CmId { id: inner, mode: PhantomData }
    }

    /// What events name this id by.
    pub fn key(&self) -> IdKey {
        IdKey(self.id.uid())
    }

    /// Binds the id to a local address (`rdma_bind_addr`); port 0 picks one.
    pub fn bind_addr(&self, addr: SocketAddr) -> Result<()> {
        self.id.bind(&to_sockaddr(&addr)).map_err(errno)
    }

    /// Listens for connection requests (`rdma_listen`). `backlog` is how
    /// many requests the kernel holds for the id before they are taken
    /// (later ones are refused); 0, a negative value or one above the
    /// kernel's limit means that limit (the `net.rdma_ucm.max_backlog`
    /// sysctl, 1024 unless changed), not "no requests". The value goes to
    /// the kernel unchanged.
    pub fn listen(&self, backlog: i32) -> Result<()> {
        self.id.listen(backlog).map_err(errno)
    }

    /// Resolves the destination (and the source, if given) to RDMA addresses
    /// (`rdma_resolve_addr`): [`EventKind::AddrResolved`].
    pub fn resolve_addr(&self, src: Option<SocketAddr>, dst: SocketAddr, timeout: Duration) -> Result<()> {
        let s = src.map(|a| to_sockaddr(&a));
        self.id.resolve_addr_from(s.as_ref(), &to_sockaddr(&dst), ms(timeout)).map_err(errno)
    }

    /// Resolves the route to the destination (`rdma_resolve_route`):
    /// [`EventKind::RouteResolved`].
    pub fn resolve_route(&self, timeout: Duration) -> Result<()> {
        self.id.resolve_route(ms(timeout)).map_err(errno)
    }

    /// Connects (`rdma_connect`): [`EventKind::Established`]
    /// (a synchronous id returns once connected: see
    /// [`CmId::peer_private_data`]).
    pub fn connect(&self, param: &ConnParam) -> Result<()> {
        self.id.connect_with(Some(param)).map_err(errno)
    }

    /// Accepts a connection request on the request's id (`rdma_accept`).
    pub fn accept(&self, param: &ConnParam) -> Result<()> {
        self.id.accept_with(Some(param)).map_err(errno)
    }

    /// Rejects a connection request, with private data (`rdma_reject`).
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        self.id.reject_with(private_data).map_err(errno)
    }

    /// Disconnects (`rdma_disconnect`):
    /// [`EventKind::Disconnected`].
    pub fn disconnect(&self) -> Result<()> {
        self.id.disconnect().map_err(errno)
    }

    /// Joins the multicast group at `addr` (`rdma_join_multicast`):
    /// [`EventKind::MulticastJoin`].
    pub fn join_multicast(&self, addr: SocketAddr) -> Result<()> {
        self.id.join_multicast(&to_sockaddr(&addr)).map_err(errno)
    }

    /// Leaves a multicast group (`rdma_leave_multicast`).
    pub fn leave_multicast(&self, addr: SocketAddr) -> Result<()> {
        self.id.leave_multicast(&to_sockaddr(&addr)).map_err(errno)
    }

    /// The local address (after bind or resolution), if IPv4 or IPv6.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        from_storage(self.id.local_addr())
    }

    /// The peer's address, if IPv4 or IPv6.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        from_storage(self.id.peer_addr())
    }

    /// The device port the id is bound to (0 before it has a device).
    pub fn port_num(&self) -> u8 {
        self.id.port_num()
    }

    /// The port space.
    pub fn port_space(&self) -> PortSpace {
        match self.id.port_space() {
            RDMA_PS_UDP => PortSpace::Udp,
            RDMA_PS_IB => PortSpace::Ib,
            RDMA_PS_IPOIB => PortSpace::Ipoib,
            _ => PortSpace::Tcp,
        }
    }

    /// Sets `SO_REUSEADDR`-like reuse of the id's address
    /// (`RDMA_OPTION_ID_REUSEADDR`).
    pub fn set_reuseaddr(&self, on: bool) -> Result<()> {
        self.id.set_reuseaddr(on.into()).map_err(errno)
    }
}

impl CmId<Blocking> {
    /// A synchronous id with a private channel: each call waits for its
    /// own outcome.
    pub fn new(ps: PortSpace) -> Result<CmId<Blocking>> {
        Ok(CmId::from_parts(capi::CmId::create_sync(ps.raw()).map_err(errno)?, None))
    }

    /// The next connection request of a synchronous listening id
    /// (`rdma_get_request`): its id and parameters (with the private data).
    pub fn get_request(&self) -> Result<(CmId<Blocking>, ConnParam)> {
        let (id, p) = self.id.get_request().map_err(errno)?;
        Ok((CmId::from_parts(id, None), p))
    }

    /// The private data of the last answer a synchronous call waited for
    /// (the peer's accept after [`CmId::connect`]); empty when none.
    /// Padded by the transport as [`Event::private_data`] says.
    pub fn peer_private_data(&self) -> Vec<u8> {
        self.id.parked_private_data()
    }

    /// The remote end a synchronous UD id's [`CmId::connect`] resolved
    /// (its QP number, qkey and address: for
    /// [`AddressHandle::new`](crate::AddressHandle::new) and
    /// [`CmId::post_ud_send`]); `None` on other ids.
    pub fn peer_ud_param(&self) -> Option<UdParam> {
        // Only an answer carries them (see UdParam): the parked event of a
        // successful connect.
        let kind = self.id.parked_event()?;
        if !super::event::carries_ud_param(kind, 0) {
            return None;
        }
        self.id.parked_ud()
    }
}

impl CmId<OnChannel> {
    /// Moves the id to another channel (`rdma_migrate_id`); it then holds
    /// that channel open, and no longer this one once dropped.
    pub fn migrate(&self, to: &EventChannel) -> Result<()> {
        // The old channel is released once the id has left it (the lock
        // is not held across the migration, which may wait for acks).  On
        // the new channel's list first: its events may come at once.
        let uid = self.id.uid();
        to.inner.ids.lock().insert(uid, Arc::downgrade(&self.id));
        if let Err(e) = self.id.migrate(&to.inner.ch) {
            to.inner.ids.lock().remove(&uid);
            return Err(errno(e));
        }
        let old = self.id.chan.lock().replace(to.inner.clone());
        if let Some(old) = old {
            if !Arc::ptr_eq(&old, &to.inner) {
                old.ids.lock().remove(&uid);
            }
        }
        Ok(())
    }
}

/// One event of an [`EventChannel`]. It borrows the channel, and it is
/// acknowledged (`rdma_ack_cm_event`) when dropped.
///
/// An id is destroyed only once every event reported for it is
/// acknowledged. The event holds the id it is for (the listener, for a
/// connection request), so the id may be dropped first: it is then
/// destroyed when its last held event is dropped, and dropping it never
/// waits for an event of the same thread. (An id dropped on one thread
/// while another thread holds one of its events read before the id
/// started to go waits for that thread to drop it.)
///
/// A connection request's new id is owned by the event until
/// [`Event::take_request`] takes it; an untaken one is destroyed (the
/// request refused) when the event is dropped.
pub struct Event<'a> {
    ch: &'a EventChannel,
    raw: RawEvent,
    // Dropped after the acknowledgement (Drop::drop runs first): the id
    // the event is for, whose destruction waits for it.
    _for: Option<Arc<IdInner>>,
}

impl<'a> Event<'a> {
    pub(crate) fn new(ch: &'a EventChannel, raw: RawEvent) -> Event<'a> {
        let id = ch.inner.id(raw.id_uid);
        Event { ch, raw, _for: id }
    }

    /// The event's type.
    pub fn kind(&self) -> EventKind {
        EventKind::from_raw(self.raw.event)
    }

    /// The status: 0, a negative errno value, or for
    /// [`EventKind::Rejected`] the transport's reject reason.
    pub fn status(&self) -> i32 {
        self.raw.status
    }

    /// Which id the event is for (for a connection request: the listening
    /// id), to compare with [`CmId::key`].
    pub fn id_key(&self) -> IdKey {
        IdKey(self.raw.id_uid)
    }

    /// Whether the event is for `id` (see [`Event::id_key`]).
    pub fn is_for<M: Mode>(&self, id: &CmId<M>) -> bool {
        self.id_key() == id.key()
    }

    /// The private data the peer sent (empty when none), as the transport
    /// delivers it: InfiniBand and RoCE pad it with zeros to the CM
    /// message's fixed size (56 bytes in a request, 196 in a reply), so
    /// compare a prefix or carry a length in it.
    pub fn private_data(&self) -> &[u8] {
        if let Some(c) = &self.raw.conn {
            return &c.private_data;
        }
        match &self.raw.ud {
            Some((_, d)) => d,
            None => &[],
        }
    }

    /// The connection parameters of a connection event (connected ids).
    pub fn conn_param(&self) -> Option<ConnParam> {
        self.raw.conn.clone()
    }

    /// The UD parameters of an event of a UD id: `Some` for the answer to
    /// a UD connect ([`EventKind::Established`]: the server's QP number,
    /// qkey and route) and for a multicast join
    /// ([`EventKind::MulticastJoin`]: the group's), `None` for every other
    /// event, as the kernel fills them for these two only. A UD connection
    /// request carries just the requester's private data
    /// ([`Event::private_data`]): the server answers the requester's first
    /// datagram ([`UdParam::from_wc`]).
    pub fn ud_param(&self) -> Option<UdParam> {
        if !super::event::carries_ud_param(self.raw.event, self.raw.status) {
            return None;
        }
        self.raw.ud.as_ref().map(|(ud, _)| *ud)
    }

    /// Takes a connection request's new id (once; `None` for other
    /// events). The id reports to the same channel as its listener and
    /// keeps the channel open.
    pub fn take_request(&mut self) -> Option<CmId<OnChannel>> {
        let id = self.raw.request.take()?;
        Some(CmId::from_parts(id, Some(self.ch.inner.clone())))
    }

    /// The channel the event came from.
    pub fn channel(&self) -> &'a EventChannel {
        self.ch
    }
}

impl std::fmt::Debug for Event<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event").field("kind", &self.kind()).field("status", &self.status()).field("id", &self.id_key()).finish()
    }
}

impl Drop for Event<'_> {
    fn drop(&mut self) {
        capi::ack_event(self.raw.key);
        // An untaken request's id goes after the ack (its destroy waits
        // for nothing of this event, which counts on the listener).
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ownership rules the compiler enforces.
    #[test]
    fn ownership_is_in_the_types() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<EventChannel>();
        send_sync::<CmId>();
        send_sync::<CmId<OnChannel>>();
        // An event borrows its channel: it cannot be returned past the
        // channel (a compile-time rule; see the compile_fail doc test of
        // crate::api). Here: the signature says so.
        fn _borrows(ch: &EventChannel) -> Result<Event<'_>> {
            ch.get_event()
        }
    }

    #[test]
    fn nonblocking_toggles() {
        use nix::fcntl::{fcntl, FcntlArg, OFlag};
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let fl = |fd| OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL).unwrap());
        set_nonblocking(a.as_raw_fd(), true).unwrap();
        assert!(fl(a.as_raw_fd()).contains(OFlag::O_NONBLOCK));
        set_nonblocking(a.as_raw_fd(), false).unwrap();
        assert!(!fl(a.as_raw_fd()).contains(OFlag::O_NONBLOCK));
        assert_eq!(set_nonblocking(-1, true).unwrap_err().errno(), libc::EBADF);
    }

    /// A timed wait ends at its deadline (not before) with nothing to
    /// read, and at once when the descriptor is readable.
    #[test]
    fn timed_waits_end_at_the_deadline_or_on_data() {
        use std::io::Write;
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let t = Instant::now();
        assert!(!wait_readable(a.as_raw_fd(), Some(t + Duration::from_millis(30))).unwrap());
        assert!(t.elapsed() >= Duration::from_millis(30));
        assert!(!wait_readable(a.as_raw_fd(), Some(Instant::now())).unwrap(), "a past deadline: a look only");
        b.write_all(b"x").unwrap();
        assert!(wait_readable(a.as_raw_fd(), Some(Instant::now() + Duration::from_secs(60))).unwrap());
        assert!(wait_readable(a.as_raw_fd(), None).unwrap());
    }

    /// Timed waits keep the descriptor non-blocking whatever the caller
    /// asks later (its blocking calls then wait with poll).
    #[test]
    fn timed_waits_keep_the_descriptor_non_blocking() {
        use nix::fcntl::{fcntl, FcntlArg, OFlag};
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let nb = |fd| OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL).unwrap()).contains(OFlag::O_NONBLOCK);
        let m = NbMode::default();
        m.set_user(a.as_raw_fd(), true).unwrap();
        assert!(m.user() && nb(a.as_raw_fd()));
        m.set_user(a.as_raw_fd(), false).unwrap();
        assert!(!m.user() && !nb(a.as_raw_fd()));
        m.for_timed_waits(a.as_raw_fd()).unwrap();
        assert!(nb(a.as_raw_fd()));
        m.set_user(a.as_raw_fd(), false).unwrap();
        assert!(!m.user() && nb(a.as_raw_fd()), "still non-blocking underneath");
    }

    #[test]
    fn port_spaces_are_the_c_numbers() {
        assert_eq!(PortSpace::Tcp.raw(), 0x0106);
        assert_eq!(PortSpace::Udp.raw(), 0x0111);
        assert_eq!(PortSpace::Ib.raw(), 0x013F);
        assert_eq!(PortSpace::Ipoib.raw(), 0x0002);
    }
}
