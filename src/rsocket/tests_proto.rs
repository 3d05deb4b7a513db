// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The stream protocol over the fake fabric ([`super::fake`]): the real
//! stream code (send, recv, credits, control messages, shutdown, close,
//! keepalive, riomap, the peer's connect data) between two streams, or
//! between a stream and a hand-written hostile peer (every case the VM
//! test `rs_hostile` sends). Streams are set up by the same code a real
//! connect or accept runs ([`Stream::install_ep`], then the peer's connect
//! data through [`Stream::take_conn_data`]); calls go through the entry
//! points (`send::send`, `recv::recv`, `lifecycle::shutdown`, ...).
//! Threaded tests run under a time limit: a hang fails.
#![deny(unsafe_code)]

use super::fake::{Fabric, FakeQp, RawPeer, PEER_BASE, PEER_RBUF, WC_RNR_RETRY_EXC_ERR, WC_SUCCESS};
use super::guard::{lock, Guard};
use super::lifecycle::{close_begin, close_end, shutdown};
use super::recv::recv;
use super::send::send;
use super::state::*;
use super::verbs::{Qp, TestMem};
use super::wire::{self, msg_data, msg_op, msg_set, ConnData, RsSge, OP_CTRL, OP_DATA, OP_SGL};
use super::iomap::iowrite;
use nix::errno::Errno;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const NB: i32 = libc::MSG_DONTWAIT;

#[derive(Clone, Copy)]
struct Z {
    sbuf: u32,
    rbuf: u32,
    sq: u32,
    rq: u32,
    inline: u32,
    iomap: u32,
    iwarp: bool,
}

const Z0: Z = Z { sbuf: 8192, rbuf: 8192, sq: 16, rq: 16, inline: 64, iomap: 0, iwarp: false };

/// A stream on one end of a fabric, its endpoint made as create_ep makes it.
fn stream_on(q: FakeQp, z: Z) -> Handle {
    let mut s = Stream::fresh(None, -1, libc::AF_INET);
    s.sbuf_size = z.sbuf;
    s.rbuf_size = z.rbuf;
    s.sq_size = z.sq;
    s.rq_size = z.rq;
    s.target_iomap_size = z.iomap;
    if z.iwarp {
        s.opts |= OPT_MSG_SEND;
    }
    s.install_ep(Qp::fake(q), z.inline).expect("install_ep");
    new_handle(s)
}

/// Two connected streams, each having taken the other's connect data.
fn pair_z(z: Z) -> (Handle, Handle) {
    let (qa, qb) = Fabric::new().ends();
    let (a, b) = (stream_on(qa, z), stream_on(qb, z));
    let da = st(&a).format_conn_data();
    let db = st(&b).format_conn_data();
    st(&a).take_conn_data(&db).expect("a connects");
    st(&b).take_conn_data(&da).expect("b connects");
    (a, b)
}

fn pair() -> (Handle, Handle) {
    pair_z(Z0)
}

/// A stream and a raw peer on the two ends of a fabric (not connected yet).
fn raw_z(z: Z) -> (Handle, RawPeer) {
    let (qa, qb) = Fabric::new().ends();
    let a = stream_on(qa, z);
    let p = RawPeer::new(qb);
    p.post_recvs(64);
    (a, p)
}

/// A stream connected to a raw peer that gives `credits` and a receive
/// buffer half of `half` bytes.
fn with_peer(credits: u16, half: u32) -> (Handle, RawPeer) {
    let (a, p) = raw_z(Z0);
    st(&a).take_conn_data(&p.conn_data(credits, half)).expect("connects");
    (a, p)
}

/// The stream's own connect data, as the peer reads it.
fn conn_of(h: &Handle) -> ConnData {
    wire::parse_conn_data(&st(h).format_conn_data()).expect("our connect data")
}

fn st(h: &Handle) -> Guard<'_> {
    lock(h).expect("stream usable")
}

fn fake(h: &Handle) -> FakeQp {
    st(h).ep().qp.as_fake().expect("a fake QP").clone()
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Runs `f` on a thread; fails if it takes longer than `secs` (a hang).
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).expect("timed out or panicked (a hang or a crash)")
}

/// A non-blocking receive of up to 64 bytes on another thread, failing on
/// a hang (10 s).
fn recv64(h: &Handle) -> Result<usize, Errno> {
    let h = h.clone();
    within(10, move || {
        let mut buf = [0u8; 64];
        recv(&h, &mut buf, NB)
    })
}

