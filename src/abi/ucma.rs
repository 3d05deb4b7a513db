// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Raw kernel ABI: the ucma command and event structures written to and
//! read from `/dev/infiniband/rdma_cm` (see the kernel's
//! `include/uapi/rdma/rdma_user_cm.h`).  Nothing outside the kernel
//! protocol layer (`core::cm::proto`) uses these types directly.
//!
//! Every command is a [`CmdHdr`] followed by the command body; commands
//! that return data carry a `response` field holding the user address the
//! kernel writes the response structure to.  The layouts are facts of the
//! kernel ABI; sizes are asserted at compile time below.

#![allow(missing_docs)]

/// Lowest and highest ucma ABI version this library speaks.
pub const UCMA_MIN_ABI: i32 = 3;
pub const UCMA_MAX_ABI: i32 = 4;

/// Command numbers (`RDMA_USER_CM_CMD_*`).
pub mod cmd {
    pub const CREATE_ID: u32 = 0;
    pub const DESTROY_ID: u32 = 1;
    pub const BIND_IP: u32 = 2;
    pub const RESOLVE_IP: u32 = 3;
    pub const RESOLVE_ROUTE: u32 = 4;
    pub const QUERY_ROUTE: u32 = 5;
    pub const CONNECT: u32 = 6;
    pub const LISTEN: u32 = 7;
    pub const ACCEPT: u32 = 8;
    pub const REJECT: u32 = 9;
    pub const DISCONNECT: u32 = 10;
    pub const INIT_QP_ATTR: u32 = 11;
    pub const GET_EVENT: u32 = 12;
    pub const GET_OPTION: u32 = 13;
    pub const SET_OPTION: u32 = 14;
    pub const NOTIFY: u32 = 15;
    pub const JOIN_IP_MCAST: u32 = 16;
    pub const LEAVE_MCAST: u32 = 17;
    pub const MIGRATE_ID: u32 = 18;
    pub const QUERY: u32 = 19;
    pub const BIND: u32 = 20;
    pub const RESOLVE_ADDR: u32 = 21;
    pub const JOIN_MCAST: u32 = 22;
    pub const RESOLVE_IB_SERVICE: u32 = 23;
    pub const WRITE_CM_EVENT: u32 = 24;
}

/// Options of the QUERY command.
pub const QUERY_ADDR: u32 = 0;
pub const QUERY_PATH: u32 = 1;
pub const QUERY_GID: u32 = 2;
pub const QUERY_IB_SERVICE: u32 = 3;

/// `rdma_set_option` levels and names.
pub const RDMA_OPTION_ID: i32 = 0;
pub const RDMA_OPTION_IB: i32 = 1;
pub const RDMA_OPTION_ID_TOS: i32 = 0;
pub const RDMA_OPTION_ID_REUSEADDR: i32 = 1;
pub const RDMA_OPTION_ID_AFONLY: i32 = 2;
pub const RDMA_OPTION_ID_ACK_TIMEOUT: i32 = 3;
pub const RDMA_OPTION_IB_PATH: i32 = 1;

pub const RDMA_MAX_PRIVATE_DATA: usize = 256;

/// `struct rdma_ucm_cmd_hdr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CmdHdr {
    pub cmd: u32,
    /// Size of the body that follows the header.
    pub in_: u16,
    /// Size of the response buffer (0 if none).
    pub out: u16,
}

/// A header and a command body, written to the device in one `write()`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Cmd<T: Copy> {
    pub hdr: CmdHdr,
    pub body: T,
}

/// `struct __kernel_sockaddr_storage`: 128 bytes, 8-byte aligned.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct KSockaddrStorage {
    pub bytes: [u8; 128],
}
impl Default for KSockaddrStorage {
    fn default() -> Self {
        KSockaddrStorage { bytes: [0; 128] }
    }
}

