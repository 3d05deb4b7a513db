// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rdma_getaddrinfo's translation pipeline.
//!
//! It works on plain Rust values only: [`Hints`] in, a list of [`Rai`]
//! out.  The C API copies the caller's hints in and builds (and frees) the
//! malloc'd `rdma_addrinfo` chain (`crate::capi::addrinfo`); libc's
//! getaddrinfo is reached through [`crate::sys::netdb`].  The steps follow
//! upstream's behaviour exactly (see `man/rdma_getaddrinfo.3` for the
//! user-visible contract):
//!
//! 1. nothing to translate (no node, service or hints): `EINVAL`;
//! 2. the kernel ABI check (`EPERM` when the rdma_cm ABI is unsupported).
//!    Unlike upstream, a host without any RDMA device is *not* an error:
//!    plain address translation does not need one;
//! 3. `RAI_SA`: the IB service lookup through the kernel ([`CmBackend`]);
//! 4. libc `getaddrinfo` for node/service, first result only, `EAI_*`
//!    codes passed through unchanged; numeric literals and a family's
//!    wildcard or loopback address are parsed here instead, with the same
//!    result ([`numeric`]);
//! 5. the source address from the hints when the result has none;
//! 6. for active (non-passive) results, route data from ibacm
//!    ([`crate::addrinfo::acm`]), silently skipped when no daemon listens.

#![deny(unsafe_code)]

pub mod acm;
pub mod ib_hdr;
pub mod numeric;
use crate::abi::cma::*;
pub use crate::abi::sockaddr::SockAddr;
use crate::sys::netdb;

use nix::errno::Errno;
use std::sync::OnceLock;
use std::ffi::{c_int, CStr, CString};
use std::os::fd::BorrowedFd;

/// Upstream's private flag (cma.h) used by rdma_resolve_route's internal
/// lookup: ibacm route only, no AF_IB entry.
pub const RAI_ROUTEONLY: c_int = 0x0100_0000;

/// Size of `struct ib_connect_hdr` (cma.h): version, ip version, port, two
/// 16-byte addresses.
pub const IB_CONNECT_HDR_LEN: usize = ib_hdr::LEN;

/// Why rdma_getaddrinfo failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GaiError {
    /// -1 with this errno.
    Sys(Errno),
    /// A non-zero libc getaddrinfo return (`EAI_*`), returned unchanged
    /// with errno untouched.
    Eai(c_int),
}

impl From<Errno> for GaiError {
    fn from(e: Errno) -> Self {
        GaiError::Sys(e)
    }
}

/// One `struct rdma_addrinfo` node as a Rust value.  Addresses keep the
/// length they have in C (`ai_*_len`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rai {
    pub flags: c_int,
    pub family: c_int,
    pub qp_type: c_int,
    pub port_space: c_int,
    pub src: Option<SockAddr>,
    pub dst: Option<SockAddr>,
    pub src_canonname: Option<CString>,
    pub dst_canonname: Option<CString>,
    /// `Some(empty)` is a non-NULL pointer with length 0 (what upstream's
    /// `calloc(0, ...)` gives when ibacm answers without a path).
    pub route: Option<Vec<u8>>,
    pub connect: Option<Vec<u8>>,
}

impl Rai {
    pub fn src_len(&self) -> usize {
        self.src.as_ref().map_or(0, SockAddr::len)
    }
    pub fn dst_len(&self) -> usize {
        self.dst.as_ref().map_or(0, SockAddr::len)
    }
    pub fn route_len(&self) -> usize {
        self.route.as_ref().map_or(0, Vec::len)
    }
}

/// The caller's hints (the C API copies them out of C memory).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hints {
    /// True when the caller passed NULL (libc then gets NULL hints too,
    /// with its own defaults AI_V4MAPPED | AI_ADDRCONFIG).
    pub null: bool,
    pub flags: c_int,
    pub family: c_int,
    pub qp_type: c_int,
    pub port_space: c_int,
    pub src: Option<SockAddr>,
    pub dst: Option<SockAddr>,
    pub route: Option<Vec<u8>>,
    /// The caller gave a length with a NULL address (upstream would
    /// dereference NULL; we fail with EINVAL where it would crash).
    pub bad_src: bool,
    pub bad_dst: bool,
}

impl Hints {
    /// NULL hints: behave as all-zero hints.
    pub fn none() -> Hints {
        Hints { null: true, ..Default::default() }
    }

