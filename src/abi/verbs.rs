// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The libibverbs structures the library fills or reads itself (QP, SRQ
//! and QP attribute sets, the leading parts of `struct ibv_qp`/`ibv_pd`/
//! `ibv_cq`/`ibv_context` (with its operations)/`ibv_device`, the data
//! path's work requests and completions, `struct ibv_ece`) and the
//! constants it uses.
//!
//! The public types in [`crate::abi::cma`] keep these structures opaque
//! (the generated header must not define them); here they are mirrored
//! with the layout of `<infiniband/verbs.h>` on 64-bit Linux: the const
//! block checks sizes and offsets at compile time, and a unit test of
//! `crate::sys::verbs` compares them with what the C shim measures from
//! the installed header.

use crate::abi::cma::{ibv_context, ibv_cq, ibv_pd, ibv_qp, ibv_srq};
use std::ffi::{c_int, c_void};

/// `IBV_QPS_*`.
pub const IBV_QPS_INIT: u32 = 1;
pub const IBV_QPS_RTR: u32 = 2;
pub const IBV_QPS_RTS: u32 = 3;
pub const IBV_QPS_SQD: u32 = 4;
pub const IBV_QPS_ERR: u32 = 6;

/// `IBV_QP_*` attribute mask bits.
pub const IBV_QP_STATE: c_int = 1;
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
pub const IBV_QP_PORT: c_int = 1 << 5;
pub const IBV_QP_QKEY: c_int = 1 << 6;
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;

/// `IBV_QP_INIT_ATTR_*`.
pub const IBV_QP_INIT_ATTR_PD: u32 = 1;
pub const IBV_QP_INIT_ATTR_XRCD: u32 = 2;
pub const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 4;

/// `IBV_QP_CREATE_*` (`ibv_qp_init_attr_ex::create_flags`).
pub const IBV_QP_CREATE_BLOCK_SELF_MCAST_LB: u32 = 2;

/// `IBV_SRQ_INIT_ATTR_*` and `IBV_SRQT_*`.
pub const IBV_SRQ_INIT_ATTR_TYPE: u32 = 1;
pub const IBV_SRQ_INIT_ATTR_PD: u32 = 2;
pub const IBV_SRQ_INIT_ATTR_XRCD: u32 = 4;
pub const IBV_SRQ_INIT_ATTR_CQ: u32 = 8;
pub const IBV_SRQT_BASIC: u32 = 0;
pub const IBV_SRQT_XRC: u32 = 1;

/// `IBV_TRANSPORT_*`.
pub const IBV_TRANSPORT_IB: c_int = 0;
pub const IBV_TRANSPORT_IWARP: c_int = 1;

/// `IBV_LINK_LAYER_INFINIBAND`.
pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct QpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QpInitAttr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: QpCap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

/// `struct ibv_qp_init_attr_ex`.  Its first 60 bytes are the fields of a
/// [`QpInitAttr`] (upstream's `rdma_create_qp` copies them across too).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QpInitAttrEx {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: QpCap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct SrqAttr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SrqInitAttr {
    pub srq_context: *mut c_void,
    pub attr: SrqAttr,
}

/// `struct ibv_srq_init_attr_ex`; its first 24 bytes are a [`SrqInitAttr`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SrqInitAttrEx {
    pub srq_context: *mut c_void,
    pub attr: SrqAttr,
    pub comp_mask: u32,
    pub srq_type: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub cq: *mut ibv_cq,
    pub tm_max_num_tags: u32,
    pub tm_max_ops: u32,
}

// SAFETY: the attribute set holds libibverbs handles, usable from any
// thread; the CM keeps a copy (a passive endpoint's) behind a mutex.
unsafe impl Send for QpInitAttr {}

impl SrqInitAttrEx {
    /// All fields zero (no attributes, NULL handles).
    pub fn zeroed() -> SrqInitAttrEx {
        // SAFETY: integers and raw pointers: all-zero is valid.
        unsafe { std::mem::zeroed() }
    }
}

impl QpInitAttrEx {
    /// All fields zero (no attributes, NULL handles).
    pub fn zeroed() -> QpInitAttrEx {
        // SAFETY: integers and raw pointers: all-zero is valid.
        unsafe { std::mem::zeroed() }
    }