/// Moves `data` from `a` to `b` with non-blocking calls only; panics when
/// nothing moves for a while (a stall).
fn pump(a: &Handle, b: &Handle, data: &[u8]) -> Vec<u8> {
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
fn drain(h: &Handle) -> usize {
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
fn imms(p: &RawPeer) -> Vec<u32> {
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
    assert_eq!(st(&a).sseq_no, 3);
    let mut buf = [0u8; 64];
    assert_eq!(recv(&b, &mut buf, NB), Ok(11));
    assert_eq!(&buf[..11], b"onetwothree");
    assert_eq!(st(&b).rx.seq_no, 3);
}

#[test]
fn credits_from_connect_data_bound_the_sender() {
    let (a, p) = with_peer(2, 4096);
    assert_eq!(st(&a).sseq_comp, 2);
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
    assert_eq!(st(&b).rseq_comp, 15 + 8);
    assert_eq!(send(&a, b"y", NB), Ok(1));
    assert_eq!(st(&a).sseq_comp, 15 + 16);
}

#[test]
fn credits_hand_back_freed_halves_of_the_receive_buffer() {
    // 64 KiB through an 8 KiB receive buffer: the receiver hands each half
    // back in turn (entry after entry of the sender's credit table).
    let (a, b) = pair();
    let data = pattern(65536, 7);
    assert_eq!(pump(&a, &b, &data), data);
    let s = st(&b);
    assert_eq!(s.rx.free_offset % 4096, 0);
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
    for _ in 0..16 {
        assert_eq!(send(&a, b"x", NB), Ok(1));
    }
    let a2 = a.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(send(&a2, b"z", 0));
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(rx.try_recv().is_err(), "the send must wait for credits");
    assert_eq!(drain(&b), 16);
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).expect("the sender never woke"), Ok(1));
}

#[test]
fn send_ring_full_then_resumes_when_writes_complete() {
    let (a, b) = pair_z(Z { rbuf: 65536, ..Z0 });
    fake(&a).hold(true);
    let data = pattern(8192, 1);
    assert_eq!(send(&a, &data, NB), Ok(8192));
    assert_eq!(st(&a).sbuf_bytes_avail, 0);
    assert_eq!(send(&a, b"more", NB), Err(Errno::EAGAIN), "the send ring is full");
    fake(&a).hold(false);
    assert_eq!(send(&a, b"more", NB), Ok(4));
    let mut buf = vec![0u8; 9000];
    assert_eq!(recv(&b, &mut buf, libc::MSG_WAITALL | NB), Ok(8196));
}

#[test]
fn inline_up_to_sq_inline_then_staged() {
    let (a, b) = pair();
    assert_eq!(send(&a, &[1u8; 64], NB), Ok(64));
    assert_eq!(st(&a).ssgl0_off, 0, "64 bytes go inline");
    assert_eq!(send(&a, &[2u8; 65], NB), Ok(65));
    assert_eq!(st(&a).ssgl0_off, 65, "65 bytes are staged in the send ring");
    let mut buf = [0u8; 200];
    assert_eq!(recv(&b, &mut buf, NB), Ok(129));
    assert!(buf[..64].iter().all(|&x| x == 1) && buf[64..129].iter().all(|&x| x == 2));
}

// ---- unsignalled sends (super::signal) ---------------------------------------------

/// A connection whose send queue lets runs of 15 unsignalled sends go
/// ((64 - 4 control slots) / 4).
const ZSIG: Z = Z { sq: 64, ..Z0 };

/// The stream's send-queue entries and send-buffer bytes free, after
/// taking the completions waiting in its CQ.
fn room(h: &Handle) -> (u32, u32) {
    let mut s = st(h);
    s.poll_cq().expect("poll");
    (s.sqe_avail, s.sbuf_bytes_avail)
}

#[test]
fn small_sends_complete_unseen_and_come_back_with_the_next_signalled_one() {
    let (a, b) = pair_z(ZSIG);
    let full = room(&a);
    assert_eq!(full, (60, 8192));
    for _ in 0..10 {
        assert_eq!(send(&a, &[7u8; 20], NB), Ok(20));
    }
    assert_eq!(fake(&a).completions(), 0, "inline sends of a run report no completion");
    assert_eq!(drain(&b), 200);
    // (taking b's credit messages too)
    assert_eq!(room(&a), (50, 8192 - 200), "their room stays taken until the run ends");
    // A staged send (over the inline size) is signalled and ends the run.
    assert_eq!(send(&a, &[8u8; 100], NB), Ok(100));
    assert_eq!(fake(&a).completions(), 1);
    assert_eq!(room(&a), full, "the run came back with it");
    assert_eq!(drain(&b), 100);
}

#[test]
fn a_run_never_outgrows_a_quarter_of_the_send_queue() {
    let (a, b) = pair_z(ZSIG);
    for i in 0..40 {
        assert_eq!(send(&a, &[i as u8; 8], NB), Ok(8));
        let _ = drain(&b);
        let (sqe, _) = room(&a);
        assert!(sqe >= 60 - 15, "send {i}: {sqe} entries free");
    }
    // 40 sends: two runs of 15 ended by a signalled 16th, 8 left over.
    assert_eq!(room(&a), (52, 8192 - 64));
}

