// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Which descriptors the program holds are stand-ins for rsockets.
//!
//! A socket the library takes over is shown to the program as a descriptor
//! of its own (an open /dev/null, so the kernel never hands the number to
//! anyone else); the table maps that number to the descriptor that does the
//! work: an rsocket, an repoll set, or (fork mode) a real TCP socket still
//! waiting to become an rsocket.  Every interposed call looks its
//! descriptor up here, so a lookup is two atomic loads and no lock.
//!
//! The table is two-level: chunks of slots, allocated on first use and
//! never freed, so a lookup racing a close of the same number reads a
//! stale or empty entry, never freed memory.  A slot's entry is one 64-bit
//! word, so a reader always sees one consistent entry.  The same slots also
//! count, by *inner* descriptor number, how many program descriptors share
//! that inner descriptor (dup, dup2): the inner one is closed with the last.

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

const CHUNK: usize = 1024;
const CHUNKS: usize = 1024;

/// What a program descriptor stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An rsocket (inner = its rsocket descriptor).
    Rsocket,
    /// An repoll set (inner = repoll_create's descriptor).
    Repoll,
    /// Fork mode: a real TCP socket (inner) that becomes an rsocket later.
    Real,
    /// An rsocket or repoll set made by the parent process, seen in a
    /// child made by fork(2): it lives in the parent (its queues, its
    /// connection), so in this process every call on it fails (see
    /// [`inherit_all`]).  `inner` is the parent's number, never used here.
    Inherited,
}

/// Fork-mode progress of a [`Kind::Real`] socket (upstream's states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fork {
    /// Nothing pending.
    Ready,
    /// Created in fork mode; neither connected nor listening yet.
    Fresh,
    /// A listening TCP socket whose accepted sockets turn into rsockets.
    Listen,
    /// Connected over TCP; becomes an rsocket at its first data call.
    Active,
    /// Accepted over TCP; becomes an rsocket at its first data call.
    Passive,
    /// In a child made by fork(2): the child's end of a connection the
    /// parent relays (`split`); the child has not yet read from it.
    Split,
}

/// One table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    pub fork: Fork,
    /// The descriptor that does the work.
    pub inner: i32,
    /// The domain the socket was created with (AF_INET, AF_INET6 or
    /// AF_IB), for replacing it by a real socket when rconnect fails.
    pub domain: i32,
    /// A datagram socket (SOCK_DGRAM) rather than a stream.
    pub dgram: bool,
}

struct Slot {
    word: AtomicU64,
    refs: AtomicU32,
}

type Chunk = [Slot; CHUNK];

static TABLE: [AtomicPtr<Chunk>; CHUNKS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNKS];

fn encode(e: Entry) -> u64 {
    let kind = match e.kind {
        Kind::Rsocket => 1u64,
        Kind::Repoll => 2,
        Kind::Real => 3,
        Kind::Inherited => 4,
    };
    let fork = match e.fork {
        Fork::Ready => 0u64,
        Fork::Fresh => 1,
        Fork::Listen => 2,
        Fork::Active => 3,
        Fork::Passive => 4,
        Fork::Split => 5,
    };
    let domain = match e.domain {
        libc::AF_INET6 => 1u64,
        libc::AF_IB => 2,
        _ => 0,
    };
    (e.inner as u32 as u64) | kind << 32 | fork << 40 | domain << 48 | (e.dgram as u64) << 52
}

fn decode(w: u64) -> Option<Entry> {
    let kind = match (w >> 32) & 0xff {
        1 => Kind::Rsocket,
        2 => Kind::Repoll,
        3 => Kind::Real,
        4 => Kind::Inherited,
        _ => return None,
    };
    let fork = match (w >> 40) & 0xff {
        1 => Fork::Fresh,
        2 => Fork::Listen,
        3 => Fork::Active,
        4 => Fork::Passive,
        5 => Fork::Split,
        _ => Fork::Ready,
    };
    let domain = match (w >> 48) & 3 {
        1 => libc::AF_INET6,
        2 => libc::AF_IB,
        _ => libc::AF_INET,
    };
    Some(Entry { kind, fork, inner: w as u32 as i32, domain, dgram: (w >> 52) & 1 != 0 })
}

fn slot(fd: i32, create: bool) -> Option<&'static Slot> {
    let i = usize::try_from(fd).ok()?;
    let (c, j) = (i / CHUNK, i % CHUNK);
    let cell = TABLE.get(c)?;
    let mut p = cell.load(Ordering::Acquire);
    if p.is_null() {
        if !create {
            return None;
        }
        let fresh: Box<Chunk> = Box::new([const { Slot { word: AtomicU64::new(0), refs: AtomicU32::new(0) } }; CHUNK]);
        let fresh = Box::into_raw(fresh);
        p = match cell.compare_exchange(std::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => fresh,
            Err(other) => {
                // SAFETY: `fresh` came from Box::into_raw above and was never published.
                drop(unsafe { Box::from_raw(fresh) });
                other
            }
        };
    }
    // SAFETY: a published chunk is never freed or moved (see the module comment).
    Some(unsafe { &(*p)[j] })
}

/// The entry of program descriptor `fd`, if it stands for something.
#[inline]
pub fn get(fd: i32) -> Option<Entry> {
    decode(slot(fd, false)?.word.load(Ordering::Acquire))
}

/// Records what `fd` stands for.  False when `fd` is beyond the table.
pub fn set(fd: i32, e: Entry) -> bool {
    match slot(fd, true) {
        Some(s) => {
            s.word.store(encode(e), Ordering::Release);
            true
        }
        None => false,
    }
}

/// Forgets `fd`; returns what it stood for.
pub fn clear(fd: i32) -> Option<Entry> {
    decode(slot(fd, false)?.word.swap(0, Ordering::AcqRel))
}

