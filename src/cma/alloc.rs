// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Ids and events built in their allocation, field by field (no copy of
//! a large struct).  With [`super::public`] and
//! [`super::objects`] one of the modules of `cma` with unsafe code: what
//! it writes is the private state declared in [`super::base`].
#![allow(unsafe_code)]

use super::acks::Acks;
use super::base::{AiSlot, ChanRef, Channel, Cm, ConnState, EventPriv, IdPriv, IdRef, Links, EVENTS, IDS};
use crate::sys::slab::{Own, Uninit};
use crate::abi::cma::*;
use nix::errno::Errno;
use std::ffi::c_void;
use std::ptr::{addr_of, addr_of_mut};
use std::sync::atomic::{AtomicU32, Ordering};

/// A new event: the public event zero (as upstream clears its event
/// before each read), no id, no membership; built in its slot (no copy of
/// the ~350-byte struct), owned by the reader until it publishes it;
/// ENOMEM when no slot can be had.  The private-data area is not cleared:
/// C reaches it only through the event's `private_data` pointer and
/// length, which cover bytes copied in for this event.
#[inline]
pub fn try_new_event() -> Result<Own<EventPriv>, Errno> {
    let mut u = EVENTS.alloc()?;
    let p = u.as_mut_ptr();
    // SAFETY: p is the empty slot's object, ours alone, valid for writes
    // of an EventPriv.  The public event is plain data (all-zero is
    // valid); the private data is bytes, valid whatever a slot held (a
    // fresh slot is mapped zero, a reused one holds an earlier event's
    // bytes); the holder and the two Option fields are written just
    // after.  `event_fields` below stops the build when EventPriv gains a
    // field this does not write.
    unsafe {
        addr_of_mut!((*p).event).write_bytes(0, 1);
        addr_of_mut!((*p).holder).write(0);
        addr_of_mut!((*p).id_priv).write(None);
        addr_of_mut!((*p).mc).write(None);
        Ok(u.assume_init_own())
    }
}

/// A new id (not yet found by lookups: [`super::base::IDS`]'s `publish`)
/// on channel `ch`, in a new slot ([`new_id`]); ENOMEM when no slot can
/// be had.
pub(super) fn try_new_id(ch: ChanRef, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type, handle: u32, sync: bool) -> Result<IdRef, Errno> {
    Ok(new_id(IDS.alloc()?, ch, context, ps, qp_type, handle, sync))
}

/// A new id (not yet found by lookups) on channel `ch`, which it keeps,
/// built in the slot `u` field by field: the public id is cleared in place
/// (as upstream's calloc) and only its non-zero fields are written, so no
/// ~650-byte struct is built on the stack and copied.
pub(super) fn new_id(mut u: Uninit<IdPriv>, ch: ChanRef, context: *mut c_void, ps: rdma_port_space, qp_type: ibv_qp_type, handle: u32, sync: bool) -> IdRef {
    use parking_lot::Mutex;
    use std::sync::atomic::AtomicBool;
    let p = u.as_mut_ptr();
    let chp = ch.raw();
    // SAFETY: p is the empty slot's object, ours alone, valid for writes
    // of an IdPriv.  `struct rdma_cm_id` is plain data (all-zero is its
    // initial state; PubId is a transparent wrapper of it); every other
    // field is written once with a valid value before assume_init.
    // `id_fields` below stops the build when IdPriv gains a field this
    // does not write.  The handle, the fd and `broken`, which a check
    // reads without a reference ([`peek_id`], racing a build
    // of a new id in the same slot), are stored atomically into the
    // atomics the slot holds: zeroes of a fresh segment (valid atomics)
    // or an earlier id's, which dropping leaves in place.
    unsafe {
        let id = addr_of_mut!((*p).id).cast::<rdma_cm_id>();
        id.write_bytes(0, 1);
        addr_of_mut!((*id).context).write(context);
        addr_of_mut!((*id).ps).write(ps);
        addr_of_mut!((*id).qp_type).write(qp_type);
        addr_of_mut!((*id).channel).write(chp);
        (*addr_of!((*p).handle)).store(handle, Ordering::Relaxed);
        addr_of_mut!((*p).sync).write(AtomicBool::new(sync));
        (*addr_of!((*p).fd)).store(ch.fd(), Ordering::Relaxed);
        addr_of_mut!((*p).links).write(Mutex::new(Links { channel: ch, dev: None, mcs: Vec::new() }));
        addr_of_mut!((*p).acks).write(Acks::default());
        addr_of_mut!((*p).conn).write(Mutex::new(ConnState::default()));
        addr_of_mut!((*p).ai).write(Mutex::new(AiSlot::default()));
        (*addr_of!((*p).broken)).store(false, Ordering::Relaxed);
        addr_of_mut!((*p).dev_limits).write(AtomicU32::new(0));
        u.assume_init()
    }
}

