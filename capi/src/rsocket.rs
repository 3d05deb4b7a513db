// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rsockets: the socket-like API over RDMA, and repoll.

use super::{entry, nonnull, nonnull_const};
use rdmacm::internal::rsocket as rs;
use nix::errno::Errno;
use crate::symver;
use libc::{epoll_event, fd_set, iovec, msghdr, nfds_t, off_t, pollfd, sockaddr, socklen_t, timeval};
use std::ffi::{c_int, c_long, c_void};

/// Creates an rsocket.
///
/// # Safety
/// No pointer arguments; always safe to call.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsocket(domain: c_int, type_: c_int, protocol: c_int) -> c_int {
    // Out of descriptors: ENOMEM, as upstream reports it (its id allocation
    // fails as a whole).
    entry(|| rs::create(domain, type_, protocol).map_err(super::fd_exhaustion_as_enomem))
}
symver!(rsocket, "RDMACM_1.0");

/// Binds an rsocket.
///
/// # Safety
/// `addr` must point to a readable socket address of its family.
#[no_mangle]
pub unsafe extern "C-unwind" fn rbind(socket: c_int, addr: *const sockaddr, addrlen: socklen_t) -> c_int {
    entry(|| {
        if let Some(d) = rs::dgram::lookup(socket) {
            // SAFETY: addr is NULL or a socket address of its family (caller's contract).
            let a = unsafe { sockaddr_bytes(addr)? };
            rs::dgram::bind(&d, &a[..a.len().min(addrlen as usize)])?;
            return Ok(0);
        }
        let h = rs::lookup(socket)?;
        let _ = addrlen;
        // SAFETY: addr is NULL or a socket address of its family (caller's contract).
        let a = unsafe { sockaddr_bytes(addr)? };
        rs::lock(&h)?.bind(a)?;
        Ok(0)
    })
}
symver!(rbind, "RDMACM_1.0");

/// Listens on an rsocket.
///
/// # Safety
/// No pointer arguments; always safe to call.
#[no_mangle]
pub unsafe extern "C-unwind" fn rlisten(socket: c_int, backlog: c_int) -> c_int {
    entry(|| {
        dgram_unsupported(socket)?;
        let h = rs::lookup(socket)?;
        rs::listen(&h, backlog)?;
        Ok(0)
    })
}
symver!(rlisten, "RDMACM_1.0");

/// Accepts on an rsocket.
///
/// # Safety
/// `addr` and `addrlen` must both be NULL, or `addrlen` writable and `addr` writable for `*addrlen` bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn raccept(socket: c_int, addr: *mut sockaddr, addrlen: *mut socklen_t) -> c_int {
    entry(|| {
        // A datagram rsocket is never listening: EBADF, as upstream.
        if rs::dgram::lookup(socket).is_some() {
            return Err(Errno::EBADF);
        }
        let h = rs::lookup(socket)?;
        let fd = rs::accept(&h)?;
        if !addr.is_null() && !addrlen.is_null() {
            let n = rs::lookup(fd)?;
            let a = rs::lock(&n)?.peer_addr()?;
            // SAFETY: addr/addrlen are the caller's buffer and its size.
            unsafe { copy_addr(&a, addr, addrlen) };
        }
        Ok(fd)
    })
}
symver!(raccept, "RDMACM_1.0");

/// Connects an rsocket.
///
/// # Safety
/// `addr` must point to a readable socket address of its family.
#[no_mangle]
pub unsafe extern "C-unwind" fn rconnect(socket: c_int, addr: *const sockaddr, addrlen: socklen_t) -> c_int {
    entry(|| {
        if let Some(d) = rs::dgram::lookup(socket) {
            // SAFETY: addr is NULL or a socket address of its family (caller's contract).
            let a = unsafe { sockaddr_bytes(addr)? };
            if (addrlen as usize) < a.len() {
                return Err(Errno::EINVAL);
            }
            rs::dgram::connect(&d, a)?;
            return Ok(0);
        }
        let h = rs::lookup(socket)?;
        // SAFETY: addr is NULL or a socket address of its family (caller's contract).
        let a = unsafe { sockaddr_bytes(addr)? };
        // A length shorter than the family's address is EINVAL, as upstream
        // gives for a length of 0.
        if (addrlen as usize) < a.len() {
            return Err(Errno::EINVAL);
        }
        rs::connect(&h, a)?;
        Ok(0)
    })
}
symver!(rconnect, "RDMACM_1.0");

