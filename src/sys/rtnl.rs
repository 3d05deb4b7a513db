// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rtnetlink queries the kernel answers the way its own resolution would:
//! the route to a destination (`RTM_GETROUTE`, what `ip route get` asks)
//! and the neighbour entry of an address on an interface
//! (`RTM_GETNEIGH`, what `ip neigh get` asks), plus interface names.
//! Used by the resolution explainer (`crate::explain`); the library's own
//! resolution never needs them (the kernel's rdma_cm does its own lookup).
//!
//! Messages are encoded and decoded as plain bytes; only the socket calls
//! are unsafe.

use nix::errno::Errno;
use std::net::IpAddr;

const NETLINK_ROUTE: i32 = 0;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const RTA_DST: u16 = 1;
const RTA_SRC: u16 = 2;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PREFSRC: u16 = 7;
const RTA_TABLE: u16 = 15;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;

/// The kernel's answer to a route lookup.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Route {
    /// Egress interface index.
    pub oif: Option<u32>,
    /// The source address the kernel would use.
    pub prefsrc: Option<IpAddr>,
    /// The next hop, when the destination is not on a local subnet.
    pub gateway: Option<IpAddr>,
    /// `RTN_*` (1 unicast, 2 local, 7 unreachable, ...).
    pub rtype: u8,
    pub table: u32,
}

/// A neighbour table entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Neigh {
    /// `NUD_*` bits.
    pub state: u16,
    /// The link-layer address, when known.
    pub lladdr: Option<Vec<u8>>,
}

fn family_of(a: &IpAddr) -> u8 {
    if a.is_ipv4() {
        libc::AF_INET as u8
    } else {
        libc::AF_INET6 as u8
    }
}

fn addr_bytes(a: &IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(v) => v.octets().to_vec(),
        IpAddr::V6(v) => v.octets().to_vec(),
    }
}

fn addr_from(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(b).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(b).ok()?)),
        _ => None,
    }
}

fn push_attr(m: &mut Vec<u8>, ty: u16, data: &[u8]) {
    m.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(data);
    while m.len() % 4 != 0 {
        m.push(0);
    }
}

/// A request: header, the fixed body, attributes; the length is filled in.
fn request(ty: u16, body: &[u8], attrs: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut m = Vec::with_capacity(64);
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    m.extend_from_slice(body);
    for (t, d) in attrs {
        push_attr(&mut m, *t, d);
    }
    let len = m.len() as u32;
    m[..4].copy_from_slice(&len.to_ne_bytes());
    m
}

/// The encoded `RTM_GETROUTE` for `dst` (from `src`, out of `oif`).
pub fn enc_getroute(dst: &IpAddr, src: Option<&IpAddr>, oif: Option<u32>) -> Vec<u8> {
    let fam = family_of(dst);
    let bits = if fam == libc::AF_INET as u8 { 32 } else { 128 };
    let src_len = if src.is_some() { bits } else { 0 };
    // struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags
    let body = [fam, bits, src_len, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut attrs = vec![(RTA_DST, addr_bytes(dst))];
    if let Some(s) = src {
        attrs.push((RTA_SRC, addr_bytes(s)));
    }
    if let Some(o) = oif.filter(|&o| o != 0) {
        attrs.push((RTA_OIF, o.to_ne_bytes().to_vec()));
    }
    request(RTM_GETROUTE, &body, &attrs)
}

/// The encoded `RTM_GETNEIGH` for `dst` on interface `ifindex`.
pub fn enc_getneigh(ifindex: u32, dst: &IpAddr) -> Vec<u8> {
    // struct ndmsg: family, pad1, pad2 (u16), ifindex (i32), state (u16), flags, type
    let mut body = vec![family_of(dst), 0, 0, 0];
    body.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    body.extend_from_slice(&[0, 0, 0, 0]);
    request(RTM_GETNEIGH, &body, &[(NDA_DST, addr_bytes(dst))])
}

/// One answer: `Ok((type, body after the header))` or the kernel's error.
fn first_message(b: &[u8]) -> Result<(u16, &[u8]), Errno> {
    if b.len() < 16 {
        return Err(Errno::EIO);
    }
    let len = (u32::from_ne_bytes(b[0..4].try_into().unwrap()) as usize).min(b.len());
    let ty = u16::from_ne_bytes([b[4], b[5]]);
    if len < 16 {
        return Err(Errno::EIO);
    }
    let body = &b[16..len];
    if ty == NLMSG_ERROR {
        let code = body.get(..4).map_or(-libc::EIO, |c| i32::from_ne_bytes(c.try_into().unwrap()));
        return Err(if code == 0 { Errno::EIO } else { Errno::from_raw(-code) });
    }
    Ok((ty, body))
}

/// The attributes after a fixed body of `fixed` bytes.
fn attrs(body: &[u8], fixed: usize) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut i = fixed;
    while i + 4 <= body.len() {
        let len = u16::from_ne_bytes([body[i], body[i + 1]]) as usize;
        let ty = u16::from_ne_bytes([body[i + 2], body[i + 3]]) & 0x3fff;
        if len < 4 || i + len > body.len() {
            break;
        }
        out.push((ty, &body[i + 4..i + len]));
        i += (len + 3) & !3;
    }
    out
}

