// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The structures C reads: the public `struct rdma_cm_id` of an id
//! ([`PubId`]), the public `struct rdma_cm_event` of an event
//! ([`PubEvent`]) and C pointers the CM keeps without following them
//! ([`CPtr`]).  With [`super::objects`] (verbs objects) and
//! [`super::alloc`] (ids and events built in place) the only module of
//! `cma` with unsafe code; every other module reaches these structures
//! through the methods below.
//!
//! Why the accesses are sound:
//! - an `rdma_cm_id` lives inside its [`super::base::IdPriv`], which lives in an
//!   `Arc` until the last holder lets go, so the memory is valid whenever a
//!   `&PubId` exists;
//! - the library writes a field only while it runs a call on that id, as
//!   upstream does; C reads the struct at any time (as with upstream, a C
//!   reader racing a library write of the same word sees the old or the
//!   new value).  Each method reads or writes one field through a raw
//!   pointer into the `UnsafeCell` and never hands out a Rust reference to
//!   the struct, so no `&`/`&mut` aliasing is created;
//! - every field is plain data (pointers, integers, unions of those):
//!   every bit pattern read back is a valid value;
//! - the operations on the objects the id names (its QP, its device's
//!   transport) rely on one invariant: the handle fields (`verbs`, `pd`,
//!   `qp`, `srq`, the CQs and completion channels) are NULL or objects
//!   that are live while they are stored, that is objects the library
//!   opened or created (the device list, `cma::conn::qp`) or that the C
//!   caller handed in under its API contract.  Only `crate::cma` can set
//!   them (the setters are `pub(in crate::cma)`), and it clears a field
//!   before it destroys the object.
#![allow(unsafe_code)]

use crate::abi::cma::*;
use crate::sys::verbs;
use nix::errno::Errno;
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::ptr::{addr_of, addr_of_mut};


/// The public part of an id (`struct rdma_cm_id`), shared with C.
#[repr(transparent)]
pub struct PubId(UnsafeCell<rdma_cm_id>);

// SAFETY: the struct holds C handles (libibverbs objects, the channel)
// that may be used from any thread; concurrent access is per field and
// word-sized, as described in the module documentation.
unsafe impl Send for PubId {}
// SAFETY: as above.
unsafe impl Sync for PubId {}

macro_rules! field {
    ($get:ident, $set:ident, $t:ty) => {
        field!($get, $set, $t, pub);
    };
    ($get:ident, $set:ident, $t:ty, $($vis:tt)+) => {
        #[doc = concat!("`id->", stringify!($get), "`.")]
        pub fn $get(&self) -> $t {
            // SAFETY: one aligned field of a live struct (module docs).
            unsafe { addr_of!((*self.0.get()).$get).read() }
        }
        #[doc = concat!("Sets `id->", stringify!($get), "`.")]
        // A pointer value is stored, never followed.
        #[allow(clippy::not_unsafe_ptr_arg_deref)]
        $($vis)+ fn $set(&self, v: $t) {
            // SAFETY: as above.
            unsafe { addr_of_mut!((*self.0.get()).$get).write(v) }
        }
    };
}

impl PubId {
    /// A new public id, zeroed (as upstream's calloc) but for the fields
    /// given.
    pub fn new(context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type, channel: *mut rdma_event_channel) -> PubId {
        // SAFETY: rdma_cm_id is plain data; all-zero is its initial state.
        let mut id: rdma_cm_id = unsafe { std::mem::zeroed() };
        id.context = context;
        id.ps = ps;
        id.qp_type = qp_type;
        id.channel = channel;
        PubId(UnsafeCell::new(id))
    }

    /// The address C knows the id by.
    pub fn as_ptr(&self) -> *mut rdma_cm_id {
        self.0.get()
    }

    field!(verbs, set_verbs, *mut ibv_context, pub(in crate::cma));
    field!(channel, set_channel, *mut rdma_event_channel);
    field!(context, set_context, *mut c_void);
    field!(qp, set_qp, *mut ibv_qp, pub(in crate::cma));
    field!(ps, set_ps, rdma_port_space);
    field!(port_num, set_port_num, u8);
    field!(event, set_event, *mut rdma_cm_event);
    field!(send_cq_channel, set_send_cq_channel, *mut ibv_comp_channel, pub(in crate::cma));
    field!(send_cq, set_send_cq, *mut ibv_cq, pub(in crate::cma));
    field!(recv_cq_channel, set_recv_cq_channel, *mut ibv_comp_channel, pub(in crate::cma));
    field!(recv_cq, set_recv_cq, *mut ibv_cq, pub(in crate::cma));
    field!(srq, set_srq, *mut ibv_srq, pub(in crate::cma));
    field!(pd, set_pd, *mut ibv_pd, pub(in crate::cma));
    field!(qp_type, set_qp_type, ibv_qp_type);

