// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The typed kernel protocol: every ucma command this library sends, and
//! every response and event it reads, goes through here (their bytes are
//! encoded and decoded in `ucma_wire.rs`).
//!
//! [`Ucma`] is the interface the CM core uses; [`Kernel`] implements it
//! with `write()` on `/dev/infiniband/rdma_cm`.  Unit tests (and paths the
//! VM cannot reach, such as InfiniBand path queries) use a test double.

use crate::abi::ucma::{self as kabi, cmd, Cmd, CmdHdr};
use nix::errno::Errno;
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

pub use crate::abi::sockaddr::SockAddr;

/// The decoded answer of QUERY ADDR / QUERY GID ([`dec_addr`], [`dec_gid`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct AddrInfo {
    /// Big-endian, as the kernel reports it.
    pub node_guid: u64,
    pub port_num: u8,
    /// Big-endian.
    pub pkey: u16,
    pub src: SockAddr,
    pub dst: SockAddr,
    /// `None` when the kernel does not report the device index.
    pub ibdev_index: Option<u32>,
}

/// The decoded answer of the legacy QUERY ROUTE.
#[derive(Clone, Copy, Debug, Default)]
pub struct RouteInfo {
    pub node_guid: u64,
    pub paths: [kabi::UserPathRec; 2],
    pub num_paths: u32,
    /// Both are `sockaddr_in6`-sized (28 bytes), as the kernel fills them.
    pub src: SockAddr,
    pub dst: SockAddr,
    pub port_num: u8,
    pub ibdev_index: Option<u32>,
}

/// The device index value meaning "not reported".
const INVALID_INDEX: u32 = kabi::INVALID_IBDEV_INDEX;

