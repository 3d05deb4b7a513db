// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Address translation on an identifier: `rdma_resolve_addrinfo` and
//! `rdma_query_addrinfo`.
//!
//! Two ways, as upstream:
//! * **DNS** (the default, or `RAI_DNS`): the translation is
//!   `rdma_getaddrinfo`'s; its result is kept on the id and announced by
//!   an `RDMA_CM_EVENT_ADDRINFO_RESOLVED` event that the library queues
//!   through the kernel (an INTERNAL event it rewrites when it reads it).
//!   Upstream runs it in the caller's thread, so an asynchronous id waits
//!   for the resolver.  Here, on an id with an event channel, a node that
//!   needs a name lookup (not a literal address, no `RAI_NUMERICHOST`) is
//!   looked up on a worker thread ([`super::ai_worker`]): the call returns
//!   at once, and the result comes as ADDRINFO_RESOLVED, or as
//!   `RDMA_CM_EVENT_ADDRINFO_ERROR` with the errno as status (queued as
//!   INTERNAL too).  Everything else (argument errors, literals, no node,
//!   synchronous ids) is decided in the call, as upstream: a failed
//!   translation fails the call.  Until the worker is done,
//!   `rdma_query_addrinfo` says ENOENT and another resolve EBUSY, what
//!   upstream says while its lookup runs; destroying the id drops the
//!   lookup's result (no event).
//! * **SA** (`RAI_SA`): the kernel resolves an InfiniBand service
//!   (`RESOLVE_IB_SERVICE`); on its ADDRINFO_RESOLVED the library reads the
//!   service records and turns them into AF_IB entries, or reports
//!   `RDMA_CM_EVENT_ADDRINFO_ERROR` with the errno as status.
//!
//! One difference, on purpose: upstream returns -1 with `errno == -1` (or
//! with errno set to a negative `EAI_*` code) for most failures; we set a
//! real errno ([`eai_errno`]).

#![deny(unsafe_code)]

use super::base::{Channel, Cm, EventPriv, IdPriv, IdRef};
pub use super::base::AiSlot;
use crate::addrinfo::{self as gai, GaiError, Hints, Rai};
use crate::abi::cma::*;
use crate::abi::ucma as kabi;
use nix::errno::Errno;
use std::ffi::{c_int, CStr};
use std::sync::atomic::{AtomicU32, Ordering};

/// Tickets of worker lookups.
static TICKETS: AtomicU32 = AtomicU32::new(1);

/// The errno for a libc `getaddrinfo` failure (`EAI_*`).
pub fn eai_errno(code: c_int) -> Errno {
    match code {
        // (glibc: EAI_ADDRFAMILY is -9, not in the libc crate.)
        libc::EAI_NONAME | libc::EAI_NODATA | libc::EAI_SERVICE | -9 => Errno::ENOENT,
        libc::EAI_AGAIN => Errno::EAGAIN,
        libc::EAI_MEMORY => Errno::ENOMEM,
        libc::EAI_BADFLAGS => Errno::EINVAL,
        libc::EAI_FAMILY => Errno::EAFNOSUPPORT,
        libc::EAI_SOCKTYPE => Errno::ESOCKTNOSUPPORT,
        libc::EAI_OVERFLOW => Errno::EOVERFLOW,
        libc::EAI_SYSTEM => match Errno::last() {
            Errno::UnknownErrno => Errno::EIO,
            e => e,
        },
        _ => Errno::EIO,
    }
}