    pub fn route_len(&self) -> usize {
        self.route.as_ref().map_or(0, Vec::len)
    }
}

/// What rdma_getaddrinfo needs from the connection manager and the
/// devices; the connection manager implements it (`crate::cma::gai`), tests
/// use doubles.
pub trait CmBackend: Sync + Send {
    /// Whether the kernel accepts AF_IB addresses (upstream's
    /// `af_ib_support`, probed by binding an AF_IB id).  Decides whether an
    /// AF_IB entry is prepended to ibacm results.
    fn af_ib_supported(&self) -> bool;
    /// Upstream's RAI_SA path first creates an event channel (opens the
    /// rdma_cm device as `sys::netlink` finds it); its error is the lookup's error.
    fn check_event_channel(&self) -> Result<(), Errno> {
        crate::sys::netlink::check_ucma_open().inspect_err(|e| {
            log::debug!(target: "rdmacm", "rdma_getaddrinfo: RAI_SA: cannot open the rdma_cm device: {e}");
        })
    }
    /// GID index 0 of every port with an InfiniBand link layer in state
    /// ACTIVE or better, in device-list then port order.
    fn ib_sa_gids(&self) -> Vec<[u8; 16]>;
    /// The kernel's `RESOLVE_IB_SERVICE` on an AF_IB id bound to `gid`,
    /// waiting for RDMA_CM_EVENT_ADDRINFO_RESOLVED.  Returns the entries
    /// the kernel produced (flags RAI_SA, AF_IB, RDMA_PS_IB, destination
    /// `sockaddr_ib` and route) without source addresses, or the error.
    fn resolve_ib_service(&self, gid: &[u8; 16], service: &CStr) -> Result<Vec<Rai>, Errno>;
}

/// The kernel rdma_cm ABI versions this library speaks.
const ABI_MIN: i64 = 3;
const ABI_MAX: i64 = 4;

/// Upstream's init check: the rdma_cm ABI version (sysfs; assumed
/// supported when unknown).  Unlike upstream, no device is required.
fn check_abi() -> Result<(), Errno> {
    static ABI: OnceLock<Option<i64>> = OnceLock::new();
    // (first use reads netlink or sysfs: no cancellation acts there, this
    // path runs without the exports' guard)
    let v = *ABI.get_or_init(|| crate::sys::cancel::nocancel(crate::sys::ucma::read_abi_version));
    match v {
        Some(v) if !(ABI_MIN..=ABI_MAX).contains(&v) => {
            log::debug!(target: "rdmacm", "rdma_getaddrinfo: kernel rdma_cm ABI {v} unsupported (EPERM)");
            Err(Errno::EPERM)
        }
        _ => Ok(()),
    }
}


/// Service id and mask (big-endian) for port space `ps` and the port of
/// `addr` (upstream's `ucma_set_sid`).
pub fn sid_for(ps: c_int, addr: Option<&SockAddr>) -> (u64, u64) {
    let port = addr.map_or(0, SockAddr::port);
    let ps = u64::from(ps as u32);
    let sid = ((ps << 16).wrapping_add(u64::from(u16::from_be(port)))).to_be();
    let mut mask = 0u64;
    if ps != 0 {
        mask = RDMA_IB_IP_PS_MASK.to_be();
    }
    if port != 0 {
        mask |= RDMA_IB_IP_PORT_MASK.to_be();
    }
    (sid, mask)
}

/// Converts the libc result address to `sockaddr_ib` (RAI_FAMILY +
/// AF_IB + RAI_NUMERICHOST).  From an IPv6 address: pkey 0xffff, flow
/// info, GID = the IPv6 address, service id from the port space and port,
/// scope id kept.  From an IPv4 address (where upstream reads past the
/// end of a `sockaddr_in`): the GID is the IPv4-mapped IPv6 address
/// `::ffff:a.b.c.d`, flow info and scope id 0, service id as for IPv6.
pub fn to_sockaddr_ib(ps: c_int, a: &SockAddr) -> SockAddr {
    let mut s = sockaddr_ib { sib_family: AF_IB as u16, sib_pkey: 0xffffu16.to_be(), ..Default::default() };
    match (a.as_v6(), a.as_v4()) {
        (Some(v6), _) if a.len() >= 28 => {
            s.sib_flowinfo = v6.sin6_flowinfo;
            s.sib_addr.sib_raw = v6.sin6_addr.s6_addr;
            s.sib_scope_id = u64::from(v6.sin6_scope_id);
        }
        (_, Some(v4)) if a.len() >= 8 => {
            s.sib_addr.sib_raw[10] = 0xff;
            s.sib_addr.sib_raw[11] = 0xff;
            s.sib_addr.sib_raw[12..16].copy_from_slice(&v4.sin_addr.s_addr.to_ne_bytes());
        }
        _ => {}
    }
    let (sid, mask) = sid_for(ps, Some(a));
    s.sib_sid = sid;
    s.sib_sid_mask = mask;
    SockAddr::from_ib(&s)
}

