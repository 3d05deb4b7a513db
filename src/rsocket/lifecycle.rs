// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A stream's life: creation, bind, listen and the background accepts,
//! the connect state machine (driven by the service thread), shutdown and
//! close, and the service thread's work on a stream (connection manager
//! events, keepalives).
#![deny(unsafe_code)]

use nix::errno::Errno;
use std::ffi::c_int;
use std::sync::Arc;
use super::blocking::{sleep_until, wait_until};
use super::guard::{lock, lock_any, lock_path, Path};
use super::state::*;
use super::svc::{self, STREAMS};
use super::verbs::Qp;
use super::wire::{self, msg_set, CONN_DATA_LEN, OP_CTRL};
use crate::abi::cma::AF_IB;
use crate::abi::sockaddr::SockAddr;
use crate::addrinfo::ib_hdr;
use crate::cma::api::{CmId, ConnParam, QpCaps};
use crate::sys::rsock;
use std::time::{Duration, Instant};

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
    Ok((fd, new_handle(s)))
}

/// A stream for a connection request on listener `l`: what upstream copies
/// from the listener (sizes and descriptor flags; not the options).
pub(super) fn inherit(l: &Stream, id: Arc<CmId>) -> Stream {
    let fd = id.channel_fd();
    Stream {
        fs_flags: l.fs_flags,
        fd_flags: l.fd_flags,
        rx: l.rx.inherit(),
        tx: l.tx.inherit(),
        iomaps: l.iomaps.inherit(),
        ..Stream::fresh(Some(id), fd, l.domain)
    }
}

impl Stream {
    // ---- endpoint -------------------------------------------------------------------

    pub(super) fn create_ep(&mut self) -> Result<(), Errno> {
        let id = self.cm()?.clone();
        if !id.has_device() {
            return Err(Errno::EINVAL);
        }
        let max = id.max_qp_wr()?.min(RS_QP_MAX_SIZE);
        self.tx.set_sq_size(self.tx.sq_size().clamp(RS_QP_MIN_SIZE, max.max(RS_QP_MIN_SIZE)));
        self.rx.set_rq_size(self.rx.rq_size().clamp(RS_QP_MIN_SIZE, max.max(RS_QP_MIN_SIZE)));
        if id.is_iwarp() {
            self.ctl.set_opt(OPT_MSG_SEND);
            if self.tx.sq_inline() < RS_MSG_SIZE {
                self.tx.set_sq_inline(RS_MSG_SIZE);
            }
        }
        // One CQ and one channel for both directions, owned by the id.
        let caps = QpCaps { max_send_wr: self.tx.sq_size(), max_recv_wr: self.rx.rq_size(), max_send_sge: 2, max_recv_sge: 1, max_inline_data: self.tx.sq_inline() };
        let (qp, got) = Qp::new(&id, self.tx.sq_size() + self.rx.rq_size(), caps)?;
        self.install_ep(qp, got.max_inline_data)
    }

    /// The endpoint over a new QP (the device's, or a unit test's fake):
    /// registers the send ring, the credit table and the receive buffer,
    /// sets the counters and posts the receives. `inline` is the QP's
    /// inline size.
    pub(super) fn install_ep(&mut self, qp: Qp, inline: u32) -> Result<(), Errno> {
        let _ = qp.req_notify();
        // A blocking socket's sleeper reads the channel itself (one system
        // call per sleep: `Stream::sleep_token`); rfcntl switches it.
        qp.set_channel_blocking(!self.nonblocking())?;
        self.tx.set_sq_inline(inline);
        if self.ctl.opts() & OPT_MSG_SEND != 0 && inline < RS_MSG_SIZE {
            return Err(Errno::ENOTSUP);
        }

        let sbuf = qp.reg_buf(self.tx.sbuf_len() as usize, false)?;
        let target = qp.reg_buf(wire::target_table_len(self.iomaps.target_size()), true)?;
        let rbuf = qp.reg_buf(self.rx.rbuf_len(self.ctl.opts()) as usize, true)?;
        self.ep = Some(Arc::new(Ep { qp, sbuf, target, rbuf }));
        self.tx.start();
        self.rx.start();
        for _ in 0..self.rx.rq_size() {
            self.post_recv()?;
        }
        Ok(())
    }

    /// Bytes in front of the connect data: on an AF_IB stream room for an
    /// `ib_connect_hdr`, as upstream leaves (it sends whatever its stack
    /// held there; we send zeros), and the passive side skips them.
    pub(super) fn conn_data_offset(&self) -> usize {
        match self.cm() {
            Ok(id) if c_int::from(id.local_addr().ss_family) == AF_IB => ib_hdr::LEN,
            _ => 0,
        }
    }

