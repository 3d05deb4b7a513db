// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rsockets over RC connections (SOCK_STREAM), wire-compatible with
//! rdma-core's rsockets.
//!
//! The protocol, as seen on the wire:
//! * Connect private data (40 bytes): version 1, flags (bit 0: big-endian
//!   host, bit 1: iomap supported), receive credits (be16, the receive queue
//!   depth), 3 reserved bytes, the iomap table size (scaled byte), then two
//!   16-byte descriptors {addr be64, key be32, length be32}: the table the
//!   peer RDMA-writes new receive-buffer descriptors into (2 entries), and
//!   the first half of the receive buffer.
//! * Data: an RDMA write with immediate into the peer's receive buffer; the
//!   immediate is `op << 29 | length` (op 0 = data). On iWARP (no immediate
//!   data) a plain RDMA write followed by a 4-byte send carrying the same word.
//! * Credits: when half of the receive buffer has been consumed, the receiver
//!   RDMA-writes a descriptor of the freed half into the sender's table with
//!   immediate `4 << 29 | (rseq + rq_size)` (op SGL); with no buffer to hand
//!   back it sends only the immediate (a zero-length write). The data field
//!   bounds the sender's message sequence number (one receive WR per message).
//! * Control: immediate `7 << 29 | n`, n = 0 disconnect, 2 shutdown (write side).
//!
//! Each rsocket is an rdma_cm id on its own (synchronous) event channel; the
//! rsocket's number is that channel's descriptor, as upstream. The CQ of the
//! QP has its own completion channel; rpoll waits on these descriptors.
#![allow(dead_code)]

pub mod verbs;

use crate::abi::cma::{ibv_comp_channel, ibv_cq, rdma_cm_event, rdma_cm_id, rdma_conn_param, RDMA_PS_TCP};
use crate::abi::ucma::{RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR};
use nix::errno::Errno;
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::sync::{Arc, Mutex, MutexGuard};
use verbs::{IbvMr, Sge};

const RS_OLAP_START_SIZE: u32 = 2048;
const RS_MAX_TRANSFER: u32 = 65536;
const RS_SNDLOWAT: u32 = 2048;
const RS_QP_MIN_SIZE: u32 = 16;
const RS_QP_MAX_SIZE: u32 = 0xFFFE;
const RS_QP_CTRL_SIZE: u32 = 4;
const RS_SGL_SIZE: u32 = 2;
const RS_MAX_CTRL_MSG: u32 = 16;
const RS_MSG_SIZE: u32 = 4;
const CONN_DATA_LEN: usize = 40;
const IOMAP_ENTRY_SIZE: u32 = 24;

const DEF_INLINE: u32 = 64;
const DEF_SQSIZE: u32 = 384;
const DEF_RQSIZE: u32 = 384;
const DEF_MEM: u32 = 1 << 17;
const DEF_WMEM: u32 = 1 << 17;

const OP_DATA: u32 = 0;
const OP_WRITE: u32 = 2;
const OP_SGL: u32 = 4;
const OP_IOMAP_SGL: u32 = 6;
const OP_CTRL: u32 = 7;
const CTRL_DISCONNECT: u32 = 0;
const CTRL_SHUTDOWN: u32 = 2;

const WR_RECV: u64 = 1 << 63;
const WR_MSG_SEND: u64 = 1 << 62;

const CONN_FLAG_NET: u8 = 1;
const CONN_FLAG_IOMAP: u8 = 2;

const OPT_SWAP_SGL: u32 = 1;
const OPT_MSG_SEND: u32 = 2;


/// `SOL_RDMA` and its options (<rdma/rsocket.h>).
pub const SOL_RDMA: c_int = 0x10000;
const RDMA_SQSIZE: c_int = 0;
const RDMA_RQSIZE: c_int = 1;
const RDMA_INLINE: c_int = 2;
const RDMA_IOMAPSIZE: c_int = 3;

// Socket states (bit sets, as the peer never sees them any layout works;
// these follow the obvious scheme).
const ST_INIT: u32 = 0;
const ST_BOUND: u32 = 0x1;
const ST_LISTENING: u32 = 0x2;
const ST_CONNECTED: u32 = 0x100;
const ST_WRITABLE: u32 = 0x200;
const ST_READABLE: u32 = 0x400;
const ST_CONNECT_RDWR: u32 = ST_CONNECTED | ST_READABLE | ST_WRITABLE;
const ST_CONNECT_ERROR: u32 = 0x800;
const ST_DISCONNECTED: u32 = 0x1000;
const ST_ERROR: u32 = 0x2000;

#[inline]
fn msg_set(op: u32, data: u32) -> u32 {
    (op << 29) | (data & 0x1FFF_FFFF)
}
#[inline]
fn msg_op(m: u32) -> u32 {
    m >> 29
}
#[inline]
fn msg_data(m: u32) -> u32 {
    m & 0x1FFF_FFFF
}

/// An entry of a descriptor table the peer writes into: `struct rs_sge`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
struct RsSge {
    addr: u64,
    key: u32,
    length: u32,
}

/// A heap buffer that never moves (registered with the device).
struct Buf {
    ptr: *mut u8,
    len: usize,
}

impl Buf {
    fn new(len: usize) -> Result<Buf, Errno> {
        let len = len.max(1);
        // SAFETY: calloc with a non-zero size; checked for NULL.
        let ptr = unsafe { libc::calloc(1, len) } as *mut u8;
        if ptr.is_null() {
            return Err(Errno::ENOMEM);
        }
        Ok(Buf { ptr, len })
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: ptr came from calloc and is freed once.
        unsafe { libc::free(self.ptr as *mut c_void) };
    }
}

/// Registered buffers and queues of a connected stream.
struct Ep {
    sbuf: Buf,
    smr: *mut IbvMr,
    slkey: u32,
    target: Buf,
    target_mr: *mut IbvMr,
    target_rkey: u32,
    rbuf: Buf,
    rmr: *mut IbvMr,
    rlkey: u32,
    rrkey: u32,
    rmsg: Vec<(u32, u32)>,
}

/// One stream rsocket.
pub struct Stream {
    id: *mut rdma_cm_id,
    fd: c_int,
    domain: c_int,
    state: u32,
    nonblock: bool,
    err: c_int,
    opts: u32,
    so_reuseaddr: c_int,
    so_keepalive: c_int,
    tcp_nodelay: c_int,

    sbuf_size: u32,
    rbuf_size: u32,
    sq_size: u32,
    rq_size: u32,
    sq_inline: u32,
    target_iomap_size: u32,

    ctrl_seqno: u32,
    ctrl_max_seqno: u32,
    sseq_no: u16,
    sseq_comp: u16,
    rseq_no: u16,
    rseq_comp: u16,

    remote_sge: u32,
    remote_sgl: RsSge,
    target_sge: usize,

    rbuf_msg_index: u32,
    rbuf_bytes_avail: u32,
    rbuf_free_offset: u32,
    rbuf_offset: u32,
    rmsg_head: usize,
    rmsg_tail: usize,

    sbuf_bytes_avail: u32,
    ssgl0_off: u32,
    sqe_avail: u32,
    cq_armed: bool,
    unack_cqe: u32,

    /// The peer's table of direct-write mappings (addr, key, entry count).
    remote_iomap: RsSge,
    /// Our riomap registrations.
    iomaps: Vec<IoMap>,

    ep: Option<Ep>,
}

/// One riomap registration.
struct IoMap {
    offset: u64,
    addr: u64,
    len: u32,
    mr: *mut IbvMr,
    rkey: u32,
    /// Slot in the peer's table, or -1 for a local-only mapping.
    index: i32,
    /// Written into the peer's table already (or local-only).
    sent: bool,
}

// SAFETY: the raw pointers are owned by the Stream and only used under its mutex.
unsafe impl Send for Stream {}

type Handle = Arc<Mutex<Stream>>;

static TABLE: Mutex<BTreeMap<c_int, Handle>> = Mutex::new(BTreeMap::new());

fn table() -> MutexGuard<'static, BTreeMap<c_int, Handle>> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The stream behind an rsocket number, or EBADF.
pub fn lookup(fd: c_int) -> Result<Handle, Errno> {
    table().get(&fd).cloned().ok_or(Errno::EBADF)
}

/// Whether `fd` is one of our rsockets.
pub fn is_rsocket(fd: c_int) -> bool {
    table().contains_key(&fd)
}

/// Locks a stream (a poisoned lock still gives the state).
pub fn lock(h: &Handle) -> MutexGuard<'_, Stream> {
    h.lock().unwrap_or_else(|e| e.into_inner())
}

fn errno_or(e: Errno) -> Errno {
    match Errno::last() {
        Errno::UnknownErrno => e,
        x => x,
    }
}

fn cm(ret: c_int) -> Result<(), Errno> {
    if ret == 0 {
        Ok(())
    } else {
        Err(errno_or(Errno::EIO))
    }
}

/// Creates a stream rsocket; returns its number.
pub fn create(domain: c_int, type_: c_int, protocol: c_int) -> Result<c_int, Errno> {
    let st = type_ & !(libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK);
    if (domain != libc::AF_INET && domain != libc::AF_INET6) || st != libc::SOCK_STREAM || (protocol != 0 && protocol != libc::IPPROTO_TCP) {
        return Err(Errno::ENOTSUP);
    }
    let mut id: *mut rdma_cm_id = null_mut();
    // SAFETY: a NULL channel asks for a synchronous id with its own channel; id is a valid out pointer.
    cm(unsafe { crate::capi::cm::rdma_create_id(null_mut(), &mut id, null_mut(), RDMA_PS_TCP) })?;
    // SAFETY: the id was just created and has its own channel.
    let fd = unsafe {
        (*id).route.addr.src.addr.sa_family = domain as libc::sa_family_t;
        (*(*id).channel).fd
    };
    let s = Stream { nonblock: type_ & libc::SOCK_NONBLOCK != 0, ..Stream::fresh(id, fd, domain) };
    table().insert(fd, Arc::new(Mutex::new(s)));
    Ok(fd)
}

