// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Event channels, ids, devices, options, bind, address and route resolution, events.

use rdmacm::internal::abi::cma::*;
use super::{entry_hot, entry_hot_on_id, entry, guarded, nonnull, Errno};
use rdmacm::internal::abi::ucma::EventResp;
use rdmacm::internal::sys::{cancel, ucma};
use std::mem::MaybeUninit;
use rdmacm::internal::cma::{self as cm, ChanRef, Cm};
use rdmacm::internal::abi::sockaddr::SockAddr;
use crate::symver;
use libc::sockaddr;
use std::ffi::{c_char, c_int, c_void};

/// Opens a new event channel.  Its `fd` may be polled for events.
///
/// # Safety
/// No pointer arguments; always safe to call from C.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    entry(|| Ok(cm::global().create_channel()?.raw()))
}
symver!(rdma_create_event_channel, "RDMACM_1.0");

/// Closes an event channel.  All ids using it must have been destroyed.
///
/// # Safety
/// Pointer arguments must be NULL or what the C API promises: ids from
/// `rdma_create_id` not yet destroyed, channels from
/// `rdma_create_event_channel`, unacked events from `rdma_get_cm_event`,
/// socket addresses as large as their family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    entry(|| {
        let ch = live_channel(channel)?;
        cm::global().destroy_channel(&ch);
        Ok(())
    })
}
symver!(rdma_destroy_event_channel, "RDMACM_1.0");

/// Creates a communication identifier.  A NULL channel makes the id
/// synchronous: each call waits for its own event.
///
/// # Safety
/// Pointer arguments must be NULL or what the C API promises: ids from
/// `rdma_create_id` not yet destroyed, channels from
/// `rdma_create_event_channel`, unacked events from `rdma_get_cm_event`,
/// socket addresses as large as their family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_create_id(channel: *mut rdma_event_channel, id: *mut *mut rdma_cm_id, context: *mut c_void, ps: rdma_port_space) -> c_int {
    entry_hot(|| {
        let out = nonnull(id)?;
        let cm = cm::global();
        let ch = if channel.is_null() { None } else { Some(cm.channel(channel)?) };
        // A synchronous id opens its own channel: out of descriptors, that
        // is ENOMEM, as upstream reports it.
        let p = cm.create_id_keeping(ch, context, ps).map_err(|e| if channel.is_null() { super::fd_exhaustion_as_enomem(e) } else { e })?;
        // SAFETY: out is a writable pointer slot (checked non-NULL).
        unsafe { *out.as_ptr() = p.raw() };
        Ok(0)
    })
}
symver!(rdma_create_id, "RDMACM_1.0");

/// The private state behind a C id: EINVAL for NULL and for pointers that
/// are not live ids of the library (never dereferenced then).  The
/// counted reference keeps the id in its slot, so it stays valid for the
/// call even if another thread destroys it meanwhile.
/// An id that an earlier call left broken by a panic gives EIO (see
/// [`cm::Held`]).
pub(crate) fn id_of(id: *mut rdma_cm_id) -> Result<(cm::Held, &'static Cm), Errno> {
    id_in_line(id)
}

/// [`id_of`] in line in its caller (`rdma_bind_addr`'s and the
/// connection calls': no call, no frame of its own).
#[inline(always)]
pub(crate) fn id_in_line(id: *mut rdma_cm_id) -> Result<(cm::Held, &'static Cm), Errno> {
    let id = nonnull(id)?;
    let cm = cm::global();
    Ok((cm.id(id.as_ptr())?.hold()?, cm))
}

/// [`id_of`] for the calls that destroy an id: a broken id may still be
/// destroyed.
pub(crate) fn id_to_destroy(id: *mut rdma_cm_id) -> Result<(cm::Held, &'static Cm), Errno> {
    let id = nonnull(id)?;
    let cm = cm::global();
    Ok((cm.id(id.as_ptr())?.hold_to_destroy(), cm))
}

/// A live channel of the library, or EINVAL (checked like [`id_of`]).
/// In line: `rdma_get_cm_event`'s one lookup of the channel.
#[inline(always)]
fn live_channel(channel: *mut rdma_event_channel) -> Result<ChanRef, Errno> {
    cm::global().channel(nonnull(channel)?.as_ptr())
}

/// Destroys a communication identifier, after every event reported for it
/// has been acknowledged.
///
/// # Safety
/// Pointer arguments must be NULL or what the C API promises: ids from
/// `rdma_create_id` not yet destroyed, channels from
/// `rdma_create_event_channel`, unacked events from `rdma_get_cm_event`,
/// socket addresses as large as their family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    entry_hot(|| {
        let (p, cm) = id_to_destroy(id)?;
        cm.destroy_id(&p)?;
        Ok(0)
    })
}
symver!(rdma_destroy_id, "RDMACM_1.0");

