// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Datagram rsockets (SOCK_DGRAM over UD QPs), wire-compatible with
//! rdma-core's.
//!
//! The model, as upstream's:
//! * Every datagram rsocket owns a kernel UDP socket: its number is the
//!   rsocket's number, rbind/rconnect bind and connect it, rgetsockname and
//!   rgetpeername read it. It also carries the first datagrams to a peer
//!   whose QP is not known yet.
//! * One UD QP per local source address (the address the route to a
//!   destination leaves from, with the UDP socket's port), on a port-space
//!   UDP connection manager id bound to that address.
//! * Per destination address: the QP that reaches it, and once known an
//!   address handle and the peer's QP number.
//! * On the UD QP every datagram starts with a header naming the sender's
//!   address: version (4/6), header length (8/24), port, then the IPv4
//!   address, or the IPv6 flow info and address. The receiver reports it
//!   as the source.
//! * Over UDP every datagram starts with a 16 (IPv4) or 28 (IPv6) byte
//!   header: tag 0x55555555, version, op (0 data, 7 control), length,
//!   reserved, the sender's QP number (be32, low 24 bits), and the sender
//!   QP's IP address. A data message over UDP is delivered to the
//!   receiver's socket and answered with a control message (header only)
//!   carrying the receiver's QP number; each side's service thread then
//!   resolves the other's address and route on a temporary id and makes an
//!   address handle, after which data goes over the QPs.
//!
//! Differences from upstream (none visible on the wire): upstream delivers
//! a datagram that came over UDP by sending it to its own QP through a
//! loopback address handle without a GRH, which RoCE devices refuse
//! (ibv_create_ah fails: upstream's rconnect fails, and its service thread
//! drops the datagram); here the service thread queues it for rrecv
//! directly, once the address handle back to its sender exists (upstream's
//! order), and drops it when it is longer than that path's MTU with its
//! header, as upstream's send to its own QP is dropped. Each QP has its own send slots (upstream shares one send
//! buffer among its QPs). A datagram whose header and data exceed the
//! 2048-byte slot fails with EMSGSIZE (upstream overruns its buffer).
//!
//! Locking: each socket is a parking_lot mutex. No lock is held across a
//! blocking wait: a blocked call arms the CQs, registers this thread's
//! wake-up descriptor with the socket, drops the lock and sleeps on the
//! socket's epoll set of CQ channels and its wake-up descriptor. Whoever
//! takes completions out of a CQ or queues a datagram signals the other
//! sleepers. Address and route resolution (service thread) runs without
//! the lock.
#![deny(unsafe_code)]

use super::conf;
use super::dgram_wire::{family, format_hdr, hdr_addr, is_any, key, udp_hdr, valid_hdr, HDR4, HDR6, OP_DATA};
use super::options::{self, system_keepalive_time, OptOut, OptSource, Sizes, SockOpts, RDMA_INLINE, RDMA_IOMAPSIZE, RDMA_ROUTE, RDMA_RQSIZE, RDMA_SQSIZE, SOL_RDMA};
use super::svc::{self, DATAGRAMS};
use super::verbs::{Ah, Qp, RegBuf, Wake};
use super::wire::{scale_to_value, value_to_scale};
use crate::sys::rsock::{Epoll, Udp};
use crate::abi::sockaddr::SockAddr;
use crate::cma::api::{CmId, QpCaps};
use crate::sys::wake;
use nix::errno::Errno;
use parking_lot::{Mutex, MutexGuard};
use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::Arc;

/// Bytes of one send slot / one receive payload (upstream's RS_SNDLOWAT).
pub(super) const SLOT: usize = 2048;
/// The GRH in front of every UD receive.
const GRH: usize = 40;
const RSLOT: usize = GRH + SLOT;
const WR_RECV: u64 = 1 << 63;
const QP_MAX: u32 = 0xFFFE;

/// One UD QP and its buffers.
pub(super) struct DsQp {
    /// Dropped first: it acks the CQ events.
    pub(super) qp: Qp,
    pub(super) sbuf: RegBuf,
    pub(super) rbuf: RegBuf,
    /// Free send slots.
    pub(super) free: Vec<u32>,
    /// The datagram header of its source address.
    pub(super) hdr: Vec<u8>,
    /// Its source address (the id's bound address).
    pub(super) local: Vec<u8>,
    pub(super) armed: bool,
}

