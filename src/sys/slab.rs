// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Type-stable memory: objects that C knows by their address, kept in
//! slots of one region the library owns, so that a C pointer is checked by
//! an address range, an alignment and one atomic word instead of a lookup
//! in a table.  (Over 800 lines: the store and its unit tests, half of
//! the file, are one unit.)
//!
//! A [`Slab<T>`] holds at most `cap` slots in segments it allocates as
//! they are needed: the first takes 64 KiB, each next one twice the one
//! before (so a slab of n slots takes less than 2n slots' worth of memory
//! and address space, and a few segments cover any number a process makes:
//! a C pointer is compared with each segment's range).  A segment is a
//! zeroed block of the C library's allocator (`calloc`: ENOMEM when it
//! fails; large blocks are fresh pages, resident only when touched), so
//! that leak checkers (LeakSanitizer, valgrind) see the memory an object
//! holds as reachable through it, as they would see upstream's objects.
//! A segment is never freed and a slot is never anything but a slot of
//! `T`: memory inside a segment is always a slot whose state word may be
//! read, whatever C hands in.
//!
//! A slot is the object (`value`, first: its address is the slot's, the
//! address C holds) followed by one state word:
//!
//! | bits | meaning |
//! |---|---|
//! | 63..32 | generation: changes each time the slot is freed |
//! | 31 | `LIVE`: found by [`Slab::get`] (published, not retired) |
//! | 30 | `FREE`: no object (bits 29..0 are then the next free slot) |
//! | 29..0 | references ([`Ref`]) held, while not `FREE` |
//!
//! An object stays in its slot while it is `LIVE` or a [`Ref`] holds it;
//! the thread whose change makes it neither (the last [`Ref`] dropped, or
//! [`Slab::retire`] of an object no one holds) drops it and frees the slot.
//! [`Slab::get`] takes a reference only from a `LIVE` state and
//! [`Weak::upgrade`] only from a state with the same generation that is
//! `LIVE` or held, each by one compare-and-swap of the whole word: no
//! lookup can take an object that is being dropped, nor a later object of
//! the same slot for an earlier one (the generation differs).
//!
//! Threads: lookups, clones and drops of references, and the free list
//! (allocation and freeing), are lock-free; one lock is taken when the
//! free list is empty, to hand out a new slot (and map a segment when it
//! is the first of one), never across anything that blocks.
//!
//! A stale pointer to a slot that a new object took since is, as with any
//! allocator that reuses memory, the new object: the generation protects
//! the library's own weak references, not C's.

use nix::errno::Errno;
use parking_lot::Mutex;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

const LIVE: u64 = 1 << 31;
const FREE: u64 = 1 << 30;
const COUNT: u64 = FREE - 1;
const GEN_ONE: u64 = 1 << 32;
/// The end of the free list (no slot).
const NIL: u64 = COUNT;
/// The size of a slab's first segment.
const SEG0: usize = 64 << 10;
/// Segments a slab may map (the last ones are never reached: `cap` is
/// below 2^30 slots).
const SEGS: usize = 32;

/// Changes the state word `st` from a state `ok` accepts to `next` of it,
/// in one compare-and-swap (retried while other threads change it): the
/// state it changed from, or None, nothing changed, when the state is not
/// accepted.
#[inline(always)]
fn hold_if(st: &AtomicU64, ok: impl Fn(u64) -> bool, next: impl Fn(u64) -> u64) -> Option<u64> {
    let mut s = st.load(Ordering::Relaxed);
    loop {
        if !ok(s) {
            return None;
        }
        match st.compare_exchange_weak(s, next(s), Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return Some(s),
            Err(x) => s = x,
        }
    }
}

/// An object kept in a [`Slab`]: the slab it lives in (one per type, for
/// the whole process).
pub trait Slabbed: Sized + Send + Sync + 'static {
    fn slab() -> &'static Slab<Self>;
}

#[repr(C)]
struct Slot<T> {
    value: UnsafeCell<MaybeUninit<T>>,
    state: AtomicU64,
}

/// Slots of `T` in segments of doubling size (see the module).
pub struct Slab<T> {
    /// The segments' starts: segment k holds `FIRST << k` slots, from slot
    /// index `FIRST * (2^k - 1)`.
    segs: [AtomicPtr<u8>; SEGS],
    /// Segments allocated (only grows; a segment's start is stored before).
    mapped: AtomicUsize,
    cap: usize,
    /// The free list: the first free slot (bits 31..0, NIL: none) and a
    /// tag (bits 63..32) that every change moves on, so that a thread
    /// whose view of the head is stale fails its compare-and-swap (a
    /// Treiber stack; each free slot's state holds the next one).
    head: AtomicU64,
    /// Slots handed out so far (taken when the free list is empty;
    /// mapping a segment is done under it).
    used: Mutex<usize>,
    _t: PhantomData<T>,
}

// SAFETY: the slab hands out shared references to its objects across
// threads (a Ref is Send and Sync only for T: Send + Sync); its own
// fields are atomics and a mutex.
unsafe impl<T: Send + Sync> Sync for Slab<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Send for Slab<T> {}

impl<T: Slabbed> Slab<T> {
    const STRIDE: usize = std::mem::size_of::<Slot<T>>();
    /// Slots in the first segment.
    const FIRST: usize = if SEG0 / Self::STRIDE > 0 { SEG0 / Self::STRIDE } else { 1 };