fn inherit(l: &Stream, id: *mut rdma_cm_id) -> Stream {
    // SAFETY: id is a live id with its own channel.
    let fd = unsafe { (*(*id).channel).fd };
    Stream {
        nonblock: l.nonblock,
        so_keepalive: l.so_keepalive,
        tcp_nodelay: l.tcp_nodelay,
        sbuf_size: l.sbuf_size,
        rbuf_size: l.rbuf_size,
        sq_size: l.sq_size,
        rq_size: l.rq_size,
        sq_inline: l.sq_inline,
        target_iomap_size: l.target_iomap_size,
        ..Stream::fresh(id, fd, l.domain)
    }
}

impl Stream {
    /// A fresh, unconnected stream on `id` (whose channel fd is `fd`) with
    /// the default sizes and options.
    fn fresh(id: *mut rdma_cm_id, fd: c_int, domain: c_int) -> Stream {
        Stream {
            id,
            fd,
            domain,
            state: ST_INIT,
            nonblock: false,
            err: 0,
            opts: 0,
            so_reuseaddr: 0,
            so_keepalive: 0,
            tcp_nodelay: 0,
            sbuf_size: DEF_WMEM,
            rbuf_size: DEF_MEM,
            sq_size: DEF_SQSIZE,
            rq_size: DEF_RQSIZE,
            sq_inline: DEF_INLINE,
            target_iomap_size: 0,
            ctrl_seqno: 0,
            ctrl_max_seqno: RS_QP_CTRL_SIZE,
            sseq_no: 0,
            sseq_comp: 0,
            rseq_no: 0,
            rseq_comp: 0,
            remote_sge: 0,
            remote_sgl: RsSge::default(),
            target_sge: 0,
            rbuf_msg_index: 0,
            rbuf_bytes_avail: 0,
            rbuf_free_offset: 0,
            rbuf_offset: 0,
            rmsg_head: 0,
            rmsg_tail: 0,
            sbuf_bytes_avail: 0,
            ssgl0_off: 0,
            sqe_avail: 0,
            cq_armed: false,
            unack_cqe: 0,
            remote_iomap: RsSge::default(),
            iomaps: Vec::new(),
            ep: None,
        }
    }
}


impl Stream {
    fn ep(&self) -> &Ep {
        // Only called once the endpoint exists (connected states).
        self.ep.as_ref().expect("rsocket endpoint")
    }

    fn qp(&self) -> *mut crate::abi::cma::ibv_qp {
        // SAFETY: id is live for the stream's lifetime.
        unsafe { (*self.id).qp }
    }

    fn cq(&self) -> *mut ibv_cq {
        // SAFETY: id is live.
        unsafe { (*self.id).recv_cq }
    }

    fn cq_channel(&self) -> *mut ibv_comp_channel {
        // SAFETY: id is live.
        unsafe { (*self.id).recv_cq_channel }
    }

    /// The descriptor to wait on: the CQ channel once connected, else the CM channel.
    pub fn wait_fd(&self) -> c_int {
        let ch = self.cq_channel();
        if !ch.is_null() && self.state & ST_CONNECTED != 0 {
            // SAFETY: the channel is live while the QP exists.
            unsafe { verbs::channel_fd(ch) }
        } else {
            self.fd
        }
    }

    fn target_ptr(&self, i: usize) -> *mut RsSge {
        (self.ep().target.ptr as *mut RsSge).wrapping_add(i)
    }

    /// Reads entry `i` of our descriptor table (the peer writes it remotely).
    fn target_get(&self, i: usize) -> RsSge {
        // SAFETY: i < RS_SGL_SIZE; the table is live and aligned (calloc).
        unsafe { std::ptr::read_volatile(self.target_ptr(i)) }
    }

