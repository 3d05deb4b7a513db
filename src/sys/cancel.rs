// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Thread cancellation and thread exit inside the library (C's process
//! model; ARCHITECTURE.md, "Cancellation").
//!
//! glibc ends a cancelled thread, and one whose signal handler calls
//! `pthread_exit`, with a *forced unwind* that starts inside a blocking
//! system call.  Rust's rules (the Reference on unwinding, RFC 2945) make
//! a forced unwind across a Rust frame with destructors or a pending
//! `catch_unwind` undefined; in practice `catch_unwind` takes it for a
//! foreign exception and the process aborts ("FATAL: exception not
//! rethrown").  So:
//!
//! * the library's work runs with cancellation disabled ([`NoCancel`]), or
//!   (the few hot entry points that take no guard) without any
//!   cancellation point of libc ([`raw`]);
//! * a blocking wait goes through [`wait_poll`] / [`wait_write`], C
//!   functions (cancel_shim.c) that act on a cancellation in the state the
//!   C caller had, catch the unwind in a cancellation scope of their own
//!   (glibc's C cleanup protocol) and return `ECANCELED` instead;
//! * the Rust code returns normally through every frame (locks released,
//!   registrations undone);
//! * the exported function, with nothing of the library's left on the
//!   stack but its own plain frame, hands the unwind on ([`resume`]), so
//!   that the thread ends as C expects.
//!
//! Once a wait has caught a cancellation, every later wait of the same
//! call returns `ECANCELED` at once, so an error that some caller chooses
//! to ignore never lets the thread block again before it ends.
//!
//! One wait needs no scope: `rdma_get_cm_event`'s, which its export makes
//! itself with nothing of the library's on the stack but its own plain
//! frame ([`write_unwinding`], cleanup_shim.c).  The forced unwind leaves
//! through it into C, running a C cleanup on its way that releases what
//! the frame held; the thread ends inside the call, as in upstream's.

use nix::errno::Errno;
use std::ffi::c_int;
use std::sync::atomic::Ordering;

