// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The interposed functions.  Each one looks its descriptor up in the
//! table and forwards the call to the rsocket API (`rs`) or to libc
//! (`real`).  Raw pointers from the program are passed on untouched: the
//! function forwarded to has the same contract as the one the program
//! called.

#![allow(clippy::missing_safety_doc)]

use crate::boundary;
use crate::calls::{errno, in_rdmacm, inside, keep_errno, real, rs, set_errno};
use crate::config::{self, Config};
use crate::fdmap::{self, Entry, Fork, Kind};
use libc::{c_int, c_ulong, c_void, epoll_event, fd_set, iovec, msghdr, nfds_t, off_t, pollfd, size_t, sockaddr, socklen_t, ssize_t, timeval};
use std::sync::OnceLock;

fn config() -> &'static (Config, String) {
    static C: OnceLock<(Config, String)> = OnceLock::new();
    C.get_or_init(|| (config::load(), config::program_name()))
}

/// Where a call on program descriptor `fd` goes.
#[derive(Clone, Copy)]
enum To {
    /// to the rsocket API, on this rsocket
    Rs(c_int),
    /// to libc, on this descriptor
    Real(c_int),
}

fn route(fd: c_int) -> To {
    match fdmap::get(fd) {
        Some(Entry { kind: Kind::Rsocket, inner, .. }) => To::Rs(inner),
        Some(Entry { kind: Kind::Real, inner, .. }) => To::Real(inner),
        _ => To::Real(fd),
    }
}

/// `route` for the data calls: a fork-mode socket becomes an rsocket at
/// its first data call (see `fork_switch`).
fn route_data(fd: c_int) -> To {
    if let Some(e @ Entry { kind: Kind::Real, fork: Fork::Active | Fork::Passive, .. }) = fdmap::get(fd) {
        fork_switch(fd, e);
    }
    route(fd)
}

/// A descriptor to show the program in place of an rsocket: an open
/// /dev/null holds the number.  -1 with open's errno on failure.
fn placeholder(cloexec: bool) -> c_int {
    let flags = libc::O_RDONLY | if cloexec { libc::O_CLOEXEC } else { 0 };
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(c"/dev/null".as_ptr(), flags) };
    if fd >= 0 && fd as usize > fdmap::MAX_FD {
        // SAFETY: our own descriptor.
        keep_errno(|| unsafe { real::close(fd) });
        set_errno(libc::EMFILE);
        return -1;
    }
    fd
}

/// Records `idx` as standing for `inner` (one more holder of `inner`).
fn adopt(idx: c_int, kind: Kind, fork: Fork, inner: c_int, domain: c_int) {
    fdmap::set(idx, Entry { kind, fork, inner, domain });
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
            keep_errno(|| inside(|| unsafe {
                rs::rsetsockopt(rfd, 0x10000, name, (&val as *const c_int).cast(), std::mem::size_of::<c_int>() as socklen_t)
            }));
        }
    }
}

// --- socket, bind, listen, accept, connect ---

