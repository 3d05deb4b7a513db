// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The socket options a new rsocket takes: the sizes the configuration
//! names, and those of the socket it replaces (or that replaces it).

use super::setup::config;
use crate::calls::{inside, keep_errno, quiet, real, rs};
use libc::{c_int, c_ulong, c_void, socklen_t};

/// The sizes from RS_SQ_SIZE, RS_RQ_SIZE, RS_INLINE; failures keep the
/// library's defaults.
pub(super) fn tune(rfd: c_int) {
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

/// Copies O_NONBLOCK, SO_REUSEADDR and TCP_NODELAY from one socket to
/// another (rsocket to real socket or back).  -1 with errno on failure.
pub(super) fn copy_options(from_rs: bool, from: c_int, to: c_int) -> c_int {
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