/// The kernel's service description for `service`: a number (C `strtoull`
/// with base 0: decimal, 0x hex or 0 octal) is a service id, anything else
/// a service name of at most 63 bytes.
pub fn ib_service_of(service: &CStr) -> kabi::IbService {
    let mut ibs = kabi::IbService::default();
    let s = service.to_bytes();
    let txt = std::str::from_utf8(s).ok().map(str::trim_start);
    let num = txt.and_then(|t| {
        let t = t.strip_prefix('+').unwrap_or(t);
        if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            u64::from_str_radix(h, 16).ok()
        } else if t.len() > 1 && t.starts_with('0') {
            u64::from_str_radix(&t[1..], 8).ok()
        } else {
            t.parse::<u64>().ok()
        }
    });
    match num {
        Some(id) => {
            ibs.service_id = id;
            ibs.flags = kabi::IB_SERVICE_FLAG_ID;
        }
        None => {
            let n = s.len().min(ibs.service_name.len() - 1);
            ibs.service_name[..n].copy_from_slice(&s[..n]);
            ibs.flags = kabi::IB_SERVICE_FLAG_NAME;
        }
    }
    ibs
}

/// AF_IB entries for the service records the kernel found.
pub fn rai_of_service_recs(recs: &[kabi::ServiceRec]) -> Vec<Rai> {
    recs.iter()
        .map(|r| {
            let sib = sockaddr_ib {
                sib_family: AF_IB as u16,
                sib_pkey: r.pkey,
                sib_addr: ib_addr { sib_raw: r.gid },
                sib_sid: r.id,
                sib_sid_mask: u64::MAX,
                ..Default::default()
            };
            Rai {
                flags: RAI_SA,
                family: AF_IB,
                qp_type: 0,
                port_space: RDMA_PS_IB as c_int,
                src: None,
                dst: Some(gai::SockAddr::from_ib(&sib)),
                src_canonname: None,
                dst_canonname: None,
                route: None,
                connect: None,
            }
        })
        .collect()
}

impl Cm {
    /// `rdma_resolve_addrinfo`.
    pub fn resolve_addrinfo(&'static self, p: &IdRef, node: Option<&CStr>, service: Option<&CStr>, hints: &Hints) -> Result<(), Errno> {
        {
            let mut ai = p.ai.lock();
            if ai.resolving {
                return Err(Errno::EBUSY);
            }
            ai.resolving = true;
        }
        let r = self.start_addrinfo(p, node, service, hints);
        if let Err(e) = r {
            log::debug!(target: "rdmacm", "rdma_resolve_addrinfo: {e}");
            p.ai.lock().resolving = false;
        }
        r
    }

    fn start_addrinfo(&'static self, p: &IdRef, node: Option<&CStr>, service: Option<&CStr>, hints: &Hints) -> Result<(), Errno> {
        let flags = if hints.null { 0 } else { hints.flags };
        if flags & RAI_SA != 0 {
            if flags & RAI_DNS != 0 || node.is_some() {
                return Err(Errno::EOPNOTSUPP);
            }
            let service = service.ok_or(Errno::EINVAL)?;
            self.ucma.resolve_ib_service(p.fd(), p.handle(), &ib_service_of(service))?;
            return self.complete(p);
        }
        if let Some(node) = node.filter(|n| !p.sync.load(Ordering::Acquire) && needs_name_lookup(n, hints)) {
            self.start_lookup(p, node, service, hints);
            return Ok(());
        }
        let list = dns(node, service, hints)?;
        p.ai.lock().resolved = Some(Box::new(list));
        if let Err(e) = self.ucma.write_cm_event(p.fd(), p.handle(), RDMA_CM_EVENT_INTERNAL, 0, u64::from(RDMA_CM_EVENT_ADDRINFO_RESOLVED)) {
            p.ai.lock().resolved = None;
            return Err(e);
        }
        self.complete(p)
    }

    /// Hands the name lookup of an asynchronous id to a worker thread (or
    /// runs it here when no thread can be started).
    fn start_lookup(&'static self, p: &IdRef, node: &CStr, service: Option<&CStr>, hints: &Hints) {
        // (0 means none: skipped when the counter wraps.)
        let ticket = TICKETS.fetch_add(1, Ordering::Relaxed).max(1);
        p.ai.lock().pending = ticket;
        log::debug!(target: "rdmacm", "rdma_resolve_addrinfo: id {}: name lookup of {:?} on a worker (ticket {ticket})", p.handle(), node);
        let (p, node, service, hints) = (p.clone(), node.to_owned(), service.map(CStr::to_owned), hints.clone());
        let job: super::ai_worker::Job = Box::new(move |w| run_lookup(&p, ticket, &node, service.as_deref(), &hints, w));
        if let Err(job) = super::ai_worker::submit(job) {
            job(&super::ai_worker::Worker::caller());
        }
    }

