// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Multicast beyond a full member's join of an IP group
//! (`rdma_join_multicast_ex`): the membership kind, groups named by their
//! GID (`AF_IB`), and a QP that does not hear its own multicast sends.

#![deny(unsafe_code)]

use super::error::{errno, Result};
use super::id::{CmId, Mode};
use super::verbs::cq_entries;
use crate::cma::params::QpCaps;
use crate::abi::sockaddr::{ib_of_gid, SockAddr};
use crate::cma::api::{JOIN_FLAG_FULLMEMBER, JOIN_FLAG_SENDONLY_FULLMEMBER};
use std::net::{Ipv6Addr, SocketAddr};

/// How an id joins a group (`enum rdma_cm_mc_join_flags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Membership {
    /// Sends to the group and receives its datagrams: the id's QP is
    /// attached to the group once joined
    /// (`RDMA_MC_JOIN_FLAG_FULLMEMBER`, what
    /// [`CmId::join_multicast`] does).
    #[default]
    FullMember,
    /// Sends to the group only: the QP is not attached and receives
    /// nothing of the group (`RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`).
    /// The join event
    /// carries the group's address, QP number and qkey as for a full
    /// member.
    SendOnlyFullMember,
}

impl Membership {
    /// The C value (`RDMA_MC_JOIN_FLAG_*`).
    pub(crate) fn raw(self) -> u16 {
        match self {
            Membership::FullMember => JOIN_FLAG_FULLMEMBER,
            Membership::SendOnlyFullMember => JOIN_FLAG_SENDONLY_FULLMEMBER,
        }
    }
}

/// A multicast group's address: an IP group (`AF_INET`, `AF_INET6`: the
/// connection manager maps it to a GID) or a GID as it is (`AF_IB`, an
/// "unmapped" address, as rdma-core's `mckey -M` joins one).
///
/// ```
/// use rdmacm::MulticastAddr;
/// let ip: MulticastAddr = "239.0.0.1:0".parse::<std::net::SocketAddr>().unwrap().into();
/// assert_eq!(ip, MulticastAddr::Ip("239.0.0.1:0".parse().unwrap()));
/// let gid = MulticastAddr::Gid("ff12:401b::1".parse().unwrap());
/// assert_ne!(ip, gid);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MulticastAddr {
    /// An IPv4 or IPv6 group (the port is not used).
    Ip(SocketAddr),
    /// A group named by its GID (an `AF_IB` address with every other field
    /// zero). The kernel takes it only where it takes `AF_IB` addresses
    /// (`EINVAL` otherwise, as upstream's library); the id must be bound
    /// to a device first ([`CmId::bind_addr`]), as no address resolution
    /// names one.
    Gid(Ipv6Addr),
}

impl From<SocketAddr> for MulticastAddr {
    fn from(a: SocketAddr) -> MulticastAddr {
        MulticastAddr::Ip(a)
    }
}

impl MulticastAddr {
    /// The C socket address.
    pub(crate) fn to_sockaddr(self) -> SockAddr {
        match self {
            MulticastAddr::Ip(a) => super::addr::to_sockaddr(&a),
            MulticastAddr::Gid(g) => SockAddr::from_ib(&ib_of_gid(g.octets())),
        }
    }
}

/// Flags of a QP's creation (`IBV_QP_CREATE_*`) for
/// [`CmId::create_qp_with_flags`]. The device decides whether it supports
/// them: one that does not fails the creation (rxe refuses
/// `BLOCK_SELF_MCAST_LB` with `EOPNOTSUPP`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QpCreateFlags(u32);

impl QpCreateFlags {
    /// No flags: a QP as [`CmId::create_qp`] makes it.
    pub const NONE: QpCreateFlags = QpCreateFlags(0);
    /// The QP does not receive the multicast datagrams it sends itself
    /// (`IBV_QP_CREATE_BLOCK_SELF_MCAST_LB`; rdma-core's `mckey -l`).
    pub const BLOCK_SELF_MCAST_LB: QpCreateFlags = QpCreateFlags(crate::abi::verbs::IBV_QP_CREATE_BLOCK_SELF_MCAST_LB);

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: QpCreateFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The C value.
    pub fn bits(self) -> u32 {
        self.0
    }
}

