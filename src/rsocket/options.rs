// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Socket options of both rsocket kinds: the values upstream keeps per
//! rsocket ([`SockOpts`]) and the one table rgetsockopt reads them through
//! ([`getsockopt`]), for streams and datagram sockets alike; what differs
//! by kind (SO_ERROR, the resolved paths, the TCP_INFO state) comes through
//! [`OptSource`]. Setting options stays with each kind (a stream passes
//! them to its connection manager id, a datagram socket to its UDP socket).
#![deny(unsafe_code)]

use super::verbs;
use crate::abi::cma::ibv_sa_path_rec;
use nix::errno::Errno;
use std::ffi::c_int;

/// `SOL_RDMA` and its options (<rdma/rsocket.h>).
pub const SOL_RDMA: c_int = 0x10000;
pub const RDMA_SQSIZE: c_int = 0;
pub const RDMA_RQSIZE: c_int = 1;
pub const RDMA_INLINE: c_int = 2;
pub const RDMA_IOMAPSIZE: c_int = 3;
pub const RDMA_ROUTE: c_int = 4;

/// The system's tcp_keepalive_time in seconds (7200 without it): the
/// keepalive idle time of an rsocket whose TCP_KEEPIDLE was not set.
pub fn system_keepalive_time() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_keepalive_time").ok().and_then(|t| t.trim().parse().ok()).unwrap_or(7200)
}

