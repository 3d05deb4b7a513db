// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! What events carry: [`EventKind`] (a Rust enum; an unknown kernel number
//! is a value, [`EventKind::Other`]), connection and UD parameters. The
//! event itself, which borrows its channel, is `id::Event`.

#![deny(unsafe_code)]

use crate::cma::api::RawUd;
use crate::cma::conn::ConnParamIn;

/// The type of a connection manager event (`enum rdma_cm_event_type`).
///
/// ```
/// use rdmacm::EventKind;
/// assert_eq!(EventKind::from_raw(9), EventKind::Established);
/// assert_eq!(EventKind::from_raw(4242), EventKind::Other(4242));
/// assert_eq!(EventKind::Other(4242).as_raw(), 4242);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// The address was resolved ([`CmId::resolve_addr`](crate::CmId::resolve_addr)).
    AddrResolved,
    /// Address resolution failed.
    AddrError,
    /// The route was resolved ([`CmId::resolve_route`](crate::CmId::resolve_route)).
    RouteResolved,
    /// Route resolution failed.
    RouteError,
    /// A connection request on a listening id: [`Event::take_request`](crate::Event::take_request)
    /// gives the new connection's id.
    ConnectRequest,
    /// The answer to a connect on an id without a QP.
    ConnectResponse,
    /// Connecting failed.
    ConnectError,
    /// The remote end is unreachable.
    Unreachable,
    /// The remote end rejected the connection ([`Event::status`](crate::Event::status): the reason).
    Rejected,
    /// The connection is established (UD ids: [`Event::ud_param`](crate::Event::ud_param)).
    Established,
    /// The connection was disconnected.
    Disconnected,
    /// The id's device was removed.
    DeviceRemoval,
    /// A multicast join completed ([`Event::ud_param`](crate::Event::ud_param): the group).
    MulticastJoin,
    /// A multicast join failed or the group went away.
    MulticastError,
    /// The id's address changed.
    AddrChange,
    /// The connection's time-wait state ended: its QP may be reused.
    TimewaitExit,
    /// An address translation of the id completed.
    AddrinfoResolved,
    /// An address translation of the id failed.
    AddrinfoError,
    /// A user event (`rdma_write_cm_event`'s).
    User,
    /// An event number this library does not know (newer kernels).
    Other(u32),
}

const KINDS: [EventKind; 19] = [
    EventKind::AddrResolved,
    EventKind::AddrError,
    EventKind::RouteResolved,
    EventKind::RouteError,
    EventKind::ConnectRequest,
    EventKind::ConnectResponse,
    EventKind::ConnectError,
    EventKind::Unreachable,
    EventKind::Rejected,
    EventKind::Established,
    EventKind::Disconnected,
    EventKind::DeviceRemoval,
    EventKind::MulticastJoin,
    EventKind::MulticastError,
    EventKind::AddrChange,
    EventKind::TimewaitExit,
    EventKind::AddrinfoResolved,
    EventKind::AddrinfoError,
    EventKind::User,
];

impl EventKind {
    /// The kind of a raw `RDMA_CM_EVENT_*` number; never fails.
    pub fn from_raw(n: u32) -> EventKind {
        KINDS.get(n as usize).copied().unwrap_or(EventKind::Other(n))
    }

    /// The raw `RDMA_CM_EVENT_*` number.
    pub fn as_raw(self) -> u32 {
        match self {
            EventKind::Other(n) => n,
            k => KINDS.iter().position(|x| *x == k).unwrap_or(0) as u32,
        }
    }

