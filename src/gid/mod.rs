// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! `ibv_gid_reachable`: can a GID be reached from a local port?
//!
//! The Solaris call asks the subnet administrator for a path record.  On
//! Linux we let the kernel's connection manager answer the same question,
//! per link layer:
//!
//! * **InfiniBand**: an `RDMA_PS_IB` identifier resolves from the port's
//!   GID to the target GID (AF_IB, pkey 0xffff), then resolves the route,
//!   which is the SA PathRecord query.
//! * **RoCE and iWARP** (no SA): the GID encodes an IP address (IPv4-mapped
//!   or IPv6).  The kernel's address resolution (route lookup plus ARP/ND)
//!   must succeed *and* lead out of this very device and port.  Link-local
//!   GIDs (fe80::/10) take the scope of the port's network device.
//!
//! Errors follow the Solaris manual page: `EINVAL` for bad arguments,
//! `ENXIO` when no path exists, `EIO` for an I/O failure or an SA that did
//! not answer, `ENOMEM`, `EINTR`; and, ours, `ENETDOWN` when the port (or,
//! with port 0, every port) is not ACTIVE.

#![deny(unsafe_code)]

use crate::abi::sockaddr::SockAddr;
use nix::errno::Errno;

/// Resolution time when the caller passes 0 ("reserved" on Solaris).
pub const DEFAULT_TIMEOUT_MS: i32 = 2000;

/// `IBV_PORT_ACTIVE`.
pub const PORT_ACTIVE: u32 = 4;
/// `IBV_LINK_LAYER_INFINIBAND`.
pub const LINK_LAYER_IB: u8 = 1;

/// What the check needs to know about one port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortInfo {
    pub state: u32,
    pub link_layer: u8,
}

/// Where an IP address resolved to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Node GUID of the device the kernel picked.
    pub node_guid: u64,
    pub port: u8,
}

/// The outside world of the check: the device's ports and the kernel's
/// resolution.  Implemented over libibverbs and the CM for real, and by a
/// mock in the unit tests.
pub trait GidEnv {
    fn port_count(&self) -> Result<u8, Errno>;
    fn port_info(&self, port: u8) -> Result<PortInfo, Errno>;
    fn node_guid(&self) -> u64;
    /// Interface index of the port's network device (RoCE GID index 0), 0
    /// if unknown.
    fn ifindex(&self, port: u8) -> u32;
    /// Kernel address resolution for an IP destination; Err carries the
    /// errno of the failed resolution.
    fn resolve_ip(&self, dst: &SockAddr, timeout_ms: i32) -> Result<Resolved, Errno>;
    /// AF_IB address plus route (SA PathRecord) resolution from the port.
    fn resolve_ib_path(&self, port: u8, dgid: &[u8; 16], timeout_ms: i32) -> Result<(), Errno>;
}

/// The IP address a RoCE/iWARP GID stands for (IPv4-mapped GIDs become
/// AF_INET); link-local IPv6 takes `scope`.
pub fn gid_to_sockaddr(gid: &[u8; 16], scope: u32) -> SockAddr {
    if gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff {
        return SockAddr::v4(u32::from_ne_bytes([gid[12], gid[13], gid[14], gid[15]]));
    }
    let link_local = gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80;
    SockAddr::v6(*gid, if link_local { scope } else { 0 })
}

/// Maps a failed IP resolution to the documented errno set.
fn ip_failure(e: Errno) -> Errno {
    match e {
        Errno::ENOMEM => Errno::ENOMEM,
        Errno::EINTR => Errno::EINTR,
        Errno::EIO => Errno::EIO,
        // Timeouts (no neighbour answered), unreachable hosts or networks,
        // no route, no device behind the route: no path.
        _ => Errno::ENXIO,
    }
}

/// Maps a failed InfiniBand path query to the documented errno set.
fn ib_failure(e: Errno) -> Errno {
    match e {
        // The SA answered with an error status: no such path.
        Errno::EINVAL | Errno::ENXIO | Errno::EHOSTUNREACH | Errno::ENETUNREACH => Errno::ENXIO,
        Errno::ENOMEM => Errno::ENOMEM,
        Errno::EINTR => Errno::EINTR,
        // No answer, or a send failure.
        _ => Errno::EIO,
    }
}