pub fn int_of(opt: Option<&[u8]>) -> Result<c_int, Errno> {
    let b = opt.ok_or(Errno::EINVAL)?;
    let b = b.get(..4).ok_or(Errno::EINVAL)?;
    Ok(c_int::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// What rgetsockopt writes: the value's bytes, and whether the length is
/// updated (upstream leaves it alone for a few options).
pub struct OptOut {
    pub bytes: Vec<u8>,
    pub set_len: bool,
}

pub fn int_out(v: c_int) -> OptOut {
    OptOut { bytes: v.to_ne_bytes().to_vec(), set_len: true }
}

/// The option values upstream keeps per rsocket, whatever its kind.
#[derive(Default)]
pub struct SockOpts {
    pub reuseaddr: bool,
    pub oobinline: bool,
    /// SO_LINGER reads l_onoff = 1 until set off (upstream's inverted bit).
    pub linger_off: bool,
    pub tcp_nodelay: bool,
    pub ip_tos: c_int,
    pub v6only: bool,
    /// SO_KEEPALIVE: a stream sends a keepalive control message every
    /// `keepalive_time` s while connected (a datagram socket never does).
    pub keepalive: bool,
    pub keepalive_time: u32,
    /// RDMA_ROUTE: path records to use instead of route resolution.
    pub route: Option<Vec<u8>>,
}

/// A socket's buffer and queue sizes, as rgetsockopt reports them.
pub struct Sizes {
    pub sbuf: u32,
    pub rbuf: u32,
    pub sq: u32,
    pub rq: u32,
    pub inline: u32,
    pub iomap: u32,
}

/// What rgetsockopt reads of a socket besides its [`SockOpts`].
pub trait OptSource {
    fn opts(&self) -> &SockOpts;
    fn sizes(&self) -> Sizes;
    /// SO_ERROR: the pending error, cleared by reading it.
    fn take_error(&mut self) -> c_int;
    /// The resolved paths (TCP_MAXSEG, RDMA_ROUTE); none before resolution.
    fn paths(&self) -> Vec<ibv_sa_path_rec>;
    /// Whether TCP_INFO reports the connection established.
    fn established(&self) -> bool;
}

/// `struct tcp_info` as upstream's library is built with it (the kernel's
/// <linux/tcp.h> of current distributions: 280 bytes; the fields it fills,
/// the state and the congestion window, sit where glibc's has them too).
const TCP_INFO_LEN: usize = 280;
const TCPI_STATE: usize = 0;
const TCPI_SND_CWND: usize = 80;
/// `TCP_ESTABLISHED` and `TCP_CLOSE` of <netinet/tcp.h>.
const TCP_ESTABLISHED: u8 = 1;
const TCP_CLOSE: u8 = 7;

/// rgetsockopt of either kind: the value of an option (see [`OptOut`]);
/// `room` is the caller's buffer size (RDMA_ROUTE fills as many records as
/// fit). Upstream reads every option from the rsocket itself with this one
/// table (nothing from a datagram socket's UDP socket).
pub fn getsockopt(s: &mut dyn OptSource, level: c_int, name: c_int, room: usize) -> Result<OptOut, Errno> {
    let z = s.sizes();
    let o = s.opts();
    let v = match level {
        libc::SOL_SOCKET => match name {
            libc::SO_REUSEADDR => int_out(o.reuseaddr as c_int),
            libc::SO_KEEPALIVE => int_out(o.keepalive as c_int),
            libc::SO_OOBINLINE => int_out(o.oobinline as c_int),
            libc::SO_RCVBUF => int_out(z.rbuf as c_int),
            libc::SO_SNDBUF => int_out(z.sbuf as c_int),
            libc::SO_LINGER => {
                let mut b = (!o.linger_off as c_int).to_ne_bytes().to_vec();
                b.extend_from_slice(&0i32.to_ne_bytes());
                OptOut { bytes: b, set_len: true }
            }
            libc::SO_ERROR => int_out(s.take_error()),
            libc::SO_BROADCAST => OptOut { bytes: Vec::new(), set_len: false },
            _ => return Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_IP => match name {
            libc::IP_TOS => int_out(o.ip_tos),
            _ => return Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_IPV6 => match name {
            libc::IPV6_V6ONLY => int_out(o.v6only as c_int),
            _ => return Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_TCP => match name {
            libc::TCP_CONGESTION | libc::TCP_KEEPCNT | libc::TCP_KEEPINTVL => OptOut { bytes: 1i32.to_ne_bytes().to_vec(), set_len: false },
            libc::TCP_KEEPIDLE => int_out(o.keepalive_time as c_int),
            libc::TCP_NODELAY => int_out(o.tcp_nodelay as c_int),
            libc::TCP_MAXSEG => {
                // The path MTU once resolved (IB MTU enum: 1 = 256 bytes), else 2048.
                int_out(match s.paths().first() {
                    Some(p) => 1 << (7 + p.mtu as u32).min(30),
                    None => 2048,
                })
            }
            libc::TCP_INFO => {
                let mut b = vec![0u8; TCP_INFO_LEN];
                b[TCPI_STATE] = if s.established() { TCP_ESTABLISHED } else { TCP_CLOSE };
                b[TCPI_SND_CWND..TCPI_SND_CWND + 4].copy_from_slice(&z.sq.to_ne_bytes());
                OptOut { bytes: b, set_len: true }
            }
            _ => return Err(Errno::ENOTSUP),
        },
        SOL_RDMA => match name {
            RDMA_SQSIZE => int_out(z.sq as c_int),
            RDMA_RQSIZE => int_out(z.rq as c_int),
            RDMA_INLINE => int_out(z.inline as c_int),
            RDMA_IOMAPSIZE => int_out(z.iomap as c_int),
            RDMA_ROUTE => {
                if let Some(r) = &o.route {
                    if room < r.len() {
                        return Err(Errno::EINVAL);
                    }
                    OptOut { bytes: r.clone(), set_len: true }
                } else {
                    let one = std::mem::size_of::<crate::abi::cma::ibv_path_data>();
                    if room < one {
                        return Err(Errno::EINVAL);
                    }
                    let mut b = Vec::new();
                    for p in s.paths().iter().take(room / one) {
                        b.extend_from_slice(&path_data_bytes(p));
                    }
                    OptOut { bytes: b, set_len: true }
                }
            }
            _ => return Err(Errno::ENOTSUP),
        },
        _ => return Err(Errno::ENOTSUP),
    };
    Ok(v)
}

/// A resolved path as `struct ibv_path_data` (the wire-format record
/// RDMA_ROUTE takes and gives).
pub fn path_data_bytes(p: &crate::abi::cma::ibv_sa_path_rec) -> Vec<u8> {
    let mut b = vec![0u8; std::mem::size_of::<crate::abi::cma::ibv_path_data>()];
    // flags, reserved, then struct ibv_path_record (service_id first).
    b[0..4].copy_from_slice(&(p.preference as u32).to_ne_bytes());
    let r = 8;
    b[r + 8..r + 24].copy_from_slice(&gid_bytes(&p.dgid));
    b[r + 24..r + 40].copy_from_slice(&gid_bytes(&p.sgid));
    b[r + 40..r + 42].copy_from_slice(&p.dlid.to_ne_bytes());
    b[r + 42..r + 44].copy_from_slice(&p.slid.to_ne_bytes());
    let fl_hop = (u32::from_be(p.flow_label) << 8) | p.hop_limit as u32;
    b[r + 44..r + 48].copy_from_slice(&fl_hop.to_be_bytes());
    b[r + 48] = p.traffic_class;
    b[r + 49] = ((p.reversible as u8) << 7) | 1;
    b[r + 50..r + 52].copy_from_slice(&p.pkey.to_ne_bytes());
    b[r + 52..r + 54].copy_from_slice(&(p.sl as u16).to_be_bytes());
    // "exactly" selectors (2 << 6) with each value.
    b[r + 54] = p.mtu | 2 << 6;
    b[r + 55] = p.rate | 2 << 6;
    b[r + 56] = p.packet_life_time | 2 << 6;
    b
}

pub fn gid_bytes(g: &crate::abi::cma::ibv_gid) -> [u8; 16] {
    verbs::gid_bytes(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket for the table alone: fixed sizes, a pending error, paths on demand.
    struct Fake {
        opts: SockOpts,
        err: c_int,
        paths: usize,
        established: bool,
    }

    impl OptSource for Fake {
        fn opts(&self) -> &SockOpts {
            &self.opts
        }
        fn sizes(&self) -> Sizes {
            Sizes { sbuf: 1, rbuf: 2, sq: 3, rq: 4, inline: 5, iomap: 6 }
        }
        fn take_error(&mut self) -> c_int {
            std::mem::take(&mut self.err)
        }
        fn paths(&self) -> Vec<ibv_sa_path_rec> {
            // A path record with an MTU code of 3 (1024 bytes).
            let gid = crate::abi::cma::ibv_gid { raw: [0; 16] };
            let p = ibv_sa_path_rec {
                dgid: gid,
                sgid: gid,
                dlid: 0,
                slid: 0,
                raw_traffic: 0,
                flow_label: 0,
                hop_limit: 0,
                traffic_class: 0,
                reversible: 0,
                numb_path: 0,
                pkey: 0,
                sl: 0,
                mtu_selector: 0,
                mtu: 3,
                rate_selector: 0,
                rate: 0,
                packet_life_time_selector: 0,
                packet_life_time: 0,
                preference: 0,
            };
            vec![p; self.paths]
        }
        fn established(&self) -> bool {
            self.established
        }
    }

    fn int(v: c_int) -> Vec<u8> {
        v.to_ne_bytes().to_vec()
    }

    /// The one table: each option reads what the socket keeps, SO_ERROR is
    /// cleared by reading it, the few options upstream does not update the
    /// length for say so, unknown ones are ENOTSUP.
    #[test]
    fn one_table_for_both_kinds() {
        let mut f = Fake { opts: SockOpts { reuseaddr: true, keepalive_time: 7, ip_tos: 16, ..Default::default() }, err: libc::ECONNREFUSED, paths: 0, established: false };
        let get = |f: &mut Fake, level, name, room| getsockopt(f, level, name, room);
        assert_eq!(get(&mut f, libc::SOL_SOCKET, libc::SO_REUSEADDR, 4).map(|o| o.bytes), Ok(int(1)));
        assert_eq!(get(&mut f, libc::SOL_SOCKET, libc::SO_SNDBUF, 4).map(|o| o.bytes), Ok(int(1)));
        assert_eq!(get(&mut f, libc::SOL_SOCKET, libc::SO_RCVBUF, 4).map(|o| o.bytes), Ok(int(2)));
        assert_eq!(get(&mut f, libc::SOL_SOCKET, libc::SO_ERROR, 4).map(|o| o.bytes), Ok(int(libc::ECONNREFUSED)));
        assert_eq!(get(&mut f, libc::SOL_SOCKET, libc::SO_ERROR, 4).map(|o| o.bytes), Ok(int(0)), "read once");
        let l = get(&mut f, libc::SOL_SOCKET, libc::SO_LINGER, 8).expect("linger");
        assert_eq!((l.bytes, l.set_len), ([int(1), int(0)].concat(), true), "l_onoff 1 until set off");
        assert!(!get(&mut f, libc::SOL_SOCKET, libc::SO_BROADCAST, 4).expect("broadcast").set_len);
        assert_eq!(get(&mut f, libc::IPPROTO_IP, libc::IP_TOS, 4).map(|o| o.bytes), Ok(int(16)));
        assert_eq!(get(&mut f, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 4).map(|o| o.bytes), Ok(int(7)));
        assert_eq!(get(&mut f, libc::IPPROTO_TCP, libc::TCP_MAXSEG, 4).map(|o| o.bytes), Ok(int(2048)), "no path yet");
        let ti = get(&mut f, libc::IPPROTO_TCP, libc::TCP_INFO, 300).expect("tcp_info").bytes;
        assert_eq!((ti.len(), ti[TCPI_STATE], ti[TCPI_SND_CWND]), (TCP_INFO_LEN, TCP_CLOSE, 3));
        for (name, v) in [(RDMA_SQSIZE, 3), (RDMA_RQSIZE, 4), (RDMA_INLINE, 5), (RDMA_IOMAPSIZE, 6)] {
            assert_eq!(get(&mut f, SOL_RDMA, name, 4).map(|o| o.bytes), Ok(int(v)));
        }
        let one = std::mem::size_of::<crate::abi::cma::ibv_path_data>();
        assert_eq!(get(&mut f, SOL_RDMA, RDMA_ROUTE, one - 1).err(), Some(Errno::EINVAL));
        assert_eq!(get(&mut f, SOL_RDMA, RDMA_ROUTE, one).map(|o| o.bytes.len()), Ok(0));
        assert_eq!(get(&mut f, libc::SOL_SOCKET, libc::SO_TYPE, 4).err(), Some(Errno::ENOTSUP));
        assert_eq!(get(&mut f, libc::SOL_UDP, 1, 4).err(), Some(Errno::ENOTSUP));
        // Resolved paths and an established connection.
        f.paths = 3;
        f.established = true;
        assert_eq!(get(&mut f, libc::IPPROTO_TCP, libc::TCP_MAXSEG, 4).map(|o| o.bytes), Ok(int(1024)));
        assert_eq!(get(&mut f, libc::IPPROTO_TCP, libc::TCP_INFO, 300).expect("tcp_info").bytes[TCPI_STATE], TCP_ESTABLISHED);
        assert_eq!(get(&mut f, SOL_RDMA, RDMA_ROUTE, 2 * one + 1).map(|o| o.bytes.len()), Ok(2 * one), "as many records as fit");
        // The caller's own path records win, whole or not at all.
        f.opts.route = Some(vec![9; 10]);
        assert_eq!(get(&mut f, SOL_RDMA, RDMA_ROUTE, 9).err(), Some(Errno::EINVAL));
        assert_eq!(get(&mut f, SOL_RDMA, RDMA_ROUTE, 10).map(|o| o.bytes), Ok(vec![9; 10]));
    }
}