/// The libc hints upstream derives from rdma hints.
pub fn libc_hints(h: &Hints) -> netdb::GaiHints {
    libc_hints_of(h.flags, h.family, h.qp_type, h.port_space)
}

/// [`libc_hints`] from the hints' flags, family, QP type and port space.
pub fn libc_hints_of(flags: c_int, family: c_int, qp_type: c_int, port_space: c_int) -> netdb::GaiHints {
    let mut ai = netdb::GaiHints::default();
    if flags & RAI_PASSIVE != 0 {
        ai.flags = libc::AI_PASSIVE;
    }
    if flags & RAI_NUMERICHOST != 0 {
        ai.flags |= libc::AI_NUMERICHOST;
    }
    if family != AF_IB {
        ai.family = family;
    }
    ai.socktype = match qp_type as u32 {
        IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_XRC_SEND | IBV_QPT_XRC_RECV => libc::SOCK_STREAM,
        IBV_QPT_UD => libc::SOCK_DGRAM,
        _ => 0,
    };
    ai.protocol = match port_space as u32 {
        RDMA_PS_TCP => libc::IPPROTO_TCP,
        RDMA_PS_IPOIB | RDMA_PS_UDP => libc::IPPROTO_UDP,
        RDMA_PS_IB => match ai.socktype {
            libc::SOCK_STREAM => libc::IPPROTO_TCP,
            libc::SOCK_DGRAM => libc::IPPROTO_UDP,
            _ => 0,
        },
        _ => 0,
    };
    ai
}

/// libc getaddrinfo, first result only (parsed here when the answer
/// does not need libc: [`numeric::first_result`]).
pub fn libc_getaddrinfo(node: Option<&CStr>, service: Option<&CStr>, h: &Hints) -> Result<netdb::AddrInfo, c_int> {
    let hints = libc_hints(h);
    if let Some(ai) = numeric::first_result(node, service, h.null, &hints) {
        return Ok(ai);
    }
    match netdb::getaddrinfo(node, service, (!h.null).then_some(&hints)) {
        Ok(list) => Ok(list.first()),
        Err(code) => {
            log::debug!(target: "rdmacm", "rdma_getaddrinfo: libc getaddrinfo: {code} (passed through)");
            Err(code)
        }
    }
}

/// Builds the result node from the first libc result.
pub fn from_libc(h: &Hints, ai: netdb::AddrInfo) -> Rai {
    let f = first_fields(h.flags, h.family, h.qp_type, h.port_space, &ai);
    let mut r = Rai { flags: f.flags, family: f.family, qp_type: f.qp_type, port_space: f.port_space, ..Default::default() };
    if f.passive {
        r.src_canonname = ai.canonname;
        r.src = Some(f.addr);
    } else {
        r.dst_canonname = ai.canonname;
        r.dst = Some(f.addr);
    }
    r
}

/// The fields of the result node made from libc's first result (its
/// canonical name aside), for hints with these flags, family, QP type and
/// port space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct First {
    pub flags: c_int,
    pub family: c_int,
    pub qp_type: c_int,
    pub port_space: c_int,
    /// The address is the source (a passive result), else the destination.
    pub passive: bool,
    pub addr: SockAddr,
}

impl First {
    /// No result yet: what a lookup fills in.
    pub const EMPTY: First = First { flags: 0, family: 0, qp_type: 0, port_space: 0, passive: false, addr: SockAddr::EMPTY };
}

fn first_fields(h_flags: c_int, h_family: c_int, h_qp_type: c_int, h_port_space: c_int, ai: &netdb::AddrInfo) -> First {
    let mut f = First { addr: ai.addr, ..First::EMPTY };
    fill_first(h_flags, h_family, h_qp_type, h_port_space, ai.flags, ai.family, ai.socktype, ai.protocol, &mut f);
    f
}

