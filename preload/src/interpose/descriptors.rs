// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The calls on any program descriptor, socket or not: close, dup, fcntl,
//! ioctl and fstat.

use super::fork::fork_switch;
use super::setup::trace;
use super::stand_in::{adopt, close_impl};
use crate::boundary;
use crate::calls::{close_nocancel, inside_nocancel, keep_errno, quiet, real, rs, set_errno, testcancel};
use crate::fdmap::{self, Entry, Fork, Kind};
use libc::{c_int, c_ulong};

// --- close, dup, fcntl ---


#[no_mangle]
pub unsafe extern "C-unwind" fn close(fd: c_int) -> c_int {
    if fdmap::get(fd).is_none() {
        // SAFETY: libc's close takes no pointers.
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
    // SAFETY: libc's dup takes no pointers.
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
    // SAFETY: libc's dup2 and dup3 take no pointers.
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
    // SAFETY: dup2_common takes descriptor numbers and flags, no pointers.
    unsafe { dup2_common(old, new, None) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    // SAFETY: as in dup2.
    unsafe { dup2_common(old, new, Some(flags)) }
}

#[inline(always)]
unsafe fn fcntl_common(wide: bool, fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    let e = fdmap::get(fd);
    // libc's fcntl, or rfcntl, which takes its argument as fcntl does, with
    // the program's arguments.  (F_SETLKW is a cancellation point.)
    match (e, cmd) {
        // descriptor flags and duplicates belong to the program's descriptor
        (Some(_), libc::F_DUPFD | libc::F_DUPFD_CLOEXEC) => {
            let e = before_dup(fd);
            // SAFETY: F_DUPFD's argument is a number, no pointer.
            let new = unsafe { real::fcntl(wide, fd, cmd, arg) };
            boundary(-1, || dup_done(e, new))
        }
        // SAFETY: the descriptor-flag commands take a number, no pointer.
        (Some(_), libc::F_GETFD | libc::F_SETFD) => unsafe { real::fcntl(wide, fd, cmd, arg) },
        // SAFETY: rfcntl has fcntl's contract for the program's command and
        // argument, passed on untouched; `inner` is the rsocket `fd` stands for.
        (Some(Entry { kind: Kind::Rsocket, inner, .. }), _) => inside_nocancel(|| unsafe { rs::rfcntl(inner, cmd, arg) }),
        // SAFETY: libc's fcntl with the program's command and argument, on
        // the socket `fd` stands for.
        (Some(Entry { kind: Kind::Real, inner, .. }), _) => unsafe { real::fcntl(wide, inner, cmd, arg) },
        // SAFETY: libc's fcntl with the program's arguments.
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
    // SAFETY: fcntl_common has fcntl's contract, which the program keeps.
    unsafe { fcntl_common(false, fd, cmd, arg) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: fcntl_common has fcntl64's contract, which the program keeps.
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
        // SAFETY: libc's ioctl with the program's arguments, untouched.
        _ => unsafe { real::ioctl(fd, req, arg) },
    }
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
