// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The verbs data path of the public Rust API (`crate::api`) and of
//! rsockets (`crate::rsocket`): posting sends and receives, polling and
//! arming a CQ, reading its completion channel, memory registration and
//! address handles. The hot path's four calls (`ibv_post_send`,
//! `ibv_post_recv`, `ibv_poll_cq`, `ibv_req_notify_cq`, `static inline` in
//! libibverbs' header) go through the device context's operations, as the
//! header's inline code does (the mirrors in [`crate::abi::verbs`]); the
//! completion channel's (`ibv_get_cq_event`, `ibv_ack_cq_events`) are
//! libibverbs' exported functions, called directly; the others go through
//! one declaration of the C shim's data functions (src/sys/verbs_shim.c).
//! One set of `#[repr(C)]` mirrors ([`Sge`], [`Wc`]) and the safe handles
//! both clients build on:
//!
//! * [`DataQp`]: an id's QP, CQ, completion channel and PD, vouched live by
//!   whoever makes it (the one `unsafe` promise); its calls are safe.
//! * [`Mr`]: one registration; [`Mr::sge`] is the only way to a keyed
//!   scatter entry, bounds-checked against the registration, so every
//!   access of the device is checked by it against a live registration.
//!   [`Mr::release`] is the one policy for a failed deregistration: the
//!   memory stays (its owner leaks it) and a warning is logged.
//! * [`Ah`]: one address handle, destroyed on drop.

use crate::abi::cma::{ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_pd, ibv_qp};
pub use crate::abi::verbs::IbvWc;
use crate::abi::verbs::{ContextHead, ContextOps, CqHead, IbvRecvWr, IbvSendWr, QpHead};
use nix::errno::Errno;
use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// Opaque `struct ibv_mr`.
#[repr(C)]
pub struct IbvMr {
    _private: [u8; 0],
}

/// Opaque `struct ibv_ah`.
#[repr(C)]
pub struct IbvAh {
    _private: [u8; 0],
}

/// `struct ibv_sge`: made with a key only by [`Mr::sge`].
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Sge {
    addr: u64,
    length: u32,
    lkey: u32,
}

impl Sge {
    /// The device address of its first byte.
    #[inline]
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// Its length in bytes.
    #[inline]
    pub fn length(&self) -> u32 {
        self.length
    }
    /// The local key it carries.
    #[inline]
    pub fn lkey(&self) -> u32 {
        self.lkey
    }

    /// An entry of a fake fabric's registration (unit tests: the fabric
    /// checks its keys itself; no device ever sees it).
    #[cfg(test)]
    pub fn fake(addr: u64, length: u32, lkey: u32) -> Sge {
        Sge { addr, length, lkey }
    }
}

/// One work completion, every field a client reads (`struct rdmacm_wc` of
/// the shim; immediate data in host order).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_host: u32,
    pub wc_flags: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub slid: u16,
    pub pkey_index: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

// The shim's struct rdmacm_wc.
const _: () = assert!(std::mem::size_of::<Wc>() == 48 && std::mem::offset_of!(Wc, imm_host) == 24 && std::mem::offset_of!(Wc, slid) == 40 && std::mem::offset_of!(Wc, dlid_path_bits) == 45);
const _: () = assert!(std::mem::size_of::<Sge>() == 16);

/// Completions one batch poll takes at most ([`DataQp::poll_batch`]).
pub const POLL_BATCH: usize = 8;
/// Completions [`DataQp::poll`] takes at most.
pub const POLL_MAX: usize = 16;

/// `IBV_WR_RDMA_WRITE`.
pub const WR_RDMA_WRITE: c_int = 0;
/// `IBV_WR_RDMA_WRITE_WITH_IMM`.
pub const WR_RDMA_WRITE_WITH_IMM: c_int = 1;
/// `IBV_WR_SEND`.
pub const WR_SEND: c_int = 2;
/// `IBV_WR_SEND_WITH_IMM`.
pub const WR_SEND_WITH_IMM: c_int = 3;
/// `IBV_WR_RDMA_READ`.
pub const WR_RDMA_READ: c_int = 4;
/// `IBV_SEND_SIGNALED`.
pub const SEND_SIGNALED: c_int = 2;
/// `IBV_SEND_INLINE`.
pub const SEND_INLINE: c_int = 8;
/// `IBV_ACCESS_LOCAL_WRITE`.
pub const ACCESS_LOCAL_WRITE: c_int = 1;
/// `IBV_ACCESS_REMOTE_WRITE`.
pub const ACCESS_REMOTE_WRITE: c_int = 2;