/// [`first_fields`] in place: `f.addr` holds libc's address and becomes
/// the result's.
#[allow(clippy::too_many_arguments)]
fn fill_first(h_flags: c_int, h_family: c_int, h_qp_type: c_int, h_port_space: c_int, ai_flags: c_int, ai_family: c_int, socktype: c_int, protocol: c_int, f: &mut First) {
    let qp_type = if h_qp_type != 0 {
        h_qp_type
    } else {
        match socktype {
            libc::SOCK_STREAM => IBV_QPT_RC as c_int,
            libc::SOCK_DGRAM => IBV_QPT_UD as c_int,
            _ => 0,
        }
    };
    let port_space = if h_port_space != 0 {
        h_port_space
    } else {
        match protocol {
            libc::IPPROTO_TCP => RDMA_PS_TCP as c_int,
            libc::IPPROTO_UDP => RDMA_PS_UDP as c_int,
            _ => 0,
        }
    };
    let to_ib = h_flags & RAI_FAMILY != 0 && h_family == AF_IB && h_flags & RAI_NUMERICHOST != 0;
    f.family = if to_ib {
        f.addr = to_sockaddr_ib(port_space, &f.addr);
        AF_IB
    } else {
        ai_family
    };
    f.passive = ai_flags & libc::AI_PASSIVE != 0;
    f.flags = if f.passive { RAI_PASSIVE } else { 0 };
    f.qp_type = qp_type;
    f.port_space = port_space;
}

/// rdma_getaddrinfo's whole answer when it is one node that needs no
/// name service: a numeric (or absent) node and a numeric service
/// ([`numeric::first_into`]) under hints without addresses or route,
/// and no ibacm route data to add (a passive lookup, or no ibacm daemon).
/// `None`: [`getaddrinfo_name`] or the general path ([`getaddrinfo`]),
/// which give the same answer when this one has one.
pub fn getaddrinfo_numeric(node: Option<&CStr>, service: Option<&CStr>, flags: c_int, family: c_int, qp_type: c_int, port_space: c_int, out: &mut First) -> Option<Result<(), GaiError>> {
    if flags & RAI_SA != 0 || (node.is_none() && service.is_none()) {
        return None;
    }
    let ai = libc_hints_of(flags, family, qp_type, port_space);
    let (socktype, protocol) = numeric::first_into(node, service, false, &ai, &mut out.addr)?;
    if let Err(e) = check_abi() {
        return Some(Err(e.into()));
    }
    let ai_family = out.addr.family();
    fill_first(flags, family, qp_type, port_space, ai.flags, ai_family, socktype, protocol, out);
    if !out.passive && acm::daemon_connected() {
        return None;
    }
    Some(Ok(()))
}

/// rdma_getaddrinfo's whole answer when it is the one node made from
/// libc's first result, under hints without addresses or route (a name,
/// or a literal [`getaddrinfo_numeric`] leaves to libc): one call of
/// libc's getaddrinfo with the hints upstream derives, when there is no
/// ibacm route data to add (a passive lookup, or no ibacm daemon).  The
/// result node's fields go into `out`; `Ok` carries libc's canonical name
/// of the result (none unless libc gives one).  `None`: take the general
/// path ([`getaddrinfo`]), which gives the same answer when this one has
/// one.
pub fn getaddrinfo_name(node: Option<&CStr>, service: Option<&CStr>, flags: c_int, family: c_int, qp_type: c_int, port_space: c_int, out: &mut First) -> Option<Result<Option<CString>, GaiError>> {
    if flags & RAI_SA != 0 || (node.is_none() && service.is_none()) {
        return None;
    }
    if let Err(e) = check_abi() {
        return Some(Err(e.into()));
    }
    // An active lookup with a daemon to ask: the general path (glibc's
    // results carry the hints' AI_PASSIVE, so the result's flags are
    // known before libc answers).  The general path looks for the daemon
    // only once libc has answered: the first look, made here before, must
    // leave libc's failure the caller's errno, and a success the errno
    // the look left.
    let mut probe_errno = None;
    if flags & RAI_PASSIVE == 0 {
        let connected = match acm::daemon_probed() {
            Some(c) => c,
            None => {
                let before = Errno::last_raw();
                let c = acm::daemon_connected();
                let after = Errno::last_raw();
                if after != before {
                    Errno::set_raw(before);
                    probe_errno = Some(after);
                }
                c
            }
        };
        if connected {
            return None;
        }
    }
    let ai = libc_hints_of(flags, family, qp_type, port_space);
    // libc's resolver and file I/O make cancellation points, none of
    // which acts (as on the general path).
    let list = match crate::sys::cancel::nocancel(|| netdb::getaddrinfo(node, service, Some(&ai))) {
        Ok(list) => list,
        Err(code) => {
            log::debug!(target: "rdmacm", "rdma_getaddrinfo: libc getaddrinfo: {code} (passed through)");
            return Some(Err(GaiError::Eai(code)));
        }
    };
    let (ai_flags, ai_family, socktype, protocol, canonname) = list.first_into(&mut out.addr);
    drop(list);
    fill_first(flags, family, qp_type, port_space, ai_flags, ai_family, socktype, protocol, out);
    if !out.passive && flags & RAI_PASSIVE != 0 && acm::daemon_connected() {
        // A result without the hints' AI_PASSIVE (glibc gives none): the
        // general path, which asks libc again and then ibacm.
        return None;
    }
    if let Some(e) = probe_errno {
        Errno::set_raw(e);
    }
    Some(Ok(canonname))
}

