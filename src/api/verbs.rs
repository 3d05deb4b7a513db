// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The data calls `<rdma/rdma_verbs.h>` gives C, behind safe types: a QP
//! on an id ([`CmId::create_qp`]), memory registration
//! ([`MemoryRegion`]), posting sends, receives, RDMA reads and writes, and
//! completions ([`CmId::poll_cq`], [`CmId::wait_cq`]).
//!
//! Safety argument (why none of this needs `unsafe` from a caller):
//! * a [`MemoryRegion`] owns its buffer (its own, or a caller's
//!   [`RegisterBuffer`] taken over without a copy), a heap block that never
//!   moves and is freed or handed back only after it is deregistered; the
//!   device reaches it only through an [`Sge`] (made by
//!   [`MemoryRegion::sge`], bounds-checked) or its rkey, so every access is
//!   checked by the device against a live registration: after the region
//!   is dropped, work naming it completes with an error instead of
//!   touching freed memory; a failed deregistration leaks the block;
//! * the buffer is read and written by copies ([`MemoryRegion::read`],
//!   [`MemoryRegion::write`]), never through Rust references, because the
//!   device may write it at any time; a copy into it needs `&mut` (one
//!   writer, and no reader meanwhile, on the Rust side), a copy out of it
//!   `&`: two threads never race on it (the device is not a Rust thread;
//!   what its accesses mean is said at [`MemoryRegion`]);
//! * the one exception: a region registered without any write right of
//!   the device lends its bytes as `&[u8]` / `&mut [u8]`
//!   ([`MemoryRegion::as_slice`], [`MemoryRegion::as_mut_slice`]): the
//!   device checks its rights on every access, so nothing but the program
//!   (through `&mut self`) writes the bytes under such a reference;
//! * a region keeps its id, and so the id's PD and device, alive;
//! * the QP, CQ and completion channel belong to the id (destroyed with it).
//!
//! Over 800 lines: the verbs half of the public API (regions and the
//! buffers they take over, address handles, work requests and
//! completions), each type with the rustdoc that is its manual; its unit
//! tests are in verbs_tests.rs. The QP's capacities ([`QpCaps`]) and a UD
//! peer ([`UdParam`]) are the connection manager's values
//! (`crate::cma::params`); [`UdParam::from_wc`], which needs a QP, is
//! here.
//!
//! The verbs calls themselves are the library's one data path
//! (`crate::sys::verbs::data`, shared with rsockets); in unit tests they
//! run over the rsocket tests' fake fabric instead (`Path`). This file
//! is, like `rsocket::verbs`, the one place of its module tree with
//! `unsafe` code: the promise that the id's verbs objects are live
//! (`DataQp::new`), registration and address handles on the id's PD, the
//! region's buffer as raw parts, and the borrowed descriptors of the event
//! and completion channels (`AsFd`), each with its `// SAFETY:` argument.
#![allow(unsafe_code)]

use super::error::{errno, Error, Result};
use crate::cma::params::{QpCaps, UdParam};
use super::id::{CmId, EventChannel, IdInner, Mode};
use crate::abi::cma::ibv_ah_attr;
use crate::sys::verbs::data::{self as dp, DataQp};
use nix::errno::Errno;
use std::ffi::c_int;
use std::marker::PhantomData;
use std::ops::Range;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::Arc;

/// The shim's completion record: the data path's one mirror.
type ShimWc = dp::Wc;

/// The data path under an id's calls: the id's verbs objects, or in unit
/// tests one end of the fake fabric the rsocket tests use
/// (`crate::rsocket::fake`; that arm exists only with `cfg(test)`, so the
/// library's `Path` is the real one alone and every match has one arm).
#[derive(Clone)]
enum Path {
    Real(DataQp),
    #[cfg(test)]
    Fake(crate::rsocket::fake::FakeQp),
}

impl Path {
    /// Posts a send work request of `sgl`, signalled or not, read by the
    /// device later.
    fn post_send(&self, wr_id: u64, sgl: &[Sge], op: SendOp, signaled: bool) -> Result<()> {
        let (opcode, imm, raddr, rkey) = op.raw();
        let flags = if signaled { SEND_SIGNALED } else { 0 };
        match self {
            Path::Real(p) => p.post_send_list(wr_id, &raw_list(sgl), opcode, flags, imm, raddr, rkey).map_err(errno),
            #[cfg(test)]
            Path::Fake(f) => {
                let list: Vec<_> = sgl.iter().map(|g| (g.0.addr(), g.0.length(), g.0.lkey())).collect();
                f.post_send(wr_id, crate::rsocket::fake::FakeData::Sges(&list), opcode, flags & SEND_SIGNALED != 0, imm, raddr, rkey).map_err(errno)
            }
        }
    }

    /// Posts a send work request whose bytes, `data`'s pieces in order,
    /// are copied into it while posting.
    fn post_send_inline(&self, wr_id: u64, data: &[&[u8]], op: SendOp, signaled: bool) -> Result<()> {
        let (opcode, imm, raddr, rkey) = op.raw();
        let flags = if signaled { SEND_SIGNALED } else { 0 };
        match self {
            Path::Real(p) => p.post_send_bytes_inline(wr_id, data, opcode, flags, imm, raddr, rkey).map_err(errno),
            #[cfg(test)]
            Path::Fake(f) => {
                let bytes = data.concat();
                f.post_send(wr_id, crate::rsocket::fake::FakeData::Inline(&bytes), opcode, flags & SEND_SIGNALED != 0, imm, raddr, rkey).map_err(errno)
            }
        }
    }

    /// Posts a receive into `sgl`.
    fn post_recv(&self, wr_id: u64, sgl: &[Sge]) -> Result<()> {
        match self {
            Path::Real(p) => p.post_recv(wr_id, &raw_list(sgl)).map_err(errno),
            #[cfg(test)]
            Path::Fake(f) => match sgl {
                [] => f.post_recv(wr_id, None).map_err(errno),
                [g] => f.post_recv(wr_id, Some((g.0.addr(), g.0.length(), g.0.lkey()))).map_err(errno),
                _ => Err(Error::from_errno(libc::EINVAL)),
            },
        }
    }

    /// Takes up to `out.len()` (at most 16) completions.
    fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize> {
        let mut raw = [ShimWc::default(); dp::POLL_MAX];
        let n = out.len().min(raw.len());
        let got = match self {
            Path::Real(p) => p.poll(&mut raw[..n]).map_err(errno)?,
            #[cfg(test)]
            Path::Fake(f) => {
                let mut got = 0;
                while got < n {
                    let Some(w) = f.poll() else { break };
                    raw[got] = ShimWc { wr_id: w.wr_id, status: w.status, opcode: w.opcode, byte_len: w.byte_len, imm_host: w.imm.unwrap_or(0), wc_flags: if w.imm.is_some() { WcFlags::WITH_IMM.0 } else { 0 }, ..Default::default() };
                    got += 1;
                }
                got
            }
        };
        for (o, r) in out.iter_mut().zip(&raw[..got]) {
            *o = WorkCompletion::from_shim(r);
        }
        Ok(got)
    }

