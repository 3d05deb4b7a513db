// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rsockets: the socket-like API over RDMA, and repoll.

use super::{entry, not_implemented};
use crate::symver;
use libc::{epoll_event, fd_set, iovec, msghdr, nfds_t, off_t, pollfd, sockaddr, socklen_t, timeval};
use std::ffi::{c_int, c_long, c_void};

/// Creates an rsocket.
#[no_mangle]
pub unsafe extern "C" fn rsocket(domain: c_int, type_: c_int, protocol: c_int) -> c_int {
    entry(|| not_implemented("rsocket"))
}
symver!(rsocket, "RDMACM_1.0");

/// Binds an rsocket.
#[no_mangle]
pub unsafe extern "C" fn rbind(socket: c_int, addr: *const sockaddr, addrlen: socklen_t) -> c_int {
    entry(|| not_implemented("rbind"))
}
symver!(rbind, "RDMACM_1.0");

/// Listens on an rsocket.
#[no_mangle]
pub unsafe extern "C" fn rlisten(socket: c_int, backlog: c_int) -> c_int {
    entry(|| not_implemented("rlisten"))
}
symver!(rlisten, "RDMACM_1.0");

/// Accepts on an rsocket.
#[no_mangle]
pub unsafe extern "C" fn raccept(socket: c_int, addr: *mut sockaddr, addrlen: *mut socklen_t) -> c_int {
    entry(|| not_implemented("raccept"))
}
symver!(raccept, "RDMACM_1.0");

/// Connects an rsocket.
#[no_mangle]
pub unsafe extern "C" fn rconnect(socket: c_int, addr: *const sockaddr, addrlen: socklen_t) -> c_int {
    entry(|| not_implemented("rconnect"))
}
symver!(rconnect, "RDMACM_1.0");

/// Shuts an rsocket down.
#[no_mangle]
pub unsafe extern "C" fn rshutdown(socket: c_int, how: c_int) -> c_int {
    entry(|| not_implemented("rshutdown"))
}
symver!(rshutdown, "RDMACM_1.0");

/// Closes an rsocket.
#[no_mangle]
pub unsafe extern "C" fn rclose(socket: c_int) -> c_int {
    entry(|| not_implemented("rclose"))
}
symver!(rclose, "RDMACM_1.0");

/// Receives from an rsocket.
#[no_mangle]
pub unsafe extern "C" fn rrecv(socket: c_int, buf: *mut c_void, len: usize, flags: c_int) -> isize {
    entry(|| not_implemented("rrecv"))
}
symver!(rrecv, "RDMACM_1.0");

/// Receives from an rsocket with the source address.
#[no_mangle]
pub unsafe extern "C" fn rrecvfrom(socket: c_int, buf: *mut c_void, len: usize, flags: c_int, src_addr: *mut sockaddr, addrlen: *mut socklen_t) -> isize {
    entry(|| not_implemented("rrecvfrom"))
}
symver!(rrecvfrom, "RDMACM_1.0");

/// Receives a message from an rsocket.
#[no_mangle]
pub unsafe extern "C" fn rrecvmsg(socket: c_int, msg: *mut msghdr, flags: c_int) -> isize {
    entry(|| not_implemented("rrecvmsg"))
}
symver!(rrecvmsg, "RDMACM_1.0");

/// Sends on an rsocket.
#[no_mangle]
pub unsafe extern "C" fn rsend(socket: c_int, buf: *const c_void, len: usize, flags: c_int) -> isize {
    entry(|| not_implemented("rsend"))
}
symver!(rsend, "RDMACM_1.0");

/// Sends on an rsocket to an address.
#[no_mangle]
pub unsafe extern "C" fn rsendto(socket: c_int, buf: *const c_void, len: usize, flags: c_int, dest_addr: *const sockaddr, addrlen: socklen_t) -> isize {
    entry(|| not_implemented("rsendto"))
}
symver!(rsendto, "RDMACM_1.0");

/// Sends a message on an rsocket.
#[no_mangle]
pub unsafe extern "C" fn rsendmsg(socket: c_int, msg: *const msghdr, flags: c_int) -> isize {
    entry(|| not_implemented("rsendmsg"))
}
symver!(rsendmsg, "RDMACM_1.0");

/// Reads from an rsocket.
#[no_mangle]
pub unsafe extern "C" fn rread(socket: c_int, buf: *mut c_void, count: usize) -> isize {
    entry(|| not_implemented("rread"))
}
symver!(rread, "RDMACM_1.0");

/// Reads into a vector from an rsocket.
#[no_mangle]
pub unsafe extern "C" fn rreadv(socket: c_int, iov: *const iovec, iovcnt: c_int) -> isize {
    entry(|| not_implemented("rreadv"))
}
symver!(rreadv, "RDMACM_1.0");