/// The ucma protocol, one method per command.
pub trait Ucma: Send + Sync {
    /// Opens a new channel (a file descriptor of the ucma device).
    fn open(&self) -> Result<RawFd, Errno>;
    /// Closes a channel.
    fn close(&self, fd: RawFd);
    /// The kernel's ucma ABI version, `None` when it cannot be read.
    fn abi_version(&self) -> Option<i32>;
    fn create_id(&self, fd: RawFd, uid: u64, ps: u16, qp_type: u8) -> Result<u32, Errno>;
    /// Returns the number of events the kernel reported for the id.
    fn destroy_id(&self, fd: RawFd, id: u32) -> Result<u32, Errno>;
    /// BIND (AF_IB-capable family) of an address's bytes at its length
    /// (at most 128).
    fn bind(&self, fd: RawFd, id: u32, addr: &[u8]) -> Result<(), Errno>;
    /// BIND_IP (legacy family; IPv4/IPv6 only), the address's bytes as
    /// for [`Ucma::bind`].
    fn bind_ip(&self, fd: RawFd, id: u32, addr: &[u8]) -> Result<(), Errno>;
    /// RESOLVE_ADDR (AF_IB-capable family) of the addresses' bytes at
    /// their length (at most 128; an empty source: none).
    fn resolve_addr(&self, fd: RawFd, id: u32, src: &[u8], dst: &[u8], timeout_ms: u32) -> Result<(), Errno>;
    /// RESOLVE_IP (legacy family), the addresses' bytes as for
    /// [`Ucma::resolve_addr`].
    fn resolve_ip(&self, fd: RawFd, id: u32, src: &[u8], dst: &[u8], timeout_ms: u32) -> Result<(), Errno>;
    fn resolve_route(&self, fd: RawFd, id: u32, timeout_ms: u32) -> Result<(), Errno>;
    fn query_addr(&self, fd: RawFd, id: u32) -> Result<AddrInfo, Errno>;
    fn query_gid(&self, fd: RawFd, id: u32) -> Result<AddrInfo, Errno>;
    /// QUERY ADDR (`option` [`kabi::QUERY_ADDR`]) or QUERY GID
    /// ([`kabi::QUERY_GID`]) into the caller's buffer, read where it was
    /// written (the [`Kernel`]'s: by the kernel, no decoded copy of its
    /// two 128-byte addresses).  The default, for test doubles, encodes
    /// what [`Ucma::query_addr`] or [`Ucma::query_gid`] answers.
    fn query_into<'r>(&self, fd: RawFd, id: u32, option: u32, resp: &'r mut MaybeUninit<kabi::QueryAddrResp>) -> Result<&'r kabi::QueryAddrResp, Errno> {
        let a = if option == kabi::QUERY_GID { self.query_gid(fd, id)? } else { self.query_addr(fd, id)? };
        Ok(resp.write(enc_addr_resp(&a)))
    }
    fn query_path(&self, fd: RawFd, id: u32) -> Result<Vec<crate::abi::cma::ibv_path_data>, Errno>;
    fn query_route(&self, fd: RawFd, id: u32) -> Result<RouteInfo, Errno>;
    /// Blocks until the channel has an event.
    fn get_event(&self, fd: RawFd) -> Result<kabi::EventResp, Errno>;
    /// Whether the channel has an event queued now (no wait).  The
    /// default, for doubles that never queue one: no.
    fn readable(&self, fd: RawFd) -> bool {
        let _ = fd;
        false
    }
    /// [`Ucma::get_event`] into the caller's response (the kernel writes it
    /// in place: no copy of the ~300-byte response per event).
    fn get_event_into(&self, fd: RawFd, resp: &mut kabi::EventResp) -> Result<(), Errno> {
        *resp = self.get_event(fd)?;
        Ok(())
    }
    /// `get_event_into` as the library's blocking wait for an event: a
    /// cancellation of the calling thread is acted on while it blocks
    /// (ECANCELED, see [`crate::sys::cancel`]).
    ///
    /// The response is the caller's uninitialised buffer: the kernel fills
    /// it (see [`Kernel`]'s), a double writes it whole.
    fn wait_event_into<'r>(&self, fd: RawFd, resp: &'r mut MaybeUninit<kabi::EventResp>) -> Result<&'r mut kabi::EventResp, Errno> {
        Ok(resp.write(self.get_event(fd)?))
    }
    /// `optval` is handed to the kernel as a user address.
    fn set_option(&self, fd: RawFd, id: u32, level: u32, optname: u32, optval: *mut c_void, optlen: u32) -> Result<(), Errno>;
    /// Moves `id` from the channel `old_fd` to `new_fd`; returns the events
    /// reported on the old channel.
    fn migrate_id(&self, new_fd: RawFd, id: u32, old_fd: RawFd) -> Result<u32, Errno>;
    fn write_cm_event(&self, fd: RawFd, id: u32, event: u32, status: i32, arg: u64) -> Result<(), Errno>;

    // Commands of the connection, multicast and addrinfo code.  The
    // defaults (ENOSYS) let test doubles implement only what they need.
    fn connect(&self, _fd: RawFd, _id: u32, _conn: &kabi::ConnParam, _ece: kabi::Ece) -> Result<(), Errno> {
        Err(Errno::ENOSYS)
    }
    fn listen(&self, _fd: RawFd, _id: u32, _backlog: u32) -> Result<(), Errno> {
        Err(Errno::ENOSYS)
    }
    /// `uid` is the user value of the new connection's id (0: keep).
    fn accept(&self, _fd: RawFd, _id: u32, _uid: u64, _conn: &kabi::ConnParam, _ece: kabi::Ece) -> Result<(), Errno> {
        Err(Errno::ENOSYS)
    }
    fn reject(&self, _fd: RawFd, _id: u32, _reason: u8, _private_data: &[u8]) -> Result<(), Errno> {
        Err(Errno::ENOSYS)
    }
    fn disconnect(&self, _fd: RawFd, _id: u32) -> Result<(), Errno> {
        Err(Errno::ENOSYS)
    }
    fn init_qp_attr(&self, _fd: RawFd, _id: u32, _qp_state: u32) -> Result<kabi::UverbsQpAttr, Errno> {
        Err(Errno::ENOSYS)
    }
    /// [`Ucma::init_qp_attr`] into the caller's response (no copy of it).
    fn init_qp_attr_into(&self, fd: RawFd, id: u32, qp_state: u32, resp: &mut kabi::UverbsQpAttr) -> Result<(), Errno> {
        *resp = self.init_qp_attr(fd, id, qp_state)?;
        Ok(())
    }
    fn notify(&self, _fd: RawFd, _id: u32, _event: u32) -> Result<(), Errno> {
        Err(Errno::ENOSYS)
    }
    /// JOIN_MCAST (`addr` of any family) or, with `legacy`, JOIN_IP_MCAST;
    /// returns the kernel's handle of the membership.
    fn join_mcast(&self, _fd: RawFd, _id: u32, _uid: u64, _addr: &SockAddr, _join_flags: u16, _legacy: bool) -> Result<u32, Errno> {
        Err(Errno::ENOSYS)
    }
    /// Returns the events reported for the membership.
    fn leave_mcast(&self, _fd: RawFd, _mc: u32) -> Result<u32, Errno> {
        Err(Errno::ENOSYS)
    }
    fn resolve_ib_service(&self, _fd: RawFd, _id: u32, _ibs: &kabi::IbService) -> Result<(), Errno> {
        Err(Errno::ENOSYS)
    }
    /// QUERY with option IB_SERVICE: the service records of a resolved
    /// RESOLVE_IB_SERVICE (ENOENT when there are none).
    fn query_ib_service(&self, _fd: RawFd, _id: u32) -> Result<Vec<kabi::ServiceRec>, Errno> {
        Err(Errno::ENOSYS)
    }
}

