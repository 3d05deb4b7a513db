// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The values that cross the layers: connection parameters
//! ([`ConnParam`]), the capacities of a QP ([`QpCaps`]) and the remote end
//! of a UD exchange ([`UdParam`]). Each is defined once, here: the
//! connection manager takes and reports them, rsockets and the public Rust
//! API (which re-exports them as `rdmacm::ConnParam`, `rdmacm::QpCaps`,
//! `rdmacm::UdParam`) pass them on, and the C API makes a [`ConnParam`]
//! from a caller's `struct rdma_conn_param`.
//!
//! The `#[repr(C)]` structures C and the kernel exchange stay in `abi`;
//! each conversion between them and these values is written once:
//! `struct rdma_conn_param` to [`ConnParam`] in `cma::conn`
//! (`conn_param_from_c`) and back (`ConnArgs::values`: `connect` and
//! `accept` read the values of a `struct rdma_conn_param`, the C caller's
//! where it is, with its private data borrowed apart,
//! `cma::conn::ConnArgs`), those values to the kernel's in `cma::conn`,
//! `struct ibv_qp_cap` and [`QpCaps`] here (`qp_cap_of`, `qp_caps_of`),
//! `struct rdma_ud_param` to [`UdParam`] here.
//!
//! What is `pub` in this file is the public Rust API (api/rdmacm.api lists
//! it); the crate's own helpers are `pub(crate)`.

#![deny(unsafe_code)]

use crate::abi::cma::{ibv_ah_attr, rdma_ud_param};
use crate::abi::verbs::QpCap;

/// Connection parameters (`struct rdma_conn_param`) with owned private
/// data, for [`CmId::connect`](crate::CmId::connect) and [`CmId::accept`](crate::CmId::accept), and as a connection
/// event reports them.
///
/// ```
/// let p = rdmacm::ConnParam { private_data: b"hello".to_vec(), ..Default::default() };
/// assert_eq!(p.responder_resources, rdmacm::ConnParam::DEVICE_MAX);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnParam {
    /// Private data (at most 56 bytes for a connect on InfiniBand, 196 for
    /// an accept; longer is `EINVAL`).
    pub private_data: Vec<u8>,
    /// Outstanding RDMA reads and atomics the local end accepts;
    /// [`ConnParam::DEVICE_MAX`]: what the device and the peer allow.
    pub responder_resources: u8,
    /// Outstanding RDMA reads and atomics the local end issues;
    /// [`ConnParam::DEVICE_MAX`]: as above.
    pub initiator_depth: u8,
    /// Hardware flow control (1) or not (0).
    pub flow_control: u8,
    /// Retries on a transport error (0-7).
    pub retry_count: u8,
    /// Retries on an RNR NAK (0-7, 7: forever).
    pub rnr_retry_count: u8,
    /// Whether the QP uses a shared receive queue (0 or 1).
    pub srq: u8,
    /// The QP number when the id has no QP (0: the id's QP).
    pub qp_num: u32,
}

impl ConnParam {
    /// For `responder_resources` and `initiator_depth`: the device's and the
    /// peer's limit.
    pub const DEVICE_MAX: u8 = u8::MAX;
}

impl Default for ConnParam {
    /// No private data, resources up to the device's limit, 7 retries of
    /// each kind, flow control on.
    fn default() -> ConnParam {
        ConnParam {
            private_data: Vec::new(),
            responder_resources: ConnParam::DEVICE_MAX,
            initiator_depth: ConnParam::DEVICE_MAX,
            flow_control: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            srq: 0,
            qp_num: 0,
        }
    }
}

/// Capacities of an id's QP: asked for by [`CmId::create_qp`](crate::CmId::create_qp), and what the
/// device granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    /// Outstanding send work requests.
    pub max_send_wr: u32,
    /// Outstanding receive work requests.
    pub max_recv_wr: u32,
    /// Scatter entries per send.
    pub max_send_sge: u32,
    /// Scatter entries per receive.
    pub max_recv_sge: u32,
    /// Bytes a send may carry inline ([`SendOp`](crate::SendOp) with `inline`).
    pub max_inline_data: u32,
}

impl Default for QpCaps {
    /// 16 work requests each way, one scatter entry each, no inline data.
    fn default() -> QpCaps {
        QpCaps { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }
    }
}

/// The capacities as libibverbs takes them (`struct ibv_qp_cap`).
pub(crate) fn qp_cap_of(q: QpCaps) -> QpCap {
    QpCap { max_send_wr: q.max_send_wr, max_recv_wr: q.max_recv_wr, max_send_sge: q.max_send_sge, max_recv_sge: q.max_recv_sge, max_inline_data: q.max_inline_data }
}