/// Writes to an rsocket.
#[no_mangle]
pub unsafe extern "C" fn rwrite(socket: c_int, buf: *const c_void, count: usize) -> isize {
    entry(|| not_implemented("rwrite"))
}
symver!(rwrite, "RDMACM_1.0");

/// Writes a vector to an rsocket.
#[no_mangle]
pub unsafe extern "C" fn rwritev(socket: c_int, iov: *const iovec, iovcnt: c_int) -> isize {
    entry(|| not_implemented("rwritev"))
}
symver!(rwritev, "RDMACM_1.0");

/// Polls rsockets.
#[no_mangle]
pub unsafe extern "C" fn rpoll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    entry(|| not_implemented("rpoll"))
}
symver!(rpoll, "RDMACM_1.0");

/// Selects on rsockets.
#[no_mangle]
pub unsafe extern "C" fn rselect(nfds: c_int, readfds: *mut fd_set, writefds: *mut fd_set, exceptfds: *mut fd_set, timeout: *mut timeval) -> c_int {
    entry(|| not_implemented("rselect"))
}
symver!(rselect, "RDMACM_1.0");

/// Returns an rsocket's peer address.
#[no_mangle]
pub unsafe extern "C" fn rgetpeername(socket: c_int, addr: *mut sockaddr, addrlen: *mut socklen_t) -> c_int {
    entry(|| not_implemented("rgetpeername"))
}
symver!(rgetpeername, "RDMACM_1.0");

/// Returns an rsocket's local address.
#[no_mangle]
pub unsafe extern "C" fn rgetsockname(socket: c_int, addr: *mut sockaddr, addrlen: *mut socklen_t) -> c_int {
    entry(|| not_implemented("rgetsockname"))
}
symver!(rgetsockname, "RDMACM_1.0");

/// Sets an rsocket option.
#[no_mangle]
pub unsafe extern "C" fn rsetsockopt(socket: c_int, level: c_int, optname: c_int, optval: *const c_void, optlen: socklen_t) -> c_int {
    entry(|| not_implemented("rsetsockopt"))
}
symver!(rsetsockopt, "RDMACM_1.0");

/// Reads an rsocket option.
#[no_mangle]
pub unsafe extern "C" fn rgetsockopt(socket: c_int, level: c_int, optname: c_int, optval: *mut c_void, optlen: *mut socklen_t) -> c_int {
    entry(|| not_implemented("rgetsockopt"))
}
symver!(rgetsockopt, "RDMACM_1.0");

/// fcntl for rsockets (variadic in C: the optional third argument is read as a long).
#[no_mangle]
pub unsafe extern "C" fn rfcntl(socket: c_int, cmd: c_int, arg: c_long) -> c_int {
    entry(|| not_implemented("rfcntl"))
}
symver!(rfcntl, "RDMACM_1.0");

/// Registers a buffer for remote direct writes.
#[no_mangle]
pub unsafe extern "C" fn riomap(socket: c_int, buf: *mut c_void, len: usize, prot: c_int, flags: c_int, offset: off_t) -> off_t {
    entry(|| not_implemented("riomap"))
}
symver!(riomap, "RDMACM_1.0");

/// Removes a mapping made by riomap.
#[no_mangle]
pub unsafe extern "C" fn riounmap(socket: c_int, buf: *mut c_void, len: usize) -> c_int {
    entry(|| not_implemented("riounmap"))
}
symver!(riounmap, "RDMACM_1.0");

/// Writes directly into a peer's riomap'ed buffer.
#[no_mangle]
pub unsafe extern "C" fn riowrite(socket: c_int, buf: *const c_void, count: usize, offset: off_t, flags: c_int) -> usize {
    entry(|| not_implemented("riowrite"))
}
symver!(riowrite, "RDMACM_1.0");

/// Creates an epoll-like set for rsockets.
#[no_mangle]
pub unsafe extern "C" fn repoll_create(size: c_int) -> c_int {
    entry(|| not_implemented("repoll_create"))
}
symver!(repoll_create, "RDMACM_1.5");

/// Controls an repoll set.
#[no_mangle]
pub unsafe extern "C" fn repoll_ctl(epfd: c_int, op: c_int, fd: c_int, event: *mut epoll_event) -> c_int {
    entry(|| not_implemented("repoll_ctl"))
}
symver!(repoll_ctl, "RDMACM_1.5");

/// Waits on an repoll set.
#[no_mangle]
pub unsafe extern "C" fn repoll_wait(epfd: c_int, events: *mut epoll_event, maxevents: c_int, timeout: c_int) -> c_int {
    entry(|| not_implemented("repoll_wait"))
}
symver!(repoll_wait, "RDMACM_1.5");