// The commands' encoding and the answers' decoding: ucma_wire.rs.
#[path = "ucma_wire.rs"]
mod wire;
pub use wire::*;

// ---------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------

/// The real transport: `/dev/infiniband/rdma_cm`.
pub struct Kernel {
    pub dev_path: &'static str,
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel { dev_path: "/dev/infiniband/rdma_cm" }
    }
}

/// Writes one command.  A short write is `ENODATA`, as upstream.  (Also
/// for a command its caller filled in place, as CONNECT and ACCEPT are:
/// [`with_connect_command`], [`with_accept_command`].)
pub fn send<T: Copy>(fd: RawFd, c: &Cmd<T>) -> Result<(), Errno> {
    let b = bytes_of(c);
    // SAFETY: b is a valid buffer of b.len() bytes; the kernel writes any
    // response through the user address embedded in the command, which the
    // caller keeps alive for the duration of this call.
    // (A system call without libc's cancellation point: commands never
    // wait, but for GET_EVENT, which `wait_send` makes.)
    whole(unsafe { super::cancel::raw::write(fd, b) }, b.len())
}

/// A command's write: a short one is `ENODATA`, as upstream.
fn whole(written: Result<usize, Errno>, len: usize) -> Result<(), Errno> {
    match written? {
        n if n != len => Err(Errno::ENODATA),
        _ => Ok(()),
    }
}

/// [`send`] of a command that may block in the kernel (GET_EVENT on a
/// blocking channel), as a wait a cancellation may end.
fn wait_send<T: Copy>(fd: RawFd, c: &Cmd<T>) -> Result<(), Errno> {
    let b = bytes_of(c);
    // SAFETY: as in `send`.
    whole(unsafe { super::cancel::wait_write(fd, b) }, b.len())
}

fn addr_of_mut<T>(r: &mut T) -> u64 {
    r as *mut T as usize as u64
}

/// [`Kernel`]'s [`Ucma::bind`], for callers that know their transport is
/// the kernel's (the library's own instance): in line, without the trait
/// object.
#[inline(always)]
pub fn bind(fd: RawFd, id: u32, addr: &[u8]) -> Result<(), Errno> {
    let mut c = command(cmd::BIND, 0, kabi::Bind::default());
    fill_bind(&mut c.body, id, addr);
    send(fd, &c)
}

/// [`Kernel`]'s [`Ucma::resolve_addr`], in line as [`bind`] is.
#[inline(always)]
pub fn resolve_addr(fd: RawFd, id: u32, src: &[u8], dst: &[u8], timeout_ms: u32) -> Result<(), Errno> {
    let mut c = command(cmd::RESOLVE_ADDR, 0, kabi::ResolveAddr::default());
    fill_resolve_addr(&mut c.body, id, src, dst, timeout_ms);
    send(fd, &c)
}

/// [`Kernel`]'s [`Ucma::disconnect`], in line as [`bind`] is.
#[inline(always)]
pub fn disconnect(fd: RawFd, id: u32) -> Result<(), Errno> {
    send(fd, &enc_disconnect(id))
}