    fn target_set(&self, i: usize, v: RsSge) {
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(self.target_ptr(i), v) }
    }

    // ---- endpoint -------------------------------------------------------------------

    fn create_ep(&mut self) -> Result<(), Errno> {
        let id = self.id;
        // SAFETY: id is live and bound to a device (resolved or a request).
        let (ctx, pd) = unsafe { ((*id).verbs, (*id).pd) };
        if ctx.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: ctx is the id's open device.
        let max = unsafe { verbs::max_qp_wr(ctx) }.min(RS_QP_MAX_SIZE);
        self.sq_size = self.sq_size.clamp(RS_QP_MIN_SIZE, max.max(RS_QP_MIN_SIZE));
        self.rq_size = self.rq_size.clamp(RS_QP_MIN_SIZE, max.max(RS_QP_MIN_SIZE));
        // SAFETY: ctx is open.
        if unsafe { crate::sys::verbs::transport_type(ctx) } == crate::sys::verbs::IBV_TRANSPORT_IWARP {
            self.opts |= OPT_MSG_SEND;
            if self.sq_inline < RS_MSG_SIZE {
                self.sq_inline = RS_MSG_SIZE;
            }
        }
        // One CQ and one channel for both directions, owned by the id from here on
        // (rdma_destroy_qp destroys them).
        // SAFETY: ctx is open; the id takes ownership of the CQ and channel.
        unsafe {
            let ch = crate::sys::verbs::create_comp_channel(ctx)?;
            let cq = match crate::sys::verbs::create_cq(ctx, self.sq_size + self.rq_size, id as *mut c_void, ch) {
                Ok(cq) => cq,
                Err(e) => {
                    crate::sys::verbs::destroy_comp_channel(ch);
                    return Err(e);
                }
            };
            (*id).recv_cq_channel = ch;
            (*id).send_cq_channel = ch;
            (*id).recv_cq = cq;
            (*id).send_cq = cq;
            let _ = verbs::req_notify(cq);
        }
        let mut attr = crate::sys::verbs::QpInitAttr {
            qp_context: null_mut(),
            send_cq: self.cq(),
            recv_cq: self.cq(),
            srq: null_mut(),
            cap: crate::sys::verbs::QpCap { max_send_wr: self.sq_size, max_recv_wr: self.rq_size, max_send_sge: 2, max_recv_sge: 1, max_inline_data: self.sq_inline },
            qp_type: 2, // IBV_QPT_RC
            sq_sig_all: 1,
        };
        // SAFETY: id is live; attr is a valid ibv_qp_init_attr mirror.
        cm(unsafe { crate::capi::qp::rdma_create_qp(id, null_mut(), &mut attr as *mut _ as *mut crate::abi::cma::ibv_qp_init_attr) })?;
        self.sq_inline = attr.cap.max_inline_data;
        if self.opts & OPT_MSG_SEND != 0 && self.sq_inline < RS_MSG_SIZE {
            return Err(Errno::ENOTSUP);
        }
        // SAFETY: id now has its PD (rdma_create_qp used the device's).
        let pd = if pd.is_null() { unsafe { (*id).pd } } else { pd };

        let mut sbuf_total = self.sbuf_size;
        if self.sq_inline < RS_MAX_CTRL_MSG {
            sbuf_total += RS_MAX_CTRL_MSG * RS_QP_CTRL_SIZE;
        }
        let sbuf = Buf::new(sbuf_total as usize)?;
        let target = Buf::new((16 * RS_SGL_SIZE + IOMAP_ENTRY_SIZE * self.target_iomap_size) as usize)?;
        let mut rbuf_total = self.rbuf_size;
        if self.opts & OPT_MSG_SEND != 0 {
            rbuf_total += self.rq_size * RS_MSG_SIZE;
        }
        let rbuf = Buf::new(rbuf_total as usize)?;
        let mut ep = Ep { sbuf, smr: null_mut(), slkey: 0, target, target_mr: null_mut(), target_rkey: 0, rbuf, rmr: null_mut(), rlkey: 0, rrkey: 0, rmsg: vec![(0, 0); self.rq_size as usize + 1] };
        // SAFETY: pd is the id's PD; the buffers live in `ep`, which deregisters before freeing.
        unsafe {
            let (m, l, _) = verbs::reg_mr(pd, ep.sbuf.ptr, ep.sbuf.len, false)?;
            ep.smr = m;
            ep.slkey = l;
            let r = verbs::reg_mr(pd, ep.target.ptr, ep.target.len, true);
            match r {
                Ok((m, _, rk)) => {
                    ep.target_mr = m;
                    ep.target_rkey = rk;
                }
                Err(e) => {
                    verbs::dereg_mr(ep.smr);
                    return Err(e);
                }
            }
            match verbs::reg_mr(pd, ep.rbuf.ptr, ep.rbuf.len, true) {
                Ok((m, l, rk)) => {
                    ep.rmr = m;
                    ep.rlkey = l;
                    ep.rrkey = rk;
                }
                Err(e) => {
                    verbs::dereg_mr(ep.smr);
                    verbs::dereg_mr(ep.target_mr);
                    return Err(e);
                }
            }
        }
        self.ep = Some(ep);
        self.ssgl0_off = 0;
        self.sbuf_bytes_avail = self.sbuf_size;
        self.rbuf_free_offset = self.rbuf_size >> 1;
        self.rbuf_bytes_avail = self.rbuf_size >> 1;
        self.sqe_avail = self.sq_size - self.ctrl_max_seqno;
        self.rseq_comp = (self.rq_size >> 1) as u16;
        for _ in 0..self.rq_size {
            self.post_recv()?;
        }
        Ok(())
    }

    fn post_recv(&mut self) -> Result<(), Errno> {
        let qp = self.qp();
        if self.opts & OPT_MSG_SEND == 0 {
            // SAFETY: qp is live; no SGE.
            unsafe { verbs::post_recv(qp, WR_RECV, &mut []) }
        } else {
            let ep = self.ep();
            let mut sge = [Sge { addr: ep.rbuf.ptr as u64 + (self.rbuf_size + self.rbuf_msg_index * RS_MSG_SIZE) as u64, length: RS_MSG_SIZE, lkey: ep.rlkey }];
            let wr = WR_RECV | self.rbuf_msg_index as u64;
            self.rbuf_msg_index += 1;
            if self.rbuf_msg_index == self.rq_size {
                self.rbuf_msg_index = 0;
            }
            // SAFETY: the SGE is inside the registered receive buffer.
            unsafe { verbs::post_recv(qp, wr, &mut sge) }
        }
    }

    fn format_conn_data(&self) -> [u8; CONN_DATA_LEN] {
        let ep = self.ep();
        let mut d = [0u8; CONN_DATA_LEN];
        d[0] = 1;
        d[1] = CONN_FLAG_IOMAP | if cfg!(target_endian = "big") { CONN_FLAG_NET } else { 0 };
        d[2..4].copy_from_slice(&(self.rq_size as u16).to_be_bytes());
        d[7] = value_to_scale(self.target_iomap_size, 8) as u8;
        d[8..16].copy_from_slice(&(ep.target.ptr as u64).to_be_bytes());
        d[16..20].copy_from_slice(&ep.target_rkey.to_be_bytes());
        d[20..24].copy_from_slice(&RS_SGL_SIZE.to_be_bytes());
        d[24..32].copy_from_slice(&(ep.rbuf.ptr as u64).to_be_bytes());
        d[32..36].copy_from_slice(&ep.rrkey.to_be_bytes());
        d[36..40].copy_from_slice(&(self.rbuf_size >> 1).to_be_bytes());
        d
    }

    fn save_conn_data(&mut self, d: &[u8]) {
        let be64 = |o: usize| u64::from_be_bytes(d[o..o + 8].try_into().unwrap_or([0; 8]));
        let be32 = |o: usize| u32::from_be_bytes(d[o..o + 4].try_into().unwrap_or([0; 4]));
        self.remote_sgl = RsSge { addr: be64(8), key: be32(16), length: be32(20) };
        self.remote_sge = 1;
        let peer_net = d[1] & CONN_FLAG_NET != 0;
        if peer_net != cfg!(target_endian = "big") {
            self.opts |= OPT_SWAP_SGL;
        }
        if d[1] & CONN_FLAG_IOMAP != 0 {
            self.remote_iomap = RsSge { addr: self.remote_sgl.addr + 16 * self.remote_sgl.length as u64, key: self.remote_sgl.key, length: scale_to_value(d[7] as u32, 8) };
        }
        self.target_set(0, RsSge { addr: be64(24), key: be32(32), length: be32(36) });
        self.sseq_comp = u16::from_be_bytes([d[2], d[3]]);
    }

    // ---- messages -------------------------------------------------------------------

    fn post_msg(&mut self, msg: u32) -> Result<(), Errno> {
        let qp = self.qp();
        if self.opts & OPT_MSG_SEND == 0 {
            // SAFETY: qp is live; a zero-length write with immediate.
            unsafe { verbs::post_send(qp, msg as u64, &mut [], verbs::WR_RDMA_WRITE_WITH_IMM, 0, msg, 0, 0) }
        } else {
            let m = msg;
            let mut sge = [Sge { addr: &m as *const u32 as u64, length: 4, lkey: 0 }];
            // SAFETY: inline send: the provider copies the 4 bytes before returning.
            unsafe { verbs::post_send(qp, msg as u64, &mut sge, verbs::WR_SEND, verbs::SEND_INLINE, 0, 0, 0) }
        }
    }

    fn post_write_msg(&mut self, sgl: &mut [Sge], msg: u32, flags: c_int, addr: u64, rkey: u32) -> Result<(), Errno> {
        let qp = self.qp();
        if self.opts & OPT_MSG_SEND == 0 {
            // SAFETY: the SGEs are registered or inline; addr/rkey are the peer's.
            unsafe { verbs::post_send(qp, msg as u64, sgl, verbs::WR_RDMA_WRITE_WITH_IMM, flags, msg, addr, rkey) }
        } else {
            // SAFETY: as above.
            unsafe { verbs::post_send(qp, msg as u64, sgl, verbs::WR_RDMA_WRITE, flags, 0, addr, rkey)? };
            let m = msg;
            let mut sge = [Sge { addr: &m as *const u32 as u64, length: 4, lkey: 0 }];
            let wr = msg_set(msg_op(msg), 0) as u64 | WR_MSG_SEND;
            // SAFETY: inline send of a local word.
            unsafe { verbs::post_send(qp, wr, &mut sge, verbs::WR_SEND, verbs::SEND_INLINE, 0, 0, 0) }
        }
    }

    fn write_data(&mut self, sgl: &mut [Sge], length: u32, flags: c_int) -> Result<(), Errno> {
        self.sseq_no = self.sseq_no.wrapping_add(1);
        self.sqe_avail -= 1;
        if self.opts & OPT_MSG_SEND != 0 {
            self.sqe_avail -= 1;
        }
        self.sbuf_bytes_avail -= length;
        let i = self.target_sge;
        let mut t = self.target_get(i);
        let (addr, rkey) = (t.addr, t.key);
        t.addr += length as u64;
        t.length -= length;
        self.target_set(i, t);
        if t.length == 0 {
            self.target_sge = (i + 1) % RS_SGL_SIZE as usize;
        }
        self.post_write_msg(sgl, msg_set(OP_DATA, length), flags, addr, rkey)
    }

    fn ctrl_avail(&self) -> bool {
        self.ctrl_seqno != self.ctrl_max_seqno
    }

    fn ctrl2_avail(&self) -> bool {
        ((self.ctrl_seqno.wrapping_add(1)).wrapping_sub(self.ctrl_max_seqno) as i32) < 0
    }

    fn send_credits(&mut self) {
        self.ctrl_seqno = self.ctrl_seqno.wrapping_add(1);
        self.rseq_comp = self.rseq_no.wrapping_add((self.rq_size >> 1) as u16);
        let seq = msg_set(OP_SGL, (self.rseq_no as u32).wrapping_add(self.rq_size) & 0xFFFF);
        if self.rbuf_bytes_avail >= self.rbuf_size >> 1 {
            if self.opts & OPT_MSG_SEND != 0 {
                self.ctrl_seqno = self.ctrl_seqno.wrapping_add(1);
            }
            let (rbuf, rkey, slkey, sbuf) = {
                let ep = self.ep();
                (ep.rbuf.ptr as u64, ep.rrkey, ep.slkey, ep.sbuf.ptr)
            };
            let mut sge = RsSge { addr: rbuf + self.rbuf_free_offset as u64, key: rkey, length: self.rbuf_size >> 1 };
            if self.opts & OPT_SWAP_SGL != 0 {
                sge = RsSge { addr: sge.addr.swap_bytes(), key: sge.key.swap_bytes(), length: sge.length.swap_bytes() };
            }
            let (mut ib, flags) = if self.sq_inline < RS_MAX_CTRL_MSG {
                let slot = self.sbuf_size + RS_MAX_CTRL_MSG * (self.ctrl_seqno & (RS_QP_CTRL_SIZE - 1));
                let p = sbuf.wrapping_add(slot as usize) as *mut RsSge;
                // SAFETY: the control slots lie past sbuf_size inside the registered send buffer.
                unsafe { std::ptr::write_unaligned(p, sge) };
                (Sge { addr: p as u64, length: 16, lkey: slkey }, 0)
            } else {
                (Sge { addr: &sge as *const RsSge as u64, length: 16, lkey: 0 }, verbs::SEND_INLINE)
            };
            let raddr = self.remote_sgl.addr + self.remote_sge as u64 * 16;
            let rk = self.remote_sgl.key;
            let _ = self.post_write_msg(std::slice::from_mut(&mut ib), seq, flags, raddr, rk);
            self.rbuf_bytes_avail -= self.rbuf_size >> 1;
            self.rbuf_free_offset += self.rbuf_size >> 1;
            if self.rbuf_free_offset >= self.rbuf_size {
                self.rbuf_free_offset = 0;
            }
            self.remote_sge += 1;
            if self.remote_sge == self.remote_sgl.length {
                self.remote_sge = 0;
            }
        } else {
            let _ = self.post_msg(seq);
        }
    }

    fn give_credits(&self) -> bool {
        let want = self.rbuf_bytes_avail >= (self.rbuf_size >> 1) || (self.rseq_no.wrapping_sub(self.rseq_comp) as i16) >= 0;
        let ctrl = if self.opts & OPT_MSG_SEND == 0 { self.ctrl_avail() } else { self.ctrl2_avail() };
        want && ctrl && self.state & ST_CONNECTED != 0
    }

    fn update_credits(&mut self) {
        if self.give_credits() {
            self.send_credits();
        }
    }

    fn poll_cq(&mut self) -> Result<(), Errno> {
        let cq = self.cq();
        if cq.is_null() {
            return Ok(());
        }
        let mut rcnt = 0u32;
        loop {
            // SAFETY: cq is live while the QP exists.
            let wc = match unsafe { verbs::poll_cq(cq) } {
                Ok(Some(wc)) => wc,
                Ok(None) => break,
                Err(e) => return Err(e),
            };
            if wc.wr_id & WR_RECV != 0 {
                if wc.status != 0 {
                    continue;
                }
                rcnt += 1;
                let msg = match wc.imm {
                    Some(m) => m,
                    None => {
                        let idx = (wc.wr_id as u32) as usize;
                        let p = self.ep().rbuf.ptr.wrapping_add(self.rbuf_size as usize + idx * 4) as *const u32;
                        // SAFETY: the slot is inside the receive buffer (rq_size words past rbuf_size).
                        unsafe { std::ptr::read_unaligned(p) }
                    }
                };
                match msg_op(msg) {
                    OP_SGL => self.sseq_comp = msg_data(msg) as u16,
                    OP_IOMAP_SGL | OP_WRITE => {}
                    OP_CTRL => {
                        let d = msg_data(msg);
                        if d == CTRL_DISCONNECT {
                            self.state = ST_DISCONNECTED;
                            return Ok(());
                        } else if d == CTRL_SHUTDOWN {
                            if self.state & ST_WRITABLE != 0 {
                                self.state &= !ST_READABLE;
                            } else {
                                self.state = ST_DISCONNECTED;
                                return Ok(());
                            }
                        }
                    }
                    op => {
                        let tail = self.rmsg_tail;
                        // A length beyond our buffer would make recv read outside it.
                        let len = msg_data(msg).min(self.rbuf_size >> 1);
                        if let Some(ep) = self.ep.as_mut() {
                            ep.rmsg[tail] = (op, len);
                        }
                        self.rmsg_tail += 1;
                        if self.rmsg_tail == self.rq_size as usize + 1 {
                            self.rmsg_tail = 0;
                        }
                    }
                }
            } else {
                let data = wc.wr_id as u32;
                match msg_op(data) {
                    OP_SGL => self.ctrl_max_seqno = self.ctrl_max_seqno.wrapping_add(1),
                    OP_CTRL => {
                        self.ctrl_max_seqno = self.ctrl_max_seqno.wrapping_add(1);
                        if msg_data(data) == CTRL_DISCONNECT {
                            self.state = ST_DISCONNECTED;
                        }
                    }
                    OP_IOMAP_SGL => {
                        self.sqe_avail += 1;
                        if wc.wr_id & WR_MSG_SEND == 0 {
                            self.sbuf_bytes_avail += IOMAP_ENTRY_SIZE;
                        }
                    }
                    _ => {
                        self.sqe_avail += 1;
                        self.sbuf_bytes_avail += msg_data(data);
                    }
                }
                if wc.status != 0 && self.state & ST_CONNECTED != 0 {
                    self.state = ST_ERROR;
                    self.err = libc::EIO;
                }
            }
        }
        if self.state & ST_CONNECTED != 0 {
            for _ in 0..rcnt {
                if let Err(e) = self.post_recv() {
                    self.state = ST_ERROR;
                    self.err = e as c_int;
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Waits for one CQ event (the CQ is armed).
    fn get_cq_event(&mut self) -> Result<(), Errno> {
        if !self.cq_armed {
            return Ok(());
        }
        // SAFETY: the channel is live while the QP exists.
        match unsafe { verbs::get_cq_event(self.cq_channel()) } {
            Ok(()) => {
                self.unack_cqe += 1;
                if self.unack_cqe >= self.sq_size + self.rq_size {
                    // SAFETY: the events were read from this CQ's channel.
                    unsafe { verbs::ack_cq_events(self.cq(), self.unack_cqe) };
                    self.unack_cqe = 0;
                }
                self.cq_armed = false;
                Ok(())
            }
            Err(e) => {
                if e != Errno::EAGAIN && e != Errno::EINTR {
                    self.state = ST_ERROR;
                }
                Err(e)
            }
        }
    }

    /// Reads the CQ event if one is waiting (never blocks): after a wait on [`Stream::wait_fd`].
    pub fn consume_cq_event(&mut self) {
        if self.cq_armed && self.state & ST_CONNECTED != 0 && !self.cq_channel().is_null() {
            let mut p = libc::pollfd { fd: self.wait_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd, zero timeout.
            if unsafe { libc::poll(&mut p, 1, 0) } > 0 && p.revents & libc::POLLIN != 0 {
                let _ = self.get_cq_event();
            }
        }
    }

    fn process_cq(&mut self, nonblock: bool, test: fn(&Stream) -> bool) -> Result<(), Errno> {
        let r = loop {
            self.update_credits();
            let r = self.poll_cq();
            if test(self) {
                break Ok(());
            }
            if let Err(e) = r {
                break Err(e);
            }
            if nonblock {
                break Err(Errno::EWOULDBLOCK);
            }
            if !self.cq_armed {
                // SAFETY: the CQ is live.
                let _ = unsafe { verbs::req_notify(self.cq()) };
                self.cq_armed = true;
            } else {
                self.update_credits();
                if let Err(e) = self.get_cq_event() {
                    break Err(e);
                }
            }
        };
        self.update_credits();
        r
    }

    fn can_send(&self) -> bool {
        let sqe = if self.opts & OPT_MSG_SEND == 0 { self.sqe_avail >= 1 } else { self.sqe_avail >= 2 };
        sqe && self.sbuf_bytes_avail >= RS_SNDLOWAT && self.sseq_no != self.sseq_comp && self.target_get(self.target_sge).length != 0
    }

    fn conn_can_send(&self) -> bool {
        self.can_send() || self.state & ST_WRITABLE == 0
    }

    fn conn_can_send_ctrl(&self) -> bool {
        self.ctrl_avail() || self.state & ST_CONNECTED == 0
    }

    fn have_rdata(&self) -> bool {
        self.rmsg_head != self.rmsg_tail
    }

    fn conn_have_rdata(&self) -> bool {
        self.have_rdata() || self.state & ST_READABLE == 0
    }

    fn all_sends_done(&self) -> bool {
        (self.ctrl_max_seqno.wrapping_sub(self.ctrl_seqno)).wrapping_add(self.sqe_avail) == self.sq_size || self.state & ST_CONNECTED == 0
    }

    fn poll_all(&self) -> bool {
        true
    }

    fn check_connected(&self) -> Result<(), Errno> {
        let was_connected = self.state & ST_CONNECTED != 0 || self.state == ST_DISCONNECTED || self.state == ST_ERROR;
        if was_connected && self.ep.is_some() {
            Ok(())
        } else {
            Err(Errno::ENOTCONN)
        }
    }

    // ---- data -----------------------------------------------------------------------

    /// Sends up to `buf.len()` bytes.
    pub fn send(&mut self, buf: &[u8], flags: c_int) -> Result<usize, Errno> {
        self.check_connected()?;
        let nonblock = self.nonblock || flags & libc::MSG_DONTWAIT != 0;
        self.send_iomaps(nonblock)?;
        let len = buf.len();
        let mut left = len;
        let mut olen = RS_OLAP_START_SIZE;
        let mut off = 0usize;
        let mut res: Result<(), Errno> = Ok(());
        while left > 0 {
            if !self.can_send() {
                if let Err(e) = self.process_cq(nonblock, Stream::conn_can_send) {
                    res = Err(e);
                    break;
                }
                if self.state & ST_WRITABLE == 0 {
                    res = Err(Errno::ECONNRESET);
                    break;
                }
            }
            let mut xfer = if (olen as usize) < left {
                let x = olen;
                if olen < RS_MAX_TRANSFER {
                    olen <<= 1;
                }
                x
            } else {
                left as u32
            };
            xfer = xfer.min(self.sbuf_bytes_avail).min(self.target_get(self.target_sge).length);
            let chunk = &buf[off..off + xfer as usize];
            let r = if xfer <= self.sq_inline {
                let mut sge = [Sge { addr: chunk.as_ptr() as u64, length: xfer, lkey: 0 }];
                self.write_data(&mut sge, xfer, verbs::SEND_INLINE)
            } else {
                let (sbuf, slkey) = {
                    let ep = self.ep();
                    (ep.sbuf.ptr, ep.slkey)
                };
                let left_in_sbuf = self.sbuf_size - self.ssgl0_off;
                if xfer <= left_in_sbuf {
                    let dst = sbuf.wrapping_add(self.ssgl0_off as usize);
                    // SAFETY: [ssgl0_off, +xfer) lies within sbuf_size of the send buffer.
                    unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), dst, xfer as usize) };
                    let mut sge = [Sge { addr: dst as u64, length: xfer, lkey: slkey }];
                    let r = self.write_data(&mut sge, xfer, 0);
                    if xfer < left_in_sbuf {
                        self.ssgl0_off += xfer;
                    } else {
                        self.ssgl0_off = 0;
                    }
                    r
                } else {
                    let first = left_in_sbuf;
                    let second = xfer - first;
                    let dst = sbuf.wrapping_add(self.ssgl0_off as usize);
                    // SAFETY: the two pieces fit the end and the start of the send buffer.
                    unsafe {
                        std::ptr::copy_nonoverlapping(chunk.as_ptr(), dst, first as usize);
                        std::ptr::copy_nonoverlapping(chunk.as_ptr().add(first as usize), sbuf, second as usize);
                    }
                    let mut sge = [Sge { addr: dst as u64, length: first, lkey: slkey }, Sge { addr: sbuf as u64, length: second, lkey: slkey }];
                    let r = self.write_data(&mut sge, xfer, 0);
                    self.ssgl0_off = second;
                    r
                }
            };
            if let Err(e) = r {
                res = Err(e);
                break;
            }
            left -= xfer as usize;
            off += xfer as usize;
        }
        match res {
            Err(e) if left == len => Err(e),
            _ => Ok(len - left),
        }
    }

    /// Receives up to `buf.len()` bytes (0 at end of stream).
    pub fn recv(&mut self, buf: &mut [u8], flags: c_int) -> Result<usize, Errno> {
        self.check_connected()?;
        let nonblock = self.nonblock || flags & libc::MSG_DONTWAIT != 0;
        let len = buf.len();
        let mut left = len;
        let mut off = 0usize;
        let mut res: Result<(), Errno> = Ok(());
        loop {
            if !self.have_rdata() {
                if let Err(e) = self.process_cq(nonblock, Stream::conn_have_rdata) {
                    res = Err(e);
                    break;
                }
            }
            if flags & libc::MSG_PEEK != 0 {
                left = len - self.peek(buf);
                break;
            }
            let rbuf = self.ep().rbuf.ptr;
            while left > 0 && self.have_rdata() {
                let head = self.rmsg_head;
                let data = self.ep().rmsg[head].1;
                let mut rsize;
                if (left as u32) < data {
                    rsize = left as u32;
                    if let Some(ep) = self.ep.as_mut() {
                        ep.rmsg[head].1 -= left as u32;
                    }
                } else {
                    self.rseq_no = self.rseq_no.wrapping_add(1);
                    rsize = data;
                    self.rmsg_head += 1;
                    if self.rmsg_head == self.rq_size as usize + 1 {
                        self.rmsg_head = 0;
                    }
                }
                left -= rsize as usize;
                let end = self.rbuf_size - self.rbuf_offset;
                if rsize > end {
                    // SAFETY: [rbuf_offset, rbuf_size) is inside the receive buffer; buf has room.
                    unsafe { std::ptr::copy_nonoverlapping(rbuf.add(self.rbuf_offset as usize), buf.as_mut_ptr().add(off), end as usize) };
                    self.rbuf_offset = 0;
                    off += end as usize;
                    rsize -= end;
                    self.rbuf_bytes_avail += end;
                }
                // SAFETY: as above.
                unsafe { std::ptr::copy_nonoverlapping(rbuf.add(self.rbuf_offset as usize), buf.as_mut_ptr().add(off), rsize as usize) };
                self.rbuf_offset += rsize;
                off += rsize as usize;
                self.rbuf_bytes_avail += rsize;
            }
            if !(left > 0 && flags & libc::MSG_WAITALL != 0 && self.state & ST_READABLE != 0) {
                break;
            }
        }
        match res {
            Err(e) if left == len => Err(e),
            _ => Ok(len - left),
        }
    }

    fn peek(&self, buf: &mut [u8]) -> usize {
        let ep = self.ep();
        let mut left = buf.len();
        let mut head = self.rmsg_head;
        let mut roff = self.rbuf_offset;
        let mut off = 0usize;
        while left > 0 && head != self.rmsg_tail {
            let data = ep.rmsg[head].1;
            let mut rsize = if (left as u32) < data {
                left as u32
            } else {
                head += 1;
                if head == self.rq_size as usize + 1 {
                    head = 0;
                }
                data
            };
            left -= rsize as usize;
            let end = self.rbuf_size - roff;
            if rsize > end {
                // SAFETY: inside the receive buffer and buf.
                unsafe { std::ptr::copy_nonoverlapping(ep.rbuf.ptr.add(roff as usize), buf.as_mut_ptr().add(off), end as usize) };
                roff = 0;
                off += end as usize;
                rsize -= end;
            }
            // SAFETY: as above.
            unsafe { std::ptr::copy_nonoverlapping(ep.rbuf.ptr.add(roff as usize), buf.as_mut_ptr().add(off), rsize as usize) };
            roff += rsize;
            off += rsize as usize;
        }
        off
    }

    /// rpoll's view: the ready events among `events`, processing completions first.
    pub fn poll_events(&mut self, events: i16) -> i16 {
        let mut rev = 0i16;
        if self.state == ST_LISTENING {
            let mut p = libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd, zero timeout.
            if unsafe { libc::poll(&mut p, 1, 0) } > 0 && p.revents & libc::POLLIN != 0 {
                rev |= libc::POLLIN & events;
            }
            return rev;
        }
        if self.state & ST_CONNECTED != 0 {
            let _ = self.process_cq(true, Stream::poll_all);
        }
        if self.state & ST_CONNECTED != 0 {
            if events & libc::POLLIN != 0 && self.conn_have_rdata() {
                rev |= libc::POLLIN;
            }
            if events & libc::POLLOUT != 0 && self.can_send() {
                rev |= libc::POLLOUT;
            }
        } else if self.state == ST_DISCONNECTED {
            rev |= libc::POLLHUP | (events & libc::POLLIN);
        } else if self.state == ST_INIT || self.state == ST_BOUND {
            // An unconnected socket is writable-idle like TCP's: report nothing.
        }
        if self.state & (ST_ERROR | ST_CONNECT_ERROR) != 0 {
            rev |= libc::POLLERR;
        }
        rev
    }

    /// Arms the CQ before rpoll sleeps; returns false when events are already pending.
    pub fn arm(&mut self) -> bool {
        if self.state & ST_CONNECTED != 0 && !self.cq().is_null() && !self.cq_armed {
            // SAFETY: the CQ is live.
            let _ = unsafe { verbs::req_notify(self.cq()) };
            self.cq_armed = true;
            return false;
        }
        false
    }

    // ---- connection management ------------------------------------------------------

    pub fn bind(&mut self, addr: *const libc::sockaddr) -> Result<(), Errno> {
        // SAFETY: addr was checked non-null by the caller and points to a sockaddr of its family.
        cm(unsafe { crate::capi::cm::rdma_bind_addr(self.id, addr as *mut libc::sockaddr) })?;
        self.state = ST_BOUND;
        Ok(())
    }

    pub fn listen(&mut self, backlog: c_int) -> Result<(), Errno> {
        if self.state == ST_LISTENING {
            return Ok(());
        }
        // SAFETY: id is live.
        cm(unsafe { crate::capi::conn::rdma_listen(self.id, backlog) })?;
        self.state = ST_LISTENING;
        Ok(())
    }

    pub fn connect(&mut self, addr: *const libc::sockaddr) -> Result<(), Errno> {
        match self.state {
            ST_INIT | ST_BOUND => {}
            ST_CONNECT_ERROR | ST_DISCONNECTED | ST_ERROR => return Err(Errno::ENOTCONN),
            s if s & ST_CONNECTED != 0 => return Err(Errno::EISCONN),
            _ => return Err(Errno::EINVAL),
        }
        let r = self.do_connect(addr);
        if let Err(e) = r {
            self.state = ST_CONNECT_ERROR;
            self.err = e as c_int;
        }
        r
    }

    fn do_connect(&mut self, addr: *const libc::sockaddr) -> Result<(), Errno> {
        let id = self.id;
        let mut last = Errno::ETIMEDOUT;
        let mut ok = false;
        for retry in 0..3 {
            // SAFETY: id is a synchronous id: this returns once the address is resolved.
            if unsafe { crate::capi::cm::rdma_resolve_addr(id, null_mut(), addr as *mut libc::sockaddr, 1000 << retry) } == 0 {
                ok = true;
                break;
            }
            last = errno_or(Errno::EIO);
            if last != Errno::ETIMEDOUT {
                break;
            }
        }
        if !ok {
            return Err(last);
        }
        ok = false;
        for retry in 0..3 {
            // SAFETY: as above.
            if unsafe { crate::capi::cm::rdma_resolve_route(id, 1000 << retry) } == 0 {
                ok = true;
                break;
            }
            last = errno_or(Errno::EIO);
            if last != Errno::ETIMEDOUT {
                break;
            }
        }
        if !ok {
            return Err(last);
        }
        self.create_ep()?;
        let data = self.format_conn_data();
        let mut param = rdma_conn_param {
            private_data: data.as_ptr() as *const c_void,
            private_data_len: CONN_DATA_LEN as u8,
            responder_resources: 0,
            initiator_depth: if self.opts & OPT_MSG_SEND != 0 { 1 } else { 0 },
            flow_control: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            srq: 0,
            qp_num: 0,
        };
        // SAFETY: id has a QP; param and data outlive the call (synchronous).
        cm(unsafe { crate::capi::conn::rdma_connect(id, &mut param) })?;
        // SAFETY: a synchronous connect leaves the ESTABLISHED event on the id.
        let resp = unsafe { event_private_data((*id).event) };
        match resp {
            Some(d) if d.len() >= CONN_DATA_LEN && d[0] == 1 => {
                let d = d.to_vec();
                self.save_conn_data(&d);
                self.state = ST_CONNECT_RDWR;
                Ok(())
            }
            _ => Err(Errno::ENOTSUP),
        }
    }

    pub fn shutdown(&mut self, how: c_int) -> Result<(), Errno> {
        if self.state & ST_CONNECTED != 0 {
            let ctrl;
            if how == libc::SHUT_RDWR {
                ctrl = CTRL_DISCONNECT;
                self.state &= !(ST_READABLE | ST_WRITABLE);
            } else if how == libc::SHUT_WR {
                self.state &= !ST_WRITABLE;
                ctrl = if self.state & ST_READABLE != 0 { CTRL_SHUTDOWN } else { CTRL_DISCONNECT };
            } else {
                self.state &= !ST_READABLE;
                if self.state & ST_WRITABLE != 0 {
                    return Ok(());
                }
                ctrl = CTRL_DISCONNECT;
            }
            if !self.ctrl_avail() {
                self.process_cq(false, Stream::conn_can_send_ctrl)?;
            }
            if self.state & ST_CONNECTED != 0 && self.ctrl_avail() {
                self.ctrl_seqno = self.ctrl_seqno.wrapping_add(1);
                self.post_msg(msg_set(OP_CTRL, ctrl))?;
            }
        }
        if self.state & ST_CONNECTED != 0 {
            let _ = self.process_cq(false, Stream::all_sends_done);
        }
        if self.state & ST_DISCONNECTED != 0 && !self.qp().is_null() {
            // SAFETY: id is live and connected at the CM level.
            unsafe { crate::capi::conn::rdma_disconnect(self.id) };
        }
        Ok(())
    }

    pub fn local_addr(&self) -> libc::sockaddr_storage {
        // SAFETY: id is live; the union is plain data.
        unsafe { (*self.id).route.addr.src.storage }
    }

    pub fn peer_addr(&self) -> libc::sockaddr_storage {
        // SAFETY: as above.
        unsafe { (*self.id).route.addr.dst.storage }
    }

    pub fn is_connected_state(&self) -> bool {
        self.state & ST_CONNECTED != 0
    }

    pub fn is_listening(&self) -> bool {
        self.state == ST_LISTENING
    }

    pub fn fd(&self) -> c_int {
        self.fd
    }

    pub fn nonblocking(&self) -> bool {
        self.nonblock
    }

    pub fn set_nonblocking(&mut self, on: bool) {
        self.nonblock = on;
    }

    fn destroy(&mut self) {
        let id = self.id;
        if id.is_null() {
            return;
        }
        // SAFETY: id is live; unacked CQ events are acked before the CQ goes away.
        unsafe {
            if !(*id).qp.is_null() {
                if self.unack_cqe > 0 && !(*id).recv_cq.is_null() {
                    verbs::ack_cq_events((*id).recv_cq, self.unack_cqe);
                }
                self.unack_cqe = 0;
                crate::capi::qp::rdma_destroy_qp(id);
            } else if !(*id).recv_cq.is_null() {
                crate::sys::verbs::destroy_cq((*id).recv_cq);
                crate::sys::verbs::destroy_comp_channel((*id).recv_cq_channel);
                (*id).recv_cq = null_mut();
                (*id).send_cq = null_mut();
                (*id).recv_cq_channel = null_mut();
                (*id).send_cq_channel = null_mut();
            }
            for m in self.iomaps.drain(..) {
                verbs::dereg_mr(m.mr);
            }
            if let Some(ep) = self.ep.take() {
                verbs::dereg_mr(ep.smr);
                verbs::dereg_mr(ep.target_mr);
                verbs::dereg_mr(ep.rmr);
            }
            crate::capi::cm::rdma_destroy_id(id);
        }
        self.id = null_mut();
    }
}

/// The private data of a CM event, if any.
///
/// # Safety
/// `ev` is null or a live event.
unsafe fn event_private_data<'a>(ev: *mut rdma_cm_event) -> Option<&'a [u8]> {
    if ev.is_null() {
        return None;
    }
    // SAFETY: ev is live; conn is the member connection events use.
    unsafe {
        let c = (*ev).param.conn;
        if c.private_data.is_null() {
            return None;
        }
        Some(std::slice::from_raw_parts(c.private_data as *const u8, c.private_data_len as usize))
    }
}

fn value_to_scale(value: u32, bits: u32) -> u32 {
    if value <= (1 << (bits - 1)) {
        value
    } else {
        (1 << (bits - 1)) | (value >> bits)
    }
}

fn scale_to_value(value: u32, bits: u32) -> u32 {
    if value <= (1 << (bits - 1)) {
        value
    } else {
        (value & !(1 << (bits - 1))) << bits
    }
}

/// Accepts one connection on a listening rsocket; returns the new rsocket.
pub fn accept(h: &Handle) -> Result<c_int, Errno> {
    let (lid, lfd, nonblock) = {
        let l = lock(h);
        if !l.is_listening() {
            return Err(Errno::EBADF);
        }
        (l.id, l.fd, l.nonblock)
    };
    let mut p = libc::pollfd { fd: lfd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, if nonblock { 0 } else { -1 }) };
    if n <= 0 {
        return Err(if n == 0 { Errno::EAGAIN } else { errno_or(Errno::EINTR) });
    }
    let mut nid: *mut rdma_cm_id = null_mut();
    // SAFETY: lid is a live listening synchronous id.
    cm(unsafe { crate::capi::conn::rdma_get_request(lid, &mut nid) })?;
    let mut s = {
        let l = lock(h);
        inherit(&l, nid)
    };
    // SAFETY: the request event stays on the new id until it is acked.
    let req = unsafe { event_private_data((*nid).event) }.map(|d| d.to_vec());
    let r = (|| {
        let req = req.ok_or(Errno::EINVAL)?;
        if req.len() < CONN_DATA_LEN || req[0] != 1 {
            return Err(Errno::EINVAL);
        }
        s.create_ep()?;
        s.save_conn_data(&req);
        let data = s.format_conn_data();
        // SAFETY: the request event is live on the id.
        let mut param = unsafe { (*(*nid).event).param.conn };
        param.private_data = data.as_ptr() as *const c_void;
        param.private_data_len = CONN_DATA_LEN as u8;
        // SAFETY: nid is live with its QP; param outlives the (synchronous) call.
        cm(unsafe { crate::capi::conn::rdma_accept(nid, &mut param) })?;
        s.state = ST_CONNECT_RDWR;
        Ok(())
    })();
    if let Err(e) = r {
        // SAFETY: nid is live.
        unsafe { crate::capi::conn::rdma_reject(nid, std::ptr::null(), 0) };
        s.destroy();
        return Err(e);
    }
    let fd = s.fd;
    table().insert(fd, Arc::new(Mutex::new(s)));
    Ok(fd)
}

