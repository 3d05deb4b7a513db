// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Event channels, ids, devices, options, bind, address and route resolution, events.

use super::types::*;
use super::{entry, not_implemented};
use crate::symver;
use libc::sockaddr;
use std::ffi::{c_char, c_int, c_void};

/// Opens a new event channel.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    entry(|| not_implemented("rdma_create_event_channel"))
}
symver!(rdma_create_event_channel, "RDMACM_1.0");

/// Closes an event channel.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    entry(|| not_implemented("rdma_destroy_event_channel"))
}
symver!(rdma_destroy_event_channel, "RDMACM_1.0");

/// Creates a communication identifier.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_id(channel: *mut rdma_event_channel, id: *mut *mut rdma_cm_id, context: *mut c_void, ps: rdma_port_space) -> c_int {
    entry(|| not_implemented("rdma_create_id"))
}
symver!(rdma_create_id, "RDMACM_1.0");

/// Destroys a communication identifier.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    entry(|| not_implemented("rdma_destroy_id"))
}
symver!(rdma_destroy_id, "RDMACM_1.0");

/// Moves an identifier to another event channel.
#[no_mangle]
pub unsafe extern "C" fn rdma_migrate_id(id: *mut rdma_cm_id, channel: *mut rdma_event_channel) -> c_int {
    entry(|| not_implemented("rdma_migrate_id"))
}
symver!(rdma_migrate_id, "RDMACM_1.0");

/// Waits for the next event on a channel.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_cm_event(channel: *mut rdma_event_channel, event: *mut *mut rdma_cm_event) -> c_int {
    entry(|| not_implemented("rdma_get_cm_event"))
}
symver!(rdma_get_cm_event, "RDMACM_1.0");

/// Releases an event returned by rdma_get_cm_event.
#[no_mangle]
pub unsafe extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    entry(|| not_implemented("rdma_ack_cm_event"))
}
symver!(rdma_ack_cm_event, "RDMACM_1.0");

/// Sets an option on an identifier.
#[no_mangle]
pub unsafe extern "C" fn rdma_set_option(id: *mut rdma_cm_id, level: c_int, optname: c_int, optval: *mut c_void, optlen: usize) -> c_int {
    entry(|| not_implemented("rdma_set_option"))
}
symver!(rdma_set_option, "RDMACM_1.0");

/// Returns the opened RDMA devices.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
    entry(|| not_implemented("rdma_get_devices"))
}
symver!(rdma_get_devices, "RDMACM_1.0");

/// Releases a list from rdma_get_devices.
#[no_mangle]
pub unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    entry(|| not_implemented("rdma_free_devices"))
}
symver!(rdma_free_devices, "RDMACM_1.0");

/// Binds an identifier to a source address.
#[no_mangle]
pub unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int {
    entry(|| not_implemented("rdma_bind_addr"))
}
symver!(rdma_bind_addr, "RDMACM_1.0");

/// Resolves a destination (and optional source) address to an RDMA address.
#[no_mangle]
pub unsafe extern "C" fn rdma_resolve_addr(id: *mut rdma_cm_id, src_addr: *mut sockaddr, dst_addr: *mut sockaddr, timeout_ms: c_int) -> c_int {
    entry(|| not_implemented("rdma_resolve_addr"))
}
symver!(rdma_resolve_addr, "RDMACM_1.0");

/// Resolves the route to the destination.
#[no_mangle]
pub unsafe extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int {
    entry(|| not_implemented("rdma_resolve_route"))
}
symver!(rdma_resolve_route, "RDMACM_1.0");

/// Queues a user event on an identifier's channel.
#[no_mangle]
pub unsafe extern "C" fn rdma_write_cm_event(id: *mut rdma_cm_id, event: rdma_cm_event_type, status: c_int, arg: u64) -> c_int {
    entry(|| not_implemented("rdma_write_cm_event"))
}
symver!(rdma_write_cm_event, "RDMACM_1.4");

/// Returns the name of an event type ("RDMA_CM_EVENT_ADDR_RESOLVED", ...),
/// or "UNKNOWN EVENT" for a value outside the enumeration.
#[no_mangle]
pub unsafe extern "C" fn rdma_event_str(event: rdma_cm_event_type) -> *const c_char {
    entry(|| Ok(crate::core::events::event_name(event).as_ptr()))
}
symver!(rdma_event_str, "RDMACM_1.0");

/// Returns the source port of an identifier (network byte order), or 0.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    entry(|| {
        let id = super::nonnull(id)?;
        // SAFETY: the caller passes an id created by rdma_create_id (or at
        // least a readable struct rdma_cm_id); we read the source address
        // union, which is always fully initialised (zeroed at creation).
        let src = unsafe { &(*id.as_ptr()).route.addr.src };
        Ok(crate::core::sockaddr::port_of(&crate::core::sockaddr::SockAddr::from_storage(src)))
    })
}
symver!(rdma_get_src_port, "RDMACM_1.0");

/// Returns the destination port of an identifier (network byte order), or 0.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    entry(|| {
        let id = super::nonnull(id)?;
        // SAFETY: as in rdma_get_src_port, for the destination union.
        let dst = unsafe { &(*id.as_ptr()).route.addr.dst };
        Ok(crate::core::sockaddr::port_of(&crate::core::sockaddr::SockAddr::from_storage(dst)))
    })
}
symver!(rdma_get_dst_port, "RDMACM_1.0");
