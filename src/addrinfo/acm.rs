// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The ibacm client used by rdma_getaddrinfo for active lookups.
//!
//! When the ibacm daemon runs, it publishes either a TCP port in
//! `<rundir>/ibacm.port` (then we connect to 127.0.0.1:port) or listens on
//! the unix socket `<rundir>/ibacm.sock`.  The connection is made once per
//! process; when there is no daemon, ibacm is skipped silently from then on.
//!
//! One request/response exchange per lookup, in the `acm_msg` format of
//! ibacm's `<infiniband/acm.h>` (header fields in host byte order, the
//! addresses and path records in network order):
//!
//! ```text
//! hdr (16):  version u8 | opcode u8 | status u8 | data[3] | length u16 | tid u64
//! entry (72): flags u32 | type u16 | reserved u16 | info[64]
//! ```
//!
//! `<rundir>` is `/run`; the environment variable `RDMACM_RS_IBACM_RUNDIR`
//! (read with secure_getenv, so ignored by setuid programs) replaces it.
//! That variable is a TEST HOOK for the project's ibacm test server, not
//! an interface for applications.
//!
//! The connection is a std stream; sending and receiving go through
//! [`crate::sys::unix`] (a send that cannot raise SIGPIPE).

#![deny(unsafe_code)]

use crate::addrinfo::{ib_hdr, sid_for, Hints, Rai, SockAddr, RAI_ROUTEONLY};
use crate::abi::cma::*;
use crate::sys::unix as sys;
use libc::{AF_INET, AF_INET6};
use std::sync::OnceLock;
use parking_lot::Mutex;
use std::ffi::{c_int, CStr, CString, OsStr};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

pub const ACM_VERSION: u8 = 1;
pub const ACM_OP_RESOLVE: u8 = 0x01;
pub const ACM_MSG_HDR_LENGTH: usize = 16;
pub const ACM_MSG_EP_LENGTH: usize = 72;
pub const ACM_MSG_DATA_LENGTH: usize = ACM_MSG_EP_LENGTH * 8;
/// `sizeof(struct acm_msg)`.
pub const ACM_MSG_SIZE: usize = ACM_MSG_HDR_LENGTH + ACM_MSG_DATA_LENGTH;
pub const ACM_EP_INFO_ADDRESS_IP: u16 = 0x0002;
pub const ACM_EP_INFO_ADDRESS_IP6: u16 = 0x0003;
pub const ACM_EP_INFO_PATH: u16 = 0x0010;
pub const ACM_EP_FLAG_SOURCE: u32 = 1 << 0;
pub const ACM_EP_FLAG_DEST: u32 = 1 << 1;
pub const ACM_FLAGS_NODELAY: u32 = 1 << 30;

/// Size of `struct ibv_path_record` and `struct ibv_path_data`.
const PATH_RECORD_LEN: usize = 64;
const PATH_DATA_LEN: usize = 72;

/// The environment variable naming a replacement for `/run` (test hook).
pub const RUNDIR_ENV: &str = "RDMACM_RS_IBACM_RUNDIR";

fn family(a: &[u8]) -> c_int {
    if a.len() < 2 {
        0
    } else {
        c_int::from(u16::from_ne_bytes([a[0], a[1]]))
    }
}

/// `n` bytes of `a` from `off`, zero-filled past its end.
fn bytes_at<const N: usize>(a: &[u8], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = a.get(off + i).copied().unwrap_or(0);
    }
    out
}

fn is_inet(a: Option<&SockAddr>) -> bool {
    a.is_some_and(|a| !a.is_empty() && matches!(a.family(), AF_INET | AF_INET6))
}

fn is_ib(a: Option<&SockAddr>) -> bool {
    a.is_some_and(|a| !a.is_empty() && a.family() == AF_IB)
}

/// An address's bytes (none for no address).
fn bytes(a: &Option<SockAddr>) -> &[u8] {
    a.as_ref().map_or(&[], SockAddr::as_bytes)
}

