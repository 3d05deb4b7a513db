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
//! rsocket's number is that channel's descriptor, as upstream. The channel
//! is non-blocking: connection manager calls only issue requests, and the
//! service thread ([`svc`]) takes the answers as they arrive, so rconnect on
//! a non-blocking socket returns EINPROGRESS, a listener fills an accept
//! queue in the background, and a peer's disconnect reaches the socket
//! while nobody calls into it. The CQ of the QP has its own completion
//! channel; sleepers wait on it and on their wake-up descriptor.
//!
//! Sleepers: a thread about to sleep on a stream registers its own
//! wake-up descriptor (an eventfd per thread) with the stream under the
//! stream's lock; whoever then changes the stream (reads a CQ event,
//! processes completions, a connection manager event, rclose) signals the
//! registered sleepers when it lets go of the lock. So a completion that
//! another thread took out of the CQ, or a CQ event it consumed, always
//! wakes the others: nobody sleeps on a change it has not seen.
//!
//! Ownership and locking:
//! * The stream's connection manager id is an `Arc<CmId>` (the safe API of
//!   `cm::api`); its QP, registered buffers and riomap registrations are
//!   owned values of `verbs` that keep the id alive. rclose marks the stream
//!   closed, wakes its sleepers and drops what it owns; a thread that still
//!   sleeps on one of the stream's descriptors holds its own clone of the id
//!   (in its [`WaitToken`]), so nothing it waits on is freed under it, and it
//!   returns EBADF once it re-locks and sees the stream closed.
//! * No lock is held across a blocking wait: every [`Stream`] method is
//!   non-blocking; the blocking calls (`send`, `recv`, `iowrite`, `shutdown`,
//!   `accept`, `connect`, `poll`) take what they need under the lock, drop
//!   the guard, sleep in [`wait`] (which takes a token, not a stream) or in a
//!   synchronous CM call on their clone of the id, re-lock and re-check.
//!   Debug builds assert it: [`wait`] panics when the calling thread holds
//!   any stream guard.
//! * Panics: the stream lock is a parking_lot mutex (no poisoning). A
//!   [`Guard`] dropped while its thread unwinds marks the stream broken:
//!   later calls on it fail with EIO (rclose still frees it) instead of
//!   running on state a panic left half-updated.
#![deny(unsafe_code)]

pub mod conf;
pub mod dgram;
pub mod epoll;
pub mod fdmap;
pub mod sock;
mod svc;
pub mod verbs;
pub mod wire;

pub use sock::{close, create, is_rsocket, lookup, Sock};

use crate::abi::cma::AF_IB;
use crate::addrinfo::ib_hdr;
use crate::cma::api::{CmId, ConnParam, QpCaps};
use crate::sys::{rsock, wake};
use nix::errno::Errno;
use parking_lot::{Mutex, MutexGuard};
use std::cell::Cell;
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use std::ffi::c_int;
use std::sync::Arc;
use verbs::{Data, Qp, RegBuf, Sge, UserBuf, UserMr, Wake};
use wire::{msg_data, msg_op, msg_set, scale_to_value, value_to_scale, Msg, RsSge, Rx};
use wire::{CONN_DATA_LEN, IOMAP_ENTRY_SIZE, OP_CTRL, OP_DATA, OP_IOMAP_SGL, OP_SGL, OP_WRITE, RS_SGL_SIZE};

const RS_OLAP_START_SIZE: u32 = 2048;
const RS_MAX_TRANSFER: u32 = 65536;
pub(crate) const RS_SNDLOWAT: u32 = 2048;
const RS_QP_MIN_SIZE: u32 = 16;
const RS_QP_MAX_SIZE: u32 = 0xFFFE;
const RS_QP_CTRL_SIZE: u32 = 4;
const RS_MAX_CTRL_MSG: u32 = 16;
const RS_MSG_SIZE: u32 = 4;
/// Address and route resolution are tried 7 times, waiting 1, 2, 4 ... 64 s
/// (upstream's schedule: about two minutes in all).
const RS_CONN_RETRIES: u32 = 6;

const CTRL_DISCONNECT: u32 = 0;
const CTRL_KEEPALIVE: u32 = 1;
const CTRL_SHUTDOWN: u32 = 2;

const WR_RECV: u64 = 1 << 63;
const WR_MSG_SEND: u64 = 1 << 62;

const OPT_SWAP_SGL: u32 = 1;
const OPT_MSG_SEND: u32 = 2;


/// `SOL_RDMA` and its options (<rdma/rsocket.h>).
pub const SOL_RDMA: c_int = 0x10000;
const RDMA_SQSIZE: c_int = 0;
const RDMA_RQSIZE: c_int = 1;
const RDMA_INLINE: c_int = 2;
const RDMA_IOMAPSIZE: c_int = 3;
const RDMA_ROUTE: c_int = 4;

// Socket states (bit sets, as the peer never sees them any layout works;
// these follow the obvious scheme).
const ST_INIT: u32 = 0;
const ST_BOUND: u32 = 0x1;
const ST_LISTENING: u32 = 0x2;
// Opening: the service thread moves the socket on as answers arrive.
const ST_OPENING: u32 = 0x4;
const ST_RESOLVING_ADDR: u32 = ST_OPENING | 0x10;
const ST_RESOLVING_ROUTE: u32 = ST_OPENING | 0x20;
const ST_CONNECTING: u32 = ST_OPENING | 0x40;
const ST_ACCEPTING: u32 = ST_OPENING | 0x80;
const ST_CONNECTED: u32 = 0x100;
const ST_WRITABLE: u32 = 0x200;
const ST_READABLE: u32 = 0x400;
const ST_CONNECT_RDWR: u32 = ST_CONNECTED | ST_READABLE | ST_WRITABLE;
const ST_CONNECT_ERROR: u32 = 0x800;
const ST_DISCONNECTED: u32 = 0x1000;
const ST_ERROR: u32 = 0x2000;

/// The QP and registered buffers of a connected stream.
struct Ep {
    /// Dropped first (fields drop in order): it acks the CQ events.
    qp: Qp,
    sbuf: RegBuf,
    target: RegBuf,
    rbuf: RegBuf,
}

/// One stream rsocket.
pub struct Stream {
    /// None once closed.
    cm: Option<Arc<CmId>>,
    fd: c_int,
    domain: c_int,
    state: u32,
    /// rfcntl's F_GETFL/F_SETFL value (O_NONBLOCK makes calls non-blocking)
    /// and F_GETFD/F_SETFD value, stored as upstream stores them.
    fs_flags: c_int,
    fd_flags: c_int,
    /// rconnect returns EINPROGRESS instead of waiting: set when rfcntl
    /// F_SETFL turns O_NONBLOCK on before the connection (upstream makes
    /// the connection manager channel non-blocking only there, so a socket
    /// made with SOCK_NONBLOCK alone still connects within the call).
    connect_nonblock: bool,
    err: c_int,
    opts: u32,
    so_reuseaddr: bool,
    so_oobinline: bool,
    /// SO_LINGER reads l_onoff = 1 until set off (upstream's inverted bit).
    linger_off: bool,
    tcp_nodelay: bool,
    ip_tos: c_int,
    v6only: bool,
    /// SO_KEEPALIVE: a keepalive control message every `keepalive_time` s
    /// while connected (sent by the service thread at `ka_next`).
    keepalive: bool,
    keepalive_time: u32,
    ka_next: Option<Instant>,
    /// RDMA_ROUTE: path records to use instead of route resolution.
    route: Option<Vec<u8>>,
    /// The destination of rconnect, and the resolution attempts so far.
    dst: Vec<u8>,
    retries: u32,
    /// Connections accepted in the background, waiting for raccept (they
    /// enter the table of rsocket numbers when raccept hands them out).
    accept_queue: VecDeque<Handle>,
    /// A listener's connections still completing the handshake: they join
    /// the queue once established (upstream queues only established ones).
    accepting: Vec<Handle>,
    /// An accepting stream's listener.
    listener: Option<std::sync::Weak<Mutex<Stream>>>,
    /// Registered with the service thread.
    in_svc: bool,

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
    rseq_comp: u16,

    remote_sge: u32,
    remote_sgl: RsSge,
    target_sge: usize,

    rbuf_msg_index: u32,
    /// The receive side: received messages and the receive buffer's
    /// position (the decisions are in [`wire`]).
    rx: Rx,

    sbuf_bytes_avail: u32,
    ssgl0_off: u32,
    sqe_avail: u32,
    cq_armed: bool,

    /// The peer's table of direct-write mappings (addr, key, entry count).
    remote_iomap: RsSge,
    /// Our riomap registrations.
    iomaps: Vec<IoMap>,

    ep: Option<Ep>,

    /// rclose has run: every later call fails with EBADF.
    closed: bool,
    /// A call panicked while holding the lock: later calls fail with EIO.
    broken: bool,
    /// The wake-up descriptors of the threads sleeping on the stream.
    sleepers: Vec<Arc<Wake>>,
    /// Changed under the current guard: its sleepers are signalled when
    /// the guard goes.
    dirty: bool,
}

/// One riomap registration.
struct IoMap {
    offset: u64,
    mr: UserMr,
    /// Slot in the peer's table, or -1 for a local-only mapping.
    index: i32,
    /// Written into the peer's table already (or local-only).
    sent: bool,
}

pub type Handle = Arc<Mutex<Stream>>;

thread_local! {
    /// Stream guards the current thread holds (for the no-lock-across-wait rule).
    static HELD: Cell<u32> = const { Cell::new(0) };
}

/// A locked stream. Dropped during a panic, it marks the stream broken.
pub struct Guard<'a> {
    g: MutexGuard<'a, Stream>,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.g.broken = true;
            self.g.dirty = true;
        }
        if self.g.dirty {
            self.g.dirty = false;
            self.g.wake_sleepers();
        }
        HELD.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

impl std::ops::Deref for Guard<'_> {
    type Target = Stream;
    fn deref(&self) -> &Stream {
        &self.g
    }
}

impl std::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut Stream {
        &mut self.g
    }
}

/// Locks a stream whatever its condition (rclose).
pub fn lock_any(h: &Handle) -> Guard<'_> {
    let g = h.lock();
    HELD.with(|c| c.set(c.get() + 1));
    Guard { g }
}