    /// A slab for at most `cap` objects (below 2^30); no memory until the
    /// first allocation.
    pub const fn new(cap: usize) -> Slab<T> {
        assert!((cap as u64) < NIL);
        #[allow(clippy::declare_interior_mutable_const)]
        const NONE: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
        Slab { segs: [NONE; SEGS], mapped: AtomicUsize::new(0), cap, head: AtomicU64::new(NIL), used: Mutex::new(0), _t: PhantomData }
    }

    /// The memory one object takes: its slot (the object and the state
    /// word).
    pub const fn slot_size() -> usize {
        Self::STRIDE
    }

    /// Segment `k`'s length in bytes.
    #[inline(always)]
    const fn seg_len(k: usize) -> usize {
        (Self::FIRST << k) * Self::STRIDE
    }

    /// The segment holding `addr` and the offset of `addr` in it, if
    /// `addr` lies in a segment.
    #[inline(always)]
    fn seg_of(&self, addr: usize) -> Option<(usize, usize)> {
        // (the first segment, which holds every slot of a process with
        // few objects, first and without the count of segments: its start
        // is null until it is allocated, and stored once, after the
        // allocation, with release order)
        let base = self.segs[0].load(Ordering::Acquire) as usize;
        let off = addr.wrapping_sub(base);
        if base != 0 && off < Self::seg_len(0) {
            return Some((0, off));
        }
        let n = self.mapped.load(Ordering::Acquire).min(SEGS);
        if n < 2 {
            return None;
        }
        self.segs[1..n].iter().zip(1..).find_map(|(base, k)| {
            let off = addr.wrapping_sub(base.load(Ordering::Relaxed) as usize);
            (off < Self::seg_len(k)).then_some((k, off))
        })
    }

    /// The slot at `addr`, if `addr` is the address of a slot in a
    /// segment.
    #[inline]
    fn slot_at(&self, addr: usize) -> Option<&Slot<T>> {
        self.locate(addr).map(|(slot, _)| slot)
    }

    /// [`slot_at`](Self::slot_at) with the slot's index.
    #[inline(always)]
    fn locate(&self, addr: usize) -> Option<(&Slot<T>, usize)> {
        let (k, off) = self.seg_of(addr)?;
        if off % Self::STRIDE != 0 {
            return None;
        }
        // SAFETY: addr lies in a segment, at a slot boundary:
        // memory of this process that stays allocated and writable for its
        // life, zeroed or a Slot<T> (never anything else), whose state word
        // is only accessed atomically.
        Some((unsafe { &*(addr as *const Slot<T>) }, Self::index_in(k, off)))
    }

    /// The index of the slot at offset `off` of segment `k`.
    #[inline(always)]
    fn index_in(k: usize, off: usize) -> usize {
        Self::FIRST * ((1 << k) - 1) + off / Self::STRIDE
    }

    /// Slot `i` (below `used`: its segment is allocated).
    #[inline]
    fn slot(&self, i: usize) -> &Slot<T> {
        if i < Self::FIRST {
            // (the first segment's, without the segment's arithmetic)
            // SAFETY: as below, segment 0.
            return unsafe { &*(self.segs[0].load(Ordering::Acquire).add(i * Self::STRIDE) as *const Slot<T>) };
        }
        let k = (usize::BITS - 1 - (i / Self::FIRST + 1).leading_zeros()) as usize;
        let off = (i - Self::FIRST * ((1 << k) - 1)) * Self::STRIDE;
        // SAFETY: i < used: a slot of segment k, which is allocated (see
        // slot_at).
        unsafe { &*(self.segs[k].load(Ordering::Acquire).add(off) as *const Slot<T>) }
    }

    #[inline]
    fn index_of(&self, s: &Slot<T>) -> usize {
        match self.seg_of(s as *const Slot<T> as usize) {
            Some((k, off)) => Self::index_in(k, off),
            None => unreachable!("a slot outside its slab"),
        }
    }

    /// A reference to the `LIVE` object at `addr`, or None (an address
    /// that is not a slot of this slab, an empty or retired slot).
    #[inline]
    pub fn get(&'static self, addr: usize) -> Option<Ref<T>> {
        let slot = self.slot_at(addr)?;
        hold_if(&slot.state, |s| s & LIVE != 0, |s| s + 1).map(|_| Ref(NonNull::from(slot)))
    }