/// src/sys/cancel_shim.c (kept out of the generated header).
/// cbindgen:ignore
mod shim {
    use std::ffi::c_int;
    use std::sync::atomic::AtomicI32;
    extern "C" {
        pub static rdmacm_rs_cancel_inflight: AtomicI32;
        pub fn rdmacm_rs_nocancel_enter() -> c_int;
        pub fn rdmacm_rs_nocancel_leave(old: c_int);
        pub fn rdmacm_rs_wait_poll(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int;
        pub fn rdmacm_rs_wait_write(fd: c_int, b: *const libc::c_void, len: usize) -> isize;
        pub fn rdmacm_rs_cancel_caught() -> c_int;
    }
    extern "C-unwind" {
        /// Continues glibc's unwind: an unwinding ABI, it leaves through its caller.
        pub fn rdmacm_rs_cancel_resume() -> !;
        /// src/sys/cleanup_shim.c: write(2) that a forced unwind leaves
        /// through, calling `cleanup(arg)` on its way (an unwinding ABI).
        pub fn rdmacm_rs_write_cleanup(fd: c_int, b: *const libc::c_void, len: usize, cleanup: unsafe extern "C" fn(*mut libc::c_void), arg: *mut libc::c_void) -> isize;
    }
}
use shim::*;

/// Cancellation disabled for the guard's life (nested guards are fine):
/// no cancellation point of libc or libibverbs inside acts on a pending
/// cancel.  The waits below still act on it, in the caller's state.
pub struct NoCancel {
    old: c_int,
}

impl NoCancel {
    #[inline]
    pub fn new() -> NoCancel {
        // Under Miri (unit tests only) there is no C shim and no
        // cancellation to hold off.
        #[cfg(miri)]
        return NoCancel { old: 0 };
        // SAFETY: a C function without arguments that changes only this
        // thread's cancel state and the shim's thread-local record of it.
        #[cfg(not(miri))]
        NoCancel { old: unsafe { rdmacm_rs_nocancel_enter() } }
    }
}

impl Default for NoCancel {
    fn default() -> Self {
        NoCancel::new()
    }
}

impl Drop for NoCancel {
    #[inline]
    fn drop(&mut self) {
        #[cfg(miri)]
        let _ = self.old;
        // SAFETY: gives back the state `new` saved.
        #[cfg(not(miri))]
        unsafe { rdmacm_rs_nocancel_leave(self.old) }
    }
}

/// Runs `f` with cancellation disabled (see [`NoCancel`]).
#[inline]
pub fn nocancel<R>(f: impl FnOnce() -> R) -> R {
    let _g = NoCancel::new();
    f()
}

/// [`nocancel`] for a `dyn` closure (the logger's writes).
pub fn shield(f: &mut dyn FnMut()) {
    nocancel(f)
}

/// poll(2) that a cancellation (or a `pthread_exit` from a signal
/// handler) may end: `ECANCELED` then, and on every later wait of the
/// thread until [`resume`].  `EINTR` as poll gives it.
pub fn wait_poll(fds: &mut [libc::pollfd], timeout_ms: c_int) -> Result<c_int, Errno> {
    // Under Miri (unit tests only): libc's poll, without the shim.
    #[cfg(miri)]
    // SAFETY: fds is a valid array of its length for the call.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    // SAFETY: fds is a valid array of its length for the call.
    #[cfg(not(miri))]
    let r = unsafe { rdmacm_rs_wait_poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        Err(match Errno::last() {
            Errno::UnknownErrno => Errno::EINTR,
            e => e,
        })
    } else {
        Ok(r)
    }
}

/// write(2) that may block (the ucma device's GET_EVENT), as a wait:
/// see [`wait_poll`].  In line in its caller (`rdma_get_cm_event`'s
/// export), its failure's errno read out of line.
///
/// # Safety
/// `b` must stay valid for what the kernel reads or writes through it
/// (the ucma commands carry user addresses).
#[inline]
pub unsafe fn wait_write(fd: c_int, b: &[u8]) -> Result<usize, Errno> {
    // SAFETY: b is readable for its length; the caller keeps any address
    // inside it valid.
    let r = unsafe { rdmacm_rs_wait_write(fd, b.as_ptr().cast(), b.len()) };
    written(r)
}

/// A C wait's return (libc's convention: -1 and errno on failure) as a
/// result.
#[inline(always)]
fn written(r: isize) -> Result<usize, Errno> {
    if r < 0 {
        Err(super::last_errno())
    } else {
        Ok(r as usize)
    }
}

/// write(2) that may block, as a wait that a cancellation (or a
/// `pthread_exit` from a signal handler) ends the way it ends a C
/// library's: glibc's forced unwind leaves through this call and its
/// callers into the C caller's frames, calling `cleanup(arg)` on its way
/// (src/sys/cleanup_shim.c).  No cancellation scope: the call costs the
/// write and one C frame.  The cancellation acts in the thread's current
/// state, so the call is made outside every [`NoCancel`] guard.
///
/// # Safety
/// * `b` as for [`wait_write`];
/// * every frame from the exported function down to this call is a plain
///   one that a forced unwind may cross (RFC 2945): no value with a
///   destructor live in it, no `catch_unwind` around the call, each of an
///   unwinding ABI (Rust, `"C-unwind"`); what the frames own is released
///   by `cleanup`;
/// * `cleanup(arg)` may run once, during the unwind, and must not unwind.
#[inline(always)]
pub unsafe fn write_unwinding(fd: c_int, b: &[u8], cleanup: unsafe extern "C" fn(*mut libc::c_void), arg: *mut libc::c_void) -> Result<usize, Errno> {
    // SAFETY: per the contract.
    let r = unsafe { rdmacm_rs_write_cleanup(fd, b.as_ptr().cast(), b.len(), cleanup, arg) };
    written(r)
}

/// Whether this thread caught a cancellation that its export must hand
/// on.  One relaxed load when no thread of the process holds one.
#[inline]
pub fn caught() -> bool {
    // SAFETY: an atomic the shim defines; read-only access.
    if unsafe { rdmacm_rs_cancel_inflight.load(Ordering::Relaxed) } == 0 {
        return false;
    }
    // SAFETY: reads this thread's flag.
    unsafe { rdmacm_rs_cancel_caught() != 0 }
}

/// Hands the caught cancellation or thread exit on: the thread unwinds
/// from here into its caller's frames and never returns.
///
/// # Safety
/// Only from the frame of an `extern "C-unwind"` export (or a plain
/// function inlined into it) that holds nothing with a destructor, with
/// no `catch_unwind` of ours on the stack: the unwind leaves through it.
#[inline(always)]
pub unsafe fn resume() -> ! {
    // SAFETY: the caller's contract; the shim continues glibc's unwind.
    unsafe { rdmacm_rs_cancel_resume() }
}

/// System calls without libc's cancellation point, for the hot paths that
/// run without a [`NoCancel`] guard (the ucma commands, the wake-up
/// eventfds): the same system call, and never a place where a
/// cancellation is acted on.
pub mod raw {
    use nix::errno::Errno;
    use std::ffi::c_int;