    pub(super) fn format_conn_data(&self) -> [u8; CONN_DATA_LEN] {
        let ep = self.ep();
        wire::format_conn_data(self.rx.rq_size(), self.iomaps.target_size(), (ep.target.addr(), ep.target.rkey()), (ep.rbuf.addr(), ep.rbuf.rkey()), self.rx.half())
    }

    /// Takes the peer's connect data (see [`wire::parse_conn_data`]).
    pub(super) fn save_conn_data(&mut self, c: &wire::ConnData) {
        self.rx.set_peer_table(c.sgl);
        if c.swap {
            self.ctl.set_opt(OPT_SWAP_SGL);
        }
        if let Some(iomap) = c.iomap {
            self.iomaps.set_remote(iomap);
        }
        self.target_set(0, c.data_buf);
        self.tx.set_credits(c.credits);
    }

    /// The connect parameters of our side (the QP and buffers exist).
    pub(super) fn conn_param(&self) -> ConnParam {
        let mut private_data = vec![0u8; self.conn_data_offset()];
        private_data.extend_from_slice(&self.format_conn_data());
        ConnParam {
            private_data,
            responder_resources: 0,
            initiator_depth: if self.ctl.opts() & OPT_MSG_SEND != 0 { 1 } else { 0 },
            flow_control: 1,
            retry_count: 7,
            rnr_retry_count: 7,
            srq: 0,
            qp_num: 0,
        }
    }

    // ---- connection management ------------------------------------------------------

    /// rbind: `addr` holds a socket address of its family.
    pub fn bind(&mut self, addr: &[u8]) -> Result<(), Errno> {
        self.cm()?.bind(&SockAddr::from_prefix(addr))?;
        self.ctl.set_state(ST_BOUND);
        Ok(())
    }

    /// rlisten: requests are accepted by the service thread into the
    /// accept queue (see [`Stream::accept_requests`]).
    pub(super) fn listen(&mut self, backlog: c_int) -> Result<(), Errno> {
        if self.ctl.state() == ST_LISTENING {
            return Ok(());
        }
        self.cm()?.listen(backlog)?;
        self.ctl.set_state(ST_LISTENING);
        Ok(())
    }

    /// Registers the stream with the service thread (once).
    pub(super) fn svc_add(&mut self, h: &Handle) -> Result<(), Errno> {
        if !self.in_svc {
            STREAMS.add(self.fd, h.clone(), self.cm()?.clone())?;
            self.in_svc = true;
        }
        Ok(())
    }

    /// Moves a connect (or an accept) on as far as it goes without waiting:
    /// upstream's connect state machine. Ok once connected, EINPROGRESS
    /// while an answer is outstanding; other errors are the connect's
    /// outcome (kept for SO_ERROR, the state becomes connect-error).
    pub(super) fn connect_step(&mut self) -> Result<(), Errno> {
        let r = self.connect_step_inner();
        match r {
            Err(Errno::EAGAIN) => Err(Errno::EINPROGRESS),
            Err(e) => {
                self.ctl.fail(ST_CONNECT_ERROR, e as c_int);
                self.sleepers.touch();
                Err(e)
            }
            Ok(()) => {
                self.sleepers.touch();
                Ok(())
            }
        }
    }