pub(super) struct Dest {
    pub(super) addr: Vec<u8>,
    pub(super) key: Vec<u8>,
    pub(super) qp: usize,
    pub(super) ah: Option<Ah>,
    pub(super) qpn: u32,
    /// The path MTU in bytes, once the route to it was resolved.
    pub(super) mtu: Option<usize>,
}

/// One datagram rsocket.
pub struct Dgram {
    pub(super) udp: Arc<Udp>,
    pub(super) ep: Arc<Epoll>,
    /// Sizes fixed and registered with the service thread (upstream's ds_init_ep).
    pub(super) inited: bool,
    pub(super) fs_flags: c_int,
    pub(super) fd_flags: c_int,
    pub(super) sbuf_size: u32,
    pub(super) rbuf_size: u32,
    pub(super) sq_size: u32,
    pub(super) rq_size: u32,
    pub(super) sq_inline: u32,
    pub(super) qps: Vec<DsQp>,
    pub(super) dests: Vec<Dest>,
    pub(super) conn_dest: Option<usize>,
    /// Received on a QP: (qp, slot, length after the GRH).
    pub(super) rmsgs: VecDeque<(usize, u32, u32)>,
    /// Arrived over UDP (first contact), queued by the service thread: (source, data).
    pub(super) local: VecDeque<(Vec<u8>, Vec<u8>)>,
    pub(super) closed: bool,
    pub(super) sleepers: Vec<Arc<Wake>>,
    /// What rsetsockopt stored and rgetsockopt reads back (upstream keeps the
    /// same flags for datagram rsockets as for streams).
    pub(super) opts: SockOpts,
    /// RDMA_IOMAPSIZE, kept (a datagram socket maps nothing).
    pub(super) iomap_size: u32,
}

pub type Handle = Arc<Mutex<Dgram>>;

pub(super) fn lock(h: &Mutex<Dgram>) -> Result<MutexGuard<'_, Dgram>, Errno> {
    let g = h.lock();
    if g.closed {
        Err(Errno::EBADF)
    } else {
        Ok(g)
    }
}

/// rsocket(domain, SOCK_DGRAM, 0 or IPPROTO_UDP): its number and the socket.
pub fn create(domain: c_int, type_: c_int) -> Result<(c_int, Handle), Errno> {
    let udp = Arc::new(Udp::new(domain)?);
    let ep = Arc::new(Epoll::new()?);
    let fd = udp.fd();
    let c = conf::get();
    let d = Dgram {
        udp,
        ep,
        inited: false,
        fs_flags: if type_ & libc::SOCK_NONBLOCK != 0 { libc::O_NONBLOCK } else { 0 },
        fd_flags: if type_ & libc::SOCK_CLOEXEC != 0 { libc::FD_CLOEXEC } else { 0 },
        sbuf_size: c.wmem,
        rbuf_size: c.mem,
        sq_size: c.sqsize as u32,
        rq_size: c.rqsize as u32,
        sq_inline: c.inline as u32,
        qps: Vec::new(),
        dests: Vec::new(),
        conn_dest: None,
        rmsgs: VecDeque::new(),
        local: VecDeque::new(),
        closed: false,
        sleepers: Vec::new(),
        opts: SockOpts::default(),
        iomap_size: 0,
    };
    Ok((fd, Arc::new(Mutex::new(d))))
}

impl Dgram {
    fn nonblocking(&self, flags: c_int) -> bool {
        self.fs_flags & libc::O_NONBLOCK != 0 || flags & libc::MSG_DONTWAIT != 0
    }

    /// Fixes the queue sizes (upstream's ds_set_qp_size) and registers
    /// the UDP socket with the service thread; once.
    fn init_ep(&mut self, h: &Handle) -> Result<(), Errno> {
        if self.inited {
            return Ok(());
        }
        let slot = SLOT as u32;
        self.sq_size = self.sq_size.min(QP_MAX);
        self.rq_size = self.rq_size.min(QP_MAX);
        if self.rq_size > self.rbuf_size / slot {
            self.rq_size = self.rbuf_size / slot;
        } else {
            self.rbuf_size = self.rq_size * slot;
        }
        if self.sq_size > self.sbuf_size / slot {
            self.sq_size = self.sbuf_size / slot;
        } else {
            self.sbuf_size = self.sq_size * slot;
        }
        self.sq_size = self.sq_size.max(1);
        self.rq_size = self.rq_size.max(1);
        svc_add(self.udp.clone(), h)?;
        self.inited = true;
        Ok(())
    }

