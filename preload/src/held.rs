// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! What a thread holds while it waits in a forwarded call: the placeholder
//! descriptor made ready for the call's result (socket, accept,
//! epoll_create make it before the call, as upstream's library does, so
//! that a program out of descriptors gets EMFILE before a connection is
//! taken), and a scratch buffer (poll and select over stand-ins, sendfile
//! to an rsocket).
//!
//! They are kept in the thread's own storage, not in the frame that makes
//! the call: a thread cancelled in the call ends with a forced unwind
//! through that frame, which must hold nothing to free (see `interpose`).
//! If the thread ends there, its storage is let go at thread exit and
//! closes the placeholder and frees the buffer.  Nothing is left behind,
//! except in one case: a signal handler that makes such a call while its
//! thread waits in another, and ends the thread inside it (then one
//! placeholder or buffer stays: the outer call's placeholder, the inner
//! call's buffer).

use crate::calls::close_nocancel;
use libc::{c_int, pollfd};
use std::cell::Cell;

/// A scratch buffer kept for the next call is at most this many 8-byte
/// words (64 KiB); a larger one is freed when its call is done.
const KEEP_WORDS: usize = 8192;

struct Held {
    /// placeholder reserved for the call in progress, or -1
    fd: Cell<c_int>,
    /// the thread's scratch buffer (`words` 8-byte words), or null
    buf: Cell<*mut u64>,
    words: Cell<usize>,
    /// a call is using `buf`
    busy: Cell<bool>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let fd = self.fd.get();
        if fd >= 0 {
            close_nocancel(fd);
        }
        free(self.buf.get(), self.words.get());
    }
}

thread_local! {
    static HELD: Held = const {
        Held { fd: Cell::new(-1), buf: Cell::new(std::ptr::null_mut()), words: Cell::new(0), busy: Cell::new(false) }
    };
}

/// A placeholder reserved for one call (plain data: the calling frame
/// holds it across the call).
#[derive(Clone, Copy, Debug)]
pub struct Reserved {
    pub fd: c_int,
    prev: c_int,
}

/// Keeps `fd` (a placeholder) on the thread's list until [`unreserve`]:
/// closed at thread exit if the thread ends before.
pub fn reserve(fd: c_int) -> Reserved {
    let prev = HELD.try_with(|h| h.fd.replace(fd)).unwrap_or(-1);
    Reserved { fd, prev }
}

/// The call returned: `r.fd` is the caller's again.
pub fn unreserve(r: Reserved) -> c_int {
    let _ = HELD.try_with(|h| h.fd.set(r.prev));
    r.fd
}

/// A buffer for one call (plain data, like [`Reserved`]).
#[derive(Clone, Copy, Debug)]
pub struct Buf {
    ptr: *mut u64,
    words: usize,
    /// not the thread's buffer but one of its own (the thread's was in use)
    own: bool,
}

impl Buf {
    pub fn pollfds(self) -> *mut pollfd {
        self.ptr.cast()
    }

    pub fn bytes(self) -> *mut u8 {
        self.ptr.cast()
    }
}

fn alloc(words: usize) -> *mut u64 {
    Box::into_raw(vec![0u64; words].into_boxed_slice()).cast()
}

fn free(ptr: *mut u64, words: usize) {
    if !ptr.is_null() {
        // SAFETY: ptr and words came from `alloc` and are freed once.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, words)) });
    }
}

/// A buffer of at least `bytes` bytes (8-byte aligned), zeroed when new.
pub fn take(bytes: usize) -> Buf {
    let need = bytes.div_ceil(8).max(1);
    let thread = HELD.try_with(|h| {
        // (marked first: a signal handler's call from here on takes its own)
        if h.busy.replace(true) {
            return None;
        }
        if h.words.get() < need {
            free(h.buf.replace(std::ptr::null_mut()), h.words.replace(0));
            h.buf.set(alloc(need));
            h.words.set(need);
        }
        Some(Buf { ptr: h.buf.get(), words: h.words.get(), own: false })
    });
    thread.ok().flatten().unwrap_or_else(|| Buf { ptr: alloc(need), words: need, own: true })
}

/// The call is done with `b`.
pub fn give(b: Buf) {
    if b.own {
        free(b.ptr, b.words);
        return;
    }
    let _ = HELD.try_with(|h| {
        h.busy.set(false);
        if h.words.get() > KEEP_WORDS {
            free(h.buf.replace(std::ptr::null_mut()), h.words.replace(0));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_and_nested_calls_get_their_own() {
        let a = take(100);
        assert!(!a.own && a.words >= 13);
        // a signal handler's call while `a` is in use
        let b = take(16);
        assert!(b.own);
        give(b);
        give(a);
        let c = take(8);
        assert!(!c.own);
        assert_eq!(c.ptr, a.ptr);
        give(c);
        // a large buffer is not kept
        let d = take(KEEP_WORDS * 8 + 8);
        assert!(!d.own);
        give(d);
        HELD.with(|h| assert!(h.buf.get().is_null() && h.words.get() == 0 && !h.busy.get()));
    }

    #[test]
    fn a_placeholder_left_reserved_is_closed_at_thread_exit() {
        // SAFETY: a NUL-terminated path.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: fcntl on a plain integer.
        let open = |fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
        // the thread reserves it and ends without giving it back, as a
        // thread cancelled in the call does (its buffer is in use too)
        std::thread::spawn(move || {
            let r = reserve(fd);
            assert_eq!(r.prev, -1);
            let _ = take(64);
        })
        .join()
        .unwrap();
        assert!(!open(fd));
        // a reservation given back is the caller's to close
        // SAFETY: as above.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        assert!(fd >= 0);
        std::thread::spawn(move || {
            let r = reserve(fd);
            assert_eq!(unreserve(r), fd);
        })
        .join()
        .unwrap();
        assert!(open(fd));
        close_nocancel(fd);
    }
}
