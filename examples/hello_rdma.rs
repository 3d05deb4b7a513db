// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The example of README.md ("Using it from Rust"), as it is printed there: a
//! client of rdma-core's `rdma_server` at 192.0.2.2 (the VM test bed's
//! server address) that sends 16 bytes and prints the 16 it gets back.
//! `vm/suite.d/examples.sh` runs it against `rdma_server`, so the README's
//! code is run, not only compiled.

#![forbid(unsafe_code)]

use rdmacm::{Access, CmId, ConnParam, MemoryRegion, PortSpace, QpCaps, SendOp, WcOpcode};
use std::time::Duration;

fn main() -> rdmacm::Result<()> {
    // A synchronous id: every call returns once its outcome is known.
    let id = CmId::new(PortSpace::Tcp)?;
    id.resolve_addr(None, "192.0.2.2:7471".parse().unwrap(), Duration::from_secs(2))?;
    id.resolve_route(Duration::from_secs(2))?;
    id.create_qp(QpCaps::default())?;
    let (mut send, recv) = (MemoryRegion::new(&id, 16, Access::NONE)?, MemoryRegion::new(&id, 16, Access::LOCAL_WRITE)?);
    id.post_recv(1, &[recv.sge(0..16)?])?;
    id.connect(&ConnParam::default())?;
    send.write(0, b"hello from Rust!")?;
    id.post_send(2, &[send.sge(0..16)?], SendOp::Send, true)?;
    while id.wait_cq()?.opcode != WcOpcode::Recv {}
    println!("answer: {:?}", recv.to_vec(0..16)?);
    id.disconnect()
}
