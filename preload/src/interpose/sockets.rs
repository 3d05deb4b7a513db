// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The socket calls: socket, bind, listen, accept, connect, shutdown, the
//! socket's names and its options.

use super::fork::inherited;
use super::options::{copy_options, tune};
use super::setup::{config, trace};
use super::stand_in::{adopt, close_impl, reserve_placeholder, route, settle, To};
use crate::boundary;
use crate::calls::{close_nocancel, errno, in_rdmacm, inside, inside_nocancel, keep_errno, quiet, real, rs, set_errno};
use crate::fdmap::{self, Entry, Fork, Kind};
use crate::held::{self, Reserved};
use libc::{c_int, c_void, sockaddr, socklen_t};

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

#[no_mangle]
pub unsafe extern "C-unwind" fn socket(domain: c_int, type_: c_int, protocol: c_int) -> c_int {
    let base = type_ & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let candidate = matches!(domain, libc::AF_INET | libc::AF_INET6 | libc::AF_IB)
        && matches!(base, libc::SOCK_STREAM | libc::SOCK_DGRAM)
        && !in_rdmacm();
    let plan = if candidate { boundary(Sock::Failed, || socket_plan(domain, type_, protocol)) } else { Sock::Real };
    match plan {
        // SAFETY: libc's socket takes no pointers.
        Sock::Real => unsafe { real::socket(domain, type_, protocol) },
        Sock::Failed => -1,
        Sock::Fork(res) => {
            // SAFETY: as above.
            let s = unsafe { real::socket(domain, type_, protocol) };
            boundary(-1, || settle(res, s, Kind::Real, Fork::Fresh, domain))
        }
        Sock::Rs(res) => {
            // SAFETY: rsocket takes no pointers.
            let r = inside_nocancel(|| unsafe { rs::rsocket(domain, type_, protocol) });
            match boundary(Some(-1), || socket_rs_done(res, r, domain, type_)) {
                Some(idx) => idx,
                // SAFETY: libc's socket takes no pointers.
                None => unsafe { real::socket(domain, type_, protocol) },
            }
        }
    }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    match route(fd) {
        // SAFETY: rbind has bind's contract; the program's address and
        // length go on untouched; `r` is the rsocket `fd` stands for.
        To::Rs(r) => inside_nocancel(|| unsafe { rs::rbind(r, addr, len) }),
        // SAFETY: libc's bind with the program's arguments.
        To::Real(f) => unsafe { real::bind(f, addr, len) },
        To::Failed => -1,
    }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn listen(fd: c_int, backlog: c_int) -> c_int {
    match route(fd) {
        // SAFETY: rlisten takes no pointers; `r` is the rsocket `fd` stands for.
        To::Rs(r) => inside_nocancel(|| unsafe { rs::rlisten(r, backlog) }),
        To::Real(f) => {
            // SAFETY: libc's listen takes no pointers.
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
    match plan {
        // SAFETY: libc's accept or accept4 with the program's arguments,
        // whose contract the caller of this function keeps.
        Accept::Real(f) => unsafe {
            match flags {
                Some(fl) => real::accept4(f, addr, len, fl),
                None => real::accept(f, addr, len),
            }
        },
        Accept::Rs(e, res) => {
            // SAFETY: raccept has accept's contract for the program's
            // address buffer, passed on untouched; e.inner is the listening
            // rsocket.
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
    // SAFETY: accept_common has accept's contract, which the program keeps.
    unsafe { accept_common(fd, addr, len, None) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    // SAFETY: accept_common has accept4's contract, which the program keeps.
    unsafe { accept_common(fd, addr, len, Some(flags)) }
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
    // SAFETY: libc's socket takes no pointers.
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
    match plan {
        // SAFETY: libc's connect with the program's arguments.
        Conn::Real(f) => unsafe { real::connect(f, addr, len) },
        Conn::Rs(e) => {
            // SAFETY: rconnect has connect's contract; the program's address
            // and length go on untouched; e.inner is the rsocket `fd` stands for.
            let r = inside(|| unsafe { rs::rconnect(e.inner, addr, len) });
            // (AF_IB has no TCP to fall back to)
            if r == 0 || errno() == libc::EINPROGRESS || e.domain == libc::AF_IB {
                return r;
            }
            let s = boundary(-1, || quiet(|| connect_fallback(fd, e)));
            if s < 0 {
                return -1;
            }
            // SAFETY: libc's connect with the program's address and length,
            // untouched, on the TCP socket that replaced the rsocket.
            unsafe { real::connect(s, addr, len) }
        }
        Conn::Failed => -1,
    }
}

// (none of these is a cancellation point in libc)
macro_rules! plain_call {
    ($name:ident, $rs:ident, ($($a:ident : $t:ty),*)) => {
        #[no_mangle]
        pub unsafe extern "C-unwind" fn $name(fd: c_int, $($a: $t),*) -> c_int {
            match route(fd) {
                // SAFETY: the rsocket call has the contract of the libc call
                // the program made, whose arguments it gets untouched; `r` is
                // the rsocket `fd` stands for.
                To::Rs(r) => inside_nocancel(|| unsafe { rs::$rs(r, $($a),*) }),
                // SAFETY: libc's own call with the program's arguments.
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
    match route(fd) {
        To::Rs(r) => {
            // SAFETY: rsetsockopt has setsockopt's contract; the program's
            // value and length go on untouched; `r` is the rsocket `fd`
            // stands for.
            let ret = inside_nocancel(|| unsafe { rs::rsetsockopt(r, level, name, val, len) });
            if ret < 0 && errno() == libc::ENOTSUP {
                // (as getsockopt: the kernel's errno for an unknown option)
                trace!("setsockopt: descriptor {fd}: option {level}/{name} not supported by rsockets");
                set_errno(libc::ENOPROTOOPT);
            }
            ret
        }
        // SAFETY: libc's setsockopt with the program's arguments.
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
            // SAFETY: rgetsockopt has getsockopt's contract for the program's
            // buffer and length, passed on untouched.
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
