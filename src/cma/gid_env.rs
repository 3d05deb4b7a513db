// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! `ibv_gid_reachable`'s environment ([`GidEnv`]): the caller's device
//! (ports, node GUID, network device) and the kernel's address and route
//! resolution, asked through synchronous ids of this connection manager
//! (never through the C exports).
#![deny(unsafe_code)]

use super::objects::Vouched;
use super::base::{Cm, IdRef};
use crate::abi::cma::{ib_addr, ibv_context, sockaddr_ib, rdma_port_space, AF_IB, RDMA_PS_IB, RDMA_PS_TCP};
use crate::abi::sockaddr::SockAddr;
use crate::gid::{GidEnv, PortInfo, Resolved};
use nix::errno::Errno;
use std::ptr::null_mut;

/// The environment of one `ibv_gid_reachable` call.
pub struct CmGidEnv {
    cm: &'static Cm,
    ctx: Vouched<*mut ibv_context>,
}

impl CmGidEnv {
    /// The check's world: the connection manager `cm` and the caller's
    /// open device context `ctx`.
    pub fn new(cm: &'static Cm, ctx: Vouched<*mut ibv_context>) -> CmGidEnv {
        CmGidEnv { cm, ctx }
    }

    /// Runs `f` on a new synchronous id of port space `ps`, destroyed
    /// afterwards.  Failing to make the id is no verdict on the path: the
    /// CM itself is unusable (EIO, or ENOMEM).
    fn with_id<T>(&self, ps: rdma_port_space, f: impl FnOnce(&IdRef) -> Result<T, Errno>) -> Result<T, Errno> {
        let p = self.cm.create_id(None, null_mut(), ps).map_err(|e| {
            log::debug!(target: "rdmacm", "ibv_gid_reachable: cannot create a CM identifier: {e}");
            if e == Errno::ENOMEM {
                e
            } else {
                Errno::EIO
            }
        })?;
        let r = f(&p);
        let _ = self.cm.destroy_id(&p);
        r
    }

    /// A socket address as the connection manager takes it (its family's
    /// length, [`SockAddr::for_cm`]; EINVAL for AF_IB without kernel
    /// support, which upstream's rdma_resolve_addr also refuses).
    fn for_cm(&self, a: &SockAddr) -> Result<SockAddr, Errno> {
        SockAddr::for_cm(a.as_bytes(), self.cm.af_ib()).ok_or(Errno::EINVAL)
    }
}

impl GidEnv for CmGidEnv {
    fn port_count(&self) -> Result<u8, Errno> {
        self.ctx.port_count()
    }

    fn port_info(&self, port: u8) -> Result<PortInfo, Errno> {
        let (state, link_layer) = self.ctx.port_state(port)?;
        Ok(PortInfo { state, link_layer })
    }

    fn node_guid(&self) -> u64 {
        self.ctx.node_guid()
    }

    fn ifindex(&self, port: u8) -> u32 {
        self.ctx.ifindex(port)
    }

    fn resolve_ip(&self, dst: &SockAddr, timeout_ms: i32) -> Result<Resolved, Errno> {
        let dst = self.for_cm(dst)?;
        self.with_id(RDMA_PS_TCP, |p| {
            self.cm.resolve_addr(p, None, Some(dst), timeout_ms)?;
            // The device the kernel picked, as the id's fields now say.
            Ok(Resolved { node_guid: p.id.node_guid()?, port: p.id.port_num() })
        })
    }

    fn resolve_ib_path(&self, port: u8, dgid: &[u8; 16], timeout_ms: i32) -> Result<(), Errno> {
        let sgid = self.ctx.gid0(port)?;
        let ib = |gid: [u8; 16]| {
            SockAddr::from_ib(&sockaddr_ib { sib_family: AF_IB as u16, sib_pkey: 0xffffu16.to_be(), sib_addr: ib_addr { sib_raw: gid }, ..Default::default() })
        };
        let (src, dst) = (self.for_cm(&ib(sgid))?, self.for_cm(&ib(*dgid))?);
        self.with_id(RDMA_PS_IB, |p| {
            self.cm.resolve_addr(p, Some(src), Some(dst), timeout_ms)?;
            self.cm.resolve_route(p, timeout_ms)
        })
    }
}
