// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Address translation: rdma_getaddrinfo, rdma_freeaddrinfo and the
//! asynchronous rdma_resolve_addrinfo / rdma_query_addrinfo.
//!
//! The C side of [`rdmacm::internal::addrinfo`]: the caller's hints are copied into a
//! [`Hints`] value ([`hints_from_c`]); a result list of [`Rai`] values
//! becomes a chain of `rdma_addrinfo` nodes whose every piece comes from
//! libc malloc ([`to_c_list`]), because C may free it itself; the chain is
//! released member by member with free() ([`free_list`]).

use rdmacm::internal::abi::cma::*;
use rdmacm::internal::abi::sockaddr::{copy_addr, SockAddr};
use rdmacm::internal::addrinfo::{Hints, Rai};
use super::{entry_hot, entry, Errno};
use crate::symver;
use std::ffi::{c_char, c_int, c_void, CStr};

/// Copies `*hints` (NULL gives [`Hints::none`]).  EINVAL for an address
/// longer than `sockaddr_storage` (128 bytes), which is no socket address
/// (upstream would copy it into the result as it is).
///
/// # Safety
/// `hints` must be NULL or point to a readable `rdma_addrinfo` whose
/// non-NULL `ai_src_addr`, `ai_dst_addr` and `ai_route` are readable for
/// `ai_src_len`, `ai_dst_len` and `ai_route_len` bytes.
pub unsafe fn hints_from_c(hints: *const rdma_addrinfo) -> Result<Hints, Errno> {
    // SAFETY: per the contract, hints is NULL or readable.
    let Some(h) = (unsafe { hints.as_ref() }) else {
        return Ok(Hints::none());
    };
    let bytes = |p: *const u8, len: usize| -> Option<&[u8]> {
        if len == 0 || p.is_null() {
            None
        } else {
            // SAFETY: per the contract, each non-NULL pointer is readable
            // for its length.
            Some(unsafe { std::slice::from_raw_parts(p, len) })
        }
    };
    // No socket address is longer than sockaddr_storage: a longer length
    // would read past the caller's address; it is refused (EINVAL) before
    // anything is read.
    let too_long = |len: libc::socklen_t| len as usize > std::mem::size_of::<libc::sockaddr_storage>();
    let addr = |p: *const libc::sockaddr, len: libc::socklen_t| -> Result<Option<SockAddr>, Errno> {
        if too_long(len) {
            return Err(Errno::EINVAL);
        }
        bytes(p.cast(), len as usize).map(|b| SockAddr::from_bytes(b).ok_or(Errno::EINVAL)).transpose()
    };
    Ok(Hints {
        null: false,
        flags: h.ai_flags,
        family: h.ai_family,
        qp_type: h.ai_qp_type,
        port_space: h.ai_port_space,
        src: addr(h.ai_src_addr, h.ai_src_len)?,
        dst: addr(h.ai_dst_addr, h.ai_dst_len)?,
        route: bytes(h.ai_route as *const u8, h.ai_route_len).map(<[u8]>::to_vec),
        bad_src: h.ai_src_len != 0 && h.ai_src_addr.is_null(),
        bad_dst: h.ai_dst_len != 0 && h.ai_dst_addr.is_null(),
    })
}

/// A malloc'd copy of `b` (one byte is allocated for an empty slice, so
/// that an empty member is still a non-NULL pointer, as upstream's
/// `calloc(0, ...)`); a socket address of the connection manager's
/// lengths is copied in line ([`copy_addr`]).
#[inline]
fn malloc_copy(b: &[u8]) -> Result<*mut c_void, Errno> {
    // SAFETY: malloc of at least one byte, then a copy of b.len() bytes
    // into it.
    unsafe {
        let p = libc::malloc(b.len().max(1));
        if p.is_null() {
            return Err(Errno::ENOMEM);
        }
        copy_addr(std::slice::from_raw_parts_mut(p.cast::<u8>(), b.len()), b);
        Ok(p)
    }
}

fn strdup(s: &CStr) -> Result<*mut c_char, Errno> {
    // SAFETY: s is NUL-terminated.
    let p = unsafe { libc::strdup(s.as_ptr()) };
    if p.is_null() {
        Err(Errno::ENOMEM)
    } else {
        Ok(p)
    }
}

