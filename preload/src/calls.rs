// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The two sets of functions the interposers forward to: libc's own (found
//! with dlsym(RTLD_NEXT), on first use) and librdmacm's rsocket API
//! (linked, so the loader binds it to whichever librdmacm.so.1 it finds;
//! the RDMACM_1.5 repoll calls are looked up at run time and may be absent).
//!
//! Every call into librdmacm runs [`inside`], which marks the thread: a
//! socket() or epoll_create() that librdmacm makes for itself goes straight
//! to libc instead of becoming an rsocket.

use libc::{c_int, c_ulong, c_void, epoll_event, iovec, msghdr, nfds_t, off_t, pollfd, size_t, sockaddr, socklen_t, ssize_t};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

pub fn errno() -> c_int {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

pub fn set_errno(e: c_int) {
    // SAFETY: as in errno().
    unsafe { *libc::__errno_location() = e };
}

/// Runs `f` and puts errno back as it was before: for clean-up after a
/// failed call, so the program sees the failed call's errno.
pub fn keep_errno<R>(f: impl FnOnce() -> R) -> R {
    let e = errno();
    let r = f();
    set_errno(e);
    r
}

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Whether this thread is inside a librdmacm call made by this library.
pub fn in_rdmacm() -> bool {
    DEPTH.with(Cell::get) != 0
}

/// Runs a librdmacm call with the thread marked (see the module comment).
pub fn inside<R>(f: impl FnOnce() -> R) -> R {
    struct Unmark;
    impl Drop for Unmark {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(d.get() - 1));
        }
    }
    DEPTH.with(|d| d.set(d.get() + 1));
    let _u = Unmark;
    f()
}

/// Looks `name` (NUL-terminated) up in `handle`, once; 0 when absent.
fn lookup(cache: &AtomicUsize, handle: *mut c_void, name: &[u8], version: Option<&[u8]>) -> usize {
    let p = cache.load(Ordering::Acquire);
    if p != 0 {
        return p;
    }
    // SAFETY: name and version are NUL-terminated byte strings.
    let found = unsafe {
        match version {
            None => libc::dlsym(handle, name.as_ptr().cast()),
            Some(v) => libc::dlvsym(handle, name.as_ptr().cast(), v.as_ptr().cast()),
        }
    } as usize;
    // usize::MAX marks "looked up, absent"
    let v = if found == 0 { usize::MAX } else { found };
    cache.store(v, Ordering::Release);
    v
}

macro_rules! next {
    ($( $name:ident ( $($a:ident : $t:ty),* ) -> $r:ty ; )*) => {
        $(
            /// libc's function of this name.
            ///
            /// # Safety
            /// The libc function's contract.
            pub unsafe fn $name($($a: $t),*) -> $r {
                static P: AtomicUsize = AtomicUsize::new(0);
                let p = lookup(&P, libc::RTLD_NEXT, concat!(stringify!($name), "\0").as_bytes(), None);
                if p == usize::MAX {
                    set_errno(libc::ENOSYS);
                    return -1 as $r;
                }
                // SAFETY: p is the address of the libc function of this
                // name, whose C prototype this signature repeats.
                let f: unsafe extern "C" fn($($t),*) -> $r = unsafe { std::mem::transmute::<usize, _>(p) };
                // SAFETY: the caller keeps the function's contract.
                unsafe { f($($a),*) }
            }
        )*
    };
}

