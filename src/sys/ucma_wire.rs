// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The ucma protocol's bytes: every command this library sends encoded and
//! every answer decoded, as pure functions (unit-tested in `ucma_tests.rs`);
//! the transport and the [`Ucma`](super::Ucma) interface are in `ucma.rs`.

use super::{AddrInfo, RouteInfo, SockAddr, INVALID_INDEX};
use crate::abi::sockaddr::copy_addr;
use crate::abi::ucma::{self as kabi, cmd, Cmd, CmdHdr};
use std::os::fd::RawFd;
// ---------------------------------------------------------------------------
// Encoding (pure functions, unit-tested)
// ---------------------------------------------------------------------------

/// Builds a command: header with `in` = body size and `out` = `out`.
pub fn command<T: Copy>(op: u32, out: usize, body: T) -> Cmd<T> {
    Cmd { hdr: CmdHdr { cmd: op, in_: std::mem::size_of::<T>() as u16, out: out as u16 }, body }
}

/// The bytes of a command as written to the device.
pub fn bytes_of<T: Copy>(c: &Cmd<T>) -> &[u8] {
    // SAFETY: Cmd<T> is repr(C) plain data with no padding that matters to
    // the kernel (every kabi body is fully laid out); reading it as bytes
    // stays within the value.
    unsafe { std::slice::from_raw_parts(c as *const Cmd<T> as *const u8, std::mem::size_of::<Cmd<T>>()) }
}

fn storage_of(a: &SockAddr) -> kabi::KSockaddrStorage {
    kabi::KSockaddrStorage { bytes: *a.storage() }
}

/// The legacy commands' `sockaddr_in6` field: the address's first 28 bytes.
fn in6_of(a: &SockAddr) -> kabi::KSockaddrIn6 {
    let mut s = kabi::KSockaddrIn6::default();
    s.bytes.copy_from_slice(&a.storage()[..28]);
    s
}

pub fn enc_create_id(uid: u64, resp: u64, ps: u16, qp_type: u8) -> Cmd<kabi::CreateId> {
    command(cmd::CREATE_ID, std::mem::size_of::<kabi::CreateIdResp>(), kabi::CreateId { uid, response: resp, ps, qp_type, reserved: [0; 5] })
}

pub fn enc_destroy_id(id: u32, resp: u64) -> Cmd<kabi::DestroyId> {
    command(cmd::DESTROY_ID, 4, kabi::DestroyId { response: resp, id, reserved: 0 })
}

/// BIND of an address's bytes (at most 128 taken), built in place: the
/// address copied once, zero past it.
#[inline]
pub fn enc_bind(id: u32, addr: &[u8]) -> Cmd<kabi::Bind> {
    let mut c = command(cmd::BIND, 0, kabi::Bind::default());
    fill_bind(&mut c.body, id, addr);
    c
}

/// [`enc_bind`]'s body, filled in a zeroed command where it is written
/// (no copy of its 128-byte address field).
#[inline(always)]
pub(super) fn fill_bind(b: &mut kabi::Bind, id: u32, addr: &[u8]) {
    b.id = id;
    b.addr_size = copy_addr(&mut b.addr.bytes, addr) as u16;
}

/// BIND_IP of an address's bytes: its first 28 (a `sockaddr_in6`), zero
/// past them.
#[inline]
pub fn enc_bind_ip(id: u32, addr: &[u8]) -> Cmd<kabi::BindIp> {
    let mut c = command(cmd::BIND_IP, 0, kabi::BindIp::default());
    c.body.id = id;
    copy_addr(&mut c.body.addr.bytes, addr);
    c
}

/// RESOLVE_ADDR of the addresses' bytes (an empty source: none), built
/// in place: each address copied once, zero past it.
#[inline]
pub fn enc_resolve_addr(id: u32, src: &[u8], dst: &[u8], timeout_ms: u32) -> Cmd<kabi::ResolveAddr> {
    let mut c = command(cmd::RESOLVE_ADDR, 0, kabi::ResolveAddr::default());
    fill_resolve_addr(&mut c.body, id, src, dst, timeout_ms);
    c
}

