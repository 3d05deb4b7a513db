// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The send half over the fake fabric ([`super::fake`]), on the fixtures
//! of [`super::tests_proto`]: how a send cuts its bytes into messages
//! (chunk sizes, each chunk from its own place), the send ring (full, then
//! room again; staging in two pieces at its end; inline up to `sq_inline`)
//! and the runs of unsignalled sends ([`super::signal`]).

use super::lifecycle::shutdown;
use super::recv::recv;
use super::send::send;
use super::state::Handle;
use super::tests_proto::*;
use super::wire::{msg_op, OP_DATA};
use nix::errno::Errno;
use std::time::Duration;
use std::sync::atomic::Ordering;

#[test]
fn send_ring_full_then_resumes_when_writes_complete() {
    let (a, b) = pair_z(Z { rbuf: 65536, ..Z0 });
    fake(&a).hold(true);
    let data = pattern(8192, 1);
    assert_eq!(send(&a, &data, NB), Ok(8192));
    assert_eq!(st(&a).tx.avail_bytes(), 0);
    assert_eq!(send(&a, b"more", NB), Err(Errno::EAGAIN), "the send ring is full");
    fake(&a).hold(false);
    assert_eq!(send(&a, b"more", NB), Ok(4));
    let mut buf = vec![0u8; 9000];
    assert_eq!(recv(&b, &mut buf, libc::MSG_WAITALL | NB), Ok(8196));
}

/// The data messages `h` has posted, by length.
fn data_sizes(h: &Handle) -> Vec<usize> {
    sent_sizes(h, |_, imm| msg_op(imm) == OP_DATA)
}

#[test]
fn a_send_that_waits_for_room_goes_on_with_the_chunk_size_it_reached() {
    // Chunks grow from 2 KiB; a 16 KiB send ring fills after 2 + 4 + 8 + 2
    // KiB (the 16 KiB chunk cut to the room left) with the writes held.
    let (a, b) = pair_z(Z { sbuf: 16384, rbuf: 65536, ..Z0 });
    fake(&a).hold(true);
    let data = pattern(24576, 5);
    let (a2, d2) = (a.clone(), data.clone());
    let sender = spawn_call(move || send(&a2, &d2, 0));
    assert!(sender.try_recv().is_err(), "the send waits for room");
    assert_eq!(data_sizes(&a), [2048, 4096, 8192, 2048]);
    fake(&a).hold(false);
    assert_eq!(sender.recv_timeout(Duration::from_secs(10)).expect("the sender never woke"), Ok(24576));
    // The last 8 KiB go as one chunk, as upstream's (the call's chunk size
    // is past them), not from 2 KiB again.
    assert_eq!(data_sizes(&a), [2048, 4096, 8192, 2048, 8192]);
    let mut buf = vec![0u8; 24576];
    assert_eq!(recv(&b, &mut buf, libc::MSG_WAITALL | NB), Ok(24576));
    assert_eq!(buf, data);
}

#[test]
fn each_chunk_of_a_send_comes_from_its_own_place() {
    // A 64 KiB send through rings that hold it whole goes as six chunks
    // (2, 4, 8, 16, 32 KiB and the last 2), posted in order; then a send
    // that wraps the send ring. The bytes have no period (`pattern`'s is
    // 256: a chunk taken from a place a multiple of it away would pass).
    let (a, b) = pair_z(Z { sbuf: 131072, rbuf: 131072, sq: 64, rq: 64, ..Z0 });
    let unique = |n: usize, seed: usize| (0..n).map(|i| ((i + seed).wrapping_mul(2_654_435_761) >> 13) as u8).collect::<Vec<u8>>();
    let data = unique(65536, 11);
    assert_eq!(send(&a, &data, NB), Ok(65536));
    assert_eq!(data_sizes(&a), [2048, 4096, 8192, 16384, 32768, 2048]);
    let mut buf = vec![0u8; 65536];
    assert_eq!(recv(&b, &mut buf, libc::MSG_WAITALL | NB), Ok(65536));
    assert_eq!(buf, data);
    let more = unique(100_000, 12);
    assert_eq!(pump(&a, &b, &more), more);
}

#[test]
fn a_send_behind_writes_in_flight_goes_in_large_chunks() {
    // Rings of 256 KiB: the peer credits half its buffer (128 KiB) at once.
    let (a, b) = pair_z(Z { sbuf: 262144, rbuf: 262144, sq: 64, rq: 64, ..Z0 });
    let data = pattern(65536 + 4096, 9);
    let (x, y) = data.split_at(4096);
    // An idle stream: the call ramps up from 2 KiB, as upstream's.
    fake(&a).hold(true);
    assert_eq!(send(&a, x, NB), Ok(4096));
    assert_eq!(data_sizes(&a), [2048, 2048]);
    // Its writes not completed yet: the next call starts at the largest chunk.
    assert_eq!(send(&a, y, NB), Ok(65536));
    assert_eq!(data_sizes(&a), [2048, 2048, 65536]);
    fake(&a).hold(false);
    let mut buf = vec![0u8; data.len()];
    assert_eq!(recv(&b, &mut buf, libc::MSG_WAITALL | NB), Ok(data.len()));
    assert_eq!(buf, data);
    // Their completions have come but nobody has taken them yet: the
    // next call still counts them in flight and goes in one message.
    assert!(st(&a).tx.avail_bytes() < 262144);
    assert_eq!(send(&a, &data[..8192], NB), Ok(8192));
    assert_eq!(data_sizes(&a)[3..], [8192]);
    assert_eq!(drain(&b), 8192);
    // Every completion taken: idle, the next call ramps.
    let _ = room(&a);
    assert_eq!(st(&a).tx.avail_bytes(), 262144);
    assert_eq!(send(&a, &data[..8192], NB), Ok(8192));
    assert_eq!(data_sizes(&a)[4..], [2048, 4096, 2048]);
    assert_eq!(drain(&b), 8192);
    // Behind a few small sends only (a header before its body; inline,
    // their room back only with the next signalled request): it ramps.
    let _ = room(&a);
    for _ in 0..4 {
        assert_eq!(send(&a, &data[..20], NB), Ok(20));
    }
    assert_eq!(st(&a).tx.avail_bytes(), 262144 - 80);
    assert_eq!(send(&a, &data[..8192], NB), Ok(8192));
    assert_eq!(data_sizes(&a)[7..], [20, 20, 20, 20, 2048, 4096, 2048]);
    assert_eq!(drain(&b), 8272);
}

