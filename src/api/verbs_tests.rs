// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Unit tests of the Rust API's data path, over the rsocket tests' fake
//! fabric: sends and receives, signalling, immediate data, inline sends,
//! regions and their failed deregistration, and the C layouts.

use super::*;

#[test]
fn opcodes_are_the_verbs_numbers() {
    assert_eq!(SendOp::Write { remote_addr: 1, rkey: 2 }.raw(), (0, 0, 1, 2));
    assert_eq!(SendOp::Send.raw().0, 2);
    assert_eq!(SendOp::SendWithImm(9).raw(), (3, 9, 0, 0));
    assert_eq!(SendOp::Read { remote_addr: 3, rkey: 4 }.raw(), (4, 0, 3, 4));
    assert_eq!(WcOpcode::from_raw(128), WcOpcode::Recv);
    assert_eq!(WcStatus::from_raw(5), WcStatus::WrFlushErr);
    assert_eq!(WcStatus::from_raw(12), WcStatus::Error(12));
}

/// Immediate data goes to the shim as given (host order; the shim
/// writes it big-endian into the work request), and the CQ has a slot
/// for every send and receive asked for.
#[test]
fn immediate_data_and_cq_size() {
    let imm = 0x0102_0304;
    assert_eq!(SendOp::SendWithImm(imm).raw().1, imm);
    assert_eq!(SendOp::WriteWithImm { remote_addr: 5, rkey: 6, imm }.raw(), (1, imm, 5, 6));
    let w = ShimWc { wc_flags: 2, imm_host: imm, ..Default::default() };
    assert_eq!(WorkCompletion::from_shim(&w).imm, Some(imm));
    assert_eq!(WorkCompletion::from_shim(&ShimWc { imm_host: imm, ..Default::default() }).imm, None);
    assert_eq!(cq_entries(&QpCaps { max_send_wr: 100, max_recv_wr: 28, ..QpCaps::default() }), 128);
    assert_eq!(cq_entries(&QpCaps { max_send_wr: 0, max_recv_wr: 0, ..QpCaps::default() }), 1);
}

/// What `ibv_init_ah_from_wc` reads of a completion is what the poll
/// gave: the sender fields survive the way through WorkCompletion.
#[test]
fn completion_keeps_the_sender_fields() {
    let raw = ShimWc { wr_id: 7, status: 0, opcode: 128, vendor_err: 0, byte_len: 140, imm_host: 0x11, wc_flags: 3, qp_num: 0x22, src_qp: 0x11, slid: 0x33, pkey_index: 2, sl: 5, dlid_path_bits: 1 };
    let wc = WorkCompletion::from_shim(&raw);
    assert_eq!(wc.imm, Some(0x11));
    assert!(wc.wc_flags.contains(WcFlags::GRH) && wc.wc_flags.contains(WcFlags::WITH_IMM));
    assert_eq!((wc.src_qp, wc.slid, wc.sl, wc.pkey_index, wc.dlid_path_bits, wc.qp_num), (0x11, 0x33, 5, 2, 1, 0x22));
    let back = wc.to_shim();
    assert_eq!((back.wr_id, back.status, back.opcode, back.byte_len, back.imm_host, back.wc_flags), (7, 0, 128, 140, 0x11, 3));
    assert_eq!((back.qp_num, back.src_qp, back.slid, back.pkey_index, back.sl, back.dlid_path_bits), (0x22, 0x11, 0x33, 2, 5, 1));
    // Without the flag there is no immediate data, whatever the field.
    let plain = WorkCompletion::from_shim(&ShimWc { wc_flags: 1, imm_host: 9, ..raw });
    assert_eq!(plain.imm, None);
    assert_eq!(WorkCompletion::default(), WorkCompletion::EMPTY);
    assert_eq!(GRH_LEN, 40);
}

use crate::rsocket::fake::{Fabric, FakeQp};

