// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A datagram rsocket's UDP side, served by the datagram service thread
//! ([`super::svc::DATAGRAMS`]): the first datagrams from a peer arrive
//! over UDP; each is answered with our QP number, the address and route
//! back to its sender resolved (without the socket's lock) and an address
//! handle made, and its data queued for rrecv.
#![deny(unsafe_code)]

use super::dgram::{lock, Dgram, SLOT};
use super::dgram_wire::{key, mtu_bytes, parse_udp_hdr, udp_hdr, OP_CTRL, OP_DATA};
use super::svc::Client;
use crate::abi::sockaddr::SockAddr;
use crate::cma::api::CmId;
use crate::sys::rsock::Udp;
use parking_lot::Mutex;
use std::sync::Arc;

/// rdma_resolve_addr/route timeout for an address handle (as upstream).
const RESOLVE_MS: i32 = 2000;

impl Client for Mutex<Dgram> {
    /// Datagrams arrived on the UDP socket.
    fn readable(self: Arc<Self>) -> bool {
        let Some(udp) = self.lock().udp_if_open() else { return false };
        svc_process(&udp, &self);
        true
    }
}

impl Dgram {
    fn udp_if_open(&self) -> Option<Arc<Udp>> {
        (!self.closed).then(|| self.udp.clone())
    }
}

/// Takes the datagrams waiting on a socket's UDP side.
fn svc_process(udp: &Udp, h: &Mutex<Dgram>) {
    let mut buf = vec![0u8; SLOT];
    while let Ok((n, from)) = udp.recv_from(&mut buf) {
        svc_one(h, &buf[..n], &from);
    }
}

/// One datagram over UDP: answer a data message with our QP number, make
/// the address handle to the sender's QP, then queue the data (upstream's
/// order: it forwards the data to its own QP once the handle exists).
fn svc_one(h: &Mutex<Dgram>, m: &[u8], from: &[u8]) {
    let Some((op, hl, qpn)) = parse_udp_hdr(m, from) else { return };
    let data = (op == OP_DATA).then(|| &m[hl..]);
    let (qi, di, local, addr) = {
        let Ok(mut g) = lock(h) else { return };
        let Ok(di) = g.get_dest(from) else { return };
        let qi = g.dests[di].qp;
        if op == OP_DATA {
            let q = &g.qps[qi];
            let reply = udp_hdr(&q.hdr, OP_CTRL, q.qp.qp_num());
            let _ = g.udp.send_to(&[&reply], from, libc::MSG_DONTWAIT);
        }
        let d = &g.dests[di];
        if d.ah.is_some() && d.qpn == qpn {
            let mtu = d.mtu;
            if let Some(data) = data {
                g.queue_udp(qi, from, data, mtu);
            }
            return;
        }
        (qi, di, g.qps[qi].local.clone(), d.addr.clone())
    };
    // Address and route resolution without the lock.
    let path = resolve(&local, &addr);
    let Ok(mut g) = lock(h) else { return };
    let mtu = path.as_ref().and_then(|p| mtu_bytes(p.mtu));
    if let Some(path) = &path {
        if let Ok(ah) = g.qps[qi].qp.create_ah(path) {
            let d = &mut g.dests[di];
            d.ah = Some(ah);
            d.qpn = qpn;
            d.mtu = mtu;
            g.wake_sleepers();
        }
    }
    if let Some(data) = data {
        g.queue_udp(qi, from, data, mtu);
    }
}


impl Dgram {
    /// Queues data that came over UDP for rrecv. Upstream sends it on to its
    /// own QP with the datagram header, and a UD send longer than the path
    /// MTU is dropped without an error, so one longer than `mtu` (when known)
    /// is dropped here too, as are those beyond the receive queue.
    fn queue_udp(&mut self, qi: usize, from: &[u8], data: &[u8], mtu: Option<usize>) {
        if mtu.is_some_and(|m| self.qps[qi].hdr.len() + data.len() > m) {
            return;
        }
        if self.local.len() < self.rq_size as usize {
            self.local.push_back((key(from), data.to_vec()));
            self.wake_sleepers();
        }
    }
}

/// The path from `local` (its port dropped) to `addr`, resolved on a
/// temporary id.
fn resolve(local: &[u8], addr: &[u8]) -> Option<crate::abi::cma::ibv_sa_path_rec> {
    let id = CmId::create_udp().ok()?;
    let mut src = local.to_vec();
    if src.len() >= 4 {
        src[2..4].copy_from_slice(&[0, 0]);
    }
    id.bind(&SockAddr::from_prefix(&src)).ok()?;
    id.resolve_addr(&SockAddr::from_prefix(addr), RESOLVE_MS).ok()?;
    id.resolve_route(RESOLVE_MS).ok()?;
    id.route_paths().into_iter().next()
}