/// [`Kernel`]'s [`Ucma::query_into`], in line as [`bind`] is.
#[inline(always)]
pub fn query_into(fd: RawFd, id: u32, option: u32, resp: &mut MaybeUninit<kabi::QueryAddrResp>) -> Result<&kabi::QueryAddrResp, Errno> {
    // The kernel copies its whole (zeroed) answer up to the smaller of
    // its size and ours, and refuses (ENOSPC) a buffer that ends before
    // `ibdev_index`; a kernel older than that field ends there, so only
    // the field and the one after it are set first.
    let p = resp.as_mut_ptr();
    // SAFETY: two fields inside the caller's buffer, written in place.
    unsafe {
        std::ptr::addr_of_mut!((*p).ibdev_index).write(INVALID_INDEX);
        std::ptr::addr_of_mut!((*p).reserved1).write(0);
    }
    send(fd, &enc_query(cmd::QUERY, id, option, p as usize as u64, std::mem::size_of::<kabi::QueryAddrResp>()))?;
    // SAFETY: the command succeeded, so the kernel copied its answer:
    // every kernel's reaches `ibdev_index`, and the rest was set above.
    // Every byte is initialised; every bit pattern is a valid
    // QueryAddrResp.
    Ok(unsafe { resp.assume_init_ref() })
}

/// [`Kernel`]'s [`Ucma::init_qp_attr_into`], called directly as
/// [`wait_event`] is (the library's own instance): the command built
/// where it is written, the kernel's answer written into `resp`.
#[inline(always)]
pub fn init_qp_attr(fd: RawFd, id: u32, qp_state: u32, resp: &mut kabi::UverbsQpAttr) -> Result<(), Errno> {
    send(fd, &enc_init_qp_attr(id, qp_state, addr_of_mut(resp)))
}

/// [`Kernel`]'s [`Ucma::wait_event_into`], for callers that know their
/// transport is the kernel's (the library's own instance): called
/// directly, in line, without the trait object.
#[inline(always)]
pub fn wait_event(fd: RawFd, resp: &mut MaybeUninit<kabi::EventResp>) -> Result<&mut kabi::EventResp, Errno> {
    let cmd = get_event_command(resp);
    // One command, as upstream's, and always as a wait: a look at the
    // channel first (poll) to take a queued event without the wait's
    // cancellation scope would spend a system call more on every event,
    // which costs more time than the scope saves whether the event is
    // there or not (docs/performance.md, "An event").
    wait_send(fd, &cmd)?;
    // SAFETY: the command succeeded (see `get_event_command`).
    Ok(unsafe { resp.assume_init_mut() })
}

/// [`wait_event`] as a wait that a cancellation ends by glibc's forced
/// unwind, leaving through the caller's frames into C and calling
/// `cleanup(arg)` on its way ([`super::cancel::write_unwinding`]): the C
/// API's `rdma_get_cm_event`, whose frame is a plain one around this call.
///
/// # Safety
/// As [`super::cancel::write_unwinding`].
#[inline(always)]
pub unsafe fn wait_event_unwinding(fd: RawFd, resp: &mut MaybeUninit<kabi::EventResp>, cleanup: unsafe extern "C" fn(*mut libc::c_void), arg: *mut libc::c_void) -> Result<&mut kabi::EventResp, Errno> {
    let cmd = get_event_command(resp);
    let b = bytes_of(&cmd);
    // SAFETY: per the contract; the command carries resp's address,
    // valid for the call.
    whole(unsafe { super::cancel::write_unwinding(fd, b, cleanup, arg) }, b.len())?;
    // SAFETY: the command succeeded (see `get_event_command`).
    Ok(unsafe { resp.assume_init_mut() })
}

/// The GET_EVENT command that has the kernel write its response into
/// `resp`.  The kernel copies its whole response (zeroed where it has
/// nothing to say) up to the smaller of its size and ours; older
/// kernels' end before `ece` or before `reserved`, so only that tail is
/// cleared here.  Once the command succeeded every byte of `resp` is
/// initialised (every kernel's response reaches `reserved`: the fields
/// before it are the ABI's since its first version), and every bit
/// pattern is a valid EventResp.
#[inline(always)]
fn get_event_command(resp: &mut MaybeUninit<kabi::EventResp>) -> Cmd<kabi::GetEvent> {
    let (tail, len) = (std::mem::offset_of!(kabi::EventResp, reserved), std::mem::size_of::<kabi::EventResp>());
    // SAFETY: [tail, len) lies inside the buffer.
    unsafe { resp.as_mut_ptr().cast::<u8>().add(tail).write_bytes(0, len - tail) };
    enc_get_event(resp.as_mut_ptr() as usize as u64)
}

