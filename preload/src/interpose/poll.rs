// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! poll, select and epoll over stand-ins: poll and select translate the
//! program's list, epoll's sets are repoll sets.

use super::fork::{fork_switch, inherited};
use super::stand_in::{reserve_placeholder, settle};
use crate::boundary;
use crate::calls::{in_rdmacm, inside, inside_nocancel, keep_errno, quiet, real, rs, set_errno};
use crate::fdmap::{self, Entry, Fork, Kind};
use crate::held::{self, Buf, Reserved};
use crate::split;
use libc::{c_int, c_ulong, epoll_event, fd_set, nfds_t, pollfd, timeval};

// --- poll, select ---

/// A poll over stand-ins: `n` entries at `list` (in `buf`), each stand-in
/// replaced by what it stands for; through rpoll when an rsocket is among
/// them, libc's poll otherwise.
#[derive(Clone, Copy)]
struct Mapped {
    buf: Buf,
    list: *mut pollfd,
    n: usize,
    any_rs: bool,
}

/// Translates `n` entries from `from` into `to`.
///
/// # Safety
/// `from` and `to` hold `n` entries each.
unsafe fn translate(from: *const pollfd, to: *mut pollfd, n: usize) -> bool {
    let mut any_rs = false;
    for i in 0..n {
        // SAFETY: i < n (the caller's contract).
        let p = unsafe { *from.add(i) };
        match fdmap::get(p.fd) {
            // fork mode: an accepted socket waited on here is used in this
            // process; its peer waits for the switch before its first byte
            Some(e @ Entry { kind: Kind::Real, fork: Fork::Passive, .. }) => quiet(|| fork_switch(p.fd, e)),
            // a child waits to read a connection split at fork(2)
            Some(e @ Entry { kind: Kind::Real, fork: Fork::Split, .. }) if p.events & libc::POLLIN != 0 => split::claim(p.fd, e),
            _ => {}
        }
        let fd = match fdmap::get(p.fd) {
            Some(Entry { kind: Kind::Rsocket, inner, .. }) => {
                any_rs = true;
                inner
            }
            // the placeholder: ready at once, the call that follows fails
            Some(Entry { kind: Kind::Inherited, .. }) => p.fd,
            Some(Entry { inner, .. }) => inner,
            None => p.fd,
        };
        // SAFETY: as above.
        unsafe { *to.add(i) = pollfd { fd, events: p.events, revents: 0 } };
    }
    any_rs
}

/// The poll of a [`Mapped`] list; called from the export's frame.
#[inline(always)]
unsafe fn poll_mapped(m: Mapped, timeout: c_int) -> c_int {
    // SAFETY: m.list holds m.n entries.
    unsafe {
        if m.any_rs {
            inside(|| rs::rpoll(m.list, m.n as nfds_t, timeout))
        } else {
            real::poll(m.list, m.n as nfds_t, timeout)
        }
    }
}

/// Whether any of the `n` entries at `fds` is a stand-in (a loop of
/// lookups; no panic).
///
/// # Safety
/// `fds` holds `n` entries (or n is 0).
#[inline(always)]
unsafe fn any_stand_in(fds: *const pollfd, n: usize) -> bool {
    // SAFETY: i < n.
    (0..n).any(|i| fdmap::get(unsafe { (*fds.add(i)).fd }).is_some())
}

#[no_mangle]
pub unsafe extern "C-unwind" fn poll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    let n = if fds.is_null() { 0 } else { nfds as usize };
    // SAFETY: the caller passes nfds pollfd entries at fds (or none).
    if !unsafe { any_stand_in(fds, n) } {
        // SAFETY: libc's poll with the program's arguments, untouched.
        return unsafe { real::poll(fds, nfds, timeout) };
    }
    let plan = boundary(None, || {
        let buf = held::take(n * std::mem::size_of::<pollfd>());
        let list = buf.pollfds();
        // SAFETY: the caller's n entries; the buffer holds n.
        let any_rs = unsafe { translate(fds, list, n) };
        Some(Mapped { buf, list, n, any_rs })
    });
    let Some(m) = plan else { return -1 };
    // SAFETY: m.list holds m.n entries.
    let ret = unsafe { poll_mapped(m, timeout) };
    boundary(-1, || {
        for i in 0..n {
            // SAFETY: i < n: the caller's array and the buffer.
            unsafe { (*fds.add(i)).revents = (*m.list.add(i)).revents };
        }
        held::give(m.buf);
        ret
    })
}