#[test]
fn shutdown_waits_for_the_run_to_come_back() {
    let (a, b) = pair_z(ZSIG);
    for _ in 0..5 {
        assert_eq!(send(&a, b"tail", NB), Ok(4));
    }
    assert_eq!(fake(&a).completions(), 0);
    let a2 = a.clone();
    // SHUT_WR keeps the stream connected: it returns only once every send
    // is done, which takes the shutdown message to end the run.
    within(10, move || shutdown(&a2, libc::SHUT_WR)).unwrap();
    assert_eq!(st(&a).sqe_avail, 60);
    assert_eq!(st(&a).sbuf_bytes_avail, 8192);
    assert_eq!(drain(&b), 20);
}

#[test]
fn blocking_small_sends_never_wait_on_a_run() {
    // A small send queue (runs of 3) and a receiver that keeps up: every
    // blocking send finds room or a signalled send to wait for.
    let (a, b) = pair();
    let a2 = a.clone();
    let tx = std::thread::spawn(move || {
        for i in 0..3000u32 {
            let m = (i as u8).to_ne_bytes();
            assert_eq!(send(&a2, &m, 0), Ok(1));
        }
    });
    let n = within(20, move || {
        let mut n = 0;
        let mut buf = [0u8; 256];
        while n < 3000 {
            n += recv(&b, &mut buf, 0).expect("recv");
        }
        n
    });
    tx.join().unwrap();
    assert_eq!(n, 3000);
}

#[test]
fn iwarp_sends_are_all_signalled() {
    let (a, b) = pair_z(Z { iwarp: true, ..ZSIG });
    for _ in 0..4 {
        assert_eq!(send(&a, b"word", NB), Ok(4));
    }
    assert_eq!(fake(&a).completions(), 8, "a write and a send each");
    assert_eq!(drain(&b), 16);
}

#[test]
fn two_piece_staging_at_the_end_of_the_send_ring() {
    let (a, b) = pair();
    st(&a).ssgl0_off = 8192 - 100;
    let data = pattern(300, 9);
    assert_eq!(send(&a, &data, NB), Ok(300));
    assert_eq!(st(&a).ssgl0_off, 200);
    let mut buf = [0u8; 400];
    assert_eq!(recv(&b, &mut buf, NB), Ok(300));
    assert_eq!(&buf[..300], &data[..]);
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
    assert!(st(&b).rx.offset < 8192);
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
            assert_eq!(st(&b).rx.seq_no, 0, "a message counts once consumed whole");
        }
    }
    assert_eq!(got, data);
    assert_eq!(st(&b).rx.seq_no, 1);
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
    assert!(st(&a).opts & OPT_MSG_SEND != 0);
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
    assert_eq!(st(&a).state, ST_CONNECTED | ST_READABLE);
    let mut buf = [0u8; 16];
    assert_eq!(recv(&b, &mut buf, NB), Ok(4));
    assert_eq!(recv(&b, &mut buf, NB), Ok(0), "end of stream");
    assert_eq!(st(&b).state, ST_CONNECTED | ST_WRITABLE);
    // Half closed: the other direction still works.
    assert_eq!(send(&b, b"back", NB), Ok(4));
    assert_eq!(recv(&a, &mut buf, NB), Ok(4));
}

#[test]
fn shut_rdwr_sends_disconnect_and_stops() {
    let (a, _b) = pair();
    let a2 = a.clone();
    within(10, move || shutdown(&a2, libc::SHUT_RDWR)).unwrap();
    assert_eq!(st(&a).state, ST_DISCONNECTED, "our disconnect message completed");
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
    assert_eq!(st(&b).state, ST_DISCONNECTED);
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
    assert_eq!(st(&b).state, ST_DISCONNECTED);
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
    assert_eq!(st(&a).ctrl_seqno, 1);
    assert_eq!(st(&a).ctrl_max_seqno, RS_QP_CTRL_SIZE);
    // Its completion gives the control slot back.
    let _ = st(&a).poll_events(libc::POLLOUT);
    let s = st(&a);
    assert_eq!(s.ctrl_max_seqno.wrapping_sub(s.ctrl_seqno), RS_QP_CTRL_SIZE);
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
    assert_eq!(st(&b).state, ST_CONNECT_RDWR);
}

// ---- riomap -------------------------------------------------------------------------