/// A command of the library's, lent to one caller at a time
/// ([`Kept::lend`]) so that a command needs no clearing before it is
/// filled: its header is set once, and between two loans every byte of
/// its body that a loan does not set is zero ([`Scrub`]).  A caller that
/// finds it lent to another thread (`busy`, taken by one swap, never
/// waited for) gets a fresh command on its stack instead.
struct Kept<T: Copy> {
    busy: AtomicBool,
    cmd: UnsafeCell<Cmd<T>>,
}

// SAFETY: `cmd` is only accessed by the thread that set `busy` (an
// acquire swap from false) until it clears it (a release store).
unsafe impl<T: Copy> Sync for Kept<T> {}

/// How a kept command's body becomes zero again after a loan, where the
/// loan may have set fields that the next loan does not set.
trait Scrub {
    fn scrub(&mut self);
}

impl<T: Copy + Scrub> Kept<T> {
    /// A kept command for `cmd`, its body zero.
    const fn new(cmd: u32) -> Self {
        let hdr = CmdHdr { cmd, in_: std::mem::size_of::<T>() as u16, out: 0 };
        // SAFETY: every command body is plain integers and byte arrays
        // (`Cmd`'s contract): all-zero is a valid value.
        Kept { busy: AtomicBool::new(false), cmd: UnsafeCell::new(Cmd { hdr, body: unsafe { std::mem::zeroed() } }) }
    }

    /// Runs `f` on the kept command, or on `fresh()` when another thread
    /// has it; the kept one is scrubbed before it is given back.  (A panic
    /// in `f` leaves it lent: later callers take the stack's path.)
    #[inline(always)]
    fn lend<R>(&'static self, fresh: impl FnOnce() -> Cmd<T>, f: impl FnOnce(&mut Cmd<T>) -> R) -> R {
        // (one path after the choice, so that `f` is compiled once, in
        // line: a stack command is scrubbed too, and its flag is a local)
        let (mut own, spare);
        let (c, busy) = if !self.busy.swap(true, Ordering::Acquire) {
            // SAFETY: this thread set `busy`: `cmd` is its alone until the
            // store below.
            (unsafe { &mut *self.cmd.get() }, &self.busy)
        } else {
            (own, spare) = (fresh(), AtomicBool::new(true));
            (&mut own, &spare)
        };
        let r = f(c);
        c.body.scrub();
        busy.store(false, Ordering::Release);
        r
    }
}

/// A write sets `id`, `event`, `status` and `arg` every time and nothing
/// else: the reserved word and the parameter union's bytes past `arg`
/// (296 bytes) are never written, so there is nothing to clear.
impl Scrub for kabi::WriteCmEvent {
    #[inline(always)]
    fn scrub(&mut self) {}
}

impl Scrub for kabi::ConnParam {
    /// The fields, and the private data's first `private_data_len` bytes:
    /// a loan writes no private data past its length
    /// (`cma::conn::join_private_data`).
    #[inline(always)]
    fn scrub(&mut self) {
        let n = self.private_data_len as usize;
        if n > 0 {
            self.private_data[..n].fill(0);
        }
        debug_assert!(self.private_data.iter().all(|&b| b == 0), "private data written past its length");
        (self.qp_num, self.qkey) = (0, 0);
        (self.private_data_len, self.srq, self.responder_resources, self.initiator_depth) = (0, 0, 0, 0);
        (self.flow_control, self.retry_count, self.rnr_retry_count, self.valid) = (0, 0, 0, 0);
    }
}

impl Scrub for kabi::Connect {
    #[inline(always)]
    fn scrub(&mut self) {
        self.conn_param.scrub();
        (self.id, self.reserved, self.ece) = (0, 0, kabi::Ece::default());
    }
}

impl Scrub for kabi::Accept {
    #[inline(always)]
    fn scrub(&mut self) {
        self.conn_param.scrub();
        (self.uid, self.id, self.reserved, self.ece) = (0, 0, 0, kabi::Ece::default());
    }
}

