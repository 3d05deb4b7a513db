// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Fuzz bodies shared by the libFuzzer targets and the stable harness.
//!
//! Inputs are decoded into (node, service, hints) and handed to the
//! exported `rdma_getaddrinfo` exactly as a C caller would; every result
//! node is read in full (so ASan/valgrind see any bad length) and freed with
//! `rdma_freeaddrinfo`.  Node names get `RAI_NUMERICHOST` so that no input
//! causes a DNS query.

use rdmacm::internal::addrinfo::acm;
use rdmacm::internal::addrinfo::{Hints, Rai};
use rdmacm_capi::addrinfo::{free_list, rdma_freeaddrinfo, rdma_getaddrinfo, to_c_list};
use rdmacm::internal::abi::cma::*;
use std::ffi::{c_int, CString};

pub mod af_ib_hdr;
pub mod rsocket_wire;

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn i32(&mut self) -> i32 {
        i32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a.to_vec()
    }
    fn cstring(&mut self) -> CString {
        let n = usize::from(self.u8() % 48);
        let mut v = self.bytes(n);
        v.retain(|&b| b != 0);
        CString::new(v).unwrap_or_default()
    }
    fn pick(&mut self, set: &[c_int]) -> c_int {
        let s = self.u8();
        match set.get(usize::from(s) % (set.len() + 1)) {
            Some(v) => *v,
            None => self.i32(),
        }
    }
    /// A socket address buffer of exactly the length the caller claims.
    fn addr(&mut self) -> Option<Vec<u8>> {
        let sel = self.u8();
        if sel & 1 == 0 {
            return None;
        }
        let fam = self.pick(&[libc::AF_INET, libc::AF_INET6, AF_IB, 0]) as u16;
        let len = match sel >> 1 & 3 {
            0 => 16,
            1 => 28,
            2 => 48,
            _ => usize::from(self.u8()) + 1,
        };
        let mut v = self.bytes(len);
        v.resize(len, 0);
        if len >= 2 {
            v[0..2].copy_from_slice(&fam.to_ne_bytes());
        }
        Some(v)
    }
}

fn touch(p: *const u8, len: usize) -> u8 {
    if p.is_null() || len == 0 {
        return 0;
    }
    // SAFETY: the library promises p is readable for len bytes.
    unsafe { std::slice::from_raw_parts(p, len) }.iter().fold(0u8, |a, b| a ^ b)
}