    pub(super) fn connect_step_inner(&mut self) -> Result<(), Errno> {
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
        let mut step = match self.ctl.state() {
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
                    let to = self.conn.attempt();
                    self.ctl.set_state(ST_RESOLVING_ADDR);
                    id.resolve_addr(&SockAddr::from_prefix(self.conn.dst()), to)?;
                    self.conn.resolved();
                    Step::ResolveRoute
                }
                Step::WaitAddr => match id.complete() {
                    Ok(()) => {
                        self.conn.resolved();
                        Step::ResolveRoute
                    }
                    Err(Errno::ETIMEDOUT) if self.conn.may_retry() => Step::ResolveAddr,
                    Err(e) => return Err(e),
                },
                Step::ResolveRoute => {
                    self.ctl.set_state(ST_RESOLVING_ROUTE);
                    if let Some(r) = self.so.route.take() {
                        // The caller's path records (RDMA_ROUTE): the kernel
                        // answers with a resolved route.
                        id.set_option_bytes(crate::abi::ucma::RDMA_OPTION_IB, crate::abi::ucma::RDMA_OPTION_IB_PATH, &r)?;
                        Step::WaitRoute
                    } else {
                        let to = self.conn.attempt();
                        id.resolve_route(to)?;
                        Step::Connect
                    }
                }
                Step::WaitRoute => match id.complete() {
                    Ok(()) => Step::Connect,
                    Err(Errno::ETIMEDOUT) if self.conn.may_retry() => Step::ResolveRoute,
                    Err(e) => return Err(e),
                },
                Step::Connect => {
                    self.create_ep()?;
                    self.conn.resolved();
                    let param = self.conn_param();
                    self.ctl.set_state(ST_CONNECTING);
                    id.connect(&param)?;
                    return self.connected(&id);
                }
                Step::WaitConnect => {
                    id.complete()?;
                    return self.connected(&id);
                }
                Step::WaitAccept => {
                    id.complete()?;
                    self.ctl.set_state(ST_CONNECT_RDWR);
                    return Ok(());
                }
            };
        }
    }

    /// The active side's connect completed: takes the peer's connect data.
    pub(super) fn connected(&mut self, id: &CmId) -> Result<(), Errno> {
        self.take_conn_data(&id.parked_private_data())
    }

    /// The peer's connect data `resp` (the answer to our connect):
    /// connected, or ENOTSUP when it is not rsocket's.
    pub(super) fn take_conn_data(&mut self, resp: &[u8]) -> Result<(), Errno> {
        if let Some(c) = wire::parse_conn_data(resp) {
            self.save_conn_data(&c);
            self.ctl.set_state(ST_CONNECT_RDWR);
            Ok(())
        } else {
            Err(Errno::ENOTSUP)
        }
    }

    /// A listener's connection requests (service thread, never blocks):
    /// each becomes a stream in the table, accepted: in the accept queue at
    /// once when established, else once the service thread has completed
    /// it (see [`cm_event`]). `me` is this listener.
    pub(super) fn accept_requests(&mut self, me: &Handle) {
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
                s.ctl.set_state(ST_ACCEPTING);
                match nid.accept(&param) {
                    Ok(()) => s.ctl.set_state(ST_CONNECT_RDWR),
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
            let established = s.ctl.connected();
            if !established {
                s.lq.set_parent(Arc::downgrade(me));
            }
            let h: Handle = new_handle(s);
            {
                let mut g = lock_any(&h);
                if let Err(e) = g.svc_add(&h) {
                    log::debug!(target: "rdmacm", "rsocket listener: no service for a new stream: {e}");
                }
            }
            if established {
                self.lq.queue(h);
                self.sleepers.touch();
            } else {
                self.lq.pending(h);
            }
        }
    }

    /// Takes the connection manager events of a connected (or failed)
    /// stream: a disconnect from the peer ends the connection.
    pub(super) fn drain_cm_events(&mut self) {
        let Ok(id) = self.cm().cloned() else { return };
        for _ in 0..16 {
            match id.complete() {
                Err(Errno::EAGAIN) => return,
                _ => {
                    if id.parked_event() == Some(crate::abi::cma::RDMA_CM_EVENT_DISCONNECTED) && self.ctl.connected() {
                        self.ctl.set_state(ST_DISCONNECTED);
                        self.sleepers.touch();
                        // The connection is over: the QP stops (as rshutdown
                        // stops it once disconnected), and its flushed
                        // receives wake a reader asleep on the channel.
                        self.shutdown_end();
                    }
                }
            }
        }
    }

    /// The keepalive due at `now`, if any; the next time one is due.
    pub(super) fn keepalive_tick(&mut self, now: Instant) -> Option<Instant> {
        if !self.so.keepalive {
            return None;
        }
        let next = self.conn.keepalive_due(now + Duration::from_secs(self.so.keepalive_time as u64));
        if next > now {
            return Some(next);
        }
        if self.ctl.connected() && self.ep.is_some() && self.ctrl_avail() {
            self.tx.take_ctrl();
            let _ = self.post_msg(msg_set(OP_CTRL, CTRL_KEEPALIVE));
        }
        let n = now + Duration::from_secs(self.so.keepalive_time as u64);
        self.conn.set_keepalive_due(Some(n));
        Some(n)
    }

    /// The first step of rshutdown: updates the state; the control message to
    /// send, if any.
    pub(super) fn shutdown_begin(&mut self, how: c_int) -> Option<u32> {
        if !self.ctl.connected() {
            return None;
        }
        self.sleepers.touch();
        if how == libc::SHUT_RDWR {
            self.ctl.shut(ST_READABLE | ST_WRITABLE);
            Some(CTRL_DISCONNECT)
        } else if how == libc::SHUT_WR {
            self.ctl.shut(ST_WRITABLE);
            Some(if self.ctl.readable() { CTRL_SHUTDOWN } else { CTRL_DISCONNECT })
        } else {
            self.ctl.shut(ST_READABLE);
            if self.ctl.writable() {
                return None;
            }
            Some(CTRL_DISCONNECT)
        }
    }

    /// The last step of rshutdown: once disconnected, the QP is stopped (its
    /// posted receives flush, which wakes rpoll sleepers). The disconnect
    /// request itself goes out when the id is destroyed (rclose).
    pub(super) fn shutdown_end(&mut self) {
        if self.ctl.state() & ST_DISCONNECTED != 0 {
            if let Some(ep) = &self.ep {
                let _ = ep.qp.req_notify();
                let _ = ep.qp.stop();
            }
        }
    }

    /// rclose's end: marks the stream closed, wakes its sleepers and drops
    /// what it owns (registrations, then QP and buffers, then the id: the
    /// id itself goes when the last sleeper lets go of it).
    pub(super) fn destroy(&mut self) {
        self.ctl.close();
        self.sleepers.touch();
        self.wake_sleepers();
        self.iomaps.clear();
        self.ep = None;
        self.cm = None;
    }
}