static WRITE_CMD: Kept<kabi::WriteCmEvent> = Kept::new(cmd::WRITE_CM_EVENT);
static CONNECT_CMD: Kept<kabi::Connect> = Kept::new(cmd::CONNECT);
static ACCEPT_CMD: Kept<kabi::Accept> = Kept::new(cmd::ACCEPT);

/// [`Kernel`]'s [`Ucma::write_cm_event`], called directly as
/// [`wait_event`] is: the command is [`enc_write_cm_event`]'s, byte for
/// byte.
#[inline(always)]
pub fn write_event(fd: RawFd, id: u32, event: u32, status: i32, arg: u64) -> Result<(), Errno> {
    WRITE_CMD.lend(
        || enc_write_cm_event(id, event, status, arg),
        #[inline(always)]
        |c| {
            // (writing a Copy field of the union is plain data)
            (c.body.id, c.body.event, c.body.status, c.body.param.arg) = (id, event, status as u32, arg);
            send(fd, c)
        },
    )
}

/// Runs `f` on a CONNECT command for id `id`, every other field zero
/// ([`connect_command`]'s bytes), for the caller to fill where it is and
/// send: the library's kept one when no other thread has it, which needs
/// no clearing first.  `f` writes no private data past the length it sets.
#[inline(always)]
pub fn with_connect_command<R>(id: u32, f: impl FnOnce(&mut Cmd<kabi::Connect>) -> R) -> R {
    CONNECT_CMD.lend(
        || connect_command(id),
        #[inline(always)]
        |c| {
            c.body.id = id;
            f(c)
        },
    )
}

/// [`with_connect_command`] for ACCEPT ([`accept_command`]'s bytes).
#[inline(always)]
pub fn with_accept_command<R>(id: u32, uid: u64, f: impl FnOnce(&mut Cmd<kabi::Accept>) -> R) -> R {
    ACCEPT_CMD.lend(
        || accept_command(id, uid),
        #[inline(always)]
        |c| {
            (c.body.id, c.body.uid) = (id, uid);
            f(c)
        },
    )
}

