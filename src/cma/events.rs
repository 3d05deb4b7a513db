// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Event names.
#![deny(unsafe_code)]

use std::ffi::CStr;

/// Names of events 0..=17.  Upstream's rdma_event_str does not name
/// RDMA_CM_EVENT_USER (18) or RDMA_CM_EVENT_INTERNAL (19): they read
/// "UNKNOWN EVENT" there, and so here.
const NAMES: [&CStr; 18] = [
    c"RDMA_CM_EVENT_ADDR_RESOLVED",
    c"RDMA_CM_EVENT_ADDR_ERROR",
    c"RDMA_CM_EVENT_ROUTE_RESOLVED",
    c"RDMA_CM_EVENT_ROUTE_ERROR",
    c"RDMA_CM_EVENT_CONNECT_REQUEST",
    c"RDMA_CM_EVENT_CONNECT_RESPONSE",
    c"RDMA_CM_EVENT_CONNECT_ERROR",
    c"RDMA_CM_EVENT_UNREACHABLE",
    c"RDMA_CM_EVENT_REJECTED",
    c"RDMA_CM_EVENT_ESTABLISHED",
    c"RDMA_CM_EVENT_DISCONNECTED",
    c"RDMA_CM_EVENT_DEVICE_REMOVAL",
    c"RDMA_CM_EVENT_MULTICAST_JOIN",
    c"RDMA_CM_EVENT_MULTICAST_ERROR",
    c"RDMA_CM_EVENT_ADDR_CHANGE",
    c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
    c"RDMA_CM_EVENT_ADDRINFO_RESOLVED",
    c"RDMA_CM_EVENT_ADDRINFO_ERROR",
];

/// The C name of an event type, or "UNKNOWN EVENT".
pub fn event_name(event: u32) -> &'static CStr {
    NAMES.get(event as usize).copied().unwrap_or(c"UNKNOWN EVENT")
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn names() {
        assert_eq!(event_name(0).to_str().unwrap(), "RDMA_CM_EVENT_ADDR_RESOLVED");
        assert_eq!(event_name(17).to_str().unwrap(), "RDMA_CM_EVENT_ADDRINFO_ERROR");
        assert_eq!(event_name(18).to_str().unwrap(), "UNKNOWN EVENT");
        assert_eq!(event_name(19).to_str().unwrap(), "UNKNOWN EVENT");
        assert_eq!(event_name(20).to_str().unwrap(), "UNKNOWN EVENT");
        assert_eq!(event_name(u32::MAX).to_str().unwrap(), "UNKNOWN EVENT");
    }
}