    /// `route.addr.src`, all of its 128 bytes.
    pub fn src_storage(&self) -> libc::sockaddr_storage {
        // SAFETY: one field of a live struct; every member of the union is
        // plain data.
        unsafe { addr_of!((*self.0.get()).route.addr.src.storage).read() }
    }

    /// `route.addr.dst`, all of its 128 bytes.
    pub fn dst_storage(&self) -> libc::sockaddr_storage {
        // SAFETY: as in src_storage.
        unsafe { addr_of!((*self.0.get()).route.addr.dst.storage).read() }
    }

    /// Copies an address into `route.addr.src` (at most its 128 bytes).
    #[inline(always)]
    pub fn set_src(&self, b: &[u8]) {
        // SAFETY: one field of a live struct; copy_into bounds the length.
        unsafe { copy_into(addr_of_mut!((*self.0.get()).route.addr.src), b) }
    }

    /// Copies an address into `route.addr.dst`.
    #[inline(always)]
    pub fn set_dst(&self, b: &[u8]) {
        // SAFETY: as in set_src.
        unsafe { copy_into(addr_of_mut!((*self.0.get()).route.addr.dst), b) }
    }

    /// Sets `route.addr.addr.ibaddr.sgid` and `dgid`.
    #[inline(always)]
    pub fn set_gids(&self, sgid: [u8; 16], dgid: [u8; 16]) {
        // SAFETY: one field of a live struct; the union has one member.
        unsafe {
            addr_of_mut!((*self.0.get()).route.addr.addr.ibaddr.sgid).write(ibv_gid { raw: sgid });
            addr_of_mut!((*self.0.get()).route.addr.addr.ibaddr.dgid).write(ibv_gid { raw: dgid });
        }
    }

    /// Sets `route.addr.addr.ibaddr.pkey` (big-endian).
    pub fn set_pkey(&self, pkey: u16) {
        // SAFETY: as in set_gids.
        unsafe { addr_of_mut!((*self.0.get()).route.addr.addr.ibaddr.pkey).write(pkey) }
    }

    /// Replaces `route.path_rec`/`num_paths` with a malloc'ed copy of
    /// `recs` (C may read the array, never frees it); nothing for none.
    pub fn set_paths(&self, recs: &[ibv_sa_path_rec]) -> Result<(), Errno> {
        if recs.is_empty() {
            return Ok(());
        }
        // SAFETY: plain allocation of the array's size.
        let buf = unsafe { libc::malloc(std::mem::size_of_val(recs)) } as *mut ibv_sa_path_rec;
        if buf.is_null() {
            return Err(Errno::ENOMEM);
        }
        // SAFETY: buf holds recs.len() records; the fields are of a live
        // struct; a previous array (a repeated resolution) came from malloc
        // here and nobody else frees it.
        unsafe {
            std::ptr::copy_nonoverlapping(recs.as_ptr(), buf, recs.len());
            let old = addr_of!((*self.0.get()).route.path_rec).read();
            addr_of_mut!((*self.0.get()).route.path_rec).write(buf);
            addr_of_mut!((*self.0.get()).route.num_paths).write(recs.len() as i32);
            if !old.is_null() {
                libc::free(old as *mut c_void);
            }
        }
        Ok(())
    }

    /// Frees the path array (the id is being freed).
    pub fn free_paths(&self) {
        // SAFETY: the array, if any, came from malloc in set_paths.
        unsafe {
            let old = addr_of!((*self.0.get()).route.path_rec).read();
            addr_of_mut!((*self.0.get()).route.path_rec).write(std::ptr::null_mut());
            if !old.is_null() {
                libc::free(old as *mut c_void);
            }
        }
    }
}

/// The id's QP (`id->qp`), as the operations the connection code runs on
/// it.  Sound because `id->qp` is NULL or a QP the library created for
/// the id (`cma::conn::qp`), published only once it is set up and cleared
/// before it is destroyed; as with upstream, C must not destroy an id's QP
/// while another call on the same id runs.  Each operation reports
/// EINVAL for an id without a QP.
impl PubId {
    fn live_qp(&self) -> Result<*mut ibv_qp, Errno> {
        let qp = self.qp();
        if qp.is_null() {
            Err(Errno::EINVAL)
        } else {
            Ok(qp)
        }
    }

    /// `ibv_modify_qp` on the id's QP.
    pub fn modify_qp(&self, attr: &mut verbs::QpAttr, mask: std::ffi::c_int) -> Result<(), Errno> {
        let qp = self.live_qp()?;
        // SAFETY: qp is the id's live QP (see above).
        unsafe { verbs::modify_qp(qp, attr, mask) }
    }

    /// Moves the id's QP to `state` (only the state in the mask).
    pub fn modify_qp_state(&self, state: u32) -> Result<(), Errno> {
        let qp = self.live_qp()?;
        // SAFETY: as in modify_qp.
        unsafe { verbs::modify_state(qp, state) }
    }