/// Moves an identifier to another event channel (NULL: a new private
/// channel, making the id synchronous).
///
/// # Safety
/// Pointer arguments must be NULL or what the C API promises: ids from
/// `rdma_create_id` not yet destroyed, channels from
/// `rdma_create_event_channel`, unacked events from `rdma_get_cm_event`,
/// socket addresses as large as their family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_migrate_id(id: *mut rdma_cm_id, channel: *mut rdma_event_channel) -> c_int {
    entry(|| {
        let (p, cm) = id_of(id)?;
        let ch = if channel.is_null() { None } else { Some(live_channel(channel)?) };
        cm.migrate_id(&p, ch.as_ref())?;
        Ok(0)
    })
}
symver!(rdma_migrate_id, "RDMACM_1.0");

/// Waits for the next event on a channel.
///
/// # Safety
/// Pointer arguments must be NULL or what the C API promises: ids from
/// `rdma_create_id` not yet destroyed, channels from
/// `rdma_create_event_channel`, unacked events from `rdma_get_cm_event`,
/// socket addresses as large as their family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_get_cm_event(channel: *mut rdma_event_channel, event: *mut *mut rdma_cm_event) -> c_int {
    // The boundary in three parts, all in this frame: the checks and the
    // event's slot under the panic boundary; the wait, a plain call that
    // glibc's forced unwind (a cancellation, `pthread_exit` from a signal
    // handler) leaves through, as it leaves upstream's; the response's
    // processing under the panic boundary again (a discarded event waits
    // again).  Across the wait this frame owns the channel's reference and
    // the event's slot only as bytes (`MaybeUninit`, no drop glue), so
    // that it is one a forced unwind may cross (RFC 2945); the wait's
    // cleanup (`abandon_wait`) releases them then.  (No `init_once`: a
    // channel exists only once an export that runs it has made one, and
    // anything else fails the channel's check.)
    let mut held = MaybeUninit::<Waiting>::uninit();
    let mut resp = MaybeUninit::<EventResp>::uninit();
    let (mut fd, mut out): (c_int, *mut *mut rdma_cm_event) = (-1, std::ptr::null_mut());
    let (mut r, mut failed) = guarded(false, || {
        let ch = live_channel(channel)?;
        out = nonnull(event)?.as_ptr();
        if !ch.cm.is_direct() {
            // (another transport than the kernel's: the library's own wait)
            let got = cm::get_event(&ch)?;
            // SAFETY: out is a writable pointer slot.
            unsafe { *out = got.ptr };
            return Ok(0);
        }
        fd = ch.fd();
        let g = cm::Getting::begin(&ch)?;
        held.write((ch, g));
        Ok(WAIT)
    });
    while r == WAIT {
        // SAFETY: this frame holds nothing with a destructor across the
        // call (`held` and `resp` are bytes, the closures have returned)
        // and no catch_unwind is around it; the export is "C-unwind";
        // `held` is initialised (the part before answered WAIT), and
        // `abandon_wait` takes it once if the thread ends in the wait.
        let got = unsafe { ucma::wait_event_unwinding(fd, &mut resp, abandon_wait, held.as_mut_ptr().cast()) }.map(|e| e as *const EventResp);
        (r, failed) = guarded(false, || {
            // SAFETY: initialised before the wait, which returned: the
            // values are this part's again (written back before another
            // wait).
            let (ch, g) = unsafe { held.assume_init_read() };
            ch.wait_done();
            let resp = got?;
            // SAFETY: the response the wait that succeeded initialised,
            // in this frame.
            match g.take(ch.cm, unsafe { &*resp })? {
                cm::Taken::Got(e) => {
                    // SAFETY: out is a writable pointer slot (checked).
                    unsafe { *out = e.ptr };
                    Ok(0)
                }
                cm::Taken::Again(g) => {
                    held.write((ch, g));
                    Ok(WAIT)
                }
            }
        });
    }
    if failed && cancel::caught() {
        // SAFETY: as in `entry`: this frame holds nothing with a destructor.
        unsafe { cancel::resume() }
    }
    r
}

/// `rdma_get_cm_event`'s body's answer: wait for the kernel's (next) event.
const WAIT: c_int = 1;

/// What `rdma_get_cm_event` holds across its wait: the channel's
/// reference and the event's slot ([`cm::Getting`]).
type Waiting = (ChanRef, cm::Getting);

