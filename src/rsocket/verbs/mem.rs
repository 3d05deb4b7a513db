// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Registered memory of the rsocket data path (part of the verbs adapter,
//! which may use unsafe code):
//!
//! * [`RegBuf`]: a zeroed heap buffer of whole pages registered with the
//!   device. It never moves; it is deregistered before it is freed, and
//!   keeps the id (so the PD) alive. Reads and writes go through
//!   bounds-checked copies, never through Rust references (the device
//!   writes into it concurrently).
//! * [`UserMr`]: a caller's buffer registered for riomap (the C contract
//!   keeps it allocated: [`UserBuf::new`] is the one unsafe promise).
//! * [`Sge`]: a scatter entry; only a [`RegBuf`] makes one with a key, so
//!   the device checks every access against a live registration.

use crate::cma::api::CmId;
use crate::sys::verbs::data::{self as dp, DataQp};
use nix::errno::Errno;
use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::Arc;
#[cfg(test)]
use super::super::fake::{FakeMr, FakeQp};

/// `struct ibv_sge`, made with a key by [`RegBuf::sge`] only.
pub use dp::Sge;

/// The access rights of a stream's registrations: local write, plus remote
/// write when asked.
fn access(remote_write: bool) -> c_int {
    dp::ACCESS_LOCAL_WRITE | if remote_write { dp::ACCESS_REMOTE_WRITE } else { 0 }
}

/// A zeroed allocation of whole pages covering `len` bytes (freed with free()).
fn page_alloc(len: usize) -> Result<NonNull<u8>, Errno> {
    // SAFETY: sysconf has no memory arguments.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    };
    let total = len.div_ceil(page).checked_mul(page).ok_or(Errno::ENOMEM)?;
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: p is a valid out pointer; page is a power of two multiple of the pointer size.
    if unsafe { libc::posix_memalign(&mut p, page, total) } != 0 || p.is_null() {
        return Err(Errno::ENOMEM);
    }
    // SAFETY: p holds total bytes just allocated.
    unsafe { std::ptr::write_bytes(p as *mut u8, 0, total) };
    NonNull::new(p as *mut u8).ok_or(Errno::ENOMEM)
}

/// A registered, zeroed heap buffer (see the module comment).
pub struct RegBuf {
    reg: Reg,
    ptr: NonNull<u8>,
    len: usize,
    rkey: u32,
}

/// A memory registration: a real MR (which keeps the id, so the PD,
/// alive) or, in unit tests, one on a fake fabric.
enum Reg {
    Real { mr: dp::Mr, _id: Arc<CmId> },
    #[cfg(test)]
    Fake(FakeMr),
}

impl Reg {
    /// Deregisters; called by the owner's Drop, before the memory may go.
    /// False when the deregistration failed: the device may still reach
    /// the memory, so it must not be freed (the library's one policy,
    /// `Mr::release`: leaked, a warning logged).
    fn release(&mut self, what: &str) -> bool {
        match self {
            Reg::Real { mr, .. } => mr.release(what),
            #[cfg(test)]
            Reg::Fake(m) => dp::release_or_leak(if m.release() { Ok(()) } else { Err(Errno::EBUSY) }, what, 0),
        }
    }
}

// SAFETY: the buffer and its MR are owned by this value; access goes
// through bounds-checked raw copies, never through Rust references.
unsafe impl Send for RegBuf {}
// SAFETY: as the device writes into a registered buffer while we read
// other parts of it, a stream's sender, receiver and completion handler
// copy into and out of disjoint regions at once: the sender owns the
// send-ring space it reserved under the stream's lock until its write
// completes, the receiver owns received bytes until it consumes them, the
// control slots belong to whoever holds the stream's lock. Every access is
// a bounds-checked raw copy (no reference to the memory is ever made), so
// even a peer that breaks the protocol gets garbage, never memory outside
// the buffer.
unsafe impl Sync for RegBuf {}

impl RegBuf {
    pub(super) fn new(id: &Arc<CmId>, q: &DataQp, len: usize, remote_write: bool) -> Result<RegBuf, Errno> {
        let len = len.max(1);
        // Whole pages, page-aligned (as upstream): with RDMAV_FORK_SAFE set,
        // libibverbs marks the registered pages MADV_DONTFORK, which must not
        // take heap data of others into a child's hole.
        let ptr = page_alloc(len)?;
        // SAFETY: the PD is live (we hold the id, and the registration
        // holds it too); the buffer stays until Drop, which deregisters
        // first.
        match unsafe { q.reg_mr(ptr.as_ptr(), len, access(remote_write)) } {
            Ok(mr) => Ok(RegBuf { rkey: mr.rkey(), reg: Reg::Real { mr, _id: id.clone() }, ptr, len }),
            Err(e) => {
                // SAFETY: from posix_memalign above, never registered.
                unsafe { libc::free(ptr.as_ptr() as *mut c_void) };
                Err(e)
            }
        }
    }

