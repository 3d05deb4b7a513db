// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The stream: one stream rsocket ([`Stream`]) and its locks
//! ([`StreamCell`]). A stream holds its parts, each owned by the file that
//! keeps its invariants, with its fields private there: the connection
//! control ([`super::control`]: state, error, option bits, closed), the
//! send half ([`super::send_half`]), the receive half
//! ([`super::recv_half`]), the riomap registrations
//! ([`super::iomap_table`]), the sleepers ([`super::sleepers`]), the
//! making and keeping of the connection ([`super::connector`]: destination,
//! resolution attempts, keepalive schedule) and the listening side
//! ([`super::listener`]: the accept queue). Here are what joins them (the
//! endpoint, the connection manager id, the descriptor flags) and what is
//! read off several at once (can it send, has it data, is it connected).
//! A send goes down from its call (`send`) to the stream, to the send
//! half, to the verbs; a receive likewise through the receive half. This
//! file names those parts' files and none of the stream's calls.
#![deny(unsafe_code)]

use nix::errno::Errno;
use std::ffi::c_int;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use super::conf;
use super::options::SockOpts;
use super::verbs::{Qp, RegBuf};
use super::wire::RsSge;
use crate::cma::api::CmId;
use parking_lot::Mutex;

pub(super) use super::send_half::{next_chunk, SendHalf, RS_MAX_CTRL_MSG, RS_OLAP_START_SIZE};
#[cfg(test)]
pub(super) use super::send_half::RS_QP_CTRL_SIZE;
pub(super) use super::wire::{OPT_MSG_SEND, OPT_SWAP_SGL, RS_SNDLOWAT, WR_MSG_SEND, WR_RECV};
pub(super) use super::iomap_table::IoMaps;
pub(super) use super::sleepers::Sleepers;
pub use super::sleepers::{WANTS_ALL, WANTS_RECV, WANTS_SEND};
pub(super) use super::recv_half::{RecvHalf, RS_MSG_SIZE};

pub(super) const RS_QP_MIN_SIZE: u32 = 16;

pub(super) const RS_QP_MAX_SIZE: u32 = 0xFFFE;

pub(super) const CTRL_DISCONNECT: u32 = 0;

pub(super) const CTRL_KEEPALIVE: u32 = 1;

pub(super) const CTRL_SHUTDOWN: u32 = 2;

pub(super) use super::control::*;
pub(super) use super::connector::Connector;
pub(super) use super::listener::Listener;

/// The QP and registered buffers of a connected stream.
pub(super) struct Ep {
    /// Dropped first (fields drop in order): it acks the CQ events.
    pub(super) qp: Qp,
    pub(super) sbuf: RegBuf,
    pub(super) target: RegBuf,
    pub(super) rbuf: RegBuf,
}

/// One stream rsocket.
pub struct Stream {
    /// None once closed.
    pub(super) cm: Option<Arc<CmId>>,
    pub(super) fd: c_int,
    pub(super) domain: c_int,
    /// Where the connection stands, its error and option bits, closed or
    /// broken ([`super::control`]).
    pub(super) ctl: Control,
    /// rfcntl's F_GETFL/F_SETFL value (O_NONBLOCK makes calls non-blocking)
    /// and F_GETFD/F_SETFD value, stored as upstream stores them.
    pub(super) fs_flags: c_int,
    pub(super) fd_flags: c_int,
    /// The option values kept for rgetsockopt (SO_KEEPALIVE's period
    /// among them).
    pub(super) so: SockOpts,
    /// rconnect's destination, resolution attempts and wait mode, and
    /// the keepalive schedule ([`super::connector`]).
    pub(super) conn: Connector,
    /// A listener's accepted connections, or an accepting stream's
    /// listener ([`super::listener`]).
    pub(super) lq: Listener<StreamCell>,
    /// Registered with the service thread.
    pub(super) in_svc: bool,

    /// The receive half: receive buffer, messages received, credits owed
    /// ([`super::recv_half`]).
    pub(super) rx: RecvHalf,

    /// The send half: send queue, ring, credits, control slots
    /// ([`super::send_half`]).
    pub(super) tx: SendHalf,
    /// The CQ is armed: its next completion signals the channel.
    pub(super) cq_armed: bool,

    /// The riomap registrations and the peer's table of them
    /// ([`super::iomap_table`]).
    pub(super) iomaps: IoMaps,

    /// Shared with a send or receive in progress, which copies and posts
    /// without the stream's lock (see [`StreamCell`]).
    pub(super) ep: Option<Arc<Ep>>,

    /// Where a poll of the CQ puts its completions (kept here: no array
    /// to fill per poll).
    pub(super) wcs: [super::verbs::Wc; super::verbs::POLL_BATCH],
    /// The threads sleeping on the stream and what wakes them
    /// ([`super::sleepers`]).
    pub(super) sleepers: Sleepers,
    /// How the stream's recent busy polls ended (whether a blocked call
    /// spins before it sleeps).
    pub(super) spin: super::spin::SpinPolicy,
    /// Times a guard let go of the state in [`super::guard::Guard::unlocked`]
    /// (wrapping): a blocked call's look that kept it locked throughout
    /// saw a state nobody else changed since.
    pub(super) unlocks: u32,
}