/// Writes an address endpoint (IPv4 or, for any other family, IPv6).
fn put_ep_addr(entry: &mut [u8], a: &[u8]) {
    if family(a) == AF_INET {
        entry[4..6].copy_from_slice(&ACM_EP_INFO_ADDRESS_IP.to_ne_bytes());
        entry[8..12].copy_from_slice(&bytes_at::<4>(a, 4));
    } else {
        entry[4..6].copy_from_slice(&ACM_EP_INFO_ADDRESS_IP6.to_ne_bytes());
        entry[8..24].copy_from_slice(&bytes_at::<16>(a, 8));
    }
}

/// The resolve request for the result node `rai`.
pub fn build_request(rai: &Rai, h: &Hints) -> Vec<u8> {
    let mut msg = vec![0u8; ACM_MSG_SIZE];
    msg[0] = ACM_VERSION;
    msg[1] = ACM_OP_RESOLVE;
    let mut n = 0usize;
    let entry = |n: &mut usize| -> std::ops::Range<usize> {
        let off = ACM_MSG_HDR_LENGTH + *n * ACM_MSG_EP_LENGTH;
        *n += 1;
        off..off + ACM_MSG_EP_LENGTH
    };
    if is_inet(rai.src.as_ref()) {
        let r = entry(&mut n);
        let e = &mut msg[r];
        e[0..4].copy_from_slice(&ACM_EP_FLAG_SOURCE.to_ne_bytes());
        put_ep_addr(e, bytes(&rai.src));
    }
    if is_inet(rai.dst.as_ref()) {
        let r = entry(&mut n);
        let e = &mut msg[r];
        let mut flags = ACM_EP_FLAG_DEST;
        if h.flags & (RAI_NUMERICHOST | RAI_NOROUTE) != 0 {
            flags |= ACM_FLAGS_NODELAY;
        }
        e[0..4].copy_from_slice(&flags.to_ne_bytes());
        put_ep_addr(e, bytes(&rai.dst));
    }
    let src_ib = is_ib(rai.src.as_ref());
    let dst_ib = is_ib(rai.dst.as_ref());
    if h.route_len() != 0 || src_ib || dst_ib {
        let r = entry(&mut n);
        let e = &mut msg[r];
        let route = h.route.as_deref().unwrap_or_default();
        let path = match route.len() {
            PATH_RECORD_LEN => Some(route),
            PATH_DATA_LEN => Some(&route[8..]),
            _ => None,
        };
        if let Some(p) = path {
            e[8..8 + PATH_RECORD_LEN].copy_from_slice(p);
        }
        // ibv_path_record: dgid at 8, sgid at 24; sockaddr_ib: gid at 8.
        if src_ib {
            e[8 + 24..8 + 40].copy_from_slice(&bytes_at::<16>(bytes(&rai.src), 8));
        }
        if dst_ib {
            e[8 + 8..8 + 24].copy_from_slice(&bytes_at::<16>(bytes(&rai.dst), 8));
        }
        e[4..6].copy_from_slice(&ACM_EP_INFO_PATH.to_ne_bytes());
    }
    let len = ACM_MSG_HDR_LENGTH + n * ACM_MSG_EP_LENGTH;
    msg[6..8].copy_from_slice(&(len as u16).to_ne_bytes());
    msg.truncate(len);
    msg
}

/// Whether a received message is a usable answer (upstream's checks).
pub fn response_ok(resp: &[u8]) -> bool {
    resp.len() >= ACM_MSG_HDR_LENGTH
        && usize::from(u16::from_ne_bytes([resp[6], resp[7]])) == resp.len()
        && resp[2] == 0
}

