// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! libc's name and service translation: `getaddrinfo(3)` behind an owning
//! list ([`AddrInfoList`], released with `freeaddrinfo` when dropped) whose
//! entries come out as plain Rust values ([`AddrInfo`]).

use crate::abi::sockaddr::SockAddr;
use std::ffi::{c_int, CStr, CString};
use std::ptr::NonNull;

/// The fields of `struct addrinfo` a caller may set as hints; the pointer
/// fields are always NULL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GaiHints {
    pub flags: c_int,
    pub family: c_int,
    pub socktype: c_int,
    pub protocol: c_int,
}

/// One result of libc's getaddrinfo, copied out of its list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddrInfo {
    pub flags: c_int,
    pub family: c_int,
    pub socktype: c_int,
    pub protocol: c_int,
    /// The socket address at `ai_addrlen` (empty when libc gave none).
    pub addr: SockAddr,
    pub canonname: Option<CString>,
}

/// The list libc's getaddrinfo returned; never empty.  Dropping it frees
/// it with `freeaddrinfo`.
pub struct AddrInfoList {
    head: NonNull<libc::addrinfo>,
}

// SAFETY: the list is owned exclusively by this value and only read through
// `&self`; glibc's freeaddrinfo may run on any thread.
unsafe impl Send for AddrInfoList {}

impl Drop for AddrInfoList {
    fn drop(&mut self) {
        // SAFETY: head is the list getaddrinfo returned, not yet freed, and
        // no entry borrowed from it outlives `self`.
        unsafe { libc::freeaddrinfo(self.head.as_ptr()) };
    }
}

impl AddrInfoList {
    /// The first result, copied.
    pub fn first(&self) -> AddrInfo {
        // SAFETY: head is a live node of the list owned by self.
        copy_entry(unsafe { self.head.as_ref() })
    }

    /// The first result's flags, family, socket type, protocol and
    /// canonical name, its address written into `addr` (no copy of the
    /// whole entry on the way: the hot path of a name lookup).
    #[inline]
    pub fn first_into(&self, addr: &mut SockAddr) -> (c_int, c_int, c_int, c_int, Option<CString>) {
        // SAFETY: head is a live node of the list owned by self.
        let ai = unsafe { self.head.as_ref() };
        addr_into(ai, addr);
        (ai.ai_flags, ai.ai_family, ai.ai_socktype, ai.ai_protocol, canonname(ai))
    }

    /// Every result, in libc's order, each copied when it is reached.
    pub fn iter(&self) -> impl Iterator<Item = AddrInfo> + '_ {
        let mut next: *const libc::addrinfo = self.head.as_ptr();
        std::iter::from_fn(move || {
            // SAFETY: next is NULL or a node of the list owned by self,
            // which this iterator borrows.
            let ai = unsafe { next.as_ref() }?;
            next = ai.ai_next;
            Some(copy_entry(ai))
        })
    }
}

fn copy_entry(ai: &libc::addrinfo) -> AddrInfo {
    let mut addr = SockAddr::EMPTY;
    addr_into(ai, &mut addr);
    AddrInfo { flags: ai.ai_flags, family: ai.ai_family, socktype: ai.ai_socktype, protocol: ai.ai_protocol, addr, canonname: canonname(ai) }
}

/// The entry's socket address at `ai_addrlen` into `addr` (empty when
/// libc gave none).
#[inline]
fn addr_into(ai: &libc::addrinfo, addr: &mut SockAddr) {
    if ai.ai_addr.is_null() || ai.ai_addrlen == 0 {
        addr.set_prefix(&[]);
    } else {
        // SAFETY: libc's result addresses are readable for ai_addrlen bytes
        // while the list lives (it outlives this call); they are
        // sockaddr_in/sockaddr_in6, never longer than sockaddr_storage.
        addr.set_prefix(unsafe { std::slice::from_raw_parts(ai.ai_addr.cast::<u8>(), ai.ai_addrlen as usize) });
    }
}

/// A copy of the entry's canonical name (libc gives one only for
/// AI_CANONNAME).
fn canonname(ai: &libc::addrinfo) -> Option<CString> {
    if ai.ai_canonname.is_null() {
        None
    } else {
        // SAFETY: a non-NULL ai_canonname is a NUL-terminated string owned
        // by the list.
        Some(unsafe { CStr::from_ptr(ai.ai_canonname) }.to_owned())
    }
}

/// libc `getaddrinfo(node, service, hints)`; `None` hints is NULL hints
/// (libc's defaults).  On failure, libc's non-zero `EAI_*` code unchanged
/// (`EAI_NONAME` for the impossible empty success).
pub fn getaddrinfo(node: Option<&CStr>, service: Option<&CStr>, hints: Option<&GaiHints>) -> Result<AddrInfoList, c_int> {
    let c_hints = hints.map(|h| {
        // SAFETY: all-zero is a valid addrinfo (NULL pointers, zero ints).
        let mut ai: libc::addrinfo = unsafe { std::mem::zeroed() };
        ai.ai_flags = h.flags;
        ai.ai_family = h.family;
        ai.ai_socktype = h.socktype;
        ai.ai_protocol = h.protocol;
        ai
    });
    let mut res: *mut libc::addrinfo = std::ptr::null_mut();
    // SAFETY: node and service are NULL or NUL-terminated strings, the hints
    // are NULL or a valid addrinfo, all live for the call; res is writable.
    let ret = unsafe {
        libc::getaddrinfo(
            node.map_or(std::ptr::null(), CStr::as_ptr),
            service.map_or(std::ptr::null(), CStr::as_ptr),
            c_hints.as_ref().map_or(std::ptr::null(), |h| h as *const libc::addrinfo),
            &mut res,
        )
    };
    if ret != 0 {
        return Err(ret);
    }
    NonNull::new(res).map(|head| AddrInfoList { head }).ok_or(libc::EAI_NONAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_v4() {
        let h = GaiHints { flags: libc::AI_NUMERICHOST, family: libc::AF_INET, socktype: libc::SOCK_STREAM, protocol: 0 };
        let l = getaddrinfo(Some(c"192.0.2.1"), Some(c"7471"), Some(&h)).unwrap();
        let a = l.first();
        assert_eq!(a.family, libc::AF_INET);
        assert_eq!(a.socktype, libc::SOCK_STREAM);
        assert_eq!(a.addr.len(), std::mem::size_of::<libc::sockaddr_in>());
        assert_eq!(&a.addr.as_bytes()[2..8], &[0x1d, 0x2f, 192, 0, 2, 1]);
        assert_eq!(l.iter().next(), Some(a));
    }

    #[test]
    fn errors_pass_through() {
        let h = GaiHints { flags: libc::AI_NUMERICHOST, ..Default::default() };
        assert_eq!(getaddrinfo(Some(c"not-a-number"), None, Some(&h)).err(), Some(libc::EAI_NONAME));
        assert!(getaddrinfo(None, None, None).is_err());
    }

    #[test]
    fn null_hints_passive_service() {
        // NULL hints: libc's defaults, every socket type.
        let l = getaddrinfo(Some(c"127.0.0.1"), Some(c"1"), None).unwrap();
        assert!(l.iter().count() >= 1);
        assert!(l.iter().all(|a| a.family == libc::AF_INET));
    }
}
