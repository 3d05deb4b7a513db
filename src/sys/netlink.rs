// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Finding the kernel's rdma_cm character device as rdma-core does.
//!
//! 1. Ask the kernel over RDMA netlink (`RDMA_NLDEV_CMD_GET_CHARDEV` for the
//!    client "rdma_cm"): the answer names the device file (`rdma_cm`), its
//!    device number and the ucma ABI version.  Asking makes the kernel load
//!    `rdma_ucm` when it is not loaded yet (`request_module("rdma-client-
//!    rdma_cm")`), so a container or minimal image where nothing loaded the
//!    module still works.
//! 2. When netlink cannot answer (kernels before 5.3, no RDMA netlink): the
//!    ABI version from sysfs (`class/misc/rdma_cm/abi_version`, then
//!    `class/infiniband_ucma/abi_version`, under `$SYSFS_PATH` or `/sys`:
//!    [`sysfs_path`]), the device number unknown.
//! 3. Opening: `/dev/infiniband/<name>` must be a character device, and,
//!    when netlink gave the number, that very device.  When it is not
//!    (missing, or another device under that name) and the number is known,
//!    `/dev/char/<major>:<minor>` (udev's link) is tried, waiting up to five
//!    seconds for udev to create it (inotify on `/dev/char`), as upstream's
//!    `open_cdev` does.
//!
//! The netlink answer is asked for once per process and kept, like upstream's
//! `abi_ver`/`dev_cdev`.

use nix::errno::Errno;
use std::sync::OnceLock;
use std::ffi::CString;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `NETLINK_RDMA` (linux/netlink.h).
const NETLINK_RDMA: i32 = 20;
/// `RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET_CHARDEV)`: (5 << 10) + 15.
const NLDEV_GET_CHARDEV: u16 = (5 << 10) + 15;
/// Attributes of rdma/rdma_netlink.h's `enum rdma_nldev_attr`.
const ATTR_CHARDEV_TYPE: u16 = 69; // string: the client ("rdma_cm")
const ATTR_CHARDEV_NAME: u16 = 70; // string: the file name under /dev/infiniband
const ATTR_CHARDEV_ABI: u16 = 71; // u64: the ABI version (top 32 bits reserved)
const ATTR_CHARDEV: u16 = 72; // u64: the device number, huge_encode_dev()
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDRLEN: usize = 16;
/// Longest name kept (upstream's `dev_name[64]`).
const NAME_MAX: usize = 63;

/// The kernel's answer about a character device (held in place: asking
/// allocates nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharDev {
    /// File name under /dev/infiniband: `name_len` bytes.
    name: [u8; NAME_MAX],
    name_len: u8,
    /// Device number (glibc's dev_t).
    pub dev: libc::dev_t,
    /// ABI version (the low 32 bits of the attribute, as upstream).
    pub abi: u32,
}

impl CharDev {
    /// The answer for device file `name` (1 to [`NAME_MAX`] bytes, else
    /// None), device number `dev`, ABI version `abi`.
    fn new(name: &[u8], dev: libc::dev_t, abi: u32) -> Option<CharDev> {
        if name.is_empty() || name.len() > NAME_MAX {
            return None;
        }
        let mut n = [0u8; NAME_MAX];
        n[..name.len()].copy_from_slice(name);
        Some(CharDev { name: n, name_len: name.len() as u8, dev, abi })
    }

    /// File name under /dev/infiniband (the kernel's bytes, as upstream
    /// takes them).
    pub fn name(&self) -> &std::ffi::OsStr {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::OsStr::from_bytes(&self.name[..usize::from(self.name_len)])
    }
}

/// `makedev` of the kernel's `huge_encode_dev` value (upstream's decoding).
fn decode_dev(v: u64) -> libc::dev_t {
    let major = ((v & 0xfff00) >> 8) as u32;
    let minor = ((v & 0xff) | ((v >> 12) & 0xfff00)) as u32;
    libc::makedev(major, minor)
}

/// Longest request: nlmsghdr + one string attribute of a client name of
/// up to [`KIND_MAX`] bytes.
const REQ_MAX: usize = NLMSG_HDRLEN + 4 + ((KIND_MAX + 1 + 3) & !3);
/// Longest client name asked about.
const KIND_MAX: usize = 32;

