// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The checking variants that _FORTIFY_SOURCE makes of read, recv,
//! recvfrom and poll.

use super::data::{read, recv, recvfrom};
use super::poll::poll;
use libc::{c_int, c_void, nfds_t, pollfd, size_t, sockaddr, socklen_t, ssize_t};

// --- the checking variants that _FORTIFY_SOURCE makes of read, recv,
// recvfrom and poll: libc's own would reach the kernel directly, past
// this library, with the placeholder ---

extern "C" {
    fn __chk_fail() -> !;
}

#[no_mangle]
pub unsafe extern "C-unwind" fn __read_chk(fd: c_int, buf: *mut c_void, len: size_t, room: size_t) -> ssize_t {
    if len > room {
        // SAFETY: ends the process as libc's own check does.
        unsafe { __chk_fail() }
    }
    // SAFETY: read's contract: the program's buffer holds `room` >= `len`
    // bytes (checked above).
    unsafe { read(fd, buf, len) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn __recv_chk(fd: c_int, buf: *mut c_void, len: size_t, room: size_t, flags: c_int) -> ssize_t {
    if len > room {
        // SAFETY: as in __read_chk.
        unsafe { __chk_fail() }
    }
    // SAFETY: as in __read_chk, recv's contract.
    unsafe { recv(fd, buf, len, flags) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn __recvfrom_chk(fd: c_int, buf: *mut c_void, len: size_t, room: size_t, flags: c_int, addr: *mut sockaddr, alen: *mut socklen_t) -> ssize_t {
    if len > room {
        // SAFETY: as in __read_chk.
        unsafe { __chk_fail() }
    }
    // SAFETY: as in __read_chk, recvfrom's contract.
    unsafe { recvfrom(fd, buf, len, flags, addr, alen) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn __poll_chk(fds: *mut pollfd, nfds: nfds_t, timeout: c_int, room: size_t) -> c_int {
    if (room / std::mem::size_of::<pollfd>()) < nfds as usize {
        // SAFETY: as in __read_chk.
        unsafe { __chk_fail() }
    }
    // SAFETY: poll's contract: the program's array holds `room` bytes, room
    // for `nfds` entries (checked above).
    unsafe { poll(fds, nfds, timeout) }
}