#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, type_: c_int, protocol: c_int) -> c_int {
    boundary(-1, || {
        let base = type_ & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
        let candidate = matches!(domain, libc::AF_INET | libc::AF_INET6 | libc::AF_IB)
            && matches!(base, libc::SOCK_STREAM | libc::SOCK_DGRAM)
            && !in_rdmacm();
        if !candidate {
            // SAFETY: libc's socket, same arguments.
            return unsafe { real::socket(domain, type_, protocol) };
        }
        let (cfg, prog) = config();
        if !cfg.intercepts(prog, domain, type_, protocol) {
            // SAFETY: as above.
            return unsafe { real::socket(domain, type_, protocol) };
        }
        let idx = placeholder(type_ & libc::SOCK_CLOEXEC != 0);
        if idx < 0 {
            return -1;
        }
        let tcp = matches!(domain, libc::AF_INET | libc::AF_INET6)
            && base == libc::SOCK_STREAM
            && (protocol == 0 || protocol == libc::IPPROTO_TCP);
        if cfg.fork && tcp {
            // fork mode: a TCP socket now, an rsocket after the connection is made
            // SAFETY: libc's socket.
            let s = unsafe { real::socket(domain, type_, protocol) };
            if s < 0 {
                // SAFETY: our placeholder.
                keep_errno(|| unsafe { real::close(idx) });
                return -1;
            }
            adopt(idx, Kind::Real, Fork::Fresh, s, domain);
            return idx;
        }
        // SAFETY: rsocket takes no pointers.
        let r = inside(|| unsafe { rs::rsocket(domain, type_, protocol) });
        if r >= 0 {
            adopt(idx, Kind::Rsocket, Fork::Ready, r, domain);
            tune(r);
            return idx;
        }
        // not an rsocket (no RDMA device, an unsupported type, ...): the real thing
        // SAFETY: our placeholder; then libc's socket with the caller's arguments.
        unsafe {
            real::close(idx);
            real::socket(domain, type_, protocol)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY (all forwarding below): the callee has the caller's contract.
    boundary(-1, || match route(fd) {
        To::Rs(r) => inside(|| unsafe { rs::rbind(r, addr, len) }),
        To::Real(f) => unsafe { real::bind(f, addr, len) },
    })
}

#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    boundary(-1, || match route(fd) {
        To::Rs(r) => inside(|| unsafe { rs::rlisten(r, backlog) }),
        To::Real(f) => {
            let ret = unsafe { real::listen(f, backlog) };
            if let Some(e @ Entry { fork: Fork::Fresh, .. }) = fdmap::get(fd) {
                if ret == 0 {
                    fdmap::set(fd, Entry { fork: Fork::Listen, ..e });
                }
            }
            ret
        }
    })
}

fn accept_impl(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: Option<c_int>) -> c_int {
    let cloexec = flags.unwrap_or(0) & libc::SOCK_CLOEXEC != 0;
    match fdmap::get(fd) {
        Some(e @ Entry { kind: Kind::Rsocket, .. }) => {
            let idx = placeholder(cloexec);
            if idx < 0 {
                return -1;
            }
            // SAFETY: raccept with the caller's address buffer.
            let r = inside(|| unsafe { rs::raccept(e.inner, addr, len) });
            if r < 0 {
                // SAFETY: our placeholder.
                keep_errno(|| unsafe { real::close(idx) });
                return -1;
            }
            adopt(idx, Kind::Rsocket, Fork::Ready, r, e.domain);
            tune(r);
            if flags.unwrap_or(0) & libc::SOCK_NONBLOCK != 0 {
                // SAFETY: rfcntl on our rsocket.
                let ok = inside(|| unsafe {
                    let fl = rs::rfcntl(r, libc::F_GETFL);
                    fl >= 0 && rs::rfcntl(r, libc::F_SETFL, fl | libc::O_NONBLOCK) == 0
                });
                if !ok {
                    keep_errno(|| close_impl(idx));
                    return -1;
                }
            }
            idx
        }
        Some(e @ Entry { kind: Kind::Real, fork: Fork::Listen, .. }) => {
            let idx = placeholder(cloexec);
            if idx < 0 {
                return -1;
            }
            // SAFETY: libc's accept4 with the caller's arguments.
            let r = unsafe { real::accept4(e.inner, addr, len, flags.unwrap_or(0)) };
            if r < 0 {
                // SAFETY: our placeholder.
                keep_errno(|| unsafe { real::close(idx) });
                return -1;
            }
            adopt(idx, Kind::Real, Fork::Passive, r, e.domain);
            idx
        }
        Some(Entry { kind: Kind::Real, inner, .. }) => unsafe {
            // SAFETY: libc's accept/accept4 with the caller's arguments.
            match flags {
                Some(fl) => real::accept4(inner, addr, len, fl),
                None => real::accept(inner, addr, len),
            }
        },
        _ => unsafe {
            // SAFETY: as above.
            match flags {
                Some(fl) => real::accept4(fd, addr, len, fl),
                None => real::accept(fd, addr, len),
            }
        },
    }
}

#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    boundary(-1, || accept_impl(fd, addr, len, None))
}

#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    boundary(-1, || accept_impl(fd, addr, len, Some(flags)))
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