    /// The QP number of the id's QP and whether it has an SRQ.
    pub fn qp_num_srq(&self) -> Option<(u32, bool)> {
        let qp = self.live_qp().ok()?;
        // SAFETY: as in modify_qp.
        Some(unsafe { (verbs::qp_num(qp), verbs::qp_srq_pd(qp).0) })
    }

    /// `ibv_query_ece` on the id's QP (true: the provider has no ECE).
    pub fn qp_query_ece(&self) -> Result<(verbs::Ece, bool), Errno> {
        let qp = self.live_qp()?;
        // SAFETY: as in modify_qp.
        unsafe { verbs::query_ece(qp) }
    }

    /// `ibv_set_ece` on the id's QP.
    pub fn qp_set_ece(&self, e: verbs::Ece) -> Result<(), Errno> {
        let qp = self.live_qp()?;
        // SAFETY: as in modify_qp.
        unsafe { verbs::set_ece(qp, e) }
    }

    /// Attaches the id's QP to a multicast group.
    pub fn qp_attach_mcast(&self, gid: &ibv_gid, lid: u16) -> Result<(), Errno> {
        let qp = self.live_qp()?;
        // SAFETY: as in modify_qp.
        unsafe { verbs::attach_mcast(qp, gid, lid) }
    }

    /// Detaches the id's QP from a multicast group (its result ignored,
    /// as upstream).
    pub fn qp_detach_mcast(&self, gid: &ibv_gid, lid: u16) {
        if let Ok(qp) = self.live_qp() {
            // SAFETY: as in modify_qp.
            unsafe { verbs::detach_mcast(qp, gid, lid) };
        }
    }

    /// The transport type (`IBV_TRANSPORT_*`) of the id's device, -1
    /// without one.  Sound because `id->verbs` is NULL or the context of
    /// the device the id holds a reference on (`cma::device`).
    pub fn transport_type(&self) -> std::ffi::c_int {
        // SAFETY: per the above.
        unsafe { verbs::transport_type(self.verbs()) }
    }

    /// The name of the id's device (`rxe0`), None without one.  Sound as
    /// [`transport_type`](Self::transport_type) is.
    pub fn device_name(&self) -> Option<String> {
        let ctx = self.verbs();
        if ctx.is_null() {
            return None;
        }
        // SAFETY: ctx is the context of the device the id holds a
        // reference on.
        unsafe { verbs::device_name(ctx) }
    }
}

/// Copies an address into one of `struct rdma_addr`'s unions.
///
/// # Safety
/// `dst` must point to a writable `rdma_sockaddr`.
#[inline(always)]
unsafe fn copy_into(dst: *mut rdma_sockaddr, b: &[u8]) {
    // SAFETY: the union is 128 bytes of plain data, borrowed for the copy
    // only; the CM's address lengths are copied in line.
    crate::abi::sockaddr::copy_addr(unsafe { &mut *dst.cast::<[u8; std::mem::size_of::<rdma_sockaddr>()]>() }, b);
}

/// The public part of an event (`struct rdma_cm_event`).  It is built by
/// the event loop before C sees it and only read afterwards.
#[repr(transparent)]
pub struct PubEvent(pub rdma_cm_event);

// SAFETY: plain data and C handles usable from any thread.
unsafe impl Send for PubEvent {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for PubEvent {}

impl PubEvent {
    /// An all-zero event.
    pub fn zeroed() -> PubEvent {
        // SAFETY: integers, raw pointers and unions of those: all-zero is
        // valid.
        PubEvent(unsafe { std::mem::zeroed() })
    }

    /// The parameters read as a connection's.
    pub fn conn(&self) -> rdma_conn_param {
        // SAFETY: every member of the union is plain data.
        unsafe { self.0.param.conn }
    }

    /// The parameters read as a UD id's.
    pub fn ud(&self) -> rdma_ud_param {
        // SAFETY: as in conn.
        unsafe { self.0.param.ud }
    }

    /// Clears the parameters.
    pub fn clear_param(&mut self) {
        // SAFETY: as in zeroed.
        self.0.param = unsafe { std::mem::zeroed() };
    }
}

/// A C pointer the CM keeps and hands back but never follows (a user
/// context, a QP attribute set's handles).
pub struct CPtr<T>(pub *mut T);

impl<T> Clone for CPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for CPtr<T> {}
impl<T> PartialEq for CPtr<T> {
    fn eq(&self, o: &Self) -> bool {
        self.0 == o.0
    }
}
impl<T> Eq for CPtr<T> {}
impl<T> std::fmt::Debug for CPtr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:p}", self.0)
    }
}

// SAFETY: the CM never dereferences it; only the C caller does.
unsafe impl<T> Send for CPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for CPtr<T> {}

impl<T> Default for CPtr<T> {
    fn default() -> Self {
        CPtr(std::ptr::null_mut())
    }
}