/// The request: nlmsghdr + one string attribute (the client's name), in
/// `m`; its length.
fn request(kind: &str, seq: u32, m: &mut [u8; REQ_MAX]) -> usize {
    let kind = &kind.as_bytes()[..kind.len().min(KIND_MAX)];
    let attr_len = 4 + kind.len() + 1;
    let total = NLMSG_HDRLEN + ((attr_len + 3) & !3);
    *m = [0; REQ_MAX];
    m[0..4].copy_from_slice(&(total as u32).to_ne_bytes());
    m[4..6].copy_from_slice(&NLDEV_GET_CHARDEV.to_ne_bytes());
    m[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m[8..12].copy_from_slice(&seq.to_ne_bytes());
    m[16..18].copy_from_slice(&(attr_len as u16).to_ne_bytes());
    m[18..20].copy_from_slice(&ATTR_CHARDEV_TYPE.to_ne_bytes());
    m[20..20 + kind.len()].copy_from_slice(kind);
    total
}

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

/// What one datagram from the kernel said.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    /// The answer (all three attributes present).
    Dev(CharDev),
    /// An error message (the kernel's negative errno), or an answer lacking
    /// an attribute: the query failed.
    Failed(i32),
    /// Nothing for us (another sequence number, an acknowledgement).
    Nothing,
}

/// Parses the messages of one datagram; the first answer or error to our
/// sequence number decides.
fn parse(buf: &[u8], seq: u32) -> Reply {
    let mut off = 0;
    while off + NLMSG_HDRLEN <= buf.len() {
        let (Some(len), Some(ty), Some(mseq)) = (u32_at(buf, off), u16_at(buf, off + 4), u32_at(buf, off + 8)) else {
            break;
        };
        let len = len as usize;
        if len < NLMSG_HDRLEN || off + len > buf.len() {
            break;
        }
        let msg = &buf[off..off + len];
        off += (len + 3) & !3;
        if mseq != seq {
            continue;
        }
        match ty {
            NLMSG_ERROR => {
                let e = u32_at(msg, NLMSG_HDRLEN).map_or(-libc::EIO, |v| v as i32);
                if e != 0 {
                    return Reply::Failed(e);
                }
            }
            NLMSG_DONE => return Reply::Failed(-libc::ENODATA),
            NLDEV_GET_CHARDEV => return parse_attrs(&msg[NLMSG_HDRLEN..]),
            _ => {}
        }
    }
    Reply::Nothing
}

fn parse_attrs(mut a: &[u8]) -> Reply {
    let (mut name, mut dev, mut abi) = (None, None, None);
    while a.len() >= 4 {
        let (Some(alen), Some(aty)) = (u16_at(a, 0), u16_at(a, 2)) else { break };
        let alen = alen as usize;
        if alen < 4 || alen > a.len() {
            break;
        }
        let data = &a[4..alen];
        match aty & 0x3fff {
            ATTR_CHARDEV_NAME => name = Some(data.split(|&c| c == 0).next().unwrap_or_default()),
            ATTR_CHARDEV => dev = u64_at(data, 0),
            ATTR_CHARDEV_ABI => abi = u64_at(data, 0),
            _ => {}
        }
        a = &a[((alen + 3) & !3).min(a.len())..];
    }
    match (name, dev, abi) {
        (Some(name), Some(dev), Some(abi)) => CharDev::new(name, decode_dev(dev), abi as u32).map_or(Reply::Failed(-libc::EPROTO), Reply::Dev),
        _ => Reply::Failed(-libc::EPROTO),
    }
}

/// A socket this module owns; closed on drop.
struct Fd(RawFd);
impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and still open.
        unsafe { libc::close(self.0) };
    }
}

/// The sequence number of the request: the socket is this call's own, so
/// only the kernel's answer to it arrives there.
const SEQ: u32 = 1;
/// The receive buffer: the answer is one message of about 50 bytes (an
/// error message about 50), and a longer datagram is cut at this length
/// (then the answer lacks attributes: no answer).
const ANSWER_MAX: usize = 1024;