/// FD_ISSET without a panic: `set` is NULL or an fd_set, fd < FD_SETSIZE.
///
/// # Safety
/// As said.
#[inline(always)]
unsafe fn isset(set: *const fd_set, fd: c_int) -> bool {
    let w = c_ulong::BITS as usize;
    let fd = fd as usize;
    // SAFETY: an fd_set is an array of FD_SETSIZE bits in unsigned longs,
    // bit fd % w of word fd / w, as glibc's FD_ISSET reads it.
    !set.is_null() && unsafe { *set.cast::<c_ulong>().add(fd / w) } >> (fd % w) & 1 != 0
}

#[no_mangle]
pub unsafe extern "C-unwind" fn select(nfds: c_int, r: *mut fd_set, w: *mut fd_set, x: *mut fd_set, tv: *mut timeval) -> c_int {
    let n = nfds.clamp(0, libc::FD_SETSIZE as c_int);
    // SAFETY: the sets are NULL or the caller's fd_sets; fd < FD_SETSIZE.
    let listed = |fd| unsafe { isset(r, fd) || isset(w, fd) || isset(x, fd) };
    if !(0..n).any(|fd| listed(fd) && fdmap::get(fd).is_some()) {
        // SAFETY: libc's select with the program's arguments, untouched.
        return unsafe { real::select(nfds, r, w, x, tv) };
    }
    let plan = boundary(None, || {
        let timeout = if tv.is_null() {
            -1
        } else {
            // SAFETY: non-NULL timeval of the caller.
            let t = unsafe { *tv };
            if t.tv_sec < 0 || t.tv_usec < 0 {
                set_errno(libc::EINVAL);
                return None;
            }
            t.tv_sec.saturating_mul(1000).saturating_add(t.tv_usec / 1000).min(c_int::MAX.into()) as c_int
        };
        // the buffer: the program's list, then the translated one
        let k = (0..n).filter(|&fd| listed(fd)).count();
        let buf = held::take(2 * k * std::mem::size_of::<pollfd>());
        let mine = buf.pollfds();
        for (i, fd) in (0..n).filter(|&fd| listed(fd)).enumerate() {
            let mut ev = 0;
            // SAFETY: as above.
            unsafe {
                if isset(r, fd) {
                    ev |= libc::POLLIN;
                }
                if isset(w, fd) {
                    ev |= libc::POLLOUT;
                }
            }
            // SAFETY: i < k, the buffer holds 2k entries.
            unsafe { *mine.add(i) = pollfd { fd, events: ev, revents: 0 } };
        }
        // SAFETY: k entries at mine, k more after them.
        let list = unsafe { mine.add(k) };
        // SAFETY: as above.
        let any_rs = unsafe { translate(mine, list, k) };
        Some((Mapped { buf, list, n: k, any_rs }, timeout))
    });
    let Some((m, timeout)) = plan else { return -1 };
    // SAFETY: m.list holds m.n entries.
    let ret = unsafe { poll_mapped(m, timeout) };
    boundary(-1, || {
        let done = select_done(m, ret, [r, w, x]);
        held::give(m.buf);
        done
    })
}

fn select_done(m: Mapped, ret: c_int, sets: [*mut fd_set; 3]) -> c_int {
    if ret < 0 {
        return ret;
    }
    for set in sets {
        if !set.is_null() {
            // SAFETY: the caller's fd_set.
            unsafe { libc::FD_ZERO(set) };
        }
    }
    let mine = m.buf.pollfds();
    let mut count = 0;
    for i in 0..m.n {
        // SAFETY: i < m.n: the program's entry and its translation.
        let (fd, rev) = unsafe { ((*mine.add(i)).fd, (*m.list.add(i)).revents) };
        for (set, hit) in [
            (sets[0], rev & libc::POLLIN != 0),
            (sets[1], rev & libc::POLLOUT != 0),
            (sets[2], rev & !(libc::POLLIN | libc::POLLOUT) != 0),
        ] {
            if hit && !set.is_null() {
                // SAFETY: the caller's fd_set; fd < FD_SETSIZE.
                unsafe { libc::FD_SET(fd, set) };
                count += 1;
            }
        }
    }
    count
}

// --- epoll: sets made by epoll_create are repoll sets, as upstream's are,
// so they can hold rsockets and ordinary descriptors alike ---

/// What epoll_create1 does after its plan.
#[derive(Clone, Copy)]
enum EpCreate {
    Real,
    /// repoll_create, the set shown as the placeholder
    Repoll(rs::Repoll, Reserved),
    Failed,
}

fn epoll_create_plan(flags: c_int) -> EpCreate {
    let rp = match rs::repoll() {
        Some(rp) if !in_rdmacm() => rp,
        _ => return EpCreate::Real,
    };
    if flags & !libc::EPOLL_CLOEXEC != 0 {
        set_errno(libc::EINVAL);
        return EpCreate::Failed;
    }
    reserve_placeholder(flags & libc::EPOLL_CLOEXEC != 0).map_or(EpCreate::Failed, |res| EpCreate::Repoll(rp, res))
}