#[test]
fn riowrite_lands_in_the_peers_mapping() {
    let (a, b) = pair_z(Z { iomap: 4, ..Z0 });
    let mem = TestMem::new(4096);
    assert_eq!(st(&b).iomap(mem.user_buf(), libc::PROT_WRITE, 0), Ok(0));
    // The mapping goes out with b's next send.
    assert_eq!(send(&b, b"m", NB), Ok(1));
    let mut buf = [0u8; 4];
    assert_eq!(recv(&a, &mut buf, NB), Ok(1));
    assert_eq!(iowrite(&a, b"direct", 100, NB), Ok(6));
    assert_eq!(&mem.bytes()[100..106], b"direct");
    assert_eq!(st(&a).state, ST_CONNECT_RDWR);
    // Nothing to receive for b: a riowrite carries no message.
    assert_eq!(recv(&b, &mut buf, NB), Err(Errno::EAGAIN));
}

#[test]
fn riowrite_without_a_mapping_writes_nothing() {
    let (a, _b) = pair_z(Z { iomap: 4, ..Z0 });
    let before = fake(&a).sent().len();
    let a2 = a.clone();
    assert_eq!(within(10, move || iowrite(&a2, b"nowhere", 0, NB)), Ok(0));
    assert_eq!(fake(&a).sent().len(), before);
}

#[test]
fn riomap_table_full() {
    let (a, _b) = pair_z(Z { iomap: 1, ..Z0 });
    assert_eq!(st(&a).remote_iomap.length, 1);
    let (m1, m2, m3) = (TestMem::new(4096), TestMem::new(4096), TestMem::new(4096));
    assert_eq!(st(&a).iomap(m1.user_buf(), libc::PROT_WRITE, 0), Ok(0));
    assert_eq!(st(&a).iomap(m2.user_buf(), libc::PROT_WRITE, 4096), Err(Errno::ENOMEM));
    // A local-only mapping takes no slot.
    assert_eq!(st(&a).iomap(m3.user_buf(), 0, 8192), Ok(8192));
}

#[test]
fn riounmap_frees_the_slot() {
    let (a, _b) = pair_z(Z { iomap: 1, ..Z0 });
    let (m1, m2) = (TestMem::new(4096), TestMem::new(4096));
    let u = m1.user_buf();
    let (addr, len) = (u.addr(), u.len());
    assert_eq!(st(&a).iomap(u, libc::PROT_WRITE, 0), Ok(0));
    assert_eq!(st(&a).iounmap(addr, len), Ok(()));
    assert_eq!(st(&a).iounmap(addr, len), Err(Errno::EINVAL));
    assert_eq!(st(&a).iomap(m2.user_buf(), libc::PROT_WRITE, 0), Ok(0));
}

// ---- the peer's connect data --------------------------------------------------------

#[test]
fn connect_data_swapped_byte_order() {
    let (a, p) = raw_z(Z0);
    let mut cd = p.conn_data(16, 4096);
    cd[1] ^= wire::CONN_FLAG_NET;
    st(&a).take_conn_data(&cd).unwrap();
    assert!(st(&a).opts & OPT_SWAP_SGL != 0);
    // Consume half of the receive buffer: a credit hands it back, its
    // descriptor written into the peer's table in the peer's byte order.
    let c = conn_of(&a);
    assert_eq!(p.put(msg_set(OP_DATA, 4096), &[7u8; 4096], c.data_buf.addr, c.data_buf.key), Some(WC_SUCCESS));
    let mut buf = vec![0u8; 8192];
    assert_eq!(recv(&a, &mut buf, NB), Ok(4096));
    let _ = recv(&a, &mut buf, NB);
    let e = p.mem.bytes(16, 16);
    let got = RsSge::read(&e[..], 0).swapped();
    assert_eq!(got, RsSge { addr: c.data_buf.addr + 4096, key: c.data_buf.key, length: 4096 });
    let credit = imms(&p).into_iter().find(|m| msg_op(*m) == OP_SGL).expect("a credit message");
    // The first credit: sequence numbers up to 0 + rq_size.
    assert_eq!(msg_data(credit), 16);
}

#[test]
fn connect_data_iomap_flag() {
    let (a, p) = raw_z(Z0);
    let mut cd = p.conn_data(16, 4096);
    cd[7] = 3;
    st(&a).take_conn_data(&cd).unwrap();
    assert_eq!(st(&a).remote_iomap, RsSge { addr: PEER_BASE + 32, key: p.key(), length: 3 });
    let (b, p2) = raw_z(Z0);
    let mut cd = p2.conn_data(16, 4096);
    cd[1] &= !wire::CONN_FLAG_IOMAP;
    cd[7] = 3;
    st(&b).take_conn_data(&cd).unwrap();
    assert_eq!(st(&b).remote_iomap.length, 0, "no riomap without the flag");
    let m = TestMem::new(4096);
    assert_eq!(st(&b).iomap(m.user_buf(), libc::PROT_WRITE, 0), Err(Errno::ENOMEM));
}