/// One rdma_getaddrinfo call from fuzz bytes.
pub fn getaddrinfo_one(data: &[u8]) {
    let mut r = Reader(data);
    let sel = r.u8();
    let node = (sel & 1 != 0).then(|| r.cstring());
    let service = (sel & 2 != 0).then(|| r.cstring());
    let mut flags = r.i32();
    if node.is_some() {
        flags |= RAI_NUMERICHOST;
    }
    let family = r.pick(&[0, libc::AF_INET, libc::AF_INET6, AF_IB]);
    let qp = r.pick(&[0, 2, 3, 4, 8, 9, 10]);
    let ps = r.pick(&[0, 0x2, 0x106, 0x111, 0x13f]);
    let src = r.addr();
    let dst = r.addr();
    let route_len = match r.u8() % 5 {
        0 | 1 => 0,
        2 => 64,
        3 => 72,
        _ => usize::from(r.u8()),
    };
    let mut route = r.bytes(route_len);
    route.resize(route_len, 0);

    // SAFETY: all-zero is a valid rdma_addrinfo.
    let mut hints: rdma_addrinfo = unsafe { std::mem::zeroed() };
    hints.ai_flags = flags;
    hints.ai_family = family;
    hints.ai_qp_type = qp;
    hints.ai_port_space = ps;
    let mut src = src;
    let mut dst = dst;
    if let Some(s) = src.as_mut() {
        hints.ai_src_len = s.len() as u32;
        hints.ai_src_addr = s.as_mut_ptr().cast();
    }
    if let Some(d) = dst.as_mut() {
        hints.ai_dst_len = d.len() as u32;
        hints.ai_dst_addr = d.as_mut_ptr().cast();
    }
    if route_len != 0 {
        hints.ai_route = route.as_mut_ptr().cast();
        hints.ai_route_len = route_len;
    }
    let mut res: *mut rdma_addrinfo = std::ptr::null_mut();
    // SAFETY: strings are NUL-terminated, hints and its buffers live for
    // the call, res is writable (or NULL on purpose).
    let ret = unsafe {
        rdma_getaddrinfo(
            node.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            service.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            if sel & 4 != 0 { std::ptr::null() } else { &hints },
            if sel & 8 != 0 { std::ptr::null_mut() } else { &mut res },
        )
    };
    if ret != 0 {
        assert!(res.is_null(), "res written on failure");
        return;
    }
    let mut p = res;
    let mut n = 0;
    while !p.is_null() {
        // SAFETY: p is a node of the list the library returned.
        let a = unsafe { &*p };
        let _ = touch(a.ai_src_addr.cast(), a.ai_src_len as usize);
        let _ = touch(a.ai_dst_addr.cast(), a.ai_dst_len as usize);
        let _ = touch(a.ai_route.cast(), a.ai_route_len);
        let _ = touch(a.ai_connect.cast(), a.ai_connect_len);
        assert_eq!(a.ai_src_addr.is_null(), a.ai_src_len == 0);
        assert_eq!(a.ai_dst_addr.is_null(), a.ai_dst_len == 0);
        n += 1;
        assert!(n < 16, "runaway list");
        p = a.ai_next;
    }
    // SAFETY: res came from rdma_getaddrinfo.
    unsafe { rdma_freeaddrinfo(res) };
}

/// One ibacm answer, as the daemon could send it, applied to a result.
pub fn acm_response_one(data: &[u8]) {
    let mut r = Reader(data);
    let sel = r.u8();
    let family = r.pick(&[libc::AF_INET, libc::AF_INET6, AF_IB, 0]);
    let rai = Rai {
        flags: 0,
        family,
        qp_type: r.pick(&[2, 4]),
        port_space: r.pick(&[0x106, 0x111, 0x13f]),
        src: r.addr().map(|b| rdmacm::internal::abi::sockaddr::SockAddr::from_prefix(&b)),
        dst: r.addr().map(|b| rdmacm::internal::abi::sockaddr::SockAddr::from_prefix(&b)),
        ..Default::default()
    };
    let h = Hints {
        flags: r.i32(),
        route: (sel & 2 != 0).then(|| r.bytes(72)),
        ..Default::default()
    };
    let req = acm::build_request(&rai, &h);
    assert!(req.len() >= acm::ACM_MSG_HDR_LENGTH && req.len() <= acm::ACM_MSG_SIZE);
    let mut resp = r.0.to_vec();
    resp.truncate(acm::ACM_MSG_SIZE);
    if sel & 1 != 0 && resp.len() >= 8 {
        // Mostly well-formed: fix the length and status.
        let len = resp.len() as u16;
        resp[6..8].copy_from_slice(&len.to_ne_bytes());
        resp[2] = 0;
    }
    let mut list = vec![rai];
    acm::apply_response(&mut list, &h, &resp, sel & 4 != 0);
    let head = to_c_list(&list).expect("allocation");
    // SAFETY: head was built by to_c_list.
    unsafe { free_list(head) };
}

/// A `GidEnv` whose every answer comes from the fuzz bytes: port count and
/// states, link layers, GUIDs, interface indexes, resolution results and
/// errnos. It checks that the decision logic only asks about ports that
/// exist.
struct FuzzGidEnv {
    ports: Vec<rdmacm::internal::gid::PortInfo>,
    count_err: bool,
    guid: u64,
    ifindex: u32,
    ip: Result<rdmacm::internal::gid::Resolved, nix_errno::Errno>,
    ib: Result<(), nix_errno::Errno>,
}