fn check_port(env: &impl GidEnv, port: u8, gid: &[u8; 16], timeout_ms: i32) -> Result<(), Errno> {
    let info = env.port_info(port).map_err(|_| Errno::EIO)?;
    if info.state != PORT_ACTIVE {
        log::debug!(target: "rdmacm", "ibv_gid_reachable: port {port} is not ACTIVE (state {})", info.state);
        return Err(Errno::ENETDOWN);
    }
    if info.link_layer == LINK_LAYER_IB {
        return env.resolve_ib_path(port, gid, timeout_ms).map_err(|e| {
            log::debug!(target: "rdmacm", "ibv_gid_reachable: path query from port {port} failed: {e}");
            ib_failure(e)
        });
    }
    let dst = gid_to_sockaddr(gid, env.ifindex(port));
    match env.resolve_ip(&dst, timeout_ms) {
        Ok(r) if r.node_guid == env.node_guid() && r.port == port => Ok(()),
        Ok(r) => {
            log::debug!(target: "rdmacm",
                "ibv_gid_reachable: the kernel routes that address through another device/port (guid {:#x} port {})",
                u64::from_be(r.node_guid), r.port);
            Err(Errno::ENXIO)
        }
        Err(e) => {
            log::debug!(target: "rdmacm", "ibv_gid_reachable: address resolution failed: {e}");
            Err(ip_failure(e))
        }
    }
}