/// The cleanup of `rdma_get_cm_event`'s wait, run by glibc's forced
/// unwind as it leaves the wait: the wait counted as over, the channel's
/// reference and the event's slot released (the event stays queued in the
/// kernel, as with upstream's).
///
/// # Safety
/// `arg` is the export's initialised `Waiting`, in its frame, which the
/// unwind has not left yet, and used by nothing else afterwards.
unsafe extern "C" fn abandon_wait(arg: *mut c_void) {
    // SAFETY: per the contract: read once, then never again.
    let (ch, g) = unsafe { (arg as *mut Waiting).read() };
    ch.wait_done();
    drop(g);
}
symver!(rdma_get_cm_event, "RDMACM_1.0");

/// Releases an event returned by rdma_get_cm_event.
///
/// # Safety
/// Pointer arguments must be NULL or what the C API promises: ids from
/// `rdma_create_id` not yet destroyed, channels from
/// `rdma_create_event_channel`, unacked events from `rdma_get_cm_event`,
/// socket addresses as large as their family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    entry_hot(|| {
        let ev = nonnull(event)?.as_ptr();
        // A pointer that is not an unacked event (a double ack, say) is
        // refused rather than freed (it is only looked up, never followed).
        if !cm::delivery::ack(ev) {
            return Err(Errno::EINVAL);
        }
        Ok(0)
    })
}
symver!(rdma_ack_cm_event, "RDMACM_1.0");

/// Sets an option on an identifier (level RDMA_OPTION_ID or RDMA_OPTION_IB).
///
/// # Safety
/// Pointer arguments must be NULL or what the C API promises: ids from
/// `rdma_create_id` not yet destroyed, channels from
/// `rdma_create_event_channel`, unacked events from `rdma_get_cm_event`,
/// socket addresses as large as their family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_set_option(id: *mut rdma_cm_id, level: c_int, optname: c_int, optval: *mut c_void, optlen: usize) -> c_int {
    entry(|| {
        let (p, cm) = id_of(id)?;
        // The kernel validates optval/optlen (EFAULT when unreadable).
        cm.set_option(&p, level, optname, optval, optlen)?;
        Ok(0)
    })
}
symver!(rdma_set_option, "RDMACM_1.0");

/// Returns the opened RDMA devices as a NULL-terminated array; release it
/// with rdma_free_devices.
///
/// # Safety
/// Pointer arguments must be NULL or what the C API promises: ids from
/// `rdma_create_id` not yet destroyed, channels from
/// `rdma_create_event_channel`, unacked events from `rdma_get_cm_event`,
/// socket addresses as large as their family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
    entry(|| {
        let r = cm::get_devices(cm::global()).and_then(|list| {
            let n = list.len();
            // SAFETY: plain allocation of n + 1 pointers, freed by
            // rdma_free_devices (or by the caller with free()).
            let arr = unsafe { libc::malloc((n + 1) * std::mem::size_of::<*mut ibv_context>()) } as *mut *mut ibv_context;
            if arr.is_null() {
                cm::free_devices(cm::global(), &list);
                return Err(Errno::ENOMEM);
            }
            // SAFETY: the array has room for n entries and the terminator.
            unsafe {
                std::ptr::copy_nonoverlapping(list.as_ptr(), arr, n);
                *arr.add(n) = std::ptr::null_mut();
            }
            DEVICE_LISTS.lock().push(arr as usize);
            Ok((arr, n))
        });
        if !num_devices.is_null() {
            let n = r.as_ref().map(|(_, n)| *n as c_int).unwrap_or(0);
            // SAFETY: num_devices is a writable int (checked non-NULL).
            unsafe { *num_devices = n };
        }
        Ok(r?.0)
    })
}
symver!(rdma_get_devices, "RDMACM_1.0");

/// Releases a list from rdma_get_devices.
///
/// # Safety
/// Pointer arguments must be NULL or what the C API promises: ids from
/// `rdma_create_id` not yet destroyed, channels from
/// `rdma_create_event_channel`, unacked events from `rdma_get_cm_event`,
/// socket addresses as large as their family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_free_devices(list: *mut *mut ibv_context) {
    entry(|| {
        let list = nonnull(list)?.as_ptr();
        // Only a list this library handed out and that is not freed yet
        // (a second free, or a list from elsewhere, is EINVAL, untouched).
        {
            let mut lists = DEVICE_LISTS.lock();
            let i = lists.iter().position(|&l| l == list as usize).ok_or(Errno::EINVAL)?;
            lists.swap_remove(i);
        }
        let mut n = 0;
        // SAFETY: the caller passes a list from rdma_get_devices: a
        // NULL-terminated array.
        while !unsafe { *list.add(n) }.is_null() {
            n += 1;
        }
        // SAFETY: the n entries before the terminator are readable.
        cm::free_devices(cm::global(), unsafe { std::slice::from_raw_parts(list, n) });
        // SAFETY: the array came from libc malloc in rdma_get_devices.
        unsafe { libc::free(list as *mut c_void) };
        Ok(())
    })
}
symver!(rdma_free_devices, "RDMACM_1.0");

