// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Where a call on a program descriptor goes (the table lookup), and a
//! stand-in's life: the placeholder that shows it to the program, its
//! adoption in the table, its closing.

use super::fork::{inherited, watch_fork};
use super::setup::trace;
use crate::boundary;
use crate::calls::{close_nocancel, inside, keep_errno, real, rs, set_errno};
use crate::fdmap::{self, Entry, Fork, Kind};
use crate::held::{self, Reserved};
use libc::{c_int, c_long};

/// Where a call on program descriptor `fd` goes.
#[derive(Clone, Copy)]
pub(super) enum To {
    /// to the rsocket API, on this rsocket
    Rs(c_int),
    /// to libc, on this descriptor
    Real(c_int),
    /// nowhere: fail with -1 (errno is set)
    Failed,
}

pub(super) fn route(fd: c_int) -> To {
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
pub(super) fn reserve_placeholder(cloexec: bool) -> Option<Reserved> {
    let idx = placeholder(cloexec);
    (idx >= 0).then(|| held::reserve(idx))
}

/// Records `idx` as standing for `inner` (one more holder of `inner`).
pub(super) fn adopt(idx: c_int, kind: Kind, fork: Fork, inner: c_int, domain: c_int, dgram: bool) {
    watch_fork();
    fdmap::set(idx, Entry { kind, fork, inner, domain, dgram });
    fdmap::hold(inner);
}

/// After the call that made `r` for a reserved placeholder: the
/// placeholder stands for `r` from now on (its number is returned), or,
/// when the call failed, it is closed and -1 returned with the call's errno.
pub(super) fn settle(res: Reserved, r: c_int, kind: Kind, fork: Fork, domain: c_int) -> c_int {
    let idx = held::unreserve(res);
    if r < 0 {
        keep_errno(|| close_nocancel(idx));
        return -1;
    }
    adopt(idx, kind, fork, r, domain, false);
    idx
}

/// Closes program descriptor `fd`, a stand-in or not.  Run `quiet`: the
/// table entry, the stand-in and what it stands for go together.
pub(super) fn close_impl(fd: c_int) -> c_int {
    let Some(e) = fdmap::clear(fd) else {
        // SAFETY: libc's close takes no pointers.
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