/// Takes the paths and the source address out of a response.
pub fn save_response(rai: &mut Rai, resp: &[u8]) {
    let mut msg = resp.to_vec();
    msg.resize(ACM_MSG_SIZE.max(resp.len()), 0);
    let len = usize::from(u16::from_ne_bytes([msg[6], msg[7]]));
    let cnt = len.saturating_sub(ACM_MSG_HDR_LENGTH) / ACM_MSG_EP_LENGTH;
    let cnt = cnt.min(8);
    let mut first_path = None;
    let mut paths = 0usize;
    for i in 0..cnt {
        let off = ACM_MSG_HDR_LENGTH + i * ACM_MSG_EP_LENGTH;
        let flags = u32::from_ne_bytes(bytes_at::<4>(&msg, off));
        let ty = u16::from_ne_bytes(bytes_at::<2>(&msg, off + 4));
        match ty {
            ACM_EP_INFO_PATH => {
                msg[off + 4..off + 6].copy_from_slice(&[0, 0]);
                first_path.get_or_insert(off);
                paths += 1;
            }
            ACM_EP_INFO_ADDRESS_IP if flags & ACM_EP_FLAG_SOURCE != 0 && rai.src_len() == 0 => {
                rai.src = Some(SockAddr::v4(u32::from_ne_bytes(bytes_at::<4>(&msg, off + 8))));
            }
            ACM_EP_INFO_ADDRESS_IP6 if flags & ACM_EP_FLAG_SOURCE != 0 && rai.src_len() == 0 => {
                rai.src = Some(SockAddr::v6(bytes_at::<16>(&msg, off + 8), 0));
            }
            _ => {}
        }
    }
    // Upstream copies `paths` entries starting at the first path entry
    // (whatever lies between them); with no path, an empty non-NULL route.
    let route = match first_path {
        Some(off) => msg[off..(off + paths * PATH_DATA_LEN).min(msg.len())].to_vec(),
        None => Vec::new(),
    };
    rai.route = Some(route);
}

/// The `ib_connect_hdr` carrying the IP addresses (none for AF_IB).
pub fn connect_hdr(rai: &Rai) -> Option<Vec<u8>> {
    if rai.family == AF_IB {
        return None;
    }
    let src = bytes(&rai.src);
    let dst = bytes(&rai.dst);
    let ips = if rai.family == AF_INET {
        ib_hdr::Ips::V4 { src: bytes_at::<4>(src, 4), dst: bytes_at::<4>(dst, 4) }
    } else {
        ib_hdr::Ips::V6 { src: bytes_at::<16>(src, 8), dst: bytes_at::<16>(dst, 8) }
    };
    Some(ib_hdr::build(&ips).to_vec())
}

/// The AF_IB entry built from the first path of `rai`'s route.
pub fn af_ib_entry(rai: &Rai) -> Rai {
    let route = rai.route.clone().unwrap_or_default();
    let path = bytes_at::<PATH_RECORD_LEN>(&route, 8);
    let pkey = u16::from_ne_bytes([path[50], path[51]]);
    let flh = u32::from_be_bytes(bytes_at::<4>(&path, 44));
    let flow = (flh >> 8).to_be();
    let mk = |gid: [u8; 16], addr: Option<&SockAddr>| {
        let (sid, mask) = sid_for(rai.port_space, addr);
        SockAddr::from_ib(&sockaddr_ib {
            sib_family: AF_IB as u16,
            sib_pkey: pkey,
            sib_flowinfo: flow,
            sib_addr: ib_addr { sib_raw: gid },
            sib_sid: sid,
            sib_sid_mask: mask,
            sib_scope_id: 0,
        })
    };
    Rai {
        flags: rai.flags,
        family: AF_IB,
        qp_type: rai.qp_type,
        port_space: rai.port_space,
        src_canonname: rai.src_canonname.clone(),
        dst_canonname: rai.dst_canonname.clone(),
        connect: connect_hdr(rai),
        src: Some(mk(bytes_at::<16>(&path, 24), rai.src.as_ref())),
        dst: Some(mk(bytes_at::<16>(&path, 8), rai.dst.as_ref())),
        route: Some(route),
    }
}

/// Applies a response to the list (whose only node is the libc result).
pub fn apply_response(list: &mut Vec<Rai>, h: &Hints, resp: &[u8], af_ib: bool) {
    if !response_ok(resp) {
        log::debug!(target: "rdmacm", "ibacm: unusable answer ({} bytes), ignored", resp.len());
        return;
    }
    let Some(rai) = list.first_mut() else { return };
    save_response(rai, resp);
    if af_ib && h.flags & RAI_ROUTEONLY == 0 && rai.route_len() != 0 {
        let ib = af_ib_entry(rai);
        list.insert(0, ib);
    }
}