/// Shuts an rsocket down.
///
/// # Safety
/// No pointer arguments; always safe to call.
#[no_mangle]
pub unsafe extern "C-unwind" fn rshutdown(socket: c_int, how: c_int) -> c_int {
    entry(|| {
        // A datagram rsocket is never connected: upstream's rshutdown does
        // nothing to it and returns 0 (whatever `how`).
        if rs::dgram::lookup(socket).is_some() {
            return Ok(0);
        }
        let h = rs::lookup(socket)?;
        rs::shutdown(&h, how)?;
        Ok(0)
    })
}
symver!(rshutdown, "RDMACM_1.0");

/// Closes an rsocket.
///
/// # Safety
/// No pointer arguments; always safe to call.
#[no_mangle]
pub unsafe extern "C-unwind" fn rclose(socket: c_int) -> c_int {
    entry(|| {
        match rs::epoll::close(socket) {
            Some(Ok(())) => return Ok(0),
            Some(Err(e)) => return Ok(e as c_int),
            None => {}
        }
        if rs::dgram::lookup(socket).is_some() {
            rs::dgram::close(socket)?;
            return Ok(0);
        }
        rs::close(socket)?;
        Ok(0)
    })
}
symver!(rclose, "RDMACM_1.0");

/// Receives from an rsocket.
///
/// # Safety
/// `buf` must be writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn rrecv(socket: c_int, buf: *mut c_void, len: usize, flags: c_int) -> isize {
    entry(|| {
        // SAFETY: buf holds len writable bytes (caller's contract).
        let b = unsafe { buf_mut(buf, len)? };
        recv_on(socket, b, flags)
    })
}
symver!(rrecv, "RDMACM_1.0");

/// Receives from an rsocket with the source address.
///
/// # Safety
/// `buf` must be writable for `len` bytes; `src_addr`/`addrlen` NULL or as for `raccept`.
#[no_mangle]
pub unsafe extern "C-unwind" fn rrecvfrom(socket: c_int, buf: *mut c_void, len: usize, flags: c_int, src_addr: *mut sockaddr, addrlen: *mut socklen_t) -> isize {
    entry(|| {
        // SAFETY: as rrecv.
        let b = unsafe { buf_mut(buf, len)? };
        if let Some(d) = rs::dgram::lookup(socket) {
            let (n, src) = rs::dgram::recv_from(&d, b, flags)?;
            if !src_addr.is_null() && !addrlen.is_null() {
                // SAFETY: the caller's address buffer and its size.
                unsafe { copy_src(&src, src_addr, addrlen) };
            }
            return Ok(n as isize);
        }
        let n = recv_on(socket, b, flags)?;
        if n > 0 && !src_addr.is_null() && !addrlen.is_null() {
            let h = rs::lookup(socket)?;
            let a = rs::lock(&h)?.peer_addr()?;
            // SAFETY: the caller's address buffer and its size.
            unsafe { copy_addr(&a, src_addr, addrlen) };
        }
        Ok(n)
    })
}
symver!(rrecvfrom, "RDMACM_1.0");

/// Receives a message from an rsocket.
///
/// # Safety
/// `msg` must point to a readable `msghdr` whose first iovec is writable for its length.
#[no_mangle]
pub unsafe extern "C-unwind" fn rrecvmsg(socket: c_int, msg: *mut msghdr, flags: c_int) -> isize {
    entry(|| {
        let m = nonnull_const(msg)?;
        // Not an rsocket: EBADF, even with nothing to receive into.
        if rs::dgram::lookup(socket).is_none() {
            rs::lookup(socket)?;
        }
        // SAFETY: msg points to a msghdr (caller's contract).
        let m = unsafe { &*m.as_ptr() };
        if !m.msg_control.is_null() && m.msg_controllen != 0 {
            return Err(Errno::ENOTSUP);
        }
        if m.msg_iovlen == 0 || m.msg_iov.is_null() {
            return Ok(0);
        }
        // SAFETY: msg_iov has msg_iovlen entries; only the first is filled, as upstream.
        let v = unsafe { *m.msg_iov };
        // SAFETY: the iovec describes writable memory.
        let b = unsafe { buf_mut(v.iov_base, v.iov_len)? };
        recv_on(socket, b, flags)
    })
}
symver!(rrecvmsg, "RDMACM_1.0");

/// Sends on an rsocket.
///
/// # Safety
/// `buf` must be readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsend(socket: c_int, buf: *const c_void, len: usize, flags: c_int) -> isize {
    entry(|| {
        // SAFETY: buf holds len readable bytes (caller's contract).
        let b = unsafe { buf_ref(buf, len)? };
        send_on(socket, b, flags)
    })
}
symver!(rsend, "RDMACM_1.0");