/// [`enc_resolve_addr`]'s body, filled in a zeroed command where it is
/// written (no copy of its two 128-byte address fields).
#[inline(always)]
pub(super) fn fill_resolve_addr(b: &mut kabi::ResolveAddr, id: u32, src: &[u8], dst: &[u8], timeout_ms: u32) {
    b.id = id;
    b.timeout_ms = timeout_ms;
    // (no source: nothing to copy, and no call of memcpy for nothing)
    if !src.is_empty() {
        b.src_size = copy_addr(&mut b.src_addr.bytes, src) as u16;
    }
    b.dst_size = copy_addr(&mut b.dst_addr.bytes, dst) as u16;
}

/// RESOLVE_IP (the legacy command) of the addresses' bytes: their first
/// 28 (a `sockaddr_in6`), zero past them; an empty source: none.
#[inline]
pub fn enc_resolve_ip(id: u32, src: &[u8], dst: &[u8], timeout_ms: u32) -> Cmd<kabi::ResolveIp> {
    let mut c = command(cmd::RESOLVE_IP, 0, kabi::ResolveIp::default());
    let b = &mut c.body;
    b.id = id;
    b.timeout_ms = timeout_ms;
    if !src.is_empty() {
        copy_addr(&mut b.src_addr.bytes, src);
    }
    copy_addr(&mut b.dst_addr.bytes, dst);
    c
}

pub fn enc_resolve_route(id: u32, timeout_ms: u32) -> Cmd<kabi::ResolveRoute> {
    command(cmd::RESOLVE_ROUTE, 0, kabi::ResolveRoute { id, timeout_ms })
}

pub fn enc_query(op: u32, id: u32, option: u32, resp: u64, out: usize) -> Cmd<kabi::Query> {
    command(op, out, kabi::Query { response: resp, id, option })
}

pub fn enc_get_event(resp: u64) -> Cmd<kabi::GetEvent> {
    command(cmd::GET_EVENT, std::mem::size_of::<kabi::EventResp>(), kabi::GetEvent { response: resp })
}

pub fn enc_set_option(id: u32, level: u32, optname: u32, optval: u64, optlen: u32) -> Cmd<kabi::SetOption> {
    command(cmd::SET_OPTION, 0, kabi::SetOption { optval, id, level, optname, optlen })
}

pub fn enc_migrate_id(id: u32, old_fd: RawFd, resp: u64) -> Cmd<kabi::MigrateId> {
    command(cmd::MIGRATE_ID, 4, kabi::MigrateId { response: resp, id, fd: old_fd as u32 })
}

pub fn enc_write_cm_event(id: u32, event: u32, status: i32, arg: u64) -> Cmd<kabi::WriteCmEvent> {
    let mut body = kabi::WriteCmEvent { id, event, status: status as u32, ..Default::default() };
    body.param.arg = arg;
    command(cmd::WRITE_CM_EVENT, 0, body)
}

pub fn enc_connect(id: u32, conn: &kabi::ConnParam, ece: kabi::Ece) -> Cmd<kabi::Connect> {
    let mut c = connect_command(id);
    c.body.conn_param = *conn;
    c.body.ece = ece;
    c
}

/// A CONNECT command for id `id`, every other field zero: the caller
/// fills its parameters where they are (no copy of them).
#[inline(always)]
pub fn connect_command(id: u32) -> Cmd<kabi::Connect> {
    let mut c = command(cmd::CONNECT, 0, kabi::Connect::default());
    c.body.id = id;
    c
}

pub fn enc_listen(id: u32, backlog: u32) -> Cmd<kabi::Listen> {
    command(cmd::LISTEN, 0, kabi::Listen { id, backlog })
}

pub fn enc_accept(id: u32, uid: u64, conn: &kabi::ConnParam, ece: kabi::Ece) -> Cmd<kabi::Accept> {
    let mut c = accept_command(id, uid);
    c.body.conn_param = *conn;
    c.body.ece = ece;
    c
}