    /// The C library's name for it (`rdma_event_str`), e.g.
    /// `"RDMA_CM_EVENT_ESTABLISHED"`.
    pub fn name(self) -> &'static str {
        crate::cma::events::event_name(self.as_raw()).to_str().unwrap_or("UNKNOWN EVENT")
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Connection parameters (`struct rdma_conn_param`) with owned private
/// data, for [`CmId::connect`](crate::CmId::connect) and [`CmId::accept`](crate::CmId::accept), and as a connection
/// event reports them.
///
/// ```
/// let p = rdmacm::ConnParam { private_data: b"hello".to_vec(), ..Default::default() };
/// assert_eq!(p.responder_resources, rdmacm::ConnParam::DEVICE_MAX);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnParam {
    /// Private data (at most 56 bytes for a connect on InfiniBand, 196 for
    /// an accept; longer is `EINVAL`).
    pub private_data: Vec<u8>,
    /// Outstanding RDMA reads and atomics the local end accepts;
    /// [`ConnParam::DEVICE_MAX`]: what the device and the peer allow.
    pub responder_resources: u8,
    /// Outstanding RDMA reads and atomics the local end issues;
    /// [`ConnParam::DEVICE_MAX`]: as above.
    pub initiator_depth: u8,
    /// Hardware flow control (1) or not (0).
    pub flow_control: u8,
    /// Retries on a transport error (0-7).
    pub retry_count: u8,
    /// Retries on an RNR NAK (0-7, 7: forever).
    pub rnr_retry_count: u8,
    /// Whether the QP uses a shared receive queue (0 or 1).
    pub srq: u8,
    /// The QP number when the id has no QP (0: the id's QP).
    pub qp_num: u32,
}

impl ConnParam {
    /// For `responder_resources` and `initiator_depth`: the device's and the
    /// peer's limit.
    pub const DEVICE_MAX: u8 = u8::MAX;

    pub(crate) fn to_inner(&self) -> ConnParamIn {
        let c = crate::abi::cma::rdma_conn_param {
            private_data: std::ptr::null(),
            private_data_len: 0,
            responder_resources: self.responder_resources,
            initiator_depth: self.initiator_depth,
            flow_control: self.flow_control,
            retry_count: self.retry_count,
            rnr_retry_count: self.rnr_retry_count,
            srq: self.srq,
            qp_num: self.qp_num,
        };
        ConnParamIn::from_c(&c, self.private_data.clone())
    }

    pub(crate) fn from_inner(c: &ConnParamIn) -> ConnParam {
        ConnParam {
            private_data: c.private_data.clone(),
            responder_resources: c.responder_resources,
            initiator_depth: c.initiator_depth,
            flow_control: c.flow_control,
            retry_count: c.retry_count,
            rnr_retry_count: c.rnr_retry_count,
            srq: c.srq,
            qp_num: c.qp_num,
        }
    }
}

impl Default for ConnParam {
    /// No private data, resources up to the device's limit, 7 retries of
    /// each kind, flow control on.
    fn default() -> ConnParam {
        ConnParam {
            private_data: Vec::new(),
            responder_resources: ConnParam::DEVICE_MAX,
            initiator_depth: ConnParam::DEVICE_MAX,
            flow_control: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            srq: 0,
            qp_num: 0,
        }
    }
}

/// The remote end of a UD exchange (`struct rdma_ud_param`'s address, QP
/// number and qkey): what [`AddressHandle::new`](crate::AddressHandle::new)
/// and [`CmId::post_ud_send`](crate::CmId::post_ud_send) need to send to
/// it.
///
/// Where one comes from:
/// * the client side of a UD exchange: the [`EventKind::Established`]
///   event of its connect ([`Event::ud_param`](crate::Event::ud_param), or
///   [`CmId::peer_ud_param`](crate::CmId::peer_ud_param) on a synchronous
///   id), which carries the server's QP number, qkey and the route to it;
/// * a multicast group: the [`EventKind::MulticastJoin`] event (QP number
///   0xffffff, the group's qkey and address);
/// * the server side: a UD connection request carries no address, QP
///   number or qkey of the requester (only its private data), so the
///   server learns them from the first datagram it receives:
///   [`UdParam::from_wc`] with the receive's completion and the first
///   [`GRH_LEN`](crate::GRH_LEN) bytes of its buffer.
#[derive(Clone, Copy)]
pub struct UdParam {
    pub(crate) raw: RawUd,
}

impl UdParam {
    /// The remote QP number.
    pub fn qp_num(&self) -> u32 {
        self.raw.qp_num
    }

    /// The remote QP's key.
    pub fn qkey(&self) -> u32 {
        self.raw.qkey
    }

    /// The destination LID (0 when routed by GID, as on RoCE).
    pub fn dlid(&self) -> u16 {
        self.raw.ah_attr.dlid
    }

    /// The service level.
    pub fn sl(&self) -> u8 {
        self.raw.ah_attr.sl
    }

    /// The source path bits.
    pub fn src_path_bits(&self) -> u8 {
        self.raw.ah_attr.src_path_bits
    }

