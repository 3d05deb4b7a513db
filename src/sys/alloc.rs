// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Fallible allocation for std's containers, and the allocator that makes
//! it complete in the C library.
//!
//! On stable Rust an allocation that std makes and that fails ends in
//! `handle_alloc_error`, which aborts; a C library cannot do that to the
//! MPI rank or storage daemon that loaded it when the first `malloc` of
//! `rdma_create_id` fails.  This crate does not choose a Rust program's
//! allocator (it declares no `#[global_allocator]`); the C library's crate
//! (`rdmacm-capi`, librdmacm.so.1) declares [`Alloc`] as its global
//! allocator, and with it every function here returns ENOMEM instead of
//! aborting.
//!
//! [`Alloc`] is libc's `malloc` family ([`System`]) with a way to make one
//! `Arc::new`/`Box::new` fail with ENOMEM: [`reserved`] allocates the
//! block the next allocation will need *before* std asks for it (a plain,
//! checked `malloc`), parks it in a per-thread slot, and runs the closure
//! that makes the container; the allocator hands the parked block to the
//! first request of this thread that fits it.  So the one allocation that
//! could fail fails where we can still return ENOMEM, and std's own request
//! cannot fail.  A block the closure did not take is freed when
//! [`reserved`] returns.  The cost for every other allocation: one relaxed
//! atomic load.
//!
//! Under any other global allocator (a Rust program's own, or std's
//! default): [`try_box`] and [`try_box_uninit`] ask the global allocator
//! directly and report a null answer as ENOMEM (they never abort);
//! [`try_arc`] and [`reserved`] cannot hand std a block (std asks the
//! program's allocator, which knows nothing of the slot) and make the
//! container as std does: a failed allocation there is handled by Rust's
//! rule for the program (`handle_alloc_error`), as every other allocation
//! of that program.  [`installed`] tells which case applies.
//!
//! Vectors, strings and maps use std's own `try_reserve` instead.

use nix::errno::Errno;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

/// libc's allocator, with the per-thread reserved block (see the module).
/// The C library's crate declares it its `#[global_allocator]`; this crate
/// does not (its unit tests do, to test the mechanism).
pub struct Alloc;

#[cfg(test)]
#[global_allocator]
static GLOBAL: Alloc = Alloc;

/// How many threads have a block parked: the allocator looks at its
/// thread-local slot only when this is not zero.
static PARKED: AtomicUsize = AtomicUsize::new(0);

#[derive(Clone, Copy)]
struct Parked {
    ptr: *mut u8,
    size: usize,
    align: usize,
}

const EMPTY: Parked = Parked { ptr: std::ptr::null_mut(), size: 0, align: 0 };

thread_local! {
    // A `Cell` of a `Copy` value with a const initialiser: no destructor
    // is registered, so the allocator may touch it at any time (during
    // thread exit `try_with` fails and the slot is simply not used).
    static SLOT: Cell<Parked> = const { Cell::new(EMPTY) };
}

/// The parked block of this thread if `l` fits in it; the slot is emptied.
fn take(l: Layout) -> Option<*mut u8> {
    SLOT.try_with(|s| {
        let p = s.get();
        if p.ptr.is_null() || l.size() > p.size || l.align() > p.align {
            return None;
        }
        s.set(EMPTY);
        PARKED.fetch_sub(1, Ordering::Relaxed);
        Some(p.ptr)
    })
    .ok()
    .flatten()
}

// SAFETY: every method forwards to `System` (libc malloc/free), except
// that `alloc`/`alloc_zeroed` may return a parked block: one that
// `System.alloc` returned for a layout at least as large and at least as
// aligned as the request, owned by nobody else (it left the slot in
// `take`).  `System.dealloc`/`realloc` accept such a block with the smaller
// layout: on Unix they call `free`/`realloc` (or copy for over-aligned
// layouts), which do not depend on the size or alignment passed.
unsafe impl GlobalAlloc for Alloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if PARKED.load(Ordering::Relaxed) != 0 {
            if let Some(p) = take(l) {
                return p;
            }
        }
        // SAFETY: the caller's contract (non-zero size) is passed on.
        unsafe { System.alloc(l) }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if PARKED.load(Ordering::Relaxed) != 0 {
            if let Some(p) = take(l) {
                // SAFETY: p is a block of at least l.size() bytes (take).
                unsafe { std::ptr::write_bytes(p, 0, l.size()) };
                return p;
            }
        }
        // SAFETY: as in alloc.
        unsafe { System.alloc_zeroed(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: p came from this allocator (System, possibly via the slot).
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: as in dealloc; the caller's contract is passed on.
        unsafe { System.realloc(p, l, new) }
    }
}