/// One more program descriptor shares inner descriptor `inner`.
pub fn hold(inner: i32) {
    if let Some(s) = slot(inner, true) {
        s.refs.fetch_add(1, Ordering::AcqRel);
    }
}

/// One program descriptor less shares `inner`; true when it was the last.
pub fn release(inner: i32) -> bool {
    match slot(inner, false) {
        Some(s) => {
            let mut cur = s.refs.load(Ordering::Acquire);
            loop {
                if cur <= 1 {
                    s.refs.store(0, Ordering::Release);
                    return true;
                }
                match s.refs.compare_exchange(cur, cur - 1, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return false,
                    Err(now) => cur = now,
                }
            }
        }
        None => true,
    }
}

/// In a child just made by fork(2): every rsocket and repoll set in the
/// table becomes [`Kind::Inherited`] (they belong to the parent).  Only
/// atomic loads and stores, no allocation and no lock: fit for an atfork
/// child handler.
pub fn inherit_all() {
    for cell in &TABLE {
        let p = cell.load(Ordering::Acquire);
        if p.is_null() {
            continue;
        }
        // SAFETY: a published chunk is never freed or moved (see the module comment).
        for s in unsafe { &*p } {
            let w = s.word.load(Ordering::Acquire);
            if let Some(e @ Entry { kind: Kind::Rsocket | Kind::Repoll, .. }) = decode(w) {
                s.word.store(encode(Entry { kind: Kind::Inherited, ..e }), Ordering::Release);
            }
        }
    }
}

/// Calls `f` with every descriptor in the table and its entry.  Only
/// atomic loads: fit for an atfork handler.
pub fn each(mut f: impl FnMut(i32, Entry)) {
    for (c, cell) in TABLE.iter().enumerate() {
        let p = cell.load(Ordering::Acquire);
        if p.is_null() {
            continue;
        }
        // SAFETY: a published chunk is never freed or moved (see the module comment).
        for (j, s) in unsafe { &*p }.iter().enumerate() {
            if let Some(e) = decode(s.word.load(Ordering::Acquire)) {
                f((c * CHUNK + j) as i32, e);
            }
        }
    }
}

/// The highest descriptor number the table can hold.
pub const MAX_FD: usize = CHUNK * CHUNKS - 1;

#[cfg(test)]
mod tests {
    use super::*;

    // the tests share the one table: inherit_all must not see another test's entries
    static TABLE_USERS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn entries_round_trip() {
        for kind in [Kind::Rsocket, Kind::Repoll, Kind::Real, Kind::Inherited] {
            for fork in [Fork::Ready, Fork::Fresh, Fork::Listen, Fork::Active, Fork::Passive, Fork::Split] {
                for domain in [libc::AF_INET, libc::AF_INET6, libc::AF_IB] {
                    for inner in [0, 7, 65535, i32::MAX] {
                        for dgram in [false, true] {
                            let e = Entry { kind, fork, inner, domain, dgram };
                            assert_eq!(decode(encode(e)), Some(e));
                        }
                    }
                }
            }
        }
        assert_eq!(decode(0), None);
    }

    #[test]
    fn set_get_clear_and_refs() {
        let _one = TABLE_USERS.lock().unwrap_or_else(|e| e.into_inner());
        let e = Entry { kind: Kind::Rsocket, fork: Fork::Ready, inner: 900_001, domain: libc::AF_INET, dgram: false };
        assert!(get(5000).is_none());
        assert!(set(5000, e));
        assert_eq!(get(5000), Some(e));
        assert_eq!(clear(5000), Some(e));
        assert!(get(5000).is_none());
        assert!(!set(-1, e));
        assert!(!set(MAX_FD as i32 + 1, e));
        hold(4000);
        hold(4000);
        assert!(!release(4000));
        assert!(release(4000));
        assert!(release(4001));
    }

    #[test]
    fn each_visits_every_entry_once() {
        let _one = TABLE_USERS.lock().unwrap_or_else(|e| e.into_inner());
        let e = Entry { kind: Kind::Rsocket, fork: Fork::Split, inner: 41, domain: libc::AF_INET, dgram: false };
        let fds = [8000, 8001, 9000 + CHUNK as i32];
        for (i, fd) in fds.iter().enumerate() {
            assert!(set(*fd, Entry { inner: 41 + i as i32, ..e }));
        }
        let mut seen = Vec::new();
        each(|fd, x| seen.push((fd, x.inner)));
        seen.sort();
        assert_eq!(seen, vec![(8000, 41), (8001, 42), (9000 + CHUNK as i32, 43)]);
        for fd in fds {
            clear(fd);
        }
    }

    #[test]
    fn inherit_all_marks_rsockets_and_sets_only() {
        let _one = TABLE_USERS.lock().unwrap_or_else(|e| e.into_inner());
        let base = Entry { kind: Kind::Rsocket, fork: Fork::Ready, inner: 77, domain: libc::AF_INET6, dgram: true };
        let real = Entry { kind: Kind::Real, fork: Fork::Passive, inner: 78, ..base };
        let set_ = Entry { kind: Kind::Repoll, inner: 79, ..base };
        assert!(set(6000, base));
        assert!(set(6001, real));
        assert!(set(7000 + CHUNK as i32, set_));
        inherit_all();
        assert_eq!(get(6000), Some(Entry { kind: Kind::Inherited, ..base }));
        assert_eq!(get(6001), Some(real));
        assert_eq!(get(7000 + CHUNK as i32), Some(Entry { kind: Kind::Inherited, ..set_ }));
        assert!(get(6002).is_none());
        for fd in [6000, 6001, 7000 + CHUNK as i32] {
            clear(fd);
        }
    }
}
