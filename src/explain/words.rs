// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Words and values the explainer's report is written in: names of port
//! spaces, families and QP types, addresses as text and back, an
//! `rdma_addrinfo` as JSON, path MTU and static rate enums in units.
#![deny(unsafe_code)]

use super::devices::gid_text;
use super::json::J;
use crate::abi::cma::*;
use crate::abi::sockaddr::SockAddr;
use crate::addrinfo::Rai;
use crate::sys::rtnl;
use std::ffi::CString;
use nix::errno::Errno;
use std::net::IpAddr;

/// The name of a port space.
pub fn ps_name(ps: u32) -> &'static str {
    match ps {
        RDMA_PS_TCP => "tcp",
        RDMA_PS_UDP => "udp",
        RDMA_PS_IB => "ib",
        RDMA_PS_IPOIB => "ipoib",
        _ => "?",
    }
}

pub(super) fn family_name(f: i32) -> String {
    match f {
        libc::AF_INET => "AF_INET".into(),
        libc::AF_INET6 => "AF_INET6".into(),
        AF_IB => "AF_IB".into(),
        libc::AF_UNSPEC => "AF_UNSPEC".into(),
        f => f.to_string(),
    }
}

pub(super) fn qp_name(q: i32) -> String {
    match q as u32 {
        IBV_QPT_RC => "RC".into(),
        IBV_QPT_UC => "UC".into(),
        IBV_QPT_UD => "UD".into(),
        0 => "0".into(),
        q => q.to_string(),
    }
}

pub(super) fn errno_text(e: Errno) -> String {
    format!("{} ({})", e, e as i32)
}

/// The IP address, port and scope of a raw socket address.
pub fn ip_of(a: &[u8]) -> Option<(IpAddr, u16, u32)> {
    if a.len() < 2 {
        return None;
    }
    let fam = u16::from_ne_bytes([a[0], a[1]]) as i32;
    let port = if a.len() >= 4 { u16::from_be_bytes([a[2], a[3]]) } else { 0 };
    match fam {
        libc::AF_INET if a.len() >= 8 => Some((IpAddr::from(<[u8; 4]>::try_from(&a[4..8]).ok()?), port, 0)),
        libc::AF_INET6 if a.len() >= 28 => {
            Some((IpAddr::from(<[u8; 16]>::try_from(&a[8..24]).ok()?), port, u32::from_ne_bytes(a[24..28].try_into().ok()?)))
        }
        _ => None,
    }
}

/// A raw socket address as text: `192.0.2.1:7471`, `[fe80::1%veth0]:0`,
/// `ib gid fe80::... sid 0x... pkey 0xffff`.
pub fn addr_text(a: &[u8]) -> String {
    if let Some((ip, port, scope)) = ip_of(a) {
        return match ip {
            IpAddr::V4(v) => format!("{v}:{port}"),
            IpAddr::V6(v) if scope != 0 => {
                format!("[{v}%{}]:{port}", rtnl::if_name(scope).unwrap_or_else(|| scope.to_string()))
            }
            IpAddr::V6(v) => format!("[{v}]:{port}"),
        };
    }
    if a.len() >= 40 && u16::from_ne_bytes([a[0], a[1]]) as i32 == AF_IB {
        let s = SockAddr::from_prefix(a).ib_image();
        return format!(
            "ib gid {} sid {:#x} pkey {:#06x}",
            gid_text(&<[u8; 16]>::try_from(&a[8..24]).unwrap_or_default()),
            u64::from_be(s.sib_sid),
            u16::from_be(s.sib_pkey)
        );
    }
    format!("family {}", a.first().copied().unwrap_or(0))
}

/// A numeric address with an optional `%scope` as socket-address bytes.
pub fn parse_addr(s: &str) -> Option<Vec<u8>> {
    let (host, scope) = match s.split_once('%') {
        Some((h, sc)) => (h, Some(sc)),
        None => (s, None),
    };
    let ip: IpAddr = host.trim_start_matches('[').trim_end_matches(']').parse().ok()?;
    Some(match ip {
        IpAddr::V4(v) => {
            let mut b = vec![0u8; 16];
            b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
            b[4..8].copy_from_slice(&v.octets());
            b
        }
        IpAddr::V6(v) => {
            let mut b = vec![0u8; 28];
            b[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
            b[8..24].copy_from_slice(&v.octets());
            let sc = match scope {
                Some(n) => n.parse::<u32>().ok().unwrap_or_else(|| rtnl::if_index(n)),
                None => 0,
            };
            b[24..28].copy_from_slice(&sc.to_ne_bytes());
            b
        }
    })
}

/// An entry of rdma_getaddrinfo's list, every field as upstream fills it.
pub fn rai_json(r: &Rai) -> J {
    let cn = |c: &Option<CString>| c.as_ref().map(|s| s.to_string_lossy().into_owned());
    J::obj()
        .with("flags", r.flags)
        .with("family", family_name(r.family))
        .with("qp_type", qp_name(r.qp_type))
        .with("port_space", ps_name(r.port_space as u32))
        .with("src_addr", r.src.as_ref().map(|a| addr_text(a.as_bytes())))
        .with("src_len", r.src_len())
        .with("dst_addr", r.dst.as_ref().map(|a| addr_text(a.as_bytes())))
        .with("dst_len", r.dst_len())
        .with("src_canonname", cn(&r.src_canonname))
        .with("dst_canonname", cn(&r.dst_canonname))
        .with("route_len", r.route_len())
        .with("connect_len", r.connect.as_ref().map_or(0, Vec::len))
}

/// Path MTU enum (`IBV_MTU_*`) in bytes.
pub fn mtu_bytes(m: u32) -> u32 {
    match m {
        1..=5 => 128 << m,
        _ => 0,
    }
}

/// Static rate enum (`IBV_RATE_*`) in Gb/s.
pub fn rate_gbps(r: u8) -> f64 {
    const T: &[(u8, f64)] = &[
        (2, 2.5), (3, 10.0), (4, 30.0), (5, 5.0), (6, 20.0), (7, 40.0), (8, 60.0), (9, 80.0), (10, 120.0), (11, 14.0),
        (12, 56.0), (13, 112.0), (14, 168.0), (15, 25.0), (16, 100.0), (17, 200.0), (18, 300.0), (19, 28.0), (20, 50.0),
        (21, 400.0), (22, 600.0),
    ];
    T.iter().find(|(k, _)| *k == r).map_or(0.0, |(_, v)| *v)
}