/// One exchange on a connected socket: send the request, read one answer
/// (blocking, as upstream), apply it.
pub fn resolve_on(fd: BorrowedFd<'_>, list: &mut Vec<Rai>, h: &Hints, af_ib: bool) {
    let Some(first) = list.first() else { return };
    let req = build_request(first, h);
    match sys::send_nosignal(fd, &req) {
        Ok(n) if n == req.len() => {}
        _ => {
            log::debug!(target: "rdmacm", "ibacm: send failed, skipped");
            return;
        }
    }
    let mut buf = vec![0u8; ACM_MSG_SIZE];
    match sys::recv(fd, &mut buf) {
        Ok(n) => buf.truncate(n),
        Err(_) => {
            log::debug!(target: "rdmacm", "ibacm: recv failed, skipped");
            return;
        }
    }
    apply_response(list, h, &buf, af_ib);
}

/// The process-wide connection to ibacm, made on first use (`None`: no
/// daemon answered then).
fn global() -> Option<&'static Mutex<Conn>> {
    CONN.get_or_init(|| {
        // The first use connects (a cancellation point of libc that must
        // not act: rdma_getaddrinfo's numeric path runs without the
        // exports' guard). Under /run the paths are constants: a fresh
        // process's first lookup builds none.
        let c = crate::sys::cancel::nocancel(|| match rundir_env() {
            None => connect_at(c"/run/ibacm.port", c"/run/ibacm.sock"),
            Some(d) => connect(&d),
        });
        if c.is_none() {
            log::debug!(target: "rdmacm", "ibacm: no daemon, route lookups skipped");
        }
        c.map(Mutex::new)
    })
    .as_ref()
}

/// Whether the process-wide ibacm connection exists (connecting on first
/// use), i.e. whether an active lookup may get route data from it.
pub fn daemon_connected() -> bool {
    global().is_some()
}

/// Whether the process-wide ibacm connection exists, when the first use
/// has already looked for the daemon (`None`: not yet; nothing is tried).
pub fn daemon_probed() -> Option<bool> {
    CONN.get().map(Option::is_some)
}

/// Reads the daemon's TCP port (upstream: fscanf "%hu"; 0 = none): the
/// file's first 256 bytes (a port number, a newline) read at once.
fn read_port_file(p: &CStr) -> u16 {
    let mut b = [0u8; 256];
    sys::read_head(p, &mut b).map_or(0, |n| parse_port(&b[..n]))
}

/// fscanf's "%hu" of `b`: blanks, an optional sign, digits (wrapping as
/// strtoul, cut to 16 bits); 0 without digits.
fn parse_port(b: &[u8]) -> u16 {
    let t = &b[b.iter().take_while(|c| c.is_ascii_whitespace()).count()..];
    let (neg, d) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if !d.first().is_some_and(u8::is_ascii_digit) {
        return 0;
    }
    let mut v: u64 = 0;
    for &b in d.iter().take_while(|c| c.is_ascii_digit()) {
        v = v.wrapping_mul(10).wrapping_add(u64::from(b - b'0'));
    }
    let v = if neg { v.wrapping_neg() } else { v };
    v as u16
}

/// A connection to the daemon.
#[derive(Debug)]
pub enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl AsFd for Conn {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Conn::Tcp(s) => s.as_fd(),
            Conn::Unix(s) => s.as_fd(),
        }
    }
}

/// Connects to the daemon under `rundir` (TCP to the loopback address when
/// `ibacm.port` names a port, else the unix socket `ibacm.sock`); None
/// when nothing listens.
pub fn connect(rundir: &Path) -> Option<Conn> {
    let at = |f: &str| CString::new(rundir.join(f).into_os_string().into_vec()).ok();
    connect_at(&at("ibacm.port")?, &at("ibacm.sock")?)
}

/// [`connect`] with the port file and the socket named.
fn connect_at(port_file: &CStr, sock: &CStr) -> Option<Conn> {
    let port = read_port_file(port_file);
    if port != 0 {
        return TcpStream::connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).ok().map(Conn::Tcp);
    }
    // Too long for sun_path, or absent: no socket is made.
    if sock.to_bytes().len() >= SUN_PATH_LEN || !sys::path_exists(sock) {
        return None;
    }
    UnixStream::connect(OsStr::from_bytes(sock.to_bytes())).ok().map(Conn::Unix)
}