/// `struct sockaddr_in6` as raw bytes (28 bytes, 4-byte aligned).
#[repr(C, align(4))]
#[derive(Clone, Copy, Default)]
pub struct KSockaddrIn6 {
    pub bytes: [u8; 28],
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct CreateId {
    pub uid: u64,
    pub response: u64,
    pub ps: u16,
    pub qp_type: u8,
    pub reserved: [u8; 5],
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct CreateIdResp {
    pub id: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct DestroyId {
    pub response: u64,
    pub id: u32,
    pub reserved: u32,
}
/// Response of DESTROY_ID and MIGRATE_ID.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct EventsReportedResp {
    pub events_reported: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct BindIp {
    pub response: u64,
    pub addr: KSockaddrIn6,
    pub id: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Bind {
    pub id: u32,
    pub addr_size: u16,
    pub reserved: u16,
    pub addr: KSockaddrStorage,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ResolveIp {
    pub src_addr: KSockaddrIn6,
    pub dst_addr: KSockaddrIn6,
    pub id: u32,
    pub timeout_ms: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ResolveAddr {
    pub id: u32,
    pub timeout_ms: u32,
    pub src_size: u16,
    pub dst_size: u16,
    pub reserved: u32,
    pub src_addr: KSockaddrStorage,
    pub dst_addr: KSockaddrStorage,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ResolveRoute {
    pub id: u32,
    pub timeout_ms: u32,
}

/// QUERY and QUERY_ROUTE.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Query {
    pub response: u64,
    pub id: u32,
    pub option: u32,
}

/// `struct ib_user_path_rec` (kernel SA path record, as the legacy
/// QUERY_ROUTE returns it).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct UserPathRec {
    pub dgid: [u8; 16],
    pub sgid: [u8; 16],
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: u32,
    pub flow_label: u32,
    pub reversible: u32,
    pub mtu: u32,
    pub pkey: u16,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub numb_path: u8,
    pub sl: u8,
    pub mtu_selector: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct QueryRouteResp {
    pub node_guid: u64,
    pub ib_route: [UserPathRec; 2],
    pub src_addr: KSockaddrIn6,
    pub dst_addr: KSockaddrIn6,
    pub num_paths: u32,
    pub port_num: u8,
    pub reserved: [u8; 3],
    pub ibdev_index: u32,
    pub reserved1: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct QueryAddrResp {
    pub node_guid: u64,
    pub port_num: u8,
    pub reserved: u8,
    pub pkey: u16,
    pub src_size: u16,
    pub dst_size: u16,
    pub src_addr: KSockaddrStorage,
    pub dst_addr: KSockaddrStorage,
    pub ibdev_index: u32,
    pub reserved1: u32,
}

/// [`QueryAddrResp::ibdev_index`]'s value for "not reported" (a kernel
/// older than the field leaves it as the caller set it).
pub const INVALID_IBDEV_INDEX: u32 = u32::MAX;

impl QueryAddrResp {
    /// QUERY ADDR's source address at its reported size (at most the
    /// storage's 128 bytes).
    #[inline]
    pub fn src(&self) -> &[u8] {
        &self.src_addr.bytes[..usize::from(self.src_size).min(128)]
    }

    /// QUERY ADDR's destination address at its reported size.
    #[inline]
    pub fn dst(&self) -> &[u8] {
        &self.dst_addr.bytes[..usize::from(self.dst_size).min(128)]
    }

    /// QUERY GID's answer: the GIDs (`sib_addr`) of the two addresses, read
    /// as `sockaddr_ib` images whatever size the kernel reports.
    #[inline]
    pub fn gids(&self) -> ([u8; 16], [u8; 16]) {
        const AT: usize = std::mem::offset_of!(crate::abi::cma::sockaddr_ib, sib_addr);
        let gid = |s: &KSockaddrStorage| -> [u8; 16] { std::array::from_fn(|i| s.bytes[AT + i]) };
        (gid(&self.src_addr), gid(&self.dst_addr))
    }

    /// The device's kernel index, `None` when not reported.
    #[inline]
    pub fn device_index(&self) -> Option<u32> {
        (self.ibdev_index != INVALID_IBDEV_INDEX).then_some(self.ibdev_index)
    }
}

/// `struct ib_path_rec_data`: flags and a 64-byte wire path record.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct PathRecData {
    pub flags: u32,
    pub reserved: u32,
    pub path_rec: [u32; 16],
}

/// Header of the QUERY PATH response; `num_paths` [`PathRecData`] follow.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct QueryPathRespHdr {
    pub num_paths: u32,
    pub reserved: u32,
}

/// Most path records the library asks for.
pub const MAX_PATHS: usize = 6;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct QueryPathResp {
    pub hdr: QueryPathRespHdr,
    pub path_data: [PathRecData; MAX_PATHS],
}

/// `struct rdma_ucm_conn_param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ConnParam {
    pub qp_num: u32,
    pub qkey: u32,
    pub private_data: [u8; RDMA_MAX_PRIVATE_DATA],
    pub private_data_len: u8,
    pub srq: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub valid: u8,
}
impl Default for ConnParam {
    fn default() -> Self {
        // SAFETY: plain integers and byte arrays; all-zero is valid.
        unsafe { std::mem::zeroed() }
    }
}

/// `struct ib_uverbs_global_route`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct UverbsGlobalRoute {
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reserved: u8,
}

/// `struct ib_uverbs_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct UverbsAhAttr {
    pub grh: UverbsGlobalRoute,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
    pub reserved: u8,
}

/// `struct rdma_ucm_ud_param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UdParam {
    pub qp_num: u32,
    pub qkey: u32,
    pub ah_attr: UverbsAhAttr,
    pub private_data: [u8; RDMA_MAX_PRIVATE_DATA],
    pub private_data_len: u8,
    pub reserved: [u8; 7],
}
impl Default for UdParam {
    fn default() -> Self {
        // SAFETY: plain integers and byte arrays; all-zero is valid.
        unsafe { std::mem::zeroed() }
    }
}

/// The parameter union of an event (4-byte aligned: the kernel packs it
/// right after three u32 fields).
#[repr(C)]
#[derive(Clone, Copy)]
pub union EventParam {
    pub conn: ConnParam,
    pub ud: UdParam,
    pub arg32: [u32; 2],
}

/// `struct rdma_ucm_ece`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Ece {
    pub vendor_id: u32,
    pub attr_mod: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct GetEvent {
    pub response: u64,
}

/// `struct rdma_ucm_event_resp`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct EventResp {
    pub uid: u64,
    pub id: u32,
    pub event: u32,
    pub status: u32,
    pub param: EventParam,
    pub reserved: u32,
    pub ece: Ece,
}
impl Default for EventResp {
    fn default() -> Self {
        // SAFETY: plain integers and byte arrays; all-zero is valid.
        unsafe { std::mem::zeroed() }
    }
}