/// Sends on an rsocket to an address.
///
/// # Safety
/// `buf` must be readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsendto(socket: c_int, buf: *const c_void, len: usize, flags: c_int, dest_addr: *const sockaddr, addrlen: socklen_t) -> isize {
    entry(|| {
        if let Some(d) = rs::dgram::lookup(socket) {
            // SAFETY: as rsend.
            let b = unsafe { buf_ref(buf, len)? };
            if dest_addr.is_null() {
                return Ok(rs::dgram::send_to(&d, b, flags, None)? as isize);
            }
            // SAFETY: dest_addr is a socket address of its family (caller's contract).
            let a = unsafe { sockaddr_bytes(dest_addr)? };
            if (addrlen as usize) < a.len() {
                return Err(Errno::EINVAL);
            }
            return Ok(rs::dgram::send_to(&d, b, flags, Some(a))? as isize);
        }
        if !dest_addr.is_null() || addrlen != 0 {
            rs::lookup(socket)?;
            return Err(Errno::EISCONN);
        }
        // SAFETY: as rsend.
        let b = unsafe { buf_ref(buf, len)? };
        send_on(socket, b, flags)
    })
}
symver!(rsendto, "RDMACM_1.0");

/// Sends a message on an rsocket.
///
/// # Safety
/// `msg` must point to a readable `msghdr` whose `msg_iovlen` iovecs are readable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsendmsg(socket: c_int, msg: *const msghdr, flags: c_int) -> isize {
    entry(|| {
        let m = nonnull_const(msg)?;
        // SAFETY: msg points to a msghdr (caller's contract).
        let m = unsafe { &*m.as_ptr() };
        if !m.msg_control.is_null() && m.msg_controllen != 0 {
            return Err(Errno::ENOTSUP);
        }
        // SAFETY: msg_iov has msg_iovlen entries.
        unsafe { sendv_on(socket, m.msg_iov, m.msg_iovlen as c_int, flags) }
    })
}
symver!(rsendmsg, "RDMACM_1.0");

/// Reads from an rsocket.
///
/// # Safety
/// `buf` must be writable for `count` bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn rread(socket: c_int, buf: *mut c_void, count: usize) -> isize {
    entry(|| {
        // SAFETY: as rrecv.
        let b = unsafe { buf_mut(buf, count)? };
        recv_on(socket, b, 0)
    })
}
symver!(rread, "RDMACM_1.0");

/// Reads into a vector from an rsocket.
///
/// # Safety
/// `iov` must hold `iovcnt` iovecs; the first must be writable for its length.
#[no_mangle]
pub unsafe extern "C-unwind" fn rreadv(socket: c_int, iov: *const iovec, iovcnt: c_int) -> isize {
    entry(|| {
        if iovcnt <= 0 || iov.is_null() {
            rs::lookup(socket)?;
            return Err(Errno::EINVAL);
        }
        // SAFETY: iov has iovcnt >= 1 entries; only the first is filled, as upstream.
        let v = unsafe { *iov };
        // SAFETY: the iovec describes writable memory.
        let b = unsafe { buf_mut(v.iov_base, v.iov_len)? };
        recv_on(socket, b, 0)
    })
}
symver!(rreadv, "RDMACM_1.0");

/// Writes to an rsocket.
///
/// # Safety
/// `buf` must be readable for `count` bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn rwrite(socket: c_int, buf: *const c_void, count: usize) -> isize {
    entry(|| {
        // SAFETY: as rsend.
        let b = unsafe { buf_ref(buf, count)? };
        send_on(socket, b, 0)
    })
}
symver!(rwrite, "RDMACM_1.0");

/// Writes a vector to an rsocket.
///
/// # Safety
/// `iov` must hold `iovcnt` readable iovecs, each readable for its length.
#[no_mangle]
pub unsafe extern "C-unwind" fn rwritev(socket: c_int, iov: *const iovec, iovcnt: c_int) -> isize {
    entry(|| {
        // SAFETY: iov has iovcnt entries (caller's contract).
        unsafe { sendv_on(socket, iov, iovcnt, 0) }
    })
}
symver!(rwritev, "RDMACM_1.0");