/// The bytes of a region as the fake fabric reaches them: raw,
/// bounds-checked copies, as a device's DMA.
struct BufMem {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: plain memory reached only through bounds-checked raw copies
// (as a device reaches it), from any thread; the region owning it
// deregisters before it frees it.
unsafe impl Send for BufMem {}
// SAFETY: as above.
unsafe impl Sync for BufMem {}

impl crate::rsocket::fake::Mem for BufMem {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, off: usize, out: &mut [u8]) {
        assert!(off.checked_add(out.len()).is_some_and(|e| e <= self.len), "fake DMA out of bounds");
        // SAFETY: in bounds; the fabric reaches a registration only
        // while it is registered (a failed deregistration leaks the
        // buffer: it stays allocated).
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), out.as_mut_ptr(), out.len()) };
    }
    fn write(&self, off: usize, data: &[u8]) {
        assert!(off.checked_add(data.len()).is_some_and(|e| e <= self.len), "fake DMA out of bounds");
        // SAFETY: as in read.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(off), data.len()) };
    }
}

/// A region over a registration on one end of the fake fabric, as
/// `from_buffer` makes one on a device.
fn on_fake<B: RegisterBuffer>(q: &FakeQp, buf: B, access: Access) -> MemoryRegion<B> {
    let access = full_access(access);
    let (ptr, len, cap) = buf.into_raw();
    let mr = q.reg(Arc::new(BufMem { ptr, len }), ptr.as_ptr() as usize as u64, access.contains(Access::REMOTE_WRITE));
    let key = mr.key();
    MemoryRegion { reg: Reg::Fake(mr), buf: ptr, len, cap, lkey: key, rkey: key, access, _buf: PhantomData }
}

/// A region on a fabric of its own, and the fabric.
fn fake<B: RegisterBuffer>(buf: B, access: Access) -> (MemoryRegion<B>, Arc<Fabric>) {
    let fab = Fabric::new();
    let (a, _b) = fab.ends();
    (on_fake(&a, buf, access), fab)
}

/// The fake registration under a region.
fn fake_mr<B: RegisterBuffer>(mr: &MemoryRegion<B>) -> &crate::rsocket::fake::FakeMr {
    match &mr.reg {
        Reg::Fake(m) => m,
        Reg::Real { .. } => unreachable!("a fake region"),
    }
}

/// The caller's buffer is registered where it is and comes back as it
/// was: the same heap block (no copy), with what was written into it;
/// a Vec keeps its spare capacity.
#[test]
fn buffer_comes_back_without_a_copy() {
    let mut v = Vec::with_capacity(64);
    v.extend_from_slice(b"0123456789");
    let at = v.as_ptr() as usize as u64;
    let (mut mr, fab) = fake(v, Access::NONE);
    let key = mr.lkey();
    assert_eq!((mr.addr(), mr.len()), (at, 10));
    mr.as_mut_slice().unwrap()[..4].copy_from_slice(b"ping");
    assert_eq!(mr.as_slice().unwrap(), b"ping456789");
    let sge = mr.sge(2..6).unwrap();
    assert_eq!((sge.addr(), sge.len(), sge.0.lkey()), (at + 2, 4, key));
    assert!(mr.sge(8..11).is_err());
    let v = mr.into_inner().map_err(|(e, _)| e).unwrap();
    assert_eq!((v.as_ptr() as usize as u64, v.capacity(), &v[..]), (at, 64, &b"ping456789"[..]));
    assert!(fab.region_bytes(key).is_none(), "deregistered");

    let b: Box<[u8]> = vec![1u8, 2, 3].into_boxed_slice();
    let at = b.as_ptr() as usize as u64;
    let (mut mr, _) = fake(b, Access::REMOTE_READ);
    mr.write(1, &[9]).unwrap();
    let b = mr.into_inner().map_err(|(e, _)| e).unwrap();
    assert_eq!((b.as_ptr() as usize as u64, &b[..]), (at, &[1u8, 9, 3][..]));
}

/// In-place views only where the device cannot write: any write right
/// (LOCAL_WRITE, or a remote one, which implies it) refuses them.
#[test]
fn views_only_without_device_writes() {
    for (a, lends) in [
        (Access::NONE, true),
        (Access::REMOTE_READ, true),
        (Access::LOCAL_WRITE, false),
        (Access::REMOTE_WRITE, false),
        (Access::REMOTE_ATOMIC, false),
        (Access::REMOTE_READ | Access::LOCAL_WRITE, false),
    ] {
        let (mut mr, _) = fake(vec![0u8; 8], a);
        assert_eq!(mr.as_slice().is_ok(), lends, "{a:?}");
        assert_eq!(mr.as_mut_slice().is_ok(), lends, "{a:?}");
        if !lends {
            assert_eq!(mr.as_slice().unwrap_err().errno(), libc::EACCES);
            assert!(mr.access().contains(Access::LOCAL_WRITE));
            // copies still work
            mr.write(0, b"ab").unwrap();
            assert_eq!(mr.to_vec(0..2).unwrap(), b"ab");
        }
    }
}