/// The arrays rdma_get_devices handed out and rdma_free_devices has not
/// freed yet (addresses): a double free or a foreign list is refused.
static DEVICE_LISTS: parking_lot::Mutex<Vec<usize>> = parking_lot::Mutex::new(Vec::new());

/// Binds an identifier to a source address (and, for a specific address,
/// to the RDMA device that owns it).
///
/// # Safety
/// Pointer arguments must be NULL or what the C API promises: ids from
/// `rdma_create_id` not yet destroyed, channels from
/// `rdma_create_event_channel`, unacked events from `rdma_get_cm_event`,
/// socket addresses as large as their family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int {
    // (system calls without libc's cancellation point; a device's first
    // use takes the guard itself: see `entry_hot`)
    entry_hot(|| {
        let (p, cm) = id_in_line(id)?;
        let af_ib = cm.af_ib();
        // SAFETY: addr is NULL or a socket address of its family's size,
        // which the caller does not change during the call.
        // (the BIND command is built from the caller's bytes; NULL and a
        // family the CM does not take are EINVAL)
        let a = unsafe { SockAddr::raw_for_cm(addr, af_ib) }.ok_or(Errno::EINVAL)?;
        cm.bind_bytes(&p, a, af_ib)?;
        Ok(0)
    })
}
symver!(rdma_bind_addr, "RDMACM_1.0");

/// Resolves a destination (and optional source) address to an RDMA address.
///
/// # Safety
/// Pointer arguments must be NULL or what the C API promises: ids from
/// `rdma_create_id` not yet destroyed, channels from
/// `rdma_create_event_channel`, unacked events from `rdma_get_cm_event`,
/// socket addresses as large as their family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_resolve_addr(id: *mut rdma_cm_id, src_addr: *mut sockaddr, dst_addr: *mut sockaddr, timeout_ms: c_int) -> c_int {
    // (system calls without libc's cancellation point; a synchronous id's
    // wait is the library's and its event's processing takes the guard
    // itself: see `entry_hot`)
    entry_hot_on_id(|| {
        let (p, cm) = id_of(id)?;
        let af_ib = cm.af_ib();
        // SAFETY: the addresses are NULL or socket addresses of their
        // family's size, which the caller does not change during the call.
        // (the command is built from the caller's bytes; a NULL source is
        // none, a family the CM does not take EINVAL, as a NULL destination)
        let src = if src_addr.is_null() { &[][..] } else { unsafe { SockAddr::raw_for_cm(src_addr, af_ib) }.ok_or(Errno::EINVAL)? };
        // SAFETY: as above.
        let dst = unsafe { SockAddr::raw_for_cm(dst_addr, af_ib) }.ok_or(Errno::EINVAL)?;
        cm.resolve_addr_bytes(&p, src, dst, timeout_ms)?;
        Ok(0)
    })
}
symver!(rdma_resolve_addr, "RDMACM_1.0");

/// Resolves the route to the destination.
///
/// # Safety
/// Pointer arguments must be NULL or what the C API promises: ids from
/// `rdma_create_id` not yet destroyed, channels from
/// `rdma_create_event_channel`, unacked events from `rdma_get_cm_event`,
/// socket addresses as large as their family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int {
    // (as rdma_resolve_addr: see `entry_hot`)
    entry_hot_on_id(|| {
        let (p, cm) = id_of(id)?;
        cm.resolve_route(&p, timeout_ms)?;
        Ok(0)
    })
}
symver!(rdma_resolve_route, "RDMACM_1.0");

/// Queues a user event (RDMA_CM_EVENT_USER only) on an identifier's channel.
///
/// # Safety
/// Pointer arguments must be NULL or what the C API promises: ids from
/// `rdma_create_id` not yet destroyed, channels from
/// `rdma_create_event_channel`, unacked events from `rdma_get_cm_event`,
/// socket addresses as large as their family's structure.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_write_cm_event(id: *mut rdma_cm_id, event: rdma_cm_event_type, status: c_int, arg: u64) -> c_int {
    entry_hot(|| {
        // (id_of, in line: the hot path's one lookup)
        let cm = cm::global();
        let p = cm.id(nonnull(id)?.as_ptr())?.hold()?;
        cm.write_cm_event(&p, event, status, arg)?;
        Ok(0)
    })
}
symver!(rdma_write_cm_event, "RDMACM_1.4");