/// Closes an rsocket.
pub fn close(fd: c_int) -> Result<(), Errno> {
    let h = table().remove(&fd).ok_or(Errno::EBADF)?;
    let mut s = lock(&h);
    if s.state & ST_CONNECTED != 0 {
        let _ = s.shutdown(libc::SHUT_RDWR);
    }
    s.destroy();
    Ok(())
}

/// Socket options.
pub fn setsockopt(h: &Handle, level: c_int, name: c_int, val: Option<c_int>, raw: *const c_void, len: libc::socklen_t) -> Result<(), Errno> {
    let mut s = lock(h);
    let v = val.ok_or(Errno::EINVAL);
    match level {
        libc::SOL_SOCKET => match name {
            libc::SO_REUSEADDR => {
                let id = s.id;
                // SAFETY: id is live; raw points to `len` readable bytes (checked by the caller).
                let r = unsafe { crate::capi::cm::rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, raw as *mut c_void, len as usize) };
                if r != 0 {
                    let e = errno_or(Errno::EINVAL);
                    if e != Errno::ENOSYS && s.state == ST_INIT {
                        return Err(e);
                    }
                }
                s.so_reuseaddr = v?;
                Ok(())
            }
            libc::SO_RCVBUF => {
                let v = v? as u32;
                if s.ep.is_none() {
                    s.rbuf_size = v << 1;
                }
                Ok(())
            }
            libc::SO_SNDBUF => {
                let v = v? as u32;
                if s.ep.is_none() {
                    s.sbuf_size = v << 1;
                }
                if s.sbuf_size < RS_SNDLOWAT {
                    s.sbuf_size = RS_SNDLOWAT << 1;
                }
                Ok(())
            }
            libc::SO_LINGER | libc::SO_OOBINLINE => Ok(()),
            libc::SO_KEEPALIVE => {
                s.so_keepalive = v?;
                Ok(())
            }
            _ => Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_TCP => match name {
            libc::TCP_NODELAY => {
                s.tcp_nodelay = v?;
                Ok(())
            }
            libc::TCP_KEEPCNT | libc::TCP_KEEPINTVL | libc::TCP_MAXSEG | libc::TCP_CONGESTION => Ok(()),
            libc::TCP_KEEPIDLE => {
                if v? <= 0 {
                    return Err(Errno::EINVAL);
                }
                Ok(())
            }
            _ => Err(Errno::ENOTSUP),
        },
        SOL_RDMA => {
            if s.ep.is_some() {
                return Err(Errno::EINVAL);
            }
            let v = v? as u32;
            match name {
                RDMA_SQSIZE => s.sq_size = v.min(RS_QP_MAX_SIZE),
                RDMA_RQSIZE => s.rq_size = v.min(RS_QP_MAX_SIZE),
                RDMA_INLINE => s.sq_inline = v.min(RS_QP_MAX_SIZE),
                RDMA_IOMAPSIZE => s.target_iomap_size = scale_to_value(value_to_scale(v, 8) & 0xFF, 8) & 0xFFFF,
                _ => return Err(Errno::ENOTSUP),
            }
            Ok(())
        }
        _ => Err(Errno::ENOTSUP),
    }
}