/// What a send work request carries.
pub enum Data<'a> {
    /// Nothing (a zero-length write with immediate).
    None,
    /// Bytes copied by the provider while posting (IBV_SEND_INLINE).
    Inline(&'a [u8]),
    /// Registered memory (the device reads it later, checked by its key).
    Reg(&'a [Sge]),
}

/// The shim's data functions and the libibverbs functions called
/// directly; kept out of the generated header.
/// cbindgen:ignore
mod ffi {
    use super::{IbvAh, IbvMr, Sge, Wc};
    use crate::abi::cma::{ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_pd, ibv_qp};
    use std::ffi::{c_int, c_void};
    extern "C" {
        #[allow(clippy::too_many_arguments)]
        pub(super) fn rdmacm_shim_post_ud_send(qp: *mut ibv_qp, wr_id: u64, sgl: *mut Sge, nsge: c_int, flags: c_int, ah: *mut IbvAh, qpn: u32, qkey: u32, with_imm: c_int, imm_host: u32) -> c_int;
        pub(super) fn rdmacm_shim_poll_cq(cq: *mut ibv_cq, out: *mut Wc, n: c_int) -> c_int;
        pub(super) fn ibv_get_cq_event(ch: *mut ibv_comp_channel, cq: *mut *mut ibv_cq, cq_context: *mut *mut c_void) -> c_int;
        pub(super) fn ibv_ack_cq_events(cq: *mut ibv_cq, n: u32);
        pub(super) fn rdmacm_rs_wait_cq_event(ch: *mut ibv_comp_channel) -> c_int;
        pub(super) fn rdmacm_shim_channel_fd(ch: *mut ibv_comp_channel) -> c_int;
        pub(super) fn rdmacm_shim_qp_num(qp: *mut ibv_qp) -> u32;
        pub(super) fn rdmacm_shim_query_qkey(qp: *mut ibv_qp, qkey: *mut u32) -> c_int;
        pub(super) fn rdmacm_shim_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, len: usize, access: c_int) -> *mut IbvMr;
        pub(super) fn rdmacm_shim_mr_keys(mr: *mut IbvMr, lkey: *mut u32, rkey: *mut u32);
        pub(super) fn rdmacm_shim_dereg_mr(mr: *mut IbvMr) -> c_int;
        pub(super) fn rdmacm_shim_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut IbvAh;
        #[allow(clippy::too_many_arguments)]
        pub(super) fn rdmacm_shim_create_ah_from_path(pd: *mut ibv_pd, port: u8, dgid: *const u8, sgid: *const u8, flow_label: u32, hop_limit: u8, traffic_class: u8, dlid: u16, slid: u16, sl: u8, rate: u8) -> *mut IbvAh;
        pub(super) fn rdmacm_shim_destroy_ah(ah: *mut IbvAh) -> c_int;
        pub(super) fn rdmacm_shim_init_ah_from_wc(ctx: *mut ibv_context, port_num: u8, wc: *const Wc, grh40: *const u8, out: *mut ibv_ah_attr) -> c_int;
    }
}

use super::check;

/// The errno of a libibverbs constructor that returned NULL; ENOMEM when
/// errno names nothing.
fn null_errno() -> Errno {
    match Errno::last() {
        Errno::UnknownErrno => Errno::ENOMEM,
        e => e,
    }
}

/// An id's QP, CQ (one for both directions), completion channel and PD.
/// Made by [`DataQp::new`], whose caller vouches that they stay live as
/// long as the value (or a copy) is used; with that, every call is safe:
/// the memory a work request names is reached by the device only through
/// keyed [`Sge`]s of live registrations, or copied while posting (inline).
#[derive(Clone, Copy, Debug)]
pub struct DataQp {
    qp: NonNull<ibv_qp>,
    cq: NonNull<ibv_cq>,
    channel: NonNull<ibv_comp_channel>,
    pd: NonNull<ibv_pd>,
}