    /// Whether the address carries a global route header (always on RoCE):
    /// then [`UdParam::dgid`], [`UdParam::sgid_index`],
    /// [`UdParam::hop_limit`], [`UdParam::traffic_class`] and
    /// [`UdParam::flow_label`] are the route's.
    pub fn is_global(&self) -> bool {
        self.raw.ah_attr.is_global != 0
    }

    /// The index of the local GID the datagrams leave from.
    pub fn sgid_index(&self) -> u8 {
        self.raw.ah_attr.grh.sgid_index
    }

    /// The route's hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.raw.ah_attr.grh.hop_limit
    }

    /// The route's traffic class.
    pub fn traffic_class(&self) -> u8 {
        self.raw.ah_attr.grh.traffic_class
    }

    /// The route's flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.raw.ah_attr.grh.flow_label
    }

    /// The local port.
    pub fn port_num(&self) -> u8 {
        self.raw.ah_attr.port_num
    }
}

impl std::fmt::Debug for UdParam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("UdParam");
        d.field("qp_num", &self.qp_num()).field("qkey", &self.qkey()).field("dlid", &self.dlid()).field("sl", &self.sl());
        if self.is_global() {
            d.field("dgid", &std::net::Ipv6Addr::from(self.dgid())).field("sgid_index", &self.sgid_index());
        }
        d.field("port_num", &self.port_num()).finish()
    }
}

/// Whether an event of a UD id carries UD parameters: the kernel fills
/// them for a UD connect's answer ([`EventKind::Established`]) and a
/// multicast join ([`EventKind::MulticastJoin`]) and leaves them zero in
/// every other event (a UD connection request, address and route
/// resolution, errors), as it does for a failed one.
pub(crate) fn carries_ud_param(kind: u32, status: i32) -> bool {
    status == 0 && matches!(EventKind::from_raw(kind), EventKind::Established | EventKind::MulticastJoin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::cma as c;

    #[test]
    fn every_known_number_round_trips() {
        for n in 0..=c::RDMA_CM_EVENT_USER {
            let k = EventKind::from_raw(n);
            assert!(!matches!(k, EventKind::Other(_)), "{n} is known");
            assert_eq!(k.as_raw(), n);
        }
        assert_eq!(EventKind::from_raw(c::RDMA_CM_EVENT_ESTABLISHED), EventKind::Established);
        assert_eq!(EventKind::from_raw(c::RDMA_CM_EVENT_CONNECT_REQUEST), EventKind::ConnectRequest);
        assert_eq!(EventKind::from_raw(c::RDMA_CM_EVENT_TIMEWAIT_EXIT), EventKind::TimewaitExit);
        assert_eq!(EventKind::Established.name(), "RDMA_CM_EVENT_ESTABLISHED");
    }

    #[test]
    fn unknown_numbers_are_values() {
        // The library's internal event and anything newer than it.
        for n in [c::RDMA_CM_EVENT_INTERNAL, 20, 255, u32::MAX] {
            assert_eq!(EventKind::from_raw(n), EventKind::Other(n));
            assert_eq!(EventKind::from_raw(n).as_raw(), n);
            let _ = EventKind::from_raw(n).to_string();
        }
    }

    #[test]
    fn only_answers_and_joins_carry_ud_params() {
        assert!(carries_ud_param(c::RDMA_CM_EVENT_ESTABLISHED, 0));
        assert!(carries_ud_param(c::RDMA_CM_EVENT_MULTICAST_JOIN, 0));
        for k in [c::RDMA_CM_EVENT_CONNECT_REQUEST, c::RDMA_CM_EVENT_ADDR_RESOLVED, c::RDMA_CM_EVENT_ROUTE_RESOLVED, c::RDMA_CM_EVENT_UNREACHABLE, c::RDMA_CM_EVENT_MULTICAST_ERROR, 4242] {
            assert!(!carries_ud_param(k, 0), "{k}");
        }
        assert!(!carries_ud_param(c::RDMA_CM_EVENT_ESTABLISHED, -110));
        assert!(!carries_ud_param(c::RDMA_CM_EVENT_MULTICAST_JOIN, -22));
    }

    #[test]
    fn conn_param_passes_through() {
        let p = ConnParam { private_data: vec![1, 2, 3], responder_resources: 1, initiator_depth: 2, flow_control: 0, retry_count: 3, rnr_retry_count: 4, srq: 1, qp_num: 77 };
        assert_eq!(ConnParam::from_inner(&p.to_inner()), p);
    }
}