/// `sizeof(((struct sockaddr_un *)0)->sun_path)`.
const SUN_PATH_LEN: usize = std::mem::size_of::<libc::sockaddr_un>() - std::mem::size_of::<libc::sa_family_t>();

/// `$RDMACM_RS_IBACM_RUNDIR`, when set (the test hook replacing /run).
fn rundir_env() -> Option<PathBuf> {
    let name = c"RDMACM_RS_IBACM_RUNDIR";
    debug_assert_eq!(name.to_bytes(), RUNDIR_ENV.as_bytes());
    sys::secure_getenv(name).map(PathBuf::from)
}

/// The process-wide connection: tried once; None when no daemon listened.
static CONN: OnceLock<Option<Mutex<Conn>>> = OnceLock::new();

/// The process-wide lookup: connects on first use, then one exchange per
/// call (one at a time); silently nothing, without taking a lock, when
/// there is no daemon.
pub fn resolve_global(list: &mut Vec<Rai>, h: &Hints, af_ib: impl FnOnce() -> bool) {
    if let Some(c) = global() {
        let guard = c.lock();
        resolve_on(guard.as_fd(), list, h, af_ib());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addrinfo::{getaddrinfo, Hints};
    use std::io::{Read, Write};
    use std::os::unix::net::UnixListener;

    fn sin(a: [u8; 4], port: u16) -> SockAddr {
        let mut v = vec![0u8; 16];
        v[0..2].copy_from_slice(&(AF_INET as u16).to_ne_bytes());
        v[2..4].copy_from_slice(&port.to_be_bytes());
        v[4..8].copy_from_slice(&a);
        SockAddr::from_bytes(&v).unwrap()
    }

    /// A path record entry with recognisable gids, pkey and flow label.
    fn path_entry() -> [u8; 72] {
        let mut e = [0u8; 72];
        e[4..6].copy_from_slice(&ACM_EP_INFO_PATH.to_ne_bytes());
        let p = &mut e[8..];
        p[8..24].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]); // dgid
        p[24..40].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]); // sgid
        p[44..48].copy_from_slice(&0x0001_2340u32.to_be_bytes()); // flow label 0x123, hop 0x40
        p[50..52].copy_from_slice(&0xffffu16.to_be_bytes());
        e
    }

    /// Serves one request on a unix socket: checks it, answers with a
    /// source address and one path.
    fn serve_one(l: UnixListener) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut req = vec![0u8; ACM_MSG_SIZE];
            let n = s.read(&mut req).unwrap();
            req.truncate(n);
            let mut resp = req.clone();
            resp.truncate(ACM_MSG_HDR_LENGTH);
            resp[1] |= 0x80;
            let mut src = [0u8; 72];
            src[0..4].copy_from_slice(&ACM_EP_FLAG_SOURCE.to_ne_bytes());
            src[4..6].copy_from_slice(&ACM_EP_INFO_ADDRESS_IP.to_ne_bytes());
            src[8..12].copy_from_slice(&[192, 0, 2, 1]);
            resp.extend_from_slice(&src);
            resp.extend_from_slice(&path_entry());
            let len = resp.len() as u16;
            resp[6..8].copy_from_slice(&len.to_ne_bytes());
            s.write_all(&resp).unwrap();
            req
        })
    }

    #[test]
    fn request_layout() {
        let rai = Rai { family: AF_INET, src: Some(sin([1, 2, 3, 4], 0)), dst: Some(sin([5, 6, 7, 8], 1)), ..Default::default() };
        let h = Hints { flags: RAI_NOROUTE, ..Default::default() };
        let m = build_request(&rai, &h);
        assert_eq!(m.len(), 16 + 2 * 72);
        assert_eq!(&m[0..2], &[1, 1]);
        assert_eq!(u16::from_ne_bytes([m[6], m[7]]), 160);
        assert_eq!(u32::from_ne_bytes(m[16..20].try_into().unwrap()), ACM_EP_FLAG_SOURCE);
        assert_eq!(&m[24..28], &[1, 2, 3, 4]);
        assert_eq!(u32::from_ne_bytes(m[88..92].try_into().unwrap()), ACM_EP_FLAG_DEST | ACM_FLAGS_NODELAY);
        assert_eq!(u16::from_ne_bytes([m[92], m[93]]), ACM_EP_INFO_ADDRESS_IP);
        assert_eq!(&m[96..100], &[5, 6, 7, 8]);
    }

    #[test]
    fn bad_answers_ignored() {
        let mut l = vec![Rai::default()];
        apply_response(&mut l, &Hints::default(), &[0u8; 10], true);
        let mut r = [0u8; 16];
        r[6] = 17;
        apply_response(&mut l, &Hints::default(), &r, true);
        r[6] = 16;
        r[2] = 3; // status
        apply_response(&mut l, &Hints::default(), &r, true);
        assert_eq!(l, vec![Rai::default()]);
        r[2] = 0;
        apply_response(&mut l, &Hints::default(), &r, true);
        // A good answer without a path: empty, non-NULL route, no AF_IB entry.
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].route, Some(vec![]));
    }

    #[test]
    fn test_server_unix_socket() {
        let dir = std::env::temp_dir().join(format!("rdmacm-acm-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let l = UnixListener::bind(dir.join("ibacm.sock")).unwrap();
        let srv = serve_one(l);
        let fd = connect(&dir).expect("connect to the test server");
        let h = Hints { flags: RAI_NUMERICHOST, family: AF_INET, ..Default::default() };
        let mut list = vec![Rai {
            family: AF_INET,
            qp_type: IBV_QPT_RC as c_int,
            port_space: RDMA_PS_TCP as c_int,
            dst: Some(sin([192, 0, 2, 2], 7471)),
            ..Default::default()
        }];
        assert!(matches!(fd, Conn::Unix(_)));
        resolve_on(fd.as_fd(), &mut list, &h, true);
        let req = srv.join().unwrap();
        assert_eq!(req.len(), 16 + 72);
        assert_eq!(u32::from_ne_bytes(req[16..20].try_into().unwrap()), ACM_EP_FLAG_DEST | ACM_FLAGS_NODELAY);
        assert_eq!(list.len(), 2, "AF_IB entry prepended");
        let ib = &list[0];
        assert_eq!(ib.family, AF_IB);
        assert_eq!(ib.route_len(), 72);
        assert_eq!(ib.connect.as_ref().unwrap()[1], 0x40);
        assert_eq!(&ib.connect.as_ref().unwrap()[16..20], &[192, 0, 2, 1]);
        assert_eq!(&ib.connect.as_ref().unwrap()[32..36], &[192, 0, 2, 2]);
        let s = ib.src.as_ref().unwrap().as_ib().unwrap();
        let d = ib.dst.as_ref().unwrap().as_ib().unwrap();
        assert_eq!(s.sib_addr.sib_raw[15], 1);
        assert_eq!(d.sib_addr.sib_raw[15], 2);
        assert_eq!(u32::from_be(d.sib_flowinfo), 0x123);
        assert_eq!(u64::from_be(d.sib_sid), 0x0106_0000 + 7471);
        assert_eq!(u64::from_be(s.sib_sid), 0x0106_0000);
        assert_eq!(d.sib_pkey, 0xffff);
        let ip = &list[1];
        assert_eq!(ip.src.as_ref().unwrap(), &sin([192, 0, 2, 1], 0));
        // The route's entry type is cleared (ibv_path_data.reserved = 0).
        assert_eq!(&ip.route.as_ref().unwrap()[4..8], &[0, 0, 0, 0]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    struct AfIb;
    impl crate::addrinfo::CmBackend for AfIb {
        fn af_ib_supported(&self) -> bool {
            true
        }
        fn ib_sa_gids(&self) -> Vec<[u8; 16]> {
            Vec::new()
        }
        fn resolve_ib_service(&self, _: &[u8; 16], _: &std::ffi::CStr) -> Result<Vec<Rai>, nix::errno::Errno> {
            Err(nix::errno::Errno::ENOENT)
        }
    }

    /// The whole rdma_getaddrinfo path against the test server over TCP
    /// (the `ibacm.port` variant).
    #[test]
    fn end_to_end_tcp_port_file() {
        use crate::addrinfo::{getaddrinfo_with, AcmTarget};
        let dir = std::env::temp_dir().join(format!("rdmacm-acm-tcp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std::fs::write(dir.join("ibacm.port"), format!("{}\n", l.local_addr().unwrap().port())).unwrap();
        let srv = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut req = vec![0u8; ACM_MSG_SIZE];
            let n = s.read(&mut req).unwrap();
            req.truncate(n);
            let mut resp = req[..16].to_vec();
            resp.extend_from_slice(&path_entry());
            resp.extend_from_slice(&path_entry());
            let len = resp.len() as u16;
            resp[6..8].copy_from_slice(&len.to_ne_bytes());
            s.write_all(&resp).unwrap();
            req
        });
        let fd = connect(&dir).expect("tcp connect");
        assert!(matches!(fd, Conn::Tcp(_)));
        let h = Hints { flags: RAI_NUMERICHOST, qp_type: IBV_QPT_RC as c_int, ..Default::default() };
        let hints_src = sin([192, 0, 2, 1], 0);
        let h = Hints { src: Some(hints_src), ..h };
        let list = getaddrinfo_with(Some(c"2001:db8::2"), Some(c"7471"), &h, &AfIb, AcmTarget::Conn(fd.as_fd())).unwrap();
        let req = srv.join().unwrap();
        // source (IPv4 from the hints) and destination (IPv6) endpoints
        assert_eq!(req.len(), 16 + 2 * 72);
        assert_eq!(u16::from_ne_bytes([req[20], req[21]]), ACM_EP_INFO_ADDRESS_IP);
        assert_eq!(u16::from_ne_bytes([req[92], req[93]]), ACM_EP_INFO_ADDRESS_IP6);
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].route_len(), 144);
        assert_eq!(list[1].route_len(), 144);
        // IPv6 result family: connect header says IPv6
        assert_eq!(list[0].connect.as_ref().unwrap()[1], 0x60);
        assert_eq!(list[0].family, AF_IB);
        assert_eq!(list[0].src_len(), 48);
        assert_eq!(list[1].family, AF_INET6);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// RAI_ROUTEONLY (upstream's internal flag) keeps the AF_IB entry out.
    #[test]
    fn route_only_no_af_ib() {
        let mut resp = vec![0u8; 16];
        resp[0] = 1;
        resp.extend_from_slice(&path_entry());
        resp[6..8].copy_from_slice(&88u16.to_ne_bytes());
        let h = Hints { flags: RAI_ROUTEONLY, ..Default::default() };
        let mut l = vec![Rai { family: AF_INET, ..Default::default() }];
        apply_response(&mut l, &h, &resp, true);
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].route_len(), 72);
        let mut l = vec![Rai { family: AF_INET, ..Default::default() }];
        apply_response(&mut l, &Hints::default(), &resp, false);
        assert_eq!(l.len(), 1, "no AF_IB support, no AF_IB entry");
    }

    #[test]
    fn no_daemon_is_quick_and_silent() {
        let dir = std::env::temp_dir().join(format!("rdmacm-acm-none-{}", std::process::id()));
        let t = std::time::Instant::now();
        assert!(connect(&dir).is_none());
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        // The full path with the real /run (no daemon on test hosts).
        let h = Hints { flags: RAI_NUMERICHOST, ..Default::default() };
        let l = getaddrinfo(Some(c"192.0.2.9"), None, &h, &crate::cma::ai::CmaBackend).unwrap();
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn port_file() {
        let dir = std::env::temp_dir().join(format!("rdmacm-acm-port-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("ibacm.port");
        for (s, v) in [("6125\n", 6125u16), ("  42", 42), ("x", 0), ("70000", 4464), ("", 0)] {
            std::fs::write(&p, s).unwrap();
            assert_eq!(read_port_file(&CString::new(p.as_os_str().as_bytes()).unwrap()), v, "{s:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
