// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! What events carry: [`EventKind`] (a Rust enum; an unknown kernel number
//! is a value, [`EventKind::Other`]), and which events carry UD
//! parameters. The parameters themselves ([`ConnParam`](crate::ConnParam),
//! [`UdParam`](crate::UdParam)) are the connection manager's own values
//! (`crate::cma::params`), re-exported as they are. The event itself, which
//! borrows its channel, is `id::Event`.

#![deny(unsafe_code)]

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
}