/// A malloc'd copy of `node` (every member pointer in it must be NULL or
/// malloc'd).
fn malloc_node(node: rdma_addrinfo) -> Result<*mut rdma_addrinfo, Errno> {
    // SAFETY: malloc of one rdma_addrinfo (malloc's alignment suits it),
    // then a write of a whole value into it.
    unsafe {
        let n = libc::malloc(std::mem::size_of::<rdma_addrinfo>()).cast::<rdma_addrinfo>();
        if n.is_null() {
            return Err(Errno::ENOMEM);
        }
        n.write(node);
        Ok(n)
    }
}

/// A chain under construction: freed when dropped (an allocation failed)
/// unless handed out by [`to_c_list`].
struct Chain(*mut rdma_addrinfo);

impl Drop for Chain {
    fn drop(&mut self) {
        // SAFETY: self.0 is NULL or a chain built by to_c_list, every member
        // malloc'd or NULL, and owned by nobody else.
        unsafe { free_list(self.0) };
    }
}

/// Builds the C chain of `list` (NULL for an empty list), every node and
/// member from libc malloc; ENOMEM frees what was built.
pub fn to_c_list(list: &[Rai]) -> Result<*mut rdma_addrinfo, Errno> {
    let mut chain = Chain(std::ptr::null_mut());
    for r in list.iter().rev() {
        let n = malloc_node(rdma_addrinfo {
            ai_flags: r.flags,
            ai_family: r.family,
            ai_qp_type: r.qp_type,
            ai_port_space: r.port_space,
            ai_src_len: 0,
            ai_dst_len: 0,
            ai_src_addr: std::ptr::null_mut(),
            ai_dst_addr: std::ptr::null_mut(),
            ai_src_canonname: std::ptr::null_mut(),
            ai_dst_canonname: std::ptr::null_mut(),
            ai_route_len: 0,
            ai_route: std::ptr::null_mut(),
            ai_connect_len: 0,
            ai_connect: std::ptr::null_mut(),
            ai_next: chain.0,
        })?;
        // Linked in at once, so that the chain frees the node (and whatever
        // members are set) if a member's allocation fails.
        chain.0 = n;
        // SAFETY: n is a fresh, fully initialised node; the chain holds it
        // but is not used while this reference lives.
        let node = unsafe { &mut *n };
        if let Some(s) = &r.src {
            node.ai_src_addr = malloc_copy(s.as_bytes())?.cast();
            node.ai_src_len = s.len() as libc::socklen_t;
        }
        if let Some(d) = &r.dst {
            node.ai_dst_addr = malloc_copy(d.as_bytes())?.cast();
            node.ai_dst_len = d.len() as libc::socklen_t;
        }
        if let Some(c) = &r.src_canonname {
            node.ai_src_canonname = strdup(c)?;
        }
        if let Some(c) = &r.dst_canonname {
            node.ai_dst_canonname = strdup(c)?;
        }
        if let Some(rt) = &r.route {
            node.ai_route = malloc_copy(rt)?;
            node.ai_route_len = rt.len();
        }
        if let Some(c) = &r.connect {
            node.ai_connect = malloc_copy(c)?;
            node.ai_connect_len = c.len();
        }
    }
    Ok(std::mem::replace(&mut chain.0, std::ptr::null_mut()))
}

/// The one-node chain of a single translation ([`rdmacm::internal::addrinfo::First`]):
/// the node and its address, two mallocs.
fn first_to_c(f: &rdmacm::internal::addrinfo::First) -> Result<*mut rdma_addrinfo, Errno> {
    let addr = malloc_copy(f.addr.as_bytes())?.cast::<libc::sockaddr>();
    let len = f.addr.len() as libc::socklen_t;
    let (src, dst) = if f.passive { (addr, std::ptr::null_mut()) } else { (std::ptr::null_mut(), addr) };
    malloc_node(rdma_addrinfo {
        ai_flags: f.flags,
        ai_family: f.family,
        ai_qp_type: f.qp_type,
        ai_port_space: f.port_space,
        ai_src_len: if f.passive { len } else { 0 },
        ai_dst_len: if f.passive { 0 } else { len },
        ai_src_addr: src,
        ai_dst_addr: dst,
        ai_src_canonname: std::ptr::null_mut(),
        ai_dst_canonname: std::ptr::null_mut(),
        ai_route_len: 0,
        ai_route: std::ptr::null_mut(),
        ai_connect_len: 0,
        ai_connect: std::ptr::null_mut(),
        ai_next: std::ptr::null_mut(),
    })
    .inspect_err(|_| {
        // SAFETY: addr was malloc'd above and is not referenced elsewhere.
        unsafe { libc::free(addr.cast()) }
    })
}