/// Socket options: the int value of an option.
pub fn getsockopt(h: &Handle, level: c_int, name: c_int) -> Result<c_int, Errno> {
    let mut s = lock(h);
    let v = match level {
        libc::SOL_SOCKET => match name {
            libc::SO_REUSEADDR => s.so_reuseaddr,
            libc::SO_KEEPALIVE => s.so_keepalive,
            libc::SO_RCVBUF => (s.rbuf_size >> 1) as c_int,
            libc::SO_SNDBUF => (s.sbuf_size >> 1) as c_int,
            libc::SO_ERROR => {
                let e = s.err;
                s.err = 0;
                e
            }
            libc::SO_TYPE => libc::SOCK_STREAM,
            _ => return Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_TCP => match name {
            libc::TCP_NODELAY => s.tcp_nodelay,
            libc::TCP_MAXSEG => {
                if s.state & ST_CONNECTED != 0 {
                    RS_MAX_TRANSFER as c_int
                } else {
                    536
                }
            }
            _ => return Err(Errno::ENOTSUP),
        },
        SOL_RDMA => match name {
            RDMA_SQSIZE => s.sq_size as c_int,
            RDMA_RQSIZE => s.rq_size as c_int,
            RDMA_INLINE => s.sq_inline as c_int,
            RDMA_IOMAPSIZE => s.target_iomap_size as c_int,
            _ => return Err(Errno::ENOTSUP),
        },
        _ => return Err(Errno::ENOTSUP),
    };
    Ok(v)
}

/// rpoll over a mix of rsockets and ordinary descriptors.
pub fn poll(fds: &mut [libc::pollfd], timeout: c_int) -> Result<c_int, Errno> {
    let start = std::time::Instant::now();
    loop {
        let n = check_fds(fds)?;
        if n > 0 || timeout == 0 {
            return Ok(n);
        }
        // Arm, then look once more so that nothing that arrived meanwhile is missed.
        let mut rfds: Vec<libc::pollfd> = Vec::with_capacity(fds.len());
        let mut handles: Vec<Option<Handle>> = Vec::with_capacity(fds.len());
        for f in fds.iter() {
            match table().get(&f.fd).cloned() {
                Some(h) => {
                    let wfd = {
                        let mut s = lock(&h);
                        s.arm();
                        s.wait_fd()
                    };
                    rfds.push(libc::pollfd { fd: wfd, events: libc::POLLIN, revents: 0 });
                    handles.push(Some(h));
                }
                None => {
                    rfds.push(*f);
                    handles.push(None);
                }
            }
        }
        let n = check_fds(fds)?;
        if n > 0 {
            return Ok(n);
        }
        let wait = if timeout < 0 {
            -1
        } else {
            let el = start.elapsed().as_millis() as i64;
            if el >= timeout as i64 {
                return Ok(0);
            }
            (timeout as i64 - el) as c_int
        };
        // SAFETY: rfds is a valid array of its length.
        let r = unsafe { libc::poll(rfds.as_mut_ptr(), rfds.len() as libc::nfds_t, wait) };
        if r < 0 {
            return Err(errno_or(Errno::EINTR));
        }
        if r == 0 {
            return Ok(0);
        }
        for (i, h) in handles.iter().enumerate() {
            if let Some(h) = h {
                if rfds[i].revents & libc::POLLIN != 0 {
                    lock(h).consume_cq_event();
                }
            }
        }
    }
}

fn check_fds(fds: &mut [libc::pollfd]) -> Result<c_int, Errno> {
    let mut n = 0;
    for f in fds.iter_mut() {
        f.revents = 0;
        if f.fd < 0 {
            continue;
        }
        match table().get(&f.fd).cloned() {
            Some(h) => {
                f.revents = lock(&h).poll_events(f.events);
            }
            None => {
                let mut p = libc::pollfd { fd: f.fd, events: f.events, revents: 0 };
                // SAFETY: one valid pollfd, zero timeout.
                if unsafe { libc::poll(&mut p, 1, 0) } > 0 {
                    f.revents = p.revents;
                }
            }
        }
        if f.revents != 0 {
            n += 1;
        }
    }
    Ok(n)
}

/// Waits (with no lock held) until the stream's wait descriptor is readable, then
/// consumes the CQ event.
fn wait_on(h: &Handle, fd: c_int) -> Result<(), Errno> {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, -1) };
    if r < 0 {
        return Err(errno_or(Errno::EINTR));
    }
    lock(h).consume_cq_event();
    Ok(())
}