    /// Arms the CQ.
    fn req_notify(&self) -> Result<()> {
        match self {
            Path::Real(p) => p.req_notify(false).map_err(errno),
            #[cfg(test)]
            Path::Fake(f) => {
                f.req_notify();
                Ok(())
            }
        }
    }

    /// Reads one event of the completion channel and acknowledges it at
    /// once, so that destroying the CQ never waits.
    fn take_event(&self) -> std::result::Result<(), Errno> {
        match self {
            Path::Real(p) => {
                p.get_cq_event()?;
                p.ack_cq_events(1);
                Ok(())
            }
            #[cfg(test)]
            Path::Fake(f) => f.get_cq_event(),
        }
    }

    /// The completion channel's descriptor.
    fn channel_fd(&self) -> c_int {
        match self {
            Path::Real(p) => p.channel_fd(),
            #[cfg(test)]
            Path::Fake(f) => f.channel_fd(),
        }
    }

    /// The next completion: polls, arms the CQ, polls again, waits for
    /// the completion channel (until `deadline`, if any), and again;
    /// `None` after the deadline.
    fn wait_until(&self, deadline: Option<std::time::Instant>) -> Result<Option<WorkCompletion>> {
        let mut one = [WorkCompletion::EMPTY];
        loop {
            if self.poll(&mut one)? == 1 {
                return Ok(Some(one[0]));
            }
            self.req_notify()?;
            // A completion that came before the arm is not signalled.
            if self.poll(&mut one)? == 1 {
                return Ok(Some(one[0]));
            }
            if !self.take_cq_event(deadline, true)? {
                return Ok(None);
            }
        }
    }

    /// Reads (and acknowledges) one event of the completion channel:
    /// true; false when `deadline` passed first. On a non-blocking
    /// channel with none: `EAGAIN` unless `wait` (then a `poll` waits).
    fn take_cq_event(&self, deadline: Option<std::time::Instant>, wait: bool) -> Result<bool> {
        loop {
            let e = match self.take_event() {
                Ok(()) => return Ok(true),
                Err(e) => e,
            };
            match e {
                Errno::EINTR => {}
                Errno::EAGAIN if wait => {
                    if !super::id::wait_readable(self.channel_fd(), deadline)? {
                        return Ok(false);
                    }
                }
                e => return Err(errno(e)),
            }
        }
    }

    /// The verbs objects, for the calls only a device makes (UD sends, the
    /// qkey): ENOSYS on the fake fabric.
    fn real(&self) -> Result<&DataQp> {
        match self {
            Path::Real(p) => Ok(p),
            #[cfg(test)]
            Path::Fake(_) => Err(Error::from_errno(libc::ENOSYS)),
        }
    }
}



/// Access rights of a [`MemoryRegion`] (`IBV_ACCESS_*`); combine with `|`.
///
/// ```
/// use rdmacm::Access;
/// let a = Access::LOCAL_WRITE | Access::REMOTE_READ;
/// assert!(a.contains(Access::REMOTE_READ));
/// assert!(!a.contains(Access::REMOTE_WRITE));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Access(u32);

impl Access {
    /// Local reads only (sends from the region).
    pub const NONE: Access = Access(0);
    /// The device may write it (receives, RDMA read results).
    pub const LOCAL_WRITE: Access = Access(1);
    /// The peer may RDMA-write it (implies `LOCAL_WRITE`, added for you).
    pub const REMOTE_WRITE: Access = Access(2);
    /// The peer may RDMA-read it.
    pub const REMOTE_READ: Access = Access(4);
    /// The peer may run atomics on it (implies `LOCAL_WRITE`).
    pub const REMOTE_ATOMIC: Access = Access(8);

    /// Whether every right of `other` is in `self`.
    pub fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// The `IBV_ACCESS_*` bits.
    pub fn bits(self) -> u32 {
        self.0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, o: Access) -> Access {
        Access(self.0 | o.0)
    }
}

/// A scatter/gather entry (`struct ibv_sge`): a range of a registered
/// region, made by [`MemoryRegion::sge`].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sge(dp::Sge);

impl Sge {
    /// The device address of its first byte.
    pub fn addr(&self) -> u64 {
        self.0.addr()
    }
    /// Its length in bytes.
    pub fn len(&self) -> u32 {
        self.0.length()
    }
    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.0.length() == 0
    }
}

/// The data path's entries of a list of [`Sge`]s.
fn raw_list(sgl: &[Sge]) -> Vec<dp::Sge> {
    sgl.iter().map(|s| s.0).collect()
}

mod sealed {
    use std::ptr::NonNull;

    /// What makes a [`super::RegisterBuffer`]: the raw parts of an owned
    /// heap buffer (pointer, length, capacity), and the buffer again from
    /// them.
    pub trait Sealed: Sized {
        /// Gives up the buffer: its first byte, its length and capacity.
        fn into_raw(self) -> (NonNull<u8>, usize, usize);
        /// The buffer again.
        ///
        /// # Safety
        /// The parts come from `into_raw` of this type and are used once.
        unsafe fn from_raw(ptr: NonNull<u8>, len: usize, cap: usize) -> Self;
    }

    impl Sealed for Vec<u8> {
        fn into_raw(self) -> (NonNull<u8>, usize, usize) {
            let mut v = std::mem::ManuallyDrop::new(self);
            (NonNull::new(v.as_mut_ptr()).expect("a Vec's pointer is never null"), v.len(), v.capacity())
        }
        unsafe fn from_raw(ptr: NonNull<u8>, len: usize, cap: usize) -> Self {
            // SAFETY: the parts of a Vec<u8> (into_raw), used once (caller).
            unsafe { Vec::from_raw_parts(ptr.as_ptr(), len, cap) }
        }
    }

    impl Sealed for Box<[u8]> {
        fn into_raw(self) -> (NonNull<u8>, usize, usize) {
            let len = self.len();
            let p = Box::into_raw(self).cast::<u8>();
            (NonNull::new(p).expect("a Box's pointer is never null"), len, len)
        }
        unsafe fn from_raw(ptr: NonNull<u8>, len: usize, _cap: usize) -> Self {
            // SAFETY: the pointer and length of a Box<[u8]> (into_raw), used
            // once (caller).
            unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr.as_ptr(), len)) }
        }
    }
}

/// An owned byte buffer that [`MemoryRegion::from_buffer`] registers in
/// place (no copy) and [`MemoryRegion::into_inner`] hands back: `Vec<u8>`
/// (its `len()` bytes are registered; the spare capacity is neither
/// registered nor touched) and `Box<[u8]>`.
///
/// Sealed: what a region relies on is that the bytes live on the heap (they
/// stay where they are when the value moves) and that nothing but the
/// region reaches them while it holds them (it keeps the buffer as raw
/// parts: no one can resize, reallocate or free it meanwhile).
pub trait RegisterBuffer: sealed::Sealed + Send + 'static {
    // Nothing beyond its supertraits: the sealed one carries the raw parts.
}
impl RegisterBuffer for Vec<u8> {}
impl RegisterBuffer for Box<[u8]> {}

/// A registration (`struct ibv_mr`): a real one, which keeps the id (and
/// so its PD) alive, or in unit tests a fake one.
enum Reg {
    Real { mr: dp::Mr, _id: Arc<IdInner> },
    #[cfg(test)]
    Fake(crate::rsocket::fake::FakeMr),
}