    /// The local address datagrams to `dst` leave from: the UDP socket's,
    /// or when that is a wildcard the route's source with the socket's port.
    fn src_addr(&self, dst: &[u8]) -> Result<Vec<u8>, Errno> {
        let mine = self.udp.local_addr()?;
        if !is_any(&mine) {
            return Ok(mine);
        }
        let t = Udp::new(family(dst) as c_int)?;
        t.connect(dst)?;
        let mut a = t.local_addr()?;
        if a.len() >= 4 && mine.len() >= 4 {
            a[2..4].copy_from_slice(&mine[2..4]);
        }
        Ok(a)
    }

    /// The QP of source address `src`, made on first use.
    fn get_qp(&mut self, src: &[u8]) -> Result<usize, Errno> {
        let k = key(src);
        if let Some(i) = self.qps.iter().position(|q| key(&q.local) == k) {
            return Ok(i);
        }
        let id = Arc::new(CmId::create_udp()?);
        id.bind(&SockAddr::from_prefix(src))?;
        let caps = QpCaps { max_send_wr: self.sq_size, max_recv_wr: self.rq_size, max_send_sge: 1, max_recv_sge: 1, max_inline_data: self.sq_inline };
        let (qp, got) = Qp::new_ud(&id, self.sq_size + self.rq_size, caps)?;
        self.sq_inline = got.max_inline_data;
        let sbuf = qp.reg_buf(self.sq_size as usize * SLOT, false)?;
        let rbuf = qp.reg_buf(self.rq_size as usize * RSLOT, false)?;
        for i in 0..self.rq_size {
            qp.post_recv(WR_RECV | i as u64, Some(rbuf.sge(i as usize * RSLOT, RSLOT as u32)))?;
        }
        self.ep.add(qp.channel_fd())?;
        self.qps.push(DsQp { qp, sbuf, rbuf, free: (0..self.sq_size).rev().collect(), hdr: format_hdr(src), local: src.to_vec(), armed: true });
        Ok(self.qps.len() - 1)
    }

    /// The destination entry of `addr`, made (with its QP) on first use.
    pub(super) fn get_dest(&mut self, addr: &[u8]) -> Result<usize, Errno> {
        let k = key(addr);
        if let Some(i) = self.dests.iter().position(|d| d.key == k) {
            return Ok(i);
        }
        let src = self.src_addr(addr)?;
        let qp = self.get_qp(&src)?;
        self.dests.push(Dest { addr: addr.to_vec(), key: k, qp, ah: None, qpn: 0, mtu: None });
        Ok(self.dests.len() - 1)
    }

    /// Signals the sleepers of other threads (they look again).
    pub(super) fn wake_sleepers(&mut self) {
        let me = wake::mine().ok();
        self.sleepers.retain(|w| {
            if me.as_ref().is_some_and(|m| Arc::ptr_eq(m, w)) {
                true
            } else {
                w.signal();
                false
            }
        });
    }

    /// Takes the completions of every QP: receives are queued while there
    /// is room (dropped and reposted otherwise, as upstream), sends free
    /// their slots.
    fn poll_cqs(&mut self) {
        let mut changed = false;
        for qi in 0..self.qps.len() {
            while let Ok(Some(wc)) = self.qps[qi].qp.poll_len() {
                changed = true;
                let q = &mut self.qps[qi];
                if wc.wr_id & WR_RECV != 0 {
                    let slot = (wc.wr_id & 0xFFFF_FFFF) as u32;
                    let mut h = [0u8; HDR6 as usize];
                    let len = wc.byte_len as usize;
                    if len >= GRH + HDR4 as usize {
                        let n = (len - GRH).min(h.len());
                        q.rbuf.read(slot as usize * RSLOT + GRH, &mut h[..n]);
                    }
                    let ok = wc.status == 0 && len >= GRH + HDR4 as usize && valid_hdr(&h) && len - GRH >= h[1] as usize;
                    if ok && self.rmsgs.len() < self.rq_size as usize {
                        self.rmsgs.push_back((qi, slot, (len - GRH) as u32));
                    } else {
                        let _ = q.qp.post_recv(wc.wr_id, Some(q.rbuf.sge(slot as usize * RSLOT, RSLOT as u32)));
                    }
                } else {
                    q.free.push((wc.wr_id & 0xFFFF_FFFF) as u32);
                }
            }
        }
        if changed {
            self.wake_sleepers();
        }
    }