    /// Forgets a worker lookup of `p` (rdma_destroy_id): its result is
    /// dropped and no event is queued for the id.  (Inline: every destroy
    /// passes here.)
    #[inline(always)]
    pub(super) fn cancel_addrinfo(&self, p: &IdPriv) {
        let mut ai = p.ai.lock();
        if ai.pending != 0 {
            ai.pending = 0;
            drop(ai);
            Self::lookup_dropped(p);
        }
    }

    #[cold]
    fn lookup_dropped(p: &IdPriv) {
        log::debug!(target: "rdmacm", "rdma_destroy_id: id {}: its name lookup's result will be dropped", p.handle());
    }

    /// `rdma_query_addrinfo`: hands over the finished translation.
    pub fn query_addrinfo(&self, p: &IdPriv) -> Result<Vec<Rai>, Errno> {
        let mut ai = p.ai.lock();
        if !ai.resolving || ai.resolved.is_none() {
            return Err(Errno::ENOENT);
        }
        ai.resolving = false;
        ai.resolved.take().map(|l| *l).ok_or(Errno::ENOENT)
    }

    /// The library's part of an ADDRINFO_RESOLVED event: nothing for a DNS
    /// translation (its result is already kept); for an SA one, read the
    /// service records, or turn the event into ADDRINFO_ERROR.
    pub(super) fn process_addrinfo_resolved(&self, p: &IdPriv, evt: &mut EventPriv) {
        if p.ai.lock().resolved.is_some() {
            return;
        }
        let got = self.ucma.query_ib_service(p.fd(), p.handle()).and_then(|recs| {
            self.query_addr(p)?;
            Ok(rai_of_service_recs(&recs))
        });
        let mut ai = p.ai.lock();
        match got {
            Ok(list) => ai.resolved = Some(Box::new(list)),
            Err(e) => {
                log::debug!(target: "rdmacm", "IB service resolved, but reading the records failed: {e}");
                evt.event.0.event = RDMA_CM_EVENT_ADDRINFO_ERROR;
                evt.event.0.status = e as i32;
                ai.resolving = false;
            }
        }
    }

    /// The library's part of an ADDRINFO_ERROR event.
    pub(super) fn process_addrinfo_error(&self, p: &IdPriv) {
        p.ai.lock().resolving = false;
    }
}

/// rdma_getaddrinfo for an id's translation, with libc failures as errnos.
fn dns(node: Option<&CStr>, service: Option<&CStr>, hints: &Hints) -> Result<Vec<Rai>, Errno> {
    gai::getaddrinfo(node, service, hints, &CmaBackend).map_err(|e| match e {
        GaiError::Sys(e) => e,
        GaiError::Eai(code) => {
            log::debug!(target: "rdmacm", "rdma_resolve_addrinfo: getaddrinfo: {}", crate::sys::gai_strerror(code));
            eai_errno(code)
        }
    })
}

/// The longest host name a resolver can be asked for (`NI_MAXHOST` 1025
/// with its NUL): a longer `node` fails without a lookup.
const MAX_NODE_LEN: usize = 1024;

/// Whether translating `node` may ask a resolver (and so may take long):
/// not with `RAI_NUMERICHOST`, nor for a literal address (libc parses those
/// without a lookup), nor with malformed hints or a name longer than any
/// resolver takes (their errors stay the call's, as upstream).
pub fn needs_name_lookup(node: &CStr, h: &Hints) -> bool {
    if h.bad_src || h.bad_dst || (!h.null && h.flags & RAI_NUMERICHOST != 0) {
        return false;
    }
    if node.to_bytes().len() > MAX_NODE_LEN {
        return false;
    }
    if !may_be_literal(node.to_bytes()) {
        return true;
    }
    let literal = crate::sys::netdb::GaiHints { flags: libc::AI_NUMERICHOST, ..Default::default() };
    crate::sys::netdb::getaddrinfo(Some(node), None, Some(&literal)).is_err()
}