/// What libibverbs granted (`struct ibv_qp_cap`).
pub(crate) fn qp_caps_of(c: &QpCap) -> QpCaps {
    QpCaps { max_send_wr: c.max_send_wr, max_recv_wr: c.max_recv_wr, max_send_sge: c.max_send_sge, max_recv_sge: c.max_recv_sge, max_inline_data: c.max_inline_data }
}

/// The remote end of a UD exchange (`struct rdma_ud_param`'s address, QP
/// number and qkey): what [`AddressHandle::new`](crate::AddressHandle::new)
/// and [`CmId::post_ud_send`](crate::CmId::post_ud_send) need to send to
/// it.
///
/// Where one comes from:
/// * the client side of a UD exchange: the [`EventKind::Established`](crate::EventKind::Established)
///   event of its connect ([`Event::ud_param`](crate::Event::ud_param), or
///   [`CmId::peer_ud_param`](crate::CmId::peer_ud_param) on a synchronous
///   id), which carries the server's QP number, qkey and the route to it;
/// * a multicast group: the [`EventKind::MulticastJoin`](crate::EventKind::MulticastJoin) event (QP number
///   0xffffff, the group's qkey and address);
/// * the server side: a UD connection request carries no address, QP
///   number or qkey of the requester (only its private data), so the
///   server learns them from the first datagram it receives:
///   [`UdParam::from_wc`] with the receive's completion and the first
///   [`GRH_LEN`](crate::GRH_LEN) bytes of its buffer.
#[derive(Clone, Copy)]
pub struct UdParam {
    /// The address vector (`struct ibv_ah_attr`).
    pub(crate) ah_attr: ibv_ah_attr,
    pub(crate) qp_num: u32,
    pub(crate) qkey: u32,
}

impl UdParam {
    /// The address, QP number and qkey of an event's `struct rdma_ud_param`.
    pub(crate) fn from_c(u: &rdma_ud_param) -> UdParam {
        UdParam { ah_attr: u.ah_attr, qp_num: u.qp_num, qkey: u.qkey }
    }

    /// The remote QP number.
    pub fn qp_num(&self) -> u32 {
        self.qp_num
    }

    /// The remote QP's key.
    pub fn qkey(&self) -> u32 {
        self.qkey
    }

    /// The destination LID (0 when routed by GID, as on RoCE).
    pub fn dlid(&self) -> u16 {
        self.ah_attr.dlid
    }

    /// The service level.
    pub fn sl(&self) -> u8 {
        self.ah_attr.sl
    }

    /// The source path bits.
    pub fn src_path_bits(&self) -> u8 {
        self.ah_attr.src_path_bits
    }

    /// Whether the address carries a global route header (always on RoCE):
    /// then [`UdParam::dgid`], [`UdParam::sgid_index`],
    /// [`UdParam::hop_limit`], [`UdParam::traffic_class`] and
    /// [`UdParam::flow_label`] are the route's.
    pub fn is_global(&self) -> bool {
        self.ah_attr.is_global != 0
    }

    /// The destination GID (meaningful when [`UdParam::is_global`]).
    pub fn dgid(&self) -> [u8; 16] {
        crate::sys::verbs::gid_bytes(&self.ah_attr.grh.dgid)
    }

    /// The index of the local GID the datagrams leave from.
    pub fn sgid_index(&self) -> u8 {
        self.ah_attr.grh.sgid_index
    }

    /// The route's hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.ah_attr.grh.hop_limit
    }

    /// The route's traffic class.
    pub fn traffic_class(&self) -> u8 {
        self.ah_attr.grh.traffic_class
    }

    /// The route's flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.ah_attr.grh.flow_label
    }

    /// The local port.
    pub fn port_num(&self) -> u8 {
        self.ah_attr.port_num
    }
}

impl std::fmt::Debug for UdParam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("UdParam");
        d.field("qp_num", &self.qp_num()).field("qkey", &self.qkey()).field("dlid", &self.dlid()).field("sl", &self.sl());
        if self.is_global() {
            d.field("dgid", &std::net::Ipv6Addr::from(self.dgid())).field("sgid_index", &self.sgid_index());
        }
        d.field("port_num", &self.port_num()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_caps_round_trip_through_c() {
        let q = QpCaps { max_send_wr: 1, max_recv_wr: 2, max_send_sge: 3, max_recv_sge: 4, max_inline_data: 5 };
        assert_eq!(qp_caps_of(&qp_cap_of(q)), q);
    }
}