/// One stream and its locks, in the order they are taken: `slock` (one
/// sender at a time: it owns the send ring's free space it has reserved
/// and posts in sequence order), `rlock` (one receiver at a time: it owns
/// the received bytes it has planned to copy until it consumes them), then
/// the stream's state `s`, held only for short non-blocking steps (taking
/// completions, credits, reservations). A send and a receive on one stream
/// hold different path locks, and copy their bytes and post with `s`
/// released ([`super::guard::Guard::unlocked`]), so neither waits for the
/// other's copying. None of them is held across a blocking wait.
pub struct StreamCell {
    pub(super) s: Mutex<Stream>,
    pub(super) slock: Mutex<()>,
    pub(super) rlock: Mutex<()>,
    /// The send queue's inline size as the last sender saw it under `s`
    /// (`u32::MAX` until then): rsend's fast path ([`super::send`]) looks at
    /// it without any lock, to leave sends too long to go inline to the
    /// general path before it takes a lock. Only a filter: the size fixed
    /// with the QP, it is checked again under `s`.
    pub(super) inline_hint: AtomicU32,
}

pub type Handle = Arc<StreamCell>;

/// A handle on a new stream.
pub(super) fn new_handle(s: Stream) -> Handle {
    Arc::new(StreamCell { s: Mutex::new(s), slock: Mutex::new(()), rlock: Mutex::new(()), inline_hint: AtomicU32::new(u32::MAX) })
}

impl Stream {
    /// A fresh, unconnected stream on `cm` (whose channel fd is `fd`) with
    /// the default sizes and options.
    pub(super) fn fresh(cm: Option<Arc<CmId>>, fd: c_int, domain: c_int) -> Stream {
        let c = conf::get();
        Stream {
            cm,
            fd,
            domain,
            ctl: Control::default(),
            fs_flags: 0,
            fd_flags: 0,
            so: SockOpts::default(),
            conn: Connector::default(),
            lq: Listener::default(),
            in_svc: false,
            rx: RecvHalf::new(c.mem, c.rqsize as u32),
            tx: SendHalf::new(c.wmem, c.sqsize as u32, c.inline as u32),
            cq_armed: false,
            iomaps: IoMaps::new(c.iomap_size as u32),
            ep: None,
            sleepers: Sleepers::default(),
            wcs: [super::verbs::Wc::default(); super::verbs::POLL_BATCH],
            spin: super::spin::SpinPolicy::default(),
            unlocks: 0,
        }
    }

    pub(super) fn ep(&self) -> &Ep {
        self.ep_arc()
    }

    pub(super) fn ep_arc(&self) -> &Arc<Ep> {
        // Only called once the endpoint exists (connected states).
        self.ep.as_ref().expect("rsocket endpoint")
    }

    pub(super) fn cm(&self) -> Result<&Arc<CmId>, Errno> {
        self.cm.as_ref().ok_or(Errno::EBADF)
    }

    /// Reads entry `i` of our descriptor table (the peer writes it remotely).
    #[cfg(test)]
    pub(super) fn target_get(&self, i: usize) -> RsSge {
        RsSge::read(&self.ep().target, i * 16)
    }

    #[inline]
    pub(super) fn target_set(&self, i: usize, v: RsSge) {
        let t = &self.ep().target;
        t.write_u64(i * 16, v.addr);
        t.write_u32(i * 16 + 8, v.key);
        t.write_u32(i * 16 + 12, v.length);
    }

    #[inline]
    pub(super) fn ctrl_avail(&self) -> bool {
        self.tx.ctrl_avail()
    }

    #[inline]
    pub(super) fn can_send(&self) -> bool {
        self.tx.has_room(self.ctl.opts()) && self.tx.target(&self.ep().target).length != 0
    }

    pub(super) fn conn_can_send(&self) -> bool {
        self.can_send() || !self.ctl.writable()
    }

    pub(super) fn conn_can_send_ctrl(&self) -> bool {
        self.ctrl_avail() || !self.ctl.connected()
    }

    pub(super) fn have_rdata(&self) -> bool {
        self.rx.has_data()
    }

    pub(super) fn conn_have_rdata(&self) -> bool {
        self.have_rdata() || !self.ctl.readable()
    }

    pub(super) fn all_sends_done(&self) -> bool {
        self.tx.all_done() || !self.ctl.connected()
    }

    pub(super) fn poll_all(&self) -> bool {
        true
    }

    pub(super) fn check_connected(&self) -> Result<(), Errno> {
        let was_connected = self.ctl.connected() || self.ctl.state() == ST_DISCONNECTED || self.ctl.state() == ST_ERROR;
        if was_connected && self.ep.is_some() {
            Ok(())
        } else {
            Err(Errno::ENOTCONN)
        }
    }

    pub fn local_addr(&self) -> Result<libc::sockaddr_storage, Errno> {
        Ok(self.cm()?.local_addr())
    }

    pub fn peer_addr(&self) -> Result<libc::sockaddr_storage, Errno> {
        Ok(self.cm()?.peer_addr())
    }

    pub fn is_connected_state(&self) -> bool {
        self.ctl.connected()
    }

    pub fn is_listening(&self) -> bool {
        self.ctl.state() == ST_LISTENING
    }

    pub fn fd(&self) -> c_int {
        self.fd
    }

    pub fn nonblocking(&self) -> bool {
        self.fs_flags & libc::O_NONBLOCK != 0
    }

    /// The descriptor to wait on besides the wake-up: the CQ channel once
    /// connected, else none (-1: the service thread signals the changes).
    pub fn wait_fd(&self) -> c_int {
        match &self.ep {
            Some(ep) if self.ctl.connected() => ep.qp.channel_fd(),
            _ => -1,
        }
    }
}