impl Reg {
    /// Deregisters (`ibv_dereg_mr`). `Ok` once the device can no longer
    /// reach the memory; after an error the registration is still there
    /// (libibverbs keeps it: a later call may deregister it) and the
    /// memory must stay.
    fn dereg(&mut self) -> Result<()> {
        match self {
            Reg::Real { mr, .. } => mr.dereg().map_err(errno),
            #[cfg(test)]
            Reg::Fake(f) => match f.release() {
                true => Ok(()),
                false => Err(Error::from_errno(libc::EBUSY)),
            },
        }
    }
}

/// Bytes registered with an id's device (`ibv_reg_mr` on the id's PD): a
/// zeroed buffer of its own ([`MemoryRegion::new`]) or a caller's buffer,
/// registered in place without a copy ([`MemoryRegion::from_buffer`], any
/// [`RegisterBuffer`]: `Vec<u8>`, `Box<[u8]>`). It keeps the id alive;
/// dropping it deregisters and frees the buffer, [`MemoryRegion::into_inner`]
/// deregisters and hands the buffer back.
///
/// The program writes it with [`MemoryRegion::write`] (`&mut self`: one
/// writer at a time, no reader meanwhile) and reads it with
/// [`MemoryRegion::read`] / [`MemoryRegion::to_vec`] (`&self`: from any
/// number of threads), so no two threads of the program ever race on its
/// bytes. The device reads and writes it on its own, ordered by work
/// requests and their completions:
///
/// * a send, RDMA write (the local bytes) or a peer's RDMA read may read
///   the bytes from the post (or the peer's request) until the work's
///   completion is taken: write them before posting and leave them
///   unchanged until then (for an unsignalled send: until the completion
///   of a later signalled send on the same QP, which completes after it);
/// * a receive, a local RDMA read (into the local list) or a peer's RDMA
///   write writes the bytes at any time until its completion: the bytes of
///   a receive or a read are the delivered ones once [`CmId::poll_cq`] or
///   [`CmId::wait_cq`] has returned its completion (`byte_len` of them for
///   a receive); a peer's RDMA write is complete when the peer says so
///   (its following send, or its write with immediate data, whose receive
///   completion comes after the write's bytes);
/// * a thread other than the one that took the completion reads the bytes
///   after learning of it through any synchronisation (a channel, a lock,
///   a join), as for any shared data.
///
/// Bytes read while the device may still write them are unspecified
/// (never undefined behaviour: the copy does not make a Rust reference to
/// them).
///
/// # Without a copy
///
/// A region the device may only read — registered without
/// [`Access::LOCAL_WRITE`], [`Access::REMOTE_WRITE`] and
/// [`Access::REMOTE_ATOMIC`] — lends its bytes in place:
/// [`MemoryRegion::as_slice`] (`&self`) and [`MemoryRegion::as_mut_slice`]
/// (`&mut self`). The device checks every access against the registration,
/// so no receive, RDMA read result or peer's write ever lands in such a
/// region (the work fails with a protection error instead), and a Rust
/// reference into it never aliases a write the program does not make. The
/// device may still read it while the program writes through
/// `as_mut_slice`: what a send posted before that carries is then
/// unspecified, as with `write`.
///
/// A region the device may write has no such view (`EACCES`): a posted
/// receive, or a peer holding its rkey, could write it under the
/// reference, and a region cannot know what is posted or what a peer does.
/// Its bytes come out without a copy by taking the buffer back:
/// [`MemoryRegion::into_inner`] deregisters, after which the device reaches
/// the memory no more, and returns the buffer as plain memory.
///
/// ```no_run
/// # fn f(id: &rdmacm::CmId) -> rdmacm::Result<()> {
/// use rdmacm::{Access, MemoryRegion, SendOp};
/// let data: Vec<u8> = vec![7; 1 << 20];
/// // A send buffer, in place: the device only reads it.
/// let mut src = MemoryRegion::from_buffer(id, data, Access::NONE).map_err(|(e, _)| e)?;
/// src.as_mut_slice()?[..4].copy_from_slice(b"ping");
/// id.post_send(1, &[src.sge(0..src.len())?], SendOp::Send, true)?;
/// id.wait_cq()?;
/// // A receive buffer: the device writes it; its bytes come back with it.
/// let sink = MemoryRegion::from_buffer(id, vec![0u8; 1 << 20], Access::LOCAL_WRITE).map_err(|(e, _)| e)?;
/// id.post_recv(2, &[sink.sge(0..sink.len())?])?;
/// let wc = id.wait_cq()?;
/// let received: Vec<u8> = sink.into_inner().map_err(|(e, _)| e)?;
/// let payload = &received[..wc.byte_len as usize];
/// # let _ = payload; Ok(()) }
/// ```
///
/// # A failed deregistration
///
/// If `ibv_dereg_mr` fails the device may still reach the memory, so it is
/// never freed: [`MemoryRegion::into_inner`] returns the error with the
/// region (to try again, or to drop), and a drop whose deregistration fails
/// leaks the buffer (and logs a warning on the `rdmacm` target).
///
/// ```no_run
/// # fn f(id: &rdmacm::CmId) -> rdmacm::Result<()> {
/// use rdmacm::{Access, MemoryRegion};
/// let mut mr = MemoryRegion::new(id, 4096, Access::LOCAL_WRITE | Access::REMOTE_READ)?;
/// mr.write(0, b"ping")?;
/// let sge = mr.sge(0..4)?;
/// id.post_send(1, &[sge], rdmacm::SendOp::Send, true)?;
/// # Ok(()) }
/// ```
/// cbindgen:ignore
pub struct MemoryRegion<B: RegisterBuffer = Box<[u8]>> {
    reg: Reg,
    buf: NonNull<u8>,
    len: usize,
    cap: usize,
    lkey: u32,
    rkey: u32,
    access: Access,
    _buf: PhantomData<B>,
}

// SAFETY: Send: the fields are a registration (`struct ibv_mr`, which
// libibverbs lets any thread use and deregister: it has no thread
// affinity, and an `Arc<IdInner>`, Send + Sync), the raw parts of a buffer
// owned by the region alone (B: Send; freed or handed back by whichever
// thread drops the region or calls `into_inner`), and plain keys. Nothing
// refers to the thread that made it.
unsafe impl<B: RegisterBuffer> Send for MemoryRegion<B> {}
// SAFETY: Sync: what `&MemoryRegion` allows from several threads at once
// is reading: `read`/`to_vec` copy out of the block and `as_slice` lends it
// (concurrent reads are no race), the rest reads immutable fields. Every
// write of the program into the block (`write`, `as_mut_slice`) takes
// `&mut self`, so it never runs beside another access of the program's
// threads. The device's accesses are not a Rust thread's; they are ordered
// by work requests and completions, and `as_slice` exists only for regions
// the device cannot write (see the type's doc).
unsafe impl<B: RegisterBuffer> Sync for MemoryRegion<B> {}

/// `access` with what it implies: a region a peer may write or run atomics
/// on is locally writable too.
fn full_access(access: Access) -> Access {
    if access.contains(Access::REMOTE_WRITE) || access.contains(Access::REMOTE_ATOMIC) {
        access | Access::LOCAL_WRITE
    } else {
        access
    }
}