    /// The buffer's address as the peer uses it in RDMA writes.
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        false
    }
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    #[inline]
    fn range(&self, off: usize, n: usize) -> *mut u8 {
        assert!(off.checked_add(n).is_some_and(|e| e <= self.len), "RegBuf access out of bounds");
        self.ptr.as_ptr().wrapping_add(off)
    }

    /// A keyed scatter entry for `[off, off+len)`.
    #[inline]
    pub fn sge(&self, off: usize, len: u32) -> Sge {
        match &self.reg {
            Reg::Real { mr, .. } => mr.sge(off, len).expect("RegBuf access out of bounds"),
            #[cfg(test)]
            Reg::Fake(m) => Sge::fake(self.range(off, len as usize) as u64, len, m.key()),
        }
    }

    /// Copies `data` into the buffer at `off`.
    pub fn write(&self, off: usize, data: &[u8]) {
        let p = self.range(off, data.len());
        // SAFETY: in bounds (checked); the buffer is ours; no Rust reference
        // to it exists.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
    }

    /// Copies from the buffer at `off` into `out`.
    pub fn read(&self, off: usize, out: &mut [u8]) {
        let p = self.range(off, out.len());
        // SAFETY: in bounds; the device may write concurrently into other
        // parts (what it wrote before the completion we saw is visible).
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
    }

    /// The 16 bytes at `off`, read once (the peer may rewrite them).
    #[inline]
    pub fn read16(&self, off: usize) -> [u8; 16] {
        let p = self.range(off, 16);
        if p as usize % 8 == 0 {
            // SAFETY: in bounds and 8-aligned (table entries are): two
            // volatile 8-byte loads (a volatile byte array is read byte by byte).
            let (a, b) = unsafe { (std::ptr::read_volatile(p as *const u64), std::ptr::read_volatile(p.wrapping_add(8) as *const u64)) };
            let mut out = [0u8; 16];
            out[..8].copy_from_slice(&a.to_ne_bytes());
            out[8..].copy_from_slice(&b.to_ne_bytes());
            out
        } else {
            // SAFETY: in bounds; a volatile read of 16 plain bytes (align 1).
            unsafe { std::ptr::read_volatile(p as *const [u8; 16]) }
        }
    }

    /// A native-endian u64 at `off`, read once (the peer may rewrite it).
    #[inline]
    pub fn read_u64(&self, off: usize) -> u64 {
        let p = self.range(off, 8);
        if p as usize % 8 == 0 {
            // SAFETY: in bounds and aligned: one volatile load.
            unsafe { std::ptr::read_volatile(p as *const u64) }
        } else {
            // SAFETY: in bounds; a volatile read of 8 plain bytes (align 1).
            u64::from_ne_bytes(unsafe { std::ptr::read_volatile(p as *const [u8; 8]) })
        }
    }

    /// A native-endian u32 at `off`, read once.
    #[inline]
    pub fn read_u32(&self, off: usize) -> u32 {
        let p = self.range(off, 4);
        if p as usize % 4 == 0 {
            // SAFETY: in bounds and aligned: one volatile load.
            unsafe { std::ptr::read_volatile(p as *const u32) }
        } else {
            // SAFETY: in bounds; a volatile read of 4 plain bytes (align 1).
            u32::from_ne_bytes(unsafe { std::ptr::read_volatile(p as *const [u8; 4]) })
        }
    }

    #[inline]
    pub fn write_u64(&self, off: usize, v: u64) {
        let p = self.range(off, 8);
        if p as usize % 8 == 0 {
            // SAFETY: in bounds and aligned: one volatile store.
            unsafe { std::ptr::write_volatile(p as *mut u64, v) }
        } else {
            // SAFETY: in bounds; a volatile write of 8 plain bytes.
            unsafe { std::ptr::write_volatile(p as *mut [u8; 8], v.to_ne_bytes()) }
        }
    }

    #[inline]
    pub fn write_u32(&self, off: usize, v: u32) {
        let p = self.range(off, 4);
        if p as usize % 4 == 0 {
            // SAFETY: in bounds and aligned: one volatile store.
            unsafe { std::ptr::write_volatile(p as *mut u32, v) }
        } else {
            // SAFETY: in bounds; a volatile write of 4 plain bytes.
            unsafe { std::ptr::write_volatile(p as *mut [u8; 4], v.to_ne_bytes()) }
        }
    }
}