// ---- the hostile peer: every case of ctest/vm/rs_hostile.c --------------------------

/// rs_hostile case 1: no connection data at all.
#[test]
fn hostile_no_connect_data() {
    let (a, _p) = raw_z(Z0);
    assert_eq!(st(&a).take_conn_data(&[]), Err(Errno::ENOTSUP));
    assert_eq!(st(&a).state, ST_INIT);
    assert_eq!(send(&a, b"x", NB), Err(Errno::ENOTCONN));
}

/// rs_hostile case 2: an unknown protocol version.
#[test]
fn hostile_unknown_version() {
    let (a, p) = raw_z(Z0);
    let mut cd = p.conn_data(16, 4096);
    cd[0] = 2;
    assert_eq!(st(&a).take_conn_data(&cd), Err(Errno::ENOTSUP));
    assert_eq!(st(&a).state, ST_INIT);
}

/// rs_hostile case 3: connection data cut short (8 bytes).
#[test]
fn hostile_short_connect_data() {
    let (a, p) = raw_z(Z0);
    let cd = p.conn_data(16, 4096);
    for n in [8, 39] {
        assert_eq!(st(&a).take_conn_data(&cd[..n]), Err(Errno::ENOTSUP), "{n} bytes");
    }
    assert_eq!(st(&a).state, ST_INIT);
    assert_eq!(st(&a).sseq_comp, 0, "nothing of it taken");
}

/// rs_hostile case 4: a receive buffer that points nowhere with a huge
/// length, and a credit table at 0 with 0xffffffff entries.
#[test]
fn hostile_buffers_point_nowhere() {
    let (a, _p) = raw_z(Z0);
    let mut cd = [0u8; 40];
    cd[0] = 1;
    cd[3] = 16;
    cd[20..24].copy_from_slice(&0xffff_ffffu32.to_be_bytes());
    cd[24..32].copy_from_slice(&0xffff_ffff_ffff_f000u64.to_be_bytes());
    cd[32..36].copy_from_slice(&0xdead_beefu32.to_be_bytes());
    cd[36..40].copy_from_slice(&0xffff_ffffu32.to_be_bytes());
    st(&a).take_conn_data(&cd).unwrap();
    // The write is posted; the device refuses it.
    assert_eq!(send(&a, b"hello", NB), Ok(5));
    let r = st(&a).poll_events(libc::POLLIN | libc::POLLOUT);
    assert!(r & libc::POLLERR != 0, "revents {r:#x}");
    assert_eq!(st(&a).state, ST_ERROR);
    let mut buf = [0u8; 8];
    assert_eq!(recv(&a, &mut buf, NB), Ok(0));
}

/// rs_hostile case 5: data messages whose length exceeds what was written
/// and the buffer itself.
#[test]
fn hostile_oversized_data_lengths() {
    let (a, p) = with_peer(16, 4096);
    let c = conn_of(&a);
    assert_eq!(p.put(msg_set(OP_DATA, 0x1fff_ffff), &[b'A'; 16], c.data_buf.addr, c.data_buf.key), Some(WC_SUCCESS));
    assert_eq!(p.put(msg_set(OP_DATA, c.data_buf.length + 1), &[b'B'; 16], c.data_buf.addr, c.data_buf.key), Some(WC_SUCCESS));
    let a2 = a.clone();
    let n = within(10, move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0;
        while let Ok(k) = recv(&a2, &mut buf, NB) {
            assert!(k <= 8192, "read {k} bytes out of an 8 KiB buffer");
            n += k;
            if k == 0 {
                break;
            }
        }
        n
    });
    assert!(n <= 2 * 4096, "each message is cut at half the buffer: {n}");
    assert_eq!(st(&a).state, ST_CONNECT_RDWR);
}

/// rs_hostile case 6: reserved and unknown ops, unknown control values.
#[test]
fn hostile_reserved_ops_and_control_values() {
    let (a, p) = with_peer(16, 4096);
    let c = conn_of(&a);
    for op in 1..7 {
        assert_eq!(p.put(msg_set(op, 0x1234567), &[b'C'; 4], c.data_buf.addr, c.data_buf.key), Some(WC_SUCCESS), "op {op}");
    }
    assert_eq!(p.put(msg_set(OP_CTRL, 5), &[], 0, 0), Some(WC_SUCCESS));
    assert_eq!(p.put(msg_set(OP_CTRL, 0x1fff_ffff), &[], 0, 0), Some(WC_SUCCESS));
    assert_eq!(p.put(msg_set(OP_DATA, 16), &[b'D'; 16], c.data_buf.addr, c.data_buf.key), Some(WC_SUCCESS));
    let mut buf = vec![0u8; 1 << 16];
    // Ops 1, 3 and 5 count as data (as upstream), each cut at half the
    // buffer; then the 16 bytes.
    let n = recv(&a, &mut buf, NB).expect("data");
    assert_eq!(n, 3 * 4096 + 16);
    assert_eq!(st(&a).state, ST_CONNECT_RDWR, "unknown control values are ignored");
    assert_eq!(send(&a, b"bye", NB), Ok(3));
}