impl Ucma for Kernel {
    fn open(&self) -> Result<RawFd, Errno> {
        // netlink, open and fstat are cancellation points: none acts here.
        let _nc = super::cancel::NoCancel::new();
        // The real device is found as upstream finds it (netlink, then by name; sys::netlink).
        if self.dev_path == Kernel::default().dev_path {
            return super::netlink::open_ucma();
        }
        let path = std::ffi::CString::new(self.dev_path).map_err(|_| Errno::EINVAL)?;
        // SAFETY: path is a valid NUL-terminated string.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(super::last_errno());
        }
        // SAFETY: an all-zero stat is a valid output buffer for fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is open; st is a valid output buffer.
        let r = unsafe { libc::fstat(fd, &mut st) };
        if r != 0 || (st.st_mode & libc::S_IFMT) != libc::S_IFCHR {
            // SAFETY: fd is ours.
            unsafe { libc::close(fd) };
            return Err(Errno::ENODEV);
        }
        Ok(fd)
    }

    fn close(&self, fd: RawFd) {
        // (no cancellation point: destroy paths run without the guard)
        let _ = super::cancel::raw::close(fd);
    }

    fn abi_version(&self) -> Option<i32> {
        read_abi_version().map(|v| v.clamp(i32::MIN.into(), i32::MAX.into()) as i32)
    }

    fn create_id(&self, fd: RawFd, uid: u64, ps: u16, qp_type: u8) -> Result<u32, Errno> {
        let mut resp = kabi::CreateIdResp::default();
        send(fd, &enc_create_id(uid, addr_of_mut(&mut resp), ps, qp_type))?;
        Ok(resp.id)
    }

    fn destroy_id(&self, fd: RawFd, id: u32) -> Result<u32, Errno> {
        let mut resp = kabi::EventsReportedResp::default();
        send(fd, &enc_destroy_id(id, addr_of_mut(&mut resp)))?;
        Ok(resp.events_reported)
    }

    fn bind(&self, fd: RawFd, id: u32, addr: &[u8]) -> Result<(), Errno> {
        bind(fd, id, addr)
    }

    fn bind_ip(&self, fd: RawFd, id: u32, addr: &[u8]) -> Result<(), Errno> {
        send(fd, &enc_bind_ip(id, addr))
    }

    fn resolve_addr(&self, fd: RawFd, id: u32, src: &[u8], dst: &[u8], timeout_ms: u32) -> Result<(), Errno> {
        resolve_addr(fd, id, src, dst, timeout_ms)
    }

    fn resolve_ip(&self, fd: RawFd, id: u32, src: &[u8], dst: &[u8], timeout_ms: u32) -> Result<(), Errno> {
        send(fd, &enc_resolve_ip(id, src, dst, timeout_ms))
    }

    fn resolve_route(&self, fd: RawFd, id: u32, timeout_ms: u32) -> Result<(), Errno> {
        send(fd, &enc_resolve_route(id, timeout_ms))
    }

    fn query_addr(&self, fd: RawFd, id: u32) -> Result<AddrInfo, Errno> {
        let mut resp = kabi::QueryAddrResp { ibdev_index: INVALID_INDEX, ..Default::default() };
        let out = std::mem::size_of_val(&resp);
        send(fd, &enc_query(cmd::QUERY, id, kabi::QUERY_ADDR, addr_of_mut(&mut resp), out))?;
        Ok(dec_addr(&resp))
    }

    fn query_gid(&self, fd: RawFd, id: u32) -> Result<AddrInfo, Errno> {
        let mut resp = kabi::QueryAddrResp { ibdev_index: INVALID_INDEX, ..Default::default() };
        let out = std::mem::size_of_val(&resp);
        send(fd, &enc_query(cmd::QUERY, id, kabi::QUERY_GID, addr_of_mut(&mut resp), out))?;
        Ok(dec_gid(&resp))
    }

    fn query_into<'r>(&self, fd: RawFd, id: u32, option: u32, resp: &'r mut MaybeUninit<kabi::QueryAddrResp>) -> Result<&'r kabi::QueryAddrResp, Errno> {
        query_into(fd, id, option, resp)
    }

    fn query_path(&self, fd: RawFd, id: u32) -> Result<Vec<crate::abi::cma::ibv_path_data>, Errno> {
        let mut resp = kabi::QueryPathResp::default();
        let out = std::mem::size_of_val(&resp);
        send(fd, &enc_query(cmd::QUERY, id, kabi::QUERY_PATH, addr_of_mut(&mut resp), out))?;
        Ok(dec_paths(&resp))
    }

    fn query_route(&self, fd: RawFd, id: u32) -> Result<RouteInfo, Errno> {
        let mut resp = kabi::QueryRouteResp { ibdev_index: INVALID_INDEX, ..Default::default() };
        let out = std::mem::size_of_val(&resp);
        send(fd, &enc_query(cmd::QUERY_ROUTE, id, 0, addr_of_mut(&mut resp), out))?;
        Ok(dec_route(&resp))
    }

    fn get_event(&self, fd: RawFd) -> Result<kabi::EventResp, Errno> {
        let mut resp = kabi::EventResp::default();
        self.get_event_into(fd, &mut resp)?;
        Ok(resp)
    }

    fn get_event_into(&self, fd: RawFd, resp: &mut kabi::EventResp) -> Result<(), Errno> {
        send(fd, &enc_get_event(addr_of_mut(resp)))
    }

    fn readable(&self, fd: RawFd) -> bool {
        super::cancel::raw::readable(fd)
    }

    fn wait_event_into<'r>(&self, fd: RawFd, resp: &'r mut MaybeUninit<kabi::EventResp>) -> Result<&'r mut kabi::EventResp, Errno> {
        wait_event(fd, resp)
    }

    fn set_option(&self, fd: RawFd, id: u32, level: u32, optname: u32, optval: *mut c_void, optlen: u32) -> Result<(), Errno> {
        send(fd, &enc_set_option(id, level, optname, optval as usize as u64, optlen))
    }

    fn migrate_id(&self, new_fd: RawFd, id: u32, old_fd: RawFd) -> Result<u32, Errno> {
        let mut resp = kabi::EventsReportedResp::default();
        send(new_fd, &enc_migrate_id(id, old_fd, addr_of_mut(&mut resp)))?;
        Ok(resp.events_reported)
    }

    fn write_cm_event(&self, fd: RawFd, id: u32, event: u32, status: i32, arg: u64) -> Result<(), Errno> {
        write_event(fd, id, event, status, arg)
    }

    fn connect(&self, fd: RawFd, id: u32, conn: &kabi::ConnParam, ece: kabi::Ece) -> Result<(), Errno> {
        send(fd, &enc_connect(id, conn, ece))
    }

    fn listen(&self, fd: RawFd, id: u32, backlog: u32) -> Result<(), Errno> {
        send(fd, &enc_listen(id, backlog))
    }

    fn accept(&self, fd: RawFd, id: u32, uid: u64, conn: &kabi::ConnParam, ece: kabi::Ece) -> Result<(), Errno> {
        send(fd, &enc_accept(id, uid, conn, ece))
    }

    fn reject(&self, fd: RawFd, id: u32, reason: u8, private_data: &[u8]) -> Result<(), Errno> {
        send(fd, &enc_reject(id, reason, private_data))
    }

    fn disconnect(&self, fd: RawFd, id: u32) -> Result<(), Errno> {
        disconnect(fd, id)
    }

    fn init_qp_attr(&self, fd: RawFd, id: u32, qp_state: u32) -> Result<kabi::UverbsQpAttr, Errno> {
        let mut resp = kabi::UverbsQpAttr::default();
        init_qp_attr(fd, id, qp_state, &mut resp)?;
        Ok(resp)
    }

    fn init_qp_attr_into(&self, fd: RawFd, id: u32, qp_state: u32, resp: &mut kabi::UverbsQpAttr) -> Result<(), Errno> {
        init_qp_attr(fd, id, qp_state, resp)
    }

    fn notify(&self, fd: RawFd, id: u32, event: u32) -> Result<(), Errno> {
        send(fd, &enc_notify(id, event))
    }

    fn join_mcast(&self, fd: RawFd, id: u32, uid: u64, addr: &SockAddr, join_flags: u16, legacy: bool) -> Result<u32, Errno> {
        let mut resp = kabi::CreateIdResp::default();
        if legacy {
            send(fd, &enc_join_ip_mcast(id, uid, addr, addr_of_mut(&mut resp)))?;
        } else {
            send(fd, &enc_join_mcast(id, uid, addr, join_flags, addr_of_mut(&mut resp)))?;
        }
        Ok(resp.id)
    }

    fn leave_mcast(&self, fd: RawFd, mc: u32) -> Result<u32, Errno> {
        let mut resp = kabi::EventsReportedResp::default();
        send(fd, &enc_leave_mcast(mc, addr_of_mut(&mut resp)))?;
        Ok(resp.events_reported)
    }

    fn resolve_ib_service(&self, fd: RawFd, id: u32, ibs: &kabi::IbService) -> Result<(), Errno> {
        send(fd, &enc_resolve_ib_service(id, ibs))
    }

    fn query_ib_service(&self, fd: RawFd, id: u32) -> Result<Vec<kabi::ServiceRec>, Errno> {
        let head = std::mem::size_of::<kabi::QueryIbServiceResp>();
        let rec = std::mem::size_of::<kabi::ServiceRec>();
        // Room for 6 records first; the kernel says how many there are.
        let mut room = 6usize;
        loop {
            // u64 words keep the buffer aligned for the records.
            let mut buf = vec![0u64; (head + rec * room).div_ceil(8)];
            let out = buf.len() * 8;
            send(fd, &enc_query(cmd::QUERY, id, kabi::QUERY_IB_SERVICE, buf.as_mut_ptr() as usize as u64, out))?;
            let n = (buf[0] & 0xffff_ffff) as usize;
            if n == 0 {
                return Err(Errno::ENOENT);
            }
            if n > room {
                room = n;
                continue;
            }
            let recs = buf.as_ptr() as usize + head;
            return Ok((0..n)
                .map(|i| {
                    // SAFETY: the kernel wrote n <= room records after the
                    // header; the buffer is 8-byte aligned and large enough.
                    unsafe { std::ptr::read_unaligned((recs + i * rec) as *const kabi::ServiceRec) }
                })
                .collect());
        }
    }
}

/// The kernel's ucma ABI version, found as upstream finds it (netlink, then
/// sysfs under $SYSFS_PATH: sys::netlink); None when neither answers.
pub fn read_abi_version() -> Option<i64> {
    super::netlink::ucma_abi_version()
}

#[cfg(test)]
#[path = "ucma_tests.rs"]
mod tests;
