// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! `std::net::SocketAddr` to and from the library's socket addresses.

#![deny(unsafe_code)]

use crate::abi::cma::rdma_sockaddr;
use crate::abi::sockaddr::SockAddr;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// The C bytes of `a` (`struct sockaddr_in` / `sockaddr_in6`).
pub(crate) fn to_sockaddr(a: &SocketAddr) -> SockAddr {
    match a {
        SocketAddr::V4(v) => SockAddr::from_in(&libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v.port().to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v.ip().octets()) },
            sin_zero: [0; 8],
        }),
        SocketAddr::V6(v) => SockAddr::from_in6(&libc::sockaddr_in6 {
            sin6_family: libc::AF_INET6 as libc::sa_family_t,
            sin6_port: v.port().to_be(),
            sin6_flowinfo: v.flowinfo().to_be(),
            sin6_addr: libc::in6_addr { s6_addr: v.ip().octets() },
            sin6_scope_id: v.scope_id(),
        }),
    }
}

/// An IPv4 or IPv6 socket address; `None` for other families (AF_IB) and
/// for an empty address.
pub(crate) fn from_sockaddr(a: &SockAddr) -> Option<SocketAddr> {
    if let Some(s) = a.as_v4() {
        let ip = Ipv4Addr::from(s.sin_addr.s_addr.to_ne_bytes());
        return Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(s.sin_port))));
    }
    if let Some(s) = a.as_v6() {
        let ip = Ipv6Addr::from(s.sin6_addr.s6_addr);
        return Some(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(s.sin6_port), u32::from_be(s.sin6_flowinfo), s.sin6_scope_id)));
    }
    None
}

/// As [`from_sockaddr`], from a `sockaddr_storage`.
pub(crate) fn from_storage(s: libc::sockaddr_storage) -> Option<SocketAddr> {
    from_sockaddr(&SockAddr::from_storage(&rdma_sockaddr { storage: s }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in ["192.0.2.7:4711", "[fe80::1%3]:18515", "[2001:db8::5]:1", "0.0.0.0:0"] {
            let a: SocketAddr = s.parse().unwrap();
            let c = to_sockaddr(&a);
            assert_eq!(from_sockaddr(&c), Some(a), "{s}");
        }
        let c = to_sockaddr(&"10.1.2.3:80".parse().unwrap());
        assert_eq!(c.as_bytes()[..4], [libc::AF_INET as u8, 0, 0, 80]);
        assert_eq!(c.as_bytes()[4..8], [10, 1, 2, 3]);
        assert_eq!(from_sockaddr(&SockAddr::EMPTY), None);
    }
}