/// rs_hostile case 7: an SGL update that points nowhere; the stream's
/// next send goes there and fails cleanly.
#[test]
fn hostile_bad_sgl_update() {
    let (a, p) = with_peer(16, 4096);
    let c = conn_of(&a);
    assert_eq!(p.put(msg_set(OP_SGL, 0xffff), &[0xff; 32], c.sgl.addr, c.sgl.key), Some(WC_SUCCESS));
    let _ = st(&a).poll_events(libc::POLLOUT);
    assert_eq!(st(&a).target_get(0), RsSge { addr: u64::MAX, key: u32::MAX, length: u32::MAX });
    assert_eq!(send(&a, &[1u8; 16], NB), Ok(16));
    let _ = st(&a).poll_events(libc::POLLOUT);
    let s = st(&a);
    assert_eq!((s.state, s.err), (ST_ERROR, libc::EIO));
    drop(s);
    assert_eq!(p.put(msg_set(OP_DATA, 16), &[b'D'; 16], c.data_buf.addr, c.data_buf.key), Some(super::fake::WC_WR_FLUSH_ERR));
}

/// rs_hostile case 8: a flood of zero-length data messages, more than
/// the credits given; the stream does not look meanwhile.
#[test]
fn hostile_credit_flood() {
    let (a, p) = with_peer(16, 4096);
    let c = conn_of(&a);
    let mut statuses = Vec::new();
    for _ in 0..600 {
        let s = p.put(msg_set(OP_DATA, 0), &[], c.data_buf.addr, c.data_buf.key);
        statuses.push(s);
        if s != Some(WC_SUCCESS) {
            break;
        }
    }
    assert_eq!(statuses.len(), 17, "16 receives posted, then the peer waits (RNR)");
    assert_eq!(statuses[16], None);
    let r = recv64(&a);
    assert_eq!(r, Ok(0));
    // The stream posted its 16 receives again: the waiting message took one.
    assert_eq!(fake(&a).posted_recvs(), 15);
    assert!(!fake(&a).in_error());
}

/// rs_hostile case 8, with the stream taking completions as they come (so
/// its receives are posted again): the ring of received messages
/// overflows and wraps, the reads that follow end.
#[test]
fn hostile_flood_overruns_the_message_ring() {
    let (a, p) = with_peer(16, 4096);
    let c = conn_of(&a);
    for i in 0..600 {
        assert_eq!(p.put(msg_set(OP_DATA, 0), &[], c.data_buf.addr, c.data_buf.key), Some(WC_SUCCESS), "message {i}");
        if i % 8 == 7 {
            let _ = st(&a).poll_events(libc::POLLIN);
        }
    }
    let r = recv64(&a);
    assert_eq!(r, Ok(0));
    assert_eq!(st(&a).state, ST_CONNECT_RDWR);
}

/// rs_hostile case 8 against a peer whose device gives up on RNR: the
/// flood breaks the connection; the stream reports it cleanly.
#[test]
fn hostile_credit_flood_rnr_error() {
    let (a, p) = with_peer(16, 4096);
    p.qp.rnr_error(true);
    let c = conn_of(&a);
    let mut statuses = Vec::new();
    for _ in 0..600 {
        let s = p.put(msg_set(OP_DATA, 0), &[], c.data_buf.addr, c.data_buf.key);
        statuses.push(s);
        if s != Some(WC_SUCCESS) {
            break;
        }
    }
    assert_eq!(statuses.len(), 17);
    assert_eq!(statuses[16], Some(WC_RNR_RETRY_EXC_ERR));
    let r = recv64(&a);
    assert_eq!(r, Ok(0), "the 16 zero-length messages");
    assert!(fake(&a).in_error());
    // The receives posted again flush (their completions are skipped),
    // and so does the credit message the stream sends next: the stream
    // is in error, and reads the end of the stream.
    let r = recv64(&a);
    assert_eq!(r, Ok(0));
    let s = st(&a);
    assert_eq!((s.state, s.err), (ST_ERROR, libc::EIO));
}

/// A QP gone to error flushes the posted receives: their completions
/// carry no message and are skipped (never read as one).
#[test]
fn flushed_receives_are_skipped() {
    let (a, b) = pair();
    fake(&b).stop();
    assert_eq!(fake(&a).posted_recvs(), 0);
    let r = recv64(&a);
    // The credit message the stream sends first flushes too: the stream
    // sees the error, and reads the end of the stream.
    assert_eq!(r, Ok(0));
    assert_eq!(st(&a).state, ST_ERROR);
}

