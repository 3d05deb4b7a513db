// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rdma_getaddrinfo without libc's resolver where the answer is known
//! without it: a numeric IPv4/IPv6 literal, or no node (the wildcard or
//! loopback address of a given family), with a numeric service.
//!
//! libc's `getaddrinfo` answers these by parsing too, but first builds
//! its whole result list, sorts it (RFC 3484, which asks the kernel for
//! the interface addresses over netlink and probes routes with sockets
//! when there is more than one result) and allocates every entry; only
//! the first entry is used.  [`first_result`] gives that first entry for
//! the cases whose outcome does not depend on the machine, and `None`
//! (ask libc) for everything else: names, other spellings libc accepts
//! (`inet_aton`'s "127.1", octal and hex parts, scoped IPv6 literals),
//! service names, an unspecified family without a node (two results,
//! ordered by the sort), NULL hints (AI_ADDRCONFIG), and socket type /
//! protocol pairs libc would refuse.  The gai corpus (host `make
//! check-gai`, VM `gai_corpus*`) compares every result with upstream's.

#![deny(unsafe_code)]

use crate::abi::sockaddr::SockAddr;
use crate::sys::netdb::{AddrInfo, GaiHints};
use std::ffi::{c_int, CStr};
use std::net::Ipv6Addr;

/// A strict dotted quad: four decimal parts of 1 to 3 digits, each at
/// most 255, no leading zero (libc would read it as octal).  The address
/// in network order.
fn parse_v4(s: &[u8]) -> Option<[u8; 4]> {
    // The hot path of a numeric lookup: each part's (at most three)
    // digits read without a loop.
    let digit = |i: usize| s.get(i).map(|c| c.wrapping_sub(b'0')).filter(|d| *d <= 9).map(u32::from);
    let mut out = [0u8; 4];
    let mut i = 0;
    for (k, o) in out.iter_mut().enumerate() {
        let first = digit(i)?;
        let mut v = first;
        i += 1;
        if let Some(d) = digit(i) {
            if first == 0 {
                return None;
            }
            v = v * 10 + d;
            i += 1;
            if let Some(d) = digit(i) {
                v = v * 10 + d;
                i += 1;
            }
        }
        *o = u8::try_from(v).ok()?;
        if k < 3 {
            if s.get(i) != Some(&b'.') {
                return None;
            }
            i += 1;
        }
    }
    (i == s.len()).then_some(out)
}

/// An IPv6 literal without a scope (RFC 4291 text form, as inet_pton
/// reads it): eight groups of 1 to 4 hex digits, one `::` standing for
/// at least one zero group, the last two groups possibly a dotted quad.
fn parse_v6(s: &[u8]) -> Option<[u8; 16]> {
    if s.len() < 2 || s.len() > 45 {
        return None;
    }
    let mut g = [0u16; 8];
    let mut n = 0usize; // groups written
    let mut gap: Option<usize> = None; // where "::" stands
    let mut i = 0usize;
    if s.starts_with(b"::") {
        gap = Some(0);
        i = 2;
        if i == s.len() {
            return Some([0; 16]);
        }
    } else if s[0] == b':' {
        return None;
    }
    loop {
        // A group, or the dotted quad that ends the address.
        let start = i;
        let mut v = 0u32;
        while i < s.len() && i - start < 5 {
            let d = match s[i] {
                c @ b'0'..=b'9' => c - b'0',
                c @ b'a'..=b'f' => c - b'a' + 10,
                c @ b'A'..=b'F' => c - b'A' + 10,
                _ => break,
            };
            v = (v << 4) | u32::from(d);
            i += 1;
        }
        if i < s.len() && s[i] == b'.' {
            if n > 6 {
                return None;
            }
            let q = parse_v4(&s[start..])?;
            g[n] = u16::from_be_bytes([q[0], q[1]]);
            g[n + 1] = u16::from_be_bytes([q[2], q[3]]);
            n += 2;
            break;
        }
        let len = i - start;
        if len == 0 || len > 4 || n == 8 {
            return None;
        }
        g[n] = v as u16;
        n += 1;
        if i == s.len() {
            break;
        }
        if s[i] != b':' {
            return None;
        }
        i += 1;
        if i < s.len() && s[i] == b':' {
            if gap.is_some() {
                return None;
            }
            gap = Some(n);
            i += 1;
            if i == s.len() {
                break;
            }
        } else if i == s.len() {
            return None;
        }
    }
    let mut out = [0u16; 8];
    match gap {
        None if n == 8 => out = g,
        Some(at) if n < 8 => {
            out[..at].copy_from_slice(&g[..at]);
            let tail = n - at;
            out[8 - tail..].copy_from_slice(&g[at..n]);
        }
        _ => return None,
    }
    let mut b = [0u8; 16];
    for (k, w) in out.iter().enumerate() {
        b[2 * k..2 * k + 2].copy_from_slice(&w.to_be_bytes());
    }
    Some(b)
}