    /// What `f` reads of the `LIVE` object at `addr`, without a reference
    /// (a sequence lock's read): the state word is read, then `f` on the
    /// slot's object, then the state word again; `f`'s answer counts only
    /// when both words show the same object (generation) `LIVE`, else
    /// None, as for an address that is not a slot of this slab.  No
    /// store to the slot: two loads instead of [`get`](Self::get)'s
    /// compare-and-swap and its reference's release.
    ///
    /// Between the two loads another thread may retire the object, drop
    /// it, free the slot and build a new object in it: `f` may then see
    /// a dropped object or one half built, and its answer is thrown away.
    /// That is why `f` must only load atomics.  Once this returns, nothing
    /// keeps the object: the answer is what the object held at the second
    /// load.
    ///
    /// # Safety
    /// `f` may only load, through the pointer it gets (a place
    /// projection, no reference to the whole `T`), fields of `T` that are
    /// atomics which every writer, the code that builds a `T` in a slot
    /// included, only ever changes by atomic stores (so that every value
    /// `f` can see is one some thread stored, and no load races a plain
    /// write); it may follow no pointer and read nothing else.
    #[inline(always)]
    pub unsafe fn read_live<R>(&'static self, addr: usize, f: impl FnOnce(*const T) -> R) -> Option<R> {
        let slot = self.slot_at(addr)?;
        let s = slot.state.load(Ordering::Acquire);
        if s & LIVE == 0 {
            return None;
        }
        // (a pointer, not a reference: the slot holds a T, a dropped T or
        // one being built; `f` projects to its atomic fields, which stay
        // allocated: segments are never freed)
        let out = f(slot.value.get().cast::<T>());
        // (the loads in `f` before the second load of the state word)
        fence(Ordering::Acquire);
        let again = slot.state.load(Ordering::Relaxed);
        ((again ^ s) & !COUNT == 0).then_some(out)
    }

    /// Whether `addr` is a `LIVE` object of this slab (a hint: it may
    /// change right after).
    pub fn contains(&self, addr: usize) -> bool {
        self.slot_at(addr).is_some_and(|s| s.state.load(Ordering::Acquire) & LIVE != 0)
    }

    /// An empty slot to build an object in ([`Uninit`]); ENOMEM when the
    /// slab is full or no memory is left for a new segment.
    #[inline]
    pub fn alloc(&'static self) -> Result<Uninit<T>, Errno> {
        let mut h = self.head.load(Ordering::Acquire);
        while h & 0xffff_ffff != NIL {
            let i = (h & 0xffff_ffff) as usize;
            // (the slot may be taken and changed meanwhile: then the tag
            // has moved and the swap below fails)
            let s = self.slot(i);
            let next = s.state.load(Ordering::Relaxed) & COUNT;
            match self.head.compare_exchange_weak(h, ((h >> 32) + 1) << 32 | next, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => return Ok(Uninit(NonNull::from(s))),
                Err(x) => h = x,
            }
        }
        self.alloc_new()
    }

    /// A slot never handed out before (the free list is empty).
    #[cold]
    #[inline(never)]
    fn alloc_new(&'static self) -> Result<Uninit<T>, Errno> {
        let mut used = self.used.lock();
        let i = *used;
        if i >= self.cap {
            return Err(Errno::ENOMEM);
        }
        self.segment_for(i)?;
        *used = i + 1;
        Ok(Uninit(NonNull::from(self.slot(i))))
    }

    /// Allocates the segment of slot `i` if it is not yet (under the lock of
    /// `used`: one at a time; slots are handed out in order, so
    /// the segment is the next one).
    fn segment_for(&self, i: usize) -> Result<(), Errno> {
        let k = self.mapped.load(Ordering::Relaxed);
        if i < Self::FIRST * ((1 << k) - 1) {
            return Ok(());
        }
        if k == SEGS {
            return Err(Errno::ENOMEM);
        }
        const { assert!(std::mem::align_of::<Slot<T>>() <= 16, "calloc aligns to 16") };
        // SAFETY: a new zeroed block of the C library's allocator, ours
        // alone (never freed); calloc checks the size.
        let p = unsafe { libc::calloc(1, Self::seg_len(k)) };
        if p.is_null() {
            return Err(Errno::ENOMEM);
        }
        self.segs[k].store(p.cast(), Ordering::Release);
        self.mapped.store(k + 1, Ordering::Release);
        Ok(())
    }

    /// Puts a slot whose object is gone (or was never built) back on the
    /// free list, with a new generation.
    #[inline]
    fn release(&self, slot: &Slot<T>) {
        self.release_at(slot, self.index_of(slot));
    }

    /// [`release`](Self::release) of slot `i` (`slot` is slot `i`).
    #[inline(always)]
    fn release_at(&self, slot: &Slot<T>, i: usize) {
        debug_assert!(std::ptr::eq(slot, self.slot(i)));
        let i = i as u64;
        let g = (slot.state.load(Ordering::Relaxed) & !(LIVE | FREE | COUNT)).wrapping_add(GEN_ONE);
        let mut h = self.head.load(Ordering::Relaxed);
        loop {
            slot.state.store(g | FREE | (h & 0xffff_ffff), Ordering::Relaxed);
            match self.head.compare_exchange_weak(h, ((h >> 32) + 1) << 32 | i, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(x) => h = x,
            }
        }
    }

    /// Makes the object found by [`get`](Self::get).
    pub fn publish(&self, r: &Ref<T>) {
        r.slot().state.fetch_or(LIVE, Ordering::Release);
    }

    /// Makes the object no longer found by [`get`](Self::get) (it stays
    /// until the last reference goes); false if it was not `LIVE`.
    pub fn retire(&self, r: &Ref<T>) -> bool {
        Self::retire_slot(r.slot())
    }

    /// [`retire`](Self::retire) of the object at `obj` (borrowed from a
    /// reference the caller holds); false if it was not `LIVE` or is not
    /// in this slab.
    pub fn retire_obj(&self, obj: &T) -> bool {
        self.slot_at(obj as *const T as usize).is_some_and(Self::retire_slot)
    }

