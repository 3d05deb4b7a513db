// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! `rdma_getaddrinfo` returning owned values.

#![deny(unsafe_code)]

use super::addr::from_sockaddr;
use super::error::{Error, Result};
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
        Err(GaiError::Sys(e)) => Err(e.into()),
        Err(GaiError::Eai(code)) => Err(Error::from_gai(code)),
    }
}
