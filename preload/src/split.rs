// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Fork mode: a connection used on both sides of fork(2).
//!
//! An rsocket lives in the process that made it: its queue pair and
//! buffers stay in the parent (with RDMAV_FORK_SAFE they are not even
//! mapped in the child).  Some programs fork after the connection has
//! carried data and then use it from both processes: rsync's receiving
//! side reads the socket in the child and writes it in the parent.  So in
//! fork mode, at each fork, every connected rsocket is split:
//!
//! - the child's descriptors for it become one end of a UNIX stream
//!   socket pair (a kernel socket: every call works on it as on any);
//! - a thread of the parent (the relay) sends what the child writes into
//!   the pair on over the rsocket, and, once the child first reads or
//!   waits to read (its claim: one byte over a pipe), passes what arrives
//!   on the rsocket to the child; the peer's end of file becomes the
//!   child's end of file.
//!
//! The parent keeps using the rsocket as before.  Before the claim the
//! relay leaves incoming data to the parent; after it the relay takes all
//! of it (two processes reading one socket get arbitrary parts, on the
//! kernel too).  The relay holds the rsocket open (`fdmap::hold`) until
//! the child's end of the pair is closed in every process that has it, so
//! a parent that closes its copy after the fork leaves the child's
//! connection open.  A fork that fails leaves a relay that ends at once.
//!
//! The atfork handlers (`prepare`, `parent`, `child`) run in the forking
//! thread with cancellation disabled; `prepare` and `parent` may allocate,
//! `child` only closes descriptors and stores atomics.

use crate::calls::{errno, inside, quiet, real, rs};
use crate::fdmap::{self, Entry, Fork, Kind};
use libc::{c_int, c_void, pollfd};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// Under RDMACM_RS_LOG: the relay's lines (set by the interposer).
pub static TRACE: AtomicBool = AtomicBool::new(false);

macro_rules! log {
    ($($t:tt)*) => {
        if TRACE.load(Ordering::Relaxed) {
            eprintln!("librspreload[{}]: {}", std::process::id(), format_args!($($t)*));
        }
    };
}

/// One rsocket split at a fork: `a` the parent's end of the pair, `b` the
/// child's; the claim pipe's read end `cr` (parent) and write end `cw`.
#[derive(Clone, Copy)]
struct Split {
    rs: c_int,
    a: c_int,
    b: c_int,
    cr: c_int,
    cw: c_int,
}

/// The splits made by `prepare`, taken by `parent` and `child`.
static PENDING: AtomicPtr<Vec<Split>> = AtomicPtr::new(std::ptr::null_mut());

/// In a child: the claim pipes, `b << 32 | cw` (+1 so that 0 is empty).
const CLAIMS: usize = 64;
static CLAIM: [AtomicU64; CLAIMS] = [const { AtomicU64::new(0) }; CLAIMS];

fn close_all(fds: &[c_int]) {
    for &fd in fds {
        // SAFETY: our own descriptors.
        unsafe { real::close(fd) };
    }
}

/// atfork prepare (parent, before the fork): a socket pair and a claim
/// pipe for each connected stream rsocket in the table.
pub fn prepare() {
    let mut list: Vec<Split> = Vec::new();
    fdmap::each(|_, e| {
        // (beyond CLAIMS splits the child could not claim: those stay the parent's)
        if e.kind != Kind::Rsocket || e.dgram || list.len() >= CLAIMS || list.iter().any(|s| s.rs == e.inner) {
            return;
        }
        // (a listening rsocket: nothing to relay)
        let mut acc: c_int = 0;
        let mut len = std::mem::size_of::<c_int>() as libc::socklen_t;
        // SAFETY: a c_int and its size.
        let listening = inside(|| unsafe {
            rs::rgetsockopt(e.inner, libc::SOL_SOCKET, libc::SO_ACCEPTCONN, (&mut acc as *mut c_int).cast(), &mut len)
        }) == 0
            && acc != 0;
        if listening {
            return;
        }
        let (mut sv, mut p) = ([0 as c_int; 2], [0 as c_int; 2]);
        // SAFETY: two-element arrays as the calls want.
        unsafe {
            if libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()) != 0 {
                return;
            }
            if libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                close_all(&sv);
                return;
            }
        }
        list.push(Split { rs: e.inner, a: sv[0], b: sv[1], cr: p[0], cw: p[1] });
    });
    if list.is_empty() {
        return;
    }
    let old = PENDING.swap(Box::into_raw(Box::new(list)), Ordering::AcqRel);
    if !old.is_null() {
        // SAFETY: a list stored by an earlier prepare whose fork ran no handler.
        drop(unsafe { Box::from_raw(old) });
    }
}