/// Polls rsockets.
///
/// # Safety
/// `fds` must hold `nfds` writable `pollfd` entries.
#[no_mangle]
pub unsafe extern "C-unwind" fn rpoll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    entry(|| {
        if nfds == 0 {
            return rs::poll(&mut [], timeout);
        }
        // As poll(2): more entries than the descriptor limit is EINVAL
        // (a count larger than the caller's array would be read past it).
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes the rlimit struct it is given.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 && nfds > lim.rlim_cur {
            return Err(Errno::EINVAL);
        }
        let f = nonnull(fds)?;
        // SAFETY: fds has nfds entries (caller's contract).
        let f = unsafe { std::slice::from_raw_parts_mut(f.as_ptr(), nfds as usize) };
        rs::poll(f, timeout)
    })
}
symver!(rpoll, "RDMACM_1.0");

/// Selects on rsockets.
///
/// # Safety
/// Each set must be NULL or a writable `fd_set`; `timeout` NULL or readable.
#[no_mangle]
pub unsafe extern "C-unwind" fn rselect(nfds: c_int, readfds: *mut fd_set, writefds: *mut fd_set, exceptfds: *mut fd_set, timeout: *mut timeval) -> c_int {
    entry(|| {
        // With no set, nfds names nothing (upstream then just waits).
        let no_sets = readfds.is_null() && writefds.is_null() && exceptfds.is_null();
        if nfds < 0 || (!no_sets && nfds > libc::FD_SETSIZE as c_int) {
            return Err(Errno::EINVAL);
        }
        let nfds = if no_sets { 0 } else { nfds };
        let mut pfds: Vec<pollfd> = Vec::new();
        for fd in 0..nfds {
            let mut ev = 0i16;
            // SAFETY: the sets, when given, are fd_sets and fd < FD_SETSIZE.
            unsafe {
                if !readfds.is_null() && libc::FD_ISSET(fd, readfds) {
                    ev |= libc::POLLIN;
                }
                if !writefds.is_null() && libc::FD_ISSET(fd, writefds) {
                    ev |= libc::POLLOUT;
                }
                if !exceptfds.is_null() && libc::FD_ISSET(fd, exceptfds) {
                    ev |= libc::POLLPRI;
                }
            }
            if ev != 0 {
                pfds.push(pollfd { fd, events: ev, revents: 0 });
            }
        }
        let to = if timeout.is_null() {
            -1
        } else {
            // SAFETY: timeout points to a timeval.
            let t = unsafe { *timeout };
            t.tv_sec.saturating_mul(1000).saturating_add(t.tv_usec / 1000).clamp(0, c_int::MAX as i64) as c_int
        };
        rs::poll(&mut pfds, to)?;
        let mut n = 0;
        // SAFETY: as above.
        unsafe {
            for set in [readfds, writefds, exceptfds] {
                if !set.is_null() {
                    libc::FD_ZERO(set);
                }
            }
            for p in &pfds {
                if !readfds.is_null() && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 && p.events & libc::POLLIN != 0 {
                    libc::FD_SET(p.fd, readfds);
                    n += 1;
                }
                if !writefds.is_null() && p.revents & libc::POLLOUT != 0 {
                    libc::FD_SET(p.fd, writefds);
                    n += 1;
                }
                if !exceptfds.is_null() && p.revents & libc::POLLPRI != 0 {
                    libc::FD_SET(p.fd, exceptfds);
                    n += 1;
                }
            }
        }
        Ok(n)
    })
}
symver!(rselect, "RDMACM_1.0");

/// Returns an rsocket's peer address.
///
/// # Safety
/// `addrlen` must be writable and `addr` writable for `*addrlen` bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn rgetpeername(socket: c_int, addr: *mut sockaddr, addrlen: *mut socklen_t) -> c_int {
    entry(|| {
        if let Some(d) = rs::dgram::lookup(socket) {
            addr_out(addr, addrlen)?;
            let a = rs::dgram::peer_addr(&d)?;
            // SAFETY: the caller's address buffer and its size.
            unsafe { copy_name(&a, addr, addrlen) };
            return Ok(0);
        }
        let h = rs::lookup(socket)?;
        addr_out(addr, addrlen)?;
        let a = rs::lock(&h)?.peer_addr()?;
        // SAFETY: the caller's address buffer and its size.
        unsafe { copy_addr(&a, addr, addrlen) };
        Ok(0)
    })
}
symver!(rgetpeername, "RDMACM_1.0");

