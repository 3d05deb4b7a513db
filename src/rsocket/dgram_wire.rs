// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The datagram rsockets' headers on the wire (see [`super::dgram`]'s
//! module comment): the header in front of every datagram on a UD QP, the
//! header of a datagram over UDP, and the address keys destinations are
//! found by. Plain functions over bytes.
#![deny(unsafe_code)]

pub const HDR4: u8 = 8;
pub const HDR6: u8 = 24;
pub const UDP_TAG: u32 = 0x5555_5555;
pub const UDP_HDR4: u8 = 16;
pub const UDP_HDR6: u8 = 28;
pub const OP_DATA: u8 = 0;
pub const OP_CTRL: u8 = 7;

pub const AF_INET: u16 = libc::AF_INET as u16;
pub const AF_INET6: u16 = libc::AF_INET6 as u16;

pub fn family(a: &[u8]) -> u16 {
    if a.len() < 2 {
        0
    } else {
        u16::from_ne_bytes([a[0], a[1]])
    }
}

/// The bytes of an address that identify a destination (upstream compares
/// the whole sockaddr_in, or sockaddr_in6 when both are IPv6).
pub fn key(a: &[u8]) -> Vec<u8> {
    let n = if family(a) == AF_INET6 { 28 } else { 16 };
    let mut k = a[..a.len().min(n)].to_vec();
    k.resize(n, 0);
    k
}

pub fn is_any(a: &[u8]) -> bool {
    match family(a) {
        AF_INET => a.len() >= 8 && (a[4..8] == [0, 0, 0, 0] || a[4] == 127),
        AF_INET6 => a.len() >= 24 && (a[8..24] == [0u8; 16] || a[8..24] == std::net::Ipv6Addr::LOCALHOST.octets()),
        _ => false,
    }
}

/// The datagram header for source address `a` (see the module comment).
pub fn format_hdr(a: &[u8]) -> Vec<u8> {
    if family(a) == AF_INET {
        let mut h = vec![4, HDR4];
        h.extend_from_slice(&a[2..8]);
        h
    } else {
        let mut h = vec![6, HDR6];
        h.extend_from_slice(&a[2..24]);
        h
    }
}

/// The source address a datagram header names.
pub fn hdr_addr(h: &[u8]) -> Vec<u8> {
    if h[0] == 4 {
        let mut a = vec![0u8; 16];
        a[..2].copy_from_slice(&AF_INET.to_ne_bytes());
        a[2..8].copy_from_slice(&h[2..8]);
        a
    } else {
        let mut a = vec![0u8; 28];
        a[..2].copy_from_slice(&AF_INET6.to_ne_bytes());
        a[2..24].copy_from_slice(&h[2..24]);
        a
    }
}

pub fn valid_hdr(h: &[u8]) -> bool {
    h.len() >= HDR4 as usize && ((h[0] == 4 && h[1] == HDR4) || (h[0] == 6 && h[1] == HDR6 && h.len() >= HDR6 as usize))
}

/// The UDP header sent by a QP with datagram header `qh` and number `qpn`.
pub fn udp_hdr(qh: &[u8], op: u8, qpn: u32) -> Vec<u8> {
    let mut h = UDP_TAG.to_be_bytes().to_vec();
    let (ver, len, addr) = if qh[0] == 4 { (4, UDP_HDR4, &qh[4..8]) } else { (6, UDP_HDR6, &qh[8..24]) };
    h.extend_from_slice(&[ver, op, len, 0]);
    h.extend_from_slice(&(qpn & 0xFF_FFFF).to_be_bytes());
    h.extend_from_slice(addr);
    h
}

/// A received UDP header: (op, header length, sender's QP number), if valid
/// for a datagram from `from`.
pub fn parse_udp_hdr(m: &[u8], from: &[u8]) -> Option<(u8, usize, u32)> {
    if m.len() < UDP_HDR4 as usize || u32::from_be_bytes([m[0], m[1], m[2], m[3]]) != UDP_TAG {
        return None;
    }
    let ok = (m[4] == 4 && family(from) == AF_INET && m[6] == UDP_HDR4) || (m[4] == 6 && family(from) == AF_INET6 && m[6] == UDP_HDR6);
    if !ok || m.len() < m[6] as usize {
        return None;
    }
    Some((m[5], m[6] as usize, u32::from_be_bytes([m[8], m[9], m[10], m[11]]) & 0xFF_FFFF))
}


/// An IB MTU code of a path record in bytes (1: 256 ... 5: 4096).
pub fn mtu_bytes(code: u8) -> Option<usize> {
    (1..=5).contains(&code).then(|| 128usize << code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(ip: [u8; 4], port: u16) -> Vec<u8> {
        let mut a = vec![0u8; 16];
        a[..2].copy_from_slice(&AF_INET.to_ne_bytes());
        a[2..4].copy_from_slice(&port.to_be_bytes());
        a[4..8].copy_from_slice(&ip);
        a
    }

    /// The headers as upstream lays them out (struct ds_header, ds_udp_header).
    #[test]
    fn headers_on_the_wire() {
        let a = v4([192, 0, 2, 1], 7174);
        let h = format_hdr(&a);
        assert_eq!(h, [4, 8, 0x1c, 0x06, 192, 0, 2, 1]);
        assert!(valid_hdr(&h));
        assert_eq!(hdr_addr(&h), a);
        let u = udp_hdr(&h, OP_DATA, 0xAB12_3456);
        assert_eq!(u, [0x55, 0x55, 0x55, 0x55, 4, 0, 16, 0, 0, 0x12, 0x34, 0x56, 192, 0, 2, 1]);
        assert_eq!(parse_udp_hdr(&u, &a), Some((OP_DATA, 16, 0x12_3456)));
        let mut bad = u.clone();
        bad[0] = 0;
        assert_eq!(parse_udp_hdr(&bad, &a), None);
        let mut a6 = vec![0u8; 28];
        a6[..2].copy_from_slice(&AF_INET6.to_ne_bytes());
        a6[2..4].copy_from_slice(&9u16.to_be_bytes());
        a6[4..8].copy_from_slice(&[0, 0, 0, 5]);
        a6[8] = 0x20;
        a6[23] = 1;
        let h6 = format_hdr(&a6);
        assert_eq!(h6.len(), 24);
        assert_eq!(&h6[..4], &[6, 24, 0, 9]);
        assert_eq!(hdr_addr(&h6), a6);
        let u6 = udp_hdr(&h6, OP_CTRL, 7);
        assert_eq!(u6.len(), 28);
        assert_eq!(parse_udp_hdr(&u6, &a6), Some((OP_CTRL, 28, 7)));
        // an IPv6 header from an IPv4 sender is not valid
        assert_eq!(parse_udp_hdr(&u6, &a), None);
    }

    #[test]
    fn keys_and_wildcards() {
        assert_eq!(key(&v4([1, 2, 3, 4], 5)), key(&v4([1, 2, 3, 4], 5)));
        assert_ne!(key(&v4([1, 2, 3, 4], 5)), key(&v4([1, 2, 3, 4], 6)));
        assert!(is_any(&v4([0, 0, 0, 0], 5)));
        assert!(!is_any(&v4([192, 0, 2, 1], 5)));
    }
}
