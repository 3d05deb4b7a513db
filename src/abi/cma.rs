// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! `#[repr(C)]` mirrors of the public structures of `<rdma/rdma_cma.h>`,
//! `<infiniband/ib.h>` and the few `<infiniband/verbs.h>` /
//! `<infiniband/sa.h>` structures that they embed by value.
//!
//! C code reads and writes these directly (`id->verbs`, `id->route.addr`,
//! `event->param.conn`, ...), so they must be bit-identical to upstream's.
//! Every size and offset is asserted at compile time below, and
//! `ctest/layout.c`, compiled against upstream's installed headers, checks
//! the same table (`abi/layout.txt`) from the C side.
//!
//! Where C has an anonymous union, the mirror has a named field of a union
//! type; the layout is the same, only the Rust spelling differs.
//! Enumerations that C passes by value are plain integers here: they are
//! validated where they are read, never transmuted.

use libc::{sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage, socklen_t};
use std::ffi::{c_char, c_int, c_void};

macro_rules! opaque {
    ($($(#[$m:meta])* $name:ident),* $(,)?) => {$(
        $(#[$m])*
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}

opaque!(
    /// `struct ibv_context` (libibverbs; opaque here).
    ibv_context,
    /// `struct ibv_pd` (libibverbs; opaque here).
    ibv_pd,
    /// `struct ibv_qp` (libibverbs; opaque here).
    ibv_qp,
    /// `struct ibv_cq` (libibverbs; opaque here).
    ibv_cq,
    /// `struct ibv_comp_channel` (libibverbs; opaque here).
    ibv_comp_channel,
    /// `struct ibv_srq` (libibverbs; opaque here).
    ibv_srq,
    /// `struct ibv_qp_init_attr` (libibverbs; opaque here).
    ibv_qp_init_attr,
    /// `struct ibv_qp_init_attr_ex` (libibverbs; opaque here).
    ibv_qp_init_attr_ex,
    /// `struct ibv_srq_init_attr_ex` (libibverbs; opaque here).
    ibv_srq_init_attr_ex,
    /// `struct ibv_srq_init_attr` (libibverbs; opaque here).
    ibv_srq_init_attr,
    /// `struct ibv_qp_attr` (libibverbs; opaque here).
    ibv_qp_attr,
    /// `struct ibv_ece` (libibverbs; opaque here).
    ibv_ece,
);

/// `enum rdma_cm_event_type`.
pub type rdma_cm_event_type = u32;
/// `enum rdma_port_space`.
pub type rdma_port_space = u32;
/// `enum ibv_qp_type`.
pub type ibv_qp_type = u32;
/// `enum ibv_event_type`.
pub type ibv_event_type = u32;

pub const RDMA_PS_IPOIB: u32 = 0x0002;
pub const RDMA_PS_TCP: u32 = 0x0106;
pub const RDMA_PS_UDP: u32 = 0x0111;
pub const RDMA_PS_IB: u32 = 0x013F;

pub const RDMA_IB_IP_PS_MASK: u64 = 0xFFFF_FFFF_FFFF_0000;
pub const RDMA_IB_IP_PORT_MASK: u64 = 0x0000_0000_0000_FFFF;
pub const RDMA_IB_IP_PS_TCP: u64 = 0x0000_0000_0106_0000;
pub const RDMA_IB_IP_PS_UDP: u64 = 0x0000_0000_0111_0000;
pub const RDMA_IB_PS_IB: u64 = 0x0000_0000_013F_0000;
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

pub const RAI_PASSIVE: c_int = 0x1;
pub const RAI_NUMERICHOST: c_int = 0x2;
pub const RAI_NOROUTE: c_int = 0x4;
pub const RAI_FAMILY: c_int = 0x8;
pub const RAI_SA: c_int = 0x10;
pub const RAI_DNS: c_int = 0x20;

pub const AF_IB: c_int = 27;

pub const IBV_QPT_RC: u32 = 2;
pub const IBV_QPT_UC: u32 = 3;
pub const IBV_QPT_UD: u32 = 4;
pub const IBV_QPT_RAW_PACKET: u32 = 8;
pub const IBV_QPT_XRC_SEND: u32 = 9;
pub const IBV_QPT_XRC_RECV: u32 = 10;

/// The events of `enum rdma_cm_event_type`, in order.
pub const RDMA_CM_EVENT_ADDR_RESOLVED: u32 = 0;
pub const RDMA_CM_EVENT_ADDR_ERROR: u32 = 1;
pub const RDMA_CM_EVENT_ROUTE_RESOLVED: u32 = 2;
pub const RDMA_CM_EVENT_ROUTE_ERROR: u32 = 3;
pub const RDMA_CM_EVENT_CONNECT_REQUEST: u32 = 4;
pub const RDMA_CM_EVENT_CONNECT_RESPONSE: u32 = 5;
pub const RDMA_CM_EVENT_CONNECT_ERROR: u32 = 6;
pub const RDMA_CM_EVENT_UNREACHABLE: u32 = 7;
pub const RDMA_CM_EVENT_REJECTED: u32 = 8;
pub const RDMA_CM_EVENT_ESTABLISHED: u32 = 9;
pub const RDMA_CM_EVENT_DISCONNECTED: u32 = 10;
pub const RDMA_CM_EVENT_DEVICE_REMOVAL: u32 = 11;
pub const RDMA_CM_EVENT_MULTICAST_JOIN: u32 = 12;
pub const RDMA_CM_EVENT_MULTICAST_ERROR: u32 = 13;
pub const RDMA_CM_EVENT_ADDR_CHANGE: u32 = 14;
pub const RDMA_CM_EVENT_TIMEWAIT_EXIT: u32 = 15;
pub const RDMA_CM_EVENT_ADDRINFO_RESOLVED: u32 = 16;
pub const RDMA_CM_EVENT_ADDRINFO_ERROR: u32 = 17;
pub const RDMA_CM_EVENT_USER: u32 = 18;
pub const RDMA_CM_EVENT_INTERNAL: u32 = 19;

/// `union ibv_gid`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    pub raw: [u8; 16],
    pub global: ibv_gid_global,
}

/// The `global` member of `union ibv_gid` (both fields big-endian).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_gid_global {
    pub subnet_prefix: u64,
    pub interface_id: u64,
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_sa_path_rec` (`<infiniband/sa.h>`, host byte order where
/// upstream's is, `__be` fields big-endian).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_sa_path_rec {
    pub dgid: ibv_gid,
    pub sgid: ibv_gid,
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: c_int,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reversible: c_int,
    pub numb_path: u8,
    pub pkey: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

/// `struct ibv_path_record` (wire format, big-endian fields).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_path_record {
    pub service_id: u64,
    pub dgid: ibv_gid,
    pub sgid: ibv_gid,
    pub dlid: u16,
    pub slid: u16,
    pub flowlabel_hoplimit: u32,
    pub tclass: u8,
    pub reversible_numpath: u8,
    pub pkey: u16,
    pub qosclass_sl: u16,
    pub mtu: u8,
    pub rate: u8,
    pub packetlifetime: u8,
    pub preference: u8,
    pub reserved: [u8; 6],
}

/// `struct ibv_path_data`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_path_data {
    pub flags: u32,
    pub reserved: u32,
    pub path: ibv_path_record,
}

/// `struct ib_addr` (`<infiniband/ib.h>`): 16 raw bytes, 8-byte aligned.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ib_addr {
    pub sib_raw: [u8; 16],
}

/// `struct sockaddr_ib` (`<infiniband/ib.h>`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sockaddr_ib {
    pub sib_family: u16,
    /// Big-endian.
    pub sib_pkey: u16,
    /// Big-endian.
    pub sib_flowinfo: u32,
    pub sib_addr: ib_addr,
    /// Big-endian.
    pub sib_sid: u64,
    /// Big-endian.
    pub sib_sid_mask: u64,
    pub sib_scope_id: u64,
}

/// `struct rdma_ib_addr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ib_addr {
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
    /// Big-endian.
    pub pkey: u16,
}

/// One of the two anonymous socket-address unions of `struct rdma_addr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_sockaddr {
    pub addr: sockaddr,
    pub sin: sockaddr_in,
    pub sin6: sockaddr_in6,
    pub storage: sockaddr_storage,
}

/// The `addr` union of `struct rdma_addr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_addr_u {
    pub ibaddr: rdma_ib_addr,
}

/// `struct rdma_addr`.  C spells `src`/`dst` as anonymous unions
/// (`addr.src_addr`, `addr.src_sin`, ...).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_addr {
    pub src: rdma_sockaddr,
    pub dst: rdma_sockaddr,
    pub addr: rdma_addr_u,
}