/// Asks the kernel about the character device of client `kind`: socket,
/// sendto, recv, close. The kernel handles an RDMA netlink request inside
/// the sendto (loading the client's module first when needed) and queues
/// its answer before sendto returns, so the recv does not wait
/// (MSG_DONTWAIT: an empty queue means no answer, EAGAIN).
pub fn query_chardev(kind: &str) -> Result<CharDev, Errno> {
    // SAFETY: plain system call with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, NETLINK_RDMA) };
    if fd < 0 {
        return Err(super::last_errno());
    }
    let fd = Fd(fd);
    let mut req = [0u8; REQ_MAX];
    let len = request(kind, SEQ, &mut req);
    // SAFETY: an all-zero sockaddr_nl is valid; the kernel's address is pid 0.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: req and kernel are valid for the lengths passed.
    let n = unsafe {
        libc::sendto(
            fd.0,
            req.as_ptr() as *const libc::c_void,
            len,
            0,
            &kernel as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if n < 0 {
        return Err(super::last_errno());
    }
    let mut buf = [0u8; ANSWER_MAX];
    loop {
        // SAFETY: buf is valid for writes of buf.len() bytes.
        let n = unsafe { libc::recv(fd.0, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = super::last_errno();
            if e == Errno::EINTR {
                continue;
            }
            return Err(e);
        }
        match parse(&buf[..n as usize], SEQ) {
            Reply::Dev(d) => return Ok(d),
            Reply::Failed(e) => return Err(super::errno_from_raw(-e)),
            Reply::Nothing => continue,
        }
    }
}

/// The kernel's answer for "rdma_cm", asked once per process; None when
/// netlink could not answer (then sysfs and the default name apply).
pub fn ucma_chardev() -> Option<&'static CharDev> {
    static DEV: OnceLock<Option<CharDev>> = OnceLock::new();
    DEV.get_or_init(|| match query_chardev("rdma_cm") {
        Ok(d) => {
            log::debug!(target: "rdmacm", "netlink: rdma_cm is /dev/infiniband/{} ({}:{}), ABI {}",
                std::path::Path::new(d.name()).display(), libc::major(d.dev), libc::minor(d.dev), d.abi);
            Some(d)
        }
        Err(e) => {
            log::debug!(target: "rdmacm", "netlink: no answer for rdma_cm ({e}): sysfs and /dev/infiniband/rdma_cm");
            None
        }
    })
    .as_ref()
}

/// Where sysfs is: `$SYSFS_PATH` (not for privileged programs) without its
/// trailing slashes and cut at 256 bytes, as libibverbs' `ibv_get_sysfs_path`;
/// `/sys` otherwise.
pub fn sysfs_path() -> PathBuf {
    sysfs_path_from(super::env::var(c"SYSFS_PATH"))
}

fn sysfs_path_from(env: Option<std::ffi::OsString>) -> PathBuf {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let Some(v) = env else { return PathBuf::from("/sys") };
    let mut b = v.into_vec();
    b.truncate(256);
    if let Some(nul) = b.iter().position(|&c| c == 0) {
        b.truncate(nul);
    }
    while b.last() == Some(&b'/') {
        b.pop();
    }
    PathBuf::from(std::ffi::OsStr::from_bytes(&b))
}

/// Opens `path` read-write when it is a character device (and the device
/// `dev`, unless 0), as upstream's `open_cdev_internal`.
fn open_checked(path: &std::path::Path, dev: libc::dev_t) -> Result<RawFd, Errno> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    // SAFETY: c is a valid NUL-terminated string.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(super::last_errno());
    }
    // SAFETY: an all-zero stat is a valid output buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open; st is a valid output buffer.
    let r = unsafe { libc::fstat(fd, &mut st) };
    if r != 0 || (st.st_mode & libc::S_IFMT) != libc::S_IFCHR || (dev != 0 && st.st_rdev != dev) {
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        return Err(Errno::ENODEV);
    }
    Ok(fd)
}

/// How long udev gets to create `/dev/char/<major>:<minor>` (upstream's 5 s).
const UDEV_WAIT: Duration = Duration::from_secs(5);

/// `/dev/char/<major>:<minor>`, waiting up to [`UDEV_WAIT`] for it to appear
/// (inotify on `/dev/char`); fails at once when that directory cannot be
/// watched, as upstream's `open_cdev_robust`.
fn open_by_number(dev: libc::dev_t) -> Result<RawFd, Errno> {
    let path = PathBuf::from(format!("/dev/char/{}:{}", libc::major(dev), libc::minor(dev)));
    // SAFETY: plain system call.
    let ifd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
    if ifd < 0 {
        return Err(super::last_errno());
    }
    let ifd = Fd(ifd);
    // SAFETY: the path literal is NUL-terminated.
    if unsafe { libc::inotify_add_watch(ifd.0, c"/dev/char/".as_ptr(), libc::IN_CREATE) } < 0 {
        return Err(super::last_errno());
    }
    let deadline = Instant::now() + UDEV_WAIT;
    let mut last = match open_checked(&path, dev) {
        Ok(fd) => return Ok(fd),
        Err(e) => e,
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(last);
        }
        let mut p = libc::pollfd { fd: ifd.0, events: libc::POLLIN, revents: 0 };
        // SAFETY: p is one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, left.as_millis().clamp(1, i32::MAX as u128) as i32) };
        if r < 0 && super::last_errno() != Errno::EINTR {
            return Err(last);
        }
        match open_checked(&path, dev) {
            Ok(fd) => return Ok(fd),
            Err(e) => last = e,
        }
        if r > 0 {
            let mut b = [0u8; 4096];
            // SAFETY: b is valid for writes of its length; the fd is non-blocking.
            unsafe { libc::read(ifd.0, b.as_mut_ptr() as *mut libc::c_void, b.len()) };
        }
    }
}

