// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The interposed functions.  Each one looks its descriptor up in the
//! table and forwards the call to the rsocket API (`rs`) or to libc
//! (`real`).  Raw pointers from the program are passed on untouched: the
//! function forwarded to has the same contract as the one the program
//! called.
//!
//! Over 800 lines: one wrapper per interposed libc call (sockets, data
//! calls, poll/select/epoll, fork, fcntl/ioctl), each written in the same
//! three steps below, so that the cancellation rule is read in one place.
//!
//! Cancellation.  A thread cancelled while it waits in one of these calls
//! (pthread_cancel), or ended by a signal handler that calls pthread_exit,
//! ends with a forced unwind that starts inside the call forwarded to, in
//! libc or in librdmacm, and passes through the export on its way out.
//! Rust lets it pass only frames of an unwinding ABI ("C-unwind", "Rust")
//! that hold no value with a destructor and no pending catch_unwind (RFC
//! 2945's plain old frames).  So every export is `extern "C-unwind"` and
//! has up to three steps:
//!
//! 1. the plan: the table lookup, and for a stand-in whatever must be
//!    ready before the call (accept's placeholder, poll's translated
//!    list), under [`boundary`], handed back as plain data;
//! 2. the forwarded call, from the export's own frame, which then holds
//!    only plain data: no catch_unwind, no destructor (`inside` marks the
//!    thread without a guard value; what waits with the call, such as the
//!    placeholder and the buffer, is held by the thread, see `held`);
//! 3. the rest, under [`boundary`] again (adopting the accepted rsocket,
//!    copying poll's results back).
//!
//! The library's own work in steps 1 and 3 never reaches a cancellation
//! point that may act, or the forced unwind would start inside
//! catch_unwind: it uses system calls that are none (the placeholder is
//! opened and closed with raw openat/close), or runs with cancellation
//! disabled (`quiet`: configuration, librdmacm calls, closing stand-ins,
//! fork mode's switch).
//!
//! Where the C library's function is a cancellation point (accept,
//! connect, the data calls, poll, select, epoll_wait, close, fcntl's
//! F_SETLKW), the rsocket call forwarded to runs with the thread's
//! cancellation as the program set it; where it is none (socket, bind,
//! listen, shutdown, the socket options and names, fcntl's other
//! commands, epoll_create, epoll_ctl, sendfile), with cancellation
//! disabled (`inside_nocancel`): a thread is not ended where it could not
//! be without this library.  For a descriptor that is not in the table,
//! an export is the lookup and libc's call, nothing more: the lookup
//! cannot panic and needs no boundary.

#![allow(clippy::missing_safety_doc)]

use crate::boundary;
use crate::calls::{close_nocancel, errno, in_rdmacm, inside, inside_nocancel, keep_errno, quiet, real, rs, set_errno, testcancel};
use crate::config::{self, Config};
use crate::fdmap::{self, Entry, Fork, Kind};
use crate::held::{self, Buf, Reserved};
use crate::split;
use libc::{c_int, c_long, c_ulong, c_void, epoll_event, fd_set, iovec, msghdr, nfds_t, off_t, pollfd, size_t, sockaddr, socklen_t, ssize_t, timeval};
use std::sync::OnceLock;

fn config() -> &'static (Config, String) {
    static C: OnceLock<(Config, String)> = OnceLock::new();
    // (reading the file passes cancellation points: none may act here)
    C.get_or_init(|| quiet(|| (config::load(), config::program_name())))
}

/// Under RDMACM_RS_LOG: one line on stderr about what the library does
/// with a socket (an rsocket, a kernel socket, a fallback).
macro_rules! trace {
    ($($t:tt)*) => {
        if config().0.trace {
            eprintln!("librspreload[{}]: {}", std::process::id(), format_args!($($t)*));
        }
    };
}

/// Where a call on program descriptor `fd` goes.
#[derive(Clone, Copy)]
enum To {
    /// to the rsocket API, on this rsocket
    Rs(c_int),
    /// to libc, on this descriptor
    Real(c_int),
    /// nowhere: fail with -1 (errno is set)
    Failed,
}

fn route(fd: c_int) -> To {
    match fdmap::get(fd) {
        Some(Entry { kind: Kind::Rsocket, inner, .. }) => To::Rs(inner),
        Some(Entry { kind: Kind::Real, inner, .. }) => To::Real(inner),
        Some(Entry { kind: Kind::Inherited, .. }) => boundary(To::Failed, || {
            inherited(fd, "socket call", libc::ENOTCONN);
            To::Failed
        }),
        _ => To::Real(fd),
    }
}

/// A call on a stand-in inherited across fork(2) (`Kind::Inherited`): the
/// rsocket lives in the parent, so the call fails with `err` (ENOTCONN;
/// EPERM for epoll_ctl), and says so under RDMACM_RS_LOG.
fn inherited(fd: c_int, call: &str, err: c_int) {
    trace!(
        "{call}: descriptor {fd} stands for an rsocket of the parent process (inherited across fork): fails with errno {err} (fork mode, RDMAV_FORK_SAFE=1, makes connections that can be used after fork)"
    );
    set_errno(err);
}