// SAFETY: libibverbs objects have no thread affinity; ibv_post_send,
// ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq and reading the completion
// channel are safe from several threads at once (the provider locks its
// queues), which is what a stream's sender and receiver do, as upstream's
// threads do.
unsafe impl Send for DataQp {}
// SAFETY: as above; the value itself is never changed.
unsafe impl Sync for DataQp {}

impl DataQp {
    /// # Safety
    /// `qp`, `cq`, `channel` and `pd` are one id's live objects (the CQ the
    /// QP's, the channel the CQ's, the PD the QP's), and stay live for as
    /// long as this value or a copy of it is used, and as every [`Ah`] and
    /// [`Mr`] made through it lives.
    pub unsafe fn new(qp: NonNull<ibv_qp>, cq: NonNull<ibv_cq>, channel: NonNull<ibv_comp_channel>, pd: NonNull<ibv_pd>) -> DataQp {
        DataQp { qp, cq, channel, pd }
    }

    /// The operations of the QP's device context (`qp->context->ops`),
    /// which the header's inline data-path verbs call.
    #[inline]
    fn qp_ops(&self) -> &ContextOps {
        // SAFETY: the QP is live (DataQp::new), so is its context, whose
        // operations libibverbs filled in when it opened the device and
        // leaves alone while it is open (the mirrors' offsets are checked
        // against the header by `c_layout`).
        unsafe { &(*(*self.qp.as_ptr().cast::<QpHead>()).context.cast::<ContextHead>()).ops }
    }

    /// The operations of the CQ's device context (`cq->context->ops`).
    #[inline]
    fn cq_ops(&self) -> &ContextOps {
        // SAFETY: as in qp_ops, for the live CQ.
        unsafe { &(*(*self.cq.as_ptr().cast::<CqHead>()).context.cast::<ContextHead>()).ops }
    }