/// Opens the rdma_cm character device as upstream does: the name and number
/// netlink gave (else `rdma_cm`, number unknown) under /dev/infiniband, then
/// by number under /dev/char.
pub fn open_ucma() -> Result<RawFd, Errno> {
    let (name, dev) = ucma_chardev().map_or((std::ffi::OsStr::new("rdma_cm"), 0), |d| (d.name(), d.dev));
    match open_checked(&PathBuf::from("/dev/infiniband").join(name), dev) {
        Ok(fd) => Ok(fd),
        Err(e) if dev == 0 => Err(e),
        Err(e) => {
            log::debug!(target: "rdmacm", "/dev/infiniband/{}: {e}; trying /dev/char/{}:{}", std::path::Path::new(name).display(),
                libc::major(dev), libc::minor(dev));
            open_by_number(dev)
        }
    }
}

/// Whether the rdma_cm device opens, found as [`open_ucma`] finds it (opened
/// and closed again): what upstream's event channel creation would report.
pub fn check_ucma_open() -> Result<(), Errno> {
    let fd = open_ucma()?;
    drop(Fd(fd));
    Ok(())
}

/// The ucma ABI version: netlink's answer, else sysfs (misc class, then the
/// older class), else None (then assumed supported, as upstream).
pub fn ucma_abi_version() -> Option<i64> {
    if let Some(d) = ucma_chardev() {
        return Some(d.abi.into());
    }
    read_sysfs_abi(&sysfs_path())
}

/// The two sysfs files upstream reads, each with `ibv_read_sysfs_file`'s
/// rules (at most 8 bytes; content that fills them without a newline is a
/// failure) and `strtol`.
fn read_sysfs_abi(root: &std::path::Path) -> Option<i64> {
    ["class/misc/rdma_cm/abi_version", "class/infiniband_ucma/abi_version"].iter().find_map(|f| {
        use std::io::Read;
        let mut b = [0u8; 8];
        let n = std::fs::File::open(root.join(f)).ok()?.read(&mut b).ok()?;
        if n == 0 {
            return Some(0);
        }
        let s = if b[n - 1] == b'\n' { &b[..n - 1] } else if n < b.len() { &b[..n] } else { return None };
        Some(strtol(s))
    })
}