/// Locks a stream that is usable: EBADF once closed, EIO once broken.
pub fn lock(h: &Handle) -> Result<Guard<'_>, Errno> {
    let g = lock_any(h);
    if g.closed {
        Err(Errno::EBADF)
    } else if g.broken {
        Err(Errno::EIO)
    } else {
        Ok(g)
    }
}

/// What a blocked call sleeps on: the stream's CQ channel once connected
/// (none before) and this thread's wake-up descriptor, registered with the
/// stream. The id clone keeps the channel open until the sleeper is done.
pub struct WaitToken {
    fd: c_int,
    wake: Arc<Wake>,
    _id: Option<Arc<CmId>>,
}

/// Sleeps until the token's descriptor is readable, the thread is woken
/// (a change of the stream, rclose), or `timeout_ms` passes (-1: no limit).
/// Returns whether the descriptor is readable. Takes no stream: no lock can
/// be held across it, and debug builds check that the calling thread holds
/// no stream guard at all.
pub fn wait(tok: &WaitToken, timeout_ms: c_int) -> Result<bool, Errno> {
    debug_assert_eq!(HELD.with(|c| c.get()), 0, "rsocket: blocking wait with a stream lock held");
    let mut p = [libc::pollfd { fd: tok.fd, events: libc::POLLIN, revents: 0 }, libc::pollfd { fd: tok.wake.fd(), events: libc::POLLIN, revents: 0 }];
    // Upstream blocks in read(2) here (the CQ or CM channel), which the
    // kernel restarts after a handler with SA_RESTART: poll(2) never is, so
    // an unbounded wait restarts itself then (rpoll does not come here: it
    // returns EINTR, as upstream's poll-based rpoll).
    loop {
        // A cancellation of the thread is acted on here (and only here):
        // ECANCELED, which the export turns back into the thread's end.
        match crate::sys::cancel::wait_poll(&mut p, timeout_ms) {
            Err(Errno::EINTR) if timeout_ms < 0 && crate::sys::unix::handlers_restart() => continue,
            r => {
                r?;
                break;
            }
        }
    }
    // Reset before the caller looks again: a change after this wakes us
    // on the next sleep.
    if p[1].revents != 0 {
        tok.wake.drain();
    }
    Ok(p[0].revents != 0)
}

/// The system's tcp_keepalive_time in seconds (7200 without it): the
/// keepalive idle time of an rsocket whose TCP_KEEPIDLE was not set.
fn system_keepalive_time() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_keepalive_time").ok().and_then(|t| t.trim().parse().ok()).unwrap_or(7200)
}

/// Creates a stream rsocket of `domain` (`type_` may carry SOCK_NONBLOCK
/// and SOCK_CLOEXEC); returns its number and the stream.
pub fn create_stream(domain: c_int, type_: c_int) -> Result<(c_int, Handle), Errno> {
    let id = CmId::create_tcp()?;
    id.set_src_family(domain);
    let fd = id.channel_fd();
    // Connection manager calls never wait (see the module comment).
    rsock::set_nonblock(fd, true)?;
    let s = Stream {
        fs_flags: if type_ & libc::SOCK_NONBLOCK != 0 { libc::O_NONBLOCK } else { 0 },
        fd_flags: if type_ & libc::SOCK_CLOEXEC != 0 { libc::FD_CLOEXEC } else { 0 },
        ..Stream::fresh(Some(Arc::new(id)), fd, domain)
    };
    Ok((fd, Arc::new(Mutex::new(s))))
}

/// A stream for a connection request on listener `l`: what upstream copies
/// from the listener (sizes and descriptor flags; not the options).
fn inherit(l: &Stream, id: Arc<CmId>) -> Stream {
    let fd = id.channel_fd();
    Stream {
        fs_flags: l.fs_flags,
        fd_flags: l.fd_flags,
        sbuf_size: l.sbuf_size,
        rbuf_size: l.rbuf_size,
        sq_size: l.sq_size,
        rq_size: l.rq_size,
        sq_inline: l.sq_inline,
        ctrl_max_seqno: l.ctrl_max_seqno,
        target_iomap_size: l.target_iomap_size,
        ..Stream::fresh(Some(id), fd, l.domain)
    }
}

impl Stream {
    /// A fresh, unconnected stream on `cm` (whose channel fd is `fd`) with
    /// the default sizes and options.
    fn fresh(cm: Option<Arc<CmId>>, fd: c_int, domain: c_int) -> Stream {
        let c = conf::get();
        Stream {
            cm,
            fd,
            domain,
            state: ST_INIT,
            fs_flags: 0,
            fd_flags: 0,
            connect_nonblock: false,
            err: 0,
            opts: 0,
            so_reuseaddr: false,
            so_oobinline: false,
            linger_off: false,
            tcp_nodelay: false,
            ip_tos: 0,
            v6only: false,
            keepalive: false,
            keepalive_time: 0,
            ka_next: None,
            route: None,
            dst: Vec::new(),
            retries: 0,
            accept_queue: VecDeque::new(),
            accepting: Vec::new(),
            listener: None,
            in_svc: false,
            sbuf_size: c.wmem,
            rbuf_size: c.mem,
            sq_size: c.sqsize as u32,
            rq_size: c.rqsize as u32,
            sq_inline: c.inline as u32,
            target_iomap_size: c.iomap_size as u32,
            ctrl_seqno: 0,
            ctrl_max_seqno: RS_QP_CTRL_SIZE,
            sseq_no: 0,
            sseq_comp: 0,
            rseq_comp: 0,
            remote_sge: 0,
            remote_sgl: RsSge::default(),
            target_sge: 0,
            rbuf_msg_index: 0,
            rx: Rx::default(),
            sbuf_bytes_avail: 0,
            ssgl0_off: 0,
            sqe_avail: 0,
            cq_armed: false,
            remote_iomap: RsSge::default(),
            iomaps: Vec::new(),
            ep: None,
            closed: false,
            broken: false,
            sleepers: Vec::new(),
            dirty: false,
        }
    }

    /// Signals the sleepers registered by other threads (they look again).
    fn wake_sleepers(&mut self) {
        self.sleepers.retain(|w| {
            if wake::is_mine(w) {
                true
            } else {
                w.signal();
                false
            }
        });
    }

    /// Drops this thread's registration (it is awake and looks itself).
    fn unregister_me(&mut self) {
        self.sleepers.retain(|w| !wake::is_mine(w));
    }

    fn ep(&self) -> &Ep {
        // Only called once the endpoint exists (connected states).
        self.ep.as_ref().expect("rsocket endpoint")
    }

    fn cm(&self) -> Result<&Arc<CmId>, Errno> {
        self.cm.as_ref().ok_or(Errno::EBADF)
    }

    /// The descriptor to wait on besides the wake-up: the CQ channel once
    /// connected, else none (-1: the service thread signals the changes).
    pub fn wait_fd(&self) -> c_int {
        match &self.ep {
            Some(ep) if self.state & ST_CONNECTED != 0 => ep.qp.channel_fd(),
            _ => -1,
        }
    }

    /// What a blocking call sleeps on (see [`wait`]); registers this
    /// thread as a sleeper of the stream.
    fn wait_token(&mut self) -> Result<WaitToken, Errno> {
        let wake = wake::mine()?;
        if !self.sleepers.iter().any(|w| Arc::ptr_eq(w, &wake)) {
            self.sleepers.push(wake.clone());
        }
        Ok(WaitToken { fd: self.wait_fd(), wake, _id: self.cm.clone() })
    }

    /// Reads entry `i` of our descriptor table (the peer writes it remotely).
    fn target_get(&self, i: usize) -> RsSge {
        RsSge::read(&self.ep().target, i * 16)
    }

    fn target_set(&self, i: usize, v: RsSge) {
        let t = &self.ep().target;
        t.write_u64(i * 16, v.addr);
        t.write_u32(i * 16 + 8, v.key);
        t.write_u32(i * 16 + 12, v.length);
    }

    // ---- endpoint -------------------------------------------------------------------

    fn create_ep(&mut self) -> Result<(), Errno> {
        let id = self.cm()?.clone();
        if !id.has_device() {
            return Err(Errno::EINVAL);
        }
        let max = id.max_qp_wr()?.min(RS_QP_MAX_SIZE);
        self.sq_size = self.sq_size.clamp(RS_QP_MIN_SIZE, max.max(RS_QP_MIN_SIZE));
        self.rq_size = self.rq_size.clamp(RS_QP_MIN_SIZE, max.max(RS_QP_MIN_SIZE));
        if id.is_iwarp() {
            self.opts |= OPT_MSG_SEND;
            if self.sq_inline < RS_MSG_SIZE {
                self.sq_inline = RS_MSG_SIZE;
            }
        }
        // One CQ and one channel for both directions, owned by the id.
        let caps = QpCaps { max_send_wr: self.sq_size, max_recv_wr: self.rq_size, max_send_sge: 2, max_recv_sge: 1, max_inline_data: self.sq_inline };
        let (qp, got) = Qp::new(&id, self.sq_size + self.rq_size, caps)?;
        let _ = qp.req_notify();
        self.sq_inline = got.max_inline_data;
        if self.opts & OPT_MSG_SEND != 0 && self.sq_inline < RS_MSG_SIZE {
            return Err(Errno::ENOTSUP);
        }

        let mut sbuf_total = self.sbuf_size;
        if self.sq_inline < RS_MAX_CTRL_MSG {
            sbuf_total += RS_MAX_CTRL_MSG * RS_QP_CTRL_SIZE;
        }
        let sbuf = qp.reg_buf(sbuf_total as usize, false)?;
        let target = qp.reg_buf(wire::target_table_len(self.target_iomap_size), true)?;
        let mut rbuf_total = self.rbuf_size;
        if self.opts & OPT_MSG_SEND != 0 {
            rbuf_total += self.rq_size * RS_MSG_SIZE;
        }
        let rbuf = qp.reg_buf(rbuf_total as usize, true)?;
        self.ep = Some(Ep { qp, sbuf, target, rbuf });
        self.ssgl0_off = 0;
        self.sbuf_bytes_avail = self.sbuf_size;
        self.rx = Rx::new(self.rbuf_size, self.rq_size);
        self.sqe_avail = self.sq_size - self.ctrl_max_seqno;
        self.rseq_comp = (self.rq_size >> 1) as u16;
        for _ in 0..self.rq_size {
            self.post_recv()?;
        }
        Ok(())
    }