    fn have_rdata(&self) -> bool {
        !self.local.is_empty() || !self.rmsgs.is_empty()
    }

    fn can_send(&self) -> bool {
        // Upstream's send slots exist from rbind/rconnect/the first rsendto
        // on: before that a datagram rsocket is not writable.
        if !self.inited {
            return false;
        }
        match self.conn_dest {
            Some(d) => self.dests[d].ah.is_none() || !self.qps[self.dests[d].qp].free.is_empty(),
            None => self.qps.is_empty() || self.qps.iter().any(|q| !q.free.is_empty()),
        }
    }

    fn all_sends_done(&self) -> bool {
        self.qps.iter().all(|q| q.free.len() == self.sq_size as usize)
    }

    /// Arms the CQs not armed yet; true when one was (look once more).
    fn arm(&mut self) -> bool {
        let mut any = false;
        for q in self.qps.iter_mut().filter(|q| !q.armed) {
            let _ = q.qp.req_notify();
            q.armed = true;
            any = true;
        }
        any
    }

    /// Reads the CQ events there are (the epoll set was readable).
    fn consume_events(&mut self) {
        for q in &mut self.qps {
            if q.qp.get_cq_event().is_ok() {
                q.armed = false;
            }
        }
    }

    /// One datagram to the current destination without blocking.
    fn dsend(&mut self, buf: &[u8], flags: c_int) -> Result<usize, Errno> {
        let di = self.conn_dest.ok_or(Errno::EDESTADDRREQ)?;
        let qi = self.dests[di].qp;
        let hl = self.qps[qi].hdr.len();
        if buf.len() + hl > SLOT {
            return Err(Errno::EMSGSIZE);
        }
        if self.dests[di].ah.is_none() {
            let q = &self.qps[qi];
            let h = udp_hdr(&q.hdr, OP_DATA, q.qp.qp_num());
            let n = self.udp.send_to(&[&h, buf], &self.dests[di].addr, flags & libc::MSG_DONTWAIT)?;
            return Ok(n.saturating_sub(h.len()));
        }
        if self.qps[qi].free.is_empty() {
            self.poll_cqs();
        }
        let d = &self.dests[di];
        let q = &mut self.qps[qi];
        let Some(slot) = q.free.pop() else { return Err(Errno::EAGAIN) };
        let off = slot as usize * SLOT;
        q.sbuf.write(off, &q.hdr);
        q.sbuf.write(off + hl, buf);
        let total = (hl + buf.len()) as u32;
        let ah = d.ah.as_ref().ok_or(Errno::EINVAL)?;
        if let Err(e) = q.qp.post_ud_send(slot as u64, q.sbuf.sge(off, total), total <= self.sq_inline, ah, d.qpn) {
            q.free.push(slot);
            return Err(e);
        }
        Ok(buf.len())
    }

    /// One datagram out of the queues without blocking: its length copied
    /// and its source address.
    fn drecv(&mut self, buf: &mut [u8], flags: c_int) -> Result<(usize, Vec<u8>), Errno> {
        let peek = flags & libc::MSG_PEEK != 0;
        if let Some((src, data)) = self.local.front() {
            let n = data.len().min(buf.len());
            buf[..n].copy_from_slice(&data[..n]);
            let src = src.clone();
            if !peek {
                self.local.pop_front();
            }
            return Ok((n, src));
        }
        let Some(&(qi, slot, len)) = self.rmsgs.front() else { return Err(Errno::EAGAIN) };
        let q = &self.qps[qi];
        let base = slot as usize * RSLOT + GRH;
        let mut h = [0u8; HDR6 as usize];
        q.rbuf.read(base, &mut h[..(len as usize).min(HDR6 as usize)]);
        let hl = h[1] as usize;
        let n = (len as usize - hl).min(buf.len());
        q.rbuf.read(base + hl, &mut buf[..n]);
        let src = hdr_addr(&h);
        if !peek {
            self.rmsgs.pop_front();
            let _ = q.qp.post_recv(WR_RECV | slot as u64, Some(q.rbuf.sge(slot as usize * RSLOT, RSLOT as u32)));
        }
        Ok((n, src))
    }