/// libc's functions.
pub mod real {
    use super::*;
    next! {
        socket(domain: c_int, type_: c_int, protocol: c_int) -> c_int;
        bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
        listen(fd: c_int, backlog: c_int) -> c_int;
        accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
        accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int;
        connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
        recv(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t;
        recvfrom(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int, addr: *mut sockaddr, alen: *mut socklen_t) -> ssize_t;
        recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t;
        read(fd: c_int, buf: *mut c_void, len: size_t) -> ssize_t;
        readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
        send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t;
        sendto(fd: c_int, buf: *const c_void, len: size_t, flags: c_int, addr: *const sockaddr, alen: socklen_t) -> ssize_t;
        sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t;
        write(fd: c_int, buf: *const c_void, len: size_t) -> ssize_t;
        writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
        poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int;
        select(n: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, e: *mut libc::fd_set, tv: *mut libc::timeval) -> c_int;
        shutdown(fd: c_int, how: c_int) -> c_int;
        close(fd: c_int) -> c_int;
        getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
        getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
        setsockopt(fd: c_int, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> c_int;
        getsockopt(fd: c_int, level: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t) -> c_int;
        dup(fd: c_int) -> c_int;
        dup2(fd: c_int, new: c_int) -> c_int;
        dup3(fd: c_int, new: c_int, flags: c_int) -> c_int;
        sendfile(out: c_int, inp: c_int, off: *mut off_t, count: size_t) -> ssize_t;
        sendfile64(out: c_int, inp: c_int, off: *mut off_t, count: size_t) -> ssize_t;
        epoll_create1(flags: c_int) -> c_int;
        epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut epoll_event) -> c_int;
        epoll_wait(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int) -> c_int;
        epoll_pwait(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int;
        fstat(fd: c_int, st: *mut libc::stat) -> c_int;
        fstat64(fd: c_int, st: *mut libc::stat64) -> c_int;
        __fxstat(ver: c_int, fd: c_int, st: *mut libc::stat) -> c_int;
        __fxstat64(ver: c_int, fd: c_int, st: *mut libc::stat64) -> c_int;
    }

    /// libc's fcntl (or fcntl64): variadic in C, called with its one
    /// optional argument as a machine word (ignored by commands without one).
    ///
    /// # Safety
    /// fcntl's contract for `cmd` and `arg`.
    pub unsafe fn fcntl(wide: bool, fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
        static P: AtomicUsize = AtomicUsize::new(0);
        static P64: AtomicUsize = AtomicUsize::new(0);
        let p = if wide { lookup(&P64, libc::RTLD_NEXT, b"fcntl64\0", None) } else { usize::MAX };
        let p = if p == usize::MAX { lookup(&P, libc::RTLD_NEXT, b"fcntl\0", None) } else { p };
        if p == usize::MAX {
            set_errno(libc::ENOSYS);
            return -1;
        }
        // SAFETY: p is libc's variadic fcntl.
        let f: unsafe extern "C" fn(c_int, c_int, ...) -> c_int = unsafe { std::mem::transmute::<usize, _>(p) };
        // SAFETY: the caller keeps fcntl's contract.
        unsafe { f(fd, cmd, arg) }
    }
}

/// librdmacm's rsocket API (RDMACM_1.0).
pub mod rs {
    use super::*;
    extern "C" {
        pub fn rsocket(domain: c_int, type_: c_int, protocol: c_int) -> c_int;
        pub fn rbind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
        pub fn rlisten(fd: c_int, backlog: c_int) -> c_int;
        pub fn raccept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
        pub fn rconnect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
        pub fn rshutdown(fd: c_int, how: c_int) -> c_int;
        pub fn rclose(fd: c_int) -> c_int;
        pub fn rrecv(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t;
        pub fn rrecvfrom(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int, addr: *mut sockaddr, alen: *mut socklen_t) -> ssize_t;
        pub fn rrecvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t;
        pub fn rsend(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t;
        pub fn rsendto(fd: c_int, buf: *const c_void, len: size_t, flags: c_int, addr: *const sockaddr, alen: socklen_t) -> ssize_t;
        pub fn rsendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t;
        pub fn rread(fd: c_int, buf: *mut c_void, len: size_t) -> ssize_t;
        pub fn rreadv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
        pub fn rwrite(fd: c_int, buf: *const c_void, len: size_t) -> ssize_t;
        pub fn rwritev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
        pub fn rpoll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int;
        pub fn rgetpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
        pub fn rgetsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
        pub fn rsetsockopt(fd: c_int, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> c_int;
        pub fn rgetsockopt(fd: c_int, level: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t) -> c_int;
        pub fn rfcntl(fd: c_int, cmd: c_int, ...) -> c_int;
    }

    type Create = unsafe extern "C" fn(c_int) -> c_int;
    type Ctl = unsafe extern "C" fn(c_int, c_int, c_int, *mut epoll_event) -> c_int;
    type Wait = unsafe extern "C" fn(c_int, *mut epoll_event, c_int, c_int) -> c_int;

    /// librdmacm's repoll calls, when the loaded librdmacm has them.
    pub struct Repoll {
        pub create: Create,
        pub ctl: Ctl,
        pub wait: Wait,
    }

    pub fn repoll() -> Option<Repoll> {
        static C: AtomicUsize = AtomicUsize::new(0);
        static T: AtomicUsize = AtomicUsize::new(0);
        static W: AtomicUsize = AtomicUsize::new(0);
        let v = Some(&b"RDMACM_1.5\0"[..]);
        let c = lookup(&C, libc::RTLD_DEFAULT, b"repoll_create\0", v);
        let t = lookup(&T, libc::RTLD_DEFAULT, b"repoll_ctl\0", v);
        let w = lookup(&W, libc::RTLD_DEFAULT, b"repoll_wait\0", v);
        if [c, t, w].contains(&usize::MAX) {
            return None;
        }
        // SAFETY: the three addresses are librdmacm's repoll_create,
        // repoll_ctl and repoll_wait (RDMACM_1.5), with these prototypes.
        unsafe {
            Some(Repoll {
                create: std::mem::transmute::<usize, Create>(c),
                ctl: std::mem::transmute::<usize, Ctl>(t),
                wait: std::mem::transmute::<usize, Wait>(w),
            })
        }
    }
}