/// Sequence numbers are 16 bits: credits and sends go on across the wrap.
#[test]
fn sequence_numbers_wrap() {
    let (a, b) = pair();
    {
        let mut s = st(&a);
        s.sseq_no = 0xfff8;
        s.sseq_comp = 0xfff8u16.wrapping_add(16);
    }
    {
        let mut s = st(&b);
        s.rx.seq_no = 0xfff8;
        s.rseq_comp = 0xfff8u16.wrapping_add(8);
    }
    let mut buf = [0u8; 64];
    for i in 0..100u8 {
        assert_eq!(send(&a, &[i; 3], NB), Ok(3), "message {i}");
        assert_eq!(recv(&b, &mut buf, NB), Ok(3), "message {i}");
        assert_eq!(&buf[..3], &[i; 3]);
    }
    assert_eq!(st(&a).sseq_no, 0xfff8u16.wrapping_add(100));
    assert_eq!(st(&b).rx.seq_no, 0xfff8u16.wrapping_add(100));
}

/// A peer with the other byte order gets our riomap entries swapped.
#[test]
fn riomap_entry_in_the_peers_byte_order() {
    let (a, p) = raw_z(Z0);
    let mut cd = p.conn_data(16, 4096);
    cd[1] ^= wire::CONN_FLAG_NET;
    cd[7] = 2;
    st(&a).take_conn_data(&cd).unwrap();
    let m = TestMem::new(4096);
    let u = m.user_buf();
    let addr = u.addr();
    assert_eq!(st(&a).iomap(u, libc::PROT_WRITE, 0x1234), Ok(0x1234));
    assert_eq!(send(&a, b"x", NB), Ok(1));
    // Entry 0 of the peer's riomap table, after its two credit entries.
    let e = p.mem.bytes(32, 24);
    let be64 = |o: usize| u64::from_ne_bytes(e[o..o + 8].try_into().unwrap()).swap_bytes();
    let be32 = |o: usize| u32::from_ne_bytes(e[o..o + 4].try_into().unwrap()).swap_bytes();
    assert_eq!((be64(0), be64(8), be32(20)), (0x1234, addr, 4096));
    assert_ne!(be32(16), 0, "a key");
}

/// A peer's riomap entry that points nowhere (huge length, a key of
/// nothing): riowrite fails cleanly; offsets no entry covers write nothing.
#[test]
fn hostile_riomap_entry() {
    let (a, p) = raw_z(Z { iomap: 4, ..Z0 });
    st(&a).take_conn_data(&p.conn_data(16, 4096)).unwrap();
    let c = conn_of(&a);
    let mut e = [0u8; 24];
    e[8..16].copy_from_slice(&0xdead_0000_0000u64.to_ne_bytes());
    e[16..20].copy_from_slice(&0x0badu32.to_ne_bytes());
    e[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
    let at = c.sgl.addr + wire::IOMAP_TABLE_OFF as u64;
    assert_eq!(p.put(msg_set(wire::OP_IOMAP_SGL, 0), &e, at, c.sgl.key), Some(WC_SUCCESS));
    let a2 = a.clone();
    let r = within(10, move || iowrite(&a2, b"far", 1 << 40, NB));
    assert_eq!(r, Ok(0), "no entry covers the offset");
    assert_eq!(iowrite(&a, b"near", 16, NB), Ok(4));
    let _ = st(&a).poll_events(libc::POLLOUT);
    assert_eq!(st(&a).state, ST_ERROR);
}

/// After SHUT_WR a send that has to wait for credits fails with
/// ECONNRESET (with credits left it still goes out: the state is looked
/// at only when the stream cannot send, as upstream's rsend).
#[test]
fn send_after_shut_wr_without_credits_is_reset() {
    let (a, _p) = with_peer(1, 4096);
    assert_eq!(send(&a, b"a", NB), Ok(1));
    let a2 = a.clone();
    within(10, move || shutdown(&a2, libc::SHUT_WR)).unwrap();
    let a2 = a.clone();
    assert_eq!(within(10, move || send(&a2, b"b", 0)), Err(Errno::ECONNRESET));
}

/// MSG_WAITALL returns what came before the end of the stream.
#[test]
fn msg_waitall_stops_at_end_of_stream() {
    let (a, b) = pair();
    assert_eq!(send(&a, &[5u8; 100], NB), Ok(100));
    let a2 = a.clone();
    within(10, move || shutdown(&a2, libc::SHUT_WR)).unwrap();
    let r = within(10, move || {
        let mut buf = vec![0u8; 300];
        recv(&b, &mut buf, libc::MSG_WAITALL)
    });
    assert_eq!(r, Ok(100));
}

/// Both directions at once, a sending and a receiving thread on each
/// stream: one stream's sender and receiver share its CQ, and whichever
/// takes a completion or a CQ event wakes the other. Eight rounds (a lost
/// wake-up shows in some rounds only).
#[test]
fn both_directions_with_a_thread_per_direction() {
    const N: usize = 150_000;
    fn spawn_send(h: &Handle, seed: u8) -> std::thread::JoinHandle<Result<usize, Errno>> {
        let h = h.clone();
        std::thread::spawn(move || send(&h, &pattern(N, seed), 0))
    }
    fn spawn_recv(h: &Handle) -> std::thread::JoinHandle<Vec<u8>> {
        let h = h.clone();
        std::thread::spawn(move || {
            let mut got = Vec::with_capacity(N);
            let mut buf = vec![0u8; 7000];
            while got.len() < N {
                match recv(&h, &mut buf, 0) {
                    Ok(0) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) => panic!("recv: {e}"),
                }
            }
            got
        })
    }
    within(60, || {
        for round in 0..8 {
            let (a, b) = pair();
            let ts = [spawn_send(&a, 1), spawn_send(&b, 2)];
            let (rb, ra) = (spawn_recv(&b), spawn_recv(&a));
            assert_eq!(rb.join().unwrap(), pattern(N, 1), "round {round}");
            assert_eq!(ra.join().unwrap(), pattern(N, 2), "round {round}");
            for t in ts {
                assert_eq!(t.join().unwrap(), Ok(N), "round {round}");
            }
        }
    });
}