impl EventResp {
    /// The parameters as a connection's (every member of the union is plain
    /// data, so any of them may be read whatever the kernel wrote).
    pub fn conn(&self) -> &ConnParam {
        // SAFETY: ConnParam is integers and a byte array; every bit pattern
        // is a valid value.
        unsafe { &self.param.conn }
    }
    /// The parameters as a UD id's.
    pub fn ud(&self) -> &UdParam {
        // SAFETY: UdParam is integers and byte arrays (see `conn`).
        unsafe { &self.param.ud }
    }
    /// The 64-bit argument of a user (or internal) event.
    pub fn arg(&self) -> u64 {
        // SAFETY: two u32 are valid for every bit pattern.
        let a = unsafe { self.param.arg32 };
        (a[0] as u64) | ((a[1] as u64) << 32)
    }
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct SetOption {
    pub optval: u64,
    pub id: u32,
    pub level: u32,
    pub optname: u32,
    pub optlen: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct MigrateId {
    pub response: u64,
    pub id: u32,
    pub fd: u32,
}

/// The parameter union of WRITE_CM_EVENT (8-byte aligned).
#[repr(C)]
#[derive(Clone, Copy)]
pub union WriteEventParam {
    pub conn: ConnParam,
    pub ud: UdParam,
    pub arg: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct WriteCmEvent {
    pub id: u32,
    pub reserved: u32,
    pub event: u32,
    pub status: u32,
    pub param: WriteEventParam,
}
impl Default for WriteCmEvent {
    fn default() -> Self {
        // SAFETY: plain integers and byte arrays; all-zero is valid.
        unsafe { std::mem::zeroed() }
    }
}

// The kernel ABI, checked.
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<CmdHdr>() == 8);
    assert!(size_of::<CreateId>() == 24);
    assert!(size_of::<DestroyId>() == 16);
    assert!(size_of::<BindIp>() == 40);
    assert!(offset_of!(BindIp, id) == 36);
    assert!(size_of::<Bind>() == 136);
    assert!(offset_of!(Bind, addr) == 8);
    assert!(size_of::<ResolveIp>() == 64);
    assert!(size_of::<ResolveAddr>() == 272);
    assert!(offset_of!(ResolveAddr, src_addr) == 16);
    assert!(size_of::<ResolveRoute>() == 8);
    assert!(size_of::<Query>() == 16);
    assert!(size_of::<UserPathRec>() == 64);
    assert!(size_of::<QueryRouteResp>() == 208);
    assert!(offset_of!(QueryRouteResp, num_paths) == 192);
    assert!(offset_of!(QueryRouteResp, ibdev_index) == 200);
    assert!(size_of::<QueryAddrResp>() == 280);
    assert!(offset_of!(QueryAddrResp, src_addr) == 16);
    assert!(offset_of!(QueryAddrResp, ibdev_index) == 272);
    assert!(size_of::<PathRecData>() == 72);
    assert!(size_of::<ConnParam>() == 272);
    assert!(size_of::<UverbsAhAttr>() == 32);
    assert!(size_of::<UdParam>() == 304);
    assert!(align_of::<EventParam>() == 4);
    assert!(size_of::<EventResp>() == 336);
    assert!(offset_of!(EventResp, param) == 20);
    assert!(offset_of!(EventResp, ece) == 328);
    assert!(size_of::<SetOption>() == 24);
    assert!(size_of::<MigrateId>() == 16);
    assert!(size_of::<WriteCmEvent>() == 320);
    assert!(offset_of!(WriteCmEvent, param) == 16);
    assert!(size_of::<Cmd<ResolveAddr>>() == 280);
};

// --- commands of the connection, multicast and addrinfo code (later work) --

/// CONNECT.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Connect {
    pub conn_param: ConnParam,
    pub id: u32,
    pub reserved: u32,
    pub ece: Ece,
}