/// Registers (once) the handler that marks, in a child made by fork(2),
/// the rsockets and repoll sets of the parent as `Kind::Inherited`; in fork
/// mode, first the handlers that split each connected rsocket between the
/// two processes (`split`).
fn watch_fork() {
    extern "C" fn prepare() {
        boundary((), || quiet(split::prepare));
    }
    extern "C" fn parent() {
        boundary((), || quiet(split::parent));
    }
    extern "C" fn child() {
        boundary((), || quiet(split::child));
        fdmap::inherit_all();
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: handlers with no arguments; split's only allocate (prepare,
    // parent) and close our own descriptors.
    ONCE.call_once(|| unsafe {
        if config().0.fork {
            split::TRACE.store(config().0.trace, std::sync::atomic::Ordering::Relaxed);
            libc::pthread_atfork(Some(prepare), Some(parent), Some(child));
        } else {
            libc::pthread_atfork(None, None, Some(child));
        }
    });
}

/// `route` for the data calls: a fork-mode socket becomes an rsocket at
/// its first data call (see `fork_switch`); in a child, the first read of a
/// connection split at fork(2) claims its incoming data (`split::claim`).
/// The plan of a data call on a stand-in (`e` is its entry; `reads`: the
/// call receives).
fn route_data(fd: c_int, e: Entry, reads: bool) -> To {
    match e {
        // (a handshake with the peer: it runs to its end)
        Entry { kind: Kind::Real, fork: Fork::Active | Fork::Passive, .. } => quiet(|| fork_switch(fd, e)),
        Entry { kind: Kind::Real, fork: Fork::Split, .. } if reads => split::claim(fd, e),
        _ => {}
    }
    route(fd)
}

/// A descriptor to show the program in place of an rsocket: an open
/// /dev/null holds the number.  -1 with errno on failure.  Opened with the
/// openat system call, which unlike open(3) is no cancellation point.
fn placeholder(cloexec: bool) -> c_int {
    let flags = libc::O_RDONLY | if cloexec { libc::O_CLOEXEC } else { 0 };
    // SAFETY: a NUL-terminated path; the arguments as openat(2) takes them.
    let fd = unsafe { libc::syscall(libc::SYS_openat, c_long::from(libc::AT_FDCWD), c"/dev/null".as_ptr(), c_long::from(flags)) } as c_int;
    if fd >= 0 && fd as usize > fdmap::MAX_FD {
        keep_errno(|| close_nocancel(fd));
        set_errno(libc::EMFILE);
        return -1;
    }
    fd
}

/// A placeholder for the result of the call about to be made, held by the
/// thread until the call returns (see `held`).
fn reserve_placeholder(cloexec: bool) -> Option<Reserved> {
    let idx = placeholder(cloexec);
    (idx >= 0).then(|| held::reserve(idx))
}

/// Records `idx` as standing for `inner` (one more holder of `inner`).
fn adopt(idx: c_int, kind: Kind, fork: Fork, inner: c_int, domain: c_int, dgram: bool) {
    watch_fork();
    fdmap::set(idx, Entry { kind, fork, inner, domain, dgram });
    fdmap::hold(inner);
}

/// The sizes from RS_SQ_SIZE, RS_RQ_SIZE, RS_INLINE; failures keep the
/// library's defaults.
fn tune(rfd: c_int) {
    let c = &config().0;
    for (name, v) in [(0, c.sq_size), (1, c.rq_size), (2, c.inline)] {
        if v != 0 {
            let val = v;
            // SAFETY: val lives across the call; SOL_RDMA options take an int.
            keep_errno(|| quiet(|| inside(|| unsafe {
                rs::rsetsockopt(rfd, 0x10000, name, (&val as *const c_int).cast(), std::mem::size_of::<c_int>() as socklen_t)
            })));
        }
    }
}

// --- socket, bind, listen, accept, connect ---

/// What socket() does after its plan.
#[derive(Clone, Copy)]
enum Sock {
    /// libc's socket
    Real,
    /// an rsocket, shown as this placeholder
    Rs(Reserved),
    /// fork mode: libc's socket, shown as this placeholder
    Fork(Reserved),
    Failed,
}

fn socket_plan(domain: c_int, type_: c_int, protocol: c_int) -> Sock {
    let (cfg, prog) = config();
    if !cfg.intercepts(prog, domain, type_, protocol) {
        return Sock::Real;
    }
    let Some(res) = reserve_placeholder(type_ & libc::SOCK_CLOEXEC != 0) else {
        return Sock::Failed;
    };
    let base = type_ & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let tcp = matches!(domain, libc::AF_INET | libc::AF_INET6)
        && base == libc::SOCK_STREAM
        && (protocol == 0 || protocol == libc::IPPROTO_TCP);
    if cfg.fork && tcp {
        // fork mode: a TCP socket now, an rsocket after the connection is made
        Sock::Fork(res)
    } else {
        Sock::Rs(res)
    }
}

/// After rsocket returned `r`: the placeholder's number, or None when the
/// real socket is to be made instead.
fn socket_rs_done(res: Reserved, r: c_int, domain: c_int, type_: c_int) -> Option<c_int> {
    let idx = held::unreserve(res);
    let dgram = type_ & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) == libc::SOCK_DGRAM;
    if r >= 0 {
        adopt(idx, Kind::Rsocket, Fork::Ready, r, domain, dgram);
        trace!("socket: descriptor {idx} is rsocket {r} ({})", if dgram { "datagram" } else { "stream" });
        tune(r);
        return Some(idx);
    }
    // not an rsocket (no RDMA device, an unsupported type, ...): the real thing
    trace!("socket: no rsocket (errno {}): a kernel socket instead", errno());
    close_nocancel(idx);
    None
}

/// After the call that made `r` for a reserved placeholder: the
/// placeholder stands for `r` from now on (its number is returned), or,
/// when the call failed, it is closed and -1 returned with the call's errno.
fn settle(res: Reserved, r: c_int, kind: Kind, fork: Fork, domain: c_int) -> c_int {
    let idx = held::unreserve(res);
    if r < 0 {
        keep_errno(|| close_nocancel(idx));
        return -1;
    }
    adopt(idx, kind, fork, r, domain, false);
    idx
}