#[test]
fn a_send_that_came_behind_writes_in_flight_stays_large_after_its_wait() {
    // The ring full of writes not completed: a send comes, waits for room;
    // the wait takes their completions (the stream is idle by then), but
    // the call's chunks were decided when it came: one 8 KiB message.
    let (a, b) = pair_z(Z { sbuf: 16384, rbuf: 65536, ..Z0 });
    fake(&a).hold(true);
    let data = pattern(16384 + 8192, 6);
    assert_eq!(send(&a, &data[..16384], NB), Ok(16384));
    assert_eq!(data_sizes(&a), [2048, 4096, 8192, 2048]);
    let (a2, d2) = (a.clone(), data[16384..].to_vec());
    let sender = spawn_call(move || send(&a2, &d2, 0));
    assert!(sender.try_recv().is_err(), "the send waits for room");
    fake(&a).hold(false);
    assert_eq!(sender.recv_timeout(Duration::from_secs(10)).expect("the sender never woke"), Ok(8192));
    assert_eq!(data_sizes(&a)[4..], [8192]);
    let mut buf = vec![0u8; data.len()];
    assert_eq!(recv(&b, &mut buf, libc::MSG_WAITALL | NB), Ok(data.len()));
    assert_eq!(buf, data);
}

#[test]
fn inline_up_to_sq_inline_then_staged() {
    let (a, b) = pair();
    assert_eq!(send(&a, &[1u8; 64], NB), Ok(64));
    assert_eq!(st(&a).tx.ssgl0_off(), 0, "64 bytes go inline");
    assert_eq!(send(&a, &[2u8; 65], NB), Ok(65));
    assert_eq!(st(&a).tx.ssgl0_off(), 65, "65 bytes are staged in the send ring");
    let mut buf = [0u8; 200];
    assert_eq!(recv(&b, &mut buf, NB), Ok(129));
    assert!(buf[..64].iter().all(|&x| x == 1) && buf[64..129].iter().all(|&x| x == 2));
}

/// A send small enough to go inline but with less room left in the peer's
/// buffer entry than its length goes as much as the entry holds, and says
/// so (a non-blocking call: the rest waits for the peer's credit), as the
/// general path cuts it; never the whole length with only part posted.
#[test]
fn an_inline_send_cut_by_the_peers_entry_says_how_much_went() {
    let (a, b) = pair();
    let first = pattern(4096 - 40, 3);
    assert_eq!(send(&a, &first, NB), Ok(4056));
    assert_eq!(send(&a, &[7u8; 64], NB), Ok(40), "the entry had 40 bytes left");
    assert_eq!(data_sizes(&a).last(), Some(&40));
    let mut buf = vec![0u8; 8192];
    assert_eq!(recv(&b, &mut buf, NB), Ok(4096));
    assert_eq!(&buf[..4056], &first[..]);
    assert!(buf[4056..4096].iter().all(|&x| x == 7));
}

/// rsend's look without a lock at the inline size: unknown (no bound)
/// until a send has seen the stream connected, then the QP's; only a
/// filter: with it at 0 a small send still goes inline (the general path).
#[test]
fn the_inline_size_hint_is_learned_and_only_filters() {
    let (a, b) = pair();
    assert_eq!(a.inline_hint.load(Ordering::Relaxed), u32::MAX);
    assert_eq!(send(&a, &[1u8; 64], NB), Ok(64));
    assert_eq!(a.inline_hint.load(Ordering::Relaxed), st(&a).tx.sq_inline());
    a.inline_hint.store(0, Ordering::Relaxed);
    assert_eq!(send(&a, &[2u8; 64], NB), Ok(64));
    assert_eq!(st(&a).tx.ssgl0_off(), 0, "64 bytes go inline");
    let mut buf = [0u8; 200];
    assert_eq!(recv(&b, &mut buf, NB), Ok(128));
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
    (s.tx.sqe_avail(), s.tx.avail_bytes())
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
    assert_eq!(st(&a).tx.sqe_avail(), 60);
    assert_eq!(st(&a).tx.avail_bytes(), 8192);
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
    st(&a).tx.set_ssgl0_off(8192 - 100);
    let data = pattern(300, 9);
    assert_eq!(send(&a, &data, NB), Ok(300));
    assert_eq!(st(&a).tx.ssgl0_off(), 200);
    let mut buf = [0u8; 400];
    assert_eq!(recv(&b, &mut buf, NB), Ok(300));
    assert_eq!(&buf[..300], &data[..]);
}