/// Whether the device may write a region registered with `access`.
fn device_writes(access: Access) -> bool {
    access.0 & (Access::LOCAL_WRITE.0 | Access::REMOTE_WRITE.0 | Access::REMOTE_ATOMIC.0) != 0
}

impl MemoryRegion {
    /// Allocates `len` zeroed bytes (at least 1; `ENOMEM` when they cannot
    /// be had) and registers them on the id's device with `access`
    /// (`EINVAL` before the id has a device: resolve or bind it first).
    /// [`MemoryRegion::into_inner`] hands them back as a `Box<[u8]>`.
    pub fn new<M: Mode>(id: &CmId<M>, len: usize, access: Access) -> Result<MemoryRegion> {
        id.id.pd_ptr().ok_or(Error::from_errno(libc::EINVAL))?;
        let len = len.max(1);
        let mut v = Vec::new();
        v.try_reserve_exact(len).map_err(|_| Error::from_errno(libc::ENOMEM))?;
        v.resize(len, 0);
        MemoryRegion::from_buffer(id, v.into_boxed_slice(), access).map_err(|(e, _)| e)
    }
}

impl<B: RegisterBuffer> MemoryRegion<B> {
    /// Registers the caller's buffer in place, without a copy, on the id's
    /// device with `access` (`ibv_reg_mr` of its bytes: a `Vec`'s `len()`
    /// bytes). The region owns the buffer until it is dropped (which frees
    /// it) or [`MemoryRegion::into_inner`] hands it back. On an error the
    /// buffer comes back with it: `EINVAL` for an empty buffer or an id
    /// without a device yet, else what the registration failed with.
    ///
    /// A region the device may only read (no write right in `access`)
    /// lends its bytes in place ([`MemoryRegion::as_slice`],
    /// [`MemoryRegion::as_mut_slice`]); see the type's doc.
    ///
    /// Registration covers whole pages: where libibverbs' fork protection
    /// is on (`RDMAV_FORK_SAFE` on a kernel that needs it) a forked child
    /// does not get them, other heap data sharing those pages included.
    pub fn from_buffer<M: Mode>(id: &CmId<M>, buf: B, access: Access) -> std::result::Result<MemoryRegion<B>, (Error, B)> {
        let access = full_access(access);
        let Some(pd) = id.id.pd_ptr() else {
            return Err((Error::from_errno(libc::EINVAL), buf));
        };
        let (ptr, len, cap) = buf.into_raw();
        let mr = if len == 0 {
            Err(Errno::EINVAL)
        } else {
            // SAFETY: pd is the id's live PD, kept alive by the region (it
            // holds the id); ptr is len bytes we own (the region keeps
            // them until after the deregistration).
            unsafe { dp::reg_mr(pd, ptr.as_ptr(), len, access.0 as c_int) }
        };
        let mr = match mr {
            Ok(mr) => mr,
            // SAFETY: the parts taken above, used once (nothing registered them).
            Err(e) => return Err((errno(e), unsafe { B::from_raw(ptr, len, cap) })),
        };
        let (lkey, rkey) = (mr.lkey(), mr.rkey());
        Ok(MemoryRegion { reg: Reg::Real { mr, _id: id.id.clone() }, buf: ptr, len, cap, lkey, rkey, access, _buf: PhantomData })
    }

    /// Deregisters and hands the buffer back, as it was given (its bytes as
    /// the program and the device left them). The device cannot reach it
    /// any more. If the deregistration fails the region comes back with
    /// the error, still registered: try again, or drop it (which leaks the
    /// buffer rather than free memory the device may still reach).
    pub fn into_inner(self) -> std::result::Result<B, (Error, MemoryRegion<B>)> {
        let mut this = self;
        if let Err(e) = this.reg.dereg() {
            return Err((e, this));
        }
        let this = std::mem::ManuallyDrop::new(this);
        // SAFETY: `this` is never used or dropped again: its registration
        // (deregistered above) is read out once and dropped here (which
        // releases the id), and the buffer's parts are used once.
        unsafe {
            drop(std::ptr::read(&this.reg));
            Ok(B::from_raw(this.buf, this.len, this.cap))
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false (a region has at least one byte).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The access rights it was registered with (`LOCAL_WRITE` added where
    /// a remote right implies it).
    pub fn access(&self) -> Access {
        self.access
    }

    /// The local key.
    pub fn lkey(&self) -> u32 {
        self.lkey
    }

    /// The remote key: give it (with [`MemoryRegion::addr`]) to the peer for
    /// RDMA reads and writes of this region.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// The device address of its first byte.
    pub fn addr(&self) -> u64 {
        self.buf.as_ptr() as usize as u64
    }

    fn range(&self, offset: usize, n: usize) -> Result<()> {
        match offset.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::from_errno(libc::EINVAL)),
        }
    }

    /// Copies `data` into the region at `offset` (`EINVAL` past its end).
    /// Exclusive (`&mut self`): no other thread reads or writes the region
    /// meanwhile. Bytes a posted send may still read are changed for it
    /// too (see the type's doc: write before posting).
    ///
    /// A region shared by reference cannot be written, so two threads
    /// cannot race on it:
    ///
    /// ```compile_fail
    /// fn shared(mr: &rdmacm::MemoryRegion) -> rdmacm::Result<()> {
    ///     mr.write(0, b"x") // error: `mr` is a `&` reference
    /// }
    /// ```
    pub fn write(&mut self, offset: usize, data: &[u8]) -> Result<()> {
        self.range(offset, data.len())?;
        // SAFETY: in bounds (checked); a raw copy, no reference to the
        // buffer is made (the device may write it concurrently); &mut self:
        // no thread of the program reads or writes the block meanwhile.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.buf.as_ptr().add(offset), data.len()) };
        Ok(())
    }

    /// Copies bytes of the region at `offset` into `out` (`EINVAL` past its
    /// end). Shared (`&self`): any number of threads may read at once.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.range(offset, out.len())?;
        // SAFETY: in bounds (checked); a raw copy, no reference to the
        // buffer is made (the device may write it concurrently); the only
        // writers of the program's threads (`write`, `as_mut_slice`) hold
        // &mut self, so none runs beside this read.
        unsafe { std::ptr::copy_nonoverlapping(self.buf.as_ptr().add(offset), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// The bytes in `range`, copied out.
    pub fn to_vec(&self, range: Range<usize>) -> Result<Vec<u8>> {
        let mut v = vec![0; range.end.saturating_sub(range.start)];
        self.read(range.start, &mut v)?;
        Ok(v)
    }

    /// The region's bytes in place, without a copy, for a region the
    /// device may only read ([`MemoryRegion::access`] has none of
    /// `LOCAL_WRITE`, `REMOTE_WRITE`, `REMOTE_ATOMIC`); `EACCES` for one it
    /// may write (read that by copies, or take the buffer back with
    /// [`MemoryRegion::into_inner`]). Shared (`&self`): any number of
    /// threads may hold it at once.
    pub fn as_slice(&self) -> Result<&[u8]> {
        if device_writes(self.access) {
            return Err(Error::from_errno(libc::EACCES));
        }
        // SAFETY: len initialised bytes of the owned buffer, alive while
        // self is; nothing writes them while the slice lives: the device
        // has no write right on the registration (it checks every access
        // against it), and the program's writers take &mut self.
        Ok(unsafe { std::slice::from_raw_parts(self.buf.as_ptr(), self.len) })
    }

    /// The region's bytes in place, writable, without a copy, for a region
    /// the device may only read (as [`MemoryRegion::as_slice`]: `EACCES`
    /// otherwise). Exclusive (`&mut self`). Bytes a posted send may still
    /// read are changed for it too (see the type's doc).
    ///
    /// ```compile_fail
    /// fn shared(mr: &rdmacm::MemoryRegion<Vec<u8>>) {
    ///     mr.as_mut_slice(); // error: `mr` is a `&` reference
    /// }
    /// ```
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8]> {
        if device_writes(self.access) {
            return Err(Error::from_errno(libc::EACCES));
        }
        // SAFETY: as in as_slice, and &mut self: no other reference of the
        // program's threads into the buffer lives meanwhile. The device may
        // read the bytes meanwhile (a posted send): it then carries
        // unspecified bytes, which is no access of the program's.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.buf.as_ptr(), self.len) })
    }

    /// A scatter entry for `range` of the region (`EINVAL` past its end).
    pub fn sge(&self, range: Range<usize>) -> Result<Sge> {
        let n = range.end.checked_sub(range.start).ok_or(Error::from_errno(libc::EINVAL))?;
        self.range(range.start, n)?;
        let length = u32::try_from(n).map_err(|_| Error::from_errno(libc::EINVAL))?;
        Ok(Sge(match &self.reg {
            Reg::Real { mr, .. } => mr.sge(range.start, length).ok_or(Error::from_errno(libc::EINVAL))?,
            #[cfg(test)]
            Reg::Fake(_) => dp::Sge::fake(self.addr() + range.start as u64, length, self.lkey),
        }))
    }
}

impl<B: RegisterBuffer> std::fmt::Debug for MemoryRegion<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRegion").field("addr", &self.addr()).field("len", &self.len).field("lkey", &self.lkey).field("rkey", &self.rkey).field("access", &self.access).finish()
    }
}