/// `struct rdma_route`.
#[repr(C)]
pub struct rdma_route {
    pub addr: rdma_addr,
    pub path_rec: *mut ibv_sa_path_rec,
    pub num_paths: c_int,
}

/// `struct rdma_event_channel`.
#[repr(C)]
pub struct rdma_event_channel {
    pub fd: c_int,
}

/// `struct rdma_cm_id`.  Applications read its fields directly; the
/// library's private per-id state embeds it as its first member.
#[repr(C)]
pub struct rdma_cm_id {
    pub verbs: *mut ibv_context,
    pub channel: *mut rdma_event_channel,
    pub context: *mut c_void,
    pub qp: *mut ibv_qp,
    pub route: rdma_route,
    pub ps: rdma_port_space,
    pub port_num: u8,
    pub event: *mut rdma_cm_event,
    pub send_cq_channel: *mut ibv_comp_channel,
    pub send_cq: *mut ibv_cq,
    pub recv_cq_channel: *mut ibv_comp_channel,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub pd: *mut ibv_pd,
    pub qp_type: ibv_qp_type,
}

/// `struct rdma_conn_param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_conn_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct rdma_ud_param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ud_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: ibv_ah_attr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// The `param` union of `struct rdma_cm_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_cm_event_param {
    pub conn: rdma_conn_param,
    pub ud: rdma_ud_param,
    pub arg: u64,
}