/// A failed deregistration never frees the buffer: into_inner hands
/// the region back (and a retry can succeed); a drop that fails leaks
/// the buffer, still registered on the fabric, and logs a warning.
#[test]
fn failed_deregistration_keeps_the_buffer() {
    crate::logging::capture::start();
    let (mr, fab) = fake(vec![7u8; 16], Access::LOCAL_WRITE);
    let key = mr.lkey();
    fake_mr(&mr).set_release_fails(true);
    let (e, mr) = mr.into_inner().unwrap_err();
    assert_eq!(e.errno(), libc::EBUSY);
    assert_eq!(mr.to_vec(0..2).unwrap(), [7, 7]);
    assert!(fab.region_bytes(key).is_some(), "still registered");
    fake_mr(&mr).set_release_fails(false);
    assert_eq!(mr.into_inner().map_err(|(e, _)| e).unwrap(), vec![7u8; 16]);
    assert!(fab.region_bytes(key).is_none(), "deregistered");

    // Dropped while the deregistration fails: leaked, not freed, and
    // said (Miri reports the leak: run this one with
    // -Zmiri-ignore-leaks). 4099 bytes: a length no other test leaks.
    let (mut mr, fab) = fake(vec![1u8; 4099], Access::LOCAL_WRITE);
    mr.write(4095, b"kept").unwrap();
    let key = mr.lkey();
    fake_mr(&mr).fail_release();
    drop(mr);
    let bytes = fab.region_bytes(key).expect("still registered");
    assert_eq!(&bytes[4095..], b"kept", "the device still reaches the bytes");
    assert_eq!(crate::logging::capture::lines_with("a memory region's 4099 bytes are leaked").len(), 1);
    // Dropped after a good deregistration: freed once (Miri checks).
    let (mr, fab) = fake(vec![1u8; 16].into_boxed_slice(), Access::NONE);
    let key = mr.lkey();
    drop(mr);
    assert!(fab.region_bytes(key).is_none());
}

/// Two ids' data paths over the fake fabric the rsocket tests use.
fn pair() -> (Path, Path, FakeQp, FakeQp) {
    let fab = Fabric::new();
    let (a, b) = fab.ends();
    (Path::Fake(a.clone()), Path::Fake(b.clone()), a, b)
}

fn soon() -> Option<std::time::Instant> {
    Some(std::time::Instant::now() + std::time::Duration::from_millis(50))
}

/// A send meets a posted receive: the bytes land in the receiver's
/// region, both ends get their completion (the receiver's through the
/// CQ's wait), and an empty CQ's wait ends at its deadline.
#[test]
fn send_and_receive_over_the_fake() {
    let (pa, pb, a, b) = pair();
    let mut src = on_fake(&a, vec![0u8; 64], Access::NONE);
    src.as_mut_slice().unwrap()[..5].copy_from_slice(b"hello");
    let dst = on_fake(&b, vec![0u8; 64], Access::LOCAL_WRITE);
    assert_eq!(pb.wait_until(soon()).unwrap(), None, "nothing yet");
    pb.post_recv(7, &[dst.sge(0..64).unwrap()]).unwrap();
    pa.post_send(1, &[src.sge(0..5).unwrap()], SendOp::Send, true).unwrap();
    let got = pb.wait_until(soon()).unwrap().expect("the receive");
    assert_eq!((got.wr_id, got.status, got.opcode, got.byte_len, got.imm), (7, WcStatus::Success, WcOpcode::Recv, 5, None));
    assert_eq!(dst.to_vec(0..5).unwrap(), b"hello");
    let mut wc = [WorkCompletion::EMPTY; 4];
    assert_eq!(pa.poll(&mut wc).unwrap(), 1);
    assert_eq!((wc[0].wr_id, wc[0].status, wc[0].opcode), (1, WcStatus::Success, WcOpcode::Send));
    assert_eq!(pa.poll(&mut wc).unwrap(), 0);
    // A receive takes one scatter entry on the fabric.
    let two = [dst.sge(0..1).unwrap(), dst.sge(1..2).unwrap()];
    assert_eq!(pb.post_recv(8, &two).unwrap_err().errno(), libc::EINVAL);
}