    fn post_recv(&mut self) -> Result<(), Errno> {
        if self.opts & OPT_MSG_SEND == 0 {
            self.ep().qp.post_recv(WR_RECV, None)
        } else {
            let ep = self.ep();
            let sge = ep.rbuf.sge((self.rbuf_size + self.rbuf_msg_index * RS_MSG_SIZE) as usize, RS_MSG_SIZE);
            let wr = WR_RECV | self.rbuf_msg_index as u64;
            let r = ep.qp.post_recv(wr, Some(sge));
            self.rbuf_msg_index += 1;
            if self.rbuf_msg_index == self.rq_size {
                self.rbuf_msg_index = 0;
            }
            r
        }
    }

    /// Bytes in front of the connect data: on an AF_IB stream room for an
    /// `ib_connect_hdr`, as upstream leaves (it sends whatever its stack
    /// held there; we send zeros), and the passive side skips them.
    fn conn_data_offset(&self) -> usize {
        match self.cm() {
            Ok(id) if c_int::from(id.local_addr().ss_family) == AF_IB => ib_hdr::LEN,
            _ => 0,
        }
    }

    fn format_conn_data(&self) -> [u8; CONN_DATA_LEN] {
        let ep = self.ep();
        wire::format_conn_data(self.rq_size, self.target_iomap_size, (ep.target.addr(), ep.target.rkey()), (ep.rbuf.addr(), ep.rbuf.rkey()), self.rx.half())
    }

    /// Takes the peer's connect data (see [`wire::parse_conn_data`]).
    fn save_conn_data(&mut self, c: &wire::ConnData) {
        self.remote_sgl = c.sgl;
        self.remote_sge = 1;
        if c.swap {
            self.opts |= OPT_SWAP_SGL;
        }
        if let Some(iomap) = c.iomap {
            self.remote_iomap = iomap;
        }
        self.target_set(0, c.data_buf);
        self.sseq_comp = c.credits;
    }

    // ---- messages -------------------------------------------------------------------

    fn post_msg(&mut self, msg: u32) -> Result<(), Errno> {
        let qp = &self.ep().qp;
        if self.opts & OPT_MSG_SEND == 0 {
            // A zero-length write with immediate.
            qp.post_send(msg as u64, Data::None, verbs::WR_RDMA_WRITE_WITH_IMM, 0, msg, 0, 0)
        } else {
            qp.post_send(msg as u64, Data::Inline(&msg.to_ne_bytes()), verbs::WR_SEND, 0, 0, 0, 0)
        }
    }

    fn post_write_msg(&mut self, data: Data<'_>, msg: u32, addr: u64, rkey: u32) -> Result<(), Errno> {
        let qp = &self.ep().qp;
        if self.opts & OPT_MSG_SEND == 0 {
            qp.post_send(msg as u64, data, verbs::WR_RDMA_WRITE_WITH_IMM, 0, msg, addr, rkey)
        } else {
            qp.post_send(msg as u64, data, verbs::WR_RDMA_WRITE, 0, 0, addr, rkey)?;
            let wr = msg_set(msg_op(msg), 0) as u64 | WR_MSG_SEND;
            qp.post_send(wr, Data::Inline(&msg.to_ne_bytes()), verbs::WR_SEND, 0, 0, 0, 0)
        }
    }

    /// Sends `length` bytes into the peer's buffer named by `t`, the
    /// current target entry as the caller read it (once: the peer may
    /// rewrite the entry at any time).
    fn write_data(&mut self, data: Data<'_>, length: u32, t: RsSge) -> Result<(), Errno> {
        self.sseq_no = self.sseq_no.wrapping_add(1);
        self.sqe_avail -= 1;
        if self.opts & OPT_MSG_SEND != 0 {
            self.sqe_avail -= 1;
        }
        self.sbuf_bytes_avail -= length;
        let i = self.target_sge;
        let (addr, rkey) = (t.addr, t.key);
        let t = t.advance(length);
        self.target_set(i, t);
        if t.length == 0 {
            self.target_sge = (i + 1) % RS_SGL_SIZE as usize;
        }
        self.post_write_msg(data, msg_set(OP_DATA, length), addr, rkey)
    }

    fn ctrl_avail(&self) -> bool {
        self.ctrl_seqno != self.ctrl_max_seqno
    }

    fn ctrl2_avail(&self) -> bool {
        ((self.ctrl_seqno.wrapping_add(1)).wrapping_sub(self.ctrl_max_seqno) as i32) < 0
    }

    fn send_credits(&mut self) {
        self.ctrl_seqno = self.ctrl_seqno.wrapping_add(1);
        self.rseq_comp = self.rx.seq_no.wrapping_add((self.rq_size >> 1) as u16);
        let seq = msg_set(OP_SGL, (self.rx.seq_no as u32).wrapping_add(self.rq_size) & 0xFFFF);
        if let Some((free, half)) = self.rx.grant() {
            if self.opts & OPT_MSG_SEND != 0 {
                self.ctrl_seqno = self.ctrl_seqno.wrapping_add(1);
            }
            let (rbuf, rkey) = {
                let ep = self.ep();
                (ep.rbuf.addr(), ep.rbuf.rkey())
            };
            let mut sge = RsSge { addr: rbuf + free as u64, key: rkey, length: half };
            if self.opts & OPT_SWAP_SGL != 0 {
                sge = sge.swapped();
            }
            let raddr = wire::table_addr(self.remote_sgl.addr, self.remote_sge, 16);
            let rk = self.remote_sgl.key;
            let bytes = sge.bytes();
            let _ = if self.sq_inline < RS_MAX_CTRL_MSG {
                // The control slots lie past sbuf_size inside the registered send buffer.
                let slot = (self.sbuf_size + RS_MAX_CTRL_MSG * (self.ctrl_seqno & (RS_QP_CTRL_SIZE - 1))) as usize;
                let one = {
                    let sbuf = &self.ep().sbuf;
                    sbuf.write(slot, &bytes);
                    [sbuf.sge(slot, 16)]
                };
                self.post_write_msg(Data::Reg(&one), seq, raddr, rk)
            } else {
                self.post_write_msg(Data::Inline(&bytes), seq, raddr, rk)
            };
            self.remote_sge = wire::next_sge(self.remote_sge, self.remote_sgl.length);
        } else {
            let _ = self.post_msg(seq);
        }
    }

    fn give_credits(&self) -> bool {
        let want = self.rx.can_grant() || (self.rx.seq_no.wrapping_sub(self.rseq_comp) as i16) >= 0;
        let ctrl = if self.opts & OPT_MSG_SEND == 0 { self.ctrl_avail() } else { self.ctrl2_avail() };
        want && ctrl && self.state & ST_CONNECTED != 0
    }

    fn update_credits(&mut self) {
        if self.give_credits() {
            self.send_credits();
        }
    }