/// Whether [`Alloc`] is the program's global allocator: 0 not known yet,
/// 1 yes, 2 no.
static INSTALLED: AtomicU8 = AtomicU8::new(0);

/// Whether [`Alloc`] is the program's global allocator (so that
/// [`reserved`] and [`try_arc`] report ENOMEM instead of aborting).  Found
/// once, by parking a block and asking the global allocator for one of its
/// layout: [`Alloc`] takes the parked block out of the slot, any other
/// allocator leaves it there.  The question is asked with
/// `std::alloc::alloc`, which returns null on failure (never aborts); a
/// failure leaves it undecided (false here).
pub fn installed() -> bool {
    probe().unwrap_or(false)
}

/// [`installed`], with ENOMEM when the question could not be asked for
/// lack of memory.
fn probe() -> Result<bool, Errno> {
    match INSTALLED.load(Ordering::Relaxed) {
        1 => return Ok(true),
        2 => return Ok(false),
        _ => {}
    }
    let l = Layout::new::<[usize; 2]>();
    // SAFETY: the size is not zero.
    let ptr = unsafe { System.alloc(l) };
    if ptr.is_null() {
        return Err(Errno::ENOMEM);
    }
    let parked = Parked { ptr, size: l.size(), align: l.align() };
    let answer = SLOT.try_with(|s| {
        if !s.get().ptr.is_null() {
            // A block of this thread is parked already (asked from a
            // closure of `reserved`): undecided, asked again later.
            return Ok(false);
        }
        s.set(parked);
        PARKED.fetch_add(1, Ordering::Relaxed);
        // The global allocator, called through a pointer the optimiser
        // cannot see through: it may drop an allocation that is only freed
        // again (and the question with it: in the C library's release
        // build the answer was "no").
        let ask: unsafe fn(Layout) -> *mut u8 = std::hint::black_box(std::alloc::alloc);
        // SAFETY: the size is not zero.
        let got = std::hint::black_box(unsafe { ask(l) });
        // The answer is the slot's: a fresh allocation is assumed by the
        // compiler to differ from every live pointer, so `got == ptr`
        // cannot be asked.
        let taken = s.get().ptr != ptr;
        if !taken {
            // Another allocator answered (or failed).
            s.set(EMPTY);
            PARKED.fetch_sub(1, Ordering::Relaxed);
        }
        if got.is_null() {
            return Err(Errno::ENOMEM);
        }
        // SAFETY: got came from the global allocator with layout l (the
        // parked block when Alloc is global: its dealloc is System's).
        unsafe { std::alloc::dealloc(got, l) };
        INSTALLED.store(if taken { 1 } else { 2 }, Ordering::Relaxed);
        Ok(taken)
    });
    // A block not handed out (or never parked: during thread exit) is
    // ours to free.
    let freed = !matches!(answer, Ok(Ok(true)));
    if freed {
        // SAFETY: ptr came from System.alloc(l) above and is not in use:
        // not parked, or taken back from the slot.
        unsafe { System.dealloc(ptr, l) };
    }
    answer.unwrap_or(Ok(false))
}

/// Runs `make` with a block of `layout` allocated and parked for the first
/// allocation of this thread that fits it; ENOMEM (and `make` not run)
/// when the block cannot be had.  Meant for a closure that allocates once,
/// such as `|| Arc::new(value)`.  When [`Alloc`] is not the global
/// allocator ([`installed`]), `make` simply runs (its allocation follows
/// the program's rule for a failed allocation).
pub fn reserved<R>(layout: Layout, make: impl FnOnce() -> R) -> Result<R, Errno> {
    if layout.size() == 0 || !probe()? {
        return Ok(make());
    }
    // SAFETY: the size is not zero.
    let ptr = unsafe { System.alloc(layout) };
    if ptr.is_null() {
        return Err(Errno::ENOMEM);
    }
    let parked = Parked { ptr, size: layout.size(), align: layout.align() };
    // One visit to the thread's slot for parking, running `make` and
    // taking back a block it left (each visit costs a TLS
    // lookup).  An earlier block still parked on this thread (only if
    // `make` of an outer call allocates through a nested one) is kept, and
    // this block given back, so nothing is lost.
    let mut make = Some(make);
    let done = SLOT.try_with(|s| {
        if !s.get().ptr.is_null() {
            return None;
        }
        s.set(parked);
        PARKED.fetch_add(1, Ordering::Relaxed);
        let out = (make.take().expect("make runs once"))();
        // Not taken (make allocated nothing that fits): free it.
        if s.get().ptr == ptr {
            s.set(EMPTY);
            PARKED.fetch_sub(1, Ordering::Relaxed);
            // SAFETY: the block left the slot unused; it is ours to free.
            unsafe { System.dealloc(ptr, layout) };
        }
        Some(out)
    });
    match done {
        Ok(Some(out)) => Ok(out),
        _ => {
            // SAFETY: ptr came from System.alloc(layout) just above and
            // was never parked.
            unsafe { System.dealloc(ptr, layout) };
            Ok((make.take().expect("make runs once"))())
        }
    }
}