mod nix_errno {
    pub use rdmacm_capi::Errno;
}

const FUZZ_ERRNOS: &[nix_errno::Errno] = {
    use nix_errno::Errno as E;
    &[E::ETIMEDOUT, E::EHOSTUNREACH, E::ENETUNREACH, E::EADDRNOTAVAIL, E::ENODEV, E::ENOMEM, E::EINTR, E::EINVAL, E::EIO, E::ENOENT, E::ECONNREFUSED, E::EAGAIN]
};

impl rdmacm::internal::gid::GidEnv for FuzzGidEnv {
    fn port_count(&self) -> Result<u8, nix_errno::Errno> {
        if self.count_err {
            Err(nix_errno::Errno::EIO)
        } else {
            Ok(self.ports.len() as u8)
        }
    }
    fn port_info(&self, port: u8) -> Result<rdmacm::internal::gid::PortInfo, nix_errno::Errno> {
        assert!(port >= 1 && usize::from(port) <= self.ports.len(), "asked about port {port} of {}", self.ports.len());
        Ok(self.ports[usize::from(port) - 1])
    }
    fn node_guid(&self) -> u64 {
        self.guid
    }
    fn ifindex(&self, port: u8) -> u32 {
        assert!(port >= 1 && usize::from(port) <= self.ports.len());
        self.ifindex
    }
    fn resolve_ip(&self, _dst: &rdmacm::internal::abi::sockaddr::SockAddr, timeout_ms: i32) -> Result<rdmacm::internal::gid::Resolved, nix_errno::Errno> {
        assert!(timeout_ms > 0, "resolution with timeout {timeout_ms}");
        self.ip
    }
    fn resolve_ib_path(&self, port: u8, _dgid: &[u8; 16], timeout_ms: i32) -> Result<(), nix_errno::Errno> {
        assert!(port >= 1 && usize::from(port) <= self.ports.len());
        assert!(timeout_ms > 0);
        self.ib
    }
}

/// One `ibv_gid_reachable` decision (the logic behind the export) from fuzz
/// bytes: arguments (port, GID, timeout) and the whole environment. The
/// answer must be success or one of the documented errnos.
pub fn gid_reachable_one(data: &[u8]) {
    use nix_errno::Errno as E;
    let mut r = Reader(data);
    let sel = r.u8();
    let nports = usize::from(r.u8() % 5);
    let ports = (0..nports)
        .map(|_| rdmacm::internal::gid::PortInfo { state: u32::from(r.u8() % 6), link_layer: r.u8() % 3 })
        .collect();
    let errno = |r: &mut Reader| FUZZ_ERRNOS[usize::from(r.u8()) % FUZZ_ERRNOS.len()];
    let guid = if sel & 1 != 0 { 7 } else { u64::from(r.u8()) };
    let ip = if sel & 2 != 0 { Err(errno(&mut r)) } else { Ok(rdmacm::internal::gid::Resolved { node_guid: if sel & 4 != 0 { 7 } else { u64::from(r.u8()) }, port: r.u8() % 6 }) };
    let ib = if sel & 8 != 0 { Err(errno(&mut r)) } else { Ok(()) };
    let env = FuzzGidEnv { ports, count_err: sel & 16 != 0, guid, ifindex: r.i32() as u32, ip, ib };
    let port = match r.u8() % 4 {
        0 => 0,
        1 => 1,
        2 => u32::from(r.u8()),
        _ => r.i32() as u32,
    };
    let mut gid = [0u8; 16];
    match r.u8() % 4 {
        // IPv4-mapped, link-local, IB-looking, raw
        0 => {
            gid[10] = 0xff;
            gid[11] = 0xff;
            gid[12..].copy_from_slice(&r.bytes(4).iter().copied().chain(std::iter::repeat(0)).take(4).collect::<Vec<_>>());
        }
        1 => {
            gid[0] = 0xfe;
            gid[1] = 0x80;
            for b in &mut gid[8..] {
                *b = r.u8();
            }
        }
        _ => {
            for b in &mut gid {
                *b = r.u8();
            }
        }
    }
    let timeout = match r.u8() % 4 {
        0 => 0,
        1 => -1,
        2 => 100,
        _ => r.i32(),
    };
    match rdmacm::internal::gid::gid_reachable(&env, port, &gid, timeout) {
        Ok(()) => {}
        Err(e) => assert!(
            [E::EINVAL, E::ENXIO, E::EIO, E::ENOMEM, E::EINTR, E::ENETDOWN].contains(&e),
            "undocumented errno {e:?} (port {port}, timeout {timeout})"
        ),
    }
}

