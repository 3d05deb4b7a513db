// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A fake RC fabric for unit tests (compiled only with `cfg(test)`): two
//! queue pairs joined as one reliable connection, with memory
//! registrations, RDMA writes, sends, receive queues, a completion queue
//! per end and a completion channel whose descriptor (an eventfd) becomes
//! readable when an armed CQ gets a completion. [`super::verbs`] wraps an
//! end of it as a fake `Qp` (so the stream's real code runs over it); a
//! test can hold the other end as a [`RawPeer`] and speak (or break) the
//! protocol by hand.
//!
//! What a device would do, as far as the stream can see it:
//! * an RDMA write lands in the peer's registration named by (address,
//!   key), checked against its bounds and remote-write right; a bad one
//!   completes with a remote access error and both QPs go to error (their
//!   posted receives flush);
//! * a write with immediate and a send (with immediate or not) take one
//!   posted receive of the peer; with none posted the operation, and every later one of that
//!   end, waits until the peer posts one (RNR retry without limit, as
//!   rsockets set their QPs up), or with [`FakeQp::rnr_error`] fails with
//!   an RNR error completion and both QPs go to error;
//! * work requests are carried out in order, at once, unless the end is
//!   held ([`FakeQp::hold`]: a stalled device, which reads registered
//!   sources only when it carries the operation out; inline data is
//!   copied when posted);
//! * a send work request completes when it was posted signalled or when
//!   it fails (a flush included);
//! * a QP in error flushes what is posted to it.
//!
//! Not modelled: queue and CQ depths (nothing overflows), asynchronous
//! delivery of incoming messages (they land while the sender posts).
//!
//! No memory is touched here: registered memory is reached through
//! [`Mem`], which `verbs` implements over its buffers (its raw copies,
//! bounds-checked there) and [`VecMem`] over a vector.
#![deny(unsafe_code)]

use nix::errno::Errno;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::ffi::c_int;
use std::sync::Arc;
use crate::sys::wake::Wake;

/// `IBV_WC_SUCCESS` and the error statuses a fake device reports.
pub const WC_SUCCESS: u32 = 0;
pub const WC_LOC_LEN_ERR: u32 = 1;
pub const WC_LOC_PROT_ERR: u32 = 4;
pub const WC_WR_FLUSH_ERR: u32 = 5;
pub const WC_REM_ACCESS_ERR: u32 = 10;
pub const WC_RNR_RETRY_EXC_ERR: u32 = 13;

// The opcodes and flag of `verbs` (the same numbers as libibverbs').
const WR_RDMA_WRITE: c_int = 0;
const WR_RDMA_WRITE_WITH_IMM: c_int = 1;
const WR_SEND: c_int = 2;
const WR_SEND_WITH_IMM: c_int = 3;

/// Memory a registration covers: bounds-checked copies at offsets.
pub trait Mem: Send + Sync {
    fn len(&self) -> usize;
    fn read(&self, off: usize, out: &mut [u8]);
    fn write(&self, off: usize, data: &[u8]);
}

/// Memory of a raw peer: a vector.
pub struct VecMem(Mutex<Vec<u8>>);

impl VecMem {
    pub fn new(len: usize) -> Arc<VecMem> {
        Arc::new(VecMem(Mutex::new(vec![0; len])))
    }
    pub fn bytes(&self, off: usize, n: usize) -> Vec<u8> {
        self.0.lock()[off..off + n].to_vec()
    }
}

impl Mem for VecMem {
    fn len(&self) -> usize {
        self.0.lock().len()
    }
    fn read(&self, off: usize, out: &mut [u8]) {
        out.copy_from_slice(&self.0.lock()[off..off + out.len()]);
    }
    fn write(&self, off: usize, data: &[u8]) {
        self.0.lock()[off..off + data.len()].copy_from_slice(data);
    }
}

/// One completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FakeWc {
    pub wr_id: u64,
    pub status: u32,
    pub imm: Option<u32>,
    pub byte_len: u32,
    /// `IBV_WC_*`: [`WC_SEND`], [`WC_RDMA_WRITE`], [`WC_RECV`],
    /// [`WC_RECV_RDMA_WITH_IMM`].
    pub opcode: u32,
}

