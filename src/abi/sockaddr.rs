// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The library's one socket-address type, [`SockAddr`]: the bytes of a C
//! socket address (IPv4, IPv6, InfiniBand or any other family) and their
//! length, as C hands them over and as the kernel copies them.
//!
//! A socket address in C is a byte image whose length travels beside it
//! (`ai_src_len`, the ucma `addr_size`, `ai_addrlen`); that length is not
//! always its family's structure size (an `rdma_addrinfo` carries whatever
//! length its creator gave, the legacy ucma route answer is always
//! `sockaddr_in6`-sized).  So the value keeps both, and typed views
//! ([`SockAddr::as_v4`], [`SockAddr::as_ib`], ...) read the structure of
//! its family.  The bytes past `len` are always zero, so the kernel's
//! fixed-size fields are filled from [`SockAddr::storage`] directly.
//!
//! The connection manager takes an address at its family's length
//! (upstream's `ucma_addrlen`): [`SockAddr::cm_len`] is that rule and
//! [`SockAddr::for_cm`] the one conversion, used by every caller that
//! starts from a socket address rather than an `rdma_addrinfo`.

use crate::abi::cma::{ib_addr, rdma_sockaddr, sockaddr_ib, AF_IB};
use libc::{sockaddr, sockaddr_in, sockaddr_in6, AF_INET, AF_INET6};

/// The largest socket address (`sizeof(struct sockaddr_storage)`).
pub const SOCKADDR_MAX: usize = 128;

const IN_LEN: usize = std::mem::size_of::<sockaddr_in>();
const IN6_LEN: usize = std::mem::size_of::<sockaddr_in6>();
const IB_LEN: usize = std::mem::size_of::<sockaddr_ib>();
const _: () = assert!(IN_LEN == 16 && IN6_LEN == 28 && IB_LEN == 48);
const _: () = assert!(std::mem::size_of::<rdma_sockaddr>() == SOCKADDR_MAX);

/// A socket address: `len` bytes (at most [`SOCKADDR_MAX`]), zero past
/// them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SockAddr {
    len: u8,
    buf: [u8; SOCKADDR_MAX],
}

impl Default for SockAddr {
    fn default() -> Self {
        SockAddr::EMPTY
    }
}

impl std::fmt::Debug for SockAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SockAddr({:02x?})", self.as_bytes())
    }
}

/// The memory image of a plain C structure.
fn image<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: T is one of the socket address structures: integers and
    // arrays without padding, fully initialised; the slice stays within it.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
}

/// The structure `T` read from the start of `b` (zero past `b`'s end).
fn read<T: Copy>(b: &[u8; SOCKADDR_MAX]) -> T {
    assert!(std::mem::size_of::<T>() <= SOCKADDR_MAX);
    // SAFETY: T (a socket address structure: plain integers, any bit
    // pattern valid) fits in the buffer; read_unaligned has no alignment
    // requirement.
    unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) }
}

impl SockAddr {
    /// No address (length 0).
    pub const EMPTY: SockAddr = SockAddr { len: 0, buf: [0; SOCKADDR_MAX] };

    /// A copy of `b`; `None` when it is longer than [`SOCKADDR_MAX`].
    pub fn from_bytes(b: &[u8]) -> Option<SockAddr> {
        if b.len() > SOCKADDR_MAX {
            return None;
        }
        let mut a = SockAddr::EMPTY;
        a.buf[..b.len()].copy_from_slice(b);
        a.len = b.len() as u8;
        Some(a)
    }

    /// The first `min(len, SOCKADDR_MAX)` bytes of `b` (for fixed-size
    /// kernel fields, which are never longer).
    pub fn from_prefix(b: &[u8]) -> SockAddr {
        let n = b.len().min(SOCKADDR_MAX);
        let mut a = SockAddr::EMPTY;
        a.buf[..n].copy_from_slice(&b[..n]);
        a.len = n as u8;
        a
    }

    /// Makes this [`SockAddr::from_prefix`]`(b)` in place, without a
    /// temporary: the connection manager's lengths copied in line, and
    /// only the bytes of the old address past the new one cleared.
    pub fn set_prefix(&mut self, b: &[u8]) {
        let old = usize::from(self.len);
        let n = copy_addr(&mut self.buf, b);
        if old > n {
            self.buf[n..old].fill(0);
        }
        self.len = n as u8;
    }

    /// An IPv4 address.
    pub fn from_in(s: &sockaddr_in) -> SockAddr {
        SockAddr::from_prefix(image(s))
    }

    /// An IPv6 address.
    pub fn from_in6(s: &sockaddr_in6) -> SockAddr {
        SockAddr::from_prefix(image(s))
    }

    /// An InfiniBand address.
    pub fn from_ib(s: &sockaddr_ib) -> SockAddr {
        SockAddr::from_prefix(image(s))
    }