/// Kernel events, as the ucma device could report them, decoded by the
/// connection manager: every event type (and values outside the list),
/// statuses, uids and handles of known and unknown ids, the parameter union
/// filled from the bytes (a truncated report is the zero-filled rest), and
/// the query answers the decoding asks for. Each decoded event is acked;
/// ids the events created (connection requests) are destroyed.
pub mod events {
    use rdmacm::internal::abi::ucma::EventResp;
    use rdmacm_capi::Errno;
    use rdmacm::internal::cma::{ChanRef, Cm, IdRef};
    use rdmacm::internal::abi::sockaddr::SockAddr;
    use rdmacm::internal::sys::ucma::{AddrInfo, RouteInfo, Ucma};
    use rdmacm::internal::sys::verbs::{DevEntry, OpenInfo, Verbs};
    use std::collections::{HashMap, VecDeque};
    use std::os::fd::RawFd;
    use std::sync::{Mutex, OnceLock};

    const GUID: u64 = 0x1122_3344_5566_7788;

    #[derive(Default)]
    pub struct FuzzUcma {
        st: Mutex<St>,
    }
    #[derive(Default)]
    struct St {
        next_fd: RawFd,
        next_id: u32,
        /// handle -> (uid, fd, events reported)
        ids: HashMap<u32, (u64, RawFd, u32)>,
        queue: VecDeque<EventResp>,
        addr: Option<AddrInfo>,
        route: Option<RouteInfo>,
    }

    fn v4(last: u8) -> SockAddr {
        let mut b = [0u8; 16];
        b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        b[4..8].copy_from_slice(&[192, 0, 2, last]);
        SockAddr::from_prefix(&b)
    }

