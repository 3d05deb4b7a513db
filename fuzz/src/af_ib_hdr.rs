// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The private-data header of AF_IB connects (`ib_connect_hdr`), three ways:
//! * a connection request's private data from a hostile peer, any length
//!   and content, parsed as a listener on an AF_IB id sees it: never a
//!   panic, refused exactly when short or of a version the kernel refuses,
//!   and what parses builds back to bytes that parse the same;
//! * rdma_getaddrinfo's header for an IP entry (`acm::connect_hdr`, with
//!   socket addresses of any length and family) parsed back to the
//!   addresses it was built from;
//! * rdma_connect's private data, the header followed by the caller's
//!   bytes (`cma::conn::join_private_data`): the header comes through
//!   intact, the caller's bytes follow, nothing past the command's room.

use crate::Reader;
use rdmacm::internal::abi::ucma::RDMA_MAX_PRIVATE_DATA;
use rdmacm::internal::addrinfo::ib_hdr::{self, Hdr, Ips, LEN};
use rdmacm::internal::addrinfo::{acm, Rai, SockAddr};
use rdmacm::internal::cma::conn::join_private_data;

fn acceptable(d: &[u8]) -> bool {
    d.len() >= LEN && d[0] == 0 && matches!(d[1] >> 4, 4 | 6)
}

pub fn af_ib_one(data: &[u8]) {
    let mut r = Reader(data);
    match r.u8() % 3 {
        0 => {
            let d = r.0;
            match ib_hdr::parse(d) {
                Some(h) => {
                    assert!(acceptable(d), "accepted {d:?}");
                    let b = ib_hdr::build_hdr(&h);
                    assert_eq!(ib_hdr::parse(&b), Some(h));
                    // The bytes the header is read from are the same.
                    assert_eq!(b[0], d[0]);
                    assert_eq!(b[1] >> 4, d[1] >> 4);
                    assert_eq!(b[2..4], d[2..4]);
                    match h.ips {
                        Ips::V4 { .. } => assert!(b[16..20] == d[16..20] && b[32..36] == d[32..36]),
                        Ips::V6 { .. } => assert_eq!(b[4..36], d[4..36]),
                    }
                }
                None => assert!(!acceptable(d), "refused {d:?}"),
            }
        }
        1 => {
            let v6 = r.u8() & 1 != 0;
            let (sl, dl) = (usize::from(r.u8() % 40), usize::from(r.u8() % 40));
            let (s, d) = (r.bytes(sl), r.bytes(dl));
            let rai = Rai {
                family: if v6 { libc::AF_INET6 } else { libc::AF_INET },
                src: (sl > 0).then(|| SockAddr::from_prefix(&s)),
                dst: (dl > 0).then(|| SockAddr::from_prefix(&d)),
                ..Default::default()
            };
            let hdr = acm::connect_hdr(&rai).expect("an IP entry has a header");
            assert_eq!(hdr.len(), LEN);
            let at = |v: &[u8], off: usize, n: usize| -> Vec<u8> { (0..n).map(|i| v.get(off + i).copied().unwrap_or(0)).collect() };
            let h = ib_hdr::parse(&hdr).expect("our own header parses");
            assert_eq!(h.port, 0);
            match h.ips {
                Ips::V4 { src, dst } => {
                    assert!(!v6);
                    assert_eq!((src.to_vec(), dst.to_vec()), (at(&s, 4, 4), at(&d, 4, 4)));
                }
                Ips::V6 { src, dst } => {
                    assert!(v6);
                    assert_eq!((src.to_vec(), dst.to_vec()), (at(&s, 8, 16), at(&d, 8, 16)));
                }
            }
            assert_eq!(ib_hdr::build_hdr(&h).to_vec(), hdr);
            let af_ib = Rai { family: rdmacm::internal::abi::cma::AF_IB, ..rai };
            assert_eq!(acm::connect_hdr(&af_ib), None);
        }
        _ => {
            // The id's connect data: our header, or anything (any length).
            let connect = if r.u8() & 1 != 0 {
                let h = Hdr { port: 0, ips: if r.u8() & 1 != 0 { Ips::V6 { src: [r.u8(); 16], dst: [r.u8(); 16] } } else { Ips::V4 { src: [r.u8(); 4], dst: [r.u8(); 4] } } };
                ib_hdr::build_hdr(&h).to_vec()
            } else {
                let n = usize::from(r.u8()) * 2;
                r.bytes(n)
            };
            let user = match r.u8() % 3 {
                0 => None,
                _ => {
                    let n = usize::from(r.u8()) + usize::from(r.u8());
                    Some(r.bytes(n))
                }
            };
            let mut out = [0xeeu8; RDMA_MAX_PRIVATE_DATA];
            let len = join_private_data(&mut out, &connect, user.as_deref());
            // (at most what the length field holds: the bytes written are
            // the length, which a kept command's scrub relies on)
            let total = (connect.len() + user.as_ref().map_or(0, Vec::len)).min(usize::from(u8::MAX));
            assert_eq!(usize::from(len), total);
            let c = connect.len().min(total);
            assert_eq!(out[..c], connect[..c]);
            if let Some(u) = &user {
                assert_eq!(out[c..total], u[..total - c]);
            }
            assert!(out[total..].iter().all(|&b| b == 0xee), "written past the data");
            if acceptable(&connect) {
                assert_eq!(ib_hdr::parse(&out[..usize::from(len)]), ib_hdr::parse(&connect));
            }
        }
    }
}