    /// Clears `LIVE` of a held slot (its holder's reference keeps the
    /// object: it cannot go here); whether it was `LIVE`.
    #[inline]
    fn retire_slot(slot: &Slot<T>) -> bool {
        slot.state.fetch_and(!LIVE, Ordering::AcqRel) & LIVE != 0
    }

    /// The `LIVE` object at `addr`, retired and held in one step: of two
    /// threads taking the same object, one gets it.  (When the returned
    /// reference is the only one, dropping it frees the object.)
    #[inline]
    pub fn take(&'static self, addr: usize) -> Option<Ref<T>> {
        let slot = self.slot_at(addr)?;
        hold_if(&slot.state, |s| s & LIVE != 0, |s| (s & !LIVE) + 1).map(|_| Ref(NonNull::from(slot)))
    }

    /// [`take`](Self::take) of the object at `addr`, `f` on it, then the
    /// reference dropped in line (and the object with it when no one else
    /// holds it): for objects whose taking is their usual end (an event's
    /// ack), without the out-of-line drop kept for the rare ends.
    #[inline(always)]
    pub fn take_with<R>(&'static self, addr: usize, f: impl FnOnce(&T) -> R) -> Option<R> {
        let (slot, i) = self.locate(addr)?;
        // Retired in one compare-and-swap; held by no one else, the
        // object is the taker's at once (not LIVE, no reference: no
        // lookup or upgrade can reach it), else the taker holds one more
        // reference and the last holder drops it.
        let s = hold_if(&slot.state, |s| s & LIVE != 0, |s| if s & COUNT == 0 { s & !LIVE } else { (s & !LIVE) + 1 })?;
        let mut r = Ref(NonNull::from(slot));
        let out = f(&r);
        if s & COUNT == 0 {
            // (the slot's index from the lookup's segment and offset: no
            // second search of the segments)
            fence(Ordering::Acquire);
            // SAFETY: as in Ref::drop_last: this thread owns the object.
            unsafe { (*slot.value.get()).assume_init_drop() };
            self.release_at(slot, i);
        } else if r.put() {
            r.drop_last();
        }
        std::mem::forget(r);
        Some(out)
    }

    /// Calls `f` on every `LIVE` object (held while `f` runs): for rare
    /// searches, not for lookups.
    pub fn for_each(&'static self, mut f: impl FnMut(&Ref<T>)) {
        let used = *self.used.lock();
        for i in 0..used {
            let addr = self.slot(i) as *const Slot<T> as usize;
            if let Some(r) = self.get(addr) {
                f(&r);
            }
        }
    }

    /// The first `LIVE` object `pred` accepts.
    pub fn find(&'static self, mut pred: impl FnMut(&T) -> bool) -> Option<Ref<T>> {
        let used = *self.used.lock();
        (0..used).find_map(|i| self.get(self.slot(i) as *const Slot<T> as usize).filter(|r| pred(r)))
    }
}

/// An empty slot: build the object in it ([`as_mut_ptr`](Self::as_mut_ptr)),
/// then [`assume_init`](Self::assume_init).  Dropped, the slot goes back.
pub struct Uninit<T: Slabbed>(NonNull<Slot<T>>);

impl<T: Slabbed> Uninit<T> {
    /// Where to build the object (valid for writes of a `T`; not
    /// initialised).
    pub fn as_mut_ptr(&mut self) -> *mut T {
        // SAFETY: the slot is ours alone until assume_init or drop.
        unsafe { (*self.0.as_ref().value.get()).as_mut_ptr() }
    }

    /// The object, held once, not yet found by [`Slab::get`]
    /// ([`Slab::publish`]).
    ///
    /// # Safety
    /// The object must be fully initialised.
    pub unsafe fn assume_init(self) -> Ref<T> {
        let slot = self.0;
        std::mem::forget(self);
        // SAFETY: the slot is valid (it lies in a segment).
        let st = unsafe { &slot.as_ref().state };
        let g = st.load(Ordering::Relaxed) & !(LIVE | FREE | COUNT);
        st.store(g | 1, Ordering::Release);
        Ref(slot)
    }
}

impl<T: Slabbed> Uninit<T> {
    /// The object, owned alone and changed freely until
    /// [`Own::publish`]; not found by [`Slab::get`] until then.
    ///
    /// # Safety
    /// The object must be fully initialised.
    pub unsafe fn assume_init_own(self) -> Own<T> {
        let slot = self.0;
        std::mem::forget(self);
        Own(slot)
    }
}

impl<T: Slabbed> Drop for Uninit<T> {
    fn drop(&mut self) {
        // SAFETY: as in assume_init.
        T::slab().release(unsafe { self.0.as_ref() });
    }
}

/// An object in a [`Slab`] owned by one holder (what `Box` is for an
/// object on the heap), not yet found by [`Slab::get`]: the slot's state
/// still says `FREE` (no reference can be taken to it).  Dropped, the
/// object goes and the slot is freed.
pub struct Own<T: Slabbed>(NonNull<Slot<T>>);

// SAFETY: an Own is the object's only holder, as a Box<T>.
unsafe impl<T: Slabbed> Send for Own<T> {}
// SAFETY: as above.
unsafe impl<T: Slabbed> Sync for Own<T> {}