    /// Posts one send, RDMA write or RDMA read work request over the `n`
    /// entries at `sgl` through the provider's `post_send`, as the inline
    /// `ibv_post_send` of `<infiniband/verbs.h>` does. `imm` is in host
    /// order (it goes on the wire big-endian).
    ///
    /// # Safety
    /// `sgl` is NULL for `n` 0, or points to `n` entries readable during
    /// the call: keyed ones from [`Mr::sge`], and, with `SEND_INLINE` in
    /// `flags`, ones naming bytes borrowed for the call.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn send_raw(&self, wr_id: u64, sgl: *mut Sge, n: c_int, opcode: c_int, flags: c_int, imm: u32, raddr: u64, rkey: u32) -> Result<(), Errno> {
        let qp = self.qp.as_ptr();
        // Only the fields these opcodes use are written: no provider reads
        // the unions' other members for them, and zeroing the whole request
        // would be a 128-byte store per send.
        let mut wr = IbvSendWr {
            wr_id,
            next: std::ptr::null_mut(),
            sg_list: sgl.cast(),
            num_sge: n,
            opcode,
            send_flags: flags,
            imm_data: imm.to_be(),
            remote_addr: raddr,
            rkey,
            wr_rest: [MaybeUninit::uninit(); 5],
            remote_srqn: 0,
            tail: [MaybeUninit::uninit(); 13],
        };
        let mut bad = std::ptr::null_mut();
        let Some(post) = self.qp_ops().post_send else { return Err(Errno::EOPNOTSUPP) };
        // SAFETY: ibv_post_send's own call: the provider reads the request
        // and the entries during the call (the caller's promise), copying
        // inline bytes before it returns.
        check(unsafe { post(qp, &mut wr, &mut bad) })
    }

    /// Posts one send work request (`ibv_post_send`). `flags` are the
    /// `IBV_SEND_*` bits; `SEND_INLINE` is set for [`Data::Inline`] and
    /// cleared otherwise. `imm` is in host order (it goes on the wire
    /// big-endian). At most 2 registered entries (EINVAL beyond).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn post_send(&self, wr_id: u64, data: Data<'_>, opcode: c_int, flags: c_int, imm: u32, raddr: u64, rkey: u32) -> Result<(), Errno> {
        let mut two = [Sge::default(); 2];
        let (n, flags) = match data {
            Data::None => (0, flags & !SEND_INLINE),
            Data::Inline(b) => {
                two[0] = Sge { addr: b.as_ptr() as u64, length: u32::try_from(b.len()).map_err(|_| Errno::EINVAL)?, lkey: 0 };
                (1, flags | SEND_INLINE)
            }
            Data::Reg(s) => {
                if s.len() > 2 {
                    return Err(Errno::EINVAL);
                }
                two[..s.len()].copy_from_slice(s);
                (s.len() as c_int, flags & !SEND_INLINE)
            }
        };
        let p = if n == 0 { std::ptr::null_mut() } else { two.as_mut_ptr() };
        // SAFETY: the entries are read during the call: inline bytes are
        // borrowed for it, keyed entries come from Mr::sge.
        unsafe { self.send_raw(wr_id, p, n, opcode, flags, imm, raddr, rkey) }
    }

    /// Posts one send work request over any number of keyed entries (the
    /// Rust API's `post_send`).
    #[allow(clippy::too_many_arguments)]
    pub fn post_send_list(&self, wr_id: u64, sgl: &[Sge], opcode: c_int, flags: c_int, imm: u32, raddr: u64, rkey: u32) -> Result<(), Errno> {
        let mut list = sgl.to_vec();
        let n = c_int::try_from(list.len()).map_err(|_| Errno::EINVAL)?;
        // SAFETY: the list is read during the call; its entries come from
        // Mr::sge (the fields are private), and nothing is inline.
        unsafe { self.send_raw(wr_id, list.as_mut_ptr(), n, opcode, flags & !SEND_INLINE, imm, raddr, rkey) }
    }

    /// Posts one send work request whose bytes the provider copies into
    /// the request while posting (`IBV_SEND_INLINE`): `data` are the
    /// pieces, in order, borrowed for the call only (no key: inline data
    /// is not read by the device).
    #[allow(clippy::too_many_arguments)]
    pub fn post_send_bytes_inline(&self, wr_id: u64, data: &[&[u8]], opcode: c_int, flags: c_int, imm: u32, raddr: u64, rkey: u32) -> Result<(), Errno> {
        let mut list = data
            .iter()
            .map(|b| Ok(Sge { addr: b.as_ptr() as u64, length: u32::try_from(b.len()).map_err(|_| Errno::EINVAL)?, lkey: 0 }))
            .collect::<Result<Vec<_>, Errno>>()?;
        let n = c_int::try_from(list.len()).map_err(|_| Errno::EINVAL)?;
        // SAFETY: the provider copies the bytes the entries name while
        // posting, and each entry names a slice borrowed for this call
        // (shared: nothing writes it meanwhile).
        unsafe { self.send_raw(wr_id, list.as_mut_ptr(), n, opcode, flags | SEND_INLINE, imm, raddr, rkey) }
    }

    /// Posts one receive work request (`ibv_post_recv`); no entry: only
    /// immediate data.
    #[inline]
    pub fn post_recv(&self, wr_id: u64, sgl: &[Sge]) -> Result<(), Errno> {
        let n = c_int::try_from(sgl.len()).map_err(|_| Errno::EINVAL)?;
        let p = if n == 0 { std::ptr::null_mut() } else { sgl.as_ptr() as *mut Sge };
        let qp = self.qp.as_ptr();
        let mut wr = IbvRecvWr { wr_id, next: std::ptr::null_mut(), sg_list: p.cast(), num_sge: n };
        let mut bad = std::ptr::null_mut();
        let Some(post) = self.qp_ops().post_recv else { return Err(Errno::EOPNOTSUPP) };
        // SAFETY: ibv_post_recv's own call: the provider only reads the
        // request and the list during the call (the C prototype is not
        // const); the entries come from Mr::sge (their fields are private).
        check(unsafe { post(qp, &mut wr, &mut bad) })
    }

    /// Posts a UD send (`IBV_WR_SEND`, or `IBV_WR_SEND_WITH_IMM` with
    /// `imm`, host order) to QP `qpn` behind `ah` with `qkey`.
    #[allow(clippy::too_many_arguments)]
    pub fn post_ud_send(&self, wr_id: u64, sgl: &[Sge], flags: c_int, ah: &Ah, qpn: u32, qkey: u32, imm: Option<u32>) -> Result<(), Errno> {
        let mut list = sgl.to_vec();
        let n = c_int::try_from(list.len()).map_err(|_| Errno::EINVAL)?;
        // SAFETY: the QP and the AH are live (the AH while borrowed); the
        // list is read during the call; keyed entries are checked by the
        // device, inline ones copied by the provider before it returns.
        check(unsafe { ffi::rdmacm_shim_post_ud_send(self.qp.as_ptr(), wr_id, list.as_mut_ptr(), n, flags, ah.ah.as_ptr(), qpn, qkey, c_int::from(imm.is_some()), imm.unwrap_or(0)) })
    }

    /// Takes up to [`POLL_BATCH`] completions in one call; how many (0:
    /// the CQ is empty). EIO when the poll fails.
    #[inline]
    pub fn poll_batch(&self, out: &mut [IbvWc; POLL_BATCH]) -> Result<usize, Errno> {
        let cq = self.cq.as_ptr();
        let Some(poll) = self.cq_ops().poll_cq else { return Err(Errno::EIO) };
        // SAFETY: ibv_poll_cq's own call: out has room for POLL_BATCH
        // completions, which the provider fills up to the count it returns.
        let r = unsafe { poll(cq, POLL_BATCH as c_int, out.as_mut_ptr()) };
        if r < 0 {
            return Err(Errno::EIO);
        }
        Ok((r as usize).min(POLL_BATCH))
    }

    /// Takes up to `out.len()` (at most [`POLL_MAX`]) completions with
    /// every field; how many. A failed poll: its errno (`-r`, or errno for
    /// -1).
    pub fn poll(&self, out: &mut [Wc]) -> Result<usize, Errno> {
        let n = out.len().min(POLL_MAX) as c_int;
        // SAFETY: the CQ is live; out has room for n records.
        let got = unsafe { ffi::rdmacm_shim_poll_cq(self.cq.as_ptr(), out.as_mut_ptr(), n) };
        if got < 0 {
            return Err(super::super::errno_from_raw(if got == -1 { Errno::last_raw() } else { -got }));
        }
        Ok(got as usize)
    }

    /// Arms the CQ (`ibv_req_notify_cq`).
    #[inline]
    pub fn req_notify(&self, solicited_only: bool) -> Result<(), Errno> {
        let cq = self.cq.as_ptr();
        let Some(arm) = self.cq_ops().req_notify_cq else { return Err(Errno::EOPNOTSUPP) };
        // SAFETY: ibv_req_notify_cq's own call on a live CQ.
        check(unsafe { arm(cq, c_int::from(solicited_only)) })
    }

    /// Reads one event of the completion channel (`ibv_get_cq_event`,
    /// not acknowledged: see [`DataQp::ack_cq_events`]); blocks on a
    /// blocking channel.
    #[inline]
    pub fn get_cq_event(&self) -> Result<(), Errno> {
        let mut cq = std::ptr::null_mut();
        let mut ctx = std::ptr::null_mut();
        // SAFETY: the channel is live; the event's CQ and context go to
        // locals (each channel of ours serves one CQ: neither is needed).
        check(unsafe { ffi::ibv_get_cq_event(self.channel.as_ptr(), &mut cq, &mut ctx) })
    }

    /// As [`DataQp::get_cq_event`], the thread cancellable in the wait
    /// (ECANCELED then, see `crate::sys::cancel`).
    #[inline]
    pub fn wait_cq_event(&self) -> Result<(), Errno> {
        // SAFETY: the channel is live; the wait (src/sys/cancel_shim.c)
        // reads the event into its own locals.
        check(unsafe { ffi::rdmacm_rs_wait_cq_event(self.channel.as_ptr()) })
    }

    /// Acknowledges `n` events read from the channel
    /// (`ibv_ack_cq_events`; destroying the CQ waits for every one).
    #[inline]
    pub fn ack_cq_events(&self, n: u32) {
        // SAFETY: the CQ is live; the caller read n events of it.
        unsafe { ffi::ibv_ack_cq_events(self.cq.as_ptr(), n) };
    }

    /// The completion channel's descriptor.
    #[inline]
    pub fn channel_fd(&self) -> c_int {
        // SAFETY: the channel is live; one field is read.
        unsafe { ffi::rdmacm_shim_channel_fd(self.channel.as_ptr()) }
    }

    /// The QP's number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: the QP is live; one field is read.
        unsafe { ffi::rdmacm_shim_qp_num(self.qp.as_ptr()) }
    }

    /// The QP's qkey (`ibv_query_qp` with `IBV_QP_QKEY`).
    pub fn qkey(&self) -> Result<u32, Errno> {
        let mut qkey = 0;
        // SAFETY: the QP is live; qkey is written.
        check(unsafe { ffi::rdmacm_shim_query_qkey(self.qp.as_ptr(), &mut qkey) })?;
        Ok(qkey)
    }

    /// Registers `[addr, addr + len)` on the PD with the `IBV_ACCESS_*`
    /// bits `access`.
    ///
    /// # Safety
    /// The memory stays allocated until the returned registration is
    /// released with success ([`Mr::release`]); the PD outlives it (its
    /// owner keeps the id alive).
    pub unsafe fn reg_mr(&self, addr: *mut u8, len: usize, access: c_int) -> Result<Mr, Errno> {
        // SAFETY: the PD is live (DataQp::new); the rest is the caller's.
        unsafe { reg_mr(self.pd, addr, len, access) }
    }

    /// An address handle on the PD and `port` for a resolved path: the
    /// GRH is used when the path leaves the subnet (hop limit above 1) and
    /// always on an Ethernet link.
    pub fn create_ah_from_path(&self, port: u8, path: &crate::abi::cma::ibv_sa_path_rec) -> Result<Ah, Errno> {
        let (dgid, sgid) = (super::gid_bytes(&path.dgid), super::gid_bytes(&path.sgid));
        // SAFETY: the PD is live; the GIDs are 16-byte locals.
        let ah = unsafe {
            ffi::rdmacm_shim_create_ah_from_path(self.pd.as_ptr(), port, dgid.as_ptr(), sgid.as_ptr(), u32::from_be(path.flow_label), path.hop_limit, path.traffic_class, u16::from_be(path.dlid), u16::from_be(path.slid), path.sl, path.rate)
        };
        Ok(Ah { ah: NonNull::new(ah).ok_or_else(null_errno)? })
    }
}

