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
#[inline]
pub fn event_name(event: u32) -> &'static CStr {
    NAMES.get(event as usize).copied().unwrap_or(c"UNKNOWN EVENT")
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn names() {
        // Every value of enum rdma_cm_event_type, with the string upstream's
        // rdma_event_str returns for it (USER and INTERNAL have none there).
        let upstream: [(u32, &str); 20] = [
            (0, "RDMA_CM_EVENT_ADDR_RESOLVED"),
            (1, "RDMA_CM_EVENT_ADDR_ERROR"),
            (2, "RDMA_CM_EVENT_ROUTE_RESOLVED"),
            (3, "RDMA_CM_EVENT_ROUTE_ERROR"),
            (4, "RDMA_CM_EVENT_CONNECT_REQUEST"),
            (5, "RDMA_CM_EVENT_CONNECT_RESPONSE"),
            (6, "RDMA_CM_EVENT_CONNECT_ERROR"),
            (7, "RDMA_CM_EVENT_UNREACHABLE"),
            (8, "RDMA_CM_EVENT_REJECTED"),
            (9, "RDMA_CM_EVENT_ESTABLISHED"),
            (10, "RDMA_CM_EVENT_DISCONNECTED"),
            (11, "RDMA_CM_EVENT_DEVICE_REMOVAL"),
            (12, "RDMA_CM_EVENT_MULTICAST_JOIN"),
            (13, "RDMA_CM_EVENT_MULTICAST_ERROR"),
            (14, "RDMA_CM_EVENT_ADDR_CHANGE"),
            (15, "RDMA_CM_EVENT_TIMEWAIT_EXIT"),
            (16, "RDMA_CM_EVENT_ADDRINFO_RESOLVED"),
            (17, "RDMA_CM_EVENT_ADDRINFO_ERROR"),
            (18, "UNKNOWN EVENT"), // RDMA_CM_EVENT_USER
            (19, "UNKNOWN EVENT"), // RDMA_CM_EVENT_INTERNAL
        ];
        for (e, want) in upstream {
            assert_eq!(event_name(e).to_str().unwrap(), want, "event {e}");
        }
        assert_eq!(event_name(20).to_str().unwrap(), "UNKNOWN EVENT");
        assert_eq!(event_name(u32::MAX).to_str().unwrap(), "UNKNOWN EVENT");
    }
}