/// Where ibacm is reached.
#[derive(Debug, Clone, Copy)]
pub enum AcmTarget<'a> {
    /// The process-wide connection to the daemon under /run (or
    /// `$RDMACM_RS_IBACM_RUNDIR`), made on first use.
    Global,
    /// A socket already connected to an ibacm (test server).
    Conn(BorrowedFd<'a>),
    /// No ibacm lookup.
    Off,
}

/// The whole of rdma_getaddrinfo on values, with the connection manager's
/// backend `be` and the process-wide ibacm connection.
pub fn getaddrinfo(node: Option<&CStr>, service: Option<&CStr>, h: &Hints, be: &dyn CmBackend) -> Result<Vec<Rai>, GaiError> {
    getaddrinfo_with(node, service, h, be, AcmTarget::Global)
}

/// rdma_getaddrinfo with an explicit backend and ibacm target.
pub fn getaddrinfo_with(
    node: Option<&CStr>,
    service: Option<&CStr>,
    h: &Hints,
    be: &dyn CmBackend,
    acm_target: AcmTarget<'_>,
) -> Result<Vec<Rai>, GaiError> {
    if node.is_none() && service.is_none() && h.null {
        log::debug!(target: "rdmacm", "rdma_getaddrinfo: no node, service or hints (EINVAL)");
        return Err(Errno::EINVAL.into());
    }
    check_abi()?;

    if h.flags & RAI_SA != 0 {
        if node.is_some() || h.flags & RAI_DNS != 0 {
            log::debug!(target: "rdmacm", "rdma_getaddrinfo: RAI_SA with a node or RAI_DNS (EOPNOTSUPP)");
            return Err(Errno::EOPNOTSUPP.into());
        }
        log::debug!(target: "rdmacm", "rdma_getaddrinfo: RAI_SA branch: the IB service lookup through the kernel");
        return getaddrinfo_sa(service, be).map_err(GaiError::Sys);
    }

    let mut rai = if node.is_some() || service.is_some() {
        let ai = libc_getaddrinfo(node, service, h).map_err(GaiError::Eai)?;
        from_libc(h, ai)
    } else {
        let mut r = Rai {
            flags: h.flags,
            family: h.family,
            qp_type: h.qp_type,
            port_space: h.port_space,
            ..Default::default()
        };
        if h.bad_dst {
            log::debug!(target: "rdmacm", "rdma_getaddrinfo: hints ai_dst_len without ai_dst_addr (EINVAL)");
            return Err(Errno::EINVAL.into());
        }
        r.dst = h.dst;
        r
    };

    if rai.src_len() == 0 {
        if h.bad_src {
            log::debug!(target: "rdmacm", "rdma_getaddrinfo: hints ai_src_len without ai_src_addr (EINVAL)");
            return Err(Errno::EINVAL.into());
        }
        if h.src.is_some() {
            rai.src = h.src;
        }
    }

    log::debug!(target: "rdmacm", "rdma_getaddrinfo: {} branch, family {}, {}", if node.is_some() || service.is_some() { "libc getaddrinfo" } else { "hints-only" }, rai.family, if rai.flags & RAI_PASSIVE != 0 { "passive (no ibacm lookup)" } else { "active (ibacm lookup next)" });
    let mut list = vec![rai];
    if list[0].flags & RAI_PASSIVE == 0 {
        match acm_target {
            AcmTarget::Global => acm::resolve_global(&mut list, h, || be.af_ib_supported()),
            AcmTarget::Conn(fd) => acm::resolve_on(fd, &mut list, h, be.af_ib_supported()),
            AcmTarget::Off => {}
        }
    }
    Ok(list)
}