/// atfork parent handler: the child's ends are closed here and a relay
/// starts for each split (a fork that failed: it ends at once).
pub fn parent() {
    let p = PENDING.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if p.is_null() {
        return;
    }
    // SAFETY: stored by prepare, taken once.
    let list = unsafe { Box::from_raw(p) };
    for s in list.iter().copied() {
        close_all(&[s.b, s.cw]);
        fdmap::hold(s.rs);
        let t = spawn_relay(s);
        if t.is_err() {
            close_all(&[s.a, s.cr]);
            if fdmap::release(s.rs) {
                // SAFETY: the last holder of the rsocket lets it go.
                inside(|| unsafe { rs::rclose(s.rs) });
            }
        }
    }
}

/// atfork child handler, before the parent's rsockets are marked
/// inherited: each program descriptor of a split rsocket becomes the
/// child's end of its pair.
pub fn child() {
    let p = PENDING.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if p.is_null() {
        return;
    }
    // SAFETY: stored by prepare in the parent, taken once (the copy in
    // this process's memory; it is leaked: no free in an atfork child).
    let list: &Vec<Split> = unsafe { &*p };
    for c in &CLAIM {
        c.store(0, Ordering::Relaxed);
    }
    for (i, s) in list.iter().enumerate() {
        close_all(&[s.a, s.cr]);
        if let Some(c) = CLAIM.get(i) {
            c.store(((s.b as u32 as u64) << 32 | s.cw as u32 as u64) + 1, Ordering::Release);
        }
    }
    fdmap::each(|fd, e| {
        if e.kind != Kind::Rsocket {
            return;
        }
        if let Some(s) = list.iter().find(|s| s.rs == e.inner) {
            fdmap::set(fd, Entry { kind: Kind::Real, fork: Fork::Split, inner: s.b, ..e });
            fdmap::hold(s.b);
        }
    });
}

/// In the child: program descriptor `fd` (entry `e`, `Fork::Split`) is read
/// or waited on for reading: the relay is told once to pass the rsocket's
/// data to the child.
pub fn claim(fd: c_int, e: Entry) {
    for c in &CLAIM {
        let w = c.load(Ordering::Acquire);
        if w != 0 && ((w - 1) >> 32) as u32 as c_int == e.inner {
            let cw = (w - 1) as u32 as c_int;
            let one = 1u8;
            // SAFETY: one byte from a local into our pipe (write is a
            // cancellation point: none may act in the library's own work).
            quiet(|| unsafe { real::write(cw, (&one as *const u8).cast(), 1) });
            log!("fork mode: descriptor {fd}, inherited connection: the child reads it (relayed by the parent)");
        }
    }
    // every descriptor of this pair is claimed now
    fdmap::each(|f, x| {
        if x.fork == Fork::Split && x.inner == e.inner {
            fdmap::set(f, Entry { fork: Fork::Ready, ..x });
        }
    });
}

/// Sends all of `buf` on the rsocket (waiting out a non-blocking one).
fn send_all(r: c_int, mut buf: &[u8]) -> bool {
    while !buf.is_empty() {
        // SAFETY: our buffer.
        let n = inside(|| unsafe { rs::rsend(r, buf.as_ptr().cast(), buf.len(), 0) });
        if n > 0 {
            buf = &buf[n as usize..];
            continue;
        }
        match errno() {
            libc::EINTR => {}
            libc::EAGAIN => {
                let mut p = [pollfd { fd: r, events: libc::POLLOUT, revents: 0 }];
                // SAFETY: a one-entry list.
                inside(|| unsafe { rs::rpoll(p.as_mut_ptr(), 1, -1) });
            }
            _ => return false,
        }
    }
    true
}