    /// The `ibv_qp_init_attr` part.
    pub fn base(&self) -> QpInitAttr {
        QpInitAttr { qp_context: self.qp_context, send_cq: self.send_cq, recv_cq: self.recv_cq, srq: self.srq, cap: self.cap, qp_type: self.qp_type, sq_sig_all: self.sq_sig_all }
    }
    /// Sets the `ibv_qp_init_attr` part.
    pub fn set_base(&mut self, b: &QpInitAttr) {
        self.qp_context = b.qp_context;
        self.send_cq = b.send_cq;
        self.recv_cq = b.recv_cq;
        self.srq = b.srq;
        self.cap = b.cap;
        self.qp_type = b.qp_type;
        self.sq_sig_all = b.sq_sig_all;
    }
}

/// The leading, stable part of `struct ibv_qp` (the rest is private to
/// libibverbs and never touched).
#[repr(C)]
pub struct QpHead {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: u32,
    pub qp_type: u32,
}

/// The leading part of `struct ibv_device`: its two operation pointers,
/// then its node and transport types.
#[repr(C)]
pub struct DeviceHead {
    pub ops: [*mut c_void; 2],
    pub node_type: c_int,
    pub transport_type: c_int,
}

/// The leading part of `struct ibv_context`: its device and its
/// operations.
#[repr(C)]
pub struct ContextHead {
    pub device: *mut DeviceHead,
    pub ops: ContextOps,
}

/// The leading part of `struct ibv_context_ops`, through `post_recv`: the
/// data-path operations that `<infiniband/verbs.h>` calls from its inline
/// `ibv_poll_cq`, `ibv_req_notify_cq`, `ibv_post_send` and
/// `ibv_post_recv`. libibverbs fills every one of them for every provider
/// (a provider without one gets a stub that fails), but they are read as
/// `Option` so that a NULL would be an error rather than a jump to 0.
#[repr(C)]
pub struct ContextOps {
    /// `_compat_query_device` through `_compat_create_cq`.
    pub before_poll_cq: [*mut c_void; 11],
    pub poll_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int, *mut IbvWc) -> c_int>,
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int>,
    /// `_compat_cq_event` through `_compat_destroy_qp`.
    pub before_post_send: [*mut c_void; 12],
    pub post_send: Option<unsafe extern "C" fn(*mut ibv_qp, *mut IbvSendWr, *mut *mut IbvSendWr) -> c_int>,
    pub post_recv: Option<unsafe extern "C" fn(*mut ibv_qp, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int>,
}

/// The leading part of `struct ibv_cq`.
#[repr(C)]
pub struct CqHead {
    pub context: *mut ibv_context,
}

/// `IBV_WC_WITH_IMM` (`ibv_wc::wc_flags`).
pub const IBV_WC_WITH_IMM: u32 = 1 << 1;

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct IbvWc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Immediate data in network order (with `IBV_WC_WITH_IMM`), or the
    /// invalidated rkey.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

impl IbvWc {
    /// A completion as a fake fabric reports it (unit tests), the
    /// immediate data in host order.
    pub fn new(wr_id: u64, status: u32, imm: Option<u32>) -> IbvWc {
        let wc_flags = if imm.is_some() { IBV_WC_WITH_IMM } else { 0 };
        IbvWc { wr_id, status, imm_data: imm.unwrap_or(0).to_be(), wc_flags, ..IbvWc::default() }
    }

    /// The immediate data in host order, if it carries any.
    #[inline]
    pub fn imm(&self) -> Option<u32> {
        if self.wc_flags & IBV_WC_WITH_IMM != 0 {
            Some(u32::from_be(self.imm_data))
        } else {
            None
        }
    }
}

/// `struct ibv_send_wr` with its `wr.rdma` member and
/// `qp_type.xrc.remote_srqn`; `wr_rest` is the rest of the `wr` union and
/// `tail` the padding and the bind/TSO union, none of which a provider
/// reads for the send, RDMA write and RDMA read opcodes posted through
/// it.
#[repr(C)]
pub struct IbvSendWr {
    pub wr_id: u64,
    pub next: *mut IbvSendWr,
    pub sg_list: *mut c_void,
    pub num_sge: c_int,
    pub opcode: c_int,
    pub send_flags: c_int,
    /// Network order.
    pub imm_data: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    /// The rest of the `wr` union (its `atomic` member is 32 bytes).
    pub wr_rest: [std::mem::MaybeUninit<u32>; 5],
    pub remote_srqn: u32,
    pub tail: [std::mem::MaybeUninit<u32>; 13],
}

