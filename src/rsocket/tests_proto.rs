// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The stream protocol over the fake fabric ([`super::fake`]): the real
//! stream code (send, recv, credits, control messages, shutdown, close,
//! keepalive, riomap, the peer's connect data) between two streams, or
//! between a stream and a hand-written hostile peer (every case the VM
//! test `rs_hostile` sends). Streams are set up by the same code a real
//! connect or accept runs ([`Stream::install_ep`], then the peer's connect
//! data through [`Stream::take_conn_data`]); calls go through the entry
//! points (`send::send`, `recv::recv`, `lifecycle::shutdown`, ...).
//! Threaded tests run under a time limit: a hang fails. The send half's
//! own cases (chunk sizes, staging, unsignalled runs) are in
//! [`super::tests_send`], on the fixtures here.
#![deny(unsafe_code)]

use super::fake::{Fabric, FakeQp, RawPeer, PEER_RBUF};
use super::guard::{lock, Guard};
use super::lifecycle::{close_begin, close_end, shutdown};
use super::recv::recv;
use super::send::send;
use super::state::*;
use super::verbs::Qp;
use super::wire::{self, msg_op, msg_set, ConnData, OP_CTRL, OP_DATA};
use nix::errno::Errno;
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(super) const NB: i32 = libc::MSG_DONTWAIT;

#[derive(Clone, Copy)]
pub(super) struct Z {
    pub(super) sbuf: u32,
    pub(super) rbuf: u32,
    pub(super) sq: u32,
    pub(super) rq: u32,
    pub(super) inline: u32,
    pub(super) iomap: u32,
    pub(super) iwarp: bool,
}

pub(super) const Z0: Z = Z { sbuf: 8192, rbuf: 8192, sq: 16, rq: 16, inline: 64, iomap: 0, iwarp: false };

/// A stream on one end of a fabric, its endpoint made as create_ep makes it.
pub(super) fn stream_on(q: FakeQp, z: Z) -> Handle {
    let mut s = Stream::fresh(None, -1, libc::AF_INET);
    s.tx.set_sbuf_size(z.sbuf);
    s.rx.set_rbuf_size(z.rbuf);
    s.tx.set_sq_size(z.sq);
    s.rx.set_rq_size(z.rq);
    s.iomaps.set_target_size(z.iomap);
    if z.iwarp {
        s.ctl.set_opt(OPT_MSG_SEND);
    }
    s.install_ep(Qp::fake(q), z.inline).expect("install_ep");
    new_handle(s)
}

/// Two connected streams, each having taken the other's connect data.
pub(super) fn pair_z(z: Z) -> (Handle, Handle) {
    let (qa, qb) = Fabric::new().ends();
    let (a, b) = (stream_on(qa, z), stream_on(qb, z));
    let da = st(&a).format_conn_data();
    let db = st(&b).format_conn_data();
    st(&a).take_conn_data(&db).expect("a connects");
    st(&b).take_conn_data(&da).expect("b connects");
    (a, b)
}

pub(super) fn pair() -> (Handle, Handle) {
    pair_z(Z0)
}

/// A stream and a raw peer on the two ends of a fabric (not connected yet).
pub(super) fn raw_z(z: Z) -> (Handle, RawPeer) {
    let (qa, qb) = Fabric::new().ends();
    let a = stream_on(qa, z);
    let p = RawPeer::new(qb);
    p.post_recvs(64);
    (a, p)
}

/// A stream connected to a raw peer that gives `credits` and a receive
/// buffer half of `half` bytes.
pub(super) fn with_peer(credits: u16, half: u32) -> (Handle, RawPeer) {
    let (a, p) = raw_z(Z0);
    st(&a).take_conn_data(&p.conn_data(credits, half)).expect("connects");
    (a, p)
}

/// The stream's own connect data, as the peer reads it.
pub(super) fn conn_of(h: &Handle) -> ConnData {
    wire::parse_conn_data(&st(h).format_conn_data()).expect("our connect data")
}

pub(super) fn st(h: &Handle) -> Guard<'_> {
    lock(h).expect("stream usable")
}

pub(super) fn fake(h: &Handle) -> FakeQp {
    st(h).ep().qp.as_fake().expect("a fake QP").clone()
}

pub(super) fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Runs `f` on a thread; fails if it takes longer than `secs` (a hang).
pub(super) fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).expect("timed out or panicked (a hang or a crash)")
}