/// RAI_SA: the IB service lookup through the kernel.
pub fn getaddrinfo_sa(service: Option<&CStr>, be: &dyn CmBackend) -> Result<Vec<Rai>, Errno> {
    let Some(service) = service else {
        log::debug!(target: "rdmacm", "rdma_getaddrinfo: RAI_SA without a service (EINVAL)");
        return Err(Errno::EINVAL);
    };
    be.check_event_channel()?;
    for gid in be.ib_sa_gids() {
        match be.resolve_ib_service(&gid, service) {
            Ok(mut list) => {
                for r in list.iter_mut() {
                    let mut s = sockaddr_ib { sib_family: AF_IB as u16, ..Default::default() };
                    s.sib_addr.sib_raw = gid;
                    let (sid, mask) = sid_for(RDMA_PS_IB as c_int, None);
                    s.sib_sid = sid;
                    s.sib_sid_mask = mask;
                    s.sib_pkey = r.dst.as_ref().filter(|d| d.len() >= 4).map_or(0, |d| d.ib_image().sib_pkey);
                    r.src = Some(SockAddr::from_ib(&s));
                }
                return Ok(list);
            }
            Err(e) => log::debug!(target: "rdmacm", "rdma_getaddrinfo: RAI_SA on a port failed: {e}"),
        }
    }
    log::debug!(target: "rdmacm", "rdma_getaddrinfo: RAI_SA: no active InfiniBand port resolved the service (ENOENT)");
    Err(Errno::ENOENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use libc::AF_INET;

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    /// The connection manager of a host without RDMA devices: no AF_IB, no
    /// InfiniBand port.
    struct NoCm;
    impl CmBackend for NoCm {
        fn af_ib_supported(&self) -> bool {
            false
        }
        fn ib_sa_gids(&self) -> Vec<[u8; 16]> {
            Vec::new()
        }
        fn resolve_ib_service(&self, _: &[u8; 16], _: &CStr) -> Result<Vec<Rai>, Errno> {
            Err(Errno::ENOENT)
        }
    }

    fn getaddrinfo(node: Option<&CStr>, service: Option<&CStr>, h: &Hints) -> Result<Vec<Rai>, GaiError> {
        super::getaddrinfo(node, service, h, &NoCm)
    }

    fn hints(flags: c_int, family: c_int, qp: u32, ps: u32) -> Hints {
        Hints { flags, family, qp_type: qp as c_int, port_space: ps as c_int, ..Default::default() }
    }

    #[test]
    fn all_null_is_einval() {
        assert_eq!(getaddrinfo(None, None, &Hints::none()), Err(GaiError::Sys(Errno::EINVAL)));
    }

    #[test]
    fn numeric_ipv4_active() {
        let h = hints(RAI_NUMERICHOST, AF_INET, IBV_QPT_RC, 0);
        let l = getaddrinfo(Some(&c("192.0.2.1")), Some(&c("7471")), &h).unwrap();
        assert_eq!(l.len(), 1);
        let r = &l[0];
        assert_eq!((r.flags, r.family, r.qp_type, r.port_space), (0, AF_INET, 2, RDMA_PS_TCP as c_int));
        let d = r.dst.as_ref().unwrap();
        assert_eq!(d.len(), 16);
        assert_eq!(&d.as_bytes()[2..8], &[0x1d, 0x2f, 192, 0, 2, 1]);
        assert!(r.src.is_none());
    }

    #[test]
    fn passive_goes_to_src() {
        let h = hints(RAI_PASSIVE, AF_INET, 0, RDMA_PS_UDP);
        let l = getaddrinfo(None, Some(&c("7471")), &h).unwrap();
        let r = &l[0];
        assert_eq!(r.flags, RAI_PASSIVE);
        assert_eq!(r.qp_type, IBV_QPT_UD as c_int);
        assert_eq!(r.port_space, RDMA_PS_UDP as c_int);
        assert!(r.dst.is_none());
        assert_eq!(r.src.as_ref().unwrap().as_bytes()[4..8], [0, 0, 0, 0]);
    }

    #[test]
    fn ipv6_to_ib() {
        let h = hints(RAI_FAMILY | RAI_NUMERICHOST, AF_IB, 0, RDMA_PS_TCP);
        let l = getaddrinfo(Some(&c("fe80::2%1")), Some(&c("4660")), &h).unwrap();
        let r = &l[0];
        assert_eq!(r.family, AF_IB);
        let d = r.dst.as_ref().unwrap();
        assert_eq!(d.len(), 48);
        let s = d.ib_image();
        assert_eq!(s.sib_pkey, 0xffffu16.to_be());
        assert_eq!(u64::from_be(s.sib_sid), 0x0106_1234);
        assert_eq!(u64::from_be(s.sib_sid_mask), 0xffff_ffff_ffff_ffff);
        assert_eq!(s.sib_scope_id, 1);
        assert_eq!(s.sib_addr.sib_raw[0], 0xfe);
    }

    #[test]
    fn ipv4_to_ib_is_mapped() {
        let h = hints(RAI_FAMILY | RAI_NUMERICHOST, AF_IB, 0, 0);
        let l = getaddrinfo(Some(&c("192.0.2.1")), None, &h).unwrap();
        let d = l[0].dst.as_ref().unwrap();
        let s = d.ib_image();
        assert_eq!(s.sib_addr.sib_raw, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1]);
        // Port space TCP from libc's first result (SOCK_STREAM/TCP), no port.
        assert_eq!(s.sib_sid_mask, RDMA_IB_IP_PS_MASK.to_be());
        assert_eq!(s.sib_flowinfo, 0);
    }

    #[test]
    fn eai_passthrough() {
        let h = hints(RAI_NUMERICHOST, 0, 0, 0);
        assert_eq!(getaddrinfo(Some(&c("not-a-number")), None, &h), Err(GaiError::Eai(libc::EAI_NONAME)));
        let h = hints(0, 0, 0, 0);
        assert!(matches!(getaddrinfo(None, Some(&c("no-such-service-x")), &h), Err(GaiError::Eai(_))));
    }

    #[test]
    fn hints_only() {
        let dst = SockAddr::from_bytes(&[2u8, 0, 0, 1, 192, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        let src = SockAddr::from_bytes(&[2u8, 0, 0, 0, 192, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        let h = Hints {
            flags: RAI_NOROUTE | 0x4000,
            family: AF_INET,
            qp_type: 99,
            port_space: 1234,
            dst: Some(dst),
            src: Some(src),
            ..Default::default()
        };
        let l = getaddrinfo(None, None, &h).unwrap();
        assert_eq!(l[0].flags, RAI_NOROUTE | 0x4000);
        assert_eq!((l[0].qp_type, l[0].port_space), (99, 1234));
        assert_eq!(l[0].dst.as_ref(), Some(&dst));
        assert_eq!(l[0].src.as_ref(), Some(&src));
    }

    #[test]
    fn sa_checks() {
        let h = hints(RAI_SA, 0, 0, 0);
        assert_eq!(getaddrinfo(Some(&c("x")), None, &h), Err(GaiError::Sys(Errno::EOPNOTSUPP)));
        let h = hints(RAI_SA | RAI_DNS, 0, 0, 0);
        assert_eq!(getaddrinfo(None, Some(&c("1")), &h), Err(GaiError::Sys(Errno::EOPNOTSUPP)));
        let h = hints(RAI_SA, 0, 0, 0);
        assert_eq!(getaddrinfo(None, None, &h), Err(GaiError::Sys(Errno::EINVAL)));
    }

    struct FakeSa;
    impl CmBackend for FakeSa {
        fn af_ib_supported(&self) -> bool {
            true
        }
        fn check_event_channel(&self) -> Result<(), Errno> {
            Ok(())
        }
        fn ib_sa_gids(&self) -> Vec<[u8; 16]> {
            vec![[1; 16], [2; 16]]
        }
        fn resolve_ib_service(&self, gid: &[u8; 16], service: &CStr) -> Result<Vec<Rai>, Errno> {
            if gid[0] == 1 {
                return Err(Errno::ETIMEDOUT);
            }
            assert_eq!(service.to_bytes(), b"42");
            let dst = sockaddr_ib { sib_family: AF_IB as u16, sib_pkey: 0x8001u16.to_be(), ..Default::default() };
            Ok(vec![Rai {
                flags: RAI_SA,
                family: AF_IB,
                port_space: RDMA_PS_IB as c_int,
                dst: Some(SockAddr::from_ib(&dst)),
                route: Some(vec![0; 72]),
                ..Default::default()
            }])
        }
    }

    #[test]
    fn sa_with_backend() {
        let h = hints(RAI_SA, 0, 0, 0);
        let l = getaddrinfo_with(None, Some(&c("42")), &h, &FakeSa, AcmTarget::Off).unwrap();
        assert_eq!(l.len(), 1);
        let src = l[0].src.as_ref().unwrap();
        let s = src.ib_image();
        assert_eq!(s.sib_addr.sib_raw, [2; 16], "first port that succeeds");
        assert_eq!(s.sib_pkey, 0x8001u16.to_be(), "pkey of the destination");
        assert_eq!(u64::from_be(s.sib_sid), RDMA_IB_PS_IB);
        assert_eq!(s.sib_sid_mask, RDMA_IB_IP_PS_MASK.to_be());
    }

    /// The one-call name path gives the general path's answer (node,
    /// canonical name, or libc's error) for names and literals only libc
    /// reads, under every kind of hints it takes.
    #[test]
    fn name_path_agrees_with_general_path() {
        // (names from /etc/hosts only: nothing is sent to a name server; a
        // name under RAI_NUMERICHOST is libc's EAI_NONAME)
        let nodes = [Some(c("localhost")), Some(c("127.1")), Some(c("0x7f.1")), None];
        let services = [Some(c("7471")), Some(c("echo")), Some(c("no-such-service-x")), None];
        let flag_sets = [0, RAI_PASSIVE, RAI_NUMERICHOST, RAI_PASSIVE | RAI_NUMERICHOST, RAI_FAMILY | RAI_NUMERICHOST];
        let mut answered = 0;
        for node in &nodes {
            for service in &services {
                for &flags in &flag_sets {
                    for family in [0, AF_INET, libc::AF_INET6, AF_IB] {
                        for (qp, ps) in [(0, 0), (IBV_QPT_RC, RDMA_PS_TCP), (IBV_QPT_UD, RDMA_PS_UDP), (IBV_QPT_UD, RDMA_PS_IB), (0, RDMA_PS_IPOIB)] {
                            if node.as_deref().is_some_and(|n| n.to_bytes() == b"localhost") && family != AF_INET && flags & RAI_NUMERICHOST == 0 {
                                continue; // (another family asks DNS for an IPv6 address)
                            }
                            let h = hints(flags, family, qp, ps);
                            let mut f = First::EMPTY;
                            let Some(one) = getaddrinfo_name(node.as_deref(), service.as_deref(), flags, family, qp as c_int, ps as c_int, &mut f) else {
                                assert!(node.is_none() && service.is_none(), "{node:?} {service:?} declined");
                                continue;
                            };
                            let general = getaddrinfo_with(node.as_deref(), service.as_deref(), &h, &NoCm, AcmTarget::Off);
                            let one = one.map(|canon| {
                                let mut r = Rai { flags: f.flags, family: f.family, qp_type: f.qp_type, port_space: f.port_space, ..Default::default() };
                                if f.passive {
                                    (r.src, r.src_canonname) = (Some(f.addr), canon);
                                } else {
                                    (r.dst, r.dst_canonname) = (Some(f.addr), canon);
                                }
                                vec![r]
                            });
                            assert_eq!(one, general, "{node:?} {service:?} flags {flags:#x} family {family} qp {qp} ps {ps}");
                            answered += usize::from(one.is_ok());
                        }
                    }
                }
            }
        }
        assert!(answered > 100, "only {answered} answers");
    }

    #[test]
    fn sid() {
        let a = SockAddr::from_bytes(&[10u8, 0, 0x12, 0x34]).unwrap();
        assert_eq!(sid_for(RDMA_PS_TCP as c_int, Some(&a)), (0x0106_1234u64.to_be(), u64::MAX.to_be()));
        assert_eq!(sid_for(0, None), (0, 0));
        assert_eq!(sid_for(RDMA_PS_IB as c_int, None), (0x013f_0000u64.to_be(), RDMA_IB_IP_PS_MASK.to_be()));
    }
}