impl<B: RegisterBuffer> Drop for MemoryRegion<B> {
    fn drop(&mut self) {
        // The device may still reach the memory after a failed
        // deregistration: leaked then rather than freed (the library's one
        // policy, logged).
        let done = self.reg.dereg();
        if !dp::release_or_leak(done, "a memory region", self.len) {
            return;
        }
        // SAFETY: the parts of the buffer the region owns, used once; no
        // registration names it any more.
        drop(unsafe { B::from_raw(self.buf, self.len, self.cap) });
    }
}

/// What a send work request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// A send (consumes a receive at the peer).
    Send,
    /// A send with 32 bits of immediate data, given in host order (it
    /// travels in network order, as C's `htobe32(x)` in `imm_data`; the
    /// receiver's [`WorkCompletion::imm`] is `x` again).
    SendWithImm(u32),
    /// Writes the local scatter list to the peer's memory.
    Write {
        /// The peer's address.
        remote_addr: u64,
        /// The peer's remote key.
        rkey: u32,
    },
    /// As `Write`, and consumes a receive at the peer with immediate data.
    WriteWithImm {
        /// The peer's address.
        remote_addr: u64,
        /// The peer's remote key.
        rkey: u32,
        /// The immediate data, in host order (as for
        /// [`SendOp::SendWithImm`]).
        imm: u32,
    },
    /// Reads the peer's memory into the local scatter list.
    Read {
        /// The peer's address.
        remote_addr: u64,
        /// The peer's remote key.
        rkey: u32,
    },
}

impl SendOp {
    /// (IBV_WR_* opcode, immediate, remote address, rkey)
    fn raw(self) -> (c_int, u32, u64, u32) {
        match self {
            SendOp::Write { remote_addr, rkey } => (0, 0, remote_addr, rkey),
            SendOp::WriteWithImm { remote_addr, rkey, imm } => (1, imm, remote_addr, rkey),
            SendOp::Send => (2, 0, 0, 0),
            SendOp::SendWithImm(imm) => (3, imm, 0, 0),
            SendOp::Read { remote_addr, rkey } => (4, 0, remote_addr, rkey),
        }
    }
}

use dp::SEND_SIGNALED;

/// The status of a work completion (`enum ibv_wc_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// The work completed.
    Success,
    /// The work was flushed (the QP is in the error state).
    WrFlushErr,
    /// Any other failure, by its `IBV_WC_*` number.
    Error(u32),
}

impl WcStatus {
    fn from_raw(n: u32) -> WcStatus {
        match n {
            0 => WcStatus::Success,
            5 => WcStatus::WrFlushErr,
            n => WcStatus::Error(n),
        }
    }
}

/// What a completed work request was (`enum ibv_wc_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// A send.
    Send,
    /// An RDMA write.
    RdmaWrite,
    /// An RDMA read.
    RdmaRead,
    /// A receive.
    Recv,
    /// A receive consumed by an RDMA write with immediate data.
    RecvRdmaWithImm,
    /// Another opcode, by number.
    Other(u32),
}

impl WcOpcode {
    fn from_raw(n: u32) -> WcOpcode {
        match n {
            0 => WcOpcode::Send,
            1 => WcOpcode::RdmaWrite,
            2 => WcOpcode::RdmaRead,
            128 => WcOpcode::Recv,
            129 => WcOpcode::RecvRdmaWithImm,
            n => WcOpcode::Other(n),
        }
    }
}

/// Flags of a work completion (`enum ibv_wc_flags`), as
/// [`WorkCompletion::wc_flags`] reports them.
///
/// ```
/// use rdmacm::WcFlags;
/// let f = WcFlags::GRH | WcFlags::WITH_IMM;
/// assert!(f.contains(WcFlags::GRH));
/// assert!(!f.contains(WcFlags::IP_CSUM_OK));
/// assert_eq!(f.bits(), 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct WcFlags(u32);

impl WcFlags {
    /// None of the flags.
    pub const NONE: WcFlags = WcFlags(0);
    /// The receive buffer starts with a valid 40-byte global route header
    /// ([`GRH_LEN`]; on RoCEv2 over IPv4: the IPv4 header in its last 20
    /// bytes): `IBV_WC_GRH`.
    pub const GRH: WcFlags = WcFlags(1);
    /// The completion carries immediate data ([`WorkCompletion::imm`]):
    /// `IBV_WC_WITH_IMM`.
    pub const WITH_IMM: WcFlags = WcFlags(2);
    /// The device verified the IP checksum: `IBV_WC_IP_CSUM_OK`.
    pub const IP_CSUM_OK: WcFlags = WcFlags(4);
    /// The completion carries an invalidated rkey: `IBV_WC_WITH_INV`.
    pub const WITH_INV: WcFlags = WcFlags(8);

    /// The flags of the raw `IBV_WC_*` bits (unknown bits are kept).
    pub fn from_bits(bits: u32) -> WcFlags {
        WcFlags(bits)
    }