/// Returns an rsocket's local address.
///
/// # Safety
/// `addrlen` must be writable and `addr` writable for `*addrlen` bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn rgetsockname(socket: c_int, addr: *mut sockaddr, addrlen: *mut socklen_t) -> c_int {
    entry(|| {
        if let Some(d) = rs::dgram::lookup(socket) {
            addr_out(addr, addrlen)?;
            let a = rs::dgram::local_addr(&d)?;
            // SAFETY: the caller's address buffer and its size.
            unsafe { copy_name(&a, addr, addrlen) };
            return Ok(0);
        }
        let h = rs::lookup(socket)?;
        addr_out(addr, addrlen)?;
        let a = rs::lock(&h)?.local_addr()?;
        // SAFETY: the caller's address buffer and its size.
        unsafe { copy_addr(&a, addr, addrlen) };
        Ok(0)
    })
}
symver!(rgetsockname, "RDMACM_1.0");

/// Sets an rsocket option.
///
/// # Safety
/// `optval` must be readable for `optlen` bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn rsetsockopt(socket: c_int, level: c_int, optname: c_int, optval: *const c_void, optlen: socklen_t) -> c_int {
    entry(|| {
        // SAFETY: optval is readable for optlen bytes (caller's contract).
        let opt = if optval.is_null() { None } else { Some(unsafe { std::slice::from_raw_parts(optval as *const u8, optlen as usize) }) };
        if let Some(d) = rs::dgram::lookup(socket) {
            rs::dgram::setsockopt(&d, level, optname, opt)?;
            return Ok(0);
        }
        let h = rs::lookup(socket)?;
        rs::setsockopt(&h, level, optname, opt)?;
        Ok(0)
    })
}
symver!(rsetsockopt, "RDMACM_1.0");

/// Reads an rsocket option.
///
/// # Safety
/// `optlen` must be writable and `optval` writable for `*optlen` bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn rgetsockopt(socket: c_int, level: c_int, optname: c_int, optval: *mut c_void, optlen: *mut socklen_t) -> c_int {
    entry(|| {
        let d = rs::dgram::lookup(socket);
        let h = match d {
            Some(_) => None,
            None => Some(rs::lookup(socket)?),
        };
        let v = nonnull(optval)?;
        let l = nonnull(optlen)?;
        // SAFETY: optlen is writable and readable (caller's contract).
        let room = unsafe { *l.as_ptr() } as usize;
        let val = match (&d, &h) {
            (Some(d), _) => rs::dgram::getsockopt(d, level, optname, room)?,
            (None, Some(h)) => rs::getsockopt(h, level, optname, room)?,
            (None, None) => return Err(Errno::EBADF),
        };
        // SAFETY: optlen points to the buffer size; optval to that many bytes.
        unsafe {
            let n = room.min(val.bytes.len());
            std::ptr::copy_nonoverlapping(val.bytes.as_ptr(), v.as_ptr() as *mut u8, n);
            if val.set_len {
                *l.as_ptr() = val.bytes.len() as socklen_t;
            }
        }
        Ok(0)
    })
}
symver!(rgetsockopt, "RDMACM_1.0");

/// fcntl for rsockets (variadic in C: the optional third argument is read as a long).
///
/// # Safety
/// No pointer arguments; always safe to call.
#[no_mangle]
pub unsafe extern "C-unwind" fn rfcntl(socket: c_int, cmd: c_int, arg: c_long) -> c_int {
    entry(|| {
        if let Some(d) = rs::dgram::lookup(socket) {
            return rs::dgram::fcntl(&d, cmd, arg as c_int);
        }
        let h = rs::lookup(socket)?;
        rs::fcntl(&h, cmd, arg as c_int)
    })
}
symver!(rfcntl, "RDMACM_1.0");

/// Registers a buffer for remote direct writes.
///
/// # Safety
/// `buf` must stay valid for `len` bytes until riounmap or rclose; the peer may write into it.
#[no_mangle]
pub unsafe extern "C-unwind" fn riomap(socket: c_int, buf: *mut c_void, len: usize, prot: c_int, flags: c_int, offset: off_t) -> off_t {
    entry(|| {
        // A datagram rsocket has no protection domain for a mapping: EINVAL
        // (upstream reads it through the rdma_cm id it lacks and crashes).
        if rs::dgram::lookup(socket).is_some() {
            return Err(Errno::EINVAL);
        }
        let h = rs::lookup(socket)?;
        let _ = flags;
        // SAFETY: the caller keeps buf valid for len bytes until riounmap or rclose.
        let b = unsafe { rs::verbs::UserBuf::new(buf as *mut u8, len) };
        let r = rs::lock(&h)?.iomap(b, prot, offset);
        r
    })
}
symver!(riomap, "RDMACM_1.0");