#[no_mangle]
pub unsafe extern "C-unwind" fn socket(domain: c_int, type_: c_int, protocol: c_int) -> c_int {
    let base = type_ & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let candidate = matches!(domain, libc::AF_INET | libc::AF_INET6 | libc::AF_IB)
        && matches!(base, libc::SOCK_STREAM | libc::SOCK_DGRAM)
        && !in_rdmacm();
    let plan = if candidate { boundary(Sock::Failed, || socket_plan(domain, type_, protocol)) } else { Sock::Real };
    // SAFETY (all calls below): libc's socket or rsocket, with the caller's
    // arguments (no pointers).
    match plan {
        Sock::Real => unsafe { real::socket(domain, type_, protocol) },
        Sock::Failed => -1,
        Sock::Fork(res) => {
            let s = unsafe { real::socket(domain, type_, protocol) };
            boundary(-1, || settle(res, s, Kind::Real, Fork::Fresh, domain))
        }
        Sock::Rs(res) => {
            // SAFETY: rsocket takes no pointers.
            let r = inside_nocancel(|| unsafe { rs::rsocket(domain, type_, protocol) });
            match boundary(Some(-1), || socket_rs_done(res, r, domain, type_)) {
                Some(idx) => idx,
                // SAFETY: libc's socket, the caller's arguments.
                None => unsafe { real::socket(domain, type_, protocol) },
            }
        }
    }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY (all forwarding below): the callee has the caller's contract.
    match route(fd) {
        To::Rs(r) => inside_nocancel(|| unsafe { rs::rbind(r, addr, len) }),
        To::Real(f) => unsafe { real::bind(f, addr, len) },
        To::Failed => -1,
    }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn listen(fd: c_int, backlog: c_int) -> c_int {
    // SAFETY (all forwarding below): the callee has the caller's contract.
    match route(fd) {
        To::Rs(r) => inside_nocancel(|| unsafe { rs::rlisten(r, backlog) }),
        To::Real(f) => {
            let ret = unsafe { real::listen(f, backlog) };
            if ret == 0 && f != fd {
                boundary((), || {
                    if let Some(e @ Entry { fork: Fork::Fresh, .. }) = fdmap::get(fd) {
                        fdmap::set(fd, Entry { fork: Fork::Listen, ..e });
                    }
                });
            }
            ret
        }
        To::Failed => -1,
    }
}

/// What accept does after its plan.
#[derive(Clone, Copy)]
enum Accept {
    /// libc's accept on this descriptor
    Real(c_int),
    /// raccept on this rsocket; the result is shown as the placeholder
    Rs(Entry, Reserved),
    /// fork mode, a listening TCP socket: libc's accept4, the result shown
    /// as the placeholder
    Fork(Entry, Reserved),
    Failed,
}

fn accept_plan(fd: c_int, e: Entry, flags: Option<c_int>) -> Accept {
    let cloexec = flags.unwrap_or(0) & libc::SOCK_CLOEXEC != 0;
    // The placeholder is made before the call (a program out of
    // descriptors gets EMFILE and the connection stays queued, as with
    // upstream's library); if the thread ends in the call, the thread's
    // exit closes it (upstream's leaks it).
    match e {
        Entry { kind: Kind::Rsocket, .. } => reserve_placeholder(cloexec).map_or(Accept::Failed, |res| Accept::Rs(e, res)),
        Entry { kind: Kind::Real, fork: Fork::Listen, .. } => reserve_placeholder(cloexec).map_or(Accept::Failed, |res| Accept::Fork(e, res)),
        Entry { kind: Kind::Real, inner, .. } => Accept::Real(inner),
        Entry { kind: Kind::Inherited, .. } => {
            inherited(fd, "accept", libc::ENOTCONN);
            Accept::Failed
        }
        _ => Accept::Real(fd),
    }
}

/// After raccept returned `r`.
fn accept_rs_done(e: Entry, res: Reserved, r: c_int, flags: Option<c_int>) -> c_int {
    let idx = settle(res, r, Kind::Rsocket, Fork::Ready, e.domain);
    if idx < 0 {
        return -1;
    }
    tune(r);
    trace!("accept: descriptor {idx} is rsocket {r} (flags {:#x})", flags.unwrap_or(0));
    if flags.unwrap_or(0) & libc::SOCK_NONBLOCK != 0 {
        // SAFETY: rfcntl on our rsocket.
        let ok = quiet(|| inside(|| unsafe {
            let fl = rs::rfcntl(r, libc::F_GETFL);
            fl >= 0 && rs::rfcntl(r, libc::F_SETFL, fl | libc::O_NONBLOCK) == 0
        }));
        if !ok {
            keep_errno(|| quiet(|| close_impl(idx)));
            return -1;
        }
    }
    idx
}

#[inline(always)]
unsafe fn accept_common(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: Option<c_int>) -> c_int {
    let plan = match fdmap::get(fd) {
        None => Accept::Real(fd),
        Some(e) => boundary(Accept::Failed, || accept_plan(fd, e, flags)),
    };
    // SAFETY (all calls below): libc's accept/accept4 or raccept with the
    // caller's arguments.
    match plan {
        Accept::Real(f) => unsafe {
            match flags {
                Some(fl) => real::accept4(f, addr, len, fl),
                None => real::accept(f, addr, len),
            }
        },
        Accept::Rs(e, res) => {
            // SAFETY: raccept with the caller's address buffer.
            let r = inside(|| unsafe { rs::raccept(e.inner, addr, len) });
            boundary(-1, || accept_rs_done(e, res, r, flags))
        }
        Accept::Fork(e, res) => {
            // SAFETY: libc's accept4 with the caller's address buffer.
            let r = unsafe { real::accept4(e.inner, addr, len, flags.unwrap_or(0)) };
            boundary(-1, || settle(res, r, Kind::Real, Fork::Passive, e.domain))
        }
        Accept::Failed => -1,
    }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { accept_common(fd, addr, len, None) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { accept_common(fd, addr, len, Some(flags)) }
}

/// Copies O_NONBLOCK, SO_REUSEADDR and TCP_NODELAY from one socket to
/// another (rsocket to real socket or back).  -1 with errno on failure.
fn copy_options(from_rs: bool, from: c_int, to: c_int) -> c_int {
    let mut v: c_int = 0;
    let mut l: socklen_t;
    let vp = (&mut v as *mut c_int).cast::<c_void>();
    // SAFETY: v and l live across every call; each function gets an int option.
    unsafe {
        let get = |level, name, vp, l: &mut socklen_t| {
            if from_rs {
                inside(|| rs::rgetsockopt(from, level, name, vp, l))
            } else {
                real::getsockopt(from, level, name, vp, l)
            }
        };
        let set = |level, name, vp: *const c_void, l| {
            if from_rs {
                real::setsockopt(to, level, name, vp, l)
            } else {
                inside(|| rs::rsetsockopt(to, level, name, vp, l))
            }
        };
        let fl = if from_rs { inside(|| rs::rfcntl(from, libc::F_GETFL)) } else { real::fcntl(false, from, libc::F_GETFL, 0) };
        if fl > 0 {
            let r = if from_rs {
                real::fcntl(false, to, libc::F_SETFL, fl as c_ulong)
            } else {
                inside(|| rs::rfcntl(to, libc::F_SETFL, fl))
            };
            if r != 0 {
                return -1;
            }
        }
        for (level, name) in [(libc::SOL_SOCKET, libc::SO_REUSEADDR), (libc::IPPROTO_TCP, libc::TCP_NODELAY)] {
            v = 0;
            l = std::mem::size_of::<c_int>() as socklen_t;
            if get(level, name, vp, &mut l) == 0 && v != 0 && set(level, name, vp, l) != 0 {
                return -1;
            }
        }
    }
    0
}

/// What connect does after its plan.
#[derive(Clone, Copy)]
enum Conn {
    /// libc's connect on this descriptor
    Real(c_int),
    /// rconnect on this stand-in's rsocket, TCP if the peer has no RDMA
    Rs(Entry),
    Failed,
}

fn connect_plan(fd: c_int, e: Entry) -> Conn {
    match e.kind {
        Kind::Rsocket => Conn::Rs(e),
        Kind::Real => {
            if e.fork == Fork::Fresh {
                fdmap::set(fd, Entry { fork: Fork::Active, ..e });
            }
            Conn::Real(e.inner)
        }
        // (libc answers for the stand-in)
        Kind::Repoll => Conn::Real(fd),
        Kind::Inherited => {
            inherited(fd, "connect", libc::ENOTCONN);
            Conn::Failed
        }
    }
}

/// The peer cannot be reached over RDMA: a real socket takes the
/// rsocket's place, to connect over TCP.  The new socket, or -1.
fn connect_fallback(fd: c_int, e: Entry) -> c_int {
    // SAFETY: libc's socket.
    let s = unsafe { real::socket(e.domain, libc::SOCK_STREAM, 0) };
    trace!("connect: no RDMA path to the peer (errno {}): descriptor {fd} continues over TCP", errno());
    if s < 0 {
        return -1;
    }
    if copy_options(true, e.inner, s) != 0 {
        keep_errno(|| close_nocancel(s));
        return -1;
    }
    fdmap::set(fd, Entry { kind: Kind::Real, fork: Fork::Ready, inner: s, ..e });
    fdmap::hold(s);
    if fdmap::release(e.inner) {
        // SAFETY: the rsocket no program descriptor refers to any more.
        keep_errno(|| inside(|| unsafe { rs::rclose(e.inner) }));
    }
    s
}

#[no_mangle]
pub unsafe extern "C-unwind" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let plan = match fdmap::get(fd) {
        None => Conn::Real(fd),
        Some(e) => boundary(Conn::Failed, || connect_plan(fd, e)),
    };
    // SAFETY (all calls below): libc's connect or rconnect with the caller's
    // arguments.
    match plan {
        Conn::Real(f) => unsafe { real::connect(f, addr, len) },
        Conn::Rs(e) => {
            let r = inside(|| unsafe { rs::rconnect(e.inner, addr, len) });
            // (AF_IB has no TCP to fall back to)
            if r == 0 || errno() == libc::EINPROGRESS || e.domain == libc::AF_IB {
                return r;
            }
            let s = boundary(-1, || quiet(|| connect_fallback(fd, e)));
            if s < 0 {
                return -1;
            }
            // SAFETY: libc's connect with the caller's address.
            unsafe { real::connect(s, addr, len) }
        }
        Conn::Failed => -1,
    }
}

// --- fork mode (RDMAV_FORK_SAFE): connections are made over TCP, and
// become rsockets at their first data call, in whichever process makes it.
// The accepting side listens for an rsocket on its TCP port and tells the
// connecting side so with 4 zero bytes over TCP; the connecting side waits
// for them, then connects the rsocket.  Upstream's protocol, so either side
// may be upstream's library.  On any failure the socket stays TCP. ---

fn fork_switch(fd: c_int, e: Entry) {
    trace!("fork mode: descriptor {fd} (TCP {}) {:?} becomes an rsocket", e.inner, e.fork);
    keep_errno(|| match e.fork {
        Fork::Active => fork_active(fd, e),
        _ => fork_passive(fd, e),
    });
}

fn replace_with_rsocket(fd: c_int, e: Entry, r: c_int) {
    tune(r);
    copy_options(false, e.inner, r);
    // SAFETY: the TCP socket the rsocket replaces is ours.
    unsafe {
        real::shutdown(e.inner, libc::SHUT_RDWR);
    }
    fdmap::set(fd, Entry { kind: Kind::Rsocket, fork: Fork::Ready, inner: r, ..e });
    fdmap::hold(r);
    if fdmap::release(e.inner) {
        // SAFETY: as above.
        unsafe { real::close(e.inner) };
    }
}

fn fork_active(fd: c_int, e: Entry) {
    let s = e.inner;
    let mut msg = [0u8; 4];
    // SAFETY: libc calls on our TCP socket with local buffers.
    let ok = unsafe {
        let fl = real::fcntl(false, s, libc::F_GETFL, 0);
        real::fcntl(false, s, libc::F_SETFL, 0);
        let n = real::recv(s, msg.as_mut_ptr().cast(), 4, libc::MSG_PEEK);
        real::fcntl(false, s, libc::F_SETFL, fl as c_ulong);
        trace!("fork mode, connecting side: peeked {n} bytes {msg:?}");
        n == 4 && msg == [0; 4]
    };
    if ok {
        // SAFETY: sockaddr_storage is large enough for any peer address.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of_val(&ss) as socklen_t;
        let sa = (&mut ss as *mut libc::sockaddr_storage).cast::<sockaddr>();
        // SAFETY: ss/len live across the calls.
        if unsafe { real::getpeername(s, sa, &mut len) } == 0 {
            let fam = c_int::from(ss.ss_family);
            // SAFETY: rsocket takes no pointers; rconnect gets the peer's address.
            let r = inside(|| unsafe { rs::rsocket(fam, libc::SOCK_STREAM, 0) });
            if r >= 0 {
                // SAFETY: as above.
                let c = inside(|| unsafe { rs::rconnect(r, sa, len) });
                trace!("fork mode, connecting side: rconnect {c} (errno {})", errno());
                if c == 0 {
                    // the 4 bytes were peeked: consume them now
                    // SAFETY: local buffer.
                    unsafe { real::recv(s, msg.as_mut_ptr().cast(), 4, 0) };
                    replace_with_rsocket(fd, e, r);
                    return;
                }
                // SAFETY: our rsocket.
                inside(|| unsafe { rs::rclose(r) });
            }
        }
    }
    trace!("fork mode, connecting side: stays TCP");
    fdmap::set(fd, Entry { fork: Fork::Ready, ..e });
}

fn fork_passive(fd: c_int, e: Entry) {
    let s = e.inner;
    // SAFETY: sockaddr_in6 is plain data; large enough for an IPv4 address too.
    let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of_val(&sin6) as socklen_t;
    let sa = (&mut sin6 as *mut libc::sockaddr_in6).cast::<sockaddr>();
    let mut done = false;
    // SAFETY: local buffers; libc and rsocket calls on our own descriptors.
    unsafe {
        if real::getsockname(s, sa, &mut len) == 0 {
            // Listen at the TCP socket's own address and port. (Upstream
            // listens on the wildcard address; with soft-iWARP on the host
            // that listen failed with EADDRINUSE while the program's TCP
            // listener held the port: an iWARP listen takes the TCP port.)
            let sem = libc::sem_open(c"/rsocket_fork".as_ptr(), libc::O_CREAT | libc::O_RDWR, 0o770 as libc::c_uint, 1 as libc::c_uint);
            if sem != libc::SEM_FAILED {
                let l = inside(|| rs::rsocket(c_int::from(sin6.sin6_family), libc::SOCK_STREAM, 0));
                if l >= 0 {
                    let one: c_int = 1;
                    inside(|| rs::rsetsockopt(l, libc::SOL_SOCKET, libc::SO_REUSEADDR, (&one as *const c_int).cast(), 4));
                    libc::sem_wait(sem);
                    let zero = [0u8; 4];
                    if inside(|| rs::rbind(l, sa, std::mem::size_of_val(&sin6) as socklen_t)) == 0
                        && inside(|| rs::rlisten(l, 1)) == 0
                        && real::write(s, zero.as_ptr().cast(), 4) == 4
                    {
                        trace!("fork mode, accepting side: listening, 4 zero bytes sent");
                        let r = inside(|| rs::raccept(l, std::ptr::null_mut(), std::ptr::null_mut()));
                        trace!("fork mode, accepting side: raccept {r} (errno {})", errno());
                        if r >= 0 {
                            replace_with_rsocket(fd, e, r);
                            done = true;
                        }
                    }
                    inside(|| rs::rclose(l));
                    libc::sem_post(sem);
                }
                libc::sem_close(sem);
            }
        }
    }
    if !done {
        trace!("fork mode, accepting side: stays TCP (errno {})", errno());
        fdmap::set(fd, Entry { fork: Fork::Ready, ..e });
    }
}

// --- data calls ---

macro_rules! data_call {
    ($name:ident, $rs:ident, ($($a:ident : $t:ty),*) -> $r:ty) => {
        #[no_mangle]
        pub unsafe extern "C-unwind" fn $name(fd: c_int, $($a: $t),*) -> $r {
            let to = match fdmap::get(fd) {
                None => To::Real(fd),
                Some(e) => boundary(To::Failed, || route_data(fd, e, stringify!($name).starts_with("re"))),
            };
            // SAFETY: the callee has the caller's contract.
            match to {
                To::Rs(r) => inside(|| unsafe { rs::$rs(r, $($a),*) }),
                To::Real(f) => unsafe { real::$name(f, $($a),*) },
                To::Failed => -1,
            }
        }
    };
}

data_call!(recv, rrecv, (buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t);
data_call!(recvfrom, rrecvfrom, (buf: *mut c_void, len: size_t, flags: c_int, addr: *mut sockaddr, alen: *mut socklen_t) -> ssize_t);
data_call!(recvmsg, rrecvmsg, (msg: *mut msghdr, flags: c_int) -> ssize_t);
data_call!(read, rread, (buf: *mut c_void, len: size_t) -> ssize_t);
data_call!(readv, rreadv, (iov: *const iovec, n: c_int) -> ssize_t);
data_call!(send, rsend, (buf: *const c_void, len: size_t, flags: c_int) -> ssize_t);
data_call!(sendto, rsendto, (buf: *const c_void, len: size_t, flags: c_int, addr: *const sockaddr, alen: socklen_t) -> ssize_t);
data_call!(sendmsg, rsendmsg, (msg: *const msghdr, flags: c_int) -> ssize_t);
data_call!(write, rwrite, (buf: *const c_void, len: size_t) -> ssize_t);
data_call!(writev, rwritev, (iov: *const iovec, n: c_int) -> ssize_t);

// (none of these is a cancellation point in libc)
macro_rules! plain_call {
    ($name:ident, $rs:ident, ($($a:ident : $t:ty),*)) => {
        #[no_mangle]
        pub unsafe extern "C-unwind" fn $name(fd: c_int, $($a: $t),*) -> c_int {
            // SAFETY: the callee has the caller's contract.
            match route(fd) {
                To::Rs(r) => inside_nocancel(|| unsafe { rs::$rs(r, $($a),*) }),
                To::Real(f) => unsafe { real::$name(f, $($a),*) },
                To::Failed => -1,
            }
        }
    };
}

plain_call!(shutdown, rshutdown, (how: c_int));
plain_call!(getpeername, rgetpeername, (addr: *mut sockaddr, len: *mut socklen_t));
plain_call!(getsockname, rgetsockname, (addr: *mut sockaddr, len: *mut socklen_t));

#[no_mangle]
pub unsafe extern "C-unwind" fn setsockopt(fd: c_int, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> c_int {
    // SAFETY (all forwarding below): the callee has the caller's contract.
    match route(fd) {
        To::Rs(r) => {
            let ret = inside_nocancel(|| unsafe { rs::rsetsockopt(r, level, name, val, len) });
            if ret < 0 && errno() == libc::ENOTSUP {
                // (as getsockopt: the kernel's errno for an unknown option)
                trace!("setsockopt: descriptor {fd}: option {level}/{name} not supported by rsockets");
                set_errno(libc::ENOPROTOOPT);
            }
            ret
        }
        To::Real(f) => unsafe { real::setsockopt(f, level, name, val, len) },
        To::Failed => -1,
    }
}

/// The socket options that say what a socket is (SO_TYPE, SO_DOMAIN,
/// SO_PROTOCOL), which the rsocket API does not answer: the table knows.
fn identity_option(e: Entry, level: c_int, name: c_int) -> Option<c_int> {
    if level != libc::SOL_SOCKET {
        return None;
    }
    match name {
        libc::SO_TYPE => Some(if e.dgram { libc::SOCK_DGRAM } else { libc::SOCK_STREAM }),
        libc::SO_DOMAIN => Some(e.domain),
        libc::SO_PROTOCOL => Some(match (e.domain, e.dgram) {
            (libc::AF_IB, _) => 0,
            (_, true) => libc::IPPROTO_UDP,
            (_, false) => libc::IPPROTO_TCP,
        }),
        _ => None,
    }
}

/// getsockopt of an identity option on an rsocket: the value written to
/// the caller's buffer as the kernel writes an int option (truncated to a
/// shorter buffer).
///
/// # Safety
/// getsockopt's contract for `val` and `len`.
unsafe fn identity_out(v: c_int, val: *mut c_void, len: *mut socklen_t) -> c_int {
    if len.is_null() || val.is_null() {
        set_errno(libc::EFAULT);
        return -1;
    }
    // SAFETY: the caller's length.
    let room = unsafe { *len };
    if (room as c_int) < 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    let n = (room as usize).min(std::mem::size_of::<c_int>());
    // SAFETY: the caller's buffer holds `room` >= n bytes.
    unsafe {
        std::ptr::copy_nonoverlapping((&v as *const c_int).cast::<u8>(), val.cast::<u8>(), n);
        *len = n as socklen_t;
    }
    0
}

#[no_mangle]
pub unsafe extern "C-unwind" fn getsockopt(fd: c_int, level: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t) -> c_int {
    match fdmap::get(fd) {
        Some(e @ Entry { kind: Kind::Rsocket, inner, .. }) => {
            if let Some(v) = identity_option(e, level, name) {
                // SAFETY: the caller's buffer and length.
                return unsafe { identity_out(v, val, len) };
            }
            // SAFETY: rgetsockopt has getsockopt's contract.
            let r = inside_nocancel(|| unsafe { rs::rgetsockopt(inner, level, name, val, len) });
            if r < 0 && errno() == libc::ENOTSUP {
                // an option rsockets do not have: the kernel's answer for an
                // option a socket does not know
                trace!("getsockopt: descriptor {fd}: option {level}/{name} not supported by rsockets");
                set_errno(libc::ENOPROTOOPT);
            }
            r
        }
        // SAFETY: libc's getsockopt with the caller's arguments.
        Some(Entry { kind: Kind::Real, inner, .. }) => unsafe { real::getsockopt(inner, level, name, val, len) },
        Some(e @ Entry { kind: Kind::Inherited, .. }) => match identity_option(e, level, name) {
            // SAFETY: the caller's buffer and length.
            Some(v) => unsafe { identity_out(v, val, len) },
            None => boundary(-1, || {
                inherited(fd, "getsockopt", libc::ENOTCONN);
                -1
            }),
        },
        // SAFETY: as above.
        _ => unsafe { real::getsockopt(fd, level, name, val, len) },
    }
}

// --- poll, select ---

/// A poll over stand-ins: `n` entries at `list` (in `buf`), each stand-in
/// replaced by what it stands for; through rpoll when an rsocket is among
/// them, libc's poll otherwise.
#[derive(Clone, Copy)]
struct Mapped {
    buf: Buf,
    list: *mut pollfd,
    n: usize,
    any_rs: bool,
}

/// Translates `n` entries from `from` into `to`.
///
/// # Safety
/// `from` and `to` hold `n` entries each.
unsafe fn translate(from: *const pollfd, to: *mut pollfd, n: usize) -> bool {
    let mut any_rs = false;
    for i in 0..n {
        // SAFETY: i < n (the caller's contract).
        let p = unsafe { *from.add(i) };
        match fdmap::get(p.fd) {
            // fork mode: an accepted socket waited on here is used in this
            // process; its peer waits for the switch before its first byte
            Some(e @ Entry { kind: Kind::Real, fork: Fork::Passive, .. }) => quiet(|| fork_switch(p.fd, e)),
            // a child waits to read a connection split at fork(2)
            Some(e @ Entry { kind: Kind::Real, fork: Fork::Split, .. }) if p.events & libc::POLLIN != 0 => split::claim(p.fd, e),
            _ => {}
        }
        let fd = match fdmap::get(p.fd) {
            Some(Entry { kind: Kind::Rsocket, inner, .. }) => {
                any_rs = true;
                inner
            }
            // the placeholder: ready at once, the call that follows fails
            Some(Entry { kind: Kind::Inherited, .. }) => p.fd,
            Some(Entry { inner, .. }) => inner,
            None => p.fd,
        };
        // SAFETY: as above.
        unsafe { *to.add(i) = pollfd { fd, events: p.events, revents: 0 } };
    }
    any_rs
}

/// The poll of a [`Mapped`] list; called from the export's frame.
#[inline(always)]
unsafe fn poll_mapped(m: Mapped, timeout: c_int) -> c_int {
    // SAFETY: m.list holds m.n entries.
    unsafe {
        if m.any_rs {
            inside(|| rs::rpoll(m.list, m.n as nfds_t, timeout))
        } else {
            real::poll(m.list, m.n as nfds_t, timeout)
        }
    }
}

/// Whether any of the `n` entries at `fds` is a stand-in (a loop of
/// lookups; no panic).
///
/// # Safety
/// `fds` holds `n` entries (or n is 0).
#[inline(always)]
unsafe fn any_stand_in(fds: *const pollfd, n: usize) -> bool {
    // SAFETY: i < n.
    (0..n).any(|i| fdmap::get(unsafe { (*fds.add(i)).fd }).is_some())
}

#[no_mangle]
pub unsafe extern "C-unwind" fn poll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    let n = if fds.is_null() { 0 } else { nfds as usize };
    // SAFETY: the caller passes nfds pollfd entries at fds (or none).
    if !unsafe { any_stand_in(fds, n) } {
        // SAFETY: the caller's arguments.
        return unsafe { real::poll(fds, nfds, timeout) };
    }
    let plan = boundary(None, || {
        let buf = held::take(n * std::mem::size_of::<pollfd>());
        let list = buf.pollfds();
        // SAFETY: the caller's n entries; the buffer holds n.
        let any_rs = unsafe { translate(fds, list, n) };
        Some(Mapped { buf, list, n, any_rs })
    });
    let Some(m) = plan else { return -1 };
    // SAFETY: m.list holds m.n entries.
    let ret = unsafe { poll_mapped(m, timeout) };
    boundary(-1, || {
        for i in 0..n {
            // SAFETY: i < n: the caller's array and the buffer.
            unsafe { (*fds.add(i)).revents = (*m.list.add(i)).revents };
        }
        held::give(m.buf);
        ret
    })
}

/// FD_ISSET without a panic: `set` is NULL or an fd_set, fd < FD_SETSIZE.
///
/// # Safety
/// As said.
#[inline(always)]
unsafe fn isset(set: *const fd_set, fd: c_int) -> bool {
    let w = c_ulong::BITS as usize;
    let fd = fd as usize;
    // SAFETY: an fd_set is an array of FD_SETSIZE bits in unsigned longs,
    // bit fd % w of word fd / w, as glibc's FD_ISSET reads it.
    !set.is_null() && unsafe { *set.cast::<c_ulong>().add(fd / w) } >> (fd % w) & 1 != 0
}

#[no_mangle]
pub unsafe extern "C-unwind" fn select(nfds: c_int, r: *mut fd_set, w: *mut fd_set, x: *mut fd_set, tv: *mut timeval) -> c_int {
    let n = nfds.clamp(0, libc::FD_SETSIZE as c_int);
    // SAFETY: the sets are NULL or the caller's fd_sets; fd < FD_SETSIZE.
    let listed = |fd| unsafe { isset(r, fd) || isset(w, fd) || isset(x, fd) };
    if !(0..n).any(|fd| listed(fd) && fdmap::get(fd).is_some()) {
        // SAFETY: the caller's arguments.
        return unsafe { real::select(nfds, r, w, x, tv) };
    }
    let plan = boundary(None, || {
        let timeout = if tv.is_null() {
            -1
        } else {
            // SAFETY: non-NULL timeval of the caller.
            let t = unsafe { *tv };
            if t.tv_sec < 0 || t.tv_usec < 0 {
                set_errno(libc::EINVAL);
                return None;
            }
            t.tv_sec.saturating_mul(1000).saturating_add(t.tv_usec / 1000).min(c_int::MAX.into()) as c_int
        };
        // the buffer: the program's list, then the translated one
        let k = (0..n).filter(|&fd| listed(fd)).count();
        let buf = held::take(2 * k * std::mem::size_of::<pollfd>());
        let mine = buf.pollfds();
        for (i, fd) in (0..n).filter(|&fd| listed(fd)).enumerate() {
            let mut ev = 0;
            // SAFETY: as above.
            unsafe {
                if isset(r, fd) {
                    ev |= libc::POLLIN;
                }
                if isset(w, fd) {
                    ev |= libc::POLLOUT;
                }
            }
            // SAFETY: i < k, the buffer holds 2k entries.
            unsafe { *mine.add(i) = pollfd { fd, events: ev, revents: 0 } };
        }
        // SAFETY: k entries at mine, k more after them.
        let list = unsafe { mine.add(k) };
        // SAFETY: as above.
        let any_rs = unsafe { translate(mine, list, k) };
        Some((Mapped { buf, list, n: k, any_rs }, timeout))
    });
    let Some((m, timeout)) = plan else { return -1 };
    // SAFETY: m.list holds m.n entries.
    let ret = unsafe { poll_mapped(m, timeout) };
    boundary(-1, || {
        let done = select_done(m, ret, [r, w, x]);
        held::give(m.buf);
        done
    })
}

fn select_done(m: Mapped, ret: c_int, sets: [*mut fd_set; 3]) -> c_int {
    if ret < 0 {
        return ret;
    }
    for set in sets {
        if !set.is_null() {
            // SAFETY: the caller's fd_set.
            unsafe { libc::FD_ZERO(set) };
        }
    }
    let mine = m.buf.pollfds();
    let mut count = 0;
    for i in 0..m.n {
        // SAFETY: i < m.n: the program's entry and its translation.
        let (fd, rev) = unsafe { ((*mine.add(i)).fd, (*m.list.add(i)).revents) };
        for (set, hit) in [
            (sets[0], rev & libc::POLLIN != 0),
            (sets[1], rev & libc::POLLOUT != 0),
            (sets[2], rev & !(libc::POLLIN | libc::POLLOUT) != 0),
        ] {
            if hit && !set.is_null() {
                // SAFETY: the caller's fd_set; fd < FD_SETSIZE.
                unsafe { libc::FD_SET(fd, set) };
                count += 1;
            }
        }
    }
    count
}

// --- close, dup, fcntl ---

/// Closes program descriptor `fd`, a stand-in or not.  Run `quiet`: the
/// table entry, the stand-in and what it stands for go together.
fn close_impl(fd: c_int) -> c_int {
    let Some(e) = fdmap::clear(fd) else {
        // SAFETY: libc's close.
        return unsafe { real::close(fd) };
    };
    // SAFETY: the stand-in is ours.
    unsafe { real::close(fd) };
    if !fdmap::release(e.inner) {
        return 0;
    }
    match e.kind {
        // SAFETY: the last holder of the rsocket / repoll set lets it go.
        Kind::Rsocket | Kind::Repoll => inside(|| unsafe { rs::rclose(e.inner) }),
        // (the parent's rsocket: closing it here would end it there too)
        Kind::Inherited => {
            trace!("close: descriptor {fd} (an rsocket of the parent process) closed here, left open in the parent");
            0
        }
        // SAFETY: the last holder of the real socket closes it.
        Kind::Real => unsafe { real::close(e.inner) },
    }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn close(fd: c_int) -> c_int {
    if fdmap::get(fd).is_none() {
        // SAFETY: libc's close.
        return unsafe { real::close(fd) };
    }
    // close is a cancellation point: a pending cancellation acts before
    // anything is closed, as in libc's close; one requested while the
    // library closes the stand-in and its rsocket waits for the next.
    testcancel();
    boundary(-1, || quiet(|| close_impl(fd)))
}

/// After libc duplicated stand-in `old` as `new` (dup, dup2, dup3,
/// F_DUPFD), `new` stands for the same thing.
fn dup_done(old: Option<Entry>, new: c_int) -> c_int {
    if let (Some(e), true) = (old, new >= 0) {
        if new as usize > fdmap::MAX_FD {
            keep_errno(|| close_nocancel(new));
            set_errno(libc::EMFILE);
            return -1;
        }
        adopt(new, e.kind, e.fork, e.inner, e.domain, e.dgram);
    }
    new
}

/// The entry of stand-in `fd` about to be duplicated: a connected or
/// accepted fork-mode socket switches first, as at a data call, so that
/// every number stands for what it becomes (a switch through one number
/// would leave the others on the TCP socket it shuts down).
fn before_dup(fd: c_int) -> Option<Entry> {
    match fdmap::get(fd) {
        Some(e @ Entry { kind: Kind::Real, fork: Fork::Active | Fork::Passive, .. }) => boundary(Some(e), || {
            quiet(|| fork_switch(fd, e));
            fdmap::get(fd)
        }),
        e => e,
    }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn dup(fd: c_int) -> c_int {
    let e = before_dup(fd);
    // SAFETY: libc's dup.
    let new = unsafe { real::dup(fd) };
    if e.is_none() {
        return new;
    }
    boundary(-1, || dup_done(e, new))
}

#[inline(always)]
unsafe fn dup2_common(old: c_int, new: c_int, flags: Option<c_int>) -> c_int {
    let e = if old == new { fdmap::get(old) } else { before_dup(old) };
    if old != new && fdmap::get(new).is_some() {
        let ok = boundary(false, || {
            // SAFETY: `old` is checked to be open first, as dup2 would.
            if unsafe { real::fcntl(false, old, libc::F_GETFD, 0) } < 0 {
                return false;
            }
            quiet(|| close_impl(new));
            true
        });
        if !ok {
            return -1;
        }
    }
    // SAFETY: libc's dup2/dup3.
    let r = unsafe {
        match flags {
            Some(f) => real::dup3(old, new, f),
            None => real::dup2(old, new),
        }
    };
    if old == new || e.is_none() {
        return r;
    }
    boundary(-1, || dup_done(e, r))
}

#[no_mangle]
pub unsafe extern "C-unwind" fn dup2(old: c_int, new: c_int) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { dup2_common(old, new, None) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { dup2_common(old, new, Some(flags)) }
}

#[inline(always)]
unsafe fn fcntl_common(wide: bool, fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    let e = fdmap::get(fd);
    // SAFETY (all calls below): libc's fcntl, or rfcntl, which takes its
    // argument as fcntl does, with the caller's arguments.  (F_SETLKW is a
    // cancellation point.)
    match (e, cmd) {
        // descriptor flags and duplicates belong to the program's descriptor
        (Some(_), libc::F_DUPFD | libc::F_DUPFD_CLOEXEC) => {
            let e = before_dup(fd);
            let new = unsafe { real::fcntl(wide, fd, cmd, arg) };
            boundary(-1, || dup_done(e, new))
        }
        // SAFETY: as above.
        (Some(_), libc::F_GETFD | libc::F_SETFD) => unsafe { real::fcntl(wide, fd, cmd, arg) },
        // SAFETY: as above.
        (Some(Entry { kind: Kind::Rsocket, inner, .. }), _) => inside_nocancel(|| unsafe { rs::rfcntl(inner, cmd, arg) }),
        // SAFETY: as above.
        (Some(Entry { kind: Kind::Real, inner, .. }), _) => unsafe { real::fcntl(wide, inner, cmd, arg) },
        // SAFETY: as above.
        _ => unsafe { real::fcntl(wide, fd, cmd, arg) },
    }
}

// fcntl is variadic in C.  On the Linux C ABIs of x86-64 and AArch64 the
// optional argument arrives where a third fixed integer argument would
// (the first integer argument registers), so it is taken as one machine
// word and handed on as one.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("fcntl's variadic argument is read as a fixed one: check the ABI of this architecture");

#[no_mangle]
pub unsafe extern "C-unwind" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { fcntl_common(false, fd, cmd, arg) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { fcntl_common(true, fd, cmd, arg) }
}

// --- ioctl: FIONBIO is O_NONBLOCK by another name; the descriptor-flag
// requests belong to the program's descriptor; an rsocket answers no other
// request (ENOTTY, as the placeholder would) ---

// ioctl is variadic in C: its optional argument is taken as one machine
// word, as fcntl's (see there).
#[no_mangle]
pub unsafe extern "C-unwind" fn ioctl(fd: c_int, req: c_ulong, arg: c_ulong) -> c_int {
    let e = fdmap::get(fd);
    match e {
        Some(Entry { kind: Kind::Rsocket, inner, .. }) => match req {
            libc::FIONBIO => {
                let p = arg as *const c_int;
                if p.is_null() {
                    set_errno(libc::EFAULT);
                    return -1;
                }
                // SAFETY: FIONBIO's argument is a pointer to an int.
                let on = unsafe { *p } != 0;
                // SAFETY: rfcntl on our rsocket.
                inside_nocancel(|| unsafe {
                    let fl = rs::rfcntl(inner, libc::F_GETFL);
                    if fl < 0 {
                        return -1;
                    }
                    let fl = if on { fl | libc::O_NONBLOCK } else { fl & !libc::O_NONBLOCK };
                    rs::rfcntl(inner, libc::F_SETFL, fl)
                })
            }
            // SAFETY: libc's ioctl on the program's descriptor.
            libc::FIOCLEX | libc::FIONCLEX => unsafe { real::ioctl(fd, req, arg) },
            _ => {
                trace!("ioctl: descriptor {fd}: request {req:#x} not supported by rsockets");
                set_errno(libc::ENOTTY);
                -1
            }
        },
        // SAFETY: libc's ioctl on the real socket, with the caller's arguments.
        Some(Entry { kind: Kind::Real, inner, .. }) if !matches!(req, libc::FIOCLEX | libc::FIONCLEX) => unsafe { real::ioctl(inner, req, arg) },
        // SAFETY: as above.
        _ => unsafe { real::ioctl(fd, req, arg) },
    }
}

// --- the checking variants that _FORTIFY_SOURCE makes of read, recv,
// recvfrom and poll: libc's own would reach the kernel directly, past
// this library, with the placeholder ---

extern "C" {
    fn __chk_fail() -> !;
}

#[no_mangle]
pub unsafe extern "C-unwind" fn __read_chk(fd: c_int, buf: *mut c_void, len: size_t, room: size_t) -> ssize_t {
    if len > room {
        // SAFETY: ends the process as libc's own check does.
        unsafe { __chk_fail() }
    }
    // SAFETY: the caller's arguments, checked.
    unsafe { read(fd, buf, len) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn __recv_chk(fd: c_int, buf: *mut c_void, len: size_t, room: size_t, flags: c_int) -> ssize_t {
    if len > room {
        // SAFETY: as above.
        unsafe { __chk_fail() }
    }
    // SAFETY: as above.
    unsafe { recv(fd, buf, len, flags) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn __recvfrom_chk(fd: c_int, buf: *mut c_void, len: size_t, room: size_t, flags: c_int, addr: *mut sockaddr, alen: *mut socklen_t) -> ssize_t {
    if len > room {
        // SAFETY: as above.
        unsafe { __chk_fail() }
    }
    // SAFETY: as above.
    unsafe { recvfrom(fd, buf, len, flags, addr, alen) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn __poll_chk(fds: *mut pollfd, nfds: nfds_t, timeout: c_int, room: size_t) -> c_int {
    if (room / std::mem::size_of::<pollfd>()) < nfds as usize {
        // SAFETY: as above.
        unsafe { __chk_fail() }
    }
    // SAFETY: as above.
    unsafe { poll(fds, nfds, timeout) }
}

// --- sendfile: the file's bytes are read here and written to the rsocket
// (sendfile is no cancellation point: neither the reading nor the write
// to the rsocket lets a cancellation act) ---

/// What sendfile does after its plan.
#[derive(Clone, Copy)]
enum Sendfile {
    /// return this (nothing to write, or a failure with errno set)
    Ret(ssize_t),
    /// write `got` bytes of `buf`, read from offset `pos`
    Write { buf: Buf, pos: off_t, got: size_t },
}

fn sendfile_plan(inp: c_int, off: *mut off_t, count: size_t) -> Sendfile {
    let pos = if off.is_null() {
        // SAFETY: lseek on the caller's file.
        unsafe { libc::lseek(inp, 0, libc::SEEK_CUR) }
    } else {
        // SAFETY: the caller's offset.
        unsafe { *off }
    };
    if pos < 0 {
        return Sendfile::Ret(-1);
    }
    let len = count.min(1 << 20);
    let buf = held::take(len);
    // SAFETY: buf has len bytes.
    let got = unsafe { libc::pread(inp, buf.bytes().cast(), len, pos) };
    if got <= 0 {
        held::give(buf);
        return Sendfile::Ret(got);
    }
    Sendfile::Write { buf, pos, got: got as size_t }
}

fn sendfile_done(inp: c_int, off: *mut off_t, pos: off_t, sent: ssize_t) -> ssize_t {
    if sent > 0 {
        if off.is_null() {
            // SAFETY: as above.
            keep_errno(|| unsafe { libc::lseek(inp, pos + sent as off_t, libc::SEEK_SET) });
        } else {
            // SAFETY: the caller's offset.
            unsafe { *off = pos + sent as off_t };
        }
    }
    sent
}

#[inline(always)]
unsafe fn sendfile_common(wide: bool, out: c_int, inp: c_int, off: *mut off_t, count: size_t) -> ssize_t {
    let to = match fdmap::get(out) {
        None => To::Real(out),
        Some(e) => boundary(To::Failed, || route_data(out, e, false)),
    };
    let r = match to {
        To::Rs(r) => r,
        // SAFETY: libc's sendfile with the caller's arguments.
        To::Real(f) => return unsafe { if wide { real::sendfile64(f, inp, off, count) } else { real::sendfile(f, inp, off, count) } },
        To::Failed => return -1,
    };
    let (buf, pos, got) = match boundary(Sendfile::Ret(-1), || quiet(|| sendfile_plan(inp, off, count))) {
        Sendfile::Ret(v) => return v,
        Sendfile::Write { buf, pos, got } => (buf, pos, got),
    };
    // SAFETY: got bytes of buf are initialised.
    let sent = inside_nocancel(|| unsafe { rs::rwrite(r, buf.bytes().cast_const().cast(), got) });
    boundary(-1, || {
        held::give(buf);
        sendfile_done(inp, off, pos, sent)
    })
}

#[no_mangle]
pub unsafe extern "C-unwind" fn sendfile(out: c_int, inp: c_int, off: *mut off_t, count: size_t) -> ssize_t {
    // SAFETY: the caller's arguments.
    unsafe { sendfile_common(false, out, inp, off, count) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn sendfile64(out: c_int, inp: c_int, off: *mut off_t, count: size_t) -> ssize_t {
    // SAFETY: the caller's arguments.
    unsafe { sendfile_common(true, out, inp, off, count) }
}

// --- epoll: sets made by epoll_create are repoll sets, as upstream's are,
// so they can hold rsockets and ordinary descriptors alike ---

/// What epoll_create1 does after its plan.
#[derive(Clone, Copy)]
enum EpCreate {
    Real,
    /// repoll_create, the set shown as the placeholder
    Repoll(rs::Repoll, Reserved),
    Failed,
}

fn epoll_create_plan(flags: c_int) -> EpCreate {
    let rp = match rs::repoll() {
        Some(rp) if !in_rdmacm() => rp,
        _ => return EpCreate::Real,
    };
    if flags & !libc::EPOLL_CLOEXEC != 0 {
        set_errno(libc::EINVAL);
        return EpCreate::Failed;
    }
    reserve_placeholder(flags & libc::EPOLL_CLOEXEC != 0).map_or(EpCreate::Failed, |res| EpCreate::Repoll(rp, res))
}

#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_create1(flags: c_int) -> c_int {
    match boundary(EpCreate::Failed, || epoll_create_plan(flags)) {
        // SAFETY: libc's epoll_create1.
        EpCreate::Real => unsafe { real::epoll_create1(flags) },
        EpCreate::Repoll(rp, res) => {
            // SAFETY: repoll_create takes no pointers.
            let r = inside_nocancel(|| unsafe { (rp.create)(flags) });
            boundary(-1, || settle(res, r, Kind::Repoll, Fork::Ready, 0))
        }
        EpCreate::Failed => -1,
    }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_create(size: c_int) -> c_int {
    if size <= 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: no pointers.
    unsafe { epoll_create1(0) }
}

/// repoll_ctl/repoll_wait give a failure as the error number itself.
fn repoll_result(r: c_int, max: c_int) -> c_int {
    if r < 0 || r > max {
        if r > 0 {
            set_errno(r);
        }
        return -1;
    }
    r
}

/// The repoll calls when `epfd` stands for a repoll set.
fn repoll_set(epfd: c_int) -> Option<(c_int, rs::Repoll)> {
    match fdmap::get(epfd) {
        Some(Entry { kind: Kind::Repoll, inner, .. }) => rs::repoll().map(|rp| (inner, rp)),
        _ => None,
    }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut epoll_event) -> c_int {
    let Some((inner, rp)) = repoll_set(epfd) else {
        // SAFETY: libc's epoll_ctl with the caller's arguments.
        return unsafe { real::epoll_ctl(epfd, op, fd, ev) };
    };
    let target = match fdmap::get(fd) {
        None => fd,
        Some(e) => match boundary(Err(()), || epoll_target(op, fd, e)) {
            Ok(t) => t,
            Err(()) => return -1,
        },
    };
    // SAFETY: repoll_ctl with the caller's event.
    let r = inside_nocancel(|| unsafe { (rp.ctl)(inner, op, target, ev) });
    repoll_result(r, 0)
}

/// What repoll_ctl is to watch for stand-in `fd`: the descriptor that does
/// the work.  A fork-mode socket connected or accepted over TCP becomes an
/// rsocket when it is added (the accepting side's peer waits for that
/// before its first byte; the connecting side waits for its peer's four
/// zero bytes); a split connection added in a child claims its data; an
/// inherited rsocket cannot be watched here (EPERM, the kernel's answer for
/// a descriptor epoll cannot watch).
fn epoll_target(op: c_int, fd: c_int, e: Entry) -> Result<c_int, ()> {
    let e = match e {
        Entry { kind: Kind::Real, fork: Fork::Passive | Fork::Active, .. } if op != libc::EPOLL_CTL_DEL => {
            quiet(|| fork_switch(fd, e));
            fdmap::get(fd).unwrap_or(e)
        }
        Entry { kind: Kind::Real, fork: Fork::Split, .. } if op != libc::EPOLL_CTL_DEL => {
            split::claim(fd, e);
            e
        }
        _ => e,
    };
    if e.kind == Kind::Inherited {
        inherited(fd, "epoll_ctl", libc::EPERM);
        return Err(());
    }
    Ok(e.inner)
}

#[inline(always)]
unsafe fn epoll_wait_common(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int {
    let Some((inner, rp)) = repoll_set(epfd) else {
        // SAFETY: libc's calls with the caller's arguments.
        return unsafe {
            if mask.is_null() {
                real::epoll_wait(epfd, ev, max, timeout)
            } else {
                real::epoll_pwait(epfd, ev, max, timeout, mask)
            }
        };
    };
    if max <= 0 || ev.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: a sigset_t on our stack (plain data); the caller's mask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    if !mask.is_null() {
        // SAFETY: as above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, mask, &mut old) };
    }
    // SAFETY: the caller's array of `max` events.
    let r = inside(|| unsafe { (rp.wait)(inner, ev, max, timeout) });
    if !mask.is_null() {
        // SAFETY: restores the mask saved above.
        keep_errno(|| unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) });
    }
    repoll_result(r, max)
}

#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_wait(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { epoll_wait_common(epfd, ev, max, timeout, std::ptr::null()) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_pwait(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { epoll_wait_common(epfd, ev, max, timeout, mask) }
}

// --- fstat: a stand-in for an rsocket says it is a socket ---

fn socket_mode(fd: c_int, mode: &mut libc::mode_t) {
    if matches!(fdmap::get(fd), Some(Entry { kind: Kind::Rsocket | Kind::Real | Kind::Inherited, .. })) {
        *mode = (*mode & !libc::S_IFMT) | libc::S_IFSOCK;
    }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn fstat(fd: c_int, st: *mut libc::stat) -> c_int {
    // SAFETY: libc's fstat with the caller's buffer, which it filled when it returned 0.
    let r = unsafe { real::fstat(fd, st) };
    if r == 0 {
        // SAFETY: libc filled *st.
        socket_mode(fd, unsafe { &mut (*st).st_mode });
    }
    r
}

#[no_mangle]
pub unsafe extern "C-unwind" fn fstat64(fd: c_int, st: *mut libc::stat64) -> c_int {
    // SAFETY: as in fstat.
    let r = unsafe { real::fstat64(fd, st) };
    if r == 0 {
        // SAFETY: libc filled *st.
        socket_mode(fd, unsafe { &mut (*st).st_mode });
    }
    r
}

#[no_mangle]
pub unsafe extern "C-unwind" fn __fxstat(ver: c_int, fd: c_int, st: *mut libc::stat) -> c_int {
    // SAFETY: as in fstat.
    let r = unsafe { real::__fxstat(ver, fd, st) };
    if r == 0 {
        // SAFETY: libc filled *st.
        socket_mode(fd, unsafe { &mut (*st).st_mode });
    }
    r
}

#[no_mangle]
pub unsafe extern "C-unwind" fn __fxstat64(ver: c_int, fd: c_int, st: *mut libc::stat64) -> c_int {
    // SAFETY: as in fstat.
    let r = unsafe { real::__fxstat64(ver, fd, st) };
    if r == 0 {
        // SAFETY: libc filled *st.
        socket_mode(fd, unsafe { &mut (*st).st_mode });
    }
    r
}