/// A decimal port (1 to 5 digits, at most 65535), host order.
fn parse_port(s: &[u8]) -> Option<u16> {
    if s.is_empty() || s.len() > 5 {
        return None;
    }
    let mut v = 0u32;
    for &c in s {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + u32::from(d);
    }
    u16::try_from(v).ok()
}

/// The socket type and protocol of libc's first result for the hints'
/// pair, when libc accepts the pair.
fn first_type(socktype: c_int, protocol: c_int) -> Option<(c_int, c_int)> {
    use libc::{IPPROTO_TCP as TCP, IPPROTO_UDP as UDP, SOCK_DGRAM as DGRAM, SOCK_STREAM as STREAM};
    match (socktype, protocol) {
        (0, 0) | (STREAM, 0) | (STREAM, TCP) | (0, TCP) => Some((STREAM, TCP)),
        (DGRAM, 0) | (DGRAM, UDP) | (0, UDP) => Some((DGRAM, UDP)),
        _ => None,
    }
}

/// libc's first result for `node`/`service` under `ai` (the libc hints
/// derived from the caller's; `null_hints`: the caller gave none, so libc
/// gets NULL hints), or `None` when only libc can tell.
pub fn first_result(node: Option<&CStr>, service: Option<&CStr>, null_hints: bool, ai: &GaiHints) -> Option<AddrInfo> {
    let mut addr = SockAddr::EMPTY;
    let (socktype, protocol) = first_into(node, service, null_hints, ai, &mut addr)?;
    Some(AddrInfo { flags: ai.flags, family: addr.family(), socktype, protocol, addr, canonname: None })
}

/// Whether `node` may be a literal [`first_into`] reads: every one ends
/// in a hex digit or ':', so a name (most end in a letter past 'f') is
/// told before any parsing, in line.
#[inline(always)]
pub fn maybe_literal(node: Option<&CStr>) -> bool {
    node.is_none_or(|n| n.to_bytes().last().is_some_and(|c| c.is_ascii_hexdigit() || *c == b':'))
}