/// [`first_to_c`] with libc's canonical name of the result, if any, as
/// the source's (passive) or the destination's.
fn first_to_c_named(f: &rdmacm::internal::addrinfo::First, canonname: Option<&CStr>) -> Result<*mut rdma_addrinfo, Errno> {
    let head = first_to_c(f)?;
    if let Some(c) = canonname {
        let name = strdup(c).inspect_err(|_| {
            // SAFETY: head is the chain just built, owned by nobody else.
            unsafe { free_list(head) }
        })?;
        // SAFETY: head is the fresh node built above.
        let node = unsafe { &mut *head };
        if f.passive {
            node.ai_src_canonname = name;
        } else {
            node.ai_dst_canonname = name;
        }
    }
    Ok(head)
}

/// rdma_getaddrinfo of a name (or a literal only libc reads) under hints
/// `h` without addresses or route, with one call of libc's getaddrinfo
/// ([`rdmacm::internal::addrinfo::getaddrinfo_name`]): the C value, the
/// node written to `*res`; `None` for the general path.  Out of line, so
/// that the numeric path keeps its frame.
#[inline(never)]
fn name_to_c(node: Option<&CStr>, service: Option<&CStr>, h: &rdma_addrinfo, res: *mut *mut rdma_addrinfo) -> Option<Result<c_int, Errno>> {
    use rdmacm::internal::addrinfo::{self as ai, GaiError};
    let mut f = ai::First::EMPTY;
    Some(match ai::getaddrinfo_name(node, service, h.ai_flags, h.ai_family, h.ai_qp_type, h.ai_port_space, &mut f)? {
        Ok(canonname) => first_to_c_named(&f, canonname.as_deref()).map(|head| {
            // SAFETY: res is non-NULL and writable (C contract, checked by
            // the caller).
            unsafe { *res = head };
            0
        }),
        Err(GaiError::Sys(e)) => Err(e),
        Err(GaiError::Eai(code)) => Ok(code),
    })
}

/// free(p), skipping the call for the many NULL members of a node.
///
/// # Safety
/// `p` must be NULL or a live malloc'd block not used afterwards.
#[inline]
unsafe fn free_nonnull(p: *mut c_void) {
    if !p.is_null() {
        // SAFETY: per the contract.
        unsafe { libc::free(p) };
    }
}

/// Frees a whole `rdma_addrinfo` chain and every member, with libc `free`.
///
/// # Safety
/// `res` must be NULL or the head of a chain whose nodes and members were
/// all allocated with libc malloc (as this library and upstream's do) and
/// are not used afterwards.
pub unsafe fn free_list(mut res: *mut rdma_addrinfo) {
    while !res.is_null() {
        // SAFETY: per the contract, res is a live malloc'd node; we read its
        // members, free the non-NULL ones and then the node.
        unsafe {
            let node = res;
            res = (*node).ai_next;
            free_nonnull((*node).ai_connect);
            free_nonnull((*node).ai_route);
            free_nonnull((*node).ai_src_canonname.cast());
            free_nonnull((*node).ai_dst_canonname.cast());
            free_nonnull((*node).ai_src_addr.cast());
            free_nonnull((*node).ai_dst_addr.cast());
            libc::free(node.cast());
        }
    }
}