/// Decodes an `RTM_NEWROUTE` answer.
pub fn dec_route(b: &[u8]) -> Result<Route, Errno> {
    let (ty, body) = first_message(b)?;
    if ty != RTM_NEWROUTE || body.len() < 12 {
        return Err(Errno::EIO);
    }
    let mut r = Route { rtype: body[7], table: body[4] as u32, ..Default::default() };
    for (t, d) in attrs(body, 12) {
        match t {
            RTA_OIF if d.len() == 4 => r.oif = Some(u32::from_ne_bytes(d.try_into().unwrap())),
            RTA_PREFSRC => r.prefsrc = addr_from(d),
            RTA_GATEWAY => r.gateway = addr_from(d),
            RTA_TABLE if d.len() == 4 => r.table = u32::from_ne_bytes(d.try_into().unwrap()),
            _ => {}
        }
    }
    Ok(r)
}

/// Decodes an `RTM_NEWNEIGH` answer; `Ok(None)` when there is no entry.
pub fn dec_neigh(b: &[u8]) -> Result<Option<Neigh>, Errno> {
    let (ty, body) = match first_message(b) {
        Err(Errno::ENOENT) => return Ok(None),
        r => r?,
    };
    if ty != RTM_NEWNEIGH || body.len() < 12 {
        return Err(Errno::EIO);
    }
    let mut n = Neigh { state: u16::from_ne_bytes([body[8], body[9]]), lladdr: None };
    for (t, d) in attrs(body, 12) {
        if t == NDA_LLADDR {
            n.lladdr = Some(d.to_vec());
        }
    }
    Ok(Some(n))
}

/// Sends one request on a new rtnetlink socket and returns the answer.
fn exchange(req: &[u8]) -> Result<Vec<u8>, Errno> {
    // SAFETY: plain socket call.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, NETLINK_ROUTE) };
    if fd < 0 {
        return Err(super::last_errno());
    }
    // SAFETY: fd is a socket we just created and own from here on.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    // SAFETY: an all-zero sockaddr_nl addresses the kernel.
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: req is readable for its length; sa is a valid sockaddr_nl.
    let n = unsafe {
        libc::sendto(raw, req.as_ptr().cast(), req.len(), 0, &sa as *const libc::sockaddr_nl as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_nl>() as u32)
    };
    if n < 0 {
        return Err(super::last_errno());
    }
    let mut buf = vec![0u8; 16384];
    loop {
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::recv(raw, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = super::last_errno();
            if e == Errno::EINTR {
                continue;
            }
            return Err(e);
        }
        buf.truncate(n as usize);
        return Ok(buf);
    }
}

/// The route the kernel picks for `dst` (as `ip route get dst [from src]
/// [oif oif]`).  Errors are the kernel's (`ENETUNREACH`, `EHOSTUNREACH`,
/// `EINVAL` for a source that is not local, ...).
pub fn route_get(dst: &IpAddr, src: Option<&IpAddr>, oif: Option<u32>) -> Result<Route, Errno> {
    dec_route(&exchange(&enc_getroute(dst, src, oif))?)
}

/// The neighbour entry of `dst` on `ifindex`, `None` when there is none.
pub fn neigh_get(ifindex: u32, dst: &IpAddr) -> Result<Option<Neigh>, Errno> {
    dec_neigh(&exchange(&enc_getneigh(ifindex, dst))?)
}