    fn poll_cq(&mut self) -> Result<(), Errno> {
        if self.ep.is_none() {
            return Ok(());
        }
        let mut rcnt = 0u32;
        loop {
            let wc = match self.ep().qp.poll() {
                Ok(Some(wc)) => wc,
                Ok(None) => break,
                Err(e) => return Err(e),
            };
            // Others sleeping on the stream may wait for what this changes.
            self.dirty = true;
            if wc.wr_id & WR_RECV != 0 {
                if wc.status != 0 {
                    continue;
                }
                rcnt += 1;
                let msg = match wc.imm {
                    Some(m) => m,
                    None => {
                        // The word of the message's slot (rq_size words past rbuf_size).
                        let idx = (wc.wr_id as u32) as usize;
                        self.ep().rbuf.read_u32(self.rbuf_size as usize + idx * 4)
                    }
                };
                match wire::decode(msg) {
                    Msg::Credits(c) => self.sseq_comp = c,
                    Msg::Write => {}
                    Msg::Ctrl(d) => {
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
                    Msg::Data { op, len } => self.rx.push(op, len),
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

    /// Reads the CQ event if one is waiting (never blocks): after a wait on [`Stream::wait_fd`].
    pub fn consume_cq_event(&mut self) {
        if !self.cq_armed || self.state & ST_CONNECTED == 0 {
            return;
        }
        let Some(ep) = self.ep.as_mut() else { return };
        match ep.qp.get_cq_event() {
            Ok(()) => {
                // The CQ is no longer armed: other sleepers must look again
                // (and re-arm) instead of sleeping on a channel that stays quiet.
                self.cq_armed = false;
                self.dirty = true;
            }
            Err(Errno::EAGAIN) | Err(Errno::EINTR) => {}
            Err(_) => {
                self.state = ST_ERROR;
                self.dirty = true;
            }
        }
    }

    /// Processes completions until `test` holds; never blocks: EWOULDBLOCK
    /// when it does not hold yet (callers sleep without the lock and retry).
    fn process_cq(&mut self, test: fn(&Stream) -> bool) -> Result<(), Errno> {
        self.update_credits();
        let r = self.poll_cq();
        let out = if test(self) {
            Ok(())
        } else if let Err(e) = r {
            Err(e)
        } else {
            Err(Errno::EWOULDBLOCK)
        };
        self.update_credits();
        out
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
        self.rx.has_data()
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

    /// Sends up to `buf.len()` bytes (never blocks).
    pub fn send(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        self.check_connected()?;
        self.send_iomaps()?;
        let len = buf.len();
        let mut left = len;
        let mut olen = RS_OLAP_START_SIZE;
        let mut off = 0usize;
        let mut res: Result<(), Errno> = Ok(());
        while left > 0 {
            if !self.can_send() {
                if let Err(e) = self.process_cq(Stream::conn_can_send) {
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
            let t = self.target_get(self.target_sge);
            xfer = xfer.min(self.sbuf_bytes_avail).min(t.length);
            let chunk = &buf[off..off + xfer as usize];
            let r = if xfer <= self.sq_inline {
                self.write_data(Data::Inline(chunk), xfer, t)
            } else {
                let (sges, n) = self.stage(chunk);
                self.write_data(Data::Reg(&sges[..n]), xfer, t)
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

    /// Receives up to `buf.len()` bytes (0 at end of stream; never blocks).
    pub fn recv(&mut self, buf: &mut [u8], flags: c_int) -> Result<usize, Errno> {
        self.check_connected()?;
        let len = buf.len();
        let mut left = len;
        let mut off = 0usize;
        let mut res: Result<(), Errno> = Ok(());
        loop {
            if !self.have_rdata() {
                if let Err(e) = self.process_cq(Stream::conn_have_rdata) {
                    res = Err(e);
                    break;
                }
            }
            if flags & libc::MSG_PEEK != 0 {
                left = len - self.peek(buf);
                break;
            }
            if let Some(ep) = self.ep.as_ref() {
                let n = self.rx.read(&ep.rbuf, &mut buf[off..]);
                left -= n;
                off += n;
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
        self.rx.peek(&self.ep().rbuf, buf)
    }

    /// rpoll's view: the ready events among `events`, processing completions
    /// first (as upstream reports them).
    pub fn poll_events(&mut self, events: i16) -> i16 {
        if self.state == ST_LISTENING {
            return if self.accept_queue.is_empty() { 0 } else { libc::POLLIN & events };
        }
        let was_connected = self.state & ST_CONNECTED != 0 || self.state == ST_DISCONNECTED || self.state & ST_ERROR != 0;
        if was_connected && self.ep.is_some() {
            let _ = self.process_cq(Stream::poll_all);
            let mut rev = 0i16;
            if events & libc::POLLIN != 0 && self.conn_have_rdata() {
                rev |= libc::POLLIN;
            }
            if events & libc::POLLOUT != 0 && self.can_send() {
                rev |= libc::POLLOUT;
            }
            if self.state & ST_CONNECTED == 0 {
                rev |= if self.state == ST_DISCONNECTED { libc::POLLHUP } else { libc::POLLERR };
            }
            return rev;
        }
        if self.state == ST_CONNECT_ERROR {
            return (events & (libc::POLLIN | libc::POLLOUT)) | libc::POLLERR;
        }
        // Unconnected, or opening (the service thread signals the outcome).
        0
    }

    /// Arms the CQ before a sleep; true when it was not armed yet (the
    /// caller then looks at the CQ once more before sleeping).
    pub fn arm(&mut self) -> bool {
        if self.state & ST_CONNECTED != 0 && !self.cq_armed {
            if let Some(ep) = &self.ep {
                let _ = ep.qp.req_notify();
                self.cq_armed = true;
                return true;
            }
        }
        false
    }

    // ---- connection management ------------------------------------------------------

    /// rbind: `addr` holds a socket address of its family.
    pub fn bind(&mut self, addr: &[u8]) -> Result<(), Errno> {
        self.cm()?.bind(addr)?;
        self.state = ST_BOUND;
        Ok(())
    }

    /// rlisten: requests are accepted by the service thread into the
    /// accept queue (see [`Stream::accept_requests`]).
    fn listen(&mut self, backlog: c_int) -> Result<(), Errno> {
        if self.state == ST_LISTENING {
            return Ok(());
        }
        self.cm()?.listen(backlog)?;
        self.state = ST_LISTENING;
        Ok(())
    }

    /// Registers the stream with the service thread (once).
    fn svc_add(&mut self, h: &Handle) -> Result<(), Errno> {
        if !self.in_svc {
            svc::add(self.fd, h.clone(), self.cm()?.clone())?;
            self.in_svc = true;
        }
        Ok(())
    }

    /// Moves a connect (or an accept) on as far as it goes without waiting:
    /// upstream's connect state machine. Ok once connected, EINPROGRESS
    /// while an answer is outstanding; other errors are the connect's
    /// outcome (kept for SO_ERROR, the state becomes connect-error).
    fn connect_step(&mut self) -> Result<(), Errno> {
        let r = self.connect_step_inner();
        match r {
            Err(Errno::EAGAIN) => Err(Errno::EINPROGRESS),
            Err(e) => {
                self.state = ST_CONNECT_ERROR;
                self.err = e as c_int;
                self.dirty = true;
                Err(e)
            }
            Ok(()) => {
                self.dirty = true;
                Ok(())
            }
        }
    }

    fn connect_step_inner(&mut self) -> Result<(), Errno> {
        enum Step {
            ResolveAddr,
            WaitAddr,
            ResolveRoute,
            WaitRoute,
            Connect,
            WaitConnect,
            WaitAccept,
        }
        let id = self.cm()?.clone();
        let mut step = match self.state {
            ST_INIT | ST_BOUND => Step::ResolveAddr,
            ST_RESOLVING_ADDR => Step::WaitAddr,
            ST_RESOLVING_ROUTE => Step::WaitRoute,
            ST_CONNECTING => Step::WaitConnect,
            ST_ACCEPTING => Step::WaitAccept,
            ST_CONNECT_ERROR | ST_DISCONNECTED | ST_ERROR => return Err(Errno::ENOTCONN),
            st if st & ST_CONNECTED != 0 => return Ok(()),
            _ => return Err(Errno::EINVAL),
        };
        loop {
            step = match step {
                Step::ResolveAddr => {
                    let to = 1000 << self.retries;
                    self.retries += 1;
                    self.state = ST_RESOLVING_ADDR;
                    id.resolve_addr(&self.dst, to)?;
                    self.retries = 0;
                    Step::ResolveRoute
                }
                Step::WaitAddr => match id.complete() {
                    Ok(()) => {
                        self.retries = 0;
                        Step::ResolveRoute
                    }
                    Err(Errno::ETIMEDOUT) if self.retries <= RS_CONN_RETRIES => Step::ResolveAddr,
                    Err(e) => return Err(e),
                },
                Step::ResolveRoute => {
                    self.state = ST_RESOLVING_ROUTE;
                    if let Some(r) = self.route.take() {
                        // The caller's path records (RDMA_ROUTE): the kernel
                        // answers with a resolved route.
                        id.set_option_bytes(crate::abi::ucma::RDMA_OPTION_IB, crate::abi::ucma::RDMA_OPTION_IB_PATH, &r)?;
                        Step::WaitRoute
                    } else {
                        let to = 1000 << self.retries;
                        self.retries += 1;
                        id.resolve_route(to)?;
                        Step::Connect
                    }
                }
                Step::WaitRoute => match id.complete() {
                    Ok(()) => Step::Connect,
                    Err(Errno::ETIMEDOUT) if self.retries <= RS_CONN_RETRIES => Step::ResolveRoute,
                    Err(e) => return Err(e),
                },
                Step::Connect => {
                    self.create_ep()?;
                    self.retries = 0;
                    let param = self.conn_param();
                    self.state = ST_CONNECTING;
                    id.connect(&param)?;
                    return self.connected(&id);
                }
                Step::WaitConnect => {
                    id.complete()?;
                    return self.connected(&id);
                }
                Step::WaitAccept => {
                    id.complete()?;
                    self.state = ST_CONNECT_RDWR;
                    return Ok(());
                }
            };
        }
    }

    /// The active side's connect completed: takes the peer's connect data.
    fn connected(&mut self, id: &CmId) -> Result<(), Errno> {
        let resp = id.parked_private_data();
        if let Some(c) = wire::parse_conn_data(&resp) {
            self.save_conn_data(&c);
            self.state = ST_CONNECT_RDWR;
            Ok(())
        } else {
            Err(Errno::ENOTSUP)
        }
    }

    /// A listener's connection requests (service thread, never blocks):
    /// each becomes a stream in the table, accepted: in the accept queue at
    /// once when established, else once the service thread has completed
    /// it (see [`cm_event`]). `me` is this listener.
    fn accept_requests(&mut self, me: &Handle) {
        let Ok(lid) = self.cm().cloned() else { return };
        let offset = self.conn_data_offset();
        for _ in 0..64 {
            let (nid, req) = match lid.get_request() {
                Ok(x) => x,
                Err(Errno::EAGAIN) => return,
                Err(e) => {
                    log::debug!(target: "rdmacm", "rsocket listener: a request failed: {e}");
                    continue;
                }
            };
            let nid = Arc::new(nid);
            let mut s = inherit(self, nid.clone());
            let r = (|| {
                rsock::set_nonblock(s.fd, true)?;
                let c = req.private_data.get(offset..).and_then(wire::parse_conn_data).ok_or(Errno::EINVAL)?;
                s.create_ep()?;
                s.save_conn_data(&c);
                let param = ConnParam { private_data: s.format_conn_data().to_vec(), ..req.clone() };
                s.state = ST_ACCEPTING;
                match nid.accept(&param) {
                    Ok(()) => s.state = ST_CONNECT_RDWR,
                    Err(Errno::EAGAIN) => {}
                    Err(e) => return Err(e),
                }
                Ok(())
            })();
            if let Err(e) = r {
                log::debug!(target: "rdmacm", "rsocket listener: accepting a request failed: {e}");
                let _ = nid.reject();
                s.destroy();
                continue;
            }
            let established = s.state & ST_CONNECTED != 0;
            if !established {
                s.listener = Some(Arc::downgrade(me));
            }
            let h: Handle = Arc::new(Mutex::new(s));
            {
                let mut g = lock_any(&h);
                if let Err(e) = g.svc_add(&h) {
                    log::debug!(target: "rdmacm", "rsocket listener: no service for a new stream: {e}");
                }
            }
            if established {
                self.accept_queue.push_back(h);
                self.dirty = true;
            } else {
                self.accepting.push(h);
            }
        }
    }

    /// Takes the connection manager events of a connected (or failed)
    /// stream: a disconnect from the peer ends the connection.
    fn drain_cm_events(&mut self) {
        let Ok(id) = self.cm().cloned() else { return };
        for _ in 0..16 {
            match id.complete() {
                Err(Errno::EAGAIN) => return,
                _ => {
                    if id.parked_event() == Some(crate::abi::cma::RDMA_CM_EVENT_DISCONNECTED) && self.state & ST_CONNECTED != 0 {
                        self.state = ST_DISCONNECTED;
                        self.dirty = true;
                    }
                }
            }
        }
    }

    /// The keepalive due at `now`, if any; the next time one is due.
    fn keepalive_tick(&mut self, now: Instant) -> Option<Instant> {
        if !self.keepalive {
            return None;
        }
        let next = *self.ka_next.get_or_insert(now + Duration::from_secs(self.keepalive_time as u64));
        if next > now {
            return Some(next);
        }
        if self.state & ST_CONNECTED != 0 && self.ep.is_some() && self.ctrl_avail() {
            self.ctrl_seqno = self.ctrl_seqno.wrapping_add(1);
            let _ = self.post_msg(msg_set(OP_CTRL, CTRL_KEEPALIVE));
        }
        let n = now + Duration::from_secs(self.keepalive_time as u64);
        self.ka_next = Some(n);
        Some(n)
    }

    /// SO_KEEPALIVE on or off; the first time, the interval comes from the
    /// system's tcp_keepalive_time (7200 s without it), as upstream.
    fn set_keepalive(&mut self, on: bool) {
        if on == self.keepalive {
            return;
        }
        if on && self.keepalive_time == 0 {
            self.keepalive_time = system_keepalive_time();
        }
        self.keepalive = on;
        self.ka_next = on.then(|| Instant::now() + Duration::from_secs(self.keepalive_time as u64));
        svc::kick();
    }

    /// The connect parameters of our side (the QP and buffers exist).
    fn conn_param(&self) -> ConnParam {
        let mut private_data = vec![0u8; self.conn_data_offset()];
        private_data.extend_from_slice(&self.format_conn_data());
        ConnParam {
            private_data,
            responder_resources: 0,
            initiator_depth: if self.opts & OPT_MSG_SEND != 0 { 1 } else { 0 },
            flow_control: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            srq: 0,
            qp_num: 0,
        }
    }

    /// The first step of rshutdown: updates the state; the control message to
    /// send, if any.
    fn shutdown_begin(&mut self, how: c_int) -> Option<u32> {
        if self.state & ST_CONNECTED == 0 {
            return None;
        }
        self.dirty = true;
        if how == libc::SHUT_RDWR {
            self.state &= !(ST_READABLE | ST_WRITABLE);
            Some(CTRL_DISCONNECT)
        } else if how == libc::SHUT_WR {
            self.state &= !ST_WRITABLE;
            Some(if self.state & ST_READABLE != 0 { CTRL_SHUTDOWN } else { CTRL_DISCONNECT })
        } else {
            self.state &= !ST_READABLE;
            if self.state & ST_WRITABLE != 0 {
                return None;
            }
            Some(CTRL_DISCONNECT)
        }
    }

    /// The last step of rshutdown: once disconnected, the QP is stopped (its
    /// posted receives flush, which wakes rpoll sleepers). The disconnect
    /// request itself goes out when the id is destroyed (rclose).
    fn shutdown_end(&mut self) {
        if self.state & ST_DISCONNECTED != 0 {
            if let Some(ep) = &self.ep {
                let _ = ep.qp.req_notify();
                let _ = ep.qp.id().stop_qp();
            }
        }
    }

    pub fn local_addr(&self) -> Result<libc::sockaddr_storage, Errno> {
        Ok(self.cm()?.local_addr())
    }

    pub fn peer_addr(&self) -> Result<libc::sockaddr_storage, Errno> {
        Ok(self.cm()?.peer_addr())
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
        self.fs_flags & libc::O_NONBLOCK != 0
    }

    /// rclose's end: marks the stream closed, wakes its sleepers and drops
    /// what it owns (registrations, then QP and buffers, then the id: the
    /// id itself goes when the last sleeper lets go of it).
    fn destroy(&mut self) {
        self.closed = true;
        self.dirty = true;
        self.wake_sleepers();
        self.iomaps.clear();
        self.ep = None;
        self.cm = None;
    }
}


/// Re-locks after a wait, drops this thread's registration and reads the
/// CQ event that woke us, if any.
fn after_wait(h: &Handle) -> Result<(), Errno> {
    let mut s = lock(h)?;
    s.unregister_me();
    s.consume_cq_event();
    Ok(())
}

/// Runs `check` under the lock until it gives an answer (Some), sleeping
/// without the lock in between: `check` returns None after it has made
/// sure that a change will wake this thread (armed the CQ, or the service
/// thread owes an answer). Busy-polls for `polling_time` first, as upstream.
fn sleep_until<T>(h: &Handle, mut check: impl FnMut(&mut Stream) -> Result<Option<T>, Errno>) -> Result<T, Errno> {
    let spin = Duration::from_micros(conf::get().polling_time_us as u64);
    let mut start: Option<Instant> = None;
    loop {
        let tok = {
            let mut s = lock(h)?;
            if let Some(v) = check(&mut s)? {
                return Ok(v);
            }
            let t0 = *start.get_or_insert_with(Instant::now);
            if t0.elapsed() <= spin {
                None
            } else {
                Some(s.prepare_wait()?)
            }
        };
        match tok {
            None => std::hint::spin_loop(),
            Some(tok) => {
                let r = wait(&tok, -1);
                drop(tok);
                // Unregistered whatever the wait's outcome (a cancelled
                // thread leaves nothing of itself in the stream).
                let a = after_wait(h);
                r?;
                a?;
            }
        }
    }
}

/// Processes completions until `test` holds, sleeping without the lock in
/// between (blocking even on a non-blocking socket, as rshutdown does).
fn wait_until(h: &Handle, test: fn(&Stream) -> bool) -> Result<(), Errno> {
    sleep_until(h, |s| match s.process_cq(test) {
        Ok(()) => Ok(Some(())),
        Err(Errno::EWOULDBLOCK) => {
            // Newly armed: look once more so that nothing that came before
            // the arming is missed.
            if s.arm() {
                match s.process_cq(test) {
                    Ok(()) => return Ok(Some(())),
                    Err(Errno::EWOULDBLOCK) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(None)
        }
        Err(e) => Err(e),
    })
}

/// Waits until the stream is no longer opening (connecting or accepting).
fn wait_opened(h: &Handle) -> Result<(), Errno> {
    sleep_until(h, |s| Ok((s.state & ST_OPENING == 0).then_some(())))
}

/// rconnect: starts (or continues) the connect; the service thread carries
/// it on. A socket made non-blocking with rfcntl before (see
/// `connect_nonblock`) returns EINPROGRESS until it is connected (then 0);
/// otherwise the call sleeps, without the lock, until the outcome.
pub fn connect(h: &Handle, addr: &[u8]) -> Result<(), Errno> {
    let (r, nonblock) = {
        let mut s = lock(h)?;
        if s.state == ST_INIT || s.state == ST_BOUND {
            s.dst = addr.to_vec();
        }
        let r = s.connect_step();
        if matches!(r, Ok(()) | Err(Errno::EINPROGRESS)) {
            s.svc_add(h)?;
        }
        (r, s.connect_nonblock)
    };
    match r {
        Err(Errno::EINPROGRESS) if !nonblock => {
            wait_opened(h)?;
            let s = lock(h)?;
            if s.state & ST_CONNECTED != 0 {
                Ok(())
            } else {
                Err(crate::sys::errno_from_raw(if s.err != 0 { s.err } else { libc::ECONNREFUSED }))
            }
        }
        r => r,
    }
}

/// rshutdown: sends the control message and waits until the sends are
/// done, sleeping without the lock.
pub fn shutdown(h: &Handle, how: c_int) -> Result<(), Errno> {
    let ctrl = lock(h)?.shutdown_begin(how);
    let mut ret = Ok(());
    let mut skip_drain = how != libc::SHUT_RDWR && how != libc::SHUT_WR && ctrl.is_none() && lock(h)?.is_connected_state();
    if let Some(ctrl) = ctrl {
        let need = !lock(h)?.ctrl_avail();
        let r = if need { wait_until(h, Stream::conn_can_send_ctrl) } else { Ok(()) };
        match r {
            Ok(()) => {
                let mut s = lock(h)?;
                if s.state & ST_CONNECTED != 0 && s.ctrl_avail() {
                    s.ctrl_seqno = s.ctrl_seqno.wrapping_add(1);
                    ret = s.post_msg(msg_set(OP_CTRL, ctrl));
                }
            }
            Err(e) => {
                ret = Err(e);
                skip_drain = true;
            }
        }
    }
    if !skip_drain && lock(h)?.is_connected_state() {
        let _ = wait_until(h, Stream::all_sends_done);
    }
    lock(h)?.shutdown_end();
    ret
}

/// rlisten: listens and lets the service thread fill the accept queue.
pub fn listen(h: &Handle, backlog: c_int) -> Result<(), Errno> {
    let mut s = lock(h)?;
    s.listen(backlog)?;
    s.svc_add(h)
}

/// raccept: the next connection of the accept queue (it may still be
/// accepting: calls on it wait for, or on a non-blocking socket report
/// EAGAIN until, the connection is established). A non-blocking
/// listener returns EAGAIN while the queue is empty.
pub fn accept(h: &Handle) -> Result<Handle, Errno> {
    sleep_until(h, |l| {
        if !l.is_listening() {
            return Err(Errno::EBADF);
        }
        if let Some(n) = l.accept_queue.pop_front() {
            return Ok(Some(n));
        }
        if l.nonblocking() {
            return Err(Errno::EAGAIN);
        }
        Ok(None)
    })
}

/// rclose's first step, while the stream is still in the table: a
/// connected stream shuts down (its sends drain).
pub fn close_begin(h: &Handle) {
    let connected = {
        let s = lock_any(h);
        !s.broken && !s.closed && s.state & ST_CONNECTED != 0
    };
    if connected {
        let _ = shutdown(h, libc::SHUT_RDWR);
    }
}

/// rclose's end, once the stream is out of the table: threads still
/// sleeping in a call on it wake up and fail with EBADF; what they sleep
/// on stays open until they are gone. Connections nobody accepted go with
/// their listener.
pub fn close_end(h: &Handle) {
    // The service thread lets go of the stream before its id goes.
    svc::remove(h);
    let pending: Vec<Handle> = {
        let mut s = lock_any(h);
        let mut q: Vec<Handle> = s.accept_queue.drain(..).collect();
        q.append(&mut s.accepting);
        s.destroy();
        q
    };
    for p in pending {
        close_begin(&p);
        close_end(&p);
    }
}

/// The service thread's work on a stream whose channel is readable; false
/// once the stream is gone (closed or broken).
fn cm_event(h: &Handle) -> bool {
    let mut s = lock_any(h);
    if s.closed || s.broken {
        return false;
    }
    if s.state == ST_LISTENING {
        s.accept_requests(h);
    } else if s.state == ST_ACCEPTING {
        let _ = s.connect_step();
        if s.state & ST_OPENING != 0 {
            return true;
        }
        // Established (to the accept queue) or failed (gone, as upstream
        // drops a request it could not accept).
        let l = s.listener.take();
        let mut ok = s.state & ST_CONNECTED != 0;
        drop(s);
        if let Some(l) = l.and_then(|l| l.upgrade()) {
            let mut l = lock_any(&l);
            let known = l.accepting.iter().any(|x| Arc::ptr_eq(x, h));
            l.accepting.retain(|x| !Arc::ptr_eq(x, h));
            if ok && known && !l.closed && !l.broken {
                l.accept_queue.push_back(h.clone());
                l.dirty = true;
            } else {
                ok = false;
            }
        } else {
            ok = false;
        }
        if !ok {
            lock_any(h).destroy();
            return false;
        }
    } else if s.state & ST_OPENING != 0 {
        let _ = s.connect_step();
    } else {
        s.drain_cm_events();
    }
    true
}

/// The service thread's keepalive work on a stream (see [`Stream::keepalive_tick`]).
fn keepalive_tick(h: &Handle, now: Instant) -> Option<Instant> {
    let mut s = lock_any(h);
    if s.closed || s.broken {
        return None;
    }
    s.keepalive_tick(now)
}

fn int_of(opt: Option<&[u8]>) -> Result<c_int, Errno> {
    let b = opt.ok_or(Errno::EINVAL)?;
    let b = b.get(..4).ok_or(Errno::EINVAL)?;
    Ok(c_int::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// Socket options. `opt` is the caller's option value (None for NULL).
pub fn setsockopt(h: &Handle, level: c_int, name: c_int, opt: Option<&[u8]>) -> Result<(), Errno> {
    let mut s = lock(h)?;
    let v = int_of(opt);
    match level {
        libc::SOL_SOCKET => match name {
            libc::SO_REUSEADDR => {
                let r = match opt {
                    None => Err(Errno::EINVAL),
                    Some(b) if b.len() != std::mem::size_of::<c_int>() => Err(Errno::EINVAL),
                    Some(_) => s.cm()?.set_reuseaddr(v?),
                };
                if let Err(e) = r {
                    if e != Errno::ENOSYS && s.state == ST_INIT {
                        return Err(e);
                    }
                }
                s.so_reuseaddr = v? != 0;
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
            libc::SO_LINGER => {
                // struct linger: l_onoff first.
                s.linger_off = v? == 0;
                Ok(())
            }
            libc::SO_OOBINLINE => {
                s.so_oobinline = v? != 0;
                Ok(())
            }
            libc::SO_KEEPALIVE => {
                let on = v? != 0;
                s.set_keepalive(on);
                Ok(())
            }
            _ => Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_IP => match name {
            libc::IP_TOS => {
                let t = v?;
                s.ip_tos = t;
                s.cm()?.set_option_bytes(crate::abi::ucma::RDMA_OPTION_ID, crate::abi::ucma::RDMA_OPTION_ID_TOS, &opt.unwrap_or(&[])[..opt.map_or(0, |b| b.len())])
            }
            _ => Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_IPV6 => match name {
            libc::IPV6_V6ONLY => {
                let on = v?;
                s.cm()?.set_option_bytes(crate::abi::ucma::RDMA_OPTION_ID, crate::abi::ucma::RDMA_OPTION_ID_AFONLY, opt.unwrap_or(&[]))?;
                s.v6only = on != 0;
                Ok(())
            }
            _ => Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_TCP => match name {
            libc::TCP_NODELAY => {
                s.tcp_nodelay = v? != 0;
                Ok(())
            }
            libc::TCP_KEEPCNT | libc::TCP_KEEPINTVL | libc::TCP_MAXSEG | libc::TCP_CONGESTION => Ok(()),
            libc::TCP_KEEPIDLE => {
                let t = v?;
                if t <= 0 {
                    return Err(Errno::EINVAL);
                }
                s.keepalive_time = t as u32;
                if s.keepalive {
                    s.ka_next = Some(Instant::now() + Duration::from_secs(t as u64));
                    svc::kick();
                }
                Ok(())
            }
            _ => Err(Errno::ENOTSUP),
        },
        SOL_RDMA => {
            if s.state & (ST_OPENING | ST_CONNECTED) != 0 || s.state >= ST_CONNECT_ERROR || s.ep.is_some() {
                return Err(Errno::EINVAL);
            }
            if name == RDMA_ROUTE {
                s.route = Some(opt.ok_or(Errno::EINVAL)?.to_vec());
                return Ok(());
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

/// What rgetsockopt writes: the value's bytes, and whether the length is
/// updated (upstream leaves it alone for a few options).
pub struct OptOut {
    pub bytes: Vec<u8>,
    pub set_len: bool,
}

fn int_out(v: c_int) -> OptOut {
    OptOut { bytes: v.to_ne_bytes().to_vec(), set_len: true }
}

/// `struct tcp_info` as upstream's library is built with it (the kernel's
/// <linux/tcp.h> of current distributions: 280 bytes; the fields it fills,
/// the state and the congestion window, sit where glibc's has them too).
const TCP_INFO_LEN: usize = 280;
const TCPI_STATE: usize = 0;
const TCPI_SND_CWND: usize = 80;
/// `TCP_ESTABLISHED` and `TCP_CLOSE` of <netinet/tcp.h>.
const TCP_ESTABLISHED: u8 = 1;
const TCP_CLOSE: u8 = 7;

/// Socket options: the value of an option (see [`OptOut`]); `room` is the
/// caller's buffer size (RDMA_ROUTE fills as many records as fit).
pub fn getsockopt(h: &Handle, level: c_int, name: c_int, room: usize) -> Result<OptOut, Errno> {
    let mut s = lock(h)?;
    let v = match level {
        libc::SOL_SOCKET => match name {
            libc::SO_REUSEADDR => int_out(s.so_reuseaddr as c_int),
            libc::SO_KEEPALIVE => int_out(s.keepalive as c_int),
            libc::SO_OOBINLINE => int_out(s.so_oobinline as c_int),
            libc::SO_RCVBUF => int_out(s.rbuf_size as c_int),
            libc::SO_SNDBUF => int_out(s.sbuf_size as c_int),
            libc::SO_LINGER => {
                let mut b = (!s.linger_off as c_int).to_ne_bytes().to_vec();
                b.extend_from_slice(&0i32.to_ne_bytes());
                OptOut { bytes: b, set_len: true }
            }
            libc::SO_ERROR => {
                let e = s.err;
                s.err = 0;
                int_out(e)
            }
            libc::SO_BROADCAST => OptOut { bytes: Vec::new(), set_len: false },
            _ => return Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_IP => match name {
            libc::IP_TOS => int_out(s.ip_tos),
            _ => return Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_IPV6 => match name {
            libc::IPV6_V6ONLY => int_out(s.v6only as c_int),
            _ => return Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_TCP => match name {
            libc::TCP_CONGESTION | libc::TCP_KEEPCNT | libc::TCP_KEEPINTVL => OptOut { bytes: 1i32.to_ne_bytes().to_vec(), set_len: false },
            libc::TCP_KEEPIDLE => int_out(s.keepalive_time as c_int),
            libc::TCP_NODELAY => int_out(s.tcp_nodelay as c_int),
            libc::TCP_MAXSEG => {
                // The path MTU once resolved (IB MTU enum: 1 = 256 bytes), else 2048.
                let paths = s.cm.as_ref().map(|c| c.route_paths()).unwrap_or_default();
                int_out(match paths.first() {
                    Some(p) => 1 << (7 + p.mtu as u32).min(30),
                    None => 2048,
                })
            }
            libc::TCP_INFO => {
                let mut b = vec![0u8; TCP_INFO_LEN];
                // As upstream: "established" only in the state with both directions shut
                // down and the disconnect not yet completed (its test is for the bare
                // connected bit).
                b[TCPI_STATE] = if s.state == ST_CONNECTED { TCP_ESTABLISHED } else { TCP_CLOSE };
                b[TCPI_SND_CWND..TCPI_SND_CWND + 4].copy_from_slice(&s.sq_size.to_ne_bytes());
                OptOut { bytes: b, set_len: true }
            }
            _ => return Err(Errno::ENOTSUP),
        },
        SOL_RDMA => match name {
            RDMA_SQSIZE => int_out(s.sq_size as c_int),
            RDMA_RQSIZE => int_out(s.rq_size as c_int),
            RDMA_INLINE => int_out(s.sq_inline as c_int),
            RDMA_IOMAPSIZE => int_out(s.target_iomap_size as c_int),
            RDMA_ROUTE => {
                if let Some(r) = &s.route {
                    if room < r.len() {
                        return Err(Errno::EINVAL);
                    }
                    OptOut { bytes: r.clone(), set_len: true }
                } else {
                    let one = std::mem::size_of::<crate::abi::cma::ibv_path_data>();
                    if room < one {
                        return Err(Errno::EINVAL);
                    }
                    let paths = s.cm.as_ref().map(|c| c.route_paths()).unwrap_or_default();
                    let mut b = Vec::new();
                    for p in paths.iter().take(room / one) {
                        b.extend_from_slice(&path_data_bytes(p));
                    }
                    OptOut { bytes: b, set_len: true }
                }
            }
            _ => return Err(Errno::ENOTSUP),
        },
        _ => return Err(Errno::ENOTSUP),
    };
    Ok(v)
}

/// A resolved path as `struct ibv_path_data` (the wire-format record
/// RDMA_ROUTE takes and gives).
fn path_data_bytes(p: &crate::abi::cma::ibv_sa_path_rec) -> Vec<u8> {
    let mut b = vec![0u8; std::mem::size_of::<crate::abi::cma::ibv_path_data>()];
    // flags, reserved, then struct ibv_path_record (service_id first).
    b[0..4].copy_from_slice(&(p.preference as u32).to_ne_bytes());
    let r = 8;
    b[r + 8..r + 24].copy_from_slice(&gid_bytes(&p.dgid));
    b[r + 24..r + 40].copy_from_slice(&gid_bytes(&p.sgid));
    b[r + 40..r + 42].copy_from_slice(&p.dlid.to_ne_bytes());
    b[r + 42..r + 44].copy_from_slice(&p.slid.to_ne_bytes());
    let fl_hop = (u32::from_be(p.flow_label) << 8) | p.hop_limit as u32;
    b[r + 44..r + 48].copy_from_slice(&fl_hop.to_be_bytes());
    b[r + 48] = p.traffic_class;
    b[r + 49] = ((p.reversible as u8) << 7) | 1;
    b[r + 50..r + 52].copy_from_slice(&p.pkey.to_ne_bytes());
    b[r + 52..r + 54].copy_from_slice(&(p.sl as u16).to_be_bytes());
    // "exactly" selectors (2 << 6) with each value.
    b[r + 54] = p.mtu | 2 << 6;
    b[r + 55] = p.rate | 2 << 6;
    b[r + 56] = p.packet_life_time | 2 << 6;
    b
}

fn gid_bytes(g: &crate::abi::cma::ibv_gid) -> [u8; 16] {
    verbs::gid_bytes(g)
}

/// rfcntl: F_GETFL/F_SETFL (O_NONBLOCK is what counts), F_GETFD/F_SETFD;
/// the values are stored and read back as given, as upstream.
pub fn fcntl(h: &Handle, cmd: c_int, arg: c_int) -> Result<c_int, Errno> {
    let mut s = lock(h)?;
    match cmd {
        libc::F_GETFL => Ok(s.fs_flags),
        libc::F_SETFL => {
            let on = arg & libc::O_NONBLOCK != 0;
            if on != s.nonblocking() && s.state != ST_LISTENING && s.state < ST_CONNECTED {
                s.connect_nonblock = on;
            }
            s.fs_flags = arg;
            s.dirty = true;
            Ok(0)
        }
        libc::F_GETFD => Ok(s.fd_flags),
        libc::F_SETFD => {
            s.fd_flags = arg;
            Ok(0)
        }
        _ => Err(Errno::ENOTSUP),
    }
}

/// rpoll over a mix of rsockets and ordinary descriptors: busy-polls for
/// `polling_time`, then sleeps on the rsockets' CQ channels, this thread's
/// wake-up descriptor (registered with each rsocket) and the ordinary
/// descriptors, at most `wake_up_interval` at a time, as upstream.
pub fn poll(fds: &mut [libc::pollfd], timeout: c_int) -> Result<c_int, Errno> {
    let start = Instant::now();
    let c = conf::get();
    let spin = Duration::from_micros(c.polling_time_us as u64);
    loop {
        let n = check_fds(fds)?;
        if n > 0 || timeout == 0 {
            return Ok(n);
        }
        if start.elapsed() > spin {
            break;
        }
        std::hint::spin_loop();
    }
    loop {
        // Arm and register, then look once more so that nothing that
        // arrived meanwhile is missed.
        let wake = wake::mine()?;
        let mut rfds: Vec<libc::pollfd> = Vec::with_capacity(fds.len() + 1);
        let mut slots: Vec<Option<(Handle, WaitToken)>> = Vec::with_capacity(fds.len());
        let mut dslots: Vec<Option<dgram::PollSlot>> = Vec::with_capacity(fds.len());
        for f in fds.iter() {
            let sk = if f.fd < 0 { None } else { sock::lookup(f.fd).ok() };
            let (tok, ds) = match sk {
                Some(Sock::Stream(h)) => {
                    let tok = lock(&h).ok().and_then(|mut s| s.prepare_wait().ok());
                    (tok.map(|t| (h, t)), None)
                }
                Some(Sock::Dgram(d)) => (None, dgram::prepare_wait(&d)),
                None => (None, None),
            };
            match (&tok, &ds) {
                (Some((_, t)), _) => rfds.push(libc::pollfd { fd: t.fd, events: libc::POLLIN, revents: 0 }),
                (None, Some(d)) => rfds.push(libc::pollfd { fd: d.fd(), events: libc::POLLIN, revents: 0 }),
                (None, None) => rfds.push(*f),
            }
            slots.push(tok);
            dslots.push(ds);
        }
        rfds.push(libc::pollfd { fd: wake.fd(), events: libc::POLLIN, revents: 0 });
        let n = check_fds(fds)?;
        if n > 0 {
            unregister_all(&slots);
            dslots.iter().flatten().for_each(|d| d.done(false));
            return Ok(n);
        }
        let slice = if c.wake_up_interval_ms > 0 { c.wake_up_interval_ms } else { -1 };
        let wait_ms = if timeout < 0 {
            slice
        } else {
            let left = timeout as i64 - start.elapsed().as_millis() as i64;
            if left <= 0 {
                unregister_all(&slots);
                dslots.iter().flatten().for_each(|d| d.done(false));
                return Ok(0);
            }
            if slice < 0 {
                left as c_int
            } else {
                (left as c_int).min(slice)
            }
        };
        debug_assert_eq!(HELD.with(|c| c.get()), 0, "rsocket: blocking wait with a stream lock held");
        let r = crate::sys::cancel::wait_poll(&mut rfds, wait_ms);
        if rfds.last().is_some_and(|p| p.revents != 0) {
            wake.drain();
        }
        for (i, d) in dslots.iter().enumerate() {
            if let Some(d) = d {
                d.done(rfds[i].revents & libc::POLLIN != 0);
            }
        }
        for (i, slot) in slots.iter().enumerate() {
            if let Some((h, _)) = slot {
                if let Ok(mut s) = lock(h) {
                    s.unregister_me();
                    if rfds[i].revents & libc::POLLIN != 0 {
                        s.consume_cq_event();
                    }
                }
            }
        }
        r?;
    }
}

fn unregister_all(slots: &[Option<(Handle, WaitToken)>]) {
    for (h, _) in slots.iter().flatten() {
        if let Ok(mut s) = lock(h) {
            s.unregister_me();
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
        // The table's lock ends with the lookup: no socket is locked under it.
        match sock::lookup(f.fd).ok() {
            Some(Sock::Stream(h)) => {
                f.revents = match lock(&h) {
                    Ok(mut s) => s.poll_events(f.events),
                    Err(Errno::EBADF) => libc::POLLNVAL,
                    Err(_) => libc::POLLERR,
                };
            }
            Some(Sock::Dgram(d)) => f.revents = dgram::poll_events(&d, f.events),
            None => {
                let mut p = [libc::pollfd { fd: f.fd, events: f.events, revents: 0 }];
                if verbs::poll(&mut p, 0).unwrap_or(0) > 0 {
                    f.revents = p[0].revents;
                }
            }
        }
        if f.revents != 0 {
            n += 1;
        }
    }
    Ok(n)
}

impl Stream {
    /// Arms the CQ (if not yet) and returns what a blocked call sleeps on.
    fn prepare_wait(&mut self) -> Result<WaitToken, Errno> {
        self.arm();
        self.wait_token()
    }
}

/// The common shape of rsend, rrecv and riowrite: `op` runs without
/// blocking under the lock and returns the bytes it moved and whether the
/// call is finished; a blocking call that would block (EAGAIN) sleeps
/// without the lock and tries again. `done` counts the bytes moved so far.
/// On a socket still opening, a blocking call first waits for the
/// connection; a non-blocking one returns EAGAIN, as upstream.
fn run_blocking(h: &Handle, flags: c_int, mut op: impl FnMut(&mut Stream, usize) -> Result<(usize, bool), Errno>) -> Result<usize, Errno> {
    let mut done = 0usize;
    let r = sleep_until(h, |s| {
        let nb = s.nonblocking() || flags & libc::MSG_DONTWAIT != 0;
        if s.state & ST_OPENING != 0 {
            return if nb { Err(Errno::EAGAIN) } else { Ok(None) };
        }
        loop {
            match op(s, done) {
                Ok((n, fin)) => {
                    done += n;
                    if fin || nb {
                        return Ok(Some(()));
                    }
                    // Progress: try again at once; only an EAGAIN sleeps.
                }
                Err(Errno::EAGAIN) if !nb && s.is_connected_state() => {
                    // Arm, then look once more before sleeping.
                    if s.arm() {
                        continue;
                    }
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
        }
    });
    match r {
        Ok(()) => Ok(done),
        Err(e) if done > 0 => {
            let _ = e;
            Ok(done)
        }
        Err(e) => Err(e),
    }
}

/// rsend: a blocking send sleeps without holding the socket, so that another thread's
/// rrecv on it keeps going.
pub fn send(h: &Handle, buf: &[u8], flags: c_int) -> Result<usize, Errno> {
    run_blocking(h, flags, |s, done| {
        let n = s.send(&buf[done..])?;
        Ok((n, done + n == buf.len()))
    })
}

/// rrecv: as [`send`], sleeping without holding the socket.
pub fn recv(h: &Handle, buf: &mut [u8], flags: c_int) -> Result<usize, Errno> {
    let len = buf.len();
    let waitall = flags & libc::MSG_WAITALL != 0 && flags & libc::MSG_PEEK == 0;
    let inner = (flags & !libc::MSG_WAITALL) | libc::MSG_DONTWAIT;
    run_blocking(h, flags, |s, done| {
        let n = s.recv(&mut buf[done..], inner)?;
        Ok((n, n == 0 || done + n == len || !waitall))
    })
}

/// riowrite, sleeping without holding the socket when it blocks.
pub fn iowrite(h: &Handle, buf: &[u8], offset: u64, flags: c_int) -> Result<usize, Errno> {
    run_blocking(h, flags, |s, done| {
        let n = s.iowrite(&buf[done..], offset + done as u64)?;
        Ok((n, (n == 0 && !buf.is_empty()) || done + n == buf.len()))
    })
}
impl Stream {
    /// Copies `data` into the send ring at the current position; returns the SGEs (1 or 2).
    fn stage(&mut self, data: &[u8]) -> ([Sge; 2], usize) {
        let n = data.len() as u32;
        let room = self.sbuf_size - self.ssgl0_off;
        let off = self.ssgl0_off as usize;
        let sbuf = &self.ep().sbuf;
        if n <= room {
            // [ssgl0_off, +n) lies within sbuf_size of the send buffer.
            sbuf.write(off, data);
            let sge = sbuf.sge(off, n);
            self.ssgl0_off = if n < room { self.ssgl0_off + n } else { 0 };
            ([sge, Sge::default()], 1)
        } else {
            // The two pieces fit the end and the start of the send buffer.
            let second = n - room;
            sbuf.write(off, &data[..room as usize]);
            sbuf.write(0, &data[room as usize..]);
            let sges = [sbuf.sge(off, room), sbuf.sge(0, second)];
            self.ssgl0_off = second;
            (sges, 2)
        }
    }

    fn wait_can_send(&mut self) -> Result<(), Errno> {
        if !self.can_send() {
            self.process_cq(Stream::conn_can_send)?;
            if self.state & ST_WRITABLE == 0 {
                return Err(Errno::ECONNRESET);
            }
        }
        Ok(())
    }

    /// Writes the riomap registrations the peer has not seen into its table.
    fn send_iomaps(&mut self) -> Result<(), Errno> {
        while let Some(pos) = self.iomaps.iter().position(|m| !m.sent) {
            self.wait_can_send()?;
            let (offset, addr, rkey, len, index) = {
                let m = &self.iomaps[pos];
                (m.offset, m.mr.addr(), m.mr.rkey(), m.mr.len() as u32, m.index as u32)
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
            let raddr = wire::table_addr(self.remote_iomap.addr, index, IOMAP_ENTRY_SIZE);
            let rk = self.remote_iomap.key;
            let msg = msg_set(OP_IOMAP_SGL, index);
            let r = if self.sq_inline >= IOMAP_ENTRY_SIZE {
                self.post_write_msg(Data::Inline(&e), msg, raddr, rk)
            } else {
                let (sges, n) = self.stage(&e);
                self.post_write_msg(Data::Reg(&sges[..n]), msg, raddr, rk)
            };
            self.iomaps[pos].sent = true;
            r?;
        }
        Ok(())
    }

    /// riomap: registers the caller's buffer; with PROT_WRITE the peer may riowrite into it.
    pub fn iomap(&mut self, buf: UserBuf, prot: c_int, offset: i64) -> Result<i64, Errno> {
        let (addr, len) = (buf.addr(), buf.len());
        if self.ep.is_none() || prot & !libc::PROT_WRITE != 0 || len > u32::MAX as usize {
            return Err(Errno::EINVAL);
        }
        let write = prot & libc::PROT_WRITE != 0;
        let index = if write {
            let slots = self.remote_iomap.length as i32;
            (0..slots).find(|i| !self.iomaps.iter().any(|m| m.index == *i)).ok_or(Errno::ENOMEM)?
        } else {
            -1
        };
        let mr = self.ep().qp.reg_user(buf, write)?;
        let offset = if offset == -1 { addr as i64 } else { offset };
        self.iomaps.push(IoMap { offset: offset as u64, mr, index, sent: index < 0 });
        Ok(offset)
    }

    /// riounmap (a write the peer may still target fails on its side).
    pub fn iounmap(&mut self, addr: u64, len: usize) -> Result<(), Errno> {
        let pos = self.iomaps.iter().position(|m| m.mr.addr() == addr && m.mr.len() == len).ok_or(Errno::EINVAL)?;
        self.iomaps.remove(pos);
        Ok(())
    }

    /// An entry of the peer-written mapping table covering `offset`.
    fn find_iomap(&self, offset: u64) -> Option<(u64, RsSge)> {
        wire::find_iomap(&self.ep().target, self.target_iomap_size, offset)
    }

    /// riowrite: RDMA-writes `buf` at `offset` of the peer's riomap'ed buffer.
    pub fn iowrite(&mut self, buf: &[u8], mut offset: u64) -> Result<usize, Errno> {
        self.check_connected()?;
        self.send_iomaps()?;
        let count = buf.len();
        let mut left = count;
        let mut off = 0usize;
        let mut olen = RS_OLAP_START_SIZE;
        let mut res: Result<(), Errno> = Ok(());
        let mut iom: Option<(u64, RsSge)> = None;
        while left > 0 {
            match iom {
                Some((o, e)) if wire::iomap_covers(o, &e, offset) => {}
                _ => {
                    iom = self.find_iomap(offset);
                }
            }
            let Some((ioff, isge)) = iom else { break };
            if let Err(e) = self.wait_can_send() {
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
            let (raddr, room) = wire::iomap_target(ioff, &isge, offset);
            xfer = xfer.min(self.sbuf_bytes_avail).min(room);
            let chunk = &buf[off..off + xfer as usize];
            self.sqe_avail -= 1;
            self.sbuf_bytes_avail -= xfer;
            let wr = msg_set(OP_WRITE, xfer) as u64;
            let r = if xfer <= self.sq_inline {
                self.ep().qp.post_send(wr, Data::Inline(chunk), verbs::WR_RDMA_WRITE, 0, 0, raddr, isge.key)
            } else {
                // The staged copy lives in the registered send ring until completion.
                let (sges, n) = self.stage(chunk);
                self.ep().qp.post_send(wr, Data::Reg(&sges[..n]), verbs::WR_RDMA_WRITE, 0, 0, raddr, isge.key)
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
        assert_eq!(create(libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_TCP).err(), Some(Errno::ENOTSUP));
        assert_eq!(create(libc::AF_UNIX, libc::SOCK_DGRAM, 0).err(), Some(Errno::ENOTSUP));
        // SOCK_DGRAM is a datagram rsocket (its UDP socket's number).
        let d = create(libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_UDP).expect("dgram rsocket");
        assert!(matches!(lookup(d), Ok(Sock::Dgram(_))));
        close(d).expect("close");
        assert_eq!(lookup(-1).err(), Some(Errno::EBADF));
        assert_eq!(close(-1).err(), Some(Errno::EBADF));
    }

    #[test]
    fn rpoll_on_ordinary_descriptors() {
        let (r, w) = nix::unistd::pipe().expect("pipe");
        use std::os::fd::AsRawFd;
        let mut p = [libc::pollfd { fd: r.as_raw_fd(), events: libc::POLLIN, revents: 0 }, libc::pollfd { fd: w.as_raw_fd(), events: libc::POLLOUT, revents: 0 }];
        assert_eq!(poll(&mut p, 0), Ok(1));
        assert_eq!(p[1].revents, libc::POLLOUT);
        p[1].events = 0;
        assert_eq!(poll(&mut p, 20), Ok(0));
        assert_eq!(nix::unistd::write(&w, b"x"), Ok(1));
        assert_eq!(poll(&mut p, -1), Ok(1));
        assert_eq!(p[0].revents, libc::POLLIN);
    }

    /// A stream without an id (what rclose leaves), for the locking rules.
    fn bare() -> Handle {
        Arc::new(Mutex::new(Stream::fresh(None, -1, libc::AF_INET)))
    }

    fn token(h: &Handle) -> WaitToken {
        lock(h).expect("usable").wait_token().expect("eventfd")
    }

    /// The no-lock-across-wait rule, checked: a wait while this thread
    /// holds a stream guard is a bug (debug builds panic).
    #[test]
    #[cfg(debug_assertions)]
    fn wait_refuses_a_held_lock() {
        let h = bare();
        let tok = token(&h);
        assert_eq!(wait(&tok, 0), Ok(false));
        let g = lock(&h).expect("usable");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wait(&tok, 0)));
        assert!(r.is_err(), "wait must refuse to run with a stream guard held");
        drop(g);
        assert_eq!(HELD.with(|c| c.get()), 0);
        assert_eq!(wait(&tok, 0), Ok(false));
    }

    /// A panic while a stream is locked marks it broken: later calls fail
    /// with EIO instead of using half-updated state; rclose still frees it.
    #[test]
    fn panic_under_the_lock_breaks_the_stream() {
        let h = bare();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut s = lock(&h).expect("usable");
            s.state = ST_CONNECTING;
            panic!("in the middle of an update");
        }));
        assert!(r.is_err());
        assert_eq!(lock(&h).err(), Some(Errno::EIO));
        assert_eq!(HELD.with(|c| c.get()), 0);
        lock_any(&h).destroy();
        assert_eq!(lock(&h).err(), Some(Errno::EBADF));
    }

    /// A thread sleeping on a stream wakes when the stream is closed and
    /// sees EBADF when it re-locks (what rrecv/rsend/rpoll sleepers do).
    #[test]
    fn close_wakes_a_sleeper() {
        let h = bare();
        let h2 = h.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            // The sleeper registers itself (its own wake-up descriptor).
            let tok = token(&h2);
            tx.send(()).expect("registered");
            let woke = wait(&tok, 10_000);
            (woke, after_wait(&h2))
        });
        rx.recv().expect("sleeper");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let start = std::time::Instant::now();
        lock_any(&h).destroy();
        let (woke, again) = t.join().expect("sleeper");
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(woke, Ok(false));
        assert_eq!(again, Err(Errno::EBADF));
    }

    /// The exact hand-off: a change made under another thread's guard (a
    /// completion processed, a CQ event consumed) wakes a registered
    /// sleeper at once; a change by the sleeper's own thread does not
    /// signal itself.
    #[test]
    fn a_change_wakes_the_other_sleepers() {
        let h = bare();
        let h2 = h.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let tok = token(&h2);
            tx.send(()).expect("registered");
            let start = std::time::Instant::now();
            let woke = wait(&tok, 10_000);
            (woke, start.elapsed(), lock(&h2).map(|mut s| {
                s.unregister_me();
                s.sleepers.len()
            }))
        });
        rx.recv().expect("sleeper");
        std::thread::sleep(std::time::Duration::from_millis(50));
        {
            let mut s = lock(&h).expect("usable");
            // An unchanged stream signals nobody.
            assert_eq!(s.sleepers.len(), 1);
            drop(s);
            std::thread::sleep(std::time::Duration::from_millis(50));
            s = lock(&h).expect("usable");
            assert_eq!(s.sleepers.len(), 1, "a guard without a change must not wake sleepers");
            s.dirty = true;
        }
        let (woke, slept, left) = t.join().expect("sleeper");
        assert_eq!(woke, Ok(false));
        assert!(slept < std::time::Duration::from_secs(5), "the sleeper must wake at once, slept {slept:?}");
        assert_eq!(left, Ok(0));
        // Our own change does not wake ourselves.
        let tok = token(&h);
        lock(&h).expect("usable").dirty = true;
        assert_eq!(wait(&tok, 0), Ok(false));
        let mut p = [libc::pollfd { fd: tok.wake.fd(), events: libc::POLLIN, revents: 0 }];
        assert_eq!(verbs::poll(&mut p, 0), Ok(0));
    }
}