/// Registers `[addr, addr + len)` on `pd` with the `IBV_ACCESS_*` bits
/// `access` (`ibv_reg_mr`).
///
/// # Safety
/// `pd` is live and outlives the registration; the memory stays allocated
/// until the registration is deregistered with success ([`Mr::dereg`],
/// [`Mr::release`]).
pub unsafe fn reg_mr(pd: NonNull<ibv_pd>, addr: *mut u8, len: usize, access: c_int) -> Result<Mr, Errno> {
    // SAFETY: the caller's contract.
    let mr = unsafe { ffi::rdmacm_shim_reg_mr(pd.as_ptr(), addr as *mut c_void, len, access) };
    let mr = NonNull::new(mr).ok_or_else(null_errno)?;
    let (mut lkey, mut rkey) = (0, 0);
    // SAFETY: mr is the live registration just made.
    unsafe { ffi::rdmacm_shim_mr_keys(mr.as_ptr(), &mut lkey, &mut rkey) };
    Ok(Mr { mr, addr: addr as u64, len, lkey, rkey, live: true })
}

/// An address handle on `pd` (`ibv_create_ah`).
///
/// # Safety
/// `pd` is live and outlives the handle.
pub unsafe fn create_ah(pd: NonNull<ibv_pd>, attr: &ibv_ah_attr) -> Result<Ah, Errno> {
    let mut a = *attr;
    // SAFETY: the PD is live (contract); a is a full ibv_ah_attr.
    let ah = unsafe { ffi::rdmacm_shim_create_ah(pd.as_ptr(), &mut a) };
    Ok(Ah { ah: NonNull::new(ah).ok_or_else(null_errno)? })
}