/// [`first_result`] with the address written into `addr` (no copies of
/// it on the way: this is the hot path of a numeric lookup).  Returns
/// the result's socket type and protocol; its flags are `ai.flags`.
pub fn first_into(node: Option<&CStr>, service: Option<&CStr>, null_hints: bool, ai: &GaiHints, addr: &mut SockAddr) -> Option<(c_int, c_int)> {
    if null_hints || ai.flags & !(libc::AI_PASSIVE | libc::AI_NUMERICHOST) != 0 {
        return None;
    }
    let (socktype, protocol) = first_type(ai.socktype, ai.protocol)?;
    let port = match service {
        Some(s) => parse_port(s.to_bytes())?,
        None => 0,
    };
    *addr = match node {
        Some(n) => {
            let n = n.to_bytes();
            if let Some(v4) = parse_v4(n) {
                if !matches!(ai.family, libc::AF_UNSPEC | libc::AF_INET) {
                    return None;
                }
                SockAddr::v4(u32::from_ne_bytes(v4))
            } else if let Some(v6) = parse_v6(n) {
                if !matches!(ai.family, libc::AF_UNSPEC | libc::AF_INET6) {
                    return None;
                }
                SockAddr::v6(v6, 0)
            } else {
                return None;
            }
        }
        None => {
            // Without a node there is a service (rdma_getaddrinfo asks
            // libc only then); the wildcard for a passive lookup, else
            // loopback.
            service?;
            let passive = ai.flags & libc::AI_PASSIVE != 0;
            match ai.family {
                libc::AF_INET => SockAddr::v4(if passive { 0 } else { u32::from_ne_bytes([127, 0, 0, 1]) }),
                libc::AF_INET6 => SockAddr::v6(if passive { [0; 16] } else { Ipv6Addr::LOCALHOST.octets() }, 0),
                _ => return None,
            }
        }
    };
    addr.set_port(port.to_be());
    Some((socktype, protocol))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::netdb;

    fn hints(flags: c_int, family: c_int, socktype: c_int, protocol: c_int) -> GaiHints {
        GaiHints { flags, family, socktype, protocol }
    }

    /// Every case the fast path answers gives exactly libc's first result
    /// on this machine; every case it declines is declined.
    #[test]
    fn agrees_with_libc() {
        let nodes: &[Option<&CStr>] = &[
            None,
            Some(c"192.0.2.1"),
            Some(c"0.0.0.0"),
            Some(c"255.255.255.255"),
            Some(c"2001:db8::1"),
            Some(c"::"),
            Some(c"::1"),
            Some(c"::ffff:192.0.2.1"),
            Some(c"fe80::2"),
            Some(c"1:2:3:4:5:6:7:8"),
            Some(c"1::"),
            Some(c"::1:2"),
            Some(c"1:2:3:4:5:6:7::"),
            Some(c"::2:3:4:5:6:7:8"),
            Some(c"1:2:3:4:5:6::8"),
            Some(c"1::2:3:4:5:6:7"),
            Some(c"::1.2.3.4"),
            Some(c"1:2:3:4:5:6:1.2.3.4"),
            Some(c"1:2:3:4:5:6:7:1.2.3.4"),
            Some(c"::ffff:1.2.3"),
            Some(c"ABCD:ef01::FfFf"),
            Some(c":1::"),
            Some(c"1:::2"),
            Some(c"1::2::3"),
            Some(c"1:2:3:4:5:6:7:8::"),
            Some(c"::1:2:3:4:5:6:7:8"),
            Some(c"1:2:3:4:5:6:7"),
            Some(c"1:"),
            Some(c":"),
            Some(c"00000::1"),
            Some(c"0000::1"),
            Some(c"1.2.3.4::"),
            Some(c"::1.2.3.4:5"),
            Some(c"127.1"),
            Some(c"010.0.0.1"),
            Some(c"0x7f.0.0.1"),
            Some(c"256.0.0.1"),
            Some(c"1.2.3.4.5"),
            Some(c"1.2.3.4 "),
            Some(c"fe80::2%1"),
            Some(c"1:2:3:4:5:6:7:8:9"),
            Some(c"12345::1"),
            Some(c"::1.2.3.04"),
            Some(c""),
        ];
        let services: &[Option<&CStr>] =
            &[None, Some(c"7471"), Some(c"0"), Some(c"65535"), Some(c"65536"), Some(c"007471"), Some(c"+1"), Some(c" 1"), Some(c"")];
        let mut answered = 0;
        for &node in nodes {
            for &service in services {
                if node.is_none() && service.is_none() {
                    continue;
                }
                for family in [libc::AF_UNSPEC, libc::AF_INET, libc::AF_INET6] {
                    for flags in [0, libc::AI_PASSIVE, libc::AI_NUMERICHOST, libc::AI_PASSIVE | libc::AI_NUMERICHOST] {
                        for (st, pr) in [(0, 0), (libc::SOCK_STREAM, 0), (libc::SOCK_DGRAM, 0), (0, libc::IPPROTO_UDP), (libc::SOCK_STREAM, libc::IPPROTO_TCP)] {
                            let ai = hints(flags, family, st, pr);
                            let Some(fast) = first_result(node, service, false, &ai) else { continue };
                            answered += 1;
                            let libc = netdb::getaddrinfo(node, service, Some(&ai)).map(|l| l.first());
                            assert_eq!(Ok(fast), libc, "{node:?} {service:?} {ai:?}");
                        }
                    }
                }
            }
        }
        assert!(answered > 100, "{answered}");
    }

    #[test]
    fn declines() {
        let ai = hints(0, 0, 0, 0);
        assert!(first_result(Some(c"localhost"), None, false, &ai).is_none(), "a name");
        assert!(first_result(None, Some(c"7471"), false, &ai).is_none(), "no node, no family: libc's sort decides");
        assert!(first_result(Some(c"192.0.2.1"), Some(c"http"), false, &ai).is_none(), "a service name");
        assert!(first_result(Some(c"192.0.2.1"), None, true, &ai).is_none(), "NULL hints: AI_ADDRCONFIG");
        assert!(first_result(Some(c"192.0.2.1"), None, false, &hints(0, libc::AF_INET6, 0, 0)).is_none(), "family mismatch");
        assert!(first_result(Some(c"192.0.2.1"), None, false, &hints(0, 0, libc::SOCK_STREAM, libc::IPPROTO_UDP)).is_none());
        assert_eq!(parse_v4(b"192.0.2.1"), Some([192, 0, 2, 1]));
        for bad in [&b"1.2.3"[..], b"1.2.3.4.", b".1.2.3", b"1..2.3", b"1.2.3.256", b"01.2.3.4", b"1.2.3.1000", b"1.2.3.a", b"", b"1.2.3.04", b"1.2.3.00", b"300.1.1.1", b"1.2.3.4 ", b"1.2.3.-4", b"1.2.3.4\0"] {
            assert_eq!(parse_v4(bad), None, "{:?}", std::str::from_utf8(bad));
        }
        assert_eq!(parse_v4(b"0.10.100.255"), Some([0, 10, 100, 255]));
        assert_eq!(parse_v4(b"255.255.255.255"), Some([255; 4]));
        assert_eq!(parse_v4(b"0.0.0.0"), Some([0; 4]));
        // Every string inet_pton(AF_INET) reads the same way, and only those.
        for s in ["1.2.3.4", "10.0.0.1", "100.200.250.255", "0.0.0.1", "1.02.3.4", "1.2.3", "1.2.3.4.5", "999.1.1.1", "1.1.1.01", "1.1.1.1a"] {
            assert_eq!(parse_v4(s.as_bytes()), s.parse::<std::net::Ipv4Addr>().ok().map(|a| a.octets()), "{s}");
        }
        assert_eq!(parse_port(b"65535"), Some(65535));
        for ok in ["::", "::1", "1::", "2001:db8::1", "1:2:3:4:5:6:7:8", "::ffff:192.0.2.1", "1:2:3:4:5:6::8", "fe80::2", "ABCD:ef01::FfFf", "1:2:3:4:5:6:1.2.3.4"] {
            assert_eq!(parse_v6(ok.as_bytes()), Some(ok.parse::<Ipv6Addr>().unwrap().octets()), "{ok}");
        }
        for bad in [":1::", "1:::2", "1::2::3", "1:2:3:4:5:6:7:8::", "1:2:3:4:5:6:7", "1:", ":", "00000::1", "1:2:3:4:5:6:7:1.2.3.4", "::1.2.3", "1::2%1", "1:2:3:4:5:6:7:8:9"] {
            assert_eq!(parse_v6(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(parse_port(b"65536"), None);
    }
}