    /// An IPv4 address (`s_addr` as stored, network order) with port 0.
    pub fn v4(s_addr: u32) -> SockAddr {
        let mut a = SockAddr::EMPTY;
        a.buf[..2].copy_from_slice(&(AF_INET as u16).to_ne_bytes());
        a.buf[4..8].copy_from_slice(&s_addr.to_ne_bytes());
        a.len = IN_LEN as u8;
        a
    }

    /// An IPv6 address with port 0 and the given scope.
    pub fn v6(addr: [u8; 16], scope_id: u32) -> SockAddr {
        let mut a = SockAddr::EMPTY;
        a.buf[..2].copy_from_slice(&(AF_INET6 as u16).to_ne_bytes());
        a.buf[8..24].copy_from_slice(&addr);
        a.buf[24..28].copy_from_slice(&scope_id.to_ne_bytes());
        a.len = IN6_LEN as u8;
        a
    }

    /// The whole of one of `struct rdma_addr`'s unions (128 bytes).
    pub fn from_storage(s: &rdma_sockaddr) -> SockAddr {
        // SAFETY: every member of the union is plain data and `storage`
        // spans all of it.
        SockAddr::from_prefix(image(unsafe { &s.storage }))
    }

    /// The connection manager's length for `family` (upstream's
    /// `ucma_addrlen`): its structure's size, AF_IB only when the kernel
    /// takes AF_IB addresses, 0 for any other family.
    pub fn cm_len(family: i32, af_ib: bool) -> usize {
        match family {
            AF_INET => IN_LEN,
            AF_INET6 => IN6_LEN,
            AF_IB if af_ib => IB_LEN,
            _ => 0,
        }
    }

    /// The address as the connection manager takes it: cut to its
    /// family's length ([`SockAddr::cm_len`]); `None` (EINVAL) for a
    /// family it does not take or bytes shorter than that length.
    pub fn for_cm(b: &[u8], af_ib: bool) -> Option<SockAddr> {
        let family = if b.len() < 2 { 0 } else { i32::from(u16::from_ne_bytes([b[0], b[1]])) };
        let n = SockAddr::cm_len(family, af_ib);
        if n == 0 || b.len() < n {
            return None;
        }
        SockAddr::from_bytes(&b[..n])
    }

    /// Reads a C `struct sockaddr *` as the connection manager takes it
    /// ([`SockAddr::for_cm`]): `None` for NULL, `Some(None)` for a family
    /// it does not take.
    ///
    /// # Safety
    /// `sa` must be NULL or point to a readable socket address that is at
    /// least as large as its family's structure.
    pub unsafe fn from_raw_for_cm(sa: *const sockaddr, af_ib: bool) -> Option<Option<SockAddr>> {
        if sa.is_null() {
            return None;
        }
        // SAFETY: sa points to at least a sockaddr header (read without
        // an alignment requirement).
        let family = i32::from(unsafe { std::ptr::read_unaligned(std::ptr::addr_of!((*sa).sa_family)) });
        let n = SockAddr::cm_len(family, af_ib).max(2);
        // SAFETY: per the contract, the family's structure is readable (2
        // bytes, the family itself, for a family the CM does not take).
        let b = unsafe { std::slice::from_raw_parts(sa.cast::<u8>(), n) };
        Some(SockAddr::for_cm(b, af_ib))
    }