impl Stream {
    /// Arms the CQ (if not yet) and returns the descriptor a blocked call sleeps on.
    fn prepare_wait(&mut self) -> c_int {
        self.arm();
        self.wait_fd()
    }
}

/// rsend: a blocking send sleeps without holding the socket, so that another thread's
/// rrecv on it keeps going.
pub fn send(h: &Handle, buf: &[u8], flags: c_int) -> Result<usize, Errno> {
    let mut sent = 0usize;
    loop {
        let fd;
        {
            let mut s = lock(h);
            let nb = s.nonblock || flags & libc::MSG_DONTWAIT != 0;
            if !nb && s.is_connected_state() {
                fd = s.prepare_wait();
            } else {
                fd = -1;
            }
            match s.send(&buf[sent..], flags | libc::MSG_DONTWAIT) {
                Ok(n) => {
                    sent += n;
                    if sent == buf.len() || nb {
                        return Ok(sent);
                    }
                    // Progress: try again at once; only an EAGAIN sleeps.
                    continue;
                }
                Err(Errno::EAGAIN) if !nb && fd >= 0 => {}
                Err(e) => return if sent > 0 { Ok(sent) } else { Err(e) },
            }
        }
        if let Err(e) = wait_on(h, fd) {
            return if sent > 0 { Ok(sent) } else { Err(e) };
        }
    }
}