    /// Whether every flag of `other` is in `self`.
    pub fn contains(self, other: WcFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The raw `IBV_WC_*` bits.
    pub fn bits(self) -> u32 {
        self.0
    }
}

impl std::ops::BitOr for WcFlags {
    type Output = WcFlags;
    fn bitor(self, o: WcFlags) -> WcFlags {
        WcFlags(self.0 | o.0)
    }
}

/// The length of the global route header a UD receive buffer starts with
/// (`struct ibv_grh`): every UD receive needs this much room in front of
/// the datagram, whether the header is valid ([`WcFlags::GRH`]) or not.
pub const GRH_LEN: usize = 40;

/// One work completion (`struct ibv_wc`). `WorkCompletion::default()` is
/// an empty record to poll into ([`CmId::poll_cq`]).
///
/// The fields after `vendor_err` describe the sender of a receive on a UD
/// QP: with the GRH of the receive buffer they make the address back to it
/// ([`AddressHandle::from_wc`], [`UdParam::from_wc`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkCompletion {
    /// The caller's number of the work request.
    pub wr_id: u64,
    /// How it ended.
    pub status: WcStatus,
    /// What it was (meaningful when successful).
    pub opcode: WcOpcode,
    /// Bytes received (receives; on a UD QP including the [`GRH_LEN`]
    /// bytes of the global route header).
    pub byte_len: u32,
    /// Immediate data, if the completion carries it
    /// ([`WcFlags::WITH_IMM`]), in host order: the number the sender
    /// posted ([`SendOp::SendWithImm`], [`CmId::post_ud_send_with_imm`]).
    /// The wire carries it big-endian (`imm_data` is `__be32` in C): a C
    /// sender that posts `htobe32(x)` is read here as `x`.
    pub imm: Option<u32>,
    /// The sender's QP number (UD receives).
    pub src_qp: u32,
    /// The vendor's error code (failures).
    pub vendor_err: u32,
    /// The completion's flags (`wc_flags`): [`WcFlags::GRH`] when the
    /// receive buffer starts with a valid GRH, [`WcFlags::WITH_IMM`] with
    /// immediate data.
    pub wc_flags: WcFlags,
    /// The local QP's number (`qp_num`).
    pub qp_num: u32,
    /// The sender's LID (UD receives; 0 on RoCE and iWARP).
    pub slid: u16,
    /// The sender's service level (UD receives).
    pub sl: u8,
    /// The index of the P_Key the datagram came with (UD receives on
    /// InfiniBand).
    pub pkey_index: u16,
    /// The destination LID's path bits (UD receives on InfiniBand).
    pub dlid_path_bits: u8,
}

impl Default for WorkCompletion {
    /// A successful send of work request 0 with every other field zero.
    fn default() -> WorkCompletion {
        WorkCompletion::EMPTY
    }
}

impl WorkCompletion {
    pub(crate) const EMPTY: WorkCompletion = WorkCompletion {
        wr_id: 0,
        status: WcStatus::Success,
        opcode: WcOpcode::Send,
        byte_len: 0,
        imm: None,
        src_qp: 0,
        vendor_err: 0,
        wc_flags: WcFlags::NONE,
        qp_num: 0,
        slid: 0,
        sl: 0,
        pkey_index: 0,
        dlid_path_bits: 0,
    };

    fn from_shim(w: &ShimWc) -> WorkCompletion {
        let wc_flags = WcFlags(w.wc_flags);
        WorkCompletion {
            wr_id: w.wr_id,
            status: WcStatus::from_raw(w.status),
            opcode: WcOpcode::from_raw(w.opcode),
            byte_len: w.byte_len,
            imm: wc_flags.contains(WcFlags::WITH_IMM).then_some(w.imm_host),
            src_qp: w.src_qp,
            vendor_err: w.vendor_err,
            wc_flags,
            qp_num: w.qp_num,
            slid: w.slid,
            sl: w.sl,
            pkey_index: w.pkey_index,
            dlid_path_bits: w.dlid_path_bits,
        }
    }

    /// The shim's record of it (what `ibv_init_ah_from_wc` reads).
    fn to_shim(self) -> ShimWc {
        ShimWc {
            wr_id: self.wr_id,
            status: match self.status {
                WcStatus::Success => 0,
                WcStatus::WrFlushErr => 5,
                WcStatus::Error(n) => n,
            },
            opcode: match self.opcode {
                WcOpcode::Send => 0,
                WcOpcode::RdmaWrite => 1,
                WcOpcode::RdmaRead => 2,
                WcOpcode::Recv => 128,
                WcOpcode::RecvRdmaWithImm => 129,
                WcOpcode::Other(n) => n,
            },
            vendor_err: self.vendor_err,
            byte_len: self.byte_len,
            imm_host: self.imm.unwrap_or(0),
            wc_flags: self.wc_flags.0,
            qp_num: self.qp_num,
            src_qp: self.src_qp,
            slid: self.slid,
            pkey_index: self.pkey_index,
            sl: self.sl,
            dlid_path_bits: self.dlid_path_bits,
        }
    }

    /// Whether it succeeded.
    pub fn is_ok(&self) -> bool {
        self.status == WcStatus::Success
    }
}

/// The address vector back to the sender of a UD receive
/// (`ibv_init_ah_from_wc` on the id's device and port).
fn ah_attr_from_wc<M: Mode>(id: &CmId<M>, wc: &WorkCompletion, grh: &[u8; GRH_LEN]) -> Result<ibv_ah_attr> {
    let ctx = id.id.verbs_context();
    if ctx.is_null() {
        return Err(Error::from_errno(libc::EINVAL));
    }
    // SAFETY: ctx is the id's open device context (we hold the id).
    unsafe { dp::init_ah_from_wc(ctx, id.id.port_num(), &wc.to_shim(), grh) }.map_err(errno)
}

/// An address handle (`struct ibv_ah`) for UD sends to one remote end.
/// It keeps its id alive.
pub struct AddressHandle {
    /// Destroyed on drop, before the id goes (field order).
    ah: dp::Ah,
    _id: Arc<IdInner>,
}

impl AddressHandle {
    /// An address handle on the id's PD for the remote end an event
    /// reported ([`Event::ud_param`](crate::Event::ud_param)).
    pub fn new<M: Mode>(id: &CmId<M>, to: &UdParam) -> Result<AddressHandle> {
        let pd = id.id.pd_ptr().ok_or(Error::from_errno(libc::EINVAL))?;
        // SAFETY: pd is the id's live PD, kept alive by the handle (it
        // holds the id); the attributes are a valid ibv_ah_attr (copied
        // from the kernel's event, or made by ibv_init_ah_from_wc).
        let ah = unsafe { dp::create_ah(pd, &to.ah_attr) }.map_err(errno)?;
        Ok(AddressHandle { ah, _id: id.id.clone() })
    }