/// Removes a mapping made by riomap.
///
/// # Safety
/// `buf`/`len` name a mapping made by riomap (no memory is accessed).
#[no_mangle]
pub unsafe extern "C-unwind" fn riounmap(socket: c_int, buf: *mut c_void, len: usize) -> c_int {
    entry(|| {
        // Nothing is ever mapped on a datagram rsocket: EINVAL, as upstream.
        if rs::dgram::lookup(socket).is_some() {
            return Err(Errno::EINVAL);
        }
        let h = rs::lookup(socket)?;
        rs::lock(&h)?.iounmap(buf as u64, len)?;
        Ok(0)
    })
}
symver!(riounmap, "RDMACM_1.0");

/// Writes directly into a peer's riomap'ed buffer.
///
/// # Safety
/// `buf` must be readable for `count` bytes.
#[no_mangle]
pub unsafe extern "C-unwind" fn riowrite(socket: c_int, buf: *const c_void, count: usize, offset: off_t, flags: c_int) -> usize {
    entry(|| {
        // A datagram rsocket has no peer mappings: 0 bytes written, as upstream.
        if rs::dgram::lookup(socket).is_some() {
            return Ok(0);
        }
        let h = rs::lookup(socket)?;
        // SAFETY: buf holds count readable bytes (caller's contract).
        let b = unsafe { buf_ref(buf, count)? };
        rs::iowrite(&h, b, offset as u64, flags)
    })
}
symver!(riowrite, "RDMACM_1.0");

// --- repoll: the sets live in core::rsocket::epoll; failures of repoll_ctl and repoll_wait are
// returned as the error number itself, as upstream does.

/// Creates an epoll-like set for rsockets.
///
/// # Safety
/// No pointer arguments; always safe to call.
#[no_mangle]
pub unsafe extern "C-unwind" fn repoll_create(size: c_int) -> c_int {
    entry(|| rs::epoll::create(size))
}
symver!(repoll_create, "RDMACM_1.5");

/// Controls an repoll set.
///
/// # Safety
/// `event` must be NULL or point to a readable `epoll_event`.
#[no_mangle]
pub unsafe extern "C-unwind" fn repoll_ctl(epfd: c_int, op: c_int, fd: c_int, event: *mut epoll_event) -> c_int {
    entry(|| {
        // Adding or changing a socket without an event: EINVAL (upstream
        // reads through the NULL pointer).
        if event.is_null() && op != libc::EPOLL_CTL_DEL {
            return Ok(libc::EINVAL);
        }
        let ev = if event.is_null() {
            None
        } else {
            // SAFETY: event is non-NULL and readable (caller's contract); it may be unaligned.
            let e = unsafe { std::ptr::read_unaligned(event) };
            Some((e.events, e.u64))
        };
        Ok(match rs::epoll::ctl(epfd, rs::epoll::Op::from_c(op), fd, ev) {
            Ok(()) => 0,
            Err(e) => e as c_int,
        })
    })
}
symver!(repoll_ctl, "RDMACM_1.5");

/// Waits on an repoll set.
///
/// # Safety
/// `events` must hold `maxevents` writable entries.
#[no_mangle]
pub unsafe extern "C-unwind" fn repoll_wait(epfd: c_int, events: *mut epoll_event, maxevents: c_int, timeout: c_int) -> c_int {
    entry(|| {
        let Some(set) = rs::epoll::find(epfd) else { return Ok(libc::EINVAL) };
        if maxevents <= 0 {
            return Ok(libc::EINVAL);
        }
        let out = nonnull(events)?;
        let n = set.wait(maxevents as usize, timeout, |i, events, data| {
            // SAFETY: out has maxevents writable entries and i < maxevents.
            unsafe { std::ptr::write_unaligned(out.as_ptr().add(i), epoll_event { events, u64: data }) };
        })?;
        Ok(n as c_int)
    })
}
symver!(repoll_wait, "RDMACM_1.5");

/// A caller's socket address as bytes: as many as its family's structure
/// (the CM reads no more; an unknown family gives just the family).
///
/// # Safety
/// `addr` is NULL or points to a socket address at least as large as its family's structure.
unsafe fn sockaddr_bytes<'a>(addr: *const sockaddr) -> Result<&'a [u8], Errno> {
    let a = nonnull_const(addr)?;
    // SAFETY: a points to at least a sockaddr header.
    let fam = unsafe { (*a.as_ptr()).sa_family } as c_int;
    let len = match fam {
        libc::AF_INET => std::mem::size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => std::mem::size_of::<libc::sockaddr_in6>(),
        libc::AF_IB => rdmacm::internal::cma::addr_len(fam, true),
        _ => std::mem::size_of::<libc::sa_family_t>(),
    };
    // SAFETY: per the contract, len bytes are readable for this family.
    Ok(unsafe { std::slice::from_raw_parts(a.as_ptr() as *const u8, len) })
}

