// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Fork: fork mode (RDMAV_FORK_SAFE), whose connections become rsockets
//! at their first data call, and what a child made by fork(2) inherits
//! (the parent's rsockets, on which its calls fail; the pthread_atfork
//! handler that marks them).

use super::options::{copy_options, tune};
use super::setup::{config, trace};
use crate::boundary;
use crate::calls::{errno, inside, keep_errno, quiet, real, rs, set_errno};
use crate::fdmap::{self, Entry, Fork, Kind};
use crate::split;
use libc::{c_int, c_ulong, sockaddr, socklen_t};

/// A call on a stand-in inherited across fork(2) (`Kind::Inherited`): the
/// rsocket lives in the parent, so the call fails with `err` (ENOTCONN;
/// EPERM for epoll_ctl), and says so under RDMACM_RS_LOG.
pub(super) fn inherited(fd: c_int, call: &str, err: c_int) {
    trace!(
        "{call}: descriptor {fd} stands for an rsocket of the parent process (inherited across fork): fails with errno {err} (fork mode, RDMAV_FORK_SAFE=1, makes connections that can be used after fork)"
    );
    set_errno(err);
}

/// Registers (once) the handler that marks, in a child made by fork(2),
/// the rsockets and repoll sets of the parent as `Kind::Inherited`; in fork
/// mode, first the handlers that split each connected rsocket between the
/// two processes (`split`).
pub(super) fn watch_fork() {
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

// --- fork mode (RDMAV_FORK_SAFE): connections are made over TCP, and
// become rsockets at their first data call, in whichever process makes it.
// The accepting side listens for an rsocket on its TCP port and tells the
// connecting side so with 4 zero bytes over TCP; the connecting side waits
// for them, then connects the rsocket.  Upstream's protocol, so either side
// may be upstream's library.  On any failure the socket stays TCP. ---

pub(super) fn fork_switch(fd: c_int, e: Entry) {
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