/// Whether libc's `getaddrinfo` could read `node` as a literal address: a
/// literal is made of hex digits, `x`, `.` and `:`, but for an IPv6 scope
/// after `%` and, where libc's `inet_aton` ends a number at white space,
/// anything after that.  A node with any other byte is a name, told
/// without asking libc.
fn may_be_literal(node: &[u8]) -> bool {
    node.iter().all(|&b| b.is_ascii_hexdigit() || matches!(b, b'x' | b'X' | b'.' | b':'))
        || node.iter().any(|&b| matches!(b, b'%' | b' ' | b'\t'..=b'\r'))
}

/// A worker's lookup for id `p`: the result is kept on the id and announced
/// by an event, unless the id was destroyed meanwhile (its ticket gone).
/// The id's lock is not held during the lookup; it is held while the event
/// is queued, so that destroy cannot free the kernel id (whose handle a new
/// id may then get) between the check and the write.
fn run_lookup(p: &IdPriv, ticket: u32, node: &CStr, service: Option<&CStr>, hints: &Hints, w: &super::ai_worker::Worker) {
    if p.ai.lock().pending != ticket {
        return;
    }
    let r = dns(Some(node), service, hints);
    w.finishing();
    let mut ai = p.ai.lock();
    if ai.pending != ticket {
        log::debug!(target: "rdmacm", "rdma_resolve_addrinfo: the id of ticket {ticket} was destroyed: result dropped");
        return;
    }
    ai.pending = 0;
    let (status, arg) = match r {
        Ok(list) => {
            ai.resolved = Some(Box::new(list));
            (0, RDMA_CM_EVENT_ADDRINFO_RESOLVED)
        }
        Err(e) => {
            log::debug!(target: "rdmacm", "rdma_resolve_addrinfo: ticket {ticket}: {e}: reported as ADDRINFO_ERROR");
            (e as i32, RDMA_CM_EVENT_ADDRINFO_ERROR)
        }
    };
    let cm = p.links.lock().channel.cm;
    if let Err(e) = cm.ucma.write_cm_event(p.fd(), p.handle(), RDMA_CM_EVENT_INTERNAL, status, u64::from(arg)) {
        log::debug!(target: "rdmacm", "rdma_resolve_addrinfo: ticket {ticket}: queueing the event failed: {e}");
        ai.resolved = None;
        ai.resolving = false;
    }
}

/// The connection manager's side of `rdma_getaddrinfo`: the
/// [`gai::CmBackend`] that the address-translation pipeline asks for the
/// AF_IB probe, the InfiniBand ports and the kernel's service resolution.
/// The pipeline knows only the trait, so it never imports the connection
/// manager.
pub struct CmaBackend;

impl gai::CmBackend for CmaBackend {
    fn af_ib_supported(&self) -> bool {
        super::cm::af_ib_supported()
    }

    fn ib_sa_gids(&self) -> Vec<[u8; 16]> {
        crate::sys::verbs::ib_active_port_gids()
    }

    fn resolve_ib_service(&self, gid: &[u8; 16], service: &CStr) -> Result<Vec<Rai>, Errno> {
        resolve_ib_service(gid, service)
    }
}