    /// An address handle on the id's PD back to the sender of a UD receive
    /// (`ibv_create_ah_from_wc`): from the completion's sender fields
    /// ([`WorkCompletion::slid`], [`WorkCompletion::sl`],
    /// [`WorkCompletion::dlid_path_bits`], [`WorkCompletion::wc_flags`])
    /// and the first [`GRH_LEN`] bytes of the receive's buffer, on the id's
    /// port. With [`WcFlags::GRH`] the route is global: its destination GID
    /// is the GRH's source GID, or on RoCEv2 over IPv4 the IPv4-mapped
    /// source address of the IPv4 header the device put in the GRH's last
    /// 20 bytes; the source GID is the local one the datagram was sent to
    /// (`EINVAL` for a multicast destination: answer a group by its
    /// [`EventKind::MulticastJoin`](crate::EventKind::MulticastJoin)
    /// parameters; `EINVAL` before the id has a device). Send to [`WorkCompletion::src_qp`] (or the QP number
    /// the peer's protocol names) with the qkey both ends use
    /// ([`CmId::qkey`] for the UDP port space's).
    pub fn from_wc<M: Mode>(id: &CmId<M>, wc: &WorkCompletion, grh: &[u8; GRH_LEN]) -> Result<AddressHandle> {
        let ud = UdParam { ah_attr: ah_attr_from_wc(id, wc, grh)?, qp_num: wc.src_qp, qkey: 0 };
        AddressHandle::new(id, &ud)
    }
}

impl std::fmt::Debug for AddressHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AddressHandle")
    }
}

impl UdParam {
    /// The remote end of a UD receive, to answer it
    /// (`ibv_init_ah_from_wc`, see [`AddressHandle::from_wc`] for the
    /// address): QP number [`WorkCompletion::src_qp`] and the qkey of the
    /// id's own QP ([`CmId::qkey`]: ends of one port space share it).
    /// `EINVAL` before the id has a device and a QP; otherwise the errors
    /// of [`AddressHandle::from_wc`]'s address.
    pub fn from_wc<M: Mode>(id: &CmId<M>, wc: &WorkCompletion, grh: &[u8; GRH_LEN]) -> Result<UdParam> {
        let qkey = id.qkey()?;
        Ok(UdParam { ah_attr: ah_attr_from_wc(id, wc, grh)?, qp_num: wc.src_qp, qkey })
    }
}

/// The event channel's descriptor, borrowed from the channel.
impl AsFd for EventChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor of the channel, which is closed only when
        // its last owner (this EventChannel or one of its ids) goes: not
        // while `self` is borrowed.
        unsafe { BorrowedFd::borrow_raw(self.as_raw_fd()) }
    }
}

/// The entries of an id's CQ: one for every send and receive the QP can
/// have outstanding (at least one).
pub(super) fn cq_entries(caps: &QpCaps) -> u32 {
    caps.max_send_wr.saturating_add(caps.max_recv_wr).max(1)
}

/// The QP and the data calls of `rdma_verbs.h`.
impl<M: Mode> CmId<M> {
    /// Creates the id's QP (`rdma_create_qp`; RC, or UD for
    /// [`PortSpace::Udp`](crate::PortSpace::Udp)) on the device's PD, with
    /// one CQ for both directions and its own completion channel. Once per
    /// id; `EINVAL` before the id has a device. Returns the capacities the
    /// device granted.
    ///
    /// Only the sends posted with `signaled: true` complete successfully
    /// on the CQ (the QP is made with `sq_sig_all = 0`); an unsignalled
    /// send reports a completion only when it fails. Its send queue slot
    /// is freed when a later signalled send on the QP completes, so post a
    /// signalled send at least once every `max_send_wr` sends: a send
    /// queue full of unsignalled sends fails the next post (`ENOMEM`). The
    /// CQ has `max_send_wr + max_recv_wr` entries of the capacities asked
    /// for: one for every send and receive that can be outstanding at
    /// once, so it cannot overflow however the sends are signalled, as
    /// long as no more are outstanding than asked for (a device may grant
    /// more).
    pub fn create_qp(&self, caps: QpCaps) -> Result<QpCaps> {
        let cqe = cq_entries(&caps);
        // sq_sig_all = 0: `signaled` decides (C's rdma_create_qp passes
        // the caller's sq_sig_all instead).
        if self.id.is_ud() { self.id.create_ud_qp(cqe, caps, false) } else { self.id.create_rc_qp(cqe, caps, false) }.map_err(errno)
    }

    /// The QP's number (`None` before [`CmId::create_qp`]).
    pub fn qp_num(&self) -> Option<u32> {
        self.id.qp_num()
    }

    fn qp(&self) -> Result<Path> {
        let p = self.id.qp_ptrs().ok_or(Error::from_errno(libc::EINVAL))?;
        // SAFETY: the QP, CQ, channel and PD of the id, live while it lives
        // (crate::cma::api); the value is used only during calls on `self`
        // (which holds the id), and every region and address handle made
        // on the id holds the id too.
        Ok(Path::Real(unsafe { DataQp::new(p.qp, p.cq, p.channel, p.pd) }))
    }

    /// Posts a send, RDMA write or RDMA read of the scatter list
    /// (`rdma_post_send` / `rdma_post_write` / `rdma_post_read`).
    /// `signaled`: a completion is reported for it; without it, none is
    /// unless the work fails (see [`CmId::create_qp`] for the rule on how
    /// often to signal).
    pub fn post_send(&self, wr_id: u64, sgl: &[Sge], op: SendOp, signaled: bool) -> Result<()> {
        self.qp()?.post_send(wr_id, sgl, op, signaled)
    }

    /// As [`CmId::post_send`] with bytes of the caller's, `data`'s pieces
    /// in order, copied into the work request while it is posted
    /// (`IBV_SEND_INLINE`: at most `max_inline_data` bytes in all). No
    /// registration is needed, and the bytes may be reused as soon as the
    /// call returns: the device never reads them.
    pub fn post_send_inline(&self, wr_id: u64, data: &[&[u8]], op: SendOp, signaled: bool) -> Result<()> {
        self.qp()?.post_send_inline(wr_id, data, op, signaled)
    }

    /// Posts a receive into the scatter list (`rdma_post_recv`).
    pub fn post_recv(&self, wr_id: u64, sgl: &[Sge]) -> Result<()> {
        self.qp()?.post_recv(wr_id, sgl)
    }

    /// Posts a UD send to the remote end of `ah` (`rdma_post_ud_send`):
    /// `remote_qpn` and `remote_qkey` as the event reported them
    /// ([`UdParam::qp_num`], [`UdParam::qkey`]) or as
    /// [`UdParam::from_wc`] made them.
    pub fn post_ud_send(&self, wr_id: u64, sgl: &[Sge], ah: &AddressHandle, remote_qpn: u32, remote_qkey: u32, signaled: bool) -> Result<()> {
        self.post_ud(wr_id, sgl, ah, (remote_qpn, remote_qkey), None, signaled)
    }

    /// As [`CmId::post_ud_send`], with 32 bits of immediate data
    /// (`IBV_WR_SEND_WITH_IMM`). `imm` is a number in host order; it goes
    /// on the wire big-endian, so the receiver's [`WorkCompletion::imm`]
    /// is `imm` again and a C receiver reads it with
    /// `be32toh(wc.imm_data)` (rdma-core's `udaddy` and `mckey` put their
    /// QP number there).
    #[allow(clippy::too_many_arguments)]
    pub fn post_ud_send_with_imm(&self, wr_id: u64, sgl: &[Sge], ah: &AddressHandle, remote_qpn: u32, remote_qkey: u32, imm: u32, signaled: bool) -> Result<()> {
        self.post_ud(wr_id, sgl, ah, (remote_qpn, remote_qkey), Some(imm), signaled)
    }