#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    boundary(-1, || {
        let Some(e) = fdmap::get(fd) else {
            // SAFETY: libc's connect with the caller's arguments.
            return unsafe { real::connect(fd, addr, len) };
        };
        match e.kind {
            Kind::Rsocket => {
                // SAFETY: rconnect with the caller's address.
                let r = inside(|| unsafe { rs::rconnect(e.inner, addr, len) });
                // (AF_IB has no TCP to fall back to)
                if r == 0 || errno() == libc::EINPROGRESS || e.domain == libc::AF_IB {
                    return r;
                }
                // The peer cannot be reached over RDMA: a real socket takes
                // the rsocket's place and connects over TCP.
                // SAFETY: libc's socket.
                let s = unsafe { real::socket(e.domain, libc::SOCK_STREAM, 0) };
                if s < 0 {
                    return -1;
                }
                if copy_options(true, e.inner, s) != 0 {
                    // SAFETY: our new socket.
                    keep_errno(|| unsafe { real::close(s) });
                    return -1;
                }
                fdmap::set(fd, Entry { kind: Kind::Real, fork: Fork::Ready, inner: s, domain: e.domain });
                fdmap::hold(s);
                if fdmap::release(e.inner) {
                    // SAFETY: the rsocket no program descriptor refers to any more.
                    inside(|| unsafe { rs::rclose(e.inner) });
                }
                // SAFETY: libc's connect with the caller's address.
                unsafe { real::connect(s, addr, len) }
            }
            Kind::Real => {
                if e.fork == Fork::Fresh {
                    fdmap::set(fd, Entry { fork: Fork::Active, ..e });
                }
                // SAFETY: libc's connect with the caller's arguments.
                unsafe { real::connect(e.inner, addr, len) }
            }
            Kind::Repoll => {
                // SAFETY: as above (libc answers for the stand-in).
                unsafe { real::connect(fd, addr, len) }
            }
        }
    })
}

// --- fork mode (RDMAV_FORK_SAFE): connections are made over TCP, and
// become rsockets at their first data call, in whichever process makes it.
// The accepting side listens for an rsocket on its TCP port and tells the
// connecting side so with 4 zero bytes over TCP; the connecting side waits
// for them, then connects the rsocket.  Upstream's protocol, so either side
// may be upstream's library.  On any failure the socket stays TCP. ---

macro_rules! trace {
    ($($t:tt)*) => {
        if config().0.trace {
            eprintln!("librspreload[{}]: {}", std::process::id(), format_args!($($t)*));
        }
    };
}

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
    fdmap::set(fd, Entry { kind: Kind::Rsocket, fork: Fork::Ready, inner: r, domain: e.domain });
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
        pub unsafe extern "C" fn $name(fd: c_int, $($a: $t),*) -> $r {
            // SAFETY: the callee has the caller's contract.
            boundary(-1, || match route_data(fd) {
                To::Rs(r) => inside(|| unsafe { rs::$rs(r, $($a),*) }),
                To::Real(f) => unsafe { real::$name(f, $($a),*) },
            })
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

macro_rules! plain_call {
    ($name:ident, $rs:ident, ($($a:ident : $t:ty),*)) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(fd: c_int, $($a: $t),*) -> c_int {
            // SAFETY: the callee has the caller's contract.
            boundary(-1, || match route(fd) {
                To::Rs(r) => inside(|| unsafe { rs::$rs(r, $($a),*) }),
                To::Real(f) => unsafe { real::$name(f, $($a),*) },
            })
        }
    };
}

plain_call!(shutdown, rshutdown, (how: c_int));
plain_call!(getpeername, rgetpeername, (addr: *mut sockaddr, len: *mut socklen_t));
plain_call!(getsockname, rgetsockname, (addr: *mut sockaddr, len: *mut socklen_t));
plain_call!(setsockopt, rsetsockopt, (level: c_int, name: c_int, val: *const c_void, len: socklen_t));
plain_call!(getsockopt, rgetsockopt, (level: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t));

// --- poll, select ---

