// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Event channels and ids, with their ownership rules.
//!
//! * An [`EventChannel`] is open while it or any [`CmId`] made on it lives:
//!   every id holds its channel (the choice of "holds it alive" over a
//!   lifetime parameter, so that ids can be stored and moved freely).
//! * An [`Event`] borrows its channel and is acknowledged when dropped.
//! * A connection request's id is owned ([`Event::take_request`]).

#![deny(unsafe_code)]

use super::addr::{from_storage, to_sockaddr};
use super::error::Result;
use super::event::{ConnParam, EventKind, UdParam};
use crate::cma::api::RawEvent;
use crate::abi::cma::{RDMA_PS_IB, RDMA_PS_IPOIB, RDMA_PS_TCP, RDMA_PS_UDP};
use crate::cma::api as capi;
use crate::cma::Channel;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

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
    pub(crate) ch: Arc<Channel>,
}

impl Drop for ChanInner {
    fn drop(&mut self) {
        capi::destroy_channel(&self.ch);
    }
}

/// An event channel (`struct rdma_event_channel`): the events of the ids
/// made on it, read with [`EventChannel::get_event`]. Its descriptor
/// ([`AsRawFd`]) may be polled.
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
        let ch = capi::create_channel()?;
        Ok(EventChannel { inner: Arc::new(ChanInner { ch }) })
    }

    /// A new id reporting to this channel (`rdma_create_id`). Its calls
    /// return once issued; their outcome comes as an event.
    pub fn create_id(&self, ps: PortSpace) -> Result<CmId> {
        let id = capi::CmId::create_on(&self.inner.ch, ps.raw())?;
        Ok(CmId::from_parts(id, Some(self.inner.clone())))
    }

    /// The next event (`rdma_get_cm_event`): blocks until one comes, or
    /// fails with `EAGAIN` at once when the channel is non-blocking
    /// ([`EventChannel::set_nonblocking`]) and none is queued.
    pub fn get_event(&self) -> Result<Event<'_>> {
        let raw = capi::get_event(&self.inner.ch)?;
        Ok(Event::new(self, raw))
    }

    /// Makes [`EventChannel::get_event`] non-blocking (or blocking again).
    pub fn set_nonblocking(&self, on: bool) -> Result<()> {
        set_nonblocking(self.as_raw_fd(), on)
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
/// An id is either **asynchronous**, made by [`EventChannel::create_id`]
/// (every call returns once issued; the outcome is an event of the
/// channel), or **synchronous**, made by [`CmId::new`] (a private channel;
/// every call waits for its own outcome).
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
pub struct CmId {
    pub(crate) id: Arc<IdInner>,
}

/// An id and the channel it holds open. Memory regions and address
/// handles hold it too (their PD is the id's device's), so the id, and
/// then its channel, go when the last of them goes.
pub(crate) struct IdInner {
    id: capi::CmId,
    // After `id`: the id is destroyed before its channel may close.
    chan: parking_lot::Mutex<Option<Arc<ChanInner>>>,
}

impl std::ops::Deref for IdInner {
    type Target = capi::CmId;
    fn deref(&self) -> &capi::CmId {
        &self.id
    }
}

impl std::fmt::Debug for CmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmId").field("key", &self.key()).field("local", &self.local_addr()).field("peer", &self.peer_addr()).finish()
    }
}

/// Sets or clears O_NONBLOCK on a descriptor the caller owns.
pub(crate) fn set_nonblocking(fd: RawFd, on: bool) -> Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let fl = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    let nf = if on { fl | OFlag::O_NONBLOCK } else { fl - OFlag::O_NONBLOCK };
    if nf != fl {
        fcntl(fd, FcntlArg::F_SETFL(nf))?;
    }
    Ok(())
}