/// A non-blocking receive of up to 64 bytes on another thread, failing on
/// a hang (10 s).
pub(super) fn recv64(h: &Handle) -> Result<usize, Errno> {
    let h = h.clone();
    within(10, move || {
        let mut buf = [0u8; 64];
        recv(&h, &mut buf, NB)
    })
}

/// Moves `data` from `a` to `b` with non-blocking calls only; panics when
/// nothing moves for a while (a stall).
pub(super) fn pump(a: &Handle, b: &Handle, data: &[u8]) -> Vec<u8> {
    let mut sent = 0;
    let mut got = Vec::new();
    let mut idle = 0;
    let mut buf = vec![0u8; 65536];
    while got.len() < data.len() {
        let mut moved = false;
        if sent < data.len() {
            if let Ok(n) = send(a, &data[sent..], NB) {
                sent += n;
                moved |= n > 0;
            }
        }
        if let Ok(n) = recv(b, &mut buf, NB) {
            got.extend_from_slice(&buf[..n]);
            moved |= n > 0;
        }
        idle = if moved { 0 } else { idle + 1 };
        assert!(idle < 50, "stalled: sent {sent}, received {} of {}", got.len(), data.len());
    }
    got
}

/// Reads with non-blocking calls until nothing is left; the bytes read.
pub(super) fn drain(h: &Handle) -> usize {
    let mut buf = vec![0u8; 65536];
    let mut n = 0;
    loop {
        match recv(h, &mut buf, NB) {
            Ok(0) | Err(Errno::EAGAIN) => return n,
            Ok(k) => n += k,
            Err(e) => panic!("recv: {e}"),
        }
    }
}

/// The immediates the raw peer received.
pub(super) fn imms(p: &RawPeer) -> Vec<u32> {
    p.received().into_iter().filter_map(|w| w.imm).collect()
}

// ---- data, sequence numbers, credits ----------------------------------------------

#[test]
fn data_round_trip() {
    let (a, b) = pair();
    assert_eq!(send(&a, b"hello", NB), Ok(5));
    let mut buf = [0u8; 16];
    assert_eq!(recv(&b, &mut buf, NB), Ok(5));
    assert_eq!(&buf[..5], b"hello");
    assert_eq!(recv(&b, &mut buf, NB), Err(Errno::EAGAIN));
}

#[test]
fn sequence_numbers_count_messages() {
    let (a, b) = pair();
    for m in [&b"one"[..], b"two", b"three"] {
        assert_eq!(send(&a, m, NB), Ok(m.len()));
    }
    assert_eq!(st(&a).tx.sseq_no(), 3);
    let mut buf = [0u8; 64];
    assert_eq!(recv(&b, &mut buf, NB), Ok(11));
    assert_eq!(&buf[..11], b"onetwothree");
    assert_eq!(st(&b).rx.buf().seq_no, 3);
}

#[test]
fn credits_from_connect_data_bound_the_sender() {
    let (a, p) = with_peer(2, 4096);
    assert_eq!(st(&a).tx.sseq_comp(), 2);
    assert_eq!(send(&a, b"a", NB), Ok(1));
    assert_eq!(send(&a, b"b", NB), Ok(1));
    assert_eq!(send(&a, b"c", NB), Err(Errno::EAGAIN));
    // The two messages landed in the peer's buffer, one write each.
    assert_eq!(p.mem.bytes(PEER_RBUF as usize, 2), b"ab");
    let data: Vec<u32> = imms(&p).into_iter().filter(|m| msg_op(*m) == OP_DATA).collect();
    assert_eq!(data, vec![msg_set(OP_DATA, 1), msg_set(OP_DATA, 1)]);
}

#[test]
fn out_of_credits_then_resumes_after_the_receiver_consumes() {
    let (a, b) = pair();
    for _ in 0..16 {
        assert_eq!(send(&a, b"x", NB), Ok(1));
    }
    assert_eq!(send(&a, b"x", NB), Err(Errno::EAGAIN), "16 credits (the peer's rq_size)");
    // (a's first credit message took one of b's receives: the last
    // message waits for b to post receives again, as RNR retry does.)
    assert_eq!(drain(&b), 16);
    // Looking for more gave credits back once seq_no passed rseq_comp
    // (8): at 15 messages read, sequence numbers up to 15 + 16.
    assert_eq!(st(&b).rx.rseq_comp(), 15 + 8);
    assert_eq!(send(&a, b"y", NB), Ok(1));
    assert_eq!(st(&a).tx.sseq_comp(), 15 + 16);
}

