// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Ids and events built in their allocation, field by field (no copy of
//! a large struct).  With [`super::public`] and
//! [`super::objects`] one of the modules of `cma` with unsafe code: what
//! it writes is the private state declared in [`super::base`].
#![allow(unsafe_code)]

use super::acks::Acks;
use super::base::{AiSlot, Channel, ConnState, EventPriv, IdPriv, Links};
use crate::abi::cma::*;
use nix::errno::Errno;
use std::ffi::c_void;
use std::ptr::addr_of_mut;

/// A new event: all zero (as upstream clears its event before each read),
/// no id, no membership; built in its allocation (no copy of the ~350-byte
/// struct); ENOMEM when memory is short.
pub fn try_new_event() -> Result<Box<EventPriv>, Errno> {
    let mut b = crate::sys::alloc::try_box_uninit::<EventPriv>()?;
    let p = b.as_mut_ptr();
    // SAFETY: p is the new block, valid for writes of an EventPriv.  The
    // public event and the private data are plain data (all-zero is
    // valid, as is the holder's 0); the two Option fields are written as
    // None just after.  The
    // pattern below stops the build when EventPriv gains a field this
    // does not write.
    unsafe {
        p.cast::<u8>().write_bytes(0, std::mem::size_of::<EventPriv>());
        addr_of_mut!((*p).id_priv).write(None);
        addr_of_mut!((*p).mc).write(None);
        Ok(b.assume_init())
    }
}

/// A new id (unregistered) on channel `ch`, built in its `Arc`'s block
/// field by field: the public id is cleared in place (as upstream's
/// calloc) and only its non-zero fields are written, so no ~650-byte
/// struct is built on the stack and copied.  ENOMEM when
/// memory is short (the block is allocated and checked first:
/// `sys::alloc::reserved`).
#[allow(clippy::too_many_arguments)]
pub(super) fn try_new_id(ch: std::sync::Arc<Channel>, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type, handle: u32, sync: bool) -> Result<std::sync::Arc<IdPriv>, Errno> {
    use parking_lot::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32};
    use std::sync::Arc;
    let mut a = crate::sys::alloc::reserved(crate::sys::alloc::arc_layout::<IdPriv>(), || Arc::new(std::mem::MaybeUninit::<IdPriv>::uninit()))?;
    let p = Arc::get_mut(&mut a).expect("a new Arc is unique").as_mut_ptr();
    let chp = ch.raw();
    // SAFETY: p is the new Arc's value, unique, valid for writes of an
    // IdPriv.  `struct rdma_cm_id` is plain data (all-zero is its initial
    // state; PubId is a transparent wrapper of it); every other field is
    // written once with a valid value before assume_init.  `id_fields`
    // below stops the build when IdPriv gains a field this does not write.
    unsafe {
        let id = addr_of_mut!((*p).id).cast::<rdma_cm_id>();
        id.write_bytes(0, 1);
        addr_of_mut!((*id).context).write(context);
        addr_of_mut!((*id).ps).write(ps);
        addr_of_mut!((*id).qp_type).write(qp_type);
        addr_of_mut!((*id).channel).write(chp);
        addr_of_mut!((*p).handle).write(AtomicU32::new(handle));
        addr_of_mut!((*p).sync).write(AtomicBool::new(sync));
        addr_of_mut!((*p).fd).write(AtomicI32::new(ch.fd()));
        addr_of_mut!((*p).links).write(Mutex::new(Links { channel: ch, dev: None }));
        addr_of_mut!((*p).acks).write(Acks::default());
        addr_of_mut!((*p).conn).write(Mutex::new(ConnState::default()));
        addr_of_mut!((*p).mcs).write(Mutex::new(Vec::new()));
        addr_of_mut!((*p).ai).write(Mutex::new(AiSlot::default()));
        addr_of_mut!((*p).broken).write(AtomicBool::new(false));
        Ok(a.assume_init())
    }
}

/// Every field of an id, by name: a new field fails to build here, as a
/// reminder that [`try_new_id`] must initialise it.
#[allow(dead_code)]
fn id_fields(p: IdPriv) {
    let IdPriv { id: _, handle: _, sync: _, links: _, fd: _, acks: _, conn: _, mcs: _, ai: _, broken: _ } = p;
}

/// Every field of an event, by name: a new field fails to build here, as
/// a reminder that [`try_new_event`] must initialise it.
#[allow(dead_code)]
fn event_fields(e: EventPriv) {
    let EventPriv { event: _, private_data: _, id_priv: _, mc: _, holder: _ } = e;
}