/// `IBV_WC_SEND`.
pub const WC_SEND: u32 = 0;
/// `IBV_WC_RDMA_WRITE`.
pub const WC_RDMA_WRITE: u32 = 1;
/// `IBV_WC_RECV`.
pub const WC_RECV: u32 = 128;
/// `IBV_WC_RECV_RDMA_WITH_IMM`.
pub const WC_RECV_RDMA_WITH_IMM: u32 = 129;

/// The completion opcode of a send work request's `IBV_WR_*` opcode.
fn wc_opcode(wr: c_int) -> u32 {
    if matches!(wr, WR_RDMA_WRITE | WR_RDMA_WRITE_WITH_IMM) {
        WC_RDMA_WRITE
    } else {
        WC_SEND
    }
}

/// A scatter entry: (address, length, local key).
pub type FakeSge = (u64, u32, u32);

/// What a send work request carries.
pub enum FakeData<'a> {
    None,
    Inline(&'a [u8]),
    Sges(&'a [FakeSge]),
}

struct Region {
    side: usize,
    addr: u64,
    len: usize,
    remote_write: bool,
    mem: Arc<dyn Mem>,
}

#[derive(Default)]
struct End {
    recvs: VecDeque<(u64, Option<FakeSge>)>,
    cq: VecDeque<FakeWc>,
    armed: bool,
    /// Channel events not read yet.
    events: u64,
    error: bool,
    /// Every work request posted to the send queue: (opcode, immediate,
    /// remote address, length), for tests to look at what went out.
    sent: Vec<(c_int, u32, u64, usize)>,
    /// A stalled device: this end's send work requests wait, unread,
    /// until released (see [`FakeQp::hold`]).
    hold: bool,
    /// Send work requests waiting for a receive of the peer (in order).
    pending: VecDeque<Op>,
    rnr_error: bool,
}

/// A send work request not carried out yet.
struct Op {
    wr_id: u64,
    signalled: bool,
    opcode: c_int,
    imm: u32,
    raddr: u64,
    rkey: u32,
    src: Src,
}

/// What an operation sends: bytes copied when it was posted (inline), or
/// registered memory the device reads when it carries the operation out.
enum Src {
    Bytes(Vec<u8>),
    Sges(Vec<FakeSge>),
}

struct Inner {
    next_key: u32,
    mrs: HashMap<u32, Region>,
    ends: [End; 2],
}

/// Two fake QPs joined by a reliable connection.
pub struct Fabric {
    inner: Mutex<Inner>,
    chan: [Wake; 2],
}

impl Fabric {
    pub fn new() -> Arc<Fabric> {
        Arc::new(Fabric {
            inner: Mutex::new(Inner { next_key: 0x100, mrs: HashMap::new(), ends: [End::default(), End::default()] }),
            chan: [Wake::new().expect("eventfd"), Wake::new().expect("eventfd")],
        })
    }

    /// The two ends: the QP of side 0 and of side 1.
    pub fn ends(self: &Arc<Fabric>) -> (FakeQp, FakeQp) {
        (FakeQp { fab: self.clone(), side: 0, blocking: Default::default() }, FakeQp { fab: self.clone(), side: 1, blocking: Default::default() })
    }
}

impl Inner {
    /// Queues a completion on `side`; an armed CQ signals its channel.
    fn complete(&mut self, chan: &[Wake; 2], side: usize, wc: FakeWc) {
        let e = &mut self.ends[side];
        e.cq.push_back(wc);
        if e.armed {
            e.armed = false;
            e.events += 1;
            chan[side].signal();
        }
    }

    /// Moves `side` to error: its posted receives flush.
    fn fail(&mut self, chan: &[Wake; 2], side: usize) {
        self.ends[side].error = true;
        let ops: Vec<_> = self.ends[side].pending.drain(..).collect();
        for op in ops {
            self.complete(chan, side, FakeWc { wr_id: op.wr_id, status: WC_WR_FLUSH_ERR, imm: None, byte_len: 0, opcode: wc_opcode(op.opcode) });
        }
        let recvs: Vec<_> = self.ends[side].recvs.drain(..).collect();
        for (wr_id, _) in recvs {
            self.complete(chan, side, FakeWc { wr_id, status: WC_WR_FLUSH_ERR, imm: None, byte_len: 0, opcode: WC_RECV });
        }
    }

    /// Completes a send work request of `me` (reported when signalled or
    /// failed); an error moves both ends to error.
    #[allow(clippy::too_many_arguments)]
    fn finish(&mut self, chan: &[Wake; 2], me: usize, wr_id: u64, signalled: bool, status: u32, opcode: c_int) {
        if signalled || status != WC_SUCCESS {
            self.complete(chan, me, FakeWc { wr_id, status, imm: None, byte_len: 0, opcode: wc_opcode(opcode) });
        }
        if status != WC_SUCCESS {
            self.fail(chan, me);
            self.fail(chan, 1 - me);
        }
    }

    /// Carries out `me`'s pending send work requests, in order, as far as
    /// the peer's posted receives allow.
    fn run(&mut self, chan: &[Wake; 2], me: usize) {
        let peer = 1 - me;
        if self.ends[me].hold {
            return;
        }
        while let Some(op) = self.ends[me].pending.front() {
            if op.opcode != WR_RDMA_WRITE && self.ends[peer].recvs.is_empty() && !self.ends[me].rnr_error {
                return;
            }
            let op = self.ends[me].pending.pop_front().expect("front");
            self.execute(chan, me, op);
        }
    }

    fn execute(&mut self, chan: &[Wake; 2], me: usize, op: Op) {
        let peer = 1 - me;
        let Op { wr_id, signalled, opcode, imm, raddr, rkey, src } = op;
        let bytes = match src {
            Src::Bytes(b) => b,
            Src::Sges(s) => match self.gather(me, &FakeData::Sges(&s)) {
                Some(b) => b,
                None => return self.finish(chan, me, wr_id, signalled, WC_LOC_PROT_ERR, opcode),
            },
        };
        let send = matches!(opcode, WR_SEND | WR_SEND_WITH_IMM);
        if !send && !bytes.is_empty() {
            // A zero-length write names no memory (no key is checked).
            match self.region(peer, rkey, raddr, bytes.len(), true) {
                Some((r, off)) => r.mem.write(off, &bytes),
                None => return self.finish(chan, me, wr_id, signalled, WC_REM_ACCESS_ERR, opcode),
            }
        }
        if opcode == WR_RDMA_WRITE {
            return self.finish(chan, me, wr_id, signalled, WC_SUCCESS, opcode);
        }
        let Some((rid, rsge)) = self.ends[peer].recvs.pop_front() else {
            return self.finish(chan, me, wr_id, signalled, WC_RNR_RETRY_EXC_ERR, opcode);
        };
        if send {
            let room = rsge.map_or(0, |s| s.1 as usize);
            if bytes.len() > room {
                self.complete(chan, peer, FakeWc { wr_id: rid, status: WC_LOC_LEN_ERR, imm: None, byte_len: 0, opcode: WC_RECV });
                return self.finish(chan, me, wr_id, signalled, WC_REM_ACCESS_ERR, opcode);
            }
            if let Some((addr, len, lkey)) = rsge {
                match self.region(peer, lkey, addr, len as usize, false) {
                    Some((r, off)) => r.mem.write(off, &bytes),
                    None => {
                        self.complete(chan, peer, FakeWc { wr_id: rid, status: WC_LOC_PROT_ERR, imm: None, byte_len: 0, opcode: WC_RECV });
                        return self.finish(chan, me, wr_id, signalled, WC_REM_ACCESS_ERR, opcode);
                    }
                }
            }
        }
        let imm = matches!(opcode, WR_RDMA_WRITE_WITH_IMM | WR_SEND_WITH_IMM).then_some(imm);
        let rop = if opcode == WR_RDMA_WRITE_WITH_IMM { WC_RECV_RDMA_WITH_IMM } else { WC_RECV };
        self.complete(chan, peer, FakeWc { wr_id: rid, status: WC_SUCCESS, imm, byte_len: bytes.len() as u32, opcode: rop });
        self.finish(chan, me, wr_id, signalled, WC_SUCCESS, opcode);
    }

    /// The region of `key` covering `[addr, addr+len)` on `side`.
    fn region(&self, side: usize, key: u32, addr: u64, len: usize, remote: bool) -> Option<(&Region, usize)> {
        let r = self.mrs.get(&key)?;
        if r.side != side || (remote && !r.remote_write) {
            return None;
        }
        let off = addr.checked_sub(r.addr)?;
        let end = off.checked_add(len as u64)?;
        (end <= r.len as u64).then_some((r, off as usize))
    }

    fn gather(&self, side: usize, data: &FakeData<'_>) -> Option<Vec<u8>> {
        match data {
            FakeData::None => Some(Vec::new()),
            FakeData::Inline(b) => Some(b.to_vec()),
            FakeData::Sges(s) => {
                let mut out = Vec::new();
                for &(addr, len, lkey) in s.iter() {
                    let (r, off) = self.region(side, lkey, addr, len as usize, false)?;
                    let mut b = vec![0u8; len as usize];
                    r.mem.read(off, &mut b);
                    out.extend_from_slice(&b);
                }
                Some(out)
            }
        }
    }
}

/// One end of a [`Fabric`]: what a fake `verbs::Qp` holds.
#[derive(Clone)]
pub struct FakeQp {
    fab: Arc<Fabric>,
    side: usize,
    /// The channel's mode as the stream set it (the eventfd itself stays
    /// non-blocking: [`FakeQp::wait_cq_event`] sleeps in poll).
    blocking: Arc<std::sync::atomic::AtomicBool>,
}

/// A registration on the fabric; dropping it (or [`FakeMr::release`])
/// unregisters it, after which the fabric never touches its memory.
pub struct FakeMr {
    fab: Arc<Fabric>,
    key: u32,
    /// [`FakeMr::fail_release`]: deregistrations fail (it stays registered).
    fail: std::sync::atomic::AtomicBool,
}

impl FakeMr {
    pub fn key(&self) -> u32 {
        self.key
    }
    /// Unregisters (idempotent): call before freeing the memory. False
    /// when it failed ([`FakeMr::fail_release`]): the registration stays,
    /// and the fabric may still reach the memory.
    pub fn release(&self) -> bool {
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        self.fab.inner.lock().mrs.remove(&self.key);
        true
    }
    /// Makes every later deregistration fail (as `ibv_dereg_mr` may).
    pub fn fail_release(&self) {
        self.set_release_fails(true);
    }
    /// Makes later deregistrations fail (true) or succeed again (false).
    pub fn set_release_fails(&self, on: bool) {
        self.fail.store(on, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Fabric {
    /// The bytes of registration `key`, read as the device would (None
    /// when it is not registered).
    pub fn region_bytes(&self, key: u32) -> Option<Vec<u8>> {
        let i = self.inner.lock();
        let r = i.mrs.get(&key)?;
        let mut v = vec![0u8; r.len];
        r.mem.read(0, &mut v);
        Some(v)
    }
}

impl Drop for FakeMr {
    fn drop(&mut self) {
        self.release();
    }
}

impl FakeQp {
    pub fn fabric(&self) -> &Arc<Fabric> {
        &self.fab
    }

    pub fn channel_fd(&self) -> c_int {
        self.fab.chan[self.side].fd()
    }

    /// Registers `mem`, seen by the fabric at `addr`.
    pub fn reg(&self, mem: Arc<dyn Mem>, addr: u64, remote_write: bool) -> FakeMr {
        let mut i = self.fab.inner.lock();
        let key = i.next_key;
        i.next_key += 1;
        let len = mem.len();
        i.mrs.insert(key, Region { side: self.side, addr, len, remote_write, mem });
        FakeMr { fab: self.fab.clone(), key, fail: Default::default() }
    }

    pub fn post_recv(&self, wr_id: u64, sge: Option<FakeSge>) -> Result<(), Errno> {
        let mut i = self.fab.inner.lock();
        if i.ends[self.side].error {
            i.complete(&self.fab.chan, self.side, FakeWc { wr_id, status: WC_WR_FLUSH_ERR, imm: None, byte_len: 0, opcode: WC_RECV });
            return Ok(());
        }
        i.ends[self.side].recvs.push_back((wr_id, sge));
        i.run(&self.fab.chan, 1 - self.side);
        Ok(())
    }

    /// Posts one send work request. It is carried out at once, in order
    /// behind this end's earlier ones; one that needs a receive of the
    /// peer while none is posted waits for one (RNR retry without limit,
    /// as rsockets' QPs are set up), unless [`FakeQp::rnr_error`] is set.
    #[allow(clippy::too_many_arguments)]
    pub fn post_send(&self, wr_id: u64, data: FakeData<'_>, opcode: c_int, signalled: bool, imm: u32, raddr: u64, rkey: u32) -> Result<(), Errno> {
        if !matches!(opcode, WR_RDMA_WRITE | WR_RDMA_WRITE_WITH_IMM | WR_SEND | WR_SEND_WITH_IMM) {
            return Err(Errno::EINVAL);
        }
        let chan = &self.fab.chan;
        let me = self.side;
        let mut i = self.fab.inner.lock();
        if i.ends[me].error {
            i.complete(chan, me, FakeWc { wr_id, status: WC_WR_FLUSH_ERR, imm: None, byte_len: 0, opcode: wc_opcode(opcode) });
            return Ok(());
        }
        // Inline bytes are copied now; registered memory is read when the
        // operation is carried out (a held end shows a sender that reuses
        // it too early).
        let src = match data {
            FakeData::None => Src::Bytes(Vec::new()),
            FakeData::Inline(b) => Src::Bytes(b.to_vec()),
            FakeData::Sges(s) => Src::Sges(s.to_vec()),
        };
        let len = match &src {
            Src::Bytes(b) => b.len(),
            Src::Sges(s) => s.iter().map(|g| g.1 as usize).sum(),
        };
        i.ends[me].sent.push((opcode, imm, raddr, len));
        i.ends[me].pending.push_back(Op { wr_id, signalled, opcode, imm, raddr, rkey, src });
        i.run(chan, me);
        Ok(())
    }

    /// A work request that needs a receive and finds none fails with an
    /// RNR error (true) instead of waiting for one (false, the default).
    pub fn rnr_error(&self, on: bool) {
        self.fab.inner.lock().ends[self.side].rnr_error = on;
    }

    pub fn poll(&self) -> Option<FakeWc> {
        self.fab.inner.lock().ends[self.side].cq.pop_front()
    }

    /// Arms the CQ: the next completion signals the channel.
    pub fn req_notify(&self) {
        self.fab.inner.lock().ends[self.side].armed = true;
    }

    /// Reads one channel event (EAGAIN when none).
    pub fn get_cq_event(&self) -> Result<(), Errno> {
        let mut i = self.fab.inner.lock();
        let e = &mut i.ends[self.side];
        if e.events == 0 {
            return Err(Errno::EAGAIN);
        }
        e.events -= 1;
        if e.events == 0 {
            self.fab.chan[self.side].drain();
        }
        Ok(())
    }

    /// Sleeps until a channel event comes and reads it (a real channel in
    /// blocking mode: one read).
    pub fn wait_cq_event(&self) -> Result<(), Errno> {
        loop {
            match self.get_cq_event() {
                Err(Errno::EAGAIN) => {
                    let mut p = [libc::pollfd { fd: self.channel_fd(), events: libc::POLLIN, revents: 0 }];
                    crate::sys::cancel::wait_poll(&mut p, -1)?;
                }
                r => return r,
            }
        }
    }

    pub fn set_channel_blocking(&self, on: bool) {
        self.blocking.store(on, std::sync::atomic::Ordering::Release);
    }

    pub fn channel_blocking(&self) -> bool {
        self.blocking.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Moves the QP to error (rdma_disconnect's effect on it): its posted
    /// receives flush, and so do the peer's.
    pub fn stop(&self) {
        let mut i = self.fab.inner.lock();
        i.fail(&self.fab.chan, self.side);
        i.fail(&self.fab.chan, 1 - self.side);
    }

    /// Stalls this end's device (true): send work requests are queued,
    /// neither carried out nor completed, their registered source not read
    /// yet; false carries them out in order.
    pub fn hold(&self, on: bool) {
        let mut i = self.fab.inner.lock();
        i.ends[self.side].hold = on;
        if !on {
            i.run(&self.fab.chan, self.side);
        }
    }

    pub fn in_error(&self) -> bool {
        self.fab.inner.lock().ends[self.side].error
    }

    /// Completions waiting in this end's CQ.
    pub fn completions(&self) -> usize {
        self.fab.inner.lock().ends[self.side].cq.len()
    }

    /// Receives posted and not consumed yet.
    pub fn posted_recvs(&self) -> usize {
        self.fab.inner.lock().ends[self.side].recvs.len()
    }

    /// The send work requests posted so far (see `End::sent`).
    pub fn sent(&self) -> Vec<(c_int, u32, u64, usize)> {
        self.fab.inner.lock().ends[self.side].sent.clone()
    }
}

/// A test's hand-written peer: one end of a fabric with its own memory
/// (a credit table at 0, a receive buffer at `RBUF`), which posts any
/// message, writes any bytes anywhere and delivers any connect data.
pub struct RawPeer {
    pub qp: FakeQp,
    pub mem: Arc<VecMem>,
    pub mr: FakeMr,
}

/// Where the raw peer's memory appears on the fabric.
pub const PEER_BASE: u64 = 0x7f00_0000_0000;
/// The raw peer's receive buffer, within its memory.
pub const PEER_RBUF: u64 = 4096;
pub const PEER_MEM: usize = 1 << 18;

impl RawPeer {
    pub fn new(qp: FakeQp) -> RawPeer {
        let mem = VecMem::new(PEER_MEM);
        let mr = qp.reg(mem.clone(), PEER_BASE, true);
        RawPeer { qp, mem, mr }
    }

    pub fn key(&self) -> u32 {
        self.mr.key()
    }

    /// Posts `n` receives (no scatter entry).
    pub fn post_recvs(&self, n: usize) {
        for k in 0..n {
            self.qp.post_recv(k as u64, None).expect("post_recv");
        }
    }

    /// Version-1 connect data naming the peer's credit table (2 entries at
    /// 0) and the first `half` bytes of its receive buffer, giving `credits`.
    pub fn conn_data(&self, credits: u16, half: u32) -> [u8; 40] {
        super::wire::format_conn_data(u32::from(credits), 0, (PEER_BASE, self.key()), (PEER_BASE + PEER_RBUF, self.key()), half)
    }

    /// An RDMA write with immediate of `data` to (`addr`, `key`); the
    /// status of its completion (None: not completed, it waits for a
    /// receive of the stream).
    pub fn put(&self, imm: u32, data: &[u8], addr: u64, key: u32) -> Option<u32> {
        let d = if data.is_empty() { FakeData::None } else { FakeData::Inline(data) };
        self.qp.post_send(0xEE, d, WR_RDMA_WRITE_WITH_IMM, true, imm, addr, key).expect("post_send");
        self.take_send_status()
    }

    fn take_send_status(&self) -> Option<u32> {
        let mut keep = Vec::new();
        let mut st = None;
        while let Some(wc) = self.qp.poll() {
            if st.is_none() && wc.wr_id == 0xEE {
                st = Some(wc.status);
            } else {
                keep.push(wc);
            }
        }
        let mut i = self.qp.fab.inner.lock();
        for wc in keep.into_iter().rev() {
            i.ends[self.qp.side].cq.push_front(wc);
        }
        st
    }

    /// The receive completions (immediates) the peer got so far.
    pub fn received(&self) -> Vec<FakeWc> {
        std::iter::from_fn(|| self.qp.poll()).collect()
    }
}