    impl Ucma for &'static FuzzUcma {
        fn open(&self) -> Result<RawFd, Errno> {
            let mut st = self.st.lock().unwrap();
            st.next_fd += 1;
            Ok(1000 + st.next_fd)
        }
        fn close(&self, _fd: RawFd) {}
        fn abi_version(&self) -> Option<i32> {
            Some(4)
        }
        fn create_id(&self, fd: RawFd, uid: u64, _ps: u16, _qp: u8) -> Result<u32, Errno> {
            let mut st = self.st.lock().unwrap();
            st.next_id += 1;
            let h = st.next_id;
            st.ids.insert(h, (uid, fd, 0));
            Ok(h)
        }
        fn destroy_id(&self, _fd: RawFd, id: u32) -> Result<u32, Errno> {
            let mut st = self.st.lock().unwrap();
            Ok(st.ids.remove(&id).map_or(0, |e| e.2))
        }
        fn bind(&self, _fd: RawFd, _id: u32, _a: &[u8]) -> Result<(), Errno> {
            Ok(())
        }
        fn bind_ip(&self, _fd: RawFd, _id: u32, _a: &[u8]) -> Result<(), Errno> {
            Ok(())
        }
        fn resolve_addr(&self, _fd: RawFd, _id: u32, _s: &[u8], _d: &[u8], _t: u32) -> Result<(), Errno> {
            Ok(())
        }
        fn resolve_ip(&self, _fd: RawFd, _id: u32, _s: &[u8], _d: &[u8], _t: u32) -> Result<(), Errno> {
            Ok(())
        }
        fn resolve_route(&self, _fd: RawFd, _id: u32, _t: u32) -> Result<(), Errno> {
            Ok(())
        }
        fn query_addr(&self, _fd: RawFd, _id: u32) -> Result<AddrInfo, Errno> {
            self.st.lock().unwrap().addr.ok_or(Errno::EINVAL)
        }
        fn query_gid(&self, _fd: RawFd, _id: u32) -> Result<AddrInfo, Errno> {
            self.st.lock().unwrap().addr.ok_or(Errno::EINVAL)
        }
        fn query_path(&self, _fd: RawFd, _id: u32) -> Result<Vec<rdmacm::internal::abi::cma::ibv_path_data>, Errno> {
            Ok(Vec::new())
        }
        fn query_route(&self, _fd: RawFd, _id: u32) -> Result<RouteInfo, Errno> {
            self.st.lock().unwrap().route.ok_or(Errno::EINVAL)
        }
        fn get_event(&self, _fd: RawFd) -> Result<EventResp, Errno> {
            let mut st = self.st.lock().unwrap();
            let mut r = st.queue.pop_front().ok_or(Errno::EAGAIN)?;
            // As the kernel: a connection request names a new id (its own
            // handle), and the event counts as reported on the id whose uid
            // it carries (the listener's, for a request).
            if r.event == rdmacm::internal::abi::cma::RDMA_CM_EVENT_CONNECT_REQUEST {
                st.next_id += 1;
                let h = st.next_id;
                st.ids.insert(h, (0, 0, 0));
                r.id = h;
            }
            let owner = if r.uid != 0 { st.ids.iter().find(|(_, e)| e.0 == r.uid).map(|(h, _)| *h) } else { Some(r.id) };
            if let Some(e) = owner.and_then(|h| st.ids.get_mut(&h)) {
                e.2 += 1;
            }
            Ok(r)
        }
        fn set_option(&self, _fd: RawFd, _id: u32, _l: u32, _n: u32, _v: *mut std::ffi::c_void, _len: u32) -> Result<(), Errno> {
            Ok(())
        }
        fn migrate_id(&self, _new: RawFd, _id: u32, _old: RawFd) -> Result<u32, Errno> {
            Ok(0)
        }
        fn write_cm_event(&self, _fd: RawFd, _id: u32, _e: u32, _s: i32, _a: u64) -> Result<(), Errno> {
            Ok(())
        }
    }

    struct FuzzVerbs;
    impl Verbs for FuzzVerbs {
        fn device_list(&self) -> Result<Vec<DevEntry>, Errno> {
            Ok(vec![DevEntry { dev: 0x1000, guid: GUID, index: 0 }])
        }
        fn open(&self, _dev: usize) -> Result<OpenInfo, Errno> {
            Ok(OpenInfo { ctx: 0x2000, link_layers: vec![2], max_qp_wr: 16, max_qp_init_rd_atom: 4, max_qp_rd_atom: 4 })
        }
        fn close(&self, _ctx: usize) {}
        fn alloc_pd(&self, _ctx: usize) -> Result<usize, Errno> {
            Ok(0x3000)
        }
        fn dealloc_pd(&self, _pd: usize) {}
        fn transport_is_ib(&self, _ctx: usize) -> bool {
            true
        }
    }

    struct World {
        cm: &'static Cm,
        ucma: &'static FuzzUcma,
        ch: ChanRef,
        ids: Vec<IdRef>,
    }
    // SAFETY (for the fuzz harness only): the world is used from one thread.
    unsafe impl Send for World {}
    unsafe impl Sync for World {}

    fn world() -> &'static Mutex<World> {
        static W: OnceLock<Mutex<World>> = OnceLock::new();
        W.get_or_init(|| {
            let ucma: &'static FuzzUcma = Box::leak(Box::default());
            let cm: &'static Cm = Box::leak(Box::new(Cm::new(Box::new(ucma), Box::new(FuzzVerbs))));
            let ch = cm.create_channel().expect("channel");
            let ids = [rdmacm::internal::abi::cma::RDMA_PS_TCP, rdmacm::internal::abi::cma::RDMA_PS_UDP, rdmacm::internal::abi::cma::RDMA_PS_IB]
                .iter()
                .map(|&ps| cm.create_id(Some(&ch), std::ptr::null_mut(), ps).expect("id"))
                .collect();
            Mutex::new(World { cm, ucma, ch, ids })
        })
    }

    /// One batch of kernel events from fuzz bytes.
    pub fn events_one(data: &[u8]) {
        let w = world().lock().unwrap_or_else(|e| e.into_inner());
        let mut r = super::Reader(data);
        {
            let mut st = w.ucma.st.lock().unwrap();
            let sel = r.u8();
            let info = |r: &mut super::Reader| AddrInfo {
                node_guid: if r.u8() & 1 == 0 { GUID } else { u64::from(r.u8()) },
                port_num: r.u8() % 3,
                pkey: 0xffff,
                src: v4(1),
                dst: v4(2),
                ibdev_index: (r.u8() & 1 == 0).then_some(0),
            };
            st.addr = (sel & 1 == 0).then(|| info(&mut r));
            st.route = (sel & 2 == 0).then(|| RouteInfo {
                node_guid: GUID,
                // at most 2: the transport clamps the kernel's count (sys::ucma, tested there)
                num_paths: u32::from(r.u8() % 3),
                port_num: 1,
                src: v4(1),
                dst: v4(2),
                ..Default::default()
            });
            st.queue.clear();
            let known: Vec<(u32, u64)> = st.ids.iter().map(|(h, e)| (*h, e.0)).collect();
            for _ in 0..1 + r.u8() % 4 {
                let mut ev = EventResp::default();
                // the raw report, truncated where the bytes end (zeros after)
                let n = std::mem::size_of::<EventResp>();
                let take = usize::from(r.u8()) % (n + 1);
                let raw = r.bytes(take);
                // SAFETY: EventResp is plain integers and byte arrays; raw.len() <= its size.
                unsafe { std::ptr::copy_nonoverlapping(raw.as_ptr(), (&mut ev as *mut EventResp).cast::<u8>(), raw.len()) };
                let pick = r.u8();
                if pick % 4 != 0 && !known.is_empty() {
                    let (h, uid) = known[usize::from(pick) % known.len()];
                    ev.id = h;
                    ev.uid = if pick & 0x80 != 0 { 0 } else { uid };
                }
                if pick & 0x40 == 0 {
                    ev.event = u32::from(r.u8() % 24);
                }
                if pick & 0x20 == 0 {
                    ev.status = [0, -110i32 as u32, -113i32 as u32, 1, 28][usize::from(r.u8()) % 5];
                }
                st.queue.push_back(ev);
            }
        }
        let ours: Vec<*mut rdmacm::internal::abi::cma::rdma_cm_id> = w.ids.iter().map(|p| p.raw()).collect();
        for _ in 0..8 {
            let Ok(got) = rdmacm::internal::cma::get_event(&w.ch) else { break };
            let _ = (got.event, got.status);
            let new_id = (!ours.contains(&got.id)).then_some(got.id);
            rdmacm::internal::cma::ack_event(w.cm, got.ptr);
            if let Some(id) = new_id {
                if let Ok(p) = w.cm.id(id) {
                    let p = p.hold_to_destroy();
                    let _ = w.cm.destroy_id(&p);
                }
            }
        }
    }
}