    /// One system call with up to three arguments; the kernel's result
    /// (negative errno on failure).
    ///
    /// # Safety
    /// The system call's contract for its arguments.
    #[inline(always)]
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    unsafe fn sys3(nr: libc::c_long, a: usize, b: usize, c: usize) -> isize {
        let ret: isize;
        // SAFETY: the Linux x86-64 system call convention; rcx and r11
        // are clobbered by the instruction; memory the arguments point to
        // is the caller's contract.
        unsafe {
            std::arch::asm!("syscall", inlateout("rax") nr as isize => ret, in("rdi") a, in("rsi") b, in("rdx") c,
                lateout("rcx") _, lateout("r11") _, options(nostack));
        }
        ret
    }

    /// As above, AArch64.
    #[inline(always)]
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    unsafe fn sys3(nr: libc::c_long, a: usize, b: usize, c: usize) -> isize {
        let ret: isize;
        // SAFETY: the Linux AArch64 system call convention (x8 the number,
        // x0-x2 the arguments, x0 the result).
        unsafe {
            std::arch::asm!("svc 0", in("x8") nr, inlateout("x0") a as isize => ret, in("x1") b, in("x2") c, options(nostack));
        }
        ret
    }

    /// Elsewhere: libc's syscall(2), which is not a cancellation point either.
    #[inline(always)]
    #[cfg(all(not(any(target_arch = "x86_64", target_arch = "aarch64")), not(miri)))]
    unsafe fn sys3(nr: libc::c_long, a: usize, b: usize, c: usize) -> isize {
        // SAFETY: the system call's contract.
        let r = unsafe { libc::syscall(nr, a, b, c) } as isize;
        if r < 0 {
            -(Errno::last_raw() as isize)
        } else {
            r
        }
    }

    /// Under Miri (unit tests only), which runs no system call by number,
    /// the calls above go through libc's functions: their result as the
    /// kernel gives it (negative errno on failure).
    #[cfg(miri)]
    fn miri_ret(r: isize) -> isize {
        if r < 0 {
            -(Errno::last_raw() as isize)
        } else {
            r
        }
    }

    /// A system call's return as a result: the success test in line at
    /// each call, the errno's decoding (nix's table) out of line.
    #[inline(always)]
    fn result(r: isize) -> Result<usize, Errno> {
        if r < 0 {
            Err(failed(r))
        } else {
            Ok(r as usize)
        }
    }