/// A random hostile peer (a fixed-seed xorshift): message words of every
/// op with random values, random bytes written anywhere in the stream's
/// receive buffer and credit table, while the stream sends, receives and
/// polls. Nothing may panic, hang or reach outside a buffer.
#[test]
fn hostile_random_messages() {
    for seed in 1..=8u64 {
        let (a, p) = with_peer(16, 4096);
        p.post_recvs(4096);
        let c = conn_of(&a);
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let a2 = a.clone();
        let steps = within(20, move || {
            let mut buf = vec![0u8; 20000];
            let mut steps = 0;
            for _ in 0..400 {
                let r = rnd();
                let op = (r % 8) as u32;
                let val = match (r >> 3) % 4 {
                    0 => 0,
                    1 => (r >> 8) as u32 & 0xff,
                    2 => (r >> 8) as u32 & 0x1fff,
                    _ => (r >> 8) as u32,
                };
                let n = ((r >> 40) % 64) as usize;
                let (at, key) = if (r >> 50) % 4 == 0 { (c.sgl.addr + (r >> 52) % 64, c.sgl.key) } else { (c.data_buf.addr + (r >> 52) % 8192, c.data_buf.key) };
                let _ = p.put(msg_set(op, val), &vec![(r >> 20) as u8; n], at, key);
                match (r >> 60) % 4 {
                    0 => drop(recv(&a2, &mut buf, NB)),
                    1 => drop(send(&a2, &buf[..(r as usize >> 30) % 9000], NB)),
                    2 => drop(lock(&a2).map(|mut s| s.poll_events(libc::POLLIN | libc::POLLOUT))),
                    _ => drop(recv(&a2, &mut buf[..7], libc::MSG_PEEK | NB)),
                }
                steps += 1;
            }
            steps
        });
        assert_eq!(steps, 400, "seed {seed}");
        assert!(!lock(&a).map(|s| s.broken).unwrap_or(false), "seed {seed}: a call panicked");
    }
}

/// Staged bytes stay in the send ring until their write completes: with
/// the device stalled (it reads the ring only when it carries the writes
/// out), the sender fills the ring and then waits instead of overwriting.
#[test]
fn staged_bytes_stay_until_their_write_completes() {
    let (a, b) = pair_z(Z { rbuf: 65536, ..Z0 });
    fake(&a).hold(true);
    let (x, y, z) = (pattern(3000, 1), pattern(3000, 2), pattern(3000, 3));
    assert_eq!(send(&a, &x, NB), Ok(3000));
    assert_eq!(send(&a, &y, NB), Ok(3000));
    // 2192 bytes left: one 2048-byte chunk, then less than the low-water mark.
    assert_eq!(send(&a, &z, NB), Ok(2048));
    assert_eq!(send(&a, &z[2048..], NB), Err(Errno::EAGAIN));
    fake(&a).hold(false);
    assert_eq!(send(&a, &z[2048..], NB), Ok(952));
    let mut got = vec![0u8; 9000];
    assert_eq!(recv(&b, &mut got, libc::MSG_WAITALL | NB), Ok(9000));
    assert_eq!(&got[..3000], &x[..]);
    assert_eq!(&got[3000..6000], &y[..]);
    assert_eq!(&got[6000..], &z[..]);
}