    /// The bytes of a C `struct sockaddr *` as the connection manager
    /// takes them, where the caller keeps them (no copy): its family's
    /// length ([`SockAddr::cm_len`]); `None` (EINVAL) for NULL or a family
    /// it does not take.
    ///
    /// # Safety
    /// As [`SockAddr::from_raw_for_cm`]; the bytes are not to change while
    /// the slice lives.
    #[inline]
    pub unsafe fn raw_for_cm<'a>(sa: *const sockaddr, af_ib: bool) -> Option<&'a [u8]> {
        if sa.is_null() {
            return None;
        }
        // SAFETY: sa points to at least a sockaddr header (read without
        // an alignment requirement).
        let family = i32::from(unsafe { std::ptr::read_unaligned(std::ptr::addr_of!((*sa).sa_family)) });
        match SockAddr::cm_len(family, af_ib) {
            0 => None,
            // SAFETY: per the contract, the family's structure is readable.
            n => Some(unsafe { std::slice::from_raw_parts(sa.cast::<u8>(), n) }),
        }
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len()]
    }

    /// All [`SOCKADDR_MAX`] bytes: the address, zero past its length.
    pub fn storage(&self) -> &[u8; SOCKADDR_MAX] {
        &self.buf
    }

    /// The address family (host order); AF_UNSPEC when shorter than the
    /// family field.
    pub fn family(&self) -> i32 {
        if self.len < 2 {
            libc::AF_UNSPEC
        } else {
            i32::from(u16::from_ne_bytes([self.buf[0], self.buf[1]]))
        }
    }

    /// The `sockaddr_in` of an AF_INET address (zero past its length).
    pub fn as_v4(&self) -> Option<sockaddr_in> {
        (self.family() == AF_INET).then(|| read(&self.buf))
    }

    /// The `sockaddr_in6` of an AF_INET6 address (zero past its length).
    pub fn as_v6(&self) -> Option<sockaddr_in6> {
        (self.family() == AF_INET6).then(|| read(&self.buf))
    }

    /// The `sockaddr_ib` of an AF_IB address (zero past its length).
    pub fn as_ib(&self) -> Option<sockaddr_ib> {
        (self.family() == AF_IB).then(|| self.ib_image())
    }

    /// The first 48 bytes read as a `sockaddr_ib`, whatever the family
    /// (the kernel's QUERY GID answer, whose GIDs sit where `sib_addr` is).
    pub fn ib_image(&self) -> sockaddr_ib {
        read(&self.buf)
    }

    /// Sets the port (network byte order) of an IPv4 or IPv6 address;
    /// other families are left alone.
    pub fn set_port(&mut self, port: u16) {
        if matches!(self.family(), AF_INET | AF_INET6) && self.len() >= 4 {
            self.buf[2..4].copy_from_slice(&port.to_ne_bytes());
        }
    }

    /// The port in network byte order, as upstream's `ucma_get_port`: for
    /// AF_IB the low 16 bits of the service id; 0 for other families and
    /// for bytes too short to hold it.
    pub fn port(&self) -> u16 {
        let b = self.as_bytes();
        match self.family() {
            AF_INET | AF_INET6 if b.len() >= 4 => u16::from_ne_bytes([b[2], b[3]]),
            AF_IB if b.len() >= 32 => {
                let sid = u64::from_be_bytes(std::array::from_fn(|i| b[24 + i]));
                (sid as u16).to_be()
            }
            _ => 0,
        }
    }
}

/// Copies a socket address's bytes to the front of `dst` (at most its
/// length) and returns their count; the connection manager's lengths (16,
/// 28 and 48 bytes) in line, as 16-byte copies: the first 16 bytes, the
/// last 16 (overlapping them for 28) and, for 48, the 16 between.  (One
/// copy per length, each of its own size, is what the compiler may merge
/// into a `memcpy` call of the variable length once several are in one
/// function.)
#[inline(always)]
pub fn copy_addr(dst: &mut [u8], src: &[u8]) -> usize {
    let n = src.len().min(dst.len());
    if n == IN_LEN || n == IN6_LEN || n == IB_LEN {
        let mut at = |i: usize| dst[i..i + 16].copy_from_slice(&src[i..i + 16]);
        at(0);
        at(n - 16);
        if n == IB_LEN {
            at(16);
        }
    } else {
        dst[..n].copy_from_slice(&src[..n]);
    }
    n
}