// The stream protocol's decisions ([`super::wire`]) read received bytes
// and peer-written tables through this (bounds asserted as above).
impl super::super::wire::Buf for RegBuf {
    fn read(&self, off: usize, out: &mut [u8]) {
        RegBuf::read(self, off, out)
    }
    fn read_u32(&self, off: usize) -> u32 {
        RegBuf::read_u32(self, off)
    }
    fn read_u64(&self, off: usize) -> u64 {
        RegBuf::read_u64(self, off)
    }
    #[inline]
    fn read16(&self, off: usize) -> [u8; 16] {
        RegBuf::read16(self, off)
    }
}

impl Drop for RegBuf {
    fn drop(&mut self) {
        // The MR covers our buffer; after it is gone the device cannot
        // touch the memory, which is then freed once. While it is there
        // (a failed deregistration) the memory stays: leaked.
        if !self.reg.release("a stream buffer") {
            return;
        }
        // SAFETY: from posix_memalign (page_alloc), freed once, no longer registered.
        unsafe { libc::free(self.ptr.as_ptr() as *mut c_void) };
    }
}

/// A caller's buffer handed to riomap.
pub struct UserBuf {
    ptr: *mut u8,
    len: usize,
    /// Unit tests: what keeps the memory allocated (see [`TestMem`]).
    #[cfg(test)]
    keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl UserBuf {
    /// # Safety
    /// `[ptr, ptr+len)` is memory of the caller that stays allocated until
    /// the registration made of it is dropped (riounmap or rclose); the
    /// peer may write into it.
    pub unsafe fn new(ptr: *mut u8, len: usize) -> UserBuf {
        UserBuf {
            ptr,
            len,
            #[cfg(test)]
            keep: None,
        }
    }

    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A riomap registration; Drop deregisters it.
pub struct UserMr {
    reg: Reg,
    rkey: u32,
    addr: u64,
    len: usize,
}

// SAFETY: owned registration handle; libibverbs MRs may be used from any thread.
unsafe impl Send for UserMr {}

impl UserMr {
    /// Registers the caller's buffer `b` on `pd` (the id's, kept alive).
    pub(super) fn new(id: &Arc<CmId>, q: &DataQp, b: UserBuf, remote_write: bool) -> Result<UserMr, Errno> {
        // SAFETY: the PD is live (we hold the id, and the registration
        // holds it too); UserBuf's contract keeps the memory allocated
        // until the returned registration is dropped.
        let mr = unsafe { q.reg_mr(b.ptr, b.len, access(remote_write))? };
        Ok(UserMr { rkey: mr.rkey(), reg: Reg::Real { mr, _id: id.clone() }, addr: b.ptr as u64, len: b.len })
    }

    /// Registers `b` on a fake fabric (unit tests).
    #[cfg(test)]
    pub(super) fn new_fake(f: &FakeQp, b: UserBuf, remote_write: bool) -> UserMr {
        let (addr, len) = (b.ptr as u64, b.len);
        let mem = Arc::new(RawMem { ptr: b.ptr, len: b.len, _keep: b.keep });
        let mr = f.reg(mem, addr, remote_write);
        UserMr { rkey: mr.key(), reg: Reg::Fake(mr), addr, len }
    }

    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    pub fn addr(&self) -> u64 {
        self.addr
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for UserMr {
    fn drop(&mut self) {
        // The memory is the caller's (riomap's C contract): a failed
        // deregistration can only be logged.
        self.reg.release("a riomap registration");
    }
}

/// Registered memory as the fake fabric reaches it (unit tests): raw,
/// bounds-checked copies, as the device's DMA would make.
#[cfg(test)]
struct RawMem {
    ptr: *mut u8,
    len: usize,
    /// Keeps a test's riomap memory allocated while registered.
    _keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

// SAFETY: plain memory reached only through bounds-checked raw copies
// (as a device reaches it), from any thread.
#[cfg(test)]
unsafe impl Send for RawMem {}
// SAFETY: as above; concurrent copies into disjoint parts are what a
// device does to registered memory.
#[cfg(test)]
unsafe impl Sync for RawMem {}

#[cfg(test)]
impl super::super::fake::Mem for RawMem {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, off: usize, out: &mut [u8]) {
        assert!(off.checked_add(out.len()).is_some_and(|e| e <= self.len), "fake DMA out of bounds");
        // SAFETY: in bounds; the fabric uses a registration only while it
        // is registered, and its owner deregisters before freeing.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.wrapping_add(off), out.as_mut_ptr(), out.len()) };
    }
    fn write(&self, off: usize, data: &[u8]) {
        assert!(off.checked_add(data.len()).is_some_and(|e| e <= self.len), "fake DMA out of bounds");
        // SAFETY: as in read.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.wrapping_add(off), data.len()) };
    }
}

#[cfg(test)]
impl RegBuf {
    /// A zeroed page allocation registered on a fake fabric.
    pub(super) fn new_fake(q: &FakeQp, len: usize, remote_write: bool) -> Result<RegBuf, Errno> {
        let len = len.max(1);
        let ptr = page_alloc(len)?;
        let mem = Arc::new(RawMem { ptr: ptr.as_ptr(), len, _keep: None });
        let mr = q.reg(mem, ptr.as_ptr() as u64, remote_write);
        let key = mr.key();
        Ok(RegBuf { reg: Reg::Fake(mr), ptr, len, rkey: key })
    }
}

/// Page-allocated memory a unit test hands to riomap (the registration
/// keeps it allocated too) and reads back.
#[cfg(test)]
pub struct TestMem(Arc<TestPages>);

#[cfg(test)]
struct TestPages {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: owned memory reached only through raw copies.
#[cfg(test)]
unsafe impl Send for TestPages {}
// SAFETY: as above.
#[cfg(test)]
unsafe impl Sync for TestPages {}

#[cfg(test)]
impl Drop for TestPages {
    fn drop(&mut self) {
        // SAFETY: from page_alloc, freed once (nothing registers it any more:
        // a registration holds this value alive).
        unsafe { libc::free(self.ptr.as_ptr() as *mut c_void) };
    }
}

#[cfg(test)]
impl TestMem {
    pub fn new(len: usize) -> TestMem {
        TestMem(Arc::new(TestPages { ptr: page_alloc(len).expect("alloc"), len }))
    }
    pub fn user_buf(&self) -> UserBuf {
        UserBuf { ptr: self.0.ptr.as_ptr(), len: self.0.len, keep: Some(self.0.clone()) }
    }
    pub fn bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.0.len];
        // SAFETY: the allocation holds len bytes; the fabric writes only
        // while a copy is made under its lock, and these are plain bytes.
        unsafe { std::ptr::copy_nonoverlapping(self.0.ptr.as_ptr(), v.as_mut_ptr(), v.len()) };
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Registered buffers own whole pages (fork safety with RDMAV_FORK_SAFE:
    /// libibverbs marks the pages of a registration MADV_DONTFORK, which must
    /// not cover anyone else's heap data), and start zeroed.
    #[test]
    fn buffers_are_whole_zeroed_pages() {
        // SAFETY: sysconf has no memory arguments.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        for len in [1usize, 32, page - 1, page, page + 1, 3 * page + 5] {
            let p = page_alloc(len).expect("alloc");
            assert_eq!(p.as_ptr() as usize % page, 0, "len {len}: not page-aligned");
            let total = len.div_ceil(page) * page;
            // SAFETY: page_alloc returned `total` bytes.
            let s = unsafe { std::slice::from_raw_parts(p.as_ptr(), total) };
            assert!(s.iter().all(|b| *b == 0), "len {len}: not zeroed");
            // SAFETY: from posix_memalign.
            unsafe { libc::free(p.as_ptr() as *mut c_void) };
        }
    }

    /// A failed deregistration leaves the memory allocated (leaked), as
    /// the device may still reach it: after the drop the registration's
    /// bytes still read back (1 MiB: freed, it would be unmapped).
    #[test]
    fn failed_deregistration_leaks_the_buffer() {
        let fab = crate::rsocket::fake::Fabric::new();
        let (a, _b) = fab.ends();
        let rb = RegBuf::new_fake(&a, 1 << 20, true).expect("register");
        rb.write((1 << 20) - 4, b"kept");
        let key = rb.rkey();
        let Reg::Fake(m) = &rb.reg else { unreachable!() };
        m.fail_release();
        drop(rb);
        let bytes = fab.region_bytes(key).expect("still registered");
        assert_eq!(&bytes[(1 << 20) - 4..], b"kept");

        // A good deregistration: gone from the fabric (and freed).
        let rb = RegBuf::new_fake(&a, 64, true).expect("register");
        let key = rb.rkey();
        drop(rb);
        assert!(fab.region_bytes(key).is_none());
    }
}