/// `struct rdma_cm_event`.
#[repr(C)]
pub struct rdma_cm_event {
    pub id: *mut rdma_cm_id,
    pub listen_id: *mut rdma_cm_id,
    pub event: rdma_cm_event_type,
    pub status: c_int,
    pub param: rdma_cm_event_param,
}

/// `struct rdma_addrinfo`.
#[repr(C)]
pub struct rdma_addrinfo {
    pub ai_flags: c_int,
    pub ai_family: c_int,
    pub ai_qp_type: c_int,
    pub ai_port_space: c_int,
    pub ai_src_len: socklen_t,
    pub ai_dst_len: socklen_t,
    pub ai_src_addr: *mut sockaddr,
    pub ai_dst_addr: *mut sockaddr,
    pub ai_src_canonname: *mut c_char,
    pub ai_dst_canonname: *mut c_char,
    pub ai_route_len: usize,
    pub ai_route: *mut c_void,
    pub ai_connect_len: usize,
    pub ai_connect: *mut c_void,
    pub ai_next: *mut rdma_addrinfo,
}

/// `struct rdma_cm_join_mc_attr_ex`.
#[repr(C)]
pub struct rdma_cm_join_mc_attr_ex {
    pub comp_mask: u32,
    pub join_flags: u32,
    pub addr: *mut sockaddr,
}