/// `rdma_getaddrinfo`'s RAI_SA lookup on one port: an AF_IB id bound to
/// the port's GID asks the kernel to resolve `service` through the SA, as
/// upstream does.  Returns the AF_IB entries (without source addresses).
pub fn resolve_ib_service(gid: &[u8; 16], service: &CStr) -> Result<Vec<Rai>, Errno> {
    let cm = super::cm::global();
    let ch = cm.create_channel()?;
    // The id lives on the channel and is destroyed before it.
    let r = cm.create_id(Some(&ch), std::ptr::null_mut(), RDMA_PS_IB).and_then(|p| {
        let r = cm.resolve_service_on(&p, &ch, gid, service);
        let _ = cm.destroy_id(&p);
        r
    });
    cm.destroy_channel(&ch);
    r
}

impl Cm {
    /// Binds `p` to `gid`, resolves `service` through the SA and waits for
    /// the answer on `ch` (the id's channel).
    fn resolve_service_on(&'static self, p: &IdPriv, ch: &Channel, gid: &[u8; 16], service: &CStr) -> Result<Vec<Rai>, Errno> {
        let sib = sockaddr_ib { sib_family: AF_IB as u16, sib_addr: ib_addr { sib_raw: *gid }, ..Default::default() };
        self.bind(p, Some(crate::abi::sockaddr::SockAddr::from_ib(&sib)))?;
        p.ai.lock().resolving = true;
        self.ucma.resolve_ib_service(p.fd(), p.handle(), &ib_service_of(service))?;
        let got = super::delivery::get_event(ch)?;
        // The event is acked right away.
        super::delivery::ack_event(self, got.ptr);
        if got.event != RDMA_CM_EVENT_ADDRINFO_RESOLVED {
            return Err(Errno::ENOENT);
        }
        self.query_addrinfo(p)
    }
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;

    #[test]
    fn service_numbers_and_names() {
        let ibs = ib_service_of(c"0x1234");
        assert_eq!((ibs.flags, ibs.service_id), (kabi::IB_SERVICE_FLAG_ID, 0x1234));
        let ibs = ib_service_of(c"4660");
        assert_eq!((ibs.flags, ibs.service_id), (kabi::IB_SERVICE_FLAG_ID, 4660));
        let ibs = ib_service_of(c"010");
        assert_eq!((ibs.flags, ibs.service_id), (kabi::IB_SERVICE_FLAG_ID, 8));
        let ibs = ib_service_of(c"my-service");
        assert_eq!(ibs.flags, kabi::IB_SERVICE_FLAG_NAME);
        assert_eq!(&ibs.service_name[..11], b"my-service\0");
        let long = std::ffi::CString::new("x".repeat(100)).unwrap();
        let ibs = ib_service_of(&long);
        assert_eq!(ibs.service_name[62], b'x');
        assert_eq!(ibs.service_name[63], 0, "names are cut to 63 bytes");
        // "12abc" is not a number for strtoull's full-string test.
        assert_eq!(ib_service_of(c"12abc").flags, kabi::IB_SERVICE_FLAG_NAME);
    }

    /// The real backend on a host without InfiniBand ports: ENOENT (or the
    /// event-channel open error, ENOENT too when there is no rdma_cm).
    #[test]
    fn sa_without_ib_ports() {
        let h = Hints { flags: RAI_SA, ..Default::default() };
        let e = gai::getaddrinfo_with(None, Some(c"42"), &h, &CmaBackend, gai::AcmTarget::Off).unwrap_err();
        assert!(matches!(e, GaiError::Sys(Errno::ENOENT | Errno::EACCES | Errno::EPERM)), "{e:?}");
    }