/// `struct ibv_recv_wr`.
#[repr(C)]
pub struct IbvRecvWr {
    pub wr_id: u64,
    pub next: *mut IbvRecvWr,
    pub sg_list: *mut c_void,
    pub num_sge: c_int,
}

/// The leading part of `struct ibv_pd`.
#[repr(C)]
pub struct PdHead {
    pub context: *mut ibv_context,
}

/// `struct ibv_ah_attr` as raw bytes (32).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct AhAttrBytes {
    pub bytes: [u64; 4],
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct QpAttr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: u32,
    pub cap: QpCap,
    pub ah_attr: [u32; 8],
    pub alt_ah_attr: [u32; 8],
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
    pub rate_limit: u32,
    /// Tail padding of the C structure (144 bytes in all).
    pub reserved: u32,
}

/// `struct ibv_ece`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Ece {
    pub vendor_id: u32,
    pub options: u32,
    pub comp_mask: u32,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<QpInitAttr>() == 64);
    assert!(offset_of!(QpInitAttr, cap) == 32);
    assert!(offset_of!(QpInitAttr, qp_type) == 52);
    assert!(size_of::<QpInitAttrEx>() == 136);
    assert!(offset_of!(QpInitAttrEx, comp_mask) == 60);
    assert!(offset_of!(QpInitAttrEx, pd) == 64);
    assert!(offset_of!(QpInitAttrEx, xrcd) == 72);
    assert!(offset_of!(QpInitAttrEx, rwq_ind_tbl) == 88);
    assert!(offset_of!(QpInitAttrEx, source_qpn) == 120);
    assert!(offset_of!(QpInitAttrEx, send_ops_flags) == 128);
    assert!(size_of::<SrqInitAttr>() == 24);
    assert!(size_of::<SrqInitAttrEx>() == 64);
    assert!(offset_of!(SrqInitAttrEx, comp_mask) == 20);
    assert!(offset_of!(SrqInitAttrEx, pd) == 32);
    assert!(offset_of!(SrqInitAttrEx, cq) == 48);
    assert!(offset_of!(QpHead, pd) == 16);
    assert!(offset_of!(QpHead, srq) == 40);
    assert!(offset_of!(QpHead, qp_num) == 52);
    assert!(offset_of!(DeviceHead, transport_type) == 20);
    assert!(offset_of!(ContextHead, device) == 0);
    assert!(offset_of!(ContextHead, ops) + offset_of!(ContextOps, poll_cq) == 96);
    assert!(offset_of!(ContextHead, ops) + offset_of!(ContextOps, req_notify_cq) == 104);
    assert!(offset_of!(ContextHead, ops) + offset_of!(ContextOps, post_send) == 208);
    assert!(offset_of!(ContextHead, ops) + offset_of!(ContextOps, post_recv) == 216);
    assert!(offset_of!(CqHead, context) == 0);
    assert!(size_of::<IbvWc>() == 48);
    assert!(offset_of!(IbvWc, imm_data) == 24);
    assert!(offset_of!(IbvWc, wc_flags) == 36);
    assert!(offset_of!(IbvWc, slid) == 42);
    assert!(size_of::<IbvSendWr>() == 128);
    assert!(offset_of!(IbvSendWr, imm_data) == 36);
    assert!(offset_of!(IbvSendWr, remote_addr) == 40);
    assert!(offset_of!(IbvSendWr, rkey) == 48);
    assert!(offset_of!(IbvSendWr, remote_srqn) == 72);
    assert!(size_of::<IbvRecvWr>() == 32);
    assert!(offset_of!(IbvRecvWr, num_sge) == 24);
    assert!(size_of::<QpAttr>() == 144);
    assert!(offset_of!(QpAttr, cap) == 36);
    assert!(offset_of!(QpAttr, ah_attr) == 56);
    assert!(offset_of!(QpAttr, pkey_index) == 120);
    assert!(offset_of!(QpAttr, max_rd_atomic) == 126);
    assert!(offset_of!(QpAttr, max_dest_rd_atomic) == 127);
    assert!(offset_of!(QpAttr, port_num) == 129);
    assert!(offset_of!(QpAttr, rate_limit) == 136);
    assert!(size_of::<Ece>() == 12);
};