    fn post_ud(&self, wr_id: u64, sgl: &[Sge], ah: &AddressHandle, (qpn, qkey): (u32, u32), imm: Option<u32>, signaled: bool) -> Result<()> {
        let flags = if signaled { SEND_SIGNALED } else { 0 };
        self.qp()?.real()?.post_ud_send(wr_id, &raw_list(sgl), flags, &ah.ah, qpn, qkey, imm).map_err(errno)
    }

    /// The qkey of the id's QP (`ibv_query_qp` with `IBV_QP_QKEY`): a UD
    /// QP of the UDP port space has the connection manager's
    /// (`RDMA_UDP_QKEY`, 0x01234567); a multicast join may set the
    /// group's. `EINVAL` before [`CmId::create_qp`].
    pub fn qkey(&self) -> Result<u32> {
        self.qp()?.real()?.qkey().map_err(errno)
    }

    /// The active MTU of the id's port in bytes (`ibv_query_port`'s
    /// `active_mtu`): the most one UD send or multicast datagram carries
    /// (rdma-core's `mckey` refuses a message size above it). `EINVAL`
    /// before the id has a device (before its address is resolved or
    /// bound to one).
    pub fn active_mtu(&self) -> Result<u32> {
        let ctx = self.id.verbs_context();
        if ctx.is_null() {
            return Err(Error::from_errno(libc::EINVAL));
        }
        // SAFETY: the context of the id's device, open while the id (held
        // through `self`) keeps its device.
        unsafe { crate::sys::verbs::port_active_mtu(ctx, self.id.port_num()) }.map_err(errno)
    }

    /// Takes up to `out.len()` (at most 16) completions off the id's CQ
    /// without waiting (`ibv_poll_cq`); how many it took.
    pub fn poll_cq(&self, out: &mut [WorkCompletion]) -> Result<usize> {
        self.qp()?.poll(out)
    }

    /// The next completion, waiting for it if needed
    /// (`rdma_get_send_comp` / `rdma_get_recv_comp`: arms the CQ, sleeps on
    /// its completion channel, polls again).
    pub fn wait_cq(&self) -> Result<WorkCompletion> {
        self.wait_cq_until(None).map(|wc| wc.expect("no deadline"))
    }

    /// The next completion, waiting at most `timeout` for it: `Ok(None)`
    /// when none came in that time (`Duration::ZERO`: only one already
    /// there). Only completions count: an unsignalled send that succeeds
    /// reports none ([`CmId::create_qp`]). The first call makes the
    /// completion channel non-blocking for good (the wait is a `poll` of
    /// it); [`CmId::get_cq_event`] still blocks unless
    /// [`CmId::set_cq_nonblocking`] says otherwise.
    ///
    /// ```no_run
    /// # fn f(id: &rdmacm::CmId) -> rdmacm::Result<()> {
    /// use std::time::Duration;
    /// match id.wait_cq_timeout(Duration::from_millis(100))? {
    ///     Some(wc) => println!("{:?} {:?}", wc.opcode, wc.status),
    ///     None => println!("nothing completed in 100 ms"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn wait_cq_timeout(&self, timeout: std::time::Duration) -> Result<Option<WorkCompletion>> {
        let deadline = std::time::Instant::now().checked_add(timeout);
        self.id.cq_nb.for_timed_waits(self.cq_channel_fd()?)?;
        self.wait_cq_until(deadline)
    }

    /// See [`Path::wait_until`].
    fn wait_cq_until(&self, deadline: Option<std::time::Instant>) -> Result<Option<WorkCompletion>> {
        self.qp()?.wait_until(deadline)
    }

    /// Arms the CQ: the next completion makes the completion channel
    /// ([`CmId::cq_channel_fd`]) readable (`ibv_req_notify_cq`).
    pub fn req_notify_cq(&self) -> Result<()> {
        self.qp()?.req_notify()
    }

    /// Reads (and acknowledges) one event of the completion channel, after
    /// [`CmId::req_notify_cq`]; blocks unless the channel is non-blocking
    /// ([`CmId::set_cq_nonblocking`]: then `EAGAIN` when none).
    pub fn get_cq_event(&self) -> Result<()> {
        let p = self.qp()?;
        let wait = !self.id.cq_nb.user();
        p.take_cq_event(None, wait).map(drop)
    }

    /// The completion channel's descriptor (readable after a completion on
    /// an armed CQ), for poll or an async runtime. As
    /// [`CmId::cq_channel`], unborrowed.
    pub fn cq_channel_fd(&self) -> Result<std::os::fd::RawFd> {
        Ok(self.qp()?.channel_fd())
    }

    /// The completion channel's descriptor, borrowed from the id (open
    /// while the id lives: the channel goes with the id's QP, when the id
    /// is dropped); readable after a completion on an armed CQ
    /// ([`CmId::req_notify_cq`]). `EINVAL` before [`CmId::create_qp`].
    pub fn cq_channel(&self) -> Result<BorrowedFd<'_>> {
        let fd = self.cq_channel_fd()?;
        // SAFETY: the descriptor of the id's completion channel, which is
        // destroyed (and the descriptor closed) only when the id's last
        // owner drops it: not while `self` is borrowed.
        Ok(unsafe { BorrowedFd::borrow_raw(fd) })
    }

    /// Makes [`CmId::get_cq_event`] non-blocking (or blocking again).
    pub fn set_cq_nonblocking(&self, on: bool) -> Result<()> {
        self.id.cq_nb.set_user(self.cq_channel_fd()?, on)
    }

    /// Whether `gid` can be reached from the id's device (`ibv_gid_reachable`),
    /// on `port` (0: any port), waiting at most `timeout_ms` (0: the
    /// default). `EINVAL` before the id has a device.
    pub fn gid_reachable(&self, port: u32, gid: &[u8; 16], timeout_ms: i32) -> Result<()> {
        gid_reachable(self, port, gid, timeout_ms)
    }
}

/// Whether `gid` can be reached from the device of `id` (which must be
/// bound or resolved), on `port` (0: any of its ports), waiting at most
/// `timeout_ms` (0: the default); `Ok(())` when reachable, otherwise the
/// reason (`EHOSTUNREACH`, `ETIMEDOUT`, ...). This is the
/// `ibv_gid_reachable` extension of the C library.
pub fn gid_reachable<M: Mode>(id: &CmId<M>, port: u32, gid: &[u8; 16], timeout_ms: i32) -> Result<()> {
    let ctx = id.id.verbs_context();
    if ctx.is_null() {
        return Err(Error::from_errno(libc::EINVAL));
    }
    // SAFETY: the id's device context, open while the id holds its device
    // (we hold the id for the call).
    let ctx = unsafe { crate::cma::objects::Vouched::new(ctx) };
    crate::gid::gid_reachable(&crate::cma::gid_env::CmGidEnv::new(crate::cma::global(), ctx), port, gid, timeout_ms).map_err(errno)
}

#[cfg(test)]
#[path = "verbs_tests.rs"]
mod tests;
