// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The stream protocol over the fake fabric, continued ([`super::tests_proto`]
//! has the helpers): the peer's connect data, and a hand-written hostile
//! peer sending every case of the VM test `rs_hostile`.
#![deny(unsafe_code)]

use super::fake::{RawPeer, PEER_BASE, WC_RNR_RETRY_EXC_ERR, WC_SUCCESS};
use super::guard::lock;
use super::lifecycle::shutdown;
use super::recv::recv;
use super::send::send;
use super::state::*;
use super::verbs::TestMem;
use super::wire::{self, msg_data, msg_op, msg_set, ConnData, RsSge, OP_CTRL, OP_DATA, OP_SGL};
use super::iomap::iowrite;
use nix::errno::Errno;
use super::tests_proto::*;

// ---- the peer's connect data --------------------------------------------------------

#[test]
fn connect_data_swapped_byte_order() {
    let (a, p) = raw_z(Z0);
    let mut cd = p.conn_data(16, 4096);
    cd[1] ^= wire::CONN_FLAG_NET;
    st(&a).take_conn_data(&cd).unwrap();
    assert!(st(&a).ctl.opts() & OPT_SWAP_SGL != 0);
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
    assert_eq!(st(&a).iomaps.remote(), RsSge { addr: PEER_BASE + 32, key: p.key(), length: 3 });
    let (b, p2) = raw_z(Z0);
    let mut cd = p2.conn_data(16, 4096);
    cd[1] &= !wire::CONN_FLAG_IOMAP;
    cd[7] = 3;
    st(&b).take_conn_data(&cd).unwrap();
    assert_eq!(st(&b).iomaps.remote().length, 0, "no riomap without the flag");
    let m = TestMem::new(4096);
    assert_eq!(st(&b).iomap(m.user_buf(), libc::PROT_WRITE, 0), Err(Errno::ENOMEM));
}

// ---- the hostile peer: every case of ctest/vm/rs_hostile.c --------------------------

/// rs_hostile case 1: no connection data at all.
#[test]
fn hostile_no_connect_data() {
    let (a, _p) = raw_z(Z0);
    assert_eq!(st(&a).take_conn_data(&[]), Err(Errno::ENOTSUP));
    assert_eq!(st(&a).ctl.state(), ST_INIT);
    assert_eq!(send(&a, b"x", NB), Err(Errno::ENOTCONN));
}

/// rs_hostile case 2: an unknown protocol version.
#[test]
fn hostile_unknown_version() {
    let (a, p) = raw_z(Z0);
    let mut cd = p.conn_data(16, 4096);
    cd[0] = 2;
    assert_eq!(st(&a).take_conn_data(&cd), Err(Errno::ENOTSUP));
    assert_eq!(st(&a).ctl.state(), ST_INIT);
}

/// rs_hostile case 3: connection data cut short (8 bytes).
#[test]
fn hostile_short_connect_data() {
    let (a, p) = raw_z(Z0);
    let cd = p.conn_data(16, 4096);
    for n in [8, 39] {
        assert_eq!(st(&a).take_conn_data(&cd[..n]), Err(Errno::ENOTSUP), "{n} bytes");
    }
    assert_eq!(st(&a).ctl.state(), ST_INIT);
    assert_eq!(st(&a).tx.sseq_comp(), 0, "nothing of it taken");
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
    assert_eq!(st(&a).ctl.state(), ST_ERROR);
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
    assert_eq!(st(&a).ctl.state(), ST_CONNECT_RDWR);
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
    assert_eq!(st(&a).ctl.state(), ST_CONNECT_RDWR, "unknown control values are ignored");
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
    assert_eq!((s.ctl.state(), s.ctl.err()), (ST_ERROR, libc::EIO));
    drop(s);
    assert_eq!(p.put(msg_set(OP_DATA, 16), &[b'D'; 16], c.data_buf.addr, c.data_buf.key), Some(super::fake::WC_WR_FLUSH_ERR));
}

/// rs_hostile case 8's flood: up to 600 zero-length data messages from
/// the raw peer, until one does not complete successfully; their statuses.
fn flood(p: &RawPeer, c: &ConnData) -> Vec<Option<u32>> {
    let mut statuses = Vec::new();
    for _ in 0..600 {
        let s = p.put(msg_set(OP_DATA, 0), &[], c.data_buf.addr, c.data_buf.key);
        statuses.push(s);
        if s != Some(WC_SUCCESS) {
            break;
        }
    }
    statuses
}

/// rs_hostile case 8: a flood of zero-length data messages, more than
/// the credits given; the stream does not look meanwhile.
#[test]
fn hostile_credit_flood() {
    let (a, p) = with_peer(16, 4096);
    let c = conn_of(&a);
    let statuses = flood(&p, &c);
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
    assert_eq!(st(&a).ctl.state(), ST_CONNECT_RDWR);
}

/// rs_hostile case 8 against a peer whose device gives up on RNR: the
/// flood breaks the connection; the stream reports it cleanly.
#[test]
fn hostile_credit_flood_rnr_error() {
    let (a, p) = with_peer(16, 4096);
    p.qp.rnr_error(true);
    let c = conn_of(&a);
    let statuses = flood(&p, &c);
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
    assert_eq!((s.ctl.state(), s.ctl.err()), (ST_ERROR, libc::EIO));
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
    assert_eq!(st(&a).ctl.state(), ST_ERROR);
}

/// Sequence numbers are 16 bits: credits and sends go on across the wrap.
#[test]
fn sequence_numbers_wrap() {
    let (a, b) = pair();
    {
        let mut s = st(&a);
        s.tx.set_seq(0xfff8, 0xfff8u16.wrapping_add(16));
    }
    {
        let mut s = st(&b);
        s.rx.set_seq(0xfff8, 0xfff8u16.wrapping_add(8));
    }
    let mut buf = [0u8; 64];
    for i in 0..100u8 {
        assert_eq!(send(&a, &[i; 3], NB), Ok(3), "message {i}");
        assert_eq!(recv(&b, &mut buf, NB), Ok(3), "message {i}");
        assert_eq!(&buf[..3], &[i; 3]);
    }
    assert_eq!(st(&a).tx.sseq_no(), 0xfff8u16.wrapping_add(100));
    assert_eq!(st(&b).rx.buf().seq_no, 0xfff8u16.wrapping_add(100));
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
    assert_eq!(st(&a).ctl.state(), ST_ERROR);
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
        assert!(!lock(&a).map(|s| s.ctl.broken()).unwrap_or(false), "seed {seed}: a call panicked");
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
    // 2192 bytes left, taken whole (writes of ours are in flight: the
    // call's chunks start large, Stream::first_chunk); then nothing.
    assert_eq!(send(&a, &z, NB), Ok(2192));
    assert_eq!(send(&a, &z[2192..], NB), Err(Errno::EAGAIN));
    fake(&a).hold(false);
    assert_eq!(send(&a, &z[2192..], NB), Ok(808));
    let mut got = vec![0u8; 9000];
    assert_eq!(recv(&b, &mut got, libc::MSG_WAITALL | NB), Ok(9000));
    assert_eq!(&got[..3000], &x[..]);
    assert_eq!(&got[3000..6000], &y[..]);
    assert_eq!(&got[6000..], &z[..]);
}