    fn register_me(&mut self) -> Result<(Arc<Epoll>, Arc<Wake>), Errno> {
        let w = wake::mine()?;
        if !self.sleepers.iter().any(|x| Arc::ptr_eq(x, &w)) {
            self.sleepers.push(w.clone());
        }
        Ok((self.ep.clone(), w))
    }

    fn unregister_me(&mut self) {
        if let Ok(w) = wake::mine() {
            self.sleepers.retain(|x| !Arc::ptr_eq(x, &w));
        }
    }
}

/// Runs `op` until it does not fail with EAGAIN, sleeping without the lock
/// in between (unless non-blocking).
fn run<T>(h: &Handle, flags: c_int, mut op: impl FnMut(&mut Dgram) -> Result<T, Errno>) -> Result<T, Errno> {
    loop {
        let (ep, wake) = {
            let mut g = lock(h)?;
            let nb = g.nonblocking(flags);
            g.poll_cqs();
            match op(&mut g) {
                Err(Errno::EAGAIN) if !nb => {}
                r => return r,
            }
            if g.arm() {
                g.poll_cqs();
                match op(&mut g) {
                    Err(Errno::EAGAIN) => {}
                    r => return r,
                }
            }
            g.register_me()?
        };
        let mut p = [libc::pollfd { fd: ep.fd(), events: libc::POLLIN, revents: 0 }, libc::pollfd { fd: wake.fd(), events: libc::POLLIN, revents: 0 }];
        // The thread's cancellation is acted on here: ECANCELED (below).
        let r = crate::sys::cancel::wait_poll(&mut p, -1);
        if p[1].revents != 0 {
            wake.drain();
        }
        let mut g = lock(h)?;
        g.unregister_me();
        if p[0].revents != 0 {
            g.consume_events();
        }
        drop(g);
        match r {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

/// rbind.
pub fn bind(h: &Handle, addr: &[u8]) -> Result<(), Errno> {
    let mut g = lock(h)?;
    g.init_ep(h)?;
    g.udp.bind(addr)
}

/// rconnect: connects the UDP socket and makes `addr` the default destination.
pub fn connect(h: &Handle, addr: &[u8]) -> Result<(), Errno> {
    let mut g = lock(h)?;
    g.init_ep(h)?;
    g.udp.connect(addr)?;
    let d = g.get_dest(addr)?;
    g.conn_dest = Some(d);
    Ok(())
}

/// rsendto (`addr` None: rsend to the default destination).
pub fn send_to(h: &Handle, buf: &[u8], flags: c_int, addr: Option<&[u8]>) -> Result<usize, Errno> {
    {
        let mut g = lock(h)?;
        g.init_ep(h)?;
        if let Some(a) = addr {
            let same = g.conn_dest.is_some_and(|d| g.dests[d].key == key(a));
            if !same {
                let d = g.get_dest(a)?;
                g.conn_dest = Some(d);
            }
        }
    }
    run(h, flags, |g| g.dsend(buf, flags))
}

/// rrecvfrom: the length and the source address.
pub fn recv_from(h: &Handle, buf: &mut [u8], flags: c_int) -> Result<(usize, Vec<u8>), Errno> {
    // Before rbind/rconnect/the first rsendto nothing can arrive: EINVAL, as
    // upstream (not readable yet), rather than a wait that never ends.
    if !lock(h)?.inited {
        return Err(Errno::EINVAL);
    }
    run(h, flags, |g| g.drecv(buf, flags))
}

/// rgetsockname.
pub fn local_addr(h: &Handle) -> Result<Vec<u8>, Errno> {
    lock(h)?.udp.local_addr()
}

/// rgetpeername.
pub fn peer_addr(h: &Handle) -> Result<Vec<u8>, Errno> {
    lock(h)?.udp.peer_addr()
}

/// rsetsockopt: options other than SOL_RDMA go to the UDP socket first (its
/// error is the result); then the value is kept as upstream keeps it for any
/// rsocket: the buffer sizes (before the queues exist), the flags rgetsockopt
/// reads back; other options the UDP socket took succeed.
pub fn setsockopt(h: &Handle, level: c_int, name: c_int, opt: Option<&[u8]>) -> Result<(), Errno> {
    let mut g = lock(h)?;
    let int = || -> Result<u32, Errno> {
        let o = opt.ok_or(Errno::EFAULT)?;
        if o.len() < 4 {
            return Err(Errno::EINVAL);
        }
        Ok(u32::from_ne_bytes([o[0], o[1], o[2], o[3]]))
    };
    if level != SOL_RDMA {
        g.udp.setsockopt(level, name, opt)?;
        match (level, name) {
            (libc::SOL_SOCKET, libc::SO_REUSEADDR) => g.opts.reuseaddr = int()? != 0,
            // (once a QP exists the size is kept: the `_` arm below)
            (libc::SOL_SOCKET, libc::SO_RCVBUF) if g.qps.is_empty() => g.rbuf_size = int()?.wrapping_shl(1),
            (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
                if !g.inited {
                    g.sbuf_size = int()?.wrapping_shl(1);
                }
                if g.sbuf_size < SLOT as u32 {
                    g.sbuf_size = 2 * SLOT as u32;
                }
            }
            // struct linger: l_onoff first.
            (libc::SOL_SOCKET, libc::SO_LINGER) => g.opts.linger_off = int()? == 0,
            (libc::SOL_SOCKET, libc::SO_OOBINLINE) => g.opts.oobinline = int()? != 0,
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => {
                let on = int()? != 0;
                if on && g.opts.keepalive_time == 0 {
                    g.opts.keepalive_time = system_keepalive_time();
                }
                // No keepalive messages: a datagram rsocket is never connected.
                g.opts.keepalive = on;
            }
            // Upstream passes the TOS on to an rdma_cm id the datagram rsocket does
            // not have (it crashes); kept for rgetsockopt here.
            (libc::IPPROTO_IP, libc::IP_TOS) => g.opts.ip_tos = int()? as c_int,
            (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) => g.opts.v6only = int()? != 0,
            _ => {}
        }
        return Ok(());
    }
    if g.inited {
        return Err(Errno::EINVAL);
    }
    match name {
        RDMA_SQSIZE => g.sq_size = int()?.min(QP_MAX),
        RDMA_RQSIZE => g.rq_size = int()?.min(QP_MAX),
        RDMA_INLINE => g.sq_inline = int()?.min(QP_MAX),
        RDMA_IOMAPSIZE => g.iomap_size = scale_to_value(value_to_scale(int()?, 8) & 0xFF, 8) & 0xFFFF,
        RDMA_ROUTE => g.opts.route = Some(opt.ok_or(Errno::EINVAL)?.to_vec()),
        _ => return Err(Errno::ENOTSUP),
    }
    Ok(())
}

/// What rgetsockopt reads of a datagram socket: the kept flags and
/// sizes, SO_ERROR 0, no resolved paths (TCP_MAXSEG 2048, RDMA_ROUTE none:
/// upstream reads them through an rdma_cm id a datagram rsocket does not
/// have, and crashes), TCP_INFO closed.
impl OptSource for Dgram {
    fn opts(&self) -> &SockOpts {
        &self.opts
    }

    fn sizes(&self) -> Sizes {
        Sizes { sbuf: self.sbuf_size, rbuf: self.rbuf_size, sq: self.sq_size, rq: self.rq_size, inline: self.sq_inline, iomap: self.iomap_size }
    }

    fn take_error(&mut self) -> c_int {
        0
    }

    fn paths(&self) -> Vec<crate::abi::cma::ibv_sa_path_rec> {
        Vec::new()
    }

    fn established(&self) -> bool {
        false
    }
}

/// rgetsockopt: the one table of [`options::getsockopt`] (nothing is read
/// from the UDP socket, as upstream).
pub fn getsockopt(h: &Handle, level: c_int, name: c_int, room: usize) -> Result<OptOut, Errno> {
    options::getsockopt(&mut *lock(h)?, level, name, room)
}

/// rfcntl: the flags are stored and read back (O_NONBLOCK makes calls non-blocking).
pub fn fcntl(h: &Handle, cmd: c_int, arg: c_int) -> Result<c_int, Errno> {
    let mut g = lock(h)?;
    match cmd {
        libc::F_GETFL => Ok(g.fs_flags),
        libc::F_SETFL => {
            g.fs_flags = arg;
            Ok(0)
        }
        libc::F_GETFD => Ok(g.fd_flags),
        libc::F_SETFD => {
            g.fd_flags = arg;
            Ok(0)
        }
        _ => Err(Errno::ENOTSUP),
    }
}

/// rclose's first step, while the socket is still in the table: lets the
/// posted sends complete (as upstream, bounded here to about a second).
pub fn close_begin(h: &Handle) -> Result<(), Errno> {
    svc_remove(h);
    for _ in 0..500 {
        let mut g = lock(h)?;
        g.poll_cqs();
        if g.all_sends_done() {
            break;
        }
        drop(g);
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    Ok(())
}

/// rclose's end, once the socket is out of the table: frees the QPs, ids
/// and the UDP socket; sleepers wake and fail with EBADF.
pub fn close_end(h: &Handle) {
    let mut g = h.lock();
    g.closed = true;
    g.dests.clear();
    g.rmsgs.clear();
    g.local.clear();
    g.qps.clear();
    g.conn_dest = None;
    let me = wake::mine().ok();
    for w in g.sleepers.drain(..) {
        if !me.as_ref().is_some_and(|m| Arc::ptr_eq(m, &w)) {
            w.signal();
        }
    }
}

/// Registers the socket's UDP socket with the datagram service thread.
fn svc_add(udp: Arc<Udp>, h: &Handle) -> Result<(), Errno> {
    DATAGRAMS.add(udp.fd(), h.clone(), udp)
}

/// Unregisters the socket; returns once the service thread no longer uses it.
fn svc_remove(h: &Handle) {
    DATAGRAMS.remove(svc::key(h));
}

// ---- rpoll -----------------------------------------------------------------------------

/// rpoll's view of a datagram rsocket.
pub fn poll_events(h: &Handle, events: i16) -> i16 {
    let mut g = match lock(h) {
        Ok(g) => g,
        Err(_) => return libc::POLLNVAL,
    };
    g.poll_cqs();
    let mut r = 0;
    if events & libc::POLLIN != 0 && g.have_rdata() {
        r |= libc::POLLIN;
    }
    if events & libc::POLLOUT != 0 && g.can_send() {
        r |= libc::POLLOUT;
    }
    r
}

/// What rpoll sleeps on for a datagram rsocket: its epoll set of CQ
/// channels (CQs armed first) with `wake` registered with the socket.
pub struct PollSlot {
    h: Handle,
    ep: Arc<Epoll>,
}

impl PollSlot {
    pub fn fd(&self) -> c_int {
        self.ep.fd()
    }

    /// After the sleep: unregisters the thread, reads the CQ events when
    /// the set was readable.
    pub fn done(&self, readable: bool) {
        if let Ok(mut g) = lock(&self.h) {
            g.unregister_me();
            if readable {
                g.consume_events();
            }
        }
    }
}

/// Prepares rpoll's sleep on a datagram rsocket (None: closed).
pub fn prepare_wait(h: &Handle) -> Option<PollSlot> {
    let ep = {
        let mut g = lock(h).ok()?;
        g.arm();
        g.register_me().ok()?.0
    };
    Some(PollSlot { h: h.clone(), ep })
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::dgram_wire::{family, AF_INET};

    fn v4(ip: [u8; 4], port: u16) -> Vec<u8> {
        let mut a = vec![0u8; 16];
        a[..2].copy_from_slice(&AF_INET.to_ne_bytes());
        a[2..4].copy_from_slice(&port.to_be_bytes());
        a[4..8].copy_from_slice(&ip);
        a
    }

    /// A datagram socket without a device: addressing works on the UDP
    /// socket; closing it twice is EBADF.
    #[test]
    fn create_bind_close() {
        let (_, h) = create(libc::AF_INET, libc::SOCK_DGRAM).unwrap();
        bind(&h, &v4([127, 0, 0, 1], 0)).unwrap();
        let a = local_addr(&h).unwrap();
        assert_eq!(family(&a), AF_INET);
        assert_eq!(&a[4..8], &[127, 0, 0, 1]);
        assert_ne!(&a[2..4], &[0, 0]);
        assert_eq!(fcntl(&h, libc::F_SETFL, libc::O_NONBLOCK), Ok(0));
        assert_eq!(fcntl(&h, libc::F_GETFL, 0), Ok(libc::O_NONBLOCK));
        let mut b = [0u8; 8];
        assert_eq!(recv_from(&h, &mut b, 0).err(), Some(Errno::EAGAIN));
        close_begin(&h).unwrap();
        close_end(&h);
        assert_eq!(close_begin(&h), Err(Errno::EBADF));
    }
}