/// The layout of the allocation `Arc::new` makes for a `T`: the two
/// reference counts followed by the value.  (If std ever laid it out
/// differently the parked block would simply not be taken; the unit test
/// `arc_takes_the_parked_block` would notice.)
pub fn arc_layout<T>() -> Layout {
    let counts = Layout::new::<[usize; 2]>();
    match counts.extend(Layout::new::<T>()) {
        Ok((l, _)) => l.pad_to_align(),
        Err(_) => counts,
    }
}

/// `Arc::new(v)`, ENOMEM instead of an abort when memory is short and
/// [`Alloc`] is the global allocator (otherwise `Arc::new(v)`: see the
/// module).
pub fn try_arc<T>(v: T) -> Result<Arc<T>, Errno> {
    reserved(arc_layout::<T>(), move || Arc::new(v))
}

/// `Box::new(v)`, ENOMEM instead of an abort when memory is short, under
/// any global allocator (the block is asked for directly, as in
/// [`try_box_uninit`]).
pub fn try_box<T>(v: T) -> Result<Box<T>, Errno> {
    let mut b = try_box_uninit::<T>()?;
    b.write(v);
    // SAFETY: written just above.
    Ok(unsafe { b.assume_init() })
}

/// An uninitialised `Box<T>`, ENOMEM instead of an abort when memory is
/// short.  Cheaper than [`try_box`] (no parked block: the global allocator
/// is asked directly, and a null answer is ours to report) and the value
/// can be built in place, field by field, with no copy of a large struct.
pub fn try_box_uninit<T>() -> Result<Box<std::mem::MaybeUninit<T>>, Errno> {
    let l = Layout::new::<T>();
    if l.size() == 0 {
        return Ok(Box::new_uninit());
    }
    // SAFETY: the size is not zero.
    let p = unsafe { std::alloc::alloc(l) } as *mut std::mem::MaybeUninit<T>;
    if p.is_null() {
        return Err(Errno::ENOMEM);
    }
    // SAFETY: p came from the global allocator with the layout of T (and
    // so of MaybeUninit<T>), as Box requires; MaybeUninit needs no
    // initialisation.
    Ok(unsafe { Box::from_raw(p) })
}

/// `v.push(x)`, ENOMEM instead of an abort when memory is short.
pub fn try_push<T>(v: &mut Vec<T>, x: T) -> Result<(), Errno> {
    v.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
    v.push(x);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the next allocation of this thread, made by `f`, got the
    /// parked block.
    fn took<R>(layout: Layout, f: impl FnOnce() -> R) -> bool {
        let mut got = false;
        reserved(layout, || {
            f();
            got = SLOT.with(|s| s.get().ptr.is_null());
        })
        .unwrap();
        assert!(SLOT.with(|s| s.get().ptr.is_null()), "the slot is empty after reserved()");
        got
    }

    #[test]
    fn arc_takes_the_parked_block() {
        #[allow(dead_code)]
        struct Big([u64; 9], u8);
        assert!(took(arc_layout::<Big>(), || Arc::new(Big([1; 9], 2))));
        assert!(took(arc_layout::<u8>(), || Arc::new(7u8)));
        assert!(took(Layout::new::<[u32; 5]>(), || Box::new([3u32; 5])));
    }

    /// The unit tests' binary declares `Alloc` (the C library's crate
    /// does the same); tests/own_allocator.rs runs under another one.
    #[test]
    fn the_probe_finds_the_allocator() {
        assert!(installed());
        assert!(SLOT.with(|s| s.get().ptr.is_null()));
    }

    #[test]
    fn an_unused_block_is_freed_and_the_slot_emptied() {
        assert!(!took(Layout::new::<[u8; 64]>(), || 5));
        assert!(SLOT.with(|s| s.get().ptr.is_null()));
        // A request larger than the block does not take it.
        assert!(!took(Layout::new::<[u8; 8]>(), || Box::new([0u8; 32])));
    }

    #[test]
    fn nested_reservations_keep_both_blocks_accounted() {
        let v = try_arc(try_box(41u32).unwrap()).unwrap();
        assert_eq!(**v, 41);
        let mut xs = Vec::new();
        try_push(&mut xs, 1u8).unwrap();
        assert_eq!(xs, [1]);
    }
}