/// Size and field offsets of every mirrored structure, in the format of
/// `abi/layout.txt` (`struct field offset` lines, `struct sizeof size`).
pub fn layout_table() -> String {
    use std::fmt::Write;
    use std::mem::{offset_of, size_of};
    let mut s = String::new();
    macro_rules! row {
        ($t:ident; $($f:ident $(. $g:ident)* => $cname:literal),* $(,)?) => {{
            let _ = writeln!(s, "{} sizeof {}", stringify!($t), size_of::<$t>());
            $( let _ = writeln!(s, "{} {} {}", stringify!($t), $cname, offset_of!($t, $f $(. $g)*)); )*
        }};
    }
    row!(rdma_cm_id; verbs => "verbs", channel => "channel", context => "context", qp => "qp",
        route => "route", ps => "ps", port_num => "port_num", event => "event",
        send_cq_channel => "send_cq_channel", send_cq => "send_cq",
        recv_cq_channel => "recv_cq_channel", recv_cq => "recv_cq", srq => "srq", pd => "pd",
        qp_type => "qp_type");
    row!(rdma_route; addr => "addr", path_rec => "path_rec", num_paths => "num_paths");
    row!(rdma_addr; src => "src_addr", dst => "dst_addr", addr => "addr");
    row!(rdma_ib_addr; sgid => "sgid", dgid => "dgid", pkey => "pkey");
    row!(rdma_event_channel; fd => "fd");
    row!(rdma_conn_param; private_data => "private_data", private_data_len => "private_data_len",
        responder_resources => "responder_resources", initiator_depth => "initiator_depth",
        flow_control => "flow_control", retry_count => "retry_count",
        rnr_retry_count => "rnr_retry_count", srq => "srq", qp_num => "qp_num");
    row!(rdma_ud_param; private_data => "private_data", private_data_len => "private_data_len",
        ah_attr => "ah_attr", qp_num => "qp_num", qkey => "qkey");
    row!(rdma_cm_event; id => "id", listen_id => "listen_id", event => "event",
        status => "status", param => "param");
    row!(rdma_addrinfo; ai_flags => "ai_flags", ai_family => "ai_family",
        ai_qp_type => "ai_qp_type", ai_port_space => "ai_port_space",
        ai_src_len => "ai_src_len", ai_dst_len => "ai_dst_len",
        ai_src_addr => "ai_src_addr", ai_dst_addr => "ai_dst_addr",
        ai_src_canonname => "ai_src_canonname", ai_dst_canonname => "ai_dst_canonname",
        ai_route_len => "ai_route_len", ai_route => "ai_route",
        ai_connect_len => "ai_connect_len", ai_connect => "ai_connect", ai_next => "ai_next");
    row!(rdma_cm_join_mc_attr_ex; comp_mask => "comp_mask", join_flags => "join_flags",
        addr => "addr");
    row!(sockaddr_ib; sib_family => "sib_family", sib_pkey => "sib_pkey",
        sib_flowinfo => "sib_flowinfo", sib_addr => "sib_addr", sib_sid => "sib_sid",
        sib_sid_mask => "sib_sid_mask", sib_scope_id => "sib_scope_id");
    row!(ibv_ah_attr; grh => "grh", dlid => "dlid", sl => "sl", src_path_bits => "src_path_bits",
        static_rate => "static_rate", is_global => "is_global", port_num => "port_num");
    row!(ibv_global_route; dgid => "dgid", flow_label => "flow_label",
        sgid_index => "sgid_index", hop_limit => "hop_limit", traffic_class => "traffic_class");
    row!(ibv_sa_path_rec; dgid => "dgid", sgid => "sgid", dlid => "dlid", slid => "slid",
        raw_traffic => "raw_traffic", flow_label => "flow_label", hop_limit => "hop_limit",
        traffic_class => "traffic_class", reversible => "reversible", numb_path => "numb_path",
        pkey => "pkey", sl => "sl", mtu_selector => "mtu_selector", mtu => "mtu",
        rate_selector => "rate_selector", rate => "rate",
        packet_life_time_selector => "packet_life_time_selector",
        packet_life_time => "packet_life_time", preference => "preference");
    row!(ibv_path_record; service_id => "service_id", dgid => "dgid", sgid => "sgid",
        dlid => "dlid", slid => "slid", flowlabel_hoplimit => "flowlabel_hoplimit",
        tclass => "tclass", reversible_numpath => "reversible_numpath", pkey => "pkey",
        qosclass_sl => "qosclass_sl", mtu => "mtu", rate => "rate",
        packetlifetime => "packetlifetime", preference => "preference", reserved => "reserved");
    row!(ibv_path_data; flags => "flags", reserved => "reserved", path => "path");
    s
}

// Compile-time checks of the layouts that C code depends on most.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<rdma_cm_id>() == 416);
    assert!(offset_of!(rdma_cm_id, route) == 32);
    assert!(offset_of!(rdma_cm_id, ps) == 344);
    assert!(offset_of!(rdma_cm_id, port_num) == 348);
    assert!(offset_of!(rdma_cm_id, event) == 352);
    assert!(offset_of!(rdma_cm_id, pd) == 400);
    assert!(offset_of!(rdma_cm_id, qp_type) == 408);
    assert!(size_of::<rdma_route>() == 312);
    assert!(size_of::<rdma_addr>() == 296);
    assert!(size_of::<rdma_event_channel>() == 4);
    assert!(size_of::<rdma_conn_param>() == 24);
    assert!(size_of::<rdma_ud_param>() == 56);
    assert!(size_of::<rdma_cm_event>() == 80);
    assert!(size_of::<rdma_addrinfo>() == 96);
    assert!(size_of::<sockaddr_ib>() == 48);
    assert!(size_of::<ibv_path_data>() == 72);
    assert!(size_of::<ibv_path_record>() == 64);
};

#[cfg(test)]
mod tests {
    #[test]
    fn layout_matches_checked_in_table() {
        let want = include_str!("../../abi/layout.txt");
        assert_eq!(super::layout_table(), want, "abi/layout.txt is out of date or a struct drifted");
    }
}