/// Waits until the stream is no longer opening (connecting or accepting).
pub(super) fn wait_opened(h: &Handle) -> Result<(), Errno> {
    sleep_until(h, |s| Ok((s.ctl.state() & ST_OPENING == 0).then_some(())))
}

/// rconnect: starts (or continues) the connect; the service thread carries
/// it on. A socket made non-blocking with rfcntl before (see
/// [`Connector::nonblock`]) returns EINPROGRESS until it is connected (then 0);
/// otherwise the call sleeps, without the lock, until the outcome.
pub fn connect(h: &Handle, addr: &[u8]) -> Result<(), Errno> {
    let (r, nonblock) = {
        let mut s = lock(h)?;
        if s.ctl.state() == ST_INIT || s.ctl.state() == ST_BOUND {
            s.conn.set_dst(addr);
        }
        let r = s.connect_step();
        if matches!(r, Ok(()) | Err(Errno::EINPROGRESS)) {
            s.svc_add(h)?;
        }
        (r, s.conn.nonblock())
    };
    match r {
        Err(Errno::EINPROGRESS) if !nonblock => {
            wait_opened(h)?;
            let s = lock(h)?;
            if s.ctl.connected() {
                Ok(())
            } else {
                Err(crate::sys::errno_from_raw(if s.ctl.err() != 0 { s.ctl.err() } else { libc::ECONNREFUSED }))
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
                // After any send in progress has posted (it took its credits
                // before the shutdown): the peer sees its data first.
                let _sending = lock_path(h, Path::Send);
                let mut s = lock(h)?;
                if s.ctl.connected() && s.ctrl_avail() {
                    s.tx.take_ctrl();
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
        if let Some(n) = l.lq.pop() {
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
        !s.ctl.broken() && !s.ctl.closed() && s.ctl.connected()
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
    STREAMS.remove(svc::key(h));
    let pending: Vec<Handle> = {
        let mut s = lock_any(h);
        let q = s.lq.take_all();
        s.destroy();
        q
    };
    for p in pending {
        close_begin(&p);
        close_end(&p);
    }
}

impl svc::Client for StreamCell {
    fn readable(self: Arc<Self>) -> bool {
        cm_event(&self)
    }

    fn tick(self: Arc<Self>, now: Instant) -> Option<Instant> {
        keepalive_tick(&self, now)
    }
}

/// The service thread's work on a stream whose channel is readable; false
/// once the stream is gone (closed or broken).
fn cm_event(h: &Handle) -> bool {
    let mut s = lock_any(h);
    if s.ctl.closed() || s.ctl.broken() {
        return false;
    }
    if s.ctl.state() == ST_LISTENING {
        s.accept_requests(h);
    } else if s.ctl.state() == ST_ACCEPTING {
        let _ = s.connect_step();
        if s.ctl.state() & ST_OPENING != 0 {
            return true;
        }
        // Established (to the accept queue) or failed (gone, as upstream
        // drops a request it could not accept).
        let l = s.lq.take_parent();
        let mut ok = s.ctl.connected();
        drop(s);
        if let Some(l) = l.and_then(|l| l.upgrade()) {
            let mut l = lock_any(&l);
            let known = l.lq.settle(h);
            if ok && known && !l.ctl.closed() && !l.ctl.broken() {
                l.lq.queue(h.clone());
                l.sleepers.touch();
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
    } else if s.ctl.state() & ST_OPENING != 0 {
        let _ = s.connect_step();
    } else {
        s.drain_cm_events();
    }
    true
}

/// The service thread's keepalive work on a stream (see [`Stream::keepalive_tick`]).
fn keepalive_tick(h: &Handle, now: Instant) -> Option<Instant> {
    let mut s = lock_any(h);
    if s.ctl.closed() || s.ctl.broken() {
        return None;
    }
    s.keepalive_tick(now)
}
