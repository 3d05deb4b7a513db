// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Socket addresses as safe Rust values (IPv4, IPv6, InfiniBand).

use crate::abi::cma::{rdma_sockaddr, sockaddr_ib, AF_IB};
use libc::{sockaddr, sockaddr_in, sockaddr_in6, AF_INET, AF_INET6};

/// A socket address of one of the families the CM knows.
#[derive(Clone, Copy)]
pub enum SockAddr {
    V4(sockaddr_in),
    V6(sockaddr_in6),
    Ib(sockaddr_ib),
    /// Any other family (or AF_UNSPEC); only the family is kept.
    Other(u16),
}

impl SockAddr {
    /// An IPv4 address (`s_addr` as stored, network order) with port 0.
    pub fn v4(s_addr: u32) -> SockAddr {
        // SAFETY: sockaddr_in is integers only; all-zero is a valid value.
        let mut sin: sockaddr_in = unsafe { std::mem::zeroed() };
        sin.sin_family = AF_INET as libc::sa_family_t;
        sin.sin_addr.s_addr = s_addr;
        SockAddr::V4(sin)
    }

    /// An IPv6 address with port 0 and the given scope.
    pub fn v6(addr: [u8; 16], scope_id: u32) -> SockAddr {
        // SAFETY: sockaddr_in6 is integers only; all-zero is a valid value.
        let mut sin6: sockaddr_in6 = unsafe { std::mem::zeroed() };
        sin6.sin6_family = AF_INET6 as libc::sa_family_t;
        sin6.sin6_addr.s6_addr = addr;
        sin6.sin6_scope_id = scope_id;
        SockAddr::V6(sin6)
    }

    /// Reads the address held in one of `struct rdma_addr`'s unions.
    pub fn from_storage(s: &rdma_sockaddr) -> SockAddr {
        // SAFETY: every variant of the union is plain old data and the union
        // is as large as sockaddr_storage, so reading the family and then the
        // variant it names reads initialised bytes within bounds.
        unsafe {
            match s.addr.sa_family as i32 {
                AF_INET => SockAddr::V4(s.sin),
                AF_INET6 => SockAddr::V6(s.sin6),
                AF_IB => SockAddr::Ib(*(&s.storage as *const _ as *const sockaddr_ib)),
                f => SockAddr::Other(f as u16),
            }
        }
    }

    /// Reads a C `struct sockaddr *` according to its family.
    ///
    /// # Safety
    /// `sa` must be NULL or point to a readable socket address that is at
    /// least as large as its family's structure.
    pub unsafe fn from_raw(sa: *const sockaddr) -> Option<SockAddr> {
        if sa.is_null() {
            return None;
        }
        // SAFETY: per the contract, sa points to a readable sockaddr of the
        // size its family implies.
        unsafe {
            Some(match (*sa).sa_family as i32 {
                AF_INET => SockAddr::V4(*(sa as *const sockaddr_in)),
                AF_INET6 => SockAddr::V6(*(sa as *const sockaddr_in6)),
                AF_IB => SockAddr::Ib(*(sa as *const sockaddr_ib)),
                f => SockAddr::Other(f as u16),
            })
        }
    }

    /// The address as the bytes of its C structure (only the family for
    /// an unknown one).
    pub fn to_bytes(&self) -> Vec<u8> {
        fn bytes<T: Copy>(v: &T) -> Vec<u8> {
            // SAFETY: T is one of the socket address structures: plain
            // integers and arrays without padding, fully initialised.
            unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }.to_vec()
        }
        match self {
            SockAddr::V4(s) => bytes(s),
            SockAddr::V6(s) => bytes(s),
            SockAddr::Ib(s) => bytes(s),
            SockAddr::Other(f) => f.to_ne_bytes().to_vec(),
        }
    }

    /// The address family.
    pub fn family(&self) -> i32 {
        match self {
            SockAddr::V4(_) => AF_INET,
            SockAddr::V6(_) => AF_INET6,
            SockAddr::Ib(_) => AF_IB,
            SockAddr::Other(f) => *f as i32,
        }
    }
}

/// The port of an address in network byte order, as upstream reports it:
/// for AF_IB, the low 16 bits of the service id; 0 for other families.
pub fn port_of(a: &SockAddr) -> u16 {
    match a {
        SockAddr::V4(s) => s.sin_port,
        SockAddr::V6(s) => s.sin6_port,
        SockAddr::Ib(s) => (u64::from_be(s.sib_sid) as u16).to_be(),
        SockAddr::Other(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports() {
        // SAFETY: all-zero bytes are a valid sockaddr_in.
        let mut v4: sockaddr_in = unsafe { std::mem::zeroed() };
        v4.sin_family = AF_INET as u16;
        v4.sin_port = 7471u16.to_be();
        assert_eq!(port_of(&SockAddr::V4(v4)), 7471u16.to_be());
        let ib = sockaddr_ib {
            sib_family: AF_IB as u16,
            sib_sid: 0x0106_1234u64.to_be(),
            ..Default::default()
        };
        assert_eq!(port_of(&SockAddr::Ib(ib)), 0x1234u16.to_be());
        assert_eq!(port_of(&SockAddr::Other(0)), 0);
        let b = SockAddr::V4(v4).to_bytes();
        assert_eq!(b.len(), std::mem::size_of::<sockaddr_in>());
        assert_eq!(&b[..4], &[AF_INET as u8, 0, 0x1d, 0x2f], "family, then the port in network order");
        assert_eq!(SockAddr::Ib(ib).to_bytes().len(), 48);
    }
}