/// Writes all of `buf` into the pair.
fn write_all(fd: c_int, mut buf: &[u8]) -> bool {
    while !buf.is_empty() {
        // SAFETY: our buffer.
        let n = unsafe { real::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n > 0 {
            buf = &buf[n as usize..];
        } else if n < 0 && errno() == libc::EINTR {
            continue;
        } else {
            return false;
        }
    }
    true
}

/// The relay thread of one split (see the module comment).
/// Starts the relay thread of split `s`.  It starts with every signal
/// blocked (the mask is set around its creation, so no signal reaches it
/// before it runs: the program's signals are not ours to take) and with
/// a stack size (without one std reads RUST_MIN_STACK with getenv(3), and
/// the library reads no environment but through secure_getenv).
fn spawn_relay(s: Split) -> std::io::Result<std::thread::JoinHandle<()>> {
    // SAFETY: sigset_t is plain data; all zero is a valid (empty) set.
    let (mut all, mut old): (libc::sigset_t, libc::sigset_t) = unsafe { std::mem::zeroed() };
    // SAFETY: local signal sets; the caller's mask is given back below.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    let t = std::thread::Builder::new().name("rspreload-relay".into()).stack_size(2 << 20).spawn(move || relay(s));
    // SAFETY: the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    t
}

fn relay(s: Split) {
    log!("fork mode: rsocket {} used by a child process: relayed through a socket pair", s.rs);
    let mut buf = vec![0u8; 64 * 1024];
    let (mut claimed, mut claim_open, mut rs_open) = (false, true, true);
    let (mut to_peer, mut to_child) = (0u64, 0u64);
    loop {
        let mut fds = [pollfd { fd: s.a, events: libc::POLLIN, revents: 0 }; 3];
        let mut n = 1;
        let ci = (!claimed && claim_open).then(|| {
            fds[n].fd = s.cr;
            n += 1;
            n - 1
        });
        let ri = (claimed && rs_open).then(|| {
            fds[n].fd = s.rs;
            n += 1;
            n - 1
        });
        let r = if ri.is_some() {
            // SAFETY: n entries of fds.
            inside(|| unsafe { rs::rpoll(fds.as_mut_ptr(), n as libc::nfds_t, -1) })
        } else {
            // SAFETY: as above.
            unsafe { real::poll(fds.as_mut_ptr(), n as libc::nfds_t, -1) }
        };
        if r < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            break;
        }
        if fds[0].revents != 0 {
            // SAFETY: our buffer.
            let k = unsafe { real::read(s.a, buf.as_mut_ptr().cast::<c_void>(), buf.len()) };
            if k <= 0 {
                break; // the child's end is closed everywhere
            }
            if !send_all(s.rs, &buf[..k as usize]) {
                break;
            }
            to_peer += k as u64;
        }
        if let Some(i) = ci {
            if fds[i].revents != 0 {
                let mut c = 0u8;
                // SAFETY: one byte into a local.
                let k = unsafe { real::read(s.cr, (&mut c as *mut u8).cast(), 1) };
                if k == 1 {
                    claimed = true;
                } else {
                    claim_open = false;
                }
            }
        }
        if let Some(i) = ri {
            if fds[i].revents != 0 {
                // SAFETY: our buffer.
                let k = inside(|| unsafe { rs::rrecv(s.rs, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) });
                if k > 0 {
                    if !write_all(s.a, &buf[..k as usize]) {
                        break;
                    }
                    to_child += k as u64;
                } else if k == 0 || ![libc::EAGAIN, libc::EINTR].contains(&errno()) {
                    // the peer's end of file (or an error): the child's end of file
                    rs_open = false;
                    // SAFETY: our socket.
                    unsafe { real::shutdown(s.a, libc::SHUT_WR) };
                }
            }
        }
    }
    log!("fork mode: relay of rsocket {} ends: {to_peer} bytes from the child to the peer, {to_child} to the child", s.rs);
    close_all(&[s.a, s.cr]);
    if fdmap::release(s.rs) {
        // SAFETY: the last holder of the rsocket lets it go.
        inside(|| unsafe { rs::rclose(s.rs) });
    }
}