/// An ACCEPT command for id `id` (`uid`: the library's handle of it),
/// every other field zero: the caller fills its parameters where they are.
#[inline(always)]
pub fn accept_command(id: u32, uid: u64) -> Cmd<kabi::Accept> {
    let mut c = command(cmd::ACCEPT, 0, kabi::Accept::default());
    c.body.id = id;
    c.body.uid = uid;
    c
}

pub fn enc_reject(id: u32, reason: u8, private_data: &[u8]) -> Cmd<kabi::Reject> {
    // The length travels in a u8: at most 255 bytes.
    let n = private_data.len().min(u8::MAX as usize);
    let mut body = kabi::Reject { id, private_data_len: n as u8, reason, ..Default::default() };
    body.private_data[..n].copy_from_slice(&private_data[..n]);
    command(cmd::REJECT, 0, body)
}

pub fn enc_disconnect(id: u32) -> Cmd<kabi::Disconnect> {
    command(cmd::DISCONNECT, 0, kabi::Disconnect { id })
}

pub fn enc_init_qp_attr(id: u32, qp_state: u32, resp: u64) -> Cmd<kabi::InitQpAttr> {
    command(cmd::INIT_QP_ATTR, std::mem::size_of::<kabi::UverbsQpAttr>(), kabi::InitQpAttr { response: resp, id, qp_state })
}

pub fn enc_notify(id: u32, event: u32) -> Cmd<kabi::Notify> {
    command(cmd::NOTIFY, 0, kabi::Notify { id, event })
}

pub fn enc_join_mcast(id: u32, uid: u64, addr: &SockAddr, join_flags: u16, resp: u64) -> Cmd<kabi::JoinMcast> {
    command(
        cmd::JOIN_MCAST,
        std::mem::size_of::<kabi::CreateIdResp>(),
        kabi::JoinMcast { response: resp, uid, id, addr_size: addr.len() as u16, join_flags, addr: storage_of(addr) },
    )
}

pub fn enc_join_ip_mcast(id: u32, uid: u64, addr: &SockAddr, resp: u64) -> Cmd<kabi::JoinIpMcast> {
    command(cmd::JOIN_IP_MCAST, std::mem::size_of::<kabi::CreateIdResp>(), kabi::JoinIpMcast { response: resp, uid, addr: in6_of(addr), id })
}

pub fn enc_leave_mcast(mc: u32, resp: u64) -> Cmd<kabi::DestroyId> {
    command(cmd::LEAVE_MCAST, 4, kabi::DestroyId { response: resp, id: mc, reserved: 0 })
}

pub fn enc_resolve_ib_service(id: u32, ibs: &kabi::IbService) -> Cmd<kabi::ResolveIbService> {
    command(cmd::RESOLVE_IB_SERVICE, 0, kabi::ResolveIbService { id, reserved: 0, ibs: *ibs })
}

// ---------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------

fn index_of(v: u32) -> Option<u32> {
    (v != INVALID_INDEX).then_some(v)
}

pub fn dec_addr(r: &kabi::QueryAddrResp) -> AddrInfo {
    AddrInfo {
        node_guid: r.node_guid,
        port_num: r.port_num,
        pkey: r.pkey,
        // The reported sizes, at most the storage's 128 bytes.
        src: SockAddr::from_prefix(r.src()),
        dst: SockAddr::from_prefix(r.dst()),
        ibdev_index: r.device_index(),
    }
}

/// The QUERY ADDR / QUERY GID answer that [`dec_addr`] reads as `a` (the
/// default [`Ucma::query_into`] of test doubles).
pub fn enc_addr_resp(a: &AddrInfo) -> kabi::QueryAddrResp {
    let storage = |s: &SockAddr| kabi::KSockaddrStorage { bytes: *s.storage() };
    kabi::QueryAddrResp {
        node_guid: a.node_guid,
        port_num: a.port_num,
        pkey: a.pkey,
        src_size: a.src.len() as u16,
        dst_size: a.dst.len() as u16,
        src_addr: storage(&a.src),
        dst_addr: storage(&a.dst),
        ibdev_index: a.ibdev_index.unwrap_or(INVALID_INDEX),
        ..Default::default()
    }
}