#[test]
fn credits_hand_back_freed_halves_of_the_receive_buffer() {
    // 64 KiB through an 8 KiB receive buffer: the receiver hands each half
    // back in turn (entry after entry of the sender's credit table).
    let (a, b) = pair();
    let data = pattern(65536, 7);
    assert_eq!(pump(&a, &b, &data), data);
    let s = st(&b);
    assert_eq!(s.rx.buf().free_offset % 4096, 0);
}

#[test]
fn a_read_that_frees_half_the_buffer_hands_it_back_before_returning() {
    // 8 KiB receive buffer: 4 KiB read is half of it, owed back to the
    // sender before the read returns (upstream's waits for the next call
    // that looks at the CQ: see recv_some).
    let (a, b) = pair();
    let data = pattern(4096, 9);
    assert_eq!(send(&a, &data, NB), Ok(4096));
    let sgl = |h: &Handle| fake(h).sent().iter().filter(|&&(_, imm, _, _)| msg_op(imm) == wire::OP_SGL).count();
    let before = sgl(&b);
    let mut buf = vec![0u8; 4096];
    assert_eq!(recv(&b, &mut buf, NB), Ok(4096));
    assert_eq!(buf, data);
    let after = sgl(&b);
    assert!(after > before);
    // Nothing was left owed for the next call to send.
    assert_eq!(recv(&b, &mut buf, NB), Err(Errno::EAGAIN));
    assert_eq!(sgl(&b), after, "the freed half goes back with the read, not at the next call");
}

#[test]
fn blocking_transfer_between_threads() {
    let (a, b) = pair();
    let data = pattern(200_000, 3);
    let d2 = data.clone();
    let (a2, b2) = (a.clone(), b.clone());
    let tx = std::thread::spawn(move || send(&a2, &d2, 0));
    let got = within(20, move || {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 10000];
        while got.len() < 200_000 {
            match recv(&b2, &mut buf, 0) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => panic!("recv: {e}"),
            }
        }
        got
    });
    assert_eq!(tx.join().unwrap(), Ok(200_000));
    assert_eq!(got, data);
}

#[test]
fn blocked_sender_wakes_on_credits() {
    let (a, b) = pair();
    spend_credits(&a);
    let a2 = a.clone();
    let sender = spawn_call(move || send(&a2, b"z", 0));
    credits_wake(&b, &sender);
}

/// A connected pair whose CQ channels block, as a blocking socket's do:
/// the first sleeper of a stream reads the channel, the others sleep on
/// their wake-up descriptors.
fn blocking_pair() -> (Handle, Handle) {
    let (a, b) = pair();
    for h in [&a, &b] {
        st(h).ep().qp.set_channel_blocking(true).expect("fake");
    }
    (a, b)
}

/// A blocking call on another thread; its result comes on the channel.
pub(super) fn spawn_call(f: impl FnOnce() -> Result<usize, Errno> + Send + 'static) -> mpsc::Receiver<Result<usize, Errno>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    // (time to get to its sleep)
    std::thread::sleep(Duration::from_millis(100));
    rx
}

/// Uses up `h`'s 16 credits (the peer's rq_size) with 1-byte sends.
fn spend_credits(h: &Handle) {
    for _ in 0..16 {
        assert_eq!(send(h, b"x", NB), Ok(1));
    }
}

/// `sender` (a blocked 1-byte send on the peer of `a`) still waits; `a`
/// reads what its peer spent the credits on, and the credits it hands
/// back must wake the sender.
fn credits_wake(a: &Handle, sender: &mpsc::Receiver<Result<usize, Errno>>) {
    assert!(sender.try_recv().is_err(), "still no credits");
    // Exactly the 16 bytes spent: the first receive hands credits back
    // at once, so a drain until EAGAIN may also take the woken sender's
    // "z", which is read after the sender returns.
    let mut buf = [0u8; 16];
    let mut got = 0;
    while got < 16 {
        match recv(a, &mut buf[got..], NB) {
            Ok(k) if k > 0 => got += k,
            r => panic!("recv after {got} of the 16 bytes: {r:?}"),
        }
    }
    assert_eq!(buf, [b'x'; 16]);
    assert_eq!(sender.recv_timeout(Duration::from_secs(10)).expect("the sender never woke: nobody read the channel"), Ok(1));
    let mut z = [0u8; 2];
    assert_eq!(recv(a, &mut z, 0), Ok(1));
    assert_eq!(z[0], b'z');
}