/// An InfiniBand address with the given GID, every other field zero but
/// the family.
pub fn ib_of_gid(gid: [u8; 16]) -> sockaddr_ib {
    sockaddr_ib { sib_family: AF_IB as u16, sib_addr: ib_addr { sib_raw: gid }, ..Default::default() }
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
        assert_eq!(SockAddr::from_in(&v4).port(), 7471u16.to_be());
        let ib = sockaddr_ib { sib_family: AF_IB as u16, sib_sid: 0x0106_1234u64.to_be(), ..Default::default() };
        assert_eq!(SockAddr::from_ib(&ib).port(), 0x1234u16.to_be());
        assert_eq!(SockAddr::EMPTY.port(), 0);
        let b = SockAddr::from_in(&v4);
        assert_eq!(b.len(), 16);
        assert_eq!(&b.as_bytes()[..4], &[AF_INET as u8, 0, 0x1d, 0x2f], "family, then the port in network order");
        assert_eq!(SockAddr::from_ib(&ib).len(), 48);
        // A short AF_IB image has no service id: port 0 (upstream would
        // read past it).
        assert_eq!(SockAddr::from_bytes(&SockAddr::from_ib(&ib).as_bytes()[..24]).unwrap().port(), 0);
    }

    #[test]
    fn views_and_storage() {
        let a = SockAddr::v4(u32::from_ne_bytes([192, 0, 2, 1]));
        assert_eq!(a.as_v4().unwrap().sin_addr.s_addr.to_ne_bytes(), [192, 0, 2, 1]);
        assert!(a.as_v6().is_none() && a.as_ib().is_none());
        let s = SockAddr::v6([0xfe; 16], 3);
        assert_eq!(s.as_v6().unwrap().sin6_scope_id, 3);
        assert!(s.storage()[28..].iter().all(|&b| b == 0), "zero past the length");
        let ib = sockaddr_ib { sib_family: AF_IB as u16, sib_pkey: 0x8001u16.to_be(), sib_scope_id: 7, ..ib_of_gid([9; 16]) };
        assert_eq!(SockAddr::from_ib(&ib).as_ib(), Some(ib));
        assert!(SockAddr::from_bytes(&[0; 129]).is_none());
        assert_eq!(SockAddr::from_bytes(&[0; 128]).unwrap().len(), 128);
        assert_eq!(SockAddr::EMPTY.family(), libc::AF_UNSPEC);
    }

    #[test]
    fn cm_rule() {
        let v4 = SockAddr::v4(1);
        let mut long = v4.as_bytes().to_vec();
        long.extend_from_slice(&[0xaa; 8]);
        assert_eq!(SockAddr::for_cm(&long, false), Some(v4), "cut to the family's length");
        assert_eq!(SockAddr::for_cm(&v4.as_bytes()[..15], false), None, "short: EINVAL");
        let ib = SockAddr::from_ib(&ib_of_gid([1; 16]));
        assert_eq!(SockAddr::for_cm(ib.as_bytes(), true), Some(ib));
        assert_eq!(SockAddr::for_cm(ib.as_bytes(), false), None, "AF_IB only when the kernel takes it");
        assert_eq!(SockAddr::for_cm(&[0; 16], true), None, "AF_UNSPEC");
        assert_eq!(SockAddr::for_cm(&[], true), None);
        // SAFETY: a full sockaddr_in6 image.
        let r = unsafe { SockAddr::from_raw_for_cm(SockAddr::v6([1; 16], 0).as_bytes().as_ptr().cast(), false) };
        assert_eq!(r, Some(Some(SockAddr::v6([1; 16], 0))));
        // SAFETY: NULL.
        assert_eq!(unsafe { SockAddr::from_raw_for_cm(std::ptr::null(), true) }, None);
    }

    /// The caller's bytes as the CM takes them, read in place: each family
    /// at its length, nothing for NULL or a family it does not take.
    #[test]
    fn raw_bytes_for_cm() {
        let raw = |a: &[u8], af_ib: bool| -> Option<Vec<u8>> {
            let mut b = a.to_vec();
            b.resize(SOCKADDR_MAX, 0xaa);
            // SAFETY: 128 readable bytes, unchanged while read.
            unsafe { SockAddr::raw_for_cm(b.as_ptr().cast(), af_ib) }.map(<[u8]>::to_vec)
        };
        let (v4, v6) = (SockAddr::v4(1), SockAddr::v6([1; 16], 3));
        let ib = SockAddr::from_ib(&ib_of_gid([2; 16]));
        assert_eq!(raw(v4.as_bytes(), false).as_deref(), Some(v4.as_bytes()));
        assert_eq!(raw(v6.as_bytes(), true).as_deref(), Some(v6.as_bytes()));
        assert_eq!(raw(ib.as_bytes(), true).as_deref(), Some(ib.as_bytes()));
        assert_eq!(raw(ib.as_bytes(), false), None, "AF_IB only when the kernel takes it");
        assert_eq!(raw(&[0; 16], true), None, "AF_UNSPEC");
        // SAFETY: NULL.
        assert_eq!(unsafe { SockAddr::raw_for_cm(std::ptr::null(), true) }, None);
    }

    /// set_prefix gives from_prefix's value whatever the address held.
    #[test]
    fn set_prefix_in_place() {
        let src: Vec<u8> = (1..=130).collect();
        for old in [0, 16, 28, 100, 128] {
            for n in [0, 2, 16, 28, 48, 100, 128, 130] {
                let mut a = SockAddr::from_prefix(&[0xee; 130][..old]);
                a.set_prefix(&src[..n]);
                assert_eq!(a, SockAddr::from_prefix(&src[..n]), "old {old}, new {n}");
            }
        }
    }

    /// Every length, the in-line ones (16, 28, 48) and the others: the
    /// bytes at the front, the rest untouched, the count returned.
    #[test]
    fn copy_addr_lengths() {
        let src: Vec<u8> = (1..=130).collect();
        for n in [0, 2, 15, 16, 17, 28, 48, 100, 128, 130] {
            let mut dst = [0u8; SOCKADDR_MAX];
            assert_eq!(copy_addr(&mut dst, &src[..n]), n.min(SOCKADDR_MAX), "length {n}");
            let m = n.min(SOCKADDR_MAX);
            assert_eq!(&dst[..m], &src[..m], "length {n}");
            assert!(dst[m..].iter().all(|&b| b == 0), "length {n}: nothing past it");
        }
    }
}