// Returns 0 and a list in `*res` (free it with rdma_freeaddrinfo), -1 with
// errno, or, unchanged, the non-zero `EAI_*` value of libc's getaddrinfo
// (errno untouched), exactly as upstream.
/// Translates a node and service into RDMA addresses and route data.
///
/// # Safety
/// `node` and `service` must be NULL or NUL-terminated strings; `hints` NULL or a readable
/// `rdma_addrinfo` whose address and route pointers cover their lengths; `res` writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    entry_hot(|| {
        use rdmacm::internal::addrinfo::{self as ai, GaiError};
        // SAFETY: node and service are NULL or NUL-terminated strings (the
        // C contract); they are only read during this call.
        let (node, service) = unsafe {
            (
                (!node.is_null()).then(|| CStr::from_ptr(node)),
                (!service.is_null()).then(|| CStr::from_ptr(service)),
            )
        };
        if node.is_none() && service.is_none() && hints.is_null() {
            return Err(Errno::EINVAL);
        }
        if res.is_null() {
            // Upstream would write through NULL; we refuse instead.
            log::debug!(target: "rdmacm", "rdma_getaddrinfo: res is NULL (EINVAL)");
            return Err(Errno::EINVAL);
        }
        // One translation (a numeric one, else libc's) under hints without
        // addresses or route: one node built straight into C memory.
        // SAFETY: hints is NULL or a readable rdma_addrinfo.
        if let Some(hr) = unsafe { hints.as_ref() } {
            if hr.ai_src_len == 0 && hr.ai_dst_len == 0 && hr.ai_route_len == 0 {
                if ai::numeric::maybe_literal(node) {
                    let mut f = ai::First::EMPTY;
                    match ai::getaddrinfo_numeric(node, service, hr.ai_flags, hr.ai_family, hr.ai_qp_type, hr.ai_port_space, &mut f) {
                        Some(Ok(())) => {
                            let head = first_to_c(&f)?;
                            // SAFETY: res is non-NULL and writable (C contract).
                            unsafe { *res = head };
                            return Ok(0);
                        }
                        Some(Err(GaiError::Sys(e))) => return Err(e),
                        Some(Err(GaiError::Eai(code))) => return Ok(code),
                        None => {}
                    }
                }
                // A name (most end in a letter past 'f': no numeric attempt),
                // or a literal only libc reads.
                if let Some(r) = name_to_c(node, service, hr, res) {
                    return r;
                }
            }
        }
        // SAFETY: hints is NULL or a readable rdma_addrinfo whose address
        // and route pointers are readable for their lengths.
        let h = unsafe { hints_from_c(hints) }?;
        // Hint addresses or route, ibacm, RAI_SA and NULL hints: libc's
        // resolver and file I/O make cancellation points, none of which
        // acts (this export runs without the boundary's guard; the
        // one-translation path above holds cancellation off around libc).
        match rdmacm::internal::sys::cancel::nocancel(|| ai::getaddrinfo(node, service, &h, &rdmacm::internal::cma::ai::CmaBackend)) {
            Ok(list) => {
                let head = to_c_list(&list)?;
                // SAFETY: res is non-NULL and writable (C contract).
                unsafe { *res = head };
                Ok(0)
            }
            Err(GaiError::Sys(e)) => Err(e),
            Err(GaiError::Eai(code)) => Ok(code),
        }
    })
}
symver!(rdma_getaddrinfo, "RDMACM_1.0");

/// Frees a list returned by rdma_getaddrinfo or rdma_query_addrinfo.
///
/// # Safety
/// `res` must be NULL or a list whose nodes and members were allocated with malloc and
/// are not used afterwards.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    entry_hot(|| {
        // SAFETY: the caller hands us a list that it got from this library
        // (or built itself with malloc'd members); every node and member is
        // released with free(), as upstream does.
        unsafe { free_list(res) };
        Ok(())
    })
}
symver!(rdma_freeaddrinfo, "RDMACM_1.0");

/// Starts an asynchronous address translation on an identifier.
///
/// # Safety
/// As rdma_getaddrinfo for `node`, `service` and `hints`; `id` NULL or an id of this library.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_resolve_addrinfo(
    id: *mut rdma_cm_id,
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
) -> c_int {
    entry(|| {
        // Checked against the library's table before any use.
        let (p, cm) = super::cm::id_of(id)?;
        // SAFETY: node and service are NULL or NUL-terminated strings, read
        // during this call only; hints is NULL or a readable rdma_addrinfo
        // whose address and route pointers cover their lengths.
        let (node, service, h) = unsafe {
            (
                (!node.is_null()).then(|| CStr::from_ptr(node)),
                (!service.is_null()).then(|| CStr::from_ptr(service)),
                hints_from_c(hints)?,
            )
        };
        cm.resolve_addrinfo(&p, node, service, &h)?;
        Ok(0)
    })
}
symver!(rdma_resolve_addrinfo, "RDMACM_1.4");