/// The address vector back to the sender of a UD receive
/// (`ibv_init_ah_from_wc`): from the completion and the first 40 bytes of
/// the receive's buffer (the GRH, or on RoCEv2 over IPv4 the IP header in
/// its last 20 bytes). EINVAL when libibverbs gives no reason.
///
/// # Safety
/// `ctx` is an open device context.
pub unsafe fn init_ah_from_wc(ctx: *mut ibv_context, port: u8, wc: &Wc, grh: &[u8; 40]) -> Result<ibv_ah_attr, Errno> {
    let mut attr = std::mem::MaybeUninit::<ibv_ah_attr>::zeroed();
    // SAFETY: ctx is open (contract); wc and the 40 bytes are read during
    // the call; attr is written.
    if unsafe { ffi::rdmacm_shim_init_ah_from_wc(ctx, port, wc, grh.as_ptr(), attr.as_mut_ptr()) } != 0 {
        return Err(match Errno::last() {
            Errno::UnknownErrno => Errno::EINVAL,
            e => e,
        });
    }
    // SAFETY: zeroed (a valid ibv_ah_attr: integers and bytes), then
    // filled by ibv_init_ah_from_wc.
    Ok(unsafe { attr.assume_init() })
}

/// One memory registration (`struct ibv_mr`) of `[addr, addr + len)`.
/// Dropping it does not deregister: its owner calls [`Mr::release`] before
/// the memory may go, and keeps the memory when that fails.
#[derive(Debug)]
pub struct Mr {
    mr: NonNull<IbvMr>,
    addr: u64,
    len: usize,
    lkey: u32,
    rkey: u32,
    /// Not deregistered yet.
    live: bool,
}