/// What a command on the live id C knows by `p` needs: its channel's fd
/// and the kernel's handle, read without holding the id
/// ([`Slab::read_live`](crate::sys::slab::Slab::read_live)); EINVAL for
/// anything that is not a live id (NULL, stale, foreign, misaligned,
/// destroyed), EIO for an id a panic left broken (see
/// [`Held`](super::Held)).  For the calls that only send the kernel one
/// command naming the id and touch nothing else of it.
///
/// What a concurrent `rdma_destroy_id` of the same id (a caller's bug:
/// the id must stay live for the call, as with upstream, which reads
/// the freed id there) can do: if it retires the id before the second
/// read of the state word, the call fails with EINVAL; if after, the
/// call goes on with the fd and handle the id had: the kernel's
/// answer is then for an id it no longer knows (EINVAL), or EBADF once
/// the channel's descriptor is closed, or, should the process have
/// opened another file under that number meanwhile, the command goes to
/// that file (upstream writes to the same place).  Memory safety holds
/// whatever happens: the slot's memory is never freed and only its atomics
/// are read.
#[inline(always)]
pub fn peek_id(p: *const rdma_cm_id) -> Result<(i32, u32), Errno> {
    // SAFETY: the closure loads three atomics of the slot's IdPriv by
    // place projection; `new_id` stores them atomically, and so does
    // every other writer (they are atomics).
    let r = unsafe {
        IDS.read_live(p as usize, |ip| {
            let broken = (*addr_of!((*ip).broken)).load(Ordering::Relaxed);
            ((*addr_of!((*ip).fd)).load(Ordering::Relaxed), (*addr_of!((*ip).handle)).load(Ordering::Relaxed), broken)
        })
    };
    match r {
        Some((fd, handle, false)) => Ok((fd, handle)),
        Some((_, _, true)) => Err(Errno::EIO),
        None => Err(Errno::EINVAL),
    }
}

/// A new channel (not yet found by lookups) on descriptor `fd`, built in
/// the slot `slot`.
pub(super) fn new_channel(mut slot: Uninit<Channel>, fd: i32, cm: &'static Cm) -> ChanRef {
    // SAFETY: the slot is ours alone and valid for writes of a Channel,
    // which is written whole before assume_init.
    unsafe {
        slot.as_mut_ptr().write(Channel { ch: rdma_event_channel { fd }, waits_done: Default::default(), reader: Default::default(), cm });
        slot.assume_init()
    }
}

/// Every field of an id, by name: a new field fails to build here, as a
/// reminder that [`try_new_id`] must initialise it.
#[allow(dead_code)]
fn id_fields(p: IdPriv) {
    let IdPriv { id: _, handle: _, sync: _, links: _, fd: _, acks: _, conn: _, ai: _, broken: _, dev_limits: _ } = p;
}

/// Every field of an event, by name: a new field fails to build here, as
/// a reminder that [`try_new_event`] must initialise it.
#[allow(dead_code)]
fn event_fields(e: EventPriv) {
    let EventPriv { event: _, private_data: _, id_priv: _, mc: _, holder: _ } = e;
}