/// An interface's name.
pub fn if_name(ifindex: u32) -> Option<String> {
    let mut buf = [0u8; libc::IF_NAMESIZE];
    // SAFETY: buf holds IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr().cast()) };
    if p.is_null() {
        return None;
    }
    let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// An interface's index, 0 when there is none of that name.
pub fn if_index(name: &str) -> u32 {
    let Ok(c) = std::ffi::CString::new(name) else { return 0 };
    // SAFETY: c is a NUL-terminated string.
    unsafe { libc::if_nametoindex(c.as_ptr()) }
}

/// The interface that holds local address `a` (for a `local` route,
/// whose egress is `lo`), 0 when none does.
pub fn addr_owner(a: &IpAddr) -> u32 {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: head is a valid out pointer; the list is freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return 0;
    }
    let mut found = 0;
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: cur is an element of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a socket address of its family.
        let fam = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        let got: Option<IpAddr> = match fam {
            // SAFETY: the family says which structure it is.
            libc::AF_INET => Some(IpAddr::from(unsafe { *(ifa.ifa_addr as *const libc::sockaddr_in) }.sin_addr.s_addr.to_ne_bytes())),
            // SAFETY: as above.
            libc::AF_INET6 => Some(IpAddr::from(unsafe { *(ifa.ifa_addr as *const libc::sockaddr_in6) }.sin6_addr.s6_addr)),
            _ => None,
        };
        if got.as_ref() == Some(a) && !ifa.ifa_name.is_null() {
            // SAFETY: ifa_name is a NUL-terminated interface name.
            found = unsafe { libc::if_nametoindex(ifa.ifa_name) };
            break;
        }
    }
    // SAFETY: head came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    found
}

/// The name of a neighbour state (`NUD_*`, the strongest bit).
pub fn nud_name(state: u16) -> &'static str {
    const NAMES: &[(u16, &str)] = &[
        (0x80, "PERMANENT"),
        (0x40, "NOARP"),
        (0x02, "REACHABLE"),
        (0x04, "STALE"),
        (0x08, "DELAY"),
        (0x10, "PROBE"),
        (0x01, "INCOMPLETE"),
        (0x20, "FAILED"),
    ];
    NAMES.iter().find(|(b, _)| state & b != 0).map_or("NONE", |(_, n)| n)
}

/// The name of a route type (`RTN_*`).
pub fn rtn_name(t: u8) -> &'static str {
    match t {
        1 => "unicast",
        2 => "local",
        3 => "broadcast",
        4 => "anycast",
        5 => "multicast",
        6 => "blackhole",
        7 => "unreachable",
        8 => "prohibit",
        9 => "throw",
        10 => "nat",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getroute_encoding() {
        let m = enc_getroute(&"192.0.2.9".parse().unwrap(), None, Some(10));
        assert_eq!(m.len(), 16 + 12 + 8 + 8);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize, m.len());
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), RTM_GETROUTE);
        assert_eq!(m[16], libc::AF_INET as u8);
        assert_eq!(m[17], 32);
        assert_eq!(&m[28..36], &[8, 0, 1, 0, 192, 0, 2, 9]);
    }

    #[test]
    fn route_decoding() {
        // An answer: header, rtmsg (unicast), OIF 10, PREFSRC 192.0.2.1, GATEWAY 192.0.2.254.
        let mut body = vec![2, 32, 0, 0, 254, 2, 0, 1, 0, 0, 0, 0];
        push_attr(&mut body, RTA_OIF, &10u32.to_ne_bytes());
        push_attr(&mut body, RTA_PREFSRC, &[192, 0, 2, 1]);
        push_attr(&mut body, RTA_GATEWAY, &[192, 0, 2, 254]);
        let mut m = request(RTM_NEWROUTE, &body, &[]);
        let r = dec_route(&m).unwrap();
        assert_eq!(r.oif, Some(10));
        assert_eq!(r.prefsrc, Some("192.0.2.1".parse().unwrap()));
        assert_eq!(r.gateway, Some("192.0.2.254".parse().unwrap()));
        assert_eq!(r.rtype, 1);
        // An error answer carries -errno.
        m = request(NLMSG_ERROR, &(-libc::ENETUNREACH).to_ne_bytes(), &[]);
        assert_eq!(dec_route(&m), Err(Errno::ENETUNREACH));
        m = request(NLMSG_ERROR, &(-libc::ENOENT).to_ne_bytes(), &[]);
        assert_eq!(dec_neigh(&m), Ok(None));
    }

    /// The host's own kernel: 127.0.0.1 is a local route out of lo, held by lo.
    #[test]
    fn kernel_answers() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let r = route_get(&lo, None, None).unwrap();
        assert_eq!(rtn_name(r.rtype), "local");
        assert_eq!(r.oif.and_then(if_name).as_deref(), Some("lo"));
        assert_eq!(addr_owner(&lo), if_index("lo"));
        assert!(neigh_get(if_index("lo"), &"127.0.0.9".parse().unwrap()).is_ok());
    }

    #[test]
    fn names() {
        assert_eq!(nud_name(0x02), "REACHABLE");
        assert_eq!(nud_name(0x21), "INCOMPLETE");
        assert_eq!(nud_name(0), "NONE");
        assert_eq!(rtn_name(7), "unreachable");
    }
}