// SAFETY: a registration has no thread affinity: any thread may post with
// its keys and deregister it; the value holds plain keys besides.
unsafe impl Send for Mr {}
// SAFETY: `&Mr` only reads plain fields (keys, bounds).
unsafe impl Sync for Mr {}

impl Mr {
    /// The first byte's address.
    #[inline]
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// The local key.
    #[inline]
    pub fn lkey(&self) -> u32 {
        self.lkey
    }
    /// The remote key.
    #[inline]
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// A keyed scatter entry for `[off, off + len)` of the registration;
    /// None past its end.
    #[inline]
    pub fn sge(&self, off: usize, len: u32) -> Option<Sge> {
        match off.checked_add(len as usize) {
            Some(end) if end <= self.len => Some(Sge { addr: self.addr + off as u64, length: len, lkey: self.lkey }),
            _ => None,
        }
    }

    /// Deregisters (`ibv_dereg_mr`). `Ok` once the device can no longer
    /// reach the memory (then again `Ok`: deregistered once). After an
    /// error the registration is still there (a later call may deregister
    /// it) and the memory must stay.
    pub fn dereg(&mut self) -> Result<(), Errno> {
        if !self.live {
            return Ok(());
        }
        // SAFETY: the live registration, deregistered until one call
        // succeeds and never after.
        check(unsafe { ffi::rdmacm_shim_dereg_mr(self.mr.as_ptr()) })?;
        self.live = false;
        Ok(())
    }

    /// The library's one policy for a registration going away with its
    /// owner: deregisters; true when the memory may be freed. False when
    /// the deregistration failed: the device may still reach the memory,
    /// so its owner leaks it, and a warning is logged (`rdmacm` target).
    pub fn release(&mut self, what: &str) -> bool {
        release_or_leak(self.dereg(), what, self.len)
    }
}

/// The policy of [`Mr::release`], for any registration (the unit tests'
/// fake ones too): true when `dereg` succeeded; otherwise a warning that
/// `len` bytes of `what` are leaked, and false.
pub fn release_or_leak(dereg: Result<(), impl std::fmt::Display>, what: &str, len: usize) -> bool {
    match dereg {
        Ok(()) => true,
        Err(e) => {
            log::warn!(target: "rdmacm", "ibv_dereg_mr failed ({e}): {what}'s {len} bytes are leaked");
            false
        }
    }
}

/// An address handle (`struct ibv_ah`), destroyed on drop; its owner keeps
/// the PD alive.
#[derive(Debug)]
pub struct Ah {
    ah: NonNull<IbvAh>,
}

// SAFETY: an address handle has no thread affinity: libibverbs lets any
// thread post with it and destroy it.
unsafe impl Send for Ah {}
// SAFETY: `&Ah` only names the handle in a UD send, which reads it (the
// provider copies its address into the work request); it is not changed
// after creation.
unsafe impl Sync for Ah {}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: the live handle, destroyed once.
        unsafe { ffi::rdmacm_shim_destroy_ah(self.ah.as_ptr()) };
    }
}