/// An unsignalled send that succeeds reports nothing on the sender's
/// CQ (its receiver's completion comes all the same).
#[test]
fn unsignalled_send_completes_silently() {
    let (pa, pb, a, b) = pair();
    let src = on_fake(&a, vec![3u8; 8], Access::NONE);
    let dst = on_fake(&b, vec![0u8; 8], Access::LOCAL_WRITE);
    pb.post_recv(1, &[dst.sge(0..8).unwrap()]).unwrap();
    pa.post_send(2, &[src.sge(0..8).unwrap()], SendOp::Send, false).unwrap();
    assert_eq!(pb.wait_until(soon()).unwrap().map(|w| w.wr_id), Some(1));
    assert_eq!(pa.wait_until(soon()).unwrap(), None, "no completion of an unsignalled send");
    assert_eq!(dst.to_vec(0..8).unwrap(), [3u8; 8]);
}

/// Immediate data: given in host order, read back in host order, with
/// the flag; a write with immediate lands in the peer's region through
/// its rkey and completes there as RecvRdmaWithImm.
#[test]
fn immediate_data_over_the_fake() {
    let (pa, pb, a, b) = pair();
    let src = on_fake(&a, b"abcd".to_vec(), Access::NONE);
    let dst = on_fake(&b, vec![0u8; 16], Access::REMOTE_WRITE);
    pb.post_recv(1, &[dst.sge(0..16).unwrap()]).unwrap();
    pa.post_send(2, &[src.sge(0..4).unwrap()], SendOp::SendWithImm(0x0102_0304), true).unwrap();
    let mut wc = [WorkCompletion::EMPTY; 1];
    assert_eq!(pb.poll(&mut wc).unwrap(), 1);
    assert_eq!((wc[0].opcode, wc[0].imm, wc[0].byte_len), (WcOpcode::Recv, Some(0x0102_0304), 4));
    assert!(wc[0].wc_flags.contains(WcFlags::WITH_IMM));

    pb.post_recv(3, &[]).unwrap();
    let op = SendOp::WriteWithImm { remote_addr: dst.addr() + 8, rkey: dst.rkey(), imm: 0xfeed_beef };
    pa.post_send(4, &[src.sge(0..4).unwrap()], op, true).unwrap();
    assert_eq!(pb.poll(&mut wc).unwrap(), 1);
    assert_eq!((wc[0].wr_id, wc[0].opcode, wc[0].imm), (3, WcOpcode::RecvRdmaWithImm, Some(0xfeed_beef)));
    assert_eq!(dst.to_vec(8..12).unwrap(), b"abcd");
    assert_eq!(pa.poll(&mut wc).unwrap(), 1);
    assert_eq!((wc[0].wr_id, wc[0].opcode), (2, WcOpcode::Send));
}

/// An inline send carries the caller's own bytes, in pieces, with no
/// registration; they may be dropped as soon as the call returns.
#[test]
fn inline_send_copies_borrowed_bytes() {
    let (pa, pb, _a, b) = pair();
    let dst = on_fake(&b, vec![0u8; 16], Access::LOCAL_WRITE);
    pb.post_recv(1, &[dst.sge(0..16).unwrap()]).unwrap();
    {
        let head = b"in".to_vec();
        let tail = String::from("line");
        pa.post_send_inline(2, &[&head, tail.as_bytes()], SendOp::Send, true).unwrap();
    }
    let got = pb.wait_until(soon()).unwrap().expect("the receive");
    assert_eq!((got.wr_id, got.byte_len), (1, 6));
    assert_eq!(dst.to_vec(0..6).unwrap(), b"inline");
}

#[test]
fn sge_is_ibv_sge() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<AddressHandle>();
    send_sync::<MemoryRegion>();
    assert_eq!(std::mem::size_of::<Sge>(), 16);
    assert_eq!(Access::REMOTE_WRITE.bits() | Access::LOCAL_WRITE.bits(), 3);
}