/// A caller's read buffer as a slice (NULL with a length is EINVAL).
///
/// # Safety
/// `p` points to `len` readable bytes or `len` is 0.
unsafe fn buf_ref<'a>(p: *const c_void, len: usize) -> Result<&'a [u8], Errno> {
    if len == 0 {
        return Ok(&[]);
    }
    let p = nonnull_const(p)?;
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p.as_ptr() as *const u8, len) })
}

/// A caller's write buffer as a slice (NULL with a length is EINVAL).
///
/// # Safety
/// `p` points to `len` writable bytes or `len` is 0.
unsafe fn buf_mut<'a>(p: *mut c_void, len: usize) -> Result<&'a mut [u8], Errno> {
    if len == 0 {
        return Ok(&mut []);
    }
    let p = nonnull(p)?;
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.as_ptr() as *mut u8, len) })
}

fn recv_on(socket: c_int, b: &mut [u8], flags: c_int) -> Result<isize, Errno> {
    if let Some(d) = rs::dgram::lookup(socket) {
        return Ok(rs::dgram::recv_from(&d, b, flags)?.0 as isize);
    }
    let h = rs::lookup(socket)?;
    Ok(rs::recv(&h, b, flags)? as isize)
}

fn send_on(socket: c_int, b: &[u8], flags: c_int) -> Result<isize, Errno> {
    if let Some(d) = rs::dgram::lookup(socket) {
        return Ok(rs::dgram::send_to(&d, b, flags, None)? as isize);
    }
    let h = rs::lookup(socket)?;
    Ok(rs::send(&h, b, flags)? as isize)
}