impl<T: Slabbed> Own<T> {
    /// Hands the object over to the slab: `LIVE`, held by no one;
    /// [`Slab::take`] gets it back (and its last reference frees it).
    pub fn publish(self) {
        let slot = self.0;
        std::mem::forget(self);
        // SAFETY: the slot is in a segment.
        let st = unsafe { &slot.as_ref().state };
        let g = st.load(Ordering::Relaxed) & !(LIVE | FREE | COUNT);
        st.store(g | LIVE, Ordering::Release);
    }
}

impl<T: Slabbed> std::ops::Deref for Own<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the object is initialised and ours alone.
        unsafe { (*self.0.as_ref().value.get()).assume_init_ref() }
    }
}

impl<T: Slabbed> std::ops::DerefMut for Own<T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in deref; &mut self makes the access unique.
        unsafe { (*self.0.as_ref().value.get()).assume_init_mut() }
    }
}

impl<T: Slabbed> Drop for Own<T> {
    fn drop(&mut self) {
        // SAFETY: the object is initialised, ours alone, dropped once.
        unsafe { (*self.0.as_ref().value.get()).assume_init_drop() };
        // SAFETY: the slot is in a segment.
        T::slab().release(unsafe { self.0.as_ref() });
    }
}

/// A counted reference to an object in a [`Slab`] (what `Arc` is for an
/// object on the heap): the object stays while one exists.
pub struct Ref<T: Slabbed>(NonNull<Slot<T>>);

// SAFETY: a Ref gives shared access to T from any thread, as Arc<T> does.
unsafe impl<T: Slabbed> Send for Ref<T> {}
// SAFETY: as above.
unsafe impl<T: Slabbed> Sync for Ref<T> {}

impl<T: Slabbed> Ref<T> {
    #[inline]
    fn slot(&self) -> &Slot<T> {
        // SAFETY: the slot is in a segment, which is never freed.
        unsafe { self.0.as_ref() }
    }

    /// The object's address (the slot's).
    #[inline]
    pub fn as_ptr(this: &Self) -> *const T {
        this.0.as_ptr().cast()
    }

    /// Whether both name the same object.
    #[inline]
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.0 == b.0
    }

    /// A weak reference: it does not keep the object, and
    /// [`Weak::upgrade`] fails once the object is gone.
    pub fn downgrade(this: &Self) -> Weak<T> {
        Weak { slot: this.0, gen: (this.slot().state.load(Ordering::Relaxed) >> 32) as u32 }
    }

    /// How many references are held (tests).
    pub fn count(this: &Self) -> usize {
        (this.slot().state.load(Ordering::Relaxed) & COUNT) as usize
    }
}

impl<T: Slabbed> std::ops::Deref for Ref<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: a held object is initialised and not dropped while a
        // reference exists; only shared references to it are handed out.
        unsafe { (*self.slot().value.get()).assume_init_ref() }
    }
}

impl<T: Slabbed> Clone for Ref<T> {
    #[inline]
    fn clone(&self) -> Self {
        let old = self.slot().state.fetch_add(1, Ordering::Relaxed);
        if old & COUNT == COUNT - 1 {
            // As Arc does on overflow: billions of references are a bug.
            std::process::abort();
        }
        Ref(self.0)
    }
}

impl<T: Slabbed> Drop for Ref<T> {
    #[inline]
    fn drop(&mut self) {
        if self.put() {
            self.drop_slow();
        }
    }
}

impl<T: Slabbed> Ref<T> {
    /// Gives up this reference's count; whether it was the last of a
    /// retired object (then the caller drops the object: [`drop_last`](Self::drop_last)).
    #[inline(always)]
    fn put(&self) -> bool {
        self.slot().state.fetch_sub(1, Ordering::Release) & (LIVE | COUNT) == 1
    }

    /// The last reference of a retired object went: drop it, free the slot.
    #[cold]
    #[inline(never)]
    fn drop_slow(&mut self) {
        self.drop_last();
    }

    /// [`drop_slow`](Self::drop_slow)'s work, in line.
    #[inline(always)]
    fn drop_last(&mut self) {
        fence(Ordering::Acquire);
        // SAFETY: no reference remains and none can be taken (not LIVE,
        // count 0: get and upgrade refuse it): this thread owns the
        // object, initialised, and drops it once.
        unsafe { (*self.slot().value.get()).assume_init_drop() };
        T::slab().release(self.slot());
    }
}

impl<T: Slabbed> std::fmt::Debug for Ref<T>
where
    T: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// A reference that does not keep its object ([`Ref::downgrade`]).
pub struct Weak<T: Slabbed> {
    slot: NonNull<Slot<T>>,
    gen: u32,
}

// SAFETY: only the slot's atomic state is touched without a Ref.
unsafe impl<T: Slabbed> Send for Weak<T> {}
// SAFETY: as above.
unsafe impl<T: Slabbed> Sync for Weak<T> {}

impl<T: Slabbed> Weak<T> {
    /// The object, if it is still there (LIVE or held, same generation).
    pub fn upgrade(&self) -> Option<Ref<T>> {
        // SAFETY: the slot stays allocated (type-stable segments).
        let st = unsafe { &self.slot.as_ref().state };
        let ok = |s: u64| s & FREE == 0 && (s >> 32) as u32 == self.gen && s & (LIVE | COUNT) != 0;
        hold_if(st, ok, |s| s + 1).map(|_| Ref(self.slot))
    }
}