/// Polls `fds` with each stand-in replaced by what it stands for: through
/// rpoll when an rsocket is among them, libc's poll otherwise.
fn poll_mapped(fds: &mut [pollfd], timeout: c_int) -> c_int {
    let mut any_rs = false;
    let mut inner: Vec<pollfd> = fds
        .iter()
        .map(|p| {
            let fd = match fdmap::get(p.fd) {
                Some(Entry { kind: Kind::Rsocket, inner, .. }) => {
                    any_rs = true;
                    inner
                }
                Some(Entry { inner, .. }) => inner,
                None => p.fd,
            };
            pollfd { fd, events: p.events, revents: 0 }
        })
        .collect();
    // SAFETY: `inner` holds fds.len() entries.
    let ret = unsafe {
        if any_rs {
            inside(|| rs::rpoll(inner.as_mut_ptr(), inner.len() as nfds_t, timeout))
        } else {
            real::poll(inner.as_mut_ptr(), inner.len() as nfds_t, timeout)
        }
    };
    for (p, q) in fds.iter_mut().zip(&inner) {
        p.revents = q.revents;
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    boundary(-1, || {
        // SAFETY: the caller passes nfds pollfd entries at fds (or none).
        let list: &mut [pollfd] = if fds.is_null() || nfds == 0 { &mut [] } else { unsafe { std::slice::from_raw_parts_mut(fds, nfds as usize) } };
        if list.iter().all(|p| fdmap::get(p.fd).is_none()) {
            // SAFETY: the caller's arguments.
            return unsafe { real::poll(fds, nfds, timeout) };
        }
        poll_mapped(list, timeout)
    })
}

#[no_mangle]
pub unsafe extern "C" fn select(nfds: c_int, r: *mut fd_set, w: *mut fd_set, x: *mut fd_set, tv: *mut timeval) -> c_int {
    boundary(-1, || {
        let n = nfds.clamp(0, libc::FD_SETSIZE as c_int);
        // SAFETY: the sets are NULL or the caller's fd_sets.
        let isset = |set: *mut fd_set, fd| !set.is_null() && unsafe { libc::FD_ISSET(fd, set) };
        let mut list = Vec::new();
        for fd in 0..n {
            let mut ev = 0;
            if isset(r, fd) {
                ev |= libc::POLLIN;
            }
            if isset(w, fd) {
                ev |= libc::POLLOUT;
            }
            if ev != 0 || isset(x, fd) {
                list.push(pollfd { fd, events: ev, revents: 0 });
            }
        }
        if list.iter().all(|p| fdmap::get(p.fd).is_none()) {
            // SAFETY: the caller's arguments.
            return unsafe { real::select(nfds, r, w, x, tv) };
        }
        let timeout = if tv.is_null() {
            -1
        } else {
            // SAFETY: non-NULL timeval of the caller.
            let t = unsafe { *tv };
            if t.tv_sec < 0 || t.tv_usec < 0 {
                set_errno(libc::EINVAL);
                return -1;
            }
            t.tv_sec.saturating_mul(1000).saturating_add(t.tv_usec / 1000).min(c_int::MAX.into()) as c_int
        };
        let ret = poll_mapped(&mut list, timeout);
        if ret < 0 {
            return ret;
        }
        for set in [r, w, x] {
            if !set.is_null() {
                // SAFETY: the caller's fd_set.
                unsafe { libc::FD_ZERO(set) };
            }
        }
        let mut count = 0;
        for p in &list {
            for (set, hit) in [
                (r, p.revents & libc::POLLIN != 0),
                (w, p.revents & libc::POLLOUT != 0),
                (x, p.revents & !(libc::POLLIN | libc::POLLOUT) != 0),
            ] {
                if hit && !set.is_null() {
                    // SAFETY: the caller's fd_set; p.fd < FD_SETSIZE.
                    unsafe { libc::FD_SET(p.fd, set) };
                    count += 1;
                }
            }
        }
        count
    })
}

// --- close, dup, fcntl ---

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
        // SAFETY: the last holder of the real socket closes it.
        Kind::Real => unsafe { real::close(e.inner) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    boundary(-1, || close_impl(fd))
}

/// After libc duplicated stand-in `old` as `new` (dup, dup2, dup3,
/// F_DUPFD), `new` stands for the same thing.
fn dup_done(old: Option<Entry>, new: c_int) -> c_int {
    if let (Some(e), true) = (old, new >= 0) {
        if new as usize > fdmap::MAX_FD {
            // SAFETY: libc just made this descriptor for us.
            keep_errno(|| unsafe { real::close(new) });
            set_errno(libc::EMFILE);
            return -1;
        }
        adopt(new, e.kind, e.fork, e.inner, e.domain);
    }
    new
}

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    // SAFETY: libc's dup.
    boundary(-1, || dup_done(fdmap::get(fd), unsafe { real::dup(fd) }))
}

