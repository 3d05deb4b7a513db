// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! riomap and riowrite over the fake fabric ([`super::fake`]), with the
//! helpers of [`super::tests_proto`].
#![deny(unsafe_code)]

use super::iomap::iowrite;
use super::recv::recv;
use super::send::send;
use super::state::*;
use super::tests_proto::*;
use super::verbs::{self, TestMem};
use nix::errno::Errno;
use std::time::Duration;

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
    assert_eq!(st(&a).ctl.state(), ST_CONNECT_RDWR);
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
    assert_eq!(st(&a).iomaps.remote().length, 1);
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

#[test]
fn a_riowrite_that_waits_for_room_goes_on_with_the_chunk_size_it_reached() {
    // As a_send_that_waits_for_room_goes_on_with_the_chunk_size_it_reached:
    // 2 + 4 + 8 + 2 KiB fill the 16 KiB send ring with the writes held;
    // the last 8 KiB go as one chunk once they complete.
    let (a, b) = pair_z(Z { sbuf: 16384, rbuf: 65536, iomap: 4, ..Z0 });
    let mem = TestMem::new(32768);
    assert_eq!(st(&b).iomap(mem.user_buf(), libc::PROT_WRITE, 0), Ok(0));
    assert_eq!(send(&b, b"m", NB), Ok(1));
    assert_eq!(recv(&a, &mut [0u8; 4], NB), Ok(1));
    let writes = |h: &Handle| sent_sizes(h, |op, _| op == verbs::WR_RDMA_WRITE);
    fake(&a).hold(true);
    let data = pattern(24576, 3);
    let (a2, d2) = (a.clone(), data.clone());
    let writer = spawn_call(move || iowrite(&a2, &d2, 0, 0));
    assert!(writer.try_recv().is_err(), "the riowrite waits for room");
    assert_eq!(writes(&a), [2048, 4096, 8192, 2048]);
    fake(&a).hold(false);
    assert_eq!(writer.recv_timeout(Duration::from_secs(10)).expect("the writer never woke"), Ok(24576));
    assert_eq!(writes(&a), [2048, 4096, 8192, 2048, 8192]);
    assert_eq!(&mem.bytes()[..24576], &data[..]);
}