    /// Every node libc reads as a literal counts as one that may be, so no
    /// literal is taken for a name without asking libc.
    #[test]
    fn a_literal_is_never_told_a_name_without_libc() {
        let literal = crate::sys::netdb::GaiHints { flags: libc::AI_NUMERICHOST, ..Default::default() };
        let check = |n: &[u8]| {
            let c = std::ffi::CString::new(n).unwrap();
            let libc_literal = crate::sys::netdb::getaddrinfo(Some(&c), None, Some(&literal)).is_ok();
            assert!(!libc_literal || may_be_literal(n), "{:?}: libc reads a literal", String::from_utf8_lossy(n));
        };
        let nodes = [
            "192.0.2.2", "127.1", "0x7f.1", "0X7F.0X1", "017.1", "4294967295", "0", "2001:db8::1", "2001:DB8::A",
            "::ffff:192.0.2.1", "::", "::1%lo", "fe80::1%lo", "fe80::1%1", "1.2.3.4 x", "1.2.3.4\tname", "1.2.3.4\n",
            "127.0.0.1.", "[::1]", "1e100", "1.2.3.4/24", "localhost", "a", "deadbeef", "bench-slow.test", "x", "",
        ];
        for n in nodes {
            check(n.as_bytes());
        }
        assert!(!may_be_literal(b"bench-slow.test") && !may_be_literal(b"localhost"));
        // and short strings drawn from literals' bytes and a few others
        let alphabet = b"0123456789abcdefxX.:%AF gz\t-";
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 12) as usize;
            let n: Vec<u8> = (0..len).map(|i| alphabet[((x >> (4 + 5 * i)) % alphabet.len() as u64) as usize]).collect();
            check(&n);
        }
    }

    /// Literals and RAI_NUMERICHOST are decided in the call; names go to a worker.
    #[test]
    fn which_nodes_need_a_lookup() {
        let h = Hints::default();
        for lit in [c"192.0.2.2", c"127.1", c"0x7f.1", c"2001:db8::1", c"::ffff:192.0.2.1"] {
            assert!(!needs_name_lookup(lit, &h), "{lit:?}");
            assert!(!needs_name_lookup(lit, &Hints::none()), "{lit:?}");
        }
        for name in [c"bench-slow.test", c"localhost", c"no-such-host.invalid", c""] {
            assert!(needs_name_lookup(name, &h), "{name:?}");
        }
        let numeric = Hints { flags: RAI_NUMERICHOST, ..Default::default() };
        assert!(!needs_name_lookup(c"some-name", &numeric));
        let bad = Hints { bad_src: true, ..Default::default() };
        assert!(!needs_name_lookup(c"some-name", &bad));
        // Longer than any resolver takes: fails in the call (the bad-input matrix's 1 MiB node).
        let long = std::ffi::CString::new(vec![b'a'; MAX_NODE_LEN + 1]).unwrap();
        assert!(!needs_name_lookup(&long, &h));
        let fits = std::ffi::CString::new(vec![b'a'; MAX_NODE_LEN]).unwrap();
        assert!(needs_name_lookup(&fits, &h));
    }

    #[test]
    fn eai_codes_become_errnos() {
        assert_eq!(eai_errno(libc::EAI_NONAME), Errno::ENOENT);
        assert_eq!(eai_errno(libc::EAI_AGAIN), Errno::EAGAIN);
        assert_eq!(eai_errno(libc::EAI_MEMORY), Errno::ENOMEM);
        assert_eq!(eai_errno(libc::EAI_FAMILY), Errno::EAFNOSUPPORT);
        assert_eq!(eai_errno(-12345), Errno::EIO);
    }

    #[test]
    fn service_records_become_af_ib_entries() {
        // SAFETY: all-zero is a valid ServiceRec (integers and arrays).
        let mut r: kabi::ServiceRec = unsafe { std::mem::zeroed() };
        r.id = 0x1122u64.to_be();
        r.pkey = 0xffffu16.to_be();
        r.gid[15] = 7;
        let list = rai_of_service_recs(&[r, r]);
        assert_eq!(list.len(), 2);
        assert_eq!((list[0].flags, list[0].family, list[0].port_space), (RAI_SA, AF_IB, RDMA_PS_IB as c_int));
        let dst = list[0].dst.as_ref().unwrap();
        assert_eq!(dst.len(), std::mem::size_of::<sockaddr_ib>());
        let sib = dst.as_ib().unwrap();
        assert_eq!((sib.sib_sid, sib.sib_sid_mask, sib.sib_addr.sib_raw[15]), (r.id, u64::MAX, 7));
    }
}