#[test]
fn the_channel_reader_hands_the_reading_on_when_it_leaves() {
    let (a, b) = blocking_pair();
    spend_credits(&b);
    // b's receiver sleeps first: it reads b's channel. b's sender, out of
    // credits, sleeps on its wake-up descriptor.
    let b1 = b.clone();
    let receiver = spawn_call(move || recv(&b1, &mut [0u8; 64], 0));
    let b2 = b.clone();
    let sender = spawn_call(move || send(&b2, b"z", 0));
    assert!(receiver.try_recv().is_err() && sender.try_recv().is_err());
    assert_eq!(send(&a, b"hello", NB), Ok(5));
    // The receiver read the event, took its data and left: nobody reads
    // the channel now, so it woke the sender to read it (and re-arm).
    assert_eq!(receiver.recv_timeout(Duration::from_secs(10)).expect("the receiver never woke"), Ok(5));
    // a's credits come as a completion on b's CQ: only a reader sees it.
    credits_wake(&a, &sender);
}

#[test]
fn data_taken_by_the_reader_wakes_the_receiver_sleeping_beside_it() {
    let (a, b) = blocking_pair();
    spend_credits(&b);
    // Now b's sender sleeps first (the reader), its receiver beside it.
    let b2 = b.clone();
    let sender = spawn_call(move || send(&b2, b"z", 0));
    let b1 = b.clone();
    let receiver = spawn_call(move || recv(&b1, &mut [0u8; 64], 0));
    assert_eq!(send(&a, b"hello", NB), Ok(5));
    // The sender reads the event and takes the data's completion (no
    // credits for itself: it sleeps again), which wakes the receiver.
    assert_eq!(receiver.recv_timeout(Duration::from_secs(10)).expect("the receiver never woke"), Ok(5));
    credits_wake(&a, &sender);
}

/// The lengths of the work requests `h` has posted that `keep` picks (by
/// opcode and immediate value).
pub(super) fn sent_sizes(h: &Handle, keep: impl Fn(std::ffi::c_int, u32) -> bool) -> Vec<usize> {
    fake(h).sent().into_iter().filter(|&(op, imm, _, _)| keep(op, imm)).map(|(_, _, _, n)| n).collect()
}

#[test]
fn receive_ring_wraps_around() {
    let (a, b) = pair();
    let mut buf = [0u8; 1000];
    for i in 0..60u8 {
        let m = pattern(700, i);
        assert_eq!(send(&a, &m, NB), Ok(700), "message {i}");
        assert_eq!(recv(&b, &mut buf, NB), Ok(700), "message {i}");
        assert_eq!(&buf[..700], &m[..], "message {i}");
    }
    assert!(st(&b).rx.buf().offset < 8192);
}

#[test]
fn partial_reads() {
    let (a, b) = pair();
    let data = pattern(100, 5);
    assert_eq!(send(&a, &data, NB), Ok(100));
    let mut got = Vec::new();
    for n in [30, 30, 40] {
        let mut buf = vec![0u8; n];
        assert_eq!(recv(&b, &mut buf, NB), Ok(n));
        got.extend_from_slice(&buf);
        if got.len() < 100 {
            assert_eq!(st(&b).rx.buf().seq_no, 0, "a message counts once consumed whole");
        }
    }
    assert_eq!(got, data);
    assert_eq!(st(&b).rx.buf().seq_no, 1);
}

#[test]
fn msg_peek_does_not_consume() {
    let (a, b) = pair();
    assert_eq!(send(&a, b"peekaboo", NB), Ok(8));
    let mut buf = [0u8; 4];
    assert_eq!(recv(&b, &mut buf, libc::MSG_PEEK | NB), Ok(4));
    assert_eq!(&buf, b"peek");
    let mut all = [0u8; 16];
    assert_eq!(recv(&b, &mut all, NB), Ok(8));
    assert_eq!(&all[..8], b"peekaboo");
}

#[test]
fn msg_waitall_collects_several_messages() {
    let (a, b) = pair();
    let b2 = b.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 300];
        let r = recv(&b2, &mut buf, libc::MSG_WAITALL);
        let _ = tx.send((r, buf));
    });
    for i in 0..3u8 {
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(send(&a, &[i; 100], NB), Ok(100));
    }
    let (r, buf) = rx.recv_timeout(Duration::from_secs(10)).expect("MSG_WAITALL hung");
    assert_eq!(r, Ok(300));
    assert!(buf[200..].iter().all(|&x| x == 2));
}