impl std::ops::BitOr for QpCreateFlags {
    type Output = QpCreateFlags;
    fn bitor(self, o: QpCreateFlags) -> QpCreateFlags {
        QpCreateFlags(self.0 | o.0)
    }
}

impl<M: Mode> CmId<M> {
    /// Joins the multicast group `group` as `membership` says
    /// (`rdma_join_multicast_ex`):
    /// [`EventKind::MulticastJoin`](crate::EventKind::MulticastJoin), whose
    /// [`Event::ud_param`](crate::Event::ud_param) is the group's address,
    /// QP number (0xffffff) and qkey. An IP group needs the id's address
    /// resolved (to the group: [`CmId::resolve_addr`]) or bound; a
    /// [`MulticastAddr::Gid`] group needs it bound. The kernel's refusal
    /// comes back as its errno (rxe refuses a GID group with errno 524,
    /// the kernel's `ENOTSUPP`).
    /// [`CmId::join_multicast`] is this with an IP group and
    /// [`Membership::FullMember`].
    pub fn join_multicast_ex(&self, group: MulticastAddr, membership: Membership) -> Result<()> {
        self.id.join_multicast_flags(&group.to_sockaddr(), membership.raw()).map_err(errno)
    }

    /// Leaves a group joined with [`CmId::join_multicast_ex`] (or
    /// [`CmId::join_multicast`]) by the same address
    /// (`rdma_leave_multicast`); `EADDRNOTAVAIL` for a group the id has
    /// not joined.
    pub fn leave_multicast_ex(&self, group: MulticastAddr) -> Result<()> {
        self.id.leave_multicast(&group.to_sockaddr()).map_err(errno)
    }

    /// [`CmId::create_qp`] with creation flags (`rdma_create_qp_ex` with
    /// `IBV_QP_INIT_ATTR_CREATE_FLAGS`): the same QP, CQ and signalling,
    /// or the device's refusal of the flags (rxe refuses
    /// `BLOCK_SELF_MCAST_LB` with `EOPNOTSUPP`, as it does for upstream's
    /// library).
    pub fn create_qp_with_flags(&self, caps: QpCaps, flags: QpCreateFlags) -> Result<QpCaps> {
        self.id.create_qp_flags(cq_entries(&caps), caps, false, flags.bits()).map_err(errno)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::cma::AF_IB;

    #[test]
    fn memberships_are_the_c_flags() {
        assert_eq!(Membership::FullMember.raw(), 0);
        assert_eq!(Membership::SendOnlyFullMember.raw(), 1);
        assert_eq!(Membership::default(), Membership::FullMember);
    }

    #[test]
    fn a_gid_group_is_an_af_ib_address() {
        let g: Ipv6Addr = "ff12:401b:ffff::1".parse().unwrap();
        let a = MulticastAddr::Gid(g).to_sockaddr();
        assert_eq!(a.family(), AF_IB);
        assert_eq!(a.len(), 48, "sizeof(struct sockaddr_ib)");
        let ib = a.as_ib().unwrap();
        assert_eq!(ib.sib_addr.sib_raw, g.octets());
        assert_eq!((ib.sib_pkey, ib.sib_flowinfo, ib.sib_sid, ib.sib_sid_mask, ib.sib_scope_id), (0, 0, 0, 0, 0));
        let ip = MulticastAddr::Ip("239.0.0.1:0".parse().unwrap()).to_sockaddr();
        assert_eq!(ip.family(), libc::AF_INET);
        assert_eq!(ip.as_bytes()[4..8], [239, 0, 0, 1]);
    }

    #[test]
    fn create_flags_are_the_verbs_bits() {
        assert_eq!(QpCreateFlags::NONE.bits(), 0);
        assert_eq!(QpCreateFlags::BLOCK_SELF_MCAST_LB.bits(), 1 << 1);
        let f = QpCreateFlags::NONE | QpCreateFlags::BLOCK_SELF_MCAST_LB;
        assert!(f.contains(QpCreateFlags::BLOCK_SELF_MCAST_LB));
        assert!(!QpCreateFlags::NONE.contains(QpCreateFlags::BLOCK_SELF_MCAST_LB));
    }
}