fn dup2_impl(old: c_int, new: c_int, flags: Option<c_int>) -> c_int {
    let e = fdmap::get(old);
    if old != new && fdmap::get(new).is_some() {
        // SAFETY: `old` is checked to be open first, as dup2 would.
        if unsafe { real::fcntl(false, old, libc::F_GETFD, 0) } < 0 {
            return -1;
        }
        close_impl(new);
    }
    // SAFETY: libc's dup2/dup3.
    let r = unsafe {
        match flags {
            Some(f) => real::dup3(old, new, f),
            None => real::dup2(old, new),
        }
    };
    if old == new {
        return r;
    }
    dup_done(e, r)
}

#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    boundary(-1, || dup2_impl(old, new, None))
}

#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    boundary(-1, || dup2_impl(old, new, Some(flags)))
}

fn fcntl_impl(wide: bool, fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    let e = fdmap::get(fd);
    match (e, cmd) {
        // descriptor flags and duplicates belong to the program's descriptor
        (Some(_), libc::F_DUPFD | libc::F_DUPFD_CLOEXEC) => {
            // SAFETY: libc's fcntl on the stand-in.
            dup_done(e, unsafe { real::fcntl(wide, fd, cmd, arg) })
        }
        // SAFETY: as above.
        (Some(_), libc::F_GETFD | libc::F_SETFD) => unsafe { real::fcntl(wide, fd, cmd, arg) },
        (Some(Entry { kind: Kind::Rsocket, inner, .. }), _) => {
            // SAFETY: rfcntl takes its argument as fcntl does.
            inside(|| unsafe { rs::rfcntl(inner, cmd, arg) })
        }
        // SAFETY: libc's fcntl with the caller's arguments.
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
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    boundary(-1, || fcntl_impl(false, fd, cmd, arg))
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    boundary(-1, || fcntl_impl(true, fd, cmd, arg))
}

// --- sendfile: the file's bytes are read here and written to the rsocket ---

fn sendfile_impl(wide: bool, out: c_int, inp: c_int, off: *mut off_t, count: size_t) -> ssize_t {
    let r = match route_data(out) {
        To::Rs(r) => r,
        // SAFETY: libc's sendfile with the caller's arguments.
        To::Real(f) => return unsafe { if wide { real::sendfile64(f, inp, off, count) } else { real::sendfile(f, inp, off, count) } },
    };
    let pos = if off.is_null() {
        // SAFETY: lseek on the caller's file.
        unsafe { libc::lseek(inp, 0, libc::SEEK_CUR) }
    } else {
        // SAFETY: the caller's offset.
        unsafe { *off }
    };
    if pos < 0 {
        return -1;
    }
    let mut buf = vec![0u8; count.min(1 << 20)];
    // SAFETY: buf has buf.len() bytes.
    let got = unsafe { libc::pread(inp, buf.as_mut_ptr().cast(), buf.len(), pos) };
    if got <= 0 {
        return got;
    }
    // SAFETY: got bytes of buf are initialised.
    let sent = inside(|| unsafe { rs::rwrite(r, buf.as_ptr().cast(), got as size_t) });
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

#[no_mangle]
pub unsafe extern "C" fn sendfile(out: c_int, inp: c_int, off: *mut off_t, count: size_t) -> ssize_t {
    boundary(-1, || sendfile_impl(false, out, inp, off, count))
}

#[no_mangle]
pub unsafe extern "C" fn sendfile64(out: c_int, inp: c_int, off: *mut off_t, count: size_t) -> ssize_t {
    boundary(-1, || sendfile_impl(true, out, inp, off, count))
}

// --- epoll: sets made by epoll_create are repoll sets, as upstream's are,
// so they can hold rsockets and ordinary descriptors alike ---

#[no_mangle]
pub unsafe extern "C" fn epoll_create1(flags: c_int) -> c_int {
    boundary(-1, || {
        let rp = match rs::repoll() {
            Some(rp) if !in_rdmacm() => rp,
            // SAFETY: libc's epoll_create1.
            _ => return unsafe { real::epoll_create1(flags) },
        };
        if flags & !libc::EPOLL_CLOEXEC != 0 {
            set_errno(libc::EINVAL);
            return -1;
        }
        let idx = placeholder(flags & libc::EPOLL_CLOEXEC != 0);
        if idx < 0 {
            return -1;
        }
        // SAFETY: repoll_create takes no pointers.
        let r = inside(|| unsafe { (rp.create)(flags) });
        if r < 0 {
            // SAFETY: our placeholder.
            keep_errno(|| unsafe { real::close(idx) });
            return -1;
        }
        adopt(idx, Kind::Repoll, Fork::Ready, r, 0);
        idx
    })
}

#[no_mangle]
pub unsafe extern "C" fn epoll_create(size: c_int) -> c_int {
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

#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut epoll_event) -> c_int {
    boundary(-1, || match (fdmap::get(epfd), rs::repoll()) {
        (Some(Entry { kind: Kind::Repoll, inner, .. }), Some(rp)) => {
            let target = fdmap::get(fd).map_or(fd, |e| e.inner);
            // SAFETY: repoll_ctl with the caller's event.
            let r = inside(|| unsafe { (rp.ctl)(inner, op, target, ev) });
            repoll_result(r, 0)
        }
        // SAFETY: libc's epoll_ctl with the caller's arguments.
        _ => unsafe { real::epoll_ctl(epfd, op, fd, ev) },
    })
}

fn epoll_wait_impl(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int {
    match (fdmap::get(epfd), rs::repoll()) {
        (Some(Entry { kind: Kind::Repoll, inner, .. }), Some(rp)) => {
            if max <= 0 || ev.is_null() {
                set_errno(libc::EINVAL);
                return -1;
            }
            // SAFETY: a sigset_t on our stack; the caller's mask.
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
        // SAFETY: libc's calls with the caller's arguments.
        _ => unsafe {
            if mask.is_null() {
                real::epoll_wait(epfd, ev, max, timeout)
            } else {
                real::epoll_pwait(epfd, ev, max, timeout, mask)
            }
        },
    }
}

#[no_mangle]
pub unsafe extern "C" fn epoll_wait(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int) -> c_int {
    boundary(-1, || epoll_wait_impl(epfd, ev, max, timeout, std::ptr::null()))
}

#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int {
    boundary(-1, || epoll_wait_impl(epfd, ev, max, timeout, mask))
}

// --- fstat: a stand-in for an rsocket says it is a socket ---

fn socket_mode(fd: c_int, ret: c_int, mode: &mut libc::mode_t) -> c_int {
    if ret == 0 && matches!(fdmap::get(fd), Some(Entry { kind: Kind::Rsocket | Kind::Real, .. })) {
        *mode = (*mode & !libc::S_IFMT) | libc::S_IFSOCK;
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn fstat(fd: c_int, st: *mut libc::stat) -> c_int {
    boundary(-1, || {
        // SAFETY: libc's fstat with the caller's buffer, which it filled when it returned 0.
        let r = unsafe { real::fstat(fd, st) };
        if r == 0 { socket_mode(fd, r, unsafe { &mut (*st).st_mode }) } else { r }
    })
}

#[no_mangle]
pub unsafe extern "C" fn fstat64(fd: c_int, st: *mut libc::stat64) -> c_int {
    boundary(-1, || {
        // SAFETY: as in fstat.
        let r = unsafe { real::fstat64(fd, st) };
        if r == 0 { socket_mode(fd, r, unsafe { &mut (*st).st_mode }) } else { r }
    })
}

#[no_mangle]
pub unsafe extern "C" fn __fxstat(ver: c_int, fd: c_int, st: *mut libc::stat) -> c_int {
    boundary(-1, || {
        // SAFETY: as in fstat.
        let r = unsafe { real::__fxstat(ver, fd, st) };
        if r == 0 { socket_mode(fd, r, unsafe { &mut (*st).st_mode }) } else { r }
    })
}

#[no_mangle]
pub unsafe extern "C" fn __fxstat64(ver: c_int, fd: c_int, st: *mut libc::stat64) -> c_int {
    boundary(-1, || {
        // SAFETY: as in fstat.
        let r = unsafe { real::__fxstat64(ver, fd, st) };
        if r == 0 { socket_mode(fd, r, unsafe { &mut (*st).st_mode }) } else { r }
    })
}