#[test]
fn iwarp_message_words_by_send() {
    let z = Z { iwarp: true, ..Z0 };
    let (a, b) = pair_z(z);
    assert!(st(&a).ctl.opts() & OPT_MSG_SEND != 0);
    let mut all = Vec::new();
    for (i, n) in [10usize, 20, 30].into_iter().enumerate() {
        let m = pattern(n, i as u8);
        assert_eq!(send(&a, &m, NB), Ok(n));
        all.extend_from_slice(&m);
    }
    let mut buf = [0u8; 100];
    assert_eq!(recv(&b, &mut buf, NB), Ok(60));
    assert_eq!(&buf[..60], &all[..]);
}

#[test]
fn credits_through_control_slots_without_inline() {
    // sq_inline below 16: credit descriptors are staged in the control
    // slots past the send ring.
    let z = Z { inline: 0, ..Z0 };
    let (a, b) = pair_z(z);
    let data = pattern(40_000, 11);
    assert_eq!(pump(&a, &b, &data), data);
    assert_eq!(pump(&b, &a, &data), data);
}

// ---- poll ---------------------------------------------------------------------------

#[test]
fn poll_events_in_out_hup() {
    let (a, b) = pair();
    let ev = libc::POLLIN | libc::POLLOUT;
    assert_eq!(st(&b).poll_events(ev), libc::POLLOUT);
    assert_eq!(send(&a, b"x", NB), Ok(1));
    assert_eq!(st(&b).poll_events(ev), libc::POLLIN | libc::POLLOUT);
    within(10, move || shutdown(&a, libc::SHUT_RDWR)).unwrap();
    let r = st(&b).poll_events(ev);
    assert!(r & libc::POLLHUP != 0 && r & libc::POLLIN != 0, "revents {r:#x}");
}

// ---- shutdown and close -------------------------------------------------------------

#[test]
fn shut_wr_peer_reads_eof_and_still_sends() {
    let (a, b) = pair();
    assert_eq!(send(&a, b"last", NB), Ok(4));
    let a2 = a.clone();
    within(10, move || shutdown(&a2, libc::SHUT_WR)).unwrap();
    assert_eq!(st(&a).ctl.state(), ST_CONNECTED | ST_READABLE);
    let mut buf = [0u8; 16];
    assert_eq!(recv(&b, &mut buf, NB), Ok(4));
    assert_eq!(recv(&b, &mut buf, NB), Ok(0), "end of stream");
    assert_eq!(st(&b).ctl.state(), ST_CONNECTED | ST_WRITABLE);
    // Half closed: the other direction still works.
    assert_eq!(send(&b, b"back", NB), Ok(4));
    assert_eq!(recv(&a, &mut buf, NB), Ok(4));
}

#[test]
fn shut_rdwr_sends_disconnect_and_stops() {
    let (a, _b) = pair();
    let a2 = a.clone();
    within(10, move || shutdown(&a2, libc::SHUT_RDWR)).unwrap();
    assert_eq!(st(&a).ctl.state(), ST_DISCONNECTED, "our disconnect message completed");
    assert!(fake(&a).in_error(), "the QP is stopped once disconnected");
    let mut buf = [0u8; 16];
    assert_eq!(recv(&a, &mut buf, NB), Ok(0));
}

#[test]
fn peer_sees_disconnect() {
    let (a, b) = pair();
    let a2 = a.clone();
    within(10, move || shutdown(&a2, libc::SHUT_RDWR)).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(recv(&b, &mut buf, NB), Ok(0));
    assert_eq!(st(&b).ctl.state(), ST_DISCONNECTED);
    assert_eq!(st(&b).poll_events(libc::POLLOUT) & libc::POLLHUP, libc::POLLHUP);
}

#[test]
fn shut_rd_sends_nothing_and_keeps_sending() {
    let (a, b) = pair();
    let before = fake(&a).sent().len();
    let a2 = a.clone();
    within(10, move || shutdown(&a2, libc::SHUT_RD)).unwrap();
    assert_eq!(fake(&a).sent().len(), before, "no control message");
    let mut buf = [0u8; 16];
    assert_eq!(recv(&a, &mut buf, NB), Ok(0), "nothing more to read");
    assert_eq!(send(&a, b"still", NB), Ok(5));
    assert_eq!(recv(&b, &mut buf, NB), Ok(5));
}

