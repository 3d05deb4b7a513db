// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! `rdma_getaddrinfo` returning owned values.

#![deny(unsafe_code)]

use super::addr::from_sockaddr;
use super::error::{errno, Error, Result};
use super::id::PortSpace;
use crate::abi::cma::{IBV_QPT_RC, IBV_QPT_UD, RAI_FAMILY, RAI_NOROUTE, RAI_NUMERICHOST, RAI_PASSIVE};
use crate::addrinfo::{self as ai, GaiError, Hints, Rai};
use std::ffi::CString;
use std::net::SocketAddr;

/// What [`getaddrinfo`] looks for (`struct rdma_addrinfo` as hints).
///
/// ```
/// let h = rdmacm::AddrInfoHints { passive: true, numeric_host: true, ..Default::default() };
/// assert_eq!(h.port_space, None);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddrInfoHints {
    /// Addresses to listen on (`RAI_PASSIVE`): no node means any address.
    pub passive: bool,
    /// The node is a numeric address; no name lookup (`RAI_NUMERICHOST`).
    pub numeric_host: bool,
    /// No route lookup (`RAI_NOROUTE`).
    pub no_route: bool,
    /// Only this address family (`libc::AF_INET`, `AF_INET6`, `AF_IB`; 0:
    /// any).
    pub family: i32,
    /// The port space (and so the QP type: RC for TCP, UD for UDP);
    /// `None`: TCP.
    pub port_space: Option<PortSpace>,
}

/// One answer of [`getaddrinfo`] (a node of `struct rdma_addrinfo`), owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddrInfo {
    /// `RAI_*` flags.
    pub flags: i32,
    /// The address family.
    pub family: i32,
    /// The QP type (`IBV_QPT_*`).
    pub qp_type: i32,
    /// The port space (`RDMA_PS_*`).
    pub port_space: i32,
    /// The source address, if IPv4 or IPv6.
    pub src: Option<SocketAddr>,
    /// The destination address, if IPv4 or IPv6.
    pub dst: Option<SocketAddr>,
    /// The source's canonical name.
    pub src_canonname: Option<String>,
    /// The destination's canonical name.
    pub dst_canonname: Option<String>,
    /// Route data (path records) from ibacm, if any.
    pub route: Option<Vec<u8>>,
    /// Connect data (the AF_IB private-data header), if any.
    pub connect: Option<Vec<u8>>,
}

impl AddrInfo {
    fn from_rai(r: Rai) -> AddrInfo {
        let name = |c: Option<CString>| c.map(|c| c.to_string_lossy().into_owned());
        AddrInfo {
            flags: r.flags,
            family: r.family,
            qp_type: r.qp_type,
            port_space: r.port_space,
            src: r.src.as_ref().and_then(from_sockaddr),
            dst: r.dst.as_ref().and_then(from_sockaddr),
            src_canonname: name(r.src_canonname),
            dst_canonname: name(r.dst_canonname),
            route: r.route,
            connect: r.connect,
        }
    }
}

/// Translates a node and service into RDMA addresses (`rdma_getaddrinfo`).
/// A name that is not found is an [`Error`] with
/// [`Error::gai_code`] set.
///
/// ```no_run
/// let hints = rdmacm::AddrInfoHints { passive: true, numeric_host: true, ..Default::default() };
/// let list = rdmacm::getaddrinfo(Some("127.0.0.1"), Some("7471"), &hints)?;
/// assert_eq!(list[0].src, Some("127.0.0.1:7471".parse().unwrap()));
/// # Ok::<(), rdmacm::Error>(())
/// ```
pub fn getaddrinfo(node: Option<&str>, service: Option<&str>, hints: &AddrInfoHints) -> Result<Vec<AddrInfo>> {
    let inval = || Error::from_errno(libc::EINVAL);
    let node = node.map(CString::new).transpose().map_err(|_| inval())?;
    let service = service.map(CString::new).transpose().map_err(|_| inval())?;
    let mut flags = 0;
    for (on, bit) in [(hints.passive, RAI_PASSIVE), (hints.numeric_host, RAI_NUMERICHOST), (hints.no_route, RAI_NOROUTE)] {
        if on {
            flags |= bit;
        }
    }
    if hints.family != 0 {
        flags |= RAI_FAMILY;
    }
    let ps = hints.port_space.unwrap_or(PortSpace::Tcp);
    let qp_type = if ps == PortSpace::Udp { IBV_QPT_UD } else { IBV_QPT_RC };
    let h = Hints { flags, family: hints.family, qp_type: qp_type as i32, port_space: ps.raw() as i32, ..Default::default() };
    let r = crate::sys::cancel::nocancel(|| ai::getaddrinfo(node.as_deref(), service.as_deref(), &h, &crate::cma::ai::CmaBackend));
    match r {
        Ok(list) => Ok(list.into_iter().map(AddrInfo::from_rai).collect()),
        Err(GaiError::Sys(e)) => Err(errno(e)),
        Err(GaiError::Eai(code)) => Err(Error::from_gai(code)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_passive_lookup_is_owned() {
        let h = AddrInfoHints { passive: true, numeric_host: true, ..Default::default() };
        let list = getaddrinfo(Some("192.0.2.7"), Some("7471"), &h).unwrap();
        assert_eq!(list.len(), 1);
        let a = &list[0];
        assert_eq!(a.src, Some("192.0.2.7:7471".parse().unwrap()));
        assert_eq!(a.dst, None);
        assert_eq!(a.family, libc::AF_INET);
        assert_eq!(a.port_space, crate::abi::cma::RDMA_PS_TCP as i32);
        assert_eq!(a.qp_type, IBV_QPT_RC as i32);
        assert_eq!(a.flags & RAI_PASSIVE, RAI_PASSIVE);
    }

    #[test]
    fn udp_port_space_asks_for_ud() {
        let h = AddrInfoHints { passive: true, numeric_host: true, port_space: Some(PortSpace::Udp), ..Default::default() };
        let list = getaddrinfo(Some("::1"), Some("18515"), &h).unwrap();
        assert_eq!(list[0].src, Some("[::1]:18515".parse().unwrap()));
        assert_eq!(list[0].qp_type, IBV_QPT_UD as i32);
        assert_eq!(list[0].port_space, crate::abi::cma::RDMA_PS_UDP as i32);
    }

    #[test]
    fn failures_are_errors() {
        // Not numeric under RAI_NUMERICHOST: libc's EAI_NONAME, carried as such.
        let h = AddrInfoHints { numeric_host: true, ..Default::default() };
        let e = getaddrinfo(Some("not-a-number"), None, &h).unwrap_err();
        assert_eq!(e.gai_code(), Some(libc::EAI_NONAME));
        // An interior NUL cannot reach C.
        assert_eq!(getaddrinfo(Some("a\0b"), None, &h).unwrap_err().errno(), libc::EINVAL);
    }
}