/// rrecv: as [`send`], sleeping without holding the socket.
pub fn recv(h: &Handle, buf: &mut [u8], flags: c_int) -> Result<usize, Errno> {
    let len = buf.len();
    let mut got = 0usize;
    let waitall = flags & libc::MSG_WAITALL != 0 && flags & libc::MSG_PEEK == 0;
    let inner = (flags & !libc::MSG_WAITALL) | libc::MSG_DONTWAIT;
    loop {
        let fd;
        {
            let mut s = lock(h);
            let nb = s.nonblock || flags & libc::MSG_DONTWAIT != 0;
            if !nb && s.is_connected_state() {
                fd = s.prepare_wait();
            } else {
                fd = -1;
            }
            match s.recv(&mut buf[got..], inner) {
                Ok(0) => return Ok(got),
                Ok(n) => {
                    got += n;
                    if got == len || !waitall || nb {
                        return Ok(got);
                    }
                    continue;
                }
                Err(Errno::EAGAIN) if !nb && fd >= 0 => {}
                Err(e) => return if got > 0 { Ok(got) } else { Err(e) },
            }
        }
        if let Err(e) = wait_on(h, fd) {
            return if got > 0 { Ok(got) } else { Err(e) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_words() {
        let m = msg_set(OP_SGL, 0x1234);
        assert_eq!(m, 0x8000_1234);
        assert_eq!(msg_op(m), OP_SGL);
        assert_eq!(msg_data(m), 0x1234);
        assert_eq!(msg_op(msg_set(OP_CTRL, CTRL_SHUTDOWN)), OP_CTRL);
        assert_eq!(msg_data(msg_set(OP_DATA, 0x3FFF_FFFF)), 0x1FFF_FFFF);
    }

    #[test]
    fn iomap_size_scale() {
        assert_eq!(value_to_scale(0, 8), 0);
        assert_eq!(value_to_scale(128, 8), 128);
        assert_eq!(scale_to_value(value_to_scale(4096, 8), 8), 4096);
    }

    #[test]
    fn bad_socket_arguments() {
        assert_eq!(create(libc::AF_UNIX, libc::SOCK_STREAM, 0).err(), Some(Errno::ENOTSUP));
        assert_eq!(create(libc::AF_INET, libc::SOCK_SEQPACKET, 0).err(), Some(Errno::ENOTSUP));
        assert_eq!(create(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_UDP).err(), Some(Errno::ENOTSUP));
        assert_eq!(create(libc::AF_INET, libc::SOCK_DGRAM, 0).err(), Some(Errno::ENOTSUP));
        assert_eq!(lookup(-1).err(), Some(Errno::EBADF));
        assert_eq!(close(-1).err(), Some(Errno::EBADF));
    }

    #[test]
    fn rpoll_on_ordinary_descriptors() {
        let mut fds = [0 as c_int; 2];
        // SAFETY: a valid two-int array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let mut p = [libc::pollfd { fd: fds[0], events: libc::POLLIN, revents: 0 }, libc::pollfd { fd: fds[1], events: libc::POLLOUT, revents: 0 }];
        assert_eq!(poll(&mut p, 0), Ok(1));
        assert_eq!(p[1].revents, libc::POLLOUT);
        p[1].events = 0;
        assert_eq!(poll(&mut p, 20), Ok(0));
        // SAFETY: the pipe's descriptors.
        unsafe {
            libc::write(fds[1], b"x".as_ptr() as *const c_void, 1);
        }
        assert_eq!(poll(&mut p, -1), Ok(1));
        assert_eq!(p[0].revents, libc::POLLIN);
        // SAFETY: closing our own pipe.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }
}

impl Stream {
    /// Copies `data` into the send ring at the current position; returns the SGEs (1 or 2).
    fn stage(&mut self, data: &[u8]) -> ([Sge; 2], usize) {
        let (sbuf, slkey) = {
            let ep = self.ep();
            (ep.sbuf.ptr, ep.slkey)
        };
        let n = data.len() as u32;
        let room = self.sbuf_size - self.ssgl0_off;
        let dst = sbuf.wrapping_add(self.ssgl0_off as usize);
        if n <= room {
            // SAFETY: [ssgl0_off, +n) lies within sbuf_size of the send buffer.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, n as usize) };
            self.ssgl0_off = if n < room { self.ssgl0_off + n } else { 0 };
            ([Sge { addr: dst as u64, length: n, lkey: slkey }, Sge::default()], 1)
        } else {
            let second = n - room;
            // SAFETY: the two pieces fit the end and the start of the send buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), dst, room as usize);
                std::ptr::copy_nonoverlapping(data.as_ptr().add(room as usize), sbuf, second as usize);
            }
            self.ssgl0_off = second;
            ([Sge { addr: dst as u64, length: room, lkey: slkey }, Sge { addr: sbuf as u64, length: second, lkey: slkey }], 2)
        }
    }

    fn wait_can_send(&mut self, nonblock: bool) -> Result<(), Errno> {
        if !self.can_send() {
            self.process_cq(nonblock, Stream::conn_can_send)?;
            if self.state & ST_WRITABLE == 0 {
                return Err(Errno::ECONNRESET);
            }
        }
        Ok(())
    }

    /// Writes the riomap registrations the peer has not seen into its table.
    fn send_iomaps(&mut self, nonblock: bool) -> Result<(), Errno> {
        while let Some(pos) = self.iomaps.iter().position(|m| !m.sent) {
            self.wait_can_send(nonblock)?;
            let (offset, addr, rkey, len, index) = {
                let m = &self.iomaps[pos];
                (m.offset, m.addr, m.rkey, m.len, m.index as u32)
            };
            let mut e = [0u8; IOMAP_ENTRY_SIZE as usize];
            if self.opts & OPT_SWAP_SGL == 0 {
                e[0..8].copy_from_slice(&offset.to_ne_bytes());
                e[8..16].copy_from_slice(&addr.to_ne_bytes());
                e[16..20].copy_from_slice(&rkey.to_ne_bytes());
                e[20..24].copy_from_slice(&len.to_ne_bytes());
            } else {
                e[0..8].copy_from_slice(&offset.swap_bytes().to_ne_bytes());
                e[8..16].copy_from_slice(&addr.swap_bytes().to_ne_bytes());
                e[16..20].copy_from_slice(&rkey.swap_bytes().to_ne_bytes());
                e[20..24].copy_from_slice(&len.swap_bytes().to_ne_bytes());
            }
            self.sseq_no = self.sseq_no.wrapping_add(1);
            self.sqe_avail -= 1;
            if self.opts & OPT_MSG_SEND != 0 {
                self.sqe_avail -= 1;
            }
            self.sbuf_bytes_avail -= IOMAP_ENTRY_SIZE;
            let raddr = self.remote_iomap.addr + index as u64 * IOMAP_ENTRY_SIZE as u64;
            let rk = self.remote_iomap.key;
            let msg = msg_set(OP_IOMAP_SGL, index);
            let r = if self.sq_inline >= IOMAP_ENTRY_SIZE {
                let mut sge = [Sge { addr: e.as_ptr() as u64, length: IOMAP_ENTRY_SIZE, lkey: 0 }];
                self.post_write_msg(&mut sge, msg, verbs::SEND_INLINE, raddr, rk)
            } else {
                let (mut sges, n) = self.stage(&e);
                self.post_write_msg(&mut sges[..n], msg, 0, raddr, rk)
            };
            self.iomaps[pos].sent = true;
            r?;
        }
        Ok(())
    }

    /// riomap: registers `[buf, buf+len)`; with PROT_WRITE the peer may riowrite into it.
    ///
    /// # Safety
    /// `[buf, buf+len)` must stay allocated until riounmap or close.
    pub unsafe fn iomap(&mut self, buf: *mut u8, len: usize, prot: c_int, offset: i64) -> Result<i64, Errno> {
        // SAFETY: id is live.
        let pd = unsafe { (*self.id).pd };
        if pd.is_null() || self.ep.is_none() || prot & !libc::PROT_WRITE != 0 || len > u32::MAX as usize {
            return Err(Errno::EINVAL);
        }
        let write = prot & libc::PROT_WRITE != 0;
        let index = if write {
            let slots = self.remote_iomap.length as i32;
            (0..slots).find(|i| !self.iomaps.iter().any(|m| m.index == *i)).ok_or(Errno::ENOMEM)?
        } else {
            -1
        };
        // SAFETY: the caller keeps the buffer until riounmap or close (the C contract).
        let (mr, _, rkey) = unsafe { verbs::reg_mr(pd, buf, len, write)? };
        let offset = if offset == -1 { buf as i64 } else { offset };
        self.iomaps.push(IoMap { offset: offset as u64, addr: buf as u64, len: len as u32, mr, rkey, index, sent: index < 0 });
        Ok(offset)
    }

    /// riounmap.
    pub fn iounmap(&mut self, buf: *mut u8, len: usize) -> Result<(), Errno> {
        let pos = self.iomaps.iter().position(|m| m.addr == buf as u64 && m.len as usize == len).ok_or(Errno::EINVAL)?;
        let m = self.iomaps.remove(pos);
        // SAFETY: the MR came from reg_mr; a write the peer may still target fails on its side.
        unsafe { verbs::dereg_mr(m.mr) };
        Ok(())
    }

    /// An entry of the peer-written mapping table covering `offset`.
    fn find_iomap(&self, offset: u64) -> Option<(u64, RsSge)> {
        let base = self.ep().target.ptr.wrapping_add(16 * RS_SGL_SIZE as usize);
        for i in 0..self.target_iomap_size as usize {
            let p = base.wrapping_add(i * IOMAP_ENTRY_SIZE as usize);
            // SAFETY: entry i lies within the target table (sized for target_iomap_size entries).
            let (off, sge) = unsafe { (std::ptr::read_volatile(p as *const u64), std::ptr::read_volatile(p.add(8) as *const RsSge)) };
            if offset >= off && offset < off + sge.length as u64 {
                return Some((off, sge));
            }
        }
        None
    }

    /// riowrite: RDMA-writes `buf` at `offset` of the peer's riomap'ed buffer.
    pub fn iowrite(&mut self, buf: &[u8], mut offset: u64, flags: c_int) -> Result<usize, Errno> {
        self.check_connected()?;
        let nonblock = self.nonblock || flags & libc::MSG_DONTWAIT != 0;
        self.send_iomaps(nonblock)?;
        let count = buf.len();
        let mut left = count;
        let mut off = 0usize;
        let mut olen = RS_OLAP_START_SIZE;
        let mut res: Result<(), Errno> = Ok(());
        let mut iom: Option<(u64, RsSge)> = None;
        while left > 0 {
            match iom {
                Some((o, e)) if offset < o + e.length as u64 => {}
                _ => {
                    iom = self.find_iomap(offset);
                }
            }
            let Some((ioff, isge)) = iom else { break };
            if let Err(e) = self.wait_can_send(nonblock) {
                res = Err(e);
                break;
            }
            let mut xfer = if (olen as usize) < left {
                let x = olen;
                if olen < RS_MAX_TRANSFER {
                    olen <<= 1;
                }
                x
            } else {
                left as u32
            };
            xfer = xfer.min(self.sbuf_bytes_avail).min((ioff + isge.length as u64 - offset) as u32);
            let chunk = &buf[off..off + xfer as usize];
            let raddr = isge.addr + (offset - ioff);
            self.sqe_avail -= 1;
            self.sbuf_bytes_avail -= xfer;
            let wr = msg_set(OP_WRITE, xfer) as u64;
            let qp = self.qp();
            let r = if xfer <= self.sq_inline {
                let mut sge = [Sge { addr: chunk.as_ptr() as u64, length: xfer, lkey: 0 }];
                // SAFETY: inline write of the caller's bytes to the peer's registered buffer.
                unsafe { verbs::post_send(qp, wr, &mut sge, verbs::WR_RDMA_WRITE, verbs::SEND_INLINE, 0, raddr, isge.key) }
            } else {
                let (mut sges, n) = self.stage(chunk);
                // SAFETY: the staged copy lives in the registered send ring until completion.
                unsafe { verbs::post_send(qp, wr, &mut sges[..n], verbs::WR_RDMA_WRITE, 0, 0, raddr, isge.key) }
            };
            if let Err(e) = r {
                res = Err(e);
                break;
            }
            left -= xfer as usize;
            off += xfer as usize;
            offset += xfer as u64;
        }
        match res {
            Err(e) if left == count => Err(e),
            _ => Ok(count - left),
        }
    }
}

/// riowrite, sleeping without holding the socket when it blocks.
pub fn iowrite(h: &Handle, buf: &[u8], offset: u64, flags: c_int) -> Result<usize, Errno> {
    let mut sent = 0usize;
    loop {
        let fd;
        {
            let mut s = lock(h);
            let nb = s.nonblock || flags & libc::MSG_DONTWAIT != 0;
            fd = if !nb && s.is_connected_state() { s.prepare_wait() } else { -1 };
            match s.iowrite(&buf[sent..], offset + sent as u64, flags | libc::MSG_DONTWAIT) {
                Ok(0) if !buf.is_empty() => return Ok(sent),
                Ok(n) => {
                    sent += n;
                    if sent == buf.len() || nb {
                        return Ok(sent);
                    }
                    // Progress: try again at once; only an EAGAIN sleeps.
                    continue;
                }
                Err(Errno::EAGAIN) if !nb && fd >= 0 => {}
                Err(e) => return if sent > 0 { Ok(sent) } else { Err(e) },
            }
        }
        if let Err(e) = wait_on(h, fd) {
            return if sent > 0 { Ok(sent) } else { Err(e) };
        }
    }
}