#[test]
fn shut_wr_then_shut_rd_sends_shutdown_then_disconnect() {
    let (a, p) = with_peer(16, 4096);
    let a2 = a.clone();
    within(10, move || {
        shutdown(&a2, libc::SHUT_WR).unwrap();
        shutdown(&a2, libc::SHUT_RD).unwrap();
    });
    let ctrl: Vec<u32> = imms(&p).into_iter().filter(|m| msg_op(*m) == OP_CTRL).collect();
    assert_eq!(ctrl, vec![msg_set(OP_CTRL, CTRL_SHUTDOWN), msg_set(OP_CTRL, CTRL_DISCONNECT)]);
}

#[test]
fn close_disconnects_the_peer_and_later_calls_fail() {
    let (a, b) = pair();
    let a2 = a.clone();
    within(10, move || {
        close_begin(&a2);
        close_end(&a2);
    });
    assert_eq!(send(&a, b"x", NB), Err(Errno::EBADF));
    let mut buf = [0u8; 8];
    assert_eq!(recv(&a, &mut buf, NB), Err(Errno::EBADF));
    assert_eq!(recv(&b, &mut buf, NB), Ok(0));
    assert_eq!(st(&b).ctl.state(), ST_DISCONNECTED);
}

// ---- keepalive ----------------------------------------------------------------------

#[test]
fn keepalive_sends_a_control_message_when_due() {
    let (a, p) = with_peer(16, 4096);
    let t0 = Instant::now();
    {
        let mut s = st(&a);
        s.so.keepalive = true;
        s.so.keepalive_time = 1;
        assert_eq!(s.keepalive_tick(t0), Some(t0 + Duration::from_secs(1)));
        assert_eq!(s.keepalive_tick(t0 + Duration::from_secs(2)), Some(t0 + Duration::from_secs(3)));
    }
    assert_eq!(imms(&p), vec![msg_set(OP_CTRL, CTRL_KEEPALIVE)]);
    assert_eq!(st(&a).tx.ctrl_seqno(), 1);
    assert_eq!(st(&a).tx.ctrl_max_seqno(), RS_QP_CTRL_SIZE);
    // Its completion gives the control slot back.
    let _ = st(&a).poll_events(libc::POLLOUT);
    let s = st(&a);
    assert_eq!(s.tx.ctrl_max_seqno().wrapping_sub(s.tx.ctrl_seqno()), RS_QP_CTRL_SIZE);
}

#[test]
fn keepalive_not_before_due_and_ignored_by_the_peer() {
    let (a, b) = pair();
    let t0 = Instant::now();
    {
        let mut s = st(&a);
        s.so.keepalive = true;
        s.so.keepalive_time = 1;
        s.keepalive_tick(t0);
        s.keepalive_tick(t0 + Duration::from_millis(500));
    }
    assert_eq!(fake(&a).sent().len(), 0, "not due yet");
    st(&a).keepalive_tick(t0 + Duration::from_millis(1500));
    assert_eq!(fake(&a).sent().len(), 1);
    let mut buf = [0u8; 8];
    assert_eq!(recv(&b, &mut buf, NB), Err(Errno::EAGAIN));
    assert_eq!(st(&b).ctl.state(), ST_CONNECT_RDWR);
}

/// A receive's look that found nothing, then data arriving before the CQ
/// is armed (no event will come for it): the call must not sleep on the
/// armed CQ without taking it (it looks at the CQ once more after arming).
#[test]
fn data_arriving_before_the_arming_is_not_slept_on() {
    let (a, b) = pair();
    // A first message taken and its event read: the CQ is not armed.
    assert_eq!(send(&b, b"y", NB), Ok(1));
    assert_eq!(recv64(&a), Ok(1));
    while fake(&a).get_cq_event().is_ok() {}
    st(&a).cq_armed = false;
    // No busy poll (the stream's spins missed): the call arms after its first look.
    for _ in 0..super::spin::MISS_LIMIT {
        st(&a).spin.miss();
    }
    let a2 = a.clone();
    let got = within(10, move || {
        let mut looks = 0;
        super::blocking::sleep_until_on(&a2, super::guard::Path::Recv, |s| {
            looks += 1;
            let have = s.process_cq(Stream::conn_have_rdata).is_ok();
            if looks == 1 {
                // after the look, before the arming
                assert_eq!(send(&b, b"x", NB), Ok(1));
            }
            Ok(have.then_some(looks))
        })
    });
    assert_eq!(got, Ok(2), "the data that came before the arming was slept on");
}