/// Sends the iovecs in order; stops at the first short send.
///
/// # Safety
/// `iov` has `cnt` entries, each describing readable memory.
unsafe fn sendv_on(socket: c_int, iov: *const iovec, cnt: c_int, flags: c_int) -> Result<isize, Errno> {
    let dg = rs::dgram::lookup(socket);
    let h = if dg.is_some() { None } else { Some(rs::lookup(socket)?) };
    if cnt < 0 || (cnt > 0 && iov.is_null()) {
        return Err(Errno::EINVAL);
    }
    if let Some(d) = dg {
        // A datagram rsocket sends the vector as one datagram.
        let mut all = Vec::new();
        for i in 0..cnt as usize {
            // SAFETY: i < cnt.
            let v = unsafe { *iov.add(i) };
            // SAFETY: the iovec describes readable memory.
            all.extend_from_slice(unsafe { buf_ref(v.iov_base, v.iov_len)? });
        }
        return Ok(rs::dgram::send_to(&d, &all, flags, None)? as isize);
    }
    let h = h.ok_or(Errno::EBADF)?;
    let mut total = 0usize;
    for i in 0..cnt as usize {
        // SAFETY: i < cnt.
        let v = unsafe { *iov.add(i) };
        // SAFETY: the iovec describes readable memory.
        let b = unsafe { buf_ref(v.iov_base, v.iov_len)? };
        match rs::send(&h, b, flags) {
            Ok(n) => {
                total += n;
                if n < b.len() {
                    break;
                }
            }
            Err(e) if total == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(total as isize)
}

/// Copies an address out like getsockname: truncated to the buffer, the full length reported.
///
/// # Safety
/// `addr` has `*len` writable bytes; `len` is valid.
/// The address arguments of rgetpeername/rgetsockname: `addrlen` must be
/// given; `addr` may be NULL when `*addrlen` is 0 (upstream then copies
/// nothing and only reports the size: its preload library asks this way).
fn addr_out(addr: *mut sockaddr, addrlen: *mut socklen_t) -> Result<(), Errno> {
    nonnull(addrlen)?;
    // SAFETY: addrlen is non-NULL and points at the caller's length.
    if addr.is_null() && unsafe { *addrlen } != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// rlisten on a datagram rsocket: ENOTSUP (upstream's rlisten passes the
/// rdma_cm id a datagram rsocket does not have to rdma_listen and crashes).
fn dgram_unsupported(socket: c_int) -> Result<(), Errno> {
    match rs::dgram::lookup(socket) {
        Some(_) => Err(Errno::ENOTSUP),
        None => Ok(()),
    }
}

/// A datagram's source address out, as upstream's rrecvfrom: at most
/// `*len` bytes, and `*len` lowered to the address's size when larger.
///
/// # Safety
/// `addr` has `*len` writable bytes; `len` is valid.
unsafe fn copy_src(a: &[u8], addr: *mut sockaddr, len: *mut socklen_t) {
    // SAFETY: the caller's contract.
    unsafe {
        let n = (*len as usize).min(a.len());
        std::ptr::copy_nonoverlapping(a.as_ptr(), addr as *mut u8, n);
        *len = n as socklen_t;
    }
}

/// An address out like getsockname(2): truncated to the buffer, the full length reported.
///
/// # Safety
/// `addr` has `*len` writable bytes (or is NULL with `*len` 0); `len` is valid.
unsafe fn copy_name(a: &[u8], addr: *mut sockaddr, len: *mut socklen_t) {
    // SAFETY: the caller's contract.
    unsafe {
        let n = (*len as usize).min(a.len());
        if n > 0 {
            std::ptr::copy_nonoverlapping(a.as_ptr(), addr as *mut u8, n);
        }
        *len = a.len() as socklen_t;
    }
}

unsafe fn copy_addr(a: &libc::sockaddr_storage, addr: *mut sockaddr, len: *mut socklen_t) {
    let full = match a.ss_family as c_int {
        libc::AF_INET => std::mem::size_of::<libc::sockaddr_in>(),
        _ => std::mem::size_of::<libc::sockaddr_in6>(),
    };
    // SAFETY: the caller's contract.
    unsafe {
        let n = (*len as usize).min(full);
        if n > 0 {
            std::ptr::copy_nonoverlapping(a as *const _ as *const u8, addr as *mut u8, n);
        }
        *len = full as socklen_t;
    }
}

#[cfg(test)]
mod repoll_tests {
    use super::*;

    fn ctl(ep: c_int, op: c_int, fd: c_int, events: u32, data: u64) -> c_int {
        let mut ev = epoll_event { events, u64: data };
        // SAFETY: ev is a valid event.
        unsafe { repoll_ctl(ep, op, fd, &mut ev) }
    }

    #[test]
    fn repoll_on_a_pipe() {
        let mut p = [0 as c_int; 2];
        // SAFETY: p has room for two descriptors.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        // SAFETY: no pointers.
        let ep = unsafe { repoll_create(0) };
        assert!(ep >= 0);
        let mut evs = [epoll_event { events: 0, u64: 0 }; 4];
        // SAFETY: evs has 4 entries.
        let wait = |evs: &mut [epoll_event; 4], t| unsafe { repoll_wait(ep, evs.as_mut_ptr(), 4, t) };
        assert_eq!(wait(&mut evs, 0), 0);
        assert_eq!(ctl(ep, libc::EPOLL_CTL_ADD, p[0], libc::EPOLLIN as u32, 7), 0);
        assert_eq!(ctl(ep, libc::EPOLL_CTL_ADD, p[0], libc::EPOLLIN as u32, 7), libc::EEXIST);
        assert_eq!(ctl(ep, libc::EPOLL_CTL_MOD, p[1], libc::EPOLLIN as u32, 7), libc::ENOENT);
        assert_eq!(ctl(ep, libc::EPOLL_CTL_ADD, -1, 0, 0), libc::EBADF);
        assert_eq!(ctl(ep, libc::EPOLL_CTL_ADD, ep, 0, 0), libc::EINVAL);
        assert_eq!(ctl(p[1], libc::EPOLL_CTL_ADD, p[0], 0, 0), libc::EINVAL);
        let t = std::time::Instant::now();
        assert_eq!(wait(&mut evs, 50), 0);
        assert!(t.elapsed().as_millis() >= 45);
        // SAFETY: writes one byte from a valid buffer.
        assert_eq!(unsafe { libc::write(p[1], b"x".as_ptr().cast(), 1) }, 1);
        assert_eq!(wait(&mut evs, -1), 1);
        let (e, d) = (evs[0].events, evs[0].u64);
        assert_eq!((e, d), (libc::EPOLLIN as u32, 7));
        // SAFETY: no pointers.
        assert_eq!(unsafe { rclose(ep) }, libc::EBUSY);
        assert_eq!(ctl(ep, libc::EPOLL_CTL_DEL, p[0], 0, 0), 0);
        assert_eq!(ctl(ep, libc::EPOLL_CTL_DEL, p[0], 0, 0), libc::ENOENT);
        // SAFETY: no pointers.
        assert_eq!(unsafe { rclose(ep) }, 0);
        // SAFETY: the test's own descriptors.
        unsafe {
            libc::close(p[0]);
            libc::close(p[1]);
        }
    }
}