    // (`extern "C"`: a call that cannot unwind, so that a caller's panic
    // boundary needs no landing pad for it; nothing in it panics: the
    // thread-local errno_from_raw may write is a const Cell without a
    // destructor, usable even while the thread ends)
    #[cold]
    #[inline(never)]
    extern "C" fn failed(r: isize) -> Errno {
        super::super::errno_from_raw((-r) as c_int)
    }

    /// write(2).
    ///
    /// # Safety
    /// Any user address inside `b` (ucma commands) must be valid for the
    /// kernel's use during the call.
    #[inline]
    pub unsafe fn write(fd: c_int, b: &[u8]) -> Result<usize, Errno> {
        // SAFETY: b is readable for its length; the caller vouches for addresses in it.
        #[cfg(not(miri))]
        let r = unsafe { sys3(libc::SYS_write, fd as usize, b.as_ptr() as usize, b.len()) };
        // SAFETY: as above.
        #[cfg(miri)]
        let r = miri_ret(unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) });
        result(r)
    }

    /// read(2).
    #[inline]
    pub fn read(fd: c_int, b: &mut [u8]) -> Result<usize, Errno> {
        // SAFETY: b is writable for its length.
        #[cfg(not(miri))]
        let r = unsafe { sys3(libc::SYS_read, fd as usize, b.as_mut_ptr() as usize, b.len()) };
        // SAFETY: as above.
        #[cfg(miri)]
        let r = miri_ret(unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) });
        result(r)
    }

    /// poll(2) (ppoll on architectures without poll).
    #[inline]
    pub fn poll(fds: &mut [libc::pollfd], timeout_ms: c_int) -> Result<usize, Errno> {
        #[cfg(miri)]
        // SAFETY: fds is a valid array of its length.
        let r = miri_ret(unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) } as isize);
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        // SAFETY: fds is a valid array of its length.
        let r = unsafe { sys3(libc::SYS_poll, fds.as_mut_ptr() as usize, fds.len(), timeout_ms as isize as usize) };
        #[cfg(all(not(target_arch = "x86_64"), not(miri)))]
        let r = {
            let ts = libc::timespec { tv_sec: (timeout_ms / 1000) as _, tv_nsec: ((timeout_ms % 1000) * 1_000_000) as _ };
            let tsp = if timeout_ms < 0 { 0 } else { &ts as *const libc::timespec as usize };
            // SAFETY: fds valid; ts lives across the call; no signal mask.
            unsafe { sys4(libc::SYS_ppoll, fds.as_mut_ptr() as usize, fds.len(), tsp, 0) }
        };
        result(r)
    }

    #[cfg(all(not(target_arch = "x86_64"), not(miri)))]
    #[inline(always)]
    unsafe fn sys4(nr: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
        // SAFETY: the system call's contract; syscall(2) is not a cancellation point.
        let r = unsafe { libc::syscall(nr, a, b, c, d) } as isize;
        if r < 0 {
            -(Errno::last_raw() as isize)
        } else {
            r
        }
    }

    /// Sleeps `ms` milliseconds (poll(2) of no descriptors: not a
    /// cancellation point).
    #[inline]
    pub fn pause_ms(ms: c_int) {
        let _ = poll(&mut [], ms);
    }

    /// Whether `fd` is readable now (poll(2) with no timeout).
    #[inline]
    pub fn readable(fd: c_int) -> bool {
        let mut p = [libc::pollfd { fd, events: libc::POLLIN, revents: 0 }];
        matches!(poll(&mut p, 0), Ok(1)) && p[0].revents & libc::POLLIN != 0
    }

    /// close(2).
    #[inline]
    pub fn close(fd: c_int) -> Result<(), Errno> {
        // SAFETY: no memory arguments; the caller owns fd.
        #[cfg(not(miri))]
        let r = unsafe { sys3(libc::SYS_close, fd as usize, 0, 0) };
        // SAFETY: as above.
        #[cfg(miri)]
        let r = miri_ret(unsafe { libc::close(fd) } as isize);
        result(r).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    static DROPPED: AtomicBool = AtomicBool::new(false);

    struct Marker;
    impl Drop for Marker {
        fn drop(&mut self) {
            DROPPED.store(true, Ordering::SeqCst);
        }
    }

    /// What an export does: the work under a guard, a wait, then the hand-on.
    fn body(fd: c_int) -> Result<(), Errno> {
        let _g = NoCancel::new();
        let _m = Marker;
        let mut p = [libc::pollfd { fd, events: libc::POLLIN, revents: 0 }];
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wait_poll(&mut p, -1))).expect("no panic");
        assert_eq!(r, Err(Errno::ECANCELED));
        // A second wait of the same call does not block.
        assert_eq!(wait_poll(&mut p, -1), Err(Errno::ECANCELED));
        r.map(|_| ())
    }

    extern "C-unwind" fn thread_main(arg: *mut libc::c_void) -> *mut libc::c_void {
        let r = body(arg as usize as c_int);
        if caught() {
            // SAFETY: a plain frame: `r` holds no destructor.
            unsafe { resume() }
        }
        let _ = r;
        std::ptr::null_mut()
    }

    /// Starts `main(fd)` on a raw pthread (a forced unwind must be able to
    /// leave its start routine, which std's threads do not allow), cancels
    /// it after `ms` milliseconds and joins it: the thread's value.
    fn cancel_after(main: extern "C-unwind" fn(*mut libc::c_void) -> *mut libc::c_void, fd: c_int, ms: u64) -> *mut libc::c_void {
        let mut t: libc::pthread_t = 0;
        // SAFETY: `main` has the start routine's ABI, unwinding aside
        // (which glibc's thread start lets pass), and takes its argument
        // as a number.
        let f: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void = unsafe { std::mem::transmute(main) };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::pthread_create(&mut t, std::ptr::null(), f, fd as usize as *mut libc::c_void) }, 0);
        std::thread::sleep(std::time::Duration::from_millis(ms));
        let mut ret: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: t is a joinable thread of ours.
        unsafe {
            assert_eq!(libc::pthread_cancel(t), 0);
            assert_eq!(libc::pthread_join(t, &mut ret), 0);
        }
        ret
    }

    /// A thread cancelled in a wait ends with PTHREAD_CANCELED after the
    /// Rust frames returned normally (their destructors ran), and the
    /// process goes on; twice in a row.
    #[test]
    fn a_cancelled_wait_ends_the_thread_as_c_expects() {
        for _ in 0..2 {
            DROPPED.store(false, Ordering::SeqCst);
            let mut p = [0; 2];
            // SAFETY: a pipe into a local array.
            assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
            let ret = cancel_after(thread_main, p[0], 100);
            assert_eq!(ret as isize, -1, "PTHREAD_CANCELED");
            assert!(DROPPED.load(Ordering::SeqCst), "the Rust frames did not return");
            // SAFETY: the pipe's ends are ours.
            unsafe {
                libc::close(p[0]);
                libc::close(p[1]);
            }
        }
        // SAFETY: read-only.
        assert_eq!(unsafe { rdmacm_rs_cancel_inflight.load(Ordering::SeqCst) }, 0);
    }

    static CLEANED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    unsafe extern "C" fn count_cleanup(arg: *mut libc::c_void) {
        CLEANED.fetch_add(arg as usize, Ordering::SeqCst);
    }

    /// A plain frame around `write_unwinding` (as `rdma_get_cm_event`'s):
    /// a write to a full pipe blocks until the thread is cancelled.
    extern "C-unwind" fn unwinding_main(arg: *mut libc::c_void) -> *mut libc::c_void {
        let fd = arg as usize as c_int;
        let b = [0u8; 4096];
        loop {
            // SAFETY: this frame holds nothing with a destructor and no
            // catch_unwind; count_cleanup may run once.
            if unsafe { write_unwinding(fd, &b, count_cleanup, 7 as *mut libc::c_void) }.is_err() {
                return std::ptr::null_mut();
            }
        }
    }

    /// A thread cancelled in `write_unwinding` ends with PTHREAD_CANCELED,
    /// the cleanup run once on the way out, and nothing caught for an
    /// export to hand on; without a cancellation the cleanup never runs.
    #[test]
    fn a_cancelled_plain_wait_runs_its_cleanup_and_ends_the_thread() {
        CLEANED.store(0, Ordering::SeqCst);
        let mut p = [0; 2];
        // SAFETY: a pipe into a local array.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        // SAFETY: plain bytes to a pipe with room.
        assert_eq!(unsafe { write_unwinding(p[1], b"ab", count_cleanup, 1 as *mut libc::c_void) }, Ok(2));
        assert_eq!(CLEANED.load(Ordering::SeqCst), 0);
        let ret = cancel_after(unwinding_main, p[1], 200);
        assert_eq!(ret as isize, -1, "PTHREAD_CANCELED");
        assert_eq!(CLEANED.load(Ordering::SeqCst), 7, "the cleanup ran once");
        assert!(!caught());
        // A failure comes back with the call's own errno, no cleanup.
        // SAFETY: the pipe's ends are ours.
        unsafe {
            libc::close(p[0]);
            libc::close(p[1]);
        }
        // SAFETY: plain bytes.
        assert_eq!(unsafe { write_unwinding(p[1], b"d", count_cleanup, 1 as *mut libc::c_void) }, Err(Errno::EBADF));
        assert_eq!(CLEANED.load(Ordering::SeqCst), 7);
    }

    /// Without a cancellation the wait is an ordinary poll, and the raw
    /// calls move bytes.
    #[test]
    fn waits_and_raw_calls_work() {
        let mut p = [0; 2];
        // SAFETY: a pipe into a local array.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        // SAFETY: plain bytes.
        assert_eq!(unsafe { wait_write(p[1], b"ab") }, Ok(2));
        let mut f = [libc::pollfd { fd: p[0], events: libc::POLLIN, revents: 0 }];
        assert_eq!(wait_poll(&mut f, 1000), Ok(1));
        assert_eq!(raw::poll(&mut f, 0), Ok(1));
        let mut b = [0u8; 4];
        assert_eq!(raw::read(p[0], &mut b), Ok(2));
        // SAFETY: plain bytes.
        assert_eq!(unsafe { raw::write(p[1], b"c") }, Ok(1));
        assert_eq!(raw::read(p[0], &mut b), Ok(1));
        assert_eq!(raw::poll(&mut f, 0), Ok(0));
        assert!(raw::close(p[0]).is_ok());
        assert!(raw::close(p[1]).is_ok());
        assert_eq!(raw::close(p[1]), Err(Errno::EBADF));
        // A wait's failure comes back with the call's own errno.
        // SAFETY: plain bytes.
        assert_eq!(unsafe { wait_write(p[1], b"d") }, Err(Errno::EBADF));
        assert!(!caught());
    }

    const PTHREAD_CANCEL_ENABLE: c_int = 0;
    const PTHREAD_CANCEL_DISABLE: c_int = 1;
    extern "C" {
        fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int;
    }

    /// The thread's cancel state, read without changing it.
    fn cancel_state() -> c_int {
        let mut old = 0;
        // SAFETY: sets the state it read back at once (no cancellation
        // point; a valid state and a pointer to a local).
        unsafe {
            pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old);
            let mut x = 0;
            pthread_setcancelstate(old, &mut x);
        }
        old
    }

    #[test]
    fn nested_guards_keep_cancellation_off_until_the_outer_one_ends() {
        // (a thread of its own: the test harness's state is its own)
        std::thread::spawn(|| {
            assert_eq!(cancel_state(), PTHREAD_CANCEL_ENABLE);
            {
                let _outer = NoCancel::new();
                assert_eq!(cancel_state(), PTHREAD_CANCEL_DISABLE);
                for _ in 0..2 {
                    let _inner = NoCancel::new();
                    assert_eq!(cancel_state(), PTHREAD_CANCEL_DISABLE);
                }
                assert_eq!(cancel_state(), PTHREAD_CANCEL_DISABLE, "still off after an inner guard ends");
                // A wait inside opens its window and closes it again; a
                // guard after it is nested as before.
                let mut p = [0; 2];
                // SAFETY: a pipe into a local array.
                assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
                let mut f = [libc::pollfd { fd: p[0], events: libc::POLLIN, revents: 0 }];
                assert_eq!(wait_poll(&mut f, 0), Ok(0));
                assert_eq!(cancel_state(), PTHREAD_CANCEL_DISABLE, "off again after the wait");
                {
                    let _inner = NoCancel::new();
                    assert_eq!(cancel_state(), PTHREAD_CANCEL_DISABLE);
                }
                assert_eq!(cancel_state(), PTHREAD_CANCEL_DISABLE);
                assert!(raw::close(p[0]).is_ok());
                assert!(raw::close(p[1]).is_ok());
            }
            assert_eq!(cancel_state(), PTHREAD_CANCEL_ENABLE, "the caller's state back");
            // A caller that had it disabled keeps it so.
            let mut old = 0;
            // SAFETY: a valid state and a pointer to a local.
            unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) };
            {
                let _outer = NoCancel::new();
                let _inner = NoCancel::new();
            }
            assert_eq!(cancel_state(), PTHREAD_CANCEL_DISABLE);
        })
        .join()
        .unwrap();
    }

    static IN_HANDLER: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

    extern "C" fn handler_with_guard(_: c_int) {
        // What library code called from a signal handler sees: the guard
        // disables cancellation even inside a wait's open window.
        let _g = NoCancel::new();
        // (the first signal that lands is the one inside the wait)
        let _ = IN_HANDLER.compare_exchange(-1, cancel_state(), Ordering::SeqCst, Ordering::SeqCst);
    }

    #[test]
    fn a_guard_in_a_signal_handler_during_a_wait_disables_cancellation() {
        std::thread::spawn(|| {
            // SAFETY: installs a handler (no SA_RESTART: the wait ends
            // with EINTR) for SIGUSR2, which nothing else here uses.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = handler_with_guard as extern "C" fn(c_int) as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
            }
            let me = {
                // SAFETY: no arguments.
                unsafe { libc::pthread_self() }
            };
            let kicker = std::thread::spawn(move || {
                while IN_HANDLER.load(Ordering::SeqCst) == -1 {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    // SAFETY: the waiting thread joins this one before it
                    // ends, so it is alive for every signal sent here.
                    unsafe { libc::pthread_kill(me, libc::SIGUSR2) };
                }
            });
            let mut p = [0; 2];
            // SAFETY: a pipe into a local array.
            assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
            {
                let _outer = NoCancel::new();
                let mut f = [libc::pollfd { fd: p[0], events: libc::POLLIN, revents: 0 }];
                while IN_HANDLER.load(Ordering::SeqCst) == -1 {
                    let _ = wait_poll(&mut f, 100);
                }
                assert_eq!(cancel_state(), PTHREAD_CANCEL_DISABLE);
            }
            kicker.join().unwrap();
            assert!(raw::close(p[0]).is_ok());
            assert!(raw::close(p[1]).is_ok());
            assert_eq!(cancel_state(), PTHREAD_CANCEL_ENABLE);
        })
        .join()
        .unwrap();
        assert_eq!(IN_HANDLER.load(Ordering::SeqCst), PTHREAD_CANCEL_DISABLE, "the handler's guard ran with cancellation enabled");
    }
}