#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_create1(flags: c_int) -> c_int {
    match boundary(EpCreate::Failed, || epoll_create_plan(flags)) {
        // SAFETY: libc's epoll_create1 takes no pointers.
        EpCreate::Real => unsafe { real::epoll_create1(flags) },
        EpCreate::Repoll(rp, res) => {
            // SAFETY: repoll_create takes no pointers.
            let r = inside_nocancel(|| unsafe { (rp.create)(flags) });
            boundary(-1, || settle(res, r, Kind::Repoll, Fork::Ready, 0))
        }
        EpCreate::Failed => -1,
    }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_create(size: c_int) -> c_int {
    if size <= 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: epoll_create1 takes no pointers.
    unsafe { epoll_create1(0) }
}

/// repoll_ctl/repoll_wait give a failure as the error number itself.
fn repoll_result(r: c_int, max: c_int) -> c_int {
    if r < 0 || r > max {
        if r > 0 {
            set_errno(r);
        }
        return -1;
    }
    r
}

/// The repoll calls when `epfd` stands for a repoll set.
fn repoll_set(epfd: c_int) -> Option<(c_int, rs::Repoll)> {
    match fdmap::get(epfd) {
        Some(Entry { kind: Kind::Repoll, inner, .. }) => rs::repoll().map(|rp| (inner, rp)),
        _ => None,
    }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut epoll_event) -> c_int {
    let Some((inner, rp)) = repoll_set(epfd) else {
        // SAFETY: libc's epoll_ctl with the caller's arguments.
        return unsafe { real::epoll_ctl(epfd, op, fd, ev) };
    };
    let target = match fdmap::get(fd) {
        None => fd,
        Some(e) => match boundary(Err(()), || epoll_target(op, fd, e)) {
            Ok(t) => t,
            Err(()) => return -1,
        },
    };
    // SAFETY: repoll_ctl with the caller's event.
    let r = inside_nocancel(|| unsafe { (rp.ctl)(inner, op, target, ev) });
    repoll_result(r, 0)
}

/// What repoll_ctl is to watch for stand-in `fd`: the descriptor that does
/// the work.  A fork-mode socket connected or accepted over TCP becomes an
/// rsocket when it is added (the accepting side's peer waits for that
/// before its first byte; the connecting side waits for its peer's four
/// zero bytes); a split connection added in a child claims its data; an
/// inherited rsocket cannot be watched here (EPERM, the kernel's answer for
/// a descriptor epoll cannot watch).
fn epoll_target(op: c_int, fd: c_int, e: Entry) -> Result<c_int, ()> {
    let e = match e {
        Entry { kind: Kind::Real, fork: Fork::Passive | Fork::Active, .. } if op != libc::EPOLL_CTL_DEL => {
            quiet(|| fork_switch(fd, e));
            fdmap::get(fd).unwrap_or(e)
        }
        Entry { kind: Kind::Real, fork: Fork::Split, .. } if op != libc::EPOLL_CTL_DEL => {
            split::claim(fd, e);
            e
        }
        _ => e,
    };
    if e.kind == Kind::Inherited {
        inherited(fd, "epoll_ctl", libc::EPERM);
        return Err(());
    }
    Ok(e.inner)
}

#[inline(always)]
unsafe fn epoll_wait_common(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int {
    let Some((inner, rp)) = repoll_set(epfd) else {
        // SAFETY: libc's epoll_wait or epoll_pwait with the program's
        // arguments, untouched.
        return unsafe {
            if mask.is_null() {
                real::epoll_wait(epfd, ev, max, timeout)
            } else {
                real::epoll_pwait(epfd, ev, max, timeout, mask)
            }
        };
    };
    if max <= 0 || ev.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: a sigset_t on our stack (plain data); the caller's mask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    if !mask.is_null() {
        // SAFETY: as above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, mask, &mut old) };
    }
    // SAFETY: the caller's array of `max` events.
    let r = inside(|| unsafe { (rp.wait)(inner, ev, max, timeout) });
    if !mask.is_null() {
        // SAFETY: restores the mask saved above.
        keep_errno(|| unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) });
    }
    repoll_result(r, max)
}

#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_wait(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int) -> c_int {
    // SAFETY: epoll_wait_common with a null mask has epoll_wait's contract,
    // which the program keeps.
    unsafe { epoll_wait_common(epfd, ev, max, timeout, std::ptr::null()) }
}

#[no_mangle]
pub unsafe extern "C-unwind" fn epoll_pwait(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int {
    // SAFETY: epoll_wait_common has epoll_pwait's contract, which the
    // program keeps.
    unsafe { epoll_wait_common(epfd, ev, max, timeout, mask) }
}