/// Returns the name of an event type ("RDMA_CM_EVENT_ADDR_RESOLVED", ...),
/// or "UNKNOWN EVENT" for a value outside the enumeration and, as
/// upstream, for RDMA_CM_EVENT_USER and RDMA_CM_EVENT_INTERNAL.
///
/// # Safety
/// No pointer arguments; always safe to call from C.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_event_str(event: rdma_cm_event_type) -> *const c_char {
    // The one export outside `entry`: a bounds-checked read of a static
    // table cannot panic, sets no errno and logs nothing, so the boundary
    // (its one-time set-up check and stack frame) would be all the cost
    // (at most upstream's instructions per call).
    rdmacm::internal::cma::events::event_name(event).as_ptr()
}
symver!(rdma_event_str, "RDMACM_1.0");

/// Returns the source port of an identifier (network byte order), or 0.
///
/// # Safety
/// `id` must be NULL or a readable `struct rdma_cm_id`.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    entry(|| {
        let id = super::nonnull(id)?;
        // SAFETY: the caller passes an id created by rdma_create_id (or at
        // least a readable struct rdma_cm_id); we read the source address
        // union, which is always fully initialised (zeroed at creation).
        let src = unsafe { &(*id.as_ptr()).route.addr.src };
        Ok(SockAddr::from_storage(src).port())
    })
}
symver!(rdma_get_src_port, "RDMACM_1.0");

/// Returns the destination port of an identifier (network byte order), or 0.
///
/// # Safety
/// `id` must be NULL or a readable `struct rdma_cm_id`.
#[no_mangle]
pub unsafe extern "C-unwind" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    entry(|| {
        let id = super::nonnull(id)?;
        // SAFETY: as in rdma_get_src_port, for the destination union.
        let dst = unsafe { &(*id.as_ptr()).route.addr.dst };
        Ok(SockAddr::from_storage(dst).port())
    })
}
symver!(rdma_get_dst_port, "RDMACM_1.0");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_pointers_are_einval_and_untouched() {
        // SAFETY: zeroed bytes are a valid rdma_cm_id / event / channel; the
        // library must refuse them without reading or freeing them.
        let mut id: rdma_cm_id = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut ev: rdma_cm_event = unsafe { std::mem::zeroed() };
        let mut ch = rdma_event_channel { fd: -1 };
        // SAFETY: the calls are made on pointers to live locals.
        unsafe {
            assert_eq!(rdma_destroy_id(&mut id), -1);
            assert_eq!(Errno::last(), Errno::EINVAL);
            assert_eq!(rdma_ack_cm_event(&mut ev), -1);
            assert_eq!(Errno::last(), Errno::EINVAL);
            assert_eq!(rdma_resolve_route(&mut id, 1000), -1);
            assert_eq!(Errno::last(), Errno::EINVAL);
            assert_eq!(rdma_set_option(&mut id, 0, 0, std::ptr::null_mut(), 0), -1);
            assert_eq!(rdma_migrate_id(std::ptr::null_mut(), &mut ch), -1);
            assert_eq!(Errno::last(), Errno::EINVAL);
            let mut e: *mut rdma_cm_event = std::ptr::null_mut();
            assert_eq!(rdma_get_cm_event(&mut ch, &mut e), -1);
            assert_eq!(Errno::last(), Errno::EINVAL);
            rdma_destroy_event_channel(&mut ch);
            rdma_free_devices(std::ptr::null_mut());
            assert_eq!(rdma_write_cm_event(std::ptr::null_mut(), RDMA_CM_EVENT_USER, 0, 0), -1);
        }
        assert_eq!(ch.fd, -1);
    }

    #[test]
    fn event_names_as_upstream() {
        // SAFETY: rdma_event_str returns static NUL-terminated strings.
        let name = |e| unsafe { std::ffi::CStr::from_ptr(rdma_event_str(e)) }.to_str().unwrap();
        assert_eq!(name(RDMA_CM_EVENT_ADDR_RESOLVED), "RDMA_CM_EVENT_ADDR_RESOLVED");
        assert_eq!(name(RDMA_CM_EVENT_ADDRINFO_ERROR), "RDMA_CM_EVENT_ADDRINFO_ERROR");
        assert_eq!(name(RDMA_CM_EVENT_USER), "UNKNOWN EVENT");
        assert_eq!(name(RDMA_CM_EVENT_INTERNAL), "UNKNOWN EVENT");
        assert_eq!(name(20), "UNKNOWN EVENT");
    }
}