/// LISTEN.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Listen {
    pub id: u32,
    pub backlog: u32,
}

/// ACCEPT.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Accept {
    pub uid: u64,
    pub conn_param: ConnParam,
    pub id: u32,
    pub reserved: u32,
    pub ece: Ece,
}

/// REJECT.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Reject {
    pub id: u32,
    pub private_data_len: u8,
    pub reason: u8,
    pub reserved: [u8; 2],
    pub private_data: [u8; RDMA_MAX_PRIVATE_DATA],
}
impl Default for Reject {
    fn default() -> Self {
        // SAFETY: plain integers and byte arrays; all-zero is valid.
        unsafe { std::mem::zeroed() }
    }
}

/// DISCONNECT.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Disconnect {
    pub id: u32,
}

/// INIT_QP_ATTR; the response is a [`UverbsQpAttr`].
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct InitQpAttr {
    pub response: u64,
    pub id: u32,
    pub qp_state: u32,
}

/// `struct ib_uverbs_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct UverbsQpAttr {
    pub qp_attr_mask: u32,
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub ah_attr: UverbsAhAttr,
    pub alt_ah_attr: UverbsAhAttr,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub reserved: [u8; 5],
}

/// NOTIFY.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Notify {
    pub id: u32,
    pub event: u32,
}

/// JOIN_IP_MCAST (legacy family); the response is a [`CreateIdResp`].
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct JoinIpMcast {
    pub response: u64,
    pub uid: u64,
    pub addr: KSockaddrIn6,
    pub id: u32,
}

/// JOIN_MCAST (AF_IB-capable family); the response is a [`CreateIdResp`].
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct JoinMcast {
    pub response: u64,
    pub uid: u64,
    pub id: u32,
    pub addr_size: u16,
    pub join_flags: u16,
    pub addr: KSockaddrStorage,
}

/// `RDMA_USER_CM_IB_SERVICE_FLAG_*`.
pub const IB_SERVICE_FLAG_ID: u32 = 1;
pub const IB_SERVICE_FLAG_NAME: u32 = 2;

/// `struct rdma_ucm_ib_service`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbService {
    pub service_id: u64,
    pub service_name: [u8; 64],
    pub flags: u32,
    pub reserved: u32,
}
impl Default for IbService {
    fn default() -> Self {
        // SAFETY: plain integers and byte arrays; all-zero is valid.
        unsafe { std::mem::zeroed() }
    }
}

/// `struct ib_user_service_rec`: one service record of a QUERY with option
/// IB_SERVICE (multi-byte fields big-endian).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ServiceRec {
    pub id: u64,
    pub gid: [u8; 16],
    pub pkey: u16,
    pub reserved: [u8; 2],
    pub lease: u32,
    pub key: [u8; 16],
    pub name: [u8; 64],
    pub data_8: [u8; 16],
    pub data_16: [u16; 8],
    pub data_32: [u32; 4],
    pub data_64: [u64; 2],
}

/// Header of `struct rdma_ucm_query_ib_service_resp`; the records follow.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct QueryIbServiceResp {
    pub num_service_recs: u32,
    pub reserved: u32,
}

/// RESOLVE_IB_SERVICE.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ResolveIbService {
    pub id: u32,
    pub reserved: u32,
    pub ibs: IbService,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<Connect>() == 288);
    assert!(offset_of!(Connect, id) == 272);
    assert!(size_of::<Listen>() == 8);
    assert!(size_of::<Accept>() == 296);
    assert!(offset_of!(Accept, id) == 280);
    assert!(size_of::<Reject>() == 264);
    assert!(size_of::<Disconnect>() == 4);
    assert!(size_of::<InitQpAttr>() == 16);
    assert!(size_of::<UverbsQpAttr>() == 144);
    assert!(offset_of!(UverbsQpAttr, max_send_wr) == 104);
    assert!(size_of::<Notify>() == 8);
    assert!(size_of::<JoinIpMcast>() == 48);
    assert!(offset_of!(JoinIpMcast, id) == 44);
    assert!(size_of::<JoinMcast>() == 152);
    assert!(offset_of!(JoinMcast, addr) == 24);
    assert!(size_of::<IbService>() == 80);
    assert!(size_of::<ServiceRec>() == 176);
    assert!(offset_of!(ServiceRec, lease) == 28);
    assert!(size_of::<QueryIbServiceResp>() == 8);
    assert!(size_of::<ResolveIbService>() == 88);
};