/// The whole check, given the caller's arguments (already NULL-checked).
pub fn gid_reachable(env: &impl GidEnv, port: u32, gid: &[u8; 16], timeout: i32) -> Result<(), Errno> {
    if timeout < 0 {
        return Err(Errno::EINVAL);
    }
    let timeout_ms = if timeout == 0 { DEFAULT_TIMEOUT_MS } else { timeout };
    let count = env.port_count().map_err(|_| Errno::EIO)?;
    if port > u32::from(count) {
        return Err(Errno::EINVAL);
    }
    if port != 0 {
        return check_port(env, port as u8, gid, timeout_ms);
    }
    // Port 0: any port will do.  Report the most telling failure: a
    // resolution error from an active port beats "not active".
    let mut err = Errno::ENETDOWN;
    for p in 1..=count {
        match check_port(env, p, gid, timeout_ms) {
            Ok(()) => return Ok(()),
            Err(Errno::ENETDOWN) => {}
            Err(e) => err = e,
        }
    }
    Err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    struct Mock {
        ports: Vec<PortInfo>,
        ip: Result<Resolved, Errno>,
        ib: Result<(), Errno>,
        calls: Cell<u32>,
    }

    impl GidEnv for Mock {
        fn port_count(&self) -> Result<u8, Errno> {
            Ok(self.ports.len() as u8)
        }
        fn port_info(&self, port: u8) -> Result<PortInfo, Errno> {
            Ok(self.ports[port as usize - 1])
        }
        fn node_guid(&self) -> u64 {
            7
        }
        fn ifindex(&self, _port: u8) -> u32 {
            10
        }
        fn resolve_ip(&self, _dst: &SockAddr, _t: i32) -> Result<Resolved, Errno> {
            self.calls.set(self.calls.get() + 1);
            self.ip
        }
        fn resolve_ib_path(&self, _p: u8, _g: &[u8; 16], _t: i32) -> Result<(), Errno> {
            self.calls.set(self.calls.get() + 1);
            self.ib
        }
    }

    const ETH_UP: PortInfo = PortInfo { state: PORT_ACTIVE, link_layer: 2 };
    const ETH_DOWN: PortInfo = PortInfo { state: 1, link_layer: 2 };
    const IB_UP: PortInfo = PortInfo { state: PORT_ACTIVE, link_layer: LINK_LAYER_IB };

    fn mock(ports: Vec<PortInfo>, ip: Result<Resolved, Errno>) -> Mock {
        Mock { ports, ip, ib: Ok(()), calls: Cell::new(0) }
    }

    const GID4: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 2];

    #[test]
    fn roce_reachable_through_this_port() {
        let m = mock(vec![ETH_UP], Ok(Resolved { node_guid: 7, port: 1 }));
        assert_eq!(gid_reachable(&m, 1, &GID4, 0), Ok(()));
        assert_eq!(gid_reachable(&m, 0, &GID4, 0), Ok(()));
    }

    #[test]
    fn roce_other_device_or_port_is_no_path() {
        let m = mock(vec![ETH_UP], Ok(Resolved { node_guid: 8, port: 1 }));
        assert_eq!(gid_reachable(&m, 1, &GID4, 0), Err(Errno::ENXIO));
        let m = mock(vec![ETH_UP, ETH_UP], Ok(Resolved { node_guid: 7, port: 2 }));
        assert_eq!(gid_reachable(&m, 1, &GID4, 0), Err(Errno::ENXIO));
        assert_eq!(gid_reachable(&m, 0, &GID4, 0), Ok(()));
    }

    #[test]
    fn resolution_errors_map_to_the_documented_set() {
        for (k, want) in [
            (Errno::ETIMEDOUT, Errno::ENXIO),
            (Errno::EHOSTUNREACH, Errno::ENXIO),
            (Errno::ENETUNREACH, Errno::ENXIO),
            (Errno::ENODEV, Errno::ENXIO),
            (Errno::ENOMEM, Errno::ENOMEM),
            (Errno::EINTR, Errno::EINTR),
        ] {
            let m = mock(vec![ETH_UP], Err(k));
            assert_eq!(gid_reachable(&m, 1, &GID4, 100), Err(want), "{k}");
        }
        for (k, want) in [
            (Errno::EINVAL, Errno::ENXIO),
            (Errno::ETIMEDOUT, Errno::EIO),
            (Errno::EIO, Errno::EIO),
            (Errno::EINTR, Errno::EINTR),
        ] {
            let mut m = mock(vec![IB_UP], Ok(Resolved { node_guid: 7, port: 1 }));
            m.ib = Err(k);
            assert_eq!(gid_reachable(&m, 1, &GID4, 0), Err(want), "{k}");
        }
    }

    #[test]
    fn arguments() {
        let m = mock(vec![ETH_UP], Ok(Resolved { node_guid: 7, port: 1 }));
        assert_eq!(gid_reachable(&m, 2, &GID4, 0), Err(Errno::EINVAL));
        assert_eq!(gid_reachable(&m, u32::MAX, &GID4, 0), Err(Errno::EINVAL));
        assert_eq!(gid_reachable(&m, 1, &GID4, -1), Err(Errno::EINVAL));
        assert_eq!(m.calls.get(), 0, "no resolution for rejected arguments");
    }

    #[test]
    fn inactive_ports() {
        let m = mock(vec![ETH_DOWN], Ok(Resolved { node_guid: 7, port: 1 }));
        assert_eq!(gid_reachable(&m, 1, &GID4, 0), Err(Errno::ENETDOWN));
        assert_eq!(gid_reachable(&m, 0, &GID4, 0), Err(Errno::ENETDOWN));
        assert_eq!(m.calls.get(), 0);
        let m = mock(vec![ETH_DOWN, ETH_UP], Err(Errno::ETIMEDOUT));
        assert_eq!(gid_reachable(&m, 0, &GID4, 0), Err(Errno::ENXIO));
    }

    #[test]
    fn gid_forms() {
        let s = gid_to_sockaddr(&GID4, 3).as_v4().expect("IPv4-mapped GID must become AF_INET");
        assert_eq!(s.sin_addr.s_addr.to_ne_bytes(), [192, 0, 2, 2]);
        let mut ll = [0u8; 16];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        ll[15] = 1;
        assert_eq!(gid_to_sockaddr(&ll, 3).as_v6().unwrap().sin6_scope_id, 3);
        let mut g = [0u8; 16];
        g[0] = 0x20;
        g[1] = 0x01;
        g[2] = 0x0d;
        g[3] = 0xb8;
        g[15] = 2;
        assert_eq!(gid_to_sockaddr(&g, 3).as_v6().unwrap().sin6_scope_id, 0);
    }
}