/// QUERY GID's answer: both addresses are `sockaddr_ib` images, read as
/// such whatever size the kernel reports (as upstream reads them).
pub fn dec_gid(r: &kabi::QueryAddrResp) -> AddrInfo {
    const SIB: usize = std::mem::size_of::<crate::abi::cma::sockaddr_ib>();
    AddrInfo { src: SockAddr::from_prefix(&r.src_addr.bytes[..SIB]), dst: SockAddr::from_prefix(&r.dst_addr.bytes[..SIB]), ..dec_addr(r) }
}

pub fn dec_route(r: &kabi::QueryRouteResp) -> RouteInfo {
    RouteInfo {
        node_guid: r.node_guid,
        paths: r.ib_route,
        num_paths: r.num_paths.min(2),
        src: SockAddr::from_prefix(&r.src_addr.bytes),
        dst: SockAddr::from_prefix(&r.dst_addr.bytes),
        port_num: r.port_num,
        ibdev_index: index_of(r.ibdev_index),
    }
}

pub fn dec_paths(r: &kabi::QueryPathResp) -> Vec<crate::abi::cma::ibv_path_data> {
    let n = (r.hdr.num_paths as usize).min(kabi::MAX_PATHS);
    r.path_data[..n]
        .iter()
        .map(|p| {
            // SAFETY: PathRecData is 72 bytes of plain data with the same
            // layout as struct ibv_path_data (flags, reserved, 64-byte record).
            unsafe { std::mem::transmute::<kabi::PathRecData, crate::abi::cma::ibv_path_data>(*p) }
        })
        .collect()
}

/// Converts a legacy kernel path record to the library's `ibv_sa_path_rec`
/// (field by field, as libibverbs' marshalling does).
pub fn path_from_kern(k: &kabi::UserPathRec) -> crate::abi::cma::ibv_sa_path_rec {
    use crate::abi::cma::{ibv_gid, ibv_sa_path_rec};
    ibv_sa_path_rec {
        dgid: ibv_gid { raw: k.dgid },
        sgid: ibv_gid { raw: k.sgid },
        dlid: k.dlid,
        slid: k.slid,
        raw_traffic: k.raw_traffic as i32,
        flow_label: k.flow_label,
        hop_limit: k.hop_limit,
        traffic_class: k.traffic_class,
        reversible: k.reversible as i32,
        numb_path: k.numb_path,
        pkey: k.pkey,
        sl: k.sl,
        mtu_selector: k.mtu_selector,
        mtu: k.mtu as u8,
        rate_selector: k.rate_selector,
        rate: k.rate,
        packet_life_time_selector: k.packet_life_time_selector,
        packet_life_time: k.packet_life_time,
        preference: k.preference,
    }
}

/// Converts a wire path record (QUERY PATH) to an `ibv_sa_path_rec`.
pub fn path_from_data(d: &crate::abi::cma::ibv_path_data) -> crate::abi::cma::ibv_sa_path_rec {
    use crate::abi::cma::ibv_sa_path_rec;
    let p = &d.path;
    let fl_hop = u32::from_be(p.flowlabel_hoplimit);
    ibv_sa_path_rec {
        dgid: p.dgid,
        sgid: p.sgid,
        dlid: p.dlid,
        slid: p.slid,
        raw_traffic: 0,
        flow_label: (fl_hop >> 8).to_be(),
        hop_limit: fl_hop as u8,
        traffic_class: p.tclass,
        reversible: (p.reversible_numpath >> 7) as i32,
        numb_path: 1,
        pkey: p.pkey,
        sl: (u16::from_be(p.qosclass_sl) & 0xF) as u8,
        mtu_selector: 2,
        mtu: p.mtu & 0x1F,
        rate_selector: 2,
        rate: p.rate & 0x1F,
        packet_life_time_selector: 2,
        packet_life_time: p.packetlifetime & 0x1F,
        preference: d.flags as u8,
    }
}