/// C's strtol(s, NULL, 10) on a short buffer.
fn strtol(s: &[u8]) -> i64 {
    let s = s.split(|&c| c == 0).next().unwrap_or_default();
    let mut i = s.iter().take_while(|c| c.is_ascii_whitespace()).count();
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let v = s[i..].iter().take_while(|c| c.is_ascii_digit()).fold(0i64, |v, &c| v * 10 + i64::from(c - b'0'));
    if neg {
        -v
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(seq: u32, attrs: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut body = Vec::new();
        for (t, d) in attrs {
            body.extend_from_slice(&((4 + d.len()) as u16).to_ne_bytes());
            body.extend_from_slice(&t.to_ne_bytes());
            body.extend_from_slice(d);
            while body.len() % 4 != 0 {
                body.push(0);
            }
        }
        let mut m = Vec::new();
        m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&NLDEV_GET_CHARDEV.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend(body);
        m
    }

    #[test]
    fn request_layout() {
        let mut r = [0u8; REQ_MAX];
        assert_eq!(request("rdma_cm", 7, &mut r), 16 + 12);
        assert_eq!(u32_at(&r, 0), Some(28));
        assert_eq!(u16_at(&r, 4), Some(5135));
        assert_eq!(u16_at(&r, 6), Some(NLM_F_REQUEST));
        assert_eq!(u32_at(&r, 8), Some(7));
        assert_eq!(u16_at(&r, 16), Some(12));
        assert_eq!(u16_at(&r, 18), Some(69));
        assert_eq!(&r[20..28], b"rdma_cm\0");
    }

    #[test]
    fn answer_parsed() {
        // 10:122 encoded as the kernel's huge_encode_dev: minor low byte, major << 8.
        let enc: u64 = 122 | (10 << 8);
        let m = answer(9, &[
            (ATTR_CHARDEV_NAME, b"rdma_cm\0".to_vec()),
            (ATTR_CHARDEV_ABI, 4u64.to_ne_bytes().to_vec()),
            (ATTR_CHARDEV | 0x8000, enc.to_ne_bytes().to_vec()),
        ]);
        assert_eq!(parse(&m, 9), Reply::Dev(CharDev::new(b"rdma_cm", libc::makedev(10, 122), 4).unwrap()));
        assert_eq!(parse(&m, 10), Reply::Nothing, "another sequence number");
        // a large minor: (minor & 0xff) | (major << 8) | ((minor & ~0xff) << 12)
        let enc: u64 = 0x34 | (511 << 8) | ((0x1200) << 12);
        assert_eq!(decode_dev(enc), libc::makedev(511, 0x1234));
        // the top 32 bits of the ABI attribute are reserved
        let m = answer(1, &[
            (ATTR_CHARDEV_NAME, b"rdma_cm\0".to_vec()),
            (ATTR_CHARDEV_ABI, ((7u64 << 32) | 4).to_ne_bytes().to_vec()),
            (ATTR_CHARDEV, 0u64.to_ne_bytes().to_vec()),
        ]);
        assert!(matches!(parse(&m, 1), Reply::Dev(CharDev { abi: 4, .. })));
    }

    #[test]
    fn incomplete_or_error() {
        let m = answer(3, &[(ATTR_CHARDEV_NAME, b"rdma_cm\0".to_vec())]);
        assert_eq!(parse(&m, 3), Reply::Failed(-libc::EPROTO));
        let mut e = Vec::new();
        e.extend_from_slice(&36u32.to_ne_bytes());
        e.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        e.extend_from_slice(&0u16.to_ne_bytes());
        e.extend_from_slice(&3u32.to_ne_bytes());
        e.extend_from_slice(&0u32.to_ne_bytes());
        e.extend_from_slice(&(-libc::EOPNOTSUPP).to_ne_bytes());
        e.resize(36, 0);
        assert_eq!(parse(&e, 3), Reply::Failed(-libc::EOPNOTSUPP));
        assert_eq!(parse(&e[..10], 3), Reply::Nothing, "truncated");
        let long = answer(3, &[(ATTR_CHARDEV_NAME, [b'x'; 80].to_vec()), (ATTR_CHARDEV, vec![0; 8]), (ATTR_CHARDEV_ABI, vec![0; 8])]);
        assert_eq!(parse(&long, 3), Reply::Failed(-libc::EPROTO), "a name longer than upstream's buffer");
    }

    #[test]
    fn sysfs_path_as_libibverbs() {
        assert_eq!(sysfs_path_from(None), PathBuf::from("/sys"));
        assert_eq!(sysfs_path_from(Some("/tmp/fake//".into())), PathBuf::from("/tmp/fake"));
        assert_eq!(sysfs_path_from(Some("/".into())), PathBuf::from(""));
        let long = "/".to_string() + &"a".repeat(300);
        assert_eq!(sysfs_path_from(Some(long.into())).as_os_str().len(), 256);
    }

    #[test]
    fn sysfs_abi_files() {
        let root = std::env::temp_dir().join(format!("rdmacm-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(read_sysfs_abi(&root), None);
        let old = root.join("class/infiniband_ucma");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join("abi_version"), "3\n").unwrap();
        assert_eq!(read_sysfs_abi(&root), Some(3), "the older class");
        let misc = root.join("class/misc/rdma_cm");
        std::fs::create_dir_all(&misc).unwrap();
        std::fs::write(misc.join("abi_version"), "4\n").unwrap();
        assert_eq!(read_sysfs_abi(&root), Some(4), "the misc class first");
        std::fs::write(misc.join("abi_version"), "12345678").unwrap();
        assert_eq!(read_sysfs_abi(&root), Some(3), "8 bytes without a newline fail: the next file");
        std::fs::write(misc.join("abi_version"), " -5x\n").unwrap();
        assert_eq!(read_sysfs_abi(&root), Some(-5));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn open_checks_the_device() {
        assert_eq!(open_checked(std::path::Path::new("/nonexistent/rdma_cm"), 0).unwrap_err(), Errno::ENOENT);
        assert_eq!(open_checked(std::path::Path::new("/etc/passwd"), 0).unwrap_err(), Errno::ENODEV);
        // /dev/null is a character device: accepted by name, refused under another number.
        let fd = open_checked(std::path::Path::new("/dev/null"), 0).unwrap();
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        let fd = open_checked(std::path::Path::new("/dev/null"), libc::makedev(1, 3)).unwrap();
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        assert_eq!(open_checked(std::path::Path::new("/dev/null"), libc::makedev(10, 122)).unwrap_err(), Errno::ENODEV);
    }
}
