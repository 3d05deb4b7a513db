// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The two sets of functions the interposers forward to: libc's own (found
//! with dlsym(RTLD_NEXT), on first use) and librdmacm's rsocket API
//! (linked, so the loader binds it to whichever librdmacm.so.1 it finds;
//! the RDMACM_1.5 repoll calls are looked up at run time and may be absent).
//!
//! Every call into librdmacm runs [`inside`], which marks the thread: a
//! socket() or epoll_create() that librdmacm makes for itself goes straight
//! to libc instead of becoming an rsocket.
//!
//! Every one of these functions is typed `extern "C-unwind"`: a cancelled
//! thread (pthread_cancel) and one whose signal handler calls pthread_exit
//! end with a forced unwind that starts inside the blocking call, in libc
//! or in librdmacm, and passes through the caller's frames.  The interposers
//! make such calls only from frames it may pass (see `interpose`).

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
///
/// No guard value unmarks the thread: this frame holds nothing with a
/// destructor, so a forced unwind that starts in `f` may pass it.  A
/// thread that ends inside `f` stays marked: the mark is the thread's own,
/// so at most a socket() made by a destructor of the ending thread goes to
/// libc.  (`f` is a call into C, which does not panic.)
#[inline(always)]
pub fn inside<R>(f: impl FnOnce() -> R) -> R {
    DEPTH.with(|d| d.set(d.get().wrapping_add(1)));
    let r = f();
    DEPTH.with(|d| d.set(d.get().wrapping_sub(1)));
    r
}

/// [`inside`] with the thread's cancellation disabled for the call, then
/// put back: for a librdmacm call standing in for a libc function that is
/// no cancellation point (socket, bind, setsockopt, ...), so a thread is
/// not ended where without this library it could not be.  As `inside`, no
/// guard value: the frame stays one a forced unwind may pass (a signal
/// handler's pthread_exit is not held off by the cancellation state).
#[inline(always)]
pub fn inside_nocancel<R>(f: impl FnOnce() -> R) -> R {
    let mut old = 0;
    // SAFETY: a valid state; old is ours.
    keep_errno(|| unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) });
    let r = inside(f);
    let mut was = 0;
    // SAFETY: as above.
    keep_errno(|| unsafe { pthread_setcancelstate(old, &mut was) });
    r
}

const PTHREAD_CANCEL_DISABLE: c_int = 1;

extern "C" {
    // neither is a cancellation point
    fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int;
}

extern "C-unwind" {
    fn pthread_testcancel();
}

/// Runs `f` with the thread's cancellation disabled, then puts the
/// thread's state back (a cancellation requested meanwhile stays pending
/// and acts at the thread's next cancellation point).  For the library's
/// own work around a forwarded call, which runs under [`crate::boundary`]
/// and so must not be where a cancellation acts.
pub fn quiet<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(c_int);
    impl Drop for Restore {
        fn drop(&mut self) {
            let mut old = 0;
            // SAFETY: a valid state from pthread_setcancelstate; old is ours.
            keep_errno(|| unsafe { pthread_setcancelstate(self.0, &mut old) });
        }
    }
    let mut old = 0;
    // SAFETY: a valid state; old is ours.
    keep_errno(|| unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) });
    // (this guard only runs if `f` panics, under the caller's boundary:
    // no forced unwind can start while cancellation is disabled)
    let _restore = Restore(old);
    f()
}

/// A cancellation point: a pending cancellation of this thread acts here.
/// Called from an export's own frame (see `interpose`), before the library
/// does anything it would have to undo.
#[inline(always)]
pub fn testcancel() {
    // SAFETY: no arguments; may end the thread with a forced unwind,
    // which the caller's frame lets pass.
    unsafe { pthread_testcancel() }
}

/// close(2) without libc's cancellation point and without our own close:
/// for the library's own descriptors (placeholders).
pub fn close_nocancel(fd: c_int) -> c_int {
    // SAFETY: the close system call takes a plain integer.
    unsafe { libc::syscall(libc::SYS_close, libc::c_long::from(fd)) as c_int }
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
                let f: unsafe extern "C-unwind" fn($($t),*) -> $r = unsafe { std::mem::transmute::<usize, _>(p) };
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

    /// libc's ioctl: variadic in C, called with its optional argument as
    /// a machine word.
    ///
    /// # Safety
    /// ioctl's contract for `req` and `arg`.
    pub unsafe fn ioctl(fd: c_int, req: c_ulong, arg: c_ulong) -> c_int {
        static P: AtomicUsize = AtomicUsize::new(0);
        let p = lookup(&P, libc::RTLD_NEXT, b"ioctl\0", None);
        if p == usize::MAX {
            set_errno(libc::ENOSYS);
            return -1;
        }
        // SAFETY: p is libc's variadic ioctl.
        let f: unsafe extern "C-unwind" fn(c_int, c_ulong, ...) -> c_int = unsafe { std::mem::transmute::<usize, _>(p) };
        // SAFETY: the caller keeps ioctl's contract.
        unsafe { f(fd, req, arg) }
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
        let f: unsafe extern "C-unwind" fn(c_int, c_int, ...) -> c_int = unsafe { std::mem::transmute::<usize, _>(p) };
        // SAFETY: the caller keeps fcntl's contract.
        unsafe { f(fd, cmd, arg) }
    }
}

