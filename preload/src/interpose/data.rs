// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The data calls (read, write, send, recv and their vector and message
//! forms) and sendfile: a fork-mode socket becomes an rsocket at its first
//! one.

use super::fork::fork_switch;
use super::stand_in::{route, To};
use crate::boundary;
use crate::calls::{inside, inside_nocancel, keep_errno, quiet, real, rs};
use crate::fdmap::{self, Entry, Fork, Kind};
use crate::held::{self, Buf};
use crate::split;
use libc::{c_int, c_void, iovec, msghdr, off_t, size_t, sockaddr, socklen_t, ssize_t};

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

// --- data calls ---

macro_rules! data_call {
    ($name:ident, $rs:ident, ($($a:ident : $t:ty),*) -> $r:ty) => {
        #[no_mangle]
        pub unsafe extern "C-unwind" fn $name(fd: c_int, $($a: $t),*) -> $r {
            let to = match fdmap::get(fd) {
                None => To::Real(fd),
                Some(e) => boundary(To::Failed, || route_data(fd, e, stringify!($name).starts_with("re"))),
            };
            match to {
                // SAFETY: the rsocket call has the contract of the libc call
                // the program made, whose arguments it gets untouched; `r` is
                // the rsocket `fd` stands for.
                To::Rs(r) => inside(|| unsafe { rs::$rs(r, $($a),*) }),
                // SAFETY: libc's own call with the program's arguments, on
                // `fd` or on the socket it stands for.
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
        // SAFETY: lseek takes no pointers.
        unsafe { libc::lseek(inp, 0, libc::SEEK_CUR) }
    } else {
        // SAFETY: a non-null `off` is the program's off_t (sendfile's contract).
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
            // SAFETY: lseek takes no pointers.
            keep_errno(|| unsafe { libc::lseek(inp, pos + sent as off_t, libc::SEEK_SET) });
        } else {
            // SAFETY: a non-null `off` is the program's off_t (sendfile's contract).
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
    // SAFETY: sendfile_common has sendfile's contract, which the program keeps.
    unsafe { sendfile_common(false, out, inp, off, count) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn sendfile64(out: c_int, inp: c_int, off: *mut off_t, count: size_t) -> ssize_t {
    // SAFETY: sendfile_common has sendfile64's contract, which the program keeps.
    unsafe { sendfile_common(true, out, inp, off, count) }
}