impl<T: Slabbed> Clone for Weak<T> {
    fn clone(&self) -> Self {
        Weak { slot: self.slot, gen: self.gen }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static DROPS: AtomicUsize = AtomicUsize::new(0);

    #[repr(C)]
    struct Obj {
        n: u64,
        pad: [u8; 40],
    }
    impl Drop for Obj {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::Relaxed);
        }
    }
    static OBJS: Slab<Obj> = Slab::new(1 << 16);
    impl Slabbed for Obj {
        fn slab() -> &'static Slab<Obj> {
            &OBJS
        }
    }

    /// `v` built in a new slot of its slab, held (not yet published).
    fn build<T: Slabbed>(v: T) -> Result<Ref<T>, Errno> {
        let mut u = T::slab().alloc()?;
        // SAFETY: the slot is valid for writes of a T.
        Ok(unsafe {
            u.as_mut_ptr().write(v);
            u.assume_init()
        })
    }

    /// The tests that use OBJS, one at a time: a lookup holds a reference
    /// for a moment, and one test's lookup of a freed address (the
    /// concurrent test's stale ones) may find another test's object in the
    /// reused slot and move that test's reference counts.
    fn one_at_a_time() -> parking_lot::MutexGuard<'static, ()> {
        static ONE: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
        ONE.lock()
    }

    /// Values no other test stores in OBJS.
    const LIFE: u64 = 0x5eed_0007;
    const OWNED: u64 = 0x5eed_0009;

    fn new(n: u64) -> Ref<Obj> {
        build(Obj { n, pad: [0; 40] }).unwrap()
    }

    #[repr(C)]
    struct Seg {
        n: usize,
        pad: [u8; 48],
    }
    static SEGD: Slab<Seg> = Slab::new(5000);
    impl Slabbed for Seg {
        fn slab() -> &'static Slab<Seg> {
            &SEGD
        }
    }

    /// Slots past the first segment: every one found by its address,
    /// nothing found just past a segment's end, ENOMEM at `cap`, and
    /// freed slots of every segment handed out again.
    #[test]
    fn segments_grow_and_hold() {
        let make = |n: usize| {
            let r = build(Seg { n, pad: [0; 48] })?;
            SEGD.publish(&r);
            Ok::<_, Errno>(r)
        };
        let all: Vec<Ref<Seg>> = (0..5000).map(|n| make(n).unwrap()).collect();
        let mapped = SEGD.mapped.load(Ordering::Relaxed);
        assert!(mapped >= 3, "5000 slots of {} bytes take several segments ({mapped})", Slab::<Seg>::STRIDE);
        for (n, r) in all.iter().enumerate() {
            let addr = Ref::as_ptr(r) as usize;
            assert_eq!(SEGD.get(addr).expect("found").n, n);
            assert!(SEGD.get(addr + 8).is_none());
        }
        for k in 0..mapped {
            let end = SEGD.segs[k].load(Ordering::Relaxed) as usize + Slab::<Seg>::seg_len(k);
            if SEGD.seg_of(end).is_none() {
                assert!(SEGD.get(end).is_none());
            }
        }
        assert_eq!(make(5000).err(), Some(Errno::ENOMEM));
        let before: std::collections::HashSet<usize> = all.iter().map(|r| Ref::as_ptr(r) as usize).collect();
        for r in &all {
            assert!(SEGD.retire(r));
        }
        drop(all);
        let again: Vec<Ref<Seg>> = (0..5000).map(|n| make(n).unwrap()).collect();
        let after: std::collections::HashSet<usize> = again.iter().map(|r| Ref::as_ptr(r) as usize).collect();
        assert_eq!(before, after, "the freed slots are the ones handed out again");
        assert_eq!(SEGD.mapped.load(Ordering::Relaxed), mapped, "no segment more");
    }

    #[test]
    fn life_of_an_object() {
        let _one = one_at_a_time();
        let a = new(LIFE);
        let addr = Ref::as_ptr(&a) as usize;
        assert!(OBJS.get(addr).is_none(), "not found before it is published");
        OBJS.publish(&a);
        let b = OBJS.get(addr).expect("published");
        assert_eq!(b.n, LIFE);
        assert_eq!(Ref::count(&a), 2);
        // foreign, misaligned and out-of-range addresses
        assert!(OBJS.get(addr + 8).is_none());
        assert!(OBJS.get(addr.wrapping_sub(1 << 40)).is_none());
        assert!(OBJS.get(0).is_none());
        let x = 5u64;
        assert!(OBJS.get(&x as *const u64 as usize).is_none());
        let w = Ref::downgrade(&a);
        assert!(OBJS.retire(&a));
        assert!(!OBJS.retire(&a), "retired once");
        assert!(OBJS.get(addr).is_none(), "retired: not found");
        assert!(w.upgrade().is_some(), "still held");
        drop(b);
        let d0 = DROPS.load(Ordering::Relaxed);
        drop(a);
        assert!(DROPS.load(Ordering::Relaxed) > d0, "the last reference dropped it");
        assert!(w.upgrade().is_none(), "gone");
        // (the tests share OBJS and run in parallel: the freed slot may
        // already hold another test's object, never this one)
        assert!(OBJS.get(addr).is_none_or(|r| r.n != LIFE), "freed: not found");
    }

    #[test]
    fn owned_then_published() {
        let _one = one_at_a_time();
        let mut u = OBJS.alloc().unwrap();
        // SAFETY: the slot is valid for writes of an Obj.
        let mut o = unsafe {
            u.as_mut_ptr().write(Obj { n: 1, pad: [0; 40] });
            u.assume_init_own()
        };
        o.n = OWNED;
        let addr = &*o as *const Obj as usize;
        assert!(OBJS.get(addr).is_none(), "owned: not found");
        o.publish();
        assert_eq!(OBJS.get(addr).map(|r| r.n), Some(OWNED));
        let d0 = DROPS.load(Ordering::Relaxed);
        drop(OBJS.take(addr).expect("published"));
        assert!(DROPS.load(Ordering::Relaxed) > d0, "taken and dropped: gone");
        assert!(OBJS.get(addr).is_none_or(|r| r.n != OWNED), "another test's object at most");
        let mut u = OBJS.alloc().unwrap();
        // SAFETY: as above.
        let o = unsafe {
            u.as_mut_ptr().write(Obj { n: 2, pad: [0; 40] });
            u.assume_init_own()
        };
        let d0 = DROPS.load(Ordering::Relaxed);
        drop(o);
        assert!(DROPS.load(Ordering::Relaxed) > d0, "an owned object goes with its owner");
    }

    #[test]
    fn take_once() {
        let _one = one_at_a_time();
        let a = new(3);
        OBJS.publish(&a);
        let addr = Ref::as_ptr(&a) as usize;
        let w = Ref::downgrade(&a);
        drop(a);
        assert!(w.upgrade().is_some(), "published: kept while no one holds it");
        let t = OBJS.take(addr).expect("live");
        assert_eq!(t.n, 3);
        assert!(OBJS.take(addr).is_none(), "taken twice");
        assert!(OBJS.get(addr).is_none());
        drop(t);
        assert!(w.upgrade().is_none(), "the taker's reference was the last");
        let b = new(4);
        OBJS.publish(&b);
        assert!(OBJS.retire_obj(&b));
        assert!(!OBJS.retire_obj(&b));
        let x = Obj { n: 0, pad: [0; 40] };
        assert!(!OBJS.retire_obj(&x), "not in the slab");
    }

    static TK_DROPS: AtomicUsize = AtomicUsize::new(0);
    struct Tk(u64);
    impl Drop for Tk {
        fn drop(&mut self) {
            TK_DROPS.fetch_add(1, Ordering::Relaxed);
        }
    }
    static TKS: Slab<Tk> = Slab::new(16);
    impl Slabbed for Tk {
        fn slab() -> &'static Slab<Tk> {
            &TKS
        }
    }

    /// A store with no segment yet refuses every address, low ones
    /// included (they would lie at the start of a segment based at 0),
    /// without reading them.
    #[test]
    fn unallocated_store_refuses_every_address() {
        let _one = one_at_a_time();
        struct Never(#[allow(dead_code)] u64);
        static NEVER: Slab<Never> = Slab::new(4);
        impl Slabbed for Never {
            fn slab() -> &'static Slab<Never> {
                &NEVER
            }
        }
        let stride = Slab::<Never>::slot_size();
        for addr in [0, 8, stride, 2 * stride, 4096] {
            assert!(NEVER.get(addr).is_none(), "address {addr:#x}");
            assert!(!NEVER.contains(addr), "address {addr:#x}");
            assert!(NEVER.take_with(addr, |_| ()).is_none(), "address {addr:#x}");
        }
    }

    /// take_with: once per object; the object goes (dropped, its slot
    /// free) with the taker's reference when it was the last, stays while
    /// another one is held.
    #[test]
    fn take_with_drops_in_line() {
        let new_tk = |n| {
            let r = build(Tk(n)).unwrap();
            TKS.publish(&r);
            r
        };
        let a = new_tk(11);
        let addr = Ref::as_ptr(&a) as usize;
        assert_eq!(TKS.take_with(addr, |o| o.0), Some(11));
        assert!(TKS.take_with(addr, |o| o.0).is_none(), "taken twice");
        assert_eq!(TK_DROPS.load(Ordering::Relaxed), 0, "still held by a");
        drop(a);
        assert_eq!(TK_DROPS.load(Ordering::Relaxed), 1, "gone with its last reference");
        let b = new_tk(12);
        let addr = Ref::as_ptr(&b) as usize;
        drop(b);
        assert_eq!(TK_DROPS.load(Ordering::Relaxed), 1, "published: kept");
        assert_eq!(TKS.take_with(addr, |o| o.0 + 1), Some(13));
        assert_eq!(TK_DROPS.load(Ordering::Relaxed), 2, "the taker's reference was the last: dropped in line");
        assert!(TKS.get(addr).is_none());
        assert_eq!(Ref::as_ptr(&new_tk(14)) as usize, addr, "its slot is free again");
    }

    /// An address inside the store but not at a slot's start is refused
    /// even where the word read as its state would say `LIVE`: here an
    /// object whose first field looks like a live state word, and the
    /// address one stride's worth of header before it.
    #[test]
    fn misaligned_address_is_refused() {
        let _one = one_at_a_time();
        let stride = std::mem::size_of::<Slot<Obj>>();
        let fake_state = LIVE | 1;
        let objs: Vec<Ref<Obj>> = (0..2).map(|_| new(fake_state)).collect();
        for o in &objs {
            OBJS.publish(o);
            let addr = Ref::as_ptr(o) as usize;
            // (the word at addr is `n`; a slot starting at p has its state
            // at p + stride - 8)
            let p = addr + 8 - stride;
            assert!(OBJS.get(p).is_none(), "a misaligned address found an object");
            assert_eq!(o.n, fake_state, "nothing written through it");
            assert!(OBJS.retire(o));
        }
    }

    /// read_live: what a LIVE object's atomics hold, with no reference
    /// taken; None before it is published, once it is retired or freed,
    /// for addresses that are no slot's, and when the object changes
    /// (retired, or freed and a new one built in its slot) between the
    /// two reads of the state word.
    #[test]
    fn read_live_sees_only_one_live_object() {
        let _one = one_at_a_time();
        struct At(AtomicU64);
        static ATS: Slab<At> = Slab::new(16);
        impl Slabbed for At {
            fn slab() -> &'static Slab<At> {
                &ATS
            }
        }
        fn word(p: *const At) -> u64 {
            // SAFETY: an atomic field of the slot's object (read_live's
            // contract).
            unsafe { (*std::ptr::addr_of!((*p).0)).load(Ordering::Relaxed) }
        }
        // SAFETY: `word` loads the one atomic, which is only stored
        // atomically (by `build`'s write before the object is published).
        let read = |addr: usize| unsafe { ATS.read_live(addr, word) };
        let a = build(At(AtomicU64::new(5))).unwrap();
        let addr = Ref::as_ptr(&a) as usize;
        assert_eq!(read(addr), None, "not published");
        ATS.publish(&a);
        assert_eq!(read(addr), Some(5));
        assert_eq!(Ref::count(&a), 1, "no reference taken");
        assert_eq!(read(addr + 8), None, "misaligned");
        assert_eq!(read(0), None);
        assert!(ATS.retire(&a));
        assert_eq!(read(addr), None, "retired");
        drop(a);
        assert_eq!(read(addr), None, "freed");
        let b = build(At(AtomicU64::new(6))).unwrap();
        assert_eq!(Ref::as_ptr(&b) as usize, addr, "the same slot again");
        ATS.publish(&b);
        assert_eq!(read(addr), Some(6));
        // SAFETY: as above.
        let r = unsafe {
            ATS.read_live(addr, |p| {
                assert!(ATS.retire(&b));
                word(p)
            })
        };
        assert_eq!(r, None, "retired between the reads");
        drop(b);
        let c = build(At(AtomicU64::new(7))).unwrap();
        ATS.publish(&c);
        // SAFETY: as above.
        let r = unsafe {
            ATS.read_live(addr, |p| {
                assert!(ATS.retire(&c));
                drop(c);
                let d = build(At(AtomicU64::new(8))).unwrap();
                assert_eq!(Ref::as_ptr(&d) as usize, addr);
                ATS.publish(&d);
                std::mem::forget(d);
                word(p)
            })
        };
        assert_eq!(r, None, "another object in the slot by the second read");
        assert_eq!(read(addr), Some(8));
    }

    #[test]
    fn unpublished_goes_with_its_last_reference() {
        let _one = one_at_a_time();
        let a = new(1);
        let w = Ref::downgrade(&a);
        drop(a);
        assert!(w.upgrade().is_none());
    }

    /// Threads create, publish, look up, retire and drop objects at once,
    /// and look up stale addresses: every lookup finds a live object with
    /// the value it was built with, or nothing.
    #[test]
    fn concurrent_create_lookup_destroy() {
        let _one = one_at_a_time();
        let stale: Vec<usize> = (0..64).map(|i| Ref::as_ptr(&new(i)) as usize).collect();
        let stale = std::sync::Arc::new(stale);
        let ts: Vec<_> = (0..4u64)
            .map(|t| {
                let stale = stale.clone();
                std::thread::spawn(move || {
                    let mut ring = Vec::new();
                    for i in 0..20_000u64 {
                        let v = t << 32 | i;
                        let a = new(v);
                        OBJS.publish(&a);
                        let addr = Ref::as_ptr(&a) as usize;
                        let b = OBJS.get(addr).expect("own object");
                        assert_eq!(b.n, v);
                        for s in stale.iter().skip((i % 8) as usize).step_by(8) {
                            if let Some(o) = OBJS.get(*s) {
                                // someone else's object in a reused slot: whole
                                let _ = o.n;
                            }
                        }
                        assert!(OBJS.retire(&a));
                        drop(b);
                        // a few kept a while: a slot handed out twice
                        // would show as a changed value
                        ring.push(a);
                        if ring.len() == 8 {
                            for (k, o) in ring.drain(..).enumerate() {
                                assert_eq!(o.n, t << 32 | (i + k as u64 - 7), "a held object changed");
                            }
                        }
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
    }
}