/// librdmacm's rsocket API (RDMACM_1.0).
pub mod rs {
    use super::*;
    extern "C-unwind" {
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

    type Create = unsafe extern "C-unwind" fn(c_int) -> c_int;
    type Ctl = unsafe extern "C-unwind" fn(c_int, c_int, c_int, *mut epoll_event) -> c_int;
    type Wait = unsafe extern "C-unwind" fn(c_int, *mut epoll_event, c_int, c_int) -> c_int;

    /// librdmacm's repoll calls, when the loaded librdmacm has them.
    #[derive(Clone, Copy)]
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

#[cfg(test)]
mod tests {
    //! Threads cancelled inside calls made the way the exports make them
    //! (the exports themselves cannot run here: they would interpose the
    //! test program's own calls; preload/tests/cancel.c runs them).

    use super::*;
    use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
    use std::time::Duration;

    extern "C" {
        fn pthread_create(
            t: *mut libc::pthread_t,
            attr: *const libc::pthread_attr_t,
            start: extern "C-unwind" fn(*mut c_void) -> *mut c_void,
            arg: *mut c_void,
        ) -> c_int;
        fn pthread_cancel(t: libc::pthread_t) -> c_int;
    }

    const CANCELED: *mut c_void = -1isize as *mut c_void;

    fn pipe() -> [c_int; 2] {
        let mut p = [0; 2];
        // SAFETY: p has room for two descriptors.
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        p
    }

    /// Runs `start` on a new thread with `arg`; cancels it after `wait`
    /// if given; the value the thread ended with.
    fn run(start: extern "C-unwind" fn(*mut c_void) -> *mut c_void, arg: usize, wait: Option<Duration>) -> *mut c_void {
        // SAFETY: pthread_t is plain data, filled by pthread_create.
        let mut t: libc::pthread_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid start routine; arg is an integer.
        assert_eq!(unsafe { pthread_create(&mut t, std::ptr::null(), start, arg as *mut c_void) }, 0);
        if let Some(w) = wait {
            std::thread::sleep(w);
            // SAFETY: the thread is joinable and not joined yet.
            unsafe { pthread_cancel(t) };
        }
        let mut ret = std::ptr::null_mut();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::pthread_join(t, &mut ret) }, 0);
        ret
    }

    static MARKED: AtomicUsize = AtomicUsize::new(0);

    // as a data call forwards: only plain data in the frame
    extern "C-unwind" fn blocked_read(arg: *mut c_void) -> *mut c_void {
        let mut b = [0u8; 1];
        MARKED.store(1, Ordering::SeqCst);
        // SAFETY: b has one byte; the pipe stays open.
        let r = inside(|| unsafe { real::read(arg as c_int, b.as_mut_ptr().cast(), 1) });
        r as *mut c_void
    }

    #[test]
    fn a_thread_cancelled_in_a_forwarded_call_ends_cancelled() {
        let p = pipe();
        let ret = run(blocked_read, p[0] as usize, Some(Duration::from_millis(50)));
        assert_eq!(ret, CANCELED);
        assert_eq!(MARKED.load(Ordering::SeqCst), 1);
        // this thread was never marked
        assert!(!in_rdmacm());
        close_nocancel(p[0]);
        close_nocancel(p[1]);
    }

    static GOT: AtomicIsize = AtomicIsize::new(0);

    // cancelled before it starts: `quiet` and `inside_nocancel` let their
    // calls return, the next cancellation point acts
    extern "C-unwind" fn pending(arg: *mut c_void) -> *mut c_void {
        let fd = arg as c_int;
        // SAFETY: this thread, joinable.
        unsafe { pthread_cancel(libc::pthread_self()) };
        let mut b = [0u8; 2];
        // SAFETY: b has two bytes; the pipe holds two.
        let a = quiet(|| unsafe { real::read(fd, b.as_mut_ptr().cast(), 1) });
        // SAFETY: as above.
        let c = inside_nocancel(|| unsafe { real::read(fd, b.as_mut_ptr().add(1).cast(), 1) });
        GOT.store(a + c, Ordering::SeqCst);
        testcancel();
        std::ptr::null_mut()
    }

    #[test]
    fn a_pending_cancellation_waits_for_the_quiet_parts() {
        let p = pipe();
        // SAFETY: two bytes from a local array.
        assert_eq!(unsafe { libc::write(p[1], b"xy".as_ptr().cast(), 2) }, 2);
        assert_eq!(run(pending, p[0] as usize, None), CANCELED);
        assert_eq!(GOT.load(Ordering::SeqCst), 2);
        close_nocancel(p[0]);
        close_nocancel(p[1]);
    }
}