/// Hands over the result of a completed rdma_resolve_addrinfo.
///
/// # Safety
/// `id` must be NULL or an id of this library; `info` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_query_addrinfo(
    id: *mut rdma_cm_id,
    info: *mut *mut rdma_addrinfo,
) -> c_int {
    entry(|| {
        let info = super::nonnull(info)?;
        // Checked against the library's table before use.
        let (p, cm) = super::cm::id_of(id)?;
        let list = cm.query_addrinfo(&p)?;
        let head = to_c_list(&list)?;
        // SAFETY: info is non-NULL and writable (C contract).
        unsafe { *info.as_ptr() = head };
        Ok(0)
    })
}
symver!(rdma_query_addrinfo, "RDMACM_1.4");

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    #[test]
    fn c_roundtrip() {
        let r = Rai {
            flags: 1,
            family: libc::AF_INET,
            src: SockAddr::from_bytes(&[1, 2, 3]),
            route: Some(vec![]),
            connect: Some(vec![9; 36]),
            dst_canonname: Some(CString::new("x").unwrap()),
            ..Default::default()
        };
        let p = to_c_list(&[r.clone(), r]).unwrap();
        // SAFETY: p is a chain just built; it is freed once.
        unsafe {
            let n = &*p;
            assert_eq!((n.ai_flags, n.ai_family), (1, libc::AF_INET));
            assert_eq!(n.ai_src_len, 3);
            assert_eq!(std::slice::from_raw_parts(n.ai_src_addr.cast::<u8>(), 3), &[1, 2, 3]);
            assert!(n.ai_dst_addr.is_null() && n.ai_dst_len == 0);
            assert!(!n.ai_route.is_null());
            assert_eq!(n.ai_route_len, 0);
            assert_eq!(n.ai_connect_len, 36);
            assert_eq!(CStr::from_ptr(n.ai_dst_canonname).to_bytes(), b"x");
            assert!(n.ai_src_canonname.is_null());
            let m = &*n.ai_next;
            assert_eq!(m.ai_src_len, 3);
            assert!(m.ai_next.is_null());
            free_list(p);
        }
        assert!(to_c_list(&[]).unwrap().is_null());
    }

    #[test]
    fn hints_copied() {
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { hints_from_c(std::ptr::null()) }, Ok(Hints::none()));
        let mut dst = [2u8, 0, 0, 1, 192, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        let mut route = [7u8; 64];
        // SAFETY: all-zero is a valid rdma_addrinfo.
        let mut h: rdma_addrinfo = unsafe { std::mem::zeroed() };
        h.ai_flags = RAI_NUMERICHOST;
        h.ai_family = libc::AF_INET;
        h.ai_dst_addr = dst.as_mut_ptr().cast();
        h.ai_dst_len = 16;
        h.ai_route = route.as_mut_ptr().cast();
        h.ai_route_len = 64;
        h.ai_src_len = 16; // no address: flagged, not read
        // SAFETY: h and its buffers live for the call.
        let v = unsafe { hints_from_c(&h) }.unwrap();
        assert!(!v.null);
        assert_eq!((v.flags, v.family), (RAI_NUMERICHOST, libc::AF_INET));
        assert_eq!(v.dst.as_ref().map(SockAddr::as_bytes), Some(&dst[..]));
        assert_eq!(v.route.as_deref(), Some(&route[..]));
        assert!(v.src.is_none() && v.bad_src && !v.bad_dst);
        // An address longer than sockaddr_storage is no socket address.
        let mut long = [0u8; 129];
        h.ai_src_addr = long.as_mut_ptr().cast();
        h.ai_src_len = 129;
        // SAFETY: as above.
        assert_eq!(unsafe { hints_from_c(&h) }, Err(Errno::EINVAL));
        h.ai_src_len = 128;
        // SAFETY: as above.
        assert_eq!(unsafe { hints_from_c(&h) }.unwrap().src.map(|a| a.len()), Some(128));
    }
}
