// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A Rust program with a global allocator of its own builds and runs with
//! `rdmacm`: the crate declares none (two would not link), the program's
//! allocator serves the library's allocations, and the library's fallible
//! allocations report the program's allocator's failure as ENOMEM instead
//! of aborting.  (`make test-rust` runs it; no RDMA device is needed.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// libc's allocator, counted, and failing on request (per thread).
struct Counting;

static SERVED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// While set, every allocation of this thread fails.
    static FAIL: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to System; a failing allocation returns null, which
// GlobalAlloc allows.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if FAIL.try_with(Cell::get).unwrap_or(false) {
            return std::ptr::null_mut();
        }
        SERVED.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: p came from System (alloc above).
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static OURS: Counting = Counting;

use rdmacm::internal::sys::alloc as fallible;

#[test]
fn the_program_keeps_its_allocator() {
    // The library's own allocator is not the global one here.
    assert!(!fallible::installed());
    let before = SERVED.load(Ordering::Relaxed);
    let a = fallible::try_arc([7u64; 8]).unwrap();
    let b = fallible::try_box([9u32; 33]).unwrap();
    assert_eq!((a[7], b[32]), (7, 9));
    assert!(SERVED.load(Ordering::Relaxed) >= before + 2, "the program's allocator served the library");
    // A public call that allocates (and needs no device).
    let e = rdmacm::Error::from_errno(libc::ENOMEM);
    assert_eq!(e.to_string(), rdmacm::Error::from_errno(libc::ENOMEM).to_string());
}

#[test]
fn a_failing_allocator_is_enomem_not_an_abort() {
    FAIL.with(|f| f.set(true));
    let boxed = fallible::try_box([1u8; 100]);
    let raw = fallible::try_box_uninit::<[u64; 4]>();
    let mut v: Vec<u8> = Vec::new();
    let pushed = fallible::try_push(&mut v, 1);
    FAIL.with(|f| f.set(false));
    assert_eq!(boxed.unwrap_err(), nix::errno::Errno::ENOMEM);
    assert_eq!(raw.unwrap_err(), nix::errno::Errno::ENOMEM);
    assert_eq!(pushed.unwrap_err(), nix::errno::Errno::ENOMEM);
    // And with memory back, the same calls succeed.
    assert_eq!(*fallible::try_box(5u8).unwrap(), 5);
}