fn ms(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

impl CmId {
    pub(crate) fn from_parts(id: capi::CmId, chan: Option<Arc<ChanInner>>) -> CmId {
        CmId { id: Arc::new(IdInner { id, chan: parking_lot::Mutex::new(chan) }) }
    }

    /// A synchronous id with a private channel: each call waits for its
    /// own outcome.
    pub fn new(ps: PortSpace) -> Result<CmId> {
        let id = match ps {
            PortSpace::Tcp => capi::CmId::create_tcp()?,
            PortSpace::Udp => capi::CmId::create_udp()?,
            other => {
                // Only TCP and UDP have a synchronous constructor below; the
                // others go through a channel of their own, left to the id.
                let ch = EventChannel::new()?;
                let id = capi::CmId::create_on(&ch.inner.ch, other.raw())?;
                return Ok(CmId::from_parts(id, Some(ch.inner)));
            }
        };
        Ok(CmId::from_parts(id, None))
    }

    /// What events name this id by.
    pub fn key(&self) -> IdKey {
        IdKey(self.id.uid())
    }

    /// Binds the id to a local address (`rdma_bind_addr`); port 0 picks one.
    pub fn bind_addr(&self, addr: SocketAddr) -> Result<()> {
        Ok(self.id.bind(to_sockaddr(&addr).as_bytes())?)
    }

    /// Listens for connection requests (`rdma_listen`).
    pub fn listen(&self, backlog: i32) -> Result<()> {
        Ok(self.id.listen(backlog)?)
    }

    /// Resolves the destination (and the source, if given) to RDMA addresses
    /// (`rdma_resolve_addr`): [`EventKind::AddrResolved`](crate::EventKind::AddrResolved).
    pub fn resolve_addr(&self, src: Option<SocketAddr>, dst: SocketAddr, timeout: Duration) -> Result<()> {
        let s = src.map(|a| to_sockaddr(&a));
        Ok(self.id.resolve_addr_from(s.as_ref().map(|a| a.as_bytes()), to_sockaddr(&dst).as_bytes(), ms(timeout))?)
    }

    /// Resolves the route to the destination (`rdma_resolve_route`):
    /// [`EventKind::RouteResolved`](crate::EventKind::RouteResolved).
    pub fn resolve_route(&self, timeout: Duration) -> Result<()> {
        Ok(self.id.resolve_route(ms(timeout))?)
    }

    /// Connects (`rdma_connect`): [`EventKind::Established`](crate::EventKind::Established)
    /// (a synchronous id returns once connected: see
    /// [`CmId::peer_private_data`]).
    pub fn connect(&self, param: &ConnParam) -> Result<()> {
        Ok(self.id.connect_with(Some(&param.to_inner()))?)
    }

    /// Accepts a connection request on the request's id (`rdma_accept`).
    pub fn accept(&self, param: &ConnParam) -> Result<()> {
        Ok(self.id.accept_with(Some(&param.to_inner()))?)
    }

    /// Rejects a connection request, with private data (`rdma_reject`).
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        Ok(self.id.reject_with(private_data)?)
    }

    /// Disconnects (`rdma_disconnect`):
    /// [`EventKind::Disconnected`](crate::EventKind::Disconnected).
    pub fn disconnect(&self) -> Result<()> {
        Ok(self.id.disconnect()?)
    }

    /// The next connection request of a synchronous listening id
    /// (`rdma_get_request`): its id and parameters (with the private data).
    pub fn get_request(&self) -> Result<(CmId, ConnParam)> {
        let (id, p) = self.id.get_request()?;
        Ok((CmId::from_parts(id, None), ConnParam::from_inner(&p)))
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
        self.id.parked_ud().map(|raw| UdParam { raw })
    }

    /// Joins the multicast group at `addr` (`rdma_join_multicast`):
    /// [`EventKind::MulticastJoin`](crate::EventKind::MulticastJoin).
    pub fn join_multicast(&self, addr: SocketAddr) -> Result<()> {
        Ok(self.id.join_multicast(to_sockaddr(&addr).as_bytes())?)
    }

    /// Leaves a multicast group (`rdma_leave_multicast`).
    pub fn leave_multicast(&self, addr: SocketAddr) -> Result<()> {
        Ok(self.id.leave_multicast(to_sockaddr(&addr).as_bytes())?)
    }

    /// Moves the id to another channel (`rdma_migrate_id`); it then holds
    /// that channel open, and no longer this one once dropped.
    pub fn migrate(&self, to: &EventChannel) -> Result<()> {
        // The old channel is released once the id has left it (the lock
        // is not held across the migration, which may wait for acks).
        self.id.migrate(&to.inner.ch)?;
        *self.id.chan.lock() = Some(to.inner.clone());
        Ok(())
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
        Ok(self.id.set_reuseaddr(on.into())?)
    }
}

/// One event of an [`EventChannel`]. It borrows the channel, and it is
/// acknowledged (`rdma_ack_cm_event`) when dropped. Dropping an id waits
/// until every event reported for it is acknowledged: drop the event
/// before the id it is for.
///
/// A connection request's new id is owned by the event until
/// [`Event::take_request`] takes it; an untaken one is destroyed (the
/// request refused) when the event is dropped.
pub struct Event<'a> {
    ch: &'a EventChannel,
    raw: RawEvent,
}

impl<'a> Event<'a> {
    pub(crate) fn new(ch: &'a EventChannel, raw: RawEvent) -> Event<'a> {
        Event { ch, raw }
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
    pub fn is_for(&self, id: &CmId) -> bool {
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
        self.raw.conn.as_ref().map(ConnParam::from_inner)
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
        self.raw.ud.as_ref().map(|(raw, _)| UdParam { raw: *raw })
    }

    /// Takes a connection request's new id (once; `None` for other
    /// events). The id reports to the same channel as its listener and
    /// keeps the channel open.
    pub fn take_request(&mut self) -> Option<CmId> {
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

    #[test]
    fn port_spaces_are_the_c_numbers() {
        assert_eq!(PortSpace::Tcp.raw(), 0x0106);
        assert_eq!(PortSpace::Udp.raw(), 0x0111);
        assert_eq!(PortSpace::Ib.raw(), 0x013F);
        assert_eq!(PortSpace::Ipoib.raw(), 0x0002);
    }
}
