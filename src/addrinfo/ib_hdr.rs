// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The `ib_connect_hdr` (cma.h): the 36 bytes an AF_IB connect built from
//! IP addresses puts at the front of its private data, so that the
//! passive side's kernel can tell the IP addresses: CMA version (0), IP
//! version in the high nibble (4 or 6), a port (left 0, as upstream), and
//! source and destination addresses of 16 bytes each (an IPv4 address in
//! the last 4). rdma_getaddrinfo builds it ([`build`], into
//! `ai_connect`); rdma_connect prepends it to the caller's private data
//! (`cma::conn`); a listener on an AF_IB id receives it as the first bytes
//! of a request's private data, from a peer we do not trust ([`parse`]).
//! An AF_IB stream rsocket leaves [`LEN`] bytes of room for it in front of
//! its connect data (`rsocket`).
//! The fuzz target `af_ib_hdr` (fuzz/) runs parse and both round trips.
#![deny(unsafe_code)]

/// Size of `struct ib_connect_hdr`.
pub const LEN: usize = 36;

/// The addresses a header carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ips {
    V4 { src: [u8; 4], dst: [u8; 4] },
    V6 { src: [u8; 16], dst: [u8; 16] },
}

/// A header as read from private data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hdr {
    /// The port field, as sent (network order on the wire).
    pub port: u16,
    pub ips: Ips,
}

/// The header for `ips` (port 0).
pub fn build(ips: &Ips) -> [u8; LEN] {
    build_hdr(&Hdr { port: 0, ips: *ips })
}

/// The header's bytes.
pub fn build_hdr(h: &Hdr) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    b[2..4].copy_from_slice(&h.port.to_be_bytes());
    match h.ips {
        Ips::V4 { src, dst } => {
            b[1] = 4 << 4;
            b[16..20].copy_from_slice(&src);
            b[32..36].copy_from_slice(&dst);
        }
        Ips::V6 { src, dst } => {
            b[1] = 6 << 4;
            b[4..20].copy_from_slice(&src);
            b[20..36].copy_from_slice(&dst);
        }
    }
    b
}

/// Reads the header at the front of `d` (private data of any length): None
/// when `d` is shorter than the header, of another CMA version, or of an IP
/// version other than 4 or 6 (as the kernel refuses such a request).
pub fn parse(d: &[u8]) -> Option<Hdr> {
    let b: &[u8; LEN] = d.get(..LEN)?.try_into().ok()?;
    if b[0] != 0 {
        return None;
    }
    let port = u16::from_be_bytes([b[2], b[3]]);
    let at4 = |o: usize| [b[o], b[o + 1], b[o + 2], b[o + 3]];
    let at16 = |o: usize| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[o..o + 16]);
        a
    };
    let ips = match b[1] >> 4 {
        4 => Ips::V4 { src: at4(16), dst: at4(32) },
        6 => Ips::V6 { src: at16(4), dst: at16(20) },
        _ => return None,
    };
    Some(Hdr { port, ips })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        let v4 = Ips::V4 { src: [192, 0, 2, 1], dst: [198, 51, 100, 7] };
        let b = build(&v4);
        assert_eq!(b[..4], [0, 0x40, 0, 0]);
        assert_eq!(b[16..20], [192, 0, 2, 1]);
        assert_eq!(b[32..36], [198, 51, 100, 7]);
        assert_eq!(b[4..16], [0; 12]);
        assert_eq!(parse(&b), Some(Hdr { port: 0, ips: v4 }));
        let v6 = Ips::V6 { src: [0xfe; 16], dst: [1; 16] };
        let b6 = build(&v6);
        assert_eq!(b6[1], 0x60);
        // Followed by the caller's private data.
        let mut d = b6.to_vec();
        d.extend_from_slice(b"rest");
        assert_eq!(parse(&d).map(|h| h.ips), Some(v6));
    }

    #[test]
    fn bad_headers() {
        let b = build(&Ips::V4 { src: [1; 4], dst: [2; 4] });
        for n in 0..LEN {
            assert_eq!(parse(&b[..n]), None, "{n} bytes");
        }
        let mut v = b;
        v[0] = 1;
        assert_eq!(parse(&v), None, "CMA version");
        for ipv in [0u8, 0x50, 0x70, 0xf0, 0x04] {
            let mut v = b;
            v[1] = ipv;
            assert_eq!(parse(&v), None, "ip version {ipv:#x}");
        }
        // The low nibble is not part of the version.
        let mut v = b;
        v[1] = 0x4f;
        assert!(parse(&v).is_some());
    }
}
